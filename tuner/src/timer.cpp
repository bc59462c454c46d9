#include "gemmtune/tuner/timer.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

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
  while (int(times.size()) < s.max_runs && (int(times.size()) < s.min_runs || total < s.min_total_ms)) {
    if (s.flush_l2) GT_CU(cuMemsetD32Async(flush_.ptr(), uint32_t(times.size()), flush_.bytes() / 4, stream));
    begin.record(stream);
    launch(stream);
    end.record(stream);
    GT_CU(cuEventSynchronize(end.get()));
    const double ms = end.since(begin);
    times.push_back(ms);
    total += ms;
  }
  std::sort(times.begin(), times.end());
  Timing t;
  t.runs = int(times.size());
  t.min_ms = times.front();
  t.max_ms = times.back();
  const size_t mid = times.size() / 2;
  t.median_ms = times.size() % 2 ? times[mid] : 0.5 * (times[mid - 1] + times[mid]);
  return t;
}

}  // namespace gemmtune
