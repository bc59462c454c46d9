// The Hopper family's grouped kernels (mixture-of-experts layers) are right against the fp64
// reference of each group: in both layouts they take (op(B) = N) and both 16-bit types, on groups
// whose columns end in the middle of tiles, empty groups, one group holding nearly all the tokens,
// one group, both beta paths, for each tile orientation and cluster the space allows; a CUDA graph
// captured once is right when replayed with other routings (the group ends are read on the device).
// And the defaults' speed on the MoE suite's shapes, printed for the record (the bench compares
// with cuBLAS).
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "family_samples.hpp"
#include "gemmtune/generator/cost_model.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

Problem grouped_problem(DataType type, const char* layout, int64_t m, int64_t mean, int64_t k,
                        int64_t groups) {
  Problem p = make_problem(type, parse_op(layout[0]), parse_op(layout[1]), m, mean * groups, k);
  p.groups = groups;
  return p;
}

// The family's default, and the valid points that take every value of every parameter (at most
// `most` of them), for the problem.
std::vector<KernelConfig> points_of(const Family& family, const Problem& p, const ArchInfo& arch,
                                    size_t most) {
  std::vector<KernelConfig> out = {family.default_config(p, arch)};
  for (const KernelConfig& c : test::covering_points(family.prune(p, arch).valid))
    if (out.size() < most && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

class WgmmaGrouped : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!why_unsupported(family(), grouped_problem(DataType::bf16, "tn", 64, 8, 64, 2),
                         device_.arch)
             .empty())
      GTEST_SKIP() << "the grouped kernels need sm_90a; this GPU is " << device_.arch.name();
  }
  static const Family& family() { return find_family("wgmma_sm90"); }

  // Checks every point of the problem with both beta paths (the verifier's problem itself with
  // tokens routed uniformly, a smaller one routed raggedly: empty groups, ends mid-tile).
  int check_points(Problem p, size_t most, double& worst) {
    int checked = 0;
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
      p.reads_c = beta != 0.0f;
      const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
      for (const KernelConfig& c : points_of(family(), p, device_.arch, most)) {
        const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
        std::printf("checking %s on %s beta=%g\n", k.compiled.name.c_str(), p.describe().c_str(),
                    beta);
        std::fflush(stdout);  // a kernel that faults is the last one named
        const Verdict v = check(k, verifier);
        EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " alpha=" << alpha
                          << " beta=" << beta << ": " << v.message;
        worst = std::max(worst, v.max_error);
        ++checked;
      }
    }
    return checked;
  }

  // The kernel's C on `data` against the reference at every element.
  Verdict check_all(const ProblemData& data, const std::function<void(CUstream)>& run) {
    const Problem& p = data.problem;
    data.reset_c(*checker_, 0.0f, stream_->get());
    run(stream_->get());
    CheckArgs a = check_args(data, 1.0f, 0.0f);
    a.points = int(p.m * p.n);
    DeviceBuffer ref(size_t(a.points) * sizeof(double)), scale(size_t(a.points) * sizeof(double));
    a.ref = ref.ptr();
    a.scale = scale.ptr();
    checker_->reference(a, stream_->get());
    return checker_->compare(a, stream_->get());
  }

  void replay_routings(const Problem& p);
};

class WgmmaGroupedLayouts
    : public WgmmaGrouped,
      public ::testing::WithParamInterface<std::tuple<DataType, std::string>> {};

TEST_P(WgmmaGroupedLayouts, EveryTileAndRouting) {
  const auto& [type, layout] = GetParam();
  struct Shape {
    int64_t m, mean, k, groups;
  };
  // Decode (a few tokens an expert), prefill, odd sizes, one group, more groups than tokens.
  const Shape shapes[] = {{520, 3, 1000, 16},
                          {1024, 200, 512, 4},
                          {300, 41, 200, 7},
                          {257, 129, 40, 1},
                          {384, 1, 256, 40}};
  const bool wide = type == DataType::bf16 && layout == "tn";
  int checked = 0;
  double worst = 0;
  for (const Shape& s : shapes) {
    const Problem p = grouped_problem(type, layout.c_str(), s.m, s.mean, s.k, s.groups);
    checked += check_points(p, wide ? 10 : 2, worst);
  }
  std::printf("grouped %s %s: %d kernel runs checked, largest normalized error %.3g\n",
              std::string(to_string(type)).c_str(), layout.c_str(), checked, worst);
  EXPECT_GE(checked, 20);
}

INSTANTIATE_TEST_SUITE_P(TypesAndLayouts, WgmmaGroupedLayouts,
                         ::testing::Combine(::testing::Values(DataType::bf16, DataType::f16),
                                            ::testing::Values("tn", "nn")),
                         [](const auto& test) {
                           return std::string(to_string(std::get<0>(test.param))) + "_" +
                                  std::get<1>(test.param);
                         });

// The masked layout (DeepGEMM's): G slots of `capacity` tokens, each with a count in device
// memory; the columns past a count stay as they were (the verifier checks them too).
TEST_F(WgmmaGrouped, MaskedLayout) {
  struct Shape {
    int64_t m, capacity, k, groups;
  };
  const Shape shapes[] = {
      {520, 8, 1000, 16}, {1024, 200, 512, 4}, {300, 41, 200, 7}, {384, 1, 256, 3}};
  int checked = 0;
  double worst = 0;
  for (DataType type : {DataType::bf16, DataType::f16})
    for (const char* layout : {"tn", "nn"})
      for (const Shape& s : shapes) {
        Problem p = grouped_problem(type, layout, s.m, s.capacity, s.k, s.groups);
        p.group_layout = GroupLayout::masked;
        checked += check_points(p, type == DataType::bf16 ? 4 : 2, worst);
      }
  std::printf("masked: %d kernel runs checked, largest normalized error %.3g\n", checked, worst);
  EXPECT_GE(checked, 40);
}

