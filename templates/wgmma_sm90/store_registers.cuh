// The epilogue that stores a tile from registers: C = alpha * acc + beta * C, each thread its own
// values (store16.cuh's accessors), with C fetched into L2 as the tile's main loop begins.
#pragma once
#include "ptx/tma.cuh"
#include "store16.cuh"
#include "wgmma_sm90/cluster_k.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct RegisterStore : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::CLUSTER_K;
  using T::MW;
  using T::STORE_BATCH;
  using T::SWAP;
  using T::TN;
  using H = Half16<Cfg::DTYPE>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  using ClusterK = wgmma_sm90::ClusterK<Cfg>;

  // Where kernel element (r, c) sits in C: kernel rows are n (columns of C), or m with SWAP.
  GEMMTUNE_DEVICE_INLINE static u16* c_at(const WgmmaArgs& args, int r, int c) {
    u16* C = reinterpret_cast<u16*>(args.core.c);
    return SWAP ? C + r + (long long)c * args.core.ldc : C + c + (long long)r * args.core.ldc;
  }

  // The end of the tile's columns of C (problem n): a grouped problem's group ends before n.
  GEMMTUNE_DEVICE_INLINE static int n_end(const WgmmaArgs& args, Tile t) {
    return min(args.core.n, t.n_end);
  }

  // beta != 0, stores from registers: the consumer warpgroup fetches its part of C's tile into
  // L2 as its main loop begins, a 128-byte line a thread in turn (one more line a column, for a
  // column that does not start on a line), so that the epilogue's loads wait for L2.
  GEMMTUNE_DEVICE_INLINE static void prefetch_c_lines(const WgmmaArgs& args, Tile t, int consumer) {
    constexpr int ROWS = 64 * MW;              // the consumer's kernel rows
    constexpr int COLUMNS = SWAP ? TN : ROWS;  // the columns of C they span
    constexpr int SPAN = SWAP ? ROWS : TN;     // and the values of each, contiguous
    constexpr int LINES = SPAN / 64 + 1;
    const int rows_end = SWAP ? args.core.m : n_end(args, t),
              cols_end = SWAP ? n_end(args, t) : args.core.m;
    const int r0 = t.row0 + Tiles::rows_of(consumer) * ROWS;
    for (int i = threadIdx.x % 128; i < COLUMNS * LINES; i += 128) {
      const int column = i / LINES, e = min(i % LINES * 64, SPAN - 1);
      const int r = SWAP ? r0 + e : r0 + column, c = SWAP ? t.col0 + column : t.col0 + e;
      if (r < rows_end && c < cols_end) ptx::prefetch_l2(c_at(args, r, c));
    }
  }

  // With SWAP, kernel row r's pair j (columns c0 + 8j, + 1) sits in two columns of C: read (low
  // half first) and written one value at a time, those past `cols_end` not at all.
  struct AcrossPairs {
    const WgmmaArgs& args;
    int r, c0, cols_end;
    GEMMTUNE_DEVICE_INLINE u32 read(int j) const {
      const int c = c0 + 8 * j;
      const u32 lo = c < cols_end ? *c_at(args, r, c) : 0,
                hi = c + 1 < cols_end ? *c_at(args, r, c + 1) : 0;
      return lo | hi << 16;
    }
    GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
      const int c = c0 + 8 * j;
      if (c < cols_end) *c_at(args, r, c) = H::from_f32(v0);
      if (c + 1 < cols_end) *c_at(args, r, c + 1) = H::from_f32(v1);
    }
    GEMMTUNE_DEVICE_INLINE void update(int j, float v0, float v1, float beta) const {
      const int c = c0 + 8 * j;
      if (c < cols_end) update_one<Cfg::DTYPE>(c_at(args, r, c), v0, beta);
      if (c + 1 < cols_end) update_one<Cfg::DTYPE>(c_at(args, r, c + 1), v1, beta);
    }
  };

  // Kernel row r's pairs from column c0 on (store16.cuh's accessors): across two columns of C
  // with SWAP, else neighbours along m in one, 4-byte aligned or not (with an odd ldc, every
  // other column is).
  GEMMTUNE_DEVICE_INLINE static auto row_pairs(const WgmmaArgs& args, int r, int c0, int cols_end) {
    if constexpr (SWAP) {
      return AcrossPairs{args, r, c0, cols_end};
    } else {
      u16* column = c_at(args, r, 0);
      return ColumnPairs<Cfg::DTYPE>{column, c0, args.core.m,
                                     (reinterpret_cast<u64>(column) & 3) == 0};
    }
  }

  // Thread t of a warpgroup holds kernel rows 16*(t/32) + (t%32)/4 (+8) and column pairs
  // 8j + 2(t%4) of each 64-row block: C = alpha * acc + beta * C (store16.cuh).
  // With CLUSTER_K, only the 8-column groups this CTA owns (kpart: its rank).
  // beta != 0: a thread of a small tile reads all its old values of C before writing any (one
  // memory latency for the tile); of a larger one, STORE_BATCH pairs of a row at a time.
  GEMMTUNE_DEVICE_INLINE static void store(const WgmmaArgs& args, Tile t, int consumer,
                                           const float (&acc)[MW][TN / 2], int kpart) {
    // (A cluster of four has the most partial sums in registers: 16 pairs ahead spilled there.)
    constexpr bool ALL_AHEAD = STORE_BATCH > 1 && MW * 2 * (TN / 8) <= (CLUSTER_K == 4 ? 8 : 32);
    const int lane = threadIdx.x % 128;
    const int columns_end = n_end(args, t);
    const int rows_end = SWAP ? args.core.m : columns_end;
    const int c0 = t.col0 + 2 * (lane % 4);
    const float alpha = args.core.alpha, beta = T::beta_of(args);
    auto row_of = [&](int mb, int h) {
      return t.row0 + (Tiles::rows_of(consumer) * MW + mb) * 64 + 16 * (lane / 32) +
             (lane % 32) / 4 + 8 * h;
    };
    auto skip = [&](int j) { return CLUSTER_K > 1 && ClusterK::owner_of(j) != kpart; };
    u32 old[ALL_AHEAD ? MW : 1][2][ALL_AHEAD ? TN / 8 : 1];
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
          v0 = alpha * acc[mb][4 * j + 2 * h];
          v1 = alpha * acc[mb][4 * j + 2 * h + 1];
        };
        if constexpr (ALL_AHEAD) {
          const auto at = row_pairs(args, r, c0, columns_end);
#pragma unroll
          for (int j = 0; j < TN / 8; ++j) {
            if (skip(j)) continue;
            float v0, v1;
            value(j, v0, v1);
            if (beta != 0.0f) add_scaled<Cfg::DTYPE>(old[mb][h][j], beta, v0, v1);
            at.write(j, v0, v1);
          }
        } else {
          store_pairs<Cfg::DTYPE, TN / 8, STORE_BATCH>(row_pairs(args, r, c0, columns_end), beta,
                                                       value, skip);
        }
      }
    }
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
