#pragma once
// Tuning while serving (GEMMTUNE_TUNE): the library's side of the tuning daemon. It queues the
// problems it serves untuned in the database (gemm-tune --serve tunes them) or, in "now" mode,
// has gemm-tune tune one before its first call returns; and it tells the library when results
// may have arrived, from SQLite's change counter, looked at no more often than refresh_s.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/gemmtune.hpp"
#include "gemmtune/runtime/device.hpp"

namespace gemmtune {

enum class TuneMode { off, background, now };
TuneMode parse_tune_mode(std::string_view text);  // throws Error(invalid_argument)

struct TuneSettings {
  TuneMode mode = TuneMode::off;
  std::filesystem::path db_path;
  std::string budget = "30s";  // now: a problem's budget, as gemm-tune --budget takes it
  double refresh_s = 1.0;      // background: how often to look for new results
  // Options first, then GEMMTUNE_TUNE, GEMMTUNE_TUNE_BUDGET, GEMMTUNE_REFRESH_S.
  static TuneSettings of(const Options& options);
};

// Calls of a problem served untuned, counted by the library, reported to the queue.
using CallCounter = std::shared_ptr<std::atomic<int64_t>>;

class TuningClient {
 public:
  explicit TuningClient(TuneSettings settings) : s_(std::move(settings)) {}
  TuneMode mode() const { return s_.mode; }

  // background: queues the problem once per process; returns the counter of its calls (null
  // when it could not be queued: said once, and the call goes on untuned).
  CallCounter queue(const DeviceKey& device, const Problem& problem, double predicted_us);
  // now: queues the problem and waits while gemm-tune tunes it (or while another process's
  // tuning of it ends). Never throws: a failure is logged and the caller serves its default.
  void tune_now(const DeviceInfo& device, const Problem& problem, double predicted_us);
  // background: a number that changes when new tuning results may be in the database. Looks (a
  // query of SQLite's data_version, then of the results' signature) at most once per refresh_s.
  // Other modes: 0.
  uint64_t epoch();

 private:
  TuningDb* database();  // read-write, opened on first use; null when it cannot be
  void refresh();        // with mutex_ held
  void report_calls();   // with mutex_ held
  int64_t entry_of(const DeviceKey& device, const Problem& problem, double predicted_us);

  struct Queued {
    int64_t id = 0;
    CallCounter calls;
  };

  TuneSettings s_;
  std::mutex mutex_;  // the database and the map; never held across a tuning
  std::unique_ptr<TuningDb> db_;
  bool db_failed_ = false;
  std::map<std::string, Queued> queued_;  // by device and problem JSON
  std::atomic<int64_t> next_look_ns_{0};
  std::atomic<uint64_t> epoch_{0};
  int64_t data_version_ = -1;
  std::string signature_;
};

}  // namespace gemmtune
