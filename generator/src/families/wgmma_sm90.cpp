// The Hopper family (templates/wgmma_sm90.cuh): bf16/f16 with f32 accumulation, TMA + wgmma.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"

namespace gemmtune {
namespace {

constexpr int64_t kBK = 64;

int64_t cluster_m(const KernelConfig& c) { return c.at("CLUSTER") / 10; }
int64_t cluster_n(const KernelConfig& c) { return c.at("CLUSTER") % 10; }
int64_t cluster_size(const KernelConfig& c) { return cluster_m(c) * cluster_n(c); }
// 64-row wgmma blocks per consumer warpgroup along problem N.
int64_t blocks_per_warpgroup(const KernelConfig& c) { return c.at("BN") / (64 * c.at("WG")); }

// Mirrors wgmma_sm90::Kernel::SMEM_BYTES: stages, the staged C tile, alignment, barriers.
int64_t smem_bytes_of(const KernelConfig& c) {
  const int64_t staged_c = c.at("EPILOGUE") ? c.at("BM") * c.at("BN") * 2 : 0;
  return c.at("STAGES") * (c.at("BM") + c.at("BN")) * kBK * 2 + staged_c + 1024 + 16 * c.at("STAGES");
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

class WgmmaSm90Family final : public Family {
 public:
  std::string_view name() const override { return "wgmma_sm90"; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (problem.dtype == DType::f32) return "the wgmma family computes f16 and bf16";
    if (arch.cc != 90 || !arch.arch_specific) return "the wgmma family needs sm_90a (Hopper)";
    return {};
  }

  SearchSpace space(const Problem&, const ArchInfo&) const override {
    SearchSpace s;
    s.family = "wgmma_sm90";
    s.params = {
        {"BM", {128, 256}},   // tile along M: the wgmma N
        {"BN", {128, 192, 256}},  // tile along N: 64-row blocks of the consumer warpgroups
        {"STAGES", {3, 4, 5}},
        {"WG", {1, 2, 3}},    // consumer warpgroups
        {"WS", {0, 1}},       // 1: warp-specialized persistent, 0: multistage
        {"CLUSTER", {11, 21, 12}},  // CTAs along M x along N
        {"RASTER", {0, 1}},   // 0: sweep tiles along M first, 1: along N first
        {"GROUP", {8}},       // tiles per raster group (a kernel parameter; one value searched)
        {"EPILOGUE", {0, 1}},  // 0: stores from registers, 1: through shared memory + TMA store
    };
    s.constraints = {
        {"warpgroup_rows", "BN is 64 rows per consumer warpgroup, once or twice",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           const int64_t mw = blocks_per_warpgroup(c);
           return c.at("BN") % (64 * c.at("WG")) == 0 && (mw == 1 || mw == 2);
         }},
        {"accumulators_fit", "f32 accumulators per consumer thread: 128 at most (96 with 3 warpgroups)",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return blocks_per_warpgroup(c) * c.at("BM") / 2 <= (c.at("WG") == 3 ? 96 : 128);
         }},
        {"smem_fits", "the stages fit the shared memory of a block",
         [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
           return smem_bytes_of(c) <= a.smem_per_block;
         }},
        {"clusters_need_ws", "clusters (TMA multicast) only with the warp-specialized schedule",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return cluster_size(c) == 1 || c.at("WS") == 1;
         }},
        {"cluster_has_pairs", "a cluster of two needs two tiles along its direction",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           if (cluster_m(c) == 2) return ceil_div(p.m, c.at("BM")) >= 2;
           if (cluster_n(c) == 2) return ceil_div(p.n, c.at("BN")) >= 2;
           return true;
         }},
        {"group_size", "raster groups of 1 to 64 tiles",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("GROUP") >= 1 && c.at("GROUP") <= 64;
         }},
        {"tma_store_needs_ws", "the TMA-store epilogue pays off when it overlaps the next tile",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("EPILOGUE") == 0 || c.at("WS") == 1;
         }},
        {"raster_along_longer_side", "tiles are swept along the longer of M and N first",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("RASTER") == (p.m >= p.n ? 0 : 1);
         }},
    };
    return s;
  }

  // The known good point for large problems: 256x128 output tiles (wgmma N 256 along M, two
  // consumer warpgroups along N), 4 stages, persistent, a cluster of two along N that multicasts
  // the 256-wide operand. Smaller tiles without a cluster below.
  KernelConfig default_config(const Problem& p, const ArchInfo&) const override {
    KernelConfig c{"wgmma_sm90", p.dtype, p.op_a, p.op_b, {}};
    const bool large = p.m >= 512 && p.n >= 256;
    c.params = {{"BM", large ? 256 : 128}, {"BN", 128}, {"STAGES", large ? 3 : 4}, {"WG", 2}, {"WS", 1},
                {"CLUSTER", large ? 12 : 11}, {"RASTER", p.m >= p.n ? 0 : 1}, {"GROUP", 8}, {"EPILOGUE", 1}};
    return c;
  }

  std::string kernel_name(const KernelConfig& c) const override {
    return fmt::format("gemm_wgmma_{}_{}{}_{}x{}x{}_s{}_wg{}_c{}x{}_{}_r{}{}{}", to_string(c.dtype), to_char(c.op_a),
                       to_char(c.op_b), c.at("BM"), c.at("BN"), kBK, c.at("STAGES"), c.at("WG"), cluster_m(c),
                       cluster_n(c), c.at("WS") ? "ws" : "ms", c.at("RASTER") ? "n" : "m",
                       c.at("GROUP") == 8 ? "" : fmt::format("_g{}", c.at("GROUP")),
                       c.at("EPILOGUE") ? "_tmastore" : "");
  }

  std::string emit(const KernelConfig& c) const override {
    return fmt::format(
        "// {name}: generated by gemmtune from wgmma_sm90.cuh\n"
        "#define GEMMTUNE_GENERATED 1\n"
        "#include \"wgmma_sm90.cuh\"\n"
        "namespace {{\n"
        "struct Config {{\n"
        "  static constexpr int BM = {BM}, BN = {BN}, STAGES = {STAGES}, WG = {WG};\n"
        "  static constexpr bool WS = {WS};\n"
        "  static constexpr int CLUSTER_M = {CM}, CLUSTER_N = {CN}, RASTER = {RASTER}, GROUP = {GROUP};\n"
        "  static constexpr int EPILOGUE = {EPI};\n"
        "  static constexpr bool A_T = {A_T}, B_T = {B_T};\n"
        "  static constexpr int DTYPE = {DTYPE};\n"
        "}};\n"
        "using K = gemmtune::wgmma_sm90::Kernel<Config>;\n"
        "{smem_check}"
        "}}  // namespace\n"
        "extern \"C\" __global__ void __launch_bounds__(K::THREADS, 1)\n"
        "{name}(const __grid_constant__ GemmArgs args) {{\n"
        "  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];\n"
        "  K::run(args, gemmtune_smem);\n"
        "}}\n",
        fmt::arg("name", kernel_name(c)), fmt::arg("BM", c.at("BM")), fmt::arg("BN", c.at("BN")),
        fmt::arg("STAGES", c.at("STAGES")), fmt::arg("WG", c.at("WG")), fmt::arg("WS", c.at("WS") != 0),
        fmt::arg("CM", cluster_m(c)), fmt::arg("CN", cluster_n(c)), fmt::arg("RASTER", c.at("RASTER")), fmt::arg("GROUP", c.at("GROUP")),
        fmt::arg("EPI", c.at("EPILOGUE")),
        fmt::arg("A_T", c.op_a == Op::T), fmt::arg("B_T", c.op_b == Op::T),
        fmt::arg("DTYPE", c.dtype == DType::bf16 ? 2 : 1),
        fmt::arg("smem_check", smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c))));
  }

  LaunchGeometry geometry(const KernelConfig& c, const Problem& p, const ArchInfo& arch) const override {
    LaunchGeometry g;
    g.tiles_m = uint32_t(ceil_div(p.m, c.at("BM")));
    g.tiles_n = uint32_t(ceil_div(p.n, c.at("BN")));
    g.block = {uint32_t(128 * (c.at("WG") + c.at("WS"))), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    const int64_t cluster = cluster_size(c);
    g.cluster = {uint32_t(cluster), 1, 1};
    if (c.at("WS")) {
      // Persistent: one CTA per SM (whole clusters), each looping over tiles.
      const int64_t super = ceil_div(g.tiles_m, cluster_m(c)) * ceil_div(g.tiles_n, cluster_n(c));
      g.grid = {uint32_t(std::min<int64_t>(super, arch.sms / cluster) * cluster), 1, 1};
      g.persistent = true;
      g.work_units = grid_extent(super);  // the kernel counts them in int
    } else {
      g.grid = {grid_extent(int64_t(g.tiles_m) * g.tiles_n), 1, 1};
    }
    return g;
  }

  bool uses_tma() const override { return true; }

  // The kernel's template and the operand packing its launcher runs (their includes are found
  // by scanning).
  std::vector<std::string> template_files() const override { return {"wgmma_sm90.cuh", "pack.cuh"}; }

  double prior(const KernelConfig& c, const Problem& p, const ArchInfo& a) const override {
    // Larger tiles, warp specialization, 2 consumer warpgroups and 4 stages first, as long as the
    // tiles fill the GPU.
    const double bm = double(c.at("BM")), bn = double(c.at("BN"));
    const double tiles = std::ceil(double(p.m) / bm) * std::ceil(double(p.n) / bn);
    const double fill = std::min(1.0, tiles / a.sms);
    const double waste = double(p.m * p.n) / (std::ceil(double(p.m) / bm) * bm * std::ceil(double(p.n) / bn) * bn);
    double score = fill * waste * (bm * bn / (bm + bn)) / 85.0;
    if (c.at("WS")) score *= 1.2;
    if (c.at("WG") == 2) score *= 1.1;
    if (c.at("STAGES") == 4) score *= 1.05;
    if (cluster_m(c) == 2) score *= 1.03;
    return score;
  }
};

}  // namespace

const Family& wgmma_sm90_family() {
  static const WgmmaSm90Family family;
  return family;
}

}  // namespace gemmtune
