// The Hopper family (templates/wgmma_sm90.cuh): bf16/f16 with f32 accumulation, float8
// (e4m3/e5m2) with tensor, row or block scales, promoted into f32 (wgmma_sm90/promotion.cuh),
// and f32 read as tf32, once or three times (3xTF32); TMA + wgmma.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "families.hpp"
#include "gemmtune/generator/util.hpp"
#include "raster.h"
#include "schedule.h"
#include "wgmma_sm90/args.h"
#include "wgmma_sm90/layout.h"

namespace gemmtune {
namespace {

// The parameters, in the order the space enumerates them (the ranked search breaks the cost
// model's ties by that order, so it is kept as the tuned results were measured with).
struct WgmmaParams {
  int64_t bm = 0, bn = 0, swap = 0;  // problem tile along M and N; SWAP: N on wgmma's N
  int64_t wg = 1, ws = 1, pingpong = 0, occupancy = 1;
  int64_t schedule = schedule::DATA_PARALLEL, splits = 1, cluster_k = 1;
  int64_t stages = 4, cluster = 11, raster = 0, group = 8, tma_store = 0, ksub = 1, reads_c = 0;
  int64_t promote = 0, overlap = 0, group_table = 0, products = 1, staged_scales = 0;

  using P = WgmmaParams;
  static constexpr std::array fields = {
      ParamField<P>{"BM", &P::bm},
      ParamField<P>{"BN", &P::bn},
      ParamField<P>{"SWAP", &P::swap, false, true},
      ParamField<P>{"STAGES", &P::stages, true},
      ParamField<P>{"WG", &P::wg},                  // consumer warpgroups
      ParamField<P>{"WS", &P::ws, false, true},     // 1: warp-specialized persistent, 0: multistage
      ParamField<P>{"CLUSTER", &P::cluster, true},  // CTAs along M x along N: 11, 21, 12
      ParamField<P>{"RASTER", &P::raster},          // 0: sweep tiles along M first, 1: along N
      ParamField<P>{"GROUP", &P::group, true},      // tiles per raster group
      ParamField<P>{"EPILOGUE", &P::tma_store, true},        // 1: TMA stores, 0: from registers
      ParamField<P>{"SCHEDULE", &P::schedule},               // schedule::Mode
      ParamField<P>{"SPLITS", &P::splits},                   // split-K parts
      ParamField<P>{"CLUSTER_K", &P::cluster_k},             // CTAs of a cluster that split K
      ParamField<P>{"PINGPONG", &P::pingpong, false, true},  // consumers take turns on tiles
      ParamField<P>{"OCCUPANCY", &P::occupancy},             // CTAs per SM
      ParamField<P>{"KSUB", &P::ksub, true},                 // 64-K blocks a stage
      ParamField<P>{"READS_C", &P::reads_c, false, true},    // the code that applies beta != 0
      // float8: k-blocks summed before promotion (0: f16, bf16)
      ParamField<P>{"PROMOTE", &P::promote, true, false, true},
      // float8: two partial sums take turns, one promoted while the other's wgmma run
      ParamField<P>{"OVERLAP", &P::overlap, true, true, true},
      // a grouped problem's groups the kernel's table holds (derived from G; 0: one GEMM)
      ParamField<P>{"GROUP_TABLE", &P::group_table, false, false, true},
      // f32: tf32 products over K, 1 or 3 (3xTF32; derived from the problem's precision)
      ParamField<P>{"PRODUCTS", &P::products, false, false, true},
      // float8 block scales: into each stage by TMA (1), or loaded a k-block ahead (0)
      ParamField<P>{"STAGED_SCALES", &P::staged_scales, true, true, true},
  };
};
using P = WgmmaParams;
using Config = FamilyConfig<P>;

// ---- what a configuration is (its sizes come from the kernel's own layout.h) ----

// The sizes that do not depend on shared memory (C_BUFFERS left 0).
wgmma_sm90::Shape sides_of(const Config& c) {
  return {int(c.bm),
          int(c.bn),
          int(c.stages),
          int(c.wg),
          c.swap != 0,
          c.ws != 0,
          int(c.tma_store),
          0,
          int(c.cluster_k),
          int(c.ksub),
          c.pingpong != 0,
          element_bytes(c.types.a),
          element_bytes(c.types.d),
          int(c.group_table),
          c.tma_store != 0 && c.epilogue.bias == Bias::m,
          c.scaling == Scaling::block && c.staged_scales != 0};
}
wgmma_sm90::Shape shape_of(const Config& c, const ArchInfo& arch) {
  wgmma_sm90::Shape s = sides_of(c);
  s.C_BUFFERS = wgmma_sm90::c_buffers(s, int(arch.smem_per_block));
  return s;
}
int64_t smem_bytes_of(const Config& c, const ArchInfo& arch) {
  return wgmma_sm90::smem_bytes(shape_of(c, arch));
}
int64_t tile_rows(const Config& c) {
  return wgmma_sm90::tile_rows(sides_of(c));
}
int64_t tile_cols(const Config& c) {
  return wgmma_sm90::tile_cols(sides_of(c));
}
int64_t stage_k(const Config& c) {
  return wgmma_sm90::stage_k(sides_of(c));
}
int64_t blocks_per_warpgroup(const Config& c) {
  return wgmma_sm90::blocks_per_warpgroup(sides_of(c));
}
int64_t accumulators(const Config& c) {
  return wgmma_sm90::accumulators(sides_of(c));
}
int64_t row_warpgroups(const Config& c) {
  return wgmma_sm90::row_warpgroups(sides_of(c));
}
int64_t cluster_m(const Config& c) {
  return c.cluster / 10;
}
int64_t cluster_n(const Config& c) {
  return c.cluster % 10;
}
int64_t cluster_size(const Config& c) {
  return cluster_m(c) * cluster_n(c);
}
int64_t cluster_ctas(const Config& c) {
  return cluster_size(c) * c.cluster_k;
}
bool is_fp8(const Config& c) {
  return element_bytes(c.types.a) == 1;
}
bool is_tf32(const Config& c) {
  return c.types.a == DataType::f32;
}
// Float8 keeps one partial sum beside each accumulator, or two with OVERLAP (promotion.cuh):
// `sets` of them (the accumulators too) fit 192 registers, 96 with three consumer warpgroups,
// leaving the consumer's 240 (160) enough for the rest. Two 64-row blocks a consumer that do not
// fit so take them in waves through one block's partial sum (layout.h, fp8_in_waves).
bool fp8_in_waves(const Config& c) {
  return wgmma_sm90::fp8_in_waves(sides_of(c));
}
bool fp8_sums_fit(const Config& c, int64_t sets) {
  const int64_t partial = fp8_in_waves(c) ? accumulators(c) / 2 : accumulators(c);
  return accumulators(c) + (sets - 1) * partial <= wgmma_sm90::fp8_sum_registers(sides_of(c));
}
// P (the 64-row side) is op(A) when swapped, else op(B)^T; Q the other. K-major: stored along K,
// or read from a copy stored so (tf32 wgmma reads K-major operands alone: the launch derives a
// transposed copy of an f32 operand stored along M or N).
bool a_transposed(const Config& c) {
  return is_tf32(c) && c.op_a == Op::N;
}
bool b_transposed(const Config& c) {
  return is_tf32(c) && c.op_b == Op::T;
}
bool a_kmajor(const Config& c) {
  return c.op_a == Op::T || a_transposed(c);
}
bool b_kmajor(const Config& c) {
  return c.op_b == Op::N || b_transposed(c);
}
bool q_kmajor(const Config& c) {
  return c.swap ? b_kmajor(c) : a_kmajor(c);
}
// The columns (tokens) a tile may need to cover: n, or a group's. A group of a skewed routing
// holds several times the mean, and a tile that covers it reads its weights once: up to eight
// times the mean, at least 64, which costs decode nothing (its wgmma stay far below the tensor
// rate there: 64 columns are 64 FLOP a byte of weights).
int64_t columns_needed(const Problem& p) {
  if (!p.grouped()) return p.n;
  return std::min(p.n, std::max<int64_t>(64, 8 * group_columns(p)));
}
// The longest tile sides the problem needs: rows in 64s, columns in 8s (K-major Q) or 64s.
int64_t rows_needed(const Config& c, const Problem& p) {
  return round_up(c.swap ? p.m : columns_needed(p), 64);
}
int64_t cols_needed(const Config& c, const Problem& p) {
  return round_up(c.swap ? columns_needed(p) : p.m, q_kmajor(c) ? 8 : 64);
}
// Which operand a cluster of two shares: CTAs along M share B's tile, along N A's.
bool shares_a(const Config& c) {
  return cluster_n(c) == 2;
}
bool shares_b(const Config& c) {
  return cluster_m(c) == 2;
}
// Tiles are swept along the longer of M and N first. A grouped problem's GROUP column tiles at a
// time down all of M: each group's weights then stream once past its tokens, which stay in L2
// (docs/PERF.md, 'Grouped tiles sweep down M, GROUP column tiles at a time').
int64_t raster_of(const Problem& p) {
  return p.grouped() || p.m < group_columns(p) ? 1 : 0;
}
// A tile (its M tiles, along N at most one more a group than one GEMM's of n columns: the groups'
// partial tiles), which bounds a grouped launch's work units.
int64_t grouped_super_tiles(const Config& c, const Problem& p) {
  return ceil_div(ceil_div(p.m, c.bm), cluster_m(c)) * (ceil_div(p.n, c.bn) + p.groups);
}
int64_t tiles_of(const Problem& p, int64_t bm, int64_t bn) {
  return ceil_div(p.m, bm) * ceil_div(group_columns(p), bn) * p.group_count();
}

struct Units {
  int64_t tiles_m, tiles_n, super_tiles, k_blocks, workers;
};

// Work units of the tile schedule (cluster-sized groups of tiles) and the most workers a
// persistent launch has (one CTA per SM, whole clusters).
Units units_of(const Config& c, const Problem& p, const ArchInfo& arch) {
  Units u;
  u.tiles_m = ceil_div(p.m, c.bm);
  u.tiles_n = ceil_div(group_columns(p), c.bn) * p.group_count();
  u.super_tiles = ceil_div(u.tiles_m, cluster_m(c)) * ceil_div(u.tiles_n, cluster_n(c));
  u.k_blocks = ceil_div(p.k, stage_k(c)) * c.products;  // 3xTF32: K three times over
  u.workers = std::max<int64_t>(1, arch.sms / cluster_ctas(c)) * c.occupancy;
  return u;
}

// The share of the workers' rounds over the tiles that does work (1: whole waves).
double wave_efficiency(const Units& u) {
  const int64_t rounds = ceil_div(u.super_tiles, u.workers);
  return double(u.super_tiles) / double(rounds * u.workers);
}

// Split-K partial sums and counters (templates/wgmma_sm90/parts.cuh, partial_of and counter_of).
struct Workspace {
  uint64_t scratch = 0, counters = 0;
};
Workspace workspace_of(const Config& c, const Units& u) {
  int64_t counters = 0, slots = 0;
  if (c.schedule == schedule::SPLIT_K && c.splits > 1) {
    counters = u.super_tiles;
    slots = u.super_tiles * std::min(c.splits, u.k_blocks);
  } else if (c.schedule == schedule::STREAM_K) {
    counters = std::min(u.super_tiles, 2 * u.workers);  // a bound for any grid of <= `workers`
    slots = 2 * u.workers;
  }
  if (slots == 0) return {};
  const int64_t consumers = cluster_size(c) * row_warpgroups(c);
  return {uint64_t(slots * cluster_size(c) * tile_rows(c) * tile_cols(c) * 4),
          uint64_t(counters * consumers * 4)};
}

// The launch packs an operand whose columns do not start on 16 bytes into an aligned copy first
// (copies_us, one launch for both). An operand read from a transposed copy (deriving_us) is not
// packed.
double packing_us(const Config& c, const Problem& p, const ArchInfo& a) {
  auto bytes = [&](bool copied, int64_t ld, int64_t rows, int64_t cols, DataType type) {
    return copied || tma_ld_aligned(ld, type) ? 0.0 : double(rows * cols * element_bytes(type));
  };
  const double packed = bytes(a_transposed(c), p.lda, p.rows_a(), p.cols_a(), p.types.a) +
                        bytes(b_transposed(c), p.ldb, p.rows_b(), p.cols_b(), p.types.b);
  return packed > 0 ? copies_us(1, packed, a) : 0.0;
}

// The copies the launch derives first (TensorMapPlan::derived): 3xTF32's low parts of A and B, and
// transposed copies of an f32 operand stored along M or N, each read and written once.
double deriving_us(const Config& c, const Problem& p, const ArchInfo& a) {
  const double a_bytes = 4.0 * double(p.m * p.k), b_bytes = 4.0 * double(p.k * p.n);
  double bytes = 0;
  int copies = 0;
  for (const auto& [copied, size] :
       {std::pair{a_transposed(c), a_bytes}, std::pair{b_transposed(c), b_bytes},
        std::pair{c.products == 3, a_bytes}, std::pair{c.products == 3, b_bytes}})
    if (copied) bytes += size, ++copies;
  return copies_us(copies, bytes, a);
}

// The width of `tiles` even tiles over a side: the narrowest multiple of 16 (whole swizzle atoms
// in either half of a multicast tile) that covers it.
int64_t even_width(int64_t side, int64_t tiles) {
  return round_up(ceil_div(side, tiles), 16);
}
// Whether a tile width covers its side in as many even tiles as it takes: 144 for 2304 (16
// tiles), 176 for 1408 (8). Such widths size the tiles to the SM count where the usual ones
// leave a round part empty (docs/PERF.md, 'Mid-size shapes need tiles sized to the SM count').
bool even_split(int64_t side, int64_t width) {
  return even_width(side, ceil_div(side, width)) == width;
}
// Every even width of a side from 64 to 256, widest first. The fewest tiles of at most w cover
// the side evenly at even_width(side, ceil(side / w)) <= w, so each comes from one w in 16-steps
// (not one per tile count: a side may be 2^30).
std::vector<int64_t> even_widths(int64_t side) {
  std::vector<int64_t> out;
  for (int64_t w = 256; w >= 64; w -= 16) {
    const int64_t width = even_width(side, ceil_div(side, w));
    if (width >= 64 && (out.empty() || out.back() != width)) out.push_back(width);
  }
  return out;
}

// Tile sizes worth trying along a dimension of size d: the usual ones, the non-powers of two
// that cut wave quantization, the widths that split d evenly from 64 to 256, d itself rounded to
// 8 when it fits one tile (skinny problems), and where the problem is bound by latency every
// narrower multiple of 8 (the default there narrows wgmma N to whatever multiple of 8 fills
// about half the SMs: bf16 tn 500x300x700 takes 40).
std::vector<int64_t> tile_values(int64_t d, bool narrow) {
  std::vector<int64_t> v = {64, 96, 128, 160, 192, 224, 256};
  if (narrow) v.insert(v.begin(), {8, 16, 24, 32, 40, 48, 56});
  const auto add = [&v](int64_t w) {
    if (std::find(v.begin(), v.end(), w) == v.end()) v.push_back(w);
  };
  for (const int64_t w : even_widths(d)) add(w);
  if (d <= 256) add(round_up(d, 8));
  return v;
}

// What wgmma N does to a consumer's rate: a narrower N reads more shared memory per FLOP
// ((64 + N) / 64N).
double wgmma_n_rate(double n) {
  return std::sqrt(1.25 * n / (64 + n));
}

// Eight waves of 128 x 128 tiles or more: where the raster group decides L2 reuse.
bool many_waves(const Problem& p, const ArchInfo& arch) {
  return tiles_of(p, 128, 128) >= 8 * arch.sms;
}

// The skinny side of a problem goes on wgmma's N (steps of 8), not on 64-row blocks.
bool skinny_n(const Problem& p) {
  return group_columns(p) <= 64;
}
bool skinny_m(const Problem& p) {
  return p.m <= 64;
}
// A side that one wgmma N covers, on a problem whose 128x128 tiles leave SMs idle: streamed like
// a skinny one, 64 rows a tile and K split (docs/PERF.md, 'Narrow problems with few tiles stream
// like decode').
bool narrow_few(const Problem& p, const ArchInfo& arch) {
  return std::min(p.m, group_columns(p)) <= 128 && few_tiles(p, arch);
}

// ---- the cost model's calibration (docs/PERF.md, 'The cost model is fitted to measured
// timings', unless said) ----

// The best kernel (wgmma N 256, two consumer warpgroups, warp-specialized, TMA stores) reaches
// about 70% of the nominal peak (docs/PERF.md, 'The best Hopper kernels run at about 70% of the
// bf16 peak').
constexpr double kPeakFraction = 0.70;
// By consumer warpgroups: one cannot keep the tensor cores busy; three make up for their
// narrower wgmma (1.03 fitted to the suite's compute-bound tunings).
constexpr double kByWarpgroups[] = {0, 0.90, 1.0, 1.03};
// The multistage schedule against warp specialization.
constexpr double kMultistage = 0.85;
// A cluster's CTAs wait on each other a little.
constexpr double kClustered = 0.995;
// Stream-K's fixups and its L2 misses (docs/PERF.md, 'Stream-K misses in L2: its k-ranges are
// staggered').
constexpr double kStreamKSlowdown = 1.16;
// The epilogues a persistent CTA leaves unhidden per tile: TMA stores most of it hidden,
// register stores one and a half.
constexpr double kTmaStoreEpilogues = 0.3;
constexpr double kRegisterStoreEpilogues = 1.5;
// Ping-pong hides one warpgroup's epilogue under the other's main loop.
constexpr double kPingpongEpilogues = 0.5;
// Partial sums out and back in: a cluster splitting K moves them between shared memories, a
// quarter of what the workspace costs.
constexpr double kClusterKEpilogues = 0.5;
constexpr double kWorkspaceEpilogues = 2.0;

// A round of make_filling's tiles costs their area times how much dearer they compute it than
// 256x128 tiles (docs/PERF.md, 'A partial last wave: the default costs rounds times tile area').
constexpr double kTallTileCost = 1.04;  // 128x192, three consumer warpgroups, TMA stores
constexpr double kWideTileCost = 1.05;  // 192x128, register stores, plus kWideEpilogueK / K
constexpr double kWideEpilogueK = 0.3 * 1024;
constexpr double kStreamedTileCost = 1.15;  // 256x128 tiles in stream-K, spread evenly

// ---- the rules, with the parameters they read ----

using Members = std::vector<int64_t P::*>;
const Members kTile = {&P::bm, &P::bn, &P::swap};
const Members kRows = kTile + Members{&P::wg, &P::pingpong};  // and the accumulators
const Members kUnits = {&P::bm, &P::bn, &P::cluster, &P::ksub, &P::cluster_k, &P::occupancy};
const Members kSmem = kRows + Members{&P::stages, &P::ws, &P::tma_store, &P::cluster_k, &P::ksub};

std::vector<Rule<P>> rules() {
  return {
      {"warpgroup_rows", "a tile's kernel rows are 64 per consumer warpgroup, once or twice", kRows,
       [](const Config& c, const Problem&, const ArchInfo&) {
         const int64_t mw = blocks_per_warpgroup(c);
         return tile_rows(c) % (64 * row_warpgroups(c)) == 0 && (mw == 1 || mw == 2);
       }},
      {"pingpong_takes_two",
       "ping-pong: two consumer warpgroups of the persistent schedule take turns",
       {&P::pingpong, &P::ws, &P::wg},
       [](const Config& c, const Problem&, const ArchInfo&) {
         return !c.pingpong || (c.ws == 1 && c.wg == 2);
       }},
      {"pingpong_needs_turns",
       "ping-pong where every CTA has two tiles or more to take turns on",
       {&P::pingpong, &P::bm, &P::bn},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         return !c.pingpong || tiles_of(p, c.bm, c.bn) >= 2 * a.sms;
       }},
      {"wgmma_n", "wgmma's N (the tile's kernel columns) is a multiple of 8 from 8 to 256", kTile,
       [](const Config& c, const Problem&, const ArchInfo&) {
         return tile_cols(c) % 8 == 0 && tile_cols(c) >= 8 && tile_cols(c) <= 256;
       }},
      {"accumulators_fit",
       "f32 accumulators per consumer thread: 128 at most (96 with 3 warpgroups); float8, with "
       "its one or two partial sums, 192 of all (96)",
       kRows + Members{&P::promote, &P::overlap},
       [](const Config& c, const Problem&, const ArchInfo&) {
         if (is_fp8(c) && c.promote > 0) return fp8_sums_fit(c, c.overlap ? 3 : 2);
         return accumulators(c) <= (c.wg == 3 ? 96 : 128);
       }},
      {"fp8_k_major_streamed",
       "float8: the persistent schedule, one 128-K block a stage, promoted every 1 to 4 k-blocks "
       "(every one where two partial sums take turns), or never with fast accumulation",
       {&P::ws, &P::ksub, &P::promote, &P::overlap},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         if (!is_fp8(c)) return c.promote == 0 && c.overlap == 0;
         if (p.fast_accumulation()) return c.ws == 1 && c.ksub == 1 && c.promote == 0 && !c.overlap;
         return c.ws == 1 && c.ksub == 1 && c.promote >= 1 && c.promote <= 4 &&
                (c.overlap == 0 || c.promote == 1);
       }},
      {"products_of_precision",
       "f32: one tf32 product over K (precision tf32), three (3xtf32); others none of their own",
       {&P::products},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         return c.products == products_of(p);
       }},
      {"staged_scales_are_block_scales",
       "scales come with each stage: block scales only",
       {&P::staged_scales},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         return !c.staged_scales || p.scaling == Scaling::block;
       }},
      {"block_scales_per_tile",
       "block scales: problem n on the 64-row blocks, a tile's m within one or two 128-blocks "
       "(wgmma N at most 128 + gcd(N, 128)), 256 rows at most, 192 where they come with each "
       "stage (a TMA box of their scales holds four more, 256 at most)",
       kTile + Members{&P::staged_scales},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         if (p.scaling != Scaling::block) return true;
         const int64_t n = tile_cols(c), gcd = std::min<int64_t>(n & -n, 128);
         return c.swap == 0 && n <= 128 + gcd && tile_rows(c) <= (c.staged_scales ? 192 : 256);
       }},
      {"waves_promote_every_k_block",
       "float8 tiles of two 64-row blocks a consumer whose partial sums do not fit beside the "
       "accumulators promote them in waves, every k-block, through one block's partial sum",
       kRows + Members{&P::promote, &P::overlap},
       [](const Config& c, const Problem&, const ArchInfo&) {
         if (!is_fp8(c) || c.promote == 0 || !fp8_in_waves(c)) return true;
         return c.promote == 1 && c.overlap == 0;
       }},
      // One consumer warpgroup gets no registers from the producer (255 a thread, the most
      // there is): 128 accumulators leave too few for stream-K's fixup, or split-K's with
      // wgmma N 256 (ptxas spills 8-16 registers; split-K with N 128 does not).
      {"fixup_fits_one_warpgroup",
       "one consumer warpgroup with 128 accumulators: no stream-K, split-K only with wgmma N up "
       "to 128",
       kRows + Members{&P::schedule},
       [](const Config& c, const Problem&, const ArchInfo&) {
         if (c.wg != 1 || accumulators(c) < 128 || c.schedule == schedule::DATA_PARALLEL)
           return true;
         return c.schedule == schedule::SPLIT_K && tile_cols(c) <= 128;
       }},
      {"mn_major_in_chunks",
       "an operand stored along M or N on wgmma's N comes in 64-column chunks", kTile,
       [](const Config& c, const Problem&, const ArchInfo&) {
         return q_kmajor(c) || tile_cols(c) % 64 == 0;
       }},
      {"skinny_side_on_wgmma_n",
       "a side of 64 or less goes on wgmma's N (N: SWAP = 1, M: SWAP = 0), but with block scales",
       {&P::swap},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         if (p.scaling == Scaling::block) return true;  // block_scales_per_tile decides
         if (skinny_n(p) && !skinny_m(p)) return c.swap != 0;
         if (skinny_m(p) && !skinny_n(p)) return c.swap == 0;
         return true;
       }},
      {"tile_not_past_problem",
       "no tile side longer than its dimension needs (rows in 64s, columns in 8s or 64-column "
       "chunks)",
       kTile,
       [](const Config& c, const Problem& p, const ArchInfo&) {
         return tile_rows(c) <= rows_needed(c, p) && tile_cols(c) <= cols_needed(c, p);
       }},
      {"ragged_tiles_for_ragged_sides",
       "wgmma N off the powers of two only where the side is no multiple of 64, where it splits "
       "the side evenly, or under 64 where the problem is bound by latency",
       kTile,
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         const int64_t cols = tile_cols(c), side = c.swap ? group_columns(p) : p.m;
         const bool usual = cols == 64 || cols == 128 || cols == 256 || cols == 192;
         return usual || cols == round_up(side, 8) || side % 64 != 0 || even_split(side, cols) ||
                (cols < 64 && latency_bound(p, a));
       }},
      {"small_tiles_for_few_tiles",
       "64-row tiles and the multistage schedule only where 128x128 tiles leave SMs idle",
       kTile + Members{&P::ws},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         if (tile_rows(c) > 64 && c.ws == 1) return true;
         // Block-scaled float8 keeps a short problem n on the rows: 64 are all it needs.
         if (c.ws == 1 && tile_rows(c) >= rows_needed(c, p)) return true;
         return tiles_of(p, 128, 128) < a.sms;
       }},
      // A side shorter than 128 (a skinny problem) takes the whole side: tile_not_past_problem
      // allows no more, and M = 65536, N = 8 must keep a valid configuration.
      {"large_tiles_for_large_problems",
       "tiles of at least 128 x 128 (or the whole side) where such tiles fill two waves", kTile,
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         if (tiles_of(p, 128, 128) < 2 * a.sms) return true;
         return tile_rows(c) >= std::min<int64_t>(128, rows_needed(c, p)) &&
                tile_cols(c) >= std::min<int64_t>(128, cols_needed(c, p));
       }},
      // Multicast halves what the L2 delivers of the shared operand on every k-block: it pays
      // once the tiles fill half the SMs (a one-wave problem with long K is bound by the L2).
      {"clusters_for_many_tiles",
       "clusters where the tiles fill at least half the SMs",
       {&P::cluster, &P::bm, &P::bn},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         return cluster_size(c) == 1 || 2 * tiles_of(p, c.bm, c.bn) >= a.sms;
       }},
      // A CTA of one round has no next tile to load during its epilogue: the whole ring fills
      // its main loop (docs/PERF.md, 'Mid-size shapes need tiles sized to the SM count').
      {"deep_pipelines_stream",
       "more than 5 stages only to stream a skinny problem's operand (SWAP), where the tiles "
       "leave SMs idle, or where they take one round",
       {&P::stages, &P::swap, &P::bm, &P::bn},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         return c.stages <= 5 || c.swap || few_tiles(p, a) || tiles_of(p, c.bm, c.bn) <= a.sms;
       }},
      {"smem_fits", "the stages fit the shared memory of a block", kSmem,
       [](const Config& c, const Problem&, const ArchInfo& a) {
         return smem_bytes_of(c, a) <= a.smem_per_block;
       }},
      // Two CTAs of three consumer warpgroups would have 64 registers a thread: ptxas spills.
      // Two of two have 80: float8's 32 accumulators with their partial sums spilled 16-848 bytes
      // (grouped decode, wgmma N 64); two of one have 128, where 12 with two partial sums fit.
      {"two_ctas_fit",
       "two CTAs per SM: persistent, at most two consumer warpgroups, small accumulators (with "
       "float8's partial sums: 32 registers of them with two consumer warpgroups, 64 with one), "
       "both in shared memory",
       kSmem + Members{&P::occupancy, &P::promote, &P::overlap},
       [](const Config& c, const Problem&, const ArchInfo& a) {
         if (c.occupancy == 1) return true;
         const int64_t sums = is_fp8(c) && c.promote > 0 ? (c.overlap ? 3 : 2) : 1;
         return c.occupancy == 2 && c.ws == 1 && c.wg <= 2 && accumulators(c) <= 32 &&
                accumulators(c) * sums <= (c.wg == 1 ? 64 : 32) &&
                2 * (smem_bytes_of(c, a) + 1024) <= a.smem_per_sm;
       }},
      {"clusters_need_ws",
       "clusters (TMA multicast) only with the warp-specialized schedule",
       {&P::cluster, &P::ws},
       [](const Config& c, const Problem&, const ArchInfo&) {
         return cluster_size(c) == 1 || c.ws == 1;
       }},
      {"cluster_k_alone",
       "a cluster splits K in two or four for data-parallel tiles of the warp-specialized "
       "schedule, stored from registers, without multicast or ping-pong",
       {&P::cluster_k, &P::cluster, &P::ws, &P::pingpong, &P::tma_store, &P::schedule},
       [](const Config& c, const Problem&, const ArchInfo&) {
         if (c.cluster_k == 1) return true;
         return (c.cluster_k == 2 || c.cluster_k == 4) && cluster_size(c) == 1 && c.ws == 1 &&
                !c.pingpong && c.tma_store == 0 && c.schedule == schedule::DATA_PARALLEL;
       }},
      // Each tile then takes two or four SMs: worth it where the tiles leave most of them idle.
      {"cluster_k_for_few_tiles",
       "a cluster splits K where its CTAs fit one wave, two k-blocks a CTA or more",
       {&P::cluster_k, &P::bm, &P::bn, &P::ksub},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         if (c.cluster_k == 1) return true;
         return c.cluster_k * tiles_of(p, c.bm, c.bn) <= a.sms &&
                ceil_div(p.k, stage_k(c)) >= 2 * c.cluster_k;
       }},
      // The partial sums a cluster of four exchanges stay in registers beside the accumulators:
      // beyond these counts ptxas spilled (bf16 tn 768x128x768, sm_90a: 40-120 bytes with 128
      // accumulators on one consumer warpgroup, 24 with 96 once the descriptors were offsets,
      // 8-56 with 56-96 on two, 32 with 64 on three; none for clusters of two).
      {"cluster_of_four_fits_registers",
       "a cluster of four splits K for at most 88 accumulators a thread (one consumer "
       "warpgroup), 48 (two), 32 (three)",
       kRows + Members{&P::cluster_k},
       [](const Config& c, const Problem&, const ArchInfo&) {
         const int64_t most[] = {0, 88, 48, 32};
         return c.cluster_k != 4 || accumulators(c) <= most[c.wg];
       }},
      {"cluster_has_pairs",
       "a cluster of two needs two tiles along its direction",
       {&P::cluster, &P::bm, &P::bn},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         if (cluster_m(c) == 2) return ceil_div(p.m, c.bm) >= 2;
         if (cluster_n(c) == 2) return ceil_div(group_columns(p), c.bn) >= 2;
         return true;
       }},
      {"shared_half_whole", "a multicast half of a K-major tile is whole 8-row swizzle atoms",
       kTile + Members{&P::cluster},
       [](const Config& c, const Problem&, const ArchInfo&) {
         if (shares_a(c) && a_kmajor(c)) return (c.swap ? tile_rows(c) : tile_cols(c)) % 16 == 0;
         if (shares_b(c) && b_kmajor(c)) return (c.swap ? tile_cols(c) : tile_rows(c)) % 16 == 0;
         return true;
       }},
      {"group_size",
       "raster groups of 1 to 64 tiles",
       {&P::group},
       [](const Config& c, const Problem&, const ArchInfo&) {
         return c.group >= 1 && c.group <= 64;
       }},
      // layout.h, c_chunks: a last chunk that overlaps the one before stores D over C's values
      // that it would then read.
      {"tma_store_layout",
       "TMA stores: warp-specialized, m on wgmma's N, at least a 128-byte chunk of it, in whole "
       "chunks where C is read",
       kTile + Members{&P::tma_store, &P::ws, &P::reads_c},
       [](const Config& c, const Problem&, const ArchInfo&) {
         const int64_t chunk = wgmma_sm90::c_chunk_cols(sides_of(c));
         return c.tma_store == 0 || (c.ws == 1 && !c.swap && tile_cols(c) >= chunk &&
                                     (c.reads_c == 0 || tile_cols(c) % chunk == 0));
       }},
      // A consumer whose rows a group ends inside stores from registers (TmaStore::stays_in_group);
      // with beta != 0 the producer would load C for its TMA stores all the same.
      // store_gated.cuh: each thread multiplies its own gate and up values.
      {"gated_gate_and_up_in_turn",
       "gated: a tile's rows of op(A) are 64 gate and 64 up rows in turn, a pair in each consumer "
       "warpgroup (two 64-row blocks with SWAP, kernel columns in 128s without), stored from "
       "registers, one CTA a tile, op(A) loaded by each CTA itself (a cluster shares B alone)",
       kRows + Members{&P::tma_store, &P::cluster, &P::cluster_k},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         if (!p.epilogue.gated()) return true;
         const bool paired = c.swap ? blocks_per_warpgroup(c) == 2 : tile_cols(c) % 128 == 0;
         return paired && c.tma_store == 0 && cluster_n(c) == 1 && c.cluster_k == 1;
       }},
      // store_tma.cuh writes each chunk twice through its buffers, the pre-activation first; C's
      // chunks would land in the buffers it overwrites.
      {"aux_tma_stores_beta_zero",
       "the pre-activation output (epilogue aux) is stored by TMA only with beta = 0",
       {&P::tma_store, &P::reads_c},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         return !p.epilogue.aux || c.tma_store == 0 || c.reads_c == 0;
       }},
      {"grouped_tma_stores_beta_zero",
       "a grouped problem stores by TMA only with beta = 0 (where a group ends inside a tile, "
       "from registers)",
       {&P::tma_store, &P::reads_c},
       [](const Config& c, const Problem& p, const ArchInfo&) {
         return !p.grouped() || c.tma_store == 0 || c.reads_c == 0;
       }},
      {"raster_along_longer_side",
       "tiles are swept along the longer of M and N first",
       {&P::raster},
       [](const Config& c, const Problem& p, const ArchInfo&) { return c.raster == raster_of(p); }},
      {"schedules_need_ws",
       "split-K and stream-K run on the persistent warp-specialized schedule",
       {&P::schedule, &P::ws},
       [](const Config& c, const Problem&, const ArchInfo&) {
         return c.schedule == schedule::DATA_PARALLEL || c.ws == 1;
       }},
      {"splits_only_for_split_k",
       "SPLITS > 1 exactly with the split-K schedule",
       {&P::splits, &P::schedule},
       [](const Config& c, const Problem&, const ArchInfo&) {
         return (c.splits > 1) == (c.schedule == schedule::SPLIT_K);
       }},
      {"split_k_fills_the_gpu",
       "split-K where the tiles leave SMs idle, into at most two waves of parts",
       kUnits + Members{&P::schedule, &P::splits},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         if (c.schedule != schedule::SPLIT_K) return true;
         const Units u = units_of(c, p, a);
         return u.super_tiles < u.workers && c.splits <= u.k_blocks &&
                u.super_tiles * c.splits <= 2 * u.workers;
       }},
      {"stream_k_has_a_tail", "stream-K where the tiles do not fill whole waves",
       kUnits + Members{&P::schedule},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         if (c.schedule != schedule::STREAM_K) return true;
         const Units u = units_of(c, p, a);
         return u.super_tiles % u.workers != 0;
       }},
      {"schedule_in_int", "the tile schedule's 32-bit arithmetic holds for the problem",
       kUnits + Members{&P::splits},
       [](const Config& c, const Problem& p, const ArchInfo& a) {
         const Units u = units_of(c, p, a);
         return schedule::fits_in_int(u.super_tiles, u.k_blocks, u.workers, c.splits);
       }},
  };
}

