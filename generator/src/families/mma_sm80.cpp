// The Ampere tensor-core family (templates/mma_sm80.cuh): bf16/f16 with f32 accumulation through
// cp.async, ldmatrix and mma.sync, for sm_80 and later (on sm_90 beside wgmma_sm90).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "raster.h"
#include "schedule.h"

namespace gemmtune {
namespace {

int64_t warps_of(const KernelConfig& c) {
  return (c.at("BM") / c.at("WM")) * (c.at("BN") / c.at("WN"));
}
int64_t threads_of(const KernelConfig& c) {
  return 32 * warps_of(c);
}

// Mirrors mma_sm80::Kernel::SMEM_BYTES: STAGES tiles of A and B, 16-bit values, no padding, and
// with split-K a word that says which part arrived last.
int64_t smem_bytes_of(const KernelConfig& c) {
  return c.at("STAGES") * (c.at("BM") + c.at("BN")) * c.at("BK") * 2 +
         (c.at("SPLITS") > 1 ? 16 : 0);
}

// Output tiles, k-tiles of one, and the parts K is cut into (at most one per k-tile, as the
// kernel's schedule::make_work clamps them).
struct Units {
  int64_t tiles, k_tiles, parts;
};
Units units_of(const KernelConfig& c, const Problem& p) {
  Units u;
  u.tiles = ceil_div(p.m, c.at("BM")) * ceil_div(p.n, c.at("BN"));
  u.k_tiles = ceil_div(p.k, c.at("BK"));
  u.parts = std::min(c.at("SPLITS"), u.k_tiles);
  return u;
}

// Split-K partial sums (a slot of f32 tile per part) and a counter per tile (mma_sm80.cuh,
// partial_of and reduce_parts).
uint64_t workspace_bytes_of(const KernelConfig& c, const Units& u) {
  return u.parts > 1 ? uint64_t(u.tiles * u.parts * c.at("BM") * c.at("BN") * 4) : 0;
}
uint64_t counter_bytes_of(const Units& u) {
  return u.parts > 1 ? uint64_t(u.tiles * 4) : 0;
}

// Registers a thread needs: f32 accumulators, two sets of fragments (one read while the other is
// multiplied), and up to 56 for addresses, copies and the loop (ptxas, sm_80 to sm_90, every
// candidate: 225-255 for 64x64 warp tiles, docs/PERF.md); split-K's fixup 16 more (64x64 warp
// tiles in parts spill 8-44 registers on sm_90a).
int64_t register_estimate(const KernelConfig& c) {
  const int64_t wm = c.at("WM"), wn = c.at("WN");
  return wm * wn / 32 + (wm + wn) / 2 + 56 + (c.at("SPLITS") > 1 ? 16 : 0);
}

// 16-byte chunks of one operand's stage in the order they are copied: every thread copies whole
// chunks and as many as the others (Operand::ROW_STEP, PER_THREAD).
bool copies_divide_evenly(int64_t mn, int64_t bk, bool k_major, int64_t threads) {
  const int64_t rows = k_major ? mn : bk, chunks = (k_major ? bk : mn) / 8;
  return threads % chunks == 0 && rows % (threads / chunks) == 0;
}

// Values per global copy: 8 (16-byte cp.async) when the problem is 16-byte aligned, else the
// widest its alignment allows (1: plain loads).
int64_t widest_vector(const Problem& p) {
  return std::clamp<int64_t>(p.align / 2, 1, 8);
}

class MmaSm80Family final : public Family {
 public:
  std::string_view name() const override { return "mma_sm80"; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (!one_type_of(problem, {DataType::f16, DataType::bf16}))
      return "the mma_sm80 family computes f16 and bf16, every operand of one type";
    if (arch.cc < 80) return "the mma_sm80 family needs sm_80 or newer (cp.async, bf16 mma.sync)";
    return {};
  }

