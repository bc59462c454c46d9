// The tuning daemon: one thread per GPU takes the queue's entries for its model and tunes them.
#include "gemmtune/tuner/serve.hpp"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <mutex>
#include <thread>

#include "gemmtune/generator/util.hpp"

namespace gemmtune {
namespace {

using Clock = std::chrono::steady_clock;

std::string host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

double unix_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool process_is_dead(const std::string& pid_text) {
  char* end = nullptr;
  const long pid = std::strtol(pid_text.c_str(), &end, 10);
  if (end == pid_text.c_str() || *end != '\0' || pid <= 0) return true;
  return kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

// What the queue keeps of a finished run: the winner and its ratio, or why there is none.
std::string outcome(const TuneReport& r) {
  if (!r.best)
    return r.interrupted ? "budget spent before any candidate passed"
                         : "no candidate passed verification";
  const std::string ratio =
      r.baseline_ms > 0 ? fmt::format(", {:.3f}x cuBLAS", r.baseline_ms / r.best->median_ms) : "";
  if (r.from_db) return fmt::format("{} (already in the database){}", r.best->kernel_name, ratio);
  return fmt::format("{} {:.4f} ms, {} measured in {:.0f} s{}", r.best->kernel_name,
                     r.best->median_ms, r.measured.size(), r.seconds, ratio);
}

// One GPU's loop: claim, tune, finish, until stopped (or, with once, until nothing waits).
class GpuServer {
 public:
  GpuServer(const ServeOptions& options, int ordinal, ServeSummary& summary,
            std::mutex& summary_mutex)
      : o_(options),
        ordinal_(ordinal),
        device_(query_device(ordinal)),
        db_(options.tune.db_path.empty() ? results_db_path() : options.tune.db_path),
        summary_(summary),
        summary_mutex_(summary_mutex) {}

  void run() {
    say(fmt::format("GPU {} ({}) serving the queue of {}", ordinal_, device_.name,
                    db_.path().string()));
    while (!stop_requested()) {
      release_dead_claims();
      const auto entry = db_.claim_next(device_.key, claimer_id(), o_.only_id);
      if (entry) {
        tune_entry(*entry);
      } else if (o_.once) {
        return;
      } else {
        std::this_thread::sleep_for(std::chrono::duration<double>(o_.poll_s));
      }
    }
  }

 private:
  void say(const std::string& line) {
    if (o_.log) o_.log(line);
  }

  void release_dead_claims() {
    const double stale_s = o_.stale_s;
    const int released = db_.release_claims([&](const std::string& claimer, double heartbeat) {
      return claim_is_gone(claimer, heartbeat, stale_s);
    });
    if (released == 0) return;
    say(fmt::format("put back {} problem{} whose daemon is gone", released,
                    released == 1 ? "" : "s"));
    std::lock_guard lock(summary_mutex_);
    summary_.released += released;
  }

  // The user's progress, and a heartbeat now and then (the claim's sign of life).
  TuneOptions options_for(int64_t id) {
    TuneOptions options = o_.tune;
    auto last = std::make_shared<Clock::time_point>(Clock::now());
    auto mutex = std::make_shared<std::mutex>();
    options.progress = [this, id, last, mutex, user = o_.tune.progress](const Progress& p) {
      if (user) user(p);
      std::lock_guard lock(*mutex);
      if (std::chrono::duration<double>(Clock::now() - *last).count() < o_.heartbeat_s) return;
      *last = Clock::now();
      db_.heartbeat(id, claimer_id());
    };
    return options;
  }

  void tune_entry(const QueueEntry& entry) {
    say(fmt::format("tuning {} (id {}, {} calls, attempt {})", entry.problem.describe(), entry.id,
                    entry.calls, entry.attempts));
    try {
      const TuneReport report = tune(entry.problem, options_for(entry.id), ordinal_);
      if (stop_requested()) return put_back(entry);
      const bool ok = report.best.has_value();
      db_.finish(entry.id, claimer_id(), ok ? QueueState::done : QueueState::failed,
                 outcome(report));
      count(ok);
      say(fmt::format("{} {}: {}", ok ? "tuned" : "failed", entry.problem.describe(),
                      outcome(report)));
    } catch (const std::exception& e) {
      if (stop_requested()) return put_back(entry);
      db_.finish(entry.id, claimer_id(), QueueState::failed, e.what());
      count(false);
      say(fmt::format("failed {}: {}", entry.problem.describe(), e.what()));
    }
  }

  // Stopped mid-tune: the entry waits for the next daemon, which resumes the search.
  void put_back(const QueueEntry& entry) {
    const std::string me = claimer_id();
    db_.release_claims([&](const std::string& claimer, double) { return claimer == me; });
    say(fmt::format("stopped: {} is back in the queue", entry.problem.describe()));
  }

  void count(bool tuned) {
    std::lock_guard lock(summary_mutex_);
    (tuned ? summary_.tuned : summary_.failed) += 1;
  }

  const ServeOptions& o_;
  int ordinal_;
  DeviceInfo device_;
  TuningDb db_;
  ServeSummary& summary_;
  std::mutex& summary_mutex_;
};

}  // namespace

std::string claimer_id() {
  static const std::string id = fmt::format("{}:{}", host_name(), getpid());
  return id;
}

bool claim_is_gone(const std::string& claimer, double heartbeat, double stale_s) {
  const size_t colon = claimer.rfind(':');
  if (colon == std::string::npos) return true;
  if (claimer.substr(0, colon) == host_name() && process_is_dead(claimer.substr(colon + 1)))
    return true;
  return heartbeat < 0 || unix_seconds() - heartbeat > stale_s;
}

ServeSummary serve(const ServeOptions& options) {
  GT_REQUIRE(!options.gpus.empty(), Errc::invalid_argument, "no GPU to serve the queue on");
  ThreadPool pool(options.tune.compile_threads);
  ServeOptions shared = options;
  if (!shared.tune.compile_pool) shared.tune.compile_pool = &pool;
  ServeSummary summary;
  std::mutex summary_mutex;
  std::vector<std::unique_ptr<GpuServer>> servers;
  for (int ordinal : shared.gpus)
    servers.push_back(std::make_unique<GpuServer>(shared, ordinal, summary, summary_mutex));
  std::vector<std::thread> threads;
  for (auto& server : servers) threads.emplace_back([&server] { server->run(); });
  for (auto& t : threads) t.join();
  return summary;
}

}  // namespace gemmtune
