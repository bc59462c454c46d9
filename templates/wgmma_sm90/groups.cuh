// The tiles of a grouped problem (a mixture-of-experts layer: gemmtune/types.hpp, Problem) for
// the Hopper family: each CTA builds the table of the groups' column tiles once
// (group_table.cuh), and a super tile's index then names a swath of M tiles and one of the
// groups' column tiles, found by a binary search of the table.
//
// The tiles of all groups form one grid of super_m x (the groups' column tiles), swept in
// raster groups of GROUP as one GEMM's (raster.h): RASTER 1, GROUP column tiles at a time down
// all of M, so that a group's weights (A) stream once past its tokens' columns (B), which stay in
// L2; RASTER 0, GROUP M tiles at a time across all the groups' column tiles. Data-parallel only:
// the tile count is known on the device alone.
#pragma once
#include "group_table.cuh"
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

  // The table (build_group_table), then thread 0 the raster's divisors. A CTA does this once;
  // the init that follows (SharedMemory::init) makes it visible to all.
  GEMMTUNE_DEVICE_INLINE static void prepare(const WgmmaArgs& args, const Smem& s) {
    build_group_table<Cfg::BN>(args.core, s.group_tiles);
    if (threadIdx.x != 0) return;
    const int n_tiles = max(1, s.group_tiles[args.core.groups - 1]);
    unsigned divisors[2];
    if (Cfg::RASTER == 0)
      raster_divisors(super_m(args), n_tiles, Cfg::GROUP, divisors);
    else
      raster_divisors(n_tiles, super_m(args), Cfg::GROUP, divisors);
    s.group_raster[0] = make_divisor(divisors[0]);
    s.group_raster[1] = make_divisor(divisors[1]);
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

  GEMMTUNE_DEVICE_INLINE static Tile tile_at(const WgmmaArgs& args, const Smem& s, int st,
                                             int rank) {
    const GemmDivisor divisors[2] = {s.group_raster[0], s.group_raster[1]};
    int sm, column_tile;
    if (Cfg::RASTER == 0)
      grouped_tile(st, super_m(args), Cfg::GROUP, divisors, sm, column_tile);
    else
      grouped_tile(st, max(1, s.group_tiles[args.core.groups - 1]), Cfg::GROUP, divisors,
                   column_tile, sm);
    const int group = group_of(s.group_tiles, args.core.groups, column_tile);
    const int first = group > 0 ? s.group_tiles[group - 1] : 0;
    const int m0 = (Cfg::CLUSTER_M == 2 ? 2 * sm + rank : sm) * Cfg::BM;
    const int n0 = gemmtune_group_begin(args.core, group) + (column_tile - first) * Cfg::BN;
    const int n_end = gemmtune_group_end(args.core, group);
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
