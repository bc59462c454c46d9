// The GEMV family (templates/gemv.cuh): N == 1 or M == 1, bound by reading the matrix once.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "families.hpp"
#include "gemv_args.h"
#include "gemv_split.h"

namespace gemmtune {
namespace {

struct GemvParams {
  int64_t side = 0;  // 0: N == 1, y = op(A) x; 1: M == 1, y = op(B)^T x
  int64_t threads = 256;
  int64_t rows = 1;    // outputs per warp (dot), vectors of outputs per lane (axpy)
  int64_t unroll = 4;  // loads per output in flight (dot), K columns per round (axpy)
  int64_t ksplit = 1;  // K split over blocks, deterministic reduction
  int64_t vec = 1;     // elements per load: the widest the alignment allows

  using P = GemvParams;
  static constexpr std::array fields = {
      ParamField<P>{"SIDE", &P::side},     ParamField<P>{"THREADS", &P::threads},
      ParamField<P>{"ROWS", &P::rows},     ParamField<P>{"UNROLL", &P::unroll},
      ParamField<P>{"KSPLIT", &P::ksplit}, ParamField<P>{"VEC", &P::vec},
  };
};
using P = GemvParams;
using Config = FamilyConfig<P>;

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
bool is_dot(const Config& c) {
  return is_dot(c.side, c.op_a, c.op_b);
}
bool x_contiguous(const Config& c) {
  return c.side == 0 ? c.op_b == Op::N : c.op_a == Op::T;
}
int64_t element_bytes(const Config& c) {
  return gemmtune::element_bytes(c.types.a);
}
int64_t warps_of(const Config& c) {
  return c.threads / 32;
}
int64_t outputs_of(const Config& c, const Problem& p) {
  return c.side == 0 ? p.m : p.n;
}

int64_t block_rows_of(const Config& c) {
  return gemv::block_rows(is_dot(c), int(warps_of(c)), int(c.rows), int(c.vec));
}
int64_t granule_of(const Config& c) {
  return gemv::k_granule(is_dot(c), int(warps_of(c)), int(c.unroll), int(c.vec));
}
// K elements a block consumes per round of its loop.
int64_t step_of(const Config& c) {
  return is_dot(c) ? 32 * c.vec * c.unroll : warps_of(c) * c.unroll;
}
int64_t row_blocks_of(const Config& c, const Problem& p) {
  return ceil_div(outputs_of(c, p), block_rows_of(c));
}
int64_t slices_of(const Config& c, const Problem& p) {
  return gemv::slice_count(p.k, c.ksplit, granule_of(c));
}
// Whether K can be split twice as far with every slice still holding a round of the loop.
bool can_split_further(const Config& c, const Problem& p) {
  return c.ksplit < kMaxSplit && ceil_div(p.k, 2 * c.ksplit) >= step_of(c);
}
int64_t xchunk_of(const Config& c) {
  return kXChunkBytes / element_bytes(c);
}

// Mirrors gemv::Kernel: the warps' sums (axpy; a constant the generated unit checks), or the
// staged chunk of a strided x (dot; its size depends on K).
int64_t axpy_smem_bytes(const Config& c) {
  return is_dot(c) ? 0 : warps_of(c) * block_rows_of(c) * 4;
}
int64_t smem_bytes_of(const Config& c, const Problem& p) {
  if (!is_dot(c)) return axpy_smem_bytes(c);
  if (x_contiguous(c)) return 0;
  const int64_t slice = gemv::slice_length(p.k, c.ksplit, granule_of(c));
  return std::min(xchunk_of(c), slice) * element_bytes(c);
}

int64_t widest_vector(const Problem& p) {
  return std::max<int64_t>(1, std::min(16, p.align) / gemmtune::element_bytes(p.types.a));
}

// The time a configuration should take: the matrix read once at the DRAM rate its grid can
// sustain (SMs with work, bytes in flight per SM against Little's law), plus launch latency
// and, when K is split, the partial sums and the extra reduction step.
double estimated_us(const Config& c, const Problem& p, const ArchInfo& arch) {
  constexpr double kDramBytesPerUs = 3.0e6;      // ~3 TB/s: an H100's measured copy rate
  constexpr double kNeededInFlight = 32 * 1024;  // bytes per SM that cover DRAM latency
  const double outputs = double(outputs_of(c, p)), esize = double(element_bytes(c));
  const double slices = double(slices_of(c, p));
  const double blocks = double(row_blocks_of(c, p)) * slices;
  const double threads = double(c.threads);
  const double resident = std::min(std::ceil(blocks / arch.sms), std::floor(2048.0 / threads));
  const double in_flight = resident * threads * double(c.rows * c.unroll * c.vec) * esize;
  const double rate = kDramBytesPerUs * std::min(1.0, blocks / arch.sms) *
                      std::min(1.0, in_flight / kNeededInFlight);
  const double bytes = outputs * double(p.k) * esize + double(p.k) * esize + 2 * outputs * esize;
  double us = bytes / rate + 2.0;
  if (slices > 1) us += 1.0 + 3 * slices * outputs * 4 / rate;
  return us;
}

using Members = std::vector<int64_t P::*>;
const Members kBlock = {&P::side, &P::threads, &P::rows, &P::vec};   // block_rows_of
const Members kStep = {&P::side, &P::threads, &P::unroll, &P::vec};  // step_of, granule_of

class GemvFamily final : public FamilyOf<P> {
 public:
  std::string_view name() const override { return "gemv"; }
  int rank() const override { return 10; }
  bool takes_epilogues() const override { return true; }
  // Gated epilogues with N == 1: a block's rows in gate and up pairs (gemv.cuh, write_gated).
  bool takes_gated() const override { return true; }

