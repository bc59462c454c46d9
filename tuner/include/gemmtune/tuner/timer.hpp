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
  // Early stops for a candidate that cannot win (0: never stop early): after abort_after_runs
  // timed runs, when even the fastest of them took more than abort_above_ms; after min_runs,
  // when their median is above enough_above_ms (it is known well enough to rank below the best).
  double abort_above_ms = 0;
  int abort_after_runs = 5;
  double enough_above_ms = 0;
};

struct Timing {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int runs = 0;
  bool stopped_early = false;  // abort_above_ms cut the timing short
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
