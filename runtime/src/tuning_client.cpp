// Tuning while serving: queue untuned problems, tune one now, notice new results.
#include "tuning_client.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <thread>
#include <vector>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/programs.hpp"

extern char** environ;

namespace gemmtune {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::string key_of(const DeviceKey& device, const Problem& problem) {
  return json_of(device) + json_of(problem);
}

// Seconds a budget such as "30s", "2m" or "1h" allows; a count of candidates gets a generous
// ceiling (the compile of each counts too).
double budget_seconds(const std::string& budget) {
  double value = 0;
  const auto [end, ec] = std::from_chars(budget.data(), budget.data() + budget.size(), value);
  if (ec != std::errc() || value <= 0) return 1800;
  const std::string_view unit(end, size_t(budget.data() + budget.size() - end));
  if (unit == "s") return value;
  if (unit == "m") return value * 60;
  if (unit == "h") return value * 3600;
  return 1800;
}

// Runs gemm-tune --serve --once on one entry; its stdout is dropped (the caller's program owns
// it), its stderr shows the tuning's progress. Killed when past `deadline_s`. Returns the exit
// status, or -1 when it did not end in time.
int run_tuner(const std::vector<std::string>& args, double deadline_s) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  GT_REQUIRE(spawned == 0, Errc::io, "cannot start {}: {}", args[0], std::strerror(spawned));
  const auto deadline = Clock::now() + std::chrono::duration<double>(deadline_s);
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (done < 0 && errno != EINTR) return -1;
    if (Clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

TuneMode parse_tune_mode(std::string_view text) {
  if (text.empty() || text == "off" || text == "0") return TuneMode::off;
  if (text == "background") return TuneMode::background;
  if (text == "now") return TuneMode::now;
  GT_THROW(Errc::invalid_argument, "GEMMTUNE_TUNE={}: expected off, background or now", text);
}

TuneSettings TuneSettings::of(const Options& options) {
  TuneSettings s;
  s.mode =
      parse_tune_mode(!options.tune.empty() ? options.tune : env_var("GEMMTUNE_TUNE").value_or(""));
  // Where results go: the overlay over a read-only base, else the base.
  if (!options.overlay_db_path.empty())
    s.db_path = options.overlay_db_path;
  else if (auto overlay = overlay_db_path())
    s.db_path = *overlay;
  else
    s.db_path = options.db_path.empty() ? default_db_path() : fs::path(options.db_path);
  if (!options.tune_budget.empty())
    s.budget = options.tune_budget;
  else if (auto budget = env_var("GEMMTUNE_TUNE_BUDGET"))
    s.budget = *budget;
  if (options.refresh_s > 0) {
    s.refresh_s = options.refresh_s;
  } else if (auto refresh = env_var("GEMMTUNE_REFRESH_S")) {
    double value = 0;
    const auto [end, ec] =
        std::from_chars(refresh->data(), refresh->data() + refresh->size(), value);
    GT_REQUIRE(ec == std::errc() && end == refresh->data() + refresh->size() && value > 0,
               Errc::invalid_argument, "GEMMTUNE_REFRESH_S={}: expected seconds above 0", *refresh);
    s.refresh_s = value;
  }
  return s;
}

TuningDb* TuningClient::database() {
  if (db_ || db_failed_) return db_.get();
  try {
    db_ = std::make_unique<TuningDb>(s_.db_path);
  } catch (const Error& e) {
    db_failed_ = true;
    log().warn(
        "GEMMTUNE_TUNE: cannot open the tuning database {} to queue problems ({}); "
        "serving untuned kernels",
        s_.db_path.string(), e.what());
  }
  return db_.get();
}

int64_t TuningClient::entry_of(const DeviceKey& device, const Problem& problem,
                               double predicted_us) {
  TuningDb* db = database();
  if (!db) return 0;
  try {
    return db->enqueue(device, problem, predicted_us);
  } catch (const Error& e) {
    log().warn("GEMMTUNE_TUNE: cannot queue {} ({})", problem.describe(), e.what());
    return 0;
  }
}

CallCounter TuningClient::queue(const DeviceKey& device, const Problem& problem,
                                double predicted_us) {
  std::lock_guard lock(mutex_);
  Queued& q = queued_[key_of(device, problem)];
  if (!q.calls) {
    q.id = entry_of(device, problem, predicted_us);
    q.calls = std::make_shared<std::atomic<int64_t>>(0);
    if (q.id > 0)
      log().info("GEMMTUNE_TUNE=background: queued {} for the tuning daemon (entry {})",
                 problem.describe(), q.id);
  }
  return q.id > 0 ? q.calls : nullptr;
}

void TuningClient::tune_now(const DeviceInfo& device, const Problem& problem, double predicted_us) {
  int64_t id = 0;
  {
    std::lock_guard lock(mutex_);
    id = entry_of(device.key, problem, predicted_us);
  }
  if (id == 0) return;
  const auto start = Clock::now();
  const double deadline_s = budget_seconds(s_.budget) + 300;  // compiles, cuBLAS, final rounds
  try {
    log().info("GEMMTUNE_TUNE=now: tuning {} (budget {})", problem.describe(), s_.budget);
    const int status =
        run_tuner({find_program("gemm-tune", "GEMMTUNE_TUNER").string(), "--serve", "--once",
                   "--queue-id", std::to_string(id), "--device", std::to_string(device.ordinal),
                   "--db", s_.db_path.string(), "--budget", s_.budget},
                  deadline_s);
    // Another process's daemon may hold the entry: wait for its tuning to end.
    TuningDb reader(s_.db_path, TuningDb::Mode::read_only);
    auto entry = reader.queue_entry(id);
    while (entry && entry->state == QueueState::tuning &&
           std::chrono::duration<double>(Clock::now() - start).count() < deadline_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      entry = reader.queue_entry(id);
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (entry && entry->state == QueueState::done)
      log().info("GEMMTUNE_TUNE=now: tuned {} in {:.1f} s: {}", problem.describe(), seconds,
                 entry->message);
    else
      log().warn(
          "GEMMTUNE_TUNE=now: {} was not tuned ({}, gemm-tune exit status {}); serving "
          "its untuned kernel",
          problem.describe(), entry ? entry->message : "no queue entry", status);
  } catch (const Error& e) {
    log().warn("GEMMTUNE_TUNE=now: cannot tune {} ({}); serving its untuned kernel",
               problem.describe(), e.what());
  }
}

void TuningClient::report_calls() {
  for (auto& [key, q] : queued_) {
    const int64_t calls = q.calls ? q.calls->exchange(0) : 0;
    if (calls > 0 && q.id > 0) db_->add_calls(q.id, calls);
  }
}

void TuningClient::refresh() {
  if (!database()) return;
  try {
    report_calls();
    const int64_t version = db_->data_version();
    if (version == data_version_) return;
    data_version_ = version;
    std::string signature = db_->results_signature();
    if (signature == signature_) return;
    signature_ = std::move(signature);
    epoch_.fetch_add(1);
  } catch (const Error& e) {
    log().warn("GEMMTUNE_TUNE: cannot read the tuning database ({})", e.what());
  }
}

uint64_t TuningClient::epoch() {
  if (s_.mode != TuneMode::background) return 0;  // off: the database is never opened to write
  const int64_t now = now_ns();
  int64_t due = next_look_ns_.load(std::memory_order_relaxed);
  if (now < due) return epoch_.load(std::memory_order_relaxed);
  // One caller looks; the others go on with what is known.
  const int64_t next = now + int64_t(s_.refresh_s * 1e9);
  if (next_look_ns_.compare_exchange_strong(due, next)) {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (lock.owns_lock()) refresh();
  }
  return epoch_.load(std::memory_order_relaxed);
}

}  // namespace gemmtune
