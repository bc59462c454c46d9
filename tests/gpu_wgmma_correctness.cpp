// The Hopper family is right for all four layouts, both schedules, with and without clusters,
// on shapes that are no multiple of any tile, K < BK, K = 1, M or N = 1, both beta paths (NaN in
// C when beta == 0), output poisoned first, and leading dimensions TMA cannot use in place.
#include <iterator>
#include <vector>

#include "gemmtune/runtime/driver.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

// One configuration per code path: schedules (data-parallel, split-K, stream-K; persistent and
// multistage), consumer warpgroups 1-3, one or two 64-row blocks per warpgroup, wgmma N from 16
// to 256 (non-powers of two too), both orientations (SWAP: N on wgmma's N), clusters along M and
// along N, clusters that split K, both epilogues (TMA stores where C is aligned, after TMA loads
// of C when beta != 0; stores from registers otherwise, reading C a few values ahead), stages of
// one or two 64-K blocks.
struct Point {
  const char* what;
  int64_t bm, bn, stages, wg, ws, cluster, epilogue;
  int64_t swap = 0, schedule = 0, splits = 1, pingpong = 0, occupancy = 1, cluster_k = 1, ksub = 1;
};

const Point kPoints[] = {
    {"the known good point", 256, 128, 3, 2, 1, 12, 1},
    {"two blocks per warpgroup, cluster along M", 128, 256, 3, 2, 1, 21, 0},
    {"one consumer warpgroup", 128, 128, 4, 1, 1, 11, 1},
    {"three consumer warpgroups", 128, 192, 3, 3, 1, 11, 0},
    {"multistage", 128, 128, 4, 2, 0, 11, 0},
    {"multistage, wgmma N 256", 256, 128, 3, 2, 0, 11, 0},
    {"split-K in 3", 128, 128, 4, 2, 1, 11, 0, 0, 1, 3},
    {"stream-K, cluster along N, TMA stores", 256, 128, 3, 2, 1, 12, 1, 0, 2},
    {"swapped (decode): wgmma N 16, stream-K", 128, 16, 6, 1, 1, 11, 0, 1, 2},
    {"swapped, wgmma N 40, split-K in 4", 128, 40, 4, 2, 1, 11, 0, 1, 1, 4},
    {"wgmma N 200 (ragged), stream-K, cluster along M", 200, 128, 4, 2, 1, 21, 0, 0, 2},
    {"swapped, cluster along N", 128, 64, 4, 2, 1, 12, 0, 1, 0},
    {"ping-pong, TMA stores", 128, 128, 4, 2, 1, 11, 1, 0, 0, 1, 1},
    {"ping-pong, stream-K, cluster along M", 256, 64, 3, 2, 1, 21, 0, 0, 2, 1, 1},
    {"swapped, two CTAs per SM, split-K in 2", 128, 24, 4, 2, 1, 11, 0, 1, 1, 2, 0, 2},
    {"TMA stores through 2 buffers for 4 chunks (4 stages)", 256, 128, 4, 2, 1, 11, 1},
    {"TMA stores through 1 buffer for 3 chunks, three warpgroups", 192, 192, 4, 3, 1, 11, 1},
    {"a cluster splits K, wgmma N 24", 24, 64, 8, 1, 1, 11, 0, 0, 0, 1, 0, 1, 2},
    {"a cluster splits K, two warpgroups", 128, 128, 4, 2, 1, 11, 0, 0, 0, 1, 0, 1, 2},
    {"a cluster of four splits K, wgmma N 48", 48, 64, 4, 1, 1, 11, 0, 0, 0, 1, 0, 1, 4},
    {"swapped, a cluster splits K", 64, 32, 8, 1, 1, 11, 0, 1, 0, 1, 0, 1, 2},
    {"swapped (decode), two 64-K blocks a stage", 64, 32, 6, 1, 1, 11, 0, 1, 0, 1, 0, 1, 1, 2},
    {"swapped, two 64-K blocks a stage, cluster along M", 64, 32, 6, 1, 1, 21, 0, 1, 0, 1, 0, 1, 1,
     2},
    {"swapped, two 64-K blocks a stage, a cluster splits K", 64, 128, 4, 1, 1, 11, 0, 1, 0, 1, 0, 1,
     2, 2},
    {"swapped (decode), wgmma N 8, a cluster of four splits K: one CTA owns every column", 128, 8,
     8, 1, 1, 11, 0, 1, 0, 1, 0, 1, 4},
    {"swapped, wgmma N 16, a cluster of four splits K: two CTAs own columns", 64, 16, 6, 1, 1, 11,
     0, 1, 0, 1, 0, 1, 4},
};

