// Ampere-style tensor-core GEMM for bf16 and f16 (f32 accumulation), and f32 read as tf32, sm_80
// and later:
//
//   global --cp.async (16 B, zero-filling at the edges)--> STAGES-deep ring of shared tiles
//          --ldmatrix.x4 (.trans for operands stored MN-contiguous)--> register fragments
//          --mma.sync.m16n8k16--> f32 accumulators --> C (alpha, beta) in the input type.
//
// f32 (DTYPE 0) moves as pairs of 16-bit values: an f32 operand stored along K is a 16-bit one
// of twice the K, and ldmatrix leaves the fragments of mma.sync.m16n8k8.tf32 where it leaves
// m16n8k16's (ptx/mma.cuh). Both operands are read along K (ldmatrix.trans would split the
// values): the launch derives a transposed copy of one stored along M or N. Each value is
// rounded to tf32 in registers; PRODUCTS = 3 (3xTF32) also takes its small part, the remainder
// rounded, and sums three products, small by big, big by small, big by big.
//
// Block tile BM x BN x BK, warp tiles WM x WN. Shared tiles keep the operand's storage order
// (16-byte chunks cannot be transposed on the way), with chunks XOR-swizzled by row so that
// both the cp.async writes and the ldmatrix reads of eight 16-byte rows hit eight different
// 16-byte bank groups.
//
// The kernel computes C^T = op(B)^T op(A)^T, as the Hopper family does: the mma's 16-row side is
// problem N and its 8-column side problem M, so each thread's accumulator pairs are neighbours
// along M, which is contiguous in column-major C (4-byte stores of two values).
//
// Correct for any M, N, K >= 1, all four op(A)/op(B), any ld: VEC (values per global copy) is
// 8 when the problem is 16-byte aligned, 4 or 2 (smaller cp.async), or 1 (plain loads) when it
// is not. beta == 0 never reads C.
//
// SPLITS > 1 cuts K into that many parts, one block each (schedule.h, SPLIT_K): problems with
// fewer tiles than SMs wait through a chain of k-tiles per block, and parts shorten the chain.
// Every part stores its f32 partial sums in the workspace and counts itself on its tile's
// counter; the part that arrives last adds all of them in part order (bitwise the same result
// whichever part finishes last), resets the counter and runs the epilogue: beta once.
//
// GROUP_TABLE > 0: a grouped problem (group_table.cuh), G GEMMs whose columns of B and C only the
// device knows. The launch covers as many column tiles as the groups can have; each block builds
// the table of the groups' column tiles in its first stages, finds its group and its columns, and
// leaves where its tile lies past the groups' last. It reads its group's A, and reads and writes
// no column of B and C past its group's end. K is whole (no split-K).
#pragma once
#include "common.cuh"
#include "epilogue_op.cuh"
#include "group_table.cuh"
#include "mma_sm80_args.h"
#include "ptx/cp_async.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mma.cuh"
#include "schedule.h"
#include "store_pairs.cuh"

namespace gemmtune {
namespace mma_sm80 {

// A shared tile of ROWS rows of CHUNKS 16-byte chunks. Chunk c of row r sits at c ^ swizzle(r):
// the eight rows an ldmatrix reads at one chunk, and the eight chunks eight threads write, fall
// into eight different 16-byte columns of a 128-byte line (the 32 banks). Rows shorter than
// 128 bytes share a line, so the XOR goes by line and stays inside the row.
template <int ROWS, int CHUNKS>
struct SwizzledTile {
  static constexpr int ROW_BYTES = CHUNKS * 16;
  static constexpr int BYTES = ROWS * ROW_BYTES;
  static constexpr int ROWS_PER_LINE = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
  static constexpr int XOR_MASK = (CHUNKS >= 8 ? 8 : CHUNKS) - 1;
  static_assert(CHUNKS >= 2 && (CHUNKS & (CHUNKS - 1)) == 0,
                "rows of 2^n chunks, at least 32 bytes");

