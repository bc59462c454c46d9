/* gemmtune C API: C = alpha * op(A) * op(B) + beta * C, cuBLAS semantics (column-major), and
 * through a matmul descriptor D = act(alpha * op(A) * op(B) + beta * C + bias).
 * Every function returns a status; gemmtune_last_error() says what went wrong in this thread.
 * Valid C (C99 and later) and C++. */
#ifndef GEMMTUNE_H
#define GEMMTUNE_H

#include <stddef.h>
#include <stdint.h>

#include "data_types.h" /* the codes of the element types, installed beside this header */

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gemmtune_status {
  GEMMTUNE_SUCCESS = 0,
  GEMMTUNE_ERROR_INVALID_ARGUMENT = 1,
  GEMMTUNE_ERROR_UNSUPPORTED = 2,
  GEMMTUNE_ERROR_NO_DEVICE = 3,
  GEMMTUNE_ERROR_CUDA = 4,
  GEMMTUNE_ERROR_COMPILE = 5,
  GEMMTUNE_ERROR_DATABASE = 6,
  GEMMTUNE_ERROR_IO = 7,
  GEMMTUNE_ERROR_TIMEOUT = 8,
  GEMMTUNE_ERROR_INTERNAL = 9
} gemmtune_status;

typedef enum gemmtune_op { GEMMTUNE_OP_N = 0, GEMMTUNE_OP_T = 1 } gemmtune_op;
/* Element types, with the codes of data_types.h (the kernels and the library use the same). */
typedef enum gemmtune_dtype {
  GEMMTUNE_F32 = GEMMTUNE_TYPE_F32,
  GEMMTUNE_F16 = GEMMTUNE_TYPE_F16,
  GEMMTUNE_BF16 = GEMMTUNE_TYPE_BF16,
  GEMMTUNE_E4M3 = GEMMTUNE_TYPE_E4M3, /* float8, 4 exponent and 3 mantissa bits (e4m3fn) */
  GEMMTUNE_E5M2 = GEMMTUNE_TYPE_E5M2  /* float8, 5 exponent and 2 mantissa bits */
} gemmtune_dtype;
/* How the operands are dequantized before they are multiplied: fp32 scales in device memory
 * (GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER and _B_POINTER) that multiply each product. Float8
 * operands take one of tensor, row and block; other types none. Each operand's scales are a
 * column-major matrix whose leading dimension is its rows (gemmtune/types.hpp, scale_shape_a/b):
 *   tensor: 1 scale of A, 1 of B.
 *   row:    M scales of A (one per row of op(A)), N of B (one per column of op(B)).
 *   block:  ceil(M/128) x ceil(K/128) of A (one per 128 x 128 block of op(A)), N x ceil(K/128)
 *           of B (one per 128 K values of each column of op(B); the N of one K block contiguous).
 */
typedef enum gemmtune_scaling {
  GEMMTUNE_SCALING_NONE = 0,
  GEMMTUNE_SCALING_TENSOR = 1, /* one scale per operand */
  GEMMTUNE_SCALING_ROW = 2,    /* one per row of op(A), one per column of op(B) */
  GEMMTUNE_SCALING_BLOCK = 3   /* 128 x 128 blocks of op(A), 1 x 128 of each column of op(B) */
} gemmtune_scaling;
/* How a float8 product sums over K (GEMMTUNE_MATMUL_DESC_ACCUMULATION). Hopper's float8 wgmma
 * accumulates with fewer bits than f32, so the precise kernels promote: every few 128-deep K
 * blocks go into a fresh partial sum that is added into f32 registers. Fast accumulation is
 * cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM and torch._scaled_mm's use_fast_accum: wgmma
 * accumulates the whole K, which takes fewer instructions and has a larger error on long K. The
 * two are different problems, tuned and stored apart. */
typedef enum gemmtune_accumulation {
  /* Promoted into f32 (the default, as cuBLASLt's and torch's). */
  GEMMTUNE_ACCUMULATION_PRECISE = 0,
  /* Not promoted: float8 A and B with tensor or row scaling only (block scales multiply each
   * 128-deep K block's sum, which is a promotion already); a call of another problem is refused. */
  GEMMTUNE_ACCUMULATION_FAST = 1
} gemmtune_accumulation;
/* How an f32 product is computed (GEMMTUNE_MATMUL_DESC_PRECISION): f32 A, B, C, D and
 * accumulator only; other types have one way, exact. Each is a different problem, tuned and
 * stored apart. */
