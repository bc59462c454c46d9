// The Hopper family's float8 kernels are right in every scaling mode (tensor, row, DeepSeek-V3
// blocks) against the fp64 reference over the dequantized operands, with random scales over four
// orders of magnitude: on shapes that are no multiple of any tile (K and M not multiples of 128,
// so a partial last scale block), K = 1, leading dimensions TMA cannot read in place, both beta
// paths, for each schedule (data-parallel, split-K, stream-K, ping-pong, clusters that multicast
// or split K, the swapped decode orientation) and promotion interval, with one partial sum or two
// taking turns (odd and even counts of k-blocks a tile or part), block scales loaded in the loop
// or with each stage. A kernel given scales
// laid out one block (or one row) off is caught by the verifier. The same points and shapes with
// an f32 output (D = C = f32), every element checked. And the defaults' speed on the fp8 suite's
// shapes, printed for the record (the bench compares with cuBLASLt).
#include <algorithm>
#include <array>
#include <cstdio>
#include <string>
#include <vector>

#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  const char* what;
  int64_t bm, bn, stages, wg, cluster, epilogue;
  int64_t swap = 0, schedule = 0, splits = 1, pingpong = 0, cluster_k = 1, promote = 1;
  int64_t overlap = 0, reads_c = 1;  // reads_c 0: run with beta = 0 alone
};

// Problem m is on wgmma's N (BM = kernel columns) unless swapped.
const Point kPoints[] = {
    {"128x128, cluster along N, TMA stores", 128, 128, 5, 2, 12, 1},
    {"64-token tiles, one warpgroup", 128, 64, 6, 1, 11, 0},
    {"wgmma N 64, cluster along M", 64, 128, 6, 2, 21, 0},
    {"wgmma N 192 (block scales: two 128-blocks a tile), register stores", 192, 128, 4, 2, 11, 0},
    {"wgmma N 160, register stores", 160, 128, 4, 2, 11, 0},
    {"split-K in 3", 128, 128, 4, 2, 11, 0, 0, 1, 3},
    {"stream-K, TMA stores", 128, 128, 4, 2, 11, 1, 0, 2},
    {"ping-pong, TMA stores", 128, 64, 5, 2, 11, 1, 0, 0, 1, 1},
    {"a cluster splits K", 128, 64, 6, 1, 11, 0, 0, 0, 1, 0, 2},
    {"swapped (decode): wgmma N 16", 128, 16, 8, 2, 11, 0, 1},
    {"promotion every 2 k-blocks", 128, 128, 5, 2, 11, 0, 0, 0, 1, 0, 1, 2},
    {"promotion every 4 k-blocks, split-K in 2", 128, 128, 5, 2, 11, 0, 0, 1, 2, 0, 1, 4},
    {"two partial sums, TMA stores", 128, 128, 5, 2, 12, 1, 0, 0, 1, 0, 1, 1, 1},
    {"two partial sums, split-K in 3", 128, 128, 4, 2, 11, 0, 0, 1, 3, 0, 1, 1, 1},
    {"two partial sums, stream-K", 128, 128, 4, 2, 11, 1, 0, 2, 1, 0, 1, 1, 1},
    {"two partial sums, a cluster splits K", 128, 64, 6, 1, 11, 0, 0, 0, 1, 0, 2, 1, 1},
    {"wgmma N 144, TMA stores, the last chunk overlapping the one before", 144, 128, 4, 2, 11, 1, 0,
     0, 1, 0, 1, 1, 0, 0},
    {"256 tokens in waves, TMA stores, cluster along N", 128, 256, 3, 2, 12, 1},
    {"256 tokens in waves, one CTA, TMA stores (the large block-scaled default)", 128, 256, 3, 2,
     11, 1},
    {"256 tokens in waves, register stores, split-K in 3", 128, 256, 3, 2, 11, 0, 0, 1, 3},
};

// Block scales need problem n on the kernel rows and promotion every k-block.
bool fits_mode(const Point& pt, Scaling scaling) {
  return scaling != Scaling::block || (pt.swap == 0 && pt.promote == 1);
}

