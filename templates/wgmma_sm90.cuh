// Hopper GEMM for bf16 and f16 (f32 accumulation): TMA loads with 128-byte swizzle into a ring
// of shared-memory stages, wgmma from shared-memory descriptors, mbarrier pipelines.
//
// wgmma computes D(64-row blocks x N) += P(rows x K) * Q(K x N). The kernel puts one problem
// dimension on the 64-row blocks ("kernel rows", TM per tile) and the other on wgmma's N
// ("kernel columns", TN per tile, any multiple of 8 up to 256):
//   SWAP = 0: kernel rows are problem n, kernel columns problem m: it computes
//             C^T = op(B)^T op(A)^T, P = op(B)^T, Q = op(A)^T. A thread's accumulator pairs are
//             neighbours along m, contiguous in column-major C (4-byte stores, TMA stores).
//   SWAP = 1: kernel rows are problem m, columns problem n: C = op(A) op(B), P = op(A),
//             Q = op(B). For skinny problems (decode: n = a few tokens) wgmma's N covers n in
//             steps of 8 instead of padding it to 64 rows.
// Each operand sits in shared memory K-major (rows of 64 K values, 128 bytes) or MN-major (rows
// of 64 M/N values, one per K), whichever its storage order gives; wgmma's transpose bits take
// either, so all four op(A)/op(B) run without copies. An MN-major Q comes in 64-column chunks,
// so its TN is a multiple of 64.
//
// Schedules:
//   WS = 1: warp-specialized and persistent. Warpgroup 0 produces (one thread issues TMA),
//           warpgroups 1..WG consume; setmaxnreg moves registers to the consumers. Every CTA (or
//           cluster) is a worker of the tile schedule (schedule.h): data-parallel tiles,
//           split-K parts or stream-K runs of k-blocks. A tile's epilogue overlaps the next
//           tile's loads. Clusters of two CTAs share one operand tile through TMA multicast,
//           or (CLUSTER_K = 2 or 4) split each tile's k-blocks: each CTA owns a share of the
//           tile's 8-column groups, receives the others' partial sums of them through
//           distributed shared memory, adds and stores them. Problems bound by latency thus
//           stream each tile's operands through two or four SMs.
//           PINGPONG (with two consumer warpgroups): each consumer computes whole tiles, every
//           other one of the CTA's, so that one's epilogue overlaps the other's main loop.
//   WS = 0: multistage, one tile per CTA. Every warpgroup computes; one thread keeps STAGES-1
//           loads in flight.
// A tile computed in several parts (split-K, stream-K) is reduced deterministically through the
// workspace: each part stores its fp32 partial sums and counts itself on the tile's counter;
// the last part adds all partials in part order, runs the epilogue and zeroes the counter.
//
// Tails in M, N and K are zero-filled by TMA; stores are predicated. beta == 0 never reads C; a
// kernel built without READS_C has no code that reads C at all and takes beta == 0 alone.
#pragma once
#include "common.cuh"
#include "ptx/cluster.cuh"
#include "ptx/ldmatrix.cuh"
#include "ptx/mbarrier.cuh"
#include "ptx/stmatrix.cuh"
#include "ptx/tma.cuh"
#include "ptx/wgmma.cuh"
#include "schedule.h"
#include "store16.cuh"

