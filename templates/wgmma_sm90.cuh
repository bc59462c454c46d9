// Hopper GEMM for bf16 and f16 (f32 accumulation): TMA loads with 128-byte swizzle into a ring
// of shared-memory stages, wgmma from shared-memory descriptors, mbarrier pipelines.
//
// The kernel computes C^T = op(B)^T op(A)^T, so that the accumulator pairs a thread holds are
// neighbours along M, which is contiguous in column-major C:
//   kernel M (64-row wgmma blocks, one per consumer warpgroup and MW) runs along problem N,
//   kernel N (the wgmma N, up to 256) runs along problem M.
//   P = op(B)^T is the wgmma A operand (TM x K), Q = op(A)^T the wgmma B operand (K x TN).
// Each operand sits in shared memory K-major (rows of 64 K values, 128 bytes) or MN-major (rows
// of 64 M/N values, one per K), whichever its storage order gives; wgmma's transpose bits take
// either, so all four op(A)/op(B) run without copies.
//
// Schedules:
//   WS = 1: warp-specialized and persistent. Warpgroup 0 produces (one thread issues TMA),
//           warpgroups 1..WG consume; setmaxnreg moves registers to the consumers. CTAs loop
//           over output tiles, so a tile's epilogue overlaps the next tile's loads. Clusters of
//           two CTAs share one operand tile through TMA multicast.
//   WS = 0: multistage. Every warpgroup computes; one thread keeps STAGES-1 loads in flight.
//
// Tails in M, N and K are zero-filled by TMA; stores are predicated. beta == 0 never reads C.
#pragma once
#include "common.cuh"
#include "ptx/cluster.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "store16.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// Keeps the compiler from moving accumulator accesses across asynchronous wgmma.
template <int N>
GEMMTUNE_DEVICE_INLINE void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Cfg provides: BM, BN (problem tile: BM along M = wgmma N, BN along N = kernel M), STAGES,
// WG (consumer warpgroups), WS (bool), CLUSTER_M, CLUSTER_N (1 or 2, at most one of them 2),
// RASTER (0: sweep tiles along M first, 1: along N first), GROUP (tiles per raster group), EPILOGUE (0: stores from registers,
// 1: through shared memory and TMA stores when beta == 0 and C is 16-byte aligned), A_T, B_T
// (bools), DTYPE (1 f16, 2 bf16).
template <class Cfg>
struct Kernel {
  static constexpr int TN = Cfg::BM;  // kernel N: wgmma N, along problem M
  static constexpr int TM = Cfg::BN;  // kernel M: along problem N
  static constexpr int BK = 64;       // 64 16-bit values: one 128-byte swizzle row
  static constexpr int STAGES = Cfg::STAGES;
  static constexpr int WG = Cfg::WG;
  static constexpr int MW = TM / (64 * WG);  // 64-row wgmma blocks per consumer warpgroup
  static constexpr bool WS = Cfg::WS;
  static constexpr int THREADS = 128 * (WG + (WS ? 1 : 0));
  static constexpr bool P_KMAJOR = !Cfg::B_T;  // P = op(B)^T is K-major when B is not transposed
  static constexpr bool Q_KMAJOR = Cfg::A_T;   // Q = op(A)^T is K-major when A is transposed
  static constexpr int P_BYTES = TM * BK * 2;
  static constexpr int Q_BYTES = TN * BK * 2;
  static constexpr int STAGE_BYTES = P_BYTES + Q_BYTES;
  // Two CTAs along problem M share P (the same problem-N rows); along problem N they share Q.
  static constexpr bool SHARE_P = Cfg::CLUSTER_M == 2;
  static constexpr bool SHARE_Q = Cfg::CLUSTER_N == 2;
  static constexpr int CLUSTER = Cfg::CLUSTER_M * Cfg::CLUSTER_N;
  static constexpr bool TMA_STORE = Cfg::EPILOGUE == 1;
  // The C tile staged for TMA stores: per consumer warpgroup, TN/64 chunks of (64*MW rows of
  // 128 bytes), 128-byte swizzled like the loads.
  static constexpr int C_CHUNK_BYTES = 64 * MW * 128;
  static constexpr int C_BYTES = TMA_STORE ? TM * TN * 2 : 0;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + C_BYTES + 1024 + 2 * STAGES * 8;
  static constexpr int PRODUCER_REGS = 24;
  static constexpr int CONSUMER_REGS = WG == 3 ? 160 : 240;
  using Mma = ptx::Wgmma<TN, P_KMAJOR ? 0 : 1, Q_KMAJOR ? 0 : 1, Cfg::DTYPE>;

