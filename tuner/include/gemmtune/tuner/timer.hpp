#pragma once
// Timing with CUDA events: warm-up, then at least min_runs runs and min_total_ms of kernel
// time, each run timed on its own after the L2 cache was flushed; median with min and max.
#include <cuda.h>

#include <functional>
#include <vector>

#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/memory.hpp"

namespace gemmtune {

// A median needs a run: the timer always makes at least one, whatever max_runs says.
struct TimingSettings {
  int min_runs = 20;
  int max_runs = 2000;
  double min_total_ms = 200;  // keep running short kernels until this much kernel time
  double warmup_ms = 50;      // launches before timing, so clocks settle
  bool flush_l2 = true;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int runs = 0;
};

// Median, min and max of run times (ms), in any order; all zero with runs = 0 when there are none.
Timing summarize(std::vector<double> times_ms);

class Timer {
 public:
  explicit Timer(const DeviceInfo& device);
  // launch enqueues one run on the stream it is given.
  Timing time(const std::function<void(CUstream)>& launch, CUstream stream,
              const TimingSettings& settings) const;

 private:
  DeviceBuffer flush_;  // twice the L2 size, overwritten before every timed run
};

}  // namespace gemmtune