typedef enum gemmtune_precision {
  /* The library's default (the descriptor's own until set): GEMMTUNE_F32_PRECISION (exact, tf32
   * or 3xtf32) for f32 calls, else exact. */
  GEMMTUNE_PRECISION_DEFAULT = -1,
  /* f32 fused multiply-adds on CUDA cores: SGEMM's accuracy (torch's "highest"). */
  GEMMTUNE_PRECISION_EXACT = 0,
  /* Tensor cores reading each operand with a 10-bit mantissa, summed in f32 (cuBLAS's
   * CUBLAS_COMPUTE_32F_FAST_TF32, torch's "high"): an error near 2^-10 of the products. */
  GEMMTUNE_PRECISION_TF32 = 1,
  /* Three tf32 products of each operand's tf32 part and rest ("3xtf32"): the exact path's
   * accuracy on tensor cores. */
  GEMMTUNE_PRECISION_TF32X3 = 2
} gemmtune_precision;
/* The bias of an epilogue (GEMMTUNE_MATMUL_DESC_BIAS): a vector of D's type in device memory
 * (GEMMTUNE_MATMUL_DESC_BIAS_POINTER), added to every value before the activation, in f32. */
typedef enum gemmtune_bias {
  GEMMTUNE_BIAS_NONE = 0, /* the default */
  /* M values, one per row of D: an nn.Linear's output features in cuBLAS's order (y^T = W x^T:
   * M = out_features), as cuBLASLt's CUBLASLT_EPILOGUE_BIAS. */
  GEMMTUNE_BIAS_M = 1,
  GEMMTUNE_BIAS_N = 2 /* N values, one per column of D */
} gemmtune_bias;
/* The activation of an epilogue (GEMMTUNE_MATMUL_DESC_ACTIVATION), applied in f32 after C and
 * the bias are in, before the one rounding into D: torch.nn.functional's formulas. */
typedef enum gemmtune_activation {
  GEMMTUNE_ACTIVATION_IDENTITY = 0,  /* none (the default) */
  GEMMTUNE_ACTIVATION_RELU = 1,      /* max(v, 0) */
  GEMMTUNE_ACTIVATION_GELU = 2,      /* v * Phi(v), with erf (F.gelu) */
  GEMMTUNE_ACTIVATION_GELU_TANH = 3, /* GELU's tanh form (F.gelu(v, approximate="tanh")) */
  GEMMTUNE_ACTIVATION_SILU = 4       /* v * sigmoid(v) (F.silu) */
} gemmtune_activation;
/* A gated epilogue (GEMMTUNE_MATMUL_DESC_GATE: SwiGLU, GeGLU): op(A)'s M rows hold a gate part
 * and an up part, and D's element (i, n) = act(gate_i . b_n) * (up_i . b_n), each with alpha and
 * its bias, D of M / 2 rows (ldc >= M / 2). The activation is GEMMTUNE_MATMUL_DESC_ACTIVATION's
 * (SiLU: SwiGLU, GELU: GeGLU, ReLU: ReGLU). A bias along M has M values, op(A)'s rows (each added
 * to its gate or up row before the product); one along N is added to both. M must be even and
 * beta 0 (no C is read). */
typedef enum gemmtune_gate {
  GEMMTUNE_GATE_NONE = 0, /* the default: D = act(...) of M rows */
  /* Rows [0, M/2) gate and [M/2, M) up: [gate; up] stacked, as Hugging Face's gate_up_proj. */
  GEMMTUNE_GATE_HALVES = 1,
  GEMMTUNE_GATE_INTERLEAVED = 2 /* rows 2i gate and 2i + 1 up */
} gemmtune_gate;
/* What the G int32 values of a grouped GEMM (GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER) are, and so
 * which columns of op(B) and D each group owns. */
