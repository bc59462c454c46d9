// The float8 baseline: cuBLASLt's "tn" e4m3 GEMMs through Cublas (tuner/src/cublas.cpp) with each
// scaling (tensor, row, block), on random data and random scales, against a double-precision
// reference computed here from the decoded bytes (templates/fp8.h) and the scales in our layouts
// (scale_shape_a/b): for block, the sum over the K blocks kb of scale_a[mb + kb * ceil(M/128)] *
// scale_b[n + kb * N] times that block's partial dot product. What cuBLASLt refuses comes back as
// Error(unsupported) with its reason (printed), never a crash; the small shapes each mode has on
// Hopper (sm_90) must run there. Prints what it checks and the largest error of each mode.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <vector>

#include "fp8.h"
#include "gemmtune/tuner/cublas.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Fp8Case {
  Scaling scaling;
  int64_t m, n, k;
  DataTypes types;
  float alpha, beta;
  bool must_run_on_sm90;  // a shape cuBLASLt's documentation says it takes there
  bool prepare_first;     // else gemm() prepares the problem itself
};

DataTypes fp8_to(DataType out, DataType b = DataType::e4m3) {
  return {DataType::e4m3, b, out, out};
}

float f32_of_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float f16_value(uint16_t h) {
  const int sign = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const float s = sign ? -1.0f : 1.0f;
  if (e == 0) return s * std::ldexp(float(m), -24);
  if (e == 31) return m ? NAN : s * INFINITY;
  return s * std::ldexp(float(m + 1024), e - 25);
}

// The value of output element i of C (ld = M) as stored.
double value_at(const std::vector<unsigned char>& c, int64_t i, DataType type) {
  switch (type) {
    case DataType::f32: {
      float f;
      std::memcpy(&f, c.data() + i * 4, 4);
      return f;
    }
    case DataType::bf16: {
      uint16_t h;
      std::memcpy(&h, c.data() + i * 2, 2);
      return f32_of_bits(uint32_t(h) << 16);
    }
    case DataType::f16: {
      uint16_t h;
      std::memcpy(&h, c.data() + i * 2, 2);
      return f16_value(h);
    }
    default:
      return NAN;
  }
}

// Above the rounding of the output type and of Hopper's float8 tensor-core accumulation (about
// 14 significant bits between cuBLASLt's promotions to f32), relative to |ref| + the size of the
// products (the verifier's measure, checker.hpp).
double tolerance_of(DataType out) {
  return out == DataType::f32 ? 2e-3 : out == DataType::f16 ? 5e-3 : 1.2e-2;
}

std::vector<unsigned char> bytes_of(CUdeviceptr p, size_t bytes) {
  std::vector<unsigned char> out(bytes);
  GT_CU(cuMemcpyDtoH(out.data(), p, bytes));
  return out;
}

