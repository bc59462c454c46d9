// Epilogue stores of 16-bit C (f16 or bf16) from f32 accumulators, shared by the tensor-core
// families: their threads hold values of two neighbouring rows m, m+1 of a column of C.
#pragma once
#include "common.cuh"

namespace gemmtune {

// Conversions of one 16-bit type (DTYPE 1: f16, 2: bf16).
template <int DTYPE>
struct Half16 {
  GEMMTUNE_DEVICE_INLINE static float to_f32(u16 x) {
    return DTYPE == 2 ? bf16_to_f32(x) : f16_to_f32(x);
  }
  GEMMTUNE_DEVICE_INLINE static u16 from_f32(float x) {
    return DTYPE == 2 ? f32_to_bf16(x) : f32_to_f16(x);
  }
  GEMMTUNE_DEVICE_INLINE static u32 pack(float lo, float hi) {
    return DTYPE == 2 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
  }
};

// column[m] and column[m + 1] as one pair, low half first; rows at or below `rows` read as zero.
// pairs: the column starts 4-byte aligned, so both rows come in one 4-byte access (with an odd
// ldc, every other column). m is even.
GEMMTUNE_DEVICE_INLINE u32 read_pair(const u16* column, int m, int rows, bool pairs) {
  if (pairs && m + 1 < rows) return *reinterpret_cast<const u32*>(column + m);
  const u32 lo = m < rows ? column[m] : 0, hi = m + 1 < rows ? column[m + 1] : 0;
  return lo | hi << 16;
}

// column[m] = v0 and column[m + 1] = v1, for the rows below `rows`.
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void write_pair(u16* column, int m, int rows, bool pairs, float v0,
                                       float v1) {
  using H = Half16<DTYPE>;
  if (pairs && m + 1 < rows) {
    *reinterpret_cast<u32*>(column + m) = H::pack(v0, v1);
  } else {
    if (m < rows) column[m] = H::from_f32(v0);
    if (m + 1 < rows) column[m + 1] = H::from_f32(v1);
  }
}

// v0 += beta * old's low half, v1 += beta * its high half.
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void add_scaled(u32 old, float beta, float& v0, float& v1) {
  using H = Half16<DTYPE>;
  v0 = fmaf(beta, H::to_f32(u16(old & 0xffff)), v0);
  v1 = fmaf(beta, H::to_f32(u16(old >> 16)), v1);
}

// *p = v + beta * *p (beta == 0: *p is not read, it may be uninitialised).
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void update_one(u16* p, float v, float beta) {
  using H = Half16<DTYPE>;
  *p = H::from_f32(beta != 0.0f ? fmaf(beta, H::to_f32(*p), v) : v);
}

// column[m] = v0 + beta * column[m] and column[m + 1] = v1 + beta * column[m + 1], for the rows
// below `rows`: read, updated and written in turn (each read waits for memory; where registers
// allow, read several pairs first: read_pair, add_scaled, write_pair).
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void store_pair(u16* column, int m, int rows, bool pairs, float v0, float v1,
                                       float beta) {
  using H = Half16<DTYPE>;
  const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
  if (pairs && m + 1 < rows) {
    u32* p = reinterpret_cast<u32*>(column + m);
    if (read_c) add_scaled<DTYPE>(*p, beta, v0, v1);
    *p = H::pack(v0, v1);
  } else {
    if (m < rows) update_one<DTYPE>(column + m, v0, beta);
    if (m + 1 < rows) update_one<DTYPE>(column + m + 1, v1, beta);
  }
}

// Pair j of PAIRS at rows m0 + 8j of one column of C (a thread's pairs in mma fragments).
template <int DTYPE>
struct ColumnPairs {
  u16* column;
  int m0, rows;
  bool pairs;
  GEMMTUNE_DEVICE_INLINE u32 read(int j) const {
    return read_pair(column, m0 + 8 * j, rows, pairs);
  }
  GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
    write_pair<DTYPE>(column, m0 + 8 * j, rows, pairs, v0, v1);
  }
  GEMMTUNE_DEVICE_INLINE void update(int j, float v0, float v1, float beta) const {
    store_pair<DTYPE>(column, m0 + 8 * j, rows, pairs, v0, v1, beta);
  }
};

// C = v + beta * C for pairs j = 0 .. PAIRS-1 (beta == 0: C is not read), where `at` places them
// (read, write, update: as ColumnPairs) and value(j, v0, v1) gives their new values; pairs that
// skip(j) are left alone. The old values of BATCH pairs are read before any of them is written,
// so that their loads are in flight together (one after another, each waits for memory); with a
// BATCH of one, each pair is read, updated and written in turn, for threads short of registers.
template <int DTYPE, int PAIRS, int BATCH, class At, class Value, class Skip>
GEMMTUNE_DEVICE_INLINE void store_pairs(const At& at, float beta, Value value, Skip skip) {
  const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
#pragma unroll
  for (int j0 = 0; j0 < PAIRS; j0 += BATCH) {
    u32 old[BATCH];
    if (BATCH > 1 && read_c) {
#pragma unroll
      for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j)
        if (!skip(j)) old[j - j0] = at.read(j);
    }
#pragma unroll
    for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j) {
      if (skip(j)) continue;
      float v0, v1;
      value(j, v0, v1);
      if (BATCH == 1) {
        at.update(j, v0, v1, beta);
      } else {
        if (read_c) add_scaled<DTYPE>(old[j - j0], beta, v0, v1);
        at.write(j, v0, v1);
      }
    }
  }
}

}  // namespace gemmtune
