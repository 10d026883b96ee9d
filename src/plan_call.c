/*
 * The one planning function: shape and options in, exactly what qmm_cuda_matmul runs out.
 * Pipeline (as in BLIS): check the shape -> check the options -> the policy's plan -> the
 * options' forced path -> kernel configuration, split, stages -> workspace. Each decision is a
 * named predicate, pure, so the CPU tests can pin what the GPU will run.
 */
#include <math.h>
#include <string.h>

#include "plan.h"
#include "plan_sm90.h"
#include "tune/sm90.h"

qmm_cuda_options qmm_cuda_options_default(void)
{
    qmm_cuda_options o = {0}; /* every field the rule's (0) unless set here */
    o.path = QMM_PATH_AUTO;
    o.partial_type = QMM_BF16;
    o.policy = QMM_POLICY_DEVICE;
    return o;
}

size_t qmm_dense_workspace_bytes(int64_t n, int64_t k)
{
    return ((size_t)n * (size_t)k * 2 + 255) / 256 * 256 + 256 + QMM_DENSE_CUBLAS_WORKSPACE;
}

static qmm_status check_shape(int64_t m, int64_t n, int64_t k)
{
    if (m < 1 || n < 1 || k < 1 || k % QMM_GROUP)
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: need >= 1 and K %% 128 == 0",
                        (long long)m, (long long)n, (long long)k);
    if (m > QMM_CUDA_MAX_DIM || n > QMM_CUDA_MAX_DIM || k > QMM_CUDA_MAX_DIM)
        return qmm_fail(QMM_ERR_SHAPE, "M = %lld, N = %lld, K = %lld: the CUDA kernels take up to 2^30",
                        (long long)m, (long long)n, (long long)k);
    return QMM_OK;
}

static qmm_status check_options(const qmm_cuda_options *o)
{
    if (o->path < QMM_PATH_AUTO || o->path > QMM_PATH_WGMMA)
        return qmm_fail(QMM_ERR_ARG, "unknown path %d", (int)o->path);
    if (o->stages < 0 || o->stages > QMM_MAX_STAGES)
        return qmm_fail(QMM_ERR_ARG, "stages = %d: use 0 (default) or 1..%d", o->stages, QMM_MAX_STAGES);
    if (o->partial_type != QMM_BF16 && o->partial_type != QMM_F32)
        return qmm_fail(QMM_ERR_DTYPE, "partial planes must be bf16 or f32");
    if (o->policy != QMM_POLICY_DEVICE && o->policy != QMM_POLICY_SEED)
        return qmm_fail(QMM_ERR_ARG, "unknown policy %d", (int)o->policy);
    if (o->split < 0 || o->split > QMM_MAX_FORCED_SPLIT)
        return qmm_fail(QMM_ERR_ARG, "split = %d out of range 0..%d", o->split, QMM_MAX_FORCED_SPLIT);
    if (o->split > 1 && o->path != QMM_PATH_SPLITK && o->path != QMM_PATH_WGMMA)
        return qmm_fail(QMM_ERR_ARG, "split = %d needs path SPLITK or WGMMA (AUTO takes 0 or 1)",
                        o->split);
    if (o->split > 0 && o->path == QMM_PATH_STREAMK)
        return qmm_fail(QMM_ERR_ARG, "stream-K takes split 0");
    if (o->rows != 0 && o->rows != 64 && o->rows != 128)
        return qmm_fail(QMM_ERR_ARG, "rows = %d: use 0 (the rule's), 64 or 128", o->rows);
    if (o->rows != 0 && (o->path != QMM_PATH_WGMMA || o->split < 1))
        return qmm_fail(QMM_ERR_ARG, "rows = %d forces the wgmma kernel's block height: path WGMMA "
                        "with a split >= 1", o->rows);
    if (o->rest < -1 || o->rest > 1)
        return qmm_fail(QMM_ERR_ARG, "rest = %d: use -1 (never), 0 (the plan's) or 1", o->rest);
    if (o->rest == 1 && (o->path != QMM_PATH_WGMMA || o->split < 2))
        return qmm_fail(QMM_ERR_ARG, "rest = 1 sets a split in clusters aside: path WGMMA with a split >= 2");
    if (o->group != 0 && !QMM_GROUP_OK(o->group))
        return qmm_fail(QMM_ERR_ARG, "group = %d: use 0 (any), 32, 64 or 128", o->group);
    return QMM_OK;
}

