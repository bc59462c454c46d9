// The Ampere family's f32 kernels on tensor cores (tf32 mma.sync, sm_80 and later) are right: tf32
// within tf32's tolerance and 3xTF32 (each value split in registers into a rounded part and the
// rounded rest, three products) within the exact path's, on shapes that are no multiple of any
// tile, K = 1, leading dimensions that leave narrower copies, every layout (an operand stored along
// M or N read from the transposed copy the launch derives), both beta paths, split-K and the
// decode tile. A tf32 kernel passed off as 3xTF32 is caught by the verifier. The largest errors
// are printed beside cuBLAS's on the same data (its TF32 path, and SGEMM).
#include <optional>
#include <string>
#include <vector>

#include "gpu_tf32_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  const char* what;
  int64_t bm, bn, bk, wm, wn, stages, splits = 1;
};

// BK counts f32 values: 16 and 32 are 64 and 128 bytes of a row, as 16-bit kernels' 32 and 64.
const Point kPoints[] = {
    {"128x128x16, 64x64 warps, 4 stages (the large default)", 128, 128, 16, 64, 64, 4},
    {"128x256x32, 64x64 warps, 3 stages", 128, 256, 32, 64, 64, 3},
    {"64x64x32, 32x32 warps, 5 stages", 64, 64, 32, 32, 32, 5},
    {"128x32x32, decode", 128, 32, 32, 32, 32, 3},
    {"64x64x16, split-K in 3", 64, 64, 16, 32, 32, 4, 3},
};

std::vector<std::string> point_names() {
  std::vector<std::string> names;
  for (const Point& pt : kPoints) names.push_back(pt.what);
  return names;
}

KernelConfig config_of(const Point& pt, const Problem& p, int64_t products, const ArchInfo& arch) {
  KernelConfig c = find_family("mma_sm80").default_config(p, arch);
  const std::pair<const char*, int64_t> params[] = {
      {"BM", pt.bm}, {"BN", pt.bn},         {"BK", pt.bk},         {"WM", pt.wm},
      {"WN", pt.wn}, {"STAGES", pt.stages}, {"SPLITS", pt.splits}, {"PRODUCTS", products}};
  for (const auto& [name, value] : params) c.params[name] = value;
  return c;
}

class MmaSm80Tf32 : public test::Tf32Test {
 protected:
  void SetUp() override {
    test::Tf32Test::SetUp();
    if (!IsSkipped()) skip_without("mma_sm80", "sm_80 or newer");
  }
};

TEST_F(MmaSm80Tf32, EveryPointLayoutAndOddShapeInBothPrecisions) {
  const Family& family = find_family("mma_sm80");
  const std::array<int, 2> checked = check_every_layout_and_odd_shape(
      point_names(),
      [&](size_t i, const Problem& p, int64_t products) -> std::optional<KernelConfig> {
        const KernelConfig c = config_of(kPoints[i], p, products, device_.arch);
        if (!family.why_invalid(c, p, device_.arch).empty()) return std::nullopt;  // split-K
        return c;
      });
  // Split-K where its rule allows it (few tiles): at least every other point everywhere.
  for (const int count : checked) EXPECT_GE(count, 4 * 4 * 2 * 2 * 4);
}

TEST_F(MmaSm80Tf32, OneProductFailsThreeProductsTolerance) {
  expect_one_product_fails([&](const Problem& p, int64_t products) {
    return config_of(kPoints[0], p, products, device_.arch);
  });
}

// On Ampere these serve f32 problems that opt into tf32.
TEST_F(MmaSm80Tf32, DefaultsOfEveryClass) {
  expect_defaults_right(find_family("mma_sm80"));
}

// Printed with the fraction of tf32 mma.sync's rate from registers (gemm-bench --mma-ceiling)
// they reach. On Hopper cuBLAS runs wgmma, which the family cannot: the ratio there is not
// Ampere's.
TEST_F(MmaSm80Tf32, DefaultsAgainstCublasTimedInTurns) {
  TimingSettings settings;
  settings.min_runs = 10;
  settings.min_total_ms = 200;
  time_defaults_against_cublas(find_family("mma_sm80"), settings);
}

}  // namespace
}  // namespace gemmtune