  GEMMTUNE_DEVICE_INLINE static int swizzle(int row) { return (row / ROWS_PER_LINE) & XOR_MASK; }
  GEMMTUNE_DEVICE_INLINE static u32 offset(int row, int chunk) {
    return u32(row * ROW_BYTES + ((chunk ^ swizzle(row)) << 4));
  }
};

// One operand as the kernel sees it: its MN side (M for A, N for B) and K. K_MAJOR: stored with
// K contiguous, so shared rows run along MN with K in chunks; otherwise rows run along K with MN
// in chunks, and fragments are read with ldmatrix.trans. GATE_HALVES: A of a gated problem whose
// gate and up rows are op(A)'s two halves, taken in turns: tile row r of the block tile at mn0
// is op(A)'s row mn0 / 2 + r / 2 of the gate half (r even) or of the up half (r odd), so that the
// tile's rows alternate as an interleaved problem's do in op(A) itself.
template <int MN, int BK, bool K_MAJOR, int THREADS, int VEC, int WARP_MN, bool GATE_HALVES = false>
struct Operand {
  static constexpr int ROWS = K_MAJOR ? MN : BK;
  static constexpr int CHUNKS = (K_MAJOR ? BK : MN) / 8;
  using Tile = SwizzledTile<ROWS, CHUNKS>;
  static constexpr int BYTES = Tile::BYTES;
  // Each thread copies the same chunk column of PER_THREAD rows, ROW_STEP apart.
  static constexpr int ROW_STEP = THREADS / CHUNKS;
  static constexpr int PER_THREAD = ROWS / ROW_STEP;
  static_assert(THREADS % CHUNKS == 0 && ROWS % ROW_STEP == 0,
                "every thread copies whole chunks, as many as the others");
  static_assert(VEC == 8 || VEC == 4 || VEC == 2 || VEC == 1,
                "8, 4, 2 or 1 values per global copy");
  static_assert(!GATE_HALVES || (K_MAJOR && ROW_STEP % 2 == 0),
                "gate and up rows in turns: rows stored along K, a thread's rows of one kind");
  // Stored rows between a thread's rows: a thread's rows are all gate or all up rows.
  static constexpr int STORED_ROW_STEP = GATE_HALVES ? ROW_STEP / 2 : ROW_STEP;

  // ---- global -> shared -------------------------------------------------------------------

  // What one thread copies of every stage: the same chunk column of PER_THREAD rows, ROW_STEP
  // apart. The swizzle repeats every 8 rows, so at most two shared offsets serve them all.
  // Sizes, leading dimension and the operand's address come from the kernel parameters
  // (constant memory) when needed, so that they take no registers in the main loop.
  static constexpr int PHASES = ROW_STEP % 8 == 0 ? 1 : 8 / ROW_STEP;
  static_assert(PHASES <= 2, "at least 4 rows apart");
  struct Copier {
    const u16* next;  // this thread's first chunk of the next k-tile to copy
    u32 dst[PHASES];  // shared offsets of its first PHASES chunks

    // Where this thread's first chunk of the tile at (mn0, k0) lies in the operand as stored.
    GEMMTUNE_DEVICE_INLINE static int strided_of(int mn0, int k0) {
      return (K_MAJOR ? mn0 : k0) + int(threadIdx.x) / CHUNKS;
    }
    GEMMTUNE_DEVICE_INLINE static int contiguous_of(int mn0, int k0) {
      return (K_MAJOR ? k0 : mn0) + int(threadIdx.x) % CHUNKS * 8;
    }

    // The stored row of this thread's first: its tile row's (GATE_HALVES: the up half's rows
    // begin at stored row `up_half`).
    GEMMTUNE_DEVICE_INLINE static int stored_row_of(int mn0, int k0, int up_half) {
      if constexpr (!GATE_HALVES) return strided_of(mn0, k0);
      const int row = int(threadIdx.x) / CHUNKS;
      return (row % 2 ? up_half : 0) + (mn0 + row) / 2;
    }

    GEMMTUNE_DEVICE_INLINE Copier(u64 operand, long long ld, int mn0, int k0, int up_half = 0) {
      const int row = int(threadIdx.x) / CHUNKS, chunk = int(threadIdx.x) % CHUNKS;
#pragma unroll
      for (int p = 0; p < PHASES; ++p) dst[p] = Tile::offset(row + p * ROW_STEP, chunk);
      next = reinterpret_cast<const u16*>(operand) +
             (long long)stored_row_of(mn0, k0, up_half) * ld + contiguous_of(mn0, k0);
    }

    // Copies the k-tile of the block tile at (mn0, k0) (the one after the last copied) into the
    // tile at shared address `tile`. GUARD: the tile crosses an edge of the operand
    // (mn_size x k_size); values past it become zeros.
    template <bool GUARD>
    GEMMTUNE_DEVICE_INLINE void copy(u32 tile, int mn0, int k0, u64 operand, long long ld,
                                     int mn_size, int k_size) {
      const int strided_end = K_MAJOR ? mn_size : k_size;
      const int s0 = strided_of(mn0, k0);
      const int valid_contiguous = (K_MAJOR ? k_size : mn_size) - contiguous_of(mn0, k0);
      const u16* origin =
          reinterpret_cast<const u16*>(operand);  // read nowhere: a valid address for empty copies
      const long long row_step = STORED_ROW_STEP * ld;
      const u16* src = next;
#pragma unroll
      for (int i = 0; i < PER_THREAD; ++i) {
        const u32 offset = dst[i % PHASES] + u32((i - i % PHASES) * ROW_STEP * Tile::ROW_BYTES);
        const int valid = !GUARD ? 8 : (s0 + i * ROW_STEP < strided_end ? valid_contiguous : 0);
        copy_chunk<GUARD>(tile + offset, src, valid, origin);
        src += row_step;
      }
      next += K_MAJOR ? (long long)BK : BK * ld;
    }

