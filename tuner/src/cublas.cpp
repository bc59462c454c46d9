#include "gemmtune/tuner/cublas.hpp"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <limits>
#include <list>
#include <mutex>
#include <vector>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/runtime/memory.hpp"

namespace gemmtune {

// The little of cuBLASLt the float8 and epilogue baselines call, declared here so that cublasLt.h
// is no build dependency either. Types, attributes and values are copied from cublasLt.h of the
// CUDA 13.0 toolkit (cuBLAS 13.1.0); the scale modes came with cuBLAS 12.9, the rest is older. The
// attribute enums are int-sized C enums, passed here as int.
namespace lt {

struct Context;
using Handle = Context*;  // cublasLtHandle_t
struct MatmulDescOpaque;
using MatmulDesc = MatmulDescOpaque*;  // cublasLtMatmulDesc_t
struct LayoutOpaque;
using Layout = LayoutOpaque*;  // cublasLtMatrixLayout_t
struct PreferenceOpaque;
using Preference = PreferenceOpaque*;  // cublasLtMatmulPreference_t
struct Algo {                          // cublasLtMatmulAlgo_t
  uint64_t data[8];
};
struct HeuristicResult {  // cublasLtMatmulHeuristicResult_t
  Algo algo;
  size_t workspace_size;
  cublasStatus_t state;
  float waves_count;
  int reserved[4];
};

// cublasLtMatmulDescAttributes_t (int32_t values for the modes and operations, pointers for
// the scales)
constexpr int kDescTransA = 3;          // CUBLASLT_MATMUL_DESC_TRANSA
constexpr int kDescTransB = 4;          // CUBLASLT_MATMUL_DESC_TRANSB
constexpr int kDescAScalePointer = 17;  // CUBLASLT_MATMUL_DESC_A_SCALE_POINTER
constexpr int kDescBScalePointer = 18;  // CUBLASLT_MATMUL_DESC_B_SCALE_POINTER
constexpr int kDescAScaleMode = 31;     // CUBLASLT_MATMUL_DESC_A_SCALE_MODE
constexpr int kDescBScaleMode = 32;     // CUBLASLT_MATMUL_DESC_B_SCALE_MODE
constexpr int kDescFastAccum = 25;      // CUBLASLT_MATMUL_DESC_FAST_ACCUM (int8_t)
constexpr int kDescEpilogue = 7;        // CUBLASLT_MATMUL_DESC_EPILOGUE (uint32_t)
constexpr int kDescBiasPointer = 8;     // CUBLASLT_MATMUL_DESC_BIAS_POINTER (const void*)
constexpr int kDescBiasDataType = 26;   // CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE (int32_t)
constexpr int kDescAuxPointer = 11;     // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER (void*)
constexpr int kDescAuxLd = 12;          // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD (int64_t)
// cublasLtEpilogue_t: its values combine (RELU_BIAS = RELU | BIAS, GELU_BIAS = GELU | BIAS)
constexpr int32_t kEpilogueDefault = 1;    // CUBLASLT_EPILOGUE_DEFAULT
constexpr int32_t kEpilogueRelu = 2;       // CUBLASLT_EPILOGUE_RELU
constexpr int32_t kEpilogueBias = 4;       // CUBLASLT_EPILOGUE_BIAS
constexpr int32_t kEpilogueGelu = 32;      // CUBLASLT_EPILOGUE_GELU
constexpr int32_t kEpilogueGeluAux = 160;  // CUBLASLT_EPILOGUE_GELU_AUX: GELU's input kept
// cublasLtMatmulMatrixScale_t (SCALAR_32F = 0 is the default, left as it is for `tensor`)
constexpr int32_t kScaleOuterVec32F = 3;     // CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F
constexpr int32_t kScaleVec128_32F = 4;      // CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
constexpr int32_t kScaleBlk128x128_32F = 5;  // CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
// cublasLtMatmulPreferenceAttributes_t (uint64_t for the workspace, uint32_t for alignments)
constexpr int kPrefMaxWorkspaceBytes = 1;  // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
constexpr int kPrefMinAlignmentA = 5;      // CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES
constexpr int kPrefMinAlignmentB = 6;      // ..._B_BYTES
constexpr int kPrefMinAlignmentC = 7;      // ..._C_BYTES
constexpr int kPrefMinAlignmentD = 8;      // ..._D_BYTES

struct Functions {
  cublasStatus_t (*create)(Handle*) = nullptr;
  cublasStatus_t (*destroy)(Handle) = nullptr;
  size_t (*get_version)() = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;    // optional
  const char* (*status_string)(cublasStatus_t) = nullptr;  // optional
  cublasStatus_t (*desc_create)(MatmulDesc*, cublasComputeType_t, cudaDataType) = nullptr;
  cublasStatus_t (*desc_destroy)(MatmulDesc) = nullptr;
  cublasStatus_t (*desc_set)(MatmulDesc, int, const void*, size_t) = nullptr;
  cublasStatus_t (*layout_create)(Layout*, cudaDataType, uint64_t, uint64_t, int64_t) = nullptr;
  cublasStatus_t (*layout_destroy)(Layout) = nullptr;
  cublasStatus_t (*pref_create)(Preference*) = nullptr;
  cublasStatus_t (*pref_destroy)(Preference) = nullptr;
  cublasStatus_t (*pref_set)(Preference, int, const void*, size_t) = nullptr;
  cublasStatus_t (*heuristic)(Handle, MatmulDesc, Layout, Layout, Layout, Layout, Preference, int,
                              HeuristicResult*, int*) = nullptr;
  cublasStatus_t (*matmul)(Handle, MatmulDesc, const void*, const void*, Layout, const void*,
                           Layout, const void*, const void*, Layout, void*, Layout, const Algo*,
                           void*, size_t, cudaStream_t) = nullptr;
};

// The largest power of two dividing an address, at most 256 (cuBLASLt's default assumption).
inline uint32_t address_alignment(CUdeviceptr p) {
  uint32_t a = 256;
  while (a > 1 && p % a != 0) a /= 2;
  return a;
}

// One float8 or epilogue problem made ready: cuBLASLt's descriptors and algorithm, and the
// scales in its layouts where ours differ, for the problem, the caller's scale and bias pointers
// and the alignment of the operands.
struct Plan {
  explicit Plan(const Functions& functions) : f(functions) {}
  ~Plan() {
    for (Layout l : {a, b, c})
      if (l) f.layout_destroy(l);
    if (desc) f.desc_destroy(desc);
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;

  bool serves(const Problem& p, const GemmOperands& o) const {
    return problem == p && scale_a == o.scale_a && scale_b == o.scale_b && bias == bias_of(p, o) &&
           aux == (p.epilogue.aux ? o.aux : 0) && align_a == address_alignment(o.a) &&
           align_b == address_alignment(o.b) && align_c == address_alignment(o.c);
  }
  // The bias pointer that matters: none without a bias, whatever the operands hold.
  static CUdeviceptr bias_of(const Problem& p, const GemmOperands& o) {
    return p.epilogue.bias == Bias::none ? 0 : o.bias;
  }

  const Functions& f;
  Problem problem;
  CUdeviceptr scale_a = 0, scale_b = 0, bias = 0, aux = 0;  // the caller's
  uint32_t align_a = 0, align_b = 0, align_c = 0;
  // Why cuBLASLt has no algorithm with the problem's epilogue; "" when it has one. Such a plan
  // is kept too, so that the next call goes straight to the elementwise pass.
  std::string refused;
  MatmulDesc desc = nullptr;
  Layout a = nullptr, b = nullptr, c = nullptr;  // C is D: the GEMM writes D over C
  Algo algo{};
  DeviceBuffer scales;  // the scales in cuBLASLt's layouts, where they differ from ours
};

}  // namespace lt

namespace grouped {

// One grouped problem made ready for cublasGemmGroupedBatchedEx: the host arrays it reads, one
// cuBLAS group of one GEMM per non-empty group, and the device array of their A, B and C
// pointers, for the problem, the caller's operand pointers and its ends pointer.
struct Plan {
  bool serves(const Problem& p, const GemmOperands& o) const {
    return problem == p && a == o.a && b == o.b && c == o.c && ends == o.group_ends;
  }
  int count() const { return int(m.size()); }
  // The scalars of every group, those of the call (host memory: cuBLAS reads them in the call).
  void use_scalars(float a_scalar, float b_scalar) {
    if (!alpha.empty() && alpha[0] == a_scalar && beta[0] == b_scalar) return;
    std::fill(alpha.begin(), alpha.end(), a_scalar);
    std::fill(beta.begin(), beta.end(), b_scalar);
  }

