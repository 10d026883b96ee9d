/*
 * The persistent decode step's kernel (decode_persistent.cu has the host side and the design).
 * One CTA a SM: warps 0..15 consume, warps 16 and 17 produce (the even and the odd stages).
 *
 * The producers walk the step's matvec phases in order and copy this CTA's pieces of each
 * weight into a ring of shared memory (one bulk copy of the 8 KB of codes, one of the 512 B of
 * scale|bias, completing on the stage's mbarrier). They never wait for activations, only for a
 * free stage, so the weights of the next phase arrive while the consumers wait for this one.
 *
 * The consumers: the two warp sets (warps 0..7, 8..15) take the even and the odd stages, warp w
 * the 16-row tile w % 8 of each piece (two chains of 4 m16n8k16 mma on the codes as 128 + q, the
 * staged activations as B); a unit's sums of the two sets are added in set order at its end.
 */
#ifndef QMM_LLM_DECODE_PERSISTENT_CUH
#define QMM_LLM_DECODE_PERSISTENT_CUH

#include <stdint.h>

#include "cuda/hopper.cuh"
#include "llm/cuda/attention_decode_block.cuh"

namespace qmm_llm {

/* two producer warps, one for the even stages and one for the odd: a bulk copy costs its issuing
 * thread ~40 dependent instructions; 18 warps get the same 96 registers a thread as 17 */
constexpr int PD_SETS = 2, PD_PRODUCERS = 2, PD_CONSUMERS = PD_SETS * 256;
constexpr int PD_THREADS = PD_CONSUMERS + 32 * PD_PRODUCERS;
constexpr int PD_PIECE_WORDS = 2048 + 128, PD_PIECE = PD_PIECE_WORDS * 4; /* codes, scale|bias */
constexpr int PD_PERM_WORDS = 80; /* one 128-column block of staged activations: 4 lanes × 20 */
constexpr int PD_PHASES = 5;      /* a layer: q|k|v, attention, o, gate|up, down */
enum { PD_STORE, PD_SWIGLU, PD_RESIDUAL };

/* One weight: its device arrays (w4_layout.h, groups of 128) and sizes in 128-blocks. */
struct PdMatrix {
    const uint32_t *packed, *sb;
    int64_t n_pad;
    int n, kb, nrb; /* rows, 128-column blocks, 128-row blocks */
};

struct PdLayer {
    PdMatrix qkv, o, gu, down;
    const bf16 *in_norm, *post_norm, *q_norm, *k_norm;
    bf16 *kc, *vc; /* the layer's cache [kv_heads, max_seq, hd] */
};

struct PdArgs {
    const PdLayer *layers;
    int L;
    PdMatrix head;
    const bf16 *final_norm;
    float *x;                  /* [H] residual */
    bf16 *q, *k, *v;           /* the q|k|v output (column ranges of one buffer) */
    bf16 *att, *act, *logits;  /* [heads·hd], [I], [vocab] */
    const float *cos_t, *sin_t;
    const int32_t *pos;
    int64_t max_seq;
    int nsplit, kvh;
    float eps;
    float *att_partials;
    int *att_counters;
    float *partials;           /* [ctas][2][128]: a CTA's first and last unit of a split row block */
    unsigned *rb_count;        /* [phases][rb_stride]: arrivals per row block (zero between steps) */
    int rb_stride;
    unsigned *done;            /* [phases + 1]: finished row blocks (KV heads) per phase; exits */
    const unsigned *first;     /* [5][ctas + 1]: q|k|v, o, gate|up, down, head */
    unsigned long long *trace; /* QMM_PD_TRACE builds: [ctas][1024][8] */
};

/* CTA c of G takes pieces [first[c], first[c + 1]) of a weight of P pieces, first[c] = P·c/G
 * (a table per weight shape, made by the host: decode_persistent.cu); the CTA holding piece p
 * (P·G < 2^32: the host checks). */
__device__ __forceinline__ int pd_owner(unsigned p, unsigned P, unsigned G) { return (int)(((p + 1) * G - 1) / P); }

/* A position in the ring: the count of pieces walked; its stage and the parity of the stage's
 * current use follow (PD_STAGES a power of two, even: a stage serves one consumer set). */
constexpr int PD_STAGES = 16;
struct PdCursor {
    uint32_t n;
    __device__ __forceinline__ int s() const { return (int)(n & (PD_STAGES - 1)); }
    __device__ __forceinline__ uint32_t par() const { return (n / PD_STAGES) & 1u; }
    __device__ __forceinline__ void next() { n++; }
};

__device__ __forceinline__ unsigned pd_ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(p) : "memory");
    return v;
}