/* ---- the predicates ---- */

/* A path the options force, or the policy's when they leave it to the plan. */
static int wants(const qmm_cuda_options *o, const qmm_plan *policy, qmm_path path)
{
    return o->path == path || (o->path == QMM_PATH_AUTO && policy->path == path);
}

/* AUTO under the device policy on a shape the tuning table gives to the dense path: long
 * prompts (dense_force_m) and narrow outputs from dense_narrow_m on. */
static int table_wants_dense(const qmm_device_desc *d, const qmm_cuda_options *o, int64_t m,
                             int64_t n)
{
    if (o->path != QMM_PATH_AUTO || o->policy != QMM_POLICY_DEVICE) return 0;
    return (d->dense_force_m > 0 && m >= d->dense_force_m) ||
           (d->dense_narrow_n > 0 && n <= d->dense_narrow_n && m >= d->dense_narrow_m);
}

/* Forced, the device policy's choice, or the tuning table's dense shapes. */
static int should_use_dense(const qmm_device_desc *d, const qmm_cuda_options *o,
                            const qmm_plan *policy, int64_t m, int64_t n)
{
    return table_wants_dense(d, o, m, n) || wants(o, policy, QMM_PATH_DENSE);
}

static int should_use_matvec(const qmm_cuda_options *o, const qmm_plan *policy)
{
    return wants(o, policy, QMM_PATH_MATVEC);
}

/* The Hopper wgmma kernel: forced (WGMMA, STREAMK), or AUTO under the device policy in the
 * tuning table's M range (wgmma_min_m = 0: never) where the table does not want dense. Longer
 * prompts are long_prompt's. */
static int should_use_wgmma(const qmm_device_desc *d, const qmm_cuda_options *o, int64_t m,
                            int64_t n)
{
    if (o->path == QMM_PATH_WGMMA || o->path == QMM_PATH_STREAMK) return 1;
    if (o->path != QMM_PATH_AUTO || o->policy != QMM_POLICY_DEVICE || d->wgmma_min_m <= 0) return 0;
    return m >= d->wgmma_min_m && m <= d->wgmma_max_m && !table_wants_dense(d, o, m, n);
}

/* AUTO under the device policy beyond the table's wgmma range, where the table does not want
 * dense: the model chooses between the kernel's plan (128-token tiles; 256 from
 * wgmma_wide_min_m, or there the 128-token tile's one wave of clusters: wide_or_clusters) and
 * the dense path. The rules it replaced (dense from 513 tokens; from 1 024 the kernel where its
 * tiles filled 3/4 of their waves) left the kernel's faster plans unused: down at 513-1 024
 * tokens 7-16 %, o at 640-768 10-16 %, the stacked gate|up at 768 9.5 % (NOTES.md row 173). */
static int long_prompt(const qmm_device_desc *d, const qmm_cuda_options *o, int64_t m, int64_t n)
{
    return o->path == QMM_PATH_AUTO && o->policy == QMM_POLICY_DEVICE && d->wgmma_min_m > 0 &&
           m > d->wgmma_max_m && !table_wants_dense(d, o, m, n);
}

/* Partitions of K for the tiled kernel: the policy's, unless the options hold it at 1 (TILED, or
 * AUTO with split 1: the unsplit control) or force one (SPLITK with split > 0). */
static int choose_split(const qmm_cuda_options *o, const qmm_plan *policy)
{
    int split = policy->path == QMM_PATH_MATVEC ? 1 : policy->split;
    if (o->path == QMM_PATH_TILED || (o->path == QMM_PATH_AUTO && o->split == 1)) split = 1;
    if (o->path == QMM_PATH_SPLITK && o->split > 0) split = o->split;
    return split < 1 ? 1 : split;
}

