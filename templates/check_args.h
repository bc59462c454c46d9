// The ABI of the verification kernels (testing.cuh): shared by host C++ and NVRTC.
#pragma once
#include "host_device.h"
#include "scale_layout.h"

// One GEMM as the reference sees it. Points (row, col) of D are listed, or implicit
// (rows == 0: point i is (i % out_rows, i / out_rows), every element).
struct CheckArgs {
  unsigned long long a, b, c_init;  // operands as stored; c_init: C before the GEMM
  unsigned long long out;           // D after the GEMM under test (C's ld)
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
  // Scaling (gemmtune::Scaling: 0 none, 1 tensor, 2 row, 3 block) and the fp32 scales of A and B
  // in scale_shape_a/b's layouts (a grouped problem's A: scale_layout.h); a_blocks: ceil(m / 128),
  // the rows of A's block scales.
  unsigned long long scale_a, scale_b;
  int scaling;
  int a_blocks;
  // A grouped problem's G int32 column ends in device memory (gemmtune/types.hpp, Problem), or
  // counts when masked, and G; else 0 and 0. group_capacity: a masked problem's columns per
  // group, else 0. A column in no group (past end[G-1], past a masked group's count) must keep
  // the value it had before the kernel ran.
  unsigned long long group_ends;
  int groups;
  int group_capacity;
  // The epilogue (gemmtune/types.hpp, Epilogue; epilogue_op.cuh): Bias's and Activation's values,
  // and the bias vector, of the output's type.
  unsigned long long bias;
  int bias_kind;
  int activation;
  // Gate's value (0 none, 1 halves, 2 interleaved) and D's rows: m, or m / 2 when gated.
  int gate;
  int out_rows;
};

// The group that owns column c of a grouped problem, or -1 when none does: contiguous, the first
// whose end lies past it; masked, c's capacity-wide slot if c lies within its count.
GEMMTUNE_HOST_DEVICE int gemmtune_group_of(const int* ends, int groups, int capacity, long long c) {
  if (capacity > 0) {
    const int g = int(c / capacity);
    return c - (long long)g * capacity < ends[g] ? g : -1;
  }
  if (groups == 0 || c >= ends[groups - 1]) return -1;
  int lo = 0, hi = groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (ends[mid] > c)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

// The scale of the product op(A)[r,k] op(B)[k,c] (a plain function: the reference's, and tests').
GEMMTUNE_HOST_DEVICE double gemmtune_product_scale(const float* sa, const float* sb, int scaling,
                                                   long long r, long long c, long long k,
                                                   long long n, long long a_blocks) {
  switch (scaling) {
    case 1:
      return double(sa[0]) * double(sb[0]);
    case 2:
      return double(sa[r]) * double(sb[c]);
    case 3:
      return double(sa[r / 128 + (k / 128) * a_blocks]) * double(sb[c + (k / 128) * n]);
    default:
      return 1.0;
  }
}
