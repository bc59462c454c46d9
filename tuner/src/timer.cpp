#include "gemmtune/tuner/timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

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
  double total = 0;
  EventHandle begin, end;
  // At least one run, whatever the settings say (max_runs 0, or no minimum at all): a median needs one.
  auto more = [&] {
    const int runs = int(times.size());
    return runs == 0 || (runs < s.max_runs && (runs < s.min_runs || total < s.min_total_ms));
  };
  while (more()) {
    if (s.flush_l2) GT_CU(cuMemsetD32Async(flush_.ptr(), uint32_t(times.size()), flush_.bytes() / 4, stream));
    begin.record(stream);
    launch(stream);
    end.record(stream);
    GT_CU(cuEventSynchronize(end.get()));
    const double ms = end.since(begin);
    times.push_back(ms);
    total += ms;
  }
  return summarize(std::move(times));
}

}  // namespace gemmtune