  Problem problem;
  CUdeviceptr a = 0, b = 0, c = 0, ends = 0;  // the caller's
  std::vector<cublasOperation_t> trans_a, trans_b;
  std::vector<int> m, n, k, lda, ldb, ldc, sizes;  // sizes: 1 GEMM per cuBLAS group
  std::vector<float> alpha, beta;
  DeviceBuffer pointers;  // count() pointers of A, then of B, then of C
};

// A grouped float8 problem made ready for a loop of cublasLtMatmul, one call per non-empty group:
// cuBLAS has no grouped float8 GEMM (cublasGemmGroupedBatchedEx takes no scales), and a framework
// without one loops so. Each group's problem (n: its columns), operands and cuBLASLt plan, for the
// problem and the caller's pointers; each group's scales copied where cuBLASLt reads them: A's
// aligned, B's columns of the group (ours span all N columns, ld N).
struct Fp8Loop {
  bool serves(const Problem& p, const GemmOperands& o) const {
    return problem == p && a == o.a && b == o.b && c == o.c && ends == o.group_ends &&
           scale_a == o.scale_a && scale_b == o.scale_b;
  }

  Problem problem;
  CUdeviceptr a = 0, b = 0, c = 0, ends = 0, scale_a = 0, scale_b = 0;  // the caller's
  std::vector<Problem> problems;
  std::vector<GemmOperands> operands;
  std::vector<std::unique_ptr<lt::Plan>> plans;
  DeviceBuffer scales;  // each group's scales of A (tensor, row) and of B (row, block)
};

}  // namespace grouped

namespace {

std::string& load_error() {
  static std::string error;
  return error;
}

cudaDataType data_type(DataType type) {
  switch (type) {
    case DataType::f32:
      return CUDA_R_32F;
    case DataType::f16:
      return CUDA_R_16F;
    case DataType::bf16:
      return CUDA_R_16BF;
    case DataType::e4m3:
      return CUDA_R_8F_E4M3;
    case DataType::e5m2:
      return CUDA_R_8F_E5M2;
  }
  return CUDA_R_32F;
}

bool is_fp8(DataType type) {
  return type == DataType::e4m3 || type == DataType::e5m2;
}

// What cublasGemmEx computes with f32 accumulation (its documented type combinations): A, B
// and C of one type among f32, f16 and bf16. Float8 needs cuBLASLt.
bool gemm_ex_types(const DataTypes& t) {
  return t.is_uniform() && (t.a == DataType::f32 || t.a == DataType::f16 || t.a == DataType::bf16);
}

cublasOperation_t op(Op o) {
  return o == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T;
}

// The 32-bit API takes sizes and leading dimensions as int: a cast would silently wrap.
bool fits_int(const Problem& p) {
  constexpr int64_t max = std::numeric_limits<int>::max();
  for (int64_t v : {p.m, p.n, p.k, p.lda, p.ldb, p.ldc})
    if (v > max) return false;
  return true;
}

// "13.1.0" of 130100 (cublasGetVersion and cublasLtGetVersion count alike).
std::string version_text(size_t v) {
  return fmt::format("{}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;
constexpr size_t kMaxLtPlans = 8;
constexpr size_t kMaxGroupedPlans = 8;

// The plan in `plans` that serves the problem and operands, made by `make` when there is none or
// `refresh`; the most recently used first, at most `most` of them.
template <class Plan, class Make>
Plan& use_plan(std::list<std::unique_ptr<Plan>>& plans, size_t most, const Problem& p,
               const GemmOperands& o, bool refresh, Make make) {
  const auto it = std::find_if(plans.begin(), plans.end(),
                               [&](const std::unique_ptr<Plan>& q) { return q->serves(p, o); });
  if (it != plans.end()) {
    if (!refresh) {
      plans.splice(plans.begin(), plans, it);
      return *plans.front();
    }
    plans.erase(it);  // first: a refresh that throws leaves no stale plan to be used
  }
  plans.push_front(make());
  while (plans.size() > most) plans.pop_back();
  return *plans.front();
}

// Before anything is enqueued: a bias read from address 0 would fault the context.
void require_bias(const Problem& p, const GemmOperands& o) {
  GT_REQUIRE(p.epilogue.bias == Bias::none || o.bias != 0, Errc::invalid_argument,
             "{}: the cuBLAS baseline needs the bias vector", p.describe());
}

// The problem without its epilogue: the GEMM the elementwise pass follows.
Problem without_epilogue(Problem p) {
  p.epilogue = Epilogue{};
  return p;
}

// Group g's matrices, its columns [start, ...) of op(B) and C: A is the g-th of the G stored one
// after another, B's columns are its rows when op(B) = B^T.
std::array<CUdeviceptr, 3> group_pointers(const Problem& p, const GemmOperands& o, int64_t g,
                                          int64_t start) {
  const int64_t b_offset = p.op_b == Op::N ? start * p.ldb : start;
  return {o.a + CUdeviceptr(g * p.group_stride_a() * element_bytes(p.types.a)),
          o.b + CUdeviceptr(b_offset * element_bytes(p.types.b)),
          o.c + CUdeviceptr(start * p.ldc * element_bytes(p.types.c))};
}

// The alignment cublasGemmGroupedBatchedEx needs of every matrix pointer (cuBLAS documentation:
// with f16 or bf16, 16 bytes when K * element size is a multiple of 16, else 4 bytes when it is a
// multiple of 4), lest a kernel fault and end the context.
int64_t grouped_alignment(const Problem& p) {
  if (p.types.a != DataType::f16 && p.types.a != DataType::bf16) return 1;
  const int64_t row = p.k * element_bytes(p.types.a);
  return row % 16 == 0 ? 16 : row % 4 == 0 ? 4 : 1;
}

int64_t blocks_of(int64_t extent) {
  return (extent + kScaleBlock - 1) / kScaleBlock;
}

// The rules of cublasLtMatmul's float8 GEMMs (cuBLAS documentation, cublasLtMatmul(): "To use
// tensor- or block-scaled FP8 kernels"; 3.1.4, "Scaling Mode Support Overview" and "Scaling
// factors layouts").
std::string lt_why_unsupported(const Problem& p, const CublasFeatures& f) {
  const DataTypes& t = p.types;
  const std::string none = ": no cuBLAS baseline for it";
  if (!is_fp8(t.a) || !is_fp8(t.b))
    return fmt::format("cuBLASLt multiplies float8 by float8 only, not {}{}", t.name(), none);
  if (t.a == DataType::e5m2 && t.b == DataType::e5m2)
    return "cuBLASLt has no e5m2*e5m2 GEMM (its float8 GEMMs take e4m3*e4m3, e4m3*e5m2 and "
           "e5m2*e4m3)" +
           none;
  if (t.c != t.d || !(t.d == DataType::f32 || t.d == DataType::f16 || t.d == DataType::bf16))
    return fmt::format(
        "cuBLASLt's scaled float8 GEMMs write f32, f16 or bf16 over a C of that type, not {}{}",
        t.name(), none);
  if (t.acc != DataType::f32)
    return fmt::format("cuBLASLt's float8 GEMMs accumulate in f32, not {}{}", to_string(t.acc),
                       none);
  if (p.scaling == Scaling::none)
    return fmt::format("{} without scales: cuBLASLt's float8 GEMMs take them{}", t.name(), none);
  if (p.op_a != Op::T || p.op_b != Op::N)
    return fmt::format(
        "cuBLASLt's float8 GEMMs take A transposed and B not (\"tn\") on Ada and Hopper GPUs, not "
        "\"{}\"{}",
        p.layout(), none);
  if (p.align < 16)
    return fmt::format(
        "cuBLASLt's float8 GEMMs need 16-byte aligned operands and leading dimensions; {} has "
        "{}-byte alignment{}",
        p.describe(), p.align, none);
  if (f.lt_version == 0) return fmt::format("no cuBLASLt for float8: {}", f.lt_missing);
  if (p.scaling != Scaling::tensor && f.lt_version < 120900)
    return fmt::format(
        "cuBLASLt {} has no {} scaling (outer-vector and 128-block scales came in "
        "cuBLAS 12.9){}",
        version_text(f.lt_version), to_string(p.scaling), none);
  // A grouped problem's columns are checked per group, once its routing is read (Fp8Loop).
  if (p.scaling == Scaling::block && (p.m % 4 != 0 || (!p.grouped() && p.n % 4 != 0)))
    return fmt::format("cuBLASLt's block scaling needs M and N multiples of 4, not {}{}", p.shape(),
                       none);
  return {};
}

// The rules of cublasGemmGroupedBatchedEx (cuBLAS documentation: its types, its int arrays).
std::string grouped_why_unsupported(const Problem& p, const CublasFeatures& f) {
  const std::string none = ": no cuBLAS baseline for it";
  if (!f.grouped_batched)
    return fmt::format("cuBLAS {} has no cublasGemmGroupedBatchedEx (12.5 or later) for {}{}",
                       version_text(size_t(f.version)), p.describe(), none);
  if (!gemm_ex_types(p.types) || p.scaling != Scaling::none)
    return fmt::format("cublasGemmGroupedBatchedEx has no {} GEMM{}{}", p.types.name(),
                       p.scaling == Scaling::none ? "" : " with scales", none);
  if (!fits_int(p))
    return fmt::format(
        "cublasGemmGroupedBatchedEx takes int sizes and {} has a size past 2^31 - 1{}",
        p.describe(), none);
  return {};
}

}  // namespace

std::string cublas_why_unsupported(const Problem& p, const CublasFeatures& f) {
  if (p.grouped() && is_fp8(p.types.a)) return lt_why_unsupported(p, f);  // a call per group
  if (p.grouped()) return grouped_why_unsupported(p, f);
  if (is_fp8(p.types.a) || is_fp8(p.types.b)) return lt_why_unsupported(p, f);
  if (!gemm_ex_types(p.types) || p.scaling != Scaling::none)
    return fmt::format("cublasGemmEx has no {} GEMM{}: no cuBLAS baseline for it", p.types.name(),
                       p.scaling == Scaling::none ? "" : " with scales");
  if (!f.gemm_ex_64 && !fits_int(p))
    return fmt::format(
        "cuBLAS {} has no 64-bit API (cublasGemmEx_64) and {} has a size past 2^31 - 1: no cuBLAS "
        "baseline for it",
        version_text(size_t(f.version)), p.describe());
  return {};
}

std::string_view to_string(EpiloguePath path) noexcept {
  switch (path) {
    case EpiloguePath::none:
      return "none";
    case EpiloguePath::cublaslt:
      return "cublaslt";
    case EpiloguePath::pass:
      return "gemm+pass";
    case EpiloguePath::gated_pass:
      return "gemm+gated pass";
  }
  return "?";
}

int32_t cublaslt_epilogue(const Epilogue& e) {
  if (e.bias == Bias::n) return 0;  // cuBLASLt's bias runs along D's rows alone
  const int32_t bias = e.bias == Bias::m ? lt::kEpilogueBias : 0;
  // Its pre-activation outputs: GELU's (tanh) input alone; ReLU's is a bit mask.
  if (e.aux) return e.activation == Activation::gelu_tanh ? lt::kEpilogueGeluAux | bias : 0;
  switch (e.activation) {
    case Activation::identity:
      return bias ? bias : lt::kEpilogueDefault;
    case Activation::relu:
      return lt::kEpilogueRelu | bias;
    case Activation::gelu_tanh:
      return lt::kEpilogueGelu | bias;
    case Activation::gelu:  // erf: cuBLASLt's GELU is the tanh form
    case Activation::silu:
      return 0;
  }
  return 0;
}

EpiloguePath cublas_epilogue_path(const Problem& p, const CublasFeatures& f) {
  if (p.epilogue.none()) return EpiloguePath::none;
  if (p.epilogue.gated()) return EpiloguePath::gated_pass;  // no library fuses gate and up
  if (f.lt_version == 0 || cublaslt_epilogue(p.epilogue) == 0) return EpiloguePath::pass;
  // cuBLASLt's float8 GEMMs with an f32 output take a bf16 bias (its FP8 type table).
  const bool fp8 = is_fp8(p.types.a) || is_fp8(p.types.b);
  if (fp8 && p.types.d == DataType::f32 && p.epilogue.bias != Bias::none) return EpiloguePath::pass;
  return EpiloguePath::cublaslt;
}

Problem gated_gemm_problem(const Problem& p, bool bias) {
  Problem q = p;
  q.epilogue = Epilogue{};
  if (bias) q.epilogue.bias = Bias::m;
  q.reads_c = false;
  q.ldc = std::max<int64_t>(1, q.m);
  // The scratch buffer is 256-byte aligned: only its leading dimension may narrow the class.
  q.align =
      std::min(p.align, alignment_class(q.types, nullptr, nullptr, nullptr, q.lda, q.ldb, q.ldc));
  return q;
}

bool cublas_gated_bias_in_gemm(const Problem& p, const CublasFeatures& f) {
  return p.epilogue.gated() && p.epilogue.bias == Bias::m &&
         cublas_epilogue_path(gated_gemm_problem(p, true), f) == EpiloguePath::cublaslt;
}

int64_t cublaslt_block_scales_a_count(int64_t m, int64_t k) {
  return blocks_of(m) * ((blocks_of(k) + 3) / 4 * 4);
}

std::vector<float> cublaslt_block_scales_a(const std::vector<float>& ours, int64_t m, int64_t k) {
  const int64_t mb = blocks_of(m), kb = blocks_of(k), ld = (kb + 3) / 4 * 4;
  GT_REQUIRE(int64_t(ours.size()) == mb * kb, Errc::invalid_argument,
             "block scales of A for M = {}, K = {}: {} values, not {}", m, k, ours.size(), mb * kb);
  std::vector<float> theirs(size_t(mb * ld), 0.0f);
  for (int64_t i = 0; i < mb; ++i)
    for (int64_t j = 0; j < kb; ++j) theirs[size_t(j + i * ld)] = ours[size_t(i + j * mb)];
  return theirs;
}

struct Cublas::Impl {
  void* lib = nullptr;
  decltype(&::cublasCreate_v2) create = nullptr;
  decltype(&::cublasDestroy_v2) destroy = nullptr;
  decltype(&::cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx is overloaded in C++ (32- and 64-bit sizes): name the 32-bit signature.
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                            const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                            int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                            cublasGemmAlgo_t) = nullptr;
  // The 64-bit API (cuBLAS 12 and later): used whenever the library has it.
  cublasStatus_t (*gemm_ex_64)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int64_t,
                               int64_t, int64_t, const void*, const void*, cudaDataType, int64_t,
                               const void*, cudaDataType, int64_t, const void*, void*, cudaDataType,
                               int64_t, cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  decltype(&::cublasGetVersion_v2) get_version = nullptr;
  // cuBLAS 12.5 and later, for grouped problems (features.grouped_batched).
  decltype(&::cublasGemmGroupedBatchedEx) grouped_batched = nullptr;
  cublasHandle_t handle = nullptr;

  // cuBLASLt, for float8 (features.lt_version 0 when it is not loaded).
  void* lt_lib = nullptr;
  lt::Functions lt_fn;
  lt::Handle lt_handle = nullptr;
  CublasFeatures features;

  std::mutex mutex;                                         // guards what follows
  std::list<std::unique_ptr<lt::Plan>> plans;               // the most recently used first
  DeviceBuffer workspace;                                   // cuBLASLt's, made with the first plan
  std::list<std::unique_ptr<grouped::Plan>> grouped_plans;  // the most recently used first
  std::list<std::unique_ptr<grouped::Fp8Loop>> fp8_loops;   // the most recently used first
  std::unique_ptr<LoadedKernel> pass_kernel;                // testing.cuh's, on first use
  std::unique_ptr<LoadedKernel> gated_kernel;               // testing.cuh's, on first use
  DeviceBuffer scratch;  // a gated problem's M x N GEMM, grown as needed

  ~Impl() {
    plans.clear();
    if (lt_handle) lt_fn.destroy(lt_handle);
  }

  void load_lt();
  std::string status_text(cublasStatus_t s) const;
  void must(cublasStatus_t s, const char* call) const {
    GT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, Errc::cuda, "{} failed: {}", call, status_text(s));
  }
  template <class T>
  cublasStatus_t set(lt::Plan& q, int attribute, const T& value) const {
    return lt_fn.desc_set(q.desc, attribute, &value, sizeof(value));
  }
  // The plan of a float8 or epilogue problem and its operands, made when there is none or
  // `refresh`; the caller holds the mutex.
  lt::Plan& plan(const Problem& p, const GemmOperands& o, CUstream stream, bool refresh);
  std::unique_ptr<lt::Plan> make_plan(const Problem& p, const GemmOperands& o, CUstream stream);
  void set_scales(lt::Plan& q, const Problem& p, const GemmOperands& o, CUstream stream);
  void set_epilogue(lt::Plan& q, const Problem& p);
  void set_layouts(lt::Plan& q, const Problem& p);
  void find_algorithm(lt::Plan& q, const Problem& p);
  // cuBLASLt's plan with the problem's epilogue, or nullptr where the elementwise pass serves
  // it (cuBLASLt has no such epilogue, or no algorithm with it).
  const lt::Plan* fused_plan(const Problem& p, const GemmOperands& o, CUstream stream,
                             bool refresh);
  // cublasLtMatmul of a plan; D written over C.
  void lt_matmul(const lt::Plan& q, const Problem& p, const GemmOperands& o, CUstream stream);
  // The GEMM without an epilogue (cuBLASLt for float8, else cublasGemmEx).
  void plain_gemm(const Problem& p, const GemmOperands& o, CUstream stream);
  // The elementwise pass over D: bias, then activation, in place.
  const LoadedKernel& pass();
  void epilogue_pass(const Problem& p, const GemmOperands& o, CUstream stream);
  // A gated problem: the scratch buffer at least its GEMM's size, its GEMM into it (returns
  // whether cuBLASLt added the bias), then the pass act(gate) * up into D.
  const LoadedKernel& gated_pass_kernel();
  void grow_scratch(const Problem& p);
  bool gated_gemm(const Problem& p, const GemmOperands& o, CUstream stream, bool refresh);
  EpiloguePath prepare_gated(const Problem& p, const GemmOperands& o, CUstream stream);
  // The operands of that GEMM: the scratch buffer as C (and D), beta 0.
  GemmOperands into_scratch(const GemmOperands& o) const {
    GemmOperands into = o;
    into.c = scratch.ptr();
    into.beta = 0.0f;
    return into;
  }
  void gated_pass(const Problem& p, const GemmOperands& o, bool bias_done, CUstream stream);
  // The same for a grouped problem: its ends read, its groups' arrays built.
  grouped::Plan& grouped_plan(const Problem& p, const GemmOperands& o, CUstream stream,
                              bool refresh);
  std::unique_ptr<grouped::Plan> make_grouped_plan(const Problem& p, const GemmOperands& o,
                                                   CUstream stream);
  void use_stream(CUstream stream);
  // cublasGemmGroupedBatchedEx over the prepared groups; the caller holds the mutex.
  void grouped_gemm(const Problem& p, const GemmOperands& o, CUstream stream);
  // A grouped float8 problem: its ends read, each group's cuBLASLt plan made; then the loop.
  grouped::Fp8Loop& fp8_loop(const Problem& p, const GemmOperands& o, CUstream stream,
                             bool refresh);
  std::unique_ptr<grouped::Fp8Loop> make_fp8_loop(const Problem& p, const GemmOperands& o,
                                                  CUstream stream);
  void fp8_loop_gemm(const Problem& p, const GemmOperands& o, CUstream stream);
};

void Cublas::Impl::load_lt() {
  // The libcublasLt of libcublas's major version first: libcublas itself loaded it.
  const std::string own = fmt::format("libcublasLt.so.{}", features.version / 10000);
  for (const char* name :
       {own.c_str(), "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}) {
    lt_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lt_lib) break;
  }
  if (!lt_lib) {
    features.lt_missing =
        "libcublasLt could not be loaded (no libcublasLt.so.13/.12 on the library path)";
    return;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lt_lib, name));
    return fn != nullptr;
  };
  if (!sym(lt_fn.create, "cublasLtCreate") || !sym(lt_fn.destroy, "cublasLtDestroy") ||
      !sym(lt_fn.get_version, "cublasLtGetVersion") ||
      !sym(lt_fn.desc_create, "cublasLtMatmulDescCreate") ||
      !sym(lt_fn.desc_destroy, "cublasLtMatmulDescDestroy") ||
      !sym(lt_fn.desc_set, "cublasLtMatmulDescSetAttribute") ||
      !sym(lt_fn.layout_create, "cublasLtMatrixLayoutCreate") ||
      !sym(lt_fn.layout_destroy, "cublasLtMatrixLayoutDestroy") ||
      !sym(lt_fn.pref_create, "cublasLtMatmulPreferenceCreate") ||
      !sym(lt_fn.pref_destroy, "cublasLtMatmulPreferenceDestroy") ||
      !sym(lt_fn.pref_set, "cublasLtMatmulPreferenceSetAttribute") ||
      !sym(lt_fn.heuristic, "cublasLtMatmulAlgoGetHeuristic") ||
      !sym(lt_fn.matmul, "cublasLtMatmul")) {
    features.lt_missing = "libcublasLt lacks cublasLtMatmul or friends";
    return;
  }
  sym(lt_fn.status_name, "cublasLtGetStatusName");  // optional, for messages
  sym(lt_fn.status_string, "cublasLtGetStatusString");
  if (lt_fn.create(&lt_handle) != CUBLAS_STATUS_SUCCESS) {
    lt_handle = nullptr;
    features.lt_missing = "cublasLtCreate failed";
    return;
  }
  features.lt_version = lt_fn.get_version();
}

std::string Cublas::Impl::status_text(cublasStatus_t s) const {
  if (lt_fn.status_name && lt_fn.status_string)
    return fmt::format("{}: {}", lt_fn.status_name(s), lt_fn.status_string(s));
  return fmt::format("cuBLAS status {}", int(s));
}

lt::Plan& Cublas::Impl::plan(const Problem& p, const GemmOperands& o, CUstream stream,
                             bool refresh) {
  return use_plan(plans, kMaxLtPlans, p, o, refresh, [&] { return make_plan(p, o, stream); });
}

std::unique_ptr<lt::Plan> Cublas::Impl::make_plan(const Problem& p, const GemmOperands& o,
                                                  CUstream stream) {
  const bool fp8 = is_fp8(p.types.a);
  GT_REQUIRE(!fp8 || (o.scale_a != 0 && o.scale_b != 0), Errc::invalid_argument,
             "{}: the cuBLASLt baseline needs the scales of A and B", p.describe());
  if (workspace.bytes() == 0) workspace = DeviceBuffer(kLtWorkspaceBytes);
  auto q = std::make_unique<lt::Plan>(lt_fn);
  q->problem = p;
  q->scale_a = o.scale_a;
  q->scale_b = o.scale_b;
  q->bias = lt::Plan::bias_of(p, o);
  q->aux = p.epilogue.aux ? o.aux : 0;
  q->align_a = lt::address_alignment(o.a);
  q->align_b = lt::address_alignment(o.b);
  q->align_c = lt::address_alignment(o.c);

  must(lt_fn.desc_create(&q->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
  // Float8 is "tn" (cublas_why_unsupported), the others take any layout.
  const int32_t trans_a = op(p.op_a), trans_b = op(p.op_b);
  must(set(*q, lt::kDescTransA, trans_a), "cublasLtMatmulDescSetAttribute(TRANSA)");
  must(set(*q, lt::kDescTransB, trans_b), "cublasLtMatmulDescSetAttribute(TRANSB)");
  if (fp8) {
    // The same sums as ours: without promotion only where the problem asks for it.
    const int8_t fast_accum = p.fast_accumulation() ? 1 : 0;
    must(set(*q, lt::kDescFastAccum, fast_accum), "cublasLtMatmulDescSetAttribute(FAST_ACCUM)");
    set_scales(*q, p, o, stream);
  }
  if (!p.epilogue.none()) set_epilogue(*q, p);
  set_layouts(*q, p);
  find_algorithm(*q, p);
  return q;
}

void Cublas::Impl::set_scales(lt::Plan& q, const Problem& p, const GemmOperands& o,
                              CUstream stream) {
  // Where ours and cuBLASLt's layouts of the scales agree, cuBLASLt reads the caller's.
  CUdeviceptr scale_a = o.scale_a, scale_b = o.scale_b;
  int32_t mode_a = 0, mode_b = 0;  // CUBLASLT_MATMUL_MATRIX_SCALE_SCALAR_32F: one per tensor
  if (p.scaling == Scaling::row) {
    // M scales of A and N of B, as ours.
    mode_a = mode_b = lt::kScaleOuterVec32F;
  } else if (p.scaling == Scaling::block) {
    // A: BLK128x128_32F, K-major with columns padded to 4 (ours are M-major: converted). B:
    // VEC128_32F, N x ceil(K/128) N-major, as ours, but 16-byte aligned (copied when not).
    mode_a = lt::kScaleBlk128x128_32F;
    mode_b = lt::kScaleVec128_32F;
    std::vector<float> ours(size_t(scale_shape_a(p).count()));
    GT_CU(cuStreamSynchronize(stream));  // the scales as the stream's work leaves them
    GT_CU(cuMemcpyDtoH(ours.data(), o.scale_a, ours.size() * sizeof(float)));
    const std::vector<float> theirs = cublaslt_block_scales_a(ours, p.m, p.k);
    const size_t a_bytes = (theirs.size() * sizeof(float) + 255) / 256 * 256;
    const bool copy_b = o.scale_b % 16 != 0;
    const size_t b_bytes = size_t(scale_shape_b(p).count()) * sizeof(float);
    q.scales = DeviceBuffer(a_bytes + (copy_b ? b_bytes : 0));
    GT_CU(cuMemcpyHtoDAsync(q.scales.ptr(), theirs.data(), theirs.size() * sizeof(float), stream));
    scale_a = q.scales.ptr();
    if (copy_b) {
      GT_CU(cuMemcpyDtoDAsync(q.scales.ptr() + a_bytes, o.scale_b, b_bytes, stream));
      scale_b = q.scales.ptr() + a_bytes;
    }
    GT_CU(cuStreamSynchronize(stream));  // `theirs` is the source of the copy
  }
  if (mode_a != 0 || mode_b != 0) {
    const cublasStatus_t s_a = set(q, lt::kDescAScaleMode, mode_a);
    const cublasStatus_t s_b = set(q, lt::kDescBScaleMode, mode_b);
    GT_REQUIRE(s_a == CUBLAS_STATUS_SUCCESS && s_b == CUBLAS_STATUS_SUCCESS, Errc::unsupported,
               "cuBLASLt {} takes no {} scaling (CUBLASLT_MATMUL_DESC_A/B_SCALE_MODE: {}): no "
               "cuBLAS baseline for {}",
               version_text(features.lt_version), to_string(p.scaling),
               status_text(s_a != CUBLAS_STATUS_SUCCESS ? s_a : s_b), p.describe());
  }
  const void* pointer_a = reinterpret_cast<const void*>(scale_a);
  const void* pointer_b = reinterpret_cast<const void*>(scale_b);
  must(set(q, lt::kDescAScalePointer, pointer_a),
       "cublasLtMatmulDescSetAttribute(A_SCALE_POINTER)");
  must(set(q, lt::kDescBScalePointer, pointer_b),
       "cublasLtMatmulDescSetAttribute(B_SCALE_POINTER)");
}

void Cublas::Impl::set_epilogue(lt::Plan& q, const Problem& p) {
  const uint32_t epilogue = uint32_t(cublaslt_epilogue(p.epilogue));
  must(set(q, lt::kDescEpilogue, epilogue), "cublasLtMatmulDescSetAttribute(EPILOGUE)");
  if (p.epilogue.aux) {  // laid out as D (ldc), of D's type (cuBLASLt's default)
    void* aux = reinterpret_cast<void*>(q.aux);
    const int64_t aux_ld = p.ldc;
    must(set(q, lt::kDescAuxPointer, aux), "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_POINTER)");
    must(set(q, lt::kDescAuxLd, aux_ld), "cublasLtMatmulDescSetAttribute(EPILOGUE_AUX_LD)");
  }
  if (p.epilogue.bias == Bias::none) return;
  const void* bias = reinterpret_cast<const void*>(q.bias);
  const int32_t bias_type = data_type(p.types.d);  // ours is D's type, as cuBLASLt's default
  must(set(q, lt::kDescBiasPointer, bias), "cublasLtMatmulDescSetAttribute(BIAS_POINTER)");
  must(set(q, lt::kDescBiasDataType, bias_type), "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)");
}

void Cublas::Impl::set_layouts(lt::Plan& q, const Problem& p) {
  // As stored: float8's op(A) = A^T is K x M, its B K x N; C (and D) M x N.
  must(lt_fn.layout_create(&q.a, data_type(p.types.a), uint64_t(p.rows_a()), uint64_t(p.cols_a()),
                           p.lda),
       "cublasLtMatrixLayoutCreate(A)");
  must(lt_fn.layout_create(&q.b, data_type(p.types.b), uint64_t(p.rows_b()), uint64_t(p.cols_b()),
                           p.ldb),
       "cublasLtMatrixLayoutCreate(B)");
  must(lt_fn.layout_create(&q.c, data_type(p.types.c), uint64_t(p.m), uint64_t(p.n), p.ldc),
       "cublasLtMatrixLayoutCreate(C)");
}

void Cublas::Impl::find_algorithm(lt::Plan& q, const Problem& p) {
  lt::Preference pref = nullptr;
  must(lt_fn.pref_create(&pref), "cublasLtMatmulPreferenceCreate");
  const std::unique_ptr<lt::PreferenceOpaque, decltype(lt_fn.pref_destroy)> pref_guard(
      pref, lt_fn.pref_destroy);
  auto prefer = [&](int attribute, const auto& value) {
    must(lt_fn.pref_set(pref, attribute, &value, sizeof(value)),
         "cublasLtMatmulPreferenceSetAttribute");
  };
  prefer(lt::kPrefMaxWorkspaceBytes, uint64_t(workspace.bytes()));
  prefer(lt::kPrefMinAlignmentA, q.align_a);
  prefer(lt::kPrefMinAlignmentB, q.align_b);
  prefer(lt::kPrefMinAlignmentC, q.align_c);
  prefer(lt::kPrefMinAlignmentD, q.align_c);

  lt::HeuristicResult result{};
  int found = 0;
  const cublasStatus_t s =
      lt_fn.heuristic(lt_handle, q.desc, q.a, q.b, q.c, q.c, pref, 1, &result, &found);
  if (s == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    q.algo = result.algo;
    return;
  }
  const std::string why = s != CUBLAS_STATUS_SUCCESS ? status_text(s)
                          : found == 0               ? std::string("no algorithm")
                                                     : status_text(result.state);
  const std::string lt_name = "cuBLASLt " + version_text(features.lt_version);
  // With an epilogue the GEMM alone may still run: the elementwise pass then serves it.
  if (!p.epilogue.none()) {
    q.refused = fmt::format(
        "{} has no algorithm for {} with its epilogue on this GPU "
        "(cublasLtMatmulAlgoGetHeuristic: {})",
        lt_name, p.describe(), why);
    log().warn("{}: the elementwise pass after the GEMM serves it", q.refused);
    return;
  }
  GT_THROW(Errc::unsupported,
           "{} has no algorithm for {} on this GPU (cublasLtMatmulAlgoGetHeuristic: {}): no "
           "cuBLAS baseline for it",
           lt_name, p.describe(), why);
}

const lt::Plan* Cublas::Impl::fused_plan(const Problem& p, const GemmOperands& o, CUstream stream,
                                         bool refresh) {
  if (cublas_epilogue_path(p, features) != EpiloguePath::cublaslt) return nullptr;
  const lt::Plan& q = plan(p, o, stream, refresh);
  return q.refused.empty() ? &q : nullptr;
}

void Cublas::Impl::lt_matmul(const lt::Plan& q, const Problem& p, const GemmOperands& o,
                             CUstream stream) {
  const cublasStatus_t s = lt_fn.matmul(
      lt_handle, q.desc, &o.alpha, reinterpret_cast<const void*>(o.a), q.a,
      reinterpret_cast<const void*>(o.b), q.b, &o.beta, reinterpret_cast<const void*>(o.c), q.c,
      reinterpret_cast<void*>(o.c), q.c, &q.algo, reinterpret_cast<void*>(workspace.ptr()),
      workspace.bytes(), reinterpret_cast<cudaStream_t>(stream));
  GT_REQUIRE(s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_ARCH_MISMATCH,
             Errc::unsupported, "cublasLtMatmul cannot run {} here ({}): no cuBLAS baseline for it",
             p.describe(), status_text(s));
  GT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, Errc::cuda, "cublasLtMatmul failed on {}: {}",
             p.describe(), status_text(s));
}

void Cublas::Impl::plain_gemm(const Problem& p, const GemmOperands& o, CUstream stream) {
  if (is_fp8(p.types.a)) {
    lt_matmul(plan(p, o, stream, /*refresh=*/false), p, o, stream);
    return;
  }
  use_stream(stream);
  const cudaDataType t = data_type(p.types.a);
  const auto a = reinterpret_cast<const void*>(o.a), b = reinterpret_cast<const void*>(o.b);
  const auto c = reinterpret_cast<void*>(o.c);
  // tf32 against cuBLAS's own tf32; exact and 3xTF32 (the exact path's accuracy) against SGEMM.
  const cublasComputeType_t compute =
      p.precision == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const cublasStatus_t s =
      gemm_ex_64 ? gemm_ex_64(handle, op(p.op_a), op(p.op_b), p.m, p.n, p.k, &o.alpha, a, t, p.lda,
                              b, t, p.ldb, &o.beta, c, t, p.ldc, compute, CUBLAS_GEMM_DEFAULT)
                 : gemm_ex(handle, op(p.op_a), op(p.op_b), int(p.m), int(p.n), int(p.k), &o.alpha,
                           a, t, int(p.lda), b, t, int(p.ldb), &o.beta, c, t, int(p.ldc), compute,
                           CUBLAS_GEMM_DEFAULT);
  GT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, Errc::cuda, "cublasGemmEx failed with status {}", int(s));
}

namespace {

// A kernel of testing.cuh: the Checker's unit, name and text alike, so that one entry of the
// kernel cache serves both.
std::unique_ptr<LoadedKernel> testing_kernel(const char* name) {
  const KernelSource source =
      make_source("gemmtune_testing", "// verification kernels\n#include \"testing.cuh\"\n");
  const CompiledKernel compiled = Compiler().compile(source, query_device(current_device()).arch);
  return std::make_unique<LoadedKernel>(compiled, name, 0);
}

// 256 threads: a warp or more down `rows` of D (coalesced), the rest across its `cols`.
CUlaunchConfig pass_config(int64_t rows, int64_t cols, CUstream stream) {
  const uint32_t threads_x = uint32_t(std::min<int64_t>(256, (rows + 31) / 32 * 32));
  const uint32_t threads_y = 256 / threads_x;
  CUlaunchConfig cfg{};
  cfg.gridDimX = uint32_t((rows + threads_x - 1) / threads_x);
  cfg.gridDimY = uint32_t(std::min<int64_t>(65535, (cols + threads_y - 1) / threads_y));
  cfg.gridDimZ = 1;
  cfg.blockDimX = threads_x;
  cfg.blockDimY = threads_y;
  cfg.blockDimZ = 1;
  cfg.hStream = stream;
  return cfg;
}

}  // namespace

const LoadedKernel& Cublas::Impl::pass() {
  if (!pass_kernel) pass_kernel = testing_kernel("gemmtune_epilogue_pass");
  return *pass_kernel;
}

const LoadedKernel& Cublas::Impl::gated_pass_kernel() {
  if (!gated_kernel) gated_kernel = testing_kernel("gemmtune_gated_pass");
  return *gated_kernel;
}

void Cublas::Impl::grow_scratch(const Problem& p) {
  const size_t bytes = size_t(p.m) * size_t(p.n) * size_t(element_bytes(p.types.d));
  if (scratch.bytes() >= bytes) return;
  GT_CU(cuCtxSynchronize());  // no stream may still use the smaller buffer when it is freed
  scratch = DeviceBuffer();
  scratch = DeviceBuffer(bytes);
}

bool Cublas::Impl::gated_gemm(const Problem& p, const GemmOperands& o, CUstream stream,
                              bool refresh) {
  grow_scratch(p);
  const GemmOperands into = into_scratch(o);
  if (cublas_gated_bias_in_gemm(p, features)) {
    const Problem q = gated_gemm_problem(p, true);
    if (const lt::Plan* plan = fused_plan(q, into, stream, refresh)) {
      lt_matmul(*plan, q, into, stream);
      return true;
    }
  }
  plain_gemm(gated_gemm_problem(p, false), into, stream);
  return false;
}

EpiloguePath Cublas::Impl::prepare_gated(const Problem& p, const GemmOperands& o, CUstream stream) {
  grow_scratch(p);
  const GemmOperands into = into_scratch(o);
  const bool bias_done = cublas_gated_bias_in_gemm(p, features) &&
                         fused_plan(gated_gemm_problem(p, true), into, stream, /*refresh=*/true);
  // cublasGemmEx needs nothing beforehand; float8 its plan without the bias.
  if (!bias_done && is_fp8(p.types.a))
    plan(gated_gemm_problem(p, false), into, stream, /*refresh=*/true);
  gated_pass_kernel();
  return EpiloguePath::gated_pass;
}

void Cublas::Impl::gated_pass(const Problem& p, const GemmOperands& o, bool bias_done,
                              CUstream stream) {
  unsigned long long from = scratch.ptr(), d = o.c, bias = o.bias;
  long long ld_from = p.m, ld = p.ldc;
  int rows = int(p.output_rows()), n = int(p.n), type = int(p.types.d),
      bias_kind = bias_done ? int(Bias::none) : int(p.epilogue.bias),
      activation = int(p.epilogue.activation), gate = int(p.epilogue.gate);
  void* params[] = {&from, &ld_from, &d,         &ld,         &rows, &n,
                    &type, &bias,    &bias_kind, &activation, &gate};
  CUlaunchConfig cfg = pass_config(rows, n, stream);
  GT_CU(cuLaunchKernelEx(&cfg, gated_pass_kernel().function(), params, nullptr));
}

void Cublas::Impl::epilogue_pass(const Problem& p, const GemmOperands& o, CUstream stream) {
  unsigned long long d = o.c, bias = o.bias, aux = p.epilogue.aux ? o.aux : 0;
  long long ld = p.ldc;
  int m = int(p.m), n = int(p.n), type = int(p.types.d), bias_kind = int(p.epilogue.bias),
      activation = int(p.epilogue.activation);
  void* params[] = {&d, &ld, &m, &n, &type, &bias, &bias_kind, &activation, &aux};
  CUlaunchConfig cfg = pass_config(p.m, p.n, stream);
  GT_CU(cuLaunchKernelEx(&cfg, pass().function(), params, nullptr));
}

namespace {

// The columns of each group of a grouped problem, from its ends (or counts) read to the host
// after the stream's work; throws Error(invalid_argument) for ends that decrease or pass N.
std::vector<ColumnRange> read_group_columns(const Problem& p, const GemmOperands& o,
                                            CUstream stream) {
  GT_REQUIRE(o.group_ends != 0, Errc::invalid_argument,
             "{} is grouped but the group ends are a null pointer", p.describe());
  std::vector<int32_t> ends(size_t(p.groups));
  GT_CU(cuStreamSynchronize(stream));  // the ends as the stream's work leaves them
  GT_CU(cuMemcpyDtoH(ends.data(), o.group_ends, ends.size() * sizeof(int32_t)));
  std::vector<ColumnRange> columns;
  for (int64_t g = 0; g < p.groups; ++g) {
    const ColumnRange r = group_columns(p, ends.data(), g);
    GT_REQUIRE(r.end >= r.begin && r.end <= (p.masked() ? r.begin + p.group_capacity() : p.n),
               Errc::invalid_argument,
               "{}: group {} ends at column {}, before its start ({}) or past its last",
               p.describe(), g, r.end, r.begin);
    columns.push_back(r);
  }
  return columns;
}

// Group g's problem of one GEMM: its columns, no groups.
Problem group_problem(const Problem& p, int64_t columns) {
  Problem one = p;
  one.groups = 0;
  one.group_layout = GroupLayout::contiguous;
  one.n = columns;
  return one;
}

}  // namespace

// A group's scales where cuBLASLt reads them, at a 256-byte aligned place (it refuses a scale
// pointer 4 bytes into ours): A's tensor or row scales (block scales are converted by make_plan),
// then B's columns of the group in each of `rows` rows (one, or a row per K block).
struct GroupScales {
  explicit GroupScales(const Problem& p)
      : problem(p),
        a_per_group(scale_shape_a(p).count() / p.groups),
        a_count(p.scaling == Scaling::block ? 0 : a_per_group),
        rows(p.scaling == Scaling::tensor ? 0 : scale_shape_b(p).cols) {}

