/* Check a CUDA runtime call inside a function returning qmm_status: on failure record the call,
 * file, line and CUDA's message for qmm_last_error() and return QMM_ERR_CUDA. */
#ifndef QMM_CUDA_TRY_H
#define QMM_CUDA_TRY_H

#include <cuda_runtime.h>

#include "internal.h"

#define QMM_CUDA_TRY(call)                                                                     \
    do {                                                                                       \
        cudaError_t err_ = (call);                                                             \
        if (err_ != cudaSuccess)                                                               \
            return qmm_fail(QMM_ERR_CUDA, "%s failed at %s:%d: %s", #call, __FILE__, __LINE__, \
                            cudaGetErrorString(err_));                                         \
    } while (0)

#endif