/* Counts that other CTAs wait for: the block's writes before it (through a block barrier, then
 * this release by one thread, as CUTLASS's split-K semaphore). */
__device__ __forceinline__ void pd_red_release(unsigned *p, unsigned v)
{
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;\n" ::"l"(p), "r"(v) : "memory");
}

#ifdef QMM_PD_TRACE
/* Experiment build: consumer thread 0 stamps each phase (wait start, wait end, staged, end). */
__device__ __forceinline__ void pd_stamp(unsigned long long *trace, int ph, int what)
{
    if (trace && threadIdx.x == 0) trace[((size_t)blockIdx.x * 1024 + ph) * 8 + what] = global_ns();
}
__device__ __forceinline__ void pd_stamp_add(unsigned long long *trace, int ph, int what,
                                             unsigned long long v)
{
    if (trace && threadIdx.x == 0) trace[((size_t)blockIdx.x * 1024 + ph) * 8 + what] += v;
}
#else
__device__ __forceinline__ void pd_stamp(unsigned long long *, int, int) {}
__device__ __forceinline__ void pd_stamp_add(unsigned long long *, int, int, unsigned long long) {}
#endif

/* One thread spins until *p >= target (acquire); a bug would hang the step: trap after 30 s. */
__device__ __forceinline__ void pd_spin_until(const unsigned *p, unsigned target)
{
    const unsigned long long t0 = global_ns();
    for (unsigned i = 0; pd_ld_acquire(p) < target; i++)
        if ((i & 1023u) == 1023u && global_ns() - t0 > 30000000000ull) asm volatile("trap;");
}

/* Consumer thread 0 waits for *p >= target, then the consumers' barrier. */
__device__ __forceinline__ void pd_wait_count(const unsigned *p, unsigned target)
{
    if (threadIdx.x == 0) pd_spin_until(p, target);
    qmm::named_barrier(1, PD_CONSUMERS);
}

/* ---- the producer ---- */
struct PdRing {
    uint32_t *stages;   /* [PD_STAGES][PD_PIECE_WORDS] */
    uint64_t *full, *empty;
};

/* M by value: its fields stay in registers across the copies (whose asm clobbers memory). */
__device__ __forceinline__ void pd_produce(const PdMatrix M, const unsigned *first,
                                           const PdRing &R, PdCursor &cur, uint64_t policy, int mine)
{
    const unsigned p0 = first[blockIdx.x], p1 = first[blockIdx.x + 1];
    if (p0 == p1) return;
    int rb = (int)(p0 / (unsigned)M.kb), kb = (int)(p0 % (unsigned)M.kb);
    for (unsigned p = p0; p < p1; p++) {
        if ((cur.s() & 1) != mine) { /* the other producer's stage */
            cur.next();
            if (++kb == M.kb) kb = 0, rb++;
            continue;
        }
        qmm::mbar_wait(&R.empty[cur.s()], cur.par() ^ 1u);
        uint32_t *dst = R.stages + (size_t)cur.s() * PD_PIECE_WORDS;
        qmm::mbar_arrive_expect_tx(&R.full[cur.s()], PD_PIECE);
        qmm::bulk_copy(dst, M.packed + ((int64_t)rb * M.kb + kb) * 2048, 8192, &R.full[cur.s()], policy);
        qmm::bulk_copy(dst + 2048, M.sb + (int64_t)kb * M.n_pad + rb * 128, 512, &R.full[cur.s()], policy);
        cur.next();
        if (++kb == M.kb) kb = 0, rb++;
    }
}

__device__ void pd_producer(const PdArgs &a, const PdRing &R, const unsigned *first)
{
    if ((threadIdx.x & 31) != 0) return;
    const int mine = (threadIdx.x - PD_CONSUMERS) >> 5; /* this warp's stages: s % 2 == mine */
    const uint64_t policy = qmm::policy_evict_first();
    const int F = gridDim.x + 1;
    PdCursor cur = {0u};
    for (int l = 0; l < a.L; l++) {
        const PdLayer *ly = a.layers + l;
        pd_produce(ly->qkv, first, R, cur, policy, mine);
        pd_produce(ly->o, first + F, R, cur, policy, mine);
        pd_produce(ly->gu, first + 2 * F, R, cur, policy, mine);
        pd_produce(ly->down, first + 3 * F, R, cur, policy, mine);
    }
    pd_produce(a.head, first + 4 * F, R, cur, policy, mine);
}

