// The epilogue that stores a tile from registers: D = act(alpha * acc + beta * C + bias), each
// thread its own values (store_pairs.cuh's accessors, epilogue_op.cuh's arithmetic), with C
// fetched into L2 as the tile's main loop begins.
#pragma once
#include "epilogue_op.cuh"
#include "ptx/tma.cuh"
#include "store_pairs.cuh"
#include "wgmma_sm90/cluster_k.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct RegisterStore : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::CLUSTER_K;
  using T::F32_OUT;
  using T::MW;
  using T::STORE_BATCH;
  using T::SWAP;
  using T::TN;
  using O = Output<Cfg::DTYPE>;
  using Out = typename O::Elem;  // an element of C and D
  using Epi = EpilogueOp<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  using ClusterK = wgmma_sm90::ClusterK<Cfg>;

  // Where kernel element (r, c) sits in a matrix of C's leading dimension (C, or D): kernel rows
  // are n (columns of C), or m with SWAP.
  GEMMTUNE_DEVICE_INLINE static long long offset_of(const WgmmaArgs& args, int r, int c) {
    return SWAP ? r + (long long)c * args.core.ldc : c + (long long)r * args.core.ldc;
  }
  GEMMTUNE_DEVICE_INLINE static const Out* c_at(const WgmmaArgs& args, int r, int c) {
    return reinterpret_cast<const Out*>(args.core.c) + offset_of(args, r, c);
  }
  GEMMTUNE_DEVICE_INLINE static Out* d_at(const WgmmaArgs& args, int r, int c) {
    return reinterpret_cast<Out*>(args.core.d) + offset_of(args, r, c);
  }

  // alpha * the accumulator of kernel element (r, c), plus its bias.
  GEMMTUNE_DEVICE_INLINE static float value_at(const WgmmaArgs& args, float acc, int r, int c) {
    return Epi::template add_bias<Cfg::DTYPE>(args.core.alpha * acc, args.core, SWAP ? r : c,
                                              SWAP ? c : r);
  }

  // The end of the tile's columns of C (problem n): a grouped problem's group ends before n.
  GEMMTUNE_DEVICE_INLINE static int n_end(const WgmmaArgs& args, Tile t) {
    return min(args.core.n, t.n_end);
  }

  // beta != 0, stores from registers: the consumer warpgroup fetches its part of C's tile into
  // L2 as its main loop begins, a 128-byte line a thread in turn (one more line a column, for a
  // column that does not start on a line), so that the epilogue's loads wait for L2.
  GEMMTUNE_DEVICE_INLINE static void prefetch_c_lines(const WgmmaArgs& args, Tile t, int consumer) {
    constexpr int ROWS = 64 * MW;                 // the consumer's kernel rows
    constexpr int COLUMNS = SWAP ? TN : ROWS;     // the columns of C they span
    constexpr int SPAN = SWAP ? ROWS : TN;        // and the values of each, contiguous
    constexpr int LINE = 128 / int(sizeof(Out));  // values a line: 64 16-bit ones, 32 f32
    constexpr int LINES = SPAN / LINE + 1;
    const int rows_end = SWAP ? args.core.m : n_end(args, t),
              cols_end = SWAP ? n_end(args, t) : args.core.m;
    const int r0 = t.row0 + Tiles::rows_of(consumer) * ROWS;
    for (int i = threadIdx.x % 128; i < COLUMNS * LINES; i += 128) {
      const int column = i / LINES, e = min(i % LINES * LINE, SPAN - 1);
      const int r = SWAP ? r0 + e : r0 + column, c = SWAP ? t.col0 + column : t.col0 + e;
      if (r < rows_end && c < cols_end) ptx::prefetch_l2(c_at(args, r, c));
    }
  }

  // With SWAP, kernel row r's pair j (columns c0 + 8j, + 1) sits in two columns of C: read (low
  // half first) and written one value at a time, those past `cols_end` not at all.
  struct AcrossPairs {
    const WgmmaArgs& args;
    int r, c0, cols_end;
    GEMMTUNE_DEVICE_INLINE typename O::Pair read(int j) const {
      const int c = c0 + 8 * j;
      return O::pair_of(c < cols_end ? *c_at(args, r, c) : Out(0),
                        c + 1 < cols_end ? *c_at(args, r, c + 1) : Out(0));
    }
    GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
      const int c = c0 + 8 * j;
      if (c < cols_end) *d_at(args, r, c) = O::from_f32(v0);
      if (c + 1 < cols_end) *d_at(args, r, c + 1) = O::from_f32(v1);
    }
    GEMMTUNE_DEVICE_INLINE void keep(int j, float v0, float v1) const {
      const int c = c0 + 8 * j;
      if (c < cols_end) *Epi::aux_at(args.core, d_at(args, r, c)) = O::from_f32(v0);
      if (c + 1 < cols_end) *Epi::aux_at(args.core, d_at(args, r, c + 1)) = O::from_f32(v1);
    }
  };

  // Kernel row r's pairs from column c0 on (store_pairs.cuh's accessors): across two columns of
  // C with SWAP, else neighbours along m in one, aligned for a pair or not (with an odd ldc,
  // every other column is).
  GEMMTUNE_DEVICE_INLINE static auto row_pairs(const WgmmaArgs& args, int r, int c0, int cols_end) {
    if constexpr (SWAP) {
      return AcrossPairs{args, r, c0, cols_end};
    } else {
      const Out* in = c_at(args, r, 0);
      Out* out = d_at(args, r, 0);
      Out* aux = Epi::aux_at(args.core, out);
      return ColumnPairs<Cfg::DTYPE>{
          in, out, c0, args.core.m, pairs_aligned<Cfg::DTYPE>(in, out, aux), aux};
    }
  }

  // Thread t of a warpgroup holds kernel rows 16*(t/32) + (t%32)/4 (+8) and column pairs
  // 8j + 2(t%4) of each 64-row block: D = act(alpha * acc + beta * C + bias) (store_pairs.cuh).
  // With CLUSTER_K, only the 8-column groups this CTA owns (kpart: its rank).
  // beta != 0: a thread of a small tile reads all its old values of C before writing any (one
  // memory latency for the tile); of a larger one, STORE_BATCH pairs of a row at a time.
  GEMMTUNE_DEVICE_INLINE static void store(const WgmmaArgs& args, Tile t, int consumer,
                                           const float (&acc)[MW][TN / 2], int kpart) {
    // At most 32 registers of old values, an f32 pair taking two. (A cluster of four has the most
    // partial sums in registers: 16 pairs ahead spilled there.)
    constexpr bool ALL_AHEAD =
        STORE_BATCH > 1 && MW * 2 * (TN / 8) * (F32_OUT ? 2 : 1) <= (CLUSTER_K == 4 ? 8 : 32);
    const int lane = threadIdx.x % 128;
    const int columns_end = n_end(args, t);
    const int rows_end = SWAP ? args.core.m : columns_end;
    const int c0 = t.col0 + 2 * (lane % 4);
    const float beta = T::beta_of(args);
    auto row_of = [&](int mb, int h) {
      return t.row0 + (Tiles::rows_of(consumer) * MW + mb) * 64 + 16 * (lane / 32) +
             (lane % 32) / 4 + 8 * h;
    };
    auto skip = [&](int j) { return CLUSTER_K > 1 && ClusterK::owner_of(j) != kpart; };
    typename O::Pair old[ALL_AHEAD ? MW : 1][2][ALL_AHEAD ? TN / 8 : 1];
    if (ALL_AHEAD && beta != 0.0f) {
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row_of(mb, h);
          if (r >= rows_end) continue;
          const auto at = row_pairs(args, r, c0, columns_end);
#pragma unroll
          for (int j = 0; j < TN / 8; ++j)
            if (!skip(j)) old[ALL_AHEAD ? mb : 0][h][ALL_AHEAD ? j : 0] = at.read(j);
        }
    }
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = row_of(mb, h);
        if (r >= rows_end) continue;
        auto value = [&](int j, float& v0, float& v1) {
          const int c = c0 + 8 * j;
          v0 = value_at(args, acc[mb][4 * j + 2 * h], r, c);
          v1 = value_at(args, acc[mb][4 * j + 2 * h + 1], r, c + 1);
        };
        const auto at = row_pairs(args, r, c0, columns_end);
        if constexpr (ALL_AHEAD) {
#pragma unroll
          for (int j = 0; j < TN / 8; ++j) {
            if (skip(j)) continue;
            float v0, v1;
            value(j, v0, v1);
            if (beta != 0.0f) add_scaled<Cfg::DTYPE>(old[mb][h][j], beta, v0, v1);
            Epi::finish(at, j, v0, v1);
            at.write(j, v0, v1);
          }
        } else {
          store_pairs<Cfg::DTYPE, TN / 8, STORE_BATCH, Epi>(at, beta, value, skip);
        }
      }
    }
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
