// The warp-specialized, persistent schedule (WS = 1): warpgroup 0 produces (one thread issues
// the TMA loads of every stage), warpgroups 1..WG consume; each CTA (or cluster) works through
// its segments of the tile schedule (schedule.h), a tile's epilogue overlapping the next tile's
// loads. With PINGPONG, the two consumers take whole tiles in turn.
#pragma once
#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "schedule.h"
#include "wgmma_sm90/cluster_k.cuh"
#include "wgmma_sm90/epilogue.cuh"
#include "wgmma_sm90/groups.cuh"
#include "wgmma_sm90/mainloop.cuh"
#include "wgmma_sm90/parts.cuh"
#include "wgmma_sm90/promotion.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct WarpSpecialized : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::CLUSTER;
  using T::CLUSTER_CTAS;
  using T::CLUSTER_K;
  using T::CONSUMER_REGS;
  using T::CTAS_PER_SM;
  using T::MW;
  using T::PINGPONG;
  using T::PRODUCER_REGS;
  using T::REALLOCATE;
  using T::ROW_WG;
  using T::STAGES;
  using T::SWAP;
  using T::TMA_STORE;
  using T::TN;
  using T::TURN_BARRIER;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::TilesOf<Cfg>;
  using Mainloop = wgmma_sm90::Mainloop<Cfg>;
  // The tile's main loop: float8 tiles promote their partial sums and apply scales
  // (promotion.cuh).
  using Math = typename Select<T::FP8, Promotion<Cfg>, Mainloop>::type;
  using Parts = wgmma_sm90::Parts<Cfg>;
  using ClusterK = wgmma_sm90::ClusterK<Cfg>;
  using Epilogue = wgmma_sm90::Epilogue<Cfg>;
  using TmaStore = wgmma_sm90::TmaStore<Cfg>;
  using RegisterStore = wgmma_sm90::RegisterStore<Cfg>;

  // The consumers' loops run over warp-uniform bounds (common.cuh, warp_uniform), so that ptxas
  // keeps their state and descriptors in uniform registers (docs/PERF.md, 'Loop state read as
  // uniform keeps descriptors uniform'); ping-pong's skipped stages too, or the ring's stage is
  // per-thread. Grouped float8 experts ran 2-11% slower so: they keep their loops.
  template <class V>
  GEMMTUNE_DEVICE_INLINE static V loop_bound(V v) {
    if constexpr (T::GROUPED && T::FP8)
      return v;
    else
      return warp_uniform(v);
  }

  GEMMTUNE_DEVICE_INLINE static void produce(const WgmmaArgs& args, const Smem& s, int worker,
                                             int rank, int kpart) {
    const u64 policy = SWAP ? ptx::l2_evict_first_policy() : 0;
    const bool with_c = Epilogue::loads_c_by_tma(args);
    u32 free_phases = 0;
    Ring<STAGES> ring;
    for (int i = 0; schedule::has_segment(Tiles::work_in(s), worker, i); ++i) {
      const schedule::Segment seg = schedule::segment(Tiles::work_in(s), worker, i);
      const Tile t = Tiles::tile_at(args, s, seg.tile, rank);
      const KRange ks = Tiles::k_range(seg, kpart);
      const int c_kb = TmaStore::c_block(ks);
      if (TMA_STORE && with_c && i > 0) TmaStore::prefetch_c(args, t);
      if (TMA_STORE && with_c && c_kb < ks.begin)
        TmaStore::fetch_c(args, s, t, seg, i, free_phases);
      for (int kb = ks.begin; kb < ks.end; ++kb) {
        ptx::mbarrier_wait(&s.empty[ring.stage], ring.phase ^ 1);
        Mainloop::load_stage(args, s, ring.stage, t, kb, rank, policy);
        if constexpr (T::STAGED_SCALES) Math::load_scales(args, s, ring.stage, t, kb);
        if (TMA_STORE && with_c && kb == c_kb) TmaStore::fetch_c(args, s, t, seg, i, free_phases);
        ring.advance();
      }
    }
    // With multicast, the other CTA's consumers arrive on this CTA's barriers, and this CTA's
    // copies land in the other's stages: once every stage has been released by both CTAs'
    // consumers, neither is left, and this CTA may exit.
    if constexpr (CLUSTER > 1)
      for (int i = 0; i < STAGES; ++i) {
        ptx::mbarrier_wait(&s.empty[ring.stage], ring.phase ^ 1);
        ring.advance();
      }
  }

  GEMMTUNE_DEVICE_INLINE static void consume(const WgmmaArgs& args, const Smem& s, int worker,
                                             int rank, int kpart, int consumer) {
    float acc[MW][TN / 2];
    Ring<STAGES> ring;
    // beta != 0 with TMA stores: C's first chunks come in while a whole tile's main loop runs
    // (one in parts runs its epilogue only if it is the last part); `c_phases` (TmaStore::store).
    const bool with_c = Epilogue::loads_c_by_tma(args);
    bool c_early = false;
    u32 c_phases = 0;
    // Counted once (unlike the producer, whose first load waits for its loop's condition): the
    // consumers wait for the first stage anyway, and a count is one register through the loop.
    const int count = loop_bound(schedule::segments(Tiles::work_in(s), worker));
    // The other CTAs' barriers are made (SharedMemory::init) before this one first writes into
    // them (ClusterK::exchange). Waited for here, where the first stage is still on its way:
    // after the main loop the wait took ~180 cycles.
    if constexpr (CLUSTER_K > 1) ptx::cluster_wait();
    for (int i = 0; i < count; ++i) {
      if (PINGPONG && i % 2 != consumer) {  // the other warpgroup's turn: skip its stages
        const schedule::Segment seg = schedule::segment(Tiles::work_in(s), worker, i);
        const KRange skipped = loop_bound(KRange{seg.k_begin, seg.k_end});
        for (int kb = skipped.begin; kb < skipped.end; ++kb) ring.advance();
        continue;
      }
      // Ping-pong: this main loop starts once the other warpgroup's has waited for all its
      // stages. A full barrier's parity names its phase only while the waiter is at most one
      // phase behind; a warpgroup that skipped a long segment would be further ahead.
      if (PINGPONG && i > 0) ptx::named_barrier(TURN_BARRIER + consumer, 256);
      int previous = -1;
      // Stored from registers, a tile needs its place before its first store: it is worked out
      // here, while the first stage is on its way (after the main loop it delayed the stores by
      // ~350 cycles). TMA stores need it only once the tile is in shared memory, and the compiler
      // works it out between those writes (here it made 8192x8192x1024, 16 tiles a CTA, 0.7-1.0%
      // slower); two CTAs an SM have no two registers to spare through the main loop.
      constexpr bool KEEP_TILE = !TMA_STORE && CTAS_PER_SM == 1;
      Tile tile{};
      typename Epilogue::Ahead ahead;  // loaded with the tile, read by its epilogue
      if constexpr (KEEP_TILE) {
        tile = Tiles::tile_at(args, s, schedule::segment(Tiles::work_in(s), worker, i).tile, rank);
        Tiles::keep_here(tile);
      }
      if (Epilogue::loads_c_by_threads(args)) {
        const schedule::Segment seg = schedule::segment(Tiles::work_in(s), worker, i);
        RegisterStore::prefetch_c_lines(
            args, KEEP_TILE ? tile : Tiles::tile_at(args, s, seg.tile, rank), consumer);
      }
      {
        const KRange ks =
            loop_bound(Tiles::k_range(schedule::segment(Tiles::work_in(s), worker, i), kpart));
        if (CLUSTER_K > 1 && ks.begin == ks.end)
          Mainloop::zero(acc);  // fewer k-blocks than CTAs: adds nothing
        // The producer loads C's first chunks once the buffers are free (fetch_c): a test in this
        // loop costs 3-6% (docs/PERF.md, 'A test in the main loop of the consumers costs 3-6%').
        if (TMA_STORE && with_c) {
          c_early = schedule::segment(Tiles::work_in(s), worker, i).parts == 1;
          if (c_early) TmaStore::free_c_buffers(s, consumer);
        }
        // The tile only where the main loop reads it (float8 block scales); unused, it is not
        // worked out.
        const Tile loop_tile =
            KEEP_TILE ? tile
                      : Tiles::tile_at(args, s,
                                       schedule::segment(Tiles::work_in(s), worker, i).tile, rank);
        ahead.load(args, loop_tile);
        previous = Math::consume(args, s, loop_tile, ks, consumer, ring, acc);
      }
      if (PINGPONG && i + 1 < count)
        ptx::named_barrier_arrive(TURN_BARRIER + 1 - consumer, 256);  // its turn
      Mainloop::template drain<0>(acc);
      if (previous >= 0) Mainloop::release(s, previous);
      // The segment again rather than kept in registers through the main loop.
      const schedule::Segment seg = schedule::segment(Tiles::work_in(s), worker, i);
      if constexpr (CLUSTER_K > 1) ClusterK::exchange(s, kpart, consumer, i, i + 1 < count, acc);
      if (seg.parts == 1 || Parts::reduce(args, s, Tiles::work_in(s), seg, rank, consumer, acc))
        Epilogue::store(args, s, KEEP_TILE ? tile : Tiles::tile_at(args, s, seg.tile, rank),
                        consumer, acc, ahead, c_phases, c_early, kpart);
    }
    Epilogue::finish_stores(args);
  }

  GEMMTUNE_DEVICE_INLINE static void run(const WgmmaArgs& args, const Smem& s) {
    const int cta = CLUSTER_CTAS > 1 ? int(ptx::cluster_ctarank()) : 0;
    const int rank = CLUSTER_K > 1 ? 0 : cta;   // place in a pair that shares loads
    const int kpart = CLUSTER_K > 1 ? cta : 0;  // share of each tile's k-blocks
    const int worker = blockIdx.x / CLUSTER_CTAS;
    Tiles::prepare(args, s);
    Smem::init(s, ROW_WG * CLUSTER, Tiles::work_of(args, s, gridDim.x / CLUSTER_CTAS), kpart);
    const int warpgroup = loop_bound(int(threadIdx.x / 128));
    if (warpgroup == 0) {
      if (REALLOCATE) ptx::setmaxnreg_dec<PRODUCER_REGS>();
      if (threadIdx.x == 0) produce(args, s, worker, rank, kpart);
      if constexpr (CLUSTER_K > 1) {
        __syncwarp();
        ptx::cluster_wait();
      }
    } else {
      if (REALLOCATE) ptx::setmaxnreg_inc<CONSUMER_REGS>();
      consume(args, s, worker, rank, kpart, warpgroup - 1);
    }
    // No CTA may leave while another can still write into it or arrive on its barriers; no
    // cluster barrier is needed for that (it cost about 1300 cycles at the end): the producer
    // waits until both CTAs of a pair that multicast have released every stage (produce), and
    // CTAs that split K have received every push before they leave, and every arrival but
    // after the last round, which is not made (ClusterK::exchange).
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