static size_t workspace_bytes(const qmm_plan *p, int64_t m, int64_t n, int64_t k, qmm_dtype t)
{
    if (p->path == QMM_PATH_DENSE) return qmm_dense_workspace_bytes(n, k);
    if (p->path != QMM_PATH_SPLITK) return 0;
    return (size_t)p->split * (size_t)m * (size_t)n * (t == QMM_F32 ? 4 : 2);
}

/* Extreme (finite) rates can still overflow a prediction: no plan without one. */
static qmm_status require_prediction(const qmm_plan *p, const char *what)
{
    if (p->predicted_us >= 0 && isfinite(p->predicted_us)) return QMM_OK;
    return qmm_fail(QMM_ERR_RANGE, "%s: the predicted time is %g; the device description's rates "
                    "are out of range", what, p->predicted_us);
}

/* ---- the device policy (no forced path): the model picks the split, then maybe dense ---- */

static void device_policy(int64_t m, int64_t n, int64_t k, const qmm_device_desc *d, qmm_plan *out)
{
    qmm_plan p;
    memset(&p, 0, sizeof p);
    if (m <= d->matvec_max_m) {
        p.path = QMM_PATH_MATVEC;
        p.split = 1;
        p.tile_m = 8;
        p.tile_n = 16;
        p.k_per_split = (int)k;
        p.predicted_us = qmm_plan_predict_us(m, n, k, d, &p);
        *out = p;
        return;
    }
    int ci = qmm_choose_config(d, m);
    const qmm_tile_config *c = &d->config[ci];
    p.config = ci;
    p.tile_m = c->tile_m;
    p.tile_n = c->tile_n;
    p.base_blocks = ((m + c->tile_m - 1) / c->tile_m) * ((n + c->tile_n - 1) / c->tile_n);
    int64_t slots = (int64_t)d->gpu.sms * c->blocks_per_sm, groups = k / QMM_GROUP;
    int64_t want = slots / p.base_blocks;
    if (want > d->max_split) want = d->max_split;
    if (want > groups / d->min_k_tiles) want = groups / d->min_k_tiles;
    if (want < 1) want = 1;

    /* every aligned split up to the rule's; the model picks (ties keep the smaller split) */
    int best = 1;
    double best_us = -1;
    for (int s = 1; s <= want; s++) {
        if (groups % s) continue;
        p.split = s;
        p.path = s > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
        double us = qmm_plan_predict_us(m, n, k, d, &p);
        if (us < 0) continue;
        if (best_us < 0 || us < best_us * 0.999) best = s, best_us = us;
    }
    p.split = best;
    p.path = best > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
    p.blocks = p.base_blocks * best;
    p.k_per_split = (int)(k / best);
    p.predicted_us = best_us;

    /* long prompts: dequantize + cuBLAS when the model says it beats our tiled kernel */
    if (d->dense_tflops > 0 && m >= d->dense_min_m) {
        qmm_plan dense = p;
        dense.path = QMM_PATH_DENSE;
        dense.split = 1;
        dense.k_per_split = (int)k;
        dense.predicted_us = qmm_plan_predict_us(m, n, k, d, &dense);
        if (dense.predicted_us > 0 && dense.predicted_us < p.predicted_us) p = dense;
    }
    *out = p;
}

/* ---- the wgmma family (plan_sm90.c chooses its tile and schedule) ---- */

