// The Hopper family's f32 kernels on tensor cores are right: tf32 (one product) within tf32's
// tolerance and 3xTF32 (three products over the derived low parts) within the exact path's, on
// shapes that are no multiple of any tile, K = 1, leading dimensions TMA cannot read in place (A
// and B packed, the low parts derived from the call's operands), every layout (an operand stored
// along M or N read from a transposed copy), both beta paths, for each schedule
// (multistage, warp-specialized, split-K, stream-K, ping-pong, clusters that multicast or split
// K, the swapped decode orientation, two sub-blocks a stage). A tf32 kernel passed off as 3xTF32
// is caught by the verifier. The largest errors are printed beside cuBLAS's on the same data
// (its TF32 path, and SGEMM).
#include <optional>
#include <string>
#include <vector>

#include "gpu_tf32_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  const char* what;
  int64_t bm, bn, stages, wg, cluster, epilogue;
  int64_t swap = 0, schedule = 0, splits = 1, pingpong = 0, cluster_k = 1, ksub = 1, ws = 1;
};

// Problem m is on wgmma's N (BM = kernel columns) unless swapped.
const Point kPoints[] = {
    {"256x128, cluster along N, TMA stores", 256, 128, 3, 2, 12, 1},
    {"128x128, register stores", 128, 128, 4, 2, 11, 0},
    {"wgmma N 192, three warpgroups", 192, 192, 3, 3, 11, 0},
    {"wgmma N 64, cluster along M", 64, 128, 6, 2, 21, 0},
    {"two sub-blocks a stage", 128, 128, 3, 2, 11, 0, 0, 0, 1, 0, 1, 2},
    {"split-K in 3", 128, 128, 4, 2, 11, 0, 0, 1, 3},
    {"stream-K, TMA stores", 128, 128, 4, 2, 11, 1, 0, 2},
    {"ping-pong, TMA stores", 128, 64, 5, 2, 11, 1, 0, 0, 1, 1},
    {"a cluster splits K", 128, 64, 6, 1, 11, 0, 0, 0, 1, 0, 2},
    {"swapped (decode): wgmma N 16", 128, 16, 8, 2, 11, 0, 1},
    {"multistage", 128, 128, 4, 2, 11, 0, 0, 0, 1, 0, 1, 1, 0},
};

std::vector<std::string> point_names() {
  std::vector<std::string> names;
  for (const Point& pt : kPoints) names.push_back(pt.what);
  return names;
}

// The family's default for the problem with the point's parameters over it (and the code that
// reads C, one CTA an SM).
KernelConfig config_of(const Point& pt, const Problem& p, int64_t products, const ArchInfo& arch) {
  KernelConfig c = find_family("wgmma_sm90").default_config(p, arch);
  const std::pair<const char*, int64_t> params[] = {{"BM", pt.bm},
                                                    {"BN", pt.bn},
                                                    {"SWAP", pt.swap},
                                                    {"STAGES", pt.stages},
                                                    {"WG", pt.wg},
                                                    {"WS", pt.ws},
                                                    {"CLUSTER", pt.cluster},
                                                    {"EPILOGUE", pt.epilogue},
                                                    {"SCHEDULE", pt.schedule},
                                                    {"SPLITS", pt.splits},
                                                    {"CLUSTER_K", pt.cluster_k},
                                                    {"PINGPONG", pt.pingpong},
                                                    {"KSUB", pt.ksub},
                                                    {"PRODUCTS", products},
                                                    {"READS_C", 1},
                                                    {"OCCUPANCY", 1},
                                                    {"GROUP", 8}};
  for (const auto& [name, value] : params) c.params[name] = value;
  return c;
}

// tn (both operands along K, read in place) with every point; the other layouts, whose copies
// are the same for every kernel, with a few.
bool checked_in(size_t index, const Problem& p) {
  return p.layout() == "tn" || index == 0 || index == 1 || index == 5 || index == 9;
}

class WgmmaTf32 : public test::Tf32Test {
 protected:
  void SetUp() override {
    test::Tf32Test::SetUp();
    if (!IsSkipped()) skip_without("wgmma_sm90", "sm_90a");
  }
};

TEST_F(WgmmaTf32, EveryScheduleLayoutAndOddShapeInBothPrecisions) {
  const std::vector<std::string> points = point_names();
  const std::array<int, 2> checked = check_every_layout_and_odd_shape(
      points, [&](size_t i, const Problem& p, int64_t products) -> std::optional<KernelConfig> {
        if (!checked_in(i, p)) return std::nullopt;
        return config_of(kPoints[i], p, products, device_.arch);
      });
  for (const int count : checked) EXPECT_EQ(count, 4 * 2 * 2 * (int(points.size()) + 3 * 4));
}

// An f32 output's TMA stores with a bias along M, which each consumer stages in shared memory
// (store_tma.cuh, StagedBias): 32-column chunks, ping-pong and stream-K, more tiles than CTAs,
// M no multiple of the tiles, beta 0 and 0.5.
TEST_F(WgmmaTf32, TmaStoresAddAStagedBias) {
  Problem p = test::f32_problem(Precision::tf32, 2000, 1300, 256, 0, "tn");
  p.epilogue = parse_epilogue("bias,gelu_tanh");
  for (const float beta : {0.0f, 0.5f}) {
    const Verifier verifier(*checker_, p, 0.75f, beta, 5, stream_->get());
    for (const Point& pt : {kPoints[0], kPoints[6], kPoints[7]}) {
      KernelConfig c = config_of(pt, p, 1, device_.arch);
      c.epilogue = p.epilogue;
      const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
      const Verdict v = check(k, verifier);
      EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") beta=" << beta << ": "
                        << v.message;
    }
  }
}

TEST_F(WgmmaTf32, OneProductFailsThreeProductsTolerance) {
  expect_one_product_fails([&](const Problem& p, int64_t products) {
    return config_of(kPoints[1], p, products, device_.arch);
  });
}

// The library serves an f32 problem of each precision with the family's default (tf32 and 3xTF32
// on Hopper; the exact path elsewhere), right within the precision's tolerance.
TEST_F(WgmmaTf32, DefaultsOfEveryClass) {
  expect_defaults_right(find_family("wgmma_sm90"));
}

TEST_F(WgmmaTf32, DefaultsAgainstCublasTimedInTurns) {
  TimingSettings settings;
  settings.min_runs = 15;
  settings.min_total_ms = 300;
  time_defaults_against_cublas(find_family("wgmma_sm90"), settings);
}

}  // namespace
}  // namespace gemmtune
