// Host simulation of src/llm/cuda/attention_prefill_wgmma.cu (both schedules).
// Models: cp.async copy (every thread's chunks, swizzle, zero-fill) into a byte-addressed shared
// window; wgmma descriptors decoded per PTX canonical layouts (K-major / MN-major, 128B swizzle
// on absolute address bits); A fragments and D accumulators per the documented per-thread layouts;
// the kernel's own register interpretation (softmax masking, P packing, output); the op order of
// both schedules per warpgroup with barrier-synchronized interleaving; deferred async effects in
// two adversarial modes; a happens-before race analysis of the ring; register hazards.
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

static int g_fail = 0;
static int mut() { static int m = getenv("MUT") ? atoi(getenv("MUT")) : 0; return m; }
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            if (g_fail < 30) {                                                                     \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fprintf(stderr, "\n");                                                             \
            }                                                                                      \
            g_fail++;                                                                              \
        }                                                                                          \
    } while (0)

static float bf16r(float x) // round to nearest even to bf16, back to float
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return x;
    uint32_t r = u + 0x7fffu + ((u >> 16) & 1u);
    r &= 0xffff0000u;
    float y;
    memcpy(&y, &r, 4);
    return y;
}

// ---- constants as in the kernel ----
constexpr int HD = 128, BQ = 128, BK = 64, THREADS = 256;
constexpr int PANEL = BK * 128, TILE = 2 * PANEL, STAGE = 2 * TILE, KSTEPS = HD / 16;

static uint64_t desc_k128b(uint32_t a)
{
    uint64_t d = 0;
    d |= (uint64_t)((a & 0x3FFFF) >> 4);
    d |= (uint64_t)(16 >> 4) << 16;
    d |= (uint64_t)(1024 >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}
static uint64_t desc_n128b(uint32_t a, uint32_t panel)
{
    uint64_t d = 0;
    d |= (uint64_t)((a & 0x3FFFF) >> 4);
    uint32_t lb = panel, sb = 1024;
    if (mut() == 1) lb = 1024, sb = panel;
    d |= (uint64_t)((lb & 0x3FFFF) >> 4) << 16;
    d |= (uint64_t)(sb >> 4) << 32;
    d |= (uint64_t)1 << 62;
    return d;
}
static uint32_t swz128(uint32_t a) { return a ^ (((a >> 7) & 7u) << 4); }
// element (k, n) of the B operand (16 x N) for a descriptor, PTX canonical layouts, 128B swizzle
static uint32_t b_addr(uint64_t desc, bool mn_major, int k, int n)
{
    uint32_t start = (uint32_t)(desc & 0x3FFF) << 4;
    uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFF) << 4;
    uint32_t sbo = (uint32_t)((desc >> 32) & 0x3FFF) << 4;
    uint32_t base_off = (uint32_t)((desc >> 49) & 7);
    uint32_t mode = (uint32_t)(desc >> 62);
    CHECK(mode == 1 && base_off == 0, "descriptor mode %u base %u", mode, base_off);
    uint32_t a;
    if (!mn_major) // ((8,n),(T,2k)) : ((8T,SBO),(1,T)) elements; LBO unused
        a = start + (n / 8) * sbo + (n % 8) * 128 + k * 2;
    else // ((T,8,n),(8,k)) : ((1,T,LBO),(8T,SBO)) elements
        a = start + (n % 64) * 2 + (n / 64) * lbo + (k % 8) * 128 + (k / 8) * sbo;
    return swz128(a);
}

// ---- shared memory window ----
struct Slot {
    float v;
    int32_t tag; // 0 zero-fill, else 1 + (kind<<28) + key*128 + dim
};
struct Smem {
    uint32_t raw; // shared-window address of wa_raw
    int bytes;
    std::vector<Slot> s;
    Slot &at(uint32_t a)
    {
        CHECK(a % 2 == 0 && a >= raw && a + 2 <= raw + (uint32_t)bytes, "smem address %u out of window", a);
        uint32_t i = (a - raw) / 2;
        if (i >= s.size()) i = 0;
        return s[i];
    }
};
static int32_t mktag(int kind, int64_t key, int dim) { return 1 + (kind << 28) + (int32_t)(key * 128 + dim); }

// ---- problem ----
struct Problem {
    int m, heads, kvh;
    int64_t p0, max_seq, q_stride;
    std::vector<float> q, kc, vc; // bf16-valued
};

// ---- op program (one warpgroup; the load ops are done by its 128 threads) ----
enum OpK { BAR, LOAD, CPWAIT, FENCEP, QK, SMAX, PV, WGWAIT, END };
struct Op {
    OpK k;
    int a, b; // LOAD: tile; CPWAIT/WGWAIT: n; QK: tile, sreg; SMAX: tile, sreg; PV: tile, sreg
};

template <bool PIPE> struct Ring {
    static constexpr int AHEAD = PIPE ? 3 : 2;
    static inline const int STAGES = PIPE ? (mut() == 3 ? 4 : 5) : 3;
    static inline const int SMEM = STAGES * STAGE + 1024;
};

