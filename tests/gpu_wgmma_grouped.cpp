// The Hopper family's grouped kernels (mixture-of-experts layers) are right against the fp64
// reference of each group: in both layouts they take (op(B) = N) and both 16-bit types, on groups
// whose columns end in the middle of tiles, empty groups, one group holding nearly all the tokens,
// one group, both beta paths, for each tile orientation and cluster the space allows; a CUDA graph
// captured once is right when replayed with other routings (the group ends are read on the device).
// Float8 experts with each scaling, and a kernel reading another group's scales caught.
// And the defaults' speed on the MoE suite's shapes, printed for the record (the bench compares
// with cuBLAS).
#include <cstring>
#include <string>
#include <vector>

#include "gpu_grouped.hpp"

namespace gemmtune {
namespace {

using test::grouped_problem;

// G experts of e4m3 weights (A) and tokens (B), bf16 out, with the scaling: layout tn.
Problem float8_experts(Scaling scaling, int64_t m, int64_t mean, int64_t k, int64_t groups) {
  Problem p = grouped_problem(DataType::bf16, "tn", m, mean, k, groups);
  p.types = DataTypes{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16};
  p.scaling = scaling;
  return p;
}

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

// Float8 experts (DeepSeek-V3's MoE takes block scales; row and tensor too): group g's scales of
// A are its own, after those of the groups before it (scale_layout.h), B's span all tokens. The
// 16-bit tests' shapes (K and M off 128, groups ending mid-tile, empty groups), both betas, masked
// groups, skewed routings and a graph replayed with other routings.
TEST_F(WgmmaGrouped, Float8Experts) {
  int checked = 0;
  for (Scaling scaling : {Scaling::block, Scaling::row, Scaling::tensor}) {
    auto make = [&](int64_t m, int64_t mean, int64_t k, int64_t groups) {
      return float8_experts(scaling, m, mean, k, groups);
    };
    const std::string what = "e4m3 " + std::string(to_string(scaling));
    checked += check_every_shape(make, scaling == Scaling::block ? 6 : 2, what);
  }
  EXPECT_GE(checked, 60);
  double worst = 0;
  Problem masked = float8_experts(Scaling::block, 520, 8, 1000, 16);
  masked.group_layout = GroupLayout::masked;
  EXPECT_GE(check_points(masked, 3, worst), 6);
  Problem p = float8_experts(Scaling::block, 768, 24, 512, 32);
  expect_right_on_skewed_routings(p);
  expect_graph_replays_right(p);
}

// A kernel that read every group's scales of A from the first group would be caught: the kernel
// is handed a copy of the scales whose groups all hold the first group's.
TEST_F(WgmmaGrouped, Float8ScalesOfAnotherGroupAreCaught) {
  for (Scaling scaling : {Scaling::block, Scaling::row, Scaling::tensor}) {
    const Problem p = float8_experts(scaling, 384, 64, 512, 6);
    const Verifier verifier(*checker_, p, 1.0f, 0.0f, 9, stream_->get());
    const ReadyKernel k =
        prepare_kernel(compiler_, family().default_config(p, device_.arch), p, device_.arch);
    ASSERT_TRUE(check(k, verifier).ok) << k.compiled.name;
    std::vector<DeviceBuffer> copies;  // kept until the kernels that read them are done
    const Verdict v = verifier.verify(
        [&](const Problem& q, GemmOperands ops, CUstream s) {
          const size_t group_bytes = size_t(scale_shape_a(q).count() / q.groups) * sizeof(float);
          const DeviceBuffer& first_only = copies.emplace_back(group_bytes * size_t(q.groups));
          for (int64_t g = 0; g < q.groups; ++g)
            GT_CU(
                cuMemcpyDtoDAsync(first_only.ptr() + g * group_bytes, ops.scale_a, group_bytes, s));
          ops.scale_a = first_only.ptr();
          const LaunchPlan plan = k.family->plan(k.config, q, device_.arch);
          workspaces_.provide(s, plan, ops);
          k.run(plan, q, ops, s);
        },
        stream_->get(), true);
    EXPECT_FALSE(v.ok) << "the first group's scales for all passed, " << to_string(scaling);
    std::printf("%s scales of the first group for all: %lld of %lld points out of tolerance\n",
                std::string(to_string(scaling)).c_str(), (long long)v.bad, (long long)v.points);
  }
}

// The defaults on the MoE suite's shapes: TFLOP/s with tokens routed uniformly and skewed (one
// group ten times the mean), and for decode the share of the HBM bandwidth the weights stream at
// with the uniform routing (L2 flushed between runs).
TEST_F(WgmmaGrouped, DefaultsOnTheSuite) {
  print_defaults_on_the_suite();
}

}  // namespace
}  // namespace gemmtune
