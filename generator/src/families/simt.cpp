// The SIMT fp32 family (templates/simt.cuh): search space, names, emission, launch geometry.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "raster.h"

namespace gemmtune {
namespace {

int64_t threads_of(const KernelConfig& c) {
  return (c.at("BM") / c.at("WM")) * (c.at("BN") / c.at("WN")) * 32;
}

// Mirrors simt::Kernel::SMEM_BYTES: transposing copies pad their rows by 4 floats.
int64_t smem_bytes_of(const KernelConfig& c) {
  const int64_t pad_a = c.op_a == Op::T ? 4 : 0;
  const int64_t pad_b = c.op_b == Op::T ? 0 : 4;
  return c.at("STAGES") * c.at("BK") * (c.at("BM") + pad_a + c.at("BN") + pad_b) * 4;
}

// Registers a thread needs, roughly: accumulators, fragments, the prefetch buffer, addresses.
int64_t register_estimate(const KernelConfig& c) {
  const int64_t tm = c.at("TM"), tn = c.at("TN");
  const int64_t prefetch = (c.at("BM") + c.at("BN")) * c.at("BK") / threads_of(c);
  return tm * tn + tm + tn + prefetch +
         72;  // calibrated on ptxas (sm_80, sm_90a): no default candidate spills
}

int widest_vector(const Problem& p) {
  return std::min(4, p.align / 4);
}

constexpr int kGroup = 8;  // tiles per raster group along M (Cfg::GROUP)

class SimtFamily final : public Family {
 public:
  std::string_view name() const override { return "simt"; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (!one_type_of(problem, {DataType::f32}))
      return "the SIMT family computes f32 only, every operand f32";
    if (arch.cc < 70) return "the SIMT family needs sm_70 or newer";
    return {};
  }

