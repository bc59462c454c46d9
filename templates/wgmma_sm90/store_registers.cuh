// The epilogue that stores a tile from registers: C = alpha * acc + beta * C, each thread its own
// values (store16.cuh's accessors for f16 and bf16, f32_out's below for f32), with C fetched into
// L2 as the tile's main loop begins.
#pragma once
#include "ptx/tma.cuh"
#include "store16.cuh"
#include "wgmma_sm90/cluster_k.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// store16.cuh's accessors for an f32 C (float8 operands): a thread's two neighbouring values
// along m move as one float2, an 8-byte access where the column starts 8-byte aligned (with an
// odd ldc, every other column), else one value at a time.
namespace f32_out {

// column[m] and column[m + 1]; rows at or below `rows` read as zero. m is even.
GEMMTUNE_DEVICE_INLINE float2 read_pair(const float* column, int m, int rows, bool pairs) {
  if (pairs && m + 1 < rows) return *reinterpret_cast<const float2*>(column + m);
  return make_float2(m < rows ? column[m] : 0.0f, m + 1 < rows ? column[m + 1] : 0.0f);
}

// column[m] = v0 and column[m + 1] = v1, for the rows below `rows`.
GEMMTUNE_DEVICE_INLINE void write_pair(float* column, int m, int rows, bool pairs, float v0,
                                       float v1) {
  if (pairs && m + 1 < rows) {
    *reinterpret_cast<float2*>(column + m) = make_float2(v0, v1);
  } else {
    if (m < rows) column[m] = v0;
    if (m + 1 < rows) column[m + 1] = v1;
  }
}

// v0 += beta * old.x, v1 += beta * old.y.
GEMMTUNE_DEVICE_INLINE void add_scaled(float2 old, float beta, float& v0, float& v1) {
  v0 = fmaf(beta, old.x, v0);
  v1 = fmaf(beta, old.y, v1);
}

// *p = v + beta * *p (beta == 0: *p is not read, it may be uninitialised).
GEMMTUNE_DEVICE_INLINE void update_one(float* p, float v, float beta) {
  *p = beta != 0.0f ? fmaf(beta, *p, v) : v;
}

// Pair j of a column at rows m0 + 8j (store16.cuh's ColumnPairs).
struct ColumnPairs {
  float* column;
  int m0, rows;
  bool pairs;
  GEMMTUNE_DEVICE_INLINE float2 read(int j) const {
    return read_pair(column, m0 + 8 * j, rows, pairs);
  }
  GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
    write_pair(column, m0 + 8 * j, rows, pairs, v0, v1);
  }
  GEMMTUNE_DEVICE_INLINE void update(int j, float v0, float v1, float beta) const {
    const int m = m0 + 8 * j;
    const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
    if (pairs && m + 1 < rows) {
      float2* p = reinterpret_cast<float2*>(column + m);
      if (read_c) add_scaled(*p, beta, v0, v1);
      *p = make_float2(v0, v1);
    } else {
      if (m < rows) update_one(column + m, v0, beta);
      if (m + 1 < rows) update_one(column + m + 1, v1, beta);
    }
  }
};

// store16.cuh's store_pairs with float2s of old values: BATCH pairs read before any is written,
// or (BATCH 1) each read, updated and written in turn.
template <int PAIRS, int BATCH, class At, class Value, class Skip>
GEMMTUNE_DEVICE_INLINE void store_pairs(const At& at, float beta, Value value, Skip skip) {
  const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
#pragma unroll
  for (int j0 = 0; j0 < PAIRS; j0 += BATCH) {
    float2 old[BATCH];
    if (BATCH > 1 && read_c) {
#pragma unroll
      for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j)
        if (!skip(j)) old[j - j0] = at.read(j);
    }
#pragma unroll
    for (int j = j0; j < j0 + BATCH && j < PAIRS; ++j) {
      if (skip(j)) continue;
      float v0, v1;
      value(j, v0, v1);
      if (BATCH == 1) {
        at.update(j, v0, v1, beta);
      } else {
        if (read_c) add_scaled(old[j - j0], beta, v0, v1);
        at.write(j, v0, v1);
      }
    }
  }
}

}  // namespace f32_out

