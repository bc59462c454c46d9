// The epilogue that stores a tile through shared memory and TMA stores (EPILOGUE 1, C aligned),
// and, with beta != 0, C's loads by TMA into the same shared memory: by the producer during the
// tile's main loop (fetch_c) or by the consumer itself (load_first_c_chunks). A pre-activation
// output (Epilogue::aux, beta = 0) goes out the same way, each chunk's pre-activation before its
// D, through the same ring of buffers.
#pragma once
#include "epilogue_op.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/stmatrix.cuh"
#include "ptx/tma.cuh"
#include "store_pairs.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// An f32 pair of C in shared memory (TmaStore's f32 staging): st.shared.v2.f32 and its load.
GEMMTUNE_DEVICE_INLINE void st_shared_f32x2(u32 address, float v0, float v1) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(address), "f"(v0), "f"(v1) : "memory");
}
GEMMTUNE_DEVICE_INLINE float2 ld_shared_f32x2(u32 address) {
  float2 v;
  asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(address) : "memory");
  return v;
}

template <class Cfg>
struct TmaStore : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::C_BUFFERS;
  using T::C_CHUNK_BYTES;
  using T::C_CHUNK_COLS;
  using T::C_CHUNKS;
  using T::F32_OUT;
  using T::MW;
  using T::PINGPONG;
  using T::ROW_WG;
  using T::STAGES;
  using T::TN;
  using T::WG;
  using H = Half16<Cfg::DTYPE>;
  using Epi = EpilogueOp<Cfg>;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;

  // Consumer `consumer`'s rows of C's chunk `chunk` (C_CHUNK_COLS columns: 64 16-bit values or
  // 32 f32 ones, 128 bytes), by TMA into its buffer `buffer`.
  GEMMTUNE_DEVICE_INLINE static void load_c_chunk(const WgmmaArgs& args, const Smem& s, Tile t,
                                                  int consumer, int chunk, int buffer) {
    u64* bar = &s.c_loaded[consumer * C_BUFFERS + buffer];
    ptx::mbarrier_arrive_expect_tx(bar, C_CHUNK_BYTES);  // a box partly outside C counts in full
    ptx::tma_load_2d(s.c + (consumer * C_BUFFERS + buffer) * C_CHUNK_BYTES, &args.map_c, bar,
                     t.col0 + T::c_chunk_col(chunk), t.row0 + Tiles::rows_of(consumer) * 64 * MW);
  }

  // C's first C_BUFFERS chunks, once the previous tile's stores have read every buffer.
  GEMMTUNE_DEVICE_INLINE static void load_first_c_chunks(const WgmmaArgs& args, const Smem& s,
                                                         Tile t, int consumer) {
    if (threadIdx.x % 128 != 0) return;
    ptx::bulk_wait_read<0>();
#pragma unroll
    for (int b = 0; b < C_BUFFERS; ++b) load_c_chunk(args, s, t, consumer, b, b);
  }

  // The consumer's C buffers are free once its last tile's stores have read them: it says so to
  // the producer, which loads the next tile's first chunks (fetch_c).
  GEMMTUNE_DEVICE_INLINE static void free_c_buffers(const Smem& s, int consumer) {
    if (threadIdx.x % 128 != 0) return;
    ptx::bulk_wait_read<0>();
    ptx::mbarrier_arrive(&s.c_free[consumer]);
  }

  // beta != 0: the producer fetches a tile's C into L2 ahead of the epilogue's loads of it, so
  // that they wait for L2 rather than memory.
  // (f32 has twice the chunks: unrolled, their prefetches spilled the producer's 24 registers.)
  GEMMTUNE_DEVICE_INLINE static void prefetch_c(const WgmmaArgs& args, Tile t) {
    if constexpr (F32_OUT) {
#pragma unroll
      for (int r = 0; r < ROW_WG; ++r)
#pragma unroll 1
        for (int chunk = 0; chunk < C_CHUNKS; ++chunk)
          ptx::tma_prefetch_2d(&args.map_c, t.col0 + T::c_chunk_col(chunk), t.row0 + r * 64 * MW);
    } else {
#pragma unroll
      for (int r = 0; r < ROW_WG; ++r)
#pragma unroll
        for (int chunk = 0; chunk < C_CHUNKS; ++chunk)
          ptx::tma_prefetch_2d(&args.map_c, t.col0 + T::c_chunk_col(chunk), t.row0 + r * 64 * MW);
    }
  }

  // beta != 0 with TMA stores, by the producer once the ring holds segment i's first STAGES
  // k-blocks (c_block): where the segment is a whole tile (its epilogue runs here), the first
  // C_BUFFERS chunks of each of its consumers into their buffers, once that consumer has begun
  // the tile (its buffers are free then); the CTA's first tile also into L2 (prefetch_c), later
  // tiles as their loads begin. Asked for any earlier, C's reads held up the first fill, or the
  // wait for free buffers held up the next tile's loads during the epilogue (docs/PERF.md, 'The
  // loads of C wait for the first fill of the ring'). `free_phases` holds each consumer's c_free
  // phase, bit by bit.
  GEMMTUNE_DEVICE_INLINE static void fetch_c(const WgmmaArgs& args, const Smem& s, Tile t,
                                             const schedule::Segment& seg, int i,
                                             u32& free_phases) {
    if (i == 0) prefetch_c(args, t);
    if (seg.parts != 1) return;  // the tile's last part, known only at its end, loads C itself
#pragma unroll
    for (int consumer = 0; consumer < WG; ++consumer) {
      if (PINGPONG && consumer != i % 2) continue;
      ptx::mbarrier_wait(&s.c_free[consumer], (free_phases >> consumer) & 1);
      free_phases ^= 1u << consumer;
      if constexpr (F32_OUT) {
        // (f32 has more buffers: unrolled, their loads spilled the producer's 24 registers.)
#pragma unroll 1
        for (int b = 0; b < C_BUFFERS; ++b) load_c_chunk(args, s, t, consumer, b, b);
      } else {
#pragma unroll
        for (int b = 0; b < C_BUFFERS; ++b) load_c_chunk(args, s, t, consumer, b, b);
      }
    }
  }
  // The k-block after whose load fetch_c runs: the ring's first fill (the last k-block of a
  // shorter part; ks.begin - 1, before the loads, for a part without k-blocks).
  GEMMTUNE_DEVICE_INLINE static int c_block(KRange ks) {
    return min(ks.begin + STAGES - 1, ks.end - 1);
  }

  // The same values as RegisterStore::store through shared memory and TMA stores (C aligned):
  // the warpgroup goes on to its next tile while the copy engine writes this one. With a buffer
  // per chunk, all chunks are written and then stored; with fewer, each chunk is stored as soon
  // as it is written, and a buffer is written again once the store C_BUFFERS chunks back has
  // read it.
  // Whether the consumer's rows (problem n) lie in the tile's group, or run past n, where C's map
  // ends: a grouped problem's tile may end inside them, and a TMA store would write the next
  // group's columns there (those consumers store from registers). One GEMM's always do.
  GEMMTUNE_DEVICE_INLINE static bool stays_in_group(const WgmmaArgs& args, Tile t, int consumer) {
    const int n0 = t.row0 + Tiles::rows_of(consumer) * 64 * MW;
    return t.n_end >= args.core.n || n0 + 64 * MW <= t.n_end;
  }

  // A bias along M (kernel columns) in the consumer's copy in shared memory (layout.h,
  // staged_bias_bytes): each thread loads its share of the tile's TN values as the tile's main
  // loop begins (`load`), and writes it there as the epilogue begins (`stage`). Loaded as each
  // chunk began, every chunk waited a memory latency, 2-5% of a prefill GEMM (docs/PERF.md, 'A
  // bias loaded in the epilogue waits a memory latency a chunk').
  struct StagedBias {
    using Out = typename Output<Cfg::DTYPE>::Elem;
    static constexpr int COUNT = T::STAGED_BIAS ? (TN + 127) / 128 : 0;
    Out raw[COUNT > 0 ? COUNT : 1];

    GEMMTUNE_DEVICE_INLINE static int index_of(int k) { return int(threadIdx.x % 128) + 128 * k; }

    // Loads whose values nothing reads until `stage`: the main loop does not wait for them.
    GEMMTUNE_DEVICE_INLINE void load(const WgmmaArgs& args, Tile t) {
      const Out* bias = reinterpret_cast<const Out*>(args.core.bias);
#pragma unroll
      for (int k = 0; k < COUNT; ++k) {
        raw[k] = Out(0);
        const int column = t.col0 + index_of(k);
        if (index_of(k) < TN && column < args.core.m) raw[k] = __ldg(bias + column);
      }
    }
    // Every thread of the consumer reads the copy after the barrier that follows.
    GEMMTUNE_DEVICE_INLINE void stage(const Smem& s, int consumer) const {
      Out* copy = reinterpret_cast<Out*>(s.bias) + consumer * TN;
#pragma unroll
      for (int k = 0; k < COUNT; ++k)
        if (index_of(k) < TN) copy[index_of(k)] = raw[k];
    }
  };

  // The bias of a thread's values: along N, of its rows (kernel rows are n: TMA stores do not
  // swap), once a tile, ahead of its stores (EpilogueOp::bias_pair); along M, a column pair (m)
  // at a time from the staged copy, where its values are used (16 pairs a chunk in registers
  // beside 128 accumulators spilled).
  struct Bias {
    using O = Output<Cfg::DTYPE>;
    float2 rows[MW][2];
    const typename O::Pair* copy;  // the staged copy's pair of the thread's first column

    GEMMTUNE_DEVICE_INLINE Bias(const WgmmaArgs& args, const Smem& s, int consumer, int r0) {
      copy = reinterpret_cast<const typename O::Pair*>(
                 reinterpret_cast<const typename O::Elem*>(s.bias) + consumer * TN) +
             threadIdx.x % 4;  // the thread's first column is 2 (lane % 4)
      if constexpr (Epi::BIAS == BIAS_N)
#pragma unroll
        for (int mb = 0; mb < MW; ++mb)
#pragma unroll
          for (int h = 0; h < 2; ++h)
            rows[mb][h] = Epi::template bias_pair<Cfg::DTYPE>(args.core, 0, r0 + mb * 64 + 8 * h);
    }
    // The bias of column pair 8j on from the thread's first (zeros past m, and without a bias
    // along M).
    GEMMTUNE_DEVICE_INLINE float2 column_pair(int j) const {
      if constexpr (Epi::BIAS == BIAS_M) {
        const typename O::Pair pair = copy[4 * j];
        return make_float2(O::first(pair), O::second(pair));
      } else {
        return make_float2(0.0f, 0.0f);
      }
    }
    // alpha * a + the bias of row block (mb, h), of the column pair `column`, element e.
    GEMMTUNE_DEVICE_INLINE float add(float alpha, float a, int mb, int h, float2 column,
                                     int e) const {
      const float v = alpha * a;
      if constexpr (Epi::BIAS == BIAS_M) return v + (e ? column.y : column.x);
      if constexpr (Epi::BIAS == BIAS_N) return v + rows[mb][h].x;
      return v;
    }
  };

  // An f32 chunk into its buffer (READ_C: each value first read back from where it goes, C's old
  // value landed there by TMA; PRE: the pre-activation, without the activation). A chunk is 32
  // columns, four 8-column groups g of the accumulators; a thread writes its pair of each group's
  // rows 16 (lane / 32) + (lane % 32) / 4 (+ 8) as 8 bytes: unit 2g + (lane % 4) / 2 of the row's
  // 128, at 8 (lane % 2) in it, the unit swizzled to unit ^ (row % 8) as TMA's 128-byte swizzle
  // lays it out. A warp's 8 rows of 32 bytes an instruction spread over all the banks twice: two
  // wavefronts, the least for 256 bytes.
  template <bool READ_C, bool PRE>
  GEMMTUNE_DEVICE_INLINE static void write_f32_chunk(const WgmmaArgs& args, unsigned char* buffer,
                                                     int chunk, const float (&acc)[MW][TN / 2],
                                                     const Bias& bias) {
    const int lane = threadIdx.x % 128;
    const int row8 = (lane % 32) / 4;  // the row's place in its 8-row swizzle atom
#pragma unroll
    for (int g = 0; g < 4; ++g) {
      const float2 column = bias.column_pair(T::c_chunk_col(chunk) / 8 + g);
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = mb * 64 + 16 * (lane / 32) + row8 + 8 * h;
          const int unit = (2 * g + (lane % 4) / 2) ^ row8;
          const u32 address = ptx::smem_u32(buffer + row * 128 + unit * 16 + 8 * (lane % 2));
          const int i = 4 * (T::c_chunk_col(chunk) / 8 + g) + 2 * h;  // this thread's pair
          const float alpha = args.core.alpha;
          float v0 = bias.add(alpha, acc[mb][i], mb, h, column, 0),
                v1 = bias.add(alpha, acc[mb][i + 1], mb, h, column, 1);
          if constexpr (READ_C) {
            const float2 old = ld_shared_f32x2(address);
            v0 = fmaf(args.core.beta, old.x, v0);
            v1 = fmaf(args.core.beta, old.y, v1);
          }
          if constexpr (!PRE) Epi::finish(v0, v1);
          st_shared_f32x2(address, v0, v1);
        }
    }
  }

  // READ_C (beta != 0): each chunk of C first comes by TMA into the buffer it leaves from, once
  // the buffer's last store has read it (the first C_BUFFERS chunks together: by the producer
  // during the tile's main loop where c_early, else here); each thread reads its values back
  // with ldmatrix, the inverse of stmatrix (f32: write_f32_chunk's loads), from where it writes
  // them. `c_phases` holds each buffer's barrier phase, bit by bit. With a pre-activation output
  // (beta = 0) each chunk is written twice, its pre-activation for map_aux, then D: the ring turns
  // over WRITES buffers' worth.
  template <bool READ_C>
  GEMMTUNE_DEVICE_INLINE static void store(const WgmmaArgs& args, const Smem& s, Tile t,
                                           int consumer, const float (&acc)[MW][TN / 2],
                                           const StagedBias& staged, u32& c_phases, bool c_early) {
    static_assert(!(Epi::AUX && READ_C), "a pre-activation output by TMA takes beta = 0");
    constexpr int PASSES = Epi::AUX ? 2 : 1;  // a chunk's writes: its pre-activation, then D
    constexpr int WRITES = C_CHUNKS * PASSES;
    constexpr bool RING = C_BUFFERS < WRITES;
    const int lane = threadIdx.x % 128;
    const bool issuer = lane == 0;
    unsigned char* staging = s.c + consumer * C_BUFFERS * C_CHUNK_BYTES;
    // A warp's 16 rows of a 64-row block go out by stmatrix, four 8x8 blocks per instruction:
    // block b covers rows 8 (b % 2) to 8 (b % 2) + 7 and 16-byte unit u + b / 2 of their 128-byte
    // rows (u = 0, 2, 4, 6), and holds this thread's accumulator pair there. Lane l addresses row
    // l % 8 of block q = (l % 32) / 8; with the 128-byte swizzle, unit v of row r sits at unit
    // v ^ (r % 8), and r % 8 == l % 8.
    const int q = (lane % 32) / 8;
    const int lane_row = 16 * (lane / 32) + 8 * (q % 2) + lane % 8;
    const int n0 = t.row0 + Tiles::rows_of(consumer) * 64 * MW;
    // The thread's first kernel row of its accumulators (store_registers.cuh).
    const int r0 = n0 + 16 * (lane / 32) + (lane % 32) / 4;
    const Bias bias(args, s, consumer, r0);
    staged.stage(s, consumer);  // read after the barrier before the first chunk's writes
    if (READ_C && !c_early) load_first_c_chunks(args, s, t, consumer);
    if (READ_C && T::STAGED_BIAS) ptx::named_barrier(1 + consumer, 128);
#pragma unroll
    for (int w = 0; w < WRITES; ++w) {
      const int chunk = w / PASSES, buffer = w % C_BUFFERS;
      const bool pre = PASSES == 2 && w % 2 == 0;  // known once unrolled
      if constexpr (READ_C) {
        ptx::mbarrier_wait(&s.c_loaded[consumer * C_BUFFERS + buffer], (c_phases >> buffer) & 1);
        c_phases ^= 1u << buffer;
      } else if (w == 0 || w >= C_BUFFERS) {
        // The buffer is free once the stores that read it are done reading: the previous tile's
        // (all of them) before the first write, the one C_BUFFERS writes back after that.
        if (issuer) {
          if (w == 0)
            ptx::bulk_wait_read<0>();
          else
            ptx::bulk_wait_read<C_BUFFERS - 1>();
        }
        ptx::named_barrier(1 + consumer, 128);
      }
      if constexpr (F32_OUT) {
        if (pre)
          write_f32_chunk<READ_C, true>(args, staging + buffer * C_CHUNK_BYTES, chunk, acc, bias);
        else
          write_f32_chunk<READ_C, false>(args, staging + buffer * C_CHUNK_BYTES, chunk, acc, bias);
      } else {
        // Units u and u + 1 of every 64-row block, the bias of their two column pairs loaded once.
#pragma unroll
        for (int u = 0; u < 8; u += 2) {
          const int j0 = T::c_chunk_col(chunk) / 8 + u;  // the column pair of blocks 0 and 1
          const float2 columns[2] = {bias.column_pair(j0), bias.column_pair(j0 + 1)};
#pragma unroll
          for (int mb = 0; mb < MW; ++mb) {
            const int unit = (u + q / 2) ^ (lane % 8);
            const u32 address = ptx::smem_u32(staging + buffer * C_CHUNK_BYTES +
                                              (mb * 64 + lane_row) * 128 + unit * 16);
            u32 old[4], r[4];
            if constexpr (READ_C) ptx::ldmatrix_x4<false>(old, address);
#pragma unroll
            for (int b = 0; b < 4; ++b) {
              // This thread's accumulator pair 4j + 2 (b % 2).
              const int i = 2 * (2 * (j0 + b / 2) + b % 2);
              const float alpha = args.core.alpha;
              float v0 = bias.add(alpha, acc[mb][i], mb, b % 2, columns[b / 2], 0),
                    v1 = bias.add(alpha, acc[mb][i + 1], mb, b % 2, columns[b / 2], 1);
              if constexpr (READ_C) {
                v0 = fmaf(args.core.beta, H::to_f32(u16(old[b] & 0xffff)), v0);
                v1 = fmaf(args.core.beta, H::to_f32(u16(old[b] >> 16)), v1);
              }
              if (!pre) Epi::finish(v0, v1);
              r[b] = H::pack(v0, v1);
            }
            ptx::stmatrix_x4(address, r);
          }
        }
      }
      if (RING || w == WRITES - 1) {
        ptx::fence_async_shared();
        ptx::named_barrier(1 + consumer, 128);
        if (issuer) {
#pragma unroll
          for (int c = RING ? w : 0; c <= w; ++c)
            ptx::tma_store_2d(PASSES == 2 && c % 2 == 0 ? &args.map_aux : &args.map_d,
                              staging + (c % C_BUFFERS) * C_CHUNK_BYTES,
                              t.col0 + T::c_chunk_col(c / PASSES), n0);
          ptx::bulk_commit();
          if (READ_C && chunk + C_BUFFERS < C_CHUNKS) {
            ptx::bulk_wait_read<0>();
            load_c_chunk(args, s, t, consumer, chunk + C_BUFFERS, buffer);
          }
        }
      }
    }
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