  SearchSpace space(const Problem& problem, const ArchInfo& arch) const override {
    SearchSpace s;
    s.family = "mma_sm80";
    s.params = {
        {"BM", {64, 128, 256}},      // block tile along M
        {"BN", {32, 64, 128, 256}},  // along N (32: few columns, as in decoding)
        {"BK", {32, 64}},
        {"WM", {32, 64}},  // warp tile
        {"WN", {32, 64}},
        {"STAGES", {4, 3, 5, 2}, true},  // depth of the cp.async ring (refinement: 4 first)
        {"GROUP", {8}},  // tiles per raster group along M (a kernel parameter; one value searched)
        {"VEC", {8, 4, 2, 1}},  // values per global copy, from the alignment
        // Parts of K where the tiles leave SMs idle: blocks wait through the whole chain of
        // k-tiles.
        {"SPLITS", few_tiles(problem, arch) ? std::vector<int64_t>{1, 2, 3, 4, 6, 8}
                                            : std::vector<int64_t>{1}},
    };
    s.constraints = {
        {"warps_tile_block", "warp tiles divide the block tile: BM % WM == 0, BN % WN == 0",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("BM") % c.at("WM") == 0 && c.at("BN") % c.at("WN") == 0;
         }},
        {"warp_count", "4 or 8 warps per block",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return warps_of(c) == 4 || warps_of(c) == 8;
         }},
        {"copies_divide_evenly",
         "every thread copies whole 16-byte chunks of each stage, as many as the others",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           const int64_t t = threads_of(c);
           return copies_divide_evenly(c.at("BM"), c.at("BK"), c.op_a == Op::T, t) &&
                  copies_divide_evenly(c.at("BN"), c.at("BK"), c.op_b == Op::N, t);
         }},
        {"vector_alignment", "VEC values per copy need the problem aligned to 2*VEC bytes",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("VEC") * 2 <= p.align;
         }},
        {"widest_vector", "use the widest copy the alignment allows (narrower is never faster)",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("VEC") == widest_vector(p);
         }},
        {"plain_loads_fit",
         "without cp.async (VEC 1) a stage passes through registers: at most 8 chunks a thread",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           const int64_t chunks = (c.at("BM") + c.at("BN")) * c.at("BK") / 8 / threads_of(c);
           return c.at("VEC") > 1 || chunks <= 8;  // sm_80: 10 or more spill at 64x64 warp tiles
         }},
        {"smem_fits", "the stages fit the shared memory of a block",
         [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
           return smem_bytes_of(c) <= a.smem_per_block;
         }},
        {"registers_fit", "estimated registers per thread fit 255 and the block fits an SM",
         [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
           const int64_t regs = register_estimate(c);
           return regs <= 255 && regs * threads_of(c) <= a.regs_per_sm;
         }},
        {"group_size", "raster groups of 1 to 64 tiles",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           return c.at("GROUP") >= 1 && c.at("GROUP") <= 64;
         }},
        // Also keeps the schedule's 32-bit arithmetic (schedule.h) safe: one segment per block,
        // at most 2 * sms blocks, and parts * k-tiles <= 8 * 2^25 (K <= 2^30).
        {"split_k_fills_the_gpu",
         "split-K where the tiles leave SMs idle, into at most two blocks per SM and "
         "no more parts than k-tiles",
         [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
           if (c.at("SPLITS") == 1) return true;
           const Units u = units_of(c, p);
           return u.tiles < a.sms && c.at("SPLITS") <= u.k_tiles &&
                  u.tiles * c.at("SPLITS") <= 2 * a.sms;
         }},
    };
    return s;
  }

  // Large problems: 128x128x32 tiles of four 64x64 warps, 4 stages (64 KB: two blocks per SM on
  // sm_80 and sm_90, one on sm_86/89), the classic Ampere point. A few columns (decoding): 128x32
  // tiles. Otherwise 64x64 tiles, so that the blocks fill the GPU; where even they fill less than
  // half the SMs, the problem waits on its chain of loads: 64x64x64 tiles 5 stages deep, and K cut
  // into parts of at least 5 k-tiles while the parts fit the SMs (bf16 500x300x700 and 768x128x768
  // ran 10.2 and 9.3 us so, 14.3 and 14.4 us on 64x64x32 tiles 3 deep; H100, docs/PERF.md).
  KernelConfig default_config(const Problem& p, const ArchInfo& arch) const override {
    KernelConfig c{"mma_sm80", p.types, p.scaling, p.op_a, p.op_b, {}};
    c.params = {{"GROUP", 8}, {"VEC", widest_vector(p)}, {"SPLITS", 1}};
    auto tile = [&](int64_t bm, int64_t bn, int64_t bk, int64_t wm, int64_t wn, int64_t stages) {
      c.params.insert(
          {{"BM", bm}, {"BN", bn}, {"BK", bk}, {"WM", wm}, {"WN", wn}, {"STAGES", stages}});
    };
    if (p.n <= 32)  // with plain loads (2-byte aligned) BK 32 keeps the copies in registers small
      tile(128, 32, widest_vector(p) > 1 ? 64 : 32, 32, 32, 3);
    else if (ceil_div(p.m, 128) * ceil_div(p.n, 128) >= arch.sms)
      tile(128, 128, 32, 64, 64, 4);
    else if (!latency_bound(p, arch))
      tile(64, 64, 32, 32, 32, 3);
    else {
      tile(64, 64, 64, 32, 32, 5);
      const int64_t tiles = ceil_div(p.m, 64) * ceil_div(p.n, 64), k_tiles = ceil_div(p.k, 64);
      c.params["SPLITS"] = std::clamp<int64_t>(std::min(k_tiles / 5, arch.sms / tiles), 1, 8);
    }
    return c;
  }

  std::string kernel_name(const KernelConfig& c) const override {
    const std::string splits = c.at("SPLITS") > 1 ? fmt::format("_splitk{}", c.at("SPLITS")) : "";
    return fmt::format("gemm_mma80_{}_{}{}_{}x{}x{}_w{}x{}_s{}_g{}_v{}{}", c.types.token(),
                       to_char(c.op_a), to_char(c.op_b), c.at("BM"), c.at("BN"), c.at("BK"),
                       c.at("WM"), c.at("WN"), c.at("STAGES"), c.at("GROUP"), c.at("VEC"), splits);
  }

  // __launch_bounds__(THREADS, 1): without the 1, ptxas for sm_90 spills a register or two to
  // reach an occupancy of its own choosing (e.g. 96 registers and 8 bytes of spills).
  std::string emit(const KernelConfig& c) const override {
    return generated_unit(
        {kernel_name(c), "mma_sm80.cuh", "gemmtune::mma_sm80::Kernel",
         fmt::format("  static constexpr int BM = {}, BN = {}, BK = {}, WM = {}, WN = {};\n"
                     "  static constexpr int STAGES = {}, GROUP = {}, VEC = {}, SPLITS = {};\n"
                     "  static constexpr bool A_T = {}, B_T = {};\n"
                     "  static constexpr int DTYPE = {};\n",
                     c.at("BM"), c.at("BN"), c.at("BK"), c.at("WM"), c.at("WN"), c.at("STAGES"),
                     c.at("GROUP"), c.at("VEC"), c.at("SPLITS"), c.op_a == Op::T, c.op_b == Op::T,
                     int(c.types.a)),
         smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c)), "K::THREADS, 1",
         "  extern __shared__ __align__(128) unsigned char gemmtune_smem[];\n"
         "  K::run(args, gemmtune_smem);\n"});
  }

  // One block per output tile and part of K, plain pointers; split-K's workspace and counters.
  LaunchGeometry geometry(const KernelConfig& c, const Problem& p, const ArchInfo&) const override {
    LaunchGeometry g;
    const Units u = units_of(c, p);
    g.tiles_m = uint32_t(ceil_div(p.m, c.at("BM")));
    g.tiles_n = uint32_t(ceil_div(p.n, c.at("BN")));
    raster_divisors(int(g.tiles_m), int(g.tiles_n), int(c.at("GROUP")), g.divisors);
    g.grid = {grid_extent(u.tiles * u.parts), 1, 1};
    g.workspace_bytes = workspace_bytes_of(c, u);
    g.counter_bytes = counter_bytes_of(u);
    g.block = {uint32_t(threads_of(c)), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    return g;
  }

  std::vector<std::string> template_files() const override {
    return {"gemm_args.h", "common.cuh", "ptx/cp_async.cuh", "ptx/ldmatrix.cuh",
            "ptx/mma.cuh", "schedule.h", "store16.cuh",      "mma_sm80.cuh"};
  }

  // The cost model (generator/cost_model.hpp): mma.sync reaches about 80% of the tensor rate on
  // sm_80-89 with 64x64 warp tiles (public Ampere kernels, PERF-ANCHORS.md), and half the
  // rate of wgmma on Hopper, where ArchInfo's peak is wgmma's; smaller warp tiles load more
  // fragments per FLOP; a pipeline shallower than ~96 K hides memory latency less well; split-K
  // writes partial sums and reads them back.
  TileWork tile_work(const KernelConfig& c, const Problem& p, const ArchInfo& a) const override {
    const double wm = double(c.at("WM")), wn = double(c.at("WN"));
    const double warp_intensity = wm * wn / (wm + wn) / 32.0;  // 1 for 64x64
    const double k_in_flight = double((c.at("STAGES") - 1) * c.at("BK"));
    const double pipeline = k_in_flight >= 96 ? 1.0 : k_in_flight >= 64 ? 0.93 : 0.85;
    TileWork w;
    w.tile_m = c.at("BM");
    w.tile_n = c.at("BN");
    w.ctas_per_sm = ctas_per_sm(a, threads_of(c), smem_bytes_of(c), register_estimate(c));
    w.efficiency = (a.cc >= 90 ? 0.40 : 0.80) * std::sqrt(warp_intensity) * pipeline;
    w.bytes_in_flight = double(smem_bytes_of(c));
    const Units u = units_of(c, p);
    w.k_splits = u.parts;
    w.workspace_bytes = 2.0 * double(workspace_bytes_of(c, u));
    const double epilogue = epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    w.tile_overhead_us = 1.0 + epilogue + (u.parts > 1 ? 2 * epilogue : 0.0);
    return w;
  }
};

}  // namespace

const Family& mma_sm80_family() {
  static const MmaSm80Family family;
  return family;
}

}  // namespace gemmtune
