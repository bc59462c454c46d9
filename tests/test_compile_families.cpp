// Every family's default space compiles with NVRTC, without spills, for the architectures the
// families target, on a sample that does not grow with the spaces; and the Hopper family's
// corners that once spilled or hung. No GPU needed: this is what ptxas reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "family_samples.hpp"
#include "gemmtune/error.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/tuner/tuner.hpp"

namespace gemmtune {
namespace {

class CompileFamilies : public ::testing::Test {
 protected:
  // Compile for real: a cached result would prove nothing about this build.
  void SetUp() override { setenv("GEMMTUNE_NO_KERNEL_CACHE", "1", 1); }
};

// Each configuration compiles for the architecture without spills or local memory, with a ptxas
// report. The unit also asserts that the kernel's shared memory, threads and argument layout are
// what the family's plan launches it with: a compile is that check too.
void expect_compile_without_spills(const Family& family, const std::vector<KernelConfig>& configs,
                                   const ArchInfo& arch) {
  const Compiler compiler(false);
  for (const KernelConfig& c : configs) {
    const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
    EXPECT_EQ(k.report.spills(), 0)
        << k.name << " spills on " << arch.name() << " (" << k.report.registers << " registers)";
    EXPECT_EQ(k.report.stack_frame, 0) << k.name << " uses local memory on " << arch.name();
    EXPECT_TRUE(k.report.found) << k.name << ": no ptxas report";
  }
}

// Every family's default space, for every architecture it targets: on each sample problem it
// supports, its default, the points that take every value of every parameter, and each rule's
// edge (test/family_samples.hpp). A fixed number of compiles per family, however its spaces
// grow; GEMMTUNE_COMPILE_SAMPLE=N compiles N per problem instead of the default.
class CompileEveryFamily : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override { setenv("GEMMTUNE_NO_KERNEL_CACHE", "1", 1); }
};

TEST_P(CompileEveryFamily, ASampleAndEveryRulesEdgeCompileWithoutSpills) {
  const auto& [family_name, arch_name] = GetParam();
  const Family& family = find_family(family_name);
  const ArchInfo arch = ArchInfo::from_name(arch_name);
  const char* env = std::getenv("GEMMTUNE_COMPILE_SAMPLE");
  const size_t per_problem = env ? size_t(std::atoi(env)) : 8;
  const size_t most = env ? size_t(-1) : 160;  // compiles per family and architecture
  std::vector<std::vector<KernelConfig>> samples;
  for (const Problem& p : test::sample_problems())
    if (why_unsupported(family, p, arch).empty())
      samples.push_back(test::sample_points(family, p, arch, per_problem));
  // Round robin over the problems (each one's default first), so that the bound spreads.
  std::set<std::string> names;
  std::vector<KernelConfig> configs;
  for (size_t rank = 0; rank < per_problem; ++rank)
    for (const auto& sample : samples)
      if (rank < sample.size() && configs.size() < most &&
          names.insert(family.kernel_name(sample[rank])).second)
        configs.push_back(sample[rank]);
  if (configs.empty())
    GTEST_SKIP() << family_name << " supports no sample problem on " << arch_name;
  expect_compile_without_spills(family, configs, arch);
}

std::vector<std::tuple<std::string, std::string>> families_and_arches() {
  std::vector<std::tuple<std::string, std::string>> out;
  for (const Family* f : all_families())
    for (const std::string& arch : test::sample_arches()) out.emplace_back(f->name(), arch);
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, CompileEveryFamily,
                         ::testing::ValuesIn(families_and_arches()), [](const auto& test) {
                           return std::get<0>(test.param) + "_" + std::get<1>(test.param);
                         });

// The valid points of a space that take every value of every parameter at least once, plus
// `extra` spread evenly over the rest.
std::vector<KernelConfig> covering_sample(const std::vector<KernelConfig>& valid, size_t extra) {
  std::vector<KernelConfig> out = test::covering_points(valid);
  for (size_t j = 0; j < extra && !valid.empty(); ++j)
    out.push_back(valid[(j * 7919 + 13) % valid.size()]);
  return out;
}

// TMA stores through fewer chunk buffers than the tile has 64-column chunks, where the whole C
// tile does not fit beside four stages: valid, within a block's shared memory, smaller than the
// whole tile staged, and compiled without spills (each unit asserts that the template's shared
// memory is the family's figure).
TEST_F(CompileFamilies, WgmmaTmaStoresThroughFewerBuffersThanChunks) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  struct Tile {
    int64_t bm, bn, wg;
  };
  for (const Tile t : {Tile{256, 128, 2}, Tile{128, 256, 2}, Tile{192, 192, 3}}) {
    for (const char* layout : {"nn", "tn"}) {
      const Problem p =
          make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 4096, 4096, 4096);
      const KernelConfig c{"wgmma_sm90",
                           p.types,
                           p.scaling,
                           p.op_a,
                           p.op_b,
                           {{"BM", t.bm},
                            {"BN", t.bn},
                            {"SWAP", 0},
                            {"STAGES", 4},
                            {"WG", t.wg},
                            {"WS", 1},
                            {"CLUSTER", 11},
                            {"RASTER", 0},
                            {"GROUP", 8},
                            {"EPILOGUE", 1},
                            {"SCHEDULE", 0},
                            {"SPLITS", 1},
                            {"CLUSTER_K", 1},
                            {"PINGPONG", 0},
                            {"OCCUPANCY", 1},
                            {"KSUB", 1},
                            {"READS_C", 0}}};
      EXPECT_EQ(family.why_invalid(c, p, arch), "") << family.kernel_name(c);
      const int64_t stages = 4 * (t.bm + t.bn) * 64 * 2, whole_c = t.bm * t.bn * 2;
      const int64_t smem = family.plan(c, p, arch).smem_bytes;
      EXPECT_LE(smem, arch.smem_per_block) << family.kernel_name(c);
      EXPECT_LT(smem, stages + whole_c) << family.kernel_name(c) << ": the whole C tile is staged";
      expect_compile_without_spills(family, {c}, arch);
    }
  }
}

// The defaults that stream a narrow side where tiles are few (64 rows, split-K, wgmma N 128), and
// that of a large problem that reads C (192x128, no cluster).
TEST_F(CompileFamilies, WgmmaNarrowFewDefaultsCompileWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  std::vector<KernelConfig> configs;
  for (const char* layout : {"nn", "tn"}) {
    configs.push_back(family.default_config(
        make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 4096, 128, 11008),
        arch));
    configs.push_back(family.default_config(
        make_problem(DType::f16, parse_op(layout[0]), parse_op(layout[1]), 128, 4096, 4096), arch));
  }
  Problem reads_c = make_problem(DType::bf16, Op::N, Op::N, 8192, 8192, 1024);
  reads_c.reads_c = true;
  configs.push_back(family.default_config(reads_c, arch));
  expect_compile_without_spills(family, configs, arch);
}