static qmm_status plan_wgmma(const qmm_device_desc *d, int64_t m, int64_t n, int64_t k,
                             const qmm_cuda_options *o, qmm_plan *out)
{
    qmm_sm90_request req = QMM_SM90_AUTO;
    int split = 1;
    if (o->path == QMM_PATH_STREAMK) req = QMM_SM90_STREAMK, split = 0;
    else if (o->path == QMM_PATH_WGMMA) req = o->split > 0 ? QMM_SM90_SPLIT : QMM_SM90_AUTO, split = o->split;
    else if (o->split == 1) req = QMM_SM90_SPLIT; /* AUTO held at split 1: the unsplit control */
    qmm_plan p;
    qmm_status st = qmm_plan_sm90(m, n, k, d->gpu.sms, d->wgmma_wide_min_m, req, split, &p);
    if (st == QMM_OK && o->rows && p.tile_n != o->rows) { /* the other height, forced */
        st = qmm_plan_sm90(m, n, k, d->gpu.sms, d->wgmma_wide_min_m, QMM_SM90_SPLIT_ALT, split, &p);
        if (st == QMM_OK && p.tile_n != o->rows)
            return qmm_fail(QMM_ERR_ARG, "rows = %d: the %d-token tile has %d-row blocks only", o->rows,
                            p.tile_m, p.tile_n);
    }
    if (st != QMM_OK) return st;
    if (p.path == QMM_PATH_WGMMA && qmm_sm90_cluster_slots(d, p.config, p.split) < 0)
        return qmm_fail(QMM_ERR_ARG, "split %d: clusters of %d CTAs do not fit this GPU", p.split,
                        p.split);
    if (o->rest == 1 && !qmm_sm90_plan_rest(d, k, &p))
        return qmm_fail(QMM_ERR_ARG, "rest = 1: %lld tiles in clusters of %d fit one wave or leave no "
                        "SMs to split the rest on", (long long)p.base_blocks, p.split);
    qmm_sm90_config(p.config, NULL, NULL, &p.stages);
    p.workspace_bytes = qmm_sm90_workspace_bytes(&p);
    /* only the device policy predicts (as for the other paths); -1 without a fitted model */
    if (o->policy == QMM_POLICY_DEVICE) p.predicted_us = qmm_plan_predict_us(m, n, k, d, &p);
    /* a grid that does not fill the GPU: stream-K, the unsplit schedule, or split-K in clusters,
     * whichever the model predicts fastest (the clusters fitting in one wave); a full grid keeps
     * the unsplit schedule, bit for bit. Unsplit wins where most SMs hold a tile and each has
     * many k-blocks (q at M = 384 / 512: 96 / 128 tiles of 128 × 128, 18.6 / 19.2 µs against
     * stream-K's 21.2 / 25.0; gate at M = 128: 76 tiles, 18.6 against 19.1; NOTES.md row 106).
     * Token tiles from the table's wgmma_alt_min_tile on also try clusters in the other block
     * height (64 ↔ 128 weight rows): 128 tokens in 64-row blocks make twice the tiles with half
     * the partial each (k at M = 128 in clusters of 5 5.9 µs against 128-row blocks' best 7.1;
     * q 9.2 against 10.1); 32 tokens in 128-row blocks copy a stage's activations for twice the
     * weights (H100, gate M = 32 in clusters of 3 8.9 µs against stream-K's 12.2). A lone 64-row
     * warpgroup on its SM is no faster than two sharing it (~0.55 against 0.68 µs a k-block for
     * half the work), so the other height never runs unsplit or stream-K (NOTES.md rows 112,
     * 114, 204). */
    if (req == QMM_SM90_AUTO && p.path == QMM_PATH_STREAMK && p.predicted_us > 0) {
        const int both = d->wgmma_alt_min_tile > 0 && p.tile_m >= d->wgmma_alt_min_tile;
        /* 64 tokens where the rule's blocks are 128 rows (wide outputs): also those blocks two
         * CTAs a SM, in clusters (gate on an H100: 14.1 µs stream-K → 11.7 in clusters of 3, on
         * the H200 14.3 → 11.7; as the other height of q, o, down it lost 15-23 %, where the model
         * saw gains: NOTES.md rows 208, 219). A table without its counts (-1) never plans it. */
        const int paired = p.tile_m == 64 && p.tile_n == 128;
        static const qmm_sm90_request kinds[3] = {QMM_SM90_SPLIT, QMM_SM90_SPLIT_ALT, QMM_SM90_SPLIT_PAIRED};
        for (int c = 0; c < 3 * QMM_SM90_MAX_CLUSTER; c++) {
            const int s = c % QMM_SM90_MAX_CLUSTER + 1, kind = c / QMM_SM90_MAX_CLUSTER;
            if (s > k / QMM_GROUP || (kind && s < 2) || (kind == 1 && !both) || (kind == 2 && !paired))
                continue;
            qmm_plan q;
            if (qmm_plan_sm90(m, n, k, d->gpu.sms, d->wgmma_wide_min_m, kinds[kind], s, &q) != QMM_OK)
                continue;
            /* one wave: clusters leave a slot of the occupancy API's free (q at M = 32 on an
             * H100 in 224 of 224: 6.8-7.0 µs, 1.0-1.2 above the model, in three runs; NOTES.md
             * row 207) */
            const int64_t slots = qmm_sm90_cluster_slots(d, q.config, s);
            if (slots < 0 || (!slots && q.blocks > (int64_t)d->gpu.sms * qmm_sm90_blocks_per_sm(q.config)))
                continue;
            /* more clusters than one wave: one wave of them and the rest aside, or not at all;
             * in the rule's block height only (o at M = 128 in the other height's clusters of 3
             * + 1 tile aside: 11.5 µs against its plan's 10.2 on an H100, where the model said
             * 9.9; NOTES.md row 230), over a few token tiles only (tune/sm90.h) */
            if (slots > 0 && q.blocks >= slots &&
                (kind || o->rest < 0 || !d->wgmma_rest_min_tile ||
                 q.tile_m < d->wgmma_rest_min_tile ||
                 (m + q.tile_m - 1) / q.tile_m > QMM_SM90_REST_MAX_TOKEN_TILES ||
                 !qmm_sm90_plan_rest(d, k, &q)))
                continue;
            qmm_sm90_config(q.config, NULL, NULL, &q.stages);
            q.workspace_bytes = qmm_sm90_workspace_bytes(&q);
            q.predicted_us = qmm_plan_predict_us(m, n, k, d, &q);
            if (q.predicted_us > 0 && q.predicted_us < p.predicted_us * 0.999) p = q;
        }
    }
    *out = p;
    qmm_clear_error();
    return QMM_OK;
}