// TMA stores of wgmma N no multiple of 64, whose last chunk overlaps the one before: kernels for
// beta = 0 alone (the family's rule tma_store_layout).
const Point kOverlappingChunks[] = {
    {"TMA stores, wgmma N 144: chunks of 64, 64 and the last 64 from column 80", 144, 128, 5, 2, 1,
     11, 1},
    {"TMA stores, wgmma N 80, one warpgroup of two 64-row blocks, cluster along N", 80, 128, 6, 1,
     1, 12, 1},
    {"TMA stores through 1 buffer for 3 chunks, wgmma N 176, three warpgroups, stream-K", 176, 192,
     4, 3, 1, 11, 1, 0, 2},
};

// wgmma N must come in 64-column chunks when its operand is stored along M or N (the family's
// constraint mn_major_in_chunks): such layouts get the nearest multiple of 64.
KernelConfig config_of(const Point& pt, const Problem& p, bool reads_c = true) {
  const bool q_kmajor = pt.swap ? p.op_b == Op::N : p.op_a == Op::T;
  int64_t bm = pt.bm, bn = pt.bn;
  int64_t& cols = pt.swap ? bn : bm;
  if (!q_kmajor) cols = (cols + 63) / 64 * 64;
  return KernelConfig{"wgmma_sm90",
                      p.types,
                      p.scaling,
                      p.op_a,
                      p.op_b,
                      {{"BM", bm},
                       {"BN", bn},
                       {"SWAP", pt.swap},
                       {"STAGES", pt.stages},
                       {"WG", pt.wg},
                       {"WS", pt.ws},
                       {"CLUSTER", pt.cluster},
                       {"RASTER", p.m >= p.n ? 0 : 1},
                       {"GROUP", pt.cluster == 21 ? 3 : 8},
                       {"EPILOGUE", pt.epilogue},
                       {"SCHEDULE", pt.schedule},
                       {"SPLITS", pt.splits},
                       {"CLUSTER_K", pt.cluster_k},
                       {"PINGPONG", pt.pingpong},
                       {"OCCUPANCY", pt.occupancy},
                       {"KSUB", pt.ksub},
                       {"READS_C", reads_c}}};
}

class WgmmaCorrectness
    : public test::GpuTest,
      public ::testing::WithParamInterface<std::tuple<std::string, std::string>> {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    if (!find_family("wgmma_sm90")
             .unsupported_reason(make_problem(DType::bf16, Op::N, Op::N, 64, 64, 64), device_.arch)
             .empty())
      GTEST_SKIP() << "the wgmma family needs sm_90a; this GPU is " << device_.arch.name();
  }
};

TEST_P(WgmmaCorrectness, OddShapesBetaAndLeadingDimensions) {
  const auto [dtype_name, layout] = GetParam();
  const DType dtype = parse_data_type(dtype_name);
  const int64_t shapes[][3] = {{1, 1, 1},     {300, 200, 100}, {257, 129, 40}, {129, 257, 1},
                               {1, 333, 200}, {333, 1, 200},   {520, 300, 700}};
  int checked = 0;
  for (const auto& s : shapes) {
    for (int64_t extra_ld : {0, 3}) {  // 3: odd leading dimensions, packed before TMA
      const Problem p = test::with_longer_lds(
          make_problem(dtype, parse_op(layout[0]), parse_op(layout[1]), s[0], s[1], s[2]),
          extra_ld);
      for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
        const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
        for (const Point& pt : kPoints) {
          const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
          ASSERT_GT(k.loaded->occupancy(k.plan), 0) << k.compiled.name;
          const Verdict v = check(k, verifier);
          EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe()
                            << " alpha=" << alpha << " beta=" << beta << ": " << v.message;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 7 * 2 * int(std::size(kPoints)) * 2);
}

// Ping-pong with more tiles than workers: each warpgroup computes every other tile of its
// worker, whose main loop (16 k-blocks) is longer than the pipeline it skips. TMA stores through
// fewer buffers than chunks: a tile's first chunk reuses a buffer the previous tile's stores read;
// with beta != 0 the producer loads each whole tile's first chunks once the consumer has freed
// its buffers, tile after tile, and stream-K mixes whole tiles with parts that load C themselves.
// Clusters that split K over several tiles each: the pushed sums' buffer is reused, round after
// round, also where CTAs that own no columns push sums they never receive (wgmma N 8 and 16).
// Stages of two 64-K blocks go round their ring over several tiles too.
TEST_P(WgmmaCorrectness, PingPongTurnsOverManyTiles) {
  const auto [dtype_name, layout] = GetParam();
  const Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]),
                                 parse_op(layout[1]), 2000, 1300, 1000);
  const Verifier verifier(*checker_, p, 1.0f, 0.5f, 5, stream_->get());
  for (const Point& pt : {kPoints[0], kPoints[7], kPoints[12], kPoints[13], kPoints[15],
                          kPoints[16], kPoints[17], kPoints[18], kPoints[19], kPoints[20],
                          kPoints[21], kPoints[23], kPoints[24], kPoints[25]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    const Verdict v = check(k, verifier);
    EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << "): " << v.message;
  }
}

