/* Seeded random data for the tools (splitmix64: the library's qmm_splitmix64). */
#include <math.h>
#include <string.h>
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

double bench_rng_normal(bench_rng *r)
{
    double u1 = ((bench_rng_next(r) >> 11) + 1.0) * 0x1p-53, u2 = (bench_rng_next(r) >> 11) * 0x1p-53;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void bench_prompt_ids(int32_t *ids, int64_t n, uint64_t state, int64_t vocab)
{
    for (int64_t i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((state >> 33) % (uint64_t)vocab);
    }
}

int bench_projections(const char *preset, bench_proj out[QMM_LLM_LINEAR_COUNT])
{
    qmm_llm_config c;
    if (qmm_llm_config_preset(preset, &c) != QMM_OK) return 0;
    for (int i = 0; i < QMM_LLM_LINEAR_COUNT; i++) {
        const char *nm = qmm_llm_linear_name((qmm_llm_linear)i);
        snprintf(out[i].name, sizeof out[i].name, "%.*s", (int)strcspn(nm, "_"), nm);
        if (qmm_llm_linear_shape(&c, (qmm_llm_linear)i, &out[i].n, &out[i].k) != QMM_OK) return 0;
    }
    return QMM_LLM_LINEAR_COUNT;
}