namespace gemmtune {
namespace wgmma_sm90 {

// Keeps the compiler from moving accumulator accesses across asynchronous wgmma.
template <int N>
GEMMTUNE_DEVICE_INLINE void fence_registers(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Cfg provides: BM, BN (problem tile along M and N), SWAP (bool, see above), STAGES, WG
// (consumer warpgroups), WS (bool), CLUSTER_M, CLUSTER_N (1 or 2, at most one of them 2),
// RASTER (0: sweep tiles along M first, 1: along N first), GROUP (tiles per raster group),
// EPILOGUE (0: stores from registers, 1: through shared memory and TMA stores when C is 16-byte
// aligned; with beta != 0, C comes in by TMA to the same shared memory first), SCHEDULE
// (schedule::Mode), SPLITS (split-K parts), CLUSTER_K (1, or 2 or 4 CTAs of a cluster that split
// a tile's k-blocks and add through distributed shared memory), PINGPONG (bool),
// OCCUPANCY (CTAs per SM: 2 lets small-tile kernels overlap one CTA's fixed costs with the
// other's loads), KSUB (64-K blocks a stage: 1 or 2), A_T, B_T (bools),
// DTYPE (1 f16, 2 bf16), READS_C (bool: the kernel can apply beta != 0; without it the kernel
// computes C = alpha * AB whatever beta says, and the runtime refuses beta != 0).
template <class Cfg>
struct Kernel {
  static constexpr bool SWAP = Cfg::SWAP;
  static constexpr int TM = SWAP ? Cfg::BM : Cfg::BN;  // kernel rows per tile
  static constexpr int TN = SWAP ? Cfg::BN : Cfg::BM;  // kernel columns: wgmma N
  // K per stage: KSUB sub-blocks of SUB_K 16-bit values (one 128-byte swizzle row each), each
  // laid out in shared memory as a whole stage of one sub-block would be.
  static constexpr int SUB_K = 64;
  static constexpr int SLICES = SUB_K / 16;  // wgmma K slices of a sub-block
  static constexpr int KSUB = Cfg::KSUB;
  static constexpr int BK = SUB_K * KSUB;
  static constexpr int STAGES = Cfg::STAGES;
  static constexpr int WG = Cfg::WG;
  static constexpr bool PINGPONG = Cfg::PINGPONG;
  static constexpr int ROW_WG = PINGPONG ? 1 : WG;  // consumer warpgroups that share a tile's rows
  // Named barriers: 0 the CTA's, 1 + consumer its epilogue's, 1 + WG + consumer its fixup's,
  // TURN_BARRIER + consumer its ping-pong turn.
  static constexpr int TURN_BARRIER = 1 + 2 * WG;
  static constexpr int MW = TM / (64 * ROW_WG);  // 64-row wgmma blocks per consumer warpgroup
  static constexpr int ACC = MW * TN / 2;        // accumulators per consumer thread
  static constexpr bool WS = Cfg::WS;
  static constexpr int THREADS = 128 * (WG + (WS ? 1 : 0));
  // P is op(A) (SWAP) or op(B)^T; it is K-major when its storage runs along K.
  static constexpr bool P_KMAJOR = SWAP ? Cfg::A_T : !Cfg::B_T;
  static constexpr bool Q_KMAJOR = SWAP ? !Cfg::B_T : Cfg::A_T;
  static constexpr int P_SUB_BYTES = TM * SUB_K * 2;
  static constexpr int Q_SUB_BYTES = TN * SUB_K * 2;
  static constexpr int P_BYTES = P_SUB_BYTES * KSUB;
  static constexpr int Q_BYTES = Q_SUB_BYTES * KSUB;
  static constexpr int STAGE_BYTES = P_BYTES + Q_BYTES;
  // Two CTAs along problem M share the operand that does not depend on m (B's), along N A's.
  static constexpr bool SHARE_B = Cfg::CLUSTER_M == 2;
  static constexpr bool SHARE_A = Cfg::CLUSTER_N == 2;
  static constexpr bool SHARE_P = SWAP ? SHARE_A : SHARE_B;
  static constexpr bool SHARE_Q = SWAP ? SHARE_B : SHARE_A;
  static constexpr int CLUSTER = Cfg::CLUSTER_M * Cfg::CLUSTER_N;  // CTAs that share loads
  static constexpr int CLUSTER_K = Cfg::CLUSTER_K;
  static constexpr int CLUSTER_CTAS = CLUSTER * CLUSTER_K;
  static constexpr bool TMA_STORE = Cfg::EPILOGUE == 1;
  static constexpr int SCHEDULE = Cfg::SCHEDULE;
  // The code that reads C costs a kernel with beta == 0 by its presence alone (1-2% on bf16
  // 2048^3, where a test of beta at the start of the kernel gained nothing; H100, docs/PERF.md
  // runs 183-184): a problem that never reads C gets a kernel without it.
  static constexpr bool READS_C = Cfg::READS_C;
  // The C tile staged for TMA stores: per consumer warpgroup, TN/64 chunks of (64*MW rows of
  // 128 bytes), 128-byte swizzled like the loads, through Cfg::C_BUFFERS chunk buffers (the
  // family's choice: all of them where they fit beside the stages, else as many as fit, reused
  // in turn; a 256x128 tile keeps four stages with two of its four chunks staged at a time).
  static constexpr int C_CHUNK_BYTES = 64 * MW * 128;
  static constexpr int C_CHUNKS = TN / 64;
  static constexpr int C_BUFFERS = TMA_STORE ? Cfg::C_BUFFERS : 0;
  static constexpr int C_BYTES = WG * C_BUFFERS * C_CHUNK_BYTES;
  // beta != 0: a barrier per chunk buffer that C's chunk has landed in it, and one per consumer
  // that its buffers are free for the next tile's chunks (the producer loads them).
  static constexpr int C_BARRIERS = C_BUFFERS ? WG * (C_BUFFERS + 1) : 0;
  // CLUSTER_K: a consumer thread's float4 i of accumulators (64-row block i / GROUPS, 8-column
  // group i % GROUPS) belongs to CTA (i % GROUPS) % CLUSTER_K of the cluster, which receives the
  // other CTAs' partial sums of it: per consumer, a slot per sending CTA of OWNED float4s per
  // thread, 128 apart; and a barrier that they have landed, one that they have been read.
  static constexpr int GROUPS = TN / 8;
  static constexpr int OWNED = MW * ((GROUPS + CLUSTER_K - 1) / CLUSTER_K);
  // CTAs 0 to OWNERS - 1 own column groups. With fewer groups than CTAs (wgmma N 8 or 16 in a
  // cluster of four, N 8 in one of two) the others own none: they push all their sums, get none.
  static constexpr int OWNERS = GROUPS < CLUSTER_K ? GROUPS : CLUSTER_K;
  static constexpr int PUSH_BYTES = CLUSTER_K > 1 ? WG* CLUSTER_K* OWNED * 128 * 16 : 0;
  static constexpr int PUSH_BARRIERS = CLUSTER_K > 1 ? 2 * WG : 0;
  // Stages, staged C, pushed sums, alignment slack, full and empty barriers (and the pushes' and
  // staged C's), then the fixup flags (a word per consumer) and the schedule (kept in shared
  // memory: registers are for the accumulators).
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + C_BYTES + PUSH_BYTES + 1024 +
                                    2 * STAGES * 8 + PUSH_BARRIERS * 8 + C_BARRIERS * 8 + 16 +
                                    sizeof(schedule::Work);
  static constexpr int CTAS_PER_SM = Cfg::OCCUPANCY;
  // beta != 0, stores from registers: old values of C read ahead of their stores, a few at a
  // time (one at a time with two CTAs an SM: more spilled there).
  static constexpr int STORE_BATCH = TN / 8 < 4 ? TN / 8 : CTAS_PER_SM > 1 ? 1 : 4;
  // Registers move from the producer to the consumers when one CTA holds the SM; with two, each
  // keeps the even share its launch bounds give it.
  static constexpr bool REALLOCATE = WG > 1 && CTAS_PER_SM == 1;
  static constexpr int PRODUCER_REGS = 24;
  static constexpr int CONSUMER_REGS = WG == 3 ? 160 : 240;
  using Mma = ptx::Wgmma<TN, P_KMAJOR ? 0 : 1, Q_KMAJOR ? 0 : 1, Cfg::DTYPE>;

  // setmaxnreg.inc waits until the registers it asks for are free: the consumers must not ask for
  // more than the CTA holds (its launch bounds: 65536 over THREADS threads, in units of 8) less
  // what the producer keeps, or they wait forever.
  static_assert(!REALLOCATE || 128 * PRODUCER_REGS + 128 * WG * CONSUMER_REGS <=
                                   65536 / THREADS / 8 * 8 * THREADS,
                "the consumers' registers fit what the producer warpgroup gives up");
  static_assert(TM % (64 * ROW_WG) == 0 && (MW == 1 || MW == 2),
                "kernel rows are 64 per warpgroup, once or twice");
  static_assert(!PINGPONG || (WS && WG == 2),
                "ping-pong takes turns between two consumer warpgroups");
  static_assert(TN % 8 == 0 && TN >= 8 && TN <= 256, "wgmma N is a multiple of 8 up to 256");
  static_assert(Q_KMAJOR || TN % 64 == 0, "an MN-major Q comes in 64-column chunks");
  static_assert(!TMA_STORE || (!SWAP && TN % 64 == 0), "TMA stores write 64 m-values per row");
  static_assert(!TMA_STORE || (C_BUFFERS >= 1 && C_BUFFERS <= C_CHUNKS),
                "one to TN/64 chunk buffers");
  static_assert(CLUSTER <= 2 && (CLUSTER == 1 || WS), "clusters of two, warp-specialized only");
  static_assert(
      CLUSTER_K == 1 || ((CLUSTER_K == 2 || CLUSTER_K == 4) && CLUSTER == 1 && WS && !PINGPONG &&
                         !TMA_STORE && SCHEDULE == schedule::DATA_PARALLEL),
      "a cluster splits K in two or four for data-parallel warp-specialized tiles stored from "
      "registers, without multicast");
  static_assert(SCHEDULE == schedule::DATA_PARALLEL || WS,
                "split-K and stream-K need the persistent schedule");
  static_assert(ACC % 4 == 0, "partial sums move as float4");
  static_assert(WG <= 4, "a fixup flag per consumer in four words");

  struct Smem {
    unsigned char* p;  // STAGES tiles of P, then STAGES tiles of Q, then C, 1024-byte aligned
    unsigned char* q;
    unsigned char* c;
    float4* push;   // CLUSTER_K: the other CTAs' partial sums of this one's column groups
    u64* full;      // a stage's bytes have landed
    u64* empty;     // every consumer (of every CTA of the cluster) is done with a stage
    u64* pushed;    // CLUSTER_K, per consumer: the other CTAs' partial sums have landed
    u64* added;     // CLUSTER_K, per consumer: every other CTA has read this one's
    u64* c_loaded;  // per consumer and C buffer: a chunk of C has landed (beta != 0)
    u64* c_free;    // per consumer: the last tile's stores have read its C buffers
    int* fixup;     // per consumer: "this part is the tile's last" for its warpgroup
    schedule::Work* work;
  };

  GEMMTUNE_DEVICE_INLINE static Smem carve(unsigned char* raw) {
    unsigned char* base =
        reinterpret_cast<unsigned char*>((reinterpret_cast<u64>(raw) + 1023) & ~u64(1023));
    Smem s;
    s.p = base;
    s.q = base + STAGES * P_BYTES;
    s.c = base + STAGES * STAGE_BYTES;
    s.push = reinterpret_cast<float4*>(s.c + C_BYTES);
    s.full = reinterpret_cast<u64*>(s.c + C_BYTES + PUSH_BYTES);
    s.empty = s.full + STAGES;
    s.pushed = s.empty + STAGES;
    s.added = s.pushed + PUSH_BARRIERS / 2;
    s.c_loaded = s.empty + STAGES + PUSH_BARRIERS;
    s.c_free = s.c_loaded + WG * C_BUFFERS;
    s.fixup = reinterpret_cast<int*>(s.c_loaded + C_BARRIERS);
    s.work = reinterpret_cast<schedule::Work*>(s.fixup + 4);
    return s;
  }

  // ---- tiles and work -------------------------------------------------------------------------

  struct Tile {
    int row0, col0;  // first kernel row and column
  };

  // Makes the compiler work out a tile's coordinates where this is called and keep them in
  // registers: it would otherwise sink the arithmetic (two divisions, ~350 cycles) to their use.
  GEMMTUNE_DEVICE_INLINE static void keep_here(Tile& t) {
    asm volatile("" : "+r"(t.row0), "+r"(t.col0));
  }

  struct Grid {
    int tiles_m, tiles_n;  // tiles along problem M and N
    int super_m, super_n;  // cluster-sized groups of tiles ("super tiles") along M and N
    int k_blocks;
    GemmDivisor divisors[2];  // of the raster groups (the family's geometry)
  };

  GEMMTUNE_DEVICE_INLINE static Grid grid_of(const GemmArgs& args) {
    Grid g;
    g.tiles_m = (args.m + Cfg::BM - 1) / Cfg::BM;
    g.tiles_n = (args.n + Cfg::BN - 1) / Cfg::BN;
    g.super_m = (g.tiles_m + Cfg::CLUSTER_M - 1) / Cfg::CLUSTER_M;
    g.super_n = (g.tiles_n + Cfg::CLUSTER_N - 1) / Cfg::CLUSTER_N;
    g.k_blocks = (args.k + BK - 1) / BK;
    g.divisors[0] = args.divisors[0];
    g.divisors[1] = args.divisors[1];
    return g;
  }

  // Super tile `st`, swept in groups of GROUP along the raster dimension; CTA `rank` of the
  // cluster takes its own tile of it.
  GEMMTUNE_DEVICE_INLINE static Tile tile_of(int st, int rank, const Grid& g) {
    int sm, sn;
    if (Cfg::RASTER == 0)
      grouped_tile(st, g.super_m, Cfg::GROUP, g.divisors, sm, sn);
    else
      grouped_tile(st, g.super_n, Cfg::GROUP, g.divisors, sn, sm);
    const int m0 = (Cfg::CLUSTER_M == 2 ? 2 * sm + rank : sm) * Cfg::BM;
    const int n0 = (Cfg::CLUSTER_N == 2 ? 2 * sn + rank : sn) * Cfg::BN;
    return SWAP ? Tile{m0, n0} : Tile{n0, m0};
  }

  // The workers of the schedule are clusters (or CTAs).
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_of(const Grid& g, int workers) {
    return schedule::make_work(SCHEDULE, g.super_m * g.super_n, g.k_blocks, workers, Cfg::SPLITS);
  }

  // The schedule read from shared memory, its mode a constant so that unused modes fold away.
  GEMMTUNE_DEVICE_INLINE static schedule::Work work_in(const Smem& s) {
    schedule::Work w = *s.work;
    w.mode = SCHEDULE;
    return w;
  }

  // The k-blocks of a segment this CTA computes: all of them, or with CLUSTER_K its share (lower
  // ranks take the larger shares, so only the last ones' can be empty: they add zeros).
  struct KRange {
    int begin, end;
  };
  GEMMTUNE_DEVICE_INLINE static KRange k_range(const schedule::Segment& seg, int kpart) {
    const int n = seg.k_end - seg.k_begin;
    return {seg.k_begin + (kpart * n + CLUSTER_K - 1) / CLUSTER_K,
            seg.k_begin + ((kpart + 1) * n + CLUSTER_K - 1) / CLUSTER_K};
  }

  // ---- loads --------------------------------------------------------------------------------

  // One operand's 64-K sub-block of a stage: ROWS rows (kernel rows for P, columns for Q).
  // K-major: one box of (64 K, ROWS rows). MN-major: ROWS/64 boxes of (64 rows, 64 K), 8 KB apart.
  // When shared by the cluster, each CTA loads half (half the rows, or half the K of each box)
  // for both.
  template <bool KMAJOR, int ROWS, bool SHARED, bool STREAMED>
  GEMMTUNE_DEVICE_INLINE static void load_operand(unsigned char* dst, const GemmTensorMap* map,
                                                  u64* bar, int mn0, int k0, int rank, u64 policy) {
    if constexpr (KMAJOR) {
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

  // With SWAP (skinny problems), P is op(A): read once, so it is loaded with an L2 evict-first
  // hint and does not push the small, reused operand out of L2.
  GEMMTUNE_DEVICE_INLINE static void load_stage(const GemmArgs& args, const Smem& s, int stage,
                                                Tile t, int kb, int rank, u64 policy) {
    u64* bar = &s.full[stage];
    ptx::mbarrier_arrive_expect_tx(bar, STAGE_BYTES);
    const GemmTensorMap* p_map = SWAP ? &args.map_a : &args.map_b;
    const GemmTensorMap* q_map = SWAP ? &args.map_b : &args.map_a;
#pragma unroll
    for (int sub = 0; sub < KSUB; ++sub) {
      load_operand<P_KMAJOR, TM, SHARE_P, SWAP>(s.p + stage * P_BYTES + sub * P_SUB_BYTES, p_map,
                                                bar, t.row0, kb * BK + SUB_K * sub, rank, policy);
      load_operand<Q_KMAJOR, TN, SHARE_Q, false>(s.q + stage * Q_BYTES + sub * Q_SUB_BYTES, q_map,
                                                 bar, t.col0, kb * BK + SUB_K * sub, rank, policy);
    }
  }

  // Which 64*MW rows of a tile consumer warpgroup `consumer` computes (ping-pong: all of them).
  GEMMTUNE_DEVICE_INLINE static int rows_of(int consumer) {
    return PINGPONG ? 0 : consumer;
  }

  // ---- math ---------------------------------------------------------------------------------

  // Descriptors of 16-K slice kk, in sub-block kk / SLICES: K-major slices are 32 bytes apart
  // inside a 128-byte row; MN-major slices are 16 rows (2 KB) apart, and 64-row chunks 8 KB apart.
  GEMMTUNE_DEVICE_INLINE static u64 p_descriptor(const Smem& s, int stage, int block, int kk) {
    const u32 base =
        ptx::smem_u32(s.p + stage * P_BYTES + (kk / SLICES) * P_SUB_BYTES + block * 8192);
    return P_KMAJOR ? ptx::smem_descriptor(base + (kk % SLICES) * 32, 16, 1024)
                    : ptx::smem_descriptor(base + (kk % SLICES) * 2048, 8192, 1024);
  }
  GEMMTUNE_DEVICE_INLINE static u64 q_descriptor(const Smem& s, int stage, int kk) {
    const u32 base = ptx::smem_u32(s.q + stage * Q_BYTES + (kk / SLICES) * Q_SUB_BYTES);
    return Q_KMAJOR ? ptx::smem_descriptor(base + (kk % SLICES) * 32, 16, 1024)
                    : ptx::smem_descriptor(base + (kk % SLICES) * 2048, 8192, 1024);
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
        Mma::mma(acc[mb], p_descriptor(s, stage, rows_of(consumer) * MW + mb, kk),
                 q_descriptor(s, stage, kk), (first && kk == 0) ? 0 : 1);
    ptx::wgmma_commit();
#pragma unroll
    for (int mb = 0; mb < MW; ++mb) fence_registers(acc[mb]);
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

  // ---- split-K and stream-K: reducing a tile computed in parts ---------------------------------

  // A counter per (tile in parts, CTA of the cluster, consumer warpgroup's rows), and partial
  // sums per (slot, CTA of the cluster, rows), each a consumer thread's float4s 128 apart.
  GEMMTUNE_DEVICE_INLINE static int* counter_of(const GemmArgs& args, int tile, int rank,
                                                int consumer) {
    return reinterpret_cast<int*>(args.counters) + (tile * CLUSTER + rank) * ROW_WG +
           rows_of(consumer);
  }
  GEMMTUNE_DEVICE_INLINE static float4* partial_of(const GemmArgs& args, int slot, int rank,
                                                   int consumer) {
    return reinterpret_cast<float4*>(args.workspace) +
           ((long long)(slot * CLUSTER + rank) * ROW_WG + rows_of(consumer)) * (128 * ACC / 4);
  }

  // acc (+)= the partial sums at `from` (this thread's float4s, 128 apart).
  template <bool ADD>
  GEMMTUNE_DEVICE_INLINE static void add_partial(const float4* from, float (&acc)[MW][TN / 2]) {
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const float4 v = __ldcg(from + i * 128);
      float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      a[0] = ADD ? a[0] + v.x : v.x;
      a[1] = ADD ? a[1] + v.y : v.y;
      a[2] = ADD ? a[2] + v.z : v.z;
      a[3] = ADD ? a[3] + v.w : v.w;
    }
  }

  // This consumer's part of the tile is done: store it, count it; the last part to arrive adds
  // every part's partial sums in part order into acc and returns true (it runs the epilogue).
  GEMMTUNE_DEVICE_INLINE static bool reduce_parts(const GemmArgs& args, const Smem& s,
                                                  const schedule::Work& w,
                                                  const schedule::Segment& seg, int rank,
                                                  int consumer, float (&acc)[MW][TN / 2]) {
    const int lane = threadIdx.x % 128;
    float4* mine = partial_of(args, seg.slot, rank, consumer) + lane;
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      __stcg(mine + i * 128, make_float4(a[0], a[1], a[2], a[3]));
    }
    __threadfence();  // the partial sums are visible before the count says so
    ptx::named_barrier(1 + WG + consumer, 128);
    if (lane == 0) {
      int* counter = counter_of(args, seg.tile, rank, consumer);
      const bool last = atomicAdd(counter, 1) == seg.parts - 1;
      if (last) *counter = 0;  // every part has counted: ready for the next launch
      s.fixup[consumer] = last;
    }
    ptx::named_barrier(1 + WG + consumer, 128);
    if (!s.fixup[consumer]) return false;
    __threadfence();
    for (int part = 0; part < seg.parts; ++part) {
      const float4* from =
          partial_of(args, schedule::slot_of(w, seg.tile, part), rank, consumer) + lane;
      if (part == 0)
        add_partial<false>(from, acc);
      else
        add_partial<true>(from, acc);
    }
    return true;
  }

  // CLUSTER_K: which CTA of the cluster owns float4 i of a consumer thread's accumulators, and
  // where the others' partial sums of it land there.
  GEMMTUNE_DEVICE_INLINE static int owner_of(int i) {
    return (i % GROUPS) % CLUSTER_K;
  }
  GEMMTUNE_DEVICE_INLINE static int slot_of_owned(int i) {
    return (i / GROUPS) * (OWNED / MW) + (i % GROUPS) / CLUSTER_K;
  }
  GEMMTUNE_DEVICE_INLINE static int owned_by(int kpart) {
    return MW * ((GROUPS - kpart + CLUSTER_K - 1) / CLUSTER_K);
  }

  // CLUSTER_K: the owners other than CTA `kpart`. Each tells it, round after round, that it has
  // read what this CTA pushed (its `added` barrier counts them); the lone owner of wgmma N 8
  // pushes nothing and waits for no one. Known at compile time where every CTA owns groups
  // (worked out from kpart, a register, a cluster of four with wgmma N 64 spilled at 255).
  GEMMTUNE_DEVICE_INLINE static bool owns_groups(int kpart) {
    return OWNERS == CLUSTER_K || kpart < OWNERS;
  }
  GEMMTUNE_DEVICE_INLINE static int other_owners(int kpart) {
    return OWNERS - (owns_groups(kpart) ? 1 : 0);
  }

  // CLUSTER_K: every CTA of the cluster has a partial sum of the tile. Each pushes the float4s
  // it does not own into their owners' shared memory (st.async, counted in bytes on the owner's
  // barrier), then adds the ones it owns over the CTAs in rank order (the same C on every run,
  // whichever CTA finishes first) and goes on to store them. An owner tells each sender that
  // its slot is free again, unless no round follows (nothing may land in a CTA that has
  // exited). `round` counts this consumer's exchanges, for the barriers' parity.
  // Only owners tell: a CTA's `added` then completes a phase only after its own pushes of that
  // round have been read, so it is never two phases ahead of its waiter, whose parity would name
  // the wrong phase. (Told by CTAs that own nothing, the lone owner of wgmma N 8 saw its first
  // phase complete before it waited for the one before it, and waited forever: H200, run 217.)
  GEMMTUNE_DEVICE_INLINE static void exchange(const Smem& s, int kpart, int consumer, int round,
                                              bool more, float (&acc)[MW][TN / 2]) {
    const int lane = threadIdx.x % 128;
    float4* slots = s.push + consumer * CLUSTER_K * OWNED * 128 + lane;  // [sender][owned][lane]
    const u32 parity = round & 1;
    if (lane == 0)
      ptx::mbarrier_arrive_expect_tx(&s.pushed[consumer],
                                     (CLUSTER_K - 1) * owned_by(kpart) * 128 * 16);
    if (other_owners(kpart) > 0)
      ptx::mbarrier_wait(&s.added[consumer],
                         parity ^ 1);  // every owner has read the previous round
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      const int owner = owner_of(i);
      if (owner == kpart) continue;
      const float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      ptx::st_async_v4(slots + (kpart * OWNED + slot_of_owned(i)) * 128, &s.pushed[consumer],
                       u32(owner), make_float4(a[0], a[1], a[2], a[3]));
    }
    ptx::mbarrier_wait_cluster(&s.pushed[consumer], parity);
#pragma unroll
    for (int i = 0; i < ACC / 4; ++i) {
      if (owner_of(i) != kpart) continue;
      float* a = &acc[(4 * i) / (TN / 2)][(4 * i) % (TN / 2)];
      const float4 mine = make_float4(a[0], a[1], a[2], a[3]);
      float4 sum;
#pragma unroll
      for (int sender = 0; sender < CLUSTER_K; ++sender) {
        const float4 v = sender == kpart ? mine : slots[(sender * OWNED + slot_of_owned(i)) * 128];
        sum = sender == 0 ? v : make_float4(sum.x + v.x, sum.y + v.y, sum.z + v.z, sum.w + v.w);
      }
      a[0] = sum.x;
      a[1] = sum.y;
      a[2] = sum.z;
      a[3] = sum.w;
    }
    ptx::named_barrier(1 + WG + consumer, 128);  // every thread has read its slots
    if (lane == 0 && more && owns_groups(kpart))
      for (int cta = 0; cta < CLUSTER_K; ++cta)
        if (cta != kpart) ptx::mbarrier_arrive_cluster(&s.added[consumer], u32(cta));
  }

  // ---- epilogue -----------------------------------------------------------------------------

  GEMMTUNE_DEVICE_INLINE static float to_f32(u16 x) {
    return Cfg::DTYPE == 2 ? bf16_to_f32(x) : f16_to_f32(x);
  }
  GEMMTUNE_DEVICE_INLINE static u16 from_f32(float x) {
    return Cfg::DTYPE == 2 ? f32_to_bf16(x) : f32_to_f16(x);
  }
  GEMMTUNE_DEVICE_INLINE static u32 pack(float lo, float hi) {
    return Cfg::DTYPE == 2 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
  }
  // Where kernel element (r, c) sits in C: kernel rows are n (columns of C), or m with SWAP.
  GEMMTUNE_DEVICE_INLINE static u16* c_at(const GemmArgs& args, int r, int c) {
    u16* C = reinterpret_cast<u16*>(args.c);
    return SWAP ? C + r + (long long)c * args.ldc : C + c + (long long)r * args.ldc;
  }

  // beta != 0, stores from registers: the consumer warpgroup fetches its part of C's tile into
  // L2 as its main loop begins, a 128-byte line a thread in turn (one more line a column, for a
  // column that does not start on a line), so that the epilogue's loads wait for L2.
  GEMMTUNE_DEVICE_INLINE static void prefetch_c_lines(const GemmArgs& args, Tile t, int consumer) {
    constexpr int ROWS = 64 * MW;              // the consumer's kernel rows
    constexpr int COLUMNS = SWAP ? TN : ROWS;  // the columns of C they span
    constexpr int SPAN = SWAP ? ROWS : TN;     // and the values of each, contiguous
    constexpr int LINES = SPAN / 64 + 1;
    const int rows_end = SWAP ? args.m : args.n, cols_end = SWAP ? args.n : args.m;
    const int r0 = t.row0 + rows_of(consumer) * ROWS;
    for (int i = threadIdx.x % 128; i < COLUMNS * LINES; i += 128) {
      const int column = i / LINES, e = min(i % LINES * 64, SPAN - 1);
      const int r = SWAP ? r0 + e : r0 + column, c = SWAP ? t.col0 + column : t.col0 + e;
      if (r < rows_end && c < cols_end) ptx::prefetch_l2(c_at(args, r, c));
    }
  }

  // With SWAP, kernel row r's pair j (columns c0 + 8j, + 1) sits in two columns of C: read (low
  // half first) and written one value at a time, those past `cols_end` not at all.
  struct AcrossPairs {
    const GemmArgs& args;
    int r, c0, cols_end;
    GEMMTUNE_DEVICE_INLINE u32 read(int j) const {
      const int c = c0 + 8 * j;
      const u32 lo = c < cols_end ? *c_at(args, r, c) : 0,
                hi = c + 1 < cols_end ? *c_at(args, r, c + 1) : 0;
      return lo | hi << 16;
    }
    GEMMTUNE_DEVICE_INLINE void write(int j, float v0, float v1) const {
      const int c = c0 + 8 * j;
      if (c < cols_end) *c_at(args, r, c) = from_f32(v0);
      if (c + 1 < cols_end) *c_at(args, r, c + 1) = from_f32(v1);
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
  GEMMTUNE_DEVICE_INLINE static auto row_pairs(const GemmArgs& args, int r, int c0) {
    if constexpr (SWAP) {
      return AcrossPairs{args, r, c0, args.n};
    } else {
      u16* column = c_at(args, r, 0);
      return ColumnPairs<Cfg::DTYPE>{column, c0, args.m, (reinterpret_cast<u64>(column) & 3) == 0};
    }
  }

  // Thread t of a warpgroup holds kernel rows 16*(t/32) + (t%32)/4 (+8) and column pairs
  // 8j + 2(t%4) of each 64-row block: C = alpha * acc + beta * C (store16.cuh).
  // With CLUSTER_K, only the 8-column groups this CTA owns (kpart: its rank).
  // beta != 0: a thread of a small tile reads all its old values of C before writing any (one
  // memory latency for the tile); of a larger one, STORE_BATCH pairs of a row at a time.
  GEMMTUNE_DEVICE_INLINE static void store(const GemmArgs& args, Tile t, int consumer,
                                           const float (&acc)[MW][TN / 2], int kpart) {
    // (A cluster of four has the most partial sums in registers: 16 pairs ahead spilled there.)
    constexpr bool ALL_AHEAD = STORE_BATCH > 1 && MW * 2 * (TN / 8) <= (CLUSTER_K == 4 ? 8 : 32);
    const int lane = threadIdx.x % 128;
    const int rows_end = SWAP ? args.m : args.n;
    const int c0 = t.col0 + 2 * (lane % 4);
    const float alpha = args.alpha, beta = beta_of(args);
    auto row_of = [&](int mb, int h) {
      return t.row0 + (rows_of(consumer) * MW + mb) * 64 + 16 * (lane / 32) + (lane % 32) / 4 +
             8 * h;
    };
    auto skip = [&](int j) { return CLUSTER_K > 1 && owner_of(j) != kpart; };
    u32 old[ALL_AHEAD ? MW : 1][2][ALL_AHEAD ? TN / 8 : 1];
    if (ALL_AHEAD && beta != 0.0f) {
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = row_of(mb, h);
          if (r >= rows_end) continue;
          const auto at = row_pairs(args, r, c0);
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
          const auto at = row_pairs(args, r, c0);
#pragma unroll
          for (int j = 0; j < TN / 8; ++j) {
            if (skip(j)) continue;
            float v0, v1;
            value(j, v0, v1);
            if (beta != 0.0f) add_scaled<Cfg::DTYPE>(old[mb][h][j], beta, v0, v1);
            at.write(j, v0, v1);
          }
        } else {
          store_pairs<Cfg::DTYPE, TN / 8, STORE_BATCH>(row_pairs(args, r, c0), beta, value, skip);
        }
      }
    }
  }

  // Consumer `consumer`'s rows of C's 64-column chunk `chunk`, by TMA into its buffer `buffer`.
  GEMMTUNE_DEVICE_INLINE static void load_c_chunk(const GemmArgs& args, const Smem& s, Tile t,
                                                  int consumer, int chunk, int buffer) {
    u64* bar = &s.c_loaded[consumer * C_BUFFERS + buffer];
    ptx::mbarrier_arrive_expect_tx(bar, C_CHUNK_BYTES);  // a box partly outside C counts in full
    ptx::tma_load_2d(s.c + (consumer * C_BUFFERS + buffer) * C_CHUNK_BYTES, &args.map_c, bar,
                     t.col0 + chunk * 64, t.row0 + rows_of(consumer) * 64 * MW);
  }

  // C's first C_BUFFERS chunks, once the previous tile's stores have read every buffer.
  GEMMTUNE_DEVICE_INLINE static void load_first_c_chunks(const GemmArgs& args, const Smem& s,
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
  GEMMTUNE_DEVICE_INLINE static void prefetch_c(const GemmArgs& args, Tile t) {
#pragma unroll
    for (int r = 0; r < ROW_WG; ++r)
#pragma unroll
      for (int chunk = 0; chunk < C_CHUNKS; ++chunk)
        ptx::tma_prefetch_2d(&args.map_c, t.col0 + chunk * 64, t.row0 + r * 64 * MW);
  }

  // beta != 0 with TMA stores, by the producer once the ring holds segment i's first STAGES
  // k-blocks (c_block): where the segment is a whole tile (its epilogue runs here), the first
  // C_BUFFERS chunks of each of its consumers into their buffers, once that consumer has begun
  // the tile (its buffers are free then); the CTA's first tile also into L2 (prefetch_c), later
  // tiles as their loads begin. Asked for any earlier, C's reads held up the first fill (bf16
  // 2048^3, one tile a CTA: 0.93x -> 0.97x with beta = 1), or the wait for free buffers held up
  // the next tile's loads during the epilogue (8192x8192x1024: 0.96x -> 0.88x); H100, docs/PERF.md
  // runs 192-194. `free_phases` holds each consumer's c_free phase, bit by bit.
  GEMMTUNE_DEVICE_INLINE static void fetch_c(const GemmArgs& args, const Smem& s, Tile t,
                                             const schedule::Segment& seg, int i,
                                             u32& free_phases) {
    if (i == 0) prefetch_c(args, t);
    if (seg.parts != 1) return;  // the tile's last part, known only at its end, loads C itself
#pragma unroll
    for (int consumer = 0; consumer < WG; ++consumer) {
      if (PINGPONG && consumer != i % 2) continue;
      ptx::mbarrier_wait(&s.c_free[consumer], (free_phases >> consumer) & 1);
      free_phases ^= 1u << consumer;
#pragma unroll
      for (int b = 0; b < C_BUFFERS; ++b) load_c_chunk(args, s, t, consumer, b, b);
    }
  }
  // The k-block after whose load fetch_c runs: the ring's first fill (the last k-block of a
  // shorter part; ks.begin - 1, before the loads, for a part without k-blocks).
  GEMMTUNE_DEVICE_INLINE static int c_block(KRange ks) {
    return min(ks.begin + STAGES - 1, ks.end - 1);
  }

  // The same values through shared memory and TMA stores (C aligned): the warpgroup goes on to
  // its next tile while the copy engine writes this one. With a buffer per chunk, all chunks are
  // written and then stored; with fewer, each chunk is stored as soon as it is written, and a
  // buffer is written again once the store C_BUFFERS chunks back has read it.
  // READ_C (beta != 0): each chunk of C first comes by TMA into the buffer it leaves from, once
  // the buffer's last store has read it (the first C_BUFFERS chunks together: by the producer
  // during the tile's main loop where c_early, else here); each thread reads its values back
  // with ldmatrix, the inverse of stmatrix, from where it writes them. `c_phases` holds each
  // buffer's barrier phase, bit by bit.
  template <bool READ_C>
  GEMMTUNE_DEVICE_INLINE static void store_tma(const GemmArgs& args, const Smem& s, Tile t,
                                               int consumer, const float (&acc)[MW][TN / 2],
                                               u32& c_phases, bool c_early) {
    constexpr bool RING = C_BUFFERS < C_CHUNKS;
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
    const int n0 = t.row0 + rows_of(consumer) * 64 * MW;
    if (READ_C && !c_early) load_first_c_chunks(args, s, t, consumer);
#pragma unroll
    for (int chunk = 0; chunk < C_CHUNKS; ++chunk) {
      const int buffer = chunk % C_BUFFERS;
      if constexpr (READ_C) {
        ptx::mbarrier_wait(&s.c_loaded[consumer * C_BUFFERS + buffer], (c_phases >> buffer) & 1);
        c_phases ^= 1u << buffer;
      } else if (chunk == 0 || chunk >= C_BUFFERS) {
        // The buffer is free once the stores that read it are done reading: the previous tile's
        // (all of them) before the first chunk, the one C_BUFFERS chunks back after that.
        if (issuer) {
          if (chunk == 0)
            ptx::bulk_wait_read<0>();
          else
            ptx::bulk_wait_read<C_BUFFERS - 1>();
        }
        ptx::named_barrier(1 + consumer, 128);
      }
#pragma unroll
      for (int mb = 0; mb < MW; ++mb)
#pragma unroll
        for (int u = 0; u < 8; u += 2) {
          const int unit = (u + q / 2) ^ (lane % 8);
          const u32 address = ptx::smem_u32(staging + buffer * C_CHUNK_BYTES +
                                            (mb * 64 + lane_row) * 128 + unit * 16);
          u32 old[4], r[4];
          if constexpr (READ_C) ptx::ldmatrix_x4<false>(old, address);
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            const int i =
                2 * (2 * (8 * chunk + u + b / 2) + b % 2);  // this thread's accumulator pair
            float v0 = args.alpha * acc[mb][i], v1 = args.alpha * acc[mb][i + 1];
            if constexpr (READ_C) {
              v0 = fmaf(args.beta, to_f32(u16(old[b] & 0xffff)), v0);
              v1 = fmaf(args.beta, to_f32(u16(old[b] >> 16)), v1);
            }
            r[b] = pack(v0, v1);
          }
          ptx::stmatrix_x4(address, r);
        }
      if (RING || chunk == C_CHUNKS - 1) {
        ptx::fence_async_shared();
        ptx::named_barrier(1 + consumer, 128);
        if (issuer) {
#pragma unroll
          for (int c = RING ? chunk : 0; c <= chunk; ++c)
            ptx::tma_store_2d(&args.map_c, staging + (c % C_BUFFERS) * C_CHUNK_BYTES,
                              t.col0 + c * 64, n0);
          ptx::bulk_commit();
          if (READ_C && chunk + C_BUFFERS < C_CHUNKS) {
            ptx::bulk_wait_read<0>();
            load_c_chunk(args, s, t, consumer, chunk + C_BUFFERS, buffer);
          }
        }
      }
    }
  }

  GEMMTUNE_DEVICE_INLINE static bool stores_by_tma(const GemmArgs& args) {
    return TMA_STORE && (args.flags & GEMM_ARGS_MAP_C);
  }
  // beta, or 0 in a kernel built without READS_C (the compiler then drops every read of C).
  GEMMTUNE_DEVICE_INLINE static float beta_of(const GemmArgs& args) {
    return READS_C ? args.beta : 0.0f;
  }
  // beta != 0: C is read, by TMA (store_tma) or from registers (store).
  GEMMTUNE_DEVICE_INLINE static bool loads_c_by_tma(const GemmArgs& args) {
    return stores_by_tma(args) && beta_of(args) != 0.0f;
  }
  GEMMTUNE_DEVICE_INLINE static bool loads_c_by_threads(const GemmArgs& args) {
    return !stores_by_tma(args) && beta_of(args) != 0.0f;
  }

  // c_early: C's first chunks were asked for during the tile's main loop (fetch_c).
  GEMMTUNE_DEVICE_INLINE static void epilogue(const GemmArgs& args, const Smem& s, Tile t,
                                              int consumer, const float (&acc)[MW][TN / 2],
                                              u32& c_phases, bool c_early, int kpart = 0) {
    if constexpr (TMA_STORE) {
      if (stores_by_tma(args)) {
        if constexpr (READS_C)
          if (args.beta != 0.0f)
            return store_tma<true>(args, s, t, consumer, acc, c_phases, c_early);
        return store_tma<false>(args, s, t, consumer, acc, c_phases, false);
      }
    }
    store(args, t, consumer, acc, kpart);
  }

  // Before the CTA exits, its TMA stores must have read their shared memory.
  GEMMTUNE_DEVICE_INLINE static void finish_stores(const GemmArgs& args) {
    if (stores_by_tma(args) && threadIdx.x % 128 == 0) ptx::bulk_wait();
  }

  // ---- schedules ----------------------------------------------------------------------------

  // Barriers and the schedule, made by thread 0 and visible to the CTA (cluster) afterwards.
  GEMMTUNE_DEVICE_INLINE static void init_shared(const Smem& s, int consumers_per_stage,
                                                 const schedule::Work& work, int kpart = 0) {
    if (threadIdx.x == 0) {
      *s.work = work;
      for (int i = 0; i < STAGES; ++i) {
        ptx::mbarrier_init(&s.full[i], 1);
        ptx::mbarrier_init(&s.empty[i], consumers_per_stage);
      }
      for (int i = 0; i < PUSH_BARRIERS / 2; ++i) {
        ptx::mbarrier_init(&s.pushed[i], 1);  // this CTA's expectation; the pushes count bytes
        ptx::mbarrier_init(&s.added[i], max(1, other_owners(kpart)));  // unused where 0
      }
      for (int i = 0; i < C_BARRIERS; ++i) ptx::mbarrier_init(&s.c_loaded[i], 1);
      ptx::mbarrier_init_fence();
    }
    if constexpr (CLUSTER > 1) {
      // The other CTA multicasts into this one's stages from the start.
      ptx::cluster_arrive_relaxed();
      ptx::cluster_wait();
    } else {
      __syncthreads();
      // A cluster splitting K first writes into the other CTAs at the end of its first tile:
      // each thread arrives now, and waits before its main loop (consume) or once its loads
      // are issued.
      if constexpr (CLUSTER_K > 1) ptx::cluster_arrive_relaxed();
    }
  }

  // Stage and phase of the ring, advanced in the same order by the producer and the consumers.
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

  GEMMTUNE_DEVICE_INLINE static void produce(const GemmArgs& args, const Smem& s, int worker,
                                             int rank, int kpart) {
    const u64 policy = SWAP ? ptx::l2_evict_first_policy() : 0;
    const bool with_c = loads_c_by_tma(args);
    u32 free_phases = 0;
    Ring ring;
    for (int i = 0; schedule::has_segment(work_in(s), worker, i); ++i) {
      const schedule::Segment seg = schedule::segment(work_in(s), worker, i);
      const Tile t = tile_of(seg.tile, rank, grid_of(args));
      const KRange ks = k_range(seg, kpart);
      const int c_kb = c_block(ks);
      if (TMA_STORE && with_c && i > 0) prefetch_c(args, t);
      if (TMA_STORE && with_c && c_kb < ks.begin) fetch_c(args, s, t, seg, i, free_phases);
      for (int kb = ks.begin; kb < ks.end; ++kb) {
        ptx::mbarrier_wait(&s.empty[ring.stage], ring.phase ^ 1);
        load_stage(args, s, ring.stage, t, kb, rank, policy);
        if (TMA_STORE && with_c && kb == c_kb) fetch_c(args, s, t, seg, i, free_phases);
        ring.advance();
      }
    }
    // With multicast, the other CTA's consumers arrive on this CTA's barriers, and this CTA's
    // copies land in the other's stages: once every stage has been released by both CTAs'
    // consumers, neither is left, and this CTA may exit.
    if constexpr (CLUSTER > 1)
      for (int i = 0; i < STAGES; ++i) {
        ptx::mbarrier_wait(&s.empty[ring.stage], ring.phase ^ 1);
        ring.advance();
      }
  }

  GEMMTUNE_DEVICE_INLINE static void consume(const GemmArgs& args, const Smem& s, int worker,
                                             int rank, int kpart, int consumer) {
    float acc[MW][TN / 2];
    Ring ring;
    // beta != 0 with TMA stores: C's first chunks come in while a whole tile's main loop runs
    // (one in parts runs its epilogue only if it is the last part); `c_phases` (store_tma).
    const bool with_c = loads_c_by_tma(args);
    bool c_early = false;
    u32 c_phases = 0;
    // Counted once (unlike the producer, whose first load waits for its loop's condition): the
    // consumers wait for the first stage anyway, and a count is one register through the loop.
    const int count = schedule::segments(work_in(s), worker);
    // The other CTAs' barriers are made (init_shared) before this one first writes into them
    // (exchange). Waited for here, where the first stage is still on its way: after the main
    // loop the wait took ~180 cycles.
    if constexpr (CLUSTER_K > 1) ptx::cluster_wait();
    for (int i = 0; i < count; ++i) {
      if (PINGPONG && i % 2 != consumer) {  // the other warpgroup's turn: skip its stages
        const schedule::Segment seg = schedule::segment(work_in(s), worker, i);
        for (int kb = seg.k_begin; kb < seg.k_end; ++kb) ring.advance();
        continue;
      }
      // Ping-pong: this main loop starts once the other warpgroup's has waited for all its
      // stages. A full barrier's parity names its phase only while the waiter is at most one
      // phase behind; a warpgroup that skipped a long segment would be further ahead.
      if (PINGPONG && i > 0) ptx::named_barrier(TURN_BARRIER + consumer, 256);
      // One stage's wgmma stay in flight while the next stage's are issued; a stage is
      // released once the group after it was issued and it has completed.
      int previous = -1;
      // Stored from registers, a tile needs its place before its first store: it is worked out
      // here, while the first stage is on its way (after the main loop it delayed the stores by
      // ~350 cycles). TMA stores need it only once the tile is in shared memory, and the compiler
      // works it out between those writes (here it made 8192x8192x1024, 16 tiles a CTA, 0.7-1.0%
      // slower); two CTAs an SM have no two registers to spare through the main loop.
      constexpr bool KEEP_TILE = !TMA_STORE && CTAS_PER_SM == 1;
      Tile tile{};
      if constexpr (KEEP_TILE) {
        tile = tile_of(schedule::segment(work_in(s), worker, i).tile, rank, grid_of(args));
        keep_here(tile);
      }
      if (loads_c_by_threads(args)) {
        const schedule::Segment seg = schedule::segment(work_in(s), worker, i);
        prefetch_c_lines(args, KEEP_TILE ? tile : tile_of(seg.tile, rank, grid_of(args)), consumer);
      }
      {
        const KRange ks = k_range(schedule::segment(work_in(s), worker, i), kpart);
        if (CLUSTER_K > 1 && ks.begin == ks.end)
          zero(acc);  // fewer k-blocks than CTAs: adds nothing
        // The producer loads C's first chunks once the buffers are free (fetch_c): a test in this
        // loop made a kernel 3-6% slower on 1024x1024x16384 (split-K, H100 runs 169-170, 192).
        if (TMA_STORE && with_c) {
          c_early = schedule::segment(work_in(s), worker, i).parts == 1;
          if (c_early) free_c_buffers(s, consumer);
        }
        for (int kb = ks.begin; kb < ks.end; ++kb) {
          ptx::mbarrier_wait(&s.full[ring.stage], ring.phase);
          __syncwarp();
          issue(s, ring.stage, consumer, kb == ks.begin, acc);
          drain<1>(acc);
          if (previous >= 0) release(s, previous);
          previous = ring.stage;
          ring.advance();
        }
      }
      if (PINGPONG && i + 1 < count)
        ptx::named_barrier_arrive(TURN_BARRIER + 1 - consumer, 256);  // its turn
      drain<0>(acc);
      if (previous >= 0) release(s, previous);
      // The segment again rather than kept in registers through the main loop.
      const schedule::Segment seg = schedule::segment(work_in(s), worker, i);
      if constexpr (CLUSTER_K > 1) exchange(s, kpart, consumer, i, i + 1 < count, acc);
      if (seg.parts == 1 || reduce_parts(args, s, work_in(s), seg, rank, consumer, acc))
        epilogue(args, s, KEEP_TILE ? tile : tile_of(seg.tile, rank, grid_of(args)), consumer, acc,
                 c_phases, c_early, kpart);
    }
    finish_stores(args);
  }

  GEMMTUNE_DEVICE_INLINE static void run_warp_specialized(const GemmArgs& args, const Smem& s) {
    const int cta = CLUSTER_CTAS > 1 ? int(ptx::cluster_ctarank()) : 0;
    const int rank = CLUSTER_K > 1 ? 0 : cta;   // place in a pair that shares loads
    const int kpart = CLUSTER_K > 1 ? cta : 0;  // share of each tile's k-blocks
    const Grid g = grid_of(args);
    const int worker = blockIdx.x / CLUSTER_CTAS;
    init_shared(s, ROW_WG * CLUSTER, work_of(g, gridDim.x / CLUSTER_CTAS), kpart);
    const int warpgroup = threadIdx.x / 128;
    if (warpgroup == 0) {
      if (REALLOCATE) ptx::setmaxnreg_dec<PRODUCER_REGS>();
      if (threadIdx.x == 0) produce(args, s, worker, rank, kpart);
      if constexpr (CLUSTER_K > 1) {
        __syncwarp();
        ptx::cluster_wait();
      }
    } else {
      if (REALLOCATE) ptx::setmaxnreg_inc<CONSUMER_REGS>();
      consume(args, s, worker, rank, kpart, warpgroup - 1);
    }
    // No CTA may leave while another can still write into it or arrive on its barriers; no
    // cluster barrier is needed for that (it cost about 1300 cycles at the end): the producer
    // waits until both CTAs of a pair that multicast have released every stage (produce), and
    // CTAs that split K have received every push before they leave, and every arrival but
    // after the last round, which is not made (exchange).
  }

  GEMMTUNE_DEVICE_INLINE static void run_multistage(const GemmArgs& args, const Smem& s) {
    const Grid g = grid_of(args);
    const int k_blocks = g.k_blocks;
    const Tile t = tile_of(blockIdx.x, 0, g);
    init_shared(s, WG, work_of(g, 1));
    const bool issuer = threadIdx.x == 0;
    const u64 policy = SWAP && issuer ? ptx::l2_evict_first_policy() : 0;
    if (issuer) {
      if (TMA_STORE && loads_c_by_tma(args)) prefetch_c(args, t);
      for (int kb = 0; kb < STAGES - 1 && kb < k_blocks; ++kb)
        load_stage(args, s, kb, t, kb, 0, policy);
    }
    const int consumer = threadIdx.x / 128;
    if (loads_c_by_threads(args)) prefetch_c_lines(args, t, consumer);
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
        load_stage(args, s, refill, t, next, 0, policy);
      }
      __syncwarp();
    }
    drain<0>(acc);
    u32 c_phases = 0;
    epilogue(args, s, t, consumer, acc, c_phases, false);
    finish_stores(args);
  }

