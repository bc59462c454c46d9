// SIMT fp32 GEMM: the classic ladder as one parameterized family.
//
//   shared-memory tiles BM x BN x BK  ->  warp tiles WM x WN  ->  thread tiles TM x TN
//   register caching of A/B fragments, VEC-wide global loads where alignment allows,
//   STAGES = 1 (load, sync, compute) or 2 (double-buffered: the next tile is fetched into
//   registers while the current one is multiplied).
//
// Correct for any M, N, K >= 1, all four op(A)/op(B), any ld >= rows, any alpha and beta
// (beta == 0 never reads C). C = alpha * op(A) * op(B) + beta * C, column-major.
#pragma once
#include "common.cuh"
#include "epilogue_op.cuh"
#include "simt_args.h"

namespace gemmtune {
namespace simt {

template <int VEC>
GEMMTUNE_DEVICE_INLINE void load_vec(float (&dst)[VEC], const float* p) {
  if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    dst[0] = t.x;
    dst[1] = t.y;
    dst[2] = t.z;
    dst[3] = t.w;
  } else if constexpr (VEC == 2) {
    const float2 t = *reinterpret_cast<const float2*>(p);
    dst[0] = t.x;
    dst[1] = t.y;
  } else {
    dst[0] = *p;
  }
}

template <int VEC>
GEMMTUNE_DEVICE_INLINE void store_vec(float* p, const float (&src)[VEC]) {
  if constexpr (VEC == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(src[0], src[1], src[2], src[3]);
  } else if constexpr (VEC == 2) {
    *reinterpret_cast<float2*>(p) = make_float2(src[0], src[1]);
  } else {
    *p = src[0];
  }
}

// Copies the BK x MN tile of one operand from global memory into shared memory laid out
// [BK][MN + PAD] (MN contiguous), whatever the operand's storage order. K_CONTIG: the operand
// is stored with K contiguous (A transposed, or B not transposed), so the copy transposes.
// GATE (A of a gated problem, K_CONTIG): tile rows alternate gate and up rows, row t reading
// op(A)'s gate row of output t / 2 (t even) or its up row (epilogue_op.cuh).
template <int MN, int BK, int PAD, int VEC, int THREADS, bool K_CONTIG, int GATE = GATE_NONE>
struct TileLoader {
  static constexpr int CONTIG = K_CONTIG ? BK : MN;  // extent along the stored-contiguous dim
  static constexpr int STRIDED = K_CONTIG ? MN : BK;
  static constexpr int VECS_PER_LINE = CONTIG / VEC;
  static constexpr int VECS = VECS_PER_LINE * STRIDED;
  static constexpr int PER_THREAD = (VECS + THREADS - 1) / THREADS;
  static constexpr bool EXACT = VECS % THREADS == 0;
  static constexpr int LD_SMEM = MN + PAD;
  static_assert(CONTIG % VEC == 0, "the contiguous tile extent must be a multiple of VEC");
  static_assert(GATE == GATE_NONE || K_CONTIG, "gate and up rows are stored along K");

  GEMMTUNE_DEVICE_INLINE static int stored_row(int t, int rows) {
    if constexpr (GATE == GATE_NONE)
      return t;
    else
      return t % 2 == 0 ? gate_row_of(GATE, t / 2) : up_row_of(GATE, t / 2, rows);
  }

  float reg[PER_THREAD][VEC];