typedef enum gemmtune_group_layout {
  /* The groups' column ends: group g owns [end[g-1], end[g]) (torch._grouped_mm's offs). */
  GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS = 0,
  /* Their counts (DeepGEMM's masked layout, for decode under CUDA graphs: the shapes stay
   * fixed, only the counts change): each group has capacity = n / G columns, and group g owns
   * [g * capacity, g * capacity + count[g]), 0 <= count[g] <= capacity. */
  GEMMTUNE_GROUP_LAYOUT_MASKED = 1
} gemmtune_group_layout;

/* a, b, c are device pointers of the dtype; stream is a cudaStream_t / CUstream (NULL: default).
 * Every operand is of the one dtype (cublasGemmEx's form); gemmtune_matmul below takes a type
 * per operand. A dtype no kernel family runs on the GPU is GEMMTUNE_ERROR_UNSUPPORTED. Float8
 * (e4m3, e5m2) needs scales and a wider output, which these functions cannot say: it is
 * GEMMTUNE_ERROR_INVALID_ARGUMENT here and goes through gemmtune_matmul. */
gemmtune_status gemmtune_gemm(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b, int64_t m,
                              int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                              const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                              void* stream);

gemmtune_status gemmtune_sgemm(gemmtune_op op_a, gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const float* a, int64_t lda, const float* b,
                               int64_t ldb, float beta, float* c, int64_t ldc, void* stream);

/* As gemmtune_gemm, on GPU `device` (an ordinal, as cudaSetDevice takes): its primary context,
 * the one the CUDA runtime and PyTorch use, is made current for the call, and the thread's
 * previous context is current again afterwards. device < 0: the thread's current context. */
gemmtune_status gemmtune_gemm_on_device(int device, gemmtune_dtype dtype, gemmtune_op op_a,
                                        gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                                        float alpha, const void* a, int64_t lda, const void* b,
                                        int64_t ldb, float beta, void* c, int64_t ldc,
                                        void* stream);

/* Which kernel a gemmtune_gemm_on_device call with these arguments would use, and why, as one
 * JSON object: {"source": "tuned" | "other_version" | "sibling" | "nearest" | "fallback", "kernel",
 * "family", "config", "note", "device": the key the tuning database was searched with: {"name",
 * "cc", "sms", "driver", "nvrtc"}}. The pointers only count for their alignment and may be NULL
 * (then the leading dimensions alone decide it); beta only counts for whether it is 0 (a call that
 * reads C is tuned apart from one that does not). Looks the kernel up and compiles or loads it, as
 * the call would. *selection_json stays valid until the next gemmtune_select or
 * gemmtune_matmul_select in this thread. */
gemmtune_status gemmtune_select(int device, gemmtune_dtype dtype, gemmtune_op op_a,
                                gemmtune_op op_b, int64_t m, int64_t n, int64_t k, const void* a,
                                int64_t lda, const void* b, int64_t ldb, float beta, const void* c,
                                int64_t ldc, const char** selection_json);

/* What GEMMTUNE_RECORD=FILE does for every problem the library serves without a tuned kernel:
 * append the problem to the file at `path` as a line of gemm-tune's shapes file
 * ("M N K dtype layout [lda= ldb= ldc=] [beta=1]": beta=1 when beta != 0, as gemm-tune keeps
 * problems that read C apart), unless a line already names it. Safe from several processes at
 * once (a file lock). Needs no GPU. *appended (may be NULL): 1 if it wrote a line. Float8 takes
 * gemmtune_matmul_record_problem, whose line also names the scaling. */
gemmtune_status gemmtune_record_problem(const char* path, gemmtune_dtype dtype, gemmtune_op op_a,
                                        gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                                        int64_t lda, int64_t ldb, float beta, int64_t ldc,
                                        int* appended);