// Whether a point runs in a mode with beta, its block scales staged or not (block scales only,
// on tiles of 192 rows at most: a TMA box of their row scales holds four more).
bool runs(const Point& pt, Scaling scaling, float beta, int64_t staged) {
  return fits_mode(pt, scaling) && (beta == 0 || pt.reads_c) &&
         (staged == 0 || (scaling == Scaling::block && pt.bn <= 192));
}

// staged: block scales come with each stage (STAGED_SCALES), else they are loaded in the loop.
KernelConfig config_of(const Point& pt, const Problem& p, int64_t staged = 0) {
  return KernelConfig{"wgmma_sm90",
                      p.types,
                      p.scaling,
                      p.op_a,
                      p.op_b,
                      {{"BM", pt.bm},
                       {"BN", pt.bn},
                       {"SWAP", pt.swap},
                       {"STAGES", pt.stages},
                       {"WG", pt.wg},
                       {"WS", 1},
                       {"CLUSTER", pt.cluster},
                       {"RASTER", p.m >= p.n ? 0 : 1},
                       {"GROUP", 8},
                       {"EPILOGUE", pt.epilogue},
                       {"SCHEDULE", pt.schedule},
                       {"SPLITS", pt.splits},
                       {"CLUSTER_K", pt.cluster_k},
                       {"PINGPONG", pt.pingpong},
                       {"OCCUPANCY", 1},
                       {"KSUB", 1},
                       {"READS_C", pt.reads_c},
                       {"PROMOTE", pt.promote},
                       {"OVERLAP", pt.overlap},
                       {"STAGED_SCALES", staged}}};
}

Problem fp8_problem(DataTypes types, Scaling scaling, int64_t m, int64_t n, int64_t k,
                    int64_t extra_ld = 0) {
  Problem p = make_problem(types, Op::T, Op::N, m, n, k);
  p.scaling = scaling;
  return test::with_longer_lds(p, extra_ld);
}

const DataTypes kE4m3Bf16{DataType::e4m3, DataType::e4m3, DataType::bf16, DataType::bf16};
const DataTypes kE4m3E5m2F16{DataType::e4m3, DataType::e5m2, DataType::f16, DataType::f16};
const DataTypes kE4m3F32{DataType::e4m3, DataType::e4m3, DataType::f32, DataType::f32};
const DataTypes kE5m2E4m3F32{DataType::e5m2, DataType::e4m3, DataType::f32, DataType::f32};

// An f32 output's tolerance on |out - ref| / (|ref| + scale) for a kernel that promotes every
// `promote` k-blocks: not the verifier's for f32 (1e-4, checker.cpp: f32 products summed in f32)
// but what float8 wgmma's accumulator, about 14 significant bits between promotions (DeepSeek-V3's
// report), may lose over the 4 * promote wgmma of 32 K that a partial sum takes. The largest
// errors on an H100 over this file's points and shapes were 7.7e-4, 1.4e-3 and 2.3e-3 with
// promotion every 1, 2 and 4 k-blocks: 2^-9 a k-block leaves 2.5 to 3.5 times that. (Rounding
// the output to bf16 would stay within it: f32_values_are_not_16_bit catches that apart. A
// misplaced, missing or unscaled value is off by far more.)
double f32_tolerance(int64_t promote) {
  return 0x1p-9 * double(promote);
}

// One problem with an f32 output, its data and its fp64 reference at every element.
struct F32Case {
  ProblemData data;
  float alpha, beta;
  DeviceBuffer ref, scale;
  F32Case(const Checker& checker, const Problem& p, float alpha_, float beta_, uint64_t seed,
          CUstream stream)
      : data(p, checker, seed, stream),
        alpha(alpha_),
        beta(beta_),
        ref(size_t(p.m * p.n) * sizeof(double)),
        scale(size_t(p.m * p.n) * sizeof(double)) {
    checker.reference(args(), stream);
  }
  // Every element (no point lists: element i is (i % m, i / m)), at `tolerance`.
  CheckArgs args(double tolerance = 0) const {
    CheckArgs a = check_args(data, alpha, beta);
    a.ref = ref.ptr();
    a.scale = scale.ptr();
    a.points = int(data.problem.m * data.problem.n);
    a.tolerance = float(tolerance);
    return a;
  }
};

