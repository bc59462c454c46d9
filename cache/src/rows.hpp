#pragma once
// The rows of the tuning database and the records they hold: the SQL that reads and writes
// them, shared by TuningDb's queries and by the JSON import and export.
#include <map>
#include <string>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"
#include "sql.hpp"

namespace gemmtune::rows {

std::string now_utc();  // "2025-11-21T05:19:00.123Z"

// Checks shared by record() and import; throw Error(invalid_argument) naming the field.
void check_device(const DeviceKey& device);
void check_candidate(const Problem& problem, const CandidateRecord& candidate);

// Conditions on the aliases every query below uses: d (devices), p (problems), c (candidates).
sql::Conditions device_is(const DeviceKey& device);
sql::Conditions problem_is(const Problem& problem);
sql::Conditions pair_is(int64_t device_id, int64_t problem_id);
sql::Conditions matching(const DbFilter& filter);

// A (device, problem) pair that has candidates.
struct ProblemRow {
  int64_t device_id = 0, problem_id = 0;
  DeviceKey device;
  Problem problem;
};

// By device, then dtype, layout and shape.
std::vector<ProblemRow> select_problems(sqlite3* db, const sql::Conditions& where);
// Every template version; ok ones by median time, then failures by name.
std::vector<CandidateRecord> select_candidates(sqlite3* db, const sql::Conditions& where);
// By device, problem, then the winner's median time; `current` is set.
std::vector<BestRecord> select_bests(sqlite3* db, const sql::Conditions& where);
// Of rows ordered as select_bests returns them, the fastest current one per problem.
std::vector<BestRecord> fastest_current(std::vector<BestRecord> bests);

// Whether a result was measured with this build's templates of its family.
class CurrentVersions {
 public:
  bool is_current(const std::string& family, const std::string& version);

 private:
  std::map<std::string, std::string> by_family_;  // "" for families this build lacks
};

// replace: the new row wins (record, set_best). keep_newer: an imported row replaces an
// existing one only when it was measured later, so merging A into B equals B into A.
enum class Merge { replace, keep_newer };

struct Written {
  int64_t id = 0;
  bool changed = false;  // inserted or updated
};

struct BestChoice {
  std::string kernel_name;
  std::string template_version;
  double baseline_ms = -1;
  bool complete = false;
  std::string tuned_at;
};

Written ensure_device(sqlite3* db, const DeviceKey& device);
Written ensure_problem(sqlite3* db, const Problem& problem);
Written upsert_candidate(sqlite3* db, const ProblemRow& at, const CandidateRecord& candidate,
                         Merge merge);
// Throws Error(invalid_argument) unless the winner was recorded for the pair; with status ok
// (Merge::replace), or skips it (keep_newer: a newer failed measurement of the winner stands).
// Returns whether the row was inserted or updated.
bool upsert_best(sqlite3* db, const ProblemRow& at, const BestChoice& best, Merge merge);

// Chooses the best of the pair and template version again over its ok candidates, when the
// database or `incoming` (may be null) has a best row for it: the fastest by ranks_before(),
// unless a winner those rows named is within kWinnerMargin of it (choose_winner). Keeps what the
// rows say about the search: complete when either search was, the cuBLAS time of the row that
// named this winner (else of the later row), the later tuned_at. Returns whether the row was
// inserted or changed.
bool rechoose_best(sqlite3* db, const ProblemRow& at, const std::string& template_version,
                   const BestChoice* incoming);

}  // namespace gemmtune::rows
