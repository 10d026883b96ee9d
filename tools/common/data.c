/* Seeded random data for the tools (splitmix64: the library's qmm_splitmix64). */
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "internal.h"

uint64_t bench_rng_next(bench_rng *r) { return qmm_splitmix64(&r->s); }

double bench_rng_uniform(bench_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * qmm_unit_f64(&r->s);
}

void bench_random_w4(bench_rng *r, qmm_w4 *w)
{
    for (size_t i = 0; i < w->packed_count; i++) w->packed[i] = (uint32_t)bench_rng_next(r);
    for (size_t g = 0; g < w->scales_count; g++) {
        double mag = bench_rng_uniform(r, 0.004, 0.03);
        double s = (bench_rng_next(r) & 1) ? mag : -mag;
        /* The bias is the group's edge of larger magnitude, so it sits near -7.5·s whatever
         * the sign of s: the dequantized weights straddle zero, as in real checkpoints. */
        w->scales[g] = qmm_f32_to_bf16((float)s);
        w->biases[g] = qmm_f32_to_bf16((float)(-s * bench_rng_uniform(r, 6.5, 8.5)));
    }
}

void bench_random_bf16(bench_rng *r, qmm_bf16 *x, size_t count)
{
    for (size_t i = 0; i < count; i++) x[i] = qmm_f32_to_bf16((float)bench_rng_uniform(r, -1, 1));
}

uint64_t bench_seed_from_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    bench_rng r = {(uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
                   ((uint64_t)getpid() << 32)};
    return bench_rng_next(&r) >> 1;
}