// Whether the nonzero values of C (m x n, ld ldc, f32) keep bits below a 16-bit type's: a value
// rounded to bf16 (or f16-sized) has its low 16 bits zero; one in 65536 honest f32 values has.
::testing::AssertionResult f32_values_are_not_16_bit(const ProblemData& data) {
  const Problem& p = data.problem;
  std::vector<uint32_t> c(size_t(p.ldc * p.n));
  GT_CU(cuMemcpyDtoH(c.data(), data.c.ptr(), c.size() * 4));
  int64_t nonzero = 0, short_ones = 0;
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      const uint32_t bits = c[size_t(i + j * p.ldc)];
      if ((bits & 0x7fffffffu) == 0) continue;
      ++nonzero;
      short_ones += (bits & 0xffffu) == 0;
    }
  if (nonzero > 0 && 100 * short_ones <= nonzero) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << short_ones << " of " << nonzero << " nonzero values have their low 16 bits zero";
}

class WgmmaFp8 : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    const Problem probe = fp8_problem(kE4m3Bf16, Scaling::tensor, 64, 64, 64);
    if (!find_family("wgmma_sm90").unsupported_reason(probe, device_.arch).empty())
      GTEST_SKIP() << "the float8 kernels need sm_90a; this GPU is " << device_.arch.name();
  }
  // The point's kernel for the problem, which must fit an SM.
  ReadyKernel ready(const Point& pt, const Problem& p, int64_t staged) {
    ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, staged), p, device_.arch);
    EXPECT_GT(k.loaded->occupancy(k.plan), 0) << k.compiled.name;
    return k;
  }
};

TEST_F(WgmmaFp8, EveryModeScheduleAndOddShape) {
  const int64_t shapes[][3] = {{300, 200, 1000}, {257, 129, 40}, {129, 257, 1}, {2112, 64, 700}};
  int checked = 0;
  double worst = 0;
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (const DataTypes& types : {kE4m3Bf16, kE4m3E5m2F16})
      for (const auto& s : shapes)
        for (int64_t extra_ld : {0, 3}) {
          if (types != kE4m3Bf16 && extra_ld != 0) continue;
          const Problem p = fp8_problem(types, scaling, s[0], s[1], s[2], extra_ld);
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
            const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
            for (const Point& pt : kPoints)
              for (int64_t staged : {0, 1}) {
                if (!runs(pt, scaling, beta, staged)) continue;
                const ReadyKernel k = ready(pt, p, staged);
                const Verdict v = check(k, verifier);
                EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe()
                                  << " alpha=" << alpha << " beta=" << beta << ": " << v.message;
                worst = std::max(worst, v.max_error);
                ++checked;
              }
          }
        }
  std::printf("float8: %d kernel runs checked, largest normalized error %.3g\n", checked, worst);
  EXPECT_GT(checked, 300);
}

// The 256-token tiles that consume their accumulator in waves, every mode and both beta paths,
// on a shape with a partial tile on each side and a partial k-block (300x300x520): small enough for
// compute-sanitizer, which runs this test alone.
TEST_F(WgmmaFp8, TilesInWavesOnAPartialShape) {
  int checked = 0;
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block}) {
    const Problem p = fp8_problem(kE4m3Bf16, scaling, 300, 300, 520);
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
      const Verifier verifier(*checker_, p, alpha, beta, 9, stream_->get());
      for (const Point& pt : kPoints)
        for (int64_t staged : {0, 1}) {
          if (pt.bn != 256 || !runs(pt, scaling, beta, staged)) continue;
          const ReadyKernel k = ready(pt, p, staged);
          const Verdict v = check(k, verifier);
          EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << " beta=" << beta << ": "
                            << v.message;
          ++checked;
        }
    }
  }
  EXPECT_EQ(checked, 18);  // three points, three modes, two beta paths
}

