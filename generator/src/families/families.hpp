#pragma once
// What the families of this build share. Each lives in its own file beside this one and
// registers itself (GEMMTUNE_REGISTER_FAMILY).
#include <algorithm>
#include <initializer_list>

#include "gemmtune/generator/family.hpp"
#include "raster.h"

namespace gemmtune {

// Whether the problem has one of `types` for every operand, f32 accumulation and no scaling:
// what the families of this build compute.
inline bool one_type_of(const Problem& p, std::initializer_list<DataType> types) {
  return p.types.is_uniform() && p.scaling == Scaling::none &&
         std::find(types.begin(), types.end(), p.types.a) != types.end();
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}
inline int64_t round_up(int64_t a, int64_t b) {
  return ceil_div(a, b) * b;
}

// Shape classes the tensor-core families choose by (K splits, pipeline depth, tile sizes).
// Fewer 128 x 128 tiles than SMs.
inline bool few_tiles(const Problem& p, const ArchInfo& arch) {
  return ceil_div(p.m, 128) * ceil_div(p.n, 128) < arch.sms;
}
// Even 64 x 64 tiles fill less than half the SMs: every CTA waits through its chain of loads, and
// narrower tiles, deeper pipelines or parts of K buy CTAs that wait through shorter ones
// (docs/PERF.md, 'Latency-bound problems take narrow tiles on half the SMs').
inline bool latency_bound(const Problem& p, const ArchInfo& arch) {
  return 2 * ceil_div(p.m, 64) * ceil_div(p.n, 64) < arch.sms;
}

// The groups a grouped kernel's table holds (templates/group_table.cuh): G rounded up to a power
// of two, at least 8, so that one kernel serves problems of nearby G; 0 for one GEMM.
inline int64_t group_table_of(const Problem& p) {
  int64_t slots = 8;
  while (p.grouped() && slots < p.groups) slots *= 2;
  return p.grouped() ? slots : 0;
}

// The tf32 products an f32 problem's kernel sums over K: one (tf32), three (3xTF32); 1 else.
inline int64_t products_of(const Problem& p) {
  return p.precision == Precision::tf32x3 ? 3 : 1;
}

// The launch makes a copy of an operand first (packed, or derived: runtime/src/launcher.cpp): a
// kernel of its own, which reads and writes the bytes once, a launch and a wait (docs/PERF.md,
// 'Unaligned operands are packed: about 3 us plus their bytes').
constexpr double kCopyLaunchUs = 3.0;
inline double copies_us(int launches, double bytes, const ArchInfo& a) {
  return launches * kCopyLaunchUs + 2 * bytes / (a.dram_gb_per_s * 1e3);
}

// The tiling of a launch of tiles_m x tiles_n tiles in raster groups of `group` along M, for the
// families that pass a GemmTiling.
inline GemmTiling tiling_of(int64_t tiles_m, int64_t tiles_n, int group) {
  GemmTiling t{int(tiles_m), int(tiles_n), {}};
  unsigned divisors[2];
  raster_divisors(int(tiles_m), int(tiles_n), group, divisors);
  for (int i = 0; i < 2; ++i) t.divisors[i] = make_divisor(divisors[i]);
  return t;
}

}  // namespace gemmtune