    // Eight values (fewer when `valid` < 8: the rest are zeros) from src to the shared chunk dst.
    template <bool GUARD>
    GEMMTUNE_DEVICE_INLINE static void copy_chunk(u32 dst, const u16* src, int valid,
                                                  const u16* origin) {
      if constexpr (VEC == 8) {
        if (!GUARD) return ptx::cp_async_16(dst, src);
        const int bytes = 2 * max(0, min(8, valid));
        ptx::cp_async_16(dst, bytes > 0 ? src : origin,
                         u32(bytes));  // nothing is read when bytes == 0
      } else if constexpr (VEC > 1) {
#pragma unroll
        for (int p = 0; p < 8; p += VEC) {
          const int bytes = 2 * max(0, min(VEC, valid - p));
          ptx::cp_async_small<2 * VEC>(dst + 2 * p, bytes > 0 ? src + p : origin, u32(bytes));
        }
      } else {
        // Not even 4-byte aligned: plain 2-byte loads, packed, stored synchronously.
        u32 word[4];
#pragma unroll
        for (int w = 0; w < 4; ++w) {
          const u32 lo = (!GUARD || 2 * w < valid) ? u32(src[2 * w]) : 0u;
          const u32 hi = (!GUARD || 2 * w + 1 < valid) ? u32(src[2 * w + 1]) : 0u;
          word[w] = lo | (hi << 16);
        }
        ptx::st_shared_16(dst, word[0], word[1], word[2], word[3]);
      }
    }
  };

  // ---- shared -> registers ----------------------------------------------------------------

  // Where this lane points ldmatrix.x4 for the WARP_MN x 16 (K) blocks of its warp, block i
  // along MN (16 values) at k-step kk. The four 8x8 blocks in the order an mma wants them:
  // A_SIDE (the mma's 16-row operand) takes block q = lane/8 as MN half q%2, K half q/2; the
  // other side (two 8-column operands) as MN half q/2, K half q%2. Block rows are multiples of
  // 8, so every row a lane addresses has the swizzle of lane % 8. Along the rows a block's offset
  // is a constant; along the chunks (k-steps of K-major tiles, MN blocks of MN-major ones) it is
  // 2 chunks per step, which never carry into the warp's own chunk offset, so that the swizzled
  // offset of step x is that of step 0 XOR 32x: one register per operand.
  static constexpr int KSTEPS = BK / 16;
  static constexpr int BLOCKS = WARP_MN / 16;
  static_assert(K_MAJOR || (WARP_MN / 8) % (2 * BLOCKS) == 0,
                "MN blocks stay below the warp's chunk offset");
  template <bool A_SIDE>
  struct FragmentReader {
    u32 lane;  // this lane's offset in block (0, 0) of its warp's tile

    GEMMTUNE_DEVICE_INLINE FragmentReader(int lane_id, int warp_mn) {
      const int q = lane_id / 8;
      const int mn_half = A_SIDE ? q % 2 : q / 2;
      const int k_half = A_SIDE ? q / 2 : q % 2;
      const int row = K_MAJOR ? warp_mn + 8 * mn_half + lane_id % 8 : 8 * k_half + lane_id % 8;
      const int chunk = K_MAJOR ? k_half : warp_mn / 8 + mn_half;
      lane = Tile::offset(row, chunk);  // the swizzle of row is that of lane_id % 8
    }

