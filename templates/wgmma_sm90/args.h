// What a wgmma_sm90 kernel takes: the tensor maps of A, B and C (the family's launch plan says
// which it needs, with their boxes), the core, and the tiling of its launch.
#pragma once
#include "kernel_args.h"

struct WgmmaArgs {
  GemmTensorMap map_a;  // first: their alignment would otherwise pad the struct
  GemmTensorMap map_b;
  GemmTensorMap map_c;  // made only when C is 16-byte aligned: WGMMA_MAP_C_MADE in core.flags
  GemmCore core;
  GemmTiling tiling;
};

// The bit of GemmCore::flags that says map_c was made.
#define WGMMA_MAP_C_MADE 1