  static size_t aligned(int64_t floats) {
    return (size_t(floats) * sizeof(float) + 255) / 256 * 256;
  }
  size_t bytes(ColumnRange r) const { return aligned(a_count) + aligned(rows * (r.end - r.begin)); }

  // Group g's scales from the caller's (o) into `to`, and ops pointed at them (A's left in place
  // for block scaling).
  void copy(const GemmOperands& o, int64_t g, ColumnRange r, CUdeviceptr to, GemmOperands& ops,
            CUstream stream) const {
    ops.scale_a = o.scale_a + CUdeviceptr(g * a_per_group * int64_t(sizeof(float)));
    if (a_count > 0) {
      GT_CU(cuMemcpyDtoDAsync(to, ops.scale_a, size_t(a_count) * sizeof(float), stream));
      ops.scale_a = to;
    }
    if (rows == 0) return;
    const CUdeviceptr b_to = to + aligned(a_count);
    const size_t row_bytes = size_t(r.end - r.begin) * sizeof(float);
    for (int64_t row = 0; row < rows; ++row)
      GT_CU(cuMemcpyDtoDAsync(
          b_to + CUdeviceptr(row) * row_bytes,
          o.scale_b + CUdeviceptr((row * problem.n + r.begin) * int64_t(sizeof(float))), row_bytes,
          stream));
    ops.scale_b = b_to;
  }

