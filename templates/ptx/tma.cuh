// TMA: bulk tensor copies from global to shared memory, described by a CUtensorMap made on the
// host, completing on an mbarrier. Out-of-bounds elements are filled with zeros.
#pragma once
#include "ptx/mbarrier.cuh"

namespace gemmtune {
namespace ptx {

GEMMTUNE_DEVICE_INLINE void tma_prefetch_descriptor(const void* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Copies the box at coordinates (c0 inner, c1 outer) into dst.
GEMMTUNE_DEVICE_INLINE void tma_load_2d(void* dst, const void* map, u64* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
      : "memory");
}

// Fetches the box at (c0, c1) into L2, nothing waiting for it.
GEMMTUNE_DEVICE_INLINE void tma_prefetch_2d(const void* map, int c0, int c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1)
               : "memory");
}

// Fetches the 128-byte line holding p into L2 (a plain prefetch, not TMA).
GEMMTUNE_DEVICE_INLINE void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(reinterpret_cast<u64>(p)) : "memory");
}

// An L2 cache policy that evicts first what it tags: for data read once (streamed weights), so
// that it does not push reused data out of L2.
GEMMTUNE_DEVICE_INLINE u64 l2_evict_first_policy() {
  u64 policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// tma_load_2d with an L2 cache policy (l2_evict_first_policy).
GEMMTUNE_DEVICE_INLINE void tma_load_2d_hint(void* dst, const void* map, u64* bar, int c0, int c1,
                                             u64 policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_"
      "hint"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}

// Copies the box at (c0, c1) of matrix c2 of a 3-D map (the G matrices of a grouped problem's A)
// into dst, with an L2 cache policy (a policy of 0 is none: the plain copy).
GEMMTUNE_DEVICE_INLINE void tma_load_3d(void* dst, const void* map, u64* bar, int c0, int c1,
                                        int c2, u64 policy) {
  if (policy == 0)
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4, %5}], [%2];" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
  else
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::"
        "cache_hint [%0], [%1, {%3, %4, %5}], [%2], %6;" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "r"(c2), "l"(policy)
        : "memory");
}

// The same copy, delivered to dst and bar at the same offsets in every CTA of `cta_mask`.
GEMMTUNE_DEVICE_INLINE void tma_load_2d_multicast(void* dst, const void* map, u64* bar, int c0,
                                                  int c1, u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::"
      "cluster"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_u32(bar)), "r"(c0), "r"(c1), "h"(cta_mask)
      : "memory");
}

// Copies the box at (c0, c1) from shared memory to global memory (out-of-bounds parts are not
// written); completes as part of this thread's bulk group.
GEMMTUNE_DEVICE_INLINE void tma_store_2d(const void* map, const void* src, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
          reinterpret_cast<u64>(map)),
      "r"(smem_u32(src)), "r"(c0), "r"(c1)
      : "memory");
}
GEMMTUNE_DEVICE_INLINE void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// All but the PENDING most recent groups of committed stores have finished reading shared
// memory (it may be overwritten).
template <int PENDING = 0>
GEMMTUNE_DEVICE_INLINE void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(PENDING) : "memory");
}
// The committed stores are complete.
GEMMTUNE_DEVICE_INLINE void bulk_wait() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
// Shared-memory writes of this thread become visible to TMA (the async proxy).
GEMMTUNE_DEVICE_INLINE void fence_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Synchronises `threads` threads on named barrier `id` (0 is __syncthreads').
GEMMTUNE_DEVICE_INLINE void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Counts the calling warp on barrier `id` without waiting (the others bar.sync on it).
GEMMTUNE_DEVICE_INLINE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

}  // namespace ptx
}  // namespace gemmtune
