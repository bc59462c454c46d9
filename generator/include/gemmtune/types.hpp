#pragma once
// The vocabulary every layer shares: element types, operations and the problem a GEMM solves.
// Semantics are cuBLAS's: column-major storage, D = act(alpha * op(A) * op(B) + beta * C + bias),
// where D is C unless the caller gives D a buffer of its own (Epilogue).
#include <cstdint>
#include <string>
#include <string_view>

#include "data_types.h"

namespace gemmtune {

// Element types, with the codes of data_types.h (kernels and the C API use the same numbers).
enum class DataType : int {
  f32 = GEMMTUNE_TYPE_F32,
  f16 = GEMMTUNE_TYPE_F16,
  bf16 = GEMMTUNE_TYPE_BF16,
  e4m3 = GEMMTUNE_TYPE_E4M3,
  e5m2 = GEMMTUNE_TYPE_E5M2,
};
using DType = DataType;  // the name gemmtune 0.1's API used for one type of all operands
enum class Op { N, T };

std::string_view to_string(DataType type) noexcept;
char to_char(Op op) noexcept;               // 'n' or 't'
int element_bytes(DataType type) noexcept;  // bytes per element
// "f32"/"fp32"/"float", "f16"/"fp16"/"half", "bf16", "e4m3"/"fp8_e4m3", "e5m2"/"fp8_e5m2"
DataType parse_data_type(std::string_view text);
Op parse_op(char c);

// How the operands are dequantized before they are multiplied: fp32 scales, in device memory,
// that multiply each product (torch._scaled_mm's modes). Float8 operands take one; other types
// none. The layouts of the scales are scale_shape()'s.
//   tensor: one scale per operand.
//   row:    one per row of op(A) (M) and one per column of op(B) (N).
//   block:  DeepSeek-V3's: one per 128 x 128 block of op(A) (the weights in cuBLAS's operand
//           order, which torch's y = x W^T calls with), one per 128 K values of each column of
//           op(B) (the activations).
enum class Scaling { none, tensor, row, block };
std::string_view to_string(Scaling scaling) noexcept;
Scaling parse_scaling(std::string_view text);  // "none", "tensor", "row", "block"

// How a grouped problem's G int32 values in device memory split the columns of op(B) and D:
// `contiguous`, they are the groups' ends, group g owning columns [end[g-1], end[g])
// (torch._grouped_mm's offsets); `masked`, they are counts, group g owning the first count[g]
// of its capacity = n / G columns [g * capacity, (g + 1) * capacity) (DeepGEMM's layout for
// decode under CUDA graphs: the shapes stay fixed, only the counts change).
enum class GroupLayout { contiguous, masked };
std::string_view to_string(GroupLayout layout) noexcept;
GroupLayout parse_group_layout(std::string_view text);  // "contiguous", "masked"

// How a float8 product is summed. `precise` (the default, as cuBLASLt's and torch's) promotes:
// wgmma's float8 accumulation keeps fewer bits than f32 (DeepSeek-V3's report), so every few
// 128-deep K blocks go into a fresh partial sum that is added into f32 registers. `fast` lets
// wgmma accumulate the whole K (cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM, torch's
// use_fast_accum): fewer instructions, a larger error on long K. Only tensor and row scaling
// have it; block scales multiply each K block's sum, which is a promotion already.
enum class Accumulation { precise, fast };
std::string_view to_string(Accumulation accumulation) noexcept;
Accumulation parse_accumulation(std::string_view text);  // "precise", "fast"

// How an f32 product is computed (f32 operands only). `exact` (the default, torch's "highest"):
// f32 fused multiply-adds, SGEMM's accuracy. `tf32`: tensor cores read each operand with a
// 10-bit mantissa (cuBLAS's CUBLAS_COMPUTE_32F_FAST_TF32, torch's "high"): an error near 2^-10
// of the products. `tf32x3` ("3xtf32"): each operand split into its tf32 part and the tf32 of the
// rest, three tensor-core products (big x big, big x small, small x big) summed in f32: the exact
// path's tolerance at tensor-core speed. A kernel's error differs, so each is tuned and stored
// apart.
enum class Precision { exact, tf32, tf32x3 };
std::string_view to_string(Precision precision) noexcept;  // "exact", "tf32", "3xtf32"
Precision parse_precision(std::string_view text);          // the same, case-insensitive

// What the store does to each value beyond alpha and beta: D = act(alpha * op(A) op(B) +
// beta * C + bias), in f32, rounded once into D (cuBLASLt's epilogues, with SiLU besides).
//   bias:       none, a vector along M (one per row of D: the output features of an nn.Linear in
//               cuBLAS's order, y^T = W x^T) or along N, of D's type, read by the store; never
//               materialized in C.
//   activation: identity, ReLU, GELU (erf), GELU (tanh form), SiLU.
//   gate:       none, or gated (SwiGLU, GeGLU): op(A)'s M rows hold a gate part and an up part,
//               and D's row i = act(gate row's value) * up row's value, D of M / 2 rows. The parts
//               are op(A)'s two halves (`halves`, [gate; up] as Hugging Face stores them) or rows
//               2i and 2i + 1 (`interleaved`). The bias (along M: op(A)'s rows) is added to both
//               before; a gated problem reads no C.
//   aux:        the pre-activation, alpha * op(A) op(B) + beta * C + bias rounded to D's type, as
//               a second output ("aux", cuBLASLt's _AUX epilogues): what the backward pass of an
//               activation reads. M x N values of D's type laid out as D (C's leading
//               dimension); for an activation that is not the identity, and not gated.
// Each is a different kernel, so the epilogue is part of a problem's identity.
enum class Bias { none, m, n };
enum class Activation { identity, relu, gelu, gelu_tanh, silu };
enum class Gate { none, halves, interleaved };
std::string_view to_string(Activation activation) noexcept;

struct Epilogue {
  Bias bias = Bias::none;
  Activation activation = Activation::identity;
  Gate gate = Gate::none;
  bool aux = false;