/* ---- the consumers ---- */
/* The consumers' shared memory besides the ring. */
struct PdSmem {
    unsigned char *uni;  /* the attention's layout, or the staged input */
    uint32_t *aperm;     /* [kb][PD_PERM_WORDS] activations in fragment order (in uni) */
    float *asum;         /* [kb] Σ of each block's activations (in uni, after aperm) */
    float *ys;           /* [2][128] the sets' sums of a unit, then the row block's result */
    float *red;          /* [32] reductions */
    float *own;          /* [128] this CTA's part of the row block it finishes */
};

__device__ __forceinline__ uint32_t pd_codes(uint32_t w, uint32_t magic)
{
    uint32_t d;
    asm("lop3.b32 %0, %1, 0x000F000F, %2, 0xEA;\n" : "=r"(d) : "r"(w), "r"(magic)); /* (a & b) | c */
    return d;
}

__device__ __forceinline__ void pd_mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                       uint32_t a3, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* One piece for the warp's 16-row tile: ylo (row g8), yhi (row g8 + 8) += s·(P − 128·Σa) + b·Σa,
 * P = Σ a·(128 + q) over the block's 128 columns. */
__device__ __forceinline__ void pd_piece(const uint32_t *stage, const uint32_t *aperm, float sa,
                                         int tile, float &ylo, float &yhi)
{
    const int lane = threadIdx.x & 31, g8 = lane >> 2, t = lane & 3;
    const uint4 lo = *reinterpret_cast<const uint4 *>(stage + (tile * 16 + g8) * 16 + 4 * t);
    const uint4 hi = *reinterpret_cast<const uint4 *>(stage + (tile * 16 + g8 + 8) * 16 + 4 * t);
    const uint32_t sl = stage[2048 + tile * 16 + g8], sh = stage[2048 + tile * 16 + g8 + 8];
    const uint4 *ap = reinterpret_cast<const uint4 *>(aperm + t * 20);
    const uint4 b0 = ap[0], b1 = ap[1], b2 = ap[2], b3 = ap[3];
    const uint32_t bw[16] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w,
                             b2.x, b2.y, b2.z, b2.w, b3.x, b3.y, b3.z, b3.w};
    const uint32_t wl[4] = {lo.x, lo.y, lo.z, lo.w}, wh[4] = {hi.x, hi.y, hi.z, hi.w};
    const uint32_t magic = 0x43004300u;
    float d0[4] = {0.f, 0.f, 0.f, 0.f}, d1[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
    for (int c = 0; c < 8; c++) {
        const int sh0 = 8 * (c & 1);
        const uint32_t a0 = pd_codes(wl[c >> 1] >> sh0, magic), a1 = pd_codes(wh[c >> 1] >> sh0, magic);
        const uint32_t a2 = pd_codes(wl[c >> 1] >> (sh0 + 4), magic),
                       a3 = pd_codes(wh[c >> 1] >> (sh0 + 4), magic);
        if (c & 1)
            pd_mma(d1, a0, a1, a2, a3, bw[2 * c], bw[2 * c + 1]);
        else
            pd_mma(d0, a0, a1, a2, a3, bw[2 * c], bw[2 * c + 1]);
    }
    const float off = 128.f * sa;
    const float plo = d0[0] + d1[0] - off, phi = d0[2] + d1[2] - off;
    ylo += fmaf(__uint_as_float(sl << 16), plo, __uint_as_float(sl & 0xFFFF0000u) * sa);
    yhi += fmaf(__uint_as_float(sh << 16), phi, __uint_as_float(sh & 0xFFFF0000u) * sa);
}

/* The input of a matvec phase into shared memory: x normed with gamma (RMSNorm as
 * llm_rmsnorm_row; k <= PD_NORM_MAX) when x, else the bf16 vector in; k columns, in fragment
 * order with each 128-block's Σ. All consumer threads; one round trip to L2 (x is held in
 * registers while Σx² is reduced). */
constexpr int PD_NORM_MAX = 4 * 128 * (PD_CONSUMERS / 32);

