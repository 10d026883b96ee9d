/*
 * The decode attention of one (KV head, split) as a device function of 256 threads (see
 * attention_decode.cu for the algorithm): the fused decode kernel runs it as a block, the
 * persistent decode step (decode_persistent.cu) on its first eight warps. Sync supplies the
 * block barrier (sync()) and the dependency wait before the first read of q|k|v (wait()).
 * Returns true in the block that wrote the heads' outputs (one split, or the merging block).
 * The caller synchronises the 256 threads before reusing the shared memory.
 */
#ifndef QMM_LLM_ATTENTION_DECODE_BLOCK_CUH
#define QMM_LLM_ATTENTION_DECODE_BLOCK_CUH

#include <math.h>
#ifdef QMM_AD_TRACE
#include <stdio.h>
#include <algorithm>
#include <vector>
#endif

#include "llm/cuda/llm_kernels.cuh"
#include "llm/cuda/mma_sync.cuh"
#include "llm/decode_split.h"

namespace qmm_llm {

constexpr int AD_T = LLM_AD_TILE, AD_STAGES = 2, AD_THREADS = 256, AD_SINGLE = LLM_AD_SINGLE,
              AD_MAX_SPLITS = 64;
/* the fused kernel's blocks a SM (its launch bound; the shared memory would hold three): at
 * three, 80 registers, and ptxas recomputed the one-head P·V's addresses inside its chain
 * whenever the split path grew (bench/NOTES.md rows 137, 138) */
constexpr int AD_BLOCKS_PER_SM = 2;

/* Experiment build -DQMM_AD_TRACE: thread 0 of a block stamps %globaltimer at the phases of the
 * chain (Sync::phase; attention_decode.cu keeps the last launch's stamps and prints them). */
#ifdef QMM_AD_TRACE
#define AD_STAMP(i) sync.phase(i)
#else
#define AD_STAMP(i) ((void)0)
#endif
#ifdef QMM_AD_TRACE
/* The host's summary of a launch's stamps t[unit · 8 + phase] (0: the unit did not run), in µs
 * after the first entry: per phase, the units that reached it. */
static inline void ad_trace_summary(const char *what, const std::vector<unsigned long long> &t,
                                    const char *const name[8])
{
    unsigned long long t0 = ~0ull;
    const size_t units = t.size() / 8;
    for (size_t b = 0; b < units; b++)
        if (t[b * 8]) t0 = std::min(t0, t[b * 8]);
    fprintf(stderr, "%s (us after the first entry; units that reached the phase)\n", what);
    for (int i = 0; i < 8; i++) {
        std::vector<double> v;
        for (size_t b = 0; b < units; b++)
            if (t[b * 8] && t[b * 8 + i] >= t0) v.push_back((t[b * 8 + i] - t0) * 1e-3);
        if (v.empty()) continue;
        std::sort(v.begin(), v.end());
        fprintf(stderr, "  %-10s n %4zu  min %6.2f  p10 %6.2f  med %6.2f  p90 %6.2f  max %6.2f\n",
                name[i], v.size(), v[0], v[v.size() / 10], v[v.size() / 2], v[v.size() * 9 / 10],
                v.back());
    }
}
#endif

/* Experiment builds (timing only, wrong results). -DQMM_AD_STUB_TILE: a split's tiles only land
 * (no scores, softmax or P·V; outputs 0), with -DQMM_AD_SPLITS_CAP=N (attention_decode.cu) for
 * fewer, longer splits: can fewer blocks pull the K/V bytes as fast (NOTES.md row 168)?
 * -DQMM_AD_MERGE_STUB=N: the merging block loads the partial outputs of the even splits only
 * (1: half the bytes in as many load rounds) or of none (2), the splits' (m, l) as always: do
 * the merge's bytes or its round trips bind (row 167)? */
/* -DQMM_AD_TWO_CHAINS (an experiment, NOTES.md row 178): a tile's scores and its P·V each on
 * two accumulators, halving the dependent mma chains, and the softmax's sum l kept a lane's own
 * until the tiles are done (five shuffles out of each tile's chain); other bits: the sums'
 * order changes. */
#ifdef QMM_AD_TWO_CHAINS
#define AD_TWO_CHAINS 1
#else
#define AD_TWO_CHAINS 0
#endif
#if !defined(QMM_AD_MERGE_STUB)
#define AD_MERGE_LOADS(sp) true
#elif QMM_AD_MERGE_STUB == 1
#define AD_MERGE_LOADS(sp) (((sp) & 1) == 0)
#else
#define AD_MERGE_LOADS(sp) false
#endif

/* Where piece c (16 bytes) of row r of a K or V tile sits: piece c ^ (r & 7) of the row (an XOR
 * swizzle), so that ldmatrix's eight rows of one piece fall on eight distinct bank groups. */
template <int HD>
__device__ __forceinline__ int ad_at(int row, int piece)
{
    return row * HD + (piece ^ (row & 7)) * 8;
}

/* Shared memory of one block, in bytes, and the offsets of its parts. */
template <int HD, int G>
struct ad_layout {
    static constexpr int KV = AD_STAGES * 2 * AD_T * HD * 2; /* [stage][K|V][row][HD] bf16, ad_at */
    static constexpr int QS = KV;                            /* [G + 1][HD] f32: q heads, new k */
    static constexpr int S = QS + (G + 1) * HD * 4;          /* [G][T] scores */
    static constexpr int PS = AD_T + 8;                      /* a head's P row (bf16), padded */
    static constexpr int P = S + G * AD_T * 4;               /* [hi|lo][8][PS] probabilities */
    static constexpr int TAB = P + 2 * 8 * PS * 2;           /* f32 cos[HD/2] sin[HD/2], bf16 wq[HD] wk[HD] */
    static constexpr int ST = TAB + 2 * HD * 4;              /* alpha, m, l [G] */
    static constexpr int NEW = ST + (3 * G * 4 + 15) / 16 * 16; /* new k, v: [2][HD] bf16 */
    static constexpr int FLAG = NEW + 2 * HD * 2;
    static constexpr int BYTES = FLAG + 16;
    /* the cluster kernel's split result, read by its merging CTA: [G][HD] f32 output sums, then
     * [G] (m, l) pairs (past BYTES: the merge's scratch reuses the ring) */
    static constexpr int SLOT = (BYTES + 15) / 16 * 16;
    static constexpr int SLOT_END = SLOT + (G * HD + 2 * G) * 4;
    static_assert(TAB % 16 == 0, "the tables are copied in 16-byte pieces");
    static_assert((2 * G * AD_MAX_SPLITS + 16) * 4 + AD_THREADS * 16 <= KV,
                  "the splits' merge reuses the K/V ring");
};

/* Where the merge finds split sp's results for head g of the group: its output sums (a run of
 * HD / 4 float4, through a cursor at float4 j of head g: at(sp)) and its (m, l). In global
 * memory (the fused kernel's partials), or in the SLOT of the cluster CTA holding the split (two
 * splits a CTA, one a half of its shared memory). */
template <int HD, int G>
struct AdPartialsGlobal {
    const float *partials, *ml_all;
    int nsplit, kvh;
    struct Cursor {
        const float4 *base;
        __device__ float4 at(int sp) const { return __ldcg(base + (int64_t)sp * (HD / 4)); }
    };
    __device__ Cursor cursor(int g, int j) const
    {
        return {reinterpret_cast<const float4 *>(partials + (int64_t)(kvh * G + g) * nsplit * HD) + j};
    }
    __device__ void ml(int sp, int g, float &m, float &l) const
    {
        const float *p = ml_all + ((int64_t)(kvh * G + g) * nsplit + sp) * 2;
        m = __ldcg(p);
        l = __ldcg(p + 1);
    }
};
template <int HD, int G>
struct AdPartialsCluster {
    uint32_t slot;       /* shared address of the first half's SLOT in this CTA */
    uint32_t half_bytes; /* a half's shared memory */
    struct Cursor {
        uint32_t a, half_bytes; /* float4 j of head g in the first half's SLOT */
        __device__ float4 at(int sp) const
        {
            return qmm::ld_cluster_f4(qmm::cluster_map(a + (uint32_t)(sp & 1) * half_bytes, (uint32_t)(sp >> 1)));
        }
    };
    __device__ Cursor cursor(int g, int j) const { return {slot + 4u * (uint32_t)(g * HD + 4 * j), half_bytes}; }
    __device__ void ml(int sp, int g, float &m, float &l) const
    {
        const uint32_t a = qmm::cluster_map(slot + (uint32_t)(sp & 1) * half_bytes + 4u * (uint32_t)(G * HD + 2 * g),
                                            (uint32_t)(sp >> 1));
        m = qmm::ld_cluster_f32(a);
        l = qmm::ld_cluster_f32(a + 4);
    }
};

/* The merge of a KV head's `active` splits by one block of AD_THREADS threads (tid), into the G
 * heads' outputs: O = Σ o_sp · exp(m_sp − M) / Σ l_sp · exp(m_sp − M), M = max m_sp. Each thread
 * sums four outputs over a contiguous range of splits, eight loads in flight, and the ranges are
 * added in order: the same order every time, wherever the splits' results live (Src). Its first
 * eight outputs are requested with the splits' (m, l), before the weights exp(m − M) are known
 * (one round trip, not two); the (m, l) go to shared memory (smem: the free K/V ring) and each
 * head's max and weights are computed once (a warp a head). */
template <int HD, int G, class Src, class Sync>
__device__ __forceinline__ void ad_merge(const Src &src, int active, int kvh, bf16 *__restrict__ out,
                                         unsigned char *smem, Sync sync, int tid)
{
    const int lane = tid & 31, warp = tid >> 5;
    constexpr int E4 = G * HD / 4, PARTS = AD_THREADS / E4;
    float *wsp = reinterpret_cast<float *>(smem), *lsp = wsp + G * AD_MAX_SPLITS;
    float *Lh = lsp + G * AD_MAX_SPLITS;
    float4 *red4 = reinterpret_cast<float4 *>(Lh + 16); /* [PARTS][E4] */
    const int q4 = tid % E4, part = tid / E4, gq = q4 / (HD / 4);
    const int sp0 = part * active / PARTS, sp1 = (part + 1) * active / PARTS;
    const auto parts = src.cursor(gq, q4 % (HD / 4));
    float4 v[8];
#ifdef QMM_AD_MERGE_STUB
    for (int u = 0; u < 8; u++) v[u] = make_float4(0.f, 0.f, 0.f, 0.f);
#endif
    if (tid < E4 * PARTS)
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (sp0 + u < sp1 && AD_MERGE_LOADS(sp0 + u)) v[u] = parts.at(sp0 + u);
    for (int i = tid; i < G * active; i += AD_THREADS) {
        const int g = i / active, sp = i % active;
        src.ml(sp, g, wsp[g * AD_MAX_SPLITS + sp], lsp[g * AD_MAX_SPLITS + sp]);
    }
    sync.sync();
    AD_STAMP(6);
    for (int g = warp; g < G; g += AD_THREADS / 32) {
        float M = -INFINITY;
        for (int sp = lane; sp < active; sp += 32) M = fmaxf(M, wsp[g * AD_MAX_SPLITS + sp]);
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        float Ls = 0.0f;
        for (int sp = lane; sp < active; sp += 32) {
            const float f = expf(wsp[g * AD_MAX_SPLITS + sp] - M);
            wsp[g * AD_MAX_SPLITS + sp] = f;
            Ls += lsp[g * AD_MAX_SPLITS + sp] * f;
        }
        for (int o = 16; o > 0; o >>= 1) Ls += __shfl_xor_sync(0xffffffffu, Ls, o);
        if (lane == 0) Lh[g] = Ls;
    }
    sync.sync();
    if (tid < E4 * PARTS) {
        const float *w = wsp + gq * AD_MAX_SPLITS;
        float4 O = make_float4(0.f, 0.f, 0.f, 0.f);
        for (int sp = sp0; sp < sp1; sp += 8) {
            if (sp > sp0)
#pragma unroll
                for (int u = 0; u < 8; u++)
                    if (sp + u < sp1 && AD_MERGE_LOADS(sp + u)) v[u] = parts.at(sp + u);
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (sp + u < sp1) {
                    const float f = w[sp + u];
                    O.x = fmaf(v[u].x, f, O.x), O.y = fmaf(v[u].y, f, O.y);
                    O.z = fmaf(v[u].z, f, O.z), O.w = fmaf(v[u].w, f, O.w);
                }
        }
        red4[part * E4 + q4] = O;
    }
    sync.sync();
    for (int e = tid; e < E4; e += AD_THREADS) {
        const int g = e / (HD / 4), h = kvh * G + g, d = (e % (HD / 4)) * 4;
        float4 O = red4[e];
        for (int pr = 1; pr < PARTS; pr++) {
            const float4 r = red4[pr * E4 + e];
            O.x += r.x, O.y += r.y, O.z += r.z, O.w += r.w;
        }
        const float L = Lh[g];
        bf16 *o = out + (int64_t)h * HD + d;
        o[0] = __float2bfloat16_rn(O.x / L);
        o[1] = __float2bfloat16_rn(O.y / L);
        o[2] = __float2bfloat16_rn(O.z / L);
        o[3] = __float2bfloat16_rn(O.w / L);
    }
}

// q [heads*HD], k, v [kv_heads*HD] (this row's projections); qw, kw [HD]; cos_t, sin_t
// [max_seq, HD/2]; kc, vc the layer's cache [kv_heads, max_seq, HD]; partials heads·nsplit·(HD + 2)
// floats (outputs, then (m, l) pairs); counters [kv_heads] (zero between launches); out [heads*HD].
//
// ONE_HEAD: with a single split (len <= AD_SINGLE), blocks split = 0..G-1 take one query head of
// the group each (block 0 appends the new K/V row): each head's arithmetic as in the block of G
// heads, a G-th of the block's chain (scores, softmax, P·V) on G times the SMs. The caller
// launches max(nsplit, G) blocks a KV head and expects G writers a KV head at short contexts.
// CLUSTER: the cluster kernel's split (attention_decode_cluster.cu): its rows by
// llm_ad_split_even, and with several splits its sums and (m, l) go to the layout's SLOT in smem
// for the cluster's merge (partials and counters unused; returns true only where it wrote the
// output, as with one split).
// LOCAL_OUT: with one split, head g of the group's output at out[g · HD + d] (a buffer of the
// group's G heads, e.g. in shared memory: attention_o_fused.cu) instead of out[h · HD + d].
template <int HD, int G, class Sync, bool ONE_HEAD = false, bool CLUSTER = false, bool LOCAL_OUT = false>
__device__ bool attn_decode_block(const bf16 *__restrict__ q, const bf16 *__restrict__ k,
                             const bf16 *__restrict__ v, const bf16 *__restrict__ qw,
                             const bf16 *__restrict__ kw, const float *__restrict__ cos_t,
                             const float *__restrict__ sin_t, float eps,
                             const int32_t *__restrict__ pos, int64_t max_seq, int nsplit,
                             bf16 *__restrict__ kc, bf16 *__restrict__ vc,
                             float *__restrict__ partials, int *__restrict__ counters,
                             bf16 *__restrict__ out, int kvh, int split, int kv_heads,
                             unsigned char *smem, Sync sync, bool append = true)
{
    static_assert(!(ONE_HEAD && LOCAL_OUT), "the one-head path writes out[h · HD + d]");
    using L = ad_layout<HD, G>;
    constexpr int HALF = HD / 2, CPR = HD / 8; /* 16-byte pieces per row */
    bf16 *ring = reinterpret_cast<bf16 *>(smem);
    float *qs = reinterpret_cast<float *>(smem + L::QS);
    float *S = reinterpret_cast<float *>(smem + L::S);
    float *P = reinterpret_cast<float *>(smem + L::P);
    float *tab = reinterpret_cast<float *>(smem + L::TAB);
    bf16 *wtab = reinterpret_cast<bf16 *>(tab + HD); /* wq[HD] wk[HD] */
    float *alpha_s = reinterpret_cast<float *>(smem + L::ST), *m_s = alpha_s + G, *l_s = m_s + G;
    bf16 *newk = reinterpret_cast<bf16 *>(smem + L::NEW), *newv = newk + HD;
    int *flag = reinterpret_cast<int *>(smem + L::FLAG);
    /* partials: [heads][nsplit][HD] outputs (16-byte rows for the merge), then [heads][nsplit][2]
     * (m, l); the cluster kernel has none (its splits stay in shared memory) */
    float *ml_all = CLUSTER ? nullptr : partials + (int64_t)kv_heads * G * nsplit * HD;

    /* the cluster kernel runs two of these a block */
    const int tid = CLUSTER ? (int)threadIdx.x % AD_THREADS : (int)threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    /* *pos and the rows before it are final before this forward began (pdl.cuh) */
    const int64_t p = *pos, len = p + 1;
    int64_t chunk, start = 0, end = 0;
    int active;
    if constexpr (CLUSTER)
        llm_ad_split_even(len, nsplit, split, &start, &end, &active); /* decode_split.h */
    else
        llm_ad_split(len, nsplit, &chunk, &active);
    if constexpr (ONE_HEAD && G > 1) {
        if (active == 1) {
            if (split >= G) return false;
            /* query head kvh·G + split as the head of a group of one (q and out shifted) */
            const int64_t shift = ((int64_t)kvh * (G - 1) + split) * HD;
            return attn_decode_block<HD, 1, Sync, false, CLUSTER>(
                q + shift, k, v, qw, kw, cos_t, sin_t, eps, pos, max_seq, 1, kc, vc, partials,
                counters, out + shift, kvh, 0, kv_heads, smem, sync, split == 0);
        }
    }
    if (split >= active) return false;
    if constexpr (!CLUSTER) {
        start = (int64_t)split * chunk;
        end = min(len, start + chunk);
    }
    const int ntiles = (int)((end - start + AD_T - 1) / AD_T);
    const bool owner = end == len;
    const bf16 *Kg = kc + (int64_t)kvh * max_seq * HD, *Vg = vc + (int64_t)kvh * max_seq * HD;

    /* a thread copies the same 16-byte column of rows row0, row0 + RSTEP, ... of K and V */
    constexpr int RSTEP = AD_THREADS / CPR;
    const int col8 = (tid % CPR) * 8, row0 = tid / CPR;
    auto load_tile = [&](int i) {
        bf16 *ks = ring + (size_t)(i % AD_STAGES) * 2 * AD_T * HD, *vs = ks + AD_T * HD;
        const int64_t r0 = start + (int64_t)i * AD_T + row0;
#pragma unroll
        for (int rr = 0; rr < AD_T; rr += RSTEP) {
            const int64_t r = r0 + rr;
            const bool valid = r < p && r < end; /* row p is patched, rows past end unused */
            const int64_t off = (valid ? r : 0) * HD + col8;
            const int so = ad_at<HD>(row0 + rr, col8 / 8);
            cp16_zfill(ks + so, Kg + off, valid);
            cp16_zfill(vs + so, Vg + off, valid);
        }
    };
    /* The norm and RoPE tables first, as their own cp.async group ahead of the K/V tiles: a plain
     * load whose value a thread stores waits behind the SM's K/V requests, and it did so before
     * the dependency wait (bench/NOTES.md row 122). Tables not 16-byte aligned (the engine's are
     * when its hidden size is a multiple of 8) are loaded as before. */
    const float *cos_p = cos_t + p * HALF, *sin_p = sin_t + p * HALF;
    if ((((uintptr_t)cos_p | (uintptr_t)sin_p | (uintptr_t)qw | (uintptr_t)kw) & 15) == 0) {
        constexpr int FP = HALF / 4, WP = HD / 8; /* 16-byte pieces of a f32 half row, a bf16 row */
        if (tid < 2 * FP + 2 * WP) {
            const int i = tid;
            const void *src = i < FP          ? (const void *)(cos_p + 4 * i)
                              : i < 2 * FP    ? (const void *)(sin_p + 4 * (i - FP))
                              : i < 2 * FP + WP ? (const void *)(qw + 8 * (i - 2 * FP))
                                                : (const void *)(kw + 8 * (i - 2 * FP - WP));
            cp16_zfill(reinterpret_cast<unsigned char *>(tab) + 16 * i, src, true);
        }
    } else {
        for (int i = tid; i < HALF; i += AD_THREADS) {
            tab[i] = cos_p[i];
            tab[HALF + i] = sin_p[i];
        }
        for (int i = tid; i < HD; i += AD_THREADS) {
            wtab[i] = qw[i];
            wtab[HD + i] = kw[i];
        }
    }
    cp_commit();
    for (int i = 0; i < AD_STAGES; i++) {
        if (i < ntiles) load_tile(i);
        cp_commit();
    }

    sync.wait();
    AD_STAMP(1);
    cp_wait_group<AD_STAGES>(); /* the tables' group, the oldest */
    sync.sync();

    /* q heads of this group (and the new k, v when this block owns the position): warp g takes
     * head g in registers, lane holding dims lane + 32u (so the pairs (j, j + HD/2) of the
     * rotation share a lane): load, Σx² in the order of llm_head_norm_rope's reference, norm,
     * RoPE */
    const int nh = G + (owner ? 1 : 0);
    if (owner)
        for (int d = tid; d < HD; d += AD_THREADS) {
            bf16 x = v[(int64_t)kvh * HD + d];
            newv[d] = x;
            if (append) vc[((int64_t)kvh * max_seq + p) * HD + d] = x;
        }
    for (int g = warp; g < nh; g += AD_THREADS / 32) {
        constexpr int U = HD / 32;
        const bf16 *src = g < G ? q + ((int64_t)kvh * G + g) * HD : k + (int64_t)kvh * HD;
        float xv[U];
#pragma unroll
        for (int u = 0; u < U; u++) xv[u] = __bfloat162float(src[lane + 32 * u]);
        float ss = 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++) ss += xv[u] * xv[u];
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        const float inv = 1.0f / sqrtf(ss / (float)HD + eps);
        const bf16 *w = wtab + (g < G ? 0 : HD);
#pragma unroll
        for (int u = 0; u < U / 2; u++) { /* as llm_head_norm_rope */
            const int j = lane + 32 * u;
            const float a = xv[u], b = xv[u + U / 2];
            const float ya = __fmul_rn(__fmul_rn(a, inv), __bfloat162float(w[j]));
            const float yb = __fmul_rn(__fmul_rn(b, inv), __bfloat162float(w[j + HALF]));
            const float c = tab[j], s = tab[HALF + j];
            const bf16 oa = __float2bfloat16_rn(__fsub_rn(__fmul_rn(ya, c), __fmul_rn(yb, s)));
            const bf16 ob = __float2bfloat16_rn(__fadd_rn(__fmul_rn(yb, c), __fmul_rn(ya, s)));
            if (g < G) {
                qs[g * HD + j] = __bfloat162float(oa);
                qs[g * HD + j + HALF] = __bfloat162float(ob);
            } else {
                newk[j] = oa;
                newk[j + HALF] = ob;
                if (append) {
                    bf16 *ko = kc + ((int64_t)kvh * max_seq + p) * HD;
                    ko[j] = oa;
                    ko[j + HALF] = ob;
                }
            }
        }
    }

