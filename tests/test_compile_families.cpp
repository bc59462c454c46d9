// Every candidate of every default search space compiles with NVRTC, without spills, for the
// architectures the families target. No GPU needed: this is what ptxas reports.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>

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

void expect_all_compile(DType dtype, const char* layout, const char* arch, const char* family) {
  const Problem p = make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), 4096, 4096, 4096);
  const DryRunReport r = dry_run(p, ArchInfo::from_name(arch), 0, {family});
  ASSERT_GT(r.candidates.size(), 0u) << "no candidates for " << p.describe();
  EXPECT_EQ(r.failed, 0);
  for (const auto& c : r.candidates) {
    EXPECT_EQ(c.status, "compiled") << c.name << ": " << c.message.substr(0, 2000);
    EXPECT_EQ(c.spills, 0) << c.name << " spills on " << arch << " (" << c.registers
                           << " registers)";
    EXPECT_GT(c.registers, 0) << c.name << ": no ptxas report";
  }
}

TEST_F(CompileFamilies, SimtSm90aNN) {
  expect_all_compile(DType::f32, "nn", "sm_90a", "simt");
}
TEST_F(CompileFamilies, SimtSm90aNT) {
  expect_all_compile(DType::f32, "nt", "sm_90a", "simt");
}
TEST_F(CompileFamilies, SimtSm90aTN) {
  expect_all_compile(DType::f32, "tn", "sm_90a", "simt");
}
TEST_F(CompileFamilies, SimtSm90aTT) {
  expect_all_compile(DType::f32, "tt", "sm_90a", "simt");
}
TEST_F(CompileFamilies, SimtSm80NN) {
  expect_all_compile(DType::f32, "nn", "sm_80", "simt");
}
TEST_F(CompileFamilies, SimtSm80NT) {
  expect_all_compile(DType::f32, "nt", "sm_80", "simt");
}
TEST_F(CompileFamilies, SimtSm80TN) {
  expect_all_compile(DType::f32, "tn", "sm_80", "simt");
}
TEST_F(CompileFamilies, SimtSm80TT) {
  expect_all_compile(DType::f32, "tt", "sm_80", "simt");
}

// The valid points of a space that take every value of every parameter at least once, plus
// `extra` spread evenly over the rest: a sample that reaches every code path of a template in a
// fraction of the compiles.
std::vector<KernelConfig> covering_sample(const std::vector<KernelConfig>& valid, size_t extra) {
  std::set<std::pair<std::string, int64_t>> seen;
  std::vector<KernelConfig> out;
  std::set<size_t> taken;
  for (size_t i = 0; i < valid.size(); ++i) {
    bool fresh = false;
    for (const auto& kv : valid[i].params) fresh |= seen.insert(kv).second;
    if (fresh && taken.insert(i).second) out.push_back(valid[i]);
  }
  for (size_t j = 0; j < extra && !valid.empty(); ++j) {
    const size_t i = (j * 7919 + 13) % valid.size();
    if (taken.insert(i).second) out.push_back(valid[i]);
  }
  return out;
}

// Each configuration compiles for the architecture without spills, with a ptxas report.
void expect_compile_without_spills(const Family& family, const std::vector<KernelConfig>& configs,
                                   const ArchInfo& arch) {
  const Compiler compiler(false);
  for (const KernelConfig& c : configs) {
    const CompiledKernel k = compiler.compile(emit_source(family, c), arch);
    EXPECT_EQ(k.report.spills(), 0)
        << k.name << " spills on " << arch.name() << " (" << k.report.registers << " registers)";
    EXPECT_TRUE(k.report.found) << k.name << ": no ptxas report";
  }
}

