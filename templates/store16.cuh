// Epilogue stores of 16-bit C (f16 or bf16) from f32 accumulators, shared by the tensor-core
// families: their threads hold values of two neighbouring rows m, m+1 of a column of C.
#pragma once
#include "common.cuh"

namespace gemmtune {

// Conversions of one 16-bit type (DTYPE 1: f16, 2: bf16).
template <int DTYPE>
struct Half16 {
  GEMMTUNE_DEVICE_INLINE static float to_f32(u16 x) { return DTYPE == 2 ? bf16_to_f32(x) : f16_to_f32(x); }
  GEMMTUNE_DEVICE_INLINE static u16 from_f32(float x) { return DTYPE == 2 ? f32_to_bf16(x) : f32_to_f16(x); }
  GEMMTUNE_DEVICE_INLINE static u32 pack(float lo, float hi) {
    return DTYPE == 2 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
  }
};

// column[m] = v0 + beta * column[m] and column[m + 1] = v1 + beta * column[m + 1], for the rows
// below `rows` (m is even). pairs: the column starts 4-byte aligned, so both rows go in one
// 4-byte access (with an odd ldc, every other column).
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void store_pair(u16* column, int m, int rows, bool pairs, float v0, float v1, float beta) {
  using H = Half16<DTYPE>;
  const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
  if (pairs && m + 1 < rows) {
    u32* p = reinterpret_cast<u32*>(column + m);
    if (read_c) {
      const u32 old = *p;
      v0 = fmaf(beta, H::to_f32(u16(old & 0xffff)), v0);
      v1 = fmaf(beta, H::to_f32(u16(old >> 16)), v1);
    }
    *p = H::pack(v0, v1);
  } else {
    if (m < rows) column[m] = H::from_f32(read_c ? fmaf(beta, H::to_f32(column[m]), v0) : v0);
    if (m + 1 < rows) column[m + 1] = H::from_f32(read_c ? fmaf(beta, H::to_f32(column[m + 1]), v1) : v1);
  }
}

}  // namespace gemmtune