// Float8 with an f32 output (D = C = f32): every point in every mode on the odd shapes, e4m3 and
// e5m2 x e4m3, leading dimensions that leave C unaligned for TMA (its stores then come from
// registers, every other column 8-byte aligned), beta == 0 with C full of NaN (an element not
// written stays NaN) and beta != 0 (C read, by TMA or from registers), every element against the
// fp64 reference at f32_tolerance, and the values keep f32's bits. The largest error of each
// point is printed. No element exceeds the verifier's tolerance of the problem (checker.cpp: the
// f32 output's and what float8 wgmma's accumulator may lose; f32's alone, 1e-4, failed 5.2
// million of 67.6 million elements on an H100), the one candidates are tuned with.
TEST_F(WgmmaFp8, F32OutputInEveryModeScheduleAndOddShape) {
  const int64_t shapes[][3] = {{300, 200, 1000}, {257, 129, 40}, {129, 257, 1}, {2112, 64, 700}};
  int checked = 0;
  int64_t over_verifier = 0, points = 0;
  double worst = 0;
  std::vector<double> worst_of(sizeof(kPoints) / sizeof(kPoints[0]), 0.0);
  for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block})
    for (const DataTypes& types : {kE4m3F32, kE5m2E4m3F32})
      for (const auto& s : shapes)
        for (int64_t extra_ld : {0, 3}) {
          if (types != kE4m3F32 && (extra_ld != 0 || s[2] == 1)) continue;
          const Problem p = fp8_problem(types, scaling, s[0], s[1], s[2], extra_ld);
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
            const F32Case cs(*checker_, p, alpha, beta, 5, stream_->get());
            for (const Point& pt : kPoints)
              for (int64_t staged : {0, 1}) {
                if (!runs(pt, scaling, beta, staged)) continue;
                const ReadyKernel k = ready(pt, p, staged);
                cs.data.reset_c(*checker_, beta, stream_->get());
                GemmOperands ops = cs.data.operands(alpha, beta);
                workspaces_.provide(stream_->get(), k.plan, ops);
                k.run(p, ops, stream_->get());
                const Verdict v =
                    checker_->compare(cs.args(f32_tolerance(pt.promote)), stream_->get());
                const std::string what = k.compiled.name + " (" + pt.what + ") on " + p.describe() +
                                         " alpha=" + std::to_string(alpha) +
                                         " beta=" + std::to_string(beta);
                EXPECT_TRUE(v.ok) << what << ": " << v.bad << " of " << v.points
                                  << " elements wrong, largest error " << v.max_error;
                EXPECT_TRUE(f32_values_are_not_16_bit(cs.data)) << what;
                over_verifier += checker_->compare(cs.args(tolerance(p)), stream_->get()).bad;
                points += v.points;
                worst = std::max(worst, v.max_error);
                double& w = worst_of[size_t(&pt - kPoints)];
                w = std::max(w, v.max_error);
                ++checked;
              }
          }
        }
  for (size_t i = 0; i < worst_of.size(); ++i)
    std::printf("  largest error %.3g: %s (promotion every %lld k-blocks)\n", worst_of[i],
                kPoints[i].what, (long long)kPoints[i].promote);
  std::printf(
      "float8 -> f32: %d kernel runs checked, largest normalized error %.3g; %lld of %lld "
      "elements over the verifier's tolerance %.3g\n",
      checked, worst, (long long)over_verifier, (long long)points,
      tolerance(fp8_problem(kE4m3F32, Scaling::tensor, 64, 64, 64)));
  EXPECT_GT(checked, 250);
  EXPECT_EQ(over_verifier, 0);
}

