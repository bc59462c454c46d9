// Kernels the tuner and the tests use to make data and to check results. The reference is
// deliberately naive and independent of every family: one thread per output point, a double
// accumulator, operands read straight from global memory.
#pragma once
#include "check_args.h"
#include "common.cuh"
#include "epilogue_op.cuh"

namespace gemmtune {
namespace testing {

// splitmix64: a counter-based generator, so every element is reproducible from (seed, index).
GEMMTUNE_DEVICE_INLINE u64 mix(u64 x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

GEMMTUNE_DEVICE_INLINE float normal(u64 seed, u64 index) {
  const u64 r = mix(seed ^ mix(index));
  const float u1 = (float((r >> 40) & 0xffffff) + 1.0f) / 16777217.0f;  // (0, 1]
  const float u2 = float(r & 0xffffff) / 16777216.0f;
  return sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
}

GEMMTUNE_DEVICE_INLINE double element(unsigned long long p, long long row, long long col,
                                      long long ld, int type) {
  return double(load_as_f32(reinterpret_cast<const void*>(p), row + col * ld, type));
}

}  // namespace testing
}  // namespace gemmtune

// Random normal values (times scale) in count elements of the type.
extern "C" __global__ void gemmtune_fill_normal(unsigned long long p, long long count, int type,
                                                unsigned long long seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x)
    gemmtune::store_from_f32(reinterpret_cast<void*>(p), i, type,
                             scale * gemmtune::testing::normal(seed, (unsigned long long)i));
}

// Random positive scales 2^lowest to 2^(lowest + octaves) (never all ones): a kernel that applies
// one to the wrong rows, columns or K blocks is off by far more than rounding.
extern "C" __global__ void gemmtune_fill_scales(unsigned long long p, long long count,
                                                unsigned long long seed, int lowest, int octaves) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < count;
       i += (long long)gridDim.x * blockDim.x) {
    const unsigned long long r = gemmtune::testing::mix(seed ^ gemmtune::testing::mix(i));
    const float octave = float(int(r % (unsigned long long)octaves) + lowest);
    const float mantissa = 1.0f + float((r >> 8) & 0xffff) / 65536.0f;
    reinterpret_cast<float*>(p)[i] = exp2f(octave) * mantissa;
  }
}

namespace gemmtune {
namespace testing {

// alpha * sum_k s_k op(A)[r,k] op(B)[k,c] in double, s_k the scale of the product
// (check_args.h), with the bias of (r, c) (r: op(A)'s row), and the size an honest float result's
// error is measured against: |alpha| * ||(s_k a_k b_k)_k||_2 + |bias|.
struct Sum {
  double value, scale;
};
GEMMTUNE_DEVICE_INLINE Sum sum_of(const CheckArgs& args, long long r, long long c, int group) {
  const long long a0 = (long long)group * (args.op_a == 0 ? args.k : args.m);
  const float* scales_a = reinterpret_cast<const float*>(args.scale_a) +
                          group * gemmtune_scales_a_per_group(args.scaling, args.m, args.k);
  double sum = 0.0, squares = 0.0;
  for (long long k = 0; k < args.k; ++k) {
    const double a = args.op_a == 0 ? element(args.a, r, a0 + k, args.lda, args.type_a)
                                    : element(args.a, k, a0 + r, args.lda, args.type_a);
    const double b = args.op_b == 0 ? element(args.b, k, c, args.ldb, args.type_b)
                                    : element(args.b, c, k, args.ldb, args.type_b);
    const double product =
        a * b *
        gemmtune_product_scale(scales_a, reinterpret_cast<const float*>(args.scale_b), args.scaling,
                               r, c, k, args.n, args.a_blocks);
    sum += product;
    squares += product * product;
  }
  Sum out{double(args.alpha) * sum, fabs(double(args.alpha)) * sqrt(squares)};
  if (args.bias_kind != BIAS_NONE) {
    const double bias = element(args.bias, args.bias_kind == BIAS_M ? r : c, 0, 1, args.type_c);
    out.value += bias;
    out.scale += fabs(bias);
  }
  return out;
}

// The activation's steepest slope (GELU's 1.13), through which its input's error passes.
GEMMTUNE_DEVICE_INLINE double slope_bound(int activation) {
  return activation == ACT_IDENTITY ? 1.0 : 1.13;
}

}  // namespace testing
}  // namespace gemmtune