// A float8 problem of the fp8 suite in a scaling mode (e4m3 operands, bf16 out, tn).
Problem fp8_problem(int64_t m, int64_t n, int64_t k, Scaling scaling) {
  Problem p =
      make_problem(DataTypes{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16}, Op::T,
                   Op::N, m, n, k);
  p.scaling = scaling;
  return p;
}

// The same with an f32 output (D = C = f32).
Problem fp8_f32_problem(int64_t m, int64_t n, int64_t k, Scaling scaling) {
  Problem p = fp8_problem(m, n, k, scaling);
  p.types.c = p.types.d = DataType::f32;
  return p;
}

// The float8 defaults of every scaling mode compile without spills: large, token-narrow and
// decode shapes, mixed e4m3 x e5m2, and the widest tiles one partial sum leaves room for (wgmma N
// 192: 96 accumulators and 96 partial sums a thread), with block scales too.
TEST_F(CompileFamilies, WgmmaFloat8CompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  std::vector<KernelConfig> configs;
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (const auto& [m, n, k] :
         {std::tuple{7168, 4096, 16384}, std::tuple{2112, 64, 7168}, std::tuple{11008, 8, 4096}})
      configs.push_back(family.default_config(fp8_problem(m, n, k, scaling), arch));
  Problem mixed = fp8_problem(4096, 4096, 4096, Scaling::row);
  mixed.types.b = DataType::e5m2;
  configs.push_back(family.default_config(mixed, arch));
  // Fast accumulation (no promotion): large and decode tiles, and 256x128 with 128 accumulators.
  for (Scaling scaling : {Scaling::tensor, Scaling::row})
    for (const auto& [m, n, k] : {std::tuple{7168, 4096, 16384}, std::tuple{11008, 8, 4096}}) {
      Problem fast = fp8_problem(m, n, k, scaling);
      fast.accumulation = Accumulation::fast;
      configs.push_back(family.default_config(fast, arch));
    }
  Problem fast = fp8_problem(8192, 8192, 8192, Scaling::tensor);
  fast.accumulation = Accumulation::fast;
  KernelConfig fast_wide = family.default_config(fast, arch);
  fast_wide.params["BM"] = 256, fast_wide.params["BN"] = 128, fast_wide.params["WG"] = 2;
  fast_wide.params["STAGES"] = 4;
  configs.push_back(fast_wide);
  Problem wide = fp8_problem(8192, 8192, 8192, Scaling::tensor);
  KernelConfig widest = family.default_config(wide, arch);
  widest.params["BM"] = 192;
  widest.params["PROMOTE"] = 2;
  widest.params["OVERLAP"] = 0;
  configs.push_back(widest);
  // Block scales over tiles that span two 128-blocks of A's scales (wgmma N 192 and 160), loaded
  // in the loop and with each stage.
  for (const int64_t bm : {192, 160})
    for (const int64_t staged : {0, 1}) {
      const Problem block = fp8_problem(7168, 4096, 16384, Scaling::block);
      KernelConfig c = family.default_config(block, arch);
      c.params["BM"] = bm, c.params["BN"] = 128, c.params["STAGES"] = 4, c.params["CLUSTER"] = 11;
      c.params["OVERLAP"] = 0;  // one partial sum: two do not fit beside 80 or 96 accumulators
      c.params["EPILOGUE"] = bm % 64 == 0 ? c.at("EPILOGUE") : 0;
      c.params["STAGED_SCALES"] = staged;
      configs.push_back(c);
    }
  expect_compile_without_spills(family, configs, arch);
}

// Block scales that come into each stage by TMA beside the operands (STAGED_SCALES): the plan
// has maps over the scales of A (boxes of eight from a multiple of four, the tile's one or two
// column blocks among them) and of B (the tile's rows and four more), f32 and unswizzled, each
// required (unaligned scales are packed); block scales loaded in the loop, and tensor and row
// scales, have none. The default stages them where a tile's start costs most: tiles of 64 rows,
// one round of tiles, four k-blocks at most (docs/PERF.md, 'Block scales in the loop cost a
// tenth'), one GEMM only.
TEST(WgmmaFloat8, BlockScalesComeByTmaWithEachStage) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  struct Case {
    int64_t m, n, k;
    bool staged;
  };
  for (const Case& r :
       {Case{7168, 4096, 16384, false}, Case{4096, 4096, 7168, false}, Case{2112, 64, 7168, true},
        Case{4096, 128, 7168, true}, Case{32768, 4096, 512, true}, Case{24576, 64, 1536, true}}) {
    const Problem block = fp8_problem(r.m, r.n, r.k, Scaling::block);
    KernelConfig c = family.default_config(block, arch);
    EXPECT_EQ(c.at("STAGED_SCALES"), r.staged ? 1 : 0) << block.describe();
    for (const int64_t staged : {0, 1}) {
      c.params["STAGED_SCALES"] = staged;
      if (staged && c.at("BN") > 192) {  // 256 tokens in waves: no box holds their scales
        EXPECT_EQ(family.broken_rules(c, block, arch),
                  std::vector<std::string>{"block_scales_per_tile"});
        continue;
      }
      ASSERT_EQ(family.why_invalid(c, block, arch), "") << family.kernel_name(c);
      const LaunchPlan g = family.plan(c, block, arch);
      const TensorMapPlan* a = g.map(Operand::scale_a);
      const TensorMapPlan* b = g.map(Operand::scale_b);
      if (!staged) {
        EXPECT_TRUE(a == nullptr && b == nullptr) << family.kernel_name(c);
        continue;
      }
      ASSERT_TRUE(a != nullptr && b != nullptr) << family.kernel_name(c);
      EXPECT_EQ(a->box_rows, 8u);
      EXPECT_EQ(b->box_rows, uint32_t(c.at("BN") + 4));  // kernel rows (problem n, unswapped)
      for (const TensorMapPlan* map : {a, b}) {
        EXPECT_EQ(map->box_cols, 1u);
        EXPECT_EQ(map->type, DataType::f32);
        EXPECT_EQ(map->swizzle, Swizzle::none);
        EXPECT_EQ(map->made_flag, 0u);
      }
    }
  }
  // Float8 experts keep the loads they were measured with (the rule comes from one GEMM).
  Problem experts = fp8_problem(4096, 32 * 8, 7168, Scaling::block);
  experts.groups = 32;
  EXPECT_EQ(family.default_config(experts, arch).at("STAGED_SCALES"), 0);
  for (Scaling scaling : {Scaling::tensor, Scaling::row}) {
    const Problem other = fp8_problem(2112, 64, 7168, scaling);
    KernelConfig c = family.default_config(other, arch);
    EXPECT_EQ(c.at("STAGED_SCALES"), 0);
    EXPECT_EQ(family.plan(c, other, arch).map(Operand::scale_a), nullptr);
    c.params["STAGED_SCALES"] = 1;
    EXPECT_NE(family.why_invalid(c, other, arch), "");  // staged_scales_are_block_scales
  }
}

