// What an mma_sm80 kernel takes: the core and the tiling of its launch.
#pragma once
#include "kernel_args.h"

struct Mma80Args {
  GemmCore core;
  GemmTiling tiling;
};
