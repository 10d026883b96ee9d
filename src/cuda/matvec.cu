/*
 * Decode path: C[M, N] = A[M, K] · Wᵀ for M <= 16, built for the memory-bandwidth limit (on the
 * H200 it takes about twice the time of a kernel that only reads the weight: bench/NOTES.md).
 *
 * The weight is a sequence of units, one unit = one 128-row block × one group of 128 columns:
 * 8 KB of codes, contiguous in the device layout (w4_layout.h), in row-block-major order, so the
 * whole weight is units 0..U-1 one after another. The grid (MV_MIN_UNITS units a CTA at least,
 * at most the CTAs that fit at once) splits the units into equal contiguous ranges (stream-K).
 * In a CTA one producer thread keeps a ring of STAGES units in flight with bulk copies (the codes,
 * the unit's 128 scale|bias words, and the M activation rows of its group), the weights issued
 * before griddepcontrol.wait (they never depend on the previous kernel); eight consumer warps take
 * 16 rows each from shared memory. Codes enter the mma as the exact bf16 values 128 + q, and an
 * mma of all-ones weights gives Σa, so per group
 *   Σ a·w = s·Σ a·q + b·Σ a = s·P + (b − 128·s)·Σa          (fp32, no weight rounded).
 * A row block finished inside one CTA is written by it; one shared by several CTAs (at most the
 * first and last piece of a range) is summed by the last of them to arrive, from every CTA's
 * fp32 partial in CTA order: deterministic for a given grid, no second launch.
 * Epilogues (the engine's fused decode step): store; residual (x += bf16(y) in fp32, and the
 * next RMSNorm's inputs: bf16(x·γ) and Σx² per row block); SwiGLU over a gate|up weight whose
 * row blocks hold 64 gate rows then the same 64 up rows. With a norm source the result is scaled
 * by 1/sqrt(mean(x²) + eps) from those per-block sums (RMSNorm folded into the matmul).
 */
#include "kernels.h"
#include "hopper.cuh"
#include "w4_layout.h"

namespace qmm {

constexpr int MV_CONSUMERS = 8;                       /* warps, 16·MV_RT rows each */
constexpr int MV_RT = 128 / 16 / MV_CONSUMERS;          /* 16-row tiles a consumer warp */
constexpr int MV_CT = MV_CONSUMERS * 32;                /* consumer threads */
constexpr int MV_THREADS = (MV_CONSUMERS + 1) * 32;   /* + the producer warp */
constexpr int MV_STAGES = 4;
constexpr int MV_UNIT_BYTES = 128 * 64;               /* 128 rows × 64 bytes of codes */
constexpr int MV_SB_BYTES = 128 * 4;
constexpr int MV_A_STRIDE = 136;                      /* bf16 per staged row: 128 + 8 (banks) */

template <int TOKT> struct MvSmem {
    static constexpr int TOKS = 8 * TOKT;
    static constexpr int STAGE = MV_UNIT_BYTES + MV_SB_BYTES + TOKS * MV_A_STRIDE * 2;
    static constexpr size_t bytes = (size_t)MV_STAGES * STAGE + TOKS * 128 * sizeof(float) + 256;
};

/* CTA c takes units [first(c), first(c+1)): `per` each, one more for the first `rem` CTAs
 * (32-bit: a 64-bit division is a ~100-instruction call). */
struct MvSplit {
    int per, rem;
    __device__ __forceinline__ int first(int c) const { return c * per + (c < rem ? c : rem); }
    __device__ __forceinline__ int cta_of(int u) const
    {
        const int big = rem * (per + 1);
        return u < big ? u / (per + 1) : rem + (u - big) / per;
    }
};

/* The epilogue of one row block from its fp32 sums ys[tok][r] (r < 128), by the consumer
 * threads. */
template <int TOKS>
__device__ void mv_epilogue(const MatvecArgs &p, const float (*ys)[128], const float *inv, int rb,
                            int tid)
{
    const int m = p.m, row0 = rb * 128;
    if (p.epi == MV_EPI_SWIGLU) {
        for (int e = tid; e < m * 64; e += MV_CT) {
            int t = e / 64, r = e % 64;
            int j = rb * 64 + r;
            if (j >= p.n / 2) continue;
            float g = __bfloat162float(__float2bfloat16_rn(ys[t][r] * inv[t]));
            float u = __bfloat162float(__float2bfloat16_rn(ys[t][r + 64] * inv[t]));
            p.c[(int64_t)t * p.ldc + j] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
        }
        return;
    }
    if (p.epi == MV_EPI_STORE) {
        for (int e = tid; e < m * 128; e += MV_CT) {
            int t = e / 128, r = e % 128;
            if (row0 + r < p.n)
                p.c[(int64_t)t * p.ldc + row0 + r] = __float2bfloat16_rn(ys[t][r] * inv[t]);
        }
        return;
    }
    /* residual: x (fp32) += bf16(y); xg = bf16(x·γ); ss[t][rb] = Σ x² over the block's rows.
     * Warp w takes tokens w, w + MV_CONSUMERS, ...: each lane 4 rows, then a warp sum (fixed
     * order). */
    const int warp = tid / 32, lane = tid % 32;
    for (int t = warp; t < m; t += MV_CONSUMERS) {
        float ss = 0.f;
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int r = lane + 32 * i, row = row0 + r;
            if (row >= p.n) continue;
            float y = __bfloat162float(__float2bfloat16_rn(ys[t][r] * inv[t]));
            float *xp = p.x + (int64_t)t * p.ldc + row;
            float x = *xp + y;
            *xp = x;
            ss += x * x;
            if (p.xg) p.xg[(int64_t)t * p.ldc + row] = __float2bfloat16_rn(x * __bfloat162float(p.gamma[row]));
        }
#pragma unroll
        for (int o = 16; o > 0; o /= 2) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        if (lane == 0 && p.ss_out) p.ss_out[(int64_t)t * p.ss_out_blocks + rb] = ss;
    }
}