/* ---------------------------------------------------------------------------------------------
 * The matmul descriptor: what a GEMM computes beyond its sizes, described once and used for many
 * calls, in the manner of cuBLASLt's cublasLtMatmulDesc_t: D = act(alpha * op(A) * op(B) +
 * beta * C + bias) with a type for each of A, B, C, D and the accumulator, a scaling mode, op(A)
 * and op(B), and an epilogue (a bias, an activation).
 *
 *   gemmtune_matmul_desc desc;
 *   int32_t bf16 = GEMMTUNE_BF16, t = GEMMTUNE_OP_T;
 *   gemmtune_matmul_desc_create(&desc);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_A_TYPE, &bf16, sizeof bf16);
 *   ... the B, C and D types likewise; op(A) = T:
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_OP_A, &t, sizeof t);
 *   gemmtune_matmul(-1, desc, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc, stream);
 *   gemmtune_matmul_desc_destroy(desc);
 *
 * Float8 A and B (e4m3 or e5m2; C and D bf16, f16 or f32) take a scaling and their scales:
 *
 *   int32_t block = GEMMTUNE_SCALING_BLOCK;
 *   const float* scale_a = ...;  (device memory, as gemmtune_scaling says)
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_SCALING, &block, sizeof block);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER, &scale_a,
 *                                      sizeof scale_a);
 *   ... and GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER likewise.
 *
 * With tensor or row scaling, fast accumulation (torch's use_fast_accum) may be asked for:
 *
 *   int32_t fast = GEMMTUNE_ACCUMULATION_FAST;
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_ACCUMULATION, &fast,
 *                                      sizeof fast);
 *
 * f32 operands may be computed on tensor cores, with tf32 (or three tf32 products):
 *
 *   int32_t tf32 = GEMMTUNE_PRECISION_TF32;
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_PRECISION, &tf32, sizeof tf32);
 *
 * An epilogue: a bias along M (an nn.Linear's out_features, of D's type, in device memory)
 * and an activation, applied by the kernel's store:
 *
 *   int32_t bias = GEMMTUNE_BIAS_M, gelu = GEMMTUNE_ACTIVATION_GELU;
 *   const void* bias_values = ...;  (device memory: m values of D's type)
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_BIAS, &bias, sizeof bias);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_ACTIVATION, &gelu,
 *                                      sizeof gelu);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, &bias_values,
 *                                      sizeof bias_values);
 *
 * A gated epilogue (SwiGLU: D = silu(gate) * up of op(A)'s two halves, an MLP's gate_up_proj in
 * one GEMM; m = 2 * intermediate, D of m / 2 rows):
 *
 *   int32_t halves = GEMMTUNE_GATE_HALVES, silu = GEMMTUNE_ACTIVATION_SILU;
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GATE, &halves, sizeof halves);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_ACTIVATION, &silu,
 *                                      sizeof silu);
 *   gemmtune_matmul(-1, desc, 2 * inter, tokens, hidden, &alpha, w, hidden, x, hidden, &zero,
 *                   d, inter, stream);
 *
 * D may have a buffer of its own (cuBLASLt's separate D: a residual add that keeps C), with
 * C's leading dimension and type:
 *
 *   void* d = ...;
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_D_POINTER, &d, sizeof d);
 *   gemmtune_matmul(-1, desc, m, n, k, &alpha, a, lda, b, ldb, &beta, c, ldc, stream);
 *
 * A grouped GEMM (a mixture-of-experts layer: G experts, the tokens routed to each) takes its
 * groups and the device pointer to their column end offsets:
 *
 *   int32_t groups = 128;
 *   const int32_t* ends = ...;  (device memory: 128 nondecreasing column offsets)
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUPS, &groups, sizeof groups);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER, &ends,
 *                                      sizeof ends);
 *   gemmtune_matmul(-1, desc, m, n, k, ...);  (n: the columns of all groups)
 *
 * The masked layout gives each group's count instead, of a capacity of columns each:
 *
 *   int32_t masked = GEMMTUNE_GROUP_LAYOUT_MASKED;
 *   const int32_t* counts = ...;  (device memory: 128 counts, each 0 to the capacity)
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, &masked,
 *                                      sizeof masked);
 *   gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER, &counts,
 *                                      sizeof counts);
 *   gemmtune_matmul(-1, desc, m, 128 * capacity, k, ...);
 *
 * A descriptor is plain data: any number of threads may call with it at once, but setting an
 * attribute while another thread calls with it is a data race. */
typedef struct gemmtune_matmul_desc_st* gemmtune_matmul_desc;

/* The attributes of a descriptor. Every value is an int32_t (size 4), except the pointers: the
 * two scale pointers are a const float*, the group ends a const int32_t*, the bias a
 * const void*, D a void* (size sizeof(void*)). */
