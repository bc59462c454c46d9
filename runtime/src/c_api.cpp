// The C API: the C++ API behind a status code and a thread-local message.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

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

// The types of data_types.h, the codes of gemmtune_dtype.
static_assert(GEMMTUNE_F32 == int(gemmtune::DataType::f32) &&
              GEMMTUNE_F16 == int(gemmtune::DataType::f16) &&
              GEMMTUNE_BF16 == int(gemmtune::DataType::bf16) &&
              GEMMTUNE_E4M3 == int(gemmtune::DataType::e4m3) &&
              GEMMTUNE_E5M2 == int(gemmtune::DataType::e5m2) && GEMMTUNE_TYPE_COUNT == 5);
static_assert(GEMMTUNE_OP_N == int(gemmtune::Op::N) && GEMMTUNE_OP_T == int(gemmtune::Op::T));
static_assert(GEMMTUNE_SCALING_NONE == int(gemmtune::Scaling::none) &&
              GEMMTUNE_SCALING_TENSOR == int(gemmtune::Scaling::tensor) &&
              GEMMTUNE_SCALING_ROW == int(gemmtune::Scaling::row) &&
              GEMMTUNE_SCALING_BLOCK == int(gemmtune::Scaling::block));
static_assert(GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS == int(gemmtune::GroupLayout::contiguous) &&
              GEMMTUNE_GROUP_LAYOUT_MASKED == int(gemmtune::GroupLayout::masked));
static_assert(GEMMTUNE_ACCUMULATION_PRECISE == int(gemmtune::Accumulation::precise) &&
              GEMMTUNE_ACCUMULATION_FAST == int(gemmtune::Accumulation::fast));
static_assert(GEMMTUNE_PRECISION_EXACT == int(gemmtune::Precision::exact) &&
              GEMMTUNE_PRECISION_TF32 == int(gemmtune::Precision::tf32) &&
              GEMMTUNE_PRECISION_TF32X3 == int(gemmtune::Precision::tf32x3));
static_assert(GEMMTUNE_BIAS_NONE == int(gemmtune::Bias::none) &&
              GEMMTUNE_BIAS_M == int(gemmtune::Bias::m) &&
              GEMMTUNE_BIAS_N == int(gemmtune::Bias::n));
static_assert(GEMMTUNE_ACTIVATION_IDENTITY == int(gemmtune::Activation::identity) &&
              GEMMTUNE_ACTIVATION_RELU == int(gemmtune::Activation::relu) &&
              GEMMTUNE_ACTIVATION_GELU == int(gemmtune::Activation::gelu) &&
              GEMMTUNE_ACTIVATION_GELU_TANH == int(gemmtune::Activation::gelu_tanh) &&
              GEMMTUNE_ACTIVATION_SILU == int(gemmtune::Activation::silu));
static_assert(GEMMTUNE_GATE_NONE == int(gemmtune::Gate::none) &&
              GEMMTUNE_GATE_HALVES == int(gemmtune::Gate::halves) &&
              GEMMTUNE_GATE_INTERLEAVED == int(gemmtune::Gate::interleaved));

bool known_type(int code) {
  return code >= 0 && code < GEMMTUNE_TYPE_COUNT;
}
bool known_op(int op) {
  return op == GEMMTUNE_OP_N || op == GEMMTUNE_OP_T;
}

void check_enums(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b) {
  GT_REQUIRE(known_type(dtype), gemmtune::Errc::invalid_argument,
             "unknown dtype {} (expected a code of data_types.h, 0 to {})", int(dtype),
             GEMMTUNE_TYPE_COUNT - 1);
  GT_REQUIRE(known_op(op_a) && known_op(op_b), gemmtune::Errc::invalid_argument,
             "op must be GEMMTUNE_OP_N or GEMMTUNE_OP_T");
}

