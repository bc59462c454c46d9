// GEMV: C = alpha * op(A) * op(B) + beta * C when N == 1 or M == 1, at memory speed.
//
// The problem is y = W x, with W the matrix operand, read exactly once:
//   SIDE 0 (N == 1): y = C(:, 0), R = M outputs;        W = op(A), x = op(B)(:, 0)
//   SIDE 1 (M == 1): y = C(0, :), R = N outputs ldc apart; W = op(B)^T, x = op(A)(0, :)
// W is stored one of two ways, which fixes the kernel's shape:
//   dot  (tn with N == 1, op(B) = N with M == 1): the K values of an output are contiguous. A warp
//        owns ROWS outputs and sweeps their K range with VEC-wide loads; x is read through L1
//        when contiguous, or staged in shared memory (XCHUNK elements at a time) when strided.
//   axpy (op(A) = N with N == 1, op(B) = T with M == 1): each K column holds contiguous outputs.
//        A lane owns ROWS vectors of VEC outputs; the block's warps share K, then add their sums
//        in shared memory in warp order.
// KSPLIT > 1 splits K over the blocks of grid.y (gemv_split.h). Each block stores fp32 partial
// sums in the workspace; the last block of a row block to arrive (one counter each) adds all
// slices in slice order, so the result is bitwise the same on every run, and sets its counter
// back to zero.
// W is streamed (no L1 allocation, first out of L2), ROWS * UNROLL loads per lane in flight.
// Any M, N, K >= 1, any ld >= rows; VEC-wide loads need the problem aligned to VEC elements;
// beta == 0 never reads C. fp32 accumulation for every dtype.
// Gated epilogues (SwiGLU, GeGLU; dot with N == 1 only): the block's rows come in pairs, the gate
// row of an output then its up row (epilogue_op.cuh's gate_row_of, up_row_of), and the store
// writes act(gate) * up into D's row of the pair.
#pragma once
#include "common.cuh"
#include "epilogue_op.cuh"
#include "gemv_args.h"
#include "gemv_split.h"

namespace gemmtune {
namespace gemv {

// The raw bits of BYTES bytes (2, 4, 8 or 16) of elements, loaded with one instruction.
template <int BYTES>
struct Bits {
  static constexpr int WORDS = BYTES >= 4 ? BYTES / 4 : 1;
  u32 w[WORDS];
};

// An L2 policy for data read once: first to be evicted. (sm_90 takes L2 eviction priorities on
// loads only as a policy operand.) Not volatile, so that the compiler makes it once.
GEMMTUNE_DEVICE_INLINE u64 evict_first_policy() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// The matrix is read once (STREAM): no L1 allocation, first out of L2. The vector is read by
// every warp: kept in L1.
template <int BYTES, bool STREAM>
GEMMTUNE_DEVICE_INLINE Bits<BYTES> load_global(const unsigned char* p) {
  Bits<BYTES> b;
  if constexpr (BYTES == 16 && STREAM)
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(b.w[0]), "=r"(b.w[1]), "=r"(b.w[2]), "=r"(b.w[3])
        : "l"(p), "l"(evict_first_policy()));
  else if constexpr (BYTES == 16)
    asm("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(b.w[0]), "=r"(b.w[1]), "=r"(b.w[2]), "=r"(b.w[3])
        : "l"(p));
  else if constexpr (BYTES == 8 && STREAM)
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v2.u32 {%0, %1}, [%2], %3;"
        : "=r"(b.w[0]), "=r"(b.w[1])
        : "l"(p), "l"(evict_first_policy()));
  else if constexpr (BYTES == 8)
    asm("ld.global.nc.v2.u32 {%0, %1}, [%2];" : "=r"(b.w[0]), "=r"(b.w[1]) : "l"(p));
  else if constexpr (BYTES == 4 && STREAM)
    asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;"
        : "=r"(b.w[0])
        : "l"(p), "l"(evict_first_policy()));
  else if constexpr (BYTES == 4)
    asm("ld.global.nc.u32 %0, [%1];" : "=r"(b.w[0]) : "l"(p));
  else {
    static_assert(BYTES == 2, "vectors of 2, 4, 8 or 16 bytes");
    u16 h;
    if constexpr (STREAM)
      asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u16 %0, [%1], %2;"
          : "=h"(h)
          : "l"(p), "l"(evict_first_policy()));
    else
      asm("ld.global.nc.u16 %0, [%1];" : "=h"(h) : "l"(p));
    b.w[0] = h;
  }
  return b;
}

