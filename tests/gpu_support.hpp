#pragma once
// GPU test fixtures: a context, the device, the verification kernels, a stream.
#include <memory>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/workspace.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "support.hpp"

namespace gemmtune::test {

// Stores `config` of `family` as the complete, measured best of `p` on `device` (1 ms): a row
// the library serves as tuned on that GPU.
inline void store_best(const std::filesystem::path& db_path, const DeviceKey& device,
                       const Problem& p, const Family& family, const KernelConfig& config) {
  TuningDb db(db_path);
  CandidateRecord r;
  r.kernel_name = family.kernel_name(config);
  r.template_version = template_version(family);
  r.config = config;
  r.status = CandidateStatus::ok;
  r.median_ms = 1.0;
  db.record(device, p, r);
  db.set_best(device, p, r.kernel_name, r.template_version, -1, /*complete=*/true);
}

class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GEMMTUNE_REQUIRE_GPU();
    ensure_context();
    device_ = query_device(current_device());
    checker_ = std::make_unique<Checker>(compiler_, device_.arch);
    stream_ = std::make_unique<StreamHandle>();
  }

  // Runs a kernel through the verifier: both beta paths, NaN-poisoned output, every element of
  // small problems.
  Verdict check(const ReadyKernel& k, const Problem& p, float alpha, float beta,
                uint64_t seed = 5) {
    const Verifier v(*checker_, p, alpha, beta, seed, stream_->get());
    return check(k, v);
  }
  // The same with a verifier made once for several kernels (its reference is computed once).
  Verdict check(const ReadyKernel& k, const Verifier& v) {
    const Family& family = *k.family;
    return v.verify(
        [&](const Problem& q, GemmOperands ops, CUstream s) {
          const LaunchPlan g = family.plan(k.config, q, device_.arch);
          workspaces_.provide(s, g, ops);
          k.run(g, q, ops, s);
        },
        stream_->get(), k.plan.reads_c);
  }

  // Runs the kernel `runs` times on the same inputs (C reset to the same values before each run,
  // alpha 1, beta 0.5): whether every run wrote bitwise the C of the first.
  ::testing::AssertionResult same_bits_every_run(const ReadyKernel& k, const Problem& p,
                                                 const ProblemData& data, int runs = 5) {
    std::vector<uint16_t> first, again(size_t(p.ldc * p.n));
    for (int run = 0; run < runs; ++run) {
      data.reset_c(*checker_, 0.5f, stream_->get());
      GemmOperands ops = data.operands(1.0f, 0.5f);
      workspaces_.provide(stream_->get(), k.plan, ops);
      k.run(p, ops, stream_->get());
      stream_->synchronize();
      GT_CU(cuMemcpyDtoH(again.data(), data.c.ptr(), again.size() * 2));
      if (run == 0)
        first = again;
      else if (first != again)
        return ::testing::AssertionFailure() << "run " << run << " differs from run 0";
    }
    return ::testing::AssertionSuccess();
  }

  // One call of the library on a verifier's operands (scales, epilogue, bias and aux included).
  static Verifier::RunFn library_run(Library& lib) {
    return [&lib](const Problem& q, const GemmOperands& o, CUstream s) {
      MatmulDesc desc{q.types, q.scaling, q.op_a, q.op_b};
      desc.scale_a = reinterpret_cast<const float*>(o.scale_a);
      desc.scale_b = reinterpret_cast<const float*>(o.scale_b);
      desc.epilogue = q.epilogue;
      desc.bias = reinterpret_cast<const void*>(o.bias);
      desc.aux = reinterpret_cast<void*>(o.aux);
      lib.matmul(desc, q.m, q.n, q.k, o.alpha, reinterpret_cast<const void*>(o.a), q.lda,
                 reinterpret_cast<const void*>(o.b), q.ldb, o.beta, reinterpret_cast<void*>(o.c),
                 q.ldc, reinterpret_cast<Stream>(s));
    };
  }

  // Runs the library on the problem (and on the verifier's smaller problems) and checks the
  // results like any candidate's.
  Verdict check_library(Library& lib, const Problem& p, float alpha = 1.0f, float beta = 0.0f,
                        uint64_t seed = 9) {
    const Verifier v(*checker_, p, alpha, beta, seed, stream_->get());
    return v.verify(library_run(lib), stream_->get());
  }

  Compiler compiler_;
  DeviceInfo device_;
  std::unique_ptr<Checker> checker_;
  std::unique_ptr<StreamHandle> stream_;
  Workspaces workspaces_;
};

// Tuning in a scratch database and kernel cache, with short timings: for tests of the tuner.
class TuneTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped()) return;
    setenv("GEMMTUNE_CACHE_DIR", (dir_ / "cache").c_str(), 1);
    options_.db_path = dir_ / "tuning.db";
    options_.timing.min_runs = 5;
    options_.timing.min_total_ms = 5;
    options_.timing.warmup_ms = 5;
    options_.candidate_timeout_s = 60;
    options_.settle_ms = 0;
  }

  TempDir dir_;
  TuneOptions options_;
};

}  // namespace gemmtune::test
