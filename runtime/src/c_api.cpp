// The C API: the C++ API behind a status code and a thread-local message.
#include <string>

#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"

namespace {

thread_local std::string last_error;

gemmtune_status status_of(gemmtune::Errc code) {
  using gemmtune::Errc;
  switch (code) {
    case Errc::invalid_argument: return GEMMTUNE_ERROR_INVALID_ARGUMENT;
    case Errc::unsupported: return GEMMTUNE_ERROR_UNSUPPORTED;
    case Errc::no_device: return GEMMTUNE_ERROR_NO_DEVICE;
    case Errc::cuda: return GEMMTUNE_ERROR_CUDA;
    case Errc::compile: return GEMMTUNE_ERROR_COMPILE;
    case Errc::database: return GEMMTUNE_ERROR_DATABASE;
    case Errc::io: return GEMMTUNE_ERROR_IO;
    case Errc::timeout: return GEMMTUNE_ERROR_TIMEOUT;
    case Errc::internal: return GEMMTUNE_ERROR_INTERNAL;
  }
  return GEMMTUNE_ERROR_INTERNAL;
}

template <class F>
gemmtune_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return GEMMTUNE_SUCCESS;
  } catch (const gemmtune::Error& e) {
    last_error = e.what();
    return status_of(e.code());
  } catch (const std::exception& e) {
    last_error = e.what();
    return GEMMTUNE_ERROR_INTERNAL;
  } catch (...) {
    last_error = "unknown exception";
    return GEMMTUNE_ERROR_INTERNAL;
  }
}

}  // namespace

extern "C" {

gemmtune_status gemmtune_gemm(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b, int64_t m,
                              int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                              const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                              void* stream) {
  return guarded([&] {
    if (dtype < GEMMTUNE_F32 || dtype > GEMMTUNE_BF16)
      throw gemmtune::Error(gemmtune::Errc::invalid_argument, "unknown dtype " + std::to_string(int(dtype)));
    if ((op_a != GEMMTUNE_OP_N && op_a != GEMMTUNE_OP_T) || (op_b != GEMMTUNE_OP_N && op_b != GEMMTUNE_OP_T))
      throw gemmtune::Error(gemmtune::Errc::invalid_argument, "op must be GEMMTUNE_OP_N or GEMMTUNE_OP_T");
    gemmtune::gemm(static_cast<gemmtune::DType>(dtype), static_cast<gemmtune::Op>(op_a),
                   static_cast<gemmtune::Op>(op_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                   static_cast<gemmtune::Stream>(stream));
  });
}

gemmtune_status gemmtune_sgemm(gemmtune_op op_a, gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const float* a, int64_t lda, const float* b,
                               int64_t ldb, float beta, float* c, int64_t ldc, void* stream) {
  return gemmtune_gemm(GEMMTUNE_F32, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, stream);
}

const char* gemmtune_last_error(void) { return last_error.c_str(); }

const char* gemmtune_status_string(gemmtune_status status) {
  switch (status) {
    case GEMMTUNE_SUCCESS: return "success";
    case GEMMTUNE_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case GEMMTUNE_ERROR_UNSUPPORTED: return "unsupported";
    case GEMMTUNE_ERROR_NO_DEVICE: return "no device";
    case GEMMTUNE_ERROR_CUDA: return "CUDA error";
    case GEMMTUNE_ERROR_COMPILE: return "compile error";
    case GEMMTUNE_ERROR_DATABASE: return "database error";
    case GEMMTUNE_ERROR_IO: return "I/O error";
    case GEMMTUNE_ERROR_TIMEOUT: return "timeout";
    case GEMMTUNE_ERROR_INTERNAL: return "internal error";
  }
  return "unknown status";
}

}  // extern "C"