__device__ __forceinline__ void pd_put_block(const PdSmem &S, int kb, const float (&v)[4])
{
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const __nv_bfloat162 pr = __floats2bfloat162_rn(v[2 * h], v[2 * h + 1]);
        const int w = 2 * lane + h, c = w >> 3, r = w & 7;
        S.aperm[kb * PD_PERM_WORDS + (r & 3) * 20 + 2 * c + (r >> 2)] =
            *reinterpret_cast<const uint32_t *>(&pr);
    }
    float s = (v[0] + v[1]) + (v[2] + v[3]);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) S.asum[kb] = s;
}

/* γ of a warp's blocks (warp, warp + W, ...), read before the phase's wait: weights. */
struct PdGamma {
    __nv_bfloat162 v[4][2];
};
__device__ __forceinline__ void pd_load_gamma(const bf16 *gamma, int k, PdGamma &g)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nkb = k / 128;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int kb = warp + i * (PD_CONSUMERS / 32);
        if (kb < nkb) {
            const __nv_bfloat162 *g2 = reinterpret_cast<const __nv_bfloat162 *>(gamma + kb * 128) + 2 * lane;
            g.v[i][0] = g2[0], g.v[i][1] = g2[1];
        }
    }
}

__device__ void pd_stage_norm(const float *x, const PdGamma &g, int k, float eps, const PdSmem &S)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    constexpr int W = PD_CONSUMERS / 32;
    const int nkb = k / 128;
    float4 xv[4];
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int kb = warp + i * W;
        xv[i] = kb < nkb ? __ldcg(reinterpret_cast<const float4 *>(x + kb * 128) + lane)
                         : make_float4(0.f, 0.f, 0.f, 0.f);
        ss += xv[i].x * xv[i].x + xv[i].y * xv[i].y + xv[i].z * xv[i].z + xv[i].w * xv[i].w;
    }
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) S.red[warp] = ss;
    qmm::named_barrier(1, PD_CONSUMERS);
    float tot = 0.f;
    for (int w = 0; w < W; w++) tot += S.red[w];
    const float inv = 1.0f / sqrtf(tot / (float)k + eps);
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int kb = warp + i * W;
        if (kb >= nkb) break;
        const float xs[4] = {xv[i].x, xv[i].y, xv[i].z, xv[i].w};
        const float gs[4] = {__low2float(g.v[i][0]), __high2float(g.v[i][0]),
                             __low2float(g.v[i][1]), __high2float(g.v[i][1])};
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++)
            v[e] = __bfloat162float(__float2bfloat16_rn(__fmul_rn(__fmul_rn(xs[e], inv), gs[e])));
        pd_put_block(S, kb, v);
    }
    qmm::named_barrier(1, PD_CONSUMERS);
}

/* The bf16 input: a warp's blocks loaded eight at a time before any is stored (one round trip
 * for K <= 128 · 8 · 16). */
__device__ void pd_stage_plain(const bf16 *in, int k, const PdSmem &S)
{
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    constexpr int W = PD_CONSUMERS / 32;
    const int nkb = k / 128;
    for (int base = warp; base < nkb; base += 8 * W) {
        uint2 raw[8];
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int kb = base + i * W;
            if (kb < nkb) raw[i] = __ldcg(reinterpret_cast<const uint2 *>(in + kb * 128) + lane);
        }
#pragma unroll
        for (int i = 0; i < 8; i++) {
            const int kb = base + i * W;
            if (kb >= nkb) break;
            const __nv_bfloat162 p01 = *reinterpret_cast<const __nv_bfloat162 *>(&raw[i].x);
            const __nv_bfloat162 p23 = *reinterpret_cast<const __nv_bfloat162 *>(&raw[i].y);
            const float v[4] = {__low2float(p01), __high2float(p01), __low2float(p23), __high2float(p23)};
            pd_put_block(S, kb, v);
        }
    }
    qmm::named_barrier(1, PD_CONSUMERS);
}

/* The row block's result y (S.ys[0..127], after a consumer barrier) into the output: a bf16
 * store, SwiGLU of the block's 64 gate | 64 up rows, or the residual add. */
__device__ __forceinline__ void pd_epilogue(const PdMatrix &M, int epi, bf16 *c, float *x, int rb,
                                            const float *y)
{
    const int tid = threadIdx.x;
    if (epi == PD_SWIGLU) {
        const int j = rb * 64 + tid;
        if (tid < 64 && j < M.n / 2) {
            const float g = __bfloat162float(__float2bfloat16_rn(y[tid]));
            const float u = __bfloat162float(__float2bfloat16_rn(y[64 + tid]));
            c[j] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
        }
        return;
    }
    const int row = rb * 128 + tid;
    if (tid >= 128 || row >= M.n) return;
    if (epi == PD_STORE)
        c[row] = __float2bfloat16_rn(y[tid]);
    else
        x[row] = __ldcg(x + row) + __bfloat162float(__float2bfloat16_rn(y[tid]));
}