template <int BYTES>
GEMMTUNE_DEVICE_INLINE Bits<BYTES> load_shared(const unsigned char* p) {
  Bits<BYTES> b;
  if constexpr (BYTES == 16) {
    const uint4 t = *reinterpret_cast<const uint4*>(p);
    b.w[0] = t.x;
    b.w[1] = t.y;
    b.w[2] = t.z;
    b.w[3] = t.w;
  } else if constexpr (BYTES == 8) {
    const uint2 t = *reinterpret_cast<const uint2*>(p);
    b.w[0] = t.x;
    b.w[1] = t.y;
  } else if constexpr (BYTES == 4) {
    b.w[0] = *reinterpret_cast<const u32*>(p);
  } else {
    b.w[0] = *reinterpret_cast<const u16*>(p);
  }
  return b;
}

// Element e of a vector as f32 (DTYPE: 0 f32, 1 f16, 2 bf16).
template <int DTYPE, int BYTES>
GEMMTUNE_DEVICE_INLINE float element(const Bits<BYTES>& b, int e) {
  if constexpr (DTYPE == 0) {
    return __uint_as_float(b.w[e]);
  } else {
    const u32 word = b.w[e / 2];
    if constexpr (DTYPE == 2)
      return __uint_as_float(e % 2 ? (word & 0xffff0000u) : (word << 16));
    else
      return f16_to_f32(u16(e % 2 ? word >> 16 : word & 0xffffu));
  }
}

