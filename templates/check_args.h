// The ABI of the verification kernels (testing.cuh): shared by host C++ and NVRTC.
#pragma once

// One GEMM as the reference sees it. Points (row, col) of C are listed, or implicit
// (rows == 0: point i is (i % m, i / m), every element).
struct CheckArgs {
  unsigned long long a, b, c_init;  // operands as stored; c_init: C before the GEMM
  unsigned long long out;           // C after the GEMM under test
  unsigned long long rows, cols;    // int arrays of point coordinates, or 0
  unsigned long long ref, scale;    // double arrays, one per point
  unsigned long long max_error;     // one float (as bits, atomicMax), normalized error
  unsigned long long bad;           // one unsigned: points out of tolerance or not finite
  long long lda, ldb, ldc;
  int m, n, k;
  int op_a, op_b;              // 0 = N, 1 = T
  int type_a, type_b, type_c;  // element types (data_types.h); C's is the output's too
  int points;
  float alpha, beta;
  float tolerance;
};