  static_assert(TM % (64 * WG) == 0 && (MW == 1 || MW == 2), "kernel M is 64 rows per warpgroup, once or twice");
  static_assert(TN % 64 == 0 && TN <= 256, "wgmma N is 64..256 here");
  static_assert(CLUSTER <= 2 && (CLUSTER == 1 || WS), "clusters of two, warp-specialized only");

  struct Smem {
    unsigned char* p;  // STAGES tiles of P, then STAGES tiles of Q, then C, 1024-byte aligned
    unsigned char* q;
    unsigned char* c;
    u64* full;         // a stage's bytes have landed
    u64* empty;        // every consumer (of every CTA of the cluster) is done with a stage
  };

  GEMMTUNE_DEVICE_INLINE static Smem carve(unsigned char* raw) {
    unsigned char* base = reinterpret_cast<unsigned char*>((reinterpret_cast<u64>(raw) + 1023) & ~u64(1023));
    Smem s;
    s.p = base;
    s.q = base + STAGES * P_BYTES;
    s.c = base + STAGES * STAGE_BYTES;
    s.full = reinterpret_cast<u64*>(base + STAGES * STAGE_BYTES + C_BYTES);
    s.empty = s.full + STAGES;
    return s;
  }

  // ---- tile schedule ------------------------------------------------------------------------

  struct Tile {
    int km0, kn0;  // first kernel row (problem n) and column (problem m)
  };

  // Tiles in clusters: a "super tile" is CLUSTER tiles that share an operand; CTA `rank` takes
  // its own tile of it. Super tiles are swept in groups of GROUP along the raster dimension.
  GEMMTUNE_DEVICE_INLINE static Tile tile_of(int super_tile, int rank, int tiles_km, int tiles_kn) {
    const int super_km = SHARE_Q ? (tiles_km + 1) / 2 : tiles_km;
    const int super_kn = SHARE_P ? (tiles_kn + 1) / 2 : tiles_kn;
    int skm, skn;
    if (Cfg::RASTER == 0)
      grouped_tile(super_tile, super_kn, super_km, Cfg::GROUP, skn, skm);  // problem M (kernel N) first
    else
      grouped_tile(super_tile, super_km, super_kn, Cfg::GROUP, skm, skn);
    const int km = SHARE_Q ? 2 * skm + rank : skm;
    const int kn = SHARE_P ? 2 * skn + rank : skn;
    return Tile{km * TM, kn * TN};
  }

  GEMMTUNE_DEVICE_INLINE static int super_tiles(int tiles_km, int tiles_kn) {
    return (SHARE_Q ? (tiles_km + 1) / 2 : tiles_km) * (SHARE_P ? (tiles_kn + 1) / 2 : tiles_kn);
  }

  // ---- loads --------------------------------------------------------------------------------

  // One operand's stage: ROWS rows of the kernel's M (P) or N (Q). K-major: one box of
  // (64 K, ROWS rows). MN-major: ROWS/64 boxes of (64 rows, 64 K), 8 KB apart. When shared by the
  // cluster, each CTA loads half (half the rows, or half the K of each box) for both.
  template <bool KMAJOR, int ROWS, bool SHARED>
  GEMMTUNE_DEVICE_INLINE static void load_operand(unsigned char* dst, const GemmTensorMap* map, u64* bar,
                                                  int mn0, int k0, int rank) {
    if constexpr (KMAJOR) {
      constexpr int rows = SHARED ? ROWS / 2 : ROWS;
      const int r0 = SHARED ? rank * rows : 0;
      if (SHARED)
        ptx::tma_load_2d_multicast(dst + r0 * 128, map, bar, k0, mn0 + r0, 0x3);
      else
        ptx::tma_load_2d(dst, map, bar, k0, mn0);
    } else {
      constexpr int k_rows = SHARED ? BK / 2 : BK;
      const int kr0 = SHARED ? rank * k_rows : 0;
#pragma unroll
      for (int c = 0; c < ROWS / 64; ++c) {
        if (SHARED)
          ptx::tma_load_2d_multicast(dst + c * 8192 + kr0 * 128, map, bar, mn0 + c * 64, k0 + kr0, 0x3);
        else
          ptx::tma_load_2d(dst + c * 8192, map, bar, mn0 + c * 64, k0);
      }
    }
  }

