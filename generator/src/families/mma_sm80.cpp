// The Ampere tensor-core family (templates/mma_sm80.cuh): bf16/f16 with f32 accumulation through
// cp.async, ldmatrix and mma.sync, for sm_80 and later (on sm_90 beside wgmma_sm90); grouped
// problems too (mixture-of-experts layers); f32 of precision tf32 or 3xtf32 on tf32 mma.sync.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "mma_sm80_args.h"
#include "schedule.h"

namespace gemmtune {
namespace {

struct Mma80Params {
  int64_t bm = 0, bn = 0, bk = 0;  // block tile
  int64_t wm = 0, wn = 0;          // warp tile
  int64_t stages = 4;              // depth of the cp.async ring
  int64_t group = 8;               // tiles per raster group along M
  int64_t vec = 8;                 // values per global copy, from the alignment
  int64_t splits = 1;              // parts of K
  int64_t group_table = 0;         // groups in the table (from G; 0: one GEMM)
  int64_t products = 1;            // f32: tf32 products over K, 1 or 3 (from the precision)

  using P = Mma80Params;
  static constexpr std::array fields = {
      ParamField<P>{"BM", &P::bm},
      ParamField<P>{"BN", &P::bn},
      ParamField<P>{"BK", &P::bk},
      ParamField<P>{"WM", &P::wm},
      ParamField<P>{"WN", &P::wn},
      ParamField<P>{"STAGES", &P::stages, true},
      ParamField<P>{"GROUP", &P::group},
      ParamField<P>{"VEC", &P::vec},
      ParamField<P>{"SPLITS", &P::splits},
      ParamField<P>{"GROUP_TABLE", &P::group_table, false, false, true},
      ParamField<P>{"PRODUCTS", &P::products, false, false, true},
  };
};
using P = Mma80Params;
using Config = FamilyConfig<P>;

int64_t warps_of(const Config& c) {
  return (c.bm / c.wm) * (c.bn / c.wn);
}
int64_t threads_of(const Config& c) {
  return 32 * warps_of(c);
}

// f32 is read as tf32, along K alone (ldmatrix moves 16-bit values): an operand stored along M or
// N comes from a transposed copy the launch derives (LaunchPlan::derived_operands).
bool is_tf32(const Config& c) {
  return c.types.a == DataType::f32;
}
bool a_transposed(const Config& c) {
  return is_tf32(c) && c.op_a == Op::N;
}
bool b_transposed(const Config& c) {
  return is_tf32(c) && c.op_b == Op::T;
}
bool a_kmajor(const Config& c) {
  return c.a_t() || a_transposed(c);
}
bool b_kmajor(const Config& c) {
  return !c.b_t() || b_transposed(c);
}
// K in 16-bit halves, as the copies and fragments count it (f32 moves as two).
int64_t bk_halves(const Config& c) {
  return c.bk * element_bytes(c.types.a) / 2;
}

// Mirrors mma_sm80::Kernel::SMEM_BYTES: STAGES tiles of A and B, no padding (or a grouped
// problem's table of the groups, which they hold before the main loop, where larger), and with
// split-K a word that says which part arrived last.
int64_t smem_bytes_of(const Config& c) {
  return std::max(c.stages * (c.bm + c.bn) * bk_halves(c) * 2, 4 * c.group_table) +
         (c.splits > 1 ? 16 : 0);
}

// Output tiles of bm x bn: a grouped problem's as G groups of n / G columns (the cost model's).
int64_t tiles_of(const Problem& p, int64_t bm, int64_t bn) {
  return ceil_div(p.m, bm) * ceil_div(group_columns(p), bn) * p.group_count();
}

// Output tiles, k-tiles of one, and the parts K is cut into (at most one per k-tile, as the
// kernel's schedule::make_work clamps them).
struct Units {
  int64_t tiles, k_tiles, parts;
};
Units units_of(const Config& c, const Problem& p) {
  Units u;
  u.tiles = tiles_of(p, c.bm, c.bn);
  u.k_tiles = ceil_div(p.k, c.bk);
  u.parts = std::min(c.splits, u.k_tiles);
  return u;
}

// Split-K partial sums (a slot of f32 tile per part) and a counter per tile (mma_sm80.cuh,
// partial_of and reduce_parts).
uint64_t workspace_bytes_of(const Config& c, const Units& u) {
  return u.parts > 1 ? uint64_t(u.tiles * u.parts * c.bm * c.bn * 4) : 0;
}
uint64_t counter_bytes_of(const Units& u) {
  return u.parts > 1 ? uint64_t(u.tiles * 4) : 0;
}

// Registers a thread needs: f32 accumulators, two sets of fragments (one read while the other is
// multiplied), and up to 56 for addresses, copies and the loop; split-K's fixup 16 more
// (docs/PERF.md, 'Every mma_sm80 candidate compiles without spills').
constexpr int64_t kRegisterBase = 56;
constexpr int64_t kSplitKRegisters = 16;
int64_t register_estimate(const Config& c) {
  return c.wm * c.wn / 32 + (c.wm + c.wn) / 2 + kRegisterBase +
         (c.splits > 1 ? kSplitKRegisters : 0);
}

// 16-byte chunks of one operand's stage (bk in halves) in the order they are copied: every thread
// copies whole chunks and as many as the others (Operand::ROW_STEP, PER_THREAD).
bool copies_divide_evenly(int64_t mn, int64_t bk, bool k_major, int64_t threads) {
  const int64_t rows = k_major ? mn : bk, chunks = (k_major ? bk : mn) / 8;
  return threads >= chunks && threads % chunks == 0 && rows % (threads / chunks) == 0;
}

// 16-bit values per global copy: 8 (16-byte cp.async) when the problem is 16-byte aligned, else
// the widest its alignment allows (1: plain loads; an f32 problem's are at least 4-byte aligned). A
// grouped problem with op(B) = T stores a group's columns contiguous from its first, which may be
// any column: B's copies start at any element, so plain loads.
int64_t widest_vector(const Problem& p) {
  if (p.grouped() && p.op_b == Op::T) return 1;
  return std::clamp<int64_t>(p.align / 2, 1, 8);
}

// Even 64 x 64 tiles fill less than half the SMs (latency_bound, of a grouped problem's tiles).
bool latency_bound_tiles(const Problem& p, const ArchInfo& arch) {
  return 2 * tiles_of(p, 64, 64) < arch.sms;
}

// The cost model's calibration: on Hopper, whose peak in ArchInfo is wgmma's, tuned kernels reach
// about 40% of it (docs/PERF.md, 'mma.sync on the H100 peaks at two thirds of the wgmma rate');
// 80% on sm_80-89 is an estimate, not measured.
constexpr double kAmperePeakFraction = 0.80;
constexpr double kHopperPeakFraction = 0.40;
// A pipeline shallower than ~96 K hides memory latency less well.
constexpr double kShallowPipeline = 0.93;    // 64 to 95 K in flight
constexpr double kShallowerPipeline = 0.85;  // less
// A grouped problem's block reads the G ends into its table before it knows its group, and so
// before its first loads: one more round trip of latency a tile (an estimate, not measured).
constexpr double kGroupTableUs = 1.0;

// The transposed copies the launch derives first, each read and written once.
double deriving_us(const Config& c, const Problem& p, const ArchInfo& a) {
  const double a_bytes = 4.0 * double(p.m * p.k), b_bytes = 4.0 * double(p.k * p.n);
  const double bytes = (a_transposed(c) ? a_bytes : 0) + (b_transposed(c) ? b_bytes : 0);
  return copies_us(int(a_transposed(c)) + int(b_transposed(c)), bytes, a);
}

// f32 problems: tf32 on tensor cores when the caller opted in (the exact path is simt's). Three
// tf32 products on sm_86 and sm_89 run at two thirds of the CUDA cores' f32 rate (their tensor
// cores do half of sm_80's work a clock, their CUDA cores twice): simt serves 3xtf32 there.
std::string tf32_unsupported_reason(const Problem& p, const ArchInfo& arch) {
  if (p.precision == Precision::exact)
    return "precision exact: the mma_sm80 family computes f32 on tensor cores (precision tf32 or "
           "3xtf32), which keep fewer bits of each product";
  if (p.grouped() || p.epilogue.gated()) return "tf32: no grouped problems or gated epilogues yet";
  const double simt = arch.flops_per_clock_per_sm(DataTypes::uniform(DataType::f32));
  if (arch.flops_per_clock_per_sm(p) < simt)
    return fmt::format(
        "precision 3xtf32 on {}: three tf32 products on its tensor cores ({:g} FLOP a clock an SM) "
        "run slower than f32 on its CUDA cores ({:g}), whose exact kernels serve it",
        arch.name(), arch.flops_per_clock_per_sm(p), simt);
  return {};
}

using Members = std::vector<int64_t P::*>;
const Members kWarps = {&P::bm, &P::bn, &P::wm, &P::wn};

class MmaSm80Family final : public FamilyOf<P> {
 public:
  std::string_view name() const override { return "mma_sm80"; }
  int rank() const override { return 30; }
  // Grouped problems: templates/group_table.cuh, run_groups in templates/mma_sm80.cuh.
  bool takes_groups() const override { return true; }
  bool takes_epilogues() const override { return true; }
  // Gated epilogues: A's gate and up rows in turns in a tile (Operand's GATE_HALVES), store_gated.
  bool takes_gated() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (one_type_of(problem, {DataType::f32})) {
      const std::string why = tf32_unsupported_reason(problem, arch);
      if (!why.empty()) return why;
    } else if (!one_type_of(problem, {DataType::f16, DataType::bf16})) {
      return "the mma_sm80 family computes f16 and bf16, every operand of one type, and f32 as "
             "tf32";
    }
    if (arch.cc < 80) return "the mma_sm80 family needs sm_80 or newer (cp.async, bf16 mma.sync)";
    if (problem.epilogue.gated() && problem.op_a != Op::T)
      return fmt::format(
          "epilogue {}: a gated epilogue needs the weights stored along K (op(A) = T, layout "
          "t_: an nn.Linear's), whose gate and up rows the copies take in turns",
          problem.epilogue.name());
    return {};
  }