template <int TOKT>
__global__ __launch_bounds__(MV_THREADS, TOKT == 1 ? 3 : 2) void matvec_kernel(const MatvecArgs p)
{
    constexpr int TOKS = 8 * TOKT;
    using S = MvSmem<TOKT>;
    extern __shared__ __align__(128) unsigned char smem[];
    float(*ys)[128] = reinterpret_cast<float(*)[128]>(smem + MV_STAGES * S::STAGE);
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + MV_STAGES * S::STAGE + TOKS * 128 * 4);
    uint64_t *empty = full + MV_STAGES;
    float *inv = reinterpret_cast<float *>(empty + MV_STAGES); /* [16] */
    int *flag = reinterpret_cast<int *>(inv + 16);

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int groups = p.k / 128;
    const MvSplit split = {p.units_per_cta, p.units_rem};
    const int u_begin = split.first(blockIdx.x), count = split.first(blockIdx.x + 1) - u_begin;
    const int rb_begin = u_begin / groups, g_begin = u_begin % groups;

    if (threadIdx.x == 0) {
        for (int s = 0; s < MV_STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], MV_CONSUMERS);
        }
        mbar_fence_init();
    }
    /* token rows of the ring beyond M stay zero (they feed only discarded columns) */
    for (int i = threadIdx.x; i < MV_STAGES * TOKS * MV_A_STRIDE / 2; i += MV_THREADS) {
        int s = i / (TOKS * MV_A_STRIDE / 2), w = i % (TOKS * MV_A_STRIDE / 2);
        if (w / (MV_A_STRIDE / 2) >= p.m)
            reinterpret_cast<uint32_t *>(smem + s * S::STAGE + MV_UNIT_BYTES + MV_SB_BYTES)[w] = 0u;
    }
    __syncthreads();

    if (warp == MV_CONSUMERS) { /* producer */
        if (lane == 0) {
            const uint64_t pol = policy_evict_first();
            const uint32_t a_bytes = (uint32_t)p.m * 256u;
            const int first = count < MV_STAGES ? count : MV_STAGES;
            /* weights of the first units before the dependency wait */
            int rb = rb_begin, g = g_begin;
            for (int i = 0; i < first; i++) {
                unsigned char *st = smem + i * S::STAGE;
                mbar_arrive_expect_tx(&full[i], MV_UNIT_BYTES + MV_SB_BYTES + a_bytes);
                bulk_copy(st, p.packed + (int64_t)(u_begin + i) * 2048, MV_UNIT_BYTES, &full[i], pol);
                bulk_copy(st + MV_UNIT_BYTES, p.sb + (int64_t)g * p.n_pad + rb * 128, MV_SB_BYTES,
                          &full[i], pol);
                if (++g == groups) g = 0, rb++;
            }
            pdl_wait();
            rb = rb_begin, g = g_begin;
            for (int i = 0; i < count; i++) {
                const int s = i % MV_STAGES;
                unsigned char *st = smem + s * S::STAGE;
                if (i >= first) {
                    mbar_wait(&empty[s], ((i / MV_STAGES) - 1) & 1);
                    mbar_arrive_expect_tx(&full[s], MV_UNIT_BYTES + MV_SB_BYTES + a_bytes);
                    bulk_copy(st, p.packed + (int64_t)(u_begin + i) * 2048, MV_UNIT_BYTES, &full[s],
                              pol);
                    bulk_copy(st + MV_UNIT_BYTES, p.sb + (int64_t)g * p.n_pad + rb * 128,
                              MV_SB_BYTES, &full[s], pol);
                }
                unsigned char *as = st + MV_UNIT_BYTES + MV_SB_BYTES;
                for (int t = 0; t < p.m; t++)
                    bulk_copy_plain(as + t * MV_A_STRIDE * 2, p.a + (int64_t)t * p.lda + g * 128,
                                    256, &full[s]);
                if (++g == groups) g = 0, rb++;
            }
            pdl_launch_dependents(); /* the next kernel may start its weight copies */
        }
        return;
    }

    /* consumers: warp w owns the 16·MV_RT rows from 16·MV_RT·w of every unit */
    pdl_wait(); /* the partials, counters and outputs may be in use by the previous kernel */
    const int g8 = lane / 4, t4 = lane % 4, tid = threadIdx.x;
    if (tid < p.m) { /* RMSNorm of the input rows from their Σx², one per producer row block */
        float ss = 0.f;
        if (p.ss_in)
            for (int j = 0; j < p.ss_blocks; j++) ss += p.ss_in[(int64_t)tid * p.ss_blocks + j];
        inv[tid] = p.ss_in ? 1.0f / sqrtf(ss / (float)p.norm_dim + p.eps) : 1.0f;
    }
    named_barrier(1, MV_CT);
    float acc[MV_RT][TOKT][4];
    zero_frags(acc);
    int rb = rb_begin, g = g_begin;
    for (int i = 0; i < count; i++, g++) {
        if (g == groups) g = 0, rb++;
        const int s = i % MV_STAGES;
        const unsigned char *st = smem + s * S::STAGE;
        mbar_wait(&full[s], (i / MV_STAGES) & 1);
        const uint32_t *wq = reinterpret_cast<const uint32_t *>(st);
        const uint32_t *sbs = reinterpret_cast<const uint32_t *>(st + MV_UNIT_BYTES);
        const __nv_bfloat16 *as = reinterpret_cast<const __nv_bfloat16 *>(st + MV_UNIT_BYTES + MV_SB_BYTES);
        uint4 lo[MV_RT], hi[MV_RT];
        uint32_t sb_lo[MV_RT], sb_hi[MV_RT];
#pragma unroll
        for (int rt = 0; rt < MV_RT; rt++) {
            const int row = (MV_RT * warp + rt) * 16 + g8;
            lo[rt] = *reinterpret_cast<const uint4 *>(wq + row * 16 + 4 * t4);
            hi[rt] = *reinterpret_cast<const uint4 *>(wq + (row + 8) * 16 + 4 * t4);
            sb_lo[rt] = sbs[row];
            sb_hi[rt] = sbs[row + 8];
        }
        /* two chains (even and odd chunks) of each sum, added at the end: shorter mma chains */
        float pq[2][MV_RT][TOKT][4], sa[2][TOKT][4];
        zero_frags(pq[0]);
        zero_frags(pq[1]);
        zero_frags(sa);
#pragma unroll
        for (int c2 = 0; c2 < 4; c2++) { /* chunks 2·c2 and 2·c2 + 1 */
            uint32_t b[TOKT][4];
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++) {
                const int r = tt * 8 + (lane % 8);
                const int col = 32 * c2 + 16 * (lane / 16) + 8 * ((lane / 8) % 2);
                ldmatrix_x4(b[tt][0], b[tt][1], b[tt][2], b[tt][3], as + r * MV_A_STRIDE + col);
            }
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int rt = 0; rt < MV_RT; rt++) {
                    const uint32_t wl = c2 == 0 ? lo[rt].x : c2 == 1 ? lo[rt].y : c2 == 2 ? lo[rt].z : lo[rt].w;
                    const uint32_t wh = c2 == 0 ? hi[rt].x : c2 == 1 ? hi[rt].y : c2 == 2 ? hi[rt].z : hi[rt].w;
                    const uint32_t a0 = codes_128(wl, 8 * h), a2 = codes_128(wl, 8 * h + 4);
                    const uint32_t a1 = codes_128(wh, 8 * h), a3 = codes_128(wh, 8 * h + 4);
#pragma unroll
                    for (int tt = 0; tt < TOKT; tt++)
                        mma_bf16_16816(pq[h][rt][tt], a0, a1, a2, a3, b[tt][2 * h], b[tt][2 * h + 1]);
                }
                const uint32_t one2 = 0x3F803F80u;