typedef enum gemmtune_matmul_attribute {
  GEMMTUNE_MATMUL_DESC_A_TYPE = 0,   /* gemmtune_dtype of A; default GEMMTUNE_F32 */
  GEMMTUNE_MATMUL_DESC_B_TYPE = 1,   /* gemmtune_dtype of B; default GEMMTUNE_F32 */
  GEMMTUNE_MATMUL_DESC_C_TYPE = 2,   /* gemmtune_dtype of C; default GEMMTUNE_F32 */
  GEMMTUNE_MATMUL_DESC_D_TYPE = 3,   /* gemmtune_dtype of D; default GEMMTUNE_F32. D is written
                                      * over C or into a buffer laid out as C's
                                      * (GEMMTUNE_MATMUL_DESC_D_POINTER), so a call needs D's
                                      * type equal to C's for now */
  GEMMTUNE_MATMUL_DESC_ACC_TYPE = 4, /* gemmtune_dtype of the accumulator; default GEMMTUNE_F32 */
  GEMMTUNE_MATMUL_DESC_SCALING = 5,  /* gemmtune_scaling; default GEMMTUNE_SCALING_NONE */
  GEMMTUNE_MATMUL_DESC_OP_A = 6,     /* gemmtune_op of A; default GEMMTUNE_OP_N */
  GEMMTUNE_MATMUL_DESC_OP_B = 7,     /* gemmtune_op of B; default GEMMTUNE_OP_N */
  /* const float*: A's fp32 scales in device memory, laid out as gemmtune_scaling says; default
   * NULL. Needed by a call with a scaling, ignored without one; the kernel reads the scales when
   * it runs (as cuBLASLt's A_SCALE_POINTER), so a captured graph sees new values. */
  GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER = 8,
  GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER = 9, /* const float*: B's scales, as A's */
  /* G, the groups of a grouped GEMM (a mixture-of-experts layer), 1 to 4096; default 0: one
   * GEMM. The G groups share M, K, the types and the ops; group g owns columns
   * [end[g-1], end[g]) of op(B) and D (end[-1] = 0), and A holds the G matrices of op(A), each
   * lda x (columns of A as stored) elements after the one before. n is the columns of all
   * groups; columns past end[G-1] are not written. No scaling yet. */
  GEMMTUNE_MATMUL_DESC_GROUPS = 10,
  /* const int32_t*: the G column end offsets of the groups in device memory, nondecreasing
   * (torch._grouped_mm's offs), or their G counts when masked; default NULL. Needed by a grouped
   * call, ignored by another; the kernel reads them when it runs, so a captured graph can be
   * replayed with another routing. */
  GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER = 11,
  /* gemmtune_group_layout of a grouped GEMM; default GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS. Masked:
   * the group pointer holds counts, n is G times a group's capacity (a call with n not a multiple
   * of G is refused, as is a masked one without groups), and a group's columns past its count
   * are not written. */
  GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT = 12,
  /* gemmtune_accumulation of a float8 product; default GEMMTUNE_ACCUMULATION_PRECISE. It may be
   * set in any order with the types and the scaling: a call checks the problem, and refuses
   * GEMMTUNE_ACCUMULATION_FAST other than for float8 A and B with tensor or row scaling
   * (GEMMTUNE_ERROR_INVALID_ARGUMENT). */
  GEMMTUNE_MATMUL_DESC_ACCUMULATION = 13,
  /* gemmtune_bias of the epilogue; default GEMMTUNE_BIAS_NONE. A call with a bias needs
   * GEMMTUNE_MATMUL_DESC_BIAS_POINTER. Not with groups (a grouped call with an epilogue is
   * GEMMTUNE_ERROR_INVALID_ARGUMENT). */
  GEMMTUNE_MATMUL_DESC_BIAS = 14,
  /* gemmtune_activation of the epilogue; default GEMMTUNE_ACTIVATION_IDENTITY. Each epilogue
   * is a kernel of its own: tuned and stored apart from the problem without it. */
  GEMMTUNE_MATMUL_DESC_ACTIVATION = 15,
  /* const void*: the bias vector in device memory, M or N values (as GEMMTUNE_MATMUL_DESC_BIAS
   * says) of D's type, contiguous; default NULL. Needed by a call with a bias, ignored by
   * another; read when the kernel runs (a captured graph sees new values). */
  GEMMTUNE_MATMUL_DESC_BIAS_POINTER = 16,
  /* void*: D's own buffer in device memory, with C's leading dimension (ldc) and type (cuBLASLt's
   * separate D); default NULL: D is written over C. With it, beta == 0 never reads C, and c may
   * then be NULL. */
  GEMMTUNE_MATMUL_DESC_D_POINTER = 17,
  /* gemmtune_gate of the epilogue; default GEMMTUNE_GATE_NONE. Gated: m is op(A)'s rows (gate and
   * up, even), D has m / 2 rows, beta must be 0. A kernel of its own, as the activation. */
  GEMMTUNE_MATMUL_DESC_GATE = 18,
  /* gemmtune_precision of an f32 product; default GEMMTUNE_PRECISION_DEFAULT (the library's,
   * GEMMTUNE_F32_PRECISION, for f32 calls; exact for others), which setting it back restores.
   * It may be set in any order with the types: a call checks the problem, and refuses a precision
   * other than exact for types other than f32 (GEMMTUNE_ERROR_INVALID_ARGUMENT). */
  GEMMTUNE_MATMUL_DESC_PRECISION = 19,
  /* int32_t 0 or 1: the epilogue also stores its pre-activation, alpha * op(A) op(B) + beta * C
   * + bias rounded to D's type, at GEMMTUNE_MATMUL_DESC_AUX_POINTER (cuBLASLt's _AUX epilogues:
   * what an activation's backward pass reads); default 0. For an activation other than the
   * identity, not gated. A kernel of its own, as the activation. */
  GEMMTUNE_MATMUL_DESC_AUX = 20,
  /* void*: the pre-activation's buffer in device memory, m x n values of D's type laid out as D
   * (ldc), 16-byte aligned; default NULL. Needed by a call with GEMMTUNE_MATMUL_DESC_AUX 1,
   * ignored by another. */
  GEMMTUNE_MATMUL_DESC_AUX_POINTER = 21
} gemmtune_matmul_attribute;