// The family's defaults of the grouped sample problems (decode, prefill and an nn layout), and the
// points that take every value of every parameter of the decode and prefill spaces.
std::vector<KernelConfig> grouped_sample(const Family& family, const ArchInfo& arch) {
  std::vector<KernelConfig> configs;
  for (const Problem& p : test::sample_problems()) {
    if (!p.grouped() || !why_unsupported(family, p, arch).empty()) continue;  // float8: wgmma's
    configs.push_back(family.default_config(p, arch));
    if (p.op_a != Op::T) continue;
    for (const KernelConfig& c : test::covering_points(family.prune(p, arch).valid))
      if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);
  }
  return configs;
}

// Grouped problems (mixture-of-experts layers): grouped_sample compiles without spills (the group
// table, the 3-D loads of A and the group's column bound).
TEST_F(CompileFamilies, WgmmaGroupedCompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const std::vector<KernelConfig> configs = grouped_sample(family, arch);
  EXPECT_GE(configs.size(), 6u);
  expect_compile_without_spills(family, configs, arch);
  // op(B) = T is refused: a group's first token would start B's TMA boxes (docs/PERF.md, 'TMA
  // faults on a box whose contiguous side starts off 16 bytes').
  Problem nt = make_problem(DType::bf16, Op::N, Op::T, 512, 64 * 8, 256);
  nt.groups = 8;
  EXPECT_NE(why_unsupported(family, nt, arch).find("op(B) = N"), std::string::npos);
}

// Grouped problems on the Ampere family, for sm_80 and sm_90a: grouped_sample and the default of
// an nt layout (plain loads) compile without spills (the table in the stages, a group's A, B and
// C bounded by its end). One GEMM's kernels hold no table (their cubins are those of before).
TEST_F(CompileFamilies, Mma80GroupedCompilesWithoutSpills) {
  const Family& family = find_family("mma_sm80");
  for (const char* name : {"sm_80", "sm_90a"}) {
    const ArchInfo arch = ArchInfo::from_name(name);
    std::vector<KernelConfig> configs = grouped_sample(family, arch);
    Problem nt = make_problem(DType::f16, Op::N, Op::T, 512, 40 * 8, 256);
    nt.groups = 8;
    configs.push_back(family.default_config(nt, arch));
    EXPECT_GE(configs.size(), 10u) << name;
    for (const KernelConfig& c : configs) {
      EXPECT_GE(c.at("GROUP_TABLE"), 8) << family.kernel_name(c);
      EXPECT_EQ(c.at("SPLITS"), 1) << family.kernel_name(c);
    }
    expect_compile_without_spills(family, configs, arch);
    const KernelConfig dense =
        family.default_config(make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096), arch);
    EXPECT_NE(family.emit(dense, arch).find("GROUP_TABLE = 0;"), std::string::npos);
  }
}

// Two partial sums taking turns (OVERLAP) fit beside the accumulators of 128x128 tiles in every
// mode, and of 64-token tiles with one consumer warpgroup, without spills; and ptxas keeps the
// wgmma asynchronous (it serializes them, with a warning, where it cannot tell which registers a
// wgmma in flight still writes); so do fast accumulation's tiles, whose scales once multiplied
// the wgmma's own accumulators (C7515: every wgmma serialized, 8% slower at 8192^3 on the H100).
TEST_F(CompileFamilies, WgmmaFloat8OverlapKeepsWgmmaAsynchronous) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  std::vector<std::pair<Problem, KernelConfig>> cases;
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block}) {
    const Problem p = fp8_problem(7168, 4096, 16384, scaling);
    KernelConfig c = family.default_config(p, arch);
    c.params["BM"] = 128, c.params["BN"] = 128, c.params["WG"] = 2, c.params["PROMOTE"] = 1;
    c.params["OVERLAP"] = 1;
    cases.emplace_back(p, c);
  }
  const Problem narrow = fp8_problem(7168, 64, 16384, Scaling::block);
  cases.emplace_back(narrow, family.default_config(narrow, arch));
  cases.back().second.params["OVERLAP"] = 1;
  for (Scaling scaling : {Scaling::tensor, Scaling::row}) {
    Problem fast = fp8_problem(8192, 8192, 8192, scaling);
    fast.accumulation = Accumulation::fast;
    cases.emplace_back(fast, family.default_config(fast, arch));
  }
  for (const auto& [p, c] : cases) {
    EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << family.kernel_name(c);
    const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
    EXPECT_EQ(k.report.spills(), 0) << k.name << " (" << k.report.registers << " registers)";
    EXPECT_EQ(k.log.find("serialized"), std::string::npos) << k.name << ":\n" << k.log;
  }
}

// SASS instructions of one opcode in a cubin's kernel code: the opcode field is bits 0-11 of each
// 128-bit instruction (sm_90, as tools/sass_census.py reads it; calibrated on one-instruction
// kernels built by nvcc 13.0: FSEL 0x208, FFMA 0x223).
// SASS instructions (their low and high 64 bits) that `pick` takes, in a cubin's kernel code.
template <class Pick>
int count_instructions(const std::string& cubin, Pick pick) {
  auto read = [&](size_t at, auto value) {
    std::memcpy(&value, cubin.data() + at, sizeof(value));
    return value;
  };
  const auto shoff = read(0x28, uint64_t{});
  const auto shentsize = read(0x3A, uint16_t{}), shnum = read(0x3C, uint16_t{});
  const auto names = read(shoff + read(0x3E, uint16_t{}) * size_t(shentsize) + 24, uint64_t{});
  int count = 0;
  for (size_t i = 0; i < shnum; ++i) {
    const size_t header = shoff + i * shentsize;
    const std::string name = cubin.c_str() + names + read(header, uint32_t{});
    if (name.rfind(".text.", 0) != 0) continue;
    const auto offset = read(header + 24, uint64_t{}), size = read(header + 32, uint64_t{});
    for (uint64_t at = offset; at + 16 <= offset + size; at += 16)
      count += pick(read(at, uint64_t{}), read(at + 8, uint64_t{}));
  }
  return count;
}

int count_opcode(const std::string& cubin, unsigned opcode) {
  return count_instructions(cubin, [&](uint64_t low, uint64_t) { return (low & 0xfff) == opcode; });
}

// MUFU (opcode 0x308) of one function, bits 10-13 of the high word (calibrated as above): EX2 2,
// RCP 4, TANH 9.
enum Mufu : unsigned { kEx2 = 2, kRcp = 4, kTanh = 9 };
int count_mufu(const std::string& cubin, Mufu function) {
  return count_instructions(cubin, [&](uint64_t low, uint64_t high) {
    return (low & 0xfff) == 0x308 && ((high >> 10) & 0xf) == function;
  });
}

