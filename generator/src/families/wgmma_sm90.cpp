// The Hopper family (templates/wgmma_sm90.cuh): bf16/f16 with f32 accumulation, TMA + wgmma.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "gemmtune/generator/util.hpp"
#include "raster.h"
#include "schedule.h"

namespace gemmtune {
namespace {

constexpr int64_t kBK = 64;
constexpr int64_t kWorkBytes = sizeof(schedule::Work);

int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// K a stage holds: KSUB blocks of 64 (one 128-byte swizzle row each).
int64_t stage_k(const KernelConfig& c) {
  return kBK * c.at("KSUB");
}
int64_t cluster_m(const KernelConfig& c) {
  return c.at("CLUSTER") / 10;
}
int64_t cluster_n(const KernelConfig& c) {
  return c.at("CLUSTER") % 10;
}
int64_t cluster_size(const KernelConfig& c) {
  return cluster_m(c) * cluster_n(c);
}
// CTAs of a cluster that split each tile's k-blocks (CLUSTER_K), and all CTAs of a cluster.
int64_t cluster_k(const KernelConfig& c) {
  return c.at("CLUSTER_K");
}
int64_t cluster_ctas(const KernelConfig& c) {
  return cluster_size(c) * cluster_k(c);
}
bool swapped(const KernelConfig& c) {
  return c.at("SWAP") != 0;
}
// Kernel rows (64-row wgmma blocks) and columns (wgmma N) of a tile; see the template's header.
int64_t tile_rows(const KernelConfig& c) {
  return swapped(c) ? c.at("BM") : c.at("BN");
}
int64_t tile_cols(const KernelConfig& c) {
  return swapped(c) ? c.at("BN") : c.at("BM");
}
bool pingpong(const KernelConfig& c) {
  return c.at("PINGPONG") != 0;
}
bool reads_c(const KernelConfig& c) {
  return c.at("READS_C") != 0;
}
// Consumer warpgroups that share a tile's rows: all of them, or one with ping-pong.
int64_t row_warpgroups(const KernelConfig& c) {
  return pingpong(c) ? 1 : c.at("WG");
}
int64_t blocks_per_warpgroup(const KernelConfig& c) {
  return tile_rows(c) / (64 * row_warpgroups(c));
}
int64_t accumulators(const KernelConfig& c) {
  return blocks_per_warpgroup(c) * tile_cols(c) / 2;
}
// P (the 64-row side) is op(A) when swapped, else op(B)^T; Q the other. K-major: stored along K.
bool a_kmajor(const KernelConfig& c) {
  return c.op_a == Op::T;
}
bool b_kmajor(const KernelConfig& c) {
  return c.op_b == Op::N;
}
bool q_kmajor(const KernelConfig& c) {
  return swapped(c) ? b_kmajor(c) : a_kmajor(c);
}
// The longest tile sides the problem needs: rows in 64s, columns in 8s (K-major Q) or 64s.
int64_t rows_needed(const KernelConfig& c, const Problem& p) {
  return round_up(swapped(c) ? p.m : p.n, 64);
}
int64_t cols_needed(const KernelConfig& c, const Problem& p) {
  return round_up(swapped(c) ? p.n : p.m, q_kmajor(c) ? 8 : 64);
}
// Which operand a cluster of two shares: CTAs along M share B's tile, along N A's.
bool shares_a(const KernelConfig& c) {
  return cluster_n(c) == 2;
}
bool shares_b(const KernelConfig& c) {
  return cluster_m(c) == 2;
}

// Mirrors wgmma_sm90::Kernel::SMEM_BYTES: stages, alignment, barriers, the fixup flags and the
// schedule, the partial sums a cluster splitting K exchanges (a slot per CTA of the float4s of
// accumulators each owns, and two barriers per consumer warpgroup), then the staged C tile. TMA
// stores stage a consumer's 64-column chunks in as many buffers as fit in a block's shared
// memory on sm_90 (all of them where they fit, at least one), each with a barrier for C's loads
// when beta != 0, and a barrier per consumer that its buffers are free: derived here and given
// to the kernel as C_BUFFERS.
constexpr int64_t kSmemPerBlock = 232448;
int64_t push_bytes(const KernelConfig& c) {
  if (cluster_k(c) == 1) return 0;
  const int64_t owned = blocks_per_warpgroup(c) * ceil_div(tile_cols(c) / 8, cluster_k(c));
  return c.at("WG") * cluster_k(c) * owned * 128 * 16 + 16 * c.at("WG");
}
int64_t fixed_smem_bytes(const KernelConfig& c) {
  return c.at("STAGES") * (tile_rows(c) + tile_cols(c)) * stage_k(c) * 2 + 1024 +
         16 * c.at("STAGES") + 16 + kWorkBytes + push_bytes(c);
}
int64_t c_chunk_bytes(const KernelConfig& c) {
  return 64 * blocks_per_warpgroup(c) * 128;
}
int64_t c_buffers_bytes(const KernelConfig& c, int64_t buffers) {
  return buffers ? c.at("WG") * (buffers * (c_chunk_bytes(c) + 8) + 8) : 0;
}
int64_t c_buffers(const KernelConfig& c) {
  if (!c.at("EPILOGUE")) return 0;
  const int64_t chunks = tile_cols(c) / 64;
  for (int64_t b = chunks; b > 1; --b)
    if (fixed_smem_bytes(c) + c_buffers_bytes(c, b) <= kSmemPerBlock) return b;
  return chunks > 0 ? 1 : 0;
}
int64_t smem_bytes_of(const KernelConfig& c) {
  return fixed_smem_bytes(c) + c_buffers_bytes(c, c_buffers(c));
}

struct Units {
  int64_t tiles_m, tiles_n, super_tiles, k_blocks, workers;
};

// Work units of the tile schedule (cluster-sized groups of tiles) and the most workers a
// persistent launch has (one CTA per SM, whole clusters).
Units units_of(const KernelConfig& c, const Problem& p, const ArchInfo& arch) {
  Units u;
  u.tiles_m = ceil_div(p.m, c.at("BM"));
  u.tiles_n = ceil_div(p.n, c.at("BN"));
  u.super_tiles = ceil_div(u.tiles_m, cluster_m(c)) * ceil_div(u.tiles_n, cluster_n(c));
  u.k_blocks = ceil_div(p.k, stage_k(c));
  u.workers = std::max<int64_t>(1, arch.sms / cluster_ctas(c)) * c.at("OCCUPANCY");
  return u;
}

// The share of the workers' rounds over the tiles that does work (1: whole waves).
double wave_efficiency(const Units& u) {
  const int64_t rounds = ceil_div(u.super_tiles, u.workers);
  return double(u.super_tiles) / double(rounds * u.workers);
}

// The box one TMA copy moves of an operand whose kernel side has `rows` rows per tile: K-major
// tiles are (64 K, rows) boxes; MN-major ones (64 rows, 64 K) boxes. Shared by a cluster of
// two, each CTA loads half (rows, or K).
TensorMapNeed box_of(bool k_major, int64_t rows, bool shared) {
  if (k_major) return {true, 64, uint32_t(shared ? rows / 2 : rows)};
  return {true, 64, shared ? 32u : 64u};
}

// Split-K partial sums and counters (templates/wgmma_sm90.cuh, partial_of and counter_of).
struct Workspace {
  uint64_t scratch = 0, counters = 0;
};
Workspace workspace_of(const KernelConfig& c, const Units& u) {
  const int64_t mode = c.at("SCHEDULE");
  int64_t counters = 0, slots = 0;
  if (mode == schedule::SPLIT_K && c.at("SPLITS") > 1) {
    counters = u.super_tiles;
    slots = u.super_tiles * std::min(c.at("SPLITS"), u.k_blocks);
  } else if (mode == schedule::STREAM_K) {
    counters = std::min(u.super_tiles, 2 * u.workers);  // a bound for any grid of at most `workers`
    slots = 2 * u.workers;
  }
  if (slots == 0) return {};
  const int64_t consumers = cluster_size(c) * row_warpgroups(c);
  return {uint64_t(slots * cluster_size(c) * tile_rows(c) * tile_cols(c) * 4),
          uint64_t(counters * consumers * 4)};
}

// The launch packs an operand whose columns do not start on 16 bytes into an aligned copy first
// (runtime/src/launcher.cpp): another kernel, which reads and writes the operand once. It costs
// a launch and a wait (3 us: bf16 nn 500x300x700 with lda 500 ran 15 us on the default wgmma
// kernel, 10 us on mma_sm80's split-K kernels, which read A in place; H100, docs/PERF.md).
double packing_us(const Problem& p, const ArchInfo& a) {
  auto bytes = [&](int64_t ld, int64_t rows, int64_t cols) {
    return tma_ld_aligned(ld, p.types.a) ? 0.0 : double(rows * cols * element_bytes(p.types.a));
  };
  const double packed = bytes(p.lda, p.rows_a(), p.cols_a()) + bytes(p.ldb, p.rows_b(), p.cols_b());
  return packed > 0 ? 3.0 + 2 * packed / (a.dram_gb_per_s * 1e3) : 0.0;
}

// Tile sizes worth trying along a dimension of size d: the usual ones, the non-powers of two
// that cut wave quantization, d itself rounded to 8 when it fits one tile (skinny problems), and
// where the problem is bound by latency every narrower multiple of 8 (the default there narrows
// wgmma N to whatever multiple of 8 fills about half the SMs: bf16 tn 500x300x700 takes 40).
std::vector<int64_t> tile_values(int64_t d, bool narrow) {
  std::vector<int64_t> v = {64, 96, 128, 160, 192, 224, 256};
  if (narrow) v.insert(v.begin(), {8, 16, 24, 32, 40, 48, 56});
  if (d <= 256 && std::find(v.begin(), v.end(), round_up(d, 8)) == v.end())
    v.push_back(round_up(d, 8));
  return v;
}

// Eight waves of 128 x 128 tiles or more: where the raster group decides L2 reuse.
bool many_waves(const Problem& p, const ArchInfo& arch) {
  return ceil_div(p.m, 128) * ceil_div(p.n, 128) >= 8 * arch.sms;
}

// The skinny side of a problem goes on wgmma's N (steps of 8), not on 64-row blocks.
bool skinny_n(const Problem& p) {
  return p.n <= 64;
}
bool skinny_m(const Problem& p) {
  return p.m <= 64;
}
// A side that one wgmma N covers, on a problem whose 128x128 tiles leave SMs idle: streamed like
// a skinny one, 64 rows a tile and K split (bf16 tn 4096x128x11008: 0.99-1.00x cuBLAS untuned,
// as the tuned winner, where 128x128 tiles split in four made 0.91-0.94x; H100, docs/PERF.md).
bool narrow_few(const Problem& p, const ArchInfo& arch) {
  return std::min(p.m, p.n) <= 128 && few_tiles(p, arch);
}

class WgmmaSm90Family final : public Family {
 public:
  std::string_view name() const override { return "wgmma_sm90"; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (!one_type_of(problem, {DataType::f16, DataType::bf16}))
      return "the wgmma family computes f16 and bf16, every operand of one type";
    if (arch.cc != 90 || !arch.arch_specific) return "the wgmma family needs sm_90a (Hopper)";
    return {};
  }