  GEMMTUNE_DEVICE_INLINE static void run(const GemmArgs& args, unsigned char* smem_raw) {
    if (threadIdx.x == 0) {  // the descriptors' fetch overlaps the barriers' making
      ptx::tma_prefetch_descriptor(&args.map_a);
      ptx::tma_prefetch_descriptor(&args.map_b);
      if (stores_by_tma(args)) ptx::tma_prefetch_descriptor(&args.map_c);
    }
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
  static constexpr int BM = 256, BN = 128, STAGES = 4, WG = 2;
  static constexpr bool SWAP = false, WS = true;
  static constexpr int CLUSTER_M = 1, CLUSTER_N = 2, RASTER = 0, GROUP = 8, EPILOGUE = 1,
                       C_BUFFERS = 2;
  static constexpr int SCHEDULE = 0, SPLITS = 1, CLUSTER_K = 1, OCCUPANCY = 1, KSUB = 1;
  static constexpr bool PINGPONG = false, A_T = false, B_T = false;
  static constexpr int DTYPE = 2;
  static constexpr bool READS_C = true;
};
extern "C" __global__ void __launch_bounds__(
    gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::THREADS,
    gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::CTAS_PER_SM)
    gemm_wgmma_default(const __grid_constant__ GemmArgs args) {
  extern __shared__ __align__(1024) unsigned char gemmtune_smem[];
  gemmtune::wgmma_sm90::Kernel<GemmtuneWgmmaDefault>::run(args, gemmtune_smem);
}
#endif
