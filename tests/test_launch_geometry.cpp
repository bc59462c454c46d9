// runtime: the grid of persistent launches, launch geometry of the families, library options (no
// GPU needed).
#include <gtest/gtest.h>

#include <cstdlib>

#include "gemmtune/gemmtune.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {
namespace {

LaunchPlan persistent(uint32_t grid, uint32_t cluster, uint32_t work) {
  LaunchPlan g;
  g.grid = {grid, 1, 1};
  g.cluster = {cluster, 1, 1};
  g.persistent = true;
  g.work_units = work;
  return g;
}

TEST(PersistentGrid, FewestCtasForTheSameNumberOfRounds) {
  // 2048 tiles on 132 SMs take 16 rounds; 128 CTAs take 16 rounds too.
  EXPECT_EQ(persistent_grid(persistent(132, 1, 2048), 132).grid[0], 128u);
  EXPECT_EQ(persistent_grid(persistent(132, 1, 512), 132).grid[0], 128u);
  EXPECT_EQ(persistent_grid(persistent(100, 1, 100), 132).grid[0], 100u);
  EXPECT_EQ(persistent_grid(persistent(132, 1, 133), 132).grid[0], 67u);
}

TEST(PersistentGrid, ClustersStayWholeAndResidentCapHolds) {
  // 1024 cluster-sized units, 66 clusters wanted, only 60 resident: 18 rounds of 57 clusters.
  const LaunchPlan g = persistent_grid(persistent(132, 2, 1024), 120);
  EXPECT_EQ(g.grid[0], 114u);
  EXPECT_EQ(g.grid[0] % 2, 0u);
  EXPECT_EQ(persistent_grid(persistent(132, 2, 1), 120).grid[0], 2u);
  // Unknown residency (0) leaves only the balancing.
  EXPECT_EQ(persistent_grid(persistent(132, 1, 264), 0).grid[0], 132u);
}

TEST(WgmmaGeometry, PersistentGridsCoverTheWork) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 8192, 8192, 8192);
  KernelConfig c = f.default_config(p, arch);
  const LaunchPlan g = f.plan(c, p, arch);
  EXPECT_TRUE(g.persistent);
  EXPECT_EQ(g.grid[0] % g.cluster[0], 0u);
  EXPECT_LE(g.grid[0], uint32_t(arch.sms));
  EXPECT_EQ(g.work_units * g.cluster[0], g.tiles_m * g.tiles_n);
  EXPECT_LE(g.smem_bytes, uint32_t(arch.smem_per_block));
}

// A grouped launch's units are the most tiles any routing could have (the real ones are known on
// the device alone): balancing rounds over those took SMs from the real tiles (Qwen3's decode
// layer, 1536x8x2048 G=128: 124 CTAs for 1536 tiles, 13 rounds where 132 take 12).
TEST(WgmmaGeometry, GroupedLaunchesKeepEverySm) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  for (const int64_t tokens : {8, 256}) {
    Problem p = make_problem(DType::bf16, Op::T, Op::N, 1536, tokens * 128, 2048);
    p.groups = 128;
    const LaunchPlan g = f.plan(f.default_config(p, arch), p, arch);
    ASSERT_TRUE(g.persistent) << tokens;
    EXPECT_EQ(g.work_units, 0u) << tokens;
    EXPECT_EQ(persistent_grid(g, uint32_t(arch.sms)).grid[0], uint32_t(arch.sms)) << tokens;
  }
}

