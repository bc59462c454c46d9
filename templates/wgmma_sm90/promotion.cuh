// The main loop of a float8 tile with promotion: wgmma's float8 accumulation keeps fewer bits
// than f32 (DeepSeek-V3's report), so every PROMOTE k-blocks (128 K each) go into a fresh partial
// accumulator that is then added into the f32 one; with block scaling, scaled by the k-block's
// scales of A and B on the way. Tensor and row scales multiply the sum once the tile's k-blocks
// are done, before the epilogue (or the partial sums of split-K and clusters, which add linearly).
// Tensor and row scales are read from global memory (GemmCore::scale_a/b, in
// gemmtune::scale_shape_a/b's layouts). Block scales are read from global memory a k-block ahead
// (LoadedScales) or, with STAGED_SCALES, come into each stage with its operands by TMA and are
// read from shared memory once the stage's wgmma are issued (StagedScales): the loads in the loop
// cost 10-12%, the stage's copies less on tiles that start often and more on long ones
// (docs/PERF.md, 'Block scales in the loop cost a tenth').
// With OVERLAP (PROMOTE 1), two partial sums take turns: k-block kb's wgmma run while kb - 1's
// partial sum is promoted, so that the tensor cores do not wait for the adds. PROMOTE 0 is fast
// accumulation (gemmtune::Accumulation::fast, tensor and row scales): wgmma sums the whole K in
// the f32 accumulators, as bf16 tiles do, and the scales follow.
#pragma once
#include "ptx/mbarrier.cuh"
#include "scale_layout.h"
#include "wgmma_sm90/mainloop.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

