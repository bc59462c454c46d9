// What a wgmma_sm90 kernel takes: the tensor maps of A, B, C and D (the family's launch plan says
// which it needs, with their boxes), the core, the tiling of its launch, for 3xTF32 the maps of
// A's and B's low parts (copies the launch derives first), and with block scaling those of the
// scales.
#pragma once
#include "kernel_args.h"

struct WgmmaArgs {
  GemmTensorMap map_a;  // first: their alignment would otherwise pad the struct
  GemmTensorMap map_b;
  GemmTensorMap map_c;  // made only when C is 16-byte aligned: WGMMA_MAP_C_MADE in core.flags
  GemmTensorMap map_d;  // TMA stores' (C's buffer, where D is C): WGMMA_MAP_D_MADE
  GemmCore core;
  GemmTiling tiling;
  GemmTensorMap map_a_low;  // 3xTF32: A - tf32(A), made by the launch (TensorMapPlan::derived)
  GemmTensorMap map_b_low;
  GemmTensorMap map_scale_a;  // block scaling: the scales of A and B, each as one row
  GemmTensorMap map_scale_b;
  GemmTensorMap
      map_aux;  // TMA stores' of the pre-activation output (Epilogue::aux): WGMMA_MAP_AUX_MADE
};

// The bits of GemmCore::flags that say map_c and map_d were made.
#define WGMMA_MAP_C_MADE 1
#define WGMMA_MAP_D_MADE 2
#define WGMMA_MAP_AUX_MADE 4
