// The GEMV family (templates/gemv.cuh): N == 1 or M == 1, bound by reading the matrix once.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "gemv_split.h"

namespace gemmtune {
namespace {

// Elements of a strided x staged in shared memory at once (dot orientation): 16 KB.
constexpr int64_t kXChunkBytes = 16 * 1024;
constexpr int64_t kMaxSplit = 32;  // the largest KSPLIT of the space

// SIDE 0: the vector is op(B) (N == 1); SIDE 1: it is op(A) (M == 1). Dot: the matrix's K runs
// along each output; otherwise across outputs (axpy). Mirrors gemv::Kernel.
bool side_fits(int64_t side, const Problem& p) {
  return side == 0 ? p.n == 1 : p.m == 1;
}
bool is_dot(int64_t side, Op op_a, Op op_b) {
  return side == 0 ? op_a == Op::T : op_b == Op::N;
}
bool is_dot(const KernelConfig& c) {
  return is_dot(c.at("SIDE"), c.op_a, c.op_b);
}
bool x_contiguous(const KernelConfig& c) {
  return c.at("SIDE") == 0 ? c.op_b == Op::N : c.op_a == Op::T;
}
int64_t element_bytes(const KernelConfig& c) {
  return gemmtune::element_bytes(c.types.a);
}
int64_t warps_of(const KernelConfig& c) {
  return c.at("THREADS") / 32;
}
int64_t outputs_of(const KernelConfig& c, const Problem& p) {
  return c.at("SIDE") == 0 ? p.m : p.n;
}

int64_t block_rows_of(const KernelConfig& c) {
  return gemv::block_rows(is_dot(c), int(warps_of(c)), int(c.at("ROWS")), int(c.at("VEC")));
}
int64_t granule_of(const KernelConfig& c) {
  return gemv::k_granule(is_dot(c), int(warps_of(c)), int(c.at("UNROLL")), int(c.at("VEC")));
}
// K elements a block consumes per round of its loop.
int64_t step_of(const KernelConfig& c) {
  return is_dot(c) ? 32 * c.at("VEC") * c.at("UNROLL") : warps_of(c) * c.at("UNROLL");
}
int64_t row_blocks_of(const KernelConfig& c, const Problem& p) {
  return ceil_div(outputs_of(c, p), block_rows_of(c));
}
int64_t slices_of(const KernelConfig& c, const Problem& p) {
  return gemv::slice_count(p.k, c.at("KSPLIT"), granule_of(c));
}
// Whether K can be split twice as far with every slice still holding a round of the loop.
bool can_split_further(const KernelConfig& c, const Problem& p) {
  return c.at("KSPLIT") < kMaxSplit && ceil_div(p.k, 2 * c.at("KSPLIT")) >= step_of(c);
}
int64_t xchunk_of(const KernelConfig& c) {
  return kXChunkBytes / element_bytes(c);
}

// Mirrors gemv::Kernel: the warps' sums (axpy; a constant the generated unit checks), or the
// staged chunk of a strided x (dot; its size depends on K).
int64_t axpy_smem_bytes(const KernelConfig& c) {
  return is_dot(c) ? 0 : warps_of(c) * block_rows_of(c) * 4;
}
int64_t smem_bytes_of(const KernelConfig& c, const Problem& p) {
  if (!is_dot(c)) return axpy_smem_bytes(c);
  if (x_contiguous(c)) return 0;
  const int64_t slice = gemv::slice_length(p.k, c.at("KSPLIT"), granule_of(c));
  return std::min(xchunk_of(c), slice) * element_bytes(c);
}

int64_t widest_vector(const Problem& p) {
  return std::max<int64_t>(1, std::min(16, p.align) / gemmtune::element_bytes(p.types.a));
}

// The time a configuration should take: the matrix read once at the DRAM rate its grid can
// sustain (SMs with work, bytes in flight per SM against Little's law), plus launch latency
// and, when K is split, the partial sums and the extra reduction step.
double estimated_us(const KernelConfig& c, const Problem& p, const ArchInfo& arch) {
  constexpr double kDramBytesPerUs = 3.0e6;      // ~3 TB/s: an H100's measured copy rate
  constexpr double kNeededInFlight = 32 * 1024;  // bytes per SM that cover DRAM latency
  const double outputs = double(outputs_of(c, p)), esize = double(element_bytes(c));
  const double slices = double(slices_of(c, p));
  const double blocks = double(row_blocks_of(c, p)) * slices;
  const double threads = double(c.at("THREADS"));
  const double resident = std::min(std::ceil(blocks / arch.sms), std::floor(2048.0 / threads));
  const double in_flight =
      resident * threads * double(c.at("ROWS") * c.at("UNROLL") * c.at("VEC")) * esize;
  const double rate = kDramBytesPerUs * std::min(1.0, blocks / arch.sms) *
                      std::min(1.0, in_flight / kNeededInFlight);
  const double bytes = outputs * double(p.k) * esize + double(p.k) * esize + 2 * outputs * esize;
  double us = bytes / rate + 2.0;
  if (slices > 1) us += 1.0 + 3 * slices * outputs * 4 / rate;
  return us;
}

class GemvFamily final : public Family {
 public:
  std::string_view name() const override { return "gemv"; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (problem.m > 1 && problem.n > 1) return "N and M are both > 1";
    if (!one_type_of(problem, {DataType::f32, DataType::f16, DataType::bf16}))
      return "the gemv family computes f32, f16 and bf16, every operand of one type";
    if (arch.cc < 80) return "the gemv family needs sm_80 or newer (L2 cache policies)";
    return {};
  }

