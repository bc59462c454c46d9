// The sizes of a wgmma_sm90 configuration: tile sides, registers, shared memory. Plain C++ that
// compiles both in the kernel (NVRTC) and on the host, so that the kernel's Traits<Cfg>
// (traits.cuh) and the host generator work out shared memory from this one source.
//
// On the host: fill a Shape with the configuration's values (Cfg's members of the same names),
// C_BUFFERS left 0, and derive the rest:
//   wgmma_sm90::Shape s;
//   s.BM = ...; s.BN = ...; s.STAGES = ...; s.WG = ...; s.SWAP = ...; s.WS = ...;
//   s.EPILOGUE = ...; s.CLUSTER_K = ...; s.KSUB = ...; s.PINGPONG = ...; s.IN_BYTES = ...;
//   s.OUT_BYTES = ...;
//   s.C_BUFFERS = wgmma_sm90::c_buffers(s, arch.smem_per_block);  // emitted as C_BUFFERS
//   const int bytes = wgmma_sm90::smem_bytes(s);  // the launch's, and the kernel's SMEM_BYTES
// The other functions (tile_rows, accumulators, ...) are the kernel's constants of the same
// meaning; all are constexpr.
#pragma once

#include "host_device.h"
#include "schedule.h"

namespace gemmtune {
namespace wgmma_sm90 {

// A sub-block of a stage holds one 128-byte swizzle row of K per tile row: 64 16-bit values, or
// 128 float8 ones.
constexpr int ROW_BYTES = 128;

// The configuration's values that decide sizes, named as Cfg's members (see traits.cuh).
struct Shape {
  int BM, BN, STAGES, WG;
  bool SWAP, WS;
  int EPILOGUE, C_BUFFERS, CLUSTER_K, KSUB;
  bool PINGPONG;
  int IN_BYTES;        // bytes of an element of A and B: 2 (f16, bf16) or 1 (e4m3, e5m2)
  int OUT_BYTES;       // bytes of an element of C and D: 2 (f16, bf16) or 4 (f32, float8 only)
  int GROUP_TABLE;     // a grouped problem's groups the table holds (groups.cuh), else 0
  bool STAGED_BIAS;    // TMA stores with a bias along M (kernel columns): staged_bias_bytes
  bool STAGED_SCALES;  // float8 block scales loaded with each stage: scale_stage_bytes
};

// wgmma computes 64-row blocks ("kernel rows", TM per tile) by N ("kernel columns", TN): with
// SWAP, rows are problem m and columns n; without, rows are n and columns m.
GEMMTUNE_HOST_DEVICE constexpr int tile_rows(const Shape& s) {
  return s.SWAP ? s.BM : s.BN;
}
GEMMTUNE_HOST_DEVICE constexpr int tile_cols(const Shape& s) {
  return s.SWAP ? s.BN : s.BM;
}
// K per sub-block and per stage (KSUB sub-blocks).
GEMMTUNE_HOST_DEVICE constexpr int sub_k(const Shape& s) {
  return ROW_BYTES / s.IN_BYTES;
}
GEMMTUNE_HOST_DEVICE constexpr int stage_k(const Shape& s) {
  return sub_k(s) * s.KSUB;
}
// Consumer warpgroups that share a tile's rows: all of them, or one with ping-pong.
GEMMTUNE_HOST_DEVICE constexpr int row_warpgroups(const Shape& s) {
  return s.PINGPONG ? 1 : s.WG;
}
// 64-row wgmma blocks per consumer warpgroup (MW), and its threads' f32 accumulators (ACC).
GEMMTUNE_HOST_DEVICE constexpr int blocks_per_warpgroup(const Shape& s) {
  return tile_rows(s) / (64 * row_warpgroups(s));
}
GEMMTUNE_HOST_DEVICE constexpr int accumulators(const Shape& s) {
  return blocks_per_warpgroup(s) * tile_cols(s) / 2;
}
// Float8 promotion keeps partial sums beside the accumulators (promotion.cuh): one set of each,
// or two partial sums with OVERLAP, fit 192 registers a consumer thread (96 with three
// consumers). Two 64-row blocks a consumer that do not fit so take their blocks in waves through
// one block's partial sum (WAVES), whose registers need count half the accumulators.
GEMMTUNE_HOST_DEVICE constexpr int fp8_sum_registers(const Shape& s) {
  return s.WG == 3 ? 96 : 192;
}
GEMMTUNE_HOST_DEVICE constexpr bool fp8_in_waves(const Shape& s) {
  return blocks_per_warpgroup(s) == 2 && 2 * accumulators(s) > fp8_sum_registers(s);
}
// The consumer warpgroups, and with WS the producer's.
GEMMTUNE_HOST_DEVICE constexpr int threads(const Shape& s) {
  return 128 * (s.WG + (s.WS ? 1 : 0));
}

// A stage: P (the kernel rows' operand) then Q, each KSUB sub-blocks of a 128-byte row per row.
GEMMTUNE_HOST_DEVICE constexpr int p_sub_bytes(const Shape& s) {
  return tile_rows(s) * ROW_BYTES;
}
GEMMTUNE_HOST_DEVICE constexpr int q_sub_bytes(const Shape& s) {
  return tile_cols(s) * ROW_BYTES;
}
GEMMTUNE_HOST_DEVICE constexpr int p_bytes(const Shape& s) {
  return p_sub_bytes(s) * s.KSUB;
}
GEMMTUNE_HOST_DEVICE constexpr int q_bytes(const Shape& s) {
  return q_sub_bytes(s) * s.KSUB;
}
GEMMTUNE_HOST_DEVICE constexpr int stage_bytes(const Shape& s) {
  return p_bytes(s) + q_bytes(s);
}

// The C tile staged for TMA stores (EPILOGUE 1): per consumer warpgroup, chunks of 128 bytes of
// kernel columns (64 16-bit values, 32 f32 ones: the most a TMA box with 128-byte swizzle holds
// in a row) by its 64*MW rows, 128-byte swizzled like the loads, through C_BUFFERS chunk buffers
// (the family's choice, c_buffers below: all of them where they fit beside the stages, else as
// many as fit, reused in turn; a 256x128 tile keeps four stages with two of its four chunks
// staged at a time). An f32 tile has twice the chunks of a 16-bit one, each as large.
GEMMTUNE_HOST_DEVICE constexpr int c_chunk_cols(const Shape& s) {
  return ROW_BYTES / s.OUT_BYTES;
}
GEMMTUNE_HOST_DEVICE constexpr int c_chunk_bytes(const Shape& s) {
  return 64 * blocks_per_warpgroup(s) * ROW_BYTES;
}
// A tile whose kernel columns are no multiple of a chunk (wgmma N 144 = 64 + 64 + 16) has one more
// chunk, the last, which ends where the tile does and overlaps the one before: the overlap is
// stored twice with the same values (so C, which a chunk would read after the one before had
// stored D over it, is not read there: the family's rule tma_store_layout).
GEMMTUNE_HOST_DEVICE constexpr int c_chunks(const Shape& s) {
  return (tile_cols(s) + c_chunk_cols(s) - 1) / c_chunk_cols(s);
}
// The first kernel column of chunk `chunk`.
GEMMTUNE_HOST_DEVICE constexpr int c_chunk_col(const Shape& s, int chunk) {
  return chunk * c_chunk_cols(s) + c_chunk_cols(s) <= tile_cols(s) ? chunk * c_chunk_cols(s)
                                                                   : tile_cols(s) - c_chunk_cols(s);
}
// The chunk buffers the kernel has: none where it stores from registers.
GEMMTUNE_HOST_DEVICE constexpr int c_buffers_in_use(const Shape& s) {
  return s.EPILOGUE == 1 ? s.C_BUFFERS : 0;
}
GEMMTUNE_HOST_DEVICE constexpr int c_bytes(const Shape& s) {
  return s.WG * c_buffers_in_use(s) * c_chunk_bytes(s);
}
// beta != 0: a barrier per chunk buffer that C's chunk has landed in it, and one per consumer
// that its buffers are free for the next tile's chunks (the producer loads them).
GEMMTUNE_HOST_DEVICE constexpr int c_barriers(const Shape& s) {
  return c_buffers_in_use(s) ? s.WG * (c_buffers_in_use(s) + 1) : 0;
}

// CLUSTER_K: a consumer thread's float4 i of accumulators (64-row block i / GROUPS, 8-column
// group i % GROUPS) belongs to CTA (i % GROUPS) % CLUSTER_K of the cluster, which receives the
// other CTAs' partial sums of it: per consumer, a slot per sending CTA of OWNED float4s per
// thread, 128 apart; and a barrier that they have landed, one that they have been read.
GEMMTUNE_HOST_DEVICE constexpr int column_groups(const Shape& s) {
  return tile_cols(s) / 8;
}
GEMMTUNE_HOST_DEVICE constexpr int owned(const Shape& s) {
  return blocks_per_warpgroup(s) * ((column_groups(s) + s.CLUSTER_K - 1) / s.CLUSTER_K);
}
// CTAs 0 to OWNERS - 1 own column groups. With fewer groups than CTAs (wgmma N 8 or 16 in a
// cluster of four, N 8 in one of two) the others own none: they push all their sums, get none.
GEMMTUNE_HOST_DEVICE constexpr int owners(const Shape& s) {
  return column_groups(s) < s.CLUSTER_K ? column_groups(s) : s.CLUSTER_K;
}
GEMMTUNE_HOST_DEVICE constexpr int push_bytes(const Shape& s) {
  return s.CLUSTER_K > 1 ? s.WG * s.CLUSTER_K * owned(s) * 128 * 16 : 0;
}
GEMMTUNE_HOST_DEVICE constexpr int push_barriers(const Shape& s) {
  return s.CLUSTER_K > 1 ? 2 * s.WG : 0;
}

// TMA stores with a bias along M: each consumer's copy of its tile's TN values of the bias (D's
// type), which its threads load as the main loop begins and write here as the epilogue begins,
// so that a chunk reads its column pairs from shared memory (store_tma.cuh, StagedBias).
GEMMTUNE_HOST_DEVICE constexpr int staged_bias_bytes(const Shape& s) {
  return s.STAGED_BIAS ? (s.WG * tile_cols(s) * s.OUT_BYTES + 15) / 16 * 16 : 0;
}

// Block scaling: every stage's scales, loaded by TMA with its operands in boxes that start on 16
// bytes, up to three values before the first one needed: of B's (1x128 blocks), TM + 4 values
// from the tile's first row's of the k-block; then, 128-byte aligned (TMA's destinations are), of
// A's (128x128 blocks) eight from the tile's first block of columns.
GEMMTUNE_HOST_DEVICE constexpr int scale_row_bytes(const Shape& s) {
  return s.STAGED_SCALES ? 4 * (tile_rows(s) + 4) : 0;
}
GEMMTUNE_HOST_DEVICE constexpr int scale_cols_offset(const Shape& s) {
  return (scale_row_bytes(s) + 127) / 128 * 128;
}
GEMMTUNE_HOST_DEVICE constexpr int scale_stage_bytes(const Shape& s) {
  return s.STAGED_SCALES ? scale_cols_offset(s) + 128 : 0;
}
GEMMTUNE_HOST_DEVICE constexpr int scale_bytes_loaded(const Shape& s) {
  return s.STAGED_SCALES ? scale_row_bytes(s) + 32 : 0;  // what a stage's two copies bring
}

// A grouped problem's table: each group's end in tiles along N, then the raster's two divisors.
GEMMTUNE_HOST_DEVICE constexpr int group_table_bytes(const Shape& s) {
  return s.GROUP_TABLE > 0 ? 4 * s.GROUP_TABLE + 32 : 0;
}

// Stages, staged C, pushed sums, the stages' block scales, the staged bias, alignment slack, full
// and empty barriers (and the pushes' and staged C's), then the fixup flags (a word per consumer),
// the schedule (kept in shared memory: registers are for the accumulators) and the group table.
GEMMTUNE_HOST_DEVICE constexpr int smem_bytes(const Shape& s) {
  return s.STAGES * stage_bytes(s) + c_bytes(s) + push_bytes(s) + s.STAGES * scale_stage_bytes(s) +
         staged_bias_bytes(s) + 1024 + 2 * s.STAGES * 8 + push_barriers(s) * 8 + c_barriers(s) * 8 +
         16 + int(sizeof(schedule::Work)) + group_table_bytes(s);
}

// The C chunk buffers of a configuration with TMA stores (EPILOGUE 1; 0 without): as many of its
// c_chunks as fit beside everything else within `smem_limit` bytes a block, all of them where
// they fit, at least one. s.C_BUFFERS is not read.
GEMMTUNE_HOST_DEVICE constexpr int c_buffers(Shape s, int smem_limit) {
  if (s.EPILOGUE != 1) return 0;
  const int chunks = c_chunks(s);
  for (int b = chunks; b > 1; --b) {
    s.C_BUFFERS = b;
    if (smem_bytes(s) <= smem_limit) return b;
  }
  return chunks > 0 ? 1 : 0;
}

}  // namespace wgmma_sm90
}  // namespace gemmtune