    GEMMTUNE_DEVICE_INLINE void read(u32 (&r)[4], u32 tile, int i, int kk) const {
      const int along_rows = K_MAJOR ? i : kk, along_chunks = K_MAJOR ? kk : i;
      const u32 address =
          tile + (lane ^ u32(32 * along_chunks)) + u32(16 * along_rows * Tile::ROW_BYTES);
      ptx::ldmatrix_x4<!K_MAJOR>(r, address);
    }
  };
};

// Cfg provides: BM, BN, BK (block tile), WM, WN (warp tile), STAGES (2-5), GROUP (tiles per
// raster group along M; a grouped problem's column tiles per raster group), VEC (8, 4, 2, 1),
// SPLITS (parts of K), GROUP_TABLE (a grouped problem's groups the table holds; 0: one GEMM),
// A_T, B_T (bools: A stored along K, B along N), DTYPE (0 f32 as tf32, 1 f16, 2 bf16), PRODUCTS
// (f32: tf32 products, 1 or 3; 1 else).
template <class Cfg>
struct Kernel {
  static constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, WM = Cfg::WM, WN = Cfg::WN;
  static constexpr int STAGES = Cfg::STAGES;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
  static constexpr bool TF32 = Cfg::DTYPE == GEMMTUNE_TYPE_F32;
  static constexpr int PRODUCTS = Cfg::PRODUCTS;
  // 16-bit halves a value moves as: the copies and fragments count K in them.
  static constexpr int HALVES = TF32 ? 2 : 1;
  static constexpr int BK_HALVES = BK * HALVES;
  static constexpr int KK = BK_HALVES / 16;  // mma k-steps per stage
  static constexpr int FN = WN / 16;         // 16-row mma fragments along N per warp (from B)
  static constexpr int FM =
      WM / 16;  // ldmatrix.x4 along M per warp (from A): two 8-column fragments each
  // A gated problem (SwiGLU, GeGLU): the A tile's even rows are gate rows, its odd rows up rows,
  // so that each accumulator pair holds both of one output (store_gated).
  static constexpr bool GATED = Cfg::GATE != GATE_NONE;
  // A is K-major when transposed; B when not.
  using OpA = Operand<BM, BK_HALVES, Cfg::A_T, THREADS, Cfg::VEC, WM, Cfg::GATE == GATE_HALVES>;
  using OpB = Operand<BN, BK_HALVES, !Cfg::B_T, THREADS, Cfg::VEC, WN>;
  static constexpr int STAGE_BYTES = OpA::BYTES + OpB::BYTES;
  static constexpr int SPLITS = Cfg::SPLITS;
  // A grouped problem's table of the groups' column tiles, in the stages until the main loop.
  static constexpr int GROUP_TABLE = Cfg::GROUP_TABLE;
  static constexpr bool GROUPED = GROUP_TABLE > 0;
  static constexpr int RING_BYTES =
      STAGES * STAGE_BYTES > 4 * GROUP_TABLE ? STAGES* STAGE_BYTES : 4 * GROUP_TABLE;
  // Split-K: a word after the stages says whether this block's part arrived last.
  static constexpr int SMEM_BYTES = RING_BYTES + (SPLITS > 1 ? 16 : 0);

  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles divide the block tile");
  static_assert(WM % 16 == 0 && WN % 16 == 0 && BK_HALVES % 32 == 0,
                "warp tiles of 16s, BK of 64 bytes");
  static_assert(!TF32 || (Cfg::A_T && !Cfg::B_T), "f32 operands are read along K");
  static_assert(PRODUCTS == 1 || (TF32 && PRODUCTS == 3), "3 products for f32 (3xTF32) alone");
  static_assert(!GATED || (Cfg::A_T && !GROUPED && !TF32),
                "gated: 16-bit A stored along K, one GEMM");
  static_assert(KK % 2 == 0, "fragments alternate between two register sets per k-step");
  static_assert(STAGES >= 2 && STAGES <= 5, "2 to 5 stages");
  static_assert(SPLITS >= 1, "at least one part of K");
  static_assert(!GROUPED || SPLITS == 1, "a grouped problem's tiles take K whole");

  using Acc = float[FN][2 * FM][4];
  // beta != 0: C's old values read ahead of their stores, four pairs at a time (store_pairs.cuh).
  static constexpr int STORE_BATCH = 2 * FM < 4 ? 2 * FM : 4;
  static constexpr int ACC = FN * 2 * FM * 4;  // accumulators per thread
  struct Fragments {
    u32 n[FN][4];  // the mma's 16-row operand: op(B)^T
    u32 m[FM][4];  // its 8-column operands, two per ldmatrix: op(A)^T
  };

  // Everything a thread needs to fill stages and read fragments, computed once.
  struct Mainloop {
    const Mma80Args& args;
    typename OpA::Copier copy_a;
    typename OpB::Copier copy_b;
    typename OpA::template FragmentReader<false> read_a;
    typename OpB::template FragmentReader<true> read_b;
    u32 smem;    // shared address of stage 0
    int m0, n0;  // the block tile
    int n_end;   // a grouped problem's: the end of its group's columns

    // k_begin: the first k-tile this block accumulates. A grouped problem's block reads A at `a`
    // (its group's) and no column of B from n_end on; one GEMM's at args.core.a, up to n.
    GEMMTUNE_DEVICE_INLINE Mainloop(const Mma80Args& args_, u32 smem_, int m0_, int n0_,
                                    int k_begin, u64 a = 0, int n_end_ = 0)
        : args(args_),
          copy_a(GROUPED ? a : args_.core.a, args_.core.lda * HALVES, m0_, k_begin * BK_HALVES,
                 args_.core.m / 2),
          copy_b(args_.core.b, args_.core.ldb * HALVES, n0_, k_begin * BK_HALVES),
          read_a(int(threadIdx.x % 32), warp_m()),
          read_b(int(threadIdx.x % 32), warp_n()),
          smem(smem_),
          m0(m0_),
          n0(n0_),
          n_end(n_end_) {}

