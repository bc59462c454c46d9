// The SIMT fp32 family (templates/simt.cuh): search space, names, emission, launch plan.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "simt_args.h"

namespace gemmtune {
namespace {

struct SimtParams {
  int64_t bm = 0, bn = 0, bk = 0;  // block tile
  int64_t wm = 0, wn = 0;          // warp tile
  int64_t tm = 0, tn = 0;          // thread tile
  int64_t vec = 1, stages = 2;     // floats per global access; 2: double-buffered

  using P = SimtParams;
  static constexpr std::array fields = {
      ParamField<P>{"BM", &P::bm},         ParamField<P>{"BN", &P::bn},
      ParamField<P>{"BK", &P::bk},         ParamField<P>{"WM", &P::wm},
      ParamField<P>{"WN", &P::wn},         ParamField<P>{"TM", &P::tm},
      ParamField<P>{"TN", &P::tn},         ParamField<P>{"VEC", &P::vec},
      ParamField<P>{"STAGES", &P::stages},
  };
};
using P = SimtParams;
using Config = FamilyConfig<P>;

constexpr int kGroup = 8;  // tiles per raster group along M (Cfg::GROUP)

int64_t threads_of(const Config& c) {
  return (c.bm / c.wm) * (c.bn / c.wn) * 32;
}

// Mirrors simt::Kernel::SMEM_BYTES: transposing copies pad their rows by 4 floats.
int64_t smem_bytes_of(const Config& c) {
  const int64_t pad_a = c.a_t() ? 4 : 0;
  const int64_t pad_b = c.b_t() ? 0 : 4;
  return c.stages * c.bk * (c.bm + pad_a + c.bn + pad_b) * 4;
}

// Registers a thread needs, roughly: accumulators, fragments, the prefetch buffer, addresses,
// and kRegisterBase more (calibrated on ptxas, sm_80 and sm_90a: no default candidate spills).
// Narrow copies (VEC 1 or 2, an unaligned problem) keep an address per load besides the values:
// without that term, 16x8 and 8x16 thread tiles prefetching 20-24 values spilled 16-244 bytes.
constexpr int64_t kRegisterBase = 72;
int64_t register_estimate(const Config& c) {
  const int64_t prefetch = (c.bm + c.bn) * c.bk / std::max<int64_t>(threads_of(c), 1);
  const int64_t addresses = c.vec < 4 ? prefetch / c.vec : 0;
  return c.tm * c.tn + c.tm + c.tn + prefetch + addresses + kRegisterBase;
}

int widest_vector(const Problem& p) {
  return std::min(4, p.align / 4);
}

// The cost model's calibration (docs/PERF.md, 'SIMT f32 wins with 16x8 thread tiles at 69% of
// the f32 peak'): the best kernel per thread tile reached 69% (16x8), 65% (8x8), 63% (4x16) and
// 60% (4x8) of the f32 peak, which kFfmaRate - kLoadCost / r fits, r being FFMAs per 16-byte
// shared load of a k-step; one stage cost 5%, warp tiles of 32 wide 5%.
constexpr double kFfmaRate = 0.773;
constexpr double kLoadCost = 1.81;
constexpr double kOneStage = 0.95;
constexpr double kNarrowWarpTile = 0.95;

using Members = std::vector<int64_t P::*>;
const Members kBlock = {&P::bm, &P::bn, &P::wm, &P::wn};

class SimtFamily final : public FamilyOf<P> {
 public:
  std::string_view name() const override { return "simt"; }
  int rank() const override { return 40; }
  bool takes_epilogues() const override { return true; }
  // Gated epilogues: A's gate and up rows in turns in a tile (TileLoader's GATE), write_gated.
  bool takes_gated() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (!one_type_of(problem, {DataType::f32}))
      return "the SIMT family computes f32 only, every operand f32";
    if (arch.cc < 70) return "the SIMT family needs sm_70 or newer";
    if (problem.epilogue.gated() && problem.op_a != Op::T)
      return fmt::format(
          "epilogue {}: a gated epilogue needs the weights stored along K (op(A) = T, layout "
          "t_: an nn.Linear's), whose gate and up rows the copies take in turns",
          problem.epilogue.name());
    return {};
  }

  Space<P> space(const Problem&, const ArchInfo&) const override {
    Space<P> s;
    s.set(&P::bm, {64, 128, 256});
    s.set(&P::bn, {64, 128, 256});
    s.set(&P::bk, {8, 16});
    s.set(&P::wm, {32, 64});
    s.set(&P::wn, {32, 64});
    s.set(&P::tm, {4, 8, 16});
    s.set(&P::tn, {4, 8, 16});
    s.set(&P::vec, {1, 2, 4});
    s.set(&P::stages, {1, 2});
    s.rules = {
        {"warp_shape",
         "a warp tile holds exactly 32 thread tiles: (WM/TM)*(WN/TN) == 32",
         {&P::wm, &P::wn, &P::tm, &P::tn},
         [](const Config& c, const Problem&, const ArchInfo&) {
           return c.wm % c.tm == 0 && c.wn % c.tn == 0 && (c.wm / c.tm) * (c.wn / c.tn) == 32;
         }},
        {"warps_tile_block", "warp tiles divide the block tile: BM % WM == 0, BN % WN == 0", kBlock,
         [](const Config& c, const Problem&, const ArchInfo&) {
           return c.bm % c.wm == 0 && c.bn % c.wn == 0;
         }},
        {"threads_per_block", "128 to 512 threads per block", kBlock,
         [](const Config& c, const Problem&, const ArchInfo&) {
           return threads_of(c) >= 128 && threads_of(c) <= 512;
         }},
        {"vector_alignment",
         "VEC-wide accesses need the problem aligned to 4*VEC bytes",
         {&P::vec},
         [](const Config& c, const Problem& p, const ArchInfo&) { return c.vec * 4 <= p.align; }},
        {"widest_vector",
         "use the widest vector the alignment allows (narrower is never faster)",
         {&P::vec},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return c.vec == widest_vector(p);
         }},
        {"even_copy",
         "each thread copies the same number of vectors of each tile",
         {&P::bm, &P::bn, &P::wm, &P::wn, &P::bk, &P::vec},
         [](const Config& c, const Problem&, const ArchInfo&) {
           const int64_t v = c.vec * threads_of(c);
           return v > 0 && (c.bm * c.bk) % v == 0 && (c.bn * c.bk) % v == 0;
         }},
        {"smem_fits",
         "shared memory per block within the architecture's limit",
         {&P::bm, &P::bn, &P::bk, &P::stages},
         [](const Config& c, const Problem&, const ArchInfo& a) {
           return smem_bytes_of(c) <= a.smem_per_block;
         }},
        {"registers_fit",
         "estimated registers per thread fit 255 and the block fits an SM",
         {&P::bm, &P::bn, &P::bk, &P::wm, &P::wn, &P::tm, &P::tn, &P::vec},
         [](const Config& c, const Problem&, const ArchInfo& a) {
           const int64_t regs = register_estimate(c);
           return regs <= 255 && regs * threads_of(c) <= a.regs_per_sm;
         }},
    };
    return s;
  }