// The problem of a call, checked before anything touches a GPU: bad arguments are reported as
// such on any machine. f32_default: the precision of an f32 call whose descriptor sets none.
gemmtune::Problem checked_problem(const gemmtune::MatmulDesc& desc, int64_t m, int64_t n, int64_t k,
                                  const void* a, int64_t lda, const void* b, int64_t ldb,
                                  float beta, const void* c, int64_t ldc,
                                  gemmtune::Precision f32_default) {
  gemmtune::Problem p;
  p.types = desc.types;
  p.scaling = desc.scaling;
  p.op_a = desc.op_a;
  p.op_b = desc.op_b;
  p.m = m, p.n = n, p.k = k;
  p.lda = lda, p.ldb = ldb, p.ldc = ldc;
  p.reads_c = beta != 0.0f;
  // As Library::matmul: C where it is read or D is written over it, D's own buffer.
  p.align = gemmtune::alignment_class(p.types, a, b, c, desc.d, p.reads_c, p.lda, p.ldb, p.ldc);
  p.groups = desc.groups;
  p.group_layout = desc.group_layout;
  p.accumulation = desc.accumulation;
  p.precision = gemmtune::precision_of(desc, f32_default);
  p.epilogue = desc.epilogue;
  // A gated epilogue is named by its activation (swiglu, geglu, ...): identity has no name.
  GT_REQUIRE(!p.epilogue.gated() || p.epilogue.activation != gemmtune::Activation::identity,
             gemmtune::Errc::invalid_argument,
             "GEMMTUNE_MATMUL_DESC_GATE is set but GEMMTUNE_MATMUL_DESC_ACTIVATION is identity: a "
             "gated epilogue takes SiLU (SwiGLU), GELU or its tanh form (GeGLU) or ReLU (ReGLU)");
  gemmtune::validate(p);
  return p;
}

gemmtune::Problem checked_problem(gemmtune_dtype dtype, gemmtune_op op_a, gemmtune_op op_b,
                                  int64_t m, int64_t n, int64_t k, const void* a, int64_t lda,
                                  const void* b, int64_t ldb, float beta, const void* c,
                                  int64_t ldc, gemmtune::Precision f32_default) {
  check_enums(dtype, op_a, op_b);
  GT_REQUIRE(dtype != GEMMTUNE_E4M3 && dtype != GEMMTUNE_E5M2, gemmtune::Errc::invalid_argument,
             "{} operands take scales and a bf16, f16 or f32 output, which the one-dtype "
             "functions cannot say: use gemmtune_matmul (or _select, _record_problem) with a "
             "descriptor whose GEMMTUNE_MATMUL_DESC_SCALING and scale pointers are set",
             gemmtune::to_string(static_cast<gemmtune::DataType>(dtype)));
  const gemmtune::MatmulDesc desc{
      gemmtune::DataTypes::uniform(static_cast<gemmtune::DataType>(dtype)), gemmtune::Scaling::none,
      static_cast<gemmtune::Op>(op_a), static_cast<gemmtune::Op>(op_b)};
  return checked_problem(desc, m, n, k, a, lda, b, ldb, beta, c, ldc, f32_default);
}

// The precision of f32 calls whose descriptor sets none where no library is at hand (a recorded
// problem): the default library's setting, GEMMTUNE_F32_PRECISION.
gemmtune::Precision recorded_f32_precision() {
  return gemmtune::f32_precision_of(gemmtune::Options{});
}

// A call's beta (gemmtune_gemm checks it with alpha, where the library runs it).
void require_finite(float beta) {
  GT_REQUIRE(std::isfinite(beta), gemmtune::Errc::invalid_argument, "beta must be finite (got {})",
             beta);
}

// ---------------------------------------------------------------------------------------------
// The matmul descriptor