// the kernel's control flow (per warpgroup), as in attention_prefill_wgmma.cu lines 252-353
template <bool PIPE> static std::vector<Op> program(int ntiles, std::function<bool(int)> active)
{
    using RG = Ring<PIPE>;
    std::vector<Op> p;
    for (int i = 0; i < RG::AHEAD; i++) p.push_back({LOAD, i, 0});
    if (!PIPE) {
        for (int i = 0; i < ntiles; i++) {
            p.push_back({CPWAIT, RG::AHEAD - 1, 0});
            p.push_back({FENCEP, 0, 0});
            p.push_back({BAR, 0, 0});
            p.push_back({LOAD, i + RG::AHEAD, 0});
            if (active(i)) {
                p.push_back({QK, i, 0});
                p.push_back({WGWAIT, 0, 0});
                p.push_back({SMAX, i, 0});
                p.push_back({PV, i, 0});
                if (mut() != 9) p.push_back({WGWAIT, 0, 0});
            }
        }
    } else {
        auto top = [&]() {
            p.push_back({CPWAIT, RG::AHEAD - 2, 0});
            p.push_back({FENCEP, 0, 0});
            p.push_back({BAR, 0, 0});
        };
        auto steady = [&](int i, int cur, int nxt) {
            if (mut() == 4) p.push_back({LOAD, i + RG::AHEAD, 0});
            top();
            p.push_back({QK, i + 1, nxt});
            if (mut() != 4) p.push_back({LOAD, i + RG::AHEAD, 0});
            p.push_back({SMAX, i, cur});
            p.push_back({WGWAIT, mut() == 8 ? 2 : 1, 0});
            p.push_back({PV, i, cur});
            p.push_back({WGWAIT, 1, 0});
        };
        auto last = [&](int i, int cur) {
            top();
            p.push_back({LOAD, i + RG::AHEAD, 0});
            p.push_back({SMAX, i, cur});
            p.push_back({WGWAIT, 0, 0});
            p.push_back({PV, i, cur});
            p.push_back({WGWAIT, 0, 0});
        };
        p.push_back({CPWAIT, RG::AHEAD - 1, 0});
        p.push_back({FENCEP, 0, 0});
        p.push_back({BAR, 0, 0});
        p.push_back({QK, 0, 0});
        p.push_back({WGWAIT, 0, 0});
        int i = 0;
        for (; i + 2 < ntiles; i += 2) {
            steady(i, 0, 1);
            steady(i + 1, 1, 0);
        }
        if (i + 1 < ntiles) {
            steady(i, 0, 1);
            last(i + 1, 1);
        } else {
            last(i, 0);
        }
    }
    p.push_back({END, 0, 0});
    return p;
}

// ---- happens-before analysis of the ring and register hazards ----
// Register sets: 0 = S0, 1 = S1, 2 = O, 3 = PA
struct Group {
    int kind; // QK or PV
    int tile, issue, retire;
    uint32_t regs;
};
template <bool PIPE>
static void hb_check(int ntiles, const std::vector<Op> prog[2], const char *what)
{
    using RG = Ring<PIPE>;
    // per wg: barrier counts, cp group landing points, wgmma groups
    struct Info {
        std::vector<int> bc;
        std::vector<int> load_op;    // op index of LOAD(tile)
        std::vector<int> land_op;    // op index of the CPWAIT that guarantees it
        std::vector<int> fence_op;   // first FENCEP after land
        std::vector<Group> groups;
    } in[2];
    int nt = ntiles + RG::AHEAD + 4;
    for (int w = 0; w < 2; w++) {
        const auto &p = prog[w];
        Info &I = in[w];
        I.load_op.assign(nt, -1), I.land_op.assign(nt, -1), I.fence_op.assign(nt, -1);
        int bars = 0, committed = 0;
        std::vector<int> cp_tile; // group -> tile
        std::vector<int> pending;   // indices into groups
        uint32_t fly = 0;           // register sets in flight
        auto regs_of = [&](const Op &o) -> uint32_t {
            if (o.k == QK) return 1u << o.b;
            if (o.k == SMAX) return 1u << o.b;
            if (o.k == PV) return (1u << o.b) | 4u | 8u;
            return 0;
        };
        int lastwait = -1;
        for (int x = 0; x < (int)p.size(); x++) {
            const Op &o = p[x];
            I.bc.push_back(bars);
            if (o.k == BAR) bars++;
            if (o.k == LOAD) {
                cp_tile.push_back(o.a);
                if (o.a < nt) I.load_op[o.a] = x;
                committed++;
            }
            if (o.k == CPWAIT) {
                int done = committed - o.a; // groups [0, done) complete
                for (int gi = 0; gi < done; gi++)
                    if (cp_tile[gi] < nt && I.land_op[cp_tile[gi]] < 0) I.land_op[cp_tile[gi]] = x;
                lastwait = x;
            }
            if (o.k == FENCEP)
                for (int t = 0; t < nt; t++)
                    if (I.land_op[t] >= 0 && I.fence_op[t] < 0) I.fence_op[t] = x;
            // register hazard: the op touches registers of an in-flight group
            if (o.k == QK || o.k == SMAX || o.k == PV) {
                uint32_t touch = regs_of(o);
                // QK zeroes its S regs; PV rescales O, writes PA, reads S
                CHECK(!(touch & fly), "%s ntiles %d wg %d op %d (kind %d tile %d): touches registers in flight (%x & %x)",
                      what, ntiles, w, x, o.k, o.a, touch, fly);
            }
            if (o.k == QK || o.k == PV) {
                Group gr{o.k, o.a, x, -1, o.k == QK ? (1u << o.b) : (4u | 8u)};
                I.groups.push_back(gr);
                pending.push_back((int)I.groups.size() - 1);
                fly |= gr.regs;
            }
            if (o.k == WGWAIT || o.k == END) {
                int keep = o.k == END ? 0 : o.a;
                CHECK(o.k != END || pending.empty(), "%s: wgmma group pending at the end", what);
                while ((int)pending.size() > keep) {
                    I.groups[pending.front()].retire = x;
                    pending.erase(pending.begin());
                }
                fly = 0;
                for (int gi : pending) fly |= I.groups[gi].regs;
            }
        }
    }
    // hb(wA, x, wB, z): op x of wg wA happens before op z of wg wB (the loads/waits of a wg are
    // executed by all its threads; other threads only through a barrier)
    auto hb = [&](int wA, int x, int wB, int z) { return in[wA].bc[x] < in[wB].bc[z]; };
    for (int w = 0; w < 2; w++)
        for (const Group &g : in[w].groups) {
            int stage = g.tile % RG::STAGES;
            CHECK(g.tile < ntiles, "%s: wg %d reads tile %d >= ntiles %d", what, w, g.tile, ntiles);
            CHECK(g.retire >= 0, "%s: group never retired", what);
            // RAW: every thread's copies of the tile landed and fenced before the issue
            for (int wv = 0; wv < 2; wv++) {
                int f = in[wv].fence_op[g.tile];
                CHECK(f >= 0 && hb(wv, f, w, g.issue),
                      "%s ntiles %d: RAW wg %d %s tile %d (op %d) vs copies of wg %d (fence op %d)", what,
                      ntiles, w, g.kind == QK ? "S" : "PV", g.tile, g.issue, wv, f);
            }
            // WAR: later tiles into the same stage issued only after the read retired
            for (int t2 = g.tile + 1; t2 < ntiles; t2++) {
                if (t2 % RG::STAGES != stage) continue;
                for (int wv = 0; wv < 2; wv++) {
                    int z = in[wv].load_op[t2];
                    bool ok = (wv == w) ? (g.retire < z) : hb(w, g.retire, wv, z);
                    CHECK(ok, "%s ntiles %d: WAR wg %d %s tile %d (ops %d..%d, bc %d) vs wg %d load tile %d (op %d, bc %d) stage %d",
                          what, ntiles, w, g.kind == QK ? "S" : "PV", g.tile, g.issue, g.retire,
                          in[w].bc[g.retire], wv, t2, z, in[wv].bc[z], stage);
                }
            }
        }
    // WAW: the copy of tile t landed (everywhere) before the copy of t + STAGES is issued
    for (int t = 0; t + RG::STAGES < ntiles; t++)
        for (int wa = 0; wa < 2; wa++)
            for (int wb = 0; wb < 2; wb++) {
                int l = in[wa].land_op[t], z = in[wb].load_op[t + RG::STAGES];
                CHECK(l >= 0 && (wa == wb ? l < z : hb(wa, l, wb, z)), "%s: WAW tile %d", what, t);
            }
    // the barrier counts agree (every thread reaches the same barriers)
    int b0 = 0, b1 = 0;
    for (auto &o : prog[0]) b0 += o.k == BAR;
    for (auto &o : prog[1]) b1 += o.k == BAR;
    CHECK(b0 == b1, "%s: barrier counts %d vs %d", what, b0, b1);
    int l0 = 0, l1 = 0;
    for (auto &o : prog[0]) l0 += o.k == LOAD;
    for (auto &o : prog[1]) l1 += o.k == LOAD;
    CHECK(l0 == l1, "%s: load counts differ", what);
}

