/* Internal pieces of the planner shared by plan_device.c, plan_call.c and the dense path. */
#ifndef QMM_PLAN_H
#define QMM_PLAN_H

#include "internal.h"
#include "tune/sm90.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The largest M, N or K the CUDA kernels take (int32 grids and offsets with headroom). */
#define QMM_CUDA_MAX_DIM ((int64_t)1 << 30)
/* The dense path's cuBLAS workspace (cublasSetWorkspace), after the bf16 copy of W. */
#define QMM_DENSE_CUBLAS_WORKSPACE ((size_t)32 << 20)
/* Deepest pipeline a caller may force (the tiled kernels are instantiated for 1..this). */
#define QMM_MAX_STAGES QMM_SM90_MAX_STAGES
/* The most partitions a caller may force (SPLITK with options.split). */
#define QMM_MAX_FORCED_SPLIT 64

/* Workspace of the dense path: bf16 W [N, K], then cuBLAS's workspace at the next 256-byte
 * boundary (cublasSetWorkspace needs it; callers guarantee 16 bytes only, hence 256 of slack). */
size_t qmm_dense_workspace_bytes(int64_t n, int64_t k);

/* The family's tuning table corrected for one GPU by its name (tune/sm90.c). */
void qmm_tune_for_gpu(qmm_device_desc *d, const char *name);

/* The device description is usable (counts, tiles, rates in range). */
qmm_status qmm_check_desc(const qmm_device_desc *d);

/* First tiled configuration whose max_m covers M (the last one covers the rest). */
int qmm_choose_config(const qmm_device_desc *d, int64_t m);

#ifdef __cplusplus
}
#endif

#endif
