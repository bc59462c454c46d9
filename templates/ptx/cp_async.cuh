// cp.async (sm_80+): copies from global to shared memory that run in the background, grouped
// by commit_group and awaited by wait_group. A source size below the copy size fills the rest
// of the destination with zeros (0: nothing is read), which is how tiles past the edges of a
// matrix are padded.
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

// 16 bytes through L2 only (.cg): shared memory is the cache. src 16-byte aligned.
GEMMTUNE_DEVICE_INLINE void cp_async_16(u32 dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
GEMMTUNE_DEVICE_INLINE void cp_async_16(u32 dst, const void* src, u32 src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// 4 or 8 bytes (.ca: .cg takes only 16), for operands aligned to no more than that.
template <int BYTES>
GEMMTUNE_DEVICE_INLINE void cp_async_small(u32 dst, const void* src, u32 src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(src), "n"(BYTES),
               "r"(src_bytes)
               : "memory");
}

GEMMTUNE_DEVICE_INLINE void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// Waits until at most PENDING of this thread's committed groups are still in flight.
template <int PENDING>
GEMMTUNE_DEVICE_INLINE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// A plain 16-byte store to shared memory, for the copies that cannot be asynchronous.
GEMMTUNE_DEVICE_INLINE void st_shared_16(u32 dst, u32 x, u32 y, u32 z, u32 w) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(x), "r"(y), "r"(z), "r"(w)
               : "memory");
}

}  // namespace ptx
}  // namespace gemmtune
