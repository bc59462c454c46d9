// What the host passes a generated kernel: one `const __grid_constant__` struct of its family's
// own (wgmma_sm90's WgmmaArgs, say), composed of the parts below. Plain data only, so that host
// C++ and NVRTC lay it out alike (the host writes it at offsetof's offsets, and every generated
// unit asserts its size: generator/launch_plan.hpp, ArgsLayout).
#pragma once

// A CUtensorMap, opaque here: 128 bytes, 64-byte aligned. The runtime encodes the ones a
// family's launch plan names (element type, swizzle, box) and writes them where it says.
struct alignas(64) GemmTensorMap {
  unsigned long long opaque[16];
};

// A divisor with its multiplier for division without a division instruction (raster.h).
struct GemmDivisor {
  unsigned int value, mul, shift;
};

// What every kernel takes, whatever its family: the operands, the sizes, the scalars, scratch.
struct GemmCore {
  unsigned long long a;  // device addresses of A, B, C (column-major, as cuBLAS)
  unsigned long long b;
  unsigned long long c;
  unsigned long long d;  // D's, with C's leading dimension: C's own address where D is C
  long long lda;
  long long ldb;
  long long ldc;
  int m;  // op(A) is m x k, op(B) is k x n, C is m x n; each at most 2^30 (validate()), so
          // tile bounds and counts in int cannot overflow; offsets use the 64-bit ld
  int n;
  int k;
  float alpha;
  float beta;  // beta == 0: C is never read (it may hold NaN)
  // Bit f is set when the optional tensor map of the launch plan with made_flag f was made
  // (C's, which exists only when C is 16-byte aligned: the kernel stores from registers without).
  unsigned flags;
  // Scratch of the size the launch plan asks for (split-K partial sums, say), or 0. Its contents
  // are undefined at launch.
  unsigned long long workspace;
  // Counters of the size the plan asks for, or 0: zero at launch, and every kernel leaves the
  // ones it used zero again, so that the next launch of any kernel finds them zero.
  unsigned long long counters;
  // The fp32 scales of A and B for a problem with scaling (gemmtune/types.hpp, scale_shape_a/b
  // give their layouts), else 0. Read by the kernel from device memory, so that a captured graph
  // picks up new values.
  unsigned long long scale_a;
  unsigned long long scale_b;
  // A grouped problem's G int32 end offsets of the groups' columns (gemmtune/types.hpp, Problem),
  // or their counts when masked, in device memory, and G; else 0 and 0. Read by the kernel: a
  // graph replays new routings. group_capacity: a masked problem's columns per group, else 0.
  unsigned long long group_ends;
  int groups;
  int group_capacity;
  // The epilogue's bias vector (gemmtune/types.hpp, Epilogue), M or N values of D's type, or 0.
  unsigned long long bias;
  // The epilogue's second output, the pre-activation (Epilogue::aux), laid out as D: C's leading
  // dimension, D's type; or 0.
  unsigned long long aux;
};

// The tiling of a launch, for the families whose kernels map blocks or work units to output
// tiles (raster.h): the tiles along M and N and the divisors of their raster groups. Worked out
// once on the host (a family's launch plan) and passed in the family's block of arguments.
struct GemmTiling {
  int tiles_m;
  int tiles_n;
  GemmDivisor divisors[2];
};
