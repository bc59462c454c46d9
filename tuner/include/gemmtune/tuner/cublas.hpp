#pragma once
// cuBLAS as the baseline, loaded at run time when present (never a build dependency).
#include <cuda.h>

#include <memory>
#include <string>

#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {

class Cublas {
 public:
  // nullptr when libcublas cannot be loaded or initialised; why_not() says why.
  static std::unique_ptr<Cublas> load();
  static std::string why_not();
  ~Cublas();

  // Whether gemm() can run the problem: its types are among cublasGemmEx's (one type of A, B
  // and C: f32, f16 or bf16), unscaled, and it has the 64-bit API (cublasGemmEx_64, cuBLAS 12
  // and later) or every size and leading dimension fits an int.
  bool supports(const Problem& problem) const;
  // Empty when supports(problem), else why not, for people.
  std::string why_unsupported(const Problem& problem) const;
  // cublasGemmEx(_64) with f32 compute, in the problem's dtype; throws Error(unsupported) when
  // !supports(problem), Error(cuda) on failure.
  void gemm(const Problem& problem, const GemmOperands& operands, CUstream stream) const;
  std::string version() const;

 private:
  struct Impl;
  explicit Cublas(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace gemmtune