class CublasLtFp8 : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    cublas_ = Cublas::load();
    if (!cublas_) GTEST_SKIP() << "no cuBLAS: " << Cublas::why_not();
    if (cublas_->features().lt_version == 0)
      GTEST_SKIP() << "no cuBLASLt: " << cublas_->features().lt_missing;
    std::cout << cublas_->version() << " on " << device_.name << " (" << device_.arch.name()
              << ")\n";
  }

  // Random scales in [0.25, 4), in our layout.
  static std::vector<float> random_scales(int64_t count, std::mt19937& rng) {
    std::uniform_real_distribution<float> exponent(-2.0f, 2.0f);
    std::vector<float> s(static_cast<size_t>(count));
    for (float& v : s) v = std::exp2(exponent(rng));
    return s;
  }

  // Runs the case; returns the largest error, or -1 when cuBLASLt refused it (said why).
  double run_case(const Fp8Case& c) {
    Problem p = make_problem(c.types, Op::T, Op::N, c.m, c.n, c.k);
    p.scaling = c.scaling;
    p.reads_c = c.beta != 0.0f;
    const std::string what = fmt::format("{} alpha={} beta={}{}", p.describe(), c.alpha, c.beta,
                                         c.prepare_first ? "" : " (gemm() prepares it)");
    EXPECT_TRUE(cublas_->supports(p)) << what << ": " << cublas_->why_unsupported(p);

    // Operands: A stored K x M, B K x N (both K-major), C M x N; random normal values.
    const ProblemData data(p, *checker_, 31, stream_->get());
    std::mt19937 rng(uint32_t(c.m * 7 + c.n * 3 + c.k + int(c.scaling)));
    std::vector<float> sa = random_scales(scale_shape_a(p).count(), rng);
    std::vector<float> sb = random_scales(scale_shape_b(p).count(), rng);
    const DeviceBuffer scale_a(sa.size() * 4), scale_b(sb.size() * 4);
    auto upload = [&] {
      GT_CU(cuMemcpyHtoDAsync(scale_a.ptr(), sa.data(), sa.size() * 4, stream_->get()));
      GT_CU(cuMemcpyHtoDAsync(scale_b.ptr(), sb.data(), sb.size() * 4, stream_->get()));
      stream_->synchronize();
    };
    upload();
    GemmOperands ops = data.operands(c.alpha, c.beta);
    ops.scale_a = scale_a.ptr();
    ops.scale_b = scale_b.ptr();

    const std::vector<unsigned char> a = bytes_of(data.a.ptr(), data.a.bytes());
    const std::vector<unsigned char> b = bytes_of(data.b.ptr(), data.b.bytes());
    const std::vector<unsigned char> c0 = bytes_of(data.c_init.ptr(), data.c_init.bytes());
    const auto format = [](DataType t) { return t == DataType::e4m3 ? fp8::e4m3() : fp8::e5m2(); };
    std::vector<double> av(a.size()), bv(b.size());
    for (size_t i = 0; i < a.size(); ++i) av[i] = fp8::decode(a[i], format(p.types.a));
    for (size_t i = 0; i < b.size(); ++i) bv[i] = fp8::decode(b[i], format(p.types.b));

    // Twice for block scaling: then new scales at the same addresses, prepared again (Cublas
    // converts the scales of A in prepare(): a stale copy would fail the second check).
    const int rounds = c.scaling == Scaling::block && c.prepare_first ? 2 : 1;
    double worst = 0;
    for (int round = 0; round < rounds; ++round) {
      if (round > 0) {
        sa = random_scales(int64_t(sa.size()), rng);
        sb = random_scales(int64_t(sb.size()), rng);
        upload();
      }
      data.reset_c(*checker_, c.beta, stream_->get());  // NaN everywhere when beta == 0
      try {
        if (c.prepare_first) cublas_->prepare(p, ops, stream_->get());
        cublas_->gemm(p, ops, stream_->get());
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unsupported) << what << ": " << e.what();
        std::cout << "  refused  " << what << ": " << e.what() << "\n";
        if (c.must_run_on_sm90 && device_.arch.cc == 90)
          ADD_FAILURE() << what << " must run on sm_90: " << e.what();
        return -1;
      }
      stream_->synchronize();
      const std::vector<unsigned char> out = bytes_of(data.c.ptr(), data.c.bytes());

      const int64_t mb = (p.m + 127) / 128;
      double max_error = 0;
      int64_t bad = 0;
      std::vector<double> partial(size_t((p.k + 127) / 128));
      for (int64_t col = 0; col < p.n; ++col)
        for (int64_t row = 0; row < p.m; ++row) {
          std::fill(partial.begin(), partial.end(), 0.0);
          double squares = 0;
          for (int64_t k = 0; k < p.k; ++k) {
            const double prod = av[size_t(k + row * p.lda)] * bv[size_t(k + col * p.ldb)];
            partial[size_t(k / 128)] += prod;
            squares += prod * prod;
          }
          double sum = 0, scale = 0;  // scale: a typical |scale_a scale_b| for the size
          for (size_t kb = 0; kb < partial.size(); ++kb) {
            double s = 0;
            switch (p.scaling) {
              case Scaling::tensor:
                s = double(sa[0]) * sb[0];
                break;
              case Scaling::row:
                s = double(sa[size_t(row)]) * sb[size_t(col)];
                break;
              case Scaling::block:
                s = double(sa[size_t(row / 128 + int64_t(kb) * mb)]) *
                    sb[size_t(col + int64_t(kb) * p.n)];
                break;
              case Scaling::none:
                break;
            }
            sum += s * partial[kb];
            scale = std::max(scale, std::abs(s));
          }
          const int64_t i = row + col * p.ldc;
          const double cinit = c.beta != 0.0f ? value_at(c0, i, p.types.c) : 0.0;
          const double ref = double(c.alpha) * sum + double(c.beta) * cinit;
          const double norm =
              std::abs(double(c.alpha)) * scale * std::sqrt(squares) + std::abs(c.beta * cinit);
          const double got = value_at(out, i, p.types.d);
          const double error = std::abs(got - ref) / (std::abs(ref) + norm + 1e-30);
          if (!(error <= tolerance_of(p.types.d))) {
            if (bad++ < 5)
              ADD_FAILURE() << what << " at (" << row << ", " << col << "): " << got
                            << ", expected " << ref << " (error " << error << ")";
            continue;
          }
          max_error = std::max(max_error, error);
        }
      std::cout << "  checked  " << what << (round > 0 ? " (new scales, prepared again)" : "")
                << ": " << p.m * p.n << " points, max relative error " << max_error
                << (bad ? fmt::format(", {} wrong", bad) : "") << "\n";
      EXPECT_EQ(bad, 0) << what;
      worst = std::max(worst, max_error);
    }
    return worst;
  }

  std::unique_ptr<Cublas> cublas_;
};

