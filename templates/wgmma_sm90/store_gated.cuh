// The epilogue of a gated problem (SwiGLU, GeGLU: epilogue_op.cuh's GATE): D = act(gate) * up,
// stored from registers. A tile's rows of op(A) arrive as 64 gate rows, then the same 64 rows of
// the up part (mainloop.cuh, load_gated), so that a thread holds both values of each of its
// outputs: without SWAP (kernel columns are m) pair j's up value is pair j + 8's; with SWAP
// (kernel rows are m, two 64-row blocks a consumer) block 0's is block 1's. D has half of op(A)'s
// rows: kernel m-index c of a gate row is D's row (c / 128) 64 + c % 64.
#pragma once
#include "epilogue_op.cuh"
#include "store_pairs.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct GatedStore : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::MW;
  using T::SWAP;
  using T::TN;
  using O = Output<Cfg::DTYPE>;
  using Out = typename O::Elem;
  using Epi = EpilogueOp<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  static_assert(!SWAP || MW == 2, "a gated tile's consumer holds a gate block and an up block");
  static_assert(SWAP || TN % 128 == 0, "a gated tile's columns are 64 gate, 64 up, in turn");

  // D's row of a gate row's kernel m-index.
  GEMMTUNE_DEVICE_INLINE static int d_row(int c) { return (c >> 7) * 64 + (c & 63); }

  // act(alpha * gate + its bias) * (alpha * up + its bias) of D's element (i, n).
  GEMMTUNE_DEVICE_INLINE static float gated(const GemmCore& core, float gate, float up, int i,
                                            int n) {
    return Epi::template gated<Cfg::DTYPE>(core, core.alpha * gate, core.alpha * up, i, n);
  }

  GEMMTUNE_DEVICE_INLINE static void store(const WgmmaArgs& args, Tile t, int consumer,
                                           const float (&acc)[MW][TN / 2]) {
    const int lane = threadIdx.x % 128;
    const int rows = args.core.m / 2;  // D's
    const int columns_end = min(args.core.n, t.n_end);
    Out* D = reinterpret_cast<Out*>(args.core.d);
    const long long ld = args.core.ldc;
    const int first_row = 16 * (lane / 32) + (lane % 32) / 4;  // the thread's, of a 64-row block
    if constexpr (SWAP) {
      // Kernel rows are m (block 0 gate, block 1 up), columns n: pairs c0 + 8j, + 1.
      const int c0 = t.col0 + 2 * (lane % 4);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = d_row(t.row0 + Tiles::rows_of(consumer) * 128 + first_row + 8 * h);
        if (i >= rows) continue;
#pragma unroll
        for (int j = 0; j < TN / 8; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int n = c0 + 8 * j + e, a = 4 * j + 2 * h + e;
            if (n < columns_end)
              D[i + n * ld] = O::from_f32(gated(args.core, acc[0][a], acc[1][a], i, n));
          }
      }
    } else {
      // Kernel rows are n, columns m: pair j at c0 + 8j, its up values at pair j + 8.
      const int c0 = t.col0 + 2 * (lane % 4);
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int n = t.row0 + (Tiles::rows_of(consumer) * MW + mb) * 64 + first_row + 8 * h;
          if (n >= columns_end) continue;
          Out* column = D + n * ld;
#pragma unroll
          for (int j = 0; j < TN / 8; ++j) {
            if ((j / 8) % 2 != 0) continue;  // an up pair, taken with its gate pair
            const int i = d_row(c0 + 8 * j), g = 4 * j + 2 * h, u = g + 32;
            const ColumnPairs<Cfg::DTYPE> at{nullptr, column, i, rows,
                                             pairs_aligned<Cfg::DTYPE>(column, column)};
            at.write(0, gated(args.core, acc[mb][g], acc[mb][u], i, n),
                     gated(args.core, acc[mb][g + 1], acc[mb][u + 1], i + 1, n));
          }
        }
    }
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