  // src: element (0, 0) of the operand as stored, ld in elements; the tile starts at (mn0, k0)
  // of the operand in (M or N, K) coordinates, the operand is mn_size x k_size.
  template <bool GUARD>
  GEMMTUNE_DEVICE_INLINE void load(const float* __restrict__ src, long long ld, int mn0, int k0,
                                   int mn_size, int k_size, int tid) {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int v = tid + i * THREADS;
      if (!EXACT && v >= VECS) continue;
      const int c = (v % VECS_PER_LINE) * VEC;
      const int s = v / VECS_PER_LINE;
      const int contig_pos = (K_CONTIG ? k0 : mn0) + c;
      const int strided_pos = (K_CONTIG ? mn0 : k0) + s;
      const int stored_pos =
          K_CONTIG && strided_pos < mn_size ? stored_row(strided_pos, mn_size) : strided_pos;
      const float* p = src + (long long)stored_pos * ld + contig_pos;
      if (!GUARD) {
        load_vec<VEC>(reg[i], p);
        continue;
      }
      const int contig_lim = K_CONTIG ? k_size : mn_size;
      const int strided_lim = K_CONTIG ? mn_size : k_size;
      if (strided_pos < strided_lim && contig_pos + VEC <= contig_lim) {
        load_vec<VEC>(reg[i], p);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j)
          reg[i][j] = (strided_pos < strided_lim && contig_pos + j < contig_lim) ? p[j] : 0.0f;
      }
    }
  }

  GEMMTUNE_DEVICE_INLINE void store(float* smem, int tid) const {
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
      const int v = tid + i * THREADS;
      if (!EXACT && v >= VECS) continue;
      const int c = (v % VECS_PER_LINE) * VEC;
      const int s = v / VECS_PER_LINE;
      if (K_CONTIG) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) smem[(c + j) * LD_SMEM + s] = reg[i][j];
      } else {
        store_vec<VEC>(smem + s * LD_SMEM + c, reg[i]);
      }
    }
  }
};

// Cfg provides: BM, BN, BK, WM, WN, TM, TN, VEC, STAGES, GROUP (tiles per raster group along M;
// ints), A_T, B_T (bools).
template <class Cfg>
struct Kernel {
  static constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK;
  static constexpr int WM = Cfg::WM, WN = Cfg::WN, TM = Cfg::TM, TN = Cfg::TN;
  static constexpr int VEC = Cfg::VEC, STAGES = Cfg::STAGES;
  static constexpr bool A_T = Cfg::A_T, B_T = Cfg::B_T;
  static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
  static constexpr int THREADS = WARPS_M * WARPS_N * 32;
  // Lanes of a warp along M and N. A thread owns TM/4 runs of 4 rows, TX*4 rows apart, so a
  // warp's 16-byte shared loads are contiguous (conflict-free) or broadcast.
  static constexpr int TX = WM / TM, TY = WN / TN;
  static_assert(TX * TY == 32, "a warp tile must hold 32 thread tiles");
  static_assert(TM % 4 == 0 && TN % 4 == 0, "thread tiles are made of 4-wide runs");
  static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles must divide the block tile");
  static_assert(STAGES == 1 || STAGES == 2, "one or two shared-memory stages");
  // Transposing copies write columns: pad rows so that they spread over banks.
  static constexpr int PAD_A = A_T ? 4 : 0;
  static constexpr int PAD_B = B_T ? 0 : 4;
  static constexpr int GATE = Cfg::GATE;
  static_assert(GATE == GATE_NONE || A_T, "gated: the weights stored along K");
  using LoaderA = TileLoader<BM, BK, PAD_A, VEC, THREADS, A_T, GATE>;
  using LoaderB = TileLoader<BN, BK, PAD_B, VEC, THREADS, !B_T>;
  static constexpr int SMEM_A = BK * (BM + PAD_A);
  static constexpr int SMEM_B = BK * (BN + PAD_B);
  static constexpr int SMEM_BYTES = STAGES * (SMEM_A + SMEM_B) * 4;

