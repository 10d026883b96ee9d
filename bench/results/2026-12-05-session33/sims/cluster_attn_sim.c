/* Host simulation of attention_decode_cluster.cu's index math (cut, two splits a CTA, ONE_HEAD
 * path, owner/append, tile masks, merge addressing and partition). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include "llm/decode_split.h"
#include "llm/decode_bucket.h"
#define AD_T 64
#define AD_THREADS 256
#define AD_MAX_SPLITS 64
static long fails = 0, checks = 0;
#define CK(c, ...) do { checks++; if (!(c)) { if (fails++ < 20) { printf("FAIL %s:%d ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); } } } while (0)

/* ad_layout */
typedef struct { long KV, QS, S, PS, P, TAB, ST, NEW, FLAG, BYTES, SLOT, SLOT_END, HALF, CBYTES; } lay;
static lay layout(int HD, int G) {
    lay L; L.KV = 2L * 2 * AD_T * HD * 2; L.QS = L.KV; L.S = L.QS + (G + 1) * HD * 4; L.PS = AD_T + 8;
    L.P = L.S + G * AD_T * 4; L.TAB = L.P + 2 * 8 * L.PS * 2; L.ST = L.TAB + 2 * HD * 4;
    L.NEW = L.ST + (3 * G * 4 + 15) / 16 * 16; L.FLAG = L.NEW + 2 * HD * 2; L.BYTES = L.FLAG + 16;
    L.SLOT = (L.BYTES + 15) / 16 * 16; L.SLOT_END = L.SLOT + (G * HD + 2 * G) * 4;
    L.HALF = (L.SLOT_END + 127) / 128 * 128; L.CBYTES = 2 * L.HALF; return L;
}

/* One half (split) of the cluster kernel, as attn_decode_block<..., ONE_HEAD=true, CLUSTER=true>:
 * records which rows of which query heads it reads/patches, and what it writes. */
typedef struct { int heads_done[8]; } dummy;
static int64_t *cover; /* [G][len] count of rows contributing, per head */
static int *outw;      /* [kv_heads*G] writers of each output head */
static int *append_w;  /* [kv_heads] writers of row p */
static int *slotw;     /* [nsplit] slot written (per kvh) */

static void half_block(int G, int nsplit, int split, int kvh, int64_t len, int Gorig, int qshift)
{
    int64_t start, end; int active; const int64_t p = len - 1;
    llm_ad_split_even(len, nsplit, split, &start, &end, &active);
    if (G > 1 && active == 1) { /* ONE_HEAD */
        if (split >= G) return;
        /* head kvh*G + split, as a group of one; nsplit 1, split 0, append only for split 0 */
        int64_t s2, e2; int a2; llm_ad_split_even(len, 1, 0, &s2, &e2, &a2);
        CK(a2 == 1 && s2 == 0 && e2 == len, "one split");
        /* rows */
        const int h = split;
        int64_t nt = (e2 - s2 + AD_T - 1) / AD_T;
        for (int64_t t = 0; t < nt; t++) {
            int64_t r0 = s2 + t * AD_T; int nvalid = (int)((AD_T < e2 - r0) ? AD_T : e2 - r0);
            CK(nvalid >= 1, "tile without valid row");
            for (int rr = 0; rr < nvalid; rr++) { int64_t r = r0 + rr; if (r < p) cover[h * len + r]++; }
            if (p < r0 + AD_T) { CK(p >= r0, "patch row negative"); cover[h * len + p]++; }
        }
        if (split == 0) append_w[kvh]++;
        outw[kvh * Gorig + h]++;
        return;
    }
    if (split >= active) return;
    int64_t nt = (end - start + AD_T - 1) / AD_T;
    int owner = end == len;
    for (int64_t t = 0; t < nt; t++) {
        int64_t r0 = start + t * AD_T; int nvalid = (int)((AD_T < end - r0) ? AD_T : end - r0);
        CK(nvalid >= 1, "tile without valid row len %lld ns %d sp %d", (long long)len, nsplit, split);
        /* loads: valid = r < p && r < end, row index r0+rr for rr < 64 */
        for (int rr = 0; rr < AD_T; rr++) {
            int64_t r = r0 + rr; int valid = r < p && r < end;
            int masked = rr >= nvalid;
            if (valid) CK(!masked, "loaded row masked");
            if (valid && !masked) for (int g = 0; g < G; g++) cover[g * len + r]++;
        }
        if (owner && p < r0 + AD_T) {
            CK(p >= r0 && p - r0 < nvalid, "patch row out of tile");
            for (int g = 0; g < G; g++) cover[g * len + p]++;
        }
    }
    if (owner) append_w[kvh]++;
    if (active == 1) { for (int g = 0; g < G; g++) outw[kvh * G + g]++; }
    else slotw[split]++;
}

