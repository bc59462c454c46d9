// Thread-block clusters and register reallocation between warpgroups (sm_90).
#pragma once
#include "common.cuh"
#include "ptx/mbarrier.cuh"

namespace gemmtune {
namespace ptx {

GEMMTUNE_DEVICE_INLINE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Stores four floats at the same shared-memory address in CTA `cta` of this cluster, and counts
// their 16 bytes on that CTA's barrier at the same offset as `bar` (which expects them).
GEMMTUNE_DEVICE_INLINE void st_async_v4(const void* local, const u64* bar, u32 cta, float4 v) {
  const u32 remote = cluster_smem_u32(local, cta), remote_bar = cluster_smem_u32(bar, cta);
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(remote),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
      : "memory");
}

// The two halves of a cluster barrier, for a thread that has work to do before it needs the
// others. The arrival is relaxed: what it publishes (initialised mbarriers) is released by
// fence.mbarrier_init before it. A releasing arrival waits until this thread's writes are visible
// cluster-wide, which took about 1300 cycles at the start of a kernel on the H100.
GEMMTUNE_DEVICE_INLINE void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
GEMMTUNE_DEVICE_INLINE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Gives up registers (producer) or takes them (consumers); every thread of the warpgroup.
template <int REGS>
GEMMTUNE_DEVICE_INLINE void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}
template <int REGS>
GEMMTUNE_DEVICE_INLINE void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

}  // namespace ptx
}  // namespace gemmtune