// Its attributes by name, for messages; every value is an int32_t but the pointers'.
const char* attribute_name(int attr) {
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_A_TYPE:
      return "GEMMTUNE_MATMUL_DESC_A_TYPE";
    case GEMMTUNE_MATMUL_DESC_B_TYPE:
      return "GEMMTUNE_MATMUL_DESC_B_TYPE";
    case GEMMTUNE_MATMUL_DESC_C_TYPE:
      return "GEMMTUNE_MATMUL_DESC_C_TYPE";
    case GEMMTUNE_MATMUL_DESC_D_TYPE:
      return "GEMMTUNE_MATMUL_DESC_D_TYPE";
    case GEMMTUNE_MATMUL_DESC_ACC_TYPE:
      return "GEMMTUNE_MATMUL_DESC_ACC_TYPE";
    case GEMMTUNE_MATMUL_DESC_SCALING:
      return "GEMMTUNE_MATMUL_DESC_SCALING";
    case GEMMTUNE_MATMUL_DESC_OP_A:
      return "GEMMTUNE_MATMUL_DESC_OP_A";
    case GEMMTUNE_MATMUL_DESC_OP_B:
      return "GEMMTUNE_MATMUL_DESC_OP_B";
    case GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER:
      return "GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER";
    case GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER:
      return "GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER";
    case GEMMTUNE_MATMUL_DESC_GROUPS:
      return "GEMMTUNE_MATMUL_DESC_GROUPS";
    case GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER:
      return "GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER";
    case GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT:
      return "GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT";
    case GEMMTUNE_MATMUL_DESC_ACCUMULATION:
      return "GEMMTUNE_MATMUL_DESC_ACCUMULATION";
    case GEMMTUNE_MATMUL_DESC_BIAS:
      return "GEMMTUNE_MATMUL_DESC_BIAS";
    case GEMMTUNE_MATMUL_DESC_ACTIVATION:
      return "GEMMTUNE_MATMUL_DESC_ACTIVATION";
    case GEMMTUNE_MATMUL_DESC_BIAS_POINTER:
      return "GEMMTUNE_MATMUL_DESC_BIAS_POINTER";
    case GEMMTUNE_MATMUL_DESC_D_POINTER:
      return "GEMMTUNE_MATMUL_DESC_D_POINTER";
    case GEMMTUNE_MATMUL_DESC_GATE:
      return "GEMMTUNE_MATMUL_DESC_GATE";
    case GEMMTUNE_MATMUL_DESC_PRECISION:
      return "GEMMTUNE_MATMUL_DESC_PRECISION";
    case GEMMTUNE_MATMUL_DESC_AUX:
      return "GEMMTUNE_MATMUL_DESC_AUX";
    case GEMMTUNE_MATMUL_DESC_AUX_POINTER:
      return "GEMMTUNE_MATMUL_DESC_AUX_POINTER";
  }
  return nullptr;
}

// The scale pointers' values are a const float*, the group ends' a const int32_t*, the bias's
// a const void*, D's and the pre-activation's a void*; every other attribute's an int32_t.
bool is_pointer(int attr) {
  return attr == GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER ||
         attr == GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER ||
         attr == GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER ||
         attr == GEMMTUNE_MATMUL_DESC_BIAS_POINTER || attr == GEMMTUNE_MATMUL_DESC_D_POINTER ||
         attr == GEMMTUNE_MATMUL_DESC_AUX_POINTER;
}

size_t value_size(int attr) {
  return is_pointer(attr) ? sizeof(const void*) : sizeof(int32_t);
}

// `attr` as a known attribute, else Error(invalid_argument) naming it.
const char* known_attribute(int attr) {
  const char* name = attribute_name(attr);
  GT_REQUIRE(name != nullptr, gemmtune::Errc::invalid_argument,
             "unknown matmul descriptor attribute {} (expected GEMMTUNE_MATMUL_DESC_A_TYPE (0) to "
             "GEMMTUNE_MATMUL_DESC_AUX_POINTER (21))",
             attr);
  return name;
}

// One enumerated attribute's valid codes, and how its error message names them.
struct EnumRange {
  int attr;
  const char* what;  // "scaling"
  int32_t low, high;
  const char* expected;  // "GEMMTUNE_SCALING_NONE (0) to GEMMTUNE_SCALING_BLOCK (3)"
};

