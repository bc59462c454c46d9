// Sizes past 2^31: operands with more than 2^31 elements, a leading dimension past 2^31 and M at
// the 2^30 limit are computed right, through the library (every family's kernel, the packing
// kernel) and through the cuBLAS baseline, checked against the double-precision reference.
// Each case needs at most 13 GB of GPU memory; one that does not fit the free memory is skipped.
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/cublas.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct LargeCase {
  std::string name;
  Problem problem;
  float beta;
};

void PrintTo(const LargeCase& c, std::ostream* out) {
  *out << c.problem.describe() << " beta=" << c.beta;
}

// A problem with tight leading dimensions, then lda replaced when given.
Problem problem_of(DType dtype, Op op_a, int64_t m, int64_t n, int64_t k, int64_t lda = 0) {
  Problem p = make_problem(dtype, op_a, Op::N, m, n, k);
  if (lda) p.lda = lda;
  p.align =
      alignment_class(DataTypes::uniform(dtype), nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  return p;
}

int64_t elements_of_a(const Problem& p) {
  return p.lda * p.cols_a();
}

class LargeOperands : public test::GpuTest, public ::testing::WithParamInterface<LargeCase> {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    options_.db_path = (dir_ / "none.db").string();  // the built-in default kernels
    options_.cache_dir = (dir_ / "cache").string();
  }

  // The operands once (the check's second beta path runs on a smaller problem: checker.cpp),
  // and a packed copy of A when TMA cannot read it in place.
  static int64_t bytes_needed(const Problem& p) {
    const int64_t esize = element_bytes(p.types.a);
    return (elements_of_a(p) * 2 + p.ldb * p.cols_b() + 2 * p.ldc * p.n) * esize +
           (int64_t(1) << 30);
  }

  bool fits_in_free_memory(const Problem& p) {
    size_t free = 0, total = 0;
    GT_CU(cuMemGetInfo(&free, &total));
    return int64_t(free) > bytes_needed(p);
  }

  test::TempDir dir_;
  Options options_;
};

TEST_P(LargeOperands, LibraryResultIsRight) {
  const LargeCase& c = GetParam();
  const Problem& p = c.problem;
  if (families_for(p, device_.arch).empty())
    GTEST_SKIP() << "no family serves " << p.describe() << " here";
  if (!fits_in_free_memory(p))
    GTEST_SKIP() << p.describe() << " needs " << bytes_needed(p) / 1e9 << " GB";
  Library lib(options_);
  const Selection s = lib.select(p);
  const Verdict v = check_library(lib, p, 1.25f, c.beta, 17);
  EXPECT_TRUE(v.ok) << p.describe() << " with " << s.kernel << ": " << v.message;
  EXPECT_GT(v.points, 0);
  RecordProperty("kernel", s.kernel);
}

const std::vector<LargeCase> kCases = {
    // A holds 2.46e9 bf16 elements, read by TMA.
    {"bf16_nn_A_past_2to31", problem_of(DType::bf16, Op::N, 8192, 8, 300000), 0.5f},
    // The same, transposed and with an odd lda: the packing kernel copies all of A first.
    {"bf16_tn_packed_A_past_2to31", problem_of(DType::bf16, Op::T, 8192, 8, 300000, 300001), 0.0f},
    // f32 (SIMT): A holds 2.21e9 elements, read with 128-bit loads, then transposed and unaligned.
    {"f32_nn_A_past_2to31", problem_of(DType::f32, Op::N, 8192, 8, 270000), 0.5f},
    {"f32_tn_unaligned_A_past_2to31", problem_of(DType::f32, Op::T, 8192, 8, 270000, 270001), 0.0f},
    // M at the limit: C (and A) hold 2^31 elements; TMA store epilogue (beta = 0), B packed.
    {"bf16_nn_M_at_2to30", problem_of(DType::bf16, Op::N, kMaxDimension, 2, 2), 0.0f},
    {"f32_nn_M_at_2to30", problem_of(DType::f32, Op::N, kMaxDimension, 1, 1), 0.5f},
    // A leading dimension past 2^31 (64-bit in the kernel arguments and in the tensor map).
    {"bf16_nn_lda_past_2to31", problem_of(DType::bf16, Op::N, 64, 64, 2, (int64_t(1) << 31) + 64),
     0.0f},
};

INSTANTIATE_TEST_SUITE_P(Sizes, LargeOperands, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<LargeCase>& param_info) {
                           return param_info.param.name;
                         });

// The baseline must not cut a leading dimension past 2^31 to int: it uses the 64-bit API, or
// says it cannot.
TEST_F(LargeOperands, CublasBaselineHandlesALeadingDimensionPast2To31) {
  const Problem p = problem_of(DType::bf16, Op::N, 64, 64, 2, (int64_t(1) << 31) + 64);
  if (!fits_in_free_memory(p))
    GTEST_SKIP() << p.describe() << " needs " << bytes_needed(p) / 1e9 << " GB";
  const auto cublas = Cublas::load();
  if (!cublas) GTEST_SKIP() << "no cuBLAS: " << Cublas::why_not();
  if (!cublas->supports(p)) {
    EXPECT_THROW(cublas->gemm(p, {}, stream_->get()), Error)
        << "an unsupported problem must be refused";
    GTEST_SKIP() << cublas->version()
                 << " has no 64-bit API: the baseline is skipped for such problems";
  }
  const Verifier verifier(*checker_, p, 1.25f, 0.0f, 17, stream_->get());
  const Verdict v = verifier.verify(
      [&](const Problem& q, const GemmOperands& o, CUstream s) { cublas->gemm(q, o, s); },
      stream_->get());
  EXPECT_TRUE(v.ok) << cublas->version() << " on " << p.describe() << ": " << v.message;
}

}  // namespace
}  // namespace gemmtune