// TMA stores whose last chunk overlaps the one before, tile after tile: a CTA's next tile reuses
// the buffers its last chunks left from.
TEST_P(WgmmaCorrectness, OverlappingChunksOverManyTiles) {
  const auto [dtype_name, layout] = GetParam();
  const Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]),
                                 parse_op(layout[1]), 2000, 1300, 1000);
  const Verifier verifier(*checker_, p, 1.0f, 0.0f, 5, stream_->get());
  for (const Point& pt : kOverlappingChunks) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, false), p, device_.arch);
    const Verdict v = check(k, verifier);
    EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << "): " << v.message;
  }
}

// TMA stores with a bias along M, which each consumer stages in shared memory as its tile's main
// loop begins (store_tma.cuh, StagedBias): every TMA-store point (wgmma N 128 and 256, one or two
// values a thread; two 64-row blocks a warpgroup; ping-pong, a copy per consumer; stream-K's parts
// that load it and run no epilogue) with beta 0 and 0.5, and the overlapping last chunks (wgmma N
// 144, 80, 176) with beta 0; M no multiple of the tiles (zeros past M), several tiles a CTA (the
// copy rewritten tile after tile).
TEST_P(WgmmaCorrectness, TmaStoresAddAStagedBias) {
  const auto [dtype_name, layout] = GetParam();
  int checked = 0;
  for (const char* epilogue : {"bias", "bias,gelu_tanh"}) {
    Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]), parse_op(layout[1]),
                             2000, 1300, 1000);
    p.epilogue = parse_epilogue(epilogue);
    for (const float beta : {0.0f, 0.5f}) {
      const Verifier verifier(*checker_, p, 0.75f, beta, 5, stream_->get());
      std::vector<KernelConfig> configs;
      for (const Point& pt : kPoints)
        if (pt.epilogue == 1) configs.push_back(config_of(pt, p, beta != 0.0f));
      if (beta == 0.0f)
        for (const Point& pt : kOverlappingChunks) configs.push_back(config_of(pt, p, false));
      for (KernelConfig& c : configs) {
        c.epilogue = p.epilogue;
        const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
        const Verdict v = check(k, verifier);
        EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " beta=" << beta << ": "
                          << v.message;
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2 * (2 * 6 + int(std::size(kOverlappingChunks))));
}

// Kernels built for beta = 0 alone (READS_C = 0, what a problem that does not read C is tuned
// with): right on NaN-filled C on odd shapes and on a problem large enough that its points are
// sampled (with every element of a smaller one checked); refused with beta != 0, by the launch
// and by the verifier, rather than run without reading C.
class WgmmaBetaZero : public WgmmaCorrectness {};

TEST_P(WgmmaBetaZero, KernelsWithoutCodeThatReadsC) {
  const auto [dtype_name, layout] = GetParam();
  const int64_t shapes[][3] = {
      {300, 200, 100}, {257, 129, 40}, {1, 333, 200}, {333, 1, 200}, {1100, 900, 300}};
  int checked = 0;
  for (const auto& s : shapes) {
    const Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]),
                                   parse_op(layout[1]), s[0], s[1], s[2]);
    const Verifier verifier(*checker_, p, 0.5f, 0.0f, 7, stream_->get());
    for (const Point& pt : {kPoints[0], kPoints[1], kPoints[3], kPoints[4], kPoints[6], kPoints[7],
                            kPoints[8], kPoints[12], kPoints[15], kPoints[18], kPoints[21]}) {
      const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, false), p, device_.arch);
      ASSERT_FALSE(k.plan.reads_c) << k.compiled.name;
      const Verdict v = check(k, verifier);
      EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe() << ": "
                        << v.message;
      ++checked;
    }
    for (const Point& pt : kOverlappingChunks) {
      const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, false), p, device_.arch);
      const Verdict v = check(k, verifier);
      EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe() << ": "
                        << v.message;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 5 * (11 + int(std::size(kOverlappingChunks))));
  const Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]),
                                 parse_op(layout[1]), 300, 200, 100);
  const ReadyKernel k = prepare_kernel(compiler_, config_of(kPoints[0], p, false), p, device_.arch);
  const ProblemData data(p, *checker_, 3, stream_->get());
  EXPECT_THROW(k.run(p, data.operands(1.0f, 0.5f), stream_->get()), Error);
  const Verdict refused = check(k, p, 1.0f, 0.5f);
  EXPECT_FALSE(refused.ok);
  EXPECT_NE(refused.message.find("built for beta = 0"), std::string::npos) << refused.message;
}

INSTANTIATE_TEST_SUITE_P(Bf16Layouts, WgmmaBetaZero,
                         ::testing::Combine(::testing::Values("bf16"),
                                            ::testing::Values("nn", "nt", "tn", "tt")));

