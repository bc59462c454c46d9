// The Ampere tensor-core family is right for all four layouts and both 16-bit types, on shapes
// that are no multiple of any tile, K < BK, K = 1, M or N = 1, both beta paths (NaN in C when
// beta == 0), output poisoned first; with leading dimensions and base addresses of every
// alignment class (16-byte cp.async, 8- and 4-byte cp.async, plain loads). Runs on any GPU from
// sm_80 on, Hopper included (compiled for the device's own architecture). Split-K: right on the
// same shapes (beta applied once), and bitwise the same C run after run. And the library,
// restricted to this family, serves calls end to end.
#include "gemmtune/runtime/driver.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  int64_t bm, bn, bk, wm, wn, stages, splits = 1;
};

// One configuration per code path: 4 and 8 warps, warp tiles 32 and 64 wide on both sides,
// BK 32 and 64 (64- and 128-byte rows of K-major tiles), 2 to 5 stages, 32-wide tiles (the
// swizzle of 64-byte rows on the MN side), and 256-wide MN-major tiles copied by 128 threads
// (rows 4 apart: two swizzle phases).
const Point kPoints[] = {
    {128, 128, 32, 64, 64, 4},  // the large-problem default
    {64, 64, 32, 32, 32, 3},    // the small-problem default
    {128, 32, 64, 32, 32, 3},   // the few-columns default
    {128, 256, 32, 64, 64, 3},  // 8 warps
    {256, 128, 64, 64, 64, 2},  // 8 warps, BK 64, 2 stages
    {256, 64, 32, 64, 64, 5},   // 128 threads copy 256-wide tiles, 5 stages
    {128, 128, 64, 32, 64, 4},  // 8 warps of 32x64
};

// Split-K: two parts and eight (more parts than k-tiles on short K: clamped), the largest warp
// tiles (the most partial sums per thread) and 8 warps.
const Point kSplitPoints[] = {
    {64, 64, 32, 32, 32, 3, 2},
    {64, 64, 32, 32, 32, 4, 8},
    {128, 128, 32, 64, 64, 4, 3},
    {128, 128, 64, 32, 64, 3, 6},
};

int64_t widest_vector(const Problem& p) {
  return std::min(8, std::max(1, p.align / 2));
}

KernelConfig config_of(const Point& pt, const Problem& p) {
  return KernelConfig{"mma_sm80",
                      p.types,
                      p.scaling,
                      p.op_a,
                      p.op_b,
                      {{"BM", pt.bm},
                       {"BN", pt.bn},
                       {"BK", pt.bk},
                       {"WM", pt.wm},
                       {"WN", pt.wn},
                       {"STAGES", pt.stages},
                       {"GROUP", 8},
                       {"VEC", widest_vector(p)},
                       {"SPLITS", pt.splits}}};
}

// Leading dimensions rounded up to 8 values (16 bytes), plus `extra`: 0 keeps the problem 16-byte
// aligned, 4, 2 and 1 make it 8-, 4- and 2-byte aligned.
Problem with_leading_dimensions(Problem p, int64_t extra) {
  auto ld = [&](int64_t rows) { return (rows + 7) / 8 * 8 + extra; };
  p.lda = ld(p.rows_a());
  p.ldb = ld(p.rows_b());
  p.ldc = ld(p.m);
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  return p;
}

const int64_t kShapes[][3] = {{1, 1, 1},     {300, 200, 100}, {257, 129, 40}, {129, 257, 1},
                              {1, 333, 200}, {333, 1, 200},   {520, 300, 700}};

class Mma80Test : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    const std::string why =
        find_family("mma_sm80")
            .unsupported_reason(make_problem(DType::bf16, Op::N, Op::N, 64, 64, 64), device_.arch);
    if (!why.empty()) GTEST_SKIP() << why << "; this GPU is " << device_.arch.name();
  }

  void expect_right(const Point& pt, const Problem& p) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    ASSERT_GT(k.loaded->occupancy(k.plan), 0) << k.compiled.name;
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
      const Verdict v = check(k, p, alpha, beta);
      EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " alpha=" << alpha
                        << " beta=" << beta << ": " << v.message;
      ++checked_;
    }
  }

  int checked_ = 0;
};

