#pragma once
// What the GPU tests of the families' grouped kernels (mixture-of-experts layers) share: grouped
// problems, the points of a family to run on them, and checks of a kernel against the fp64
// reference of each group.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "family_samples.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "gpu_support.hpp"

namespace gemmtune::test {

// G groups of `mean` columns on average (N = G x mean), tight leading dimensions.
inline Problem grouped_problem(DataType type, const char* layout, int64_t m, int64_t mean,
                               int64_t k, int64_t groups) {
  Problem p = make_problem(type, parse_op(layout[0]), parse_op(layout[1]), m, mean * groups, k);
  p.groups = groups;
  return p;
}

// The family's default, and the valid points that take every value of every parameter (at most
// `most` of them), for the problem.
inline std::vector<KernelConfig> grouped_points(const Family& family, const Problem& p,
                                                const ArchInfo& arch, size_t most) {
  std::vector<KernelConfig> out = {family.default_config(p, arch)};
  for (const KernelConfig& c : covering_points(family.prune(p, arch).valid))
    if (out.size() < most && std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
  return out;
}

// The tests of one family's grouped kernels: SetUp calls set_up_for(the family's name).
class GroupedGpuTest : public GpuTest {
 protected:
  // Skips unless the family runs grouped problems on this GPU.
  void set_up_for(const char* name) {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    family_ = &find_family(name);
    const std::string why = why_unsupported(
        *family_, grouped_problem(DataType::bf16, "tn", 64, 8, 64, 2), device_.arch);
    if (!why.empty()) GTEST_SKIP() << why << "; this GPU is " << device_.arch.name();
  }
  const Family& family() const { return *family_; }

  // Checks the family's points (grouped_points) on the problem with both beta paths (the
  // verifier's problem itself with tokens routed uniformly, a smaller one routed raggedly: empty
  // groups, ends mid-tile). Returns the kernel runs checked.
  int check_points(Problem p, size_t most, double& worst) {
    int checked = 0;
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
      p.reads_c = beta != 0.0f;
      const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
      for (const KernelConfig& c : grouped_points(family(), p, device_.arch, most)) {
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

  // check_points on decode (a few tokens an expert), prefill, odd sizes, one group and more groups
  // than tokens, each problem made by `make` (M, mean columns, K, G), `most` points each. Returns
  // the kernel runs checked.
  using MakeProblem = std::function<Problem(int64_t, int64_t, int64_t, int64_t)>;
  int check_every_shape(const MakeProblem& make, size_t most, const std::string& what) {
    struct Shape {
      int64_t m, mean, k, groups;
    };
    const Shape shapes[] = {{520, 3, 1000, 16},
                            {1024, 200, 512, 4},
                            {300, 41, 200, 7},
                            {257, 129, 40, 1},
                            {384, 1, 256, 40}};
    int checked = 0;
    double worst = 0;
    for (const Shape& s : shapes)
      checked += check_points(make(s.m, s.mean, s.k, s.groups), most, worst);
    std::printf("grouped %s: %d kernel runs checked, largest normalized error %.3g\n", what.c_str(),
                checked, worst);
    return checked;
  }
  // The same in the type and layout.
  int check_every_shape(DataType type, const std::string& layout, size_t most) {
    auto make = [&](int64_t m, int64_t mean, int64_t k, int64_t groups) {
      return grouped_problem(type, layout.c_str(), m, mean, k, groups);
    };
    return check_every_shape(make, most, std::string(to_string(type)) + " " + layout);
  }

  // check_points on masked problems (DeepGEMM's layout: G slots of a capacity, each with a
  // count; the verifier checks the columns past a count untouched) in both types and both
  // layouts: decode capacities, prefill, odd sizes, one column a slot. Returns the runs checked.
  int check_masked_shapes(size_t most) {
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
          checked += check_points(p, most, worst);
        }
    std::printf("masked: %d kernel runs checked, largest normalized error %.3g\n", checked, worst);
    return checked;
  }

  // The kernel's C on `data` (reset with `beta`: NaN where 0) against the reference, alpha 1, at
  // every element of the first `columns` columns (all of them where negative).
  Verdict check_all(const ProblemData& data, const std::function<void(CUstream)>& run,
                    float beta = 0.0f, int64_t columns = -1) {
    const Problem& p = data.problem;
    data.reset_c(*checker_, beta, stream_->get());
    run(stream_->get());
    CheckArgs a = check_args(data, 1.0f, beta);
    a.points = int(p.m * (columns < 0 ? p.n : columns));
    if (a.points == 0) {  // nothing to compare: the run done before the caller reads C itself
      stream_->synchronize();
      return Verdict{};
    }
    DeviceBuffer ref(size_t(a.points) * sizeof(double)), scale(size_t(a.points) * sizeof(double));
    a.ref = ref.ptr();
    a.scale = scale.ptr();
    checker_->reference(a, stream_->get());
    return checker_->compare(a, stream_->get());
  }

  // A run of the kernel on `data` with alpha 1 and `beta`, for check_all.
  std::function<void(CUstream)> runner(const ReadyKernel& k, const ProblemData& data,
                                       float beta = 0.0f) {
    return [&k, &data, beta, this](CUstream s) {
      GemmOperands ops = data.operands(1.0f, beta);
      workspaces_.provide(s, k.plan, ops);
      k.run(data.problem, ops, s);
    };
  }

  // Writes group ends of the test's own into the problem's data.
  void write_ends(ProblemData& data, const std::vector<int32_t>& ends) {
    data.host_group_ends = ends;
    GT_CU(cuMemcpyHtoDAsync(data.group_ends.ptr(), data.host_group_ends.data(),
                            ends.size() * sizeof(int32_t), stream_->get()));
    stream_->synchronize();
  }

  // The family's default on skewed routings: one group with ten times the mean, and all tokens
  // but one in the last group (the first holds that one, the others are empty).
  void expect_right_on_skewed_routings(const Problem& p) {
    const ReadyKernel k =
        prepare_kernel(compiler_, family().default_config(p, device_.arch), p, device_.arch);
    ProblemData data(p, *checker_, 11, stream_->get(), Routing::skewed);
    Verdict v = check_all(data, runner(k, data));
    EXPECT_TRUE(v.ok) << k.compiled.name << " skewed: " << v.bad << " of " << v.points << " wrong";
    std::vector<int32_t> last(size_t(p.groups), 1);
    last.back() = int32_t(p.n);
    write_ends(data, last);
    v = check_all(data, runner(k, data));
    EXPECT_TRUE(v.ok) << k.compiled.name << " all in the last group: " << v.bad << " of "
                      << v.points << " wrong";
  }

  // The family's default captured once in a graph, replayed with three routings written into the
  // group ends between replays: each replay is right for its routing.
  void expect_graph_replays_right(const Problem& p) {
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
      EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " replay " << replays
                        << ": " << v.bad << " of " << v.points << " wrong";
      ++replays;
    }
    GT_CU(cuGraphExecDestroy(exec));
    GT_CU(cuGraphDestroy(graph));
  }

  // The family's defaults on the MoE suite's shapes: TFLOP/s with tokens routed uniformly and
  // skewed (one group ten times the mean), and for decode the share of the HBM bandwidth the
  // weights stream at with the uniform routing (L2 flushed between runs).
  void print_defaults_on_the_suite() {
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

 private:
  const Family* family_ = nullptr;
};

// The tests of a family's grouped kernels per element type and layout, and their names.
using TypeAndLayout = std::tuple<DataType, std::string>;
inline std::string type_and_layout(const ::testing::TestParamInfo<TypeAndLayout>& info) {
  return std::string(to_string(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
}

}  // namespace gemmtune::test
