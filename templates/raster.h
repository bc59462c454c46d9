// Which output tile a block (or a worker's i-th unit) computes, in plain C++ that compiles both in
// kernels (NVRTC) and on the host, so that a CPU test checks the kernels' own mapping.
//
// Tiles go in groups of `group` along M, so that blocks running together share rows of A and
// columns of B in L2. Mapping a linear index so divides by values known only at launch (the tiles
// of a group, the rows of the last group); a kernel's `/` by such a value is ~20 dependent
// instructions (I2F, MUFU.RCP, IMAD.HI and fix-ups), and a CTA's first load waited on two of
// them (docs/PERF.md, 'A division by a launch value costs ~300 cycles before the first load').
// The launch works out each divisor's multiplier once (raster_divisors, make_divisor) and passes
// them in GemmTiling::divisors; the kernel then divides with a multiply-high, an add and a shift.
#pragma once
#include "host_device.h"
#include "kernel_args.h"

namespace gemmtune {

// Granlund and Montgomery's round-up multiplier: with s = ceil(log2 d) and m = ceil(2^(32+s) / d)
// (2^32 <= m < 2^33), x / d == (x * m) >> (32 + s) for 0 <= x < 2^32; the kernel keeps m - 2^32.
// Host only in practice (a 64-bit division); d >= 1.
GEMMTUNE_HOST_DEVICE GemmDivisor make_divisor(unsigned d) {
  unsigned s = 0;
  while ((1ull << s) < d) ++s;
  const unsigned long long m = ((1ull << (32 + s)) + d - 1) / d;
  GemmDivisor v;
  v.value = d;
  v.mul = unsigned(m - (1ull << 32));
  v.shift = s;
  return v;
}

// x / d for 0 <= x < 2^31 (the add then cannot wrap).
GEMMTUNE_HOST_DEVICE int divide(int x, GemmDivisor d) {
#if defined(__CUDA_ARCH__)
  const unsigned high = __umulhi(unsigned(x), d.mul);
#else
  const unsigned high = unsigned((unsigned long long)unsigned(x) * d.mul >> 32);
#endif
  return int((high + unsigned(x)) >> d.shift);
}

// The divisors grouped_tile takes, for tiles_m x tiles_n tiles in groups of `group` along M:
// the tiles of a whole group, and the rows of the last one.
GEMMTUNE_HOST_DEVICE void raster_divisors(int tiles_m, int tiles_n, int group,
                                          unsigned (&divisors)[2]) {
  divisors[0] = unsigned(group * tiles_n);
  divisors[1] = unsigned(tiles_m % group == 0 ? group : tiles_m % group);
}

// Tile `linear` of tiles_m rows of tiles in groups of `group`, swept down each group's rows
// first. `divisors` are raster_divisors' for these tiles (GemmTiling::divisors).
GEMMTUNE_HOST_DEVICE void grouped_tile(int linear, int tiles_m, int group,
                                       const GemmDivisor (&divisors)[2], int& tile_m, int& tile_n) {
  const int g = divide(linear, divisors[0]);
  const int first_m = g * group;
  const int in_group = linear - g * int(divisors[0].value);
  // Every group but the last has `group` rows: a division by a constant.
  const bool whole = tiles_m - first_m >= group;
  const int n = whole ? in_group / group : divide(in_group, divisors[1]);
  tile_m = first_m + in_group - n * (whole ? group : int(divisors[1].value));
  tile_n = n;
}

}  // namespace gemmtune
