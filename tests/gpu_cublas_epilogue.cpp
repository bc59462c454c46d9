// The cuBLAS baseline with an epilogue (tuner/src/cublas.cpp): cuBLASLt's own epilogue where it
// has it, else the GEMM and the elementwise pass (testing.cuh's gemmtune_epilogue_pass), through
// the verifier against the fp64 reference (act(alpha AB + beta C + bias)), both beta paths, for
// every bias and activation, f32, f16, bf16 and float8; gated ones (the GEMM into a scratch
// buffer, then the gated pass) against act(gate) * up. prepare() takes the path the rules say,
// or the pass where cuBLASLt finds no algorithm with the epilogue (printed). cuBLASLt's GELU is
// checked to be the tanh form on the host. Prints each case's path and error.
#include <cmath>
#include <iostream>
#include <vector>

#include "gemmtune/tuner/cublas.hpp"
#include "gpu_support.hpp"

namespace gemmtune {
namespace {

// Every bias and activation, with and without a bias along M, and a bias along N.
const std::vector<const char*> kEpilogues = {
    "bias",           "relu", "bias,relu", "gelu",   "bias,gelu",        "gelu_tanh",
    "bias,gelu_tanh", "silu", "bias,silu", "bias_n", "bias_n,gelu_tanh", "bias_n,silu",
};

class CublasEpilogue : public test::GpuTest {
 protected:
  void SetUp() override {
    test::GpuTest::SetUp();
    if (IsSkipped()) return;
    cublas_ = Cublas::load();
    if (!cublas_) GTEST_SKIP() << "no cuBLAS: " << Cublas::why_not();
    std::cout << cublas_->version() << " on " << device_.name << " (" << device_.arch.name()
              << ")\n";
  }

  // prepare()'s path for the verifier's data: the rules', or the pass where cuBLASLt refused.
  EpiloguePath prepared_path(const Problem& p, const Verifier& v, float alpha, float beta) {
    const EpiloguePath path = cublas_->prepare(p, v.data().operands(alpha, beta), stream_->get());
    const EpiloguePath rules = cublas_epilogue_path(p, cublas_->features());
    if (rules == EpiloguePath::cublaslt && path == EpiloguePath::pass)
      std::cout << "  cuBLASLt refused its epilogue for " << p.describe() << ": the pass serves\n";
    else
      EXPECT_EQ(path, rules) << p.describe();
    return path;
  }

  // The baseline on the problem through the verifier; `whole`: its smaller problems too.
  void check(const Problem& p, float alpha, float beta, bool whole) {
    const Verifier v(*checker_, p, alpha, beta, 17, stream_->get());
    const EpiloguePath path = prepared_path(p, v, alpha, beta);
    const auto run = [&](const Problem& q, const GemmOperands& o, CUstream s) {
      cublas_->gemm(q, o, s);
    };
    const Verdict verdict =
        whole ? v.verify(run, stream_->get()) : v.verify_problem(run, stream_->get());
    std::cout << fmt::format("  {:<9} {} alpha={} beta={}: max error {:.3g}{}\n", to_string(path),
                             p.describe(), alpha, beta, verdict.max_error,
                             verdict.ok ? "" : fmt::format(", {} wrong", verdict.bad));
    EXPECT_TRUE(verdict.ok) << p.describe() << " (" << to_string(path) << "): " << verdict.bad
                            << " of " << verdict.points << " points wrong, " << verdict.message;
  }

