// The main loop of a wgmma_sm90 tile: the producer's TMA loads of a stage into the ring of
// shared-memory stages, and a consumer warpgroup's wgmma on a stage (issue, drain, release).
// Both schedules (warp_specialized.cuh, multistage.cuh) run their loops out of these.
#pragma once
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "wgmma_sm90/tiles.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// Keeps the compiler from moving accumulator accesses across asynchronous wgmma.
template <int N>
GEMMTUNE_DEVICE_INLINE void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Stage and phase of the ring, advanced in the same order by the producer and the consumers.
template <int STAGES>
struct Ring {
  int stage = 0;
  u32 phase = 0;
  GEMMTUNE_DEVICE_INLINE void advance() {
    if (++stage == STAGES) {
      stage = 0;
      phase ^= 1;
    }
  }
};

template <class Cfg>
struct Mainloop : Traits<Cfg> {
  using T = Traits<Cfg>;
  using T::BK;
  using T::CLUSTER;
  using T::KSUB;
  using T::MW;
  using T::P_BYTES;
  using T::P_KMAJOR;
  using T::P_SUB_BYTES;
  using T::Q_BYTES;
  using T::Q_KMAJOR;
  using T::Q_SUB_BYTES;
  using T::SHARE_P;
  using T::SHARE_Q;
  using T::SLICES;
  using T::STAGE_BYTES;
  using T::STAGES;
  using T::SUB_K;
  using T::SWAP;
  using T::TM;
  using T::TN;
  using Mma = typename T::Mma;
  using Smem = SharedMemory<Cfg>;
  using Tiles = wgmma_sm90::Tiles<Cfg>;

  // ---- the producer: loads ----------------------------------------------------------------

  // One operand's 64-K sub-block of a stage: ROWS rows (kernel rows for P, columns for Q).
  // K-major: one box of (64 K, ROWS rows). MN-major: ROWS/64 boxes of (64 rows, 64 K), 8 KB apart.
  // When shared by the cluster, each CTA loads half (half the rows, or half the K of each box)
  // for both. LAYERED: a grouped problem's A, from matrix `layer` of its 3-D map (never shared:
  // tiles along N, which would share it, may lie in two groups).
  template <bool KMAJOR, int ROWS, bool SHARED, bool STREAMED, bool LAYERED>
  GEMMTUNE_DEVICE_INLINE static void load_operand(unsigned char* dst, const GemmTensorMap* map,
                                                  u64* bar, int mn0, int k0, int rank, u64 policy,
                                                  int layer) {
    if constexpr (LAYERED) {
      static_assert(!SHARED, "a grouped problem's A is not multicast");
      const u64 hint = STREAMED ? policy : 0;
      if constexpr (KMAJOR) {
        ptx::tma_load_3d(dst, map, bar, k0, mn0, layer, hint);
      } else {
#pragma unroll
        for (int c = 0; c < ROWS / 64; ++c)
          ptx::tma_load_3d(dst + c * 8192, map, bar, mn0 + c * 64, k0, layer, hint);
      }
    } else if constexpr (KMAJOR) {
      constexpr int rows = SHARED ? ROWS / 2 : ROWS;
      const int r0 = SHARED ? rank * rows : 0;
      if (SHARED)
        ptx::tma_load_2d_multicast(dst + r0 * 128, map, bar, k0, mn0 + r0, 0x3);
      else if (STREAMED)
        ptx::tma_load_2d_hint(dst, map, bar, k0, mn0, policy);
      else
        ptx::tma_load_2d(dst, map, bar, k0, mn0);
    } else {
      constexpr int k_rows = SHARED ? SUB_K / 2 : SUB_K;
      const int kr0 = SHARED ? rank * k_rows : 0;
#pragma unroll
      for (int c = 0; c < ROWS / 64; ++c) {
        if (SHARED)
          ptx::tma_load_2d_multicast(dst + c * 8192 + kr0 * 128, map, bar, mn0 + c * 64, k0 + kr0,
                                     0x3);
        else if (STREAMED)
          ptx::tma_load_2d_hint(dst + c * 8192, map, bar, mn0 + c * 64, k0, policy);
        else
          ptx::tma_load_2d(dst + c * 8192, map, bar, mn0 + c * 64, k0);
      }
    }
  }