    // The columns of B the block may read.
    GEMMTUNE_DEVICE_INLINE int n_size() const { return GROUPED ? n_end : args.core.n; }

    // Starts the copies of k-tile kt (if it exists; k-tiles come in order) into `stage`; always
    // commits a group, so that the number of groups in flight says which stages have landed.
    // GUARD: the tile may cross an edge of the operands; without, it lies inside them
    // (kt < guard_from()).
    template <bool GUARD>
    GEMMTUNE_DEVICE_INLINE void fill(int kt, int k_end, int stage) {
      if (kt < k_end) {
        const int k0 = kt * BK_HALVES, k = args.core.k * HALVES;  // in halves
        const long long lda = args.core.lda * HALVES, ldb = args.core.ldb * HALVES;
        const u32 tile = smem + u32(stage * STAGE_BYTES);
        copy_a.template copy<GUARD>(tile, m0, k0, args.core.a, lda, args.core.m, k);
        copy_b.template copy<GUARD>(tile + OpA::BYTES, n0, k0, args.core.b, ldb, n_size(), k);
      }
      ptx::cp_async_commit();
    }

    // The first k-tile that may cross an edge of the operands: 0 in a block at the edge of M or
    // N, else the first past the whole k-tiles of K.
    GEMMTUNE_DEVICE_INLINE int guard_from() const {
      const bool inside = m0 + BM <= args.core.m && n0 + BN <= n_size();
      return inside ? args.core.k / BK : 0;
    }

    GEMMTUNE_DEVICE_INLINE void read(Fragments& f, int stage, int kk) const {
      const u32 tile = smem + u32(stage * STAGE_BYTES);
#pragma unroll
      for (int i = 0; i < FN; ++i) read_b.read(f.n[i], tile + OpA::BYTES, i, kk);
#pragma unroll
      for (int j = 0; j < FM; ++j) read_a.read(f.m[j], tile, j, kk);
    }
  };

  // First row (M) and column (N) of this warp's tile in the block tile.
  GEMMTUNE_DEVICE_INLINE static int warp_m() {
    return int(threadIdx.x / 32) % WARPS_M * WM;
  }
  GEMMTUNE_DEVICE_INLINE static int warp_n() {
    return int(threadIdx.x / 32) / WARPS_M * WN;
  }

  // acc[i][j] += fragment i of op(B)^T by 8-column fragment j of op(A)^T (its two registers of
  // the ldmatrix that read two).
  template <class Mma>
  GEMMTUNE_DEVICE_INLINE static void products(Acc& acc, const Fragments& n_side,
                                              const Fragments& m_side, Mma mma) {
#pragma unroll
    for (int i = 0; i < FN; ++i)
#pragma unroll
      for (int j = 0; j < 2 * FM; ++j)
        mma(acc[i][j], n_side.n[i], m_side.m[j / 2][2 * (j % 2)], m_side.m[j / 2][2 * (j % 2) + 1]);
  }

  // op(out's register, the same register of `in`) for every register of the fragments: the
  // element-wise splits of tf32.
  template <class Op>
  GEMMTUNE_DEVICE_INLINE static void each_register(Fragments& out, const Fragments& in, Op op) {
#pragma unroll
    for (int i = 0; i < FN; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) op(out.n[i][e], in.n[i][e]);
#pragma unroll
    for (int j = 0; j < FM; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) op(out.m[j][e], in.m[j][e]);
  }

  // f32 as tf32: each value rounded (big), and with 3xTF32 the rounded remainder (small) too.
  // The small products go first: they are the smaller part of each sum.
  GEMMTUNE_DEVICE_INLINE static void multiply_tf32(Acc& acc, const Fragments& f) {
    const auto mma = [](float(&d)[4], const u32(&a)[4], u32 b0, u32 b1) {
      ptx::mma_1688_tf32(d, a, b0, b1);
    };
    Fragments big;
    each_register(big, f, [](u32& x, u32 value) { x = ptx::to_tf32(value); });
    if constexpr (PRODUCTS == 3) {
      Fragments small = f;
      each_register(small, big, [](u32& x, u32 rounded) {
        x = ptx::to_tf32(__float_as_uint(__uint_as_float(x) - __uint_as_float(rounded)));
      });
      products(acc, small, big, mma);
      products(acc, big, small, mma);
    }
    products(acc, big, big, mma);
  }

