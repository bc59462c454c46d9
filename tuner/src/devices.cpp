// Several GPUs of one host on one list of problems (tune_on_devices).
#include <algorithm>
#include <mutex>
#include <numeric>
#include <thread>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/tuner/tuner.hpp"

namespace gemmtune {
namespace {

// The problems one group of identical GPUs still has to tune.
class WorkList {
 public:
  WorkList(const std::vector<Problem>& problems, const ArchInfo& arch, bool longest_first) {
    order_.resize(problems.size());
    std::iota(order_.begin(), order_.end(), size_t(0));
    // Longest first keeps GPUs busy to the end; work is estimated as FLOPs over the peak rate.
    if (longest_first)
      std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
        return problems[a].flops() / arch.flops_per_clock_per_sm(problems[a]) >
               problems[b].flops() / arch.flops_per_clock_per_sm(problems[b]);
      });
  }
  std::optional<size_t> take() {
    std::lock_guard lock(mutex_);
    if (next_ == order_.size()) return std::nullopt;
    return order_[next_++];
  }
  std::vector<size_t> rest() {
    std::lock_guard lock(mutex_);
    std::vector<size_t> out(order_.begin() + long(next_), order_.end());
    next_ = order_.size();
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<size_t> order_;
  size_t next_ = 0;
};

struct Group {
  std::vector<DeviceInfo> devices;
  std::unique_ptr<WorkList> work;
  std::vector<TuneReport> reports;  // by problem
  std::string last_error;
};

std::vector<Group> group_devices(const std::vector<int>& ordinals) {
  std::vector<Group> groups;
  for (int ordinal : ordinals) {
    DeviceInfo info = query_device(ordinal);
    auto same = std::find_if(groups.begin(), groups.end(),
                             [&](const Group& g) { return g.devices[0].key == info.key; });
    if (same == groups.end()) same = groups.insert(groups.end(), Group{});
    same->devices.push_back(std::move(info));
  }
  return groups;
}

// The errors of a GPU rather than of a problem: the worker or the driver failed.
bool device_error(const Error& e) {
  return e.code() == Errc::cuda || e.code() == Errc::io || e.code() == Errc::no_device;
}

class Runner {
 public:
  Runner(const std::vector<Problem>& problems, const TuneOptions& options,
         const std::function<void(const TuneReport&)>& on_report)
      : problems_(problems), options_(options), on_report_(on_report) {}

  // One GPU's thread: takes problems from its group's list until it is empty.
  void serve(Group& group, const DeviceInfo& device) {
    TuneOptions options = options_;
    if (options_.progress)
      options.progress = [this, ordinal = device.ordinal](Progress p) {
        p.device = ordinal;
        std::lock_guard lock(mutex_);
        options_.progress(p);
      };
    int failures_in_a_row = 0;
    while (failures_in_a_row < 2 && !stop_requested()) {
      const auto index = group.work->take();
      if (!index) return;
      TuneReport report = tune_one(problems_[*index], options, device, failures_in_a_row, group);
      deliver(group, *index, std::move(report));
    }
  }

  // Problems no GPU of the group took: a stop was requested, or every GPU of it failed.
  void report_untaken(Group& group) {
    for (size_t index : group.work->rest()) {
      TuneReport report;
      report.problem = problems_[index];
      report.device = group.devices[0];
      report.interrupted = stop_requested();
      if (!report.interrupted)
        report.error = "no GPU of this model is left to tune it: " + group.last_error;
      deliver(group, index, std::move(report));
    }
  }

 private:
  TuneReport tune_one(const Problem& problem, const TuneOptions& options, const DeviceInfo& device,
                      int& failures_in_a_row, Group& group) {
    TuneReport report;
    try {
      report = tune(problem, options, device.ordinal);
      failures_in_a_row = 0;
    } catch (const std::exception& e) {
      const auto* error = dynamic_cast<const Error*>(&e);
      failures_in_a_row += error && device_error(*error);
      report.problem = problem;
      report.device = device;
      report.error = e.what();
      report.failure = std::current_exception();
      std::lock_guard lock(mutex_);
      group.last_error = fmt::format("GPU {}: {}", device.ordinal, e.what());
    }
    return report;
  }

  void deliver(Group& group, size_t index, TuneReport report) {
    std::lock_guard lock(mutex_);
    group.reports[index] = std::move(report);
    if (on_report_) on_report_(group.reports[index]);
  }

  const std::vector<Problem>& problems_;
  const TuneOptions& options_;
  const std::function<void(const TuneReport&)>& on_report_;
  std::mutex mutex_;
};

}  // namespace

std::vector<TuneReport> tune_on_devices(const std::vector<Problem>& problems,
                                        const TuneOptions& options,
                                        const std::vector<int>& ordinals,
                                        const std::function<void(const TuneReport&)>& on_report) {
  GT_REQUIRE(!ordinals.empty(), Errc::invalid_argument, "no GPU to tune on");
  std::vector<Group> groups = group_devices(ordinals);
  ThreadPool pool(options.compile_threads);
  TuneOptions shared = options;
  if (!shared.compile_pool) shared.compile_pool = &pool;
  Runner runner(problems, shared, on_report);
  std::vector<std::thread> threads;
  for (Group& group : groups) {
    group.work =
        std::make_unique<WorkList>(problems, group.devices[0].arch, group.devices.size() > 1);
    group.reports.resize(problems.size());
    for (const DeviceInfo& device : group.devices)
      threads.emplace_back([&runner, &group, &device] { runner.serve(group, device); });
  }
  for (auto& t : threads) t.join();
  std::vector<TuneReport> out;
  for (Group& group : groups) {
    runner.report_untaken(group);
    for (auto& r : group.reports) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace gemmtune