  GEMMTUNE_DEVICE_INLINE static void load_stage(const GemmArgs& args, const Smem& s, int stage, Tile t, int kb,
                                                int rank) {
    u64* bar = &s.full[stage];
    ptx::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
    // P = op(B)^T rows are problem n: map_b; Q = op(A)^T columns are problem m: map_a.
    load_operand<P_KMAJOR, TM, SHARE_P>(s.p + stage * P_BYTES, &args.map_b, bar, t.km0, kb * BK, rank);
    load_operand<Q_KMAJOR, TN, SHARE_Q>(s.q + stage * Q_BYTES, &args.map_a, bar, t.kn0, kb * BK, rank);
  }

  // ---- math ---------------------------------------------------------------------------------

  // Descriptors of 16-K slice kk: K-major slices are 32 bytes apart inside a 128-byte row;
  // MN-major slices are 16 rows (2 KB) apart, and 64-row chunks 8 KB apart.
  GEMMTUNE_DEVICE_INLINE static u64 p_descriptor(const Smem& s, int stage, int block, int kk) {
    const u32 base = ptx::smem_u32(s.p + stage * P_BYTES + block * 8192);
    return P_KMAJOR ? ptx::smem_descriptor(base + kk * 32, 16, 1024)
                    : ptx::smem_descriptor(base + kk * 2048, 8192, 1024);
  }
  GEMMTUNE_DEVICE_INLINE static u64 q_descriptor(const Smem& s, int stage, int kk) {
    const u32 base = ptx::smem_u32(s.q + stage * Q_BYTES);
    return Q_KMAJOR ? ptx::smem_descriptor(base + kk * 32, 16, 1024)
                    : ptx::smem_descriptor(base + kk * 2048, 8192, 1024);
  }

  // Issues one stage: BK/16 wgmma per 64-row block of this warpgroup, as one commit group.
  // first: the tile's first stage (its first wgmma overwrites the accumulators).
  GEMMTUNE_DEVICE_INLINE static void issue(const Smem& s, int stage, int consumer, bool first,
                                           float (&acc)[MW][TN / 2]) {
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
    ptx::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk)
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
        Mma::mma(acc[mb], p_descriptor(s, stage, consumer * MW + mb, kk), q_descriptor(s, stage, kk),
                 (first && kk == 0) ? 0 : 1);
    ptx::wgmma_commit();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
  }

  // Waits until at most PENDING commit groups of this warpgroup are still running.
  template <int PENDING>
  GEMMTUNE_DEVICE_INLINE static void drain(float (&acc)[MW][TN / 2]) {
    ptx::wgmma_wait<PENDING>();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
  }

  // Consumer warpgroup `consumer` is done with `stage`: tell this CTA's producer and, when the
  // stage is filled by multicast, the other CTA's too.
  GEMMTUNE_DEVICE_INLINE static void release(const Smem& s, int stage) {
    const int lane = threadIdx.x % 128;
    if constexpr (CLUSTER > 1) {
      if (lane < CLUSTER) ptx::mbarrier_arrive_cluster(&s.empty[stage], u32(lane));  // one CTA per lane
    } else {
      if (lane == 0) ptx::mbarrier_arrive(&s.empty[stage]);
    }
    __syncwarp();  // wgmma is .aligned: the warp must be converged again
  }

  // ---- epilogue -----------------------------------------------------------------------------

  // Thread t of a warpgroup holds rows 16*(t/32) + (t%32)/4 (+8) and column pairs 8j + 2(t%4)
  // of each 64-row block: kernel rows are problem columns n, kernel column pairs are m, m+1.
  GEMMTUNE_DEVICE_INLINE static void store(const GemmArgs& args, Tile t, int consumer, const float (&acc)[MW][TN / 2]) {
    u16* C = reinterpret_cast<u16*>(args.c);
    const float alpha = args.alpha;
    const int lane = threadIdx.x % 128;
    const int row = 16 * (lane / 32) + (lane % 32) / 4;
    const int col = 2 * (lane % 4);
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = t.km0 + (consumer * MW + mb) * 64 + row + 8 * h;
        if (n >= args.n) continue;
        u16* column = C + (long long)n * args.ldc;
        const bool pairs = (reinterpret_cast<u64>(column) & 3) == 0;
#pragma unroll
        for (int j = 0; j < TN / 8; ++j)
          store_pair<Cfg::DTYPE>(column, t.kn0 + 8 * j + col, args.m, pairs, alpha * acc[mb][4 * j + 2 * h],
                                 alpha * acc[mb][4 * j + 2 * h + 1], args.beta);
      }
    }
  }

  // The same values through shared memory and TMA stores (beta == 0, C aligned): the warpgroup
  // goes on to its next tile while the copy engine writes this one.
  GEMMTUNE_DEVICE_INLINE static void store_tma(const GemmArgs& args, const Smem& s, Tile t, int consumer,
                                               const float (&acc)[MW][TN / 2]) {
    // Convert first: 64 packed registers instead of 128 floats while addresses are computed.
    u32 packed[MW][TN / 4];
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int i = 0; i < TN / 4; ++i) packed[mb][i] = Half16<Cfg::DTYPE>::pack(args.alpha * acc[mb][2 * i], args.alpha * acc[mb][2 * i + 1]);
    const int lane = threadIdx.x % 128;
    const bool issuer = lane == 0;
    unsigned char* staging = s.c + consumer * (TN / 64) * C_CHUNK_BYTES;
    if (issuer) ptx::bulk_wait_read();  // the previous tile's stores are done with the buffer
    ptx::named_barrier(1 + consumer, 128);
    const int row = 16 * (lane / 32) + (lane % 32) / 4;
    unsigned char* thread_base = staging + row * 128 + 4 * (lane % 4);