  GEMMTUNE_DEVICE_INLINE static void multiply(Acc& acc, const Fragments& f) {
    if constexpr (TF32)
      multiply_tf32(acc, f);
    else
      products(acc, f, f, [](float(&d)[4], const u32(&a)[4], u32 b0, u32 b1) {
        ptx::mma_16816<Cfg::DTYPE>(d, a, b0, b1);
      });
  }

  // Multiplies k-tile kt, whose fragments of its first k-step are in frag[0], and starts the
  // copies of tile kt + STAGES - 1 (GUARD: with the checks of a tile that may cross an edge).
  // Fragments of the next k-step are read while the current one is multiplied, and the barrier
  // that hands over a stage sits before the last k-step's mma.
  template <bool GUARD>
  GEMMTUNE_DEVICE_INLINE static void multiply_tile(Mainloop& ml, int kt, int k_end, int& read_stage,
                                                   Fragments (&frag)[2], Acc& acc) {
#pragma unroll
    for (int kk = 0; kk < KK; ++kk) {
      if (kk == KK - 1) {
        // Tile kt+1 has landed (for this thread; the barrier makes it so for all), and every
        // warp has read its last fragments of tile kt-1, whose stage is refilled below.
        read_stage = read_stage + 1 == STAGES ? 0 : read_stage + 1;
        ptx::cp_async_wait<STAGES - 2>();
        __syncthreads();
      }
      // Copies first, then the next fragments: their addresses and the fragments are not live
      // at once (64x64 warp tiles: 225 registers instead of 242, and no spills on sm_90).
      if (kk == 0)
        ml.template fill<GUARD>(kt + STAGES - 1, k_end,
                                read_stage == 0 ? STAGES - 1 : read_stage - 1);
      ml.read(frag[(kk + 1) % 2], read_stage, (kk + 1) % KK);
      multiply(acc, frag[kk % 2]);
    }
  }

  // Accumulates k-tiles [k_begin, k_end) into acc, STAGES-1 tiles in flight ahead of the one
  // being multiplied. The tiles inside the operands are copied in a loop of their own, without
  // edge checks: in one loop the compiler predicates both kinds of copy, and every k-tile issued
  // both (docs/PERF.md, 'Tiles inside the operands are copied without edge checks').
  GEMMTUNE_DEVICE_INLINE static void accumulate(Mainloop& ml, int k_begin, int k_end, Acc& acc) {
    const int guard_from = ml.guard_from();
#pragma unroll 1  // one copy of the fill code: it runs once per block
    for (int s = 0; s < STAGES - 1; ++s) {
      if (k_begin + s < guard_from)
        ml.template fill<false>(k_begin + s, k_end, s);
      else
        ml.template fill<true>(k_begin + s, k_end, s);
    }
    ptx::cp_async_wait<STAGES - 2>();
    __syncthreads();
    Fragments frag[2];
    int read_stage = 0;  // the stage of tile kt; tile kt + STAGES - 1 goes to the one before it
    ml.read(frag[0], read_stage, 0);
    int kt = k_begin;
    for (; kt < k_end && kt + STAGES - 1 < guard_from; ++kt)
      multiply_tile<false>(ml, kt, k_end, read_stage, frag, acc);
    for (; kt < k_end; ++kt) multiply_tile<true>(ml, kt, k_end, read_stage, frag, acc);
    ptx::cp_async_wait<0>();  // only empty groups are left; none may outlive the block
  }

  // ---- epilogue -----------------------------------------------------------------------------

  // acc[i][j] holds, for lane t, columns n = 16i + t/4 (+8 in elements 2, 3) and rows
  // m = 8j + 2(t%4), +1 of the warp's tile. A grouped problem's columns from n_end on (its
  // group's end) are not stored.
  // D = act(alpha * acc + beta * C + bias) (epilogue_op.cuh).
  GEMMTUNE_DEVICE_INLINE static void store(const Mma80Args& args, int m0, int n0, const Acc& acc,
                                           int n_end = 0) {
    if constexpr (GATED) return store_gated(args, m0, n0, acc);
    using Epi = EpilogueOp<Cfg>;
    using Elem = typename Output<Cfg::DTYPE>::Elem;
    const Elem* C = reinterpret_cast<const Elem*>(args.core.c);
    Elem* D = reinterpret_cast<Elem*>(args.core.d);
    const int lane = int(threadIdx.x % 32);
    const int m_first = m0 + 2 * (lane % 4);
#pragma unroll
    for (int i = 0; i < FN; ++i) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = n0 + 16 * i + 8 * h + lane / 4;
        if (n >= (GROUPED ? n_end : args.core.n)) continue;
        const long long offset = (long long)n * args.core.ldc;
        auto value = [&](int j, float& v0, float& v1) {
          const int m = m_first + 8 * j;
          v0 = Epi::template add_bias<Cfg::DTYPE>(args.core.alpha * acc[i][j][2 * h], args.core, m,
                                                  n);
          v1 = Epi::template add_bias<Cfg::DTYPE>(args.core.alpha * acc[i][j][2 * h + 1], args.core,
                                                  m + 1, n);
        };
        Elem* aux = Epi::aux_at(args.core, D + offset);
        const ColumnPairs<Cfg::DTYPE> at{C + offset,
                                         D + offset,
                                         m_first,
                                         args.core.m,
                                         pairs_aligned<Cfg::DTYPE>(C + offset, D + offset, aux),
                                         aux};
        store_pairs<Cfg::DTYPE, 2 * FM, STORE_BATCH, Epi>(at, args.core.beta, value,
                                                          [](int) { return false; });
      }
    }
  }