TEST(WgmmaGeometry, StreamKTakesEveryResidentCtaAndAWorkspace) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  // 2500 x 3500: 10 x 28 tiles of 256 x 128, 280 tiles on 132 SMs: a partial third wave.
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 2500, 3500, 4500);
  KernelConfig c = f.default_config(p, arch);
  for (const auto& [param, value] : {std::pair<const char*, int64_t>{"BM", 256},
                                     {"BN", 128},
                                     {"WG", 2},
                                     {"STAGES", 3},
                                     {"CLUSTER", 12},
                                     {"EPILOGUE", 0},
                                     {"SCHEDULE", 2},
                                     {"SPLITS", 1}})
    c.params[param] = value;
  ASSERT_EQ(f.why_invalid(c, p, arch), "") << f.kernel_name(c);
  const LaunchPlan g = f.plan(c, p, arch);
  EXPECT_TRUE(g.persistent);
  EXPECT_EQ(g.work_units, 0u);  // the runtime keeps every resident CTA
  EXPECT_GT(g.workspace_bytes, 0u);
  EXPECT_TRUE(g.map(Operand::a) && g.map(Operand::b));
}

// Where 256x128 tiles waste a tenth of the rounds, the default takes the tiling whose rounds cost
// least, among them m split evenly on wgmma N where A is stored along K; stream-K only where the
// last round would be nearly empty and K long. Each case is a shape measured on the H100, with
// what the default chose before (docs/PERF.md, 'A partial last wave: the default costs rounds
// times tile area', and 'Mid-size shapes need tiles sized to the SM count').
TEST(WgmmaGeometry, DefaultsTakeTheTilingWhoseRoundsCostLeast) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  struct Case {
    Problem p;
    int64_t bm, bn, wg, schedule;
  };
  const auto tn = [](int64_t m, int64_t n, int64_t k) {
    return make_problem(DType::bf16, Op::T, Op::N, m, n, k);
  };
  const auto nn = [](int64_t m, int64_t n, int64_t k) {
    return make_problem(DType::bf16, Op::N, Op::N, m, n, k);
  };
  const Case cases[] = {
      {nn(2500, 3500, 4500), 128, 192, 3, 0},  // 380 tiles in 3 rounds: 2.53x (192x128: 2.51x)
      {tn(1000, 3000, 5000), 128, 192, 3, 0},  // 128 of 132 SMs
      // m split evenly (tiles sized to the SM count), against the earlier defaults' figures:
      {tn(3584, 4096, 4096), 224, 128, 2, 0},   // 512 tiles: 1.06x (128x192: 0.97x)
      {tn(2048, 1536, 1024), 192, 128, 2, 0},   // one round of 132 tiles: 0.97x (128x192: 0.97x)
      {tn(3072, 3584, 8192), 224, 128, 2, 0},   // 1.02x (256x128: 0.92x, stream-K: 0.66x)
      {tn(9216, 1024, 8192), 192, 128, 2, 0},   // long K, a round fewer: 1.02x (256x128: 0.79x)
      {tn(5120, 2560, 4096), 160, 128, 2, 0},   // 640 tiles, 97% of 5 rounds: 1.05x (0.94x)
      {tn(10240, 2560, 1024), 224, 128, 2, 0},  // 1.02x (256x128: 0.95x)
      {tn(11008, 4096, 4096), 256, 128, 2, 0},  // 95% of the rounds
      {nn(8192, 8192, 8192), 256, 128, 2, 0},
  };
  for (const Case& k : cases) {
    const KernelConfig c = f.default_config(k.p, arch);
    const std::string what = k.p.describe() + ": " + f.kernel_name(c);
    EXPECT_EQ(c.at("BM"), k.bm) << what;
    EXPECT_EQ(c.at("BN"), k.bn) << what;
    EXPECT_EQ(c.at("WG"), k.wg) << what;
    EXPECT_EQ(c.at("SCHEDULE"), k.schedule) << what;
  }
}