  SearchSpace space(const Problem&, const ArchInfo&) const override {
    SearchSpace s;
    s.family = "gemv";
    s.params = {
        {"SIDE", {0, 1}},  // 0: N == 1, y = op(A) x; 1: M == 1, y = op(B)^T x
        {"THREADS", {128, 256}},
        {"ROWS", {1, 2, 4}},    // outputs per warp (dot), vectors of outputs per lane (axpy)
        {"UNROLL", {2, 4, 8}},  // loads per output in flight (dot), K columns per round (axpy)
        {"KSPLIT", {1, 2, 4, 8, 16, kMaxSplit}},  // K split over blocks, deterministic reduction
        {"VEC", {1, 2, 4, 8}},  // elements per load: the widest the alignment allows
    };
    s.constraints = {
        {"side_matches_shape", "SIDE 0 needs N == 1, SIDE 1 needs M == 1",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return side_fits(c.at("SIDE"), p);
         }},
        {"widest_vector", "loads as wide as the alignment allows, 16 bytes at most",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("VEC") == widest_vector(p);
         }},
        {"loads_in_flight", "4 to 16 loads per lane in flight: ROWS * UNROLL",
         [](const KernelConfig& c, const Problem&, const ArchInfo&) {
           const int64_t loads = c.at("ROWS") * c.at("UNROLL");
           return loads >= 4 && loads <= 16;
         }},
        {"no_idle_rows",
         "a block owns no more outputs than there are, unless it is the smallest block",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           const bool smallest = c.at("ROWS") == 1 && (!is_dot(c) || c.at("THREADS") == 128);
           return smallest || block_rows_of(c) <= outputs_of(c, p);
         }},
        {"slice_holds_a_round", "each K slice holds at least one round of the block's loop",
         [](const KernelConfig& c, const Problem& p, const ArchInfo&) {
           return c.at("KSPLIT") == 1 || ceil_div(p.k, c.at("KSPLIT")) >= step_of(c);
         }},
        {"split_only_to_fill", "K is split no further than to reach two blocks per SM",
         [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
           return c.at("KSPLIT") == 1 || row_blocks_of(c, p) * (c.at("KSPLIT") / 2) < 2 * a.sms;
         }},
        {"split_enough", "K is split until there are half as many blocks as SMs, where it can be",
         [](const KernelConfig& c, const Problem& p, const ArchInfo& a) {
           return 2 * row_blocks_of(c, p) * c.at("KSPLIT") >= a.sms || !can_split_further(c, p);
         }},
    };
    return s;
  }

  // 256 threads, 16-byte loads where aligned (dot: two outputs per warp, 4 loads each in flight;
  // axpy: 4 columns per round); K split only as far as it takes to give every SM a block.
  KernelConfig default_config(const Problem& p, const ArchInfo& arch) const override {
    KernelConfig c{"gemv", p.types, p.scaling, p.op_a, p.op_b, {}};
    // Both sides fit when M == N == 1: prefer the one whose K runs contiguously.
    const bool side1 =
        p.m == 1 && (p.n > 1 || (is_dot(1, p.op_a, p.op_b) && !is_dot(0, p.op_a, p.op_b)));
    c.params = {{"SIDE", side1 ? 1 : 0}, {"THREADS", 256}, {"ROWS", 1},
                {"UNROLL", 4},           {"KSPLIT", 1},    {"VEC", widest_vector(p)}};
    if (is_dot(c)) c.params["ROWS"] = 2;
    if (block_rows_of(c) > outputs_of(c, p)) {
      c.params["ROWS"] = 1;
      if (is_dot(c)) c.params["THREADS"] = 128;
    }
    while (row_blocks_of(c, p) * c.at("KSPLIT") < arch.sms && can_split_further(c, p))
      c.params["KSPLIT"] *= 2;
    return c;
  }

  std::string kernel_name(const KernelConfig& c) const override {
    return fmt::format("gemm_gemv_{}_{}{}_{}_{}_t{}_r{}_u{}_k{}_v{}", c.types.token(),
                       to_char(c.op_a), to_char(c.op_b), c.at("SIDE") == 0 ? "n1" : "m1",
                       is_dot(c) ? "dot" : "axpy", c.at("THREADS"), c.at("ROWS"), c.at("UNROLL"),
                       c.at("KSPLIT"), c.at("VEC"));
  }

  // A minimum of one block per SM: without it NVRTC's ptxas trades spills for occupancy.
  std::string emit(const KernelConfig& c) const override {
    return generated_unit(
        {kernel_name(c), "gemv.cuh", "gemmtune::gemv::Kernel",
         fmt::format("  static constexpr int DTYPE = {}, SIDE = {}, THREADS = {}, ROWS = {};\n"
                     "  static constexpr int UNROLL = {}, KSPLIT = {}, VEC = {}, XCHUNK = {};\n"
                     "  static constexpr bool A_T = {}, B_T = {};\n",
                     int(c.types.a), c.at("SIDE"), c.at("THREADS"), c.at("ROWS"), c.at("UNROLL"),
                     c.at("KSPLIT"), c.at("VEC"), xchunk_of(c), c.op_a == Op::T, c.op_b == Op::T),
         // A dot kernel's shared memory (x staged) depends on K: only axpy's is a constant.
         is_dot(c) ? std::string() : smem_static_assert("K::AXPY_SMEM_BYTES", axpy_smem_bytes(c)),
         "K::THREADS, 1",
         "  extern __shared__ __align__(16) unsigned char gemmtune_smem[];\n"
         "  K::run(args, gemmtune_smem);\n"});
  }

  LaunchGeometry geometry(const KernelConfig& c, const Problem& p, const ArchInfo&) const override {
    LaunchGeometry g;
    // Fewer row blocks than outputs (< 2^31, validate()), slices <= KSPLIT: within grid limits.
    const int64_t row_blocks = row_blocks_of(c, p), slices = slices_of(c, p);
    g.grid = {uint32_t(row_blocks), uint32_t(slices), 1};
    g.block = {uint32_t(c.at("THREADS")), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c, p));
    // Output tiles: the blocks of outputs, along M (N == 1) or along N (M == 1).
    (c.at("SIDE") == 0 ? g.tiles_m : g.tiles_n) = uint32_t(row_blocks);
    g.workspace_bytes = uint64_t(gemv::workspace_bytes(slices, outputs_of(c, p)));
    g.counter_bytes = uint64_t(gemv::counter_bytes(row_blocks, slices));
    return g;
  }

  std::vector<std::string> template_files() const override {
    return {"gemm_args.h", "common.cuh", "gemv_split.h", "gemv.cuh"};
  }

  // A bandwidth kernel: its own model of the matrix's streaming time (estimated_us) is the cost
  // model; the roofline of cost_model.hpp, made for tiles, is not.
  double predicted_ms(const KernelConfig& c, const Problem& p, const ArchInfo& a) const override {
    return estimated_us(c, p, a) * 1e-3;
  }
};

}  // namespace

const Family& gemv_family() {
  static const GemvFamily family;
  return family;
}

}  // namespace gemmtune