// GELU's tanh form and SiLU cost 16-bit outputs one MUFU.TANH an element (the MUFU pipe bounds
// these epilogues), f32 ones an EX2 and an RCP (tanh.approx's 2^-11 is above f32's tolerance).
TEST_F(CompileFamilies, SixteenBitActivationsTakeOneMufuAnElement) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Compiler compiler(false);
  for (const char* epilogue : {"bias,gelu_tanh", "silu"})
    for (const DataType type : {DataType::bf16, DataType::f32}) {
      Problem p = make_problem(type, Op::T, Op::N, 4096, 4096, 4096);
      p.epilogue = parse_epilogue(epilogue);
      const Family& family = find_family(type == DataType::f32 ? "simt" : "wgmma_sm90");
      KernelConfig c = family.default_config(p, arch);
      const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
      c.epilogue = Epilogue{};  // the same kernel without: its own RCP (a division elsewhere)
      const CompiledKernel plain = compiler.compile(emit_source(family, c, arch), arch);
      const int tanh = count_mufu(k.cubin, kTanh), ex2 = count_mufu(k.cubin, kEx2),
                rcp = count_mufu(k.cubin, kRcp) - count_mufu(plain.cubin, kRcp);
      std::printf("%s: %d MUFU.TANH, %d MUFU.EX2, %d more MUFU.RCP\n", k.name.c_str(), tanh, ex2,
                  rcp);
      if (type == DataType::f32) {
        EXPECT_EQ(tanh, 0) << k.name;
        EXPECT_GT(ex2, 0) << k.name;
      } else {
        EXPECT_GT(tanh, 0) << k.name;
        EXPECT_EQ(ex2 + rcp, 0) << k.name;
      }
    }
}

// GELU (erf) costs a 16-bit output an RCP and an EX2 an element (EpilogueOp::gelu_erfc) and fewer
// than 12 instructions more than GELU's tanh form (erff took about 18 more); f32 keeps erff.
TEST_F(CompileFamilies, SixteenBitGeluIsAnErfcOfAPolynomial) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Compiler compiler(false);
  const Family& family = find_family("wgmma_sm90");
  Problem p = make_problem(DataType::bf16, Op::T, Op::N, 4096, 4096, 4096);
  std::map<std::string, std::string> cubins;
  for (const char* epilogue : {"bias", "bias,gelu", "bias,gelu_tanh"}) {
    p.epilogue = parse_epilogue(epilogue);
    cubins[epilogue] =
        compiler.compile(emit_source(family, family.default_config(p, arch), arch), arch).cubin;
  }
  const auto all = [](uint64_t, uint64_t) { return true; };
  const int ex2 = count_mufu(cubins["bias,gelu"], kEx2),
            rcp = count_mufu(cubins["bias,gelu"], kRcp) - count_mufu(cubins["bias"], kRcp);
  const double more = double(count_instructions(cubins["bias,gelu"], all) -
                             count_instructions(cubins["bias,gelu_tanh"], all)) /
                      std::max(ex2, 1);
  std::printf(
      "bias,gelu: %d MUFU.EX2, %d more MUFU.RCP, %.1f instructions an element more than "
      "bias,gelu_tanh\n",
      ex2, rcp, more);
  EXPECT_GT(ex2, 0);
  EXPECT_EQ(rcp, ex2);
  EXPECT_LT(more, 12.0);
}

// Block scales where a tile spans two 128-blocks of columns: wgmma N 192 and 160 compile one loop
// per offset of the tile in its block, so that no accumulator's scale is chosen by a select
// (FSEL; 48 of them at N 192 before, docs/PERF.md, 'Block-scaled tiles past 128 columns'); N 144,
// with eight offsets, keeps the selects, which shows the count would see them.
TEST_F(CompileFamilies, WgmmaBlockScalesSplitWithoutSelects) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  const Problem p = fp8_problem(7168, 4096, 16384, Scaling::block);
  for (const int64_t bm : {192, 160, 144}) {
    KernelConfig c = family.default_config(p, arch);
    c.params["BM"] = bm, c.params["BN"] = 128, c.params["STAGES"] = 4, c.params["OVERLAP"] = 0;
    c.params["CLUSTER"] = 11;
    EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << family.kernel_name(c);
    const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
    const int selects = count_opcode(k.cubin, 0x208), fmas = count_opcode(k.cubin, 0x223);
    std::printf("%s: %d FSEL, %d FFMA\n", k.name.c_str(), selects, fmas);
    EXPECT_GE(fmas, bm / 2) << k.name << ": the promotion's FFMA (opcode 0x223) not found";
    if (bm == 144)
      EXPECT_GE(selects, bm / 4) << k.name;
    else
      EXPECT_EQ(selects, 0) << k.name;
  }
}

// The consumers' loops of one-GEMM kernels read their bounds as warp-uniform
// (warp_specialized.cuh), so that ptxas keeps their wgmma descriptors in uniform registers: a
// handful of R2UR (opcode 0x2ca, calibrated as above) a kernel, where loop state read from shared
// memory took four a wgmma (48-79 a kernel; docs/PERF.md, 'Loop state read as uniform keeps
// descriptors uniform'). Float8: the block default of 4096x4096x7168, 128x128 with two partial
// sums, a tile that spans two 128-blocks of scales (each offset its own loop) and the tensor
// default of 8192^3. 16 bits: the defaults of tn 640x2048x5120 (80x128, two consumers; 30 R2UR
// before) and of decode 6144x32x4096 (a swapped tile; 52 before); ping-pong, whose consumers skip
// each other's stages: 128x64 on 2048x2048x2048 and a grouped default (Qwen3-MoE's decode
// experts, 128 of 1536x8x2048; 46 before).
TEST_F(CompileFamilies, WgmmaLoopsKeepDescriptorsUniform) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  const Problem block = fp8_problem(4096, 4096, 7168, Scaling::block);
  KernelConfig square = family.default_config(block, arch);
  square.params["BN"] = 128, square.params["STAGES"] = 5, square.params["OVERLAP"] = 1;
  KernelConfig wide = square;
  wide.params["BM"] = 160, wide.params["STAGES"] = 4, wide.params["OVERLAP"] = 0;
  wide.params["CLUSTER"] = 11;
  const Problem tensor = fp8_problem(8192, 8192, 8192, Scaling::tensor);
  const Problem mid = make_problem(DType::bf16, Op::T, Op::N, 640, 2048, 5120);
  const Problem decode = make_problem(DType::bf16, Op::T, Op::N, 6144, 32, 4096);
  const Problem dense = make_problem(DType::bf16, Op::T, Op::N, 2048, 2048, 2048);
  const std::vector<KernelConfig> space = family.prune(dense, arch).valid;
  const auto pingpong = std::find_if(space.begin(), space.end(),
                                     [](const KernelConfig& c) { return c.at("PINGPONG") == 1; });
  ASSERT_NE(pingpong, space.end());
  Problem experts = make_problem(DType::bf16, Op::T, Op::N, 1536, 128 * 8, 2048);
  experts.groups = 128;
  const std::vector<std::pair<KernelConfig, Problem>> kernels = {
      {family.default_config(block, arch), block},
      {square, block},
      {wide, block},
      {family.default_config(tensor, arch), tensor},
      {family.default_config(mid, arch), mid},
      {family.default_config(decode, arch), decode},
      {*pingpong, dense},
      {family.default_config(experts, arch), experts}};
  for (const auto& [c, p] : kernels) {
    EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << family.kernel_name(c);
    const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
    // QGMMA (float8) is opcode 0x9f3, HGMMA (16 bits) 0x9f0: one wgmma a k16 (or k32) step.
    const int r2ur = count_opcode(k.cubin, 0x2ca);
    const int wgmma = count_opcode(k.cubin, p.types.a == DataType::e4m3 ? 0x9f3 : 0x9f0);
    std::printf("%s: %d R2UR, %d wgmma\n", k.name.c_str(), r2ur, wgmma);
    EXPECT_GT(wgmma, 0) << k.name << ": no wgmma of the operands' type found";
    EXPECT_LE(r2ur, 18) << k.name;
  }
}