// A covering sample of the wgmma space on the problem classes it has code paths for: large,
// ragged, decode (n of a few tokens: wgmma N of 8 to 64), small.
void expect_wgmma_sample_compiles(DType dtype, const char* layout) {
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Family& family = find_family("wgmma_sm90");
  const int64_t shapes[][3] = {
      {4096, 4096, 4096}, {1000, 3000, 5000}, {6144, 24, 4096}, {500, 300, 700}};
  for (const auto& s : shapes) {
    const Problem p =
        make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
    const Pruning pruning = family.space(p, arch).prune(p, arch);
    ASSERT_FALSE(pruning.valid.empty()) << p.describe();
    expect_compile_without_spills(family, covering_sample(pruning.valid, 3), arch);
  }
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
      EXPECT_EQ(family.space(p, arch).first_violation(c, p, arch), nullptr)
          << family.kernel_name(c);
      const int64_t stages = 4 * (t.bm + t.bn) * 64 * 2, whole_c = t.bm * t.bn * 2;
      const int64_t smem = family.geometry(c, p, arch).smem_bytes;
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
    const CompiledKernel without = compiler.compile(emit_source(family, zero), arch);
    const CompiledKernel with = compiler.compile(emit_source(family, reading), arch);
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

// The valid points of a problem whose clusters split K in `ctas`.
std::vector<KernelConfig> cluster_splits(const Family& family, const Problem& p,
                                         const ArchInfo& arch, int64_t ctas) {
  std::vector<KernelConfig> out;
  for (const KernelConfig& c : family.space(p, arch).prune(p, arch).valid)
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
    EXPECT_EQ(family.geometry(split.front(), p, arch).cluster[0], uint32_t(ctas))
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
  const Constraint* broken = family.space(few, arch).first_violation(whole, few, arch);
  ASSERT_EQ(broken, nullptr) << family.kernel_name(whole) << " breaks " << broken->name;
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
  const SearchSpace space = family.space(p, arch);
  const auto holds = [&](const char* name, const KernelConfig& c, const Problem& q) {
    for (const Constraint& rule : space.constraints)
      if (rule.name == name) return rule.holds(c, q, arch);
    ADD_FAILURE() << "no constraint " << name;
    return false;
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
    compiler.compile(emit_source(family, c), arch);
    ADD_FAILURE() << family.kernel_name(c) << " compiled";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("registers fit what the producer warpgroup gives up"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CompileFamilies, WgmmaBf16NN) {
  expect_wgmma_sample_compiles(DType::bf16, "nn");
}
TEST_F(CompileFamilies, WgmmaBf16NT) {
  expect_wgmma_sample_compiles(DType::bf16, "nt");
}
TEST_F(CompileFamilies, WgmmaBf16TN) {
  expect_wgmma_sample_compiles(DType::bf16, "tn");
}
TEST_F(CompileFamilies, WgmmaBf16TT) {
  expect_wgmma_sample_compiles(DType::bf16, "tt");
}
TEST_F(CompileFamilies, WgmmaF16TN) {
  expect_wgmma_sample_compiles(DType::f16, "tn");
}

// mma_sm80: every candidate of the default space was compiled once for each architecture
// (docs/PERF.md says how); here a sample per architecture keeps the suite fast: the defaults of
// each problem class, narrow copies for unaligned problems, spread-out points of the space, and
// split-K with the largest warp tiles (the most partial sums per thread).
std::vector<KernelConfig> mma80_sample(const ArchInfo& arch, int offset) {
  const Family& f = find_family("mma_sm80");
  std::vector<KernelConfig> out;
  const char* layouts[] = {"nn", "nt", "tn", "tt"};
  const Problem large = make_problem(DType::bf16, Op::T, Op::N, 8192, 8192, 8192);
  out.push_back(f.default_config(large, arch));
  out.push_back(f.default_config(make_problem(DType::f16, Op::N, Op::T, 4096, 16, 4096), arch));
  Problem odd = make_problem(DType::bf16, Op::N, Op::N, 301, 203, 107);  // lda 301: 2-byte aligned
  out.push_back(f.default_config(odd, arch));
  odd.align = 4;
  out.push_back(f.default_config(odd, arch));
  const std::string layout = layouts[offset % 4];
  const Problem p =
      make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 4096, 4096, 4096);
  const auto valid = f.space(p, arch).prune(p, arch).valid;
  for (size_t i = size_t(offset) * 7 % 41; i < valid.size(); i += 41) out.push_back(valid[i]);
  const Problem small =
      make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), 512, 512, 4096);
  for (const KernelConfig& c : f.space(small, arch).prune(small, arch).valid)
    if (c.at("SPLITS") == 4 && c.at("WM") == 64 && c.at("WN") == 64 && c.at("STAGES") == 3) {
      out.push_back(c);
      break;
    }
  KernelConfig split = f.default_config(small, arch);
  split.params["SPLITS"] = 3;
  out.push_back(split);
  return out;
}

