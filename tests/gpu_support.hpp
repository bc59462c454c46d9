#pragma once
// GPU test fixtures: a context, the device, the verification kernels, a stream.
#include <memory>

#include "gemmtune/gemmtune.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/workspace.hpp"
#include "gemmtune/tuner/checker.hpp"
#include "support.hpp"

namespace gemmtune::test {

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
  Verdict check(const ReadyKernel& k, const Problem& p, float alpha, float beta, uint64_t seed = 5) {
    const Verifier v(*checker_, p, alpha, beta, seed, stream_->get());
    return check(k, v);
  }
  // The same with a verifier made once for several kernels (its reference is computed once).
  Verdict check(const ReadyKernel& k, const Verifier& v) {
    const Family& family = *k.family;
    return v.verify(
        [&](const Problem& q, GemmOperands ops, CUstream s) {
          const LaunchGeometry g = family.geometry(k.config, q, device_.arch);
          workspaces_.provide(s, g, ops);
          k.run(g, q, ops, s);
        },
        stream_->get());
  }

  // The same checks for a call through the library.
  Verdict check_library(Library& lib, const Problem& p, float alpha = 1.0f, float beta = 0.0f, uint64_t seed = 3) {
    const Verifier v(*checker_, p, alpha, beta, seed, stream_->get());
    return v.verify(
        [&](const Problem& q, const GemmOperands& o, CUstream s) {
          lib.gemm(q.dtype, q.op_a, q.op_b, q.m, q.n, q.k, o.alpha, reinterpret_cast<const void*>(o.a), q.lda,
                   reinterpret_cast<const void*>(o.b), q.ldb, o.beta, reinterpret_cast<void*>(o.c), q.ldc,
                   reinterpret_cast<Stream>(s));
        },
        stream_->get());
  }

  Compiler compiler_;
  DeviceInfo device_;
  std::unique_ptr<Checker> checker_;
  std::unique_ptr<StreamHandle> stream_;
  Workspaces workspaces_;
};

}  // namespace gemmtune::test
