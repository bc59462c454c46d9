// The epilogue baseline's rules that need no GPU (cublaslt_epilogue, cublas_epilogue_path): which
// epilogues cuBLASLt applies itself and which take the GEMM and then the elementwise pass, and
// the gated ones' GEMM (gated_gemm_problem, cublas_gated_bias_in_gemm); and that the passes
// (testing.cuh's gemmtune_epilogue_pass and gemmtune_gated_pass) compile, without spills, for
// every architecture. What the GPU then computes is gpu_cublas_epilogue.cpp's.
#include <gtest/gtest.h>

#include "gemmtune/generator/family.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/tuner/cublas.hpp"

namespace gemmtune {
namespace {

// cuBLAS 13.1 with cuBLASLt loaded, as the CUDA 13.0 toolkit has it.
CublasFeatures cublas13() {
  CublasFeatures f;
  f.version = 130100;
  f.lt_version = 130100;
  return f;
}

Problem with_epilogue(Problem p, const char* epilogue) {
  p.epilogue = parse_epilogue(epilogue);
  return p;
}

EpiloguePath path_of(const char* epilogue, DataType type = DataType::bf16,
                     const CublasFeatures& f = cublas13()) {
  return cublas_epilogue_path(
      with_epilogue(make_problem(type, Op::N, Op::N, 4096, 2048, 1024), epilogue), f);
}

// A float8 "tn" problem with tensor scaling and the output type.
Problem fp8_problem(DataType out, const char* epilogue) {
  Problem p = make_problem(DataTypes{DataType::e4m3, DataType::e4m3, out, out}, Op::T, Op::N, 4096,
                           2048, 1024);
  p.scaling = Scaling::tensor;
  return with_epilogue(p, epilogue);
}

TEST(CublasEpilogue, CuBlasLtsValuesOfTheEpiloguesItHas) {
  // cublasLt.h: DEFAULT 1, RELU 2, BIAS 4, RELU_BIAS 6, GELU 32, GELU_BIAS 36.
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("none")), 1);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("relu")), 2);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("bias")), 4);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("bias,relu")), 6);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("gelu_tanh")), 32);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("bias,gelu_tanh")), 36);
}

TEST(CublasEpilogue, CuBlasLtHasNoErfGeluNoSiluAndNoBiasAlongN) {
  for (const char* e :
       {"gelu", "bias,gelu", "silu", "bias,silu", "bias_n", "bias_n,relu", "bias_n,gelu_tanh"})
    EXPECT_EQ(cublaslt_epilogue(parse_epilogue(e)), 0) << e;
}

// The pre-activation kept: cuBLASLt's GELU_AUX (160) and GELU_AUX_BIAS (164) store GELU's (tanh
// form) input; its ReLU_AUX is a bit mask, not the value, so the others take the pass, which
// writes the pre-activation beside D (testing.cuh's gemmtune_epilogue_pass).
TEST(CublasEpilogue, APreActivationOutputIsCuBlasLtsGeluAuxOrThePass) {
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("gelu_tanh,aux")), 160);
  EXPECT_EQ(cublaslt_epilogue(parse_epilogue("bias,gelu_tanh,aux")), 164);
  EXPECT_EQ(path_of("bias,gelu_tanh,aux", DataType::bf16), EpiloguePath::cublaslt);
  for (const char* e : {"relu,aux", "bias,relu,aux", "bias,gelu,aux", "silu,aux"}) {
    EXPECT_EQ(cublaslt_epilogue(parse_epilogue(e)), 0) << e;
    EXPECT_EQ(path_of(e, DataType::bf16), EpiloguePath::pass) << e;
  }
}

TEST(CublasEpilogue, CuBlasLtServesWhatItHasTheElementwisePassTheRest) {
  for (DataType type : {DataType::f32, DataType::f16, DataType::bf16}) {
    EXPECT_EQ(path_of("none", type), EpiloguePath::none);
    for (const char* e : {"bias", "relu", "bias,relu", "gelu_tanh", "bias,gelu_tanh"})
      EXPECT_EQ(path_of(e, type), EpiloguePath::cublaslt) << e << " " << to_string(type);
    for (const char* e : {"gelu", "bias,gelu", "silu", "bias,silu", "bias_n", "bias_n,relu"})
      EXPECT_EQ(path_of(e, type), EpiloguePath::pass) << e << " " << to_string(type);
  }
}

TEST(CublasEpilogue, WithoutCuBlasLtEveryEpilogueTakesThePass) {
  CublasFeatures f = cublas13();
  f.lt_version = 0;
  f.lt_missing = "no libcublasLt";
  EXPECT_EQ(path_of("none", DataType::bf16, f), EpiloguePath::none);
  for (const char* e : {"bias", "bias,relu", "bias,gelu_tanh", "bias,gelu", "bias_n,silu"})
    EXPECT_EQ(path_of(e, DataType::bf16, f), EpiloguePath::pass) << e;
}

// cuBLASLt's float8 GEMMs with an f32 output take a bf16 bias; ours is D's type.
TEST(CublasEpilogue, Float8WithAnF32OutputTakesThePassForABias) {
  EXPECT_EQ(cublas_epilogue_path(fp8_problem(DataType::bf16, "bias,gelu_tanh"), cublas13()),
            EpiloguePath::cublaslt);
  EXPECT_EQ(cublas_epilogue_path(fp8_problem(DataType::f16, "bias"), cublas13()),
            EpiloguePath::cublaslt);
  EXPECT_EQ(cublas_epilogue_path(fp8_problem(DataType::f32, "bias"), cublas13()),
            EpiloguePath::pass);
  EXPECT_EQ(cublas_epilogue_path(fp8_problem(DataType::f32, "relu"), cublas13()),
            EpiloguePath::cublaslt);
  EXPECT_EQ(cublas_epilogue_path(fp8_problem(DataType::bf16, "silu"), cublas13()),
            EpiloguePath::pass);
}