  SearchSpace space(const Problem& p, const ArchInfo& arch) const override {
    SearchSpace s;
    s.family = "wgmma_sm90";
    const bool few = few_tiles(p, arch), narrow = latency_bound(p, arch);
    const bool skinny = p.n <= 256 || p.m <= 256;
    s.params = {
        {"BM", tile_values(p.m, narrow)},  // tile along M
        {"BN", tile_values(p.n, narrow)},  // tile along N
        {"SWAP",
         p.n <= 256 ? std::vector<int64_t>{0, 1} : std::vector<int64_t>{0}},  // N on wgmma's N
        // Deep pipelines stream a skinny problem's operand, or keep all of a short K in flight.
        // A refinement lists first the values to measure a structure with where the model ties:
        // here the deepest pipeline that fits, up to 8, where the tiles are few or skinny (their
        // winners on the H100 ran 5 to 8 stages deep: bf16 tn 6144x32x4096 26.0 us at 8 stages,
        // 30.1 us at 4), else 4.
        {"STAGES",
         skinny || few ? std::vector<int64_t>{8, 6, 5, 4, 12, 3} : std::vector<int64_t>{4, 3, 5},
         true},
        {"WG", {1, 2, 3}},                 // consumer warpgroups
        {"WS", {0, 1}},                    // 1: warp-specialized persistent, 0: multistage
        {"CLUSTER", {11, 21, 12}, true},   // CTAs along M x along N
        {"RASTER", {p.m >= p.n ? 0 : 1}},  // sweep tiles along the longer side first (derived)
        // Tiles per raster group: how many tile rows run together and share operand rows in L2.
        // It matters where many waves of tiles run one after the other.
        {"GROUP", many_waves(p, arch) ? std::vector<int64_t>{8, 4, 16} : std::vector<int64_t>{8},
         true},
        {"EPILOGUE", {1, 0}, true},  // 1: through shared memory + TMA store, 0: from registers
        {"SCHEDULE", {schedule::DATA_PARALLEL, schedule::SPLIT_K, schedule::STREAM_K}},
        {"SPLITS", few ? std::vector<int64_t>{1, 2, 3, 4, 6, 8} : std::vector<int64_t>{1}},
        // Two or four CTAs of a cluster split each tile's k-blocks, adding through shared memory.
        {"CLUSTER_K", few ? std::vector<int64_t>{1, 2, 4} : std::vector<int64_t>{1}},
        {"PINGPONG", {0, 1}},  // two consumer warpgroups take turns on whole tiles
        {"OCCUPANCY",
         skinny || few ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}},  // CTAs per SM
        // 64-K blocks a stage: two stream each row of a skinny problem's weights in 256-byte
        // pieces instead of 128 (bf16 tn 6144x32x4096: 0.0248 ms at two blocks a stage, six
        // stages, against 0.0256-0.0259 ms at one, eight stages; H100, docs/PERF.md, eleventh
        // round).
        {"KSUB", skinny || few ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1}, true},
        // Whether the kernel has the code that reads C (derived: the problem's beta != 0). Its
        // mere presence cost bf16 2048^3 with beta = 0 1-2% (H100, docs/PERF.md runs 183-184).
        {"READS_C", {p.reads_c ? 1 : 0}},
    };
    s.constraints = constraints();
    return s;
  }

