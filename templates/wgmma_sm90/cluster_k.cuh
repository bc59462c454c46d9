// CLUSTER_K: the CTAs of a cluster split each tile's k-blocks (tiles.cuh, k_range), and add their
// partial sums through distributed shared memory: each CTA owns a share of the tile's 8-column
// groups (layout.h), receives the others' partial sums of them, adds and stores them.
#pragma once
#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "wgmma_sm90/shared_memory.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct ClusterK : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::ACC;
  using T::CLUSTER_K;
  using T::GROUPS;
  using T::MW;
  using T::OWNED;
  using T::TN;
  using T::WG;
  using Smem = SharedMemory<Cfg>;

  // Which CTA of the cluster owns float4 i of a consumer thread's accumulators, and where the
  // others' partial sums of it land there.
  GEMMTUNE_DEVICE_INLINE static int owner_of(int i) { return (i % GROUPS) % CLUSTER_K; }
  GEMMTUNE_DEVICE_INLINE static int slot_of_owned(int i) {
    return (i / GROUPS) * (OWNED / MW) + (i % GROUPS) / CLUSTER_K;
  }
  GEMMTUNE_DEVICE_INLINE static int owned_by(int kpart) {
    return MW * ((GROUPS - kpart + CLUSTER_K - 1) / CLUSTER_K);
  }

  // Every CTA of the cluster has a partial sum of the tile. Each pushes the float4s it does not
  // own into their owners' shared memory (st.async, counted in bytes on the owner's barrier),
  // then adds the ones it owns over the CTAs in rank order (the same C on every run, whichever
  // CTA finishes first) and goes on to store them. An owner tells each sender that its slot is
  // free again, unless no round follows (nothing may land in a CTA that has exited). `round`
  // counts this consumer's exchanges, for the barriers' parity.
  // Only owners tell (Traits::other_owners): a CTA's `added` then completes a phase only after
  // its own pushes of that round have been read, so it is never two phases ahead of its waiter,
  // whose parity would name the wrong phase. (Told by CTAs that own nothing, the lone owner of
  // wgmma N 8 saw its first phase complete before it waited for the one before it, and waited
  // forever: docs/PERF.md, 'In a cluster that splits K, only column owners signal'.)
  GEMMTUNE_DEVICE_INLINE static void exchange(const Smem& s, int kpart, int consumer, int round,
                                              bool more, float (&acc)[MW][TN / 2]) {
    const int lane = threadIdx.x % 128;
    float4* slots = s.push + consumer * CLUSTER_K * OWNED * 128 + lane;  // [sender][owned][lane]
    const u32 parity = round & 1;
    if (lane == 0)
      ptx::mbarrier_arrive_expect_tx(&s.pushed[consumer],
                                     (CLUSTER_K - 1) * owned_by(kpart) * 128 * 16);
    if (T::other_owners(kpart) > 0)
      ptx::mbarrier_wait(&s.added[consumer],
                         parity ^ 1);  // every owner has read the previous round
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const int owner = owner_of(i);
      if (owner == kpart) continue;
      const float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      ptx::st_async_v4(slots + (kpart * OWNED + slot_of_owned(i)) * 128, &s.pushed[consumer],
                       u32(owner), make_float4(a[0], a[1], a[2], a[3]));
    }
    ptx::mbarrier_wait_cluster(&s.pushed[consumer], parity);
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      if (owner_of(i) != kpart) continue;
      float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      const float4 mine = make_float4(a[0], a[1], a[2], a[3]);
      float4 sum;
#pragma unroll
      for (int sender = 0; sender < CLUSTER_K; ++sender) {
        const float4 v = sender == kpart ? mine : slots[(sender * OWNED + slot_of_owned(i)) * 128];
        sum = sender == 0 ? v : make_float4(sum.x + v.x, sum.y + v.y, sum.z + v.z, sum.w + v.w);
      }
      a[0] = sum.x;
      a[1] = sum.y;
      a[2] = sum.z;
      a[3] = sum.w;
    }
    ptx::named_barrier(1 + WG + consumer, 128);  // every thread has read its slots
    if (lane == 0 && more && T::owns_groups(kpart))
      for (int cta = 0; cta < CLUSTER_K; ++cta)
        if (cta != kpart) ptx::mbarrier_arrive_cluster(&s.added[consumer], u32(cta));
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