TEST_F(CublasLtFp8, TnE4m3MatchesTheReferenceInEveryScalingOrSaysWhyNot) {
  const std::vector<Fp8Case> cases = {
      {Scaling::tensor, 256, 128, 512, fp8_to(DataType::bf16), 1.5f, 0.0f, true, true},
      {Scaling::tensor, 384, 64, 1024, fp8_to(DataType::bf16), 1.0f, 0.5f, true, false},
      {Scaling::tensor, 256, 128, 512, fp8_to(DataType::f32, DataType::e5m2), 1.0f, 0.5f, true,
       true},
      {Scaling::tensor, 256, 128, 512, fp8_to(DataType::f16), 0.75f, 0.0f, true, true},
      {Scaling::row, 256, 128, 512, fp8_to(DataType::bf16), 1.5f, 0.0f, true, true},
      {Scaling::row, 384, 64, 1024, fp8_to(DataType::bf16), 1.0f, 0.5f, true, false},
      {Scaling::row, 256, 128, 512, fp8_to(DataType::f32), 1.0f, 0.0f, true, true},
      {Scaling::block, 256, 128, 512, fp8_to(DataType::bf16), 1.5f, 0.0f, true, true},
      {Scaling::block, 384, 256, 768, fp8_to(DataType::bf16), 1.0f, 0.5f, false, true},
      {Scaling::block, 384, 64, 1024, fp8_to(DataType::bf16), 1.0f, 0.0f, false, true},
      {Scaling::block, 256, 2112, 640, fp8_to(DataType::bf16), 1.0f, 0.0f, false, true},
      {Scaling::block, 320, 128, 448, fp8_to(DataType::f32), 1.0f, 0.0f, false, false},
  };
  std::map<Scaling, double> worst;
  std::map<Scaling, int> ran, refused;
  for (const Fp8Case& c : cases) {
    const double e = run_case(c);
    if (e < 0) {
      ++refused[c.scaling];
      continue;
    }
    ++ran[c.scaling];
    worst[c.scaling] = std::max(worst[c.scaling], e);
  }
  for (Scaling s : {Scaling::tensor, Scaling::row, Scaling::block})
    std::cout << fmt::format("{:>6}: {} checked, {} refused by cuBLASLt, max relative error {}\n",
                             to_string(s), ran[s], refused[s],
                             ran[s] ? fmt::format("{:.3g}", worst[s]) : "-");
}

// Grouped float8 (cuBLAS has none: a cublasLtMatmul per non-empty group) is right against the
// fp64 reference of each group, each scaling, both betas, on the uniform routing of float8
// experts (four tokens at a time, routing_granule); groups of any size (the ragged routing) are run
// or refused as unsupported with cuBLASLt's reason, never a crash.
TEST_F(CublasLtFp8, GroupedIsACallPerGroupRightForEachGroup) {
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (float beta : {0.0f, 0.5f}) {
      Problem p = make_problem(fp8_to(DataType::bf16), Op::T, Op::N, 384, 8 * 64, 512);
      p.groups = 8;
      p.scaling = scaling;
      p.reads_c = beta != 0.0f;
      const Verifier verifier(*checker_, p, 1.0f, beta, 21, stream_->get());
      auto run = [&](const Problem& q, GemmOperands ops, CUstream s) {
        cublas_->prepare(q, ops, s);  // the routing read again: each case has its own
        cublas_->gemm(q, ops, s);
      };
      const Verdict v = verifier.verify_problem(run, stream_->get());
      EXPECT_TRUE(v.ok) << p.describe() << " beta=" << beta << ": " << v.message;
      std::cout << "  grouped  " << p.describe() << " beta=" << beta << ": " << v.points
                << " points, max normalized error " << v.max_error << "\n";
      ProblemData ragged(p, *checker_, 5, stream_->get(), Routing::ragged);
      try {
        run(p, ragged.operands(1.0f, beta), stream_->get());
        stream_->synchronize();
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::unsupported) << e.what();
        std::cout << "  refused  a ragged routing: " << e.what() << "\n";
      }
    }
}

