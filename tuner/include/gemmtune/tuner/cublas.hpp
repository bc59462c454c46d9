#pragma once
// cuBLAS as the baseline, loaded at run time when present (never a build dependency):
// cublasGemmEx for f32, f16 and bf16, cuBLASLt (libcublasLt) for float8 with its scales, and
// cublasGemmGroupedBatchedEx for grouped problems (one cuBLAS GEMM per non-empty group).
#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {

// What the loaded libraries offer, for the rules that need no GPU.
struct CublasFeatures {
  int version = 0;         // cublasGetVersion: 130100 for cuBLAS 13.1.0
  bool gemm_ex_64 = true;  // cublasGemmEx_64 (cuBLAS 12 and later)
  // cublasGemmGroupedBatchedEx (cuBLAS 12.5 and later), for grouped problems
  bool grouped_batched = true;
  size_t lt_version = 0;   // cublasLtGetVersion, 0 when libcublasLt is not loaded
  std::string lt_missing;  // why libcublasLt is not loaded, when lt_version is 0
};

// Why the baseline cannot run the problem with such libraries, by the rules the cuBLAS
// documentation states (types, layout, scaling, alignment), or "" when it may run it: for
// float8, cuBLASLt's heuristic has the last word, on the GPU (Cublas::prepare).
//   f32, f16, bf16: cublasGemmEx, one type of A, B and C, unscaled; sizes past 2^31 - 1 need
//     cublasGemmEx_64.
//   grouped (Problem::groups): cublasGemmGroupedBatchedEx (cuBLAS 12.5), cublasGemmEx's types,
//     unscaled, every size and leading dimension at most 2^31 - 1 (it takes int arrays).
//   float8: cublasLtMatmul, A and B e4m3 or e5m2 but not both e5m2, C = D in f32, f16 or bf16,
//     f32 accumulation, "tn" (A transposed, B not), 16-byte alignment; row and block scaling
//     need cuBLASLt 12.9, block scaling M and N multiples of 4.
//   grouped float8: cuBLAS has no grouped float8 GEMM, so a cublasLtMatmul per non-empty group,
//     as a framework without one loops; float8's rules, with block scaling each group's columns a
//     multiple of 4 (checked by prepare(), which reads the routing).
std::string cublas_why_unsupported(const Problem& problem, const CublasFeatures& features);

// Block scaling's scales of A, ours (scale_shape_a: ceil(M/128) x ceil(K/128), column-major,
// the M blocks contiguous) in cuBLASLt's CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F layout:
// ceil(K/128) x ceil(M/128), the K blocks contiguous, each column ceil(K/128) rounded up to a
// multiple of 4 long, zeros in the padding (cuBLAS documentation, "Scaling factors layouts").
// The scales of B (N x ceil(K/128), N contiguous) are already those of VEC128_32F.
std::vector<float> cublaslt_block_scales_a(const std::vector<float>& ours, int64_t m, int64_t k);
// Its element count: ceil(M/128) * ceil(ceil(K/128) / 4) * 4.
int64_t cublaslt_block_scales_a_count(int64_t m, int64_t k);

// How the baseline applies a problem's epilogue (Problem::epilogue), as a framework would with
// cuBLAS: in cuBLASLt's own store where cuBLASLt has it, else after the GEMM.
enum class EpiloguePath {
  none,      // the problem has no epilogue
  cublaslt,  // cublasLtMatmul with CUBLASLT_MATMUL_DESC_EPILOGUE and the bias pointer
  pass,      // the GEMM without it, then one elementwise pass over D on the same stream
  // A gated problem (Epilogue::gated): the full M x N GEMM into a scratch buffer (with the bias
  // along M where cuBLASLt adds it), then one pass writing D = act(gate) * up from it.
  gated_pass,
};
// "none", "cublaslt", "gemm+pass", "gemm+gated pass".
std::string_view to_string(EpiloguePath path) noexcept;

// cuBLASLt's cublasLtEpilogue_t for an epilogue: DEFAULT (1) for none, BIAS (4), RELU (2),
// RELU_BIAS (6), GELU (32), GELU_BIAS (36); 0 where cuBLASLt has none. Its bias is a vector of
// D's rows (Bias::m) and its GELU is the tanh form (torch's _addmm_activation takes it for
// gelu(approximate="tanh")): erf GELU, SiLU and a bias along N have none.
int32_t cublaslt_epilogue(const Epilogue& epilogue);

// The path the rules choose for a problem the baseline supports: none without an epilogue,
// gated_pass for a gated one, cublaslt where cuBLASLt is loaded and has the epilogue (and, for
// float8 with an f32 output, no bias: cuBLASLt's is bf16 there, ours D's type), else pass. On the
// GPU cuBLASLt may still find no algorithm with its epilogue: Cublas::prepare() then takes the
// pass, and returns it.
EpiloguePath cublas_epilogue_path(const Problem& problem, const CublasFeatures& features);