constexpr EnumRange kEnumRanges[] = {
    {GEMMTUNE_MATMUL_DESC_SCALING, "scaling", GEMMTUNE_SCALING_NONE, GEMMTUNE_SCALING_BLOCK,
     "GEMMTUNE_SCALING_NONE (0) to GEMMTUNE_SCALING_BLOCK (3)"},
    {GEMMTUNE_MATMUL_DESC_OP_A, "op", GEMMTUNE_OP_N, GEMMTUNE_OP_T,
     "GEMMTUNE_OP_N (0) or GEMMTUNE_OP_T (1)"},
    {GEMMTUNE_MATMUL_DESC_OP_B, "op", GEMMTUNE_OP_N, GEMMTUNE_OP_T,
     "GEMMTUNE_OP_N (0) or GEMMTUNE_OP_T (1)"},
    {GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT, "group layout", GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS,
     GEMMTUNE_GROUP_LAYOUT_MASKED,
     "GEMMTUNE_GROUP_LAYOUT_CONTIGUOUS (0) or GEMMTUNE_GROUP_LAYOUT_MASKED (1)"},
    {GEMMTUNE_MATMUL_DESC_ACCUMULATION, "accumulation", GEMMTUNE_ACCUMULATION_PRECISE,
     GEMMTUNE_ACCUMULATION_FAST,
     "GEMMTUNE_ACCUMULATION_PRECISE (0) or GEMMTUNE_ACCUMULATION_FAST (1)"},
    {GEMMTUNE_MATMUL_DESC_BIAS, "bias", GEMMTUNE_BIAS_NONE, GEMMTUNE_BIAS_N,
     "GEMMTUNE_BIAS_NONE (0), GEMMTUNE_BIAS_M (1) or GEMMTUNE_BIAS_N (2)"},
    {GEMMTUNE_MATMUL_DESC_ACTIVATION, "activation", GEMMTUNE_ACTIVATION_IDENTITY,
     GEMMTUNE_ACTIVATION_SILU,
     "GEMMTUNE_ACTIVATION_IDENTITY (0) to GEMMTUNE_ACTIVATION_SILU (4): identity, relu, gelu, "
     "gelu_tanh, silu"},
    {GEMMTUNE_MATMUL_DESC_GATE, "gate", GEMMTUNE_GATE_NONE, GEMMTUNE_GATE_INTERLEAVED,
     "GEMMTUNE_GATE_NONE (0), GEMMTUNE_GATE_HALVES (1) or GEMMTUNE_GATE_INTERLEAVED (2)"},
    {GEMMTUNE_MATMUL_DESC_PRECISION, "precision", GEMMTUNE_PRECISION_DEFAULT,
     GEMMTUNE_PRECISION_TF32X3,
     "GEMMTUNE_PRECISION_DEFAULT (-1), GEMMTUNE_PRECISION_EXACT (0), GEMMTUNE_PRECISION_TF32 (1) "
     "or GEMMTUNE_PRECISION_TF32X3 (2)"},
    {GEMMTUNE_MATMUL_DESC_AUX, "aux", 0, 1, "0 or 1"},
};

// Whether `value` is valid for `attr`; else Error(invalid_argument) naming both.
void check_value(int attr, int32_t value) {
  const char* name = attribute_name(attr);
  for (const EnumRange& r : kEnumRanges) {
    if (r.attr != attr) continue;
    GT_REQUIRE(value >= r.low && value <= r.high, gemmtune::Errc::invalid_argument,
               "{}: unknown {} {} (expected {})", name, r.what, value, r.expected);
    return;
  }
  if (attr == GEMMTUNE_MATMUL_DESC_GROUPS) {
    GT_REQUIRE(value >= 0 && value <= gemmtune::kMaxGroups, gemmtune::Errc::invalid_argument,
               "{}: groups must be 0 (one GEMM) or 1 to {} (got {})", name, gemmtune::kMaxGroups,
               value);
    return;
  }
  GT_REQUIRE(known_type(value), gemmtune::Errc::invalid_argument,
             "{}: unknown data type code {} (expected 0 to {}: f32, f16, bf16, e4m3, e5m2)", name,
             value, GEMMTUNE_TYPE_COUNT - 1);
}

// What an attribute's value is, for messages.
const char* value_kind(int attr) {
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER:
      return "a const int32_t* (a device pointer)";
    case GEMMTUNE_MATMUL_DESC_BIAS_POINTER:
      return "a const void* (a device pointer)";
    case GEMMTUNE_MATMUL_DESC_D_POINTER:
    case GEMMTUNE_MATMUL_DESC_AUX_POINTER:
      return "a void* (a device pointer)";
  }
  return is_pointer(attr) ? "a const float* (a device pointer)" : "an int32_t";
}

void check_size(int attr, size_t size) {
  const char* what = value_kind(attr);
  GT_REQUIRE(size == value_size(attr), gemmtune::Errc::invalid_argument,
             "{} is {} ({} bytes), but size is {}", attribute_name(attr), what, value_size(attr),
             size);
}

}  // namespace

