// Where everything a wgmma_sm90 CTA keeps in shared memory sits (SMEM_BYTES in all: layout.h),
// and the barriers and schedule there, made before either schedule starts.
#pragma once
#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "wgmma_sm90/traits.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct SharedMemory : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::C_BARRIERS;
  using T::C_BUFFERS;
  using T::C_BYTES;
  using T::CLUSTER;
  using T::CLUSTER_K;
  using T::P_BYTES;
  using T::PUSH_BARRIERS;
  using T::PUSH_BYTES;
  using T::SCALE_STAGE_BYTES;
  using T::STAGE_BYTES;
  using T::STAGED_BIAS_BYTES;
  using T::STAGES;
  using T::WG;

  unsigned char* p;  // STAGES tiles of P, then STAGES tiles of Q, then C, 1024-byte aligned
  unsigned char* q;
  unsigned char* c;
  float4* push;           // CLUSTER_K: the other CTAs' partial sums of this one's column groups
  unsigned char* scales;  // STAGED_SCALES: each stage's scales (layout.h, scale_stage_bytes)
  unsigned char* bias;    // STAGED_BIAS: each consumer's tile's bias along M (layout.h)
  u64* full;              // a stage's bytes have landed
  u64* empty;             // every consumer (of every CTA of the cluster) is done with a stage
  u64* pushed;            // CLUSTER_K, per consumer: the other CTAs' partial sums have landed
  u64* added;             // CLUSTER_K, per consumer: every other CTA has read this one's
  u64* c_loaded;          // per consumer and C buffer: a chunk of C has landed (beta != 0)
  u64* c_free;            // per consumer: the last tile's stores have read its C buffers
  int* fixup;             // per consumer: "this part is the tile's last" for its warpgroup
  schedule::Work* work;
  int* group_tiles;           // a grouped problem's: each group's end in tiles along N
  GemmDivisor* group_raster;  // and the divisor of its raster (groups.cuh)

  GEMMTUNE_DEVICE_INLINE static SharedMemory carve(unsigned char* raw) {
    unsigned char* base =
        reinterpret_cast<unsigned char*>((reinterpret_cast<u64>(raw) + 1023) & ~u64(1023));
    SharedMemory s;
    s.p = base;
    s.q = base + STAGES * P_BYTES;
    s.c = base + STAGES * STAGE_BYTES;
    s.push = reinterpret_cast<float4*>(s.c + C_BYTES);
    s.scales = s.c + C_BYTES + PUSH_BYTES;  // 1024-byte aligned: C's and the pushes' chunks are
    s.bias = s.scales + STAGES * SCALE_STAGE_BYTES;
    s.full = reinterpret_cast<u64*>(s.bias + STAGED_BIAS_BYTES);
    s.empty = s.full + STAGES;
    s.pushed = s.empty + STAGES;
    s.added = s.pushed + PUSH_BARRIERS / 2;
    s.c_loaded = s.empty + STAGES + PUSH_BARRIERS;
    s.c_free = s.c_loaded + WG * C_BUFFERS;
    s.fixup = reinterpret_cast<int*>(s.c_loaded + C_BARRIERS);
    s.work = reinterpret_cast<schedule::Work*>(s.fixup + 4);
    s.group_tiles = reinterpret_cast<int*>(s.work + 1);
    s.group_raster = reinterpret_cast<GemmDivisor*>(s.group_tiles + T::GROUP_TABLE);
    return s;
  }

  // Barriers and the schedule, made by thread 0 and visible to the CTA (cluster) afterwards.
  GEMMTUNE_DEVICE_INLINE static void init(const SharedMemory& s, int consumers_per_stage,
                                          const schedule::Work& work, int kpart = 0) {
    if (threadIdx.x == 0) {
      *s.work = work;
      for (int i = 0; i < STAGES; ++i) {
        ptx::mbarrier_init(&s.full[i], 1);
        ptx::mbarrier_init(&s.empty[i], consumers_per_stage);
      }
      for (int i = 0; i < PUSH_BARRIERS / 2; ++i) {
        ptx::mbarrier_init(&s.pushed[i], 1);  // this CTA's expectation; the pushes count bytes
        ptx::mbarrier_init(&s.added[i], max(1, T::other_owners(kpart)));  // unused where 0
      }
      for (int i = 0; i < C_BARRIERS; ++i) ptx::mbarrier_init(&s.c_loaded[i], 1);
      ptx::mbarrier_init_fence();
    }
    if constexpr (CLUSTER > 1) {
      // The other CTA multicasts into this one's stages from the start.
      ptx::cluster_arrive_relaxed();
      ptx::cluster_wait();
    } else {
      __syncthreads();
      // A cluster splitting K first writes into the other CTAs at the end of its first tile:
      // each thread arrives now, and waits before its main loop (consume) or once its loads
      // are issued.
      if constexpr (CLUSTER_K > 1) ptx::cluster_arrive_relaxed();
    }
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
