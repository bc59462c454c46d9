#pragma once
// The SQLite tuning database: devices, problems, every measured candidate, and the best
// configuration per device, problem and template version. Schema: cache/schema.sql.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gemmtune/generator/config.hpp"
#include "gemmtune/types.hpp"

struct sqlite3;

namespace gemmtune {

// Everything that identifies the GPU a result was measured on.
struct DeviceKey {
  std::string name;   // "NVIDIA H100 80GB HBM3"
  int cc = 0;         // 90
  int sms = 0;        // 132
  int driver = 0;     // cuDriverGetVersion, e.g. 13000
  std::string nvrtc;  // "13.0"
  bool operator==(const DeviceKey&) const = default;
};

enum class CandidateStatus {
  ok,                // verified and timed
  compile_error,     // NVRTC or ptxas rejected it
  out_of_resources,  // compiled, but the launch needs more than the GPU has
  wrong_result,      // ran, but failed verification against the reference
  fault,             // the kernel faulted (illegal address, ...) or killed its worker
  timeout,           // the kernel did not finish before the watchdog fired
};
std::string_view to_string(CandidateStatus status) noexcept;
CandidateStatus parse_status(std::string_view text);  // throws Error(invalid_argument)

struct CandidateRecord {
  int64_t id = 0;  // assigned by the database
  std::string kernel_name;
  std::string template_version;  // template_version(family) when it was measured
  KernelConfig config;           // config.family is the family
  CandidateStatus status = CandidateStatus::ok;
  int registers = -1;  // -1: unknown
  int spills = -1;     // spill stores + loads, bytes
  int smem_bytes = -1;
  double compile_ms = -1;
  double median_ms = -1, min_ms = -1, max_ms = -1;  // -1 unless status == ok
  int runs = 0;
  double tflops = -1;
  double max_error = -1;    // normalized error against the reference
  std::string message;      // why it failed, for failures
  std::string measured_at;  // UTC, ISO 8601; set by record()
};

// How the candidates of one problem rank, so that every process that reads or merges the same
// results picks the same winner: ok before failed, then by median time, minimum time, kernel name
// and template version (failures by name and version).
bool ranks_before(const CandidateRecord& a, const CandidateRecord& b);

// A preferred kernel keeps the win unless another ran more than this much faster: a default
// within 0.2-1.5% of the winner, where one kernel's median moves 2-5% between benches, is noise
// (docs/PERF.md, 'A lead under 1% in the final round is noise').
inline constexpr double kWinnerMargin = 0.01;

// The winner among records: the first ok one by ranks_before(), unless one of `preferred`
// (kernel names) is within `margin` of it; of those, the first. gemm-tune prefers the families'
// defaults (a tuned kernel should not be the untuned call's slower twin); a merge prefers the
// winners the merged tunings named, so that it keeps their choice, in any order.
std::optional<CandidateRecord> choose_winner(const std::vector<CandidateRecord>& records,
                                             const std::set<std::string>& preferred, double margin);

struct BestRecord {
  DeviceKey device;
  Problem problem;
  CandidateRecord winner;
  double baseline_ms = -1;  // cuBLAS on the same problem in the same run; -1 if unknown
  bool complete = false;    // the whole search space was measured
  bool current = true;      // winner.template_version is this build's version of its family
  std::string tuned_at;
};

// Where a row that serves a GPU comes from: the tiers of the library's database lookup, in its
// order of preference (the nearest tuned shape and the built-in defaults come after them).
enum class BestTier {
  tuned,          // the GPU's own row, under its driver and NVRTC
  other_version,  // the GPU's own row (same name, compute capability, SMs), other driver or NVRTC
  sibling,        // a row of another GPU (name or SMs) of the same compute capability
};
std::string_view to_string(BestTier tier) noexcept;  // "tuned", "other_version", "sibling"

struct TieredBest {
  BestTier tier = BestTier::tuned;
  BestRecord best;
};

// The rule of those tiers, over rows already read (TuningDb::bests_for reads them): of `rows`
// (any GPUs, problems and template versions), the current bests of `problem` that `device` may
// use, best first: its own row; its own rows under other versions, most recently tuned first;
// then rows of other GPUs of its compute capability, most recently tuned first. Every row of the
// GPU's own comes before every sibling's, so a sibling's row serves only a GPU that has no row
// of its own it can use. One row per device key, its fastest current one (as best() picks);
// stale rows and rows of another compute capability are never returned. A caller that must skip
// rows (a family it may not run) takes the first one left.
std::vector<TieredBest> rank_bests_for(const DeviceKey& device, const Problem& problem,
                                       const std::vector<BestRecord>& rows);

// Filters of list/export/delete; unset fields match everything.
struct DbFilter {
  std::optional<std::string> device;  // substring of the device name
  std::optional<DataTypes> types;
  std::optional<std::string> layout;  // "nn", ...
  std::optional<int64_t> m, n, k;
  std::optional<int64_t> lda, ldb, ldc;     // to tell apart problems of one shape
  std::optional<bool> reads_c;              // beta != 0, or beta = 0
  std::optional<int64_t> groups;            // 0: one GEMM, else the G of grouped problems
  std::optional<GroupLayout> group_layout;  // grouped problems of this layout (never one GEMM)
  // Tensor or row scaled float8 problems summed so (never the others, which are all precise).
  std::optional<Accumulation> accumulation;
  // Problems of this epilogue (none: those the store applies nothing to beyond alpha and beta).
  std::optional<Epilogue> epilogue;
  // Problems computed so (exact: every problem but f32 ones on tensor cores).
  std::optional<Precision> precision;
};

struct DbStats {
  int64_t devices = 0, problems = 0, candidates = 0, best = 0;
  std::vector<std::pair<std::string, int64_t>> by_status;  // status name -> count
  std::vector<std::pair<std::string, int64_t>> by_family;  // family -> candidates
  int64_t best_stale = 0;  // best rows of a template version this build does not have
  int64_t file_bytes = 0;
  int schema_version = 0;
};

struct ImportSummary {
  int64_t devices = 0, problems = 0, candidates = 0, best = 0;  // rows added or updated
};

// The tuning daemon's queue (gemm-tune --serve): a problem a process served without a tuned
// kernel, waiting, being tuned, or done.
enum class QueueState { queued, tuning, done, failed };
std::string_view to_string(QueueState state) noexcept;

struct QueueEntry {
  int64_t id = 0;
  DeviceKey device;  // of the process that asked
  Problem problem;
  QueueState state = QueueState::queued;
  int64_t calls = 0;        // calls served untuned, as the processes reported them
  double predicted_us = 0;  // the cost model's time of a call of the kernel served meanwhile
  int attempts = 0;         // claims so far (a daemon killed mid-tune leaves one behind)
  std::string claimed_by;   // "host:pid" of the daemon tuning it
  double heartbeat = -1;    // unix seconds of that daemon's last sign of life
  std::string message;      // the winner, or why tuning failed
  std::string requested_at, updated_at;
  // What tuning it is worth: the time its calls cost (a problem never called counts as one call).
  double priority() const { return double(calls > 0 ? calls : 1) * predicted_us; }
};

// GEMMTUNE_DB_OVERLAY: a writable database read before GEMMTUNE_DB (which may then be a
// read-only file shipped with a model), and where new results go. None when unset.
std::optional<std::filesystem::path> overlay_db_path();
// Where new results and the tuning queue go: the overlay, else default_db_path().
std::filesystem::path results_db_path();

// Records as JSON objects of the export format (docs/DATABASE.md), for tools that print JSON.
std::string json_of(const DeviceKey& device);
std::string json_of(const Problem& problem);
std::string json_of(const CandidateRecord& candidate);
// {"device", "problem", "winner": candidate, "baseline_ms", "complete", "current", "tuned_at"}
std::string json_of(const BestRecord& best);
// The reverse of json_of for a device and a problem; throws Error(invalid_argument) saying why.
DeviceKey device_from_json(std::string_view json);
Problem problem_from_json(std::string_view json);

// An object is used from one thread at a time; any number of processes may share the file
// (WAL journal, a busy timeout, and every write in its own BEGIN IMMEDIATE transaction).
class TuningDb {
 public:
  static constexpr int kSchemaVersion = 10;  // migrations are numbered 1..kSchemaVersion
  enum class Mode { read_write, read_only };

