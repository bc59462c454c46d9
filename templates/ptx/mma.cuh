// mma.sync (tensor cores of sm_80 and later; on sm_90 at about half the rate of wgmma): one warp
// multiplies a 16x16 fragment by a 16x8 fragment (16-bit values; 16x8 by 8x8 of tf32) into a 16x8
// tile of f32 accumulators.
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

// d += a * b for 16-bit inputs (DTYPE 1: f16, 2: bf16). Fragments as ldmatrix leaves them: a is
// four 8x8 blocks (rows 0-7 and 8-15 of k 0-7, then of k 8-15), b two (k 0-7, k 8-15); lane t
// holds row t/4, columns 2(t%4) and 2(t%4)+1 of each block, and of d's two 8-row halves.
// Not volatile: a pure function of its registers, so the compiler may schedule it freely.
template <int DTYPE>
GEMMTUNE_DEVICE_INLINE void mma_16816(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  static_assert(DTYPE == 1 || DTYPE == 2, "f16 (1) or bf16 (2)");
  if constexpr (DTYPE == 2)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d += a * b for tf32 inputs (m16n8k8): a is four 8x4 blocks (rows 0-7 and 8-15 of k 0-3, then
// of k 4-7), b two (k 0-3, k 4-7); lane t holds row t/4, column t%4 of each block. These are the
// registers ldmatrix leaves for f32 values stored along K and read as pairs of 16-bit values: an
// 8x8 block of those is 8 rows of 4 values, lane t receiving value t%4 of row t/4.
GEMMTUNE_DEVICE_INLINE void mma_1688_tf32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The f32 value x rounded to tf32 (10 bits of mantissa, to nearest, ties away from zero), as the
// bits of an f32 whose low 13 mantissa bits are zero.
GEMMTUNE_DEVICE_INLINE u32 to_tf32(u32 x) {
  u32 r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "r"(x));
  return r;
}

}  // namespace ptx
}  // namespace gemmtune