  const Problem& problem;
  const int64_t a_per_group, a_count, rows;
};

grouped::Fp8Loop& Cublas::Impl::fp8_loop(const Problem& p, const GemmOperands& o, CUstream stream,
                                         bool refresh) {
  return use_plan(fp8_loops, kMaxGroupedPlans, p, o, refresh,
                  [&] { return make_fp8_loop(p, o, stream); });
}

std::unique_ptr<grouped::Fp8Loop> Cublas::Impl::make_fp8_loop(const Problem& p,
                                                              const GemmOperands& o,
                                                              CUstream stream) {
  GT_REQUIRE(o.scale_a != 0 && o.scale_b != 0, Errc::invalid_argument,
             "{}: the cuBLASLt baseline needs the scales of A and B", p.describe());
  const std::vector<ColumnRange> columns = read_group_columns(p, o, stream);
  auto q = std::make_unique<grouped::Fp8Loop>();
  q->problem = p;
  q->a = o.a, q->b = o.b, q->c = o.c, q->ends = o.group_ends;
  q->scale_a = o.scale_a, q->scale_b = o.scale_b;
  const GroupScales layout(p);
  std::vector<size_t> offsets;
  size_t bytes = 0;
  for (const ColumnRange& r : columns) {
    offsets.push_back(bytes);
    bytes += layout.bytes(r);
  }
  if (bytes > 0) q->scales = DeviceBuffer(bytes);
  for (int64_t g = 0; g < p.groups; ++g) {
    const ColumnRange r = columns[size_t(g)];
    if (r.end == r.begin) continue;
    const Problem one = group_problem(p, r.end - r.begin);
    const std::string why = lt_why_unsupported(one, features);
    GT_REQUIRE(why.empty(), Errc::unsupported, "group {} of {} ({} columns): {}", g, p.describe(),
               r.end - r.begin, why);
    GemmOperands ops = o;
    const std::array<CUdeviceptr, 3> ptrs = group_pointers(p, o, g, r.begin);
    ops.a = ptrs[0], ops.b = ptrs[1], ops.c = ptrs[2], ops.group_ends = 0;
    layout.copy(o, g, r, q->scales.ptr() + offsets[size_t(g)], ops, stream);
    q->plans.push_back(make_plan(one, ops, stream));
    q->problems.push_back(one);
    q->operands.push_back(ops);
  }
  GT_CU(cuStreamSynchronize(stream));
  return q;
}

void Cublas::Impl::fp8_loop_gemm(const Problem& p, const GemmOperands& o, CUstream stream) {
  const grouped::Fp8Loop& q = fp8_loop(p, o, stream, /*refresh=*/false);
  for (size_t i = 0; i < q.plans.size(); ++i) {
    GemmOperands ops = q.operands[i];
    ops.alpha = o.alpha, ops.beta = o.beta;
    lt_matmul(*q.plans[i], q.problems[i], ops, stream);
  }
}

grouped::Plan& Cublas::Impl::grouped_plan(const Problem& p, const GemmOperands& o, CUstream stream,
                                          bool refresh) {
  return use_plan(grouped_plans, kMaxGroupedPlans, p, o, refresh,
                  [&] { return make_grouped_plan(p, o, stream); });
}

std::unique_ptr<grouped::Plan> Cublas::Impl::make_grouped_plan(const Problem& p,
                                                               const GemmOperands& o,
                                                               CUstream stream) {
  const std::vector<ColumnRange> columns = read_group_columns(p, o, stream);
  auto q = std::make_unique<grouped::Plan>();
  q->problem = p;
  q->a = o.a;
  q->b = o.b;
  q->c = o.c;
  q->ends = o.group_ends;
  const int64_t align = grouped_alignment(p);
  std::array<std::vector<CUdeviceptr>, 3> pointers;  // of A, B and C
  for (int64_t g = 0; g < p.groups; ++g) {
    const auto [start, end] = columns[size_t(g)];
    if (end == start) continue;  // no columns: no GEMM (cuBLAS would take it, for nothing)
    const std::array<CUdeviceptr, 3> ptrs = group_pointers(p, o, g, start);
    for (int i = 0; i < 3; ++i) {
      GT_REQUIRE(ptrs[size_t(i)] % uint64_t(align) == 0, Errc::unsupported,
                 "cublasGemmGroupedBatchedEx needs {}-byte aligned matrices for {} (K = {}), and "
                 "group {}'s {} (from column {}) is at {:#x}: no cuBLAS baseline for this routing",
                 align, p.types.name(), p.k, g, "ABC"[i], start, ptrs[size_t(i)]);
      pointers[size_t(i)].push_back(ptrs[size_t(i)]);
    }
    q->m.push_back(int(p.m));
    q->n.push_back(int(end - start));
    q->k.push_back(int(p.k));
  }
  const size_t count = q->m.size();
  q->trans_a.assign(count, op(p.op_a));
  q->trans_b.assign(count, op(p.op_b));
  q->lda.assign(count, int(p.lda));
  q->ldb.assign(count, int(p.ldb));
  q->ldc.assign(count, int(p.ldc));
  q->sizes.assign(count, 1);
  q->alpha.assign(count, 1.0f);
  q->beta.assign(count, 0.0f);
  if (count == 0) return q;  // every group empty: gemm() has nothing to do
  std::vector<CUdeviceptr> all;
  for (const auto& v : pointers) all.insert(all.end(), v.begin(), v.end());
  q->pointers = DeviceBuffer(all.size() * sizeof(CUdeviceptr));
  GT_CU(cuMemcpyHtoDAsync(q->pointers.ptr(), all.data(), all.size() * sizeof(CUdeviceptr), stream));
  GT_CU(cuStreamSynchronize(stream));  // `all` is the source of the copy
  return q;
}

void Cublas::Impl::use_stream(CUstream stream) {
  GT_REQUIRE(set_stream(handle, reinterpret_cast<cudaStream_t>(stream)) == CUBLAS_STATUS_SUCCESS,
             Errc::cuda, "cublasSetStream failed");
}

void Cublas::Impl::grouped_gemm(const Problem& p, const GemmOperands& o, CUstream stream) {
  grouped::Plan& q = grouped_plan(p, o, stream, /*refresh=*/false);
  if (q.count() == 0) return;  // every group empty
  q.use_scalars(o.alpha, o.beta);
  use_stream(stream);
  const cudaDataType t = data_type(p.types.a);
  const auto pointers = reinterpret_cast<void* const*>(q.pointers.ptr());
  const void* const* a = pointers;
  const void* const* b = pointers + q.count();
  void* const* c = pointers + 2 * q.count();
  const cublasStatus_t s = grouped_batched(
      handle, q.trans_a.data(), q.trans_b.data(), q.m.data(), q.n.data(), q.k.data(),
      q.alpha.data(), a, t, q.lda.data(), b, t, q.ldb.data(), q.beta.data(), c, t, q.ldc.data(),
      q.count(), q.sizes.data(), CUBLAS_COMPUTE_32F);
  GT_REQUIRE(s != CUBLAS_STATUS_NOT_SUPPORTED && s != CUBLAS_STATUS_ARCH_MISMATCH,
             Errc::unsupported,
             "cublasGemmGroupedBatchedEx cannot run {} here ({}): no cuBLAS baseline for it",
             p.describe(), status_text(s));
  GT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, Errc::cuda, "cublasGemmGroupedBatchedEx failed on {}: {}",
             p.describe(), status_text(s));
}