// The problem is f32 throughout (validate()); tf32 wgmma reads both operands K-major, and an
// operand stored otherwise comes from a transposed copy the launch makes.
std::string tf32_unsupported_reason(const Problem& p) {
  if (p.precision == Precision::exact)
    return "precision exact: the wgmma family computes f32 on tensor cores (precision tf32 or "
           "3xtf32), which keep fewer bits of each product";
  if (p.grouped() || p.epilogue.gated()) return "tf32: no grouped problems or gated epilogues yet";
  return {};
}

// Float8 wgmma reads both operands K-major; the output is stored as f16, bf16 or f32 (validate()
// has checked the scaling, and that C and D share a type).
std::string fp8_unsupported_reason(const Problem& p) {
  if (p.op_a != Op::T || p.op_b != Op::N)
    return fmt::format(
        "float8 wgmma reads both operands along K: layout tn only (op(A) = T, op(B) = N, "
        "nn.Linear's y = x W^T as \"out tokens in\"), not {}; transpose an operand first",
        p.layout());
  if (p.types.acc != DataType::f32)
    return fmt::format("the float8 kernels sum in f32, not {}", to_string(p.types.acc));
  if (p.types.d != DataType::bf16 && p.types.d != DataType::f16 && p.types.d != DataType::f32)
    return fmt::format("the float8 kernels store bf16, f16 or f32, not {}", to_string(p.types.d));
  return {};
}

