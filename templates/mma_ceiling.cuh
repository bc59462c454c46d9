// The ceiling of the mma_sm80 family: how many mma.sync.m16n8k16 (f32 accumulation; m16n8k8 for
// tf32) the GPU issues per second from registers, with no memory traffic at all. gemm-bench
// --mma-ceiling times these kernels; a GEMM made of the same instruction cannot be faster.
#pragma once
#include "ptx/mma.cuh"

namespace gemmtune {
namespace ceiling {

// Independent accumulator chains per warp: enough that no mma waits for the one before it.
constexpr int CHAINS = 8;

// Operand bits of small random-looking values (never zeros or one repeated value: those run
// faster than real data). DTYPE 2: bf16 around 2^-11; 1: f16 around 2^-11; 0: tf32 (f32 with the
// low 13 bits clear) around 2^-11.
GEMMTUNE_DEVICE_INLINE u32 operand_bits(u32 seed, int DTYPE) {
  u32 x = seed * 0x9e3779b9u;
  x ^= x >> 15;
  x *= 0x85ebca6bu;
  x ^= x >> 13;
  if (DTYPE == 0) return 0x3a000000u | (x & 0x7fe000u);
  const u32 lo = DTYPE == 2 ? (0x3a00u | (x & 0x7fu)) : (0x1000u | (x & 0x3ffu));
  const u32 hi = DTYPE == 2 ? (0x3a00u | ((x >> 16) & 0x7fu)) : (0x1000u | ((x >> 16) & 0x3ffu));
  return lo | (hi << 16);
}

// Each warp runs `iterations` rounds of CHAINS mma; out receives a value only the compiler
// cannot rule out, so that nothing is optimised away.
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void issue(int iterations, float* out) {
  const u32 seed = blockIdx.x * blockDim.x + threadIdx.x;
  const u32 a[4] = {operand_bits(seed, DTYPE), operand_bits(seed + 1, DTYPE),
                    operand_bits(seed + 2, DTYPE), operand_bits(seed + 3, DTYPE)};
  const u32 b0 = operand_bits(seed + 4, DTYPE), b1 = operand_bits(seed + 5, DTYPE);
  float acc[CHAINS][4];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[c][e] = 0.0f;
  for (int i = 0; i < iterations; ++i)
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      if constexpr (DTYPE == 0)
        ptx::mma_1688_tf32(acc[c], a, b0, b1);
      else
        ptx::mma_16816<DTYPE>(acc[c], a, b0, b1);
    }
  float sum = 0.0f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  if (sum == -1.0f) out[seed] = sum;  // the values are all positive: never taken
}

}  // namespace ceiling
}  // namespace gemmtune

extern "C" __global__ void gemmtune_mma_ceiling_bf16(int iterations, float* out) {
  gemmtune::ceiling::issue<2>(iterations, out);
}
extern "C" __global__ void gemmtune_mma_ceiling_f16(int iterations, float* out) {
  gemmtune::ceiling::issue<1>(iterations, out);
}
extern "C" __global__ void gemmtune_mma_ceiling_tf32(int iterations, float* out) {
  gemmtune::ceiling::issue<0>(iterations, out);
}