// ref = act(alpha * sum_k s_k op(A)[r,k] op(B)[k,c] + beta * C_init[r,c] + bias), in double
// (testing::sum_of); its scale grows by |beta c| and passes through the activation's slope. A
// gated problem's D(r, c) = act(gate) * up of op(A)'s gate and up rows (epilogue_op.cuh), the
// scale that of a product: slope * scale(gate) * |up| + |act(gate)| * scale(up).
extern "C" __global__ void gemmtune_reference(const CheckArgs args) {
  using namespace gemmtune::testing;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= args.points) return;
  const int* rows = reinterpret_cast<const int*>(args.rows);
  const int* cols = reinterpret_cast<const int*>(args.cols);
  const long long r = rows ? rows[i] : i % args.out_rows;
  const long long c = cols ? cols[i] : i / args.out_rows;
  // A grouped problem's A: the G stored matrices one after another, its group's.
  const int group = args.groups > 0
                        ? gemmtune_group_of(reinterpret_cast<const int*>(args.group_ends),
                                            args.groups, args.group_capacity, c)
                        : 0;
  double* ref = reinterpret_cast<double*>(args.ref) + i;
  double* scale = reinterpret_cast<double*>(args.scale) + i;
  if (group < 0) {  // in no group: C as it was (beta == 0: the poison), marked by scale -1
    const double c0 = element(args.c_init, r, c, args.ldc, args.type_c);
    *ref = args.beta != 0.0f ? c0 : nan("");
    *scale = -1.0;
    return;
  }
  const double slope = slope_bound(args.activation);
  if (args.gate != gemmtune::GATE_NONE) {
    const Sum gate = sum_of(args, gemmtune::gate_row_of(args.gate, int(r)), c, group);
    const Sum up = sum_of(args, gemmtune::up_row_of(args.gate, int(r), args.m), c, group);
    const double act = gemmtune::activate<double>(args.activation, gate.value);
    *ref = act * up.value;
    *scale = slope * gate.scale * fabs(up.value) + fabs(act) * up.scale;
    return;
  }
  Sum s = sum_of(args, r, c, group);
  if (args.beta != 0.0f) {  // beta == 0: C_init may hold NaN and must not matter
    const double c0 = element(args.c_init, r, c, args.ldc, args.type_c);
    s.value += double(args.beta) * c0;
    s.scale += fabs(double(args.beta) * c0);
  }
  *ref = gemmtune::activate<double>(args.activation, s.value);
  *scale = slope * s.scale;
}

// Compares out with the reference at every point: error = |out - ref| / (|ref| + scale).
// Counts points over tolerance or not finite; keeps the largest finite error.
extern "C" __global__ void gemmtune_check(const CheckArgs args) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= args.points) return;
  const int* rows = reinterpret_cast<const int*>(args.rows);
  const int* cols = reinterpret_cast<const int*>(args.cols);
  const long long r = rows ? rows[i] : i % args.out_rows;
  const long long c = cols ? cols[i] : i / args.out_rows;
  const double out = gemmtune::testing::element(args.out, r, c, args.ldc, args.type_c);
  const double ref = reinterpret_cast<const double*>(args.ref)[i];
  const double scale = reinterpret_cast<const double*>(args.scale)[i];
  if (scale < 0.0) {  // a column in no group: untouched, still the poison when beta == 0
    const bool kept = args.beta != 0.0f ? out == ref : !isfinite(out);
    if (!kept) atomicAdd(reinterpret_cast<unsigned*>(args.bad), 1u);
    return;
  }
  // f16 keeps 2^-24 steps below its smallest normal value (2^-14): that much is rounding too.
  const double floor = args.type_c == GEMMTUNE_TYPE_F16 ? 6.103515625e-05 : 1e-30;
  const double err = fabs(out - ref) / (fabs(ref) + scale + floor);
  const bool finite = isfinite(out);
  if (!finite || err > args.tolerance) atomicAdd(reinterpret_cast<unsigned*>(args.bad), 1u);
  if (finite) atomicMax(reinterpret_cast<unsigned*>(args.max_error), __float_as_uint(float(err)));
}