template <class Cfg>
struct RegisterStore : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::CLUSTER_K;
  using T::F32_OUT;
  using T::MW;
  using T::STORE_BATCH;
  using T::SWAP;
  using T::TN;
  using H = Half16<Cfg::DTYPE>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  using ClusterK = wgmma_sm90::ClusterK<Cfg>;
  // An element of C, and a thread's pair of old values of C read ahead of their stores.
  using Out = typename Select<F32_OUT, float, u16>::type;
  using Old = typename Select<F32_OUT, float2, u32>::type;

  // Where kernel element (r, c) sits in C: kernel rows are n (columns of C), or m with SWAP.
  GEMMTUNE_DEVICE_INLINE static Out* c_at(const WgmmaArgs& args, int r, int c) {
    Out* C = reinterpret_cast<Out*>(args.core.c);
    return SWAP ? C + r + (long long)c * args.core.ldc : C + c + (long long)r * args.core.ldc;
  }

  // v0 += beta * old's first value, v1 += beta * its second.
  GEMMTUNE_DEVICE_INLINE static void add_old(Old old, float beta, float& v0, float& v1) {
    if constexpr (F32_OUT)
      f32_out::add_scaled(old, beta, v0, v1);
    else
      add_scaled<Cfg::DTYPE>(old, beta, v0, v1);
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
    GEMMTUNE_DEVICE_INLINE Old read(int j) const {
      const int c = c0 + 8 * j;
      if constexpr (F32_OUT) {
        return make_float2(c < cols_end ? *c_at(args, r, c) : 0.0f,
                           c + 1 < cols_end ? *c_at(args, r, c + 1) : 0.0f);
      } else {
        const u32 lo = c < cols_end ? *c_at(args, r, c) : 0,
                  hi = c + 1 < cols_end ? *c_at(args, r, c + 1) : 0;
        return lo | hi << 16;
      }
    }
    GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
      const int c = c0 + 8 * j;
      if constexpr (F32_OUT) {
        if (c < cols_end) *c_at(args, r, c) = v0;
        if (c + 1 < cols_end) *c_at(args, r, c + 1) = v1;
      } else {
        if (c < cols_end) *c_at(args, r, c) = H::from_f32(v0);
        if (c + 1 < cols_end) *c_at(args, r, c + 1) = H::from_f32(v1);
      }
    }
    GEMMTUNE_DEVICE_INLINE void update(int j, float v0, float v1, float beta) const {
      const int c = c0 + 8 * j;
      if constexpr (F32_OUT) {
        if (c < cols_end) f32_out::update_one(c_at(args, r, c), v0, beta);
        if (c + 1 < cols_end) f32_out::update_one(c_at(args, r, c + 1), v1, beta);
      } else {
        if (c < cols_end) update_one<Cfg::DTYPE>(c_at(args, r, c), v0, beta);
        if (c + 1 < cols_end) update_one<Cfg::DTYPE>(c_at(args, r, c + 1), v1, beta);
      }
    }
  };

  // Kernel row r's pairs from column c0 on (store16.cuh's accessors, or f32_out's): across two
  // columns of C with SWAP, else neighbours along m in one, aligned for a pair (4 bytes, 8 in
  // f32) or not (with an odd ldc, every other column is).
  GEMMTUNE_DEVICE_INLINE static auto row_pairs(const WgmmaArgs& args, int r, int c0, int cols_end) {
    if constexpr (SWAP) {
      return AcrossPairs{args, r, c0, cols_end};
    } else if constexpr (F32_OUT) {
      float* column = c_at(args, r, 0);
      return f32_out::ColumnPairs{column, c0, args.core.m,
                                  (reinterpret_cast<u64>(column) & 7) == 0};
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
    // At most 32 registers of old values, an f32 pair taking two. (A cluster of four has the most
    // partial sums in registers: 16 pairs ahead spilled there.)
    constexpr bool ALL_AHEAD =
        STORE_BATCH > 1 && MW * 2 * (TN / 8) * (F32_OUT ? 2 : 1) <= (CLUSTER_K == 4 ? 8 : 32);
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
    Old old[ALL_AHEAD ? MW : 1][2][ALL_AHEAD ? TN / 8 : 1];
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
            if (beta != 0.0f) add_old(old[mb][h][j], beta, v0, v1);
            at.write(j, v0, v1);
          }
        } else if constexpr (F32_OUT) {
          f32_out::store_pairs<TN / 8, STORE_BATCH>(row_pairs(args, r, c0, columns_end), beta,
                                                    value, skip);
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