class Mma80Correctness
    : public Mma80Test,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
 protected:
  Problem problem(const int64_t (&s)[3]) const {
    const auto& [dtype, layout] = GetParam();
    return make_problem(parse_data_type(dtype), parse_op(layout[0]), parse_op(layout[1]), s[0],
                        s[1], s[2]);
  }
};

// Every configuration on every shape, 16-byte aligned (16-byte cp.async, zero-filled tails).
TEST_P(Mma80Correctness, OddShapesAndBetaForEveryConfiguration) {
  for (const auto& s : kShapes)
    for (const Point& pt : kPoints) expect_right(pt, with_leading_dimensions(problem(s), 0));
  EXPECT_EQ(checked_, 7 * 7 * 2);
}

// Leading dimensions of every alignment class, tight ones included (odd sizes give odd ld):
// 8- and 4-byte cp.async and plain loads, and 2-byte stores where C's columns are odd.
TEST_P(Mma80Correctness, EveryAlignmentOfLeadingDimensions) {
  for (const auto& s : kShapes) {
    for (int64_t extra : {4, 2, 1})
      for (const Point& pt : {kPoints[0], kPoints[2]})
        expect_right(pt, with_leading_dimensions(problem(s), extra));
    expect_right(kPoints[1], problem(s));  // tight
  }
  EXPECT_EQ(checked_, 7 * (3 * 2 + 1) * 2);
}

// Split-K on every shape: tails, K = 1 and K < BK (one part), beta != 0 applied once, NaN in C
// when beta == 0; and unaligned leading dimensions (narrow copies) for two of them.
TEST_P(Mma80Correctness, SplitKOnOddShapesAndBeta) {
  for (const auto& s : kShapes)
    for (const Point& pt : kSplitPoints) expect_right(pt, with_leading_dimensions(problem(s), 0));
  for (const Point& pt : {kSplitPoints[0], kSplitPoints[2]})
    expect_right(pt, with_leading_dimensions(problem(kShapes[6]), 1));
  EXPECT_EQ(checked_, (7 * 4 + 2) * 2);
}

// The parts of a tile are added in part order whichever finishes last: the same inputs give
// bitwise the same C, run after run. K is long, so that every tile has many parts.
TEST_P(Mma80Correctness, SplitKIsBitwiseDeterministic) {
  const Problem p = with_leading_dimensions(problem({500, 300, 7000}), 0);
  const ProblemData data(p, *checker_, 11, stream_->get());
  for (const Point& pt : {kSplitPoints[1], kSplitPoints[2]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    ASSERT_GT(k.plan.counter_bytes, 0u) << k.compiled.name << ": not split";
    const Verdict v = check(k, p, 1.0f, 0.5f);
    ASSERT_TRUE(v.ok) << k.compiled.name << ": " << v.message;
    EXPECT_TRUE(same_bits_every_run(k, p, data)) << k.compiled.name;
  }
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndTypes, Mma80Correctness,
                         ::testing::Combine(::testing::Values("bf16", "f16"),
                                            ::testing::Values("nn", "nt", "tn", "tt")));

// Base addresses off 16-byte alignment: the operands are copied to offset buffers around each
// run (the checker's own buffers are aligned), and the family must pick narrower copies.
class Mma80Unaligned : public Mma80Test, public ::testing::WithParamInterface<std::string> {};

TEST_P(Mma80Unaligned, BaseAddressesOfEveryAlignmentClass) {
  const std::string layout = GetParam();
  const Problem base = with_leading_dimensions(
      make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 270, 190, 150), 0);
  const size_t a_bytes = size_t(base.lda * base.cols_a() * 2),
               b_bytes = size_t(base.ldb * base.cols_b() * 2),
               c_bytes = size_t(base.ldc * base.n * 2);
  const DeviceBuffer a(a_bytes + 16), b(b_bytes + 16), c(c_bytes + 16);
  // Offsets in bytes of A, B and C: 2-, 4- and 8-byte alignment classes, one operand at a time.
  const int offsets[][3] = {{2, 0, 0}, {0, 4, 0}, {0, 0, 8}, {6, 10, 14}};
  for (const auto& off : offsets) {
    Problem p = base;
    const CUdeviceptr pa = a.ptr() + off[0], pb = b.ptr() + off[1], pc = c.ptr() + off[2];
    p.align = alignment_class(p.types, reinterpret_cast<void*>(pa), reinterpret_cast<void*>(pb),
                              reinterpret_cast<void*>(pc), p.lda, p.ldb, p.ldc);
    const ReadyKernel k = prepare_kernel(compiler_, config_of(kPoints[0], p), p, device_.arch);
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{-1.0f, 0.25f}}) {
      const Verifier verifier(*checker_, p, alpha, beta, 9, stream_->get());
      const Verdict v = verifier.verify(
          [&](const Problem& q, const GemmOperands& ops, CUstream s) {
            GT_CU(cuMemcpyDtoDAsync(pa, ops.a, a_bytes, s));
            GT_CU(cuMemcpyDtoDAsync(pb, ops.b, b_bytes, s));
            GT_CU(cuMemcpyDtoDAsync(pc, ops.c, c_bytes, s));  // NaN when beta == 0
            k.run(k.family->plan(k.config, q, device_.arch), q,
                  GemmOperands{pa, pb, pc, ops.alpha, ops.beta}, s);
            GT_CU(cuMemcpyDtoDAsync(ops.c, pc, c_bytes, s));
          },
          stream_->get());
      EXPECT_TRUE(v.ok) << k.compiled.name << " with A+" << off[0] << " B+" << off[1] << " C+"
                        << off[2] << " bytes on " << p.describe() << " beta=" << beta << ": "
                        << v.message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, Mma80Unaligned, ::testing::Values("nn", "nt", "tn", "tt"));