// Float8 tiles of two 64-row blocks a consumer (256 tokens by 128 of m) promote them in waves
// through one block's partial sum: 128 accumulators and 64 partial sums fit, and every k-block
// promotes (no PROMOTE 2 or 4, no second partial sum); with block scales staged, 192 rows at most
// (a TMA box of the tile's row scales holds four more, 256 at most). The default takes them, one
// CTA each, for block-scaled rows of 12 k-blocks or more whose rounds they fill (4096x4096x7168,
// 7168x4096x16384, 7168x4096x2048, 24576x4096x1536), not where they would leave a round idle
// (2112x4096x7168) or K is short (32768x4096x512).
TEST(WgmmaFloat8, TilesOf256TokensPromoteInWaves) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Problem block = fp8_problem(4096, 4096, 7168, Scaling::block);
  const KernelConfig waves = family.default_config(block, arch);
  EXPECT_EQ(waves.at("BN"), 256);
  EXPECT_EQ(waves.at("BM"), 128);
  EXPECT_EQ(family.broken_rules(waves, block, arch), std::vector<std::string>{});
  EXPECT_EQ(family.default_config(fp8_problem(2112, 4096, 7168, Scaling::block), arch).at("BN"),
            128);
  EXPECT_EQ(waves.at("CLUSTER"), 11);
  for (const auto& [m, k] : {std::pair<int64_t, int64_t>{7168, 16384}, {7168, 2048}, {24576, 1536}})
    EXPECT_EQ(family.default_config(fp8_problem(m, 4096, k, Scaling::block), arch).at("BN"), 256)
        << m << "x4096x" << k;
  EXPECT_EQ(family.default_config(fp8_problem(32768, 4096, 512, Scaling::block), arch).at("BN"),
            128);
  auto with = [&](std::map<std::string, int64_t> changes) {
    KernelConfig c = waves;
    for (const auto& [name, value] : changes) c.params[name] = value;
    return family.broken_rules(c, block, arch);
  };
  const std::vector<std::string> waves_rule = {"waves_promote_every_k_block"};
  const Problem tensor = fp8_problem(8192, 8192, 8192, Scaling::tensor);
  KernelConfig every_four = family.default_config(tensor, arch);
  every_four.params["BM"] = 128, every_four.params["BN"] = 256, every_four.params["STAGES"] = 3;
  every_four.params["PROMOTE"] = 4, every_four.params["OVERLAP"] = 0;
  EXPECT_EQ(family.broken_rules(every_four, tensor, arch), waves_rule);
  EXPECT_EQ(with({{"STAGED_SCALES", 1}}), std::vector<std::string>{"block_scales_per_tile"});
  EXPECT_NE(with({{"OVERLAP", 1}}), std::vector<std::string>{});
}

// f32 on tensor cores: the tf32 and 3xTF32 defaults of each shape class, in layout tn and nt (both
// operands from transposed copies), compile without spills and with wgmma kept asynchronous
// (ptxas says "serialized" otherwise); the plans map the derived copies: 3xTF32's low parts of A
// and B, and the transposed ones.
TEST_F(CompileFamilies, WgmmaTf32CompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {6144, 24, 4096}, {500, 300, 700}};
  for (const Precision precision : {Precision::tf32, Precision::tf32x3})
    for (const auto& s : shapes)
      for (const bool reads_c : {false, true}) {
        // tn: both operands read in place; nt: both from transposed copies.
        const Op op_a = reads_c ? Op::N : Op::T, op_b = reads_c ? Op::T : Op::N;
        Problem p = make_problem(DataType::f32, op_a, op_b, s[0], s[1], s[2]);
        p.precision = precision;
        p.reads_c = reads_c;
        const KernelConfig c = family.default_config(p, arch);
        const std::string name = family.kernel_name(c);
        EXPECT_EQ(c.at("PRODUCTS"), precision == Precision::tf32x3 ? 3 : 1) << name;
        EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << name;
        int low = 0, transposed = 0;
        for (const TensorMapPlan& m : family.plan(c, p, arch).maps) {
          low += is_low_part(m.derived);
          transposed += is_transposed(m.derived);
        }
        EXPECT_EQ(low, precision == Precision::tf32x3 ? 2 : 0) << name;
        EXPECT_EQ(transposed, reads_c ? (precision == Precision::tf32x3 ? 4 : 2) : 0) << name;
        const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
        EXPECT_EQ(k.report.spills(), 0) << k.name << " (" << k.report.registers << " registers)";
        EXPECT_EQ(k.log.find("serialized"), std::string::npos) << k.name << ":\n" << k.log;
      }
}

// mma_sm80's tf32 and 3xTF32: the defaults of each shape class, for sm_80 and sm_90a, in layout tn
// (both operands read in place) and nt (both from transposed copies the launch derives and the
// kernel reads through its core), compile without spills; PRODUCTS follows the precision.
TEST_F(CompileFamilies, MmaSm80Tf32CompilesWithoutSpills) {
  const Family& family = find_family("mma_sm80");
  const Compiler compiler(false);
  const int64_t shapes[][3] = {{8192, 8192, 8192}, {6144, 24, 4096}, {500, 300, 700}};
  for (const char* arch_name : {"sm_80", "sm_90a"}) {
    const ArchInfo arch = ArchInfo::from_name(arch_name);
    for (const Precision precision : {Precision::tf32, Precision::tf32x3})
      for (const auto& s : shapes)
        for (const bool copies : {false, true}) {
          Problem p = make_problem(DataType::f32, copies ? Op::N : Op::T, copies ? Op::T : Op::N,
                                   s[0], s[1], s[2]);
          p.precision = precision;
          const KernelConfig c = family.default_config(p, arch);
          const std::string name = family.kernel_name(c);
          EXPECT_EQ(c.at("PRODUCTS"), precision == Precision::tf32x3 ? 3 : 1) << name;
          EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << name;
          const LaunchPlan plan = family.plan(c, p, arch);
          EXPECT_EQ(plan.derived_operands.size(), copies ? 2u : 0u) << name;
          for (const DerivedOperand& d : plan.derived_operands)
            EXPECT_EQ(d.derived, Derived::transposed) << name;
          const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
          EXPECT_EQ(k.report.spills(), 0) << k.name << " (" << k.report.registers << " registers)";
          EXPECT_EQ(k.report.stack_frame, 0) << k.name;
        }
  }
}

