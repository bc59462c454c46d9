// Epilogue stores from f32 accumulators, shared by the tensor-core families: their threads hold
// values of two neighbouring rows m, m+1 of a column of D. C's old values come from the same
// place of C's column: C and D are one buffer, or two with one leading dimension.
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

// An output type (OUT: data_types.h's code of f32, f16 or bf16): its element, a pair of
// neighbours moved as one access (4 bytes of 16-bit values, 8 of f32), their conversions.
template <int OUT>
struct Output {
  using Elem = u16;
  using Pair = u32;
  using H = Half16<OUT>;
  GEMMTUNE_DEVICE_INLINE static float to_f32(Elem x) { return H::to_f32(x); }
  GEMMTUNE_DEVICE_INLINE static Elem from_f32(float x) { return H::from_f32(x); }
  GEMMTUNE_DEVICE_INLINE static Pair pack(float lo, float hi) { return H::pack(lo, hi); }
  GEMMTUNE_DEVICE_INLINE static Pair pair_of(Elem lo, Elem hi) { return u32(lo) | u32(hi) << 16; }
  GEMMTUNE_DEVICE_INLINE static float first(Pair p) { return H::to_f32(u16(p & 0xffff)); }
  GEMMTUNE_DEVICE_INLINE static float second(Pair p) { return H::to_f32(u16(p >> 16)); }
};
template <>
struct Output<GEMMTUNE_TYPE_F32> {
  using Elem = float;
  using Pair = float2;
  GEMMTUNE_DEVICE_INLINE static float to_f32(Elem x) { return x; }
  GEMMTUNE_DEVICE_INLINE static Elem from_f32(float x) { return x; }
  GEMMTUNE_DEVICE_INLINE static Pair pack(float lo, float hi) { return make_float2(lo, hi); }
  GEMMTUNE_DEVICE_INLINE static Pair pair_of(Elem lo, Elem hi) { return make_float2(lo, hi); }
  GEMMTUNE_DEVICE_INLINE static float first(Pair p) { return p.x; }
  GEMMTUNE_DEVICE_INLINE static float second(Pair p) { return p.y; }
};

// v0 += beta * old's first value, v1 += beta * its second.
template <int OUT>
GEMMTUNE_DEVICE_INLINE void add_scaled(typename Output<OUT>::Pair old, float beta, float& v0,
                                       float& v1) {
  v0 = fmaf(beta, Output<OUT>::first(old), v0);
  v1 = fmaf(beta, Output<OUT>::second(old), v1);
}

// Pair j of PAIRS at rows m0 + 8j of one column (a thread's pairs in mma fragments): C's old
// values read from `in`, D's written to `out`, the pre-activation kept in `aux` (the aux output
// at D's place, or null: EpilogueOp::aux_at), the rows at or below `rows` left alone (read as
// zero). pairs: the columns start aligned for a pair access (with an odd ld, every other column
// does), so that both rows move in one access. m0 is even.
template <int OUT>
struct ColumnPairs {
  using O = Output<OUT>;
  using Elem = typename O::Elem;
  const Elem* in;
  Elem* out;
  int m0, rows;
  bool pairs;
  Elem* aux = nullptr;

  GEMMTUNE_DEVICE_INLINE typename O::Pair read(int j) const {
    const int m = m0 + 8 * j;
    if (pairs && m + 1 < rows) return *reinterpret_cast<const typename O::Pair*>(in + m);
    return O::pair_of(m < rows ? in[m] : Elem(0), m + 1 < rows ? in[m + 1] : Elem(0));
  }
  GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const { put(out, j, v0, v1); }
  GEMMTUNE_DEVICE_INLINE void keep(int j, float v0, float v1) const { put(aux, j, v0, v1); }

 private:
  GEMMTUNE_DEVICE_INLINE void put(Elem* to, int j, float v0, float v1) const {
    const int m = m0 + 8 * j;
    if (pairs && m + 1 < rows) {
      *reinterpret_cast<typename O::Pair*>(to + m) = O::pack(v0, v1);
    } else {
      if (m < rows) to[m] = O::from_f32(v0);
      if (m + 1 < rows) to[m + 1] = O::from_f32(v1);
    }
  }
};

// Whether a column pair of C (`in`), of D (`out`) and of the aux output (`aux`, or null) can
// each move as one access.
template <int OUT>
GEMMTUNE_DEVICE_INLINE bool pairs_aligned(const void* in, const void* out,
                                          const void* aux = nullptr) {
  constexpr u64 MASK = sizeof(typename Output<OUT>::Pair) - 1;
  return ((reinterpret_cast<u64>(in) | reinterpret_cast<u64>(out) | reinterpret_cast<u64>(aux)) &
          MASK) == 0;
}

// D = finish(v + beta * C) for pairs j = 0 .. PAIRS-1 (beta == 0: C is not read, it may be
// uninitialised), where `at` places them (read, write, keep: as ColumnPairs), value(j, v0, v1)
// gives their new values and Epi (EpilogueOp) keeps the pre-activation and applies the
// activation; pairs that skip(j) are left alone. The old values of BATCH pairs are read before any
// of them is written, so that their loads are in flight together (one after another, each waits for
// memory); with a BATCH of one, each pair is read and written in turn, for threads short of
// registers.
template <int OUT, int PAIRS, int BATCH, class Epi, class At, class Value, class Skip>
GEMMTUNE_DEVICE_INLINE void store_pairs(const At& at, float beta, Value value, Skip skip) {
  const bool read_c = beta != 0.0f;
#pragma unroll
  for (int j0 = 0; j0 < PAIRS; j0 += BATCH) {
    typename Output<OUT>::Pair old[BATCH];
    if (read_c) {
#pragma unroll
      for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j)
        if (!skip(j)) old[j - j0] = at.read(j);
    }
#pragma unroll
    for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j) {
      if (skip(j)) continue;
      float v0, v1;
      value(j, v0, v1);
      if (read_c) add_scaled<OUT>(old[j - j0], beta, v0, v1);
      Epi::finish(at, j, v0, v1);
      at.write(j, v0, v1);
    }
  }
}

}  // namespace gemmtune