TEST(CublasEpilogue, PathsHaveNames) {
  EXPECT_EQ(to_string(EpiloguePath::none), "none");
  EXPECT_EQ(to_string(EpiloguePath::cublaslt), "cublaslt");
  EXPECT_EQ(to_string(EpiloguePath::pass), "gemm+pass");
  EXPECT_EQ(to_string(EpiloguePath::gated_pass), "gemm+gated pass");
}

// A gated problem: "tn", D of M / 2 rows (ldc = M / 2), as linear's gate_up projection.
Problem gated_problem(const char* epilogue, DataType type = DataType::bf16) {
  Problem p = with_epilogue(make_problem(type, Op::T, Op::N, 2 * 1000, 70, 300), epilogue);
  p.ldc = p.output_rows();
  p.align = alignment_class(p.types, nullptr, nullptr, nullptr, p.lda, p.ldb, p.ldc);
  return p;
}

const char* const kGated[] = {"swiglu",
                              "bias,swiglu",
                              "bias_n,geglu",
                              "reglu",
                              "geglu_tanh,interleaved",
                              "bias,swiglu,interleaved",
                              "bias_n,reglu,interleaved"};

// No library fuses gate and up: the GEMM, then the gated pass, with or without cuBLASLt.
TEST(CublasEpilogue, GatedEpiloguesTakeTheGemmThenTheGatedPass) {
  CublasFeatures without_lt = cublas13();
  without_lt.lt_version = 0;
  for (DataType type : {DataType::f32, DataType::f16, DataType::bf16})
    for (const char* e : kGated) {
      const Problem p = gated_problem(e, type);
      EXPECT_EQ(cublas_epilogue_path(p, cublas13()), EpiloguePath::gated_pass) << e;
      EXPECT_EQ(cublas_epilogue_path(p, without_lt), EpiloguePath::gated_pass) << e;
      EXPECT_EQ(cublas_why_unsupported(p, cublas13()), "") << e;
    }
}

// The GEMM before the pass: every row of op(A) into an M x N buffer, no C, no activation, the
// bias along M only where asked (cuBLASLt's BIAS epilogue).
TEST(CublasEpilogue, TheGatedGemmIsTheWholeProjectionIntoAnMByNBuffer) {
  const Problem p = gated_problem("bias,swiglu,interleaved");
  const Problem plain = gated_gemm_problem(p, false);
  EXPECT_EQ(plain.m, 2000);
  EXPECT_EQ(plain.n, 70);
  EXPECT_EQ(plain.k, 300);
  EXPECT_EQ(plain.ldc, 2000);
  EXPECT_EQ(plain.output_rows(), 2000);
  EXPECT_TRUE(plain.epilogue.none());
  EXPECT_FALSE(plain.reads_c);
  EXPECT_EQ(plain.lda, p.lda);
  EXPECT_NO_THROW(validate(plain));
  const Problem biased = gated_gemm_problem(p, true);
  EXPECT_EQ(biased.epilogue.name(), "bias");
  EXPECT_EQ(cublas_epilogue_path(biased, cublas13()), EpiloguePath::cublaslt);
  EXPECT_LE(plain.align, p.align);  // the problem's A and B, and the scratch's ld
}

// cuBLASLt adds a bias along M in the GEMM; a bias along N, or no cuBLASLt, leaves it to the pass.
TEST(CublasEpilogue, TheGatedBiasGoesIntoTheGemmWhereCuBlasLtHasIt) {
  EXPECT_TRUE(cublas_gated_bias_in_gemm(gated_problem("bias,swiglu"), cublas13()));
  EXPECT_TRUE(cublas_gated_bias_in_gemm(gated_problem("bias,geglu,interleaved"), cublas13()));
  EXPECT_FALSE(cublas_gated_bias_in_gemm(gated_problem("swiglu"), cublas13()));
  EXPECT_FALSE(cublas_gated_bias_in_gemm(gated_problem("bias_n,swiglu"), cublas13()));
  EXPECT_FALSE(cublas_gated_bias_in_gemm(make_problem(DataType::bf16, Op::T, Op::N, 64, 64, 64),
                                         cublas13()));
  CublasFeatures f = cublas13();
  f.lt_version = 0;
  EXPECT_FALSE(cublas_gated_bias_in_gemm(gated_problem("bias,swiglu"), f));
}

TEST(CublasEpilogue, TheElementwisePassCompilesWithoutSpills) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const CompiledKernel k = Compiler(false).compile(
        make_source("gemmtune_testing", "#include \"testing.cuh\"\n"), ArchInfo::from_name(arch));
    for (const char* kernel : {"gemmtune_epilogue_pass", "gemmtune_gated_pass"}) {
      const PtxasReport r = parse_ptxas_report(k.log, kernel);
      EXPECT_TRUE(r.found) << arch << " " << kernel << "\n" << k.log;
      EXPECT_EQ(r.spills(), 0) << arch << " " << kernel;
    }
  }
}

}  // namespace
}  // namespace gemmtune