#pragma unroll
                for (int tt = 0; tt < TOKT; tt++)
                    mma_bf16_16816(sa[h][tt], one2, one2, one2, one2, b[tt][2 * h], b[tt][2 * h + 1]);
            }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(&empty[s]); /* the stage is read into registers */
#pragma unroll
        for (int rt = 0; rt < MV_RT; rt++) {
            const float sl = bf16_lo(sb_lo[rt]), bl = bf16_hi(sb_lo[rt]) - 128.f * sl;
            const float sh = bf16_lo(sb_hi[rt]), bh = bf16_hi(sb_hi[rt]) - 128.f * sh;
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++) {
                float q[4], a[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    q[e] = pq[0][rt][tt][e] + pq[1][rt][tt][e];
                    a[e] = sa[0][tt][e] + sa[1][tt][e];
                }
                acc[rt][tt][0] += sl * q[0] + bl * a[0];
                acc[rt][tt][1] += sl * q[1] + bl * a[1];
                acc[rt][tt][2] += sh * q[2] + bh * a[2];
                acc[rt][tt][3] += sh * q[3] + bh * a[3];
            }
        }

        /* the end of a row block's piece in this CTA: its output, or its partial */
        if (g != groups - 1 && i != count - 1) continue;
        const int c_first = split.cta_of(rb * groups);
        const int c_last = split.cta_of(rb * groups + groups - 1);
        const bool alone = c_first == c_last;
        const int slot = rb == rb_begin ? 0 : 1; /* first or last piece of the range */
        float *mine = p.partials + ((int64_t)blockIdx.x * 2 + slot) * TOKS * 128;