// Partial sums cross SMs: they are written to and read from L2, never from a stale L1.
GEMMTUNE_DEVICE_INLINE float load_l2(const float* p) {
  float v;
  asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
GEMMTUNE_DEVICE_INLINE void store_l2(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}

// Cfg provides: DTYPE (0 f32, 1 f16, 2 bf16), SIDE (0: N == 1, 1: M == 1), THREADS, ROWS,
// UNROLL, KSPLIT, VEC (elements per load), XCHUNK (elements of x staged at once), A_T, B_T.
template <class Cfg>
struct Kernel {
  static constexpr int DTYPE = Cfg::DTYPE, SIDE = Cfg::SIDE;
  static constexpr int THREADS = Cfg::THREADS, WARPS = THREADS / 32;
  static constexpr int ROWS = Cfg::ROWS, UNROLL = Cfg::UNROLL, KSPLIT = Cfg::KSPLIT;
  static constexpr int VEC = Cfg::VEC, XCHUNK = Cfg::XCHUNK;
  static constexpr int ES = DTYPE == 0 ? 4 : 2;  // bytes per element
  static constexpr int VB = VEC * ES;            // bytes per load
  static constexpr bool DOT = SIDE == 0 ? Cfg::A_T : !Cfg::B_T;
  static constexpr bool X_CONTIGUOUS = SIDE == 0 ? !Cfg::B_T : Cfg::A_T;
  static constexpr bool X_STAGED = DOT && !X_CONTIGUOUS;
  static constexpr int BLOCK_ROWS = int(block_rows(DOT, WARPS, ROWS, VEC));
  static constexpr long long GRANULE = k_granule(DOT, WARPS, UNROLL, VEC);
  // Dynamic shared memory: the staged x chunk (dot) or the warps' sums (axpy). Mirrored by the
  // family's smem_bytes_of().
  static constexpr int AXPY_SMEM_BYTES = DOT ? 0 : WARPS * BLOCK_ROWS * 4;
  static constexpr int GATE = Cfg::GATE;
  static constexpr bool GATED = GATE != GATE_NONE;

  static_assert(VB == 2 || VB == 4 || VB == 8 || VB == 16, "loads of 2, 4, 8 or 16 bytes");
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  static_assert(XCHUNK % (32 * VEC) == 0, "staged chunks hold whole warp steps");
  static_assert(!GATED || (DOT && SIDE == 0 && BLOCK_ROWS % 2 == 0),
                "gated: N == 1, weights along K, a block's rows in gate and up pairs");

  // The matrix-vector view of the problem (top of the file). W(r, k) is at
  // w + (DOT ? r * ldw + k : k * ldw + r) * ES; x(k) at x + k * incx * ES; y(r) at y + r * incy *
  // ES.
  struct View {
    const unsigned char* w;
    const unsigned char* x;
    const unsigned char* c;  // C's old values of y, at the same offsets
    unsigned char* y;
    long long ldw, incx, incy, rows, k;
  };

  GEMMTUNE_DEVICE_INLINE static View view(const GemmCore& a) {
    View v;
    v.w = reinterpret_cast<const unsigned char*>(SIDE == 0 ? a.a : a.b);
    v.x = reinterpret_cast<const unsigned char*>(SIDE == 0 ? a.b : a.a);
    v.c = reinterpret_cast<const unsigned char*>(a.c);
    v.y = reinterpret_cast<unsigned char*>(a.d);
    v.ldw = SIDE == 0 ? a.lda : a.ldb;
    v.incx = X_CONTIGUOUS ? 1 : (SIDE == 0 ? a.ldb : a.lda);
    v.incy = SIDE == 0 ? 1 : a.ldc;
    v.rows = SIDE == 0 ? a.m : a.n;
    v.k = a.k;
    return v;
  }

  GEMMTUNE_DEVICE_INLINE static void run(const GemvArgs& launch, unsigned char* smem) {
    const GemmCore& args = launch.core;
    const View v = view(args);
    const long long slice = slice_length(v.k, KSPLIT, GRANULE);
    const long long k_begin = blockIdx.y * slice;
    const long long k_end = k_begin + slice < v.k ? k_begin + slice : v.k;
    const long long row_first = (long long)blockIdx.x * BLOCK_ROWS;
    if constexpr (DOT)
      run_dot(args, v, row_first, k_begin, k_end, smem);
    else
      run_axpy(args, v, row_first, k_begin, k_end, smem);
  }

  // ---- dot: a warp owns ROWS whole outputs ----

  GEMMTUNE_DEVICE_INLINE static void run_dot(const GemmCore& args, const View& v,
                                             long long row_first, long long k_begin,
                                             long long k_end, unsigned char* smem) {
    __shared__ float sums[BLOCK_ROWS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long row0 = row_first + warp * ROWS;
    // Rows past the end re-read the last row (no branch in the loop); their sums are not stored.
    const unsigned char* w_row[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const long long r = row0 + i < v.rows ? row0 + i : v.rows - 1;
      w_row[i] = v.w + stored_row(r, v.rows) * v.ldw * ES;
    }
    float acc[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) acc[i] = 0.0f;
    if constexpr (X_STAGED) {
      for (long long kc = k_begin; kc < k_end; kc += XCHUNK) {
        const int len = int(k_end - kc < XCHUNK ? k_end - kc : XCHUNK);
        __syncthreads();  // every warp is done with the previous chunk
        stage_x(v, kc, len, smem);
        __syncthreads();
        if (row0 < v.rows) dot_range<true>(w_row, kc, len, smem, lane, acc);
      }
    } else if (row0 < v.rows) {
      dot_range<false>(w_row, k_begin, int(k_end - k_begin), v.x + k_begin * ES, lane, acc);
    }
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2)
        acc[i] += __shfl_xor_sync(0xffffffffu, acc[i], offset);
    if (lane == 0)
#pragma unroll
      for (int i = 0; i < ROWS; ++i) sums[warp * ROWS + i] = acc[i];
    __syncthreads();
    store_rows(args, v, row_first, [&](int j) { return sums[j]; });
  }

  // The row of W that block row r reads: r itself, or gated, of output r / 2 its gate row (r
  // even) or its up row.
  GEMMTUNE_DEVICE_INLINE static long long stored_row(long long r, long long rows) {
    if constexpr (GATED) {
      const int i = int(r / 2);
      return r % 2 == 0 ? gate_row_of(GATE, i) : up_row_of(GATE, i, int(rows));
    } else {
      return r;
    }
  }

  // x(kc .. kc + len) into shared memory, as stored (one element per thread and step).
  GEMMTUNE_DEVICE_INLINE static void stage_x(const View& v, long long kc, int len,
                                             unsigned char* smem) {
    for (int i = threadIdx.x; i < len; i += THREADS) {
      const u32 bits = load_global<ES, false>(v.x + (kc + i) * v.incx * ES).w[0];
      if constexpr (ES == 4)
        reinterpret_cast<u32*>(smem)[i] = bits;
      else
        reinterpret_cast<u16*>(smem)[i] = u16(bits);
    }
  }

  // acc[i] += W(row i, k0 + j) * x(k0 + j) for j < len, this lane's share: whole vectors lane,
  // lane + 32, ..., UNROLL at a time, then the elements past the last whole vector (end of K).
  // x(k0 + j) is at x + j * ES, in shared memory or global.
  template <bool X_SHARED>
  GEMMTUNE_DEVICE_INLINE static void dot_range(const unsigned char* const (&w_row)[ROWS],
                                               long long k0, int len, const unsigned char* x,
                                               int lane, float (&acc)[ROWS]) {
    const long long vectors =
        len / VEC;  // 64-bit: vi + 32 * UNROLL may pass 2^31 when K is near it
    long long vi = lane;
    for (; vi + 32 * (UNROLL - 1) < vectors; vi += 32 * UNROLL) {
      Bits<VB> w[ROWS][UNROLL];
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
          w[i][u] = load_global<VB, true>(w_row[i] + (k0 + (vi + 32 * u) * VEC) * ES);
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const Bits<VB> xv = load_x<VB, X_SHARED>(x + (vi + 32 * u) * VEC * ES);
#pragma unroll
        for (int i = 0; i < ROWS; ++i)
#pragma unroll
          for (int e = 0; e < VEC; ++e)
            acc[i] = fmaf(element<DTYPE>(w[i][u], e), element<DTYPE>(xv, e), acc[i]);
      }
    }
    for (; vi < vectors; vi += 32) {
      const Bits<VB> xv = load_x<VB, X_SHARED>(x + vi * VEC * ES);
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        const Bits<VB> w = load_global<VB, true>(w_row[i] + (k0 + vi * VEC) * ES);
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          acc[i] = fmaf(element<DTYPE>(w, e), element<DTYPE>(xv, e), acc[i]);
      }
    }
    for (long long j = vectors * VEC + lane; j < len; j += 32) {
      const float xj = element<DTYPE>(load_x<ES, X_SHARED>(x + j * ES), 0);
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
        acc[i] =
            fmaf(element<DTYPE>(load_global<ES, true>(w_row[i] + (k0 + j) * ES), 0), xj, acc[i]);
    }
  }

  template <int BYTES, bool X_SHARED>
  GEMMTUNE_DEVICE_INLINE static Bits<BYTES> load_x(const unsigned char* p) {
    if constexpr (X_SHARED)
      return load_shared<BYTES>(p);
    else
      return load_global<BYTES, false>(p);
  }

  // ---- axpy: a lane owns ROWS vectors of VEC outputs; the warps share K ----

  GEMMTUNE_DEVICE_INLINE static void run_axpy(const GemmCore& args, const View& v,
                                              long long row_first, long long k_begin,
                                              long long k_end, unsigned char* smem) {
    float* red = reinterpret_cast<float*>(smem);  // [WARPS][BLOCK_ROWS]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long r0 = row_first + lane * VEC;  // vector i starts at r0 + i * 32 * VEC
    float acc[ROWS][VEC];
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[i][e] = 0.0f;
    if (row_first + BLOCK_ROWS <= v.rows)
      axpy_range<false>(v, r0, k_begin, k_end, warp, acc);
    else
      axpy_range<true>(v, r0, k_begin, k_end, warp, acc);
#pragma unroll
    for (int i = 0; i < ROWS; ++i)
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        red[warp * BLOCK_ROWS + i * 32 * VEC + lane * VEC + e] = acc[i][e];
    __syncthreads();
    store_rows(args, v, row_first, [&](int j) {
      float s = red[j];
#pragma unroll
      for (int w = 1; w < WARPS; ++w) s += red[w * BLOCK_ROWS + j];
      return s;
    });
  }

  // This warp's columns of the slice: groups of UNROLL, every WARPS-th group.
  template <bool GUARD>
  GEMMTUNE_DEVICE_INLINE static void axpy_range(const View& v, long long r0, long long k_begin,
                                                long long k_end, int warp,
                                                float (&acc)[ROWS][VEC]) {
    for (long long kb = k_begin + warp * UNROLL; kb < k_end; kb += WARPS * UNROLL) {
      if (kb + UNROLL <= k_end) {
        axpy_columns<GUARD, UNROLL>(v, r0, kb, acc);
      } else {
        for (long long k = kb; k < k_end; ++k) axpy_columns<GUARD, 1>(v, r0, k, acc);
      }
    }
  }

  // acc[i][e] += W(r0 + i * 32 * VEC + e, kb + u) * x(kb + u) for u < U. GUARD: some rows are
  // past the end (the last row block).
  template <bool GUARD, int U>
  GEMMTUNE_DEVICE_INLINE static void axpy_columns(const View& v, long long r0, long long kb,
                                                  float (&acc)[ROWS][VEC]) {
    Bits<VB> w[ROWS][U];
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        const long long r = r0 + i * 32 * VEC;
        const unsigned char* p = v.w + ((kb + u) * v.ldw + r) * ES;
        if (!GUARD || r + VEC <= v.rows)
          w[i][u] = load_global<VB, true>(p);
        else
          w[i][u] = load_partial(p, v.rows - r);
      }
    float x[U];
