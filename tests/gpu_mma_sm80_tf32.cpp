// The Ampere family's f32 kernels on tensor cores (tf32 mma.sync, sm_80 and later) are right: tf32
// within tf32's tolerance and 3xTF32 (each value split in registers into a rounded part and the
// rounded rest, three products) within the exact path's, on shapes that are no multiple of any
// tile, K = 1, leading dimensions that leave narrower copies, every layout (an operand stored along
// M or N read from the transposed copy the launch derives), both beta paths, split-K and the
// decode tile. A tf32 kernel passed off as 3xTF32 is caught by the verifier. The largest errors
// are printed beside cuBLAS's on the same data (its TF32 path, and SGEMM).
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "gemmtune/tuner/cublas.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

struct Point {
  const char* what;
  int64_t bm, bn, bk, wm, wn, stages, splits = 1;
};

// BK counts f32 values: 16 and 32 are 64 and 128 bytes of a row, as 16-bit kernels' 32 and 64.
const Point kPoints[] = {
    {"128x128x16, 64x64 warps, 4 stages (the large default)", 128, 128, 16, 64, 64, 4},
    {"128x256x32, 64x64 warps, 3 stages", 128, 256, 32, 64, 64, 3},
    {"64x64x32, 32x32 warps, 5 stages", 64, 64, 32, 32, 32, 5},
    {"128x32x32, decode", 128, 32, 32, 32, 32, 3},
    {"64x64x16, split-K in 3", 64, 64, 16, 32, 32, 4, 3},
};

KernelConfig config_of(const Point& pt, const Problem& p, int64_t products, const ArchInfo& arch) {
  KernelConfig c = find_family("mma_sm80").default_config(p, arch);
  const std::pair<const char*, int64_t> params[] = {
      {"BM", pt.bm}, {"BN", pt.bn},         {"BK", pt.bk},         {"WM", pt.wm},
      {"WN", pt.wn}, {"STAGES", pt.stages}, {"SPLITS", pt.splits}, {"PRODUCTS", products}};
  for (const auto& [name, value] : params) c.params[name] = value;
  return c;
}

Problem f32_problem(Precision precision, int64_t m, int64_t n, int64_t k, int64_t extra_ld = 0,
                    const char* layout = "tn") {
  Problem p = make_problem(DataType::f32, parse_op(layout[0]), parse_op(layout[1]), m, n, k);
  p.precision = precision;
  return test::with_longer_lds(p, extra_ld);
}

int64_t products_of(Precision precision) {
  return precision == Precision::tf32x3 ? 3 : 1;
}

class MmaSm80Tf32 : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    const Problem probe = f32_problem(Precision::tf32, 64, 64, 64);
    if (!find_family("mma_sm80").unsupported_reason(probe, device_.arch).empty())
      GTEST_SKIP() << "the tf32 mma.sync kernels need sm_80 or newer; this GPU is "
                   << device_.arch.name();
  }

  // cuBLAS's largest error on the verifier's points (its TF32 path for tf32, else SGEMM), or -1
  // without cuBLAS.
  double cublas_error(const Verifier& verifier) {
    if (!cublas_) cublas_ = Cublas::load();
    if (!cublas_) return -1;
    return verifier
        .verify(
            [&](const Problem& q, const GemmOperands& o, CUstream s) { cublas_->gemm(q, o, s); },
            stream_->get())
        .max_error;
  }

  std::unique_ptr<Cublas> cublas_;
};

TEST_F(MmaSm80Tf32, EveryPointLayoutAndOddShapeInBothPrecisions) {
  const int64_t shapes[][3] = {{300, 200, 1000}, {257, 129, 40}, {129, 257, 1}, {1000, 64, 700}};
  const Family& family = find_family("mma_sm80");
  for (Precision precision : {Precision::tf32, Precision::tf32x3}) {
    int checked = 0;
    double worst = 0, worst_cublas = 0;
    for (const char* layout : {"tn", "nn", "nt", "tt"})
      for (const auto& s : shapes)
        for (int64_t extra_ld : {0, 3}) {
          const Problem p = f32_problem(precision, s[0], s[1], s[2], extra_ld, layout);
          for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
            const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
            for (const Point& pt : kPoints) {
              const KernelConfig config = config_of(pt, p, products_of(precision), device_.arch);
              if (!family.why_invalid(config, p, device_.arch).empty()) continue;  // split-K
              const ReadyKernel k = prepare_kernel(compiler_, config, p, device_.arch);
              ASSERT_GT(k.loaded->occupancy(k.plan), 0) << k.compiled.name;
              const Verdict v = check(k, verifier);
              EXPECT_TRUE(v.ok) << k.compiled.name << " (" << pt.what << ") on " << p.describe()
                                << " alpha=" << alpha << " beta=" << beta << ": " << v.message;
              worst = std::max(worst, v.max_error);
              ++checked;
            }
            worst_cublas = std::max(worst_cublas, cublas_error(verifier));
          }
        }
    std::printf(
        "%s: %d kernel runs checked, largest normalized error %.3g (tolerance %.3g); cuBLAS %s "
        "on the same data: %.3g\n",
        std::string(to_string(precision)).c_str(), checked, worst,
        tolerance(f32_problem(precision, 64, 64, 64)),
        precision == Precision::tf32 ? "TF32" : "SGEMM", worst_cublas);
    // Split-K where its rule allows it (few tiles): at least every other point everywhere.
    EXPECT_GE(checked, 4 * 4 * 2 * 2 * 4);
  }
}