#pragma unroll
        for (int rt = 0; rt < MV_RT; rt++)
#pragma unroll
            for (int tt = 0; tt < TOKT; tt++) {
                const int r = (MV_RT * warp + rt) * 16 + g8, t = tt * 8 + 2 * t4;
                if (alone) {
                    ys[t][r] = acc[rt][tt][0];
                    ys[t + 1][r] = acc[rt][tt][1];
                    ys[t][r + 8] = acc[rt][tt][2];
                    ys[t + 1][r + 8] = acc[rt][tt][3];
                } else {
                    if (t < p.m) {
                        mine[t * 128 + r] = acc[rt][tt][0];
                        mine[t * 128 + r + 8] = acc[rt][tt][2];
                    }
                    if (t + 1 < p.m) {
                        mine[(t + 1) * 128 + r] = acc[rt][tt][1];
                        mine[(t + 1) * 128 + r + 8] = acc[rt][tt][3];
                    }
                }
            }
        zero_frags(acc);
        named_barrier(1, MV_CT);
        if (!alone) {
            if (tid == 0) { /* release: the block's partial (barrier above); acquire: the others' */
                const uint32_t old = atom_add_acq_rel_gpu(&p.counters[rb], 1u);
                *flag = old == (uint32_t)(c_last - c_first);
                if (*flag) p.counters[rb] = 0; /* ready for the next call */
            }
            named_barrier(1, MV_CT);
            if (!*flag) continue;
            /* every element summed over the CTAs in order (each thread owns its elements);
             * rb is the last piece of c_first's range unless that range starts at rb, and the
             * first piece of every later contributor's */
            const int slot_first = split.first(c_first) == rb * groups ? 0 : 1;
            for (int e = tid; e < p.m * 128; e += MV_CT) {
                const float *part = p.partials + e;
                float sum = __ldcg(part + ((int64_t)c_first * 2 + slot_first) * TOKS * 128);
                int c = c_first + 1;
                for (; c + 8 <= c_last + 1; c += 8) { /* eight loads in flight, added in order */
                    float v[8];
#pragma unroll
                    for (int j = 0; j < 8; j++) v[j] = __ldcg(part + (int64_t)(c + j) * 2 * TOKS * 128);
#pragma unroll
                    for (int j = 0; j < 8; j++) sum += v[j];
                }
                for (; c <= c_last; c++) sum += __ldcg(part + (int64_t)c * 2 * TOKS * 128);
                ys[e / 128][e % 128] = sum;
            }
            named_barrier(1, MV_CT);
        }
        mv_epilogue<TOKS>(p, ys, inv, (int)rb, tid);
        named_barrier(1, MV_CT); /* ys is free again */
    }
}