  bool none() const {
    return bias == Bias::none && activation == Activation::identity && !gated() && !aux;
  }
  bool gated() const { return gate != Gate::none; }
  // "none", else its parts joined by commas: "bias" (along M), "bias_n", then the activation
  // ("relu", "gelu", "gelu_tanh", "silu"), or for a gated one its name ("swiglu": SiLU, "geglu":
  // GELU, "geglu_tanh", "reglu": ReLU) and "interleaved" for that layout, and "aux" last:
  // "bias,gelu", "swiglu,interleaved", "bias,gelu,aux". parse_epilogue() reads it back.
  std::string name() const;
  bool operator==(const Epilogue& o) const {
    return bias == o.bias && activation == o.activation && gate == o.gate && aux == o.aux;
  }
  bool operator!=(const Epilogue& o) const { return !(*this == o); }
};
// "none" or "" for none, else comma-separated parts in any order, at most one of each kind (a
// gated name is the activation's; "interleaved" needs one); throws Error(invalid_argument) naming
// the part it does not know.
Epilogue parse_epilogue(std::string_view text);

// The K (and, for op(A), M) extent of one block of `block` scaling.
inline constexpr int64_t kScaleBlock = 128;

// The element type of each operand, and of the accumulator. C is the input added with beta, D
// the output; the library writes D over C, so the two are one type for now.
struct DataTypes {
  DataType a = DataType::f32, b = DataType::f32, c = DataType::f32, d = DataType::f32;
  DataType acc = DataType::f32;