// The descriptor behind the opaque handle: the C++ API's MatmulDesc.
struct gemmtune_matmul_desc_st {
  gemmtune::MatmulDesc desc;
};

namespace {

const gemmtune::MatmulDesc& desc_of(gemmtune_matmul_desc desc) {
  GT_REQUIRE(desc != nullptr, gemmtune::Errc::invalid_argument,
             "the matmul descriptor is a null pointer (make one with "
             "gemmtune_matmul_desc_create)");
  return desc->desc;
}

// A pointer attribute's value from `value` (it points to the pointer), into its field.
void set_pointer(gemmtune::MatmulDesc& d, int attr, const void* value) {
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER:
      std::memcpy(&d.group_ends, value, sizeof d.group_ends);
      return;
    case GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER:
      std::memcpy(&d.scale_a, value, sizeof d.scale_a);
      return;
    case GEMMTUNE_MATMUL_DESC_BIAS_POINTER:
      std::memcpy(&d.bias, value, sizeof d.bias);
      return;
    case GEMMTUNE_MATMUL_DESC_D_POINTER:
      std::memcpy(&d.d, value, sizeof d.d);
      return;
    case GEMMTUNE_MATMUL_DESC_AUX_POINTER:
      std::memcpy(&d.aux, value, sizeof d.aux);
      return;
  }
  std::memcpy(&d.scale_b, value, sizeof d.scale_b);
}

const void* get_pointer(const gemmtune::MatmulDesc& d, int attr) {
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER:
      return d.group_ends;
    case GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER:
      return d.scale_a;
    case GEMMTUNE_MATMUL_DESC_BIAS_POINTER:
      return d.bias;
    case GEMMTUNE_MATMUL_DESC_D_POINTER:
      return d.d;
    case GEMMTUNE_MATMUL_DESC_AUX_POINTER:
      return d.aux;
  }
  return d.scale_b;
}

int32_t get_value(const gemmtune::MatmulDesc& d, int attr) {
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_A_TYPE:
      return int32_t(d.types.a);
    case GEMMTUNE_MATMUL_DESC_B_TYPE:
      return int32_t(d.types.b);
    case GEMMTUNE_MATMUL_DESC_C_TYPE:
      return int32_t(d.types.c);
    case GEMMTUNE_MATMUL_DESC_D_TYPE:
      return int32_t(d.types.d);
    case GEMMTUNE_MATMUL_DESC_ACC_TYPE:
      return int32_t(d.types.acc);
    case GEMMTUNE_MATMUL_DESC_SCALING:
      return int32_t(d.scaling);
    case GEMMTUNE_MATMUL_DESC_OP_A:
      return int32_t(d.op_a);
    case GEMMTUNE_MATMUL_DESC_OP_B:
      return int32_t(d.op_b);
    case GEMMTUNE_MATMUL_DESC_GROUPS:
      return int32_t(d.groups);
    case GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT:
      return int32_t(d.group_layout);
    case GEMMTUNE_MATMUL_DESC_ACCUMULATION:
      return int32_t(d.accumulation);
    case GEMMTUNE_MATMUL_DESC_BIAS:
      return int32_t(d.epilogue.bias);
    case GEMMTUNE_MATMUL_DESC_ACTIVATION:
      return int32_t(d.epilogue.activation);
    case GEMMTUNE_MATMUL_DESC_GATE:
      return int32_t(d.epilogue.gate);
    case GEMMTUNE_MATMUL_DESC_PRECISION:
      return d.precision ? int32_t(*d.precision) : GEMMTUNE_PRECISION_DEFAULT;
    case GEMMTUNE_MATMUL_DESC_AUX:
      return d.epilogue.aux ? 1 : 0;
  }
  GT_THROW(gemmtune::Errc::internal, "attribute {} has no field", attr);
}

