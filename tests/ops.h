/*
 * The op x backend x shape test table (tests/test_ops.c): every case of an op runs on every
 * backend of that op, on fresh random data, outputs poisoned, against the op's reference (fp64
 * for the matmul, cpu_ops.c for the engine's operators). The GPU backends live in ops_gpu.c.
 *
 * A case's data is a list of host tensors: inputs, outputs (poisoned before each backend) and
 * in/out tensors (restored before each backend). The reference fills ref[] of every output.
 */
#ifndef QMM_TEST_OPS_H
#define QMM_TEST_OPS_H

#include "harness.h"

typedef enum op_kind {
    OP_MATMUL,       /* C[m, n] = A[m, k] · Wᵀ */
    OP_ROWS,         /* out[m, k] = rows ids[pos + r] of W [n, k] in fp32 (embedding lookup) */
    OP_ADD_RMSNORM,  /* x[m, n] += add (when add; an fp32 add rounded to bf16 first); h =
                      * rmsnorm(x) · w */
    OP_QK_NORM_ROPE, /* q, k heads: rmsnorm + RoPE at pos + r; k, v appended to the cache */
    OP_SWIGLU,       /* out[m, n] = silu(gate) · up */
    OP_ATTN_PREFILL, /* causal GQA attention of m rows at pos + r over the cache */
    OP_ATTN_DECODE,  /* one row at pos over pos + 1 cached positions */
    OP_DECODE_FUSED, /* the decode step: qk-norm + RoPE of one row, k/v appended at pos, attention */
    OP_ARGMAX,       /* tokens[pos + m] = argmax logits[n]; pos += m */
    OP_MATVEC_FUSED, /* the decode matvec's epilogues (flag): 0 rmsnorm(x)·Wᵀ, 1 x += a·Wᵀ with
                      * the next norm's xg and Σx², 2 swiglu of rmsnorm(x)·Wᵀ (gate|up rows
                      * interleaved by 64), 3 y = a·Wᵀ in fp32 (a tensor-parallel partial) */
    OP_ATTN_O,       /* OP_DECODE_FUSED's step, then x[n] += out·Wᵀ (W: n × heads·hd) with the
                      * next norm's xg and Σx² (OP_MATVEC_FUSED's epilogue 1): one kernel, an
                      * experiment (attention_o_fused.cu) */
    OP_KINDS
} op_kind;

typedef struct op_case {
    const char *name;
    op_kind op;
    int64_t m, n, k;           /* the op's sizes (see op_kind) */
    int heads, kv_heads, hd;   /* attention and RoPE */
    int64_t pos;               /* positions already in the cache / token offset */
    int flag;                  /* OP_ADD_RMSNORM: 1 = with the residual add, 2 = an fp32 one;
                                  OP_MATVEC_FUSED: epilogue; OP_ATTN_O: 2 = a shape the kernel
                                  must refuse */
    double tol;                /* relative Frobenius error vs the reference; 0 = bitwise */
    int group;                 /* OP_MATMUL, OP_ROWS: the weight's group size (0 = 128) */
} op_case;

typedef enum t_type { T_BF16, T_F32, T_I32 } t_type;
typedef enum t_role { T_IN, T_OUT, T_INOUT } t_role;

#define OP_MAX_TENSORS 16
typedef struct tensor {
    const char *name;
    t_type type;
    t_role role;
    size_t count;
    void *host;       /* what a backend reads and writes */
    void *init;       /* T_INOUT: the value restored before each backend */
    double *ref;      /* T_OUT, T_INOUT: the reference result */
    double tol;       /* this output's tolerance (the case's unless exact) */
} tensor;

typedef struct op_data {
    const op_case *c;
    int nt;
    tensor t[OP_MAX_TENSORS];
    qmm_w4 w;         /* OP_MATMUL, OP_ROWS */
    int64_t max_seq;  /* attention, RoPE: cache length */
} op_data;

/* RMSNorm epsilon of every case (Qwen3's). */
#define OP_EPS 1e-6f

/* test_ops.c: a new tensor of d (inputs filled with normal(0, scale), ints 0); the reference's
 * result when it ran on the host tensors (copies every output into ref[]). */
tensor *op_add(op_data *d, const char *name, t_type type, t_role role, size_t count, double scale);
void op_ref_from_host(op_data *d);
/* ops_ref.c: the tensors of a case (fresh random data), and its reference. */
void ops_make(op_data *d);
void ops_reference(op_data *d);

/* The tensor named name (every op's tensors are fixed by ops' make functions). */
tensor *op_tensor(op_data *d, const char *name);

/* A backend runs one case: NULL when it ran, else why it could not (a failure), or
 * OP_SKIP_PREFIX "reason" when the case does not apply to it. */
#define OP_SKIP_PREFIX "skip: "
typedef const char *(*op_run_fn)(op_data *d, int variant);

typedef struct op_backend {
    const char *name;
    op_kind op;
    op_run_fn run;
    int variant;      /* passed to run (a path, a kernel flavour) */
    int gpu;
} op_backend;

/* ops_gpu.c: the GPU backends (count in *n), and whether they can run here (else why). */
const op_backend *ops_gpu_backends(int *n);
int ops_gpu_available(char *why, size_t len);
void ops_gpu_shutdown(void);

#endif
