// stmatrix: a warp stores four 8x8 blocks of 16-bit values from the register layout of mma and
// wgmma fragments to shared memory: the inverse of ldmatrix. Lane t gives row t/4, values 2(t%4)
// and 2(t%4)+1 of every block (r[q] for block q); lanes 8q..8q+7 give the addresses of the 8 rows
// (16 bytes each) of block q. One instruction writes what four 4-byte stores per lane would.
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

// Volatile and "memory": what it writes is read by TMA stores after a proxy fence and a barrier.
GEMMTUNE_DEVICE_INLINE void stmatrix_x4(u32 shared_address, const u32 (&r)[4]) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(shared_address),
      "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
      : "memory");
}

}  // namespace ptx
}  // namespace gemmtune