// `value` is checked (check_value) before it is set.
void set_value(gemmtune::MatmulDesc& d, int attr, int32_t value) {
  const auto type = static_cast<gemmtune::DataType>(value);
  switch (attr) {
    case GEMMTUNE_MATMUL_DESC_A_TYPE:
      d.types.a = type;
      return;
    case GEMMTUNE_MATMUL_DESC_B_TYPE:
      d.types.b = type;
      return;
    case GEMMTUNE_MATMUL_DESC_C_TYPE:
      d.types.c = type;
      return;
    case GEMMTUNE_MATMUL_DESC_D_TYPE:
      d.types.d = type;
      return;
    case GEMMTUNE_MATMUL_DESC_ACC_TYPE:
      d.types.acc = type;
      return;
    case GEMMTUNE_MATMUL_DESC_SCALING:
      d.scaling = static_cast<gemmtune::Scaling>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_OP_A:
      d.op_a = static_cast<gemmtune::Op>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_OP_B:
      d.op_b = static_cast<gemmtune::Op>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_GROUPS:
      d.groups = value;
      return;
    case GEMMTUNE_MATMUL_DESC_GROUP_LAYOUT:
      d.group_layout = static_cast<gemmtune::GroupLayout>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_ACCUMULATION:
      d.accumulation = static_cast<gemmtune::Accumulation>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_BIAS:
      d.epilogue.bias = static_cast<gemmtune::Bias>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_ACTIVATION:
      d.epilogue.activation = static_cast<gemmtune::Activation>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_GATE:
      d.epilogue.gate = static_cast<gemmtune::Gate>(value);
      return;
    case GEMMTUNE_MATMUL_DESC_PRECISION:
      d.precision = value == GEMMTUNE_PRECISION_DEFAULT
                        ? std::nullopt
                        : std::optional(static_cast<gemmtune::Precision>(value));
      return;
    case GEMMTUNE_MATMUL_DESC_AUX:
      d.epilogue.aux = value != 0;
      return;
  }
  GT_THROW(gemmtune::Errc::internal, "attribute {} has no field", attr);
}

// A scaled call has both scale pointers; the message names the missing one and what it holds.
void require_scales(const gemmtune::Problem& p, const gemmtune::MatmulDesc& d) {
  if (p.scaling == gemmtune::Scaling::none) return;
  for (const auto& [operand, attr, pointer, shape] :
       {std::tuple{'A', "GEMMTUNE_MATMUL_DESC_SCALE_A_POINTER", d.scale_a, scale_shape_a(p)},
        std::tuple{'B', "GEMMTUNE_MATMUL_DESC_SCALE_B_POINTER", d.scale_b, scale_shape_b(p)}})
    GT_REQUIRE(pointer != nullptr, gemmtune::Errc::invalid_argument,
               "scaling {} needs the scales of {}: {} is not set (a device pointer to {} x {} "
               "fp32 scales{})",
               gemmtune::to_string(p.scaling), operand, attr, shape.rows, shape.cols,
               p.grouped() && operand == 'A'
                   ? fmt::format(": the {} groups' {} x {} one after another", p.groups, shape.rows,
                                 shape.cols / p.groups)
                   : "");
}

// A grouped call has its group ends (counts when masked); the message names the attribute and
// what it holds.
void require_group_ends(const gemmtune::Problem& p, const gemmtune::MatmulDesc& d) {
  const bool masked = p.masked();
  GT_REQUIRE(!p.grouped() || d.group_ends != nullptr, gemmtune::Errc::invalid_argument,
             "{}{} groups need their {}: GEMMTUNE_MATMUL_DESC_GROUP_ENDS_POINTER is not set (a "
             "device pointer to {} int32 {})",
             p.groups, masked ? " masked" : "", masked ? "counts" : "column end offsets", p.groups,
             masked ? "counts" : "offsets");
}

// A call with a bias has its vector; the message names the attribute and what it holds.
void require_bias(const gemmtune::Problem& p, const gemmtune::MatmulDesc& d) {
  if (p.epilogue.bias == gemmtune::Bias::none) return;
  const bool along_m = p.epilogue.bias == gemmtune::Bias::m;
  GT_REQUIRE(d.bias != nullptr, gemmtune::Errc::invalid_argument,
             "epilogue {} needs its bias: GEMMTUNE_MATMUL_DESC_BIAS_POINTER is not set (a device "
             "pointer to {} values of D's type, {})",
             p.epilogue.name(), along_m ? p.m : p.n, gemmtune::to_string(p.types.d));
}