  // 128x256 tiles of 16x8 on large problems (docs/PERF.md, 'SIMT f32 wins with 16x8 thread tiles
  // at 69% of the f32 peak'); below 2048^2 outputs, 64x64 tiles, which keep every SM busy.
  Config default_of(const Problem& problem, const ArchInfo&) const override {
    Config c = Config::of(problem);
    if (problem.m * problem.n >= int64_t(2048) * 2048)
      c.bm = 128, c.bn = 256, c.bk = 8, c.wm = 64, c.wn = 64, c.tm = 16, c.tn = 8;
    else
      c.bm = 64, c.bn = 64, c.bk = 8, c.wm = 32, c.wn = 32, c.tm = 4, c.tn = 8;
    c.vec = widest_vector(problem);
    c.stages = 2;
    return c;
  }

  std::string name_of(const Config& c) const override {
    return fmt::format("gemm_simt_{}_{}{}_{}x{}x{}_w{}x{}_t{}x{}_v{}_s{}", c.types.token(),
                       to_char(c.op_a), to_char(c.op_b), c.bm, c.bn, c.bk, c.wm, c.wn, c.tm, c.tn,
                       c.vec, c.stages);
  }

  UnitSource unit_of(const Config& c, const ArchInfo&) const override {
    return {"simt.cuh", "", "gemmtune::simt::Kernel",
            fmt::format("  static constexpr int GROUP = {};\n"
                        "  static constexpr bool A_T = {}, B_T = {};\n",
                        kGroup, c.a_t(), c.b_t()),
            smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c)) +
                threads_static_assert(threads_of(c)),
            // Scalar copies (VEC 1) need the registers register_estimate counts: without a bound
            // of one block per SM, ptxas on sm_80 traded them for occupancy and spilled.
            c.vec == 1 ? "K::THREADS, 1" : "K::THREADS",
            "  extern __shared__ float4 gemmtune_smem[];\n"
            "  K::run(args, reinterpret_cast<float*>(gemmtune_smem));\n"};
  }

  ArgsLayout args_layout() const override {
    return {"SimtArgs",
            sizeof(SimtArgs),
            offsetof(SimtArgs, core),
            {GEMMTUNE_ARGS_MEMBER(SimtArgs, core), GEMMTUNE_ARGS_MEMBER(SimtArgs, tiling)}};
  }

  LaunchPlan plan_of(const Config& c, const Problem& p, const ArchInfo&) const override {
    LaunchPlan g;
    g.tiles_m = uint32_t(ceil_div(p.m, c.bm));
    g.tiles_n = uint32_t(ceil_div(p.n, c.bn));
    g.grid = {grid_extent(int64_t(g.tiles_m) * g.tiles_n), 1, 1};
    g.block = {uint32_t(threads_of(c)), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    g.args = args_layout();
    g.blocks.push_back(
        ArgsBlock::of(g.args.offset_of("tiling"), tiling_of(g.tiles_m, g.tiles_n, kGroup)));
    return g;
  }

  // Its includes are found by scanning.
  std::vector<std::string> template_files() const override { return {"simt.cuh"}; }

  TileWork work_of(const Config& c, const Problem& p, const ArchInfo& a) const override {
    const double tm = double(c.tm), tn = double(c.tn);
    const double ffma_per_load = tm * tn / (tm / 4 + tn / 4);
    TileWork w;
    w.tile_m = c.bm;
    w.tile_n = c.bn;
    w.ctas_per_sm = ctas_per_sm(a, threads_of(c), smem_bytes_of(c), register_estimate(c));
    w.efficiency = (kFfmaRate - kLoadCost / ffma_per_load) * (c.stages == 2 ? 1.0 : kOneStage) *
                   (c.wm * c.wn >= 64 * 64 ? 1.0 : kNarrowWarpTile);
    // One k-tile of A and B is fetched into registers while the other is multiplied.
    w.bytes_in_flight = double((c.bm + c.bn) * c.bk * 4);
    // The first tile's loads, then C written from registers.
    w.tile_overhead_us = 1.0 + epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    return w;
  }
};

const SimtFamily& simt_family() {
  static const SimtFamily family;
  return family;
}

}  // namespace

GEMMTUNE_REGISTER_FAMILY(simt_family())

}  // namespace gemmtune
