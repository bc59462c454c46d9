// The Hopper family's grouped kernels (mixture-of-experts layers) are right against the fp64
// reference of each group: in both layouts they take (op(B) = N) and both 16-bit types, on groups
// whose columns end in the middle of tiles, empty groups, one group holding nearly all the tokens,
// one group, both beta paths, for each tile orientation and cluster the space allows; a CUDA graph
// captured once is right when replayed with other routings (the group ends are read on the device).
// And the defaults' speed on the MoE suite's shapes, printed for the record (the bench compares
// with cuBLAS).
#include <cstring>
#include <string>
#include <vector>

#include "gpu_grouped.hpp"

namespace gemmtune {
namespace {

using test::grouped_problem;

class WgmmaGrouped : public test::GroupedGpuTest {
 protected:
  void SetUp() override { set_up_for("wgmma_sm90"); }
};

class WgmmaGroupedLayouts : public WgmmaGrouped,
                            public ::testing::WithParamInterface<test::TypeAndLayout> {};

TEST_P(WgmmaGroupedLayouts, EveryTileAndRouting) {
  const auto& [type, layout] = GetParam();
  const bool wide = type == DataType::bf16 && layout == "tn";
  EXPECT_GE(check_every_shape(type, layout, wide ? 10 : 2), 20);
}

INSTANTIATE_TEST_SUITE_P(TypesAndLayouts, WgmmaGroupedLayouts,
                         ::testing::Combine(::testing::Values(DataType::bf16, DataType::f16),
                                            ::testing::Values("tn", "nn")),
                         test::type_and_layout);

// Skewed routings: one group with ten times the mean, and all tokens but one in the last group.
TEST_F(WgmmaGrouped, SkewedRoutings) {
  expect_right_on_skewed_routings(grouped_problem(DataType::bf16, "tn", 768, 24, 512, 32));
}

// A graph captured once, replayed with three routings written into the group ends between
// replays: each replay is right for its routing.
TEST_F(WgmmaGrouped, AGraphReplaysOtherRoutings) {
  Problem p = grouped_problem(DataType::bf16, "tn", 512, 16, 384, 24);
  expect_graph_replays_right(p);
  p.group_layout = GroupLayout::masked;
  expect_graph_replays_right(p);
}

// The masked layout: every column past a group's count stays as it was.
TEST_F(WgmmaGrouped, MaskedLayout) {
  EXPECT_GE(check_masked_shapes(3), 40);
}

// The defaults on the MoE suite's shapes: TFLOP/s with tokens routed uniformly and skewed (one
// group ten times the mean), and for decode the share of the HBM bandwidth the weights stream at
// with the uniform routing (L2 flushed between runs).
TEST_F(WgmmaGrouped, DefaultsOnTheSuite) {
  print_defaults_on_the_suite();
}

}  // namespace
}  // namespace gemmtune