template <class Cfg>
struct Promotion : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::MW;
  using T::OVERLAP;
  using T::PROMOTE;
  using T::SCALE_COLS_OFFSET;
  using T::SCALE_STAGE_BYTES;
  using T::SCALING;
  using T::STAGES;
  using T::SWAP;
  using T::TN;
  using Mainloop = wgmma_sm90::Mainloop<Cfg>;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;
  static constexpr int TENSOR = 1, ROW = 2, BLOCK = 3;  // gemmtune::Scaling
  // A tile's columns (problem m) start on a multiple of TN, so of gcd(TN, 128) within a 128-row
  // block of A's scales: a tile with TN dividing 128 lies in one block, others span two at most
  // where TN <= 128 + gcd(TN, 128) (wgmma N 192 from an offset of 0 or 64, say).
  static constexpr int GCD = (TN & -TN) < 128 ? (TN & -TN) : 128;
  static constexpr int COL_BLOCKS = 128 % TN == 0 ? 1 : 2;
  static_assert(SCALING != BLOCK || (!SWAP && TN <= 128 + GCD),
                "block scales: columns are problem m, a tile's within one or two 128-blocks");

  // Where a thread's accumulator i of 64-row block mb lies in the tile (PTX ISA, the wgmma D
  // fragment of m64nNk*: rows lane/4 and lane/4 + 8 of the warp's 16, columns in pairs).
  GEMMTUNE_DEVICE_INLINE static int row_in_tile(int consumer, int mb, int half) {
    const int lane = threadIdx.x % 128;
    return (Tiles::rows_of(consumer) * MW + mb) * 64 + 16 * (lane / 32) + (lane % 32) / 4 +
           8 * half;
  }
  GEMMTUNE_DEVICE_INLINE static int col_in_tile(int i) {
    return 8 * (i / 4) + 2 * (threadIdx.x % 4) + i % 2;
  }
  GEMMTUNE_DEVICE_INLINE static int half_of(int i) { return (i / 2) % 2; }

  // The scales of A of the tile's group (scale_layout.h); one GEMM's group is 0.
  GEMMTUNE_DEVICE_INLINE static const float* scales_a_of(const WgmmaArgs& args, Tile t) {
    return reinterpret_cast<const float*>(args.core.scale_a) +
           t.group * gemmtune_scales_a_per_group(SCALING, args.core.m, args.core.k);
  }

  // ---- block scales, per k-block ----------------------------------------------------------

  // The products' scales of a k-block for this thread's rows (B's, problem n) and the tile's one
  // or two 128-blocks of columns (A's, problem m). Rows and columns past the problem read other
  // scales (or zeros): their results are not stored.
  struct BlockScales {
    float row[MW][2];
    float col[COL_BLOCKS];
  };

  // ---- block scales from global memory, a k-block ahead ----------------------------------

  // Where they are read: worked out for the tile's first k-block, then moved a k-block on by a
  // stride (worked out anew for every k-block, the addresses cost ~40 instructions a k-block per
  // warp).
  struct ScaleCursor {
    const float* row[MW][2];
    const float* col[COL_BLOCKS];
    int row_stride, col_stride;  // the scales of a k-block: n of B's, ceil(m / 128) of A's
  };
  GEMMTUNE_DEVICE_INLINE static ScaleCursor scale_cursor(const WgmmaArgs& args, Tile t,
                                                         int consumer, int kb) {
    const float* sa = scales_a_of(args, t);
    const float* sb = reinterpret_cast<const float*>(args.core.scale_b);
    const int n = args.core.n, a_blocks = (args.core.m + 127) / 128;
    ScaleCursor c;
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        c.row[mb][h] = sb + min(t.row0 + row_in_tile(consumer, mb, h), n - 1) + (long long)kb * n;
#pragma unroll
    for (int b = 0; b < COL_BLOCKS; ++b)
      c.col[b] = sa + min(t.col0 / 128 + b, a_blocks - 1) + (long long)kb * a_blocks;
    c.row_stride = n, c.col_stride = a_blocks;
    return c;
  }
  GEMMTUNE_DEVICE_INLINE static BlockScales load(const ScaleCursor& c) {
    BlockScales s;
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h) s.row[mb][h] = __ldg(c.row[mb][h]);
#pragma unroll
    for (int b = 0; b < COL_BLOCKS; ++b) s.col[b] = __ldg(c.col[b]);
    return s;
  }
  // On to the next k-block where there is one (else it stays, and is read again unused).
  GEMMTUNE_DEVICE_INLINE static void advance(ScaleCursor& c, bool more) {
    const int row_step = more ? c.row_stride : 0, col_step = more ? c.col_stride : 0;
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h) c.row[mb][h] += row_step;
#pragma unroll
    for (int b = 0; b < COL_BLOCKS; ++b) c.col[b] += col_step;
  }
  // A tile's scales k-block by k-block, in turns with its loop (StagedScales alike): `before`
  // k-block kb's stage is waited for, `after_issue` its wgmma, `newer` (kb's) and `older` (kb -
  // 1's) for the promotions, `rotate` at its end. Loaded: kb + 1's are loaded before kb's stage
  // is waited for, so that the loads overlap a k-block's wgmma.
  struct LoadedScales {
    ScaleCursor cursor{};
    BlockScales older_{}, newer_{}, ahead_{};
    GEMMTUNE_DEVICE_INLINE LoadedScales(const WgmmaArgs& args, Tile t, int consumer, KRange ks) {
      if (ks.begin < ks.end) {
        cursor = scale_cursor(args, t, consumer, ks.begin);
        newer_ = load(cursor);
        advance(cursor, ks.begin + 1 < ks.end);
      }
    }
    GEMMTUNE_DEVICE_INLINE void before(int kb, KRange ks) {
      ahead_ = load(cursor);
      advance(cursor, kb + 2 < ks.end);
    }
    GEMMTUNE_DEVICE_INLINE void after_issue(const Smem&, int, int) {}
    GEMMTUNE_DEVICE_INLINE const BlockScales& newer() const { return newer_; }
    GEMMTUNE_DEVICE_INLINE const BlockScales& older() const { return older_; }
    GEMMTUNE_DEVICE_INLINE void rotate() {
      older_ = newer_;
      newer_ = ahead_;
    }
  };

  // ---- block scales with the stage (STAGED_SCALES) ----------------------------------------

  // The first of the scales a tile needs of k-block kb, as indices into the maps (each over all
  // of an operand's scales as one row): of B's (problem n: one per row and k-block, k-block
  // after k-block), its first row's; of A's (problem m: one per 128x128 block, its group's after
  // the groups before), its first column block's.
  struct ScaleStarts {
    int b0, b_step, a0, a_step;
    GEMMTUNE_DEVICE_INLINE int b(int kb) const { return b0 + kb * b_step; }
    GEMMTUNE_DEVICE_INLINE int a(int kb) const { return a0 + kb * a_step; }
  };
  GEMMTUNE_DEVICE_INLINE static ScaleStarts scale_starts(const WgmmaArgs& args, Tile t) {
    const int a_group = int(t.group * gemmtune_scales_a_per_group(BLOCK, args.core.m, args.core.k));
    return {t.row0, args.core.n, a_group + t.col0 / 128, (args.core.m + 127) / 128};
  }

  // The producer's copies of a stage's block scales (its bytes counted by Mainloop::load_stage),
  // each box from a multiple of four values (16 bytes: TMA faults on a box that starts off them),
  // up to three before the first needed.
  GEMMTUNE_DEVICE_INLINE static void load_scales(const WgmmaArgs& args, const Smem& s, int stage,
                                                 Tile t, int kb) {
    u64* bar = &s.full[stage];
    unsigned char* dst = s.scales + stage * SCALE_STAGE_BYTES;
    const ScaleStarts starts = scale_starts(args, t);
    ptx::tma_load_2d(dst, &args.map_scale_b, bar, starts.b(kb) & ~3, 0);
    ptx::tma_load_2d(dst + SCALE_COLS_OFFSET, &args.map_scale_a, bar, starts.a(kb) & ~3, 0);
  }

  // The k-block's scales from its stage's copies.
  GEMMTUNE_DEVICE_INLINE static BlockScales stage_scales(const Smem& s, int stage, int consumer,
                                                         const ScaleStarts& starts, int kb) {
    const unsigned char* slot = s.scales + stage * SCALE_STAGE_BYTES;
    const float* rows = reinterpret_cast<const float*>(slot) + (starts.b(kb) & 3);
    const float* cols =
        reinterpret_cast<const float*>(slot + SCALE_COLS_OFFSET) + (starts.a(kb) & 3);
    BlockScales b;
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h) b.row[mb][h] = rows[row_in_tile(consumer, mb, h)];
#pragma unroll
    for (int c = 0; c < COL_BLOCKS; ++c) b.col[c] = cols[c];
    return b;
  }
  // As LoadedScales: k-block kb's are read from its stage once its wgmma are issued.
  struct StagedScales {
    ScaleStarts starts;
    int consumer;
    BlockScales older_, newer_;
    GEMMTUNE_DEVICE_INLINE StagedScales(const WgmmaArgs& args, Tile t, int consumer, KRange)
        : starts(scale_starts(args, t)), consumer(consumer) {}
    GEMMTUNE_DEVICE_INLINE void before(int, KRange) {}
    GEMMTUNE_DEVICE_INLINE void after_issue(const Smem& s, int stage, int kb) {
      newer_ = stage_scales(s, stage, consumer, starts, kb);
    }
    GEMMTUNE_DEVICE_INLINE const BlockScales& newer() const { return newer_; }
    GEMMTUNE_DEVICE_INLINE const BlockScales& older() const { return older_; }
    GEMMTUNE_DEVICE_INLINE void rotate() { older_ = newer_; }
  };
  // Tensor and row scales apply once per tile, after the loop.
  struct NoScales {
    BlockScales none;
    GEMMTUNE_DEVICE_INLINE NoScales(const WgmmaArgs&, Tile, int, KRange) {}
    GEMMTUNE_DEVICE_INLINE void before(int, KRange) {}
    GEMMTUNE_DEVICE_INLINE void after_issue(const Smem&, int, int) {}
    GEMMTUNE_DEVICE_INLINE const BlockScales& newer() const { return none; }
    GEMMTUNE_DEVICE_INLINE const BlockScales& older() const { return none; }
    GEMMTUNE_DEVICE_INLINE void rotate() {}
  };
  using Scales =
      typename Select<SCALING != BLOCK, NoScales,
                      typename Select<T::STAGED_SCALES, StagedScales, LoadedScales>::type>::type;

  // acc += part for 64-row block mb, scaled by the k-block's scales with block scaling: one
  // product of a row's and a column block's scale per row, then a fused multiply-add per
  // accumulator. The tile's first FIRST (or `first`, with FIRST -1) 8-column groups lie in its
  // first 128-block of columns, the others in the second. FIRST is compiled in where it can be
  // (consume_split_at): a select per accumulator pair cost the loop about 30% more instructions
  // (48 at wgmma N 192).
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static void promote_block(float (&acc)[TN / 2],
                                                   const float (&part)[TN / 2],
                                                   const BlockScales& s, int mb, int first) {
    float f[2][COL_BLOCKS];
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int b = 0; b < COL_BLOCKS; ++b) f[h][b] = s.row[mb][h] * s.col[b];
#pragma unroll
    for (int i = 0; i < TN / 2; ++i) {
      if constexpr (SCALING == BLOCK) {
        const float* fh = f[half_of(i)];
        const bool in_first = i / 4 < (FIRST >= 0 ? FIRST : first);
        acc[i] = fmaf(part[i], in_first ? fh[0] : fh[COL_BLOCKS - 1], acc[i]);
      } else
        acc[i] += part[i];
    }
  }
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static void promote(float (&acc)[MW][TN / 2],
                                             const float (&part)[MW][TN / 2], const BlockScales& s,
                                             int first) {
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) promote_block<FIRST>(acc[mb], part[mb], s, mb, first);
  }

  // ---- tensor and row scales, once per tile -----------------------------------------------

  // acc *= scale_a * scale_b of each element (tensor: one product; row: A's of its problem row
  // m, B's of its column n, whichever the tile's rows and columns are).
  GEMMTUNE_DEVICE_INLINE static void apply_output_scales(const WgmmaArgs& args, Tile t,
                                                         int consumer, float (&acc)[MW][TN / 2]) {
    const float* sa = scales_a_of(args, t);
    const float* sb = reinterpret_cast<const float*>(args.core.scale_b);
    if constexpr (SCALING == TENSOR) {
      const float f = __ldg(sa) * __ldg(sb);
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int i = 0; i < TN / 2; ++i) acc[mb][i] *= f;
    } else if constexpr (SCALING == ROW) {
      // Kernel rows are problem n (B's scales) and columns m (A's); the other way with SWAP.
      const float* row_scales = SWAP ? sa : sb;
      const float* col_scales = SWAP ? sb : sa;
      const int rows = SWAP ? args.core.m : args.core.n, cols = SWAP ? args.core.n : args.core.m;
      float col_scale[TN / 8][2];
#pragma unroll
      for (int j = 0; j < TN / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e)
          col_scale[j][e] = __ldg(col_scales + min(t.col0 + col_in_tile(4 * j + e), cols - 1));
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float r = __ldg(row_scales + min(t.row0 + row_in_tile(consumer, mb, h), rows - 1));
#pragma unroll
          for (int j = 0; j < TN / 8; ++j)
#pragma unroll
            for (int e = 0; e < 2; ++e) acc[mb][4 * j + 2 * h + e] *= r * col_scale[j][e];
        }
    }
  }

  // ---- the loops ----------------------------------------------------------------------------

  // The tile's k-blocks ks into acc, as Mainloop::consume. Returns the stage still to release
  // (-1: none; after a promotion every stage is released).
  GEMMTUNE_DEVICE_INLINE static int consume(const WgmmaArgs& args, const Smem& s, Tile t, KRange ks,
                                            int consumer, Ring<STAGES>& ring,
                                            float (&acc)[MW][TN / 2]) {
    if constexpr (PROMOTE == 0)
      return consume_fast(args, s, t, ks, consumer, ring, acc);
    else
      return consume_split_at<0>(args, s, t, ks, consumer, ring, acc);
  }

  // The promoting loops for the tile's first FIRST 8-column groups in its first 128-block of
  // columns (block scales). The tile starts in a 128-block at a multiple of GCD: each of the 128
  // / GCD cases is compiled, and the one at t.col0 runs (J: the case tried). Past four cases the
  // compile time grows too far (wgmma N 144, eight cases: NVRTC 0.43 s -> 1.22 s): FIRST -1, the
  // split `first` is read at run time.
  static constexpr bool COMPILED_SPLITS = COL_BLOCKS == 2 && 128 / GCD <= 4;
  template <int J>
  GEMMTUNE_DEVICE_INLINE static int consume_split_at(const WgmmaArgs& args, const Smem& s, Tile t,
                                                     KRange ks, int consumer, Ring<STAGES>& ring,
                                                     float (&acc)[MW][TN / 2]) {
    constexpr int BOUNDARY = 128 - J * GCD;  // the tile's first column of the second block
    constexpr int FIRST = !COMPILED_SPLITS ? -1 : (BOUNDARY < TN ? BOUNDARY : TN) / 8;
    constexpr bool LAST = SCALING != BLOCK || !COMPILED_SPLITS || J + 1 == 128 / GCD;
    if (LAST || warp_uniform(t.col0 % 128) == J * GCD) {
      const int first = min(128 - t.col0 % 128, TN) / 8;
      if constexpr (T::WAVES)
        return consume_in_waves<FIRST>(args, s, t, ks, consumer, ring, acc, first);
      else if constexpr (OVERLAP)
        return consume_overlapped<FIRST>(args, s, t, ks, consumer, ring, acc, first);
      else
        return consume_promoted<FIRST>(args, s, t, ks, consumer, ring, acc, first);
    }
    if constexpr (!LAST) return consume_split_at<J + 1>(args, s, t, ks, consumer, ring, acc);
    return -1;
  }

  // Each stage into `part`; every PROMOTE k-blocks (and at the last) the groups drain and `part`
  // is added into acc.
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static int consume_promoted(const WgmmaArgs& args, const Smem& s, Tile t,
                                                     KRange ks, int consumer, Ring<STAGES>& ring,
                                                     float (&acc)[MW][TN / 2], int first) {
    float part[MW][TN / 2];
    Mainloop::zero(acc);
    int previous = -1;
    const typename Mainloop::Descriptors d = Mainloop::descriptors(s, consumer);
    Scales feed(args, t, consumer, ks);
    for (int kb = ks.begin; kb < ks.end; ++kb) {
      const int step = kb - ks.begin;
      feed.before(kb, ks);
      ptx::mbarrier_wait(&s.full[ring.stage], ring.phase);
      __syncwarp();
      Mainloop::issue(d, ring.stage, step % PROMOTE == 0, part);
      feed.after_issue(s, ring.stage, kb);
      if ((step + 1) % PROMOTE == 0 || kb + 1 == ks.end) {
        Mainloop::template drain<0>(part);
        if (previous >= 0) Mainloop::release(s, previous);
        Mainloop::release(s, ring.stage);
        previous = -1;
        promote<FIRST>(acc, part, feed.newer(), first);
      } else {
        Mainloop::template drain<1>(part);
        if (previous >= 0) Mainloop::release(s, previous);
        previous = ring.stage;
      }
      feed.rotate();
      ring.advance();
    }
    if constexpr (SCALING == TENSOR || SCALING == ROW) apply_output_scales(args, t, consumer, acc);
    return previous;
  }

  // Two 64-row blocks a consumer (WAVES): each k-block's wgmma go into one partial sum a block at
  // a time, each promoted once it has drained, so that the partial sums of a 256-row tile take the
  // registers of one block (DeepGEMM's waves) and the k-block's fixed costs (its stage wait,
  // scales and release) are paid once for both.
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static int consume_in_waves(const WgmmaArgs& args, const Smem& s, Tile t,
                                                     KRange ks, int consumer, Ring<STAGES>& ring,
                                                     float (&acc)[MW][TN / 2], int first) {
    float part[TN / 2];
    Mainloop::zero(acc);
    const typename Mainloop::Descriptors d = Mainloop::descriptors(s, consumer);
    Scales feed(args, t, consumer, ks);
    for (int kb = ks.begin; kb < ks.end; ++kb) {
      feed.before(kb, ks);
      ptx::mbarrier_wait(&s.full[ring.stage], ring.phase);
      __syncwarp();
#pragma unroll
      for (int mb = 0; mb < MW; ++mb) {
        Mainloop::issue_block(d, ring.stage, mb, part);
        if (mb == 0) feed.after_issue(s, ring.stage, kb);
        Mainloop::template drain_block<0>(part);
        if (mb + 1 == MW) Mainloop::release(s, ring.stage);
        promote_block<FIRST>(acc[mb], part, feed.newer(), mb, first);
      }
      feed.rotate();
      ring.advance();
    }
    if constexpr (SCALING == TENSOR || SCALING == ROW) apply_output_scales(args, t, consumer, acc);
    return -1;
  }

  // Fast accumulation: the plain main loop into one partial sum for all of K, then acc = the sum
  // times the scales (the stage it returns is released after the epilogue, as for bf16 tiles).
  // The wgmma accumulate into registers of their own: ptxas serializes every wgmma whose
  // accumulators another instruction writes (C7515), as scaling them in place would.
  GEMMTUNE_DEVICE_INLINE static int consume_fast(const WgmmaArgs& args, const Smem& s, Tile t,
                                                 KRange ks, int consumer, Ring<STAGES>& ring,
                                                 float (&acc)[MW][TN / 2]) {
    float sum[MW][TN / 2];
    if (ks.begin == ks.end) Mainloop::zero(sum);  // a cluster's CTA with no k-blocks adds 0
    const int previous = Mainloop::consume(args, s, t, ks, consumer, ring, sum);
    Mainloop::template drain<0>(sum);
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int i = 0; i < TN / 2; ++i) acc[mb][i] = sum[mb][i];
    apply_output_scales(args, t, consumer, acc);
    return previous;
  }

  // Without overlap both consumers of a tile promote at once, once their wgmma have drained: the
  // tensor cores wait through the adds, about a quarter of a k-block's wgmma time. Here k-block
  // kb's wgmma go into one partial sum (`into`) while kb - 1's (`from`, complete) is promoted,
  // with its scales (`older`), read while its stage was held. Each step drains its own wgmma
  // before the next: ptxas serializes every wgmma of a loop that reads accumulators while a wgmma
  // is in flight across its back edge.
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static void overlapped_step(const Smem& s,
                                                     const typename Mainloop::Descriptors& d,
                                                     int kb, KRange ks, Scales& feed,
                                                     Ring<STAGES>& ring, float (&acc)[MW][TN / 2],
                                                     float (&into)[MW][TN / 2],
                                                     float (&from)[MW][TN / 2], int first) {
    feed.before(kb, ks);
    ptx::mbarrier_wait(&s.full[ring.stage], ring.phase);
    __syncwarp();
    Mainloop::issue(d, ring.stage, true, into);
    feed.after_issue(s, ring.stage, kb);
    if (kb != ks.begin) promote<FIRST>(acc, from, feed.older(), first);
    Mainloop::template drain<0>(into);
    Mainloop::release(s, ring.stage);
    feed.rotate();
    ring.advance();
  }

  // The loop with OVERLAP: k-blocks in pairs, so that each partial sum keeps its registers, the
  // odd one out first, so that the last k-block is always `odd`'s. (ptxas serialized the wgmma of
  // a loop whose pair's second step was conditional.)
  template <int FIRST>
  GEMMTUNE_DEVICE_INLINE static int consume_overlapped(const WgmmaArgs& args, const Smem& s, Tile t,
                                                       KRange ks, int consumer, Ring<STAGES>& ring,
                                                       float (&acc)[MW][TN / 2], int first) {
    float even[MW][TN / 2], odd[MW][TN / 2];
    Mainloop::zero(acc);
    const typename Mainloop::Descriptors d = Mainloop::descriptors(s, consumer);
    Scales feed(args, t, consumer, ks);
    int kb = ks.begin;
    if ((ks.end - ks.begin) % 2 == 1) {
      overlapped_step<FIRST>(s, d, kb, ks, feed, ring, acc, odd, even, first);
      ++kb;
    }
    for (; kb < ks.end; kb += 2) {
      overlapped_step<FIRST>(s, d, kb, ks, feed, ring, acc, even, odd, first);
      overlapped_step<FIRST>(s, d, kb + 1, ks, feed, ring, acc, odd, even, first);
    }
    if (ks.begin < ks.end)
      promote<FIRST>(acc, odd, feed.older(), first);  // the last k-block's partial sum
    if constexpr (SCALING == TENSOR || SCALING == ROW) apply_output_scales(args, t, consumer, acc);
    return -1;
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
