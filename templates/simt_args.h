// What a simt kernel takes: the core and the tiling of its launch.
#pragma once
#include "kernel_args.h"

struct SimtArgs {
  GemmCore core;
  GemmTiling tiling;
};