  // A gated problem's A (K-major), ROWS kernel rows from mn0 (a multiple of 128): ROWS / 128
  // boxes of its 3-D map (the launch plan's gated map: D's rows, then gate or up), each 64 rows
  // of the gate part then the same 64 of the up part, so that a thread's accumulators hold both
  // values of its outputs (store_gated.cuh). Rows past D's read zeros.
  template <int ROWS, bool STREAMED>
  GEMMTUNE_DEVICE_INLINE static void load_gated(unsigned char* dst, const GemmTensorMap* map,
                                                u64* bar, int mn0, int k0, u64 policy) {
    static_assert(ROWS % 128 == 0, "gated tiles hold 64 gate and 64 up rows in turn");
#pragma unroll
    for (int b = 0; b < ROWS / 128; ++b)
      ptx::tma_load_3d(dst + b * 128 * 128, map, bar, k0, mn0 / 2 + 64 * b, 0,
                       STREAMED ? policy : 0);
  }

  // The maps k-block kb reads, and its k-block within one pass over K. 3xTF32 (PRODUCTS 3) sums
  // three passes, the small terms first: A's low parts by B, A by B's low parts, then A by B,
  // of which wgmma reads the high (tf32) parts itself.
  struct PassMaps {
    const GemmTensorMap *a, *b;
    int kb;
  };
  GEMMTUNE_DEVICE_INLINE static PassMaps pass_maps(const WgmmaArgs& args, int kb) {
    if constexpr (T::PRODUCTS == 3) {
      const int blocks = Tiles::k_blocks_of(args), pass = kb / blocks;
      return {pass == 0 ? &args.map_a_low : &args.map_a, pass == 1 ? &args.map_b_low : &args.map_b,
              kb - pass * blocks};
    } else {
      return {&args.map_a, &args.map_b, kb};
    }
  }

  // With SWAP (skinny problems), P is op(A): read once, so it is loaded with an L2 evict-first
  // hint and does not push the small, reused operand out of L2. The stage's bytes count its
  // block scales, which the producer loads next (Promotion::load_scales).
  GEMMTUNE_DEVICE_INLINE static void load_stage(const WgmmaArgs& args, const Smem& s, int stage,
                                                Tile t, int pass_kb, int rank, u64 policy) {
    u64* bar = &s.full[stage];
    ptx::mbarrier_arrive_expect_tx(bar, STAGE_BYTES + T::SCALE_BYTES_LOADED);
    const PassMaps maps = pass_maps(args, pass_kb);
    const int kb = maps.kb;
    const GemmTensorMap* p_map = SWAP ? maps.a : maps.b;
    const GemmTensorMap* q_map = SWAP ? maps.b : maps.a;
#pragma unroll
    for (int sub = 0; sub < KSUB; ++sub) {
      unsigned char* p = s.p + stage * P_BYTES + sub * P_SUB_BYTES;
      unsigned char* q = s.q + stage * Q_BYTES + sub * Q_SUB_BYTES;
      const int k0 = kb * BK + SUB_K * sub;
      if constexpr (T::GATED && SWAP)
        load_gated<TM, true>(p, p_map, bar, t.row0, k0, policy);
      else
        load_operand<P_KMAJOR, TM, SHARE_P, SWAP, SWAP && T::GROUPED>(p, p_map, bar, t.row0, k0,
                                                                      rank, policy, t.group);
      if constexpr (T::GATED && !SWAP)
        load_gated<TN, false>(q, q_map, bar, t.col0, k0, policy);
      else
        load_operand<Q_KMAJOR, TN, SHARE_Q, false, !SWAP && T::GROUPED>(q, q_map, bar, t.col0, k0,
                                                                        rank, policy, t.group);
    }
  }

  // ---- the consumers: math ----------------------------------------------------------------

  // Descriptors of slice kk (MMA_K values of K), in sub-block kk / SLICES: K-major slices are 32
  // bytes apart inside a 128-byte row; MN-major slices are 16 rows (2 KB) apart, and 64-row
  // chunks 8 KB apart. Each is an offset from a consumer's first descriptors, worked out once
  // per tile: made whole for every wgmma, they cost ~90 instructions a k-block per warp, more
  // than the adds of float8's promotion (docs/PERF.md, 'wgmma descriptors are offsets from one').
  struct Descriptors {
    u64 p, q;  // stage 0, slice 0: of P the consumer's first 64-row block
  };
  template <bool KMAJOR>
  GEMMTUNE_DEVICE_INLINE static u64 first_descriptor(const unsigned char* ring) {
    return KMAJOR ? ptx::smem_descriptor(ptx::smem_u32(ring), 16, 1024)
                  : ptx::smem_descriptor(ptx::smem_u32(ring), 8192, 1024);
  }
  GEMMTUNE_DEVICE_INLINE static Descriptors descriptors(const Smem& s, int consumer) {
    return {
        ptx::descriptor_plus(first_descriptor<P_KMAJOR>(s.p), Tiles::rows_of(consumer) * MW * 8192),
        first_descriptor<Q_KMAJOR>(s.q)};
  }
  template <bool KMAJOR>
  GEMMTUNE_DEVICE_INLINE static constexpr u32 slice_bytes(int kk) {
    return (kk % SLICES) * (KMAJOR ? 32 : 2048);
  }

