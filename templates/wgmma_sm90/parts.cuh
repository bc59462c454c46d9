// Split-K and stream-K: reducing a tile computed in parts, through the workspace. Each part
// stores its fp32 partial sums and counts itself on the tile's counter; the last part to arrive
// adds all partials in part order (the same C whichever part finishes last), runs the epilogue
// and zeroes the counter for the next launch.
#pragma once
#include "ptx/tma.cuh"
#include "schedule.h"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct Parts : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::ACC;
  using T::CLUSTER;
  using T::MW;
  using T::ROW_WG;
  using T::TN;
  using T::WG;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;

  // A counter per (tile in parts, CTA of the cluster, consumer warpgroup's rows), and partial
  // sums per (slot, CTA of the cluster, rows), each a consumer thread's float4s 128 apart.
  GEMMTUNE_DEVICE_INLINE static int* counter_of(const WgmmaArgs& args, int tile, int rank,
                                                int consumer) {
    return reinterpret_cast<int*>(args.core.counters) + (tile * CLUSTER + rank) * ROW_WG +
           Tiles::rows_of(consumer);
  }
  GEMMTUNE_DEVICE_INLINE static float4* partial_of(const WgmmaArgs& args, int slot, int rank,
                                                   int consumer) {
    return reinterpret_cast<float4*>(args.core.workspace) +
           ((long long)(slot * CLUSTER + rank) * ROW_WG + Tiles::rows_of(consumer)) *
               (128 * ACC / 4);
  }

  // acc (+)= the partial sums at `from` (this thread's float4s, 128 apart).
  template <bool ADD>
  GEMMTUNE_DEVICE_INLINE static void add_partial(const float4* from, float (&acc)[MW][TN / 2]) {
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const float4 v = __ldcg(from + i * 128);
      float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      a[0] = ADD ? a[0] + v.x : v.x;
      a[1] = ADD ? a[1] + v.y : v.y;
      a[2] = ADD ? a[2] + v.z : v.z;
      a[3] = ADD ? a[3] + v.w : v.w;
    }
  }

  // This consumer's part of the tile is done: store it, count it; the last part to arrive adds
  // every part's partial sums in part order into acc and returns true (it runs the epilogue).
  GEMMTUNE_DEVICE_INLINE static bool reduce(const WgmmaArgs& args, const Smem& s,
                                            const schedule::Work& w, const schedule::Segment& seg,
                                            int rank, int consumer, float (&acc)[MW][TN / 2]) {
    const int lane = threadIdx.x % 128;
    float4* mine = partial_of(args, seg.slot, rank, consumer) + lane;
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      __stcg(mine + i * 128, make_float4(a[0], a[1], a[2], a[3]));
    }
    __threadfence();  // the partial sums are visible before the count says so
    ptx::named_barrier(1 + WG + consumer, 128);
    if (lane == 0) {
      int* counter = counter_of(args, seg.tile, rank, consumer);
      const bool last = atomicAdd(counter, 1) == seg.parts - 1;
      if (last) *counter = 0;  // every part has counted: ready for the next launch
      s.fixup[consumer] = last;
    }
    ptx::named_barrier(1 + WG + consumer, 128);
    if (!s.fixup[consumer]) return false;
    __threadfence();
    for (int part = 0; part < seg.parts; ++part) {
      const float4* from =
          partial_of(args, schedule::slot_of(w, seg.tile, part), rank, consumer) + lane;
      if (part == 0)
        add_partial<false>(from, acc);
      else
        add_partial<true>(from, acc);
    }
    return true;
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