// Large problems with short K that read C: no cluster, and 192x128 tiles (three chunks of C, all
// staged) from twelve waves of 256x128 tiles on; the same shapes with beta = 0 keep 256x128 tiles
// with a cluster of two, and so do those with long K.
TEST(WgmmaGeometry, LargeDefaultsThatReadCDropTheClusterAndTakeThreeChunkTilesFromTwelveWaves) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  struct Case {
    int64_t m, n, k;
    Op op_a;
    int64_t bm, cluster;  // with beta != 0
  };
  const Case cases[] = {
      {8192, 8192, 1024, Op::N, 192, 11},  // 2048 tiles of 256x128: 15.5 waves
      {16384, 4096, 2048, Op::T, 192, 11},
      {8192, 4096, 1024, Op::N, 256, 11},  // 7.8 waves
      {4096, 4096, 1024, Op::T, 256, 11},
      {8192, 8192, 4096, Op::N, 256, 12},  // long K: the epilogue weighs little
  };
  for (const Case& k : cases) {
    Problem p = make_problem(DType::bf16, k.op_a, Op::N, k.m, k.n, k.k);
    const KernelConfig zero = f.default_config(p, arch);
    EXPECT_EQ(zero.at("BM"), 256) << p.describe() << ": " << f.kernel_name(zero);
    EXPECT_EQ(zero.at("CLUSTER"), 12) << p.describe() << ": " << f.kernel_name(zero);
    p.reads_c = true;
    const KernelConfig c = f.default_config(p, arch);
    EXPECT_EQ(c.at("BM"), k.bm) << p.describe() << ": " << f.kernel_name(c);
    EXPECT_EQ(c.at("BN"), 128) << p.describe() << ": " << f.kernel_name(c);
    EXPECT_EQ(c.at("CLUSTER"), k.cluster) << p.describe() << ": " << f.kernel_name(c);
    EXPECT_EQ(c.at("EPILOGUE"), 1) << p.describe() << ": " << f.kernel_name(c);
  }
}

TEST(WgmmaGeometry, DefaultsAreValidForEveryShapeClass) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const int64_t shapes[][3] = {{4096, 1, 4096},    {11008, 8, 4096},   {6144, 32, 4096},
                               {28672, 64, 8192},  {4096, 128, 11008}, {16, 4096, 4096},
                               {20, 30, 40},       {500, 300, 700},    {768, 128, 768},
                               {2500, 3500, 4500}, {8192, 8192, 1024}, {1, 1, 1},
                               {100, 100, 100},    {8192, 8192, 8192}, {1024, 1024, 16384}};
  for (const char* layout : {"nn", "nt", "tn", "tt"})
    for (const auto& s : shapes)
      for (const bool reads_c : {false, true}) {
        Problem p =
            make_problem(DType::bf16, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]);
        p.reads_c = reads_c;
        const KernelConfig c = f.default_config(p, arch);
        EXPECT_EQ(why_unusable(c, p, arch), "") << f.kernel_name(c) << " on " << p.describe();
        EXPECT_EQ(f.plan(c, p, arch).reads_c, reads_c)
            << f.kernel_name(c) << " on " << p.describe();
      }
}

// A problem that does not read C gets a kernel without the code that does (READS_C = 0, derived
// from the problem); its launch says so, and its name tells it from the other.
TEST(WgmmaGeometry, ProblemsThatDoNotReadCGetKernelsWithoutItsCode) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  Problem zero = make_problem(DType::bf16, Op::N, Op::N, 2048, 2048, 2048), reading = zero;
  reading.reads_c = true;
  const KernelConfig for_zero = f.default_config(zero, arch),
                     for_reading = f.default_config(reading, arch);
  EXPECT_EQ(for_zero.at("READS_C"), 0);
  EXPECT_EQ(for_reading.at("READS_C"), 1);
  EXPECT_FALSE(f.plan(for_zero, zero, arch).reads_c);
  EXPECT_TRUE(f.plan(for_reading, reading, arch).reads_c);
  EXPECT_EQ(f.kernel_name(for_zero).find("_readsc"), std::string::npos) << f.kernel_name(for_zero);
  EXPECT_EQ(f.kernel_name(for_reading), f.kernel_name(for_zero) + "_readsc");
  // Each is a point of its own problem's space only.
  EXPECT_NE(why_unusable(for_zero, reading, arch).find("READS_C=0 is not among"),
            std::string::npos);
  EXPECT_NE(why_unusable(for_reading, zero, arch).find("READS_C=1 is not among"),
            std::string::npos);
}

