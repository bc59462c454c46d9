#pragma once
// The tuner: enumerate -> prune -> compile in parallel -> verify -> time -> record -> pick.
#include <atomic>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/tuner/search.hpp"
#include "gemmtune/tuner/thread_pool.hpp"
#include "gemmtune/tuner/timer.hpp"

namespace gemmtune {

// How much a tuning run may spend: seconds ("300s", "5m", "1h") or candidates ("40").
struct Budget {
  std::optional<double> seconds;
  std::optional<int> candidates;
  static Budget parse(std::string_view text);  // throws Error(invalid_argument)
  std::string describe() const;
};

// One line of progress for people (the tools print it on stderr).
struct Progress {
  enum class Kind { phase, candidate } kind = Kind::phase;
  std::string text;          // phase: what is happening
  int index = 0, total = 0;  // candidate: position in this run
  const CandidateRecord* candidate = nullptr;
  double best_ms = -1;  // fastest so far
  int device = -1;      // tune_on_devices: the GPU ordinal this line is about
};

struct TuneOptions {
  std::filesystem::path db_path;  // empty: results_db_path()
  Budget budget;
  bool force = false;  // re-tune even when the database has the answer
  // The problem decides whether C is read (Problem::reads_c): one that reads C is measured with
  // this beta, or 1 when it is 0; one that does not, with beta = 0.
  float alpha = 1.0f, beta = 0.0f;
  uint64_t seed = 1;
  unsigned compile_threads = 0;  // 0: one per hardware thread
  ThreadPool* compile_pool =
      nullptr;            // shared by the runs of several GPUs; null: a pool of compile_threads
  SearchSettings search;  // ranked (cost model, early stops) or exhaustive
  double candidate_timeout_s = 60;
  double setup_timeout_s = 600;
  TimingSettings timing;
  bool baseline = true;     // time cuBLAS on the same problem in the same run
  double settle_ms = 1000;  // GPU load before the first measurement (clocks, temperature)
  // Final round: the fastest candidates and cuBLAS are timed again, interleaved, so that the
  // winner and its ratio to cuBLAS come from the same thermal conditions.
  int final_candidates = 5;  // at most; see SearchSettings::final_margin
  int final_rounds = 2;
  std::vector<std::string> families;  // empty: every family that supports the problem
  // Measured besides the search space (tests, experiments); like every record, one becomes the
  // best only when it is a valid point of a production family (why_unusable()).
  std::vector<KernelConfig> extra;
  bool only_extra = false;
  std::function<void(const Progress&)> progress;
};

struct TuneReport {
  Problem problem;
  DeviceInfo device;
  bool from_db = false;                   // answered from the database, nothing measured
  std::vector<CandidateRecord> measured;  // in this run
  std::optional<CandidateRecord> best;
  double baseline_ms = -1;
  std::string baseline_name;           // or why there is no baseline
  int64_t enumerated = 0, pruned = 0;  // points of the spaces, and of those pruned
  int already_measured = 0, compile_failed = 0, to_measure = 0;
  std::map<std::string, int64_t> pruned_by;
  bool complete =
      false;  // every valid candidate has a record, or the cost model ruled out the rest
  bool interrupted = false;  // stopped by request_stop() or the budget
  bool stopped_by_model = false;
  int ruled_out = 0;  // valid candidates the cost model said could not win (not measured)
  double seconds = 0;
  std::string error;           // tune_on_devices: why this problem could not be tuned
  std::exception_ptr failure;  // and the exception that said so (null for problems left untaken)
};

// Tunes one problem on GPU `ordinal` and stores every candidate and the best.
TuneReport tune(const Problem& problem, const TuneOptions& options, int ordinal = 0);

// Several GPUs of this host tune one list of problems, one worker and one tuning thread per GPU,
// with one compile pool and one database. GPUs with the same DeviceKey share the list: each
// problem is tuned once, by whichever of them is free (the longest first when there are
// several); GPUs of another model tune the whole list too (results are keyed to the GPU).
// Every problem gets a report per group of identical GPUs: tuned, or with `error` set (a GPU
// that fails twice in a row stops taking problems). on_report is called as each finishes, one
// call at a time; the result lists the reports by group, then in the order of `problems`.
std::vector<TuneReport> tune_on_devices(
    const std::vector<Problem>& problems, const TuneOptions& options,
    const std::vector<int>& ordinals, const std::function<void(const TuneReport&)>& on_report = {});

// Asks a running tune() to stop after the current candidate (safe in a signal handler).
void request_stop() noexcept;
bool stop_requested() noexcept;

// Dry run, no GPU needed: enumerate, prune and compile every candidate for an architecture.
struct DryRunEntry {
  std::string name, family;
  KernelConfig config;
  std::string status;       // "compiled", "compile_error", or "listed" (not compiled)
  double predicted_ms = 0;  // the cost model's; candidates are listed in this order
  bool refinement =
      false;  // not its structure's first point: a ranked search's second pass (search.hpp)
  int registers = -1, spills = -1, smem_bytes = -1;
  double compile_ms = 0;
  double compile_cpu_ms = 0;  // CPU time of the compile (wall time grows when the machine is busy)
  bool from_cache = false;
  std::string message;
};
struct DryRunReport {
  Problem problem;
  std::string arch;
  std::vector<DryRunEntry> candidates;
  int64_t enumerated = 0, pruned = 0;
  int compiled = 0, failed = 0;
  std::map<std::string, int64_t> pruned_by;
  double seconds = 0;
};
// Candidates are listed in the cost model's order; max_candidates > 0 keeps only that many (the
// most promising). compile = false lists them without compiling (status "listed").
DryRunReport dry_run(const Problem& problem, const ArchInfo& arch, unsigned compile_threads = 0,
                     const std::vector<std::string>& families = {},
                     const std::function<void(const Progress&)>& progress = {},
                     int max_candidates = 0, bool compile = true);

}  // namespace gemmtune