std::unique_ptr<Cublas> Cublas::load() {
  auto impl = std::make_unique<Impl>();
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    impl->lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (impl->lib) break;
  }
  if (!impl->lib) {
    load_error() = "libcublas could not be loaded (no libcublas.so.13/.12 on the library path)";
    return nullptr;
  }
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(impl->lib, name));
    return fn != nullptr;
  };
  if (!sym(impl->create, "cublasCreate_v2") || !sym(impl->destroy, "cublasDestroy_v2") ||
      !sym(impl->set_stream, "cublasSetStream_v2") || !sym(impl->gemm_ex, "cublasGemmEx") ||
      !sym(impl->get_version, "cublasGetVersion_v2")) {
    load_error() = "libcublas lacks cublasGemmEx or friends";
    return nullptr;
  }
  sym(impl->gemm_ex_64, "cublasGemmEx_64");                  // optional
  sym(impl->grouped_batched, "cublasGemmGroupedBatchedEx");  // optional: cuBLAS 12.5
  if (impl->create(&impl->handle) != CUBLAS_STATUS_SUCCESS) {
    load_error() = "cublasCreate failed";
    return nullptr;
  }
  impl->get_version(impl->handle, &impl->features.version);
  impl->features.gemm_ex_64 = impl->gemm_ex_64 != nullptr;
  impl->features.grouped_batched = impl->grouped_batched != nullptr;
  impl->load_lt();  // optional: float8 alone needs it
  return std::unique_ptr<Cublas>(new Cublas(std::move(impl)));
}