// Skewed routings: one group with ten times the mean, and all tokens but one in the last group.
TEST_F(WgmmaGrouped, SkewedRoutings) {
  const Problem p = grouped_problem(DataType::bf16, "tn", 768, 24, 512, 32);
  const ReadyKernel k =
      prepare_kernel(compiler_, family().default_config(p, device_.arch), p, device_.arch);
  ProblemData data(p, *checker_, 11, stream_->get(), Routing::skewed);
  auto run = [&](CUstream s) {
    GemmOperands ops = data.operands(1.0f, 0.0f);
    workspaces_.provide(s, k.plan, ops);
    k.run(p, ops, s);
  };
  Verdict v = check_all(data, run);
  EXPECT_TRUE(v.ok) << "skewed: " << v.bad << " of " << v.points << " wrong";
  std::vector<int32_t> last(size_t(p.groups), 1);
  last.back() = int32_t(p.n);
  GT_CU(cuMemcpyHtoDAsync(data.group_ends.ptr(), last.data(), last.size() * sizeof(int32_t),
                          stream_->get()));
  stream_->synchronize();
  v = check_all(data, run);
  EXPECT_TRUE(v.ok) << "all in the last group: " << v.bad << " of " << v.points << " wrong";
}

// A graph captured once, replayed with three routings written into the group ends between
// replays: each replay is right for its routing.
TEST_F(WgmmaGrouped, AGraphReplaysOtherRoutings) {
  for (GroupLayout layout : {GroupLayout::contiguous, GroupLayout::masked}) {
    Problem p = grouped_problem(DataType::bf16, "tn", 512, 16, 384, 24);
    p.group_layout = layout;
    replay_routings(p);
  }
}

void WgmmaGrouped::replay_routings(const Problem& p) {
  const ReadyKernel k =
      prepare_kernel(compiler_, family().default_config(p, device_.arch), p, device_.arch);
  ProblemData data(p, *checker_, 13, stream_->get());
  GemmOperands ops = data.operands(1.0f, 0.0f);
  workspaces_.provide(stream_->get(), k.plan, ops);
  CUgraph graph;
  GT_CU(cuStreamBeginCapture(stream_->get(), CU_STREAM_CAPTURE_MODE_GLOBAL));
  k.run(p, ops, stream_->get());
  GT_CU(cuStreamEndCapture(stream_->get(), &graph));
  CUgraphExec exec;
  GT_CU(cuGraphInstantiate(&exec, graph, 0));
  int replays = 0;
  for (Routing routing : {Routing::uniform, Routing::skewed, Routing::ragged}) {
    data.route(routing, 100 + replays, stream_->get());
    const Verdict v = check_all(data, [&](CUstream s) { GT_CU(cuGraphLaunch(exec, s)); });
    EXPECT_TRUE(v.ok) << p.describe() << " replay " << replays << ": " << v.bad << " of "
                      << v.points << " wrong";
    ++replays;
  }
  GT_CU(cuGraphExecDestroy(exec));
  GT_CU(cuGraphDestroy(graph));
}

// The defaults on the MoE suite's shapes: TFLOP/s with tokens routed uniformly and skewed (one
// group ten times the mean), and for decode the share of the HBM bandwidth the weights stream at
// with the uniform routing (L2 flushed between runs).
TEST_F(WgmmaGrouped, DefaultsOnTheSuite) {
  const int64_t rows[][4] = {{1536, 256, 2048, 128}, {2048, 256, 768, 128},  {1536, 8, 2048, 128},
                             {4096, 512, 7168, 32},  {7168, 512, 2048, 32},  {4096, 8, 7168, 32},
                             {28672, 1024, 4096, 8}, {4096, 1024, 14336, 8}, {28672, 4, 4096, 8},
                             {5760, 64, 2880, 128}};
  const Timer timer(device_);
  TimingSettings settings;
  settings.min_runs = 10;
  settings.min_total_ms = 50;
  for (const auto& r : rows) {
    const Problem p = grouped_problem(DataType::bf16, "tn", r[0], r[1], r[2], r[3]);
    const KernelConfig c = family().default_config(p, device_.arch);
    const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
    ProblemData data(p, *checker_, 3, stream_->get());
    GemmOperands ops = data.operands(1.0f, 0.0f);
    workspaces_.provide(stream_->get(), k.plan, ops);
    auto run = [&](CUstream s) { k.run(p, ops, s); };
    const Timing uniform = timer.time(run, stream_->get(), settings);
    data.route(Routing::skewed, 17, stream_->get());
    const Timing skewed = timer.time(run, stream_->get(), settings);
    const double weights = double(p.m * p.k * p.groups * 2);
    std::printf(
        "%6lld %5lld %6lld G=%-4lld %7.1f TFLOP/s (skewed %7.1f) %6.0f GB/s of weights %8.1f us  "
        "%s\n",
        (long long)p.m, (long long)r[1], (long long)p.k, (long long)p.groups,
        p.flops() / (uniform.median_ms * 1e9), p.flops() / (skewed.median_ms * 1e9),
        weights / (uniform.median_ms * 1e6), uniform.median_ms * 1e3, k.compiled.name.c_str());
  }
}

}  // namespace
}  // namespace gemmtune
