#include "gemmtune/tuner/timer.hpp"

#include <algorithm>
#include <chrono>
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
  if (s.abort_above_ms > 0 && runs >= std::max(s.abort_after_runs, 1) && fastest_ms > s.abort_above_ms) return true;
  return s.enough_above_ms > 0 && runs >= std::max(s.min_runs, 1) && median_of(times) > s.enough_above_ms;
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

Timer::Timer(const DeviceInfo& device) : flush_(size_t(std::max<int64_t>(device.l2_bytes, 1 << 20)) * 2) {}

Timing Timer::time(const std::function<void(CUstream)>& launch, CUstream stream,
                   const TimingSettings& s) const {
  // Warm-up: at least three launches and warmup_ms of wall time.
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    launch(stream);
    GT_CU(cuStreamSynchronize(stream));
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (i >= 2 && ms >= s.warmup_ms) break;
  }
  std::vector<double> times;
  double total = 0, fastest = 0;
  bool stopped_early = false;
  EventHandle begin, end;
  // At least one run, whatever the settings say (max_runs 0, or no minimum at all): a median needs one.
  auto more = [&] {
    const int runs = int(times.size());
    return runs == 0 || (runs < s.max_runs && (runs < s.min_runs || total < s.min_total_ms));
  };
  while (more()) {
    if (clearly_slower(times, fastest, s)) {
      stopped_early = true;
      break;
    }
    if (s.flush_l2) GT_CU(cuMemsetD32Async(flush_.ptr(), uint32_t(times.size()), flush_.bytes() / 4, stream));
    begin.record(stream);
    launch(stream);
    end.record(stream);
    GT_CU(cuEventSynchronize(end.get()));
    const double ms = end.since(begin);
    fastest = times.empty() ? ms : std::min(fastest, ms);
    times.push_back(ms);
    total += ms;
  }
  Timing t = summarize(std::move(times));
  t.stopped_early = stopped_early;
  return t;
}

}  // namespace gemmtune
