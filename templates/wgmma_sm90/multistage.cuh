// The multistage schedule (WS = 0): one tile per CTA. Every warpgroup computes; one thread keeps
// STAGES-1 loads in flight, refilling each stage once every warpgroup is done with it.
#pragma once
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "wgmma_sm90/epilogue.cuh"
#include "wgmma_sm90/mainloop.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct Multistage : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::MW;
  using T::STAGES;
  using T::SWAP;
  using T::TMA_STORE;
  using T::TN;
  using T::WG;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  using Mainloop = wgmma_sm90::Mainloop<Cfg>;
  using Epilogue = wgmma_sm90::Epilogue<Cfg>;
  using TmaStore = wgmma_sm90::TmaStore<Cfg>;
  using RegisterStore = wgmma_sm90::RegisterStore<Cfg>;

  GEMMTUNE_DEVICE_INLINE static void run(const WgmmaArgs& args, const Smem& s) {
    const Grid g = Tiles::grid_of(args);
    const int k_blocks = g.k_blocks;
    const Tile t = Tiles::tile_of(blockIdx.x, 0, g);
    Smem::init(s, WG, Tiles::work_of(g, 1));
    const bool issuer = threadIdx.x == 0;
    const u64 policy = SWAP && issuer ? ptx::l2_evict_first_policy() : 0;
    if (issuer) {
      if (TMA_STORE && Epilogue::loads_c_by_tma(args)) TmaStore::prefetch_c(args, t);
      for (int kb = 0; kb < STAGES - 1 && kb < k_blocks; ++kb)
        Mainloop::load_stage(args, s, kb, t, kb, 0, policy);
    }
    const int consumer = threadIdx.x / 128;
    if (Epilogue::loads_c_by_threads(args)) RegisterStore::prefetch_c_lines(args, t, consumer);
    float acc[MW][TN / 2];
    typename Epilogue::Ahead ahead;
    ahead.load(args, t);
    const typename Mainloop::Descriptors d = Mainloop::descriptors(s, consumer);
    for (int kb = 0; kb < k_blocks; ++kb) {
      const int stage = kb % STAGES;
      ptx::mbarrier_wait(&s.full[stage], (kb / STAGES) & 1);
      __syncwarp();
      Mainloop::issue(d, stage, kb == 0, acc);
      Mainloop::template drain<1>(acc);  // the previous stage's group is done: release it
      if (kb > 0) Mainloop::release(s, (kb - 1) % STAGES);
      // Refill the stage used one step ago, once every warpgroup is done with it.
      const int next = kb + STAGES - 1;
      if (issuer && next < k_blocks) {
        const int refill = next % STAGES;
        if (kb > 0) ptx::mbarrier_wait(&s.empty[refill], ((kb - 1) / STAGES) & 1);
        Mainloop::load_stage(args, s, refill, t, next, 0, policy);
      }
      __syncwarp();
    }
    Mainloop::template drain<0>(acc);
    u32 c_phases = 0;
    Epilogue::store(args, s, t, consumer, acc, ahead, c_phases, false);
    Epilogue::finish_stores(args);
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
