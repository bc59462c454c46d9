// The epilogue of a wgmma_sm90 tile: TMA stores (store_tma.cuh) where the kernel has them and C
// and D allow them, else stores from registers (store_registers.cuh); and how C is read with
// beta != 0.
#pragma once
#include "ptx/tma.cuh"
#include "wgmma_sm90/store_gated.cuh"
#include "wgmma_sm90/store_registers.cuh"
#include "wgmma_sm90/store_tma.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct Epilogue : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::MW;
  using T::READS_C;
  using T::TMA_STORE;
  using T::TN;
  using Smem = SharedMemory<Cfg>;
  using RegisterStore = wgmma_sm90::RegisterStore<Cfg>;
  using TmaStore = wgmma_sm90::TmaStore<Cfg>;
  using GatedStore = wgmma_sm90::GatedStore<Cfg>;

  // D's map was made (D aligned), C's where C is read, the pre-activation's where it is kept.
  GEMMTUNE_DEVICE_INLINE static bool stores_by_tma(const WgmmaArgs& args) {
    const unsigned made = args.core.flags;
    return TMA_STORE && (made & WGMMA_MAP_D_MADE) &&
           ((made & WGMMA_MAP_C_MADE) || T::beta_of(args) == 0.0f) &&
           (!EpilogueOp<Cfg>::AUX || (made & WGMMA_MAP_AUX_MADE));
  }
  // beta != 0: C is read, by TMA (TmaStore::store) or from registers (RegisterStore::store).
  GEMMTUNE_DEVICE_INLINE static bool loads_c_by_tma(const WgmmaArgs& args) {
    return stores_by_tma(args) && T::beta_of(args) != 0.0f;
  }
  GEMMTUNE_DEVICE_INLINE static bool loads_c_by_threads(const WgmmaArgs& args) {
    return !stores_by_tma(args) && T::beta_of(args) != 0.0f;
  }

  // What the epilogue loads as the tile's main loop begins: TMA stores' bias along M.
  using Ahead = typename TmaStore::StagedBias;

  // c_early: C's first chunks were asked for during the tile's main loop (TmaStore::fetch_c).
  GEMMTUNE_DEVICE_INLINE static void store(const WgmmaArgs& args, const Smem& s, Tile t,
                                           int consumer, const float (&acc)[MW][TN / 2],
                                           const Ahead& ahead, u32& c_phases, bool c_early,
                                           int kpart = 0) {
    if constexpr (T::GATED) {
      GatedStore::store(args, t, consumer, acc);  // no C, no TMA stores (the family's rules)
    } else {
      if constexpr (TMA_STORE) {
        if (stores_by_tma(args) && TmaStore::stays_in_group(args, t, consumer)) {
          if constexpr (READS_C)
            if (args.core.beta != 0.0f)
              return TmaStore::template store<true>(args, s, t, consumer, acc, ahead, c_phases,
                                                    c_early);
          return TmaStore::template store<false>(args, s, t, consumer, acc, ahead, c_phases, false);
        }
      }
      RegisterStore::store(args, t, consumer, acc, kpart);
    }
  }

  // Before the CTA exits, its TMA stores must have read their shared memory.
  GEMMTUNE_DEVICE_INLINE static void finish_stores(const WgmmaArgs& args) {
    if (stores_by_tma(args) && threadIdx.x % 128 == 0) ptx::bulk_wait();
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
