// Tiles and work of a wgmma_sm90 kernel: where a tile sits in the problem, which tiles and
// k-blocks a worker (a CTA, or a cluster) computes (schedule.h), and which of them each CTA of a
// cluster and each consumer warpgroup takes.
#pragma once
#include "raster.h"
#include "schedule.h"
#include "wgmma_sm90/shared_memory.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

struct Tile {
  int row0, col0;  // first kernel row and column
  // A grouped problem's (groups.cuh): the group, whose A the loads read, and the end of its
  // columns of C (problem n), past which the tile stores nothing. One GEMM: 0 and no end.
  int group = 0;
  int n_end = 0x7fffffff;
};

struct Grid {
  int tiles_m, tiles_n;  // tiles along problem M and N
  int super_m, super_n;  // cluster-sized groups of tiles ("super tiles") along M and N
  int k_blocks;
  GemmDivisor divisors[2];  // of the raster groups (the family's geometry)
};

// The k-blocks of a segment this CTA computes: all of them, or with CLUSTER_K its share (lower
// ranks take the larger shares, so only the last ones' can be empty: they add zeros).
struct KRange {
  int begin, end;
};
using gemmtune::warp_uniform;
GEMMTUNE_DEVICE_INLINE KRange warp_uniform(KRange ks) {
  return {warp_uniform(ks.begin), warp_uniform(ks.end)};
}

template <class Cfg>
struct Tiles : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::BK;
  using T::CLUSTER_K;
  using T::PINGPONG;
  using T::SCHEDULE;
  using T::SWAP;
  using Smem = SharedMemory<Cfg>;

  // Makes the compiler work out a tile's coordinates where this is called and keep them in
  // registers: it would otherwise sink the arithmetic (two divisions, ~350 cycles) to their use.
  GEMMTUNE_DEVICE_INLINE static void keep_here(Tile& t) {
    asm volatile("" : "+r"(t.row0), "+r"(t.col0));
  }

  // The k-blocks of one pass over K.
  GEMMTUNE_DEVICE_INLINE static int k_blocks_of(const WgmmaArgs& args) {
    return (args.core.k + BK - 1) / BK;
  }

  GEMMTUNE_DEVICE_INLINE static Grid grid_of(const WgmmaArgs& args) {
    Grid g;
    g.tiles_m = (args.core.m + Cfg::BM - 1) / Cfg::BM;
    g.tiles_n = (args.core.n + Cfg::BN - 1) / Cfg::BN;
    g.super_m = (g.tiles_m + Cfg::CLUSTER_M - 1) / Cfg::CLUSTER_M;
    g.super_n = (g.tiles_n + Cfg::CLUSTER_N - 1) / Cfg::CLUSTER_N;
    g.k_blocks = T::PRODUCTS * k_blocks_of(args);  // 3xTF32: K three times over
    g.divisors[0] = args.tiling.divisors[0];
    g.divisors[1] = args.tiling.divisors[1];
    return g;
  }

  // Super tile `st`, swept in groups of GROUP along the raster dimension; CTA `rank` of the
  // cluster takes its own tile of it.
  GEMMTUNE_DEVICE_INLINE static Tile tile_of(int st, int rank, const Grid& g) {
    int sm, sn;
    if (Cfg::RASTER == 0)
      grouped_tile(st, g.super_m, Cfg::GROUP, g.divisors, sm, sn);
    else
      grouped_tile(st, g.super_n, Cfg::GROUP, g.divisors, sn, sm);
    const int m0 = (Cfg::CLUSTER_M == 2 ? 2 * sm + rank : sm) * Cfg::BM;
    const int n0 = (Cfg::CLUSTER_N == 2 ? 2 * sn + rank : sn) * Cfg::BN;
    return SWAP ? Tile{m0, n0} : Tile{n0, m0};
  }

  // The workers of the schedule are clusters (or CTAs).
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_of(const Grid& g, int workers) {
    return schedule::make_work(SCHEDULE, g.super_m * g.super_n, g.k_blocks, workers, Cfg::SPLITS);
  }

  // What the schedule needs in shared memory before it starts (nothing: the grouped tiles' table).
  GEMMTUNE_DEVICE_INLINE static void prepare(const WgmmaArgs&, const Smem&) {}
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_of(const WgmmaArgs& args, const Smem&,
                                                       int workers) {
    return work_of(grid_of(args), workers);
  }
  // Super tile `st`'s tile for CTA `rank` of the cluster.
  GEMMTUNE_DEVICE_INLINE static Tile tile_at(const WgmmaArgs& args, const Smem&, int st, int rank) {
    return tile_of(st, rank, grid_of(args));
  }

  // The schedule read from shared memory, its mode a constant so that unused modes fold away.
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_in(const Smem& s) {
    schedule::Work w = *s.work;
    w.mode = SCHEDULE;
    return w;
  }

  GEMMTUNE_DEVICE_INLINE static KRange k_range(const schedule::Segment& seg, int kpart) {
    const int n = seg.k_end - seg.k_begin;
    return {seg.k_begin + (kpart * n + CLUSTER_K - 1) / CLUSTER_K,
            seg.k_begin + ((kpart + 1) * n + CLUSTER_K - 1) / CLUSTER_K};
  }

  // Which 64*MW rows of a tile consumer warpgroup `consumer` computes (ping-pong: all of them).
  GEMMTUNE_DEVICE_INLINE static int rows_of(int consumer) { return PINGPONG ? 0 : consumer; }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
