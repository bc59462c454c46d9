// The verifier's float8 data on the GPU: random e4m3 and e5m2 operands (not zeros, not one
// value), and the fp64 reference computed from them, checked against the host's decoding of the
// very bytes (templates/fp8.h, tested code by code in test_fp8.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "fp8.h"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

class Fp8Data : public test::GpuTest {};

std::vector<unsigned char> bytes_of(const DeviceBuffer& buffer) {
  std::vector<unsigned char> out(buffer.bytes());
  GT_CU(cuMemcpyDtoH(out.data(), buffer.ptr(), out.size()));
  return out;
}

TEST_F(Fp8Data, TheReferenceOfFloat8OperandsIsTheirDecodedProduct) {
  for (const DataTypes types :
       {DataTypes{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16},
        DataTypes{DataType::e4m3, DataType::e5m2, DataType::f32, DataType::f32}}) {
    Problem p = make_problem(types, Op::T, Op::N, 37, 29, 200);  // tn: both K-major
    p.scaling = Scaling::tensor;
    const ProblemData d(p, *checker_, 11, stream_->get());
    const int64_t points = p.m * p.n;
    DeviceBuffer ref(size_t(points) * 8), scale(size_t(points) * 8);
    CheckArgs args = check_args(d, 1.5f, 0.0f);
    args.ref = ref.ptr();
    args.scale = scale.ptr();
    args.points = int(points);  // rows and cols none: every point, column by column
    checker_->reference(args, stream_->get());
    stream_->synchronize();

    const std::vector<unsigned char> a = bytes_of(d.a), b = bytes_of(d.b);
    const auto format = [](DataType t) { return t == DataType::e4m3 ? fp8::e4m3() : fp8::e5m2(); };
    std::vector<bool> seen(256);
    for (unsigned char code : a) seen[code] = true;
    EXPECT_GT(std::count(seen.begin(), seen.end(), true), 40) << "random data takes many codes";
    std::vector<double> refs(static_cast<size_t>(points));
    GT_CU(cuMemcpyDtoH(refs.data(), ref.ptr(), refs.size() * 8));
    float sa = 0, sb = 0;  // tensor scales: one each, random
    GT_CU(cuMemcpyDtoH(&sa, d.scale_a.ptr(), 4));
    GT_CU(cuMemcpyDtoH(&sb, d.scale_b.ptr(), 4));
    EXPECT_TRUE(sa != 1.0f || sb != 1.0f) << "the scales are random, not ones";
    for (int64_t c = 0; c < p.n; ++c)
      for (int64_t r = 0; r < p.m; ++r) {
        double sum = 0;
        for (int64_t k = 0; k < p.k; ++k)  // op(A) = A^T: A[k, r]; B[k, c]
          sum += double(fp8::decode(a[size_t(k + r * p.lda)], format(types.a))) *
                 double(fp8::decode(b[size_t(k + c * p.ldb)], format(types.b)));
        const double expected = 1.5 * sum * (double(sa) * double(sb));
        ASSERT_NEAR(refs[size_t(r + c * p.m)], expected, 1e-12 * (std::fabs(expected) + 1))
            << types.name() << " at (" << r << ", " << c << ")";
      }
  }
}

}  // namespace
}  // namespace gemmtune
