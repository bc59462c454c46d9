#include "gemmtune/runtime/driver.hpp"

#include <dlfcn.h>

#include <mutex>

#include "gemmtune/generator/util.hpp"

namespace gemmtune::cu {
namespace {

struct Loaded {
  Api api;
  std::string error;  // empty when usable
};

Loaded load() {
  Loaded out;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    out.error = "no CUDA driver (libcuda.so.1 not found): this machine has no NVIDIA GPU driver";
    return out;
  }
  // Each function by the exact symbol cuda.h declares it as (cuMemAlloc is cuMemAlloc_v2): the
  // ABI then matches the prototype. cuGetProcAddress would hand out the newest ABI instead, which
  // differs for some (cuCtxGetDevice in CUDA 13 takes a context).
  std::string missing;
#define GEMMTUNE_STRINGIFY2(x) #x
#define GEMMTUNE_STRINGIFY(x) GEMMTUNE_STRINGIFY2(x)
#define GEMMTUNE_DRIVER_LOAD(fn)                                                           \
  out.api.fn = reinterpret_cast<decltype(out.api.fn)>(dlsym(lib, GEMMTUNE_STRINGIFY(fn))); \
  if (out.api.fn == nullptr)                                                               \
    missing += std::string(missing.empty() ? "" : ", ") + GEMMTUNE_STRINGIFY(fn);
  GEMMTUNE_DRIVER_FUNCTIONS(GEMMTUNE_DRIVER_LOAD)
#undef GEMMTUNE_DRIVER_LOAD
  if (!missing.empty()) {
    out.error = "the CUDA driver lacks " + missing + ": it is older than CUDA " +
                std::to_string(CUDA_VERSION / 1000) + "." +
                std::to_string(CUDA_VERSION % 1000 / 10) + "; update the NVIDIA driver";
    return out;
  }
  const CUresult init = out.api.cuInit(0);
  if (init == CUDA_ERROR_STUB_LIBRARY) {
    out.error = "only the CUDA toolkit's stub driver is installed: this machine has no GPU driver";
  } else if (init == CUDA_ERROR_NO_DEVICE) {
    out.error = "the CUDA driver found no GPU";
  } else if (init != CUDA_SUCCESS) {
    out.error = "cuInit failed: " + error_text(init);
  }
  return out;
}

const Loaded& loaded() {
  static const Loaded l = load();
  return l;
}

}  // namespace

const Api& api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) throw Error(Errc::no_device, "no GPU: " + l.error);
  return l.api;
}

bool available() noexcept {
  try {
    return loaded().error.empty();
  } catch (...) {
    return false;
  }
}

std::string unavailable_reason() {
  return loaded().error;
}

std::string error_text(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  const Api& a = loaded().api;
  if (a.cuGetErrorName) a.cuGetErrorName(result, &name);
  if (a.cuGetErrorString) a.cuGetErrorString(result, &text);
  return fmt::format("{}: {}", name ? name : fmt::format("CUresult {}", int(result)),
                     text ? text : "unknown error");
}

bool is_sticky(CUresult r) noexcept {
  switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
      return true;
    default:
      return false;
  }
}

void throw_cu(CUresult result, const char* call, const char* file, int line) {
  const Errc code = result == CUDA_ERROR_NO_DEVICE ? Errc::no_device : Errc::cuda;
  throw_error_at(code, file, line, fmt::format("{} failed: {}", call, error_text(result)));
}

}  // namespace gemmtune::cu
