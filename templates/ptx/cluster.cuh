// Thread-block clusters and register reallocation between warpgroups (sm_90).
#pragma once
#include "common.cuh"

namespace gemmtune {
namespace ptx {

GEMMTUNE_DEVICE_INLINE u32 cluster_ctarank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

// Every thread of every CTA in the cluster.
GEMMTUNE_DEVICE_INLINE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
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
