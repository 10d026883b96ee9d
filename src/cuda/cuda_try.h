/* The one CUDA check of the library and the engine: inside a function returning qmm_status, on
 * failure record the call, file, line and CUDA's message for qmm_last_error() and return
 * QMM_ERR_NOMEM for an allocation failure, else QMM_ERR_CUDA. (The tools exit instead:
 * tools/common/common.h; the tests fail the case: tests/harness.h.) */
#ifndef QMM_CUDA_TRY_H
#define QMM_CUDA_TRY_H

#include <cuda_runtime.h>

#include "internal.h"

#define QMM_CUDA_TRY(call)                                                                     \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess)                                                               \
            return qmm_fail(err_ == cudaErrorMemoryAllocation ? QMM_ERR_NOMEM : QMM_ERR_CUDA,   \
                            "%s failed at %s:%d: %s", #call, __FILE__, __LINE__,               \
                            cudaGetErrorString(err_));                                         \
    } while (0)

#endif
