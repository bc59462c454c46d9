#include "gemmtune/tuner/timer.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <vector>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {
namespace {

double median_of(std::vector<double> times) {
  std::sort(times.begin(), times.end());
  const size_t mid = times.size() / 2;
  return times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
}

// A candidate that cannot win stops being timed: every run so far slower than abort_above_ms,
// or, after min_runs, a median above enough_above_ms.
bool clearly_slower(const std::vector<double>& times, double fastest_ms, const TimingSettings& s) {
  const int runs = int(times.size());
  if (s.abort_above_ms > 0 && runs >= std::max(s.abort_after_runs, 1) &&
      fastest_ms > s.abort_above_ms)
    return true;
  return s.enough_above_ms > 0 && runs >= std::max(s.min_runs, 1) &&
         median_of(times) > s.enough_above_ms;
}

}  // namespace

Timing summarize(std::vector<double> times) {
  Timing t;
  if (times.empty()) return t;
  std::sort(times.begin(), times.end());
  t.runs = int(times.size());
  t.min_ms = times.front();
  t.max_ms = times.back();
  const size_t mid = times.size() / 2;
  t.median_ms = times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  return t;
}

Timing mean_over_routings(const std::vector<Timing>& routings) {
  if (routings.size() == 1) return routings.front();
  Timing t;
  if (routings.empty()) return t;
  const double n = double(routings.size());
  for (const Timing& r : routings) {
    t.median_ms += r.median_ms / n;
    t.min_ms += r.min_ms / n;
    t.max_ms += r.max_ms / n;
    t.runs += r.runs;
    t.stopped_early = t.stopped_early || r.stopped_early;
  }
  return t;
}

TimingSettings stops_for_routing(TimingSettings s, const std::vector<Timing>& done, int routings) {
  double fastest = 0, medians = 0;
  for (const Timing& t : done) {
    fastest += t.min_ms;
    medians += t.median_ms;
  }
  // What the next routing may take before the mean is above `threshold`; above it already: the
  // smallest threshold that still stops (0 would never stop).
  auto left = [&](double threshold, double spent) {
    if (threshold <= 0) return 0.0;
    return std::max(std::max(routings, 1) * threshold - spent, std::numeric_limits<double>::min());
  };
  s.abort_above_ms = left(s.abort_above_ms, fastest);
  s.enough_above_ms = left(s.enough_above_ms, medians);
  return s;
}

Turns::Turns(int launches, const TimingSettings& settings)
    : settings_(settings), times_(size_t(std::max(launches, 0))), totals_(times_.size(), 0.0) {}

// Every launch has as many runs at the end of a turn; at least one, whatever the settings say.
bool Turns::enough() const {
  const int runs = int(times_.front().size());
  if (runs == 0) return false;
  if (runs >= settings_.max_runs) return true;
  if (runs < settings_.min_runs) return false;
  return std::all_of(totals_.begin(), totals_.end(),
                     [&](double t) { return t >= settings_.min_total_ms; });
}

int Turns::next() const {
  const int n = int(times_.size());
  if (n == 0) return -1;
  const long long turn = taken_ / n, place = taken_ % n;
  if (place == 0 && enough()) return -1;
  return int(turn % 2 == 0 ? place : n - 1 - place);
}

void Turns::add(double ms) {
  const int i = next();
  if (i < 0) return;
  times_[size_t(i)].push_back(ms);
  totals_[size_t(i)] += ms;
  ++taken_;
}

std::vector<Timing> Turns::timings() const {
  std::vector<Timing> out;
  for (const auto& t : times_) out.push_back(summarize(t));
  return out;
}

Timer::Timer(const DeviceInfo& device)
    : flush_(size_t(std::max<int64_t>(device.l2_bytes, 1 << 20)) * 2) {}

// Warm-up: at least three launches of each, and warmup_ms of wall time, so that clocks settle.
void Timer::warm_up(const std::vector<Launch>& launches, CUstream stream, double warmup_ms) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    for (const Launch& launch : launches) launch(stream);
    GT_CU(cuStreamSynchronize(stream));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2 && ms >= warmup_ms) break;
  }
}

// One run on its own, after the L2 was overwritten (with the run's index, so that no two
// flushes write the same values).
double Timer::timed_run(const Launch& launch, CUstream stream, int run, bool flush) const {
  if (flush) GT_CU(cuMemsetD32Async(flush_.ptr(), uint32_t(run), flush_.bytes() / 4, stream));
  begin_.record(stream);
  launch(stream);
  end_.record(stream);
  GT_CU(cuEventSynchronize(end_.get()));
  return end_.since(begin_);
}

Timing Timer::time(const Launch& launch, CUstream stream, const TimingSettings& s) const {
  warm_up({launch}, stream, s.warmup_ms);
  std::vector<double> times;
  double total = 0, fastest = 0;
  bool stopped_early = false;
  // At least one run, whatever the settings say (max_runs 0, or no minimum at all): a median needs
  // one.
  auto more = [&] {
    const int runs = int(times.size());
    return runs == 0 || (runs < s.max_runs && (runs < s.min_runs || total < s.min_total_ms));
  };
  while (more()) {
    if (clearly_slower(times, fastest, s)) {
      stopped_early = true;
      break;
    }
    const double ms = timed_run(launch, stream, int(times.size()), s.flush_l2);
    fastest = times.empty() ? ms : std::min(fastest, ms);
    times.push_back(ms);
    total += ms;
  }
  Timing t = summarize(std::move(times));
  t.stopped_early = stopped_early;
  return t;
}

std::vector<Timing> Timer::time_together(const std::vector<Launch>& launches, CUstream stream,
                                         const TimingSettings& s) const {
  warm_up(launches, stream, s.warmup_ms);
  Turns turns(int(launches.size()), s);
  for (int i = turns.next(), run = 0; i >= 0; i = turns.next(), ++run)
    turns.add(timed_run(launches[size_t(i)], stream, run, s.flush_l2));
  return turns.timings();
}

}  // namespace gemmtune