  // Every operand of one type with f32 accumulation: what `--dtype bf16` means.
  static constexpr DataTypes uniform(DataType type) { return {type, type, type, type}; }
  bool is_uniform() const { return *this == uniform(a); }
  // "bf16" for uniform types, else "A*B->D", with "+c=T" and "+acc=T" where those differ from
  // D and f32: "e4m3*e5m2->bf16". parse_data_types() reads both forms back.
  std::string name() const;
  // The same as one identifier, for kernel names: "bf16", "e4m3_e5m2_bf16".
  std::string token() const;
  // Written out: this header is public, and its users may compile as C++17.
  bool operator==(const DataTypes& o) const {
    return a == o.a && b == o.b && c == o.c && d == o.d && acc == o.acc;
  }
  bool operator!=(const DataTypes& o) const { return !(*this == o); }
};
DataTypes parse_data_types(std::string_view text);  // throws Error(invalid_argument)

// One GEMM problem, without its data. op(A) is M x K, op(B) is K x N, C and D are M x N.
//
// A grouped problem (a mixture-of-experts layer, `groups` = G >= 1) is G GEMMs that share M, K,
// the types and the layout and split the N columns between them: group g owns columns
// [end[g-1], end[g]) of op(B) and D (end[-1] = 0), where `end` is G nondecreasing int32 offsets
// in device memory (torch._grouped_mm's `offs`), read only by the kernel, so that a captured
// graph can be replayed with another routing. Columns past end[G-1] are not written. A holds G
// matrices of op(A), group g's group_stride_a() elements after the first. N is then the columns
// of all groups (n / G the mean tokens of an expert). A `masked` grouped problem gives counts
// instead (GroupLayout): N is then G times the capacity of a group, and the columns of a group
// past its count are not written.
struct Problem {
  DataTypes types;
  Scaling scaling = Scaling::none;
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
  int64_t groups = 0;  // 0: one GEMM; else G groups (above)
  GroupLayout group_layout = GroupLayout::contiguous;
  // Float8 with tensor or row scaling only (Accumulation); a kernel's error differs, so the two
  // are tuned and stored apart.
  Accumulation accumulation = Accumulation::precise;
  // f32 operands only (Precision).
  Precision precision = Precision::exact;
  // Bias and activation applied by the store (Epilogue).
  Epilogue epilogue;