  SearchSpace space(const Problem&, const ArchInfo&) const override {
    SearchSpace s;
    s.family = "simt";
    s.params = {
        {"BM", {64, 128, 256}}, {"BN", {64, 128, 256}}, {"BK", {8, 16}},
        {"WM", {32, 64}},       {"WN", {32, 64}},       {"TM", {4, 8, 16}},
        {"TN", {4, 8, 16}},     {"VEC", {1, 2, 4}},     {"STAGES", {1, 2}},
    };
    s.constraints = {
        {"warp_shape", "a warp tile holds exactly 32 thread tiles: (WM/TM)*(WN/TN) == 32",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("WM") % c.at("TM") == 0 && c.at("WN") % c.at("TN") == 0 &&
                  (c.at("WM") / c.at("TM")) * (c.at("WN") / c.at("TN")) == 32;
         }},
        {"warps_tile_block", "warp tiles divide the block tile: BM % WM == 0, BN % WN == 0",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("BM") % c.at("WM") == 0 && c.at("BN") % c.at("WN") == 0;
         }},
        {"threads_per_block", "128 to 512 threads per block",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return threads_of(c) >= 128 && threads_of(c) <= 512;
         }},
        {"vector_alignment", "VEC-wide accesses need the problem aligned to 4*VEC bytes",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("VEC") * 4 <= p.align;
         }},
        {"widest_vector", "use the widest vector the alignment allows (narrower is never faster)",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("VEC") == widest_vector(p);
         }},
        {"even_copy", "each thread copies the same number of vectors of each tile",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           const int64_t t = threads_of(c), v = c.at("VEC") * t;
           return (c.at("BM") * c.at("BK")) % v == 0 && (c.at("BN") * c.at("BK")) % v == 0;
         }},
        {"smem_fits", "shared memory per block within the architecture's limit",
         [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
           return smem_bytes_of(c) <= a.smem_per_block;
         }},
        {"registers_fit", "estimated registers per thread fit 255 and the block fits an SM",
         [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
           const int64_t regs = register_estimate(c);
           return regs <= 255 && regs * threads_of(c) <= a.regs_per_sm;
         }},
    };
    return s;
  }

  // Measured on an H200 (docs/PERF.md): 128x256 tiles of 16x8 win from 2048^2 outputs up;
  // below that, 64x64 tiles keep every SM busy.
  KernelConfig default_config(const Problem& problem, const ArchInfo&) const override {
    KernelConfig c{"simt", problem.types, problem.scaling, problem.op_a, problem.op_b, {}};
    if (problem.m * problem.n >= int64_t(2048) * 2048)
      c.params = {{"BM", 128}, {"BN", 256}, {"BK", 8}, {"WM", 64},
                  {"WN", 64},  {"TM", 16},  {"TN", 8}};
    else
      c.params = {{"BM", 64}, {"BN", 64}, {"BK", 8}, {"WM", 32}, {"WN", 32}, {"TM", 4}, {"TN", 8}};
    c.params["VEC"] = widest_vector(problem);
    c.params["STAGES"] = 2;
    return c;
  }

  std::string kernel_name(const KernelConfig& c) const override {
    return fmt::format("gemm_simt_{}_{}{}_{}x{}x{}_w{}x{}_t{}x{}_v{}_s{}", c.types.token(),
                       to_char(c.op_a), to_char(c.op_b), c.at("BM"), c.at("BN"), c.at("BK"),
                       c.at("WM"), c.at("WN"), c.at("TM"), c.at("TN"), c.at("VEC"), c.at("STAGES"));
  }

  std::string emit(const KernelConfig& c) const override {
    return generated_unit(
        {kernel_name(c), "simt.cuh", "gemmtune::simt::Kernel",
         fmt::format("  static constexpr int BM = {}, BN = {}, BK = {};\n"
                     "  static constexpr int WM = {}, WN = {}, TM = {}, TN = {};\n"
                     "  static constexpr int VEC = {}, STAGES = {}, GROUP = {};\n"
                     "  static constexpr bool A_T = {}, B_T = {};\n",
                     c.at("BM"), c.at("BN"), c.at("BK"), c.at("WM"), c.at("WN"), c.at("TM"),
                     c.at("TN"), c.at("VEC"), c.at("STAGES"), kGroup, c.op_a == Op::T,
                     c.op_b == Op::T),
         smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c)), "K::THREADS",
         "  extern __shared__ float4 gemmtune_smem[];\n"
         "  K::run(args, reinterpret_cast<float*>(gemmtune_smem));\n"});
  }

  LaunchGeometry geometry(const KernelConfig& c, const Problem& p, const ArchInfo&) const override {
    LaunchGeometry g;
    g.tiles_m = uint32_t((p.m + c.at("BM") - 1) / c.at("BM"));
    g.tiles_n = uint32_t((p.n + c.at("BN") - 1) / c.at("BN"));
    g.grid = {grid_extent(int64_t(g.tiles_m) * g.tiles_n), 1, 1};
    raster_divisors(int(g.tiles_m), int(g.tiles_n), kGroup, g.divisors);
    g.block = {uint32_t(threads_of(c)), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    return g;
  }

  // Its includes are found by scanning.
  std::vector<std::string> template_files() const override { return {"simt.cuh"}; }

  // Calibrated on the H200 run over all 144 candidates at 4096^3 (docs/PERF.md): the best
  // kernel per thread tile reached 69% (16x8), 65% (8x8), 63% (4x16) and 60% (4x8) of the
  // f32 peak, which 0.773 - 1.81 / r fits, r being FFMAs per 16-byte shared load of a k-step;
  // one stage cost 5%, warp tiles of 32 wide 5%.
  TileWork tile_work(const KernelConfig& c, const Problem& p, const ArchInfo& a) const override {
    const double tm = double(c.at("TM")), tn = double(c.at("TN"));
    const double ffma_per_load = tm * tn / (tm / 4 + tn / 4);
    TileWork w;
    w.tile_m = c.at("BM");
    w.tile_n = c.at("BN");
    w.ctas_per_sm = ctas_per_sm(a, threads_of(c), smem_bytes_of(c), register_estimate(c));
    w.efficiency = (0.773 - 1.81 / ffma_per_load) * (c.at("STAGES") == 2 ? 1.0 : 0.95) *
                   (c.at("WM") * c.at("WN") >= 64 * 64 ? 1.0 : 0.95);
    // One k-tile of A and B is fetched into registers while the other is multiplied.
    w.bytes_in_flight = double((c.at("BM") + c.at("BN")) * c.at("BK") * 4);
    // The first tile's loads, then C written from registers.
    w.tile_overhead_us = 1.0 + epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    return w;
  }
};

}  // namespace

const Family& simt_family() {
  static const SimtFamily family;
  return family;
}

}  // namespace gemmtune
