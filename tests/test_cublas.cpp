// The baseline's rules that need no GPU (cublas_why_unsupported: what cuBLAS's documentation
// says cublasGemmEx, cublasGemmGroupedBatchedEx and cuBLASLt's float8 GEMMs take) and its
// conversion of block scales to cuBLASLt's layout. What cuBLASLt's heuristic then refuses on a
// GPU is gpu_cublaslt_fp8.cpp's.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gemmtune/tuner/cublas.hpp"

namespace gemmtune {
namespace {

// cuBLAS 13.1 with cuBLASLt loaded, as the CUDA 13.0 toolkit has it.
CublasFeatures cublas13() {
  CublasFeatures f;
  f.version = 130100;
  f.gemm_ex_64 = true;
  f.grouped_batched = true;
  f.lt_version = 130100;
  return f;
}

DataTypes fp8(DataType a, DataType b, DataType out) {
  return {a, b, out, out};
}

Problem scaled(DataTypes types, Scaling scaling, Op op_a = Op::T, Op op_b = Op::N, int64_t m = 7168,
               int64_t n = 4096, int64_t k = 16384) {
  Problem p = make_problem(types, op_a, op_b, m, n, k);
  p.scaling = scaling;
  return p;
}

// A mixture-of-experts layer: 8 experts' A of M x K, N tokens split between them.
Problem grouped(DataTypes types, Op op_a = Op::T, Op op_b = Op::N, int64_t groups = 8) {
  Problem p = make_problem(types, op_a, op_b, 2048, 4096, 1024);
  p.groups = groups;
  return p;
}

::testing::AssertionResult refused_for(const Problem& p, const CublasFeatures& f,
                                       const std::string& word) {
  const std::string why = cublas_why_unsupported(p, f);
  if (why.empty()) return ::testing::AssertionFailure() << p.describe() << " is supported";
  if (why.find(word) == std::string::npos)
    return ::testing::AssertionFailure()
           << p.describe() << ": '" << why << "' lacks '" << word << "'";
  return ::testing::AssertionSuccess() << why;
}

TEST(Cublas, TakesTnFloat8WithEveryScalingAndTypeCuBlasLtHas) {
  for (Scaling s : {Scaling::tensor, Scaling::row, Scaling::block})
    for (DataType out : {DataType::bf16, DataType::f16, DataType::f32})
      for (const auto& [a, b] :
           {std::pair{DataType::e4m3, DataType::e4m3}, std::pair{DataType::e4m3, DataType::e5m2},
            std::pair{DataType::e5m2, DataType::e4m3}}) {
        const Problem p = scaled(fp8(a, b, out), s);
        EXPECT_EQ(cublas_why_unsupported(p, cublas13()), "") << p.describe();
      }
  // N = 2112 is no multiple of 128: only cuBLASLt's heuristic can say (on the GPU).
  EXPECT_EQ(cublas_why_unsupported(scaled(fp8(DataType::e4m3, DataType::e4m3, DataType::bf16),
                                          Scaling::block, Op::T, Op::N, 256, 2112, 640),
                                   cublas13()),
            "");
}

TEST(Cublas, RefusesFloat8OutsideCuBlasLtsRulesWithTheReason) {
  const CublasFeatures f = cublas13();
  const DataTypes e4m3 = fp8(DataType::e4m3, DataType::e4m3, DataType::bf16);
  EXPECT_TRUE(
      refused_for(scaled(fp8(DataType::e5m2, DataType::e5m2, DataType::bf16), Scaling::tensor), f,
                  "e5m2*e5m2"));
  for (const auto& [op_a, op_b] :
       {std::pair{Op::N, Op::N}, std::pair{Op::N, Op::T}, std::pair{Op::T, Op::T}})
    EXPECT_TRUE(refused_for(scaled(e4m3, Scaling::row, op_a, op_b), f, "\"tn\""));
  EXPECT_TRUE(
      refused_for(scaled(fp8(DataType::e4m3, DataType::e4m3, DataType::e4m3), Scaling::tensor), f,
                  "f32, f16 or bf16"));
  EXPECT_TRUE(
      refused_for(scaled(DataTypes{DataType::e4m3, DataType::bf16, DataType::bf16, DataType::bf16},
                         Scaling::tensor),
                  f, "float8 by float8"));
  EXPECT_TRUE(refused_for(scaled(e4m3, Scaling::none), f, "without scales"));
  DataTypes f16_acc = e4m3;
  f16_acc.acc = DataType::f16;
  EXPECT_TRUE(refused_for(scaled(f16_acc, Scaling::tensor), f, "accumulate in f32"));
  Problem unaligned = scaled(e4m3, Scaling::tensor);
  unaligned.align = 8;
  EXPECT_TRUE(refused_for(unaligned, f, "16-byte"));
  // Block scaling's scale layouts need M and N multiples of 4 (C's ld kept 16-byte aligned).
  auto with_ldc = [](Problem p, int64_t ldc) {
    p.ldc = ldc;
    p.align = 16;
    return p;
  };
  EXPECT_TRUE(refused_for(with_ldc(scaled(e4m3, Scaling::block, Op::T, Op::N, 130, 128, 256), 136),
                          f, "multiples of 4"));
  EXPECT_TRUE(
      refused_for(scaled(e4m3, Scaling::block, Op::T, Op::N, 128, 66, 256), f, "multiples of 4"));
  EXPECT_EQ(cublas_why_unsupported(
                with_ldc(scaled(e4m3, Scaling::row, Op::T, Op::N, 130, 66, 256), 136), f),
            "");
}

TEST(Cublas, Float8NeedsCuBlasLtAndRowAndBlockScalingItsVersion12Dot9) {
  CublasFeatures none = cublas13();
  none.lt_version = 0;
  none.lt_missing = "libcublasLt could not be loaded";
  const DataTypes e4m3 = fp8(DataType::e4m3, DataType::e4m3, DataType::bf16);
  EXPECT_TRUE(refused_for(scaled(e4m3, Scaling::tensor), none, "libcublasLt could not be loaded"));
  // Without cuBLASLt the other types keep their baseline.
  EXPECT_EQ(cublas_why_unsupported(make_problem(DataType::bf16, Op::N, Op::N, 64, 64, 64), none),
            "");

  CublasFeatures old = cublas13();
  old.lt_version = 120800;
  EXPECT_EQ(cublas_why_unsupported(scaled(e4m3, Scaling::tensor), old), "");
  EXPECT_TRUE(refused_for(scaled(e4m3, Scaling::row), old, "12.9"));
  EXPECT_TRUE(refused_for(scaled(e4m3, Scaling::block), old, "12.8.0"));
}

TEST(Cublas, KeepsTheRulesOfCublasGemmEx) {
  const CublasFeatures f = cublas13();
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
    EXPECT_EQ(cublas_why_unsupported(make_problem(t, Op::N, Op::T, 100, 200, 300), f), "");
  EXPECT_TRUE(refused_for(
      make_problem(DataTypes{DataType::f16, DataType::bf16, DataType::f32, DataType::f32}, Op::N,
                   Op::N, 64, 64, 64),
      f, "cublasGemmEx has no f16*bf16->f32 GEMM"));
  Problem wide = make_problem(DataType::bf16, Op::N, Op::N, 64, 64, 2);
  wide.lda = int64_t(1) << 31;
  EXPECT_EQ(cublas_why_unsupported(wide, f), "");
  CublasFeatures no64 = f;
  no64.gemm_ex_64 = false;
  EXPECT_TRUE(refused_for(wide, no64, "cublasGemmEx_64"));
}

TEST(Cublas, TakesGroupedProblemsOfCublasGemmExsTypesInEveryLayout) {
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16})
    for (const auto& [op_a, op_b] : {std::pair{Op::N, Op::N}, std::pair{Op::N, Op::T},
                                     std::pair{Op::T, Op::N}, std::pair{Op::T, Op::T}})
      for (int64_t groups : {1, 8, 128}) {
        const Problem p = grouped(DataTypes::uniform(t), op_a, op_b, groups);
        EXPECT_EQ(cublas_why_unsupported(p, cublas13()), "") << p.describe();
      }
}