// ---- the numeric simulation of one CTA ----
struct ThreadRows {
    bool va, vb;
    int64_t qa, qb, rw;
    float ma, mb, la, lb;
};
struct WG {
    float qf[128][KSTEPS][4][2];
    float o[128][64];
    float pa[128][4][4][2];
    float s[2][128][32];
    ThreadRows r[128];
    float aa[128], ab[128];
    struct Pend {
        int kind, tile, sreg;
        uint32_t base;
        std::vector<float> B; // snapshot: per k-step 16 x N
        std::vector<float> D0; // accumulators at issue (hazard check)
        std::vector<float> A0;
        bool snap;
    };
    std::vector<Pend> pend;
};

struct Sim {
    const Problem &P;
    bool pipe;
    int mode;            // 0: copies land at issue, wgmma reads at retire (WAR-adversarial); 1: copies land at wait, reads at issue
    bool p_bf16;         // P rounded to bf16 (the kernel) or kept in float (for the 1e-5 check)
    std::vector<float> out, outf; // bf16 output, float output (before bf16)
    Sim(const Problem &p, bool pipe_, int mode_, bool pb) : P(p), pipe(pipe_), mode(mode_), p_bf16(pb)
    {
        out.assign((size_t)P.m * P.heads * HD, NAN);
        outf.assign((size_t)P.m * P.heads * HD, NAN);
    }
    void run_cta(int bx, int gridx, int h, uint32_t raw);
};

static void a_frag_decode(const float (&fr)[4][2], int w, int g, int t, float A[64][16])
{
    int ra = 16 * w + g, rb = ra + 8;
    A[ra][2 * t] = fr[0][0], A[ra][2 * t + 1] = fr[0][1];
    A[rb][2 * t] = fr[1][0], A[rb][2 * t + 1] = fr[1][1];
    A[ra][2 * t + 8] = fr[2][0], A[ra][2 * t + 9] = fr[2][1];
    A[rb][2 * t + 8] = fr[3][0], A[rb][2 * t + 9] = fr[3][1];
}
// D layout: d[4j + e] -> row 16w + g + 8(e >= 2), col 8j + 2t + (e & 1)
static inline void d_pos(int tw, int idx, int &row, int &col)
{
    int w = tw / 32, lane = tw % 32, g = lane >> 2, t = lane & 3;
    int j = idx / 4, e = idx % 4;
    row = 16 * w + g + (e >= 2 ? 8 : 0);
    col = 8 * j + 2 * t + (e & 1);
}