// The GEMM before a gated problem's pass, as F.linear runs it: all M rows of op(A) into an M x N
// scratch buffer (ldc = M, no C, no activation), with the bias along M when `bias` (cuBLASLt's
// BIAS epilogue), else none.
Problem gated_gemm_problem(const Problem& problem, bool bias);
// Whether the rules put a gated problem's bias into that GEMM: a bias along M and cuBLASLt's
// BIAS epilogue for the GEMM (cublas_epilogue_path); else the pass adds it. On the GPU cuBLASLt
// may still refuse it: the pass then adds it.
bool cublas_gated_bias_in_gemm(const Problem& problem, const CublasFeatures& features);

class Cublas {
 public:
  // nullptr when libcublas cannot be loaded or initialised; why_not() says why. libcublasLt is
  // loaded beside it when present; without it only float8 problems lack a baseline.
  static std::unique_ptr<Cublas> load();
  static std::string why_not();
  ~Cublas();

  const CublasFeatures& features() const;
  // Whether gemm() may run the problem: cublas_why_unsupported() with the loaded libraries.
  // For float8, cuBLASLt may still find no algorithm on the GPU: prepare() and gemm() then
  // throw Error(unsupported) with cuBLASLt's answer; for a grouped problem they do so when a
  // group's matrix is misaligned for cuBLAS (prepare()).
  bool supports(const Problem& problem) const;
  // Empty when supports(problem), else why not, for people.
  std::string why_unsupported(const Problem& problem) const;

  // Everything gemm() needs besides the GEMM itself, done before any timing, so that a timing
  // of gemm() measures cublasLtMatmul or cublasGemmGroupedBatchedEx alone. For float8: the
  // descriptors, cuBLASLt's algorithm (its heuristic), the workspace (32 MiB, once per
  // instance) and, for block scaling, the scales of A converted to cuBLASLt's layout in a
  // buffer this instance keeps (the scales are read here, after a synchronization of the
  // stream). All of it is kept for the problem, its scale pointers and the alignment of its
  // operands (the last 8 such sets); calling prepare() again converts the scales again: do so
  // when the scales changed in place. Nothing for cublasGemmEx's problems.
  // For a grouped problem: cuBLAS's grouped API takes the sizes of the groups on the host, so
  // the baseline reads the group ends here (after a synchronization of the stream) and builds
  // one cuBLAS group per non-empty group (none at all: gemm() does nothing), its sizes and the
  // device array of its A, B and C pointers, kept for the problem, its operand pointers and its
  // ends pointer (the last 8 such sets). gemm() then launches cublasGemmGroupedBatchedEx alone,
  // with the sizes read here: call prepare() again when the routing (the ends) changed in place.
  // With f16 and bf16 every group's A, B and C must be aligned as cuBLAS documents (16 bytes
  // when K * element size is a multiple of 16, else 4 when it is a multiple of 4). A grouped
  // float8 problem: the same reading of the ends, then a cuBLASLt plan per non-empty group (its
  // scales of A, and its columns of B's scales copied to a buffer this instance keeps); gemm()
  // launches one cublasLtMatmul per group.
  // Throws Error(unsupported) when !supports(problem), cuBLASLt has no algorithm for it (with
  // cuBLASLt's reason) or a group's matrix is misaligned for cuBLAS, Error(invalid_argument) for
  // a scaled problem without its scales, a bias without its vector, or a grouped one without its
  // ends or with ends that decrease or pass N, Error(cuda) on failure.
  // With an epilogue: cuBLASLt's descriptor with it, the bias pointer and its algorithm, kept
  // like float8's (the operands' bias pointer part of the key); where cuBLASLt has no algorithm
  // with it, or no such epilogue (cublas_epilogue_path), the GEMM's own preparation and the
  // elementwise pass, compiled by NVRTC from testing.cuh on first use.
  // A gated problem: the scratch buffer of its GEMM (M x N of D's type, kept by this instance and
  // grown as needed, after a synchronization of the context), that GEMM's preparation and the
  // gated pass. One scratch buffer: gated calls on several streams at once would share it.
  // Returns the path that serves the problem with these operands.
  EpiloguePath prepare(const Problem& problem, const GemmOperands& operands, CUstream stream) const;
  // D = act(alpha op(A) op(B) + beta C + bias), D written over C, with f32 compute:
  // cublasGemmEx(_64) in the problem's dtype, cublasLtMatmul for float8 with the scales (cuBLASLt
  // multiplies as our kernels do: alpha * scale_a * scale_b * sum + beta * C), or
  // cublasGemmGroupedBatchedEx for a grouped problem, with the group sizes prepare() read. An
  // epilogue takes prepare()'s path: cublasLtMatmul with it, or the GEMM then the pass (both
  // enqueued here, so a timing of gemm() covers both); a gated one the GEMM into the scratch
  // buffer, then the gated pass into D, both enqueued here too. A float8, grouped or epilogue
  // problem that prepare() did not see is prepared first. Throws as prepare() does.
  void gemm(const Problem& problem, const GemmOperands& operands, CUstream stream) const;
  // "cuBLAS 13.1.0", with ", cuBLASLt 13.1.0" when libcublasLt is loaded.
  std::string version() const;

 private:
  struct Impl;
  explicit Cublas(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemmtune
