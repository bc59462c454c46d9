// The work decomposition of the gemv family, shared by its kernels (gemv.cuh) and the host
// (generator/src/families/gemv.cpp, tests): which outputs a block owns, how K is split over
// blocks, and what a split launch needs of counters and scratch. Plain C++, no includes:
// it compiles for the host and under NVRTC, so the two sides cannot disagree.
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GEMV_HOST_DEVICE constexpr __host__ __device__ __forceinline__
#else
#define GEMV_HOST_DEVICE constexpr inline
#endif

namespace gemmtune {
namespace gemv {

// Outputs of one block. dot: a warp owns `rows` whole outputs. axpy: a lane owns `rows` vectors
// of `vec` consecutive outputs, 32 * vec apart.
GEMV_HOST_DEVICE long long block_rows(bool dot, int warps, int rows, int vec) {
  return dot ? (long long)warps * rows : 32LL * vec * rows;
}

// K slices start on multiples of this: a warp's vector step (dot: 16-byte aligned starts), or
// one round of the block's warps (axpy: every warp gets the same share).
GEMV_HOST_DEVICE long long k_granule(bool dot, int warps, int unroll, int vec) {
  return dot ? 32LL * vec : (long long)warps * unroll;
}

// Length of each K slice when K is split `splits` ways: a multiple of `granule`; the last slice
// is shorter. Slice s is [s * length, min(k, (s + 1) * length)).
GEMV_HOST_DEVICE long long slice_length(long long k, long long splits, long long granule) {
  const long long per = (k + splits - 1) / splits;
  return (per + granule - 1) / granule * granule;
}

// Slices that hold at least one element (the grid's y extent): at most `splits`.
GEMV_HOST_DEVICE long long slice_count(long long k, long long splits, long long granule) {
  const long long length = slice_length(k, splits, granule);
  return (k + length - 1) / length;
}

// A split launch needs one 32-bit arrival counter per block of outputs (GemmCore::counters) and
// the fp32 partial sums, [slice][output] (GemmCore::workspace). Nothing when K is not split.
GEMV_HOST_DEVICE long long counter_bytes(long long row_blocks, long long slices) {
  return slices <= 1 ? 0 : row_blocks * 4;
}
GEMV_HOST_DEVICE long long workspace_bytes(long long slices, long long outputs) {
  return slices <= 1 ? 0 : slices * outputs * 4;
}

}  // namespace gemv
}  // namespace gemmtune
