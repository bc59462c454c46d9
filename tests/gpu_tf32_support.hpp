#pragma once
// What the tests of each family's f32 kernels on tensor cores share: f32 problems of a precision,
// and a fixture that checks them the same way for every family: every point in every layout on odd
// shapes (the largest errors printed beside cuBLAS's: its TF32 path, and SGEMM), a one-product
// kernel caught by 3xTF32's tolerance, the defaults of every class, and their speed in turns.
#include <algorithm>
#include <array>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/tuner/cublas.hpp"
#include "gemmtune/tuner/timer.hpp"
#include "gpu_support.hpp"

namespace gemmtune::test {

inline Problem f32_problem(Precision precision, int64_t m, int64_t n, int64_t k,
                           int64_t extra_ld = 0, const char* layout = "tn") {
  Problem p = make_problem(DataType::f32, parse_op(layout[0]), parse_op(layout[1]), m, n, k);
  p.precision = precision;
  return with_longer_lds(p, extra_ld);
}

inline int64_t products_of(Precision precision) {
  return precision == Precision::tf32x3 ? 3 : 1;
}

class Tf32Test : public GpuTest {
 protected:
  // Point `i` of a family's test points (what[i] says which) as a configuration for the problem
  // with `products` tf32 products, or none where the point does not apply there.
  using PointConfig =
      std::function<std::optional<KernelConfig>(size_t i, const Problem& p, int64_t products)>;

  // Skips where `family` cannot compute tf32 on this GPU (`needs` says what it takes).
  void skip_without(const std::string& family, const char* needs) {
    const Problem probe = f32_problem(Precision::tf32, 64, 64, 64);
    if (!find_family(family).unsupported_reason(probe, device_.arch).empty())
      GTEST_SKIP() << "the tf32 kernels of " << family << " need " << needs << "; this GPU is "
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

  // Each point right on shapes that are no multiple of any tile, K = 1, leading
  // dimensions 3 longer, every layout, beta 0 and not; returns the kernel runs checked of each
  // precision, and prints the largest errors beside cuBLAS's.
  std::array<int, 2> check_every_layout_and_odd_shape(const std::vector<std::string>& what,
                                                      const PointConfig& config_at) {
    const int64_t shapes[][3] = {{300, 200, 1000}, {257, 129, 40}, {129, 257, 1}, {1000, 64, 700}};
    std::array<int, 2> checked{0, 0};
    for (const Precision precision : {Precision::tf32, Precision::tf32x3}) {
      int& count = checked[precision == Precision::tf32 ? 0 : 1];
      double worst = 0, worst_cublas = 0;
      for (const char* layout : {"tn", "nn", "nt", "tt"})
        for (const auto& s : shapes)
          for (int64_t extra_ld : {0, 3}) {
            const Problem p = f32_problem(precision, s[0], s[1], s[2], extra_ld, layout);
            for (auto [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.5f, -1.5f}}) {
              const Verifier verifier(*checker_, p, alpha, beta, 5, stream_->get());
              for (size_t i = 0; i < what.size(); ++i) {
                const std::optional<KernelConfig> config = config_at(i, p, products_of(precision));
                if (!config) continue;
                const ReadyKernel k = prepare_kernel(compiler_, *config, p, device_.arch);
                EXPECT_GT(k.loaded->occupancy(k.plan), 0) << k.compiled.name;
                const Verdict v = check(k, verifier);
                EXPECT_TRUE(v.ok) << k.compiled.name << " (" << what[i] << ") on " << p.describe()
                                  << " alpha=" << alpha << " beta=" << beta << ": " << v.message;
                worst = std::max(worst, v.max_error);
                ++count;
              }
              worst_cublas = std::max(worst_cublas, cublas_error(verifier));
            }
          }
      std::printf(
          "%s: %d kernel runs checked, largest normalized error %.3g (tolerance %.3g); cuBLAS %s "
          "on the same data: %.3g\n",
          std::string(to_string(precision)).c_str(), count, worst,
          tolerance(f32_problem(precision, 64, 64, 64)),
          precision == Precision::tf32 ? "TF32" : "SGEMM", worst_cublas);
    }
    return checked;
  }

  // A kernel that computes one tf32 product where 3xTF32 takes three fails 3xTF32's tolerance (the
  // exact path's): the small products carry the bits tf32 drops. In layout tn (in place) and nn
  // (A from its transposed copy). `config_of` makes the kernel of the given products.
  void expect_one_product_fails(
      const std::function<KernelConfig(const Problem&, int64_t products)>& config_of) {
    for (const char* layout : {"tn", "nn"}) {
      const Problem p = f32_problem(Precision::tf32x3, 384, 320, 1024, 0, layout);
      const Verifier verifier(*checker_, p, 1.0f, 0.0f, 5, stream_->get());
      const ReadyKernel one = prepare_kernel(compiler_, config_of(p, 1), p, device_.arch);
      const Verdict v = check(one, verifier);
      EXPECT_FALSE(v.ok) << layout << ": a tf32 kernel passed 3xTF32's tolerance, largest error "
                         << v.max_error;
      const ReadyKernel three = prepare_kernel(compiler_, config_of(p, 3), p, device_.arch);
      EXPECT_TRUE(check(three, verifier).ok) << layout;
    }
  }

  // The family's defaults of every class, each precision, tn and nn, right within the precision's
  // tolerance.
  void expect_defaults_right(const Family& family) {
    const int64_t shapes[][3] = {{4096, 4096, 4096}, {6144, 24, 4096}, {24, 6144, 4096},
                                 {500, 300, 700},    {1, 4096, 4096},  {2048, 2048, 8192}};
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

  // The family's defaults at 4096^3 and 8192^3 (tn, and nn: A from a transposed copy) against
  // cuBLAS's TF32 path and SGEMM, timed in turns (L2 flushed before each run), printed for the
  // record: the bench and the tuner measure the same.
  void time_defaults_against_cublas(const Family& family, const TimingSettings& settings) {
    if (!cublas_) cublas_ = Cublas::load();
    if (!cublas_) GTEST_SKIP() << "no cuBLAS: " << Cublas::why_not();
    const Timer timer(device_);
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

  std::unique_ptr<Cublas> cublas_;
};

}  // namespace gemmtune::test
