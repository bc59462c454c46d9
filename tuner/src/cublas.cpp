#include "gemmtune/tuner/cublas.hpp"

#include <cublas_v2.h>
#include <dlfcn.h>

#include <limits>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
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

}  // namespace

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
  cublasHandle_t handle = nullptr;
};

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
  sym(impl->gemm_ex_64, "cublasGemmEx_64");  // optional
  if (impl->create(&impl->handle) != CUBLAS_STATUS_SUCCESS) {
    load_error() = "cublasCreate failed";
    return nullptr;
  }
  return std::unique_ptr<Cublas>(new Cublas(std::move(impl)));
}

std::string Cublas::why_not() {
  return load_error();
}

Cublas::Cublas(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Cublas::~Cublas() {
  if (impl_ && impl_->handle) impl_->destroy(impl_->handle);
  // The library stays loaded: cuBLAS does not expect to be unloaded while CUDA is alive.
}

std::string Cublas::version() const {
  int v = 0;
  impl_->get_version(impl_->handle, &v);
  return fmt::format("cuBLAS {}.{}.{}", v / 10000, v / 100 % 100, v % 100);
}

bool Cublas::supports(const Problem& problem) const {
  return why_unsupported(problem).empty();
}

std::string Cublas::why_unsupported(const Problem& p) const {
  if (!gemm_ex_types(p.types) || p.scaling != Scaling::none)
    return fmt::format("cublasGemmEx has no {} GEMM{}: no cuBLAS baseline for it", p.types.name(),
                       p.scaling == Scaling::none ? "" : " with scales");
  if (!impl_->gemm_ex_64 && !fits_int(p))
    return fmt::format(
        "{} has no 64-bit API (cublasGemmEx_64) and {} has a size past 2^31 - 1: no cuBLAS "
        "baseline for it",
        version(), p.describe());
  return {};
}

void Cublas::gemm(const Problem& p, const GemmOperands& o, CUstream stream) const {
  const std::string why = why_unsupported(p);
  GT_REQUIRE(why.empty(), Errc::unsupported, "{}", why);
  GT_REQUIRE(impl_->set_stream(impl_->handle, reinterpret_cast<cudaStream_t>(stream)) ==
                 CUBLAS_STATUS_SUCCESS,
             Errc::cuda, "cublasSetStream failed");
  const cudaDataType t = data_type(p.types.a);
  const auto a = reinterpret_cast<const void*>(o.a), b = reinterpret_cast<const void*>(o.b);
  const auto c = reinterpret_cast<void*>(o.c);
  const cublasStatus_t s =
      impl_->gemm_ex_64
          ? impl_->gemm_ex_64(impl_->handle, op(p.op_a), op(p.op_b), p.m, p.n, p.k, &o.alpha, a, t,
                              p.lda, b, t, p.ldb, &o.beta, c, t, p.ldc, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT)
          : impl_->gemm_ex(impl_->handle, op(p.op_a), op(p.op_b), int(p.m), int(p.n), int(p.k),
                           &o.alpha, a, t, int(p.lda), b, t, int(p.ldb), &o.beta, c, t, int(p.ldc),
                           CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  GT_REQUIRE(s == CUBLAS_STATUS_SUCCESS, Errc::cuda, "cublasGemmEx failed with status {}", int(s));
}

}  // namespace gemmtune
