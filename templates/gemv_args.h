// What a gemv kernel takes: the core alone.
#pragma once
#include "kernel_args.h"

struct GemvArgs {
  GemmCore core;
};
