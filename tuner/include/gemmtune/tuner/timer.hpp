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

// A grouped problem is timed on several routings of its tokens (uniform, then skewed:
// tuner/src/worker.cpp), one timing after the other, and ranked by the mean over them. The
// timing of all of them: median_ms, min_ms and max_ms each the mean of the routings' (so a
// kernel that skew slows down pays for it in the ranking), runs their sum, stopped early when
// one was. One routing (a dense problem): its timing as it is.
Timing mean_over_routings(const std::vector<Timing>& routings);

// The early stops of the next routing's timing, `done` the routings timed before it, `routings`
// of them in all. The thresholds (the best candidate's mean over the routings, with the
// margins) are compared with the same mean: whatever the routings not timed yet take (0 at
// least), the candidate cannot win when the next one is above `routings` times the threshold
// less those done (their min_ms for abort_above_ms, their median_ms for enough_above_ms). The
// first of two thus stops only above twice the threshold, the second above what the first left
// it; where those done already exceed the mean allowed, the next stops as soon as its rules let
// it. A threshold of 0 (never stop) stays 0; with one routing the settings are unchanged.
TimingSettings stops_for_routing(TimingSettings settings, const std::vector<Timing>& done,
                                 int routings);

// The order in which Timer::time_together takes runs of several launches: in turns, forward
// then backward (A B B A A B ...), so that each launch's runs meet the same clocks and
// temperature, and none always runs right after the same other. Every launch gets as many runs:
// turns go on until each has min_runs and min_total_ms of time, or max_runs. Bookkeeping only,
// so that a CPU test checks the order and the stops.
class Turns {
 public:
  Turns(int launches, const TimingSettings& settings);
  int next() const;     // the launch to run next; -1 when every launch has enough runs
  void add(double ms);  // the time of the run next() named
  std::vector<Timing> timings() const;

 private:
  bool enough() const;
  TimingSettings settings_;
  std::vector<std::vector<double>> times_;
  std::vector<double> totals_;
  long long taken_ = 0;  // runs so far, over all launches
};

class Timer {
 public:
  using Launch = std::function<void(CUstream)>;  // enqueues one run on the stream it is given

  explicit Timer(const DeviceInfo& device);
  Timing time(const Launch& launch, CUstream stream, const TimingSettings& settings) const;
  // Several launches timed in turns (Turns): a comparison between them that the clocks' drift
  // (2-5% on an H100 over seconds) does not decide. No early stops; warmed up in turns.
  std::vector<Timing> time_together(const std::vector<Launch>& launches, CUstream stream,
                                    const TimingSettings& settings) const;

 private:
  static void warm_up(const std::vector<Launch>& launches, CUstream stream, double warmup_ms);
  double timed_run(const Launch& launch, CUstream stream, int run, bool flush) const;

  DeviceBuffer flush_;  // twice the L2 size, overwritten before every timed run
  EventHandle begin_, end_;
};

}  // namespace gemmtune