    /* Per tile on the tensor cores (bf16 mma.sync m16n8k16, fp32 accumulation), the G heads as the
     * mma's n = 8 columns (heads >= G are zero columns, discarded):
     *   scores Sᵀ = K·qᵀ: warp w < 4 the rows 16w..16w+15, K by ldmatrix, q's fragments held;
     *   softmax: warp g < G head g (fp32), P stored as bf16 hi + lo (P = hi + lo to ~2^-16);
     *   Oᵀ += Vᵀ·Pᵀ (hi, then lo): warp w < HD/16 the dims 16w..16w+15, Vᵀ by ldmatrix.trans.
     * A lane's D fragment: rows (or dims) g8 and g8 + 8 of its 16, heads 2·t4 and 2·t4 + 1. */
    const float scale = 1.0f / sqrtf((float)HD);
    constexpr int MT = AD_T / 16, KSTEPS = HD / 16, DT = HD / 16, PS = L::PS;
    const int g8 = lane >> 2, t4 = lane & 3, h0 = 2 * t4;
    bf16 *Ph = reinterpret_cast<bf16 *>(P), *Pl = Ph + 8 * PS;
    float m_run = -INFINITY, l_run = 0.0f; /* warp g < G: head g's running state */
    float o[4] = {0.0f, 0.0f, 0.0f, 0.0f}; /* warp w < DT: Oᵀ of dims 16w.. */
    uint32_t qf[KSTEPS][2];                /* warp w < MT: q's B fragments */