/* A new descriptor with the defaults: f32 everywhere, no scaling and no scales, precise
 * accumulation, the library's precision, N and N, no groups (contiguous when there are), no
 * epilogue, D written over C. */
gemmtune_status gemmtune_matmul_desc_create(gemmtune_matmul_desc* desc);
/* Frees the descriptor. NULL is accepted and does nothing (as free(NULL)). */
gemmtune_status gemmtune_matmul_desc_destroy(gemmtune_matmul_desc desc);
/* Sets `attr` to the value at `value`: an int32_t, `size` sizeof(int32_t), or for the pointers
 * a const float*, const int32_t*, const void* or void* (`value` points to the pointer), `size`
 * sizeof(void*); NULL unsets a pointer. A value that names no type, scaling, op, group layout,
 * accumulation, bias, activation or gate, or groups outside 0 to 4096, is
 * GEMMTUNE_ERROR_INVALID_ARGUMENT, and the descriptor stays as it was. Which combinations of types
 * a GPU runs is the call's question (GEMMTUNE_ERROR_UNSUPPORTED). */
gemmtune_status gemmtune_matmul_desc_set_attribute(gemmtune_matmul_desc desc,
                                                   gemmtune_matmul_attribute attr,
                                                   const void* value, size_t size);
/* Writes the value of `attr` to `value`, which holds `size` bytes (sizeof(int32_t), or
 * sizeof(void*) for the pointers), and its size to *written (may be NULL). size 0 with
 * written != NULL: only *written is set (the size the attribute needs), as
 * cublasLtMatmulDescGetAttribute does. */
gemmtune_status gemmtune_matmul_desc_get_attribute(gemmtune_matmul_desc desc,
                                                   gemmtune_matmul_attribute attr, void* value,
                                                   size_t size, size_t* written);