class WgmmaSm90Family final : public FamilyOf<P> {
 public:
  std::string_view name() const override { return "wgmma_sm90"; }
  int rank() const override { return 20; }
  // Grouped problems: templates/wgmma_sm90/groups.cuh (the table: templates/group_table.cuh).
  bool takes_groups() const override { return true; }
  bool takes_epilogues() const override { return true; }
  // Gated epilogues: templates/wgmma_sm90/store_gated.cuh, A's loads in mainloop.cuh.
  bool takes_gated() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (element_bytes(problem.types.a) == 1) {
      const std::string why = fp8_unsupported_reason(problem);
      if (!why.empty()) return why;
    } else if (one_type_of(problem, {DataType::f32})) {
      const std::string why = tf32_unsupported_reason(problem);
      if (!why.empty()) return why;
    } else if (!one_type_of(problem, {DataType::f16, DataType::bf16})) {
      return "the wgmma family computes f16 and bf16, every operand of one type, float8, and f32 "
             "as tf32";
    }
    if (arch.cc != 90 || !arch.arch_specific) return "the wgmma family needs sm_90a (Hopper)";
    if (problem.epilogue.gated() && problem.op_a != Op::T)
      return fmt::format(
          "epilogue {}: a gated epilogue needs the weights stored along K (op(A) = T, layout t_: "
          "an nn.Linear's), where TMA can load gate and up rows in turn",
          problem.epilogue.name());
    if (problem.grouped() && problem.op_b == Op::T)
      return "grouped problems need op(B) = N, the tokens stored along K (x as torch keeps it): "
             "a group starts at any column, and TMA faults on a box whose contiguous side starts "
             "off 16 bytes; copy B transposed first";
    return {};
  }

  Space<P> space(const Problem& p, const ArchInfo& arch) const override {
    Space<P> s;
    const bool few = few_tiles(p, arch), narrow = latency_bound(p, arch);
    const int64_t columns = group_columns(p);
    const bool skinny = columns <= 256 || p.m <= 256;
    s.set(&P::bm, tile_values(p.m, narrow));
    // A grouped problem of a few tokens an expert: every narrow wgmma N up to 64 (columns_needed).
    s.set(&P::bn, tile_values(columns, narrow || (p.grouped() && columns <= 64)));
    s.set(&P::swap, columns <= 256 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0});
    s.set(&P::wg, {1, 2, 3});
    s.set(&P::ws, {0, 1});
    s.set(&P::pingpong, {0, 1});
    s.set(&P::occupancy, skinny || few ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1});
    s.set(&P::schedule, {schedule::DATA_PARALLEL, schedule::SPLIT_K, schedule::STREAM_K});
    s.set(&P::splits, few ? std::vector<int64_t>{1, 2, 3, 4, 6, 8} : std::vector<int64_t>{1});
    s.set(&P::cluster_k, few ? std::vector<int64_t>{1, 2, 4} : std::vector<int64_t>{1});
    // Deep pipelines stream a skinny problem's operand, or keep all of a short K in flight.
    // A refinement lists first the values to measure a structure with where the model ties:
    // here the deepest pipeline that fits, up to 8, where the tiles are few or skinny (their
    // winners on the H100 ran 5 to 8 stages deep), else 4.
    s.set(&P::stages, skinny || few ? std::vector<int64_t>{8, 6, 5, 4, 12, 3}
                                    : std::vector<int64_t>{4, 3, 5, 6});
    s.set(&P::cluster, {11, 21, 12});
    s.set(&P::raster, {raster_of(p)});  // derived: along the longer side first
    // How many tile rows run together and share operand rows in L2: it matters where many
    // waves of tiles run one after the other.
    s.set(&P::group,
          many_waves(p, arch) ? std::vector<int64_t>{8, 4, 16} : std::vector<int64_t>{8});
    s.set(&P::tma_store, {1, 0});
    // Two 64-K blocks a stage stream each row of a skinny problem's weights in 256-byte pieces
    // (docs/PERF.md, 'Two 64-K blocks a stage speed decode and small problems').
    s.set(&P::ksub, skinny || few ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1});
    // Derived from beta != 0: the code that reads C costs a kernel with beta = 0 by its presence
    // alone (docs/PERF.md, 'The code that reads C costs beta = 0 kernels 1-2%').
    s.set(&P::reads_c, {p.reads_c ? 1 : 0});
    s.set(&P::promote, {0});
    s.set(&P::overlap, {0});
    s.set(&P::group_table, {group_table_of(p)});
    s.set(&P::products, {products_of(p)});
    s.set(&P::staged_scales, {0});
    if (element_bytes(p.types.a) == 1) narrow_to_fp8(s, p);
    if (p.grouped()) narrow_to_groups(s);
    if (p.epilogue.gated()) narrow_to_gated(s);
    if (p.epilogue.aux && p.reads_c) s.set(&P::tma_store, {0});  // aux_tma_stores_beta_zero
    s.rules = rules();
    return s;
  }

  // A grouped problem's tile count is known on the device alone (groups.cuh): the persistent
  // schedule's data-parallel tiles; clusters only along M, whose pairs share a group. TMA stores
  // only for beta = 0 (grouped_tma_stores_beta_zero).
  static void narrow_to_groups(Space<P>& s) {
    s.set(&P::ws, {1});
    s.set(&P::schedule, {schedule::DATA_PARALLEL});
    s.set(&P::splits, {1});
    s.set(&P::cluster_k, {1});
    s.set(&P::cluster, {11, 21});
  }

  // A gated problem's tiles store from registers, one CTA each, op(A) loaded alone: mainloop.cuh's
  // load_gated does not multicast (gated_gate_and_up_in_turn).
  static void narrow_to_gated(Space<P>& s) {
    s.set(&P::tma_store, {0});
    s.set(&P::cluster, {11, 21});
    s.set(&P::cluster_k, {1});
  }

  // The default made for the problem's epilogue: a pre-activation output with beta != 0 stores
  // from registers (aux_tma_stores_beta_zero); a gated problem's consumer rows of op(A) are a gate
  // block and an up block (one consumer of 128 rows where SWAP had two of 64), or kernel columns
  // in 128s.
  static Config for_epilogue(Config c, const Problem& p) {
    if (p.epilogue.aux && p.reads_c) c.tma_store = 0;
    if (!p.epilogue.gated()) return c;
    c.tma_store = 0, c.cluster_k = 1;
    if (cluster_n(c) == 2) c.cluster = 11;
    if (c.swap) {
      c.bm = std::max<int64_t>(128, round_up(c.bm, 128));
      c.wg = c.pingpong ? 2 : c.bm / 128;
    } else {
      c.bm = std::min<int64_t>(256, round_up(c.bm, 128));
    }
    return c;
  }

  // The default made for a grouped problem (narrow_to_groups).
  static Config for_groups(Config c, const Problem& p) {
    c.group_table = group_table_of(p);
    if (!p.grouped()) return c;
    c.ws = 1, c.schedule = schedule::DATA_PARALLEL, c.splits = 1, c.cluster_k = 1;
    if (p.reads_c) c.tma_store = 0;
    if (cluster_n(c) == 2) c.cluster = 11;
    // Tokens on wgmma's N: wide enough that a group of a skewed routing takes one tile, up to 64.
    if (c.swap) c.bn = round_up(std::min<int64_t>(columns_needed(p), 64), 8);
    return c;
  }

  // Float8: the persistent schedule, 128-K stages; block scales are applied every k-block, the
  // others after 1, 2 or 4 (fewer promotions, less precision: the checker decides).
  static void narrow_to_fp8(Space<P>& s, const Problem& p) {
    s.set(&P::ws, {1});
    s.set(&P::ksub, {1});
    if (p.scaling == Scaling::block) s.set(&P::swap, {0});
    if (p.fast_accumulation()) {
      s.set(&P::promote, {0});  // wgmma sums the whole K (Accumulation::fast)
      s.set(&P::overlap, {0});
      return;
    }
    s.set(&P::promote,
          p.scaling == Scaling::block ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 2, 4});
    s.set(&P::overlap, {1, 0});
    if (p.scaling == Scaling::block) s.set(&P::staged_scales, {0, 1});
  }

  // A configuration per shape class, from the winners of gemm-tune on the H100: decode and other
  // skinny problems put the skinny side on wgmma's N and stream the weights through a 5-8 stage
  // pipeline, data-parallel while the tiles fill half the SMs; small problems take 64x64 tiles,
  // whole; problems with a side of 128 or less whose tiles are few are streamed like decode;
  // mid-size ones 128x128 tiles where even those leave SMs idle, one wave of 256x128 tiles with
  // TMA stores where those fill one; where 256x128 tiles waste rounds, the tiling whose rounds
  // cost least (make_filling); large ones 256x128 tiles four stages deep with a cluster of two
  // sharing A and TMA stores through two chunk buffers per warpgroup (docs/PERF.md, 'Large
  // problems: 256x128 tiles, four stages, two chunk buffers'). Split-K takes up a wave the tiles
  // do not fill.
  Config default_of(const Problem& p, const ArchInfo& arch) const override {
    if (element_bytes(p.types.a) == 1) return fp8_default(p, arch);
    Config c = Config::of(p);
    c.products = products_of(p);
    c.bm = 256, c.bn = 128, c.swap = 0, c.stages = 4, c.wg = 2, c.ws = 1, c.cluster = 12;
    c.raster = raster_of(p), c.group = 8, c.tma_store = 1;
    c.schedule = schedule::DATA_PARALLEL, c.splits = 1, c.cluster_k = 1, c.pingpong = 0;
    c.occupancy = 1, c.ksub = 1, c.reads_c = p.reads_c ? 1 : 0;
    bool split_where_few = true, one_wave_tma_store = false;
    const bool short_side = p.m < 512 || group_columns(p) < 256;
    if (skinny_n(p) || skinny_m(p)) {
      split_where_few = make_skinny(c, p, arch);
    } else if (p.flops() < 1e9) {
      make_latency_bound(c, p, arch);
      split_where_few = false;
    } else if (narrow_few(p, arch)) {
      split_where_few = make_skinny(c, p, arch);
    } else if (few_tiles(p, arch)) {
      // One consumer warpgroup, six stages and TMA stores (docs/PERF.md, 'Few 128x128 tiles:
      // one consumer warpgroup, six stages, split-K').
      c.bm = 128, c.wg = 1, c.stages = 6;
      one_wave_tma_store = true;
      // Unless m splits evenly into tiles that fill nine tenths of the SMs or more, in one round.
      const int64_t width = best_fitted(c, p, arch).width;
      const int64_t tiles = width > 0 ? tiles_of(p, width, 128) : 0;
      if (10 * tiles >= 9 * arch.sms && tiles <= arch.sms) c = fitted(c, width, p, arch);
    } else if (tiles_of(p, 256, 128) < arch.sms && (p.k <= 4096 || !short_side)) {
      // One wave of 256x128 tiles: four stages, TMA stores (with long K too: bf16 tn
      // 5120x640x5120 ran 9% faster than with register stores), unless another tiling's rounds
      // cost less.
      make_filling(c, p, arch);
      one_wave_tma_store = true;
    } else if (short_side) {
      c.bm = 128, c.cluster = 11, c.stages = 4;
    } else if (make_filling(c, p, arch)) {
      one_wave_tma_store = c.tma_store == 1;
    } else if (p.reads_c && p.k <= 2048) {
      make_large_reading_c(c, p, arch);
    }
    if (p.epilogue.aux && !p.reads_c) hide_aux_stores(c, p, arch);
    // Register stores where a CTA has one tile, but where one wave of tiles measured faster
    // with TMA stores.
    c = with_paying_cluster(c, p, arch);
    if (tiles_of(p, c.bm, c.bn) <= arch.sms && !one_wave_tma_store) c.tma_store = 0;
    // A gated tile's geometry first: its 128-row blocks leave fewer tiles, which split-K spreads.
    c = for_epilogue(c, p);
    if (split_where_few || p.epilogue.gated()) c = with_schedule(c, p, arch);
    return repaired(with_fitting_stages(for_groups(c, p), arch), p, arch);
  }

  // Float8: tiles of 128 tokens (problem n, two consumer warpgroups) by 128 of m, multicast in
  // clusters along n where the tiles fill the GPU, TMA stores, promotion every k-block; with
  // block scales 160 or 192 of m where they leave fewer idle SMs (fewest_rounds_width); with
  // tensor and row scales, which need no 128-aligned column blocks, 176 or 192 of m four stages
  // deep without a cluster (the tuned winner of every large tensor and row problem of the fp8
  // suite, docs/PERF.md, 'Float8: where it stands'); 64-token tiles where 128 would leave SMs idle;
  // the skinny side on wgmma's N for decode; two partial sums taking turns where they fit. A
  // grouped problem (float8 experts) decides by a group's mean tokens, under the grouped rules.
  Config fp8_default(const Problem& p, const ArchInfo& arch) const {
    Config c = Config::of(p);
    c.bm = 128, c.bn = 128, c.swap = 0, c.stages = 5, c.wg = 2, c.ws = 1, c.cluster = 12;
    c.raster = raster_of(p), c.group = 8, c.tma_store = 1;
    c.schedule = schedule::DATA_PARALLEL, c.splits = 1, c.cluster_k = 1, c.pingpong = 0;
    c.occupancy = 1, c.ksub = 1, c.reads_c = p.reads_c ? 1 : 0;
    c.promote = p.fast_accumulation() ? 0 : 1;
    const int64_t n = group_columns(p);  // a grouped problem's mean tokens a group
    if (n <= 64 && p.scaling != Scaling::block) {
      c.swap = 1, c.bn = round_up(n, 8), c.wg = 1, c.tma_store = 0, c.stages = 8;
      c.bm = 64;
    } else if (n <= 64 && p.grouped()) {
      // A few tokens an expert: one 64-row block of them a tile, the weights streamed.
      c.bn = 64, c.wg = 1, c.stages = 8, c.tma_store = 0;
    } else if (n <= 128 && !p.grouped() && tiles_of(p, 128, 128) < arch.sms &&
               6 * tiles_of(p, 128, 128) >= arch.sms) {
      // Few tiles of at most 128 tokens, whose pairs fill a third of the SMs: all the tokens a
      // tile, a cluster of two splitting each tile's k-blocks, eight stages, register stores (the
      // tuned winners of the suite's narrow block-scaled rows; fewer tiles split K six ways
      // through the workspace instead, docs/notebook/issue-33.md, runs 241 and 242).
      c.bn = round_up(p.n, 64), c.wg = c.bn / 64, c.stages = 8, c.cluster = 11, c.tma_store = 0;
      c.cluster_k = 2;
      return with_staged_scales(
          with_overlap(repaired(with_fitting_stages(for_epilogue(c, p), arch), p, arch)), p, arch);
    } else if (tiles_of(p, 128, 128) < arch.sms) {
      c.bn = 64, c.wg = 1;
    } else if (p.scaling == Scaling::block) {
      c.bm = p.reads_c ? fewest_rounds_width(c, p, arch, {128, 192})
                       : fewest_rounds_width(c, p, arch, {128, 160, 192});
      if (c.bm > 128) c.stages = 4, c.cluster = 11;
      c = in_waves_where_cheaper(c, p, arch);
    } else if (tiles_of(p, 192, 128) >= arch.sms) {
      // Fast accumulation (192, or 256 below) and C read (whose TMA stores take whole 64-column
      // chunks, as for 160 above) keep 192: 176 was measured without either.
      const bool plain = !p.fast_accumulation() && !p.reads_c;
      c.bm = plain ? fewest_rounds_width(c, p, arch, {176, 192}) : 192;
      c.stages = 4, c.cluster = 11;
      // Fast accumulation keeps no partial sums: 256x128 tiles fit, as bf16's, and win where
      // their last round leaves fewer SMs idle (docs/PERF.md, 'Fast float8 tiles: the fuller last
      // round').
      if (p.fast_accumulation() &&
          last_round_filled(p, arch, 256) > last_round_filled(p, arch, 192))
        c.bm = 256;
    }
    c = with_paying_cluster(c, p, arch);
    if (tiles_of(p, c.bm, c.bn) <= arch.sms) c.tma_store = c.swap ? 0 : c.tma_store;
    c = with_schedule(c, p, arch);
    return with_staged_scales(
        with_overlap(
            repaired(with_fitting_stages(for_groups(for_epilogue(c, p), p), arch), p, arch)),
        p, arch);
  }

  // Float8 tiles of 128 tokens: of the widths (of m) given, the one whose rounds cost least
  // (rounds_cost: rounds times tile area), 192 counted 3% cheaper (fewer bytes a product through
  // the shared memory). The tuned winners of the fp8 suite's large rows: block-scaled 128, 160
  // and 192 (docs/PERF.md, 'Block-scaled tiles past 128 columns'), tensor- and row-scaled 176 and
  // 192.
  static int64_t fewest_rounds_width(Config c, const Problem& p, const ArchInfo& arch,
                                     std::initializer_list<int64_t> widths) {
    int64_t best = 0;
    double best_cost = 0;
    for (int64_t bm : widths) {
      c.bm = bm;
      const double cost = rounds_cost(c, p, arch, bm == 192 ? 0.97 : 1.0);
      if (best == 0 || cost < best_cost) best = bm, best_cost = cost;
    }
    return best;
  }

  // Block-scaled tiles of 256 tokens by 128 of m, two 64-row blocks a consumer promoted in waves
  // (promotion.cuh), one CTA each, where K has 12 k-blocks or more and their rounds cost less,
  // counted 5% cheaper than the 128-token widths: the k-block's fixed costs are paid once for two
  // blocks (docs/PERF.md, 'Float8 tiles of 256 tokens promote in waves'). Measured on one GEMM
  // with beta = 0 only.
  static Config in_waves_where_cheaper(Config c, const Problem& p, const ArchInfo& arch) {
    if (p.reads_c || p.grouped() || ceil_div(p.k, int64_t(128)) < 12) return c;
    Config waves = c;
    waves.bm = 128, waves.bn = 256, waves.stages = 3, waves.cluster = 11;
    const double cost = rounds_cost(c, p, arch, c.bm == 192 ? 0.97 : 1.0);
    return rounds_cost(waves, p, arch, 0.95) < cost ? waves : c;
  }

  // The share of the SMs the last round of bm x 128 tiles keeps busy.
  static double last_round_filled(const Problem& p, const ArchInfo& arch, int64_t bm) {
    const int64_t tiles = tiles_of(p, bm, 128);
    return double(tiles) / double(ceil_div(tiles, arch.sms) * arch.sms);
  }

  // Block scales come with each stage where a tile's start costs most: tiles of 64 rows, problems
  // of one round of tiles, or four k-blocks at most; loaded in the loop on long tiles of many
  // (docs/PERF.md, 'Block scales in the loop cost a tenth'). The stages are fitted again beside
  // the copies; a default they do not fit keeps its loads. Grouped problems keep theirs: the
  // rule was measured on one GEMM only.
  Config with_staged_scales(Config c, const Problem& p, const ArchInfo& arch) const {
    const bool pays = tile_rows(c) <= 64 || tiles_of(p, c.bm, c.bn) <= arch.sms ||
                      ceil_div(p.k, int64_t(128)) <= 4;
    if (p.scaling != Scaling::block || p.grouped() || !pays) return c;
    Config staged = c;
    staged.staged_scales = 1;
    staged = with_fitting_stages(staged, arch);
    return space(p, arch).first_violation(staged, p, arch) == nullptr ? staged : c;
  }

  // Two partial sums taking turns wherever their registers fit (promotion.cuh): 2-15% faster on
  // the fp8 suite's narrow rows, 0-6% on its large block-scaled ones (docs/PERF.md, 'Float8:
  // where it stands').
  static Config with_overlap(Config c) {
    c.overlap = c.promote == 1 && fp8_sums_fit(c, 3) ? 1 : 0;
    return c;
  }

  std::string name_of(const Config& c) const override {
    std::string sched;
    if (c.schedule == schedule::SPLIT_K) sched = fmt::format("_splitk{}", c.splits);
    if (c.schedule == schedule::STREAM_K) sched = "_streamk";
    if (c.cluster_k > 1) sched = fmt::format("_ck{}", c.cluster_k);
    return fmt::format("gemm_wgmma_{}{}_{}{}_{}x{}x{}_s{}_wg{}_c{}x{}_{}_r{}{}{}{}{}{}{}{}{}{}",
                       c.types.token(), is_tf32(c) ? "_tf32" : "", to_char(c.op_a), to_char(c.op_b),
                       c.bm, c.bn, stage_k(c), c.stages, c.wg, cluster_m(c), cluster_n(c),
                       c.ws ? (c.pingpong ? "pingpong" : "ws") : "ms", c.raster ? "n" : "m",
                       c.group == 8 ? "" : fmt::format("_g{}", c.group), c.swap ? "_swap" : "",
                       sched, c.tma_store ? "_tmastore" : "",
                       c.occupancy > 1 ? fmt::format("_o{}", c.occupancy) : "",
                       c.reads_c ? "_readsc" : "", fp8_suffix(c), c.products == 3 ? "_3x" : "",
                       c.group_table ? fmt::format("_groups{}", c.group_table) : "");
  }

  // "_block_p1_overlap": the scaling, k-blocks a promotion, two partial sums; "_tensor_fast".
  static std::string fp8_suffix(const Config& c) {
    if (!is_fp8(c)) return "";
    if (c.promote == 0) return fmt::format("_{}_fast", to_string(c.scaling));
    return fmt::format("_{}_p{}{}{}", to_string(c.scaling), c.promote, c.overlap ? "_overlap" : "",
                       c.staged_scales ? "_staged" : "");
  }

  UnitSource unit_of(const Config& c, const ArchInfo& arch) const override {
    const wgmma_sm90::Shape s = shape_of(c, arch);
    return {
        "wgmma_sm90.cuh",
        "",
        "gemmtune::wgmma_sm90::Kernel",
        fmt::format("  static constexpr int CLUSTER_M = {}, CLUSTER_N = {}, C_BUFFERS = {};\n"
                    "  static constexpr bool A_T = {}, B_T = {};\n"
                    "  static constexpr int A_TYPE = {}, B_TYPE = {}, DTYPE = {}, SCALING = {};\n",
                    cluster_m(c), cluster_n(c), s.C_BUFFERS, a_kmajor(c), !b_kmajor(c),
                    int(c.types.a), int(c.types.b), int(c.types.d), int(c.scaling)),
        smem_static_assert("K::SMEM_BYTES", wgmma_sm90::smem_bytes(s)) +
            threads_static_assert(128 * (c.wg + c.ws)),
        "K::THREADS, K::CTAS_PER_SM",
        "  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];\n"
        "  K::run(args, gemmtune_smem);\n"};
  }

  ArgsLayout args_layout() const override {
    return {
        "WgmmaArgs",
        sizeof(WgmmaArgs),
        offsetof(WgmmaArgs, core),
        {GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_a), GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_b),
         GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_c), GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_d),
         GEMMTUNE_ARGS_MEMBER(WgmmaArgs, core), GEMMTUNE_ARGS_MEMBER(WgmmaArgs, tiling),
         GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_a_low), GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_b_low),
         GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_scale_a), GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_scale_b),
         GEMMTUNE_ARGS_MEMBER(WgmmaArgs, map_aux)}};
  }

  LaunchPlan plan_of(const Config& c, const Problem& p, const ArchInfo& arch) const override {
    // TMA coordinates of the block scales (load_scales) are 32-bit element offsets.
    GT_REQUIRE(
        c.scaling != Scaling::block ||
            std::max(scale_shape_a(p).count(), scale_shape_b(p).count()) < (int64_t(1) << 31),
        Errc::unsupported, "{}: more than 2^31 block scales of an operand", p.describe());
    LaunchPlan g;
    const Units u = units_of(c, p, arch);
    g.tiles_m = uint32_t(u.tiles_m);
    g.tiles_n = uint32_t(u.tiles_n);
    g.block = {uint32_t(128 * (c.wg + c.ws)), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c, arch));
    const int64_t cluster = cluster_ctas(c);
    g.cluster = {uint32_t(cluster), 1, 1};
    if (c.ws) {
      // Persistent: one CTA per SM (whole clusters), each a worker of the tile schedule.
      // A grouped launch's tiles are known on the device alone: as many as there can be.
      const int64_t units =
          c.group_table > 0
              ? grouped_super_tiles(c, p)
              : u.super_tiles *
                    (c.schedule == schedule::SPLIT_K ? std::min(c.splits, u.k_blocks) : 1);
      const int64_t most = c.schedule == schedule::STREAM_K ? u.super_tiles * u.k_blocks : units;
      g.grid = {uint32_t(std::min(most, u.workers) * cluster), 1, 1};
      g.persistent = true;
      // Stream-K: every resident CTA. A grouped launch too: its units are the most any routing
      // could have, and rounds balanced over those would idle SMs that the real tiles need.
      g.work_units = c.schedule == schedule::STREAM_K || c.group_table > 0 ? 0 : grid_extent(units);
    } else {
      g.grid = {grid_extent(u.tiles_m * u.tiles_n), 1, 1};
    }
    const Workspace w = workspace_of(c, u);
    g.workspace_bytes = w.scratch;
    g.counter_bytes = w.counters;
    g.reads_c = c.reads_c != 0;
    g.args = args_layout();
    add_maps(g, c);
    g.blocks.push_back(ArgsBlock::of(g.args.offset_of("tiling"), tiling_of(c, u)));
    return g;
  }

  // The kernel's template and the operand packing its launch runs (what they include is found by
  // scanning).
  std::vector<std::string> template_files() const override {
    return {"wgmma_sm90.cuh", "pack.cuh"};
  }

  // Smaller wgmma N read more shared memory per FLOP ((64 + N) / 64N); OCCUPANCY CTAs share an
  // SM; a cluster that multicasts an operand halves what its CTAs fetch of it; split-K writes
  // and reads partial sums; a cluster that splits K exchanges them between its SMs' shared
  // memory; stream-K spreads the work evenly over the SMs at the cost of fixing up the tiles it
  // splits, and of L2 hits; an operand TMA cannot read in place is packed first.
  TileWork work_of(const Config& c, const Problem& p, const ArchInfo& a) const override {
    const Units u = units_of(c, p, a);
    TileWork w;
    w.tile_m = c.bm;
    w.tile_n = c.bn;
    if (c.schedule == schedule::SPLIT_K) w.k_splits = std::min(c.splits, u.k_blocks);
    if (c.cluster_k > 1) w.k_splits = std::min(c.cluster_k, u.k_blocks);
    w.balanced = c.schedule == schedule::STREAM_K;
    const int64_t threads = 128 * (c.wg + c.ws);
    w.ctas_per_sm = c.ws ? int(c.occupancy)
                         : ctas_per_sm(a, threads, smem_bytes_of(c, a), accumulators(c) + 40);
    const double n = double(tile_cols(c));
    w.efficiency = kPeakFraction * wgmma_n_rate(n) * kByWarpgroups[c.wg] *
                   (c.ws ? 1.0 : kMultistage) * (cluster_size(c) == 1 ? 1.0 : kClustered) /
                   (w.balanced ? kStreamKSlowdown : 1.0);
    if (shares_b(c)) w.l2_traffic = (w.tile_m + 0.5 * w.tile_n) / double(w.tile_m + w.tile_n);
    if (shares_a(c)) w.l2_traffic = (0.5 * w.tile_m + w.tile_n) / double(w.tile_m + w.tile_n);
    w.workspace_bytes = 2.0 * double(workspace_of(c, u).scratch);  // written, then read back
    w.bytes_in_flight =
        double(c.stages * (tile_rows(c) + tile_cols(c)) * wgmma_sm90::ROW_BYTES * c.ksub);
    // Persistent CTAs fill their pipeline once and overlap part of each epilogue with the next
    // tile's loads (most of it when the TMA engine stores); multistage CTAs pay both per tile.
    const double epilogue = epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    w.tile_overhead_us =
        c.ws ? epilogue * (c.tma_store ? kTmaStoreEpilogues : kRegisterStoreEpilogues)
             : 1.0 + epilogue;
    if (c.pingpong) w.tile_overhead_us *= kPingpongEpilogues;
    if (c.cluster_k > 1)
      w.tile_overhead_us += kClusterKEpilogues * epilogue;
    else if (w.k_splits > 1 || w.balanced)
      w.tile_overhead_us += kWorkspaceEpilogues * epilogue;
    w.setup_us = packing_us(c, p, a) + deriving_us(c, p, a);
    if (is_tf32(c)) w.flops_per_clock = a.tf32_flops_per_clock_per_sm() / double(c.products);
    return w;
  }

 private:
  // Tensor maps: P's rows are the kernel rows (TM), Q's the kernel columns (TN). The box one TMA
  // copy moves of an operand whose kernel side has `rows` rows per tile: K-major tiles are (64 K,
  // rows) boxes; MN-major ones (64 rows, 64 K) boxes. Shared by a cluster of two, each CTA loads
  // half (rows, or K). C's map is for C's loads by TMA with beta != 0, D's for TMA stores, each
  // made only where its matrix is aligned.
  void add_maps(LaunchPlan& g, const Config& c) const {
    auto box = [&](Operand operand, bool k_major, int64_t rows, bool shared, const char* member) {
      TensorMapPlan m;
      m.operand = operand;
      m.type = operand == Operand::a ? c.types.a : c.types.b;
      m.box_rows = k_major ? uint32_t(wgmma_sm90::ROW_BYTES / element_bytes(m.type)) : 64;
      m.box_cols = k_major ? uint32_t(shared ? rows / 2 : rows) : (shared ? 32u : 64u);
      m.offset = g.args.offset_of(member);
      m.per_group = operand == Operand::a && c.group_table > 0;
      // A gated problem's A: boxes of 64 rows of gate and up each (mainloop.cuh, load_gated).
      m.gate_layers = operand == Operand::a && c.epilogue.gated();
      if (m.gate_layers) m.box_cols = 64;
      g.maps.push_back(m);
    };
    // An operand tf32 wgmma cannot read in place comes from a transposed copy; 3xTF32's low
    // parts from copies the launch derives, boxed alike.
    const auto derived = [](bool transposed, bool low) {
      if (transposed) return low ? Derived::transposed_tf32_low : Derived::transposed;
      return low ? Derived::tf32_low : Derived::none;
    };
    for (const bool low : {false, true}) {
      if (low && c.products != 3) break;
      box(Operand::a, a_kmajor(c), c.swap ? tile_rows(c) : tile_cols(c), shares_a(c),
          low ? "map_a_low" : "map_a");
      g.maps.back().derived = derived(a_transposed(c), low);
      box(Operand::b, b_kmajor(c), c.swap ? tile_cols(c) : tile_rows(c), shares_b(c),
          low ? "map_b_low" : "map_b");
      g.maps.back().derived = derived(b_transposed(c), low);
    }
    if (c.scaling == Scaling::block && c.staged_scales) add_scale_maps(g, c);
    if (c.tma_store) {
      struct StoreMap {
        Operand operand;
        const char* member;
        unsigned made_flag;
      };
      for (const StoreMap s : {StoreMap{Operand::c, "map_c", WGMMA_MAP_C_MADE},
                               StoreMap{Operand::d, "map_d", WGMMA_MAP_D_MADE},
                               StoreMap{Operand::aux, "map_aux", WGMMA_MAP_AUX_MADE}}) {
        if (s.operand == Operand::aux && !c.epilogue.aux) continue;
        TensorMapPlan m;
        m.operand = s.operand;
        m.type = s.operand == Operand::c ? c.types.c : c.types.d;
        m.box_rows = uint32_t(wgmma_sm90::ROW_BYTES / element_bytes(m.type));  // a chunk's columns
        m.box_cols = uint32_t(64 * blocks_per_warpgroup(c));
        m.offset = g.args.offset_of(s.member);
        m.made_flag = s.made_flag;
        g.maps.push_back(m);
      }
    }
  }

  // Block scales come into every stage beside its operands (promotion.cuh, load_scales), in boxes
  // that start on 16 bytes (TMA faults on others) up to three values before the first needed:
  // of B's, the tile's rows' of the stage's k-block and four more; of A's, eight values from its
  // first 128-block of columns (a tile spans two at most).
  static void add_scale_maps(LaunchPlan& g, const Config& c) {
    for (const Operand operand : {Operand::scale_a, Operand::scale_b}) {
      TensorMapPlan m;
      m.operand = operand;
      m.type = DataType::f32;
      m.swizzle = Swizzle::none;
      m.box_rows = operand == Operand::scale_a ? 8 : uint32_t(tile_rows(c) + 4);
      m.box_cols = 1;
      m.offset = g.args.offset_of(operand == Operand::scale_a ? "map_scale_a" : "map_scale_b");
      g.maps.push_back(m);
    }
  }

  // Super tiles (cluster-sized groups) in raster groups along M, or along N (Tiles::tile_of).
  static GemmTiling tiling_of(const Config& c, const Units& u) {
    GemmTiling t{int(u.tiles_m), int(u.tiles_n), {}};
    const int super_m = int(ceil_div(u.tiles_m, cluster_m(c)));
    const int super_n = int(ceil_div(u.tiles_n, cluster_n(c)));
    unsigned divisors[2];
    if (c.raster == 0)
      raster_divisors(super_m, super_n, int(c.group), divisors);
    else
      raster_divisors(super_n, super_m, int(c.group), divisors);
    for (int i = 0; i < 2; ++i) t.divisors[i] = make_divisor(divisors[i]);
    return t;
  }

  // Decode and other skinny problems: the skinny side on wgmma's N, the weights streamed through
  // a pipeline of 128-K stages, 8-12 blocks of 64 K deep; 64-row tiles where 128-row ones would
  // leave half the SMs without weights to stream. Returns whether the tiles are still so few
  // that K is worth splitting.
  static bool make_skinny(Config& c, const Problem& p, const ArchInfo& arch) {
    const int64_t n = group_columns(p);
    const bool swap = n <= p.m;  // the narrow side on wgmma's N
    const int64_t wide = swap ? p.m : n;
    const int64_t rows =
        std::min<int64_t>(2 * ceil_div(wide, 128) >= arch.sms ? 128 : 64, round_up(wide, 64));
    c.swap = swap;
    (swap ? c.bm : c.bn) = rows;
    // wgmma N in steps of 8, or of 64 where the narrow operand is stored along M or N
    // (mn_major_in_chunks: bf16 nn 16x4096x4096).
    (swap ? c.bn : c.bm) = round_up(swap ? n : p.m, q_kmajor(c) ? 8 : 64);
    c.wg = rows / 64, c.cluster = 11, c.tma_store = 0, c.ksub = 2;
    c.stages = rows == 128 ? 4 : 6;
    return 2 * ceil_div(wide, rows) < arch.sms;
  }

  // Bound by latency: the fixup of a split through the workspace costs more than the k-blocks it
  // spreads. Where A is stored along K, wgmma N narrows until the tiles fill about half the SMs,
  // two CTAs of a cluster split each tile's k-blocks, so that every SM streams, and a stage holds
  // two 64-K blocks, five stages deep (docs/PERF.md, 'Latency-bound problems take narrow tiles on
  // half the SMs').
  static void make_latency_bound(Config& c, const Problem& p, const ArchInfo& arch) {
    c.bm = 64, c.bn = 64, c.stages = 5, c.wg = 1;
    if (p.op_a == Op::T) {
      const int64_t tile_rows = std::max<int64_t>(1, arch.sms / 2 / ceil_div(group_columns(p), 64));
      c.bm = std::min<int64_t>(64, round_up(ceil_div(p.m, tile_rows), 8));
      c.ksub = 2;
      c.cluster_k = 2;  // repaired() drops it where the clusters would not fit
    }
  }

  // Where 256x128 tiles leave a tenth of the SMs' rounds idle: the tiling whose rounds cost
  // least, a round costing its tile's area times how much dearer that tile computes it: 256x128
  // (1), 128x192 with three consumer warpgroups, five stages and TMA stores, 192x128 with
  // register stores (its epilogue weighs more as K shortens), or 256x128 tiles in stream-K where
  // it can pay (streams_k_well), the work spread evenly (docs/PERF.md, 'A partial last wave: the
  // default costs rounds times tile area'). Returns whether it took a tile other than 256x128.
  static bool make_filling(Config& c, const Problem& p, const ArchInfo& arch) {
    const Config whole = with_paying_cluster(c, p, arch);
    const Units big = units_of(whole, p, arch);
    if (wave_efficiency(big) >= 0.9) return false;
    Config tall = c, wide = c;
    set_tile(tall, 128, 192);
    set_tile(wide, 192, 128);
    const double whole_cost = rounds_cost(whole, p, arch, 1.0);
    const double tall_cost = rounds_cost(tall, p, arch, kTallTileCost);
    const double wide_cost =
        rounds_cost(wide, p, arch, kWideTileCost + kWideEpilogueK / double(p.k));
    const Fitted fit = best_fitted(c, p, arch);
    const double best = std::min({whole_cost, tall_cost, wide_cost, fit.cost});
    const double streamed =
        double(big.super_tiles) / double(big.workers) * 256 * 128 * kStreamedTileCost;
    if (streams_k_well(big) && streamed < best) {
      c.schedule = schedule::STREAM_K;
      return false;
    }
    if (whole_cost == best) return false;
    if (fit.cost == best)
      c = fitted(c, fit.width, p, arch);
    else
      c = wide_cost < tall_cost ? wide : tall;
    return true;
  }

  // Mid-size tiles sized to the SM count: m split evenly on wgmma N (a multiple of 16 from 64 to
  // 256, even_width: 144 for m = 2304), 128 rows of n on two consumer warpgroups, a cluster along
  // M where clusters pay, TMA stores (the last chunk overlapping the one before: beta = 0), the
  // deepest pipeline that fits, up to eight stages where the tiles take one round (docs/PERF.md,
  // 'Mid-size shapes need tiles sized to the SM count').
  static Config fitted(Config c, int64_t width, const Problem& p, const ArchInfo& arch) {
    c.bm = width, c.bn = 128, c.swap = 0, c.wg = 2, c.cluster = 21, c.tma_store = 1;
    c = with_paying_cluster(c, p, arch);
    c.stages = tiles_of(p, width, 128) <= arch.sms ? 8 : 5;
    if (p.reads_c && width % 64 != 0) c.tma_store = 0;
    return c;
  }

  // The even split of m whose rounds cost least (their area, dearer as wgmma N narrows), and
  // that cost; none where A is stored along M (wgmma N then comes in 64-column chunks), and for
  // grouped and gated problems, whose tiles follow their own rules.
  struct Fitted {
    int64_t width = 0;
    double cost = std::numeric_limits<double>::infinity();
  };
  static Fitted best_fitted(const Config& c, const Problem& p, const ArchInfo& arch) {
    Fitted best;
    if (!a_kmajor(c) || p.grouped() || p.epilogue.gated()) return best;
    for (const int64_t width : even_widths(p.m)) {
      const double cost = rounds_cost(fitted(c, width, p, arch), p, arch,
                                      wgmma_n_rate(256) / wgmma_n_rate(double(width)));
      if (cost < best.cost) best = {width, cost};
    }
    return best;
  }

  // A pre-activation output doubles a tile's stores (docs/PERF.md, 'A pre-activation output
  // wants its stores under a main loop'). One round of 256x128 tiles leaves them in the open:
  // where 128x128 tiles fill two rounds nine tenths or more, they take its place, the second
  // round's main loop under the first's stores. With 16 k-blocks or fewer every tile's stores
  // weigh: 128x128 tiles in ping-pong, each consumer's stores under the other's main loop.
  static void hide_aux_stores(Config& c, const Problem& p, const ArchInfo& arch) {
    if (c.bm != 256 || c.bn != 128 || c.swap || c.wg != 2) return;
    const int64_t tiles = tiles_of(p, 128, 128);
    if (10 * tiles >= 18 * arch.sms && tiles <= 2 * arch.sms) {
      c.bm = 128;
    } else if (p.k <= 16 * 64 && tiles >= 2 * arch.sms) {
      c.bm = 128, c.pingpong = 1, c.cluster = 11;
    }
  }

  // 128x192 tiles: three consumer warpgroups, five stages, TMA stores, a cluster along M;
  // 192x128: two, four stages, register stores, a cluster along N.
  static void set_tile(Config& c, int64_t bm, int64_t bn) {
    const bool tall = bn == 192;
    c.bm = bm, c.bn = bn;
    c.stages = tall ? 5 : 4;
    c.wg = tall ? 3 : 2;
    c.cluster = tall ? 21 : 12;
    c.tma_store = tall ? 1 : 0;
  }

  // The rounds of a configuration's work units (its cluster as the default keeps it: an odd
  // count of tiles along the cluster pays a round's share) times a tile's area, what each SM
  // computes in a round, `dearer` for a tile that computes the same area slower.
  static double rounds_cost(const Config& c, const Problem& p, const ArchInfo& arch,
                            double dearer) {
    const Config t = with_paying_cluster(c, p, arch);
    const Units u = units_of(t, p, arch);
    return double(ceil_div(u.super_tiles, u.workers) * t.bm * t.bn) * dearer;
  }

  // Clusters pay with several waves of tiles, or with half a wave and long K (multicast halves
  // what the L2 delivers per k-block). A cluster of two goes along the side with an even count of
  // tiles where the other's is odd (the last pair along an odd count leaves one CTA idle: bf16 tn
  // 5120x640x5120's 20x5 tiles of 256x128 ran 5% faster in clusters along M).
  static Config with_paying_cluster(Config c, const Problem& p, const ArchInfo& arch) {
    const int64_t tiles = tiles_of(p, c.bm, c.bn);
    const bool long_k_wave = p.k > 4096 && 2 * tiles >= arch.sms;
    if (tiles < 2 * arch.sms && !long_k_wave) c.cluster = 11;
    const bool m_even = ceil_div(p.m, c.bm) % 2 == 0;
    const bool n_even = ceil_div(group_columns(p), c.bn) % 2 == 0;
    if (cluster_m(c) == 2 && !m_even && n_even) c.cluster = 12;
    if (cluster_n(c) == 2 && !n_even && m_even) c.cluster = 21;
    return c;
  }

  // Stream-K can pay only where data-parallel tiles would leave the last of two or more rounds
  // nine tenths empty and K is long enough (64 k-blocks or more) that its fixups weigh little.
  // Everywhere else it lost to data-parallel tiles, by up to half (docs/PERF.md, 'Stream-K loses
  // to data-parallel tiles below one wave' and 'Stream-K misses in L2: its k-ranges are
  // staggered').
  static bool streams_k_well(const Units& u) {
    return u.super_tiles >= 2 * u.workers && u.k_blocks >= 64 &&
           10 * (u.super_tiles % u.workers) <= u.workers;
  }

  // Large problems that read C, with K short enough that their epilogues weigh: no cluster (its
  // two CTAs would wait on each other's epilogues, longer with C's loads), and from twelve waves
  // of 256x128 tiles on, 192x128 tiles, whose three chunks of C all fit in staging buffers and
  // are all requested before the tile's main loop (docs/PERF.md, 'Reading C changes the winning
  // tile at short K').
  static void make_large_reading_c(Config& c, const Problem& p, const ArchInfo& arch) {
    c.cluster = 11;
    if (tiles_of(p, 256, 128) < 12 * arch.sms) return;
    c.bm = 192;
  }

  // The schedule of a default, where whole waves waste more than a tenth of the rounds: split-K
  // into about one wave of parts when the tiles leave SMs idle, else data-parallel tiles
  // (docs/PERF.md, 'Stream-K loses to data-parallel tiles below one wave'). A split in two of
  // tiles stored from registers goes to two CTAs of a cluster, which add through shared memory
  // (docs/PERF.md, 'Splitting K in a cluster beats splitting it through the workspace').
  static Config with_schedule(Config c, const Problem& p, const ArchInfo& arch) {
    const Units u = units_of(c, p, arch);
    if (!c.ws || wave_efficiency(u) >= 0.9) return c;
    if (u.super_tiles < u.workers) {
      int64_t best = 1;
      for (int64_t s : {2, 3, 4, 6, 8}) {
        const int64_t parts = u.super_tiles * s;
        if (s <= u.k_blocks / 2 && parts <= u.workers) best = s;
      }
      if (best == 2 && c.tma_store == 0 && cluster_size(c) == 1 && !c.pingpong &&
          !p.epilogue.gated()) {
        c.cluster_k = 2;  // data-parallel tiles, each split by its cluster
        return c;
      }
      if (best > 1) {
        c.schedule = schedule::SPLIT_K;
        c.splits = best;
      }
    }
    return c;
  }

  // The deepest pipeline, up to the one set, whose stages fit a block's shared memory beside
  // what else the configuration keeps there (a cluster that splits K, its partial sums).
  static Config with_fitting_stages(Config c, const ArchInfo& arch) {
    while (c.stages > 2 && smem_bytes_of(c, arch) > arch.smem_per_block)
      c.stages = c.stages > 8 ? 8 : c.stages == 8 ? 6 : c.stages - 1;  // the space's depths
    return c;
  }

  // The default made valid for the problem: simpler schedule, no cluster, register stores,
  // fewer stages, in that order; else the most promising valid point of the space.
  Config repaired(Config c, const Problem& p, const ArchInfo& arch) const {
    const Space<P> s = space(p, arch);
    const std::pair<int64_t P::*, int64_t> fallbacks[] = {{&P::schedule, schedule::DATA_PARALLEL},
                                                          {&P::cluster, 11},
                                                          {&P::cluster_k, 1},
                                                          {&P::tma_store, 0},
                                                          {&P::stages, 5},
                                                          {&P::stages, 4},
                                                          {&P::stages, 3}};
    for (const auto& [member, value] : fallbacks) {
      if (s.first_violation(c, p, arch) == nullptr) return c;
      c.*member = value;
    }
    if (s.first_violation(c, p, arch) == nullptr) return c;
    const TypedPruning<P> valid = enumerate_valid(s, Config::of(p), p, arch);
    GT_REQUIRE(!valid.valid.empty(), Errc::internal,
               "the wgmma family has no valid configuration for {}", p.describe());
    return *std::min_element(valid.valid.begin(), valid.valid.end(),
                             [&](const Config& a, const Config& b) {
                               return predicted(a, p, arch) < predicted(b, p, arch);
                             });
  }
};

}  // namespace

const Family& wgmma_sm90_family() {
  static const WgmmaSm90Family family;
  return family;
}

GEMMTUNE_REGISTER_FAMILY(wgmma_sm90_family())

}  // namespace gemmtune