// A call that keeps its pre-activation has that buffer; the message names the attribute.
void require_aux(const gemmtune::Problem& p, const gemmtune::MatmulDesc& d) {
  GT_REQUIRE(!p.epilogue.aux || d.aux != nullptr, gemmtune::Errc::invalid_argument,
             "epilogue {} stores its pre-activation: GEMMTUNE_MATMUL_DESC_AUX_POINTER is not set "
             "(a device pointer to {} x {} values of D's type, {}, laid out as D)",
             p.epilogue.name(), p.m, p.n, gemmtune::to_string(p.types.d));
}

// C is read where beta != 0, and written where D has no buffer of its own.
void require_c(const gemmtune::MatmulDesc& d, const void* c, float beta) {
  if (c != nullptr) return;
  GT_REQUIRE(d.d != nullptr, gemmtune::Errc::invalid_argument,
             "C is a null pointer (D is written over C: GEMMTUNE_MATMUL_DESC_D_POINTER gives D a "
             "buffer of its own)");
  GT_REQUIRE(beta == 0.0f, gemmtune::Errc::invalid_argument,
             "C is a null pointer, and beta != 0 reads it");
}

// A host scalar of gemmtune_matmul: present and finite.
float scalar(const float* value, const char* name) {
  GT_REQUIRE(value != nullptr, gemmtune::Errc::invalid_argument,
             "{} is a null pointer (gemmtune_matmul takes a pointer to a host float)", name);
  GT_REQUIRE(std::isfinite(*value), gemmtune::Errc::invalid_argument, "{} must be finite (got {})",
             name, *value);
  return *value;
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
    checked_problem(dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c, ldc,
                    gemmtune::default_library().f32_precision());
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
    gemmtune::Library& library = gemmtune::default_library();
    const gemmtune::Problem p = checked_problem(dtype, op_a, op_b, m, n, k, a, lda, b, ldb, beta, c,
                                                ldc, library.f32_precision());
    gemmtune::DeviceScope scope(device);
    last_selection = selection_json(library.select(p));
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
    const gemmtune::Problem p = checked_problem(dtype, op_a, op_b, m, n, k, nullptr, lda, nullptr,
                                                ldb, beta, nullptr, ldc, recorded_f32_precision());
    const bool wrote = gemmtune::record_shape(path, p);
    if (appended) *appended = wrote ? 1 : 0;
  });
}

gemmtune_status gemmtune_matmul_desc_create(gemmtune_matmul_desc* desc) {
  return guarded([&] {
    GT_REQUIRE(desc != nullptr, gemmtune::Errc::invalid_argument,
               "gemmtune_matmul_desc_create: desc (where the handle goes) is a null pointer");
    *desc = new gemmtune_matmul_desc_st{};
  });
}

gemmtune_status gemmtune_matmul_desc_destroy(gemmtune_matmul_desc desc) {
  delete desc;
  last_error.clear();
  return GEMMTUNE_SUCCESS;
}

gemmtune_status gemmtune_matmul_desc_set_attribute(gemmtune_matmul_desc desc,
                                                   gemmtune_matmul_attribute attr,
                                                   const void* value, size_t size) {
  return guarded([&] {
    desc_of(desc);
    const char* name = known_attribute(attr);
    GT_REQUIRE(value != nullptr, gemmtune::Errc::invalid_argument, "{}: value is a null pointer",
               name);
    check_size(attr, size);
    if (is_pointer(attr)) {  // any address, NULL included: the call checks it is there
      set_pointer(desc->desc, attr, value);
      return;
    }
    int32_t v;
    std::memcpy(&v, value, sizeof v);
    check_value(attr, v);
    set_value(desc->desc, attr, v);
  });
}

gemmtune_status gemmtune_matmul_desc_get_attribute(gemmtune_matmul_desc desc,
                                                   gemmtune_matmul_attribute attr, void* value,
                                                   size_t size, size_t* written) {
  return guarded([&] {
    const gemmtune::MatmulDesc& d = desc_of(desc);
    const char* name = known_attribute(attr);
    if (size == 0 && written != nullptr) {  // how many bytes the value needs
      *written = value_size(attr);
      return;
    }
    GT_REQUIRE(value != nullptr, gemmtune::Errc::invalid_argument,
               "{}: value (where it goes) is a null pointer", name);
    check_size(attr, size);
    if (is_pointer(attr)) {
      const void* pointer = get_pointer(d, attr);
      std::memcpy(value, &pointer, sizeof pointer);
      if (written) *written = sizeof pointer;
      return;
    }
    const int32_t v = get_value(d, attr);
    std::memcpy(value, &v, sizeof v);
    if (written) *written = sizeof v;
  });
}