/* D = act(alpha * op(A) * op(B) + beta * C + bias) with the types, scaling, accumulation, ops
 * and epilogue of `desc`, on GPU `device` as gemmtune_gemm_on_device (device < 0: the thread's
 * current context). D is written over C (the buffer `c`, of leading dimension ldc) unless
 * GEMMTUNE_MATMUL_DESC_D_POINTER gives it a buffer of its own: D's type must be C's. alpha and
 * beta point to host floats; beta == 0 never reads C (c may be NULL when D has its own buffer).
 * a, b, c are device pointers; stream is a cudaStream_t / CUstream (NULL: default). The
 * descriptor, the pointers, the sizes and the leading dimensions are checked before any GPU is
 * needed (GEMMTUNE_ERROR_INVALID_ARGUMENT), and so are the scales, the bias and groups: float8
 * operands need a scaling, a scaling needs both scale pointers, a bias its pointer, fast
 * accumulation needs float8 with tensor or row scaling, and groups need the group ends pointer
 * (their counts when masked, n then a multiple of G); types (or groups) no kernel family runs on
 * this GPU are GEMMTUNE_ERROR_UNSUPPORTED, the message naming them ("no kernel family supports
 * e4m3*e5m2->bf16 tn on ..."). */
gemmtune_status gemmtune_matmul(int device, gemmtune_matmul_desc desc, int64_t m, int64_t n,
                                int64_t k, const float* alpha, const void* a, int64_t lda,
                                const void* b, int64_t ldb, const float* beta, void* c, int64_t ldc,
                                void* stream);

/* Which kernel a gemmtune_matmul call with these arguments would use, and why: the JSON of
 * gemmtune_select, with the same rules for the pointers (alignment only, may be NULL; the
 * descriptor's D pointer too, as the call's) and beta (only whether it is 0). The epilogue is
 * the problem's; the bias pointer is not needed. *selection_json stays valid until the next
 * gemmtune_select or gemmtune_matmul_select in this thread. */
gemmtune_status gemmtune_matmul_select(int device, gemmtune_matmul_desc desc, int64_t m, int64_t n,
                                       int64_t k, const void* a, int64_t lda, const void* b,
                                       int64_t ldb, float beta, const void* c, int64_t ldc,
                                       const char** selection_json);

/* gemmtune_record_problem for the problem of a descriptor: the line names the types as
 * gemm-tune's shapes file does ("bf16" when every operand is bf16, else "e4m3*e5m2->bf16"), the
 * scaling where there is one ("64 48 4096 e4m3*e4m3->bf16 tn scaling=block"), and the groups of
 * a grouped problem, with N the mean columns of a group as gemm-tune --groups takes it
 * ("1536 256 2048 bf16 tn groups=128" for n = 32768; rounded up where G does not divide n;
 * a masked problem's line adds "group_layout=masked", with N the capacity). Fast accumulation
 * follows the scaling ("... tn scaling=row accum=fast"); precise writes nothing. A precision
 * other than exact follows ("4096 4096 4096 f32 nn precision=tf32"), the descriptor's, else
 * GEMMTUNE_F32_PRECISION's for f32. None of the
 * scale pointers, the group ends, the bias pointer and the D pointer is needed. */
gemmtune_status gemmtune_matmul_record_problem(const char* path, gemmtune_matmul_desc desc,
                                               int64_t m, int64_t n, int64_t k, int64_t lda,
                                               int64_t ldb, float beta, int64_t ldc, int* appended);

/* ---------------------------------------------------------------------------------------------
 * Element types by name, so that other languages never spell the codes: *code = the code of
 * `name` ("f32", "f16", "bf16", "e4m3", "e5m2", and the aliases gemm-tune's --dtype takes:
 * "float32", "fp16", "bfloat16", "float8_e4m3fn", ...; any case). An unknown name is
 * GEMMTUNE_ERROR_INVALID_ARGUMENT and leaves *code as it was. */
gemmtune_status gemmtune_data_type_from_name(const char* name, int* code);
/* The name of a type's code ("f32", "f16", "bf16", "e4m3", "e5m2"), a static string; NULL for a
 * code that names no type. */
const char* gemmtune_data_type_name(int code);

/* The message of the last failed call in this thread ("" after a success). */
const char* gemmtune_last_error(void);
const char* gemmtune_status_string(gemmtune_status status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_H */