void Sim::run_cta(int bx, int gridx, int h, uint32_t raw)
{
    const int Ssz = pipe ? Ring<true>::SMEM : Ring<false>::SMEM;
    const int STG = pipe ? Ring<true>::STAGES : 3, AHEAD = pipe ? 3 : 2;
    Smem sm{raw, Ssz, std::vector<Slot>(Ssz / 2, Slot{NAN, -1})};
    // alignment as in the kernel
    uint32_t smem = raw + ((1024 - (raw & 1023)) & 1023);
    CHECK(smem % 1024 == 0 && smem + STG * STAGE <= raw + Ssz, "alignment");
    const int kvh = h / (P.heads / P.kvh);
    const int r0 = (gridx - 1 - bx) * BQ;
    const int64_t p0 = P.p0;
    const int rows_here = std::min(BQ, P.m - r0);
    const int64_t kend = p0 + r0 + rows_here;
    const int ntiles = (int)((kend + BK - 1) / BK);
    int64_t wg_end[2];
    for (int wg = 0; wg < 2; wg++) {
        int wg_rows = std::min(64, P.m - (r0 + wg * 64));
        wg_end[wg] = wg_rows > 0 ? p0 + r0 + wg * 64 + wg_rows : 0;
    }
    const float *K = &P.kc[(size_t)kvh * P.max_seq * HD], *V = &P.vc[(size_t)kvh * P.max_seq * HD];
    const float scale = 1.4426950408889634f / sqrtf((float)HD);
    auto stage = [&](int i) { return smem + (uint32_t)((i % STG) * STAGE); };

    // copy of tile i by the threads of warpgroup wg (their chunks); deferred per mode
    std::vector<int> wcount(Ssz / 16, 0);
    std::vector<std::vector<int>> tchunks(ntiles, std::vector<int>(STAGE / 16, 0)); // per tile: writes per chunk of its stage
    auto do_load = [&](int i, int wg) {
        if (i >= ntiles) return;
        uint32_t ks = smem + (i % STG) * STAGE, vs = ks + TILE;
        const int64_t k0 = (int64_t)i * BK;
        for (int tw = 0; tw < 128; tw++) {
            int tid = wg * 128 + tw;
            for (int n = 0; n < BK * HD / 8 / THREADS; n++) {
                const int c = tid + n * THREADS;
                const int j = c / (HD / 8), d16 = c % (HD / 8);
                const int64_t kp = k0 + j;
                const bool ok = kp < kend;
                const int64_t off = (ok ? kp : 0) * HD + d16 * 8;
                const int so = (d16 / 8) * PANEL + j * 128 + (((d16 % 8) ^ (mut() == 2 ? 0 : j % 8)) * 16);
                CHECK(so % 16 == 0 && off % 8 == 0, "alignment of a chunk");
                CHECK(!ok || kp < P.max_seq, "global read past the cache");
                for (int e = 0; e < 8; e++) {
                    Slot &sk = sm.at(ks + so + 2 * e), &sv = sm.at(vs + so + 2 * e);
                    if (ok) {
                        sk = Slot{K[off + e], mktag(0, kp, d16 * 8 + e)};
                        sv = Slot{V[off + e], mktag(1, kp, d16 * 8 + e)};
                    } else {
                        sk = Slot{0.0f, 0};
                        sv = Slot{0.0f, 0};
                    }
                }
                wcount[(ks + so - raw) / 16]++;
                wcount[(vs + so - raw) / 16]++;
                tchunks[i][(ks + so - stage(i)) / 16]++;
                tchunks[i][(vs + so - stage(i)) / 16]++;
            }
        }
    };

    // B operands of a group, read from smem now; also checks the tags
    auto read_B = [&](int kind, int tile, uint32_t base) {
        std::vector<float> B;
        const int64_t k0 = (int64_t)tile * BK;
        if (kind == QK) {
            B.resize(KSTEPS * 16 * 64);
            for (int kk = 0; kk < KSTEPS; kk++) {
                uint64_t d = desc_k128b(base + (kk / 4) * PANEL + (kk % 4) * (mut() == 6 ? 16 : 32));
                for (int k = 0; k < 16; k++)
                    for (int n = 0; n < 64; n++) {
                        Slot &s = sm.at(b_addr(d, false, k, n));
                        int64_t key = k0 + n;
                        int32_t want = key < kend ? mktag(0, key, 16 * kk + k) : 0;
                        CHECK(s.tag == want, "S tile %d kk %d B(k %d, n %d): tag %d want %d", tile, kk, k, n, s.tag, want);
                        B[(kk * 16 + k) * 64 + n] = s.v;
                    }
            }
        } else {
            B.resize(4 * 16 * 128);
            for (int kk = 0; kk < 4; kk++) {
                uint64_t d = desc_n128b(base + kk * 2048, PANEL);
                for (int k = 0; k < 16; k++)
                    for (int n = 0; n < 128; n++) {
                        Slot &s = sm.at(b_addr(d, true, k, n));
                        int64_t key = k0 + 16 * kk + k;
                        int32_t want = key < kend ? mktag(1, key, n) : 0;
                        CHECK(s.tag == want, "PV tile %d kk %d B(k %d, n %d): tag %d want %d", tile, kk, k, n, s.tag, want);
                        B[(kk * 16 + k) * 128 + n] = s.v;
                    }
            }
        }
        return B;
    };

    WG *W = new WG[2];
    for (int wg = 0; wg < 2; wg++) {
        for (int tw = 0; tw < 128; tw++) {
            int warp = tw / 32, lane = tw % 32, g = lane >> 2, t = lane & 3;
            ThreadRows &r = W[wg].r[tw];
            r.rw = r0 + wg * 64 + warp * 16;
            int ra = (int)r.rw + g, rb = ra + 8;
            r.va = ra < P.m, r.vb = rb < P.m;
            r.qa = p0 + ra, r.qb = p0 + rb;
            r.ma = r.mb = -INFINITY, r.la = r.lb = 0;
            auto ldq = [&](int row, int col, bool ok, float (&dst)[2]) {
                dst[0] = ok ? P.q[(size_t)row * P.q_stride + (size_t)h * HD + col] : 0.f;
                dst[1] = ok ? P.q[(size_t)row * P.q_stride + (size_t)h * HD + col + 1] : 0.f;
            };
            for (int kk = 0; kk < KSTEPS; kk++) {
                ldq(ra, kk * 16 + 2 * t, r.va, W[wg].qf[tw][kk][0]);
                ldq(rb, kk * 16 + 2 * t, r.vb, W[wg].qf[tw][kk][1]);
                ldq(ra, kk * 16 + 8 + 2 * t, r.va, W[wg].qf[tw][kk][2]);
                ldq(rb, kk * 16 + 8 + 2 * t, r.vb, W[wg].qf[tw][kk][3]);
            }
            for (int e = 0; e < 64; e++) W[wg].o[tw][e] = 0;
            memset(W[wg].pa[tw], 0, sizeof W[wg].pa[tw]);
            for (int e = 0; e < 32; e++) W[wg].s[0][tw][e] = W[wg].s[1][tw][e] = NAN;
        }
    }

    auto gather_D = [&](WG &w, int kind, int sreg) {
        std::vector<float> D;
        if (kind == QK) {
            D.assign(64 * 64, 0);
            for (int tw = 0; tw < 128; tw++)
                for (int idx = 0; idx < 32; idx++) {
                    int row, col;
                    d_pos(tw, idx, row, col);
                    D[row * 64 + col] = w.s[sreg][tw][idx];
                }
        } else {
            D.assign(64 * 128, 0);
            for (int tw = 0; tw < 128; tw++)
                for (int idx = 0; idx < 64; idx++) {
                    int row, col;
                    d_pos(tw, idx, row, col);
                    D[row * 128 + col] = w.o[tw][idx];
                }
        }
        return D;
    };
    auto gather_A = [&](WG &w, int kind) {
        std::vector<float> A(kind == QK ? KSTEPS * 64 * 16 : 4 * 64 * 16, NAN);
        for (int tw = 0; tw < 128; tw++) {
            int warp = tw / 32, lane = tw % 32, g = lane >> 2, t = lane & 3;
            int steps = kind == QK ? KSTEPS : 4;
            for (int kk = 0; kk < steps; kk++) {
                float (*Ak)[16] = reinterpret_cast<float (*)[16]>(&A[kk * 64 * 16]);
                a_frag_decode(kind == QK ? w.qf[tw][kk] : w.pa[tw][kk], warp, g, t, Ak);
            }
        }
        return A;
    };
    auto retire = [&](WG &w, WG::Pend &pd) {
        if (!pd.snap) pd.B = read_B(pd.kind, pd.tile, pd.base), pd.snap = true;
        std::vector<float> D = gather_D(w, pd.kind, pd.sreg);
        std::vector<float> A = gather_A(w, pd.kind);
        CHECK(D == pd.D0 || (pd.kind == QK && false), "accumulators changed while in flight");
        for (size_t e = 0; e < A.size(); e++)
            CHECK(A[e] == pd.A0[e] || (std::isnan(A[e]) && std::isnan(pd.A0[e])), "A registers changed in flight");
        const int N = pd.kind == QK ? 64 : 128, steps = pd.kind == QK ? KSTEPS : 4;
        for (int kk = 0; kk < steps; kk++) // one instruction each: D += A·B (fp32, k ascending)
            for (int row = 0; row < 64; row++)
                for (int n = 0; n < N; n++) {
                    float acc = 0;
                    for (int k = 0; k < 16; k++) {
                        float a = A[(kk * 64 + row) * 16 + k];
                        CHECK(!std::isnan(a), "A element undefined");
                        acc += a * pd.B[(kk * 16 + k) * N + n];
                    }
                    D[row * N + n] += acc;
                }
        for (int tw = 0; tw < 128; tw++)
            for (int idx = 0; idx < N / 2; idx++) {
                int row, col;
                d_pos(tw, idx, row, col);
                if (pd.kind == QK)
                    w.s[pd.sreg][tw][idx] = D[row * N + col];
                else
                    w.o[tw][idx] = D[row * N + col];
            }
    };
    auto issue = [&](WG &w, int kind, int tile, int sreg, uint32_t base) {
        WG::Pend pd{kind, tile, sreg, base, {}, gather_D(w, kind, sreg), gather_A(w, kind), false};
        if (mode == 1) pd.B = read_B(kind, tile, base), pd.snap = true;
        w.pend.push_back(pd);
    };

    auto softmax = [&](WG &w, int tile, int sreg) {
        const int64_t k0 = (int64_t)tile * BK;
        for (int warp = 0; warp < 4; warp++) {
            float ta[32], tb[32];
            for (int lane = 0; lane < 32; lane++) {
                int tw = warp * 32 + lane, t = lane & 3;
                ThreadRows &r = w.r[tw];
                float *s = w.s[sreg][tw];
                ta[lane] = tb[lane] = -INFINITY;
                if (k0 + BK - 1 <= p0 + r.rw) {
                    for (int n = 0; n < 8; n++) {
                        for (int e = 0; e < 4; e++) s[4 * n + e] *= scale;
                        ta[lane] = fmaxf(ta[lane], fmaxf(s[4 * n], s[4 * n + 1]));
                        tb[lane] = fmaxf(tb[lane], fmaxf(s[4 * n + 2], s[4 * n + 3]));
                    }
                } else {
                    for (int n = 0; n < 8; n++)
                        for (int e = 0; e < 2; e++) {
                            const int64_t kp = k0 + 8 * n + 2 * t + e;
                            s[4 * n + e] = (r.va && (mut() == 7 ? kp < r.qa : kp <= r.qa)) ? s[4 * n + e] * scale : -INFINITY;
                            s[4 * n + 2 + e] = (r.vb && kp <= r.qb) ? s[4 * n + 2 + e] * scale : -INFINITY;
                            ta[lane] = fmaxf(ta[lane], s[4 * n + e]);
                            tb[lane] = fmaxf(tb[lane], s[4 * n + 2 + e]);
                        }
                }
            }
            for (int x : {1, 2}) {
                float na[32], nb[32];
                for (int l = 0; l < 32; l++) na[l] = fmaxf(ta[l], ta[l ^ x]), nb[l] = fmaxf(tb[l], tb[l ^ x]);
                memcpy(ta, na, sizeof ta), memcpy(tb, nb, sizeof tb);
            }
            for (int lane = 0; lane < 32; lane++) {
                int tw = warp * 32 + lane;
                ThreadRows &r = w.r[tw];
                float *s = w.s[sreg][tw];
                const float na = fmaxf(r.ma, ta[lane]), nb = fmaxf(r.mb, tb[lane]);
                w.aa[tw] = na == -INFINITY ? 1.0f : exp2f(r.ma - na);
                w.ab[tw] = nb == -INFINITY ? 1.0f : exp2f(r.mb - nb);
                r.ma = na, r.mb = nb;
                float sa = 0, sb = 0;
                for (int n = 0; n < 8; n++)
                    for (int e = 0; e < 2; e++) {
                        s[4 * n + e] = na == -INFINITY ? 0.0f : exp2f(s[4 * n + e] - na);
                        s[4 * n + 2 + e] = nb == -INFINITY ? 0.0f : exp2f(s[4 * n + 2 + e] - nb);
                        sa += s[4 * n + e];
                        sb += s[4 * n + 2 + e];
                    }
                r.la = r.la * w.aa[tw] + sa;
                r.lb = r.lb * w.ab[tw] + sb;
            }
        }
    };
    auto pv_prep = [&](WG &w, int sreg) {
        for (int warp = 0; warp < 4; warp++) {
            bool any = false;
            for (int lane = 0; lane < 32; lane++) {
                int tw = warp * 32 + lane;
                any |= w.aa[tw] != 1.0f || w.ab[tw] != 1.0f;
            }
            for (int lane = 0; lane < 32; lane++) {
                int tw = warp * 32 + lane;
                if (any)
                    for (int j = 0; j < 16; j++) {
                        w.o[tw][4 * j] *= w.aa[tw], w.o[tw][4 * j + 1] *= w.aa[tw];
                        w.o[tw][4 * j + 2] *= w.ab[tw], w.o[tw][4 * j + 3] *= w.ab[tw];
                    }
                const float *s = w.s[sreg][tw];
                auto pk = [&](float x) { return p_bf16 ? bf16r(x) : x; };
                for (int kk = 0; kk < 4; kk++)
                    for (int rr = 0; rr < 4; rr++) {
                        int rs = mut() == 5 && (rr == 1 || rr == 2) ? 3 - rr : rr;
                        w.pa[tw][kk][rs][0] = pk(s[8 * kk + 2 * rr]);
                        w.pa[tw][kk][rs][1] = pk(s[8 * kk + 2 * rr + 1]);
                    }
            }
        }
    };

    // programs
    std::vector<Op> prog[2];
    for (int wg = 0; wg < 2; wg++) {
        auto act = [&, wg](int i) { return (int64_t)i * BK < wg_end[wg] - (mut() == 10 ? 64 : 0); };
        prog[wg] = pipe ? program<true>(ntiles, act) : program<false>(ntiles, act);
    }
    // interpreter: run wg a's ops up to and including its next BAR, then wg b's, alternating order
    struct CpState {
        std::vector<int> tiles; // committed groups (tile per group)
        size_t landed = 0;
    } cps[2];
    size_t pc[2] = {0, 0};
    int round = 0;
    auto step_wg = [&](int wg) {
        WG &w = W[wg];
        auto &p = prog[wg];
        while (pc[wg] < p.size()) {
            const Op &o = p[pc[wg]++];
            switch (o.k) {
            case BAR: return;
            case LOAD:
                cps[wg].tiles.push_back(o.a);
                if (mode == 0) do_load(o.a, wg);
                break;
            case CPWAIT: {
                size_t done = cps[wg].tiles.size() - o.a;
                for (; cps[wg].landed < done; cps[wg].landed++)
                    if (mode == 1) do_load(cps[wg].tiles[cps[wg].landed], wg);
                break;
            }
            case FENCEP: break;
            case QK:
                for (int tw = 0; tw < 128; tw++)
                    for (int e = 0; e < 32; e++) w.s[o.b][tw][e] = 0;
                issue(w, QK, o.a, o.b, stage(o.a));
                break;
            case SMAX: softmax(w, o.a, o.b); break;
            case PV:
                pv_prep(w, o.b);
                issue(w, PV, o.a, 0, stage(o.a) + TILE);
                break;
            case WGWAIT:
                while ((int)w.pend.size() > o.a) {
                    retire(w, w.pend.front());
                    w.pend.erase(w.pend.begin());
                }
                break;
            case END: break;
            }
        }
    };
    while (pc[0] < prog[0].size() || pc[1] < prog[1].size()) {
        int first = (round + bx + h) & 1; // alternate which warpgroup runs first in a segment
        step_wg(first);
        step_wg(first ^ 1);
        round++;
    }
    for (int i = 0; i < ntiles; i++)
        for (int c = 0; c < STAGE / 16; c++)
            CHECK(tchunks[i][c] == 1, "tile %d chunk %d of its stage written %d times", i, c, tchunks[i][c]);
    // output
    for (int wg = 0; wg < 2; wg++)
        for (int tw = 0; tw < 128; tw++) {
            int lane = tw % 32, t = lane & 3;
            ThreadRows &r = W[wg].r[tw];
            float la = r.la, lb = r.lb;
            // xor shuffles as in the kernel
            (void)la, (void)lb;
        }
    for (int wg = 0; wg < 2; wg++)
        for (int warp = 0; warp < 4; warp++) {
            float la[32], lb[32];
            for (int l = 0; l < 32; l++) la[l] = W[wg].r[warp * 32 + l].la, lb[l] = W[wg].r[warp * 32 + l].lb;
            for (int x : {1, 2}) {
                float na[32], nb[32];
                for (int l = 0; l < 32; l++) na[l] = la[l] + la[l ^ x], nb[l] = lb[l] + lb[l ^ x];
                memcpy(la, na, sizeof la), memcpy(lb, nb, sizeof lb);
            }
            for (int lane = 0; lane < 32; lane++) {
                int tw = warp * 32 + lane, g = lane >> 2, t = lane & 3;
                ThreadRows &r = W[wg].r[tw];
                int ra = (int)r.rw + g, rb = ra + 8;
                for (int j = 0; j < 16; j++) {
                    int d = 8 * j + 2 * t;
                    for (int e = 0; e < 2; e++) {
                        if (r.va) {
                            size_t at = ((size_t)ra * P.heads + h) * HD + d + e;
                            CHECK(std::isnan(out[at]), "row %d dim %d written twice", ra, d + e);
                            outf[at] = W[wg].o[tw][4 * j + e] / la[lane];
                            out[at] = bf16r(outf[at]);
                        }
                        if (r.vb) {
                            size_t at = ((size_t)rb * P.heads + h) * HD + d + e;
                            CHECK(std::isnan(out[at]), "row %d dim %d written twice", rb, d + e);
                            outf[at] = W[wg].o[tw][4 * j + 2 + e] / lb[lane];
                            out[at] = bf16r(outf[at]);
                        }
                    }
                }
            }
        }
    delete[] W;
    if (pipe)
        hb_check<true>(ntiles, prog, "pipe");
    else
        hb_check<false>(ntiles, prog, "plain");
}