INSTANTIATE_TEST_SUITE_P(LayoutsAndTypes, WgmmaCorrectness,
                         ::testing::Combine(::testing::Values("bf16", "f16"),
                                            ::testing::Values("nn", "nt", "tn", "tt")));

// A small problem per schedule, for compute-sanitizer (tools/gpu-check.sh runs it under memcheck
// and racecheck).
class WgmmaSanitizer : public WgmmaCorrectness {};

TEST_P(WgmmaSanitizer, SmallShapePerSchedule) {
  const auto [dtype_name, layout] = GetParam();
  Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]), parse_op(layout[1]),
                           300, 260, 130);
  for (const Point& pt :
       {kPoints[0],  kPoints[1],  kPoints[4],  kPoints[6],  kPoints[7],  kPoints[8],  kPoints[10],
        kPoints[12], kPoints[13], kPoints[14], kPoints[15], kPoints[17], kPoints[18], kPoints[19],
        kPoints[20], kPoints[21], kPoints[22], kPoints[23], kPoints[24], kPoints[25]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    const Verdict v = check(k, p, 1.0f, 0.0f);
    EXPECT_TRUE(v.ok) << k.compiled.name << ": " << v.message;
    if (pt.epilogue == 1) {  // and the TMA loads of C before the TMA stores
      const Verdict with_c = check(k, p, 1.0f, 0.5f);
      EXPECT_TRUE(with_c.ok) << k.compiled.name << " with beta = 0.5: " << with_c.message;
    }
  }
  // Built for beta = 0 alone: the TMA-store and register-store paths without C's loads, and TMA
  // stores whose last chunk overlaps the one before.
  for (const Point& pt : {kPoints[0], kPoints[1], kOverlappingChunks[0], kOverlappingChunks[1],
                          kOverlappingChunks[2]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, false), p, device_.arch);
    const Verdict v = check(k, p, 1.0f, 0.0f);
    EXPECT_TRUE(v.ok) << k.compiled.name << ": " << v.message;
  }
  // A bias along M staged in shared memory for the TMA stores, over more tiles than CTAs (the
  // copy is rewritten while the other consumer may still read its own).
  Problem biased = make_problem(p.types, p.op_a, p.op_b, 2000, 1300, 64);
  biased.epilogue = parse_epilogue("bias,gelu_tanh");
  for (const Point& pt :
       {kPoints[0], kPoints[2], kPoints[12], kPoints[15], kOverlappingChunks[0]}) {
    KernelConfig c = config_of(pt, biased, false);
    c.epilogue = biased.epilogue;
    const ReadyKernel k = prepare_kernel(compiler_, c, biased, device_.arch);
    const Verdict v = check(k, biased, 1.0f, 0.0f);
    EXPECT_TRUE(v.ok) << k.compiled.name << " on " << biased.describe() << ": " << v.message;
  }
  // Odd leading dimensions: the operands are packed (vector loads near the buffers' ends).
  p.lda += 1;
  p.ldb += 1;
  p.ldc += 1;
  p.align = 2;
  const ReadyKernel k = prepare_kernel(compiler_, config_of(kPoints[0], p), p, device_.arch);
  const Verdict v = check(k, p, 1.0f, 0.5f);
  EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << ": " << v.message;
}

// Split-K, stream-K and clusters that split K reduce in a fixed order: the same inputs give bitwise
// the same C, run after run, whichever part of a tile finishes last. K is long, so that tiles have
// many parts (and ping-pong warpgroups skip segments longer than the pipeline).
TEST_P(WgmmaCorrectness, SplitKAndStreamKAreBitwiseDeterministic) {
  const auto [dtype_name, layout] = GetParam();
  const Problem p = make_problem(parse_data_type(dtype_name), parse_op(layout[0]),
                                 parse_op(layout[1]), 1000, 72, 8000);
  const ProblemData data(p, *checker_, 11, stream_->get());
  const Verifier verifier(*checker_, p, 1.0f, 0.5f, 5, stream_->get());
  for (const Point& pt : {kPoints[6], kPoints[7], kPoints[8], kPoints[9], kPoints[13], kPoints[14],
                          kPoints[19], kPoints[20]}) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
    // Right too: workers here run several long segments (ping-pong turns, stream-K runs).
    const Verdict v = check(k, verifier);
    ASSERT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << "): " << v.message;
    EXPECT_TRUE(same_bits_every_run(k, p, data)) << k.compiled.name << " (" << pt.what << ")";
  }
}

INSTANTIATE_TEST_SUITE_P(Bf16, WgmmaSanitizer,
                         ::testing::Combine(::testing::Values("bf16"),
                                            ::testing::Values("nn", "tn")));

}  // namespace
}  // namespace gemmtune
