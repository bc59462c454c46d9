// A family that exists only in tests: f16 A times bf16 B into f32 C and D, a pair of types no
// production family computes, with its own parameter struct, its kernel written here (not among
// the templates) and an argument of its own in its launch plan. It registers itself like any
// family, in the binaries that link this file, and nothing outside tests/ knows it: the proof
// that a family is one folder's worth of change.
#include "mixed_family.hpp"

#include <fmt/format.h>

#include "gemmtune/generator/family.hpp"

namespace gemmtune::test {
namespace {

struct MixedParams {
  int64_t threads = 128;  // rows of C a block computes, a thread each
  int64_t cols = 1;       // columns of C a thread computes

  using P = MixedParams;
  static constexpr std::array fields = {ParamField<P>{"THREADS", &P::threads},
                                        ParamField<P>{"COLS", &P::cols}};
};
using Config = FamilyConfig<MixedParams>;

// The argument struct, compiled here for its offsets and emitted as the kernel's. `extra` is the
// family's own argument: a wrong offset for it gives the kernel a wrong magic, and it writes NaN.
#define GEMMTUNE_MIXED_ARGS \
  struct MixedExtra {       \
    unsigned magic;         \
    int row_blocks;         \
  };                        \
  struct MixedArgs {        \
    GemmCore core;          \
    MixedExtra extra;       \
  };
GEMMTUNE_MIXED_ARGS
#define GEMMTUNE_TEXT(...) #__VA_ARGS__
#define GEMMTUNE_EXPANDED_TEXT(...) GEMMTUNE_TEXT(__VA_ARGS__)

constexpr unsigned kMagic = 0x6d697864;  // "mixd"

// D = alpha * op(A) op(B) + beta * C, a thread per row of C and COLS columns, f32 accumulation.
constexpr const char* kKernel = R"(
template <class Cfg>
struct MixedKernel {
  static constexpr int THREADS = Cfg::THREADS;
  static __device__ float a_at(const GemmCore& g, long long r, long long k) {
    const long long i = Cfg::A_T ? k + r * g.lda : r + k * g.lda;
    return gemmtune::f16_to_f32(reinterpret_cast<const gemmtune::u16*>(g.a)[i]);
  }
  static __device__ float b_at(const GemmCore& g, long long k, long long c) {
    const long long i = Cfg::B_T ? c + k * g.ldb : k + c * g.ldb;
    return gemmtune::bf16_to_f32(reinterpret_cast<const gemmtune::u16*>(g.b)[i]);
  }
  static __device__ void run(const MixedArgs& args) {
    const GemmCore& g = args.core;
    if (blockIdx.x >= unsigned(args.extra.row_blocks)) return;
    const long long row = (long long)blockIdx.x * THREADS + threadIdx.x;
    const long long col0 = (long long)blockIdx.y * Cfg::COLS;
    if (row >= g.m) return;
    float sums[Cfg::COLS] = {};
    for (long long k = 0; k < g.k; ++k) {
      const float a = a_at(g, row, k);
#pragma unroll
      for (int j = 0; j < Cfg::COLS; ++j)
        if (col0 + j < g.n) sums[j] = fmaf(a, b_at(g, k, col0 + j), sums[j]);
    }
    float* c = reinterpret_cast<float*>(g.c);
#pragma unroll
    for (int j = 0; j < Cfg::COLS; ++j) {
      if (col0 + j >= g.n) continue;
      float out = g.alpha * sums[j];
      if (g.beta != 0.0f) out = fmaf(g.beta, c[row + (col0 + j) * g.ldc], out);
      if (args.extra.magic != Cfg::MAGIC) out = __int_as_float(0x7fc00000);
      c[row + (col0 + j) * g.ldc] = out;
    }
  }
};
)";

class MixedFamily final : public FamilyOf<MixedParams> {
 public:
  std::string_view name() const override { return "mixed_f16_bf16"; }
  int rank() const override { return 900; }

  std::string unsupported_reason(const Problem& p, const ArchInfo& arch) const override {
    if (p.types != kTypes || p.scaling != Scaling::none)
      return "the test family computes f16 * bf16 -> f32 only";
    if (arch.cc < 80) return "the test family needs sm_80 or newer";
    return {};
  }

  Space<MixedParams> space(const Problem&, const ArchInfo&) const override {
    Space<MixedParams> s;
    s.set(&MixedParams::threads, {64, 128, 256});
    s.set(&MixedParams::cols, {1, 2, 4});
    s.rules = {{"cols_within_n",
                "a thread's columns do not run past N twice over",
                {&MixedParams::cols},
                [](const Config& c, const Problem& p, const ArchInfo&) {
                  return c.cols == 1 || c.cols <= p.n;
                }}};
    return s;
  }

  Config default_of(const Problem& p, const ArchInfo&) const override {
    Config c = Config::of(p);
    c.threads = 128;
    c.cols = p.n >= 2 ? 2 : 1;
    return c;
  }

  std::string name_of(const Config& c) const override {
    return fmt::format("gemm_mixed_{}_{}{}_t{}_c{}", c.types.token(), to_char(c.op_a),
                       to_char(c.op_b), c.threads, c.cols);
  }

  UnitSource unit_of(const Config& c, const ArchInfo&) const override {
    return {"common.cuh",
            std::string(GEMMTUNE_EXPANDED_TEXT(GEMMTUNE_MIXED_ARGS)) + kKernel,
            "MixedKernel",
            fmt::format("  static constexpr bool A_T = {}, B_T = {};\n"
                        "  static constexpr unsigned MAGIC = {}u;\n",
                        c.a_t(), c.b_t(), kMagic),
            threads_static_assert(c.threads),
            "K::THREADS",
            "  K::run(args);\n"};
  }

  ArgsLayout args_layout() const override {
    return {"MixedArgs",
            sizeof(MixedArgs),
            offsetof(MixedArgs, core),
            {GEMMTUNE_ARGS_MEMBER(MixedArgs, core), GEMMTUNE_ARGS_MEMBER(MixedArgs, extra)}};
  }

  LaunchPlan plan_of(const Config& c, const Problem& p, const ArchInfo&) const override {
    LaunchPlan g;
    const int64_t row_blocks = (p.m + c.threads - 1) / c.threads;
    g.grid = {grid_extent(row_blocks), uint32_t((p.n + c.cols - 1) / c.cols), 1};
    g.block = {uint32_t(c.threads), 1, 1};
    g.tiles_m = uint32_t(row_blocks);
    g.args = args_layout();
    g.blocks.push_back(
        ArgsBlock::of(g.args.offset_of("extra"), MixedExtra{kMagic, int(row_blocks)}));
    return g;
  }

  std::vector<std::string> template_files() const override { return {"common.cuh"}; }

  static constexpr DataTypes kTypes{DataType::f16, DataType::bf16, DataType::f32, DataType::f32};
};

const MixedFamily& mixed() {
  static const MixedFamily family;
  return family;
}

}  // namespace

const Family& mixed_family() {
  return mixed();
}

DataTypes mixed_family_types() {
  return MixedFamily::kTypes;
}

GEMMTUNE_REGISTER_FAMILY(mixed())

}  // namespace gemmtune::test
