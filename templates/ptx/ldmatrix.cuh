// ldmatrix: a warp loads four 8x8 blocks of 16-bit values from shared memory into the register
// layout of mma.sync fragments. Lanes 8q..8q+7 give the addresses of the 8 rows (16 bytes each)
// of block q; lane t receives row t/4, values 2(t%4) and 2(t%4)+1 of every block. TRANS
// transposes each block on the way, for operands stored with the other dimension contiguous.
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

// Volatile and "memory": it reads shared memory that cp.async and other threads write, so it
// must stay between the barriers where the program puts it.
template <bool TRANS>
GEMMTUNE_DEVICE_INLINE void ldmatrix_x4(u32 (&r)[4], u32 shared_address) {
  if constexpr (TRANS)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address)
                 : "memory");
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address)
                 : "memory");
}

}  // namespace ptx
}  // namespace gemmtune