  GEMMTUNE_DEVICE_INLINE static void run(const SimtArgs& args, float* smem) {
    const int M = args.core.m, N = args.core.n, K = args.core.k;
    int tile_m, tile_n;
    grouped_tile(blockIdx.x, args.tiling.tiles_m, Cfg::GROUP, args.tiling.divisors, tile_m, tile_n);
    const int m0 = tile_m * BM, n0 = tile_n * BN;
    const float* __restrict__ A = reinterpret_cast<const float*>(args.core.a);
    const float* __restrict__ B = reinterpret_cast<const float*>(args.core.b);

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int row0 = (warp % WARPS_M) * WM + (lane % TX) * 4;  // first row of this thread's runs
    const int col0 = (warp / WARPS_M) * WN + (lane / TX) * 4;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    LoaderA load_a;
    LoaderB load_b;
    const bool full_m = m0 + BM <= M, full_n = n0 + BN <= N;
    auto fetch = [&](int kt) {
      const int k0 = kt * BK;
      const bool full_k = k0 + BK <= K;
      if (full_m && full_k)
        load_a.template load<false>(A, args.core.lda, m0, k0, M, K, tid);
      else
        load_a.template load<true>(A, args.core.lda, m0, k0, M, K, tid);
      if (full_n && full_k)
        load_b.template load<false>(B, args.core.ldb, n0, k0, N, K, tid);
      else
        load_b.template load<true>(B, args.core.ldb, n0, k0, N, K, tid);
    };
    auto stash = [&](int stage) {
      load_a.store(smem + stage * (SMEM_A + SMEM_B), tid);
      load_b.store(smem + stage * (SMEM_A + SMEM_B) + SMEM_A, tid);
    };

    const int k_tiles = (K + BK - 1) / BK;
    fetch(0);
    stash(0);
    __syncthreads();
    for (int kt = 0; kt < k_tiles; ++kt) {
      const int stage = STAGES == 2 ? (kt & 1) : 0;
      const bool more = kt + 1 < k_tiles;
      if (STAGES == 2 && more) fetch(kt + 1);  // in flight while this tile is multiplied
      multiply(smem + stage * (SMEM_A + SMEM_B), row0, col0, acc);
      if (STAGES == 2) {
        if (more) stash(stage ^ 1);
        __syncthreads();
      } else {
        __syncthreads();
        if (more) {
          fetch(kt + 1);
          stash(0);
          __syncthreads();
        }
      }
    }
    write_c(args, m0 + row0, n0 + col0, acc);
  }