    for (int t = 0; t < ntiles; t++) {
        cp_wait_group<AD_STAGES - 1>();
        sync.sync(); /* the tile landed; q, new k, v are ready */
        if (t == 0) {
            AD_STAMP(2);
            if (warp < MT) /* q rounded to bf16 after RoPE: exact in bf16 again */
#pragma unroll
                for (int kk = 0; kk < KSTEPS; kk++) {
                    const float *qg = qs + g8 * HD + kk * 16 + h0;
                    qf[kk][0] = g8 < G ? pack_bf16(qg[0], qg[1]) : 0u;
                    qf[kk][1] = g8 < G ? pack_bf16(qg[8], qg[9]) : 0u;
                }
        }
#ifdef QMM_AD_STUB_TILE /* timing only (NOTES.md row 168): the tile's bytes landed, no arithmetic */
        if (warp < G) m_run = 0.0f, l_run = 1.0f; /* outputs 0, finite */
        sync.sync();
        if (t + AD_STAGES < ntiles) load_tile(t + AD_STAGES);
        cp_commit();
        continue;
#endif
        bf16 *ks = ring + (size_t)(t % AD_STAGES) * 2 * AD_T * HD, *vs = ks + AD_T * HD;
        const int64_t r0 = start + (int64_t)t * AD_T;
        const int nvalid = (int)min((int64_t)AD_T, end - r0);
        if (owner && p < r0 + AD_T) { /* block-uniform: the new row is in this tile */
            const int row = (int)(p - r0);
            for (int d = tid; d < HD; d += AD_THREADS) {
                ks[ad_at<HD>(row, d / 8) + d % 8] = newk[d];
                vs[ad_at<HD>(row, d / 8) + d % 8] = newv[d];
            }
            sync.sync();
        }
        if (warp < MT) {
            float sc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            const int j = lane >> 3, row = warp * 16 + (j & 1) * 8 + (lane & 7);
#if AD_TWO_CHAINS /* even and odd k-steps on two accumulators: chains of KSTEPS / 2 */
            float sc2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk++) {
                uint32_t a[4];
                ldsm_x4(a, ks + ad_at<HD>(row, 2 * kk + (j >> 1)));
                mma_16816(kk % 2 ? sc2 : sc, a, qf[kk][0], qf[kk][1]);
            }
#pragma unroll
            for (int e = 0; e < 4; e++) sc[e] += sc2[e];
#else
#pragma unroll
            for (int kk = 0; kk < KSTEPS; kk++) {
                uint32_t a[4];
                ldsm_x4(a, ks + ad_at<HD>(row, 2 * kk + (j >> 1)));
                mma_16816(sc, a, qf[kk][0], qf[kk][1]);
            }
#endif
            const int ra = warp * 16 + g8, rb = ra + 8;
            if (h0 < G) {
                S[h0 * AD_T + ra] = ra < nvalid ? sc[0] * scale : -INFINITY;
                S[h0 * AD_T + rb] = rb < nvalid ? sc[2] * scale : -INFINITY;
            }
            if (h0 + 1 < G) {
                S[(h0 + 1) * AD_T + ra] = ra < nvalid ? sc[1] * scale : -INFINITY;
                S[(h0 + 1) * AD_T + rb] = rb < nvalid ? sc[3] * scale : -INFINITY;
            }
        }
        sync.sync();
        if (warp < G) { /* online softmax of head `warp` over this tile */
            const float a = S[warp * AD_T + lane], b = S[warp * AD_T + lane + 32];
            float mt = fmaxf(a, b);
            for (int o2 = 16; o2 > 0; o2 >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o2));
            const float mnew = fmaxf(m_run, mt); /* finite: every tile holds a valid row */
            const float pa = expf(a - mnew), pb = expf(b - mnew);
            float ps = pa + pb;
#if !AD_TWO_CHAINS /* the experiment keeps l a lane's own and sums the lanes after the tiles */
            for (int o2 = 16; o2 > 0; o2 >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o2);
#endif
            const float alpha = expf(m_run - mnew);
            l_run = l_run * alpha + ps;
            m_run = mnew;
            const bf16 ha = __float2bfloat16_rn(pa), hb = __float2bfloat16_rn(pb);
            Ph[warp * PS + lane] = ha;
            Ph[warp * PS + lane + 32] = hb;
            Pl[warp * PS + lane] = __float2bfloat16_rn(pa - __bfloat162float(ha));
            Pl[warp * PS + lane + 32] = __float2bfloat16_rn(pb - __bfloat162float(hb));
            if (lane == 0) alpha_s[warp] = alpha;
        }
        sync.sync();
        if (warp < DT) {
            const float al0 = h0 < G ? alpha_s[h0] : 0.0f, al1 = h0 + 1 < G ? alpha_s[h0 + 1] : 0.0f;
            o[0] *= al0, o[1] *= al1, o[2] *= al0, o[3] *= al1;
            const int j = lane >> 3;
#if AD_TWO_CHAINS /* the lo parts on a tile's own accumulator, added at the end: chains of MT */
            float ol[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#else
            float *const ol = o;
#endif
#pragma unroll
            for (int kk = 0; kk < MT; kk++) {
                uint32_t a[4];
                ldsm_x4_trans(a, vs + ad_at<HD>(kk * 16 + (j >> 1) * 8 + (lane & 7), 2 * warp + (j & 1)));
                const int pr = g8 * PS + kk * 16 + h0;
                const bool ok = g8 < G;
                mma_16816(o, a, ok ? *reinterpret_cast<const uint32_t *>(Ph + pr) : 0u,
                          ok ? *reinterpret_cast<const uint32_t *>(Ph + pr + 8) : 0u);
                mma_16816(ol, a, ok ? *reinterpret_cast<const uint32_t *>(Pl + pr) : 0u,
                          ok ? *reinterpret_cast<const uint32_t *>(Pl + pr + 8) : 0u);
            }
#if AD_TWO_CHAINS
#pragma unroll
            for (int e = 0; e < 4; e++) o[e] += ol[e];
#endif
        }
        sync.sync(); /* the stage, S and P are free again */
        if (t + AD_STAGES < ntiles) load_tile(t + AD_STAGES);
        cp_commit();
    }
    cp_wait_group<0>();
