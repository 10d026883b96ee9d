/* Defaults of the CUDA session (plain C, in every build). */
#include <string.h>

#include "qmm.h"

qmm_llm_cuda_options qmm_llm_cuda_options_default(void)
{
    qmm_llm_cuda_options o;
    memset(&o, 0, sizeof o);
    o.device = 0;
    o.split_k = 1;
    o.use_graph = 1;
    o.max_chunk = 0;
    o.attention_ref = 0;
    o.fuse_projections = 1;
    o.offload_weights = 0;
    o.offload_buffers = 2;
    o.pdl = 1;
    o.persistent_decode = 0;
    return o;
}