  // Decode and other skinny problems: the skinny side on wgmma's N, the weights streamed through
  // a pipeline of 128-K stages, 8-12 blocks of 64 K deep (H100: 6144x32x4096 and 11008x8x4096
  // 3-4% faster than 64-K stages 5-8 deep); 64-row tiles where 128-row ones would leave half the
  // SMs without weights to stream. Returns whether the tiles are still so few that K is worth
  // splitting.
  static bool make_skinny(KernelConfig& c, const Problem& p, const ArchInfo& arch) {
    const bool swap = p.n <= p.m;  // the narrow side on wgmma's N
    const int64_t wide = swap ? p.m : p.n;
    const int64_t rows =
        std::min<int64_t>(2 * ceil_div(wide, 128) >= arch.sms ? 128 : 64, round_up(wide, 64));
    c.params["SWAP"] = swap;
    c.params[swap ? "BM" : "BN"] = rows;
    // wgmma N in steps of 8, or of 64 where the narrow operand is stored along M or N
    // (mn_major_in_chunks: bf16 nn 16x4096x4096).
    c.params[swap ? "BN" : "BM"] = round_up(swap ? p.n : p.m, q_kmajor(c) ? 8 : 64);
    c.params["WG"] = rows / 64;
    c.params["CLUSTER"] = 11;
    c.params["EPILOGUE"] = 0;
    c.params["KSUB"] = 2;
    c.params["STAGES"] = rows == 128 ? 4 : 6;
    return 2 * ceil_div(wide, rows) < arch.sms;
  }

  // Where 256x128 tiles leave a tenth of the SMs' rounds idle: the tiling whose rounds cost
  // least, a round costing its tile's area times how much dearer that tile computes it: 256x128
  // (1), 128x192 with three consumer warpgroups, five stages and TMA stores (1.04), 192x128 with
  // register stores (1.05 + 0.3 * 1024 / K: its epilogue weighs more as K shortens), or 256x128
  // tiles in stream-K where it can pay (streams_k_well), the work spread evenly (1.15). Set on 41
  // bf16 shapes whose defaults had taken stream-K or 192x128 (H100, docs/PERF.md runs 199-203):
  // 128x192 where it saves a round (tn 3584x4096x4096 0.97x, 2048x1536x1024 0.97x; 256x128:
  // 0.96x, 0.85x), 256x128 where the rounds' areas tie (tn 3072x3584x8192 0.92x; 128x192:
  // 0.88x), 192x128 with long K where it saves a round (tn 9216x1024x8192 0.96x; 256x128: 0.79x),
  // stream-K where the last round would be nearly empty (tn 5120x2560x4096 0.94x, 8704x1536x8192
  // 0.96x; the best data-parallel tile: 0.89x, 0.90x). On 16 shapes drawn at random among those
  // whose default it changes: 0.80x -> 1.00x, worst 0.40x -> 0.85x (run 204). Returns whether it
  // took a tile other than 256x128.
  static bool make_filling(KernelConfig& c, const Problem& p, const ArchInfo& arch) {
    const KernelConfig whole = with_paying_cluster(c, p, arch);
    const Units big = units_of(whole, p, arch);
    if (wave_efficiency(big) >= 0.9) return false;
    KernelConfig tall = c, wide = c;
    set_tile(tall, 128, 192);
    set_tile(wide, 192, 128);
    const double whole_cost = rounds_cost(whole, p, arch, 1.0);
    const double tall_cost = rounds_cost(tall, p, arch, 1.04);
    const double wide_cost = rounds_cost(wide, p, arch, 1.05 + 0.3 * 1024 / double(p.k));
    const double best = std::min({whole_cost, tall_cost, wide_cost});
    const double streamed =
        double(big.super_tiles) / double(big.workers) * 256 * 128 * cluster_ctas(whole) * 1.15;
    if (streams_k_well(big) && streamed < best) {
      c.params["SCHEDULE"] = schedule::STREAM_K;
      return false;
    }
    if (whole_cost == best) return false;
    c = wide_cost < tall_cost ? wide : tall;
    return true;
  }

  // 128x192 tiles: three consumer warpgroups, five stages, TMA stores, a cluster along M;
  // 192x128: two, four stages, register stores, a cluster along N.
  static void set_tile(KernelConfig& c, int64_t bm, int64_t bn) {
    const bool tall = bn == 192;
    c.params["BM"] = bm;
    c.params["BN"] = bn;
    c.params["STAGES"] = tall ? 5 : 4;
    c.params["WG"] = tall ? 3 : 2;
    c.params["CLUSTER"] = tall ? 21 : 12;
    c.params["EPILOGUE"] = tall ? 1 : 0;
  }