/* The ends of units. A row block whose pieces all belong to this CTA (whole) goes straight to
 * the epilogue. Otherwise its CTAs are c0 < ... < c1 (those of [c0, c1] with pieces); each but
 * c1 writes its part to its slot (0: its first unit, 1: its last) and counts it on the row
 * block's counter, without waiting; c1, whose first unit it is, keeps its part in shared memory
 * and, after its other pieces, waits for the others' parts and adds all in CTA order. Either way
 * the row block then counts as done for the phase. All consumer threads, S.ys holding the sets'
 * sums of the unit. */
__device__ __forceinline__ void pd_unit_whole(const PdArgs &a, const PdMatrix &M, int epi, bf16 *c,
                                              int ph, int rb, const PdSmem &S)
{
    const int tid = threadIdx.x;
    if (tid < 128) S.ys[tid] += S.ys[128 + tid];
    qmm::named_barrier(1, PD_CONSUMERS);
    pd_epilogue(M, epi, c, a.x, rb, S.ys);
    qmm::named_barrier(1, PD_CONSUMERS);
    if (tid == 0) pd_red_release(a.done + ph, 1u);
}

__device__ __forceinline__ void pd_unit_part(const PdArgs &a, const PdMatrix &M,
                                             const unsigned *first, int ph, int rb, const PdSmem &S)
{
    const int tid = threadIdx.x, cta = blockIdx.x;
    const int slot = (unsigned)rb == first[cta] / (unsigned)M.kb ? 0 : 1;
    if (tid < 128) __stcg(a.partials + ((int64_t)cta * 2 + slot) * 128 + tid, S.ys[tid] + S.ys[128 + tid]);
    qmm::named_barrier(1, PD_CONSUMERS);
    if (tid == 0) pd_red_release(a.rb_count + (int64_t)ph * a.rb_stride + rb, 1u);
}

/* c1's part of its first row block: kept for the fixup at the phase's end. */
__device__ __forceinline__ void pd_unit_keep(const PdSmem &S)
{
    const int tid = threadIdx.x;
    if (tid < 128) S.own[tid] = S.ys[tid] + S.ys[128 + tid];
}

__device__ void pd_fixup(const PdArgs &a, const PdMatrix &M, const unsigned *first, int epi,
                         bf16 *c, int ph, int rb, const PdSmem &S)
{
    const int tid = threadIdx.x, G = gridDim.x, cta = blockIdx.x;
    const unsigned P = (unsigned)M.nrb * (unsigned)M.kb, KB = (unsigned)M.kb;
    const int c0 = pd_owner(rb * KB, P, G);
    unsigned *cnt = a.rb_count + (int64_t)ph * a.rb_stride + rb;
    if (tid == 0) {
        unsigned others = 0;
        for (int cc = c0; cc < cta; cc++) others += first[cc] < first[cc + 1];
        pd_spin_until(cnt, others);
        *cnt = 0; /* every part arrived: ready for the next step */
    }
    qmm::named_barrier(1, PD_CONSUMERS);
    if (tid < 128) {
        float y = 0.f;
        for (int cc = c0; cc < cta; cc++) {
            const unsigned f = first[cc];
            if (f == first[cc + 1]) continue;
            const int sl = (unsigned)rb == f / KB ? 0 : 1;
            y += __ldcg(a.partials + ((int64_t)cc * 2 + sl) * 128 + tid);
        }
        S.ys[tid] = y + S.own[tid];
    }
    qmm::named_barrier(1, PD_CONSUMERS);
    pd_epilogue(M, epi, c, a.x, rb, S.ys);
    qmm::named_barrier(1, PD_CONSUMERS);
    if (tid == 0) pd_red_release(a.done + ph, 1u);
}

/* One matvec phase of the consumers: γ (a weight) read, the wait for the phase before
 * (wait_ph < 0: none), the input staged, then this CTA's pieces from the ring; cur walks the
 * ring as the producer does. */
