#pragma once
// gemmtune: C = alpha * op(A) * op(B) + beta * C with kernels tuned for your GPU.
//
// Semantics are cuBLAS's (cublasGemmEx): column-major storage, op(A) and op(B) in {N, T},
// leading dimensions, alpha and beta on the host, beta == 0 never reads C. Row-major data:
// compute C^T = op(B)^T op(A)^T, i.e. swap A and B (and M and N) and pass the row strides.
//
// The kernel for a shape is the one `gemm-tune` stored in the tuning database for this GPU;
// else the one tuned for the shape on this GPU under another driver or NVRTC; else the one tuned
// for it on another GPU of the same compute capability (an H100's on an H200); else the tuned
// kernel of the nearest shape; else a built-in default. It is compiled (or loaded from the kernel
// cache) on first use and kept in memory. A damaged database is reported once (log) and ignored.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gemmtune/error.hpp"
#include "gemmtune/types.hpp"

struct CUstream_st;

namespace gemmtune {

using Stream = CUstream_st*;  // a cudaStream_t or CUstream; nullptr is the default stream

// Storage types with the layout of __nv_bfloat16 and __half.
struct bf16 {
  uint16_t bits;
};
struct f16 {
  uint16_t bits;
};

enum class Source {
  tuned,          // the tuning database has this exact problem for this GPU
  other_version,  // this exact problem, tuned on this GPU under another CUDA driver or NVRTC
  sibling,        // this exact problem, tuned on another GPU of the same compute capability
  nearest,        // the tuned kernel of the nearest shape (same GPU, types and layout)
  fallback,       // nothing tuned applies: the built-in default of the best family
};
const char* to_string(Source source) noexcept;

struct Selection {
  std::string kernel;  // kernel name, as profilers show it
  std::string family;
  std::string config;  // JSON
  Source source = Source::fallback;
  // other_version: the driver and NVRTC it was tuned with; sibling: the GPU; nearest: the shape
  std::string note;
};

// What a GEMM computes beyond its sizes, described once and used for many calls, in the manner
// of cuBLASLt's matmul descriptor: each operand's type, the scaling and its scales, op(A) and
// op(B), the groups of a grouped GEMM, how a float8 product accumulates, how an f32 product is
// computed, and the epilogue.
struct MatmulDesc {
  DataTypes types;  // default: f32 everywhere (A, B, C = D, accumulator), as the C descriptor
  Scaling scaling = Scaling::none;
  Op op_a = Op::N;
  Op op_b = Op::N;
  // With scaling: device pointers to the fp32 scales of A and B, laid out as scale_shape_a/b
  // say (as cuBLASLt's A_SCALE_POINTER, read when the kernel runs: a graph sees new values).
  const float* scale_a = nullptr;
  const float* scale_b = nullptr;
  // A grouped GEMM (gemmtune/types.hpp, Problem): G groups, and a device pointer to their G int32
  // column end offsets (torch._grouped_mm's offs), read when the kernel runs. A holds the G
  // matrices of op(A) one after another; n is the columns of all groups. Masked (GroupLayout):
  // group_ends points to the groups' counts instead, and n is G times a group's capacity.
  int64_t groups = 0;
  const int32_t* group_ends = nullptr;
  GroupLayout group_layout = GroupLayout::contiguous;
  // Float8 with tensor or row scaling: fast lets wgmma accumulate the whole K without promoting
  // its partial sums into f32 (cuBLASLt's FAST_ACCUM, torch's use_fast_accum; gemmtune/types.hpp,
  // Accumulation). A call of another problem with fast is refused (validate()). Last, so that
  // {types, scaling, op_a, op_b} still initializes the others.
  Accumulation accumulation = Accumulation::precise;
  // How an f32 product is computed (gemmtune/types.hpp, Precision): exact, tf32 or 3xtf32. Unset:
  // the library's default for f32 operands, accumulator and output (Options::f32_precision),
  // exact for other types. Set, it is the call's: other than exact with types other than f32, a
  // call is refused (validate()).
  std::optional<Precision> precision;
  // What the store applies (gemmtune/types.hpp, Epilogue): a bias, then an activation. With a
  // bias, a device pointer to its M (or N) values of D's type, read when the kernel runs.
  Epilogue epilogue;
  const void* bias = nullptr;
  // With epilogue.aux, where the pre-activation goes: M x N values of D's type laid out as D
  // (ldc), 16-byte aligned, in device memory.
  void* aux = nullptr;
  // D's own buffer, with C's leading dimension and type (a residual add that keeps its input);
  // null: D is written over C. With beta == 0, C is then never read and may be null.
  void* d = nullptr;
};

struct Options {
  std::string db_path;  // empty: $GEMMTUNE_DB, else ~/.cache/gemmtune/tuning.db
  // Read before db_path, and where GEMMTUNE_TUNE queues and tunes: a writable file over a
  // read-only db_path (one shipped with a model). Empty: $GEMMTUNE_DB_OVERLAY, else none.
  std::string overlay_db_path;
  std::string cache_dir;  // empty: $GEMMTUNE_CACHE_DIR, else ~/.cache/gemmtune
  bool use_database = true;
  // Only these kernel families serve calls, comma-separated ("mma_sm80"); empty:
  // $GEMMTUNE_FAMILIES, else all. Tests a family on a GPU where another would be chosen.
  std::string families;
  // Tuning while serving; empty: $GEMMTUNE_TUNE, else off. "background": a problem without a
  // tuned kernel is served at once (nearest, default) and queued in the database for the tuning
  // daemon (gemm-tune --serve), whose result later calls take up, between calls, never during a
  // CUDA graph capture. "now": its first call waits while gemm-tune tunes it (tune_budget).
  std::string tune;
  std::string tune_budget;  // "now": a problem's budget (30s, 2m, 40); empty: $GEMMTUNE_TUNE_BUDGET
  double refresh_s = 0;     // background: seconds between looks for results; 0: $GEMMTUNE_REFRESH_S
  // How f32 calls whose descriptor sets no precision are computed: exact, tf32 or 3xtf32 (as
  // cuBLAS's CUBLAS_TF32_TENSOR_OP_MATH makes SGEMM tf32); empty: $GEMMTUNE_F32_PRECISION, else
  // exact.
  std::string f32_precision;
};

// Options::f32_precision, else $GEMMTUNE_F32_PRECISION, else exact. Throws Error(invalid_argument)
// naming the bad value and where it came from.
Precision f32_precision_of(const Options& options);
// The precision of a call of `desc`: its own where set; else `f32_default` for f32 operands,
// accumulator and output, exact for other types (they have one way of being computed).
Precision precision_of(const MatmulDesc& desc, Precision f32_default);

// A library instance: its own database connection, kernel cache and loaded kernels.
// Thread-safe. Most programs use the process-wide instance through gemmtune::gemm().
class Library {
 public:
  explicit Library(Options options = {});
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  // D = act(alpha * op(A) * op(B) + beta * C + bias), D written over C unless desc.d gives it a
  // buffer of its own, with the types and epilogue of `desc`.
  // Throws gemmtune::Error: invalid_argument (M/N/K <= 0, ld < rows, null pointer),
  // unsupported (types or GPU), no_device, cuda, compile.
  void matmul(const MatmulDesc& desc, int64_t m, int64_t n, int64_t k, float alpha, const void* a,
              int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
              Stream stream = nullptr);
  // The same with one type of every operand (cublasGemmEx's form).
  void gemm(DType dtype, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha,
            const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
            int64_t ldc, Stream stream = nullptr) {
    matmul({DataTypes::uniform(dtype), Scaling::none, op_a, op_b}, m, n, k, alpha, a, lda, b, ldb,
           beta, c, ldc, stream);
  }

  // The kernel a call with this problem would use, and why.
  Selection select(const Problem& problem);
  // The precision of f32 calls whose descriptor sets none (f32_precision_of its options).
  Precision f32_precision() const;
  // Forgets what was looked up, so that a database updated since is read again.
  void reload();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process-wide library (default options).
Library& default_library();

inline void gemm(DType dtype, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha,
                 const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                 int64_t ldc, Stream stream = nullptr) {
  default_library().gemm(dtype, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}
inline void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                 int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc,
                 Stream stream = nullptr) {
  gemm(DType::f32, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}
inline void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const bf16* a,
                 int64_t lda, const bf16* b, int64_t ldb, float beta, bf16* c, int64_t ldc,
                 Stream stream = nullptr) {
  gemm(DType::bf16, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}
inline void gemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, float alpha, const f16* a,
                 int64_t lda, const f16* b, int64_t ldb, float beta, f16* c, int64_t ldc,
                 Stream stream = nullptr) {
  gemm(DType::f16, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}

}  // namespace gemmtune