// Counts the elements of an m x n column-major matrix that are NaN or infinite.
extern "C" __global__ void gemmtune_count_nonfinite(unsigned long long p, long long ld, int m,
                                                    int n, int type, unsigned long long count) {
  const long long total = (long long)m * n;
  unsigned local = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
       i += (long long)gridDim.x * blockDim.x) {
    const float v =
        gemmtune::load_as_f32(reinterpret_cast<const void*>(p), (i % m) + (i / m) * ld, type);
    if (!isfinite(v)) ++local;
  }
  if (local) atomicAdd(reinterpret_cast<unsigned*>(count), local);
}

// The elementwise pass a framework runs after a GEMM without a fused epilogue (the cuBLAS
// baseline's, tuner/src/cublas.cpp): D = act(D + bias) in place, D m x n column-major of the
// type, the bias of D's type along M or N, with epilogue_op.cuh's formulas on float; where aux
// is not 0, D + bias goes there too (the pre-activation a framework keeps for backward, laid out
// as D). Rows run along threadIdx.x (coalesced), columns along y.
extern "C" __global__ void gemmtune_epilogue_pass(unsigned long long d, long long ld, int m, int n,
                                                  int type, unsigned long long bias, int bias_kind,
                                                  int activation, unsigned long long aux) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= m) return;
  void* out = reinterpret_cast<void*>(d);
  const void* b = reinterpret_cast<const void*>(bias);
  const float row_bias = bias_kind == gemmtune::BIAS_M ? gemmtune::load_as_f32(b, r, type) : 0.0f;
  for (long long c = blockIdx.y * (long long)blockDim.y + threadIdx.y; c < n;
       c += (long long)gridDim.y * blockDim.y) {
    const long long at = r + c * ld;
    float v = gemmtune::load_as_f32(out, at, type) + row_bias;
    if (bias_kind == gemmtune::BIAS_N) v += gemmtune::load_as_f32(b, c, type);
    if (aux) gemmtune::store_from_f32(reinterpret_cast<void*>(aux), at, type, v);
    gemmtune::store_from_f32(out, at, type, gemmtune::activate<float>(activation, v));
  }
}

// The pass after a gated problem's GEMM in a framework (F.linear, then act(g) * u: the cuBLAS
// baseline's, tuner/src/cublas.cpp): D(i, c) = act(gate + its bias) * (up + its bias) of the
// M x N scratch (leading dimension ld_from) into D (rows = M / 2 rows, ld), rows gate_row_of and
// up_row_of (epilogue_op.cuh), the bias of D's type along M (op(A)'s rows) or N (added to both),
// on float. Rows along threadIdx.x (coalesced), columns along y.
extern "C" __global__ void gemmtune_gated_pass(unsigned long long from, long long ld_from,
                                               unsigned long long d, long long ld, int rows, int n,
                                               int type, unsigned long long bias, int bias_kind,
                                               int activation, int gate) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= rows) return;
  const void* in = reinterpret_cast<const void*>(from);
  void* out = reinterpret_cast<void*>(d);
  const void* b = reinterpret_cast<const void*>(bias);
  const int gate_row = gemmtune::gate_row_of(gate, i),
            up_row = gemmtune::up_row_of(gate, i, 2 * rows);
  const bool along_m = bias_kind == gemmtune::BIAS_M;
  const float gate_bias = along_m ? gemmtune::load_as_f32(b, gate_row, type) : 0.0f;
  const float up_bias = along_m ? gemmtune::load_as_f32(b, up_row, type) : 0.0f;
  for (long long c = blockIdx.y * (long long)blockDim.y + threadIdx.y; c < n;
       c += (long long)gridDim.y * blockDim.y) {
    const float column_bias =
        bias_kind == gemmtune::BIAS_N ? gemmtune::load_as_f32(b, c, type) : 0.0f;
    const float g =
        gemmtune::load_as_f32(in, gate_row + c * ld_from, type) + gate_bias + column_bias;
    const float u = gemmtune::load_as_f32(in, up_row + c * ld_from, type) + up_bias + column_bias;
    gemmtune::store_from_f32(out, i + c * ld, type, gemmtune::activate<float>(activation, g) * u);
  }
}