TEST(Cublas, GroupedNeedsCublasGemmGroupedBatchedExOfCuBlas12Dot5) {
  CublasFeatures old = cublas13();
  old.version = 120400;
  old.grouped_batched = false;
  const Problem p = grouped(DataTypes::uniform(DataType::bf16));
  EXPECT_TRUE(
      refused_for(p, old, "cuBLAS 12.4.0 has no cublasGemmGroupedBatchedEx (12.5 or later)"));
  // One GEMM keeps cublasGemmEx.
  EXPECT_EQ(
      cublas_why_unsupported(make_problem(DataType::bf16, Op::T, Op::N, 2048, 4096, 1024), old),
      "");
}

TEST(Cublas, RefusesGroupedProblemsOutsideCublasGemmGroupedBatchedExsRules) {
  const CublasFeatures f = cublas13();
  Problem with_scales = grouped(DataTypes::uniform(DataType::bf16));
  with_scales.scaling = Scaling::tensor;
  EXPECT_TRUE(
      refused_for(with_scales, f, "cublasGemmGroupedBatchedEx has no bf16 GEMM with scales"));
  EXPECT_TRUE(
      refused_for(grouped(DataTypes{DataType::f16, DataType::bf16, DataType::f32, DataType::f32}),
                  f, "cublasGemmGroupedBatchedEx has no f16*bf16->f32 GEMM"));
  // Float8 is cuBLASLt's, which has no grouped GEMM: a call per group, float8's rules (block
  // scaling's N rule is a group's, checked once the routing is read).
  Problem e4m3 = grouped(fp8(DataType::e4m3, DataType::e4m3, DataType::bf16));
  e4m3.scaling = Scaling::tensor;
  EXPECT_EQ(cublas_why_unsupported(e4m3, f), "");
  e4m3.scaling = Scaling::block;
  e4m3.n = 8 * 37;  // the groups' columns: 37 a group on average
  EXPECT_EQ(cublas_why_unsupported(e4m3, f), "");
  e4m3.m = 2047;
  EXPECT_TRUE(refused_for(e4m3, f, "cuBLASLt's block scaling needs M and N multiples of 4"));
  EXPECT_TRUE(refused_for(grouped(fp8(DataType::e5m2, DataType::e5m2, DataType::bf16)), f,
                          "cuBLASLt has no e5m2*e5m2 GEMM"));
  // Its arrays are int: a leading dimension past 2^31 - 1 is refused even with cublasGemmEx_64.
  Problem wide = grouped(DataTypes::uniform(DataType::bf16), Op::N, Op::N);
  wide.k = 2;
  wide.lda = int64_t(1) << 31;
  EXPECT_TRUE(refused_for(wide, f, "int sizes"));
  wide.groups = 0;
  EXPECT_EQ(cublas_why_unsupported(wide, f), "");
}