// A problem that does not read C compiles without the code that reads it (READS_C = 0): for both
// epilogues (TMA stores, which load C by TMA first; stores from registers, which read C ahead),
// without spills and markedly smaller than the same kernel with that code (NVRTC cannot show
// the SASS here: the size stands for it).
TEST_F(CompileFamilies, WgmmaForBetaZeroLeavesOutTheCodeThatReadsC) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  Problem p = make_problem(DType::bf16, Op::N, Op::N, 2048, 2048, 2048);
  for (const int64_t epilogue : {1, 0}) {
    KernelConfig zero = family.default_config(p, arch);
    zero.params["EPILOGUE"] = epilogue;
    KernelConfig reading = zero;
    reading.params["READS_C"] = 1;
    ASSERT_EQ(zero.at("READS_C"), 0);
    const CompiledKernel without = compiler.compile(emit_source(family, zero, arch), arch);
    const CompiledKernel with = compiler.compile(emit_source(family, reading, arch), arch);
    EXPECT_EQ(without.report.spills(), 0) << without.name;
    EXPECT_EQ(with.report.spills(), 0) << with.name;
    EXPECT_LT(double(without.cubin.size()), 0.85 * double(with.cubin.size())) << without.name;
  }
}

// `c` with the given parameters set.
KernelConfig with(KernelConfig c, std::initializer_list<std::pair<const char*, int64_t>> params) {
  for (const auto& [name, value] : params) c.params[name] = value;
  return c;
}

// A data-parallel tile of BM x BN over WG consumer warpgroups with TMA stores (four stages, no
// cluster, no split, beta = 0): the family's default for the problem with those set.
struct TmaStoreTile {
  int64_t bm, bn, wg;
};
KernelConfig tma_store_tile(const Family& family, const Problem& p, const ArchInfo& arch,
                            TmaStoreTile t) {
  return with(family.default_config(p, arch), {{"BM", t.bm},
                                               {"BN", t.bn},
                                               {"WG", t.wg},
                                               {"SWAP", 0},
                                               {"STAGES", 4},
                                               {"EPILOGUE", 1},
                                               {"CLUSTER", 11},
                                               {"CLUSTER_K", 1},
                                               {"SCHEDULE", 0},
                                               {"SPLITS", 1},
                                               {"PINGPONG", 0},
                                               {"READS_C", 0}});
}

// TMA stores of wgmma N no multiple of 64 (144, 80, 176: the mid-size tiles sized to the SM
// count), whose last chunk overlaps the one before: valid with beta = 0 and compiled without
// spills, with and without a bias along M (staged in shared memory); refused where the kernel
// reads C.
TEST_F(CompileFamilies, WgmmaTmaStoresWithAnOverlappingLastChunk) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  std::vector<KernelConfig> configs;
  for (const bool bias : {false, true}) {
    Problem p = make_problem(DType::bf16, Op::T, Op::N, 2304, 1024, 4096);
    if (bias) p.epilogue.bias = Bias::m;
    for (const TmaStoreTile t :
         {TmaStoreTile{144, 128, 2}, TmaStoreTile{80, 128, 1}, TmaStoreTile{176, 192, 3}}) {
      const KernelConfig c = tma_store_tile(family, p, arch, t);
      EXPECT_EQ(family.why_invalid(c, p, arch), "") << family.kernel_name(c);
      configs.push_back(c);
      Problem reading = p;
      reading.reads_c = true;
      const std::vector<std::string> broken =
          family.broken_rules(with(c, {{"READS_C", 1}}), reading, arch);
      EXPECT_NE(std::find(broken.begin(), broken.end(), "tma_store_layout"), broken.end())
          << family.kernel_name(c);
    }
  }
  expect_compile_without_spills(family, configs, arch);
}

// The valid points of a problem whose clusters split K in `ctas`.
std::vector<KernelConfig> cluster_splits(const Family& family, const Problem& p,
                                         const ArchInfo& arch, int64_t ctas) {
  std::vector<KernelConfig> out;
  for (const KernelConfig& c : family.prune(p, arch).valid)
    if (c.at("CLUSTER_K") == ctas) out.push_back(c);
  return out;
}

// Clusters that split K (CLUSTER_K = 2 or 4) on a problem bound by latency: valid points in both
// orientations compile without spills, and so does the split tile with the most accumulators
// (128x128 on one consumer warpgroup); the launch asks for clusters of that many CTAs.
TEST_F(CompileFamilies, WgmmaClusterSplitKCompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 768, 128, 768);
  for (int64_t ctas : {2, 4}) {
    const std::vector<KernelConfig> split = cluster_splits(family, p, arch, ctas);
    ASSERT_FALSE(split.empty()) << ctas;
    expect_compile_without_spills(family, covering_sample(split, 3), arch);
    EXPECT_EQ(family.plan(split.front(), p, arch).cluster[0], uint32_t(ctas))
        << family.kernel_name(split.front());
  }
  // A cluster of four: the valid point with the most accumulators for each number of consumer
  // warpgroups (cluster_of_four_fits_registers' limits) compiles without spills.
  std::map<int64_t, KernelConfig> largest;
  const auto accumulators = [](const KernelConfig& c) {
    const bool swap = c.at("SWAP") != 0;
    return (swap ? c.at("BM") : c.at("BN")) / (64 * c.at("WG")) * (swap ? c.at("BN") : c.at("BM")) /
           2;
  };
  for (const KernelConfig& c : cluster_splits(family, p, arch, 4))
    if (!largest.count(c.at("WG")) || accumulators(c) > accumulators(largest.at(c.at("WG"))))
      largest[c.at("WG")] = c;
  EXPECT_EQ(largest.size(), 3u);
  for (const auto& [wg, c] : largest) expect_compile_without_spills(family, {c}, arch);
  const Problem few = make_problem(DType::bf16, Op::N, Op::N, 1024, 1024, 16384);
  const KernelConfig whole =
      with(family.default_config(few, arch), {{"SCHEDULE", 0},
                                              {"SPLITS", 1},
                                              {"EPILOGUE", 0},
                                              {"CLUSTER_K", 2},
                                              {"STAGES", 4}});  // 64 KB of slots
  ASSERT_EQ(family.why_invalid(whole, few, arch), "") << family.kernel_name(whole);
  expect_compile_without_spills(family, {whole}, arch);
  // Clusters of four in which some CTAs own no columns (swapped, wgmma N 8 or 16: fewer 8-column
  // groups than CTAs, one or two owners; their exchange differs): a point of each width.
  std::map<int64_t, KernelConfig> few_owners;  // by wgmma N
  for (int64_t tokens : {1, 16})
    for (const KernelConfig& c : cluster_splits(
             family, make_problem(DType::bf16, Op::T, Op::N, 4096, tokens, 4096), arch, 4))
      if (c.at("SWAP") == 1 && c.at("BN") < 32) few_owners.emplace(c.at("BN"), c);
  EXPECT_EQ(few_owners.size(), 2u);
  for (const auto& [n, c] : few_owners) expect_compile_without_spills(family, {c}, arch);
}

