#pragma once
// The cost model: a predicted time for one configuration of a family on one problem, from the
// device's ceilings (ArchInfo: SMs, FLOPs per clock, clock, DRAM bandwidth). The tuner measures
// candidates in the order of their predicted times and stops when the model says that the rest
// cannot win; the prediction never decides a winner, measurements do.
//
// A family describes a configuration as TileWork (what one CTA computes, how many fit an SM, how
// well its main loop uses the SM); roofline() turns that into a time:
//
//   compute  = (tiles on the busiest SM) x (FLOPs of a tile) / (SM peak x efficiency)
//              -- wave quantization: a partial last wave costs a whole tile per SM, unless the
//              work is balanced over the SMs (stream-K: tiles / SMs)
//   memory   = max(unique bytes / DRAM bandwidth,            -- A, B and C read or written once
//                  operand bytes of all tiles / L2 bandwidth, -- every tile reads its panels
//                  operand bytes of the busiest SM / SM bandwidth)  -- few CTAs cannot fill DRAM
//              the SM bandwidth being its port, or what its CTAs keep in flight over the latency
//   total    = max(compute, memory) + (tiles on the busiest SM) x (unhidden per-tile time) + launch
//              + setup (work the launch runs before the kernel, such as packing an operand)
#include <cstdint>

#include "gemmtune/generator/config.hpp"

namespace gemmtune {

struct TileWork {
  int64_t tile_m = 128, tile_n = 128;  // output tile of one CTA
  int64_t k_splits = 1;                // slices of K computed by separate CTAs (split-K)
  bool balanced = false;               // the work is spread evenly over the SMs (stream-K)
  int ctas_per_sm = 1;                 // resident at once (occupancy)
  // Fraction of the SM's peak FLOP rate that the main loop reaches on a long K: the family's
  // calibration of its instruction mix, each family's citing its named fact (docs/PERF.md, e.g.
  // 'The best Hopper kernels run at about 70% of the bf16 peak').
  double efficiency = 0.5;
  // The peak the efficiency is of, in FLOPs of the problem per clock and SM: 0, the rate of the
  // problem's types (ArchInfo::flops_per_clock_per_sm); a kernel that computes f32 on tensor
  // cores says its own (tf32's, a third of it for 3xTF32's three products).
  double flops_per_clock = 0;
  // Time per tile that the pipeline does not hide, in microseconds: filling the stages, the
  // epilogue's stores (persistent kernels that overlap the epilogue pay less).
  double tile_overhead_us = 1.0;
  // Fraction of a tile's operand bytes that it fetches from L2 itself (a cluster that multicasts
  // one operand shares it: 0.75 for square tiles).
  double l2_traffic = 1.0;
  double workspace_bytes = 0;  // extra DRAM traffic, e.g. split-K partial sums
  // Bytes of operands one CTA keeps in flight (its pipeline's stages): by Little's law an SM
  // reads at most (resident CTAs x bytes in flight) / latency. 0: no limit but the SM's port.
  double bytes_in_flight = 0;
  // Microseconds of work the launch runs before the kernel: packing an operand that the kernel
  // cannot read in place into an aligned copy, say (another kernel, and the operand read and
  // written once).
  double setup_us = 0;
};

struct Cost {
  double compute_ms = 0, memory_ms = 0, overhead_ms = 0;
  double total_ms = 0;
  int64_t tiles = 0;         // work units (tiles x K slices)
  int64_t tiles_per_sm = 0;  // on the busiest SM
};

// A grouped problem is costed as its G groups (Problem::group_count) of its mean columns each
// (n / G, rounded up); one GEMM as itself.
int64_t group_columns(const Problem& problem);

// The generic roofline of a tiled GEMM described by `work`.
Cost roofline(const Problem& problem, const ArchInfo& arch, const TileWork& work);

// Microseconds for one CTA to store a tile of C when every SM stores at once.
double epilogue_us(const ArchInfo& arch, int64_t tile_m, int64_t tile_n, DataType output);

// Resident CTAs per SM from the block's threads, shared memory and (estimated) registers per
// thread; at least 1.
int ctas_per_sm(const ArchInfo& arch, int64_t threads, int64_t smem_bytes,
                int64_t registers_per_thread);

}  // namespace gemmtune