// The launch refuses beta != 0 on a kernel built for beta == 0 (it would drop C) and passes beta
// through otherwise.
TEST(LaunchArgs, BetaIsRefusedOnAKernelBuiltForBetaZero) {
  const Problem p = make_problem(DType::bf16, Op::N, Op::N, 64, 64, 64);
  LaunchPlan g;
  GemmOperands ops;
  ops.beta = 0.5f;
  EXPECT_EQ(core_of(g, p, ops).beta, 0.5f);
  g.reads_c = false;
  try {
    core_of(g, p, ops);
    ADD_FAILURE() << "beta = 0.5 was accepted by a kernel built for beta = 0";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("built for beta = 0"), std::string::npos) << e.what();
  }
  ops.beta = 0.0f;
  EXPECT_EQ(core_of(g, p, ops).beta, 0.0f);
}

// The nearest tuned shape serves a call through its winner with the derived parameters made for
// the call (the library's nearest-shape path): a winner tuned with beta = 0 for m >= n becomes
// valid for a call with beta != 0 and m < n (READS_C and RASTER follow the call); what either
// space searches stays as tuned. A winner whose last TMA-store chunk overlaps the one before
// cannot read C: it stays unusable for such a call (the nearest-shape path passes it over).
TEST(DerivedParams, AWinnerIsRemadeForTheCallsProblem) {
  const Family& f = find_family("wgmma_sm90");
  const ArchInfo arch = ArchInfo::from_name("sm_90a");
  const Problem tuned = make_problem(DType::bf16, Op::T, Op::N, 4096, 4096, 4096);
  Problem call = make_problem(DType::bf16, Op::T, Op::N, 3800, 4096, 4096);
  call.reads_c = true;
  const KernelConfig winner = f.default_config(tuned, arch);
  ASSERT_EQ(winner.at("RASTER"), 0);
  ASSERT_NE(why_unusable(winner, call, arch), "");
  const KernelConfig made = with_derived_params(winner, tuned, call, arch);
  EXPECT_EQ(made.at("READS_C"), 1);
  EXPECT_EQ(made.at("RASTER"), 1);
  EXPECT_EQ(why_unusable(made, call, arch), "") << f.kernel_name(made);
  KernelConfig rest = made;
  rest.params["READS_C"] = winner.at("READS_C");
  rest.params["RASTER"] = winner.at("RASTER");
  EXPECT_EQ(rest.params, winner.params) << "only the derived parameters change";
  KernelConfig overlapping = winner;
  overlapping.params["BM"] = 144;
  ASSERT_EQ(why_unusable(overlapping, tuned, arch), "") << f.kernel_name(overlapping);
  EXPECT_NE(why_unusable(with_derived_params(overlapping, tuned, call, arch), call, arch)
                .find("tma_store_layout"),
            std::string::npos);
  // SPLITS is searched where the tiles are few (1024^2) and pinned to 1 where they are not
  // (2048^2): a split winner stays split, and so unusable there, rather than made into another
  // kernel.
  const Problem few = make_problem(DType::bf16, Op::N, Op::N, 1024, 1024, 16384);
  const Problem many = make_problem(DType::bf16, Op::N, Op::N, 2048, 2048, 16384);
  const KernelConfig split = f.default_config(few, arch);
  ASSERT_GT(split.at("SPLITS"), 1) << f.kernel_name(split);
  EXPECT_EQ(with_derived_params(split, few, many, arch).at("SPLITS"), split.at("SPLITS"));
}

TEST(LibraryOptions, FamilyRestrictionNamesKnownFamilies) {
  setenv("GEMMTUNE_NO_KERNEL_CACHE", "1", 1);  // nothing to write: no kernel is compiled here
  Options o;
  o.use_database = false;
  o.families = "mma_sm80,simt";
  EXPECT_NO_THROW(Library{o});
  o.families = "mma_sm80,nope";
  try {
    Library lib(o);
    FAIL() << "no error for an unknown family";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("unknown kernel family 'nope'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gemmtune