TEST_F(CompileFamilies, Mma80SampleCompilesWithoutSpillsOnEveryArch) {
  const Compiler compiler(false);
  const Family& f = find_family("mma_sm80");
  int offset = 0;
  for (const char* name : {"sm_80", "sm_86", "sm_89", "sm_90"}) {
    const ArchInfo arch = ArchInfo::from_name(name);
    for (const KernelConfig& c : mma80_sample(arch, offset++)) {
      const CompiledKernel k = compiler.compile(emit_source(f, c), arch);
      EXPECT_GT(k.report.registers, 0) << k.name << " on " << name << ": no ptxas report";
      EXPECT_EQ(k.report.spills(), 0)
          << k.name << " spills on " << name << " (" << k.report.registers << " registers)";
      EXPECT_EQ(k.report.stack_frame, 0) << k.name << " uses local memory on " << name;
    }
  }
}

TEST_F(CompileFamilies, MmaCeilingBenchmarkCompiles) {
  const Compiler compiler(false);
  const CompiledKernel k =
      compiler.compile(make_source("gemmtune_mma_ceiling", "#include \"mma_ceiling.cuh\"\n"),
                       ArchInfo::from_name("sm_80"));
  EXPECT_FALSE(k.cubin.empty());
  EXPECT_EQ(parse_ptxas_report(k.log, "gemmtune_mma_ceiling_bf16").spills(), 0);
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

// gemv: the default and (sample) a covering sample of the space of one problem per code path
// (dot with x read through L1 or staged, axpy, both sides, 2- to 16-byte loads).
// GEMMTUNE_COMPILE_ALL_GEMV=1 compiles every point of those spaces instead.
void expect_gemv_compiles(const char* arch_name, bool sample) {
  const bool all = std::getenv("GEMMTUNE_COMPILE_ALL_GEMV") != nullptr;
  const ArchInfo arch = ArchInfo::from_name(arch_name);
  const Family& family = find_family("gemv");
  struct Case {
    DType dtype;
    const char* layout;
    int64_t m, n;
    int align;
  };
  const Case cases[] = {{DType::bf16, "tn", 4096, 1, 16}, {DType::bf16, "tt", 4096, 1, 16},
                        {DType::bf16, "nn", 4096, 1, 16}, {DType::f16, "nn", 1, 4096, 16},
                        {DType::f32, "tt", 1, 4096, 16},  {DType::bf16, "tn", 4096, 1, 2},
                        {DType::f32, "nn", 4096, 1, 8}};
  for (const Case& cs : cases) {
    Problem p =
        make_problem(cs.dtype, parse_op(cs.layout[0]), parse_op(cs.layout[1]), cs.m, cs.n, 4096);
    p.align = cs.align;
    const Pruning pruning = family.space(p, arch).prune(p, arch);
    ASSERT_FALSE(pruning.valid.empty()) << p.describe();
    std::vector<KernelConfig> configs = all      ? pruning.valid
                                        : sample ? covering_sample(pruning.valid, 0)
                                                 : std::vector<KernelConfig>{};
    configs.push_back(family.default_config(p, arch));
    expect_compile_without_spills(family, configs, arch);
  }
}

TEST_F(CompileFamilies, GemvSm90a) {
  expect_gemv_compiles("sm_90a", true);
}
TEST_F(CompileFamilies, GemvSm80) {
  expect_gemv_compiles("sm_80", false);
}

TEST_F(CompileFamilies, HelperKernelsCompile) {
  const Compiler compiler(false);
  const KernelSource pack = make_source("gemmtune_pack16", "#include \"pack.cuh\"\n");
  EXPECT_FALSE(compiler.compile(pack, ArchInfo::from_name("sm_90a")).cubin.empty());
}

TEST_F(CompileFamilies, VerificationKernelsCompile) {
  const Compiler compiler(false);
  const KernelSource s = make_source("gemmtune_testing", "#include \"testing.cuh\"\n");
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const CompiledKernel k = compiler.compile(s, ArchInfo::from_name(arch));
    EXPECT_FALSE(k.cubin.empty());
  }
}

}  // namespace
}  // namespace gemmtune
