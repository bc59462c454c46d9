#pragma once
// The vocabulary every layer shares: data types, operations and the problem a GEMM solves.
// Semantics are cuBLAS's: column-major storage, C = alpha * op(A) * op(B) + beta * C.
#include <cstdint>
#include <string>
#include <string_view>

namespace gemmtune {

enum class DType { f32, f16, bf16 };
enum class Op { N, T };

std::string_view to_string(DType dtype) noexcept;
char to_char(Op op) noexcept;              // 'n' or 't'
int dtype_size(DType dtype) noexcept;      // bytes per element
DType parse_dtype(std::string_view text);  // "f32"/"fp32"/"float", "f16"/"fp16"/"half", "bf16"
Op parse_op(char c);

// One GEMM problem, without its data. op(A) is M x K, op(B) is K x N, C is M x N.
struct Problem {
  DType dtype = DType::f32;
  Op op_a = Op::N;
  Op op_b = Op::N;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // Largest power of two (in bytes, at most 16) dividing every base address and every leading
  // dimension in bytes. Kernels that need wide loads or TMA require a minimum class.
  int align = 16;
  // Whether C is read (beta != 0). Its loads move more bytes and change which kernel is fastest,
  // so problems that read C are tuned and stored apart from those that do not; the value of
  // beta itself changes nothing in a kernel's speed.
  bool reads_c = false;

  std::string layout() const;                               // "nn", "nt", "tn", "tt"
  int64_t rows_a() const { return op_a == Op::N ? m : k; }  // rows of A as stored
  int64_t cols_a() const { return op_a == Op::N ? k : m; }
  int64_t rows_b() const { return op_b == Op::N ? k : n; }
  int64_t cols_b() const { return op_b == Op::N ? n : k; }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  std::string shape() const;      // "8192x8192x8192"
  std::string beta_mark() const;  // " beta!=0" if it reads C, else ""
  // "bf16 tn 8192x8192x8192 lda=8192 ldb=8192 ldc=8192 align=16", then the beta mark
  std::string describe() const;
};

// A problem with tight leading dimensions (ld = rows) and full alignment.
Problem make_problem(DType dtype, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k);

// The largest M, N and K. Kernels count rows, columns and tiles in 32-bit int; with dimensions
// up to 2^30, every such count and every tile bound (m0 + BM, (k + BK - 1) / BK, 2 * tile + 1)
// stays below 2^31. Element offsets (ld * column + row) are 64-bit, so an operand may hold far
// more than 2^31 elements.
inline constexpr int64_t kMaxDimension = int64_t(1) << 30;

// Throws Error(invalid_argument) naming the first bad field: M/N/K <= 0 or above kMaxDimension,
// ld < rows, an operand whose extent does not fit 2^62 bytes.
void validate(const Problem& problem);

// The alignment class of a problem from its addresses and leading dimensions.
int alignment_class(DType dtype, const void* a, const void* b, const void* c, int64_t lda,
                    int64_t ldb, int64_t ldc) noexcept;

}  // namespace gemmtune