/* From the wide tile's M on, the 128-token tile's plan where it is one wave of clusters of
 * 128-row blocks, if the model prefers it to the 256-token tile's: what the plan takes a token
 * below wgmma_wide_min_m (N = 1 024 at 1 024 tokens: 64 tiles in clusters of 2 instead of the
 * dense path, on an H100 −19 % for Qwen3-4B's k/v, −17…−28 % at K = 2 048…5 120; NOTES.md rows
 * 176, 251). Its unsplit and stream-K schedules stay out: the model is 8-16 % optimistic for
 * long 128-token launches there (row 176: k at 2 048, q at 1 536); so do its 64-row blocks'
 * clusters, never timed beyond 512 tokens (k/v of a rank at t = 2, N = 512, would take them at
 * 1 024 tokens by 1.3 %, inside the model's error). */
static void wide_or_clusters(const qmm_device_desc *d, int64_t m, int64_t n, int64_t k,
                             const qmm_cuda_options *o, qmm_plan *w)
{
    if (d->wgmma_wide_min_m <= 0 || m < d->wgmma_wide_min_m || w->predicted_us <= 0) return;
    qmm_device_desc narrow = *d;
    narrow.wgmma_wide_min_m = 0;
    qmm_plan c;
    if (plan_wgmma(&narrow, m, n, k, o, &c) != QMM_OK) {
        qmm_clear_error();
        return;
    }
    if (c.path == QMM_PATH_WGMMA && c.tile_n == 128 && qmm_sm90_cluster(c.tile_m, c.split) > 1 &&
        !c.rest_tiles && c.predicted_us > 0 && c.predicted_us < w->predicted_us * 0.999)
        *w = c;
}

/* ---- the call ---- */