  // Opens (creating the file and its folder in read_write mode) and migrates to
  // kSchemaVersion. Throws Error(database) with the path when it cannot, or when the file
  // is newer than this build or not a gemmtune database.
  explicit TuningDb(const std::filesystem::path& path, Mode mode = Mode::read_write);
  ~TuningDb();
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  const std::filesystem::path& path() const { return path_; }
  int schema_version() const;

  // Inserts or replaces the candidate with the same device, problem, template version and
  // kernel name. Each call is its own transaction: an interrupted run loses nothing recorded.
  void record(const DeviceKey& device, const Problem& problem, const CandidateRecord& candidate);
  // Candidates of one problem measured with the current template version of their family,
  // or every version when all_versions; ok ones by median time, then failures by name.
  std::vector<CandidateRecord> candidates(const DeviceKey& device, const Problem& problem,
                                          bool all_versions = false) const;

  // Marks the named, already recorded candidate as the best for the device and problem.
  void set_best(const DeviceKey& device, const Problem& problem, const std::string& kernel_name,
                const std::string& template_version, double baseline_ms, bool complete);
  // The fastest current best of the problem (stale template versions are never returned).
  std::optional<BestRecord> best(const DeviceKey& device, const Problem& problem) const;
  // The current bests of the problem that the device may use, with the tier of each, in the
  // order the library tries them: its own row (best()); its own rows under another driver or
  // NVRTC, the most recently tuned first; rows of other GPUs of its compute capability
  // (siblings), the most recently tuned first. rank_bests_for() over the problem's rows there.
  std::vector<TieredBest> bests_for(const DeviceKey& device, const Problem& problem) const;
  // Current bests of the device for every shape with the types, scaling, accumulation, epilogue,
  // precision, layout, groups and group layout of `like`, of problems that read C and of those that
  // do not (for the nearest-shape fallback).
  std::vector<BestRecord> bests_like(const DeviceKey& device, const Problem& like) const;

