/* Time model of the Hopper wgmma kernel (src/cuda/gemm_sm90.cu) from its schedule. The kernel is
 * latency-bound per pipeline stage at small token tiles (bench/NOTES.md rows 19, 36: ~0.4 µs of
 * handshake a k-block, SM throughput 16 %), so the model counts k-blocks on the busiest CTA and
 * the busiest SM, not bytes:
 *
 *   T = fixed + fill·(first stage + output tile, KB)
 *     + waves · s · (stage + flop·F)  +  w · WG · issue
 *     + [split tiles] round_trip · (segment ends + ceil(peers / FIX)) + partial · MB (out + in)
 *     + [split-K in clusters, instead] waves · (cluster + cluster_kb · partial KB)
 *
 * s = k-blocks of the busiest CTA, w = k-blocks of all CTAs on the busiest SM, F = MFLOP of one
 * k-block (2·64·WG·TN·128), FIX = the fixup's partial loads in flight (as in the kernel). The
 * first k-block term is one CTA's chain of stages; the second, the SM's issue slots it shares
 * with the CTAs resident beside it: added, not overlapped (split-K in clusters of 2 at 16
 * tokens, 10 k-blocks a CTA: k 32 CTAs 5.8 µs, q 128 CTAs 6.0, gate 304 CTAs 9.8; NOTES.md
 * row 78). A clustered launch occupies only the SMs its clusters fit on (slots / resident
 * blocks a SM, slots from the occupancy API): its w is its k-blocks spread evenly over those.
 * Fit and residuals: tune/sm90.c, NOTES.md rows 59, 78. */
#include <math.h>
#include <stdint.h>

#include "internal.h"
#include "tune/sm90.h"

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The fixup's partial loads in flight (gemm_sm90_device.cuh add_partials' FIX; the 256-token
 * tile loads a partial in quarters, its CH). */
static int fixup_batch(int tn, int bps)
{
    if (bps > 1) return tn <= 8 ? 4 : tn <= 16 ? 2 : 1;
    return tn <= 16 ? 8 : tn <= 32 ? 4 : tn <= 64 ? 2 : 1;
}

static int model_ok(const qmm_wgmma_model *c)
{
    const double v[] = {c->fixed_us,         c->fill_us_per_kb, c->stage_us,
                        c->us_per_mflop,     c->issue_us,       c->round_trip_us,
                        c->partial_us_per_mb, c->cluster_us,    c->cluster_us_per_kb,
                        c->wide_kblock_us};
    int any = 0;
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        if (!isfinite(v[i]) || v[i] < 0) return 0;
        any |= v[i] > 0;
    }
    return any;
}

/* Stream-K over `ctas`: CTA p starts at p·q + min(p, r) of the tiles·groups iterations. */
typedef struct {
    int64_t iters, ctas, q, r;
} sk_sched;

static int64_t sk_start(const sk_sched *s, int64_t p)
{
    return p >= s->ctas ? s->iters : p * s->q + (p < s->r ? p : s->r);
}

static int64_t sk_cta_of(const sk_sched *s, int64_t i)
{
    const int64_t edge = s->r * (s->q + 1);
    return i < edge ? i / (s->q + 1) : s->r + (i - edge) / s->q;
}

double qmm_model_wgmma_us(const qmm_wgmma_model *c, int sms, int64_t m, int64_t n, int64_t groups,
                          int tn, int wg, int bps, int64_t ctas, int split, int64_t slots)
{
    if (!c || !model_ok(c) || sms < 1 || m < 1 || n < 1 || groups < 1 || tn < 8 || wg < 1 ||
        bps < 1 || ctas < 1 || split < 0 || split > groups)
        return -1;
    const int64_t tiles = cdiv(m, tn) * cdiv(n, 64 * (int64_t)wg);
    if (split > 0 && ctas != tiles * split) return -1;
    if (split == 0 && (ctas > tiles * groups || ctas > (int64_t)sms * bps)) return -1;

    int64_t s, segs = 1, peers = 0, npart = 0; /* npart: (CTA, tile) segments with a partial */
    int64_t waves = 1;
    const int clustered = split > 0 && qmm_sm90_cluster(tn, split) > 1;
    if (split > 0) {
        s = cdiv(groups, split);
        waves = cdiv(ctas, clustered && slots > 0 ? slots : (int64_t)sms * bps);
        if (split > 1 && !clustered) peers = split, npart = ctas;
    } else {
        /* the 256-token tile first runs the full waves of whole tiles (W a CTA), then stream-K
         * over the tiles left (gemm_sm90.cu); the others stream-K over all */
        const int64_t w_dp = tn >= 256 ? tiles / ctas : 0, sk_tiles = tiles - w_dp * ctas;
        sk_sched k = {sk_tiles * groups, ctas, sk_tiles * groups / ctas, sk_tiles * groups % ctas};
        s = w_dp * groups + k.q + (k.r > 0);
        segs = 0;
        for (int64_t p = 0; p < ctas && k.iters > 0; p++) { /* tiles a CTA touches: its segment ends */
            int64_t a = sk_start(&k, p), b = sk_start(&k, p + 1) - 1;
            if (b < a) continue;
            int64_t t = b / groups - a / groups + 1;
            if (t > segs) segs = t;
        }
        for (int64_t t = 0; t < sk_tiles; t++) {
            int64_t pa = sk_cta_of(&k, t * groups), pb = sk_cta_of(&k, t * groups + groups - 1);
            if (pb == pa) continue;
            npart += pb - pa + 1;
            if (pb - pa + 1 > peers) peers = pb - pa + 1;
        }
    }
    const double f = 2.0 * 64 * wg * tn * 128 / 1e6; /* MFLOP a k-block */
    const double fill_kb = (4096.0 * wg + 256.0 * tn + 128.0 * wg * tn) / 1e3;
    const double slot_kb = 256.0 * wg * tn / 1e3; /* one fp32 partial of a tile */
    /* k-blocks on the busiest SM; a clustered launch's spread over the SMs its clusters occupy */
    const double w = clustered && slots > 0
                         ? (double)ctas * (double)s * (double)bps / (double)slots
                         : (double)cdiv(ctas, sms) * (double)s;
    const double chain =
        (double)waves * (double)s * (c->stage_us + c->us_per_mflop * f + (tn >= 256 ? c->wide_kblock_us : 0));
    double t = c->fixed_us + c->fill_us_per_kb * fill_kb + chain + w * wg * c->issue_us;
    /* a 256-token tile's partial loads: four rounds of a quarter in registers as fitted, two
     * since the fixup stages them through the ring (its sums after the loop halved: NOTES.md
     * rows 264, 269; one, row 265, planned k / v and o at 2 048 tokens into losses) */
    const int wide_rounds = 2;
    if (npart > 0)
        t += c->round_trip_us * (double)(segs + cdiv(peers, fixup_batch(tn, bps)) * (tn >= 256 ? wide_rounds : 1)) +
             c->partial_us_per_mb * 2.0 * slot_kb * (double)npart / 1e3;
    if (clustered) t += (double)waves * (c->cluster_us + c->cluster_us_per_kb * slot_kb);
    return isfinite(t) ? t : -1;
}