// The family rejects a split in a cluster with multicast, split-K or TMA stores, where the
// clusters would not fit one wave, and with fewer than two k-blocks a CTA.
TEST_F(CompileFamilies, WgmmaClusterSplitKConstraints) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Problem p = make_problem(DType::bf16, Op::T, Op::N, 768, 128, 768);
  bool named = false;
  for (const auto& rule : family.space_summary(p, arch).rules)
    named |= rule.name == "cluster_k_alone";
  ASSERT_TRUE(named);
  const auto holds = [&](const char* name, const KernelConfig& c, const Problem& q) {
    const std::vector<std::string> broken = family.broken_rules(c, q, arch);
    return std::find(broken.begin(), broken.end(), name) == broken.end();
  };
  const std::vector<KernelConfig> split = cluster_splits(family, p, arch, 2);
  ASSERT_FALSE(split.empty());
  const KernelConfig& c = split.front();
  EXPECT_TRUE(holds("cluster_k_alone", c, p));
  EXPECT_FALSE(holds("cluster_k_alone", with(c, {{"CLUSTER", 21}}), p)) << "with multicast";
  EXPECT_FALSE(holds("cluster_k_alone", with(c, {{"SCHEDULE", 1}, {"SPLITS", 2}}), p))
      << "with split-K";
  EXPECT_FALSE(holds("cluster_k_alone", with(c, {{"EPILOGUE", 1}}), p)) << "with TMA stores";
  EXPECT_TRUE(holds("cluster_k_for_few_tiles", c, p));
  EXPECT_FALSE(holds("cluster_k_for_few_tiles", c,
                     make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 768)));
  EXPECT_FALSE(
      holds("cluster_k_for_few_tiles", c, make_problem(DType::bf16, Op::T, Op::N, 768, 128, 192)))
      << "three k-blocks";
  // The points that spilled: 128x128 on one consumer warpgroup, 192x128 on two.
  const KernelConfig one =
      with(c, {{"BM", 128}, {"BN", 128}, {"SWAP", 0}, {"WG", 1}, {"CLUSTER_K", 4}});
  EXPECT_FALSE(holds("cluster_of_four_fits_registers", one, p));
  EXPECT_TRUE(holds("cluster_of_four_fits_registers", with(one, {{"CLUSTER_K", 2}}), p));
  EXPECT_FALSE(holds("cluster_of_four_fits_registers", with(one, {{"BM", 192}, {"WG", 2}}), p));
  EXPECT_TRUE(holds("cluster_of_four_fits_registers", with(one, {{"BM", 64}, {"WG", 2}}), p));
}

// Float8 with an f32 output: the default of a large problem in every scaling mode, with TMA stores
// (chunks of 32 f32 columns, 128 bytes, twice as many as bf16's) and from registers, with and
// without the code that reads C; the swapped decode default (a pair across two columns of C); and
// a cluster that splits K (block scales, few tiles): valid, the unit's DTYPE f32, C's map of
// 32-column boxes, and compiled without spills (each unit asserts that the template's shared
// memory is the family's figure). Registers and C buffers are printed. (The producer's C loads
// and prefetches of f32, unrolled, spilled its 24 registers: TmaStore::fetch_c, prefetch_c.)
TEST_F(CompileFamilies, WgmmaFloat8F32OutputCompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Compiler compiler(false);
  std::vector<std::pair<Problem, KernelConfig>> cases;
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (const bool reads_c : {false, true}) {
      Problem p = fp8_f32_problem(7168, 4096, 16384, scaling);
      p.reads_c = reads_c;
      const KernelConfig c = family.default_config(p, arch);
      EXPECT_EQ(c.at("EPILOGUE"), 1) << family.kernel_name(c);
      EXPECT_EQ(c.at("READS_C"), reads_c ? 1 : 0) << family.kernel_name(c);
      cases.emplace_back(p, c);
      cases.emplace_back(p, with(c, {{"EPILOGUE", 0}}));
    }
  Problem decode = fp8_f32_problem(11008, 8, 4096, Scaling::tensor);
  decode.reads_c = true;
  cases.emplace_back(decode, family.default_config(decode, arch));
  EXPECT_EQ(cases.back().second.at("SWAP"), 1);
  Problem few = fp8_f32_problem(7168, 128, 16384, Scaling::block);
  few.reads_c = true;
  cases.emplace_back(few, family.default_config(few, arch));
  EXPECT_EQ(cases.back().second.at("CLUSTER_K"), 2);
  for (const auto& [p, c] : cases) {
    const std::string name = family.kernel_name(c);
    EXPECT_EQ(family.broken_rules(c, p, arch), std::vector<std::string>{}) << name;
    const std::string unit = family.emit(c, arch);
    EXPECT_NE(unit.find("DTYPE = 0,"), std::string::npos) << name;
    const LaunchPlan g = family.plan(c, p, arch);
    int c_maps = 0;
    for (const TensorMapPlan& m : g.maps) {
      if (m.operand != Operand::c) continue;
      ++c_maps;
      EXPECT_EQ(m.type, DataType::f32) << name;
      EXPECT_EQ(m.box_rows, 32u) << name << ": a row of a 128-byte swizzled box holds 32 f32";
    }
    EXPECT_EQ(c_maps, c.at("EPILOGUE")) << name;
    const CompiledKernel k = compiler.compile(emit_source(family, c, arch), arch);
    EXPECT_TRUE(k.report.found) << name << ": no ptxas report";
    EXPECT_EQ(k.report.spills(), 0) << name << " (" << k.report.registers << " registers)";
    EXPECT_EQ(k.report.stack_frame, 0) << name << " uses local memory";
    const size_t buffers = unit.find("C_BUFFERS = ");
    std::printf("%s: %d registers, %d bytes spilled, %s, %u bytes of shared memory\n", name.c_str(),
                k.report.registers, k.report.spills(),
                buffers == std::string::npos ? "?" : unit.substr(buffers, 14).c_str(),
                g.smem_bytes);
  }
}

