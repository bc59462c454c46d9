#include "gemmtune/types.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <tuple>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::invalid_argument:
      return "invalid_argument";
    case Errc::unsupported:
      return "unsupported";
    case Errc::no_device:
      return "no_device";
    case Errc::cuda:
      return "cuda";
    case Errc::compile:
      return "compile";
    case Errc::database:
      return "database";
    case Errc::io:
      return "io";
    case Errc::timeout:
      return "timeout";
    case Errc::internal:
      return "internal";
  }
  return "unknown";
}

std::string_view to_string(DType dtype) noexcept {
  switch (dtype) {
    case DType::f32:
      return "f32";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
  }
  return "?";
}

char to_char(Op op) noexcept {
  return op == Op::N ? 'n' : 't';
}

int dtype_size(DType dtype) noexcept {
  return dtype == DType::f32 ? 4 : 2;
}

DType parse_dtype(std::string_view text) {
  std::string t(text);
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  if (t == "f32" || t == "fp32" || t == "float" || t == "float32" || t == "s") return DType::f32;
  if (t == "f16" || t == "fp16" || t == "half" || t == "float16" || t == "h") return DType::f16;
  if (t == "bf16" || t == "bfloat16") return DType::bf16;
  GT_THROW(Errc::invalid_argument, "unknown dtype '{}' (expected f32, f16 or bf16)", text);
}

Op parse_op(char c) {
  if (c == 'n' || c == 'N') return Op::N;
  if (c == 't' || c == 'T') return Op::T;
  GT_THROW(Errc::invalid_argument, "unknown op '{}' (expected n or t)", c);
}

std::string Problem::layout() const {
  return {to_char(op_a), to_char(op_b)};
}

std::string Problem::shape() const {
  return fmt::format("{}x{}x{}", m, n, k);
}

std::string Problem::beta_mark() const {
  return reads_c ? " beta!=0" : "";
}

std::string Problem::describe() const {
  return fmt::format("{} {} {} lda={} ldb={} ldc={} align={}{}", to_string(dtype), layout(),
                     shape(), lda, ldb, ldc, align, beta_mark());
}

Problem make_problem(DType dtype, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k) {
  Problem p;
  p.dtype = dtype;
  p.op_a = op_a;
  p.op_b = op_b;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = std::max<int64_t>(1, p.rows_a());
  p.ldb = std::max<int64_t>(1, p.rows_b());
  p.ldc = std::max<int64_t>(1, m);
  p.align = 16;
  const int64_t esize = dtype_size(dtype);
  for (int64_t ld : {p.lda, p.ldb, p.ldc})
    while (p.align > 1 && (ld * esize) % p.align != 0) p.align /= 2;
  return p;
}

namespace {

// Bytes from the first element of a stored rows x cols matrix to one past its last, or -1 when
// that does not fit in 62 bits (no memory is that large; the kernels' 64-bit offsets stay exact).
int64_t span_bytes(int64_t rows, int64_t cols, int64_t ld, int esize) {
  const unsigned __int128 elements = (unsigned __int128)(cols - 1) * uint64_t(ld) + uint64_t(rows);
  const unsigned __int128 bytes = elements * unsigned(esize);
  return bytes >> 62 ? -1 : int64_t(bytes);
}

}  // namespace

void validate(const Problem& p) {
  GT_REQUIRE(p.m >= 1, Errc::invalid_argument, "M must be at least 1 (got {})", p.m);
  GT_REQUIRE(p.n >= 1, Errc::invalid_argument, "N must be at least 1 (got {})", p.n);
  GT_REQUIRE(p.k >= 1, Errc::invalid_argument, "K must be at least 1 (got {})", p.k);
  GT_REQUIRE(p.m <= kMaxDimension && p.n <= kMaxDimension && p.k <= kMaxDimension,
             Errc::invalid_argument, "M, N and K must be at most 2^30 = {} each (got {})",
             kMaxDimension, p.shape());
  GT_REQUIRE(p.lda >= p.rows_a(), Errc::invalid_argument,
             "lda ({}) must be at least the rows of A as stored ({}: op(A)={}, {})", p.lda,
             p.rows_a(), to_char(p.op_a), p.op_a == Op::N ? "M" : "K");
  GT_REQUIRE(p.ldb >= p.rows_b(), Errc::invalid_argument,
             "ldb ({}) must be at least the rows of B as stored ({}: op(B)={}, {})", p.ldb,
             p.rows_b(), to_char(p.op_b), p.op_b == Op::N ? "K" : "N");
  GT_REQUIRE(p.ldc >= p.m, Errc::invalid_argument, "ldc ({}) must be at least M ({})", p.ldc, p.m);
  const int esize = dtype_size(p.dtype);
  for (const auto& [name, rows, cols, ld] :
       {std::tuple{'A', p.rows_a(), p.cols_a(), p.lda},
        std::tuple{'B', p.rows_b(), p.cols_b(), p.ldb}, std::tuple{'C', p.m, p.n, p.ldc}})
    GT_REQUIRE(span_bytes(rows, cols, ld, esize) >= 0, Errc::invalid_argument,
               "{} spans more than 2^62 bytes (ld {} x {} columns): no GPU holds that", name, ld,
               cols);
  GT_REQUIRE(p.align >= 1 && p.align <= 16 && (p.align & (p.align - 1)) == 0,
             Errc::invalid_argument, "alignment class must be a power of two in 1..16 (got {})",
             p.align);
}

int alignment_class(DType dtype, const void* a, const void* b, const void* c, int64_t lda,
                    int64_t ldb, int64_t ldc) noexcept {
  const uint64_t esize = dtype_size(dtype);
  uint64_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                  reinterpret_cast<uintptr_t>(c) | uint64_t(lda) * esize | uint64_t(ldb) * esize |
                  uint64_t(ldc) * esize | 16u;
  return int(bits & (~bits + 1));  // lowest set bit, at most 16
}

}  // namespace gemmtune
