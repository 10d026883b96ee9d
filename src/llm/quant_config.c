/* Per-layer quantization entries of an MLX config.json (see quant_config.h). */
#include "llm/quant_config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "llm/llm_io.h"

qmm_status llm_quant_parse(const char *text, size_t len, int64_t default_group, llm_quant *q)
{
    memset(q, 0, sizeof *q);
    q->group = default_group;
    qmm_status st = json_parse(text, len, &q->doc);
    if (st) return st;
    if (q->doc.nodes[0].type != JSON_OBJECT) return QMM_OK; /* the config parser said so already */
    uint32_t o = json_member(&q->doc, 0, "quantization");
    if (!o || q->doc.nodes[o].type != JSON_OBJECT) o = json_member(&q->doc, 0, "quantization_config");
    if (o && q->doc.nodes[o].type == JSON_OBJECT) q->obj = o;
    return QMM_OK;
}

qmm_status llm_quant_load(const char *cfg_path, int64_t default_group, llm_quant *q)
{
    memset(q, 0, sizeof *q);
    q->group = default_group;
    char *text = NULL;
    size_t len = 0;
    qmm_status st = llm_read_file(cfg_path, 16u << 20, &text, &len);
    if (st) return st;
    st = llm_quant_parse(text, len, default_group, q);
    free(text);
    return st;
}

qmm_status llm_quant_group(const llm_quant *q, const char *prefix, int *group)
{
    *group = (int)q->group;
    uint32_t v = q->obj ? json_member(&q->doc, q->obj, prefix) : 0;
    if (!v) return QMM_OK;
    const json_node *n = &q->doc.nodes[v];
    if (n->type == JSON_BOOL) {
        if (n->boolean) return QMM_OK; /* quantized with the defaults */
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: quantization.%s is false: that layer "
                        "is not quantized, and qmm runs 4-bit layers only", prefix);
    }
    if (n->type != JSON_OBJECT)
        return qmm_fail(QMM_ERR_FORMAT, "config.json: quantization.%s must be an object or a "
                        "boolean (got a %s)", prefix, json_type_name(n->type));
    uint32_t g = json_member(&q->doc, v, "group_size"), b = json_member(&q->doc, v, "bits"),
             mode = json_member(&q->doc, v, "mode");
    if (b && (q->doc.nodes[b].type != JSON_NUMBER || !q->doc.nodes[b].is_int ||
              q->doc.nodes[b].i != QMM_BITS))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: quantization.%s.bits is not 4; qmm "
                        "reads 4-bit weights only", prefix);
    if (mode && (q->doc.nodes[mode].type != JSON_STRING || strcmp(q->doc.nodes[mode].str, "affine")))
        return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: quantization.%s.mode must be "
                        "\"affine\"", prefix);
    if (g) {
        const json_node *gn = &q->doc.nodes[g];
        if (gn->type != JSON_NUMBER || !gn->is_int || !QMM_GROUP_OK(gn->i))
            return qmm_fail(QMM_ERR_UNSUPPORTED, "config.json: quantization.%s.group_size must be "
                            "32, 64 or 128", prefix);
        *group = (int)gn->i;
    }
    return QMM_OK;
}

void llm_quant_free(llm_quant *q) { json_free(&q->doc); }