  GEMMTUNE_DEVICE_INLINE static void multiply(const float* stage, int row0, int col0,
                                              float (&acc)[TM][TN]) {
    const float* sA = stage;
    const float* sB = stage + SMEM_A;
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) {
        const float4 t =
            *reinterpret_cast<const float4*>(sA + kk * (BM + PAD_A) + row0 + i * TX * 4);
        a[4 * i] = t.x;
        a[4 * i + 1] = t.y;
        a[4 * i + 2] = t.z;
        a[4 * i + 3] = t.w;
      }
#pragma unroll
      for (int j = 0; j < TN / 4; ++j) {
        const float4 t =
            *reinterpret_cast<const float4*>(sB + kk * (BN + PAD_B) + col0 + j * TY * 4);
        b[4 * j] = t.x;
        b[4 * j + 1] = t.y;
        b[4 * j + 2] = t.z;
        b[4 * j + 3] = t.w;
      }
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
  }

  // row/col: this thread's first output row and column; its runs are TX*4 rows and TY*4
  // columns apart.
  // D = act(alpha * acc + beta * C + bias) (epilogue_op.cuh).
  GEMMTUNE_DEVICE_INLINE static void write_c(const SimtArgs& args, int row, int col,
                                             const float (&acc)[TM][TN]) {
    if constexpr (GATE != GATE_NONE) return write_gated(args, row, col, acc);
    using Epi = EpilogueOp<Cfg>;
    const float* C = reinterpret_cast<const float*>(args.core.c);
    float* D = reinterpret_cast<float*>(args.core.d);
    const float alpha = args.core.alpha, beta = args.core.beta;
    auto value = [&](float a, int m, int n) {
      return Epi::template add_bias<GEMMTUNE_TYPE_F32>(alpha * a, args.core, m, n);
    };
    const bool read_c = beta != 0.0f;  // beta == 0 must not read C: it may be uninitialised
    constexpr int CVEC = VEC;  // the alignment class that allows VEC-wide A/B allows it for C
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = col + (j / 4) * TY * 4 + (j % 4);
      if (n >= args.core.n) continue;
#pragma unroll
      for (int i = 0; i < TM / 4; ++i) {
        const int m = row + i * TX * 4;
        const long long offset = (long long)n * args.core.ldc + m;
        if (m + 4 <= args.core.m) {
#pragma unroll
          for (int r = 0; r < 4; r += CVEC) {
            float out[CVEC], pre[CVEC];  // pre: the pre-activation (Epi::AUX)
            float old[CVEC];
            if (read_c) load_vec<CVEC>(old, C + offset + r);
#pragma unroll
            for (int e = 0; e < CVEC; ++e) {
              const float v = value(acc[4 * i + r + e][j], m + r + e, n);
              pre[e] = read_c ? fmaf(beta, old[e], v) : v;
              out[e] = Epi::finish(pre[e]);
            }
            if constexpr (Epi::AUX) store_vec<CVEC>(Epi::aux_at(args.core, D + offset + r), pre);
            store_vec<CVEC>(D + offset + r, out);
          }
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            if (m + r >= args.core.m) break;
            const float v = value(acc[4 * i + r][j], m + r, n);
            const float pre_r = read_c ? fmaf(beta, C[offset + r], v) : v;
            if constexpr (Epi::AUX) *Epi::aux_at(args.core, D + offset + r) = pre_r;
            D[offset + r] = Epi::finish(pre_r);
          }
        }
      }
    }
  }

  // A gated problem's D (M / 2 rows, C never read): rows m and m + 1 of a thread's run (m even)
  // hold gate and up of D's row m / 2 (the loader's order).
  GEMMTUNE_DEVICE_INLINE static void write_gated(const SimtArgs& args, int row, int col,
                                                 const float (&acc)[TM][TN]) {
    float* D = reinterpret_cast<float*>(args.core.d);
    const float alpha = args.core.alpha;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int n = col + (j / 4) * TY * 4 + (j % 4);
      if (n >= args.core.n) continue;
#pragma unroll
      for (int i = 0; i < TM / 4; ++i)
#pragma unroll
        for (int r = 0; r < 4; r += 2) {
          const int m = row + i * TX * 4 + r;
          if (m >= args.core.m) break;
          D[(long long)n * args.core.ldc + m / 2] =
              EpilogueOp<Cfg>::template gated<GEMMTUNE_TYPE_F32>(
                  args.core, alpha * acc[4 * i + r][j], alpha * acc[4 * i + r + 1][j], m / 2, n);
        }
    }
  }
};

}  // namespace simt
}  // namespace gemmtune

#ifndef GEMMTUNE_GENERATED
// Defaults, so that `nvcc -arch=sm_90 -cubin simt.cuh -x cu` builds and disassembles it offline.
struct GemmtuneSimtDefault {
  static constexpr int BIAS = 0, ACTIVATION = 0, GATE = 0, AUX = 0;  // no epilogue
  static constexpr int BM = 128, BN = 128, BK = 8, WM = 64, WN = 32, TM = 8, TN = 8;
  static constexpr int VEC = 4, STAGES = 2, GROUP = 8;
  static constexpr bool A_T = false, B_T = false;
};
extern "C" __global__ void __launch_bounds__(gemmtune::simt::Kernel<GemmtuneSimtDefault>::THREADS)
    gemm_simt_default(const __grid_constant__ SimtArgs args) {
  extern __shared__ float4 gemmtune_smem[];
  gemmtune::simt::Kernel<GemmtuneSimtDefault>::run(args, reinterpret_cast<float*>(gemmtune_smem));
}
#endif