  // The rounds of a configuration's work units (its cluster as the default keeps it: an odd
  // count of tiles along the cluster pays a round's share) times their area, `dearer` for a
  // tile that computes the same area slower.
  static double rounds_cost(const KernelConfig& c, const Problem& p, const ArchInfo& arch,
                            double dearer) {
    const KernelConfig t = with_paying_cluster(c, p, arch);
    const Units u = units_of(t, p, arch);
    return double(ceil_div(u.super_tiles, u.workers) * t.at("BM") * t.at("BN") * cluster_ctas(t)) *
           dearer;
  }

  // Clusters pay with several waves of tiles, or with half a wave and long K (multicast halves
  // what the L2 delivers per k-block: bf16 tn 1000x3000x5000 went from 0.51x to 0.70x).
  static KernelConfig with_paying_cluster(KernelConfig c, const Problem& p, const ArchInfo& arch) {
    const int64_t tiles = ceil_div(p.m, c.at("BM")) * ceil_div(p.n, c.at("BN"));
    const bool long_k_wave = p.k > 4096 && 2 * tiles >= arch.sms;
    if (tiles < 2 * arch.sms && !long_k_wave) c.params["CLUSTER"] = 11;
    return c;
  }

  // Stream-K can pay only where data-parallel tiles would leave the last of two or more rounds
  // nine tenths empty and K is long enough (64 k-blocks or more) that its fixups weigh little.
  // Everywhere else it lost to data-parallel tiles, by up to half (tn 2048x1536x1024 0.48x
  // against 0.97x; H100, docs/PERF.md runs 199-201): its staggered k-ranges share little in L2
  // (tn 3072x3584x8192 read 875 MB from DRAM, data-parallel tiles 222 MB), and idle SMs leave
  // their power to the busy ones.
  static bool streams_k_well(const Units& u) {
    return u.super_tiles >= 2 * u.workers && u.k_blocks >= 64 &&
           10 * (u.super_tiles % u.workers) <= u.workers;
  }

  // Large problems that read C, with K short enough that their epilogues weigh: no cluster (its
  // two CTAs would wait on each other's epilogues, longer with C's loads), and from twelve
  // waves of 256x128 tiles on, 192x128 tiles, whose three chunks of C all fit in staging
  // buffers and are all requested before the tile's main loop (bf16 nn with beta = 1, tuned on
  // the H100, docs/PERF.md run 180: 192x128 without a cluster won on 8192x8192x{512,1024,2048}
  // and 16384x8192x1024, 0.96-1.03x cuBLAS against 0.90-0.96x for 256x128 with a cluster;
  // 256x128 without one on 4096x4096x1024 and 8192x4096x1024, 3.9 and 7.8 waves).
  static void make_large_reading_c(KernelConfig& c, const Problem& p, const ArchInfo& arch) {
    c.params["CLUSTER"] = 11;
    if (ceil_div(p.m, 256) * ceil_div(p.n, 128) < 12 * arch.sms) return;
    c.params["BM"] = 192;
  }

  // A configuration per shape class, from the winners of gemm-tune on the H100 (docs/PERF.md,
  // issue 7): decode and other skinny problems put the skinny side on wgmma's N and stream the
  // weights through a 5-8 stage pipeline, data-parallel while the tiles fill half the SMs;
  // small problems take 64x64 tiles, whole; problems with a side of 128 or less whose tiles are
  // few are streamed like decode; mid-size ones 128x128 tiles where even those leave
  // SMs idle, one wave of 256x128 tiles with TMA stores where those fill one; where 256x128
  // tiles waste rounds, the tiling whose rounds cost least (make_filling); large ones 256x128
  // tiles four stages deep with a cluster of two sharing A and TMA stores through two chunk
  // buffers per warpgroup (cuBLAS's own layout on these problems; 1.6-3.4% faster than three
  // stages with the whole tile staged on bf16 tn 4096^3 to 11008x4096x4096 and nn
  // 8192x8192x1024, H100, docs/PERF.md). Split-K takes up a wave the tiles do not fill.
  KernelConfig default_config(const Problem& p, const ArchInfo& arch) const override {
    KernelConfig c{"wgmma_sm90", p.types, p.scaling, p.op_a, p.op_b, {}};
    c.params = {{"BM", 256},
                {"BN", 128},
                {"SWAP", 0},
                {"STAGES", 4},
                {"WG", 2},
                {"WS", 1},
                {"CLUSTER", 12},
                {"RASTER", p.m >= p.n ? 0 : 1},
                {"GROUP", 8},
                {"EPILOGUE", 1},
                {"SCHEDULE", schedule::DATA_PARALLEL},
                {"SPLITS", 1},
                {"CLUSTER_K", 1},
                {"PINGPONG", 0},
                {"OCCUPANCY", 1},
                {"KSUB", 1},
                {"READS_C", p.reads_c ? 1 : 0}};
    const auto tiles_of = [&](int64_t bm, int64_t bn) {
      return ceil_div(p.m, bm) * ceil_div(p.n, bn);
    };
    bool split_where_few = true, one_wave_tma_store = false;
    if (skinny_n(p) || skinny_m(p)) {
      split_where_few = make_skinny(c, p, arch);
    } else if (p.flops() < 1e9) {
      // Bound by latency: the fixup of a split through the workspace costs more than the
      // k-blocks it spreads. Where A is stored along K, wgmma N narrows until the tiles fill
      // about half the SMs (bf16 tn 768x128x768: 24x64 tiles on 64 CTAs, cuBLAS's grid; tuned
      // 0.89-0.90x against 0.73-0.80x untuned on 64x64 tiles 5 deep), two CTAs of a cluster
      // split each tile's k-blocks, so that every SM streams (7.2 against 7.4-8.2 us in four
      // exhaustive runs, within each run's spread), and a stage holds two 64-K blocks, five
      // stages deep (768x128x768 0.98-1.00x -> 1.03-1.04x, 1024x256x1024 0.95-0.96x -> 1.00x,
      // 1536x128x2048 0.95-0.96x -> 1.00x against one block a stage, 8 deep; 4 stages lost on
      // 1536x128x2048, 3 on all K of 1024 or more; H100, docs/PERF.md, twelfth round).
      c.params["BM"] = 64;
      c.params["BN"] = 64;
      c.params["STAGES"] = 5;
      c.params["WG"] = 1;
      if (p.op_a == Op::T) {
        const int64_t tile_rows = std::max<int64_t>(1, arch.sms / 2 / ceil_div(p.n, 64));
        c.params["BM"] = std::min<int64_t>(64, round_up(ceil_div(p.m, tile_rows), 8));
        c.params["STAGES"] = 5;
        c.params["KSUB"] = 2;
        c.params["CLUSTER_K"] = 2;  // repaired() drops it where the clusters would not fit
      }
      split_where_few = false;
    } else if (narrow_few(p, arch)) {
      split_where_few = make_skinny(c, p, arch);
    } else if (few_tiles(p, arch)) {
      // One consumer warpgroup, six stages and TMA stores (bf16 1024x1024x16384, split in two:
      // 58.4 us; two warpgroups 60.0 us, five stages 59.8 us, register stores 60.5 us; H100).
      c.params["BM"] = 128;
      c.params["WG"] = 1;
      c.params["STAGES"] = 6;
      one_wave_tma_store = true;
    } else if (tiles_of(256, 128) < arch.sms && p.k <= 4096) {
      // One wave of 256x128 tiles: four stages, TMA stores (bf16 2048^3: 0.98x cuBLAS, where
      // 128x128 tiles, two per SM, made 0.91x), unless another tiling's rounds cost less.
      make_filling(c, p, arch);
      one_wave_tma_store = true;
    } else if (p.m < 512 || p.n < 256) {
      c.params["BM"] = 128;
      c.params["CLUSTER"] = 11;
      c.params["STAGES"] = 4;
    } else if (make_filling(c, p, arch)) {
      one_wave_tma_store = c.at("EPILOGUE") == 1;
    } else if (p.reads_c && p.k <= 2048) {
      make_large_reading_c(c, p, arch);
    }
    // Register stores where a CTA has one tile, but where one wave of tiles measured faster
    // with TMA stores.
    c = with_paying_cluster(c, p, arch);
    if (tiles_of(c.at("BM"), c.at("BN")) <= arch.sms && !one_wave_tma_store)
      c.params["EPILOGUE"] = 0;
    return repaired(with_fitting_stages(split_where_few ? with_schedule(c, p, arch) : c, arch), p,
                    arch);
  }

