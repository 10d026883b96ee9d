/* Stacked projection weights (stack_w4.h): host copies, row blocks moved whole. */
#include <string.h>

#include "internal.h"
#include "llm/stack_w4.h"

static int parts_ok(const qmm_w4 *const *parts, int n, const qmm_w4 *out)
{
    if (!parts || !out || n < 1) return 0;
    for (int i = 0; i < n; i++)
        if (!parts[i]) return 0;
    return 1;
}

/* Weights with the same K stacked along N (rows concatenated: W = [W0; W1; ...]) into a new
 * host weight out (qmm_w4_free it), so one matmul computes every part: its output columns are
 * the parts' outputs side by side. */
qmm_status llm_stack_w4(const qmm_w4 *const *parts, int n, qmm_w4 *out)
{
    if (!parts_ok(parts, n, out)) return qmm_fail(QMM_ERR_NULL, "llm_stack_w4: NULL or no parts");
    int64_t rows = 0, k = parts[0]->k;
    for (int i = 0; i < n; i++) {
        if (parts[i]->k != k || parts[i]->group != parts[0]->group)
            return qmm_fail(QMM_ERR_ARG, "stacking weights needs one K and one group size");
        rows += parts[i]->n;
    }
    qmm_status st = qmm_w4_alloc_group(rows, k, parts[0]->group, out);
    if (st) return st;
    size_t pw = 0, g = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out->packed + pw, parts[i]->packed, parts[i]->packed_count * 4);
        memcpy(out->scales + g, parts[i]->scales, parts[i]->scales_count * 2);
        memcpy(out->biases + g, parts[i]->biases, parts[i]->biases_count * 2);
        pw += parts[i]->packed_count;
        g += parts[i]->scales_count;
    }
    return QMM_OK;
}

qmm_status llm_stack_w4_chunked(const qmm_w4 *const *parts, int n, int64_t chunk, qmm_w4 *out)
{
    if (chunk <= 0) return llm_stack_w4(parts, n, out);
    if (!parts_ok(parts, n, out))
        return qmm_fail(QMM_ERR_NULL, "llm_stack_w4_chunked: NULL or no parts");
    const int64_t rows = parts[0]->n, k = parts[0]->k;
    const int group = parts[0]->group;
    for (int i = 0; i < n; i++)
        if (parts[i]->n != rows || parts[i]->k != k || parts[i]->group != group || rows % chunk)
            return qmm_fail(QMM_ERR_ARG, "interleaving weights needs equal shapes with N a multiple "
                            "of %lld", (long long)chunk);
    qmm_status st = qmm_w4_alloc_group(rows * n, k, group, out);
    if (st) return st;
    const size_t pw = (size_t)(k / 8), gw = (size_t)(k / group); /* per row */
    int64_t dst = 0;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk)
        for (int i = 0; i < n; i++, dst += chunk) {
            memcpy(out->packed + dst * pw, parts[i]->packed + r0 * pw, (size_t)chunk * pw * 4);
            memcpy(out->scales + dst * gw, parts[i]->scales + r0 * gw, (size_t)chunk * gw * 2);
            memcpy(out->biases + dst * gw, parts[i]->biases + r0 * gw, (size_t)chunk * gw * 2);
        }
    return QMM_OK;
}

int64_t llm_gate_up_chunk(const qmm_llm_config *c)
{
    return c->intermediate_size % 64 == 0 ? 64 : 0;
}