// Four consumer warpgroups would ask setmaxnreg for more registers than the producer gives up
// (128 x 24 + 512 x 240 > 640 x 96) and wait forever: the template refuses to compile them.
TEST_F(CompileFamilies, WgmmaRegisterReallocationThatCannotBeMetDoesNotCompile) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 4096, 4096, 4096);
  const KernelConfig c = with(family.default_config(p, arch),
                              {{"WG", 4}, {"BN", 256}, {"EPILOGUE", 0}, {"STAGES", 3}});
  const Compiler compiler(false);
  try {
    compiler.compile(emit_source(family, c, arch), arch);
    ADD_FAILURE() << family.kernel_name(c) << " compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("registers fit what the producer warpgroup gives up"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CompileFamilies, MmaCeilingBenchmarkCompiles) {
  const Compiler compiler(false);
  const CompiledKernel k =
      compiler.compile(make_source("gemmtune_mma_ceiling", "#include \"mma_ceiling.cuh\"\n"),
                       ArchInfo::from_name("sm_80"));
  EXPECT_FALSE(k.cubin.empty());
  for (const char* name : {"gemmtune_mma_ceiling_bf16", "gemmtune_mma_ceiling_tf32"}) {
    const PtxasReport r = parse_ptxas_report(k.log, name);
    EXPECT_GT(r.registers, 0) << name << ": no ptxas report";
    EXPECT_EQ(r.spills(), 0) << name;
  }
}

TEST_F(CompileFamilies, ReadCeilingBenchmarkCompilesWithoutLocalMemory) {
  const Compiler compiler(false);
  for (const char* name : {"sm_80", "sm_90a"}) {
    const CompiledKernel k =
        compiler.compile(make_source("gemmtune_read_ceiling", "#include \"read_ceiling.cuh\"\n"),
                         ArchInfo::from_name(name));
    EXPECT_FALSE(k.cubin.empty()) << name;
    const PtxasReport r = parse_ptxas_report(k.log, "gemmtune_read_ceiling");
    EXPECT_GT(r.registers, 0) << name << ": no ptxas report";
    EXPECT_EQ(r.spills(), 0) << name;
    EXPECT_EQ(r.stack_frame, 0) << name << ": the loads in flight must stay in registers";
  }
}

// TMA stores with a bias along M read it from the consumer's staged copy (store_tma.cuh,
// StagedBias): a consumer warpgroup of two 64-row blocks by 128 columns (128 accumulators a
// thread: one warpgroup of 128x128, two of 128x256) compiles without spills with the bias and
// GELU in either form (erf's takes the most registers), as do the defaults. (A chunk's 16 bias
// values loaded ahead into registers spilled 128x128 with bias,gelu; such tiles were pruned.)
TEST_F(CompileFamilies, WgmmaStagedBiasCompilesWithoutSpills) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  std::vector<KernelConfig> configs;
  for (const char* epilogue : {"bias,gelu", "bias,gelu_tanh"}) {
    Problem p = make_problem(DType::bf16, Op::T, Op::N, 8192, 8192, 4096);
    p.epilogue = parse_epilogue(epilogue);
    configs.push_back(family.default_config(p, arch));
    for (const TmaStoreTile t :
         {TmaStoreTile{128, 128, 1}, TmaStoreTile{128, 256, 2}, TmaStoreTile{256, 128, 2}}) {
      const KernelConfig c = tma_store_tile(family, p, arch, t);
      EXPECT_EQ(family.why_invalid(c, p, arch), "") << family.kernel_name(c);
      configs.push_back(c);
    }
  }
  expect_compile_without_spills(family, configs, arch);
}

// A pre-activation output (aux) in every family's store: each family's default of problems with
// bias,gelu,aux (wgmma's TMA stores of 16-bit and f32 D, float8 among them, its swapped decode
// tiles, mma_sm80 on sm_80 and sm_90a, gemv, simt) compiles without spills, and stores more than
// the same kernel without aux (STG, opcode 0x986, in the register-store paths every kernel has).
TEST_F(CompileFamilies, PreActivationOutputsCompileWithoutSpillsAndStoreTwice) {
  struct Case {
    const char* family;
    const char* arch;
    Problem problem;
  };
  const std::vector<Case> cases = {
      {"wgmma_sm90", "sm_90a", make_problem(DType::bf16, Op::T, Op::N, 8192, 8192, 4096)},
      {"wgmma_sm90", "sm_90a", make_problem(DType::bf16, Op::T, Op::N, 4096, 16, 4096)},
      {"wgmma_sm90", "sm_90a", make_problem(DType::bf16, Op::T, Op::N, 2304, 1024, 4096)},
      {"wgmma_sm90", "sm_90a", fp8_problem(7168, 4096, 7168, Scaling::block)},
      {"wgmma_sm90", "sm_90a", fp8_f32_problem(8192, 8192, 8192, Scaling::tensor)},
      {"mma_sm80", "sm_80", make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096)},
      {"mma_sm80", "sm_90a", make_problem(DType::f16, Op::N, Op::N, 1000, 520, 300)},
      {"gemv", "sm_90a", make_problem(DType::bf16, Op::T, Op::N, 4096, 1, 4096)},
      {"simt", "sm_90a", make_problem(DType::f32, Op::N, Op::N, 2048, 2048, 2048)},
  };
  const Compiler compiler(false);
  for (const Case& c : cases) {
    const ArchInfo arch = ArchInfo::from_name(c.arch);
    const Family& family = find_family(c.family);
    Problem p = c.problem;
    p.epilogue = parse_epilogue("bias,gelu,aux");
    KernelConfig config = family.default_config(p, arch);
    EXPECT_EQ(family.why_invalid(config, p, arch), "") << family.kernel_name(config);
    expect_compile_without_spills(family, {config}, arch);
    const CompiledKernel kept = compiler.compile(emit_source(family, config, arch), arch);
    config.epilogue.aux = false;
    const CompiledKernel plain = compiler.compile(emit_source(family, config, arch), arch);
    const int stores = count_opcode(kept.cubin, 0x986),
              plain_stores = count_opcode(plain.cubin, 0x986);
    std::printf("%s: %d STG, %d without aux\n", kept.name.c_str(), stores, plain_stores);
    EXPECT_GT(stores, plain_stores) << kept.name;
  }
  // Its TMA stores take beta = 0 (aux_tma_stores_beta_zero pins EPILOGUE to 0 with beta != 0):
  // the large default keeps them, each chunk's pre-activation through the same buffers.
  const ArchInfo h100 = ArchInfo::from_name("sm_90a");
  const Family& wgmma = find_family("wgmma_sm90");
  Problem p = make_problem(DType::bf16, Op::T, Op::N, 8192, 8192, 4096);
  p.epilogue = parse_epilogue("bias,gelu,aux");
  KernelConfig tma = wgmma.default_config(p, h100);
  EXPECT_EQ(tma.at("EPILOGUE"), 1) << wgmma.kernel_name(tma);
  p.reads_c = true;
  tma.params["READS_C"] = 1;
  const std::string why = wgmma.why_invalid(tma, p, h100);
  EXPECT_NE(why.find("EPILOGUE=1 is not among the values"), std::string::npos) << why;
  EXPECT_EQ(wgmma.default_config(p, h100).at("EPILOGUE"), 0);
}

}  // namespace
}  // namespace gemmtune