template <int TOKT> static cudaError_t matvec_attrs()
{
    return cudaFuncSetAttribute(matvec_kernel<TOKT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                (int)MvSmem<TOKT>::bytes);
}

/* Units a CTA takes at least (when the row block has that many groups): 1, 2, 4 and 8 measured
 * on the H200 at M = 1 (bench/NOTES.md, row 22); 2 was best or within 5 % on every projection. */
constexpr int MV_MIN_UNITS = 2;

cudaError_t matvec_init(int sm_count, int *grid_cap)
{
    cudaError_t e = matvec_attrs<1>();
    if (e == cudaSuccess) e = matvec_attrs<2>();
    int b1 = 0, b2 = 0;
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b1, matvec_kernel<1>, MV_THREADS,
                                                          MvSmem<1>::bytes);
    if (e == cudaSuccess)
        e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b2, matvec_kernel<2>, MV_THREADS,
                                                          MvSmem<2>::bytes);
    if (e != cudaSuccess) return e;
    grid_cap[0] = sm_count * (b1 > 0 ? b1 : 1);
    grid_cap[1] = sm_count * (b2 > 0 ? b2 : 1);
    return cudaSuccess;
}

size_t matvec_partial_bytes(int max_grid) { return (size_t)max_grid * 2 * 16 * 128 * sizeof(float); }

cudaError_t launch_matvec_ex(MatvecArgs p, const int *grid_cap, bool pdl, cudaStream_t stream)
{
    const int tokt = p.m <= 8 ? 1 : 2;
    p.row_blocks = (int)(p.n_pad / 128);
    /* groups of 128 (one scale|bias word a unit row); one counter per row block; bulk copies of
     * activation rows need 16-byte alignment */
    if (p.group != 128 || p.m < 1 || p.m > 16 || p.k % 128 || p.n_pad % 128 ||
        p.row_blocks > QMM_SM90_MAX_COUNTED_TILES || p.lda % 8 || (uintptr_t)p.a % 16 ||
        (int64_t)p.row_blocks * (p.k / 128) > INT32_MAX)
        return cudaErrorInvalidValue;
    const int groups = p.k / 128, units = p.row_blocks * groups;
    /* at least min(groups, MIN_UNITS) units a CTA, so a shared row block has few partials;
     * else as many CTAs as fit (the occupancy cap) */
    int min_units = groups < MV_MIN_UNITS ? groups : MV_MIN_UNITS;
    int grid = (units + min_units - 1) / min_units;
    if (grid > grid_cap[tokt - 1]) grid = grid_cap[tokt - 1];
    p.units_per_cta = units / grid;
    p.units_rem = units % grid;
    if (tokt == 1)
        return launch_pdl(matvec_kernel<1>, dim3((unsigned)grid), dim3(MV_THREADS), MvSmem<1>::bytes,
                          stream, pdl, p);
    return launch_pdl(matvec_kernel<2>, dim3((unsigned)grid), dim3(MV_THREADS), MvSmem<2>::bytes,
                      stream, pdl, p);
}

MatvecArgs matvec_args(const DevWeight &w, const MatvecScratch &scratch)
{
    MatvecArgs p = {};
    p.packed = w.packed;
    p.sb = w.sb;
    p.n = (int)w.n;
    p.n_pad = w.n_pad;
    p.k = (int)w.k;
    p.group = w.group;
    p.partials = scratch.partials;
    p.counters = scratch.counters;
    return p;
}

cudaError_t launch_matvec(const DevWeight &w, const __nv_bfloat16 *a, int m, __nv_bfloat16 *c,
                          const MatvecScratch &scratch, cudaStream_t stream)
{
    MatvecArgs p = matvec_args(w, scratch);
    p.a = a;
    p.lda = w.k;
    p.m = m;
    p.c = c;
    p.ldc = w.n;
    p.epi = MV_EPI_STORE;
    return launch_matvec_ex(p, scratch.grid_cap, true, stream);
}

} // namespace qmm