#if AD_TWO_CHAINS
    if (warp < G)
        for (int o2 = 16; o2 > 0; o2 >>= 1) l_run += __shfl_xor_sync(0xffffffffu, l_run, o2);
#endif
    if (warp < G && lane == 0) {
        m_s[warp] = m_run;
        l_s[warp] = l_run;
    }
    sync.sync();
    AD_STAMP(3);

    /* the heads' outputs (one split) or this split's partials and (m, l), from the D fragments:
     * in global memory, or in this split's SLOT for the cluster's merge */
    float *slot = reinterpret_cast<float *>(smem + L::SLOT);
    if (warp < DT)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int g = h0 + (e & 1), d = warp * 16 + g8 + (e >> 1) * 8, h = kvh * G + g;
            if (g >= G) continue;
            if (active == 1) {
                out[(int64_t)(LOCAL_OUT ? g : h) * HD + d] = __float2bfloat16_rn(o[e] / l_s[g]);
            } else if (CLUSTER) {
                slot[g * HD + d] = o[e];
                if (d == 0) {
                    slot[G * HD + 2 * g] = m_s[g];
                    slot[G * HD + 2 * g + 1] = l_s[g];
                }
            } else {
                partials[((int64_t)h * nsplit + split) * HD + d] = o[e];
                if (d == 0) {
                    float *ml = ml_all + ((int64_t)h * nsplit + split) * 2;
                    ml[0] = m_s[g];
                    ml[1] = l_s[g];
                }
            }
        }
    if (CLUSTER) return active == 1;
    if (active > 1) { /* the last block of this KV head merges the splits */
        sync.sync(); /* the block's partials are written */
        AD_STAMP(4);
        if (tid == 0) {
            /* release: this block's partials (ordered before it by the barrier) are visible
             * before its ticket; acquire: the last block sees every split's */
            unsigned *counter = reinterpret_cast<unsigned *>(&counters[kvh]);
            const unsigned ticket = qmm::atom_add_acq_rel_gpu(counter, 1u);
            *flag = (int)ticket == active - 1;
            if (*flag) counters[kvh] = 0; /* every split has arrived: ready for the next launch */
        }
        sync.sync();
        AD_STAMP(5);
        if (*flag)
            ad_merge<HD, G>(AdPartialsGlobal<HD, G>{partials, ml_all, nsplit, kvh}, active, kvh,
                            out, smem, sync, tid);
    }
    AD_STAMP(7);
    return active == 1 || *flag;
}

} // namespace qmm_llm

#endif