  std::string unsupported_reason(const Problem& problem, const ArchInfo& arch) const override {
    if (problem.m > 1 && problem.n > 1) return "N and M are both > 1";
    if (problem.epilogue.gated() && (problem.n != 1 || problem.op_a != Op::T))
      return fmt::format(
          "epilogue {}: a gated GEMV needs N == 1 and the weights stored along K (op(A) = T, "
          "layout t_: an nn.Linear's)",
          problem.epilogue.name());
    if (!one_type_of(problem, {DataType::f32, DataType::f16, DataType::bf16}))
      return "the gemv family computes f32, f16 and bf16, every operand of one type";
    if (arch.cc < 80) return "the gemv family needs sm_80 or newer (L2 cache policies)";
    return {};
  }

  Space<P> space(const Problem&, const ArchInfo&) const override {
    Space<P> s;
    s.set(&P::side, {0, 1});
    s.set(&P::threads, {128, 256});
    s.set(&P::rows, {1, 2, 4});
    s.set(&P::unroll, {2, 4, 8});
    s.set(&P::ksplit, {1, 2, 4, 8, 16, kMaxSplit});
    s.set(&P::vec, {1, 2, 4, 8});
    s.rules = {
        {"side_matches_shape",
         "SIDE 0 needs N == 1, SIDE 1 needs M == 1",
         {&P::side},
         [](const Config& c, const Problem& p, const ArchInfo&) { return side_fits(c.side, p); }},
        {"widest_vector",
         "loads as wide as the alignment allows, 16 bytes at most",
         {&P::vec},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return c.vec == widest_vector(p);
         }},
        {"loads_in_flight",
         "4 to 16 loads per lane in flight: ROWS * UNROLL",
         {&P::rows, &P::unroll},
         [](const Config& c, const Problem&, const ArchInfo&) {
           const int64_t loads = c.rows * c.unroll;
           return loads >= 4 && loads <= 16;
         }},
        {"no_idle_rows",
         "a block owns no more outputs than there are, unless it is the smallest block", kBlock,
         [](const Config& c, const Problem& p, const ArchInfo&) {
           const bool smallest = c.rows == 1 && (!is_dot(c) || c.threads == 128);
           return smallest || block_rows_of(c) <= outputs_of(c, p);
         }},
        {"slice_holds_a_round", "each K slice holds at least one round of the block's loop",
         kStep + Members{&P::ksplit},
         [](const Config& c, const Problem& p, const ArchInfo&) {
           return c.ksplit == 1 || ceil_div(p.k, c.ksplit) >= step_of(c);
         }},
        {"split_only_to_fill", "K is split no further than to reach two blocks per SM",
         kBlock + Members{&P::ksplit},
         [](const Config& c, const Problem& p, const ArchInfo& a) {
           return c.ksplit == 1 || row_blocks_of(c, p) * (c.ksplit / 2) < 2 * a.sms;
         }},
        {"split_enough", "K is split until there are half as many blocks as SMs, where it can be",
         kBlock + kStep + Members{&P::ksplit},
         [](const Config& c, const Problem& p, const ArchInfo& a) {
           return 2 * row_blocks_of(c, p) * c.ksplit >= a.sms || !can_split_further(c, p);
         }},
    };
    return s;
  }

