/* gemmtune C API: C = alpha * op(A) * op(B) + beta * C, cuBLAS semantics (column-major).
 * Every function returns a status; gemmtune_last_error() says what went wrong in this thread. */
#ifndef GEMMTUNE_H
#define GEMMTUNE_H

#include <stdint.h>

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
typedef enum gemmtune_dtype {
  GEMMTUNE_F32 = 0,
  GEMMTUNE_F16 = 1,
  GEMMTUNE_BF16 = 2
} gemmtune_dtype;

/* a, b, c are device pointers of the dtype; stream is a cudaStream_t / CUstream (NULL: default). */
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
 * JSON object: {"source": "tuned" | "other_version" | "nearest" | "fallback", "kernel", "family",
 * "config", "note", "device": the key the tuning database was searched with: {"name", "cc", "sms",
 * "driver", "nvrtc"}}. The pointers only count for their alignment and may be NULL (then the
 * leading dimensions alone decide it); beta only counts for whether it is 0 (a call that reads C
 * is tuned apart from one that does not). Looks the kernel up and compiles or loads it, as the
 * call would. *selection_json stays valid until the next gemmtune_select in this thread. */
gemmtune_status gemmtune_select(int device, gemmtune_dtype dtype, gemmtune_op op_a,
                                gemmtune_op op_b, int64_t m, int64_t n, int64_t k, const void* a,
                                int64_t lda, const void* b, int64_t ldb, float beta, const void* c,
                                int64_t ldc, const char** selection_json);

/* What GEMMTUNE_RECORD=FILE does for every problem the library serves without a tuned kernel:
 * append the problem to the file at `path` as a line of gemm-tune's shapes file
 * ("M N K dtype layout [lda= ldb= ldc=] [beta=1]": beta=1 when beta != 0, as gemm-tune keeps
 * problems that read C apart), unless a line already names it. Safe from several processes at
 * once (a file lock). Needs no GPU. *appended (may be NULL): 1 if it wrote a line. */
gemmtune_status gemmtune_record_problem(const char* path, gemmtune_dtype dtype, gemmtune_op op_a,
                                        gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                                        int64_t lda, int64_t ldb, float beta, int64_t ldc,
                                        int* appended);

/* The message of the last failed call in this thread ("" after a success). */
const char* gemmtune_last_error(void);
const char* gemmtune_status_string(gemmtune_status status);

#ifdef __cplusplus
}
#endif

#endif /* GEMMTUNE_H */
