// The tiles of a grouped problem (a mixture-of-experts layer: gemmtune/types.hpp, Problem): G
// GEMMs that share M and K and split the columns of B and C between them at offsets only the
// device knows (core.group_ends, or counts in slots of group_capacity when masked). Each CTA
// reads them once, into a table in shared memory of each group's end in tiles along N; a super
// tile's index then names a swath of M tiles and one of the groups' column tiles, found by a
// binary search of the table. No host round trip: a captured graph replays new routings.
//
// The tiles of all groups form one grid of super_m x (the groups' column tiles), swept in
// raster groups of GROUP as one GEMM's (raster.h): RASTER 1, GROUP column tiles at a time down
// all of M, so that a group's weights (A) stream once past its tokens' columns (B), which stay in
// L2; RASTER 0, GROUP M tiles at a time across all the groups' column tiles. Data-parallel only:
// the tile count is known on the device alone.
#pragma once
#include "raster.h"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct GroupedTiles : Tiles<Cfg> {
  using Base = Tiles<Cfg>;
  using Smem = SharedMemory<Cfg>;
  static constexpr int TABLE = Cfg::GROUP_TABLE;
  static_assert(TABLE > 0, "GroupedTiles are for grouped problems");
  static_assert(Cfg::CLUSTER_N == 1, "a pair of tiles along N may span two groups' A");

  // A group's columns [begin, end): after the group before it, or (masked) the first count of
  // its capacity-wide slot.
  GEMMTUNE_DEVICE_INLINE static int group_begin(const WgmmaArgs& args, int group) {
    const int* ends = reinterpret_cast<const int*>(args.core.group_ends);
    if (args.core.group_capacity > 0) return group * args.core.group_capacity;
    return group > 0 ? __ldg(ends + group - 1) : 0;
  }
  GEMMTUNE_DEVICE_INLINE static int group_end(const WgmmaArgs& args, int group) {
    const int value = __ldg(reinterpret_cast<const int*>(args.core.group_ends) + group);
    return args.core.group_capacity > 0 ? group * args.core.group_capacity + value : value;
  }

  // Every thread: each group's column tiles, then warp 0 sums them up in place (each lane a run
  // of the table, then across lanes), and thread 0 the raster's divisors. A CTA does this once;
  // the init that follows (SharedMemory::init) makes it visible to all.
  GEMMTUNE_DEVICE_INLINE static void prepare(const WgmmaArgs& args, const Smem& s) {
    const int groups = args.core.groups;
    for (int g = threadIdx.x; g < groups; g += blockDim.x) {
      const int columns = group_end(args, g) - group_begin(args, g);
      s.group_tiles[g] = columns > 0 ? (columns + Cfg::BN - 1) / Cfg::BN : 0;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x, run = (groups + 31) / 32;
    const int first = min(lane * run, groups), last = min(first + run, groups);
    int sum = 0;
    for (int g = first; g < last; ++g) sum += s.group_tiles[g];
    int before = sum;  // inclusive scan of the runs' sums across the warp
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, before, d);
      if (lane >= d) before += other;
    }
    before -= sum;
    for (int g = first; g < last; ++g) {
      before += s.group_tiles[g];
      s.group_tiles[g] = before;
    }
    __syncwarp();
    if (lane == 0) {
      const int n_tiles = max(1, s.group_tiles[groups - 1]);
      unsigned divisors[2];
      if (Cfg::RASTER == 0)
        raster_divisors(super_m(args), n_tiles, Cfg::GROUP, divisors);
      else
        raster_divisors(n_tiles, super_m(args), Cfg::GROUP, divisors);
      s.group_raster[0] = make_divisor(divisors[0]);
      s.group_raster[1] = make_divisor(divisors[1]);
    }
  }

  GEMMTUNE_DEVICE_INLINE static int super_m(const WgmmaArgs& args) {
    return ((args.core.m + Cfg::BM - 1) / Cfg::BM + Cfg::CLUSTER_M - 1) / Cfg::CLUSTER_M;
  }

  // Read by thread 0 (of warp 0, which made the table) for SharedMemory::init.
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_of(const WgmmaArgs& args, const Smem& s,
                                                       int workers) {
    const int n_tiles = s.group_tiles[args.core.groups - 1];
    return schedule::make_work(schedule::DATA_PARALLEL, super_m(args) * n_tiles,
                               (args.core.k + Base::BK - 1) / Base::BK, workers, 1);
  }

  // The group whose column tiles hold `tile`: the first whose end lies past it.
  GEMMTUNE_DEVICE_INLINE static int group_of(const Smem& s, int groups, int tile) {
    int lo = 0, hi = groups - 1;
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (s.group_tiles[mid] > tile)
        hi = mid;
      else
        lo = mid + 1;
    }
    return lo;
  }

  GEMMTUNE_DEVICE_INLINE static Tile tile_at(const WgmmaArgs& args, const Smem& s, int st,
                                             int rank) {
    const GemmDivisor divisors[2] = {s.group_raster[0], s.group_raster[1]};
    int sm, column_tile;
    if (Cfg::RASTER == 0)
      grouped_tile(st, super_m(args), Cfg::GROUP, divisors, sm, column_tile);
    else
      grouped_tile(st, max(1, s.group_tiles[args.core.groups - 1]), Cfg::GROUP, divisors,
                   column_tile, sm);
    const int group = group_of(s, args.core.groups, column_tile);
    const int first = group > 0 ? s.group_tiles[group - 1] : 0;
    const int m0 = (Cfg::CLUSTER_M == 2 ? 2 * sm + rank : sm) * Cfg::BM;
    const int n0 = group_begin(args, group) + (column_tile - first) * Cfg::BN;
    const int n_end = group_end(args, group);
    Tile t = Base::SWAP ? Tile{m0, n0} : Tile{n0, m0};
    t.group = group;
    t.n_end = n_end;
    return t;
  }
};

// The tiles of a configuration: a grouped problem's, or one GEMM's.
template <class Cfg>
using TilesOf = typename Select<(Cfg::GROUP_TABLE > 0), GroupedTiles<Cfg>, Tiles<Cfg>>::type;

}  // namespace wgmma_sm90
}  // namespace gemmtune