// The verifier catches a kernel that reads its scales one K block (block scaling) or one row
// (row scaling) off: the scales handed to the kernel are shifted copies of the ones the reference
// used.
TEST_F(WgmmaFp8, ScalesReadFromTheWrongBlockAreCaught) {
  for (const auto& [scaling, staged] :
       {std::pair{Scaling::row, 0}, std::pair{Scaling::block, 0}, std::pair{Scaling::block, 1}}) {
    const Problem p = fp8_problem(kE4m3Bf16, scaling, 384, 256, 512);
    const Verifier verifier(*checker_, p, 1.0f, 0.0f, 9, stream_->get());
    const ReadyKernel k =
        prepare_kernel(compiler_, config_of(kPoints[0], p, staged), p, device_.arch);
    ASSERT_TRUE(check(k, verifier).ok) << k.compiled.name;
    const ScaleShape shape = scale_shape_b(p);
    const int64_t shift = scaling == Scaling::block ? shape.rows : 1;  // a K block, or a row
    DeviceBuffer shifted(size_t(shape.count()) * sizeof(float));
    const Verdict v = verifier.verify(
        [&](const Problem& q, GemmOperands ops, CUstream s) {
          const ScaleShape qs = scale_shape_b(q);
          const int64_t q_shift = scaling == Scaling::block ? qs.rows : 1;
          GT_CU(cuMemcpyDtoDAsync(shifted.ptr(), ops.scale_b + q_shift * sizeof(float),
                                  size_t(qs.count() - q_shift) * sizeof(float), s));
          GT_CU(cuMemcpyDtoDAsync(shifted.ptr() + (qs.count() - q_shift) * sizeof(float),
                                  ops.scale_b, size_t(q_shift) * sizeof(float), s));
          ops.scale_b = shifted.ptr();
          const LaunchPlan g = k.family->plan(k.config, q, device_.arch);
          workspaces_.provide(s, g, ops);
          k.run(g, q, ops, s);
        },
        stream_->get(), true);
    EXPECT_FALSE(v.ok) << "scales " << shift << " floats off passed, " << to_string(scaling);
    std::printf("%s scales one %s off: %lld of %lld points out of tolerance (largest error %.3g)\n",
                std::string(to_string(scaling)).c_str(),
                scaling == Scaling::block ? "K block" : "row", (long long)v.bad,
                (long long)v.points, v.max_error);
  }
}

// Block scales where a tile spans two 128-blocks of columns: wgmma N 160 starts a tile at
// offsets 0, 32, 64 and 96 of a block, 192 at 0 and 64 (each split compiled in), 144 at the
// eight multiples of 16 (the split read at run time), the scales loaded in the loop and with
// each stage. m = 2112 puts tiles at every offset; n and K end mid-tile and mid-block; beta != 0
// reads C.
TEST_F(WgmmaFp8, BlockScalesSplitAtEveryOffset) {
  const Point split[] = {
      {"wgmma N 160, TMA stores (chunks that overlap: beta = 0 alone)", 160, 128, 4, 2, 11, 1, 0, 0,
       1, 0, 1, 1, 0, 0},
      {"wgmma N 192, TMA stores, a cluster along M", 192, 128, 4, 2, 21, 1},
      {"wgmma N 160, register stores, split-K in 2", 160, 128, 4, 2, 11, 0, 0, 1, 2},
      {"wgmma N 144, register stores", 144, 128, 4, 2, 11, 0},
  };
  int checked = 0;
  for (const auto& s : {std::array<int64_t, 3>{2112, 200, 1000}, {1000, 130, 520}}) {
    const Problem p = fp8_problem(kE4m3Bf16, Scaling::block, s[0], s[1], s[2]);
    for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
      const Verifier verifier(*checker_, p, alpha, beta, 11, stream_->get());
      for (const Point& pt : split)
        for (int64_t staged : {0, 1}) {
          if (beta != 0 && !pt.reads_c) continue;
          const ReadyKernel k =
              prepare_kernel(compiler_, config_of(pt, p, staged), p, device_.arch);
          const Verdict v = check(k, verifier);
          EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe()
                            << " beta=" << beta << ": " << v.message;
          ++checked;
        }
    }
  }
  EXPECT_EQ(checked, 28);
}