  // A gated problem's D = act(gate) * up (epilogue_op.cuh), D with half of op(A)'s rows: the pair
  // of rows m, m + 1 of acc[i][j] holds gate and up of D's row m / 2 (m is even). A gated problem
  // reads no C (validate()).
  GEMMTUNE_DEVICE_INLINE static void store_gated(const Mma80Args& args, int m0, int n0,
                                                 const Acc& acc) {
    using O = Output<Cfg::DTYPE>;
    typename O::Elem* D = reinterpret_cast<typename O::Elem*>(args.core.d);
    const int lane = int(threadIdx.x % 32);
    const int rows = args.core.m / 2, first_row = (m0 + 2 * (lane % 4)) / 2;
    const float alpha = args.core.alpha;
#pragma unroll
    for (int i = 0; i < FN; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = n0 + 16 * i + 8 * h + lane / 4;
        if (n >= args.core.n) continue;
        typename O::Elem* column = D + (long long)n * args.core.ldc;
#pragma unroll
        for (int j = 0; j < 2 * FM; ++j) {
          const int row = first_row + 4 * j;
          if (row < rows)
            column[row] = O::from_f32(EpilogueOp<Cfg>::template gated<Cfg::DTYPE>(
                args.core, alpha * acc[i][j][2 * h], alpha * acc[i][j][2 * h + 1], row, n));
        }
      }
  }

  // ---- split-K: reducing a tile computed in parts -------------------------------------------

  // A slot's partial sums: each thread's float4s THREADS apart, so that a block's stores coalesce.
  GEMMTUNE_DEVICE_INLINE static float4* partial_of(const Mma80Args& args, int slot) {
    return reinterpret_cast<float4*>(args.core.workspace) + (long long)slot * (THREADS * ACC / 4) +
           threadIdx.x;
  }