  Space<P> space(const Problem& problem, const ArchInfo& arch) const override {
    Space<P> s;
    s.set(&P::bm, {64, 128, 256});
    s.set(&P::bn, {32, 64, 128, 256});  // 32: few columns, as in decoding
    // 64 or 128 bytes of K a row: 16 or 32 f32 values.
    s.set(&P::bk, problem.types.a == DataType::f32 ? std::vector<int64_t>{16, 32}
                                                   : std::vector<int64_t>{32, 64});
    s.set(&P::wm, {32, 64});
    s.set(&P::wn, {32, 64});
    s.set(&P::stages, {4, 3, 5, 2});  // refinement: 4 first
    s.set(&P::group, {8});            // a kernel parameter; one value searched
    s.set(&P::vec, {8, 4, 2, 1});
    // Parts of K where the tiles leave SMs idle: blocks wait through the whole chain of k-tiles.
    s.set(&P::splits, few_tiles(problem, arch) ? std::vector<int64_t>{1, 2, 3, 4, 6, 8}
                                               : std::vector<int64_t>{1});
    s.set(&P::group_table, {group_table_of(problem)});
    s.set(&P::products, {products_of(problem)});
    s.rules = {
        {"warps_tile_block", "warp tiles divide the block tile: BM % WM == 0, BN % WN == 0", kWarps,
         [](const Config& c, const Problem&, const ArchInfo&) {
           return c.bm % c.wm == 0 && c.bn % c.wn == 0;
         }},
        {"warp_count", "4 or 8 warps per block", kWarps,
         [](const Config& c, const Problem&, const ArchInfo&) {
           return warps_of(c) == 4 || warps_of(c) == 8;
         }},
        {"copies_divide_evenly",
         "every thread copies whole 16-byte chunks of each stage, as many as the others",
         kWarps + Members{&P::bk},
         [](const Config& c, const Problem&, const ArchInfo&) {
           const int64_t t = threads_of(c);
           return copies_divide_evenly(c.bm, bk_halves(c), a_kmajor(c), t) &&
                  copies_divide_evenly(c.bn, bk_halves(c), b_kmajor(c), t);
         }},
        {"products_of_precision",
         "f32: one tf32 product over K (precision tf32), three (3xtf32); others one",
         {&P::products},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return c.products == products_of(p);
         }},
        {"grouped_whole_k",
         "a grouped problem's tiles are known on the device alone: no split-K, whose partial sums "
         "and counters the launch sizes per tile",
         {&P::splits},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return !p.grouped() || c.splits == 1;
         }},
        {"vector_alignment",
         "VEC values per copy need the problem aligned to 2*VEC bytes",
         {&P::vec},
         [](const Config& c, const Problem& p, const ArchInfo&) { return c.vec * 2 <= p.align; }},
        {"widest_vector",
         "use the widest copy the alignment allows (narrower is never faster); plain loads for a "
         "grouped problem's op(B) = T, whose groups start at any column",
         {&P::vec},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return c.vec == widest_vector(p);
         }},
        // sm_80: 10 chunks a thread or more spill at 64x64 warp tiles.
        {"plain_loads_fit",
         "without cp.async (VEC 1) a stage passes through registers: at most 8 chunks a thread",
         kWarps + Members{&P::bk, &P::vec},
         [](const Config& c, const Problem&, const ArchInfo&) {
           if (c.vec > 1) return true;
           return threads_of(c) > 0 && (c.bm + c.bn) * bk_halves(c) / 8 / threads_of(c) <= 8;
         }},
        {"smem_fits",
         "the stages fit the shared memory of a block",
         {&P::bm, &P::bn, &P::bk, &P::stages, &P::splits, &P::group_table},
         [](const Config& c, const Problem&, const ArchInfo& a) {
           return smem_bytes_of(c) <= a.smem_per_block;
         }},
        {"registers_fit", "estimated registers per thread fit 255 and the block fits an SM",
         kWarps + Members{&P::splits},
         [](const Config& c, const Problem&, const ArchInfo& a) {
           const int64_t regs = register_estimate(c);
           return regs <= 255 && regs * threads_of(c) <= a.regs_per_sm;
         }},
        {"group_size",
         "raster groups of 1 to 64 tiles",
         {&P::group},
         [](const Config& c, const Problem&, const ArchInfo&) {
           return c.group >= 1 && c.group <= 64;
         }},
        // Also keeps the schedule's 32-bit arithmetic (schedule.h) safe: one segment per block,
        // at most 2 * sms blocks, and parts * k-tiles <= 8 * 2^25 (K <= 2^30).
        {"split_k_fills_the_gpu",
         "split-K where the tiles leave SMs idle, into at most two blocks per SM and "
         "no more parts than k-tiles",
         {&P::bm, &P::bn, &P::bk, &P::splits},
         [](const Config& c, const Problem& p, const ArchInfo& a) {
           if (c.splits == 1) return true;
           const Units u = units_of(c, p);
           return u.tiles < a.sms && c.splits <= u.k_tiles && u.tiles * c.splits <= 2 * a.sms;
         }},
    };
    return s;
  }

  // Large problems: 128x128x32 tiles of four 64x64 warps, 4 stages (64 KB: two blocks per SM on
  // sm_80 and sm_90, one on sm_86/89), the classic Ampere point. A few columns (decoding): 128x32
  // tiles. Otherwise 64x64 tiles, so that the blocks fill the GPU; where even they fill less than
  // half the SMs, the problem waits on its chain of loads: 64x64x64 tiles 5 stages deep, and K cut
  // into parts of at least 5 k-tiles while the parts fit the SMs (docs/PERF.md, 'Split-K makes
  // mma_sm80 the kernel of small unaligned problems'). A grouped problem is G groups of n / G
  // columns (a few: decode) and K whole.
  Config default_of(const Problem& p, const ArchInfo& arch) const override {
    Config c = Config::of(p);
    c.group = 8, c.vec = widest_vector(p), c.splits = 1, c.group_table = group_table_of(p);
    c.products = products_of(p);
    // bk: K of a 16-bit tile; f32 takes as many bytes (half the values).
    auto tile = [&](int64_t bm, int64_t bn, int64_t bk, int64_t wm, int64_t wn, int64_t stages) {
      c.bm = bm, c.bn = bn, c.bk = bk * 2 / element_bytes(p.types.a), c.wm = wm, c.wn = wn,
      c.stages = stages;
    };
    if (group_columns(p) <= 32)  // with plain loads BK 32 keeps the copies in registers small
      tile(128, 32, widest_vector(p) > 1 ? 64 : 32, 32, 32, 3);
    else if (tiles_of(p, 128, 128) >= arch.sms)
      tile(128, 128, 32, 64, 64, 4);
    else if (!latency_bound_tiles(p, arch))
      tile(64, 64, 32, 32, 32, 3);
    else {
      tile(64, 64, 64, 32, 32, 5);
      const int64_t tiles = tiles_of(p, 64, 64), k_tiles = ceil_div(p.k, 64);
      if (!p.grouped())
        c.splits = std::clamp<int64_t>(std::min(k_tiles / 5, arch.sms / tiles), 1, 8);
    }
    return c;
  }

  std::string name_of(const Config& c) const override {
    const std::string splits = c.splits > 1 ? fmt::format("_splitk{}", c.splits) : "";
    const std::string groups = c.group_table ? fmt::format("_groups{}", c.group_table) : "";
    const std::string tf32 = !is_tf32(c) ? "" : c.products == 3 ? "_3xtf32" : "_tf32";
    return fmt::format("gemm_mma80_{}{}_{}{}_{}x{}x{}_w{}x{}_s{}_g{}_v{}{}{}", c.types.token(),
                       tf32, to_char(c.op_a), to_char(c.op_b), c.bm, c.bn, c.bk, c.wm, c.wn,
                       c.stages, c.group, c.vec, splits, groups);
  }

  // __launch_bounds__(THREADS, 1): without the 1, ptxas for sm_90 spills a register or two to
  // reach an occupancy of its own choosing (e.g. 96 registers and 8 bytes of spills).
  UnitSource unit_of(const Config& c, const ArchInfo&) const override {
    return {"mma_sm80.cuh", "", "gemmtune::mma_sm80::Kernel",
            // A_T: A stored along K, B_T: B not (the operands as the kernel reads them).
            fmt::format("  static constexpr bool A_T = {}, B_T = {};\n"
                        "  static constexpr int DTYPE = {};\n",
                        a_kmajor(c), !b_kmajor(c), int(c.types.a)),
            smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c)) +
                threads_static_assert(threads_of(c)),
            "K::THREADS, 1",
            "  extern __shared__ __align__(128) unsigned char gemmtune_smem[];\n"
            "  K::run(args, gemmtune_smem);\n"};
  }

  ArgsLayout args_layout() const override {
    return {"Mma80Args",
            sizeof(Mma80Args),
            offsetof(Mma80Args, core),
            {GEMMTUNE_ARGS_MEMBER(Mma80Args, core), GEMMTUNE_ARGS_MEMBER(Mma80Args, tiling)}};
  }

  // One block per output tile and part of K, plain pointers; split-K's workspace and counters.
  // A grouped problem's column tiles are known on the device alone: a block for each that there
  // can be (each group at most one partial tile more than n / BN), swept GROUP column tiles at a
  // time down all of M (run_groups).
  LaunchPlan plan_of(const Config& c, const Problem& p, const ArchInfo&) const override {
    LaunchPlan g;
    const Units u = units_of(c, p);
    g.tiles_m = uint32_t(ceil_div(p.m, c.bm));
    g.tiles_n = uint32_t(ceil_div(group_columns(p), c.bn) * p.group_count());
    GemmTiling tiling = tiling_of(g.tiles_m, g.tiles_n, int(c.group));
    if (c.group_table > 0) {
      const int64_t column_tiles = ceil_div(p.n, c.bn) + p.groups;
      g.grid = {grid_extent(int64_t(g.tiles_m) * column_tiles), 1, 1};
      tiling = tiling_of(column_tiles, g.tiles_m, int(c.group));  // the sides swapped
      std::swap(tiling.tiles_m, tiling.tiles_n);
    } else {
      g.grid = {grid_extent(u.tiles * u.parts), 1, 1};
    }
    g.workspace_bytes = workspace_bytes_of(c, u);
    g.counter_bytes = counter_bytes_of(u);
    g.block = {uint32_t(threads_of(c)), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    g.args = args_layout();
    g.blocks.push_back(ArgsBlock::of(g.args.offset_of("tiling"), tiling));
    if (a_transposed(c)) g.derived_operands.push_back({Operand::a, Derived::transposed});
    if (b_transposed(c)) g.derived_operands.push_back({Operand::b, Derived::transposed});
    return g;
  }

  std::vector<std::string> template_files() const override { return {"mma_sm80.cuh"}; }

  // Smaller warp tiles load more fragments per FLOP; a shallow pipeline hides memory latency less
  // well; split-K writes partial sums and reads them back; a grouped problem's tiles are G groups
  // of n / G columns (roofline, group_columns), each a block that first makes the group table.
  TileWork work_of(const Config& c, const Problem& p, const ArchInfo& a) const override {
    const double wm = double(c.wm), wn = double(c.wn);
    const double warp_intensity = wm * wn / (wm + wn) / 32.0;  // 1 for 64x64
    const double k_in_flight = double((c.stages - 1) * c.bk);
    const double pipeline = k_in_flight >= 96   ? 1.0
                            : k_in_flight >= 64 ? kShallowPipeline
                                                : kShallowerPipeline;
    TileWork w;
    w.tile_m = c.bm;
    w.tile_n = c.bn;
    w.ctas_per_sm = ctas_per_sm(a, threads_of(c), smem_bytes_of(c), register_estimate(c));
    w.efficiency = (a.cc >= 90 ? kHopperPeakFraction : kAmperePeakFraction) *
                   std::sqrt(warp_intensity) * pipeline;
    w.bytes_in_flight = double(smem_bytes_of(c));
    if (is_tf32(c)) w.flops_per_clock = a.tf32_flops_per_clock_per_sm() / double(c.products);
    w.setup_us = deriving_us(c, p, a);
    const Units u = units_of(c, p);
    w.k_splits = u.parts;
    w.workspace_bytes = 2.0 * double(workspace_bytes_of(c, u));
    const double epilogue = epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    w.tile_overhead_us = 1.0 + epilogue + (u.parts > 1 ? 2 * epilogue : 0.0) +
                         (c.group_table > 0 ? kGroupTableUs : 0.0);
    return w;
  }
};

const MmaSm80Family& mma_sm80_family() {
  static const MmaSm80Family family;
  return family;
}

}  // namespace

GEMMTUNE_REGISTER_FAMILY(mma_sm80_family())

}  // namespace gemmtune