// Block scales that come into each stage by TMA (STAGED_SCALES), which reads from 16-byte aligned
// addresses: scales given 4 bytes past one (a view into a larger tensor, say) are packed into an
// aligned copy first, and the results are right. Tiles at every offset of a column block (wgmma N
// 160), a cluster, two partial sums; n and the scales' counts no multiple of 4.
TEST_F(WgmmaFp8, BlockScalesOffSixteenBytesArePacked) {
  const Point points[] = {kPoints[0], kPoints[4], kPoints[12]};
  const Problem p = fp8_problem(kE4m3Bf16, Scaling::block, 2112, 130, 1000);
  const Verifier verifier(*checker_, p, 1.0f, 0.0f, 13, stream_->get());
  DeviceBuffer a_scales(size_t(scale_shape_a(p).count() + 4) * sizeof(float));
  DeviceBuffer b_scales(size_t(scale_shape_b(p).count() + 4) * sizeof(float));
  for (const Point& pt : points) {
    const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p, 1), p, device_.arch);
    const Verdict v = verifier.verify(
        [&](const Problem& q, GemmOperands ops, CUstream s) {
          const CUdeviceptr a = a_scales.ptr() + sizeof(float), b = b_scales.ptr() + sizeof(float);
          GT_CU(cuMemcpyDtoDAsync(a, ops.scale_a, size_t(scale_shape_a(q).count()) * 4, s));
          GT_CU(cuMemcpyDtoDAsync(b, ops.scale_b, size_t(scale_shape_b(q).count()) * 4, s));
          ops.scale_a = a;
          ops.scale_b = b;
          const LaunchPlan g = k.family->plan(k.config, q, device_.arch);
          workspaces_.provide(s, g, ops);
          k.run(g, q, ops, s);
        },
        stream_->get(), true);
    EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what
                      << "), scales 4 bytes off 16: " << v.message;
  }
}

// The defaults on the fp8 suite's shapes: TFLOP/s, L2 flushed between runs.
TEST_F(WgmmaFp8, DefaultsOnTheSuite) {
  const int64_t rows[][4] = {{2112, 64, 7168, 3},   {2112, 4096, 7168, 3}, {24576, 4096, 1536, 3},
                             {7168, 64, 16384, 3},  {7168, 128, 16384, 3}, {7168, 4096, 16384, 3},
                             {4096, 4096, 7168, 3}, {8192, 8192, 8192, 1}, {28672, 2048, 8192, 1},
                             {11008, 8, 4096, 1},   {8192, 8192, 8192, 2}, {6144, 32, 4096, 2}};
  const Family& family = find_family("wgmma_sm90");
  const Timer timer(device_);
  TimingSettings settings;
  settings.min_runs = 10;
  settings.min_total_ms = 50;
  for (const auto& r : rows) {
    const Problem p = fp8_problem(kE4m3Bf16, static_cast<Scaling>(r[3]), r[0], r[1], r[2]);
    const KernelConfig c = family.default_config(p, device_.arch);
    const ReadyKernel k = prepare_kernel(compiler_, c, p, device_.arch);
    const ProblemData data(p, *checker_, 3, stream_->get());
    GemmOperands ops = data.operands(1.0f, 0.0f);
    workspaces_.provide(stream_->get(), k.plan, ops);
    const Timing t = timer.time([&](CUstream s) { k.run(p, ops, s); }, stream_->get(), settings);
    std::printf("%-7s %6lld %6lld %6lld  %7.1f TFLOP/s  %s\n",
                std::string(to_string(p.scaling)).c_str(), (long long)p.m, (long long)p.n,
                (long long)p.k, p.flops() / (t.median_ms * 1e9), k.compiled.name.c_str());
  }
}