  // acc (+)= this thread's partial sums at `from`.
  template <bool ADD>
  GEMMTUNE_DEVICE_INLINE static void add_partial(const float4* from, Acc& acc) {
    float* a = &acc[0][0][0];
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const float4 v = __ldcg(from + i * THREADS);
      a[4 * i + 0] = ADD ? a[4 * i + 0] + v.x : v.x;
      a[4 * i + 1] = ADD ? a[4 * i + 1] + v.y : v.y;
      a[4 * i + 2] = ADD ? a[4 * i + 2] + v.z : v.z;
      a[4 * i + 3] = ADD ? a[4 * i + 3] + v.w : v.w;
    }
  }

  // This block's part of the tile is done: store it and count it. The last part to arrive adds
  // every part's partial sums in part order into acc and returns true (it runs the epilogue).
  GEMMTUNE_DEVICE_INLINE static bool reduce_parts(const Mma80Args& args, const schedule::Work& w,
                                                  const schedule::Segment& seg, unsigned char* smem,
                                                  Acc& acc) {
    float4* mine = partial_of(args, seg.slot);
    const float* a = &acc[0][0][0];
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i)
      __stcg(mine + i * THREADS, make_float4(a[4 * i], a[4 * i + 1], a[4 * i + 2], a[4 * i + 3]));
    __threadfence();  // the partial sums are visible before the count says so
    __syncthreads();
    int* last = reinterpret_cast<int*>(smem + STAGES * STAGE_BYTES);
    if (threadIdx.x == 0) {
      int* counter = reinterpret_cast<int*>(args.core.counters) + seg.tile;
      *last = atomicAdd(counter, 1) == seg.parts - 1;
      if (*last) *counter = 0;  // every part has counted: ready for the next launch
    }
    __syncthreads();
    if (!*last) return false;
    __threadfence();
    add_partial<false>(partial_of(args, schedule::slot_of(w, seg.tile, 0)), acc);
    for (int part = 1; part < seg.parts; ++part)
      add_partial<true>(partial_of(args, schedule::slot_of(w, seg.tile, part)), acc);
    return true;
  }

  GEMMTUNE_DEVICE_INLINE static void zero(Acc& acc) {
#pragma unroll
    for (int i = 0; i < FN; ++i)
#pragma unroll
      for (int j = 0; j < 2 * FM; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  }

  // One block per (tile, part of K): with SPLITS == 1, one per tile over all of K.
  GEMMTUNE_DEVICE_INLINE static void run_one(const Mma80Args& args, unsigned char* smem) {
    const int k_tiles = (args.core.k + BK - 1) / BK;
    const schedule::Work w =
        schedule::make_work(schedule::SPLIT_K, args.tiling.tiles_m * args.tiling.tiles_n, k_tiles,
                            int(gridDim.x), SPLITS);
    const schedule::Segment seg = schedule::segment(w, int(blockIdx.x), 0);
    int tile_m, tile_n;
    grouped_tile(seg.tile, args.tiling.tiles_m, Cfg::GROUP, args.tiling.divisors, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    Mainloop ml(args, u32(__cvta_generic_to_shared(smem)), m0, n0, seg.k_begin);
    Acc acc;
    zero(acc);
    accumulate(ml, seg.k_begin, seg.k_end, acc);
    if constexpr (SPLITS > 1)
      if (seg.parts > 1 && !reduce_parts(args, w, seg, smem, acc)) return;
    store(args, m0 + warp_m(), n0 + warp_n(), acc);
  }

  // A grouped problem's block. The launch has a block for each of tiles_m x tiling.tiles_n tiles,
  // tiling.tiles_n as many column tiles as the groups can have, swept GROUP column tiles at a time
  // down all of M (raster.h, the sides swapped), so that a group's weights (A) stream once past
  // its tokens (B), which stay in L2. A block past the groups' last column tile leaves.
  GEMMTUNE_DEVICE_INLINE static void run_groups(const Mma80Args& args, unsigned char* smem) {
    int column_tile, tile_m;
    grouped_tile(int(blockIdx.x), args.tiling.tiles_n, Cfg::GROUP, args.tiling.divisors,
                 column_tile, tile_m);
    int* table = reinterpret_cast<int*>(smem);
    build_group_table<BN>(args.core, table);
    __syncthreads();
    const int groups = args.core.groups;
    if (column_tile >= table[groups - 1]) return;  // the same for every thread of the block
    const int group = group_of(table, groups, column_tile);
    const int first = group > 0 ? table[group - 1] : 0;
    __syncthreads();  // every thread has read the table: the stages may overwrite it
    const int m0 = tile_m * BM;
    const int n0 = gemmtune_group_begin(args.core, group) + (column_tile - first) * BN;
    const int n_end = min(gemmtune_group_end(args.core, group), args.core.n);
    // Group g's op(A), the g-th of the stored matrices (Problem::group_stride_a).
    const long long stride_a = args.core.lda * (Cfg::A_T ? args.core.m : args.core.k);
    const u64 a = args.core.a + u64(group * stride_a * 2);
    const int k_tiles = (args.core.k + BK - 1) / BK;
    Mainloop ml(args, u32(__cvta_generic_to_shared(smem)), m0, n0, 0, a, n_end);
    Acc acc;
    zero(acc);
    accumulate(ml, 0, k_tiles, acc);
    store(args, m0 + warp_m(), n0 + warp_n(), acc, n_end);
  }

  GEMMTUNE_DEVICE_INLINE static void run(const Mma80Args& args, unsigned char* smem) {
    if constexpr (GROUPED)
      run_groups(args, smem);
    else
      run_one(args, smem);
  }
};

}  // namespace mma_sm80
}  // namespace gemmtune

#ifndef GEMMTUNE_GENERATED
// Defaults (the large-problem default of the family), so that nvcc can build and disassemble
// the template offline:
//   nvcc -x cu -gencode=arch=compute_80,code=sm_80 -cubin -I templates templates/mma_sm80.cuh
struct GemmtuneMma80Default {
  static constexpr int BIAS = 0, ACTIVATION = 0, GATE = 0, AUX = 0;  // no epilogue
  static constexpr int BM = 128, BN = 128, BK = 32, WM = 64, WN = 64, STAGES = 4, GROUP = 8,
                       VEC = 8, SPLITS = 1, GROUP_TABLE = 0;
  static constexpr bool A_T = true, B_T = false;
  static constexpr int DTYPE = 2, PRODUCTS = 1;
};
extern "C" __global__ void __launch_bounds__(
    gemmtune::mma_sm80::Kernel<GemmtuneMma80Default>::THREADS, 1)
    gemm_mma80_default(const __grid_constant__ Mma80Args args) {
  extern __shared__ __align__(128) unsigned char gemmtune_smem[];
  gemmtune::mma_sm80::Kernel<GemmtuneMma80Default>::run(args, gemmtune_smem);
}
#endif