#pragma unroll
    for (int u = 0; u < U; ++u)
      x[u] = element<DTYPE>(load_global<ES, false>(v.x + (kb + u) * v.incx * ES), 0);
#pragma unroll
    for (int u = 0; u < U; ++u)
#pragma unroll
      for (int i = 0; i < ROWS; ++i)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[i][e] = fmaf(element<DTYPE>(w[i][u], e), x[u], acc[i][e]);
  }

  // The first `count` elements of a vector (none when count <= 0), zeros after them.
  GEMMTUNE_DEVICE_INLINE static Bits<VB> load_partial(const unsigned char* p, long long count) {
    Bits<VB> b;
#pragma unroll
    for (int i = 0; i < Bits<VB>::WORDS; ++i) b.w[i] = 0;
#pragma unroll
    for (int e = 0; e < VEC; ++e) {
      if (e >= count) break;
      const u32 bits = load_global<ES, true>(p + e * ES).w[0];
      if constexpr (ES == 4)
        b.w[e] = bits;
      else
        b.w[e / 2] |= bits << (16 * (e % 2));
    }
    return b;
  }

  // ---- the block's outputs ----

  // y(r) = alpha * sum + beta * y(r) for the block's rows, sum_of(j) being row row_first + j's.
  // With K split over blocks, through the workspace: every block stores its partial sums; the
  // last to arrive adds all slices in slice order (the same bits whichever block that is) and
  // sets the counter back to zero for the next launch.
  template <class SumOf>
  GEMMTUNE_DEVICE_INLINE static void store_rows(const GemmCore& args, const View& v,
                                                long long row_first, SumOf sum_of) {
    const int count = int(v.rows - row_first < BLOCK_ROWS ? v.rows - row_first : BLOCK_ROWS);
    if (gridDim.y == 1) {
      write_block(args, v, row_first, count, sum_of);
      return;
    }
    if (args.workspace == 0 || args.counters == 0)
      __trap();  // a split launch without them: fail loudly
    unsigned* counter = reinterpret_cast<unsigned*>(args.counters) + blockIdx.x;
    float* partials = reinterpret_cast<float*>(args.workspace);
    for (int j = threadIdx.x; j < count; j += THREADS)
      store_l2(partials + blockIdx.y * v.rows + row_first + j, sum_of(j));
    __threadfence();  // the partials are visible before the arrival is counted
    __syncthreads();
    __shared__ unsigned arrived;
    if (threadIdx.x == 0) arrived = atomicAdd(counter, 1u);
    __syncthreads();
    if (arrived != gridDim.y - 1) return;
    __threadfence();
    write_block(args, v, row_first, count, [&](int j) {
      const float* p = partials + row_first + j;
      float total = load_l2(p);
      for (unsigned s = 1; s < gridDim.y; ++s) total += load_l2(p + s * v.rows);
      return total;
    });
    if (threadIdx.x == 0) atomicExch(counter, 0u);
  }

  // The outputs of the block's `count` rows from row_first, sum_of(j) being row j's sum: one an
  // output, or gated, one a pair of rows (count and row_first are even).
  template <class SumOf>
  GEMMTUNE_DEVICE_INLINE static void write_block(const GemmCore& args, const View& v,
                                                 long long row_first, int count, SumOf sum_of) {
    if constexpr (GATED) {
      for (int j = threadIdx.x; j < count / 2; j += THREADS)
        write_gated(args, v, row_first / 2 + j, sum_of(2 * j), sum_of(2 * j + 1));
    } else {
      for (int j = threadIdx.x; j < count; j += THREADS)
        write_output(args, v, row_first + j, sum_of(j));
    }
  }

  // D's row i of a gated problem: act(alpha gate + bias) * (alpha up + bias) (beta is 0).
  GEMMTUNE_DEVICE_INLINE static void write_gated(const GemmCore& args, const View& v, long long i,
                                                 float gate, float up) {
    const float out =
        EpilogueOp<Cfg>::template gated<DTYPE>(args, args.alpha * gate, args.alpha * up, int(i), 0);
    store_from_f32(v.y + i * v.incy * ES, 0, DTYPE, out);
  }

  // y(r) = act(alpha * sum + beta * C + bias) (epilogue_op.cuh); output r is row m = r of D, or
  // with SIDE 1 column n = r.
  GEMMTUNE_DEVICE_INLINE static void write_output(const GemmCore& args, const View& v, long long r,
                                                  float sum) {
    using Epi = EpilogueOp<Cfg>;
    const long long offset = r * v.incy * ES;
    float out = Epi::template add_bias<DTYPE>(args.alpha * sum, args, SIDE == 0 ? int(r) : 0,
                                              SIDE == 0 ? 0 : int(r));
    if (args.beta != 0.0f)
      out = fmaf(args.beta, load_as_f32(v.c + offset, 0, DTYPE), out);  // beta == 0: C may be NaN
    if constexpr (Epi::AUX)  // the pre-activation, at D's place of the aux output
      store_from_f32(Epi::aux_at(args, v.y) + offset, 0, DTYPE, out);
    store_from_f32(v.y + offset, 0, DTYPE, Epi::finish(out));
  }
};

}  // namespace gemv
}  // namespace gemmtune