__device__ PdCursor pd_matvec(const PdArgs &a, const PdMatrix M, const unsigned *first, int epi,
                              bf16 *c, int ph, int wait_ph, unsigned wait_target,
                              const bf16 *gamma, const bf16 *in, const PdRing R, PdCursor cur,
                              const PdSmem S)
{
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int tile = warp & 7, set = warp >> 3;
    const unsigned p0 = first[blockIdx.x], p1 = first[blockIdx.x + 1];
    if (p0 == p1) return cur;
    pd_stamp(a.trace, ph, 0);
    if (a.trace && threadIdx.x == 0) a.trace[((size_t)blockIdx.x * 1024 + ph) * 8 + 5] = 0;
    PdGamma g;
    if (gamma) pd_load_gamma(gamma, M.kb * 128, g);
    if (wait_ph >= 0) pd_wait_count(a.done + wait_ph, wait_target);
    pd_stamp(a.trace, ph, 1);
    if (gamma)
        pd_stage_norm(a.x, g, M.kb * 128, a.eps, S);
    else
        pd_stage_plain(in, M.kb * 128, S);
    pd_stamp(a.trace, ph, 2);
    float ylo = 0.f, yhi = 0.f;
    int rb = (int)(p0 / (unsigned)M.kb), kb = (int)(p0 % (unsigned)M.kb), kb0 = kb;
    int owned = -1; /* the row block this CTA finishes at the end (c1 of it) */
    for (unsigned p = p0; p < p1; p++) {
        /* a stage always serves the same set (even stage count): a set waiting for a stage's
         * use u has consumed its use u - 1, so the parity cannot alias an older phase */
        if ((cur.s() & 1) == set) {
#ifdef QMM_PD_TRACE
            const unsigned long long tw = global_ns();
            qmm::mbar_wait(&R.full[cur.s()], cur.par());
            pd_stamp_add(a.trace, ph, 5, global_ns() - tw);
#else
            qmm::mbar_wait(&R.full[cur.s()], cur.par());
#endif
            pd_piece(R.stages + (size_t)cur.s() * PD_PIECE_WORDS, S.aperm + kb * PD_PERM_WORDS,
                     S.asum[kb], tile, ylo, yhi);
            __syncwarp();
            if (lane == 0) qmm::mbar_arrive(&R.empty[cur.s()]);
        }
        cur.next();
        if (kb == M.kb - 1 || p == p1 - 1) { /* the unit ends */
            if ((lane & 3) == 0) {
                S.ys[set * 128 + tile * 16 + (lane >> 2)] = ylo;
                S.ys[set * 128 + tile * 16 + (lane >> 2) + 8] = yhi;
            }
            ylo = yhi = 0.f;
            qmm::named_barrier(1, PD_CONSUMERS);
            if (kb0 == 0 && kb == M.kb - 1) {
                pd_unit_whole(a, M, epi, c, ph, rb, S);
            } else if (kb == M.kb - 1) {
                pd_unit_keep(S);
                owned = rb;
            } else {
                pd_unit_part(a, M, first, ph, rb, S);
            }
            qmm::named_barrier(1, PD_CONSUMERS); /* ys is free again */
        }
        if (++kb == M.kb) kb = 0, kb0 = 0, rb++;
    }
    pd_stamp(a.trace, ph, 4);
    if (owned >= 0) pd_fixup(a, M, first, epi, c, ph, owned, S);
    pd_stamp(a.trace, ph, 3);
    return cur;
}

/* The attention's barrier among warps 0..7, and its wait for the q|k|v phase: the block asks for
 * its first K/V tiles (rows of earlier steps) and tables before it. */
struct PdAttnSync {
    const unsigned *done;
    unsigned target;
    __device__ void sync() const { qmm::named_barrier(2, 256); }
    __device__ void wait() const
    {
        if (threadIdx.x == 0) pd_spin_until(done, target);
    }
#ifdef QMM_AD_TRACE
    __device__ void phase(int) const {} /* the fused kernel's trace only */
#endif
};