// A kernel that computes one tf32 product where 3xTF32 takes three fails 3xTF32's tolerance (the
// exact path's): the small products carry the bits tf32 drops. In layout tn (in place) and nn
// (A from its transposed copy).
TEST_F(MmaSm80Tf32, OneProductFailsThreeProductsTolerance) {
  for (const char* layout : {"tn", "nn"}) {
    const Problem p = f32_problem(Precision::tf32x3, 384, 320, 1024, 0, layout);
    const Verifier verifier(*checker_, p, 1.0f, 0.0f, 5, stream_->get());
    const ReadyKernel one =
        prepare_kernel(compiler_, config_of(kPoints[0], p, 1, device_.arch), p, device_.arch);
    const Verdict v = check(one, verifier);
    EXPECT_FALSE(v.ok) << layout << ": a tf32 kernel passed 3xTF32's tolerance, largest error "
                       << v.max_error;
    const ReadyKernel three =
        prepare_kernel(compiler_, config_of(kPoints[0], p, 3, device_.arch), p, device_.arch);
    EXPECT_TRUE(check(three, verifier).ok) << layout;
  }
}

// The family's defaults of every class, each precision, tn and nn, right within the precision's
// tolerance (on Ampere these serve f32 problems that opt into tf32).
TEST_F(MmaSm80Tf32, DefaultsOfEveryClass) {
  const int64_t shapes[][3] = {{4096, 4096, 4096}, {6144, 24, 4096}, {24, 6144, 4096},
                               {500, 300, 700},    {1, 4096, 4096},  {2048, 2048, 8192}};
  const Family& family = find_family("mma_sm80");
  for (Precision precision : {Precision::tf32, Precision::tf32x3})
    for (const auto& s : shapes)
      for (const char* layout : {"tn", "nn"}) {
        const Problem p = f32_problem(precision, s[0], s[1], s[2], 0, layout);
        const KernelConfig config = family.default_config(p, device_.arch);
        const ReadyKernel k = prepare_kernel(compiler_, config, p, device_.arch);
        const Verdict v = check(k, p, 1.0f, 0.0f);
        EXPECT_TRUE(v.ok) << k.compiled.name << " on " << p.describe() << ": " << v.message;
      }
}

// The defaults' speed at 4096^3 and 8192^3 (tn, and nn: A from a transposed copy) against cuBLAS's
// TF32 path and SGEMM, timed in turns (L2 flushed before each run), printed for the record with
// the fraction of tf32 mma.sync's rate from registers (gemm-bench --mma-ceiling) they reach. On
// Hopper cuBLAS runs wgmma, which the family cannot: the ratio there is not Ampere's.
TEST_F(MmaSm80Tf32, DefaultsAgainstCublasTimedInTurns) {
  if (!cublas_) cublas_ = Cublas::load();
  if (!cublas_) GTEST_SKIP() << "no cuBLAS: " << Cublas::why_not();
  const Family& family = find_family("mma_sm80");
  const Timer timer(device_);
  TimingSettings settings;
  settings.min_runs = 10;
  settings.min_total_ms = 200;
  for (const auto& [n, layout] :
       {std::pair<int64_t, const char*>{4096, "tn"}, {8192, "tn"}, {8192, "nn"}}) {
    const Problem tf32 = f32_problem(Precision::tf32, n, n, n, 0, layout);
    const Problem x3 = f32_problem(Precision::tf32x3, n, n, n, 0, layout);
    const Problem exact = f32_problem(Precision::exact, n, n, n, 0, layout);
    const ProblemData data(tf32, *checker_, 3, stream_->get());
    GemmOperands ops = data.operands(1.0f, 0.0f);
    const ReadyKernel k1 =
        prepare_kernel(compiler_, family.default_config(tf32, device_.arch), tf32, device_.arch);
    const ReadyKernel k3 =
        prepare_kernel(compiler_, family.default_config(x3, device_.arch), x3, device_.arch);
    GemmOperands ops1 = ops, ops3 = ops;
    workspaces_.provide(stream_->get(), k1.plan, ops1);
    Workspaces second;
    second.provide(stream_->get(), k3.plan, ops3);
    const std::vector<Timing> t = timer.time_together(
        {[&](CUstream s) { k1.run(tf32, ops1, s); }, [&](CUstream s) { k3.run(x3, ops3, s); },
         [&](CUstream s) { cublas_->gemm(tf32, ops, s); },
         [&](CUstream s) { cublas_->gemm(exact, ops, s); }},
        stream_->get(), settings);
    const double tflop = tf32.flops() * 1e-9;
    std::printf(
        "%lld^3 f32 %s: tf32 %s %.3f ms (%.0f TFLOP/s), 3xtf32 %s %.3f ms (%.0f); cuBLAS TF32 "
        "%.3f ms (%.0f), SGEMM %.3f ms (%.0f); tf32/cuBLAS TF32 %.3fx, 3xtf32/SGEMM %.3fx\n",
        (long long)n, layout, k1.compiled.name.c_str(), t[0].median_ms, tflop / t[0].median_ms,
        k3.compiled.name.c_str(), t[1].median_ms, tflop / t[1].median_ms, t[2].median_ms,
        tflop / t[2].median_ms, t[3].median_ms, tflop / t[3].median_ms,
        t[2].median_ms / t[0].median_ms, t[3].median_ms / t[1].median_ms);
  }
}

}  // namespace
}  // namespace gemmtune