// The library's default float8 kernels err at most a tenth more than cuBLASLt on the same data
// and at the same points (Verifier::verify_problem for both), in every scaling, with a bf16 and
// an f32 output. The verifier's other cases (odd sizes, every element of them) add points, and
// so a larger maximum of the same rounding, to whichever runs them: gemm-bench puts both errors
// side by side on the problem's own points for that reason.
TEST_F(CublasLtFp8, LibraryErrsWithinATenthOfCublasLtOnTheSameData) {
  test::TempDir dir;
  Options options;
  options.db_path = (dir / "none.db").string();  // nothing tuned: the defaults
  options.cache_dir = (dir / "cache").string();
  Library lib(options);
  const Verifier::RunFn ours = library_run(lib);
  auto theirs = [&](const Problem& q, const GemmOperands& o, CUstream s) {
    cublas_->gemm(q, o, s);
  };
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (DataType out : {DataType::bf16, DataType::f32}) {
      Problem p = make_problem(fp8_to(out), Op::T, Op::N, 2048, 1024, 7168);
      p.scaling = scaling;
      const Verifier verifier(*checker_, p, 1.0f, 0.0f, 17, stream_->get());
      const Verdict v = verifier.verify_problem(ours, stream_->get());
      const Verdict baseline = verifier.verify_problem(theirs, stream_->get());
      EXPECT_TRUE(v.ok) << p.describe() << ": " << v.message;
      EXPECT_TRUE(baseline.ok) << p.describe() << ": " << baseline.message;
      EXPECT_LE(v.max_error, 1.1 * baseline.max_error) << p.describe();
      std::cout << fmt::format("  {}: {} points, largest error ours {:.3g}, cuBLASLt {:.3g}\n",
                               p.describe(), v.points, v.max_error, baseline.max_error);
    }
}

// What the documentation rules out is refused before cuBLASLt is asked, with the reason; and a
// scaled problem without its scales is a caller's mistake.
TEST_F(CublasLtFp8, RefusesWhatCublasLtCannotRunWithTheReason) {
  const ProblemData data(make_problem(fp8_to(DataType::bf16), Op::T, Op::N, 64, 64, 64), *checker_,
                         3, stream_->get());
  const DeviceBuffer scales(64 * 4);
  GemmOperands ops = data.operands(1.0f, 0.0f);
  ops.scale_a = ops.scale_b = scales.ptr();
  auto refusal = [&](const Problem& p) -> std::string {
    try {
      cublas_->gemm(p, ops, stream_->get());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::unsupported) << p.describe() << ": " << e.what();
      std::cout << "  refused  " << p.describe() << ": " << e.what() << "\n";
      return e.what();
    }
    ADD_FAILURE() << p.describe() << " ran";
    return {};
  };
  Problem p =
      make_problem(DataTypes{DataType::e5m2, DataType::e5m2, DataType::bf16, DataType::bf16}, Op::T,
                   Op::N, 64, 64, 64);
  p.scaling = Scaling::tensor;
  EXPECT_NE(refusal(p).find("e5m2*e5m2"), std::string::npos);
  p = make_problem(fp8_to(DataType::bf16), Op::N, Op::N, 64, 64, 64);
  p.scaling = Scaling::tensor;
  EXPECT_NE(refusal(p).find("tn"), std::string::npos);

  p = make_problem(fp8_to(DataType::bf16), Op::T, Op::N, 64, 64, 64);
  p.scaling = Scaling::tensor;
  const GemmOperands no_scales = data.operands(1.0f, 0.0f);
  try {
    cublas_->prepare(p, no_scales, stream_->get());
    ADD_FAILURE() << "a scaled problem without scales was prepared";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
}

}  // namespace
}  // namespace gemmtune
