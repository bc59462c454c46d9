// gemmtune_torch: torch.ops.gemmtune_cpp.linear, a C++ operator over libgemmtune's C API, so a
// call through torch's dispatcher (torch.compile's graphs, autograd) runs no Python. It is built
// against the torch it runs with, where that torch is (tools/build_torch_op.py), and loaded by
// the package when found beside libgemmtune. y = x w^T (+ bias), nn.Linear's formula; a call
// gemmtune does not take (not CUDA, other dtypes, mixed dtypes) is torch's own at::linear.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <map>
#include <optional>
#include <tuple>

#include "gemmtune/gemmtune.h"

namespace {

int32_t type_code(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return GEMMTUNE_TYPE_F32;
    case at::kHalf:
      return GEMMTUNE_TYPE_F16;
    case at::kBFloat16:
      return GEMMTUNE_TYPE_BF16;
    default:
      return -1;
  }
}

void check(gemmtune_status status) {
  TORCH_CHECK(status == GEMMTUNE_SUCCESS, "gemmtune: ", gemmtune_last_error());
}

void set(gemmtune_matmul_desc desc, gemmtune_matmul_attribute attribute, int32_t value) {
  check(gemmtune_matmul_desc_set_attribute(desc, attribute, &value, sizeof value));
}

// A call's precision as the Python package takes it: f32's is torch's
// torch.get_float32_matmul_precision() ('highest': exact; 'high', 'medium': tf32), read at each
// call as torch's own matmul does; other types have one.
int32_t precision_of(int32_t type) {
  if (type != GEMMTUNE_TYPE_F32) return GEMMTUNE_PRECISION_EXACT;
  return at::globalContext().float32MatmulPrecision() == at::Float32MatmulPrecision::HIGHEST
             ? GEMMTUNE_PRECISION_EXACT
             : GEMMTUNE_PRECISION_TF32;
}

// This thread's descriptor of y^T = W x^T ('tn': op(A) = W^T of the weight as stored) for a
// type, with or without a bias along M, of a precision; a call sets only its bias pointer.
gemmtune_matmul_desc descriptor(int32_t type, bool bias, int32_t precision) {
  thread_local std::map<std::tuple<int32_t, bool, int32_t>, gemmtune_matmul_desc> made;
  gemmtune_matmul_desc& desc = made[{type, bias, precision}];
  if (desc) return desc;
  check(gemmtune_matmul_desc_create(&desc));
  for (auto operand : {GEMMTUNE_MATMUL_DESC_A_TYPE, GEMMTUNE_MATMUL_DESC_B_TYPE,
                       GEMMTUNE_MATMUL_DESC_C_TYPE, GEMMTUNE_MATMUL_DESC_D_TYPE})
    set(desc, operand, type);
  set(desc, GEMMTUNE_MATMUL_DESC_OP_A, GEMMTUNE_OP_T);
  set(desc, GEMMTUNE_MATMUL_DESC_OP_B, GEMMTUNE_OP_N);
  if (bias) set(desc, GEMMTUNE_MATMUL_DESC_BIAS, GEMMTUNE_BIAS_M);
  set(desc, GEMMTUNE_MATMUL_DESC_PRECISION, precision);
  return desc;
}

std::vector<int64_t> result_shape(const at::Tensor& x, const at::Tensor& w) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = w.size(0);
  return shape;
}

bool gemmtune_takes(const at::Tensor& x, const at::Tensor& w,
                    const std::optional<at::Tensor>& bias) {
  const auto same = [&](const at::Tensor& t) {
    return t.is_cuda() && t.scalar_type() == x.scalar_type() && t.device() == x.device();
  };
  return x.is_cuda() && type_code(x.scalar_type()) >= 0 && same(w) && (!bias || same(*bias)) &&
         x.dim() >= 1 && w.dim() == 2 && x.size(-1) == w.size(1);
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& w,
                       const std::optional<at::Tensor>& bias) {
  if (!gemmtune_takes(x, w, bias)) return at::linear(x, w, bias);
  const int64_t in = w.size(1), out = w.size(0);
  // Row-major rows of x with unit stride along K, and the weight likewise: else a copy.
  at::Tensor rows = x.reshape({-1, in});
  if (rows.stride(1) != 1 || rows.stride(0) < std::max<int64_t>(in, 1)) rows = rows.contiguous();
  const at::Tensor weight = w.stride(1) == 1 && w.stride(0) >= in ? w : w.contiguous();
  at::Tensor y = at::empty({rows.size(0), out}, x.options());
  if (rows.size(0) == 0 || out == 0) return y.view(result_shape(x, w));
  if (in == 0) return (bias ? y.copy_(bias->expand_as(y)) : y.zero_()).view(result_shape(x, w));
  const c10::cuda::CUDAGuard guard(x.device());
  const int32_t type = type_code(x.scalar_type());
  const gemmtune_matmul_desc desc = descriptor(type, bias.has_value(), precision_of(type));
  at::Tensor bias_vector;
  if (bias) {
    bias_vector = bias->contiguous();
    const void* address = bias_vector.data_ptr();
    check(gemmtune_matmul_desc_set_attribute(desc, GEMMTUNE_MATMUL_DESC_BIAS_POINTER, &address,
                                             sizeof address));
  }
  const float one = 1.0f, zero = 0.0f;
  // Column-major: D (out x tokens) = op(A) (out x in: the weight, T) times B (in x tokens: x, N).
  check(gemmtune_matmul(x.get_device(), desc, out, rows.size(0), in, &one, weight.data_ptr(),
                        weight.stride(0), rows.data_ptr(), rows.stride(0), &zero, y.data_ptr(), out,
                        c10::cuda::getCurrentCUDAStream(x.get_device()).stream()));
  return y.view(result_shape(x, w));
}

// The result's shape, dtype and device, without data: torch.compile's tracing.
at::Tensor linear_meta(const at::Tensor& x, const at::Tensor& w,
                       const std::optional<at::Tensor>& bias) {
  (void)bias;
  return at::empty(result_shape(x, w), x.options());
}

}  // namespace

TORCH_LIBRARY(gemmtune_cpp, m) {
  m.def("linear(Tensor x, Tensor w, Tensor? bias=None) -> Tensor");
}

TORCH_LIBRARY_IMPL(gemmtune_cpp, CUDA, m) {
  m.impl("linear", linear_cuda);
}

// CPU tensors are torch's own (linear_cuda hands them to at::linear).
TORCH_LIBRARY_IMPL(gemmtune_cpp, CPU, m) {
  m.impl("linear", linear_cuda);
}

TORCH_LIBRARY_IMPL(gemmtune_cpp, Meta, m) {
  m.impl("linear", linear_meta);
}