std::string Cublas::why_not() {
  return load_error();
}

Cublas::Cublas(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Cublas::~Cublas() {
  if (impl_ && impl_->handle) impl_->destroy(impl_->handle);
  // The libraries stay loaded: cuBLAS does not expect to be unloaded while CUDA is alive.
}

const CublasFeatures& Cublas::features() const {
  return impl_->features;
}

std::string Cublas::version() const {
  std::string v = "cuBLAS " + version_text(size_t(impl_->features.version));
  if (impl_->features.lt_version) v += ", cuBLASLt " + version_text(impl_->features.lt_version);
  return v;
}

bool Cublas::supports(const Problem& problem) const {
  return why_unsupported(problem).empty();
}

std::string Cublas::why_unsupported(const Problem& p) const {
  return cublas_why_unsupported(p, impl_->features);
}

EpiloguePath Cublas::prepare(const Problem& p, const GemmOperands& o, CUstream stream) const {
  const std::string why = why_unsupported(p);
  GT_REQUIRE(why.empty(), Errc::unsupported, "{}", why);
  require_bias(p, o);
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  if (p.grouped() && is_fp8(p.types.a)) {
    impl_->fp8_loop(p, o, stream, /*refresh=*/true);
    return EpiloguePath::none;
  }
  if (p.grouped()) {
    impl_->grouped_plan(p, o, stream, /*refresh=*/true);
    return EpiloguePath::none;
  }
  if (p.epilogue.gated()) return impl_->prepare_gated(p, o, stream);
  if (!p.epilogue.none() && impl_->fused_plan(p, o, stream, /*refresh=*/true))
    return EpiloguePath::cublaslt;
  // cublasGemmEx needs nothing beforehand; float8 its plan without the epilogue.
  if (is_fp8(p.types.a)) impl_->plan(without_epilogue(p), o, stream, /*refresh=*/true);
  if (p.epilogue.none()) return EpiloguePath::none;
  impl_->pass();
  return EpiloguePath::pass;
}

void Cublas::gemm(const Problem& p, const GemmOperands& o, CUstream stream) const {
  const std::string why = why_unsupported(p);
  GT_REQUIRE(why.empty(), Errc::unsupported, "{}", why);
  require_bias(p, o);
  const std::lock_guard<std::mutex> lock(impl_->mutex);
  if (p.grouped() && is_fp8(p.types.a)) {
    impl_->fp8_loop_gemm(p, o, stream);
    return;
  }
  if (p.grouped()) {
    impl_->grouped_gemm(p, o, stream);
    return;
  }
  if (p.epilogue.none()) {
    impl_->plain_gemm(p, o, stream);
    return;
  }
  if (p.epilogue.gated()) {  // as a framework runs it: F.linear, then act(gate) * up
    const bool bias_done = impl_->gated_gemm(p, o, stream, /*refresh=*/false);
    impl_->gated_pass(p, o, bias_done, stream);
    return;
  }
  if (const lt::Plan* q = impl_->fused_plan(p, o, stream, /*refresh=*/false)) {
    impl_->lt_matmul(*q, p, o, stream);
    return;
  }
  // As a framework runs it: the GEMM, then the bias and activation over D.
  impl_->plain_gemm(without_epilogue(p), o, stream);
  impl_->epilogue_pass(p, o, stream);
}

}  // namespace gemmtune