// A small problem per code path, for compute-sanitizer (tools/gpu-check.sh runs it under memcheck
// and racecheck): 16-byte copies with tails in M, N and K, plain loads, K shorter than a stage.
class Mma80Sanitizer : public Mma80Test, public ::testing::WithParamInterface<std::string> {};

TEST_P(Mma80Sanitizer, SmallShapes) {
  const std::string layout = GetParam();
  const Problem p = with_leading_dimensions(
      make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 300, 260, 130), 0);
  for (const Point& pt : {kPoints[0], kPoints[3], kPoints[5]}) expect_right(pt, p);
  expect_right(kPoints[1], with_leading_dimensions(p, 1));
  expect_right(kPoints[2],
               with_leading_dimensions(make_problem(p.types, p.op_a, p.op_b, 77, 20, 9), 2));
  for (const Point& pt : kSplitPoints) expect_right(pt, p);
}

INSTANTIATE_TEST_SUITE_P(Bf16, Mma80Sanitizer, ::testing::Values("nn", "tn"));

// GEMMTUNE_FAMILIES=mma_sm80 / Options::families: the library serves bf16 and f16 calls with this
// family even where wgmma_sm90 would be chosen (on Hopper), right for every layout.
TEST_F(Mma80Test, LibraryRestrictedToTheFamilyServesCalls) {
  test::TempDir dir;
  Options options;
  options.db_path = (dir / "none.db").string();  // nothing tuned: the family's default
  options.cache_dir = (dir / "cache").string();
  options.families = "mma_sm80";
  Library lib(options);
  const Problem problems[] = {
      make_problem(DType::bf16, Op::T, Op::N, 1000, 700, 300),
      make_problem(DType::f16, Op::N, Op::T, 513, 64, 129),
      make_problem(DType::bf16, Op::N, Op::N, 4096, 16, 512),
      make_problem(DType::f16, Op::T, Op::T, 77, 1500, 65),
      make_problem(DType::bf16, Op::N, Op::N, 500, 300, 2000)};  // split-K default
  for (const Problem& p : problems) {
    const Selection sel = lib.select(p);
    EXPECT_EQ(sel.family, "mma_sm80") << p.describe();
    EXPECT_TRUE(sel.kernel.starts_with("gemm_mma80_")) << sel.kernel;
    if (p.k == 2000) {
      EXPECT_NE(sel.kernel.find("_splitk"), std::string::npos) << sel.kernel;
    }
    const Verdict verdict = check_library(lib, p, 0.5f, 0.0f);
    EXPECT_TRUE(verdict.ok) << sel.kernel << " on " << p.describe() << ": " << verdict.message;
  }
  // f32 has no tensor-core family: restricted to mma_sm80, the library says so.
  const Problem f32 = make_problem(DType::f32, Op::N, Op::N, 64, 64, 64);
  try {
    lib.select(f32);
    FAIL() << "no error for f32 restricted to mma_sm80";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::unsupported);
    EXPECT_NE(std::string(e.what()).find("GEMMTUNE_FAMILIES"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gemmtune