  // 256 threads, 16-byte loads where aligned (dot: two outputs per warp, 4 loads each in flight;
  // axpy: 4 columns per round); K split only as far as it takes to give every SM a block.
  Config default_of(const Problem& p, const ArchInfo& arch) const override {
    Config c = Config::of(p);
    // Both sides fit when M == N == 1: prefer the one whose K runs contiguously.
    const bool side1 =
        p.m == 1 && (p.n > 1 || (is_dot(1, p.op_a, p.op_b) && !is_dot(0, p.op_a, p.op_b)));
    c.side = side1 ? 1 : 0, c.threads = 256, c.rows = 1, c.unroll = 4, c.ksplit = 1;
    c.vec = widest_vector(p);
    if (is_dot(c)) c.rows = 2;
    if (block_rows_of(c) > outputs_of(c, p)) {
      c.rows = 1;
      if (is_dot(c)) c.threads = 128;
    }
    while (row_blocks_of(c, p) * c.ksplit < arch.sms && can_split_further(c, p)) c.ksplit *= 2;
    return c;
  }

  std::string name_of(const Config& c) const override {
    return fmt::format("gemm_gemv_{}_{}{}_{}_{}_t{}_r{}_u{}_k{}_v{}", c.types.token(),
                       to_char(c.op_a), to_char(c.op_b), c.side == 0 ? "n1" : "m1",
                       is_dot(c) ? "dot" : "axpy", c.threads, c.rows, c.unroll, c.ksplit, c.vec);
  }

  // A minimum of one block per SM: without it NVRTC's ptxas trades spills for occupancy.
  UnitSource unit_of(const Config& c, const ArchInfo&) const override {
    return {
        "gemv.cuh", "", "gemmtune::gemv::Kernel",
        fmt::format("  static constexpr int DTYPE = {}, XCHUNK = {};\n"
                    "  static constexpr bool A_T = {}, B_T = {};\n",
                    int(c.types.a), xchunk_of(c), c.a_t(), c.b_t()),
        // A dot kernel's shared memory (x staged) depends on K: only axpy's is a constant.
        (is_dot(c) ? std::string() : smem_static_assert("K::AXPY_SMEM_BYTES", axpy_smem_bytes(c))) +
            threads_static_assert(c.threads),
        "K::THREADS, 1",
        "  extern __shared__ __align__(16) unsigned char gemmtune_smem[];\n"
        "  K::run(args, gemmtune_smem);\n"};
  }

  ArgsLayout args_layout() const override {
    return {"GemvArgs",
            sizeof(GemvArgs),
            offsetof(GemvArgs, core),
            {GEMMTUNE_ARGS_MEMBER(GemvArgs, core)}};
  }

  LaunchPlan plan_of(const Config& c, const Problem& p, const ArchInfo&) const override {
    LaunchPlan g;
    // Fewer row blocks than outputs (< 2^31, validate()), slices <= KSPLIT: within grid limits.
    const int64_t row_blocks = row_blocks_of(c, p), slices = slices_of(c, p);
    g.grid = {uint32_t(row_blocks), uint32_t(slices), 1};
    g.block = {uint32_t(c.threads), 1, 1};
    g.smem_bytes = uint32_t(smem_bytes_of(c, p));
    // Output tiles: the blocks of outputs, along M (N == 1) or along N (M == 1).
    (c.side == 0 ? g.tiles_m : g.tiles_n) = uint32_t(row_blocks);
    g.workspace_bytes = uint64_t(gemv::workspace_bytes(slices, outputs_of(c, p)));
    g.counter_bytes = uint64_t(gemv::counter_bytes(row_blocks, slices));
    g.args = args_layout();
    return g;
  }

  std::vector<std::string> template_files() const override { return {"gemv.cuh"}; }

  // A bandwidth kernel: its own model of the matrix's streaming time (estimated_us) is the cost
  // model; the roofline of cost_model.hpp, made for tiles, is not.
  double predicted(const Config& c, const Problem& p, const ArchInfo& a) const override {
    return estimated_us(c, p, a) * 1e-3;
  }
};

const GemvFamily& gemv_family() {
  static const GemvFamily family;
  return family;
}

}  // namespace

GEMMTUNE_REGISTER_FAMILY(gemv_family())

}  // namespace gemmtune
