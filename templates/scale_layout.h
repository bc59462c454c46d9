// Where the fp32 scales of a scaled problem lie (gemmtune/types.hpp, scale_shape_a/b), in plain
// code that kernels (NVRTC), the verifier and the host share. Scaling codes: gemmtune::Scaling
// (1 tensor, 2 row, 3 block).
#pragma once
#include "host_device.h"

// The scales of one group's A: one (tensor), one per row of op(A) (row), or one per 128 x 128
// block of op(A) (block: ceil(m / 128) x ceil(k / 128)). A grouped problem's G groups' scales of
// A lie one after another, group g's this many times g after the first; B's scales are over all
// the columns of B, whichever group holds them.
GEMMTUNE_HOST_DEVICE long long gemmtune_scales_a_per_group(int scaling, long long m, long long k) {
  switch (scaling) {
    case 1:
      return 1;
    case 2:
      return m;
    case 3:
      return ((m + 127) / 128) * ((k + 127) / 128);
    default:
      return 0;
  }
}