// Ours: ceil(M/128) x ceil(K/128), the M blocks contiguous. cuBLASLt's BLK128x128_32F:
// ceil(K/128) x ceil(M/128), the K blocks contiguous, columns padded to a multiple of 4 with 0.
TEST(Cublas, ConvertsBlockScalesOfAToCuBlasLtsLayout) {
  const int64_t m = 300, k = 640;  // 3 blocks of M (the last partial), 5 of K: columns of 8
  const int64_t mb = 3, kb = 5, ld = 8;
  EXPECT_EQ(cublaslt_block_scales_a_count(m, k), mb * ld);
  std::vector<float> ours(size_t(mb * kb));
  for (int64_t i = 0; i < mb; ++i)
    for (int64_t j = 0; j < kb; ++j) ours[size_t(i + j * mb)] = float(100 * i + j + 1);
  const std::vector<float> theirs = cublaslt_block_scales_a(ours, m, k);
  ASSERT_EQ(int64_t(theirs.size()), mb * ld);
  for (int64_t i = 0; i < mb; ++i)
    for (int64_t j = 0; j < ld; ++j)
      EXPECT_EQ(theirs[size_t(j + i * ld)], j < kb ? float(100 * i + j + 1) : 0.0f)
          << "M block " << i << ", K block " << j;
  // K blocks already a multiple of 4: a transposition alone.
  const std::vector<float> square = cublaslt_block_scales_a({1, 2, 3, 4, 5, 6, 7, 8}, 256, 512);
  EXPECT_EQ(square, (std::vector<float>{1, 3, 5, 7, 2, 4, 6, 8}));
  EXPECT_THROW(cublaslt_block_scales_a({1, 2, 3}, 256, 512), Error);
}

}  // namespace
}  // namespace gemmtune