  bool fast_accumulation() const { return accumulation == Accumulation::fast; }
  bool grouped() const { return groups > 0; }
  int64_t group_count() const { return groups > 0 ? groups : 1; }  // 1 for one GEMM
  bool masked() const { return grouped() && group_layout == GroupLayout::masked; }
  // A masked problem's columns per group (n / G); 0 otherwise.
  int64_t group_capacity() const { return masked() ? n / groups : 0; }
  // Elements from one group's A to the next: one stored op(A), tightly after the other.
  int64_t group_stride_a() const { return lda * cols_a(); }
  std::string layout() const;                               // "nn", "nt", "tn", "tt"
  int64_t rows_a() const { return op_a == Op::N ? m : k; }  // rows of A as stored
  int64_t cols_a() const { return op_a == Op::N ? k : m; }
  int64_t cols_a_stored() const { return cols_a() * group_count(); }  // all groups' matrices
  int64_t rows_b() const { return op_b == Op::N ? k : n; }
  int64_t cols_b() const { return op_b == Op::N ? n : k; }
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
  // Bytes of A (all groups'), B, C (when read), D (twice with a pre-activation output) and the
  // bias once each, as stored tightly: the memory floor.
  double operand_bytes() const;
  // The bias vector's bytes (M or N values of D's type), 0 without one.
  double bias_bytes() const;
  // D's rows (and C's): M, or M / 2 with a gated epilogue.
  int64_t output_rows() const { return epilogue.gated() ? m / 2 : m; }
  std::string shape() const;      // "8192x8192x8192"
  std::string beta_mark() const;  // " beta!=0" if it reads C, else ""
  // "bf16 tn 8192x8192x8192 lda=8192 ldb=8192 ldc=8192 align=16", then the scaling when there
  // is one ("scaling=tensor", "scaling=tensor accum=fast"), the precision when not exact
  // ("precision=tf32"), the groups when grouped ("groups=128",
  // "groups=128 masked"), the epilogue when there is one ("epilogue=bias,gelu"), then the beta
  // mark
  std::string describe() const;
  bool operator==(const Problem& o) const {
    return types == o.types && scaling == o.scaling && op_a == o.op_a && op_b == o.op_b &&
           m == o.m && n == o.n && k == o.k && lda == o.lda && ldb == o.ldb && ldc == o.ldc &&
           align == o.align && reads_c == o.reads_c && groups == o.groups &&
           group_layout == o.group_layout && accumulation == o.accumulation &&
           precision == o.precision && epilogue == o.epilogue;
  }
  bool operator!=(const Problem& o) const { return !(*this == o); }
};

// The fp32 scales of one operand, a column-major rows x cols matrix with ld = rows (a single
// value for `tensor`): row scaling has M scales of A and N of B; block scaling ceil(M/128) x
// ceil(K/128) of A (the 128-row blocks contiguous) and N x ceil(K/128) of B (the N columns
// contiguous for each 128-deep K block, the layout a kernel reads a tile's scales of in one
// sweep). A grouped problem's A holds G matrices, and its scales of A G such matrices, group g's
// (cols / G columns) after g - 1's (templates/scale_layout.h); B's scales span all N columns.
// Zero by zero when the problem has no scaling.
struct ScaleShape {
  int64_t rows = 0, cols = 0;
  int64_t count() const { return rows * cols; }
};
ScaleShape scale_shape_a(const Problem& problem);
ScaleShape scale_shape_b(const Problem& problem);

// The columns [begin, end) of group g of a grouped problem, from a host copy of its G values
// (the groups' ends, or their counts when masked).
struct ColumnRange {
  int64_t begin = 0, end = 0;
};
ColumnRange group_columns(const Problem& problem, const int32_t* values, int64_t g);

// For unordered containers of problems.
struct ProblemHash {
  size_t operator()(const Problem& problem) const noexcept;
};

// A problem with tight leading dimensions (ld = rows) and full alignment.
Problem make_problem(DataTypes types, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k);
inline Problem make_problem(DataType type, Op op_a, Op op_b, int64_t m, int64_t n, int64_t k) {
  return make_problem(DataTypes::uniform(type), op_a, op_b, m, n, k);
}

// The largest M, N and K. Kernels count rows, columns and tiles in 32-bit int; with dimensions
// up to 2^30, every such count and every tile bound (m0 + BM, (k + BK - 1) / BK, 2 * tile + 1)
// stays below 2^31. Element offsets (ld * column + row) are 64-bit, so an operand may hold far
// more than 2^31 elements.
inline constexpr int64_t kMaxDimension = int64_t(1) << 30;

// The most groups a grouped problem may have.
inline constexpr int64_t kMaxGroups = 4096;

// Throws Error(invalid_argument) naming the first bad field: M/N/K <= 0 or above kMaxDimension,
// ld < rows, an operand whose extent does not fit 2^62 bytes, D of another type than C, float8
// operands without scaling or scaling of other types, a float8 output, groups < 0 or above
// kMaxGroups, a grouped problem with scaling (not defined yet), a masked layout without groups or
// with N not a multiple of G, fast accumulation other than of float8 with tensor or row scaling,
// a precision other than exact of other than f32 operands and accumulator,
// an epilogue on a grouped problem (not defined yet), a gated one with an odd M or reading C,
// ldc below D's rows.
void validate(const Problem& problem);

// The alignment class of a problem from its addresses and leading dimensions.
int alignment_class(const DataTypes& types, const void* a, const void* b, const void* c,
                    int64_t lda, int64_t ldb, int64_t ldc) noexcept;
// The same of a call whose D may have a buffer of its own (d null: D is written over C): C counts
// where it is read or D is written over it, and D's own buffer where there is one.
int alignment_class(const DataTypes& types, const void* a, const void* b, const void* c,
                    const void* d, bool reads_c, int64_t lda, int64_t ldb, int64_t ldc) noexcept;

}  // namespace gemmtune