  std::string kernel_name(const KernelConfig& c) const override {
    std::string schedule;
    if (c.at("SCHEDULE") == schedule::SPLIT_K) schedule = fmt::format("_splitk{}", c.at("SPLITS"));
    if (c.at("SCHEDULE") == schedule::STREAM_K) schedule = "_streamk";
    if (cluster_k(c) > 1) schedule = fmt::format("_ck{}", cluster_k(c));
    return fmt::format("gemm_wgmma_{}_{}{}_{}x{}x{}_s{}_wg{}_c{}x{}_{}_r{}{}{}{}{}{}{}",
                       c.types.token(), to_char(c.op_a), to_char(c.op_b), c.at("BM"), c.at("BN"),
                       stage_k(c), c.at("STAGES"), c.at("WG"), cluster_m(c), cluster_n(c),
                       c.at("WS") ? (pingpong(c) ? "pingpong" : "ws") : "ms",
                       c.at("RASTER") ? "n" : "m",
                       c.at("GROUP") == 8 ? "" : fmt::format("_g{}", c.at("GROUP")),
                       swapped(c) ? "_swap" : "", schedule, c.at("EPILOGUE") ? "_tmastore" : "",
                       c.at("OCCUPANCY") > 1 ? fmt::format("_o{}", c.at("OCCUPANCY")) : "",
                       reads_c(c) ? "_readsc" : "");
  }

  std::string emit(const KernelConfig& c) const override {
    return generated_unit(
        {kernel_name(c), "wgmma_sm90.cuh", "gemmtune::wgmma_sm90::Kernel",
         fmt::format(
             "  static constexpr int BM = {}, BN = {}, STAGES = {}, WG = {};\n"
             "  static constexpr bool SWAP = {}, WS = {};\n"
             "  static constexpr int CLUSTER_M = {}, CLUSTER_N = {}, RASTER = {}, GROUP = {};\n"
             "  static constexpr int EPILOGUE = {}, C_BUFFERS = {}, SCHEDULE = {}, SPLITS = {}, "
             "CLUSTER_K = {};\n"
             "  static constexpr int OCCUPANCY = {}, KSUB = {};\n"
             "  static constexpr bool PINGPONG = {}, A_T = {}, B_T = {};\n"
             "  static constexpr int DTYPE = {};\n"
             "  static constexpr bool READS_C = {};\n",
             c.at("BM"), c.at("BN"), c.at("STAGES"), c.at("WG"), swapped(c), c.at("WS") != 0,
             cluster_m(c), cluster_n(c), c.at("RASTER"), c.at("GROUP"), c.at("EPILOGUE"),
             c_buffers(c), c.at("SCHEDULE"), c.at("SPLITS"), cluster_k(c), c.at("OCCUPANCY"),
             c.at("KSUB"), pingpong(c), c.op_a == Op::T, c.op_b == Op::T, int(c.types.a),
             reads_c(c)),
         smem_static_assert("K::SMEM_BYTES", smem_bytes_of(c)), "K::THREADS, K::CTAS_PER_SM",
         "  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];\n"
         "  K::run(args, gemmtune_smem);\n"});
  }