int main(int argc, char **argv)
{
    const int64_t MAXSEQ = argc > 1 ? atoll(argv[1]) : 40960;
    cover = malloc(sizeof(int64_t) * 8 * (MAXSEQ + 1));
    outw = malloc(sizeof(int) * 64); append_w = malloc(sizeof(int) * 8); slotw = malloc(sizeof(int) * 64);
    static const int NS[4] = {4, 8, 16, 32};
    long configs = 0;
    for (int ni = 0; ni < 4; ni++)
        for (int G = 1; G <= 8; G++) {
            const int nsplit = NS[ni], C = nsplit / 2;
            if (nsplit < G) continue; /* launch rejects */
            for (int64_t len = 1; len <= MAXSEQ; len++) {
                const int kvheads = (len % 97 == 0 || len < 300) ? 8 : 1; /* kv_heads only shifts indices */
                for (int kvh = 0; kvh < kvheads; kvh++) {
                    memset(cover, 0, sizeof(int64_t) * G * len);
                    memset(outw, 0, sizeof(int) * 64); memset(append_w, 0, sizeof(int) * 8); memset(slotw, 0, sizeof(int) * 64);
                    int act0; int64_t a, b; llm_ad_split_even(len, nsplit, 0, &a, &b, &act0); /* kernel line 112 */
                    for (int rank = 0; rank < C; rank++)
                        for (int half = 0; half < 2; half++) half_block(G, nsplit, 2 * rank + half, kvh, len, G, 0);
                    configs++;
                    /* merge */
                    if (act0 > 1) {
                        CK(act0 <= nsplit, "active > nsplit");
                        for (int sp = 0; sp < act0; sp++) {
                            CK(slotw[sp] == 1, "slot %d written %d times", sp, slotw[sp]);
                            /* AdPartialsCluster: rank sp>>1, half sp&1 == writer 2*rank+half */
                            int rank = sp >> 1, half = sp & 1;
                            CK(rank < C && 2 * rank + half == sp, "merge address");
                        }
                        for (int sp = act0; sp < nsplit; sp++) CK(slotw[sp] == 0, "idle split wrote");
                        for (int g = 0; g < G; g++) outw[kvh * G + g]++; /* merger writes all G heads */
                    }
                    for (int g = 0; g < G; g++) CK(outw[kvh * G + g] == 1, "head %d written %d times len %lld ns %d G %d", g, outw[kvh * G + g], (long long)len, nsplit, G);
                    CK(append_w[kvh] == 1, "row p appended %d times", append_w[kvh]);
                    for (int g = 0; g < G; g++)
                        for (int64_t r = 0; r < len; r++)
                            if (cover[g * len + r] != 1) { CK(0, "len %lld ns %d G %d head %d row %lld covered %lld", (long long)len, nsplit, G, g, (long long)r, (long long)cover[g * len + r]); break; }
                }
            }
        }
    printf("cut/mapping: %ld configs, %ld checks, %ld failures\n", configs, checks, fails);

    /* merge partition (ad_merge): ranges [sp0, sp1) of the PARTS parts cover [0, active) in order */
    long f0 = fails;
    for (int HD = 64; HD <= 128; HD *= 2)
        for (int G = 1; G <= 8; G *= 2) {
            int E4 = G * HD / 4, PARTS = AD_THREADS / E4;
            CK(E4 * PARTS == AD_THREADS, "E4*PARTS");
            for (int active = 2; active <= 64; active++) {
                int next = 0;
                for (int part = 0; part < PARTS; part++) {
                    int sp0 = part * active / PARTS, sp1 = (part + 1) * active / PARTS;
                    CK(sp0 == next && sp1 >= sp0, "partition"); next = sp1;
                }
                CK(next == active, "partition end");
            }
            lay L = layout(HD, G);
            long scratch = (2L * G * AD_MAX_SPLITS + 16) * 4 + AD_THREADS * 16;
            CK(scratch <= L.KV, "scratch");
            CK(L.SLOT >= L.BYTES && L.SLOT % 16 == 0 && L.HALF % 128 == 0 && L.HALF >= L.SLOT_END, "slot");
            CK(L.CBYTES <= 232448, "smem opt-in");
            /* ml and float4 addresses */
            for (int g = 0; g < G; g++) for (int j = 0; j < HD / 4; j++) CK((L.SLOT + 4 * (g * HD + 4 * j)) % 16 == 0, "f4 align");
            printf("HD %3d G %d: fused BYTES %6ld, SLOT %6ld..%6ld, HALF %6ld, cluster smem %6ld (%.1f KB), scratch %ld <= KV %ld; 2/SM fits %d\n",
                   HD, G, L.BYTES, L.SLOT, L.SLOT_END, L.HALF, L.CBYTES, L.CBYTES / 1024.0, scratch, L.KV,
                   2 * (L.CBYTES + 1024) <= 233472);
        }
    printf("merge/layout: %ld failures\n", fails - f0);

    /* bit identity: fused llm_ad_split at nf splits vs even cut at nc (4..32) where T <= nc and
     * len <= 64*nf (or len <= 128) */
    f0 = fails; long cmp = 0;
    for (int nf = 1; nf <= 64; nf++)
        for (int ci = 0; ci < 4; ci++) {
            int nc = NS[ci];
            for (int64_t len = 1; len <= 64 * 64; len++) {
                int64_t T = (len + 63) / 64;
                if (!(len <= 128 || (len <= 64L * nf && T <= nc))) continue;
                int64_t chunk; int af; llm_ad_split(len, nf, &chunk, &af);
                for (int sp = 0; sp < af; sp++) {
                    int64_t a, b; int ac; llm_ad_split_even(len, nc, sp, &a, &b, &ac);
                    int64_t a1 = sp * chunk, b1 = a1 + chunk < len ? a1 + chunk : len;
                    CK(ac == af && a == a1 && b == b1, "identity nf %d nc %d len %lld", nf, nc, (long long)len); cmp++;
                }
            }
        }
    printf("fused/cluster cut identity: %ld split comparisons, %ld failures\n", cmp, fails - f0);

    /* session: cluster split counts and the buckets' kernels (decode_fused.cu:56) */
    f0 = fails;
    for (int fused = 2; fused <= 64; fused++)
        for (int most = 0; most <= 32; most += 16)
            for (int G = 1; G <= 8; G *= 2) {
                int n = llm_decode_cluster_splits(fused, most, G);
                if (!n) continue;
                CK((n == 4 || n == 8 || n == 16 || n == 32) && n <= most && n >= G, "cluster splits %d", n);
                int bs[LLM_DECODE_BUCKETS]; int nb = llm_decode_buckets(n, bs);
                for (int64_t len = 1; len <= 64 * 40; len++) {
                    int bi = llm_decode_bucket_of(len, bs, nb);
                    if (bi == nb) continue;
                    int s = bs[bi];
                    int cl = s >= 4 && s >= G; /* else the fused kernel at s */
                    /* the full graph: cluster at n */
                    int64_t T = (len + 63) / 64;
                    if (len > 128) CK(T <= s, "bucket beyond reach");
                    if (cl) { CK(len <= 128 || T <= s, "cluster bucket not one tile a split"); }
                    else { CK(len <= 128 || len <= 64L * s, "fused bucket"); }
                    CK(len <= 128 || T <= n, "full graph not one tile");
                }
            }
    printf("session buckets: %ld failures\n", fails - f0);
    printf("TOTAL: %ld checks, %ld failures\n", checks, fails);
    return fails != 0;
}