qmm_status qmm_plan_call(const qmm_device_desc *d, int64_t m, int64_t n, int64_t k,
                         const qmm_cuda_options *opt, qmm_plan *out)
{
    if (!out) return qmm_fail(QMM_ERR_NULL, "plan output is NULL");
    qmm_status st = check_shape(m, n, k);
    if (st != QMM_OK) return st;
    st = qmm_check_desc(d);
    if (st != QMM_OK) return st;
    qmm_cuda_options o = opt ? *opt : qmm_cuda_options_default();
    st = check_options(&o);
    if (st != QMM_OK) return st;
    if (should_use_wgmma(d, &o, m, n)) {
        /* a table whose wide tile starts inside its wgmma range weighs the clusters there too */
        st = plan_wgmma(d, m, n, k, &o, out);
        if (st == QMM_OK && o.path == QMM_PATH_AUTO && o.policy == QMM_POLICY_DEVICE)
            wide_or_clusters(d, m, n, k, &o, out);
        return st;
    }
    /* a long prompt: the wgmma kernel's plan, against the dense path's below where there is one
     * (the dense path alone where the kernel has no plan: more tiles than a split schedule
     * counts) */
    const int longp = long_prompt(d, &o, m, n);
    qmm_plan w;
    int have_w = 0; /* w holds the kernel's plan, to weigh against the dense path */
    if (longp) {
        st = plan_wgmma(d, m, n, k, &o, &w);
        if (st == QMM_OK) wide_or_clusters(d, m, n, k, &o, &w);
        if (st == QMM_OK && (d->dense_tflops <= 0 || m < d->dense_min_m)) {
            *out = w;
            return QMM_OK;
        }
        if (st != QMM_OK && d->dense_tflops <= 0) return st;
        have_w = st == QMM_OK;
        qmm_clear_error();
    }
    const int model = o.policy == QMM_POLICY_DEVICE; /* only the device policy predicts */

    qmm_plan p;
    if (model) {
        device_policy(m, n, k, d, &p);
        if ((st = require_prediction(&p, "device plan")) != QMM_OK) return st;
    } else {
        qmm_plan_params sp = qmm_plan_seed_params();
        st = qmm_plan_seed(m, n, k, &sp, &p);
        if (st != QMM_OK) return st;
        p.config = qmm_choose_config(d, m);
        p.predicted_us = -1;
    }
    p.stages = 0;

    if (longp || should_use_dense(d, &o, &p, m, n)) {
        p.path = QMM_PATH_DENSE;
        p.split = 1;
        p.k_per_split = (int)k;
        if (model) {
            p.predicted_us = qmm_plan_predict_us(m, n, k, d, &p);
            if ((st = require_prediction(&p, "dense plan")) != QMM_OK) return st;
        }
    } else if (should_use_matvec(&o, &p)) {
        if (m > d->matvec_limit_m)
            return qmm_fail(QMM_ERR_ARG, "the matvec path takes M <= %d (M = %lld)",
                            d->matvec_limit_m, (long long)m);
        p.path = QMM_PATH_MATVEC;
        p.split = 1;
        p.k_per_split = (int)k;
    } else {
        if (o.path != QMM_PATH_AUTO) p.config = qmm_choose_config(d, m);
        /* partitions are whole 128-column blocks: whole groups at g = 32, 64, 128 */
        int split = choose_split(&o, &p);
        if (k % ((int64_t)split * QMM_GROUP))
            return qmm_fail(QMM_ERR_ARG, "split = %d does not divide K = %lld into whole groups of 128",
                            split, (long long)k);
        const qmm_tile_config *c = &d->config[p.config];
        if ((n + c->tile_n - 1) / c->tile_n > 65535)
            return qmm_fail(QMM_ERR_SHAPE, "N = %lld needs more than 65535 column tiles", (long long)n);
        p.tile_m = c->tile_m;
        p.tile_n = c->tile_n;
        p.base_blocks = ((m + c->tile_m - 1) / c->tile_m) * ((n + c->tile_n - 1) / c->tile_n);
        p.split = split;
        p.blocks = p.base_blocks * split;
        p.k_per_split = (int)(k / split);
        p.path = split > 1 ? QMM_PATH_SPLITK : QMM_PATH_TILED;
        p.stages = o.stages ? o.stages : c->stages;
        if (model) p.predicted_us = qmm_plan_predict_us(m, n, k, d, &p);
    }
    p.workspace_bytes = workspace_bytes(&p, m, n, k, o.partial_type);
    /* the kernel on a tie (the dense path also holds an N x K bf16 copy in the workspace); a
     * description without the kernel's model (no prediction) keeps the kernel */
    if (have_w && w.predicted_us <= p.predicted_us) p = w;
    *out = p;
    qmm_clear_error();
    return QMM_OK;
}
