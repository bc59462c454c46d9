// The Ampere family's grouped kernels (mixture-of-experts layers) are right against the fp64
// reference of each group: all four layouts (op(B) = T with plain loads: a group starts at any
// column), both 16-bit types, every value of every parameter of the space, on groups whose
// columns end in the middle of tiles, empty groups, groups smaller than a tile, one group holding
// nearly all the tokens, one group, more groups than tokens, both beta paths; nothing is written
// past the last group's end, even where every group is empty; a CUDA graph captured once is
// right when replayed with other routings (the group ends are read on the device). Runs on any
// GPU from sm_80 on, Hopper included. And the defaults' speed on the MoE suite's shapes, printed
// for the record beside wgmma_sm90's (gpu_wgmma_grouped).
#include <cstring>
#include <string>
#include <vector>

#include "gpu_grouped.hpp"

namespace gemmtune {
namespace {

using test::grouped_problem;

class Mma80Grouped : public test::GroupedGpuTest {
 protected:
  void SetUp() override { set_up_for("mma_sm80"); }
};

class Mma80GroupedLayouts : public Mma80Grouped,
                            public ::testing::WithParamInterface<test::TypeAndLayout> {};

TEST_P(Mma80GroupedLayouts, EveryTileAndRouting) {
  const auto& [type, layout] = GetParam();
  const bool wide = type == DataType::bf16 && layout == "tn";
  EXPECT_GE(check_every_shape(type, layout, wide ? 16 : 3), 20);
}

INSTANTIATE_TEST_SUITE_P(TypesAndLayouts, Mma80GroupedLayouts,
                         ::testing::Combine(::testing::Values(DataType::bf16, DataType::f16),
                                            ::testing::Values("tn", "nn", "nt", "tt")),
                         test::type_and_layout);

// Skewed routings: one group with ten times the mean, and all tokens but one in the last group;
// op(B) = N and T.
TEST_F(Mma80Grouped, SkewedRoutings) {
  for (const char* layout : {"tn", "nt"})
    expect_right_on_skewed_routings(grouped_problem(DataType::bf16, layout, 768, 24, 512, 32));
}

// The last group ends before N: columns up to its end are right, and the ones past it keep what
// C held (NaN with beta = 0, C's values otherwise), for every layout, both types and every tile
// width; with an empty first group, a group of one column, groups smaller than a tile and ends
// mid-tile; and where every group is empty, nothing at all is written.
TEST_F(Mma80Grouped, NothingPastTheLastGroupIsWritten) {
  const std::vector<int32_t> routings[] = {{0, 13, 13, 100, 101, 170}, {0, 0, 0, 0, 0, 0}};
  int checked = 0;
  for (const DataType type : {DataType::bf16, DataType::f16})
    for (const char* layout : {"tn", "nn", "nt", "tt"})
      for (const float beta : {0.0f, 0.75f}) {
        Problem p = grouped_problem(type, layout, 300, 40, 200, 6);
        p.reads_c = beta != 0.0f;
        const bool wide = type == DataType::bf16 && std::string(layout) == "tn";
        ProblemData data(p, *checker_, 21, stream_->get());
        for (const KernelConfig& c :
             test::grouped_points(family(), p, device_.arch, wide ? 16 : 1)) {
          const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
          for (const auto& ends : routings) {
            write_ends(data, ends);
            const int64_t last = ends.back();
            const std::string what = k.compiled.name + " beta=" + std::to_string(beta) +
                                     " last end " + std::to_string(last);
            const Verdict v = check_all(data, runner(k, data, beta), beta, last);
            EXPECT_TRUE(v.ok) << what << ": " << v.bad << " of " << v.points << " wrong";
            // Columns [last, n) as they were: NaN (beta = 0), or C's values.
            const size_t column = size_t(p.ldc) * 2, past = size_t(p.n - last) * column;
            if (beta == 0.0f) {
              EXPECT_EQ(checker_->count_nonfinite(data.c.ptr() + last * column, p.ldc, p.m,
                                                  p.n - last, p.types.c, stream_->get()),
                        p.m * (p.n - last))
                  << what << ": a column past the last group was written";
            } else {
              std::vector<char> out(past), before(past);
              GT_CU(cuMemcpyDtoH(out.data(), data.c.ptr() + last * column, past));
              GT_CU(cuMemcpyDtoH(before.data(), data.c_init.ptr() + last * column, past));
              EXPECT_EQ(std::memcmp(out.data(), before.data(), past), 0)
                  << what << ": a column past the last group was written";
            }
            ++checked;
          }
        }
      }
  EXPECT_GE(checked, 2 * 2 * 4 * 2);
}

// A graph captured once, replayed with three routings written into the group ends between
// replays: each replay is right for its routing.
TEST_F(Mma80Grouped, AGraphReplaysOtherRoutings) {
  for (const char* layout : {"tn", "nn"})
    for (GroupLayout groups : {GroupLayout::contiguous, GroupLayout::masked}) {
      Problem p = grouped_problem(DataType::bf16, layout, 512, 16, 384, 24);
      p.group_layout = groups;
      expect_graph_replays_right(p);
    }
}

// The masked layout: every column past a group's count stays as it was.
TEST_F(Mma80Grouped, MaskedLayout) {
  EXPECT_GE(check_masked_shapes(2), 32);
}

// The defaults on the MoE suite's shapes (the numbers of wgmma_sm90's beside them on Hopper:
// gpu_wgmma_grouped's DefaultsOnTheSuite).
TEST_F(Mma80Grouped, DefaultsOnTheSuite) {
  print_defaults_on_the_suite();
}

}  // namespace
}  // namespace gemmtune