  // The descriptors of slice kk of a stage: of P's 64-row block mb, and of Q.
  GEMMTUNE_DEVICE_INLINE static u64 p_slice(const Descriptors& d, int stage, int mb, int kk) {
    return ptx::descriptor_plus(
        d.p, stage * P_BYTES + (kk / SLICES) * P_SUB_BYTES + mb * 8192 + slice_bytes<P_KMAJOR>(kk));
  }
  GEMMTUNE_DEVICE_INLINE static u64 q_slice(const Descriptors& d, int stage, int kk) {
    return ptx::descriptor_plus(
        d.q, stage * Q_BYTES + (kk / SLICES) * Q_SUB_BYTES + slice_bytes<Q_KMAJOR>(kk));
  }

  // Issues one stage: BK/MMA_K wgmma per 64-row block of this warpgroup, as one commit group.
  // first: the tile's first stage (its first wgmma overwrites the accumulators).
  GEMMTUNE_DEVICE_INLINE static void issue(const Descriptors& d, int stage, bool first,
                                           float (&acc)[MW][TN / 2]) {
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KSUB * SLICES; ++kk)
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
        Mma::mma(acc[mb], p_slice(d, stage, mb, kk), q_slice(d, stage, kk),
                 (first && kk == 0) ? 0 : 1);
    ptx::wgmma_commit();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
  }

  // Issues one 64-row block's wgmma of a stage into acc, overwriting it, as one commit group
  // (float8 promotion in waves, promotion.cuh).
  GEMMTUNE_DEVICE_INLINE static void issue_block(const Descriptors& d, int stage, int mb,
                                                 float (&acc)[TN / 2]) {
    fence_registers(acc);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < KSUB * SLICES; ++kk)
      Mma::mma(acc, p_slice(d, stage, mb, kk), q_slice(d, stage, kk), kk == 0 ? 0 : 1);
    ptx::wgmma_commit();
    fence_registers(acc);
  }

  GEMMTUNE_DEVICE_INLINE static void zero(float (&acc)[MW][TN / 2]) {
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int i = 0; i < TN / 2; ++i) acc[mb][i] = 0.0f;
  }

  // Waits until at most PENDING commit groups of this warpgroup are still running.
  template <int PENDING>
  GEMMTUNE_DEVICE_INLINE static void drain(float (&acc)[MW][TN / 2]) {
    ptx::wgmma_wait<PENDING>();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
  }
  template <int PENDING>
  GEMMTUNE_DEVICE_INLINE static void drain_block(float (&acc)[TN / 2]) {
    ptx::wgmma_wait<PENDING>();
    fence_registers(acc);
  }

  // The main loop over a tile's k-blocks ks: one stage's wgmma stay in flight while the next
  // stage's are issued; a stage is released once the group after it was issued and it has
  // completed. Returns the stage still to release once the last group has completed. (The args
  // and the tile are promotion.cuh's, which runs float8 tiles in its place.)
  GEMMTUNE_DEVICE_INLINE static int consume(const WgmmaArgs&, const Smem& s, Tile, KRange ks,
                                            int consumer, Ring<STAGES>& ring,
                                            float (&acc)[MW][TN / 2]) {
    int previous = -1;
    const Descriptors d = descriptors(s, consumer);
    for (int kb = ks.begin; kb < ks.end; ++kb) {
      ptx::mbarrier_wait(&s.full[ring.stage], ring.phase);
      __syncwarp();
      issue(d, ring.stage, kb == ks.begin, acc);
      drain<1>(acc);
      if (previous >= 0) release(s, previous);
      previous = ring.stage;
      ring.advance();
    }
    return previous;
  }

  // Consumer warpgroup `consumer` is done with `stage`: tell this CTA's producer and, when the
  // stage is filled by multicast, the other CTA's too.
  GEMMTUNE_DEVICE_INLINE static void release(const Smem& s, int stage) {
    const int lane = threadIdx.x % 128;
    if constexpr (CLUSTER > 1) {
      if (lane < CLUSTER)
        ptx::mbarrier_arrive_cluster(&s.empty[stage], u32(lane));  // one CTA per lane
    } else {
      if (lane == 0) ptx::mbarrier_arrive(&s.empty[stage]);
    }
    __syncwarp();  // wgmma is .aligned: the warp must be converged again
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
