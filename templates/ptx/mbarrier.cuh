// mbarrier: shared-memory barriers that count arrivals and bytes of asynchronous copies.
// Phases alternate; a waiter names the parity of the phase it waits for.
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

GEMMTUNE_DEVICE_INLINE u32 smem_u32(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

// The address of the same shared-memory location in CTA `cta` of this cluster.
GEMMTUNE_DEVICE_INLINE u32 cluster_smem_u32(const void* p, u32 cta) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_u32(p)), "r"(cta));
  return remote;
}

GEMMTUNE_DEVICE_INLINE void mbarrier_init(u64* bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals)
               : "memory");
}

// Makes initialised barriers visible to the async proxy and to the other CTAs of the cluster.
GEMMTUNE_DEVICE_INLINE void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// One arrival that also announces `bytes` of copies that will complete on this barrier.
GEMMTUNE_DEVICE_INLINE void mbarrier_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
               "r"(bytes)
               : "memory");
}

GEMMTUNE_DEVICE_INLINE void mbarrier_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Arrives on the barrier at the same offset in CTA `cta` of this cluster. CTA-scope release: it
// only says "done reading" (wgmma reads are complete by then), so no cluster-wide fence is paid.
GEMMTUNE_DEVICE_INLINE void mbarrier_arrive_cluster(u64* bar, u32 cta) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(cluster_smem_u32(bar, cta))
               : "memory");
}

GEMMTUNE_DEVICE_INLINE bool mbarrier_try_wait(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, "
      "0, p;\n}"
      : "=r"(done)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Waits until the phase with this parity has completed.
GEMMTUNE_DEVICE_INLINE void mbarrier_wait(u64* bar, u32 parity) {
  while (!mbarrier_try_wait(bar, parity)) {
  }
}

// Waits for the phase like mbarrier_wait, acquiring at cluster scope: what other CTAs of the
// cluster wrote into this one and counted on the barrier (st.async) is visible afterwards.
GEMMTUNE_DEVICE_INLINE void mbarrier_wait_cluster(u64* bar, u32 parity) {
  u32 done = 0;
  while (!done) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], "
        "%2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
  }
}

}  // namespace ptx
}  // namespace gemmtune
