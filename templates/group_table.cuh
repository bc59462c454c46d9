// The groups of a grouped problem (a mixture-of-experts layer: gemmtune/types.hpp, Problem), for
// every family's kernels: G GEMMs that share M and K and split the columns of B and C between
// them at offsets only the device knows (GemmCore::group_ends: the groups' ends, or their counts
// in slots of group_capacity columns when masked). No host round trip: a captured graph replays
// new routings.
//
// A kernel reads a group's columns only through gemmtune_group_begin and gemmtune_group_end,
// never core.group_ends itself, so that another layout of the groups changes these two alone.
//
// Its tiles come from a table in shared memory of the groups' cumulative column tiles: a CTA
// builds it once (build_group_table), and a column tile's group is then a binary search of it
// (group_of).
#pragma once
#include "common.cuh"

// The first column of group g: the end of the one before it (0 for the first), or, masked,
// the first of its capacity-wide slot.
GEMMTUNE_DEVICE_INLINE int gemmtune_group_begin(const GemmCore& core, int g) {
  if (core.group_capacity > 0) return g * core.group_capacity;
  return g > 0 ? __ldg(reinterpret_cast<const int*>(core.group_ends) + g - 1) : 0;
}

// One past the last column of group g: its end, or, masked, its count past its begin.
GEMMTUNE_DEVICE_INLINE int gemmtune_group_end(const GemmCore& core, int g) {
  const int value = __ldg(reinterpret_cast<const int*>(core.group_ends) + g);
  return core.group_capacity > 0 ? g * core.group_capacity + value : value;
}

namespace gemmtune {

// Every thread of the CTA: table[g] = the column tiles BN wide of groups 0..g (core.groups
// slots). Every thread counts a group's tiles, then warp 0 sums them up in place: each lane a run
// of the table, then across the lanes. On return warp 0 sees the whole table; the other warps
// must pass a barrier first.
template <int BN>
GEMMTUNE_DEVICE_INLINE void build_group_table(const GemmCore& core, int* table) {
  const int groups = core.groups;
  for (int g = threadIdx.x; g < groups; g += blockDim.x) {
    const int columns = gemmtune_group_end(core, g) - gemmtune_group_begin(core, g);
    table[g] = columns > 0 ? (columns + BN - 1) / BN : 0;
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int lane = threadIdx.x, run = (groups + 31) / 32;
  const int first = min(lane * run, groups), last = min(first + run, groups);
  int sum = 0;
  for (int g = first; g < last; ++g) sum += table[g];
  int before = sum;  // inclusive scan of the runs' sums across the warp
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, before, d);
    if (lane >= d) before += other;
  }
  before -= sum;
  for (int g = first; g < last; ++g) {
    before += table[g];
    table[g] = before;
  }
  __syncwarp();
}

// The group whose column tiles hold `tile`: the first whose cumulative tiles lie past it.
GEMMTUNE_DEVICE_INLINE int group_of(const int* table, int groups, int tile) {
  int lo = 0, hi = groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (table[mid] > tile)
      hi = mid;
    else
      lo = mid + 1;
  }
  return lo;
}

}  // namespace gemmtune