  std::unique_ptr<Cublas> cublas_;
};

// cublasGemmEx's types in several layouts, odd sizes among them (ld = rows, so narrow
// alignment); the verifier runs beta == 0 on a NaN-filled C and beta != 0 on the same problem.
TEST_F(CublasEpilogue, EveryEpilogueOfEveryTypeMatchesTheReference) {
  struct Shape {
    DataType type;
    Op op_a, op_b;
    int64_t m, n, k;
  };
  const std::vector<Shape> shapes = {
      {DataType::f32, Op::N, Op::N, 256, 192, 320},
      {DataType::bf16, Op::T, Op::N, 384, 128, 256},
      {DataType::f16, Op::N, Op::T, 128, 256, 192},
      {DataType::bf16, Op::N, Op::N, 331, 299, 523},
  };
  for (const Shape& s : shapes)
    for (const char* epilogue : kEpilogues) {
      Problem p = make_problem(s.type, s.op_a, s.op_b, s.m, s.n, s.k);
      p.epilogue = parse_epilogue(epilogue);
      check(p, 1.25f, 0.0f, /*whole=*/true);
    }
}

// Float8 ("tn", tensor scaling): cuBLASLt with its epilogue, or the float8 GEMM then the pass;
// an f32 output with a bias takes the pass (cuBLASLt's bias is bf16 there).
TEST_F(CublasEpilogue, Float8MatchesTheReferenceOnEitherPath) {
  if (cublas_->features().lt_version == 0)
    GTEST_SKIP() << "no cuBLASLt: " << cublas_->features().lt_missing;
  for (DataType out : {DataType::bf16, DataType::f32})
    for (const char* epilogue : {"bias", "bias,relu", "bias,gelu_tanh", "bias,gelu", "silu"})
      for (float beta : {0.0f, 0.5f}) {
        Problem p = make_problem(DataTypes{DataType::e4m3, DataType::e4m3, out, out}, Op::T, Op::N,
                                 256, 128, 512);
        p.scaling = Scaling::tensor;
        p.epilogue = parse_epilogue(epilogue);
        p.reads_c = beta != 0.0f;
        if (!cublas_->supports(p)) {
          std::cout << "  refused  " << p.describe() << ": " << cublas_->why_unsupported(p) << "\n";
          continue;
        }
        check(p, 1.0f, beta, /*whole=*/false);
      }
}

// Gated problems: the GEMM into the scratch buffer (the bias along M by cuBLASLt where it has
// it), then the gated pass, against the reference's act(gate) * up, both layouts, the bias along
// M and N, decode and prefill, ldc = M / 2 and wider; the scratch grows from the small problems
// to the large.
TEST_F(CublasEpilogue, GatedEpiloguesMatchTheReference) {
  const char* const gated[] = {"swiglu",
                               "bias,swiglu",
                               "bias_n,geglu",
                               "reglu",
                               "swiglu,interleaved",
                               "bias,geglu_tanh,interleaved",
                               "bias_n,swiglu,interleaved"};
  struct Shape {
    DataType type;
    int64_t m, n, k, extra_ldc;
  };
  const std::vector<Shape> shapes = {{DataType::bf16, 2 * 1000, 70, 300, 0},
                                     {DataType::bf16, 22016, 8, 512, 0},
                                     {DataType::f16, 2 * 333, 129, 200, 5},
                                     {DataType::f32, 256, 64, 96, 0}};
  for (const Shape& s : shapes)
    for (const char* epilogue : gated) {
      Problem p = make_problem(s.type, Op::T, Op::N, s.m, s.n, s.k);
      p.epilogue = parse_epilogue(epilogue);
      p.ldc = p.output_rows() + s.extra_ldc;
      p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
      if (cublas_gated_bias_in_gemm(p, cublas_->features()))
        std::cout << "  the bias by cuBLASLt's BIAS epilogue, in the GEMM:\n";
      check(p, 1.25f, 0.0f, /*whole=*/true);
    }
}

// What cuBLASLt's CUBLASLT_EPILOGUE_GELU computes, its documentation silent: closer to the tanh
// form than to erf's (they differ by up to 4e-4 on values of a few units), on f32 with K = 4.
TEST_F(CublasEpilogue, CuBlasLtsGeluIsTheTanhForm) {
  if (cublas_->features().lt_version == 0)
    GTEST_SKIP() << "no cuBLASLt: " << cublas_->features().lt_missing;
  Problem p = make_problem(DataType::f32, Op::N, Op::N, 64, 64, 4);
  p.epilogue = parse_epilogue("bias,gelu_tanh");
  const ProblemData data(p, *checker_, 9, stream_->get());
  const GemmOperands ops = data.operands(1.0f, 0.0f);
  if (cublas_->prepare(p, ops, stream_->get()) != EpiloguePath::cublaslt)
    GTEST_SKIP() << "cuBLASLt has no algorithm for " << p.describe();
  cublas_->gemm(p, ops, stream_->get());
  stream_->synchronize();
  auto download = [](const DeviceBuffer& b) {
    std::vector<float> v(b.bytes() / sizeof(float));
    GT_CU(cuMemcpyDtoH(v.data(), b.ptr(), b.bytes()));
    return v;
  };
  const std::vector<float> a = download(data.a), b = download(data.b), bias = download(data.bias),
                           d = download(data.c);
  double tanh_squares = 0, erf_squares = 0;
  for (int64_t j = 0; j < p.n; ++j)
    for (int64_t i = 0; i < p.m; ++i) {
      double x = bias[size_t(i)];
      for (int64_t k = 0; k < p.k; ++k)
        x += double(a[size_t(i + k * p.lda)]) * b[size_t(k + j * p.ldb)];
      const double by_tanh =
          0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
      const double by_erf = 0.5 * x * (1 + std::erf(x * 0.7071067811865476));
      const double out = d[size_t(i + j * p.ldc)];
      tanh_squares += (out - by_tanh) * (out - by_tanh);
      erf_squares += (out - by_erf) * (out - by_erf);
    }
  const double points = double(p.m * p.n);
  const double tanh_rms = std::sqrt(tanh_squares / points),
               erf_rms = std::sqrt(erf_squares / points);
  std::cout << fmt::format("  cuBLASLt GELU: rms from the tanh form {:.3g}, from erf's {:.3g}\n",
                           tanh_rms, erf_rms);
  EXPECT_LT(tanh_rms, 0.25 * erf_rms);
}

}  // namespace
}  // namespace gemmtune
