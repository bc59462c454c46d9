// Every configuration of a reduced SIMT space is right on odd shapes, all four layouts,
// ld > rows, beta != 0 and beta == 0 with NaN in C, output poisoned first.
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

// One configuration per code path: BK 8/16, one or two stages, thread tiles 4..16, warp
// shapes 4x8 and 8x4 lanes.
std::vector<KernelConfig> reduced_space(const Problem& p, const ArchInfo& arch) {
  const std::vector<std::map<std::string, int64_t>> points = {
      {{"BM", 128},
       {"BN", 128},
       {"BK", 8},
       {"WM", 64},
       {"WN", 32},
       {"TM", 8},
       {"TN", 8},
       {"STAGES", 2}},
      {{"BM", 64},
       {"BN", 64},
       {"BK", 8},
       {"WM", 32},
       {"WN", 32},
       {"TM", 4},
       {"TN", 8},
       {"STAGES", 1}},
      {{"BM", 64},
       {"BN", 128},
       {"BK", 16},
       {"WM", 32},
       {"WN", 64},
       {"TM", 8},
       {"TN", 8},
       {"STAGES", 2}},
      {{"BM", 256},
       {"BN", 128},
       {"BK", 8},
       {"WM", 64},
       {"WN", 64},
       {"TM", 16},
       {"TN", 8},
       {"STAGES", 2}},
      {{"BM", 128},
       {"BN", 64},
       {"BK", 16},
       {"WM", 32},
       {"WN", 32},
       {"TM", 8},
       {"TN", 4},
       {"STAGES", 1}},
  };
  const Family& simt = find_family("simt");
  std::vector<KernelConfig> out;
  for (const auto& point : points) {
    KernelConfig c{"simt", p.types, p.scaling, p.op_a, p.op_b, point};
    c.params["VEC"] = std::min(4, p.align / 4);
    EXPECT_EQ(simt.why_invalid(c, p, arch), "") << simt.kernel_name(c);
    out.push_back(c);
  }
  return out;
}

class SimtCorrectness : public test::GpuTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(SimtCorrectness, OddShapesLayoutsLeadingDimensionsAndBeta) {
  const std::string layout = GetParam();
  const Op op_a = parse_op(layout[0]), op_b = parse_op(layout[1]);
  const int64_t shapes[][3] = {
      {1, 1, 1}, {17, 33, 65}, {1000, 1, 999}, {257, 255, 513}, {128, 128, 128}};
  for (const auto& s : shapes) {
    for (int64_t extra_ld : {0, 5, 8}) {
      const Problem p =
          test::with_longer_lds(make_problem(DType::f32, op_a, op_b, s[0], s[1], s[2]), extra_ld);
      for (const auto& config : reduced_space(p, device_.arch)) {
        const ReadyKernel k = prepare_kernel(compiler_, config, p, device_.arch);
        for (auto [alpha, beta] : {std::pair{1.5f, 0.0f}, std::pair{-0.5f, 2.0f}}) {
          const Verdict v = check(k, p, alpha, beta);
          EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " alpha=" << alpha
                            << " beta=" << beta << ": " << v.message;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLayouts, SimtCorrectness, ::testing::Values("nn", "nt", "tn", "tt"));

}  // namespace
}  // namespace gemmtune
