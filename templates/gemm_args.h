// The one ABI between the host and every generated kernel: each kernel takes a single
// `const __grid_constant__ GemmArgs` parameter. Plain data only, so that host C++ and NVRTC
// agree on the layout (runtime/ checks sizes and offsets with static_assert).
#pragma once

// A CUtensorMap, opaque here: 128 bytes, 64-byte aligned. Families that use TMA fill them.
struct alignas(64) GemmTensorMap {
  unsigned long long opaque[16];
};

// A divisor with its multiplier for division without a division instruction (raster.h).
struct GemmDivisor {
  unsigned int value, mul, shift;
};

struct GemmArgs {
  GemmTensorMap map_a;  // first: their alignment would otherwise pad the struct
  GemmTensorMap map_b;
  GemmTensorMap map_c;
  unsigned long long a;  // device addresses of A, B, C (column-major, as cuBLAS)
  unsigned long long b;
  unsigned long long c;
  long long lda;
  long long ldb;
  long long ldc;
  int m;  // op(A) is m x k, op(B) is k x n, C is m x n; each at most 2^30 (validate()), so
          // tile bounds and counts in int cannot overflow; offsets use the 64-bit ld
  int n;
  int k;
  float alpha;
  float beta;   // beta == 0: C is never read (it may hold NaN)
  int tiles_m;  // output tiles along M and N, for tile schedulers
  int tiles_n;
  int flags;  // GEMM_ARGS_MAP_C: map_c describes C (TMA stores allowed)
  // Scratch of the size the family's launch plan asks for (LaunchGeometry::workspace_bytes), or
  // 0: split-K partial sums, say. Its contents are undefined at launch.
  unsigned long long workspace;
  // Counters (LaunchGeometry::counter_bytes), or 0: zero at launch, and every kernel leaves the
  // ones it used zero again, so that the next launch of any kernel finds them zero.
  unsigned long long counters;
  // Divisors the kernel's tile mapping takes (LaunchGeometry::divisors: which ones is the
  // family's choice), each with its multiplier.
  GemmDivisor divisors[2];
};

#define GEMM_ARGS_MAP_C 1
