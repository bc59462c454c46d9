// The Hopper family is right for all four layouts, both schedules, with and without clusters,
// on shapes that are no multiple of any tile, K < BK, K = 1, M or N = 1, both beta paths (NaN in
// C when beta == 0), output poisoned first, and leading dimensions TMA cannot use in place.
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  int64_t bm, bn, stages, wg, ws, cluster, epilogue;
};

// One configuration per code path: schedules, consumer warpgroups 1-3, one or two 64-row blocks
// per warpgroup, wgmma N 128 and 256, clusters along M and along N, both epilogues (the TMA store
// runs when beta == 0 and C is aligned, the register path otherwise).
const Point kPoints[] = {
    {256, 128, 3, 2, 1, 12, 1},  // the known good point
    {128, 256, 3, 2, 1, 21, 0},  // two blocks per warpgroup, cluster along M
    {128, 128, 4, 1, 1, 11, 1},  // one consumer warpgroup
    {128, 192, 3, 3, 1, 11, 0},  // three consumer warpgroups
    {128, 128, 4, 2, 0, 11, 0},  // multistage
    {256, 128, 3, 2, 0, 11, 0},  // multistage, wgmma N 256
};

KernelConfig config_of(const Point& pt, const Problem& p) {
  return KernelConfig{"wgmma_sm90", p.dtype, p.op_a, p.op_b,
                      {{"BM", pt.bm}, {"BN", pt.bn}, {"STAGES", pt.stages}, {"WG", pt.wg}, {"WS", pt.ws},
                       {"CLUSTER", pt.cluster}, {"RASTER", p.m >= p.n ? 0 : 1},
                       {"GROUP", pt.cluster == 21 ? 3 : 8}, {"EPILOGUE", pt.epilogue}}};
}

class WgmmaCorrectness : public test::GpuTest, public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!find_family("wgmma_sm90").unsupported_reason(make_problem(DType::bf16, Op::N, Op::N, 64, 64, 64), device_.arch).empty())
      GTEST_SKIP() << "the wgmma family needs sm_90a; this GPU is " << device_.arch.name();
  }
};

TEST_P(WgmmaCorrectness, OddShapesBetaAndLeadingDimensions) {
  const auto [dtype_name, layout] = GetParam();
  const DType dtype = parse_dtype(dtype_name);
  const int64_t shapes[][3] = {{1, 1, 1},     {300, 200, 100}, {257, 129, 40}, {129, 257, 1},
                               {1, 333, 200}, {333, 1, 200},   {520, 300, 700}};
  int checked = 0;
  for (const auto& s : shapes) {
    for (int64_t extra_ld : {0, 3}) {  // 3: odd leading dimensions, packed before TMA
      Problem p = make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
      p.lda += extra_ld;
      p.ldb += extra_ld;
      p.ldc += extra_ld;
      p.align = alignment_class(p.dtype, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
      for (const Point& pt : kPoints) {
        const KernelConfig config = config_of(pt, p);
        const ReadyKernel k = prepare_kernel(compiler_, config, p, device_.arch);
        ASSERT_GT(k.loaded->occupancy(k.geometry), 0) << k.compiled.name;
        for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
          const Verdict v = check(k, p, alpha, beta);
          EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " alpha=" << alpha << " beta=" << beta
                            << ": " << v.message;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 7 * 2 * 6 * 2);
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndTypes, WgmmaCorrectness,
                         ::testing::Combine(::testing::Values("bf16", "f16"),
                                            ::testing::Values("nn", "nt", "tn", "tt")));

// A small problem per schedule, for compute-sanitizer (tools/gpu-check.sh runs it under memcheck
// and racecheck).
class WgmmaSanitizer : public WgmmaCorrectness {};

TEST_P(WgmmaSanitizer, SmallShapePerSchedule) {
  const auto [dtype_name, layout] = GetParam();
  Problem p = make_problem(parse_dtype(dtype_name), parse_op(layout[0]), parse_op(layout[1]), 300, 260, 130);
  for (const Point& pt : {kPoints[0], kPoints[1], kPoints[4]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    const Verdict v = check(k, p, 1.0f, 0.0f);  // beta == 0: the TMA-store epilogue where configured
    EXPECT_TRUE(v.ok) << k.compiled.name << ": " << v.message;
  }
  // Odd leading dimensions: the operands are packed (vector loads near the buffers' ends).
  p.lda += 1;
  p.ldb += 1;
  p.ldc += 1;
  p.align = 2;
  const ReadyKernel k = prepare_kernel(compiler_, config_of(kPoints[0], p), p, device_.arch);
  const Verdict v = check(k, p, 1.0f, 0.5f);
  EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << ": " << v.message;
}

INSTANTIATE_TEST_SUITE_P(Bf16, WgmmaSanitizer, ::testing::Combine(::testing::Values("bf16"), ::testing::Values("nn", "tn")));

}  // namespace
}  // namespace gemmtune
