// The constants of a wgmma_sm90 kernel, derived from its configuration Cfg (sizes through
// layout.h, which the host shares), and the checks that the configuration is one the kernel
// implements. Every part of the kernel (wgmma_sm90/*.cuh) derives from Traits<Cfg>.
#pragma once
#include "common.cuh"
#include "epilogue_op.cuh"
#include "ptx/wgmma.cuh"
#include "ptx/wgmma_fp8.cuh"
#include "ptx/wgmma_tf32.cuh"
#include "schedule.h"
#include "wgmma_sm90/args.h"
#include "wgmma_sm90/layout.h"

namespace gemmtune {
namespace wgmma_sm90 {

// Cfg provides: BM, BN (problem tile along M and N), SWAP (bool, see wgmma_sm90.cuh), STAGES, WG
// (consumer warpgroups), WS (bool), CLUSTER_M, CLUSTER_N (1 or 2, at most one of them 2),
// RASTER (0: sweep tiles along M first, 1: along N first), GROUP (tiles per raster group),
// EPILOGUE (0: stores from registers, 1: through shared memory and TMA stores when C is 16-byte
// aligned; with beta != 0, C comes in by TMA to the same shared memory first), C_BUFFERS (C
// chunk buffers with EPILOGUE 1: layout.h's c_buffers), SCHEDULE (schedule::Mode), SPLITS
// (split-K parts), CLUSTER_K (1, or 2 or 4 CTAs of a cluster that split a tile's k-blocks and add
// through distributed shared memory), PINGPONG (bool),
// OCCUPANCY (CTAs per SM: 2 lets small-tile kernels overlap one CTA's fixed costs with the
// other's loads), KSUB (64-K blocks a stage: 1 or 2), A_T, B_T (bools),
// A_TYPE, B_TYPE (the operands' type codes, data_types.h: f16, bf16, e4m3/e5m2 each, or f32 read
// as tf32), DTYPE (C's and D's: f16, bf16 or f32), READS_C (bool: the kernel can apply beta != 0;
// without it the kernel computes C = alpha * AB whatever beta says, and the runtime refuses beta !=
// 0), SCALING (gemmtune::Scaling of float8 operands, 0 for none), PROMOTE (float8: k-blocks a
// partial accumulator sums before it is added into the f32 one, promotion.cuh; 0 for f16 and bf16,
// and for float8 with fast accumulation: wgmma sums the whole K), GROUP_TABLE (a grouped problem's
// groups the kernel's table holds, groups.cuh; 0: one GEMM), PRODUCTS (f32 operands: 1, tf32; 3,
// 3xTF32's three products over K, mainloop.cuh's passes), STAGED_SCALES (bool: float8 block scales
// come into each stage by TMA, promotion.cuh). Cfg's values that decide sizes, for
// layout.h.
template <class Cfg>
GEMMTUNE_HOST_DEVICE constexpr Shape shape_of() {
  Shape s{};
  s.BM = Cfg::BM;
  s.BN = Cfg::BN;
  s.STAGES = Cfg::STAGES;
  s.WG = Cfg::WG;
  s.SWAP = Cfg::SWAP;
  s.WS = Cfg::WS;
  s.EPILOGUE = Cfg::EPILOGUE;
  s.C_BUFFERS = Cfg::C_BUFFERS;
  s.CLUSTER_K = Cfg::CLUSTER_K;
  s.KSUB = Cfg::KSUB;
  s.PINGPONG = Cfg::PINGPONG;
  s.IN_BYTES = Cfg::A_TYPE == GEMMTUNE_TYPE_F32                                         ? 4
               : Cfg::A_TYPE == GEMMTUNE_TYPE_E4M3 || Cfg::A_TYPE == GEMMTUNE_TYPE_E5M2 ? 1
                                                                                        : 2;
  s.OUT_BYTES = Cfg::DTYPE == GEMMTUNE_TYPE_F32 ? 4 : 2;
  s.GROUP_TABLE = Cfg::GROUP_TABLE;
  s.STAGED_BIAS = Cfg::EPILOGUE == 1 && Cfg::BIAS == BIAS_M;
  s.STAGED_SCALES = Cfg::SCALING == 3 && Cfg::STAGED_SCALES;  // gemmtune::Scaling::block
  return s;
}

// T where the condition holds, else F (NVRTC has no <type_traits> here).
template <bool C, class T, class F>
struct Select {
  using type = T;
};
template <class T, class F>
struct Select<false, T, F> {
  using type = F;
};

template <class Cfg>
struct Traits {
  static constexpr Shape SHAPE = shape_of<Cfg>();
  static constexpr bool SWAP = Cfg::SWAP;
  static constexpr int TM = tile_rows(SHAPE);  // kernel rows per tile
  static constexpr int TN = tile_cols(SHAPE);  // kernel columns: wgmma N
  // K per stage: KSUB sub-blocks of SUB_K values (one 128-byte swizzle row each), each laid out
  // in shared memory as a whole stage of one sub-block would be; wgmma takes 32 bytes of K at a
  // time (16 16-bit values, 32 float8 ones), 32 bytes apart in a row.
  static constexpr bool FP8 = SHAPE.IN_BYTES == 1;
  // f32 operands, which wgmma reads as tf32 (8 K a wgmma), once or in 3xTF32's three passes.
  static constexpr bool TF32 = SHAPE.IN_BYTES == 4;
  static constexpr int PRODUCTS = Cfg::PRODUCTS;
  // C and D in f32 (float8 and tf32 operands only), else in 16 bits (f16, bf16: store16.cuh's
  // Half16).
  static constexpr bool F32_OUT = SHAPE.OUT_BYTES == 4;
  static constexpr int SUB_K = sub_k(SHAPE);
  static constexpr int MMA_K = 32 / SHAPE.IN_BYTES;
  static constexpr int SLICES = SUB_K / MMA_K;  // wgmma K slices of a sub-block
  static constexpr int KSUB = Cfg::KSUB;
  static constexpr int BK = stage_k(SHAPE);
  static constexpr int STAGES = Cfg::STAGES;
  static constexpr int WG = Cfg::WG;
  static constexpr bool PINGPONG = Cfg::PINGPONG;
  static constexpr int ROW_WG = row_warpgroups(SHAPE);  // consumer warpgroups that share rows
  // Named barriers: 0 the CTA's, 1 + consumer its epilogue's, 1 + WG + consumer its fixup's,
  // TURN_BARRIER + consumer its ping-pong turn.
  static constexpr int TURN_BARRIER = 1 + 2 * WG;
  static constexpr int MW = blocks_per_warpgroup(SHAPE);  // 64-row wgmma blocks per warpgroup
  static constexpr int ACC = accumulators(SHAPE);         // accumulators per consumer thread
  static constexpr bool WS = Cfg::WS;
  static constexpr int THREADS = threads(SHAPE);
  // P is op(A) (SWAP) or op(B)^T; it is K-major when its storage runs along K.
  static constexpr bool P_KMAJOR = SWAP ? Cfg::A_T : !Cfg::B_T;
  static constexpr bool Q_KMAJOR = SWAP ? !Cfg::B_T : Cfg::A_T;
  static constexpr int P_SUB_BYTES = p_sub_bytes(SHAPE);
  static constexpr int Q_SUB_BYTES = q_sub_bytes(SHAPE);
  static constexpr int P_BYTES = p_bytes(SHAPE);
  static constexpr int Q_BYTES = q_bytes(SHAPE);
  static constexpr int STAGE_BYTES = stage_bytes(SHAPE);
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
  // The code that reads C costs a kernel with beta == 0 by its presence alone, and a test of beta
  // at the kernel's start gained nothing (docs/PERF.md, 'The code that reads C costs beta = 0
  // kernels 1-2%'): a problem that never reads C gets a kernel without it.
  static constexpr bool READS_C = Cfg::READS_C;
  // A grouped problem: its tiles come from the group table (groups.cuh), A's loads name a group.
  static constexpr int GROUP_TABLE = Cfg::GROUP_TABLE;
  static constexpr bool GROUPED = GROUP_TABLE > 0;
  // A gated epilogue (SwiGLU, GeGLU): A's rows load as 64 gate rows, then their 64 up rows
  // (mainloop.cuh, load_gated), and the store multiplies the two (store_gated.cuh).
  static constexpr bool GATED = Cfg::GATE != 0;
  // The C tile staged for TMA stores (layout.h): per consumer, C_CHUNKS chunks of C_CHUNK_COLS
  // kernel columns (a 128-byte swizzle row each) through C_BUFFERS buffers, and C_BARRIERS
  // barriers with beta != 0.
  static constexpr int C_CHUNK_COLS = c_chunk_cols(SHAPE);
  static constexpr int C_CHUNK_BYTES = c_chunk_bytes(SHAPE);
  static constexpr int C_CHUNKS = c_chunks(SHAPE);
  GEMMTUNE_DEVICE_INLINE static constexpr int c_chunk_col(int chunk) {
    return wgmma_sm90::c_chunk_col(SHAPE, chunk);
  }
  static constexpr int C_BUFFERS = c_buffers_in_use(SHAPE);
  static constexpr int C_BYTES = c_bytes(SHAPE);
  static constexpr int C_BARRIERS = c_barriers(SHAPE);
  // CLUSTER_K: a consumer thread's float4s of accumulators in 8-column groups, each owned by one
  // CTA of the cluster (layout.h; cluster_k.cuh).
  static constexpr int GROUPS = column_groups(SHAPE);
  static constexpr int OWNED = owned(SHAPE);
  static constexpr int OWNERS = owners(SHAPE);
  static constexpr int PUSH_BYTES = push_bytes(SHAPE);
  static constexpr int PUSH_BARRIERS = push_barriers(SHAPE);
  static constexpr bool STAGED_BIAS = SHAPE.STAGED_BIAS;
  static constexpr int STAGED_BIAS_BYTES = staged_bias_bytes(SHAPE);
  // Block scales that come with each stage, into shared memory (layout.h, promotion.cuh).
  static constexpr bool STAGED_SCALES = SHAPE.STAGED_SCALES;
  static constexpr int SCALE_COLS_OFFSET = scale_cols_offset(SHAPE);
  static constexpr int SCALE_STAGE_BYTES = scale_stage_bytes(SHAPE);
  static constexpr int SCALE_BYTES_LOADED = scale_bytes_loaded(SHAPE);
  static constexpr int SMEM_BYTES = smem_bytes(SHAPE);
  static constexpr int CTAS_PER_SM = Cfg::OCCUPANCY;
  // beta != 0, stores from registers: old values of C read ahead of their stores, a few at a
  // time (one at a time with two CTAs an SM: more spilled there; f32 pairs, two registers each,
  // two at a time: four spilled a cluster that splits K with block scales).
  static constexpr int STORE_BATCH = TN / 8 < 4 ? TN / 8 : CTAS_PER_SM > 1 ? 1 : F32_OUT ? 2 : 4;
  // Registers move from the producer to the consumers when one CTA holds the SM; with two, each
  // keeps the even share its launch bounds give it.
  static constexpr bool REALLOCATE = WG > 1 && CTAS_PER_SM == 1;
  static constexpr int PRODUCER_REGS = 24;
  static constexpr int CONSUMER_REGS = WG == 3 ? 160 : 240;
  // P holds op(B)'s values (A's with SWAP), Q the other's.
  static constexpr int P_TYPE = SWAP ? Cfg::A_TYPE : Cfg::B_TYPE;
  static constexpr int Q_TYPE = SWAP ? Cfg::B_TYPE : Cfg::A_TYPE;
  static constexpr int SCALING = Cfg::SCALING;
  static constexpr int PROMOTE = Cfg::PROMOTE;
  static constexpr bool OVERLAP = Cfg::OVERLAP;
  // Float8 tiles that promote two 64-row blocks a consumer whose partial sums do not fit beside
  // the accumulators take them in waves through one block's (layout.h; promotion.cuh).
  static constexpr bool WAVES = FP8 && PROMOTE >= 1 && fp8_in_waves(SHAPE);
  using Mma = typename Select<
      FP8, ptx::WgmmaFp8<TN, P_TYPE, Q_TYPE>,
      typename Select<TF32, ptx::WgmmaTf32<TN>,
                      ptx::Wgmma<TN, P_KMAJOR ? 0 : 1, Q_KMAJOR ? 0 : 1, Cfg::DTYPE>>::type>::type;

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
  static_assert(!TMA_STORE || (!SWAP && TN >= C_CHUNK_COLS),
                "TMA stores write chunks of m-values, the last one ending with the tile");
  static_assert(!TMA_STORE || !READS_C || TN % C_CHUNK_COLS == 0,
                "C comes in chunks that do not overlap");
  static_assert(!TMA_STORE || (C_BUFFERS >= 1 && C_BUFFERS <= C_CHUNKS),
                "one to C_CHUNKS chunk buffers");
  // (The f16 and bf16 wgmma take DTYPE as their operands' type.)
  static_assert(FP8 || TF32 || !F32_OUT, "an f32 output is built for float8 and f32 operands");
  static_assert(!TF32 || (F32_OUT && P_KMAJOR && Q_KMAJOR && SCALING == 0),
                "tf32: f32 operands read along K, unscaled, into an f32 output");
  static_assert(PRODUCTS == 1 || (TF32 && PRODUCTS == 3), "3xTF32 takes three products");
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
  static_assert(!FP8 || (P_KMAJOR && Q_KMAJOR && KSUB == 1 && WS && PROMOTE >= 0),
                "float8: both operands K-major, a 128-K stage, warp-specialized");
  static_assert(!FP8 || PROMOTE >= 1 || SCALING == 1 || SCALING == 2,
                "fast accumulation (PROMOTE 0) is for tensor and row scales");
  static_assert(FP8 || (SCALING == 0 && PROMOTE == 0), "only float8 operands are scaled");
  static_assert(!OVERLAP || (FP8 && PROMOTE == 1), "two partial sums take turns every k-block");
  static_assert(!WAVES || (PROMOTE == 1 && !OVERLAP),
                "waves promote every k-block through one partial sum");

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

  // beta, or 0 in a kernel built without READS_C (the compiler then drops every read of C).
  GEMMTUNE_DEVICE_INLINE static float beta_of(const WgmmaArgs& args) {
    return READS_C ? args.core.beta : 0.0f;
  }
};

}  // namespace wgmma_sm90
}  // namespace gemmtune