  LaunchGeometry geometry(const KernelConfig& c, const Problem& p,
                          const ArchInfo& arch) const override {
    LaunchGeometry g;
    const Units u = units_of(c, p, arch);
    g.tiles_m = uint32_t(u.tiles_m);
    g.tiles_n = uint32_t(u.tiles_n);
    // Super tiles (cluster-sized groups) in raster groups along M, or along N (Kernel::tile_of).
    const int super_m = int(ceil_div(u.tiles_m, cluster_m(c))),
              super_n = int(ceil_div(u.tiles_n, cluster_n(c)));
    if (c.at("RASTER") == 0)
      raster_divisors(super_m, super_n, int(c.at("GROUP")), g.divisors);
    else
      raster_divisors(super_n, super_m, int(c.at("GROUP")), g.divisors);
    g.block = {uint32_t(128 * (c.at("WG") + c.at("WS"))), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c));
    const int64_t cluster = cluster_ctas(c);
    g.cluster = {uint32_t(cluster), 1, 1};
    if (c.at("WS")) {
      // Persistent: one CTA per SM (whole clusters), each a worker of the tile schedule.
      const int64_t mode = c.at("SCHEDULE");
      const int64_t units =
          u.super_tiles * (mode == schedule::SPLIT_K ? std::min(c.at("SPLITS"), u.k_blocks) : 1);
      const int64_t most = mode == schedule::STREAM_K ? u.super_tiles * u.k_blocks : units;
      g.grid = {uint32_t(std::min(most, u.workers) * cluster), 1, 1};
      g.persistent = true;
      g.work_units =
          mode == schedule::STREAM_K ? 0 : grid_extent(units);  // stream-K: every resident CTA
    } else {
      g.grid = {grid_extent(u.tiles_m * u.tiles_n), 1, 1};
    }
    const Workspace w = workspace_of(c, u);
    g.workspace_bytes = w.scratch;
    g.counter_bytes = w.counters;
    // Tensor maps: P's rows are the kernel rows (TM), Q's the kernel columns (TN).
    const bool swap = swapped(c);
    g.map(Operand::a) = box_of(a_kmajor(c), swap ? tile_rows(c) : tile_cols(c), shares_a(c));
    g.map(Operand::b) = box_of(b_kmajor(c), swap ? tile_cols(c) : tile_rows(c), shares_b(c));
    if (c.at("EPILOGUE")) g.map(Operand::c) = {true, 64, uint32_t(64 * blocks_per_warpgroup(c))};
    g.reads_c = reads_c(c);
    return g;
  }

  // The kernel's template and the operand packing its launch runs (what they include is found by
  // scanning).
  std::vector<std::string> template_files() const override {
    return {"wgmma_sm90.cuh", "pack.cuh"};
  }

  // Calibrated on the ladder of docs/PERF.md and PERF-ANCHORS.md: the best kernel (wgmma N 256,
  // two consumer warpgroups, warp-specialized, TMA-store epilogue) reaches about 70% of the
  // nominal peak. Smaller wgmma N read more shared memory per FLOP ((64 + N) / 64N); one consumer
  // warpgroup cannot keep the tensor cores busy, three make up for their narrower wgmma; the
  // multistage schedule lost 10-20% to warp specialization; ping-pong hides half of what
  // remains of the epilogue; OCCUPANCY CTAs share an SM. A cluster that multicasts an operand
  // halves what its CTAs fetch of it; split-K writes and reads partial sums; a cluster that
  // splits K exchanges them between its SMs' shared memory, for a quarter of that; stream-K
  // spreads the work evenly over the SMs at the cost of fixing up the tiles it splits, and of
  // L2 hits: its CTAs run staggered k-ranges (tn 3072x3584x8192 read 875 MB from DRAM against
  // 222 MB data-parallel, run 200); an operand TMA cannot read in place is packed first.
  // Stream-K's 1.16 and three warpgroups' 1.03 are fitted to the 302 timings of the suite's
  // compute-bound shapes in run 206's tuning, each shape on its own scale (make_filling's 1.15
  // for stream-K came from other shapes, runs 199-203); register stores' 1.5
  // epilogues a tile (TMA stores leave 0.3 unhidden) to runs 199-200's 192x128 tiles, and
  // checked on those timings (docs/PERF.md run 207).
  TileWork tile_work(const KernelConfig& c, const Problem& p, const ArchInfo& a) const override {
    const bool ws = c.at("WS") != 0;
    const Units u = units_of(c, p, a);
    TileWork w;
    w.tile_m = c.at("BM");
    w.tile_n = c.at("BN");
    if (c.at("SCHEDULE") == schedule::SPLIT_K) w.k_splits = std::min(c.at("SPLITS"), u.k_blocks);
    if (cluster_k(c) > 1) w.k_splits = std::min(cluster_k(c), u.k_blocks);
    w.balanced = c.at("SCHEDULE") == schedule::STREAM_K;
    const int64_t threads = 128 * (c.at("WG") + c.at("WS"));
    w.ctas_per_sm = ws ? int(c.at("OCCUPANCY"))
                       : ctas_per_sm(a, threads, smem_bytes_of(c), accumulators(c) + 40);
    const double n = double(tile_cols(c));
    const double by_wg[] = {0, 0.90, 1.0, 1.03};
    w.efficiency = 0.70 * std::sqrt(1.25 * n / (64 + n)) * by_wg[c.at("WG")] * (ws ? 1.0 : 0.85) *
                   (cluster_size(c) == 1 ? 1.0 : 0.995) / (w.balanced ? 1.16 : 1.0);
    if (shares_b(c)) w.l2_traffic = (w.tile_m + 0.5 * w.tile_n) / double(w.tile_m + w.tile_n);
    if (shares_a(c)) w.l2_traffic = (0.5 * w.tile_m + w.tile_n) / double(w.tile_m + w.tile_n);
    w.workspace_bytes = 2.0 * double(workspace_of(c, u).scratch);  // written, then read back
    w.bytes_in_flight = double(c.at("STAGES") * (tile_rows(c) + tile_cols(c)) * stage_k(c) * 2);
    // Persistent CTAs fill their pipeline once and overlap part of each epilogue with the next
    // tile's loads (most of it when the TMA engine stores); multistage CTAs pay both per tile.
    const double epilogue = epilogue_us(a, w.tile_m, w.tile_n, p.types.d);
    w.tile_overhead_us = ws ? epilogue * (c.at("EPILOGUE") ? 0.3 : 1.5) : 1.0 + epilogue;
    if (pingpong(c))
      w.tile_overhead_us *= 0.5;  // one warpgroup's epilogue under the other's main loop
    // Partial sums out and back in: through the workspace, or (a cluster splitting K) from one
    // SM's shared memory to the other's.
    if (cluster_k(c) > 1)
      w.tile_overhead_us += 0.5 * epilogue;
    else if (w.k_splits > 1 || w.balanced)
      w.tile_overhead_us += 2 * epilogue;
    w.setup_us = packing_us(p, a);
    return w;
  }

 private:
  // The schedule of a default, where whole waves waste more than a tenth of the rounds: split-K
  // into about one wave of parts when the tiles leave SMs idle, else data-parallel tiles: stream-K
  // over fewer tiles than SMs lost to them on all five shapes measured (0.48-0.66x against
  // 0.84-0.97x; docs/PERF.md run 199). A split in two of tiles stored from registers goes to two
  // CTAs of a cluster, which add through shared memory instead of the workspace (bf16 tn
  // 4096x128x11008, 64x128 tiles: 1.06-1.09x cuBLAS against 0.98-0.99x split through the workspace;
  // H100, docs/PERF.md).
  static KernelConfig with_schedule(KernelConfig c, const Problem& p, const ArchInfo& arch) {
    const Units u = units_of(c, p, arch);
    if (!c.at("WS") || wave_efficiency(u) >= 0.9) return c;
    if (u.super_tiles < u.workers) {
      int64_t best = 1;
      for (int64_t s : {2, 3, 4, 6, 8}) {
        const int64_t parts = u.super_tiles * s;
        if (s <= u.k_blocks / 2 && parts <= u.workers) best = s;
      }
      if (best == 2 && c.at("EPILOGUE") == 0 && cluster_size(c) == 1 && !pingpong(c)) {
        c.params["CLUSTER_K"] = 2;  // data-parallel tiles, each split by its cluster
        return c;
      }
      if (best > 1) {
        c.params["SCHEDULE"] = schedule::SPLIT_K;
        c.params["SPLITS"] = best;
      }
    }
    return c;
  }

  // The deepest pipeline, up to the one set, whose stages fit a block's shared memory beside
  // what else the configuration keeps there (a cluster that splits K, its partial sums).
  static KernelConfig with_fitting_stages(KernelConfig c, const ArchInfo& arch) {
    while (c.at("STAGES") > 2 && smem_bytes_of(c) > arch.smem_per_block) c.params["STAGES"] -= 1;
    return c;
  }

  // The default made valid for the problem: simpler schedule, no cluster, register stores,
  // fewer stages, in that order; else the most promising valid point of the space.
  KernelConfig repaired(KernelConfig c, const Problem& p, const ArchInfo& arch) const {
    const SearchSpace s = space(p, arch);
    const std::pair<const char*, int64_t> fallbacks[] = {{"SCHEDULE", schedule::DATA_PARALLEL},
                                                         {"CLUSTER", 11},
                                                         {"CLUSTER_K", 1},
                                                         {"EPILOGUE", 0},
                                                         {"STAGES", 5},
                                                         {"STAGES", 4},
                                                         {"STAGES", 3}};
    for (const auto& [param, value] : fallbacks) {
      if (s.first_violation(c, p, arch) == nullptr) return c;
      c.params[param] = value;
    }
    if (s.first_violation(c, p, arch) == nullptr) return c;
    const Pruning valid = s.prune(p, arch);
    GT_REQUIRE(!valid.valid.empty(), Errc::internal,
               "the wgmma family has no valid configuration for {}", p.describe());
    return *std::min_element(valid.valid.begin(), valid.valid.end(),
                             [&](const KernelConfig& a, const KernelConfig& b) {
                               return predicted_ms(a, p, arch) < predicted_ms(b, p, arch);
                             });
  }

  static std::vector<Constraint> constraints() {
    auto rule =
        [](const char* name, const char* description,
           std::function<bool(const KernelConfig&, const Problem&, const ArchInfo&)> holds) {
          return Constraint{name, description, std::move(holds)};
        };
    return {
        rule("warpgroup_rows", "a tile's kernel rows are 64 per consumer warpgroup, once or twice",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               const int64_t mw = blocks_per_warpgroup(c);
               return tile_rows(c) % (64 * row_warpgroups(c)) == 0 && (mw == 1 || mw == 2);
             }),
        rule("pingpong_takes_two",
             "ping-pong: two consumer warpgroups of the persistent schedule take turns",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return !pingpong(c) || (c.at("WS") == 1 && c.at("WG") == 2);
             }),
        rule("pingpong_needs_turns",
             "ping-pong where every CTA has two tiles or more to take turns on",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               return !pingpong(c) ||
                      ceil_div(p.m, c.at("BM")) * ceil_div(p.n, c.at("BN")) >= 2 * a.sms;
             }),
        rule("wgmma_n", "wgmma's N (the tile's kernel columns) is a multiple of 8 from 8 to 256",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return tile_cols(c) % 8 == 0 && tile_cols(c) >= 8 && tile_cols(c) <= 256;
             }),
        rule("accumulators_fit",
             "f32 accumulators per consumer thread: 128 at most (96 with 3 warpgroups)",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return accumulators(c) <= (c.at("WG") == 3 ? 96 : 128);
             }),
        // One consumer warpgroup gets no registers from the producer (255 a thread, the most
        // there is): 128 accumulators leave too few for stream-K's fixup, or split-K's with
        // wgmma N 256 (ptxas spills 8-16 registers; split-K with N 128 does not).
        rule("fixup_fits_one_warpgroup",
             "one consumer warpgroup with 128 accumulators: no stream-K, split-K only with wgmma N "
             "up to 128",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               if (c.at("WG") != 1 || accumulators(c) < 128 ||
                   c.at("SCHEDULE") == schedule::DATA_PARALLEL)
                 return true;
               return c.at("SCHEDULE") == schedule::SPLIT_K && tile_cols(c) <= 128;
             }),
        rule("mn_major_in_chunks",
             "an operand stored along M or N on wgmma's N comes in 64-column chunks",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return q_kmajor(c) || tile_cols(c) % 64 == 0;
             }),
        rule("skinny_side_on_wgmma_n",
             "a side of 64 or less goes on wgmma's N (N: SWAP = 1, M: SWAP = 0)",
             [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
               if (skinny_n(p) && !skinny_m(p)) return swapped(c);
               if (skinny_m(p) && !skinny_n(p)) return !swapped(c);
               return true;
             }),
        rule("tile_not_past_problem",
             "no tile side longer than its dimension needs (rows in 64s, columns in 8s or "
             "64-column chunks)",
             [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
               return tile_rows(c) <= rows_needed(c, p) && tile_cols(c) <= cols_needed(c, p);
             }),
        rule("ragged_tiles_for_ragged_sides",
             "wgmma N off the powers of two only where the side is no multiple of 64, or under 64 "
             "where the problem is bound by latency",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               const int64_t cols = tile_cols(c), side = swapped(c) ? p.n : p.m;
               const bool usual = cols == 64 || cols == 128 || cols == 256 || cols == 192;
               return usual || cols == round_up(side, 8) || side % 64 != 0 ||
                      (cols < 64 && latency_bound(p, a));
             }),
        rule("small_tiles_for_few_tiles",
             "64-row tiles and the multistage schedule only where 128x128 tiles leave SMs idle",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               if (tile_rows(c) > 64 && c.at("WS") == 1) return true;
               return ceil_div(p.m, 128) * ceil_div(p.n, 128) < a.sms;
             }),
        // A side shorter than 128 (a skinny problem) takes the whole side: tile_not_past_problem
        // allows no more, and M = 65536, N = 8 must keep a valid configuration.
        rule("large_tiles_for_large_problems",
             "tiles of at least 128 x 128 (or the whole side) where such tiles fill two waves",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               if (ceil_div(p.m, 128) * ceil_div(p.n, 128) < 2 * a.sms) return true;
               return tile_rows(c) >= std::min<int64_t>(128, rows_needed(c, p)) &&
                      tile_cols(c) >= std::min<int64_t>(128, cols_needed(c, p));
             }),
        // Multicast halves what the L2 delivers of the shared operand on every k-block: it pays
        // once the tiles fill half the SMs (a one-wave problem with long K is bound by the L2:
        // bf16 tn 1000x3000x5000 read 447 MB from it for 40 MB of operands, ncu on the H100).
        rule("clusters_for_many_tiles", "clusters where the tiles fill at least half the SMs",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               return cluster_size(c) == 1 ||
                      2 * ceil_div(p.m, c.at("BM")) * ceil_div(p.n, c.at("BN")) >= a.sms;
             }),
        rule("deep_pipelines_stream",
             "more than 5 stages only to stream a skinny problem's operand (SWAP) or where the "
             "tiles leave SMs idle",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               return c.at("STAGES") <= 5 || swapped(c) || few_tiles(p, a);
             }),
        rule("smem_fits", "the stages fit the shared memory of a block",
             [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
               return smem_bytes_of(c) <= a.smem_per_block;
             }),
        // Two CTAs of three consumer warpgroups would have 64 registers a thread: ptxas spills.
        rule("two_ctas_fit",
             "two CTAs per SM: persistent, at most two consumer warpgroups, small accumulators, "
             "both in shared memory",
             [](const KernelConfig& c, const Problem&, const ArchInfo& a) {
               if (c.at("OCCUPANCY") == 1) return true;
               return c.at("OCCUPANCY") == 2 && c.at("WS") == 1 && c.at("WG") <= 2 &&
                      accumulators(c) <= 32 && 2 * (smem_bytes_of(c) + 1024) <= a.smem_per_sm;
             }),
        rule("clusters_need_ws", "clusters (TMA multicast) only with the warp-specialized schedule",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return cluster_size(c) == 1 || c.at("WS") == 1;
             }),
        rule("cluster_k_alone",
             "a cluster splits K in two or four for data-parallel tiles of the warp-specialized "
             "schedule, stored from registers, without multicast or ping-pong",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               if (cluster_k(c) == 1) return true;
               return (cluster_k(c) == 2 || cluster_k(c) == 4) && cluster_size(c) == 1 &&
                      c.at("WS") == 1 && !pingpong(c) && c.at("EPILOGUE") == 0 &&
                      c.at("SCHEDULE") == schedule::DATA_PARALLEL;
             }),
        // Each tile then takes two or four SMs: worth it where the tiles leave most of them idle.
        rule("cluster_k_for_few_tiles",
             "a cluster splits K where its CTAs fit one wave, two k-blocks a CTA or more",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               if (cluster_k(c) == 1) return true;
               return cluster_k(c) * ceil_div(p.m, c.at("BM")) * ceil_div(p.n, c.at("BN")) <=
                          a.sms &&
                      ceil_div(p.k, stage_k(c)) >= 2 * cluster_k(c);
             }),
        // The partial sums a cluster of four exchanges stay in registers beside the
        // accumulators: beyond these counts ptxas spilled (bf16 tn 768x128x768, sm_90a: 40-120
        // bytes with 128 accumulators on one consumer warpgroup, 8-56 with 56-96 on two, 32 with
        // 64 on three; none for clusters of two).
        rule("cluster_of_four_fits_registers",
             "a cluster of four splits K for at most 96 accumulators a thread (one consumer "
             "warpgroup), 48 (two), 32 (three)",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               const int64_t most[] = {0, 96, 48, 32};
               return cluster_k(c) != 4 || accumulators(c) <= most[c.at("WG")];
             }),
        rule("cluster_has_pairs", "a cluster of two needs two tiles along its direction",
             [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
               if (cluster_m(c) == 2) return ceil_div(p.m, c.at("BM")) >= 2;
               if (cluster_n(c) == 2) return ceil_div(p.n, c.at("BN")) >= 2;
               return true;
             }),
        rule("shared_half_whole", "a multicast half of a K-major tile is whole 8-row swizzle atoms",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               if (shares_a(c) && a_kmajor(c))
                 return (swapped(c) ? tile_rows(c) : tile_cols(c)) % 16 == 0;
               if (shares_b(c) && b_kmajor(c))
                 return (swapped(c) ? tile_cols(c) : tile_rows(c)) % 16 == 0;
               return true;
             }),
        rule("group_size", "raster groups of 1 to 64 tiles",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return c.at("GROUP") >= 1 && c.at("GROUP") <= 64;
             }),
        rule("tma_store_layout",
             "TMA stores: warp-specialized, m on wgmma's N, in 64-column chunks",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return c.at("EPILOGUE") == 0 ||
                      (c.at("WS") == 1 && !swapped(c) && tile_cols(c) % 64 == 0);
             }),
        rule("raster_along_longer_side", "tiles are swept along the longer of M and N first",
             [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
               return c.at("RASTER") == (p.m >= p.n ? 0 : 1);
             }),
        rule("schedules_need_ws",
             "split-K and stream-K run on the persistent warp-specialized schedule",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return c.at("SCHEDULE") == schedule::DATA_PARALLEL || c.at("WS") == 1;
             }),
        rule("splits_only_for_split_k", "SPLITS > 1 exactly with the split-K schedule",
             [](const KernelConfig& c, const Problem&, const ArchInfo&) {
               return (c.at("SPLITS") > 1) == (c.at("SCHEDULE") == schedule::SPLIT_K);
             }),
        rule("split_k_fills_the_gpu",
             "split-K where the tiles leave SMs idle, into at most two waves of parts",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               if (c.at("SCHEDULE") != schedule::SPLIT_K) return true;
               const Units u = units_of(c, p, a);
               return u.super_tiles < u.workers && c.at("SPLITS") <= u.k_blocks &&
                      u.super_tiles * c.at("SPLITS") <= 2 * u.workers;
             }),
        rule("stream_k_has_a_tail", "stream-K where the tiles do not fill whole waves",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               if (c.at("SCHEDULE") != schedule::STREAM_K) return true;
               const Units u = units_of(c, p, a);
               return u.super_tiles % u.workers != 0;
             }),
        rule("schedule_in_int", "the tile schedule's 32-bit arithmetic holds for the problem",
             [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
               const Units u = units_of(c, p, a);
               return schedule::fits_in_int(u.super_tiles, u.k_blocks, u.workers, c.at("SPLITS"));
             }),
    };
  }
};

}  // namespace

const Family& wgmma_sm90_family() {
  static const WgmmaSm90Family family;
  return family;
}

}  // namespace gemmtune