gemmtune_status gemmtune_matmul(int device, gemmtune_matmul_desc desc, int64_t m, int64_t n,
                                int64_t k, const float* alpha, const void* a, int64_t lda,
                                const void* b, int64_t ldb, const float* beta, void* c, int64_t ldc,
                                void* stream) {
  return guarded([&] {
    const gemmtune::MatmulDesc& d = desc_of(desc);
    const float alpha_value = scalar(alpha, "alpha");
    const float beta_value = scalar(beta, "beta");
    gemmtune::Library& library = gemmtune::default_library();
    const gemmtune::Problem p =
        checked_problem(d, m, n, k, a, lda, b, ldb, beta_value, c, ldc, library.f32_precision());
    GT_REQUIRE(a != nullptr, gemmtune::Errc::invalid_argument, "A is a null pointer");
    GT_REQUIRE(b != nullptr, gemmtune::Errc::invalid_argument, "B is a null pointer");
    require_c(d, c, beta_value);
    require_scales(p, d);
    require_bias(p, d);
    require_aux(p, d);
    require_group_ends(p, d);
    gemmtune::DeviceScope scope(device);
    library.matmul(d, m, n, k, alpha_value, a, lda, b, ldb, beta_value, c, ldc,
                   static_cast<gemmtune::Stream>(stream));
  });
}

gemmtune_status gemmtune_matmul_select(int device, gemmtune_matmul_desc desc, int64_t m, int64_t n,
                                       int64_t k, const void* a, int64_t lda, const void* b,
                                       int64_t ldb, float beta, const void* c, int64_t ldc,
                                       const char** selection) {
  return guarded([&] {
    const gemmtune::MatmulDesc& d = desc_of(desc);
    GT_REQUIRE(selection != nullptr, gemmtune::Errc::invalid_argument,
               "selection_json is a null pointer");
    require_finite(beta);
    gemmtune::Library& library = gemmtune::default_library();
    const gemmtune::Problem p =
        checked_problem(d, m, n, k, a, lda, b, ldb, beta, c, ldc, library.f32_precision());
    gemmtune::DeviceScope scope(device);
    last_selection = selection_json(library.select(p));
    *selection = last_selection.c_str();
  });
}

gemmtune_status gemmtune_matmul_record_problem(const char* path, gemmtune_matmul_desc desc,
                                               int64_t m, int64_t n, int64_t k, int64_t lda,
                                               int64_t ldb, float beta, int64_t ldc,
                                               int* appended) {
  return guarded([&] {
    const gemmtune::MatmulDesc& d = desc_of(desc);
    GT_REQUIRE(path != nullptr && *path != '\0', gemmtune::Errc::invalid_argument,
               "the shapes file path is empty");
    require_finite(beta);
    const gemmtune::Problem p = checked_problem(d, m, n, k, nullptr, lda, nullptr, ldb, beta,
                                                nullptr, ldc, recorded_f32_precision());
    const bool wrote = gemmtune::record_shape(path, p);
    if (appended) *appended = wrote ? 1 : 0;
  });
}

gemmtune_status gemmtune_data_type_from_name(const char* name, int* code) {
  return guarded([&] {
    GT_REQUIRE(name != nullptr, gemmtune::Errc::invalid_argument,
               "gemmtune_data_type_from_name: name is a null pointer");
    GT_REQUIRE(code != nullptr, gemmtune::Errc::invalid_argument,
               "gemmtune_data_type_from_name: code (where it goes) is a null pointer");
    *code = int(gemmtune::parse_data_type(name));
  });
}

const char* gemmtune_data_type_name(int code) {
  static const auto names = [] {  // NUL-terminated copies of to_string's views
    std::array<std::string, GEMMTUNE_TYPE_COUNT> out;
    for (int i = 0; i < GEMMTUNE_TYPE_COUNT; ++i)
      out[size_t(i)] = gemmtune::to_string(static_cast<gemmtune::DataType>(i));
    return out;
  }();
  return known_type(code) ? names[size_t(code)].c_str() : nullptr;
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
