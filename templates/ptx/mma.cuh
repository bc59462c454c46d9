// mma.sync (tensor cores of sm_80 and later; on sm_90 at about half the rate of wgmma): one warp
// multiplies a 16x16 fragment by a 16x8 fragment into a 16x8 tile of f32 accumulators.
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

}  // namespace ptx
}  // namespace gemmtune