// reference attention in double; and the mma.sync kernel's per-row arithmetic (64-key tiles,
// log2 softmax, P rounded to bf16) in float
static void reference(const Problem &P, std::vector<double> &ref, std::vector<float> &mma)
{
    ref.assign((size_t)P.m * P.heads * HD, 0);
    mma.assign((size_t)P.m * P.heads * HD, 0);
    const float scale = 1.4426950408889634f / sqrtf((float)HD);
    for (int r = 0; r < P.m; r++)
        for (int h = 0; h < P.heads; h++) {
            int kvh = h / (P.heads / P.kvh);
            const float *q = &P.q[(size_t)r * P.q_stride + (size_t)h * HD];
            const float *K = &P.kc[(size_t)kvh * P.max_seq * HD], *V = &P.vc[(size_t)kvh * P.max_seq * HD];
            int64_t n = P.p0 + r + 1;
            std::vector<double> s(n);
            double mx = -1e300;
            for (int64_t k = 0; k < n; k++) {
                double a = 0;
                for (int d = 0; d < HD; d++) a += (double)q[d] * K[k * HD + d];
                s[k] = a / sqrt((double)HD);
                mx = std::max(mx, s[k]);
            }
            double l = 0;
            for (int64_t k = 0; k < n; k++) l += (s[k] = exp(s[k] - mx));
            for (int d = 0; d < HD; d++) {
                double a = 0;
                for (int64_t k = 0; k < n; k++) a += s[k] * V[k * HD + d];
                ref[((size_t)r * P.heads + h) * HD + d] = a / l;
            }
            // mma.sync-style row model (64-key tiles, log2 units, P in bf16), with the sums
            // chunked in 16 as a k16 instruction adds them
            float m_ = -INFINITY, l_ = 0;
            std::vector<float> o(HD, 0.f);
            for (int64_t k0 = 0; k0 < n; k0 += BK) {
                float sc[BK], t = -INFINITY;
                for (int j = 0; j < BK; j++) {
                    int64_t k = k0 + j;
                    if (k < n) {
                        float a = 0;
                        for (int c = 0; c < HD / 16; c++) {
                            float acc = 0;
                            for (int d = 16 * c; d < 16 * c + 16; d++) acc += q[d] * K[k * HD + d];
                            a += acc;
                        }
                        sc[j] = a * scale;
                    } else
                        sc[j] = -INFINITY;
                    t = fmaxf(t, sc[j]);
                }
                float nm = fmaxf(m_, t), al = exp2f(m_ - nm);
                m_ = nm;
                float sum = 0;
                for (int j = 0; j < BK; j++) sum += (sc[j] = exp2f(sc[j] - nm));
                l_ = l_ * al + sum;
                for (int d = 0; d < HD; d++) {
                    o[d] *= al;
                    for (int c = 0; c < 4; c++) {
                        float acc = 0;
                        for (int j = 16 * c; j < 16 * c + 16; j++)
                            acc += bf16r(sc[j]) * (k0 + j < n ? V[(k0 + j) * HD + d] : 0.f);
                        o[d] += acc;
                    }
                }
            }
            for (int d = 0; d < HD; d++) mma[((size_t)r * P.heads + h) * HD + d] = o[d] / l_;
        }
}