// One tile in every mode on one problem: what block scaling costs over tensor scaling (printed).
TEST_F(WgmmaFp8, OneTileInEveryMode) {
  const Timer timer(device_);
  TimingSettings settings;
  settings.min_runs = 10;
  settings.min_total_ms = 50;
  const Point tiles[] = {{"128x128, cluster along N, TMA stores", 128, 128, 5, 2, 12, 1},
                         {"128x128, two partial sums", 128, 128, 5, 2, 12, 1, 0, 0, 1, 0, 1, 1, 1},
                         {"160x128, TMA stores", 160, 128, 4, 2, 11, 1, 0, 0, 1, 0, 1, 1, 0, 0},
                         {"192x128, TMA stores", 192, 128, 4, 2, 11, 1},
                         {"128x256 in waves, TMA stores", 128, 256, 3, 2, 12, 1}};
  for (const Point& pt : tiles)
    for (Scaling scaling : {Scaling::tensor, Scaling::row, Scaling::block}) {
      const Problem p = fp8_problem(kE4m3Bf16, scaling, 4096, 4096, 7168);
      const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
      const ProblemData data(p, *checker_, 3, stream_->get());
      GemmOperands ops = data.operands(1.0f, 0.0f);
      workspaces_.provide(stream_->get(), k.plan, ops);
      const Timing t = timer.time([&](CUstream s) { k.run(p, ops, s); }, stream_->get(), settings);
      std::printf("%-7s %7.1f TFLOP/s  %s\n", std::string(to_string(scaling)).c_str(),
                  p.flops() / (t.median_ms * 1e9), k.compiled.name.c_str());
    }
}

// Fast accumulation (PROMOTE 0: wgmma sums the whole K) in every schedule, tensor and row scales:
// right within the problem's tolerance (checker.cpp: wider with K), on odd shapes and a long K;
// the largest errors of fast and precise kernels on the same data are printed side by side.
TEST_F(WgmmaFp8, FastAccumulationInEverySchedule) {
  const Point fast[] = {
      {"128x128, cluster along N, TMA stores", 128, 128, 5, 2, 12, 1, 0, 0, 1, 0, 1, 0},
      {"256x128: 128 accumulators, no partial sums", 256, 128, 4, 2, 11, 1, 0, 0, 1, 0, 1, 0},
      {"split-K in 3", 128, 128, 4, 2, 11, 0, 0, 1, 3, 0, 1, 0},
      {"stream-K, TMA stores", 128, 128, 4, 2, 11, 1, 0, 2, 1, 0, 1, 0},
      {"ping-pong, TMA stores", 128, 64, 5, 2, 11, 1, 0, 0, 1, 1, 1, 0},
      {"a cluster splits K", 128, 64, 6, 1, 11, 0, 0, 0, 1, 0, 2, 0},
      {"swapped (decode): wgmma N 16", 128, 16, 8, 2, 11, 0, 1, 0, 1, 0, 1, 0},
  };
  const int64_t shapes[][3] = {{300, 200, 1000}, {129, 257, 1}, {1024, 512, 16384}};
  int checked = 0;
  for (Scaling scaling : {Scaling::tensor, Scaling::row})
    for (const auto& s : shapes) {
      Problem p = fp8_problem(kE4m3Bf16, scaling, s[0], s[1], s[2]);
      p.accumulation = Accumulation::fast;
      Problem precise = p;
      precise.accumulation = Accumulation::precise;
      for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
        const Verifier verifier(*checker_, p, alpha, beta, 11, stream_->get());
        double worst = 0;
        for (const Point& pt : fast) {
          const ReadyKernel k = prepare_kernel(compiler_, config_of(pt, p), p, device_.arch);
          const Verdict v = check(k, verifier);
          EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe()
                            << " beta=" << beta << ": " << v.message;
          worst = std::max(worst, v.max_error);
          ++checked;
        }
        const Verifier same_data(*checker_, precise, alpha, beta, 11, stream_->get());
        const ReadyKernel k =
            prepare_kernel(compiler_, config_of(kPoints[0], precise), precise, device_.arch);
        const Verdict v = check(k, same_data);
        EXPECT_TRUE(v.ok) << k.compiled.name << ": " << v.message;
        std::printf("%s K=%lld beta=%g: largest error fast %.3g, precise %.3g (tolerance %.3g)\n",
                    std::string(to_string(scaling)).c_str(), (long long)p.k, beta, worst,
                    v.max_error, tolerance(p));
      }
    }
  EXPECT_EQ(checked, 2 * 3 * 2 * 7);
}

}  // namespace
}  // namespace gemmtune
