// The C API: the C++ API behind a status code and a thread-local message.
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "gemmtune/gemmtune.h"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/shape_recorder.hpp"

namespace {

thread_local std::string last_error;
thread_local std::string last_selection;

gemmtune_status status_of(gemmtune::Errc code) {
  using gemmtune::Errc;
  switch (code) {
    case Errc::invalid_argument:
      return GEMMTUNE_ERROR_INVALID_ARGUMENT;
    case Errc::unsupported:
      return GEMMTUNE_ERROR_UNSUPPORTED;
    case Errc::no_device:
      return GEMMTUNE_ERROR_NO_DEVICE;
    case Errc::cuda:
      return GEMMTUNE_ERROR_CUDA;
    case Errc::compile:
      return GEMMTUNE_ERROR_COMPILE;
    case Errc::database:
      return GEMMTUNE_ERROR_DATABASE;
    case Errc::io:
      return GEMMTUNE_ERROR_IO;
    case Errc::timeout:
      return GEMMTUNE_ERROR_TIMEOUT;
    case Errc::internal:
      return GEMMTUNE_ERROR_INTERNAL;
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

void check_enums(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b) {
  GT_REQUIRE(dtype >= GEMMTUNE_F32 && dtype <= GEMMTUNE_BF16, gemmtune::Errc::invalid_argument,
             "unknown dtype {}", int(dtype));
  GT_REQUIRE((op_a == GEMMTUNE_OP_N || op_a == GEMMTUNE_OP_T) &&
                 (op_b == GEMMTUNE_OP_N || op_b == GEMMTUNE_OP_T),
             gemmtune::Errc::invalid_argument, "op must be GEMMTUNE_OP_N or GEMMTUNE_OP_T");
}

// The problem of a call, checked before anything touches a GPU: bad arguments are reported as
// such on any machine.
gemmtune::Problem checked_problem(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b,
                                  int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                                  const void* b, int64_t ldb, float beta, const void* c,
                                  int64_t ldc) {
  check_enums(dtype, op_a, op_b);
  gemmtune::Problem p;
  p.types = gemmtune::DataTypes::uniform(static_cast<gemmtune::DataType>(dtype));
  p.op_a = static_cast<gemmtune::Op>(op_a);
  p.op_b = static_cast<gemmtune::Op>(op_b);
  p.m = m, p.n = n, p.k = k;
  p.lda = lda, p.ldb = ldb, p.ldc = ldc;
  p.align = gemmtune::alignment_class(p.types, a, b, c, lda, ldb, ldc);
  p.reads_c = beta != 0.0f;
  gemmtune::validate(p);
  return p;
}

// A call's beta (gemmtune_gemm checks it with alpha, where the library runs it).
void require_finite(float beta) {
  GT_REQUIRE(std::isfinite(beta), gemmtune::Errc::invalid_argument, "beta must be finite (got {})",
             beta);
}

// The selection and the device key the tuning database is searched with (after the lookup, so
// the context is current).
std::string selection_json(const gemmtune::Selection& s) {
  const gemmtune::DeviceKey key = gemmtune::query_device(gemmtune::current_device()).key;
  return nlohmann::ordered_json{{"source", gemmtune::to_string(s.source)},
                                {"kernel", s.kernel},
                                {"family", s.family},
                                {"config", nlohmann::ordered_json::parse(s.config)},
                                {"note", s.note},
                                {"device",
                                 {{"name", key.name},
                                  {"cc", key.cc},
                                  {"sms", key.sms},
                                  {"driver", key.driver},
                                  {"nvrtc", key.nvrtc}}}}
      .dump();
}

}  // namespace

extern "C" {

gemmtune_status gemmtune_gemm(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b, int64_t m,
                              int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                              const void* b, int64_t ldb, float beta, void* c, int64_t ldc,
                              void* stream) {
  return gemmtune_gemm_on_device(-1, dtype, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                 ldc, stream);
}

gemmtune_status gemmtune_sgemm(gemmtune_op op_a, gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                               float alpha, const float* a, int64_t lda, const float* b,
                               int64_t ldb, float beta, float* c, int64_t ldc, void* stream) {
  return gemmtune_gemm(GEMMTUNE_F32, op_a, op_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                       stream);
}

gemmtune_status gemmtune_gemm_on_device(int device, gemmtune_dtype dtype, gemmtune_op op_a,
                                        gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                                        float alpha, const void* a, int64_t lda, const void* b,
                                        int64_t ldb, float beta, void* c, int64_t ldc,
                                        void* stream) {
  return guarded([&] {
    checked_problem(dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    gemmtune::DeviceScope scope(device);
    gemmtune::gemm(static_cast<gemmtune::DType>(dtype), static_cast<gemmtune::Op>(op_a),
                   static_cast<gemmtune::Op>(op_b), m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                   static_cast<gemmtune::Stream>(stream));
  });
}

gemmtune_status gemmtune_select(int device, gemmtune_dtype dtype, gemmtune_op op_a,
                                gemmtune_op op_b, int64_t m, int64_t n, int64_t k, const void* a,
                                int64_t lda, const void* b, int64_t ldb, float beta, const void* c,
                                int64_t ldc, const char** selection) {
  return guarded([&] {
    GT_REQUIRE(selection != nullptr, gemmtune::Errc::invalid_argument,
               "selection_json is a null pointer");
    require_finite(beta);
    const gemmtune::Problem p =
        checked_problem(dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc);
    gemmtune::DeviceScope scope(device);
    last_selection = selection_json(gemmtune::default_library().select(p));
    *selection = last_selection.c_str();
  });
}

gemmtune_status gemmtune_record_problem(const char* path, gemmtune_dtype dtype, gemmtune_op op_a,
                                        gemmtune_op op_b, int64_t m, int64_t n, int64_t k,
                                        int64_t lda, int64_t ldb, float beta, int64_t ldc,
                                        int* appended) {
  return guarded([&] {
    GT_REQUIRE(path != nullptr && *path != '\0', gemmtune::Errc::invalid_argument,
               "the shapes file path is empty");
    require_finite(beta);
    const gemmtune::Problem p =
        checked_problem(dtype, op_a, op_b, m, n, k, nullptr, lda, nullptr, ldb, beta, nullptr, ldc);
    const bool wrote = gemmtune::record_shape(path, p);
    if (appended) *appended = wrote ? 1 : 0;
  });
}

const char* gemmtune_last_error(void) {
  return last_error.c_str();
}

const char* gemmtune_status_string(gemmtune_status status) {
  switch (status) {
    case GEMMTUNE_SUCCESS:
      return "success";
    case GEMMTUNE_ERROR_INVALID_ARGUMENT:
      return "invalid argument";
    case GEMMTUNE_ERROR_UNSUPPORTED:
      return "unsupported";
    case GEMMTUNE_ERROR_NO_DEVICE:
      return "no device";
    case GEMMTUNE_ERROR_CUDA:
      return "CUDA error";
    case GEMMTUNE_ERROR_COMPILE:
      return "compile error";
    case GEMMTUNE_ERROR_DATABASE:
      return "database error";
    case GEMMTUNE_ERROR_IO:
      return "I/O error";
    case GEMMTUNE_ERROR_TIMEOUT:
      return "timeout";
    case GEMMTUNE_ERROR_INTERNAL:
      return "internal error";
  }
  return "unknown status";
}

}  // extern "C"