int main(int argc, char **argv)
{
    struct Case {
        int m;
        int64_t p0;
    } cases[] = {{1, 0},   {1, 5},    {2, 63},   {3, 64},   {16, 0},   {63, 1},  {64, 0},
                 {65, 0},  {70, 5},   {127, 3},  {128, 0},  {129, 0},  {129, 64}, {191, 17},
                 {192, 0}, {200, 40}, {255, 1},  {256, 0},  {257, 63}, {300, 77}, {300, 0},
                 {300, 129}, {250, 300}, {40, 500}};
    std::mt19937 rng(12345);
    std::normal_distribution<float> nd(0.f, 1.f);
    uint32_t raws[] = {0, 16, 400, 1024 + 48, 3056};
    int ncase = 0;
    double worst_f = 0, worst_mma = 0, worst_ref = 0, worst_pipe_vs_plain = 0;
    for (const Case &c : cases) {
        if (getenv("RINGONLY")) break;
        Problem P;
        P.m = c.m, P.heads = 8, P.kvh = 2, P.p0 = c.p0;
        P.max_seq = c.p0 + c.m + 37;
        P.q_stride = (int64_t)P.heads * HD + 2 * P.kvh * HD; // the engine's fused qkv rows
        P.q.resize((size_t)P.m * P.q_stride);
        for (auto &x : P.q) x = bf16r(nd(rng) * 1.5f);
        P.kc.resize((size_t)P.kvh * P.max_seq * HD);
        P.vc.resize(P.kc.size());
        for (auto &x : P.kc) x = bf16r(nd(rng));
        for (auto &x : P.vc) x = bf16r(nd(rng));
        // poison the cache past p0 + m (must never be read): a NaN would propagate
        for (int kv = 0; kv < P.kvh; kv++)
            for (int64_t k = P.p0 + P.m; k < P.max_seq; k++)
                for (int d = 0; d < HD; d++)
                    P.kc[((size_t)kv * P.max_seq + k) * HD + d] = P.vc[((size_t)kv * P.max_seq + k) * HD + d] = NAN;
        std::vector<double> ref;
        std::vector<float> mma;
        reference(P, ref, mma);
        std::vector<float> res_plain;
        for (int pipe = 0; pipe < 2; pipe++)
            for (int mode = 0; mode < 2; mode++)
                for (int pb = 0; pb < 2; pb++) {
                    Sim S(P, pipe, mode, pb);
                    int gridx = (P.m + BQ - 1) / BQ;
                    for (int h = 0; h < P.heads; h++)
                        for (int bx = 0; bx < gridx; bx++) S.run_cta(bx, gridx, h, raws[(bx + h + ncase) % 5]);
                    double ef = 0, em = 0, er = 0;
                    for (size_t i = 0; i < S.out.size(); i++) {
                        CHECK(!std::isnan(S.out[i]), "output %zu never written / NaN", i);
                        size_t rowb = i / HD * HD; // relative to the row's largest |ref|
                        double scl = 0;
                        for (int d = 0; d < HD; d++) scl = std::max(scl, fabs(ref[rowb + d]));
                        if (!pb) ef = std::max(ef, fabs(S.outf[i] - ref[i]) / scl);
                        if (pb) em = std::max(em, fabs(S.outf[i] - mma[i]) / scl);
                        if (pb) er = std::max(er, fabs(S.out[i] - ref[i]));
                    }
                    if (pb && mode == 0) {
                        if (!pipe)
                            res_plain = S.outf;
                        else {
                            double d = 0;
                            for (size_t i = 0; i < S.outf.size(); i++) d = std::max(d, (double)fabs(S.outf[i] - res_plain[i]));
                            worst_pipe_vs_plain = std::max(worst_pipe_vs_plain, d);
                        }
                    }
                    if (!pb) CHECK(ef < 1e-5, "m %d p0 %ld pipe %d mode %d: float-P rel err %.3g vs double ref", c.m, (long)c.p0, pipe, mode, ef);
                    if (pb) CHECK(em < 1e-5, "m %d p0 %ld pipe %d mode %d: rel err %.3g vs mma.sync row model", c.m, (long)c.p0, pipe, mode, em);
                    if (pb) CHECK(er < 2e-2, "m %d p0 %ld: abs err %.3g vs double ref (bf16)", c.m, (long)c.p0, er);
                    worst_f = std::max(worst_f, ef), worst_mma = std::max(worst_mma, em), worst_ref = std::max(worst_ref, er);
                    if (pb && mode == 0)
                        printf("m %3d p0 %3ld %-5s: bf16-P vs mma-row-model %.2e, bf16 out vs ref abs %.2e\n",
                               c.m, (long)c.p0, pipe ? "pipe" : "plain", em, er);
                    if (!pb && mode == 0)
                        printf("m %3d p0 %3ld %-5s: float-P vs double ref %.2e\n", c.m, (long)c.p0, pipe ? "pipe" : "plain", ef);
                }
        ncase++;
    }
    printf("worst: float-P rel vs double ref %.3e; bf16-P rel vs mma.sync row model %.3e; bf16 out abs vs ref %.3e; pipe vs plain %.3e\n",
           worst_f, worst_mma, worst_ref, worst_pipe_vs_plain);
    // ring analysis over many tile counts and skip patterns
    for (int nt = 1; nt <= 40; nt++)
        for (int e0 = 0; e0 <= nt; e0++) { // wg 0 active for tiles < e0, wg 1 for tiles < e1
            for (int e1 = 0; e1 <= nt; e1++) {
                std::vector<Op> pr[2];
                auto a0 = [&](int i) { return i < e0; };
                auto a1 = [&](int i) { return i < e1; };
                pr[0] = program<false>(nt, a0), pr[1] = program<false>(nt, a1);
                hb_check<false>(nt, pr, "plain-ring");
                pr[0] = program<true>(nt, a0), pr[1] = program<true>(nt, a1);
                hb_check<true>(nt, pr, "pipe-ring");
            }
        }
    printf("%s (%d failures)\n", g_fail ? "FAILED" : "all checks passed", g_fail);
    return g_fail != 0;
}