  // Best rows (current and stale, flagged) matching the filter, by device then shape.
  std::vector<BestRecord> list(const DbFilter& filter) const;
  // Problems matching the filter that have candidates but maybe no best yet.
  std::vector<std::pair<DeviceKey, Problem>> problems(const DbFilter& filter) const;
  DbStats stats() const;
  // Deletes the matching problems with their candidates and best rows; returns problems deleted.
  int64_t remove(const DbFilter& filter);

  // JSON: {"format":"gemmtune-db","version":6,"entries":[{device, problem, candidates, best}]}
  // (docs/DATABASE.md describes every field; "best" is an array, one row per template version).
  std::string export_json(const DbFilter& filter) const;
  // The same, of these problems only (a recorded workload's: what a model needs shipped).
  std::string export_json(const DbFilter& filter, const std::vector<Problem>& only) const;
  // Validates the whole document first, then writes it in one transaction: a malformed file
  // throws Error(invalid_argument) saying where, and leaves the database unchanged.
  ImportSummary import_json(std::string_view json);
  // Merges another database into this one, in one transaction: every candidate is added (the
  // same kernel measured in both keeps the later measurement), and the best of every problem
  // either had a best for is chosen again among all the candidates now here, by ranks_before()
  // -- so merging shard databases gives the choices of one run, in any order. The search counts
  // as complete when either was. Returns the rows added or updated.
  ImportSummary merge(const TuningDb& other);

  // The tuning queue (tune_queue.cpp). Each call is its own transaction.
  // Asks for the problem to be tuned for the device; returns its entry's id. A problem already
  // waiting or being tuned keeps its entry (its predicted time updated), so several processes
  // asking meet on one; a done one is queued again (asked again: its tuning is gone or stale); a
  // failed one stays failed until retry_failed().
  int64_t enqueue(const DeviceKey& device, const Problem& problem, double predicted_us);
  // Adds calls served untuned to an entry (the daemon ranks by them).
  void add_calls(int64_t id, int64_t calls);
  // Claims the waiting entry of the highest priority() for a GPU of the device's name, compute
  // capability and SMs (only `only_id`, when given) for `claimer`; none when nothing waits.
  std::optional<QueueEntry> claim_next(const DeviceKey& device, const std::string& claimer,
                                       std::optional<int64_t> only_id = std::nullopt);
  // A claimer's sign of life; false when the entry is no longer its own (released as stale).
  bool heartbeat(int64_t id, const std::string& claimer);
  // Ends a claim: done (message: the winner) or failed (message: why).
  void finish(int64_t id, const std::string& claimer, QueueState state, const std::string& message);
  // Puts back into the queue entries claimed by daemons that are gone: `gone(claimer,
  // heartbeat)` decides. Returns how many.
  int release_claims(const std::function<bool(const std::string&, double)>& gone);
  // Queues failed entries again; returns how many.
  int retry_failed();
  std::vector<QueueEntry> queue() const;  // by state (tuning, queued, failed, done), priority
  std::optional<QueueEntry> queue_entry(int64_t id) const;
  // SQLite's data_version: changes when another connection commits to the file. Cheap (no I/O
  // in WAL mode), so a process can poll it to learn that results arrived.
  int64_t data_version() const;
  // Changes when a best row is added or replaced: the count of best rows and the latest tuned_at.
  std::string results_signature() const;

 private:
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

}  // namespace gemmtune