#ifndef GEMMTUNE_GENERATED
// Defaults, so that `nvcc -arch=sm_90 -cubin -x cu gemv.cuh` builds and disassembles both
// orientations offline: bf16 tn with N == 1 (dot) and bf16 nn with N == 1 (axpy, K split).
struct GemmtuneGemvDotDefault {
  static constexpr int BIAS = 0, ACTIVATION = 0, GATE = 0, AUX = 0;  // no epilogue
  static constexpr int DTYPE = 2, SIDE = 0, THREADS = 256, ROWS = 2, UNROLL = 4, KSPLIT = 1,
                       VEC = 8;
  static constexpr int XCHUNK = 8192;
  static constexpr bool A_T = true, B_T = false;
};
struct GemmtuneGemvAxpyDefault {
  static constexpr int BIAS = 0, ACTIVATION = 0, GATE = 0, AUX = 0;  // no epilogue
  static constexpr int DTYPE = 2, SIDE = 0, THREADS = 256, ROWS = 1, UNROLL = 4, KSPLIT = 16,
                       VEC = 8;
  static constexpr int XCHUNK = 8192;
  static constexpr bool A_T = false, B_T = false;
};
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_gemv_default_dot(const __grid_constant__ GemvArgs args) {
  extern __shared__ __align__(16) unsigned char gemmtune_smem[];
  gemmtune::gemv::Kernel<GemmtuneGemvDotDefault>::run(args, gemmtune_smem);
}
extern "C" __global__ void __launch_bounds__(256, 1)
    gemm_gemv_default_axpy(const __grid_constant__ GemvArgs args) {
  extern __shared__ __align__(16) unsigned char gemmtune_smem[];
  gemmtune::gemv::Kernel<GemmtuneGemvAxpyDefault>::run(args, gemmtune_smem);
}
#endif