#pragma unroll
    for (int mb = 0; mb < MW; ++mb)
#pragma unroll
      for (int h = 0; h < 2; ++h)
#pragma unroll
        for (int j = 0; j < TN / 8; ++j) {
          // 128-byte swizzle: 16-byte unit u of row r sits at unit u ^ (r % 8); r % 8 == row % 8.
          const int offset = (j / 8) * C_CHUNK_BYTES + (mb * 64 + 8 * h) * 128 + ((j % 8) ^ (row % 8)) * 16;
          *reinterpret_cast<u32*>(thread_base + offset) = packed[mb][2 * j + h];
        }
    ptx::fence_async_shared();
    ptx::named_barrier(1 + consumer, 128);
    if (issuer) {
      const int n0 = t.km0 + consumer * 64 * MW;
#pragma unroll
      for (int chunk = 0; chunk < TN / 64; ++chunk)
        ptx::tma_store_2d(&args.map_c, staging + chunk * C_CHUNK_BYTES, t.kn0 + chunk * 64, n0);
      ptx::bulk_commit();
    }
  }

  GEMMTUNE_DEVICE_INLINE static bool stores_by_tma(const GemmArgs& args) {
    return TMA_STORE && (args.flags & GEMM_ARGS_MAP_C) && args.beta == 0.0f;
  }

  GEMMTUNE_DEVICE_INLINE static void epilogue(const GemmArgs& args, const Smem& s, Tile t, int consumer,
                                              const float (&acc)[MW][TN / 2]) {
    if (stores_by_tma(args))
      store_tma(args, s, t, consumer, acc);
    else
      store(args, t, consumer, acc);
  }

  // Before the CTA exits, its TMA stores must have read their shared memory.
  GEMMTUNE_DEVICE_INLINE static void finish_stores(const GemmArgs& args) {
    if (stores_by_tma(args) && threadIdx.x % 128 == 0) ptx::bulk_wait();
  }

  // ---- schedules ----------------------------------------------------------------------------

  GEMMTUNE_DEVICE_INLINE static void init_barriers(const Smem& s, int consumers_per_stage) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < STAGES; ++i) {
        ptx::mbarrier_init(&s.full[i], 1);
        ptx::mbarrier_init(&s.empty[i], consumers_per_stage);
      }
      ptx::mbarrier_init_fence();
    }
    if constexpr (CLUSTER > 1)
      ptx::cluster_sync();
    else
      __syncthreads();
  }

  GEMMTUNE_DEVICE_INLINE static void run_warp_specialized(const GemmArgs& args, const Smem& s) {
    const int rank = CLUSTER > 1 ? int(ptx::cluster_ctarank()) : 0;
    const int k_blocks = (args.k + BK - 1) / BK;
    const int tiles_km = (args.n + TM - 1) / TM, tiles_kn = (args.m + TN - 1) / TN;
    const int total = super_tiles(tiles_km, tiles_kn);
    const int cluster_id = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
    init_barriers(s, WG * CLUSTER);
    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
      if (WG > 1) ptx::setmaxnreg_dec<PRODUCER_REGS>();
      if (threadIdx.x == 0) {
        ptx::tma_prefetch_descriptor(&args.map_a);
        ptx::tma_prefetch_descriptor(&args.map_b);
        int stage = 0;
        u32 phase = 0;
        for (int st = cluster_id; st < total; st += clusters) {
          const Tile t = tile_of(st, rank, tiles_km, tiles_kn);
          for (int kb = 0; kb < k_blocks; ++kb) {
            ptx::mbarrier_wait(&s.empty[stage], phase ^ 1);
            load_stage(args, s, stage, t, kb, rank);
            if (++stage == STAGES) {
              stage = 0;
              phase ^= 1;
            }
          }
        }
      }
    } else {
      if (WG > 1) ptx::setmaxnreg_inc<CONSUMER_REGS>();
      const int consumer = warpgroup - 1;
      float acc[MW][TN / 2];
      int stage = 0;
      u32 phase = 0;
      for (int st = cluster_id; st < total; st += clusters) {
        const Tile t = tile_of(st, rank, tiles_km, tiles_kn);
        // One stage's wgmma stay in flight while the next stage's are issued; a stage is
        // released once the group after it was issued and it has completed.
        int previous = -1;
        for (int kb = 0; kb < k_blocks; ++kb) {
          ptx::mbarrier_wait(&s.full[stage], phase);
          __syncwarp();
          issue(s, stage, consumer, kb == 0, acc);
          drain<1>(acc);
          if (previous >= 0) release(s, previous);
          previous = stage;
          if (++stage == STAGES) {
            stage = 0;
            phase ^= 1;
          }
        }
        drain<0>(acc);
        release(s, previous);
        epilogue(args, s, t, consumer, acc);
      }
      finish_stores(args);
    }
    // No CTA may leave while the other can still multicast into it or arrive on its barriers.
    if constexpr (CLUSTER > 1) {
      __syncwarp();  // the producer warp's lane 0 rejoins the others before the .aligned barrier
      ptx::cluster_sync();
    }
  }

  GEMMTUNE_DEVICE_INLINE static void run_multistage(const GemmArgs& args, const Smem& s) {
    const int k_blocks = (args.k + BK - 1) / BK;
    const int tiles_km = (args.n + TM - 1) / TM, tiles_kn = (args.m + TN - 1) / TN;
    const Tile t = tile_of(blockIdx.x, 0, tiles_km, tiles_kn);
    init_barriers(s, WG);
    const bool issuer = threadIdx.x == 0;
    if (issuer) {
      ptx::tma_prefetch_descriptor(&args.map_a);
      ptx::tma_prefetch_descriptor(&args.map_b);
      for (int kb = 0; kb < STAGES - 1 && kb < k_blocks; ++kb) load_stage(args, s, kb, t, kb, 0);
    }
    const int consumer = threadIdx.x / 128;
    float acc[MW][TN / 2];
    for (int kb = 0; kb < k_blocks; ++kb) {
      const int stage = kb % STAGES;
      ptx::mbarrier_wait(&s.full[stage], (kb / STAGES) & 1);
      __syncwarp();
      issue(s, stage, consumer, kb == 0, acc);
      drain<1>(acc);  // the previous stage's group is done: release it
      if (kb > 0) release(s, (kb - 1) % STAGES);
      // Refill the stage used one step ago, once every warpgroup is done with it.
      const int next = kb + STAGES - 1;
      if (issuer && next < k_blocks) {
        const int refill = next % STAGES;
        if (kb > 0) ptx::mbarrier_wait(&s.empty[refill], ((kb - 1) / STAGES) & 1);
        load_stage(args, s, refill, t, next, 0);
      }
      __syncwarp();
    }
    drain<0>(acc);
    epilogue(args, s, t, consumer, acc);
    finish_stores(args);
  }

  GEMMTUNE_DEVICE_INLINE static void run(const GemmArgs& args, unsigned char* smem_raw) {
    const Smem s = carve(smem_raw);
    if constexpr (WS)
      run_warp_specialized(args, s);
    else
      run_multistage(args, s);
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune

#ifndef GEMMTUNE_GENERATED
// Defaults (the known good point), so that nvcc can build and disassemble the template offline:
//   nvcc -x cu -gencode=arch=compute_90a,code=sm_90a -cubin -I templates templates/wgmma_sm90.cuh
struct GemmtuneWgmmaDefault {
  static constexpr int BM = 256, BN = 128, STAGES = 3, WG = 2;
  static constexpr bool WS = true;
  static constexpr int CLUSTER_M = 1, CLUSTER_N = 2, RASTER = 0, GROUP = 8, EPILOGUE = 1;
  static constexpr bool A_T = false, B_T = false;
  static constexpr int DTYPE = 2;
};
extern "C" __global__ void __launch_bounds__(gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::THREADS, 1)
    gemm_wgmma_default(const __grid_constant__ GemmArgs args) {
  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];
  gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::run(args, gemmtune_smem);
}
#endif