template <int HD, int G>
__device__ void pd_attention(const PdArgs &a, const PdLayer *ly, int ph, unsigned wait_target,
                             const PdSmem &S)
{
    pd_stamp(a.trace, ph, 0);
    pd_stamp(a.trace, ph, 1);
    if (threadIdx.x >= 256) return;
    const int units = a.kvh * a.nsplit;
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const bool wrote = attn_decode_block<HD, G>(
            a.q, a.k, a.v, ly->q_norm, ly->k_norm, a.cos_t, a.sin_t, a.eps, a.pos, a.max_seq,
            a.nsplit, ly->kc, ly->vc, a.att_partials, a.att_counters, a.att, u % a.kvh, u / a.kvh,
            a.kvh, S.uni, PdAttnSync{a.done + ph - 1, wait_target});
        qmm::named_barrier(2, 256); /* the outputs are written; the shared memory is free */
        if (wrote && threadIdx.x == 0) pd_red_release(a.done + ph, 1u);
    }
    pd_stamp(a.trace, ph, 3);
}

template <int HD, int G>
__global__ void __launch_bounds__(PD_THREADS, 1) pd_decode_kernel(const PdArgs a)
{
    extern __shared__ __align__(128) unsigned char smem[];
    PdRing R;
    R.stages = reinterpret_cast<uint32_t *>(smem);
    R.full = reinterpret_cast<uint64_t *>(smem + (size_t)PD_STAGES * PD_PIECE);
    R.empty = R.full + PD_STAGES;
    PdSmem S;
    S.ys = reinterpret_cast<float *>(R.empty + PD_STAGES);
    S.red = S.ys + 256;
    S.own = S.red + 32;
    unsigned *first = reinterpret_cast<unsigned *>(S.own + 128); /* a.first, copied */
    const int F = gridDim.x + 1;
    S.uni = reinterpret_cast<unsigned char *>(first + (5 * F + 3) / 4 * 4);
    S.aperm = reinterpret_cast<uint32_t *>(S.uni);
    int kb_max = a.head.kb;
    for (int l = 0; l < a.L; l++) {
        const PdLayer *ly = a.layers + l;
        kb_max = max(kb_max, max(max(ly->qkv.kb, ly->o.kb), max(ly->gu.kb, ly->down.kb)));
    }
    S.asum = reinterpret_cast<float *>(S.aperm + kb_max * PD_PERM_WORDS);

    pd_stamp(a.trace, 1023, 0);
    if (threadIdx.x == 0) {
        for (int i = 0; i < PD_STAGES; i++) {
            qmm::mbar_init(&R.full[i], 1);
            qmm::mbar_init(&R.empty[i], 8);
        }
        qmm::mbar_fence_init();
    }
    for (int i = threadIdx.x; i < 5 * F; i += blockDim.x) first[i] = a.first[i];
    __syncthreads();
    if (threadIdx.x >= PD_CONSUMERS) {
        pd_producer(a, R, first);
        return;
    }

    PdCursor cur = {0u};
    int prev = -1;              /* the phase this one waits for */
    unsigned prev_target = 0;
    for (int l = 0; l < a.L; l++) {
        const PdLayer *ly = a.layers + l;
        const int ph = l * PD_PHASES;
        cur = pd_matvec(a, ly->qkv, first, PD_STORE, a.q, ph, prev, prev_target, ly->in_norm, nullptr, R,
                  cur, S);
        pd_attention<HD, G>(a, ly, ph + 1, (unsigned)ly->qkv.nrb, S);
        cur = pd_matvec(a, ly->o, first + F, PD_RESIDUAL, nullptr, ph + 2, ph + 1, (unsigned)a.kvh,
                  nullptr, a.att, R, cur, S);
        cur = pd_matvec(a, ly->gu, first + 2 * F, PD_SWIGLU, a.act, ph + 3, ph + 2, (unsigned)ly->o.nrb,
                  ly->post_norm, nullptr, R, cur, S);
        cur = pd_matvec(a, ly->down, first + 3 * F, PD_RESIDUAL, nullptr, ph + 4, ph + 3,
                  (unsigned)ly->gu.nrb, nullptr, a.act, R, cur, S);
        prev = ph + 4;
        prev_target = (unsigned)ly->down.nrb;
    }
    const int last = a.L * PD_PHASES;
    cur = pd_matvec(a, a.head, first + 4 * F, PD_STORE, a.logits, last, prev, prev_target, a.final_norm,
              nullptr, R, cur, S);

    /* the last CTA out clears the phase counters for the next step */
    qmm::named_barrier(1, PD_CONSUMERS);
    if (threadIdx.x == 0 && qmm::atom_add_acq_rel_gpu(a.done + last + 1, 1u) == gridDim.x - 1)
        for (int i = 0; i <= last + 1; i++) a.done[i] = 0;
}

} // namespace qmm_llm

#endif
