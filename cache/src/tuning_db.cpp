// TuningDb: recording candidates and bests, and the queries of the tuner, runtime and gemm-db.
// The SQL of each row lives in rows.cpp; opening and migrating in schema.cpp; JSON in json_io.cpp.
#include "gemmtune/cache/tuning_db.hpp"

#include <algorithm>
#include <array>
#include <tuple>

#include "gemmtune/generator/util.hpp"
#include "rows.hpp"
#include "schema.hpp"
#include "sql.hpp"

namespace gemmtune {
namespace {

constexpr std::array<std::pair<CandidateStatus, std::string_view>, 6> kStatusNames = {{
    {CandidateStatus::ok, "ok"},
    {CandidateStatus::compile_error, "compile_error"},
    {CandidateStatus::out_of_resources, "out_of_resources"},
    {CandidateStatus::wrong_result, "wrong_result"},
    {CandidateStatus::fault, "fault"},
    {CandidateStatus::timeout, "timeout"},
}};

// The (device, problem) pair of the key, if anything was recorded for it.
std::optional<rows::ProblemRow> find_pair(sqlite3* db, const DeviceKey& device,
                                          const Problem& problem) {
  auto found = rows::select_problems(
      db, sql::Conditions().add(rows::device_is(device)).add(rows::problem_is(problem)));
  if (found.empty()) return std::nullopt;
  return found.front();
}

std::vector<std::pair<std::string, int64_t>> counts(sqlite3* db, const char* query) {
  sql::Statement s(db, query);
  std::vector<std::pair<std::string, int64_t>> out;
  while (s.step()) out.emplace_back(s.text(0), s.integer(1));
  return out;
}

int64_t single_integer(sqlite3* db, const char* query) {
  sql::Statement s(db, query);
  s.step();
  return s.integer(0);
}

}  // namespace

std::optional<std::filesystem::path> overlay_db_path() {
  auto overlay = env_var("GEMMTUNE_DB_OVERLAY");
  if (!overlay || overlay->empty()) return std::nullopt;
  return std::filesystem::path(*overlay);
}

std::filesystem::path results_db_path() {
  return overlay_db_path().value_or(default_db_path());
}

std::string_view to_string(CandidateStatus status) noexcept {
  for (const auto& [value, name] : kStatusNames)
    if (value == status) return name;
  return "?";
}

CandidateStatus parse_status(std::string_view text) {
  for (const auto& [value, name] : kStatusNames)
    if (name == text) return value;
  GT_THROW(Errc::invalid_argument,
           "unknown status '{}' (expected ok, compile_error, out_of_resources, wrong_result, "
           "fault or timeout)",
           text);
}

std::string_view to_string(BestTier tier) noexcept {
  switch (tier) {
    case BestTier::tuned:
      return "tuned";
    case BestTier::other_version:
      return "other_version";
    case BestTier::sibling:
      return "sibling";
  }
  return "?";
}

std::vector<TieredBest> rank_bests_for(const DeviceKey& device, const Problem& problem,
                                       const std::vector<BestRecord>& rows) {
  std::vector<TieredBest> out;
  for (const BestRecord& row : rows) {
    if (!row.current || row.device.cc != device.cc || row.problem != problem) continue;
    const bool same_gpu = row.device.name == device.name && row.device.sms == device.sms;
    const BestTier tier = row.device == device ? BestTier::tuned
                          : same_gpu           ? BestTier::other_version
                                               : BestTier::sibling;
    // One row per device key: the fastest current one (several families may have a best).
    auto same_key = std::find_if(out.begin(), out.end(),
                                 [&](const TieredBest& t) { return t.best.device == row.device; });
    if (same_key == out.end())
      out.push_back({tier, row});
    else if (ranks_before(row.winner, same_key->best.winner))
      same_key->best = row;
  }
  // By tier, then the most recently tuned first; the device key breaks ties, so that the order
  // does not depend on the order of the rows.
  std::sort(out.begin(), out.end(), [](const TieredBest& a, const TieredBest& b) {
    const DeviceKey &x = a.best.device, &y = b.best.device;
    return std::tie(a.tier, b.best.tuned_at, x.name, x.sms, x.driver, x.nvrtc) <
           std::tie(b.tier, a.best.tuned_at, y.name, y.sms, y.driver, y.nvrtc);
  });
  return out;
}

bool ranks_before(const CandidateRecord& a, const CandidateRecord& b) {
  const bool a_ok = a.status == CandidateStatus::ok, b_ok = b.status == CandidateStatus::ok;
  if (a_ok != b_ok) return a_ok;
  if (a_ok && a.median_ms != b.median_ms) return a.median_ms < b.median_ms;
  if (a_ok && a.min_ms != b.min_ms) return a.min_ms < b.min_ms;
  if (a.kernel_name != b.kernel_name) return a.kernel_name < b.kernel_name;
  return a.template_version < b.template_version;
}

std::optional<CandidateRecord> choose_winner(const std::vector<CandidateRecord>& records,
                                             const std::set<std::string>& preferred,
                                             double margin) {
  std::optional<CandidateRecord> best, best_preferred;
  for (const CandidateRecord& r : records) {
    if (r.status != CandidateStatus::ok) continue;
    if (!best || ranks_before(r, *best)) best = r;
    if (preferred.count(r.kernel_name) && (!best_preferred || ranks_before(r, *best_preferred)))
      best_preferred = r;
  }
  if (best_preferred && best_preferred->median_ms <= best->median_ms * (1 + margin))
    return best_preferred;
  return best;
}

TuningDb::TuningDb(const std::filesystem::path& path, Mode mode)
    : path_(path), db_(open_database(path, mode == Mode::read_only)) {}

TuningDb::~TuningDb() {
  sqlite3_close_v2(db_);
}

int TuningDb::schema_version() const {
  return user_version(db_);
}

void TuningDb::record(const DeviceKey& device, const Problem& problem,
                      const CandidateRecord& candidate) {
  rows::check_device(device);
  validate(problem);
  rows::check_candidate(problem, candidate);
  CandidateRecord stamped = candidate;
  stamped.measured_at = rows::now_utc();
  sql::Transaction transaction(db_);
  rows::ProblemRow at{rows::ensure_device(db_, device).id, rows::ensure_problem(db_, problem).id,
                      device, problem};
  rows::upsert_candidate(db_, at, stamped, rows::Merge::replace);
  transaction.commit();
}

std::vector<CandidateRecord> TuningDb::candidates(const DeviceKey& device, const Problem& problem,
                                                  bool all_versions) const {
  auto found = rows::select_candidates(
      db_, sql::Conditions().add(rows::device_is(device)).add(rows::problem_is(problem)));
  if (!all_versions) {
    rows::CurrentVersions versions;
    std::erase_if(found, [&](const CandidateRecord& c) {
      return !versions.is_current(c.config.family, c.template_version);
    });
  }
  return found;
}

void TuningDb::set_best(const DeviceKey& device, const Problem& problem,
                        const std::string& kernel_name, const std::string& template_version,
                        double baseline_ms, bool complete) {
  sql::Transaction transaction(db_);
  const auto at = find_pair(db_, device, problem);
  GT_REQUIRE(at, Errc::invalid_argument,
             "cannot mark {} as the best for {} on {}: nothing was recorded for that problem",
             kernel_name, problem.describe(), device.name);
  rows::upsert_best(db_, *at,
                    {kernel_name, template_version, baseline_ms, complete, rows::now_utc()},
                    rows::Merge::replace);
  transaction.commit();
}

std::optional<BestRecord> TuningDb::best(const DeviceKey& device, const Problem& problem) const {
  auto fastest = rows::fastest_current(rows::select_bests(
      db_, sql::Conditions().add(rows::device_is(device)).add(rows::problem_is(problem))));
  if (fastest.empty()) return std::nullopt;
  return std::move(fastest.front());
}

std::vector<TieredBest> TuningDb::bests_for(const DeviceKey& device, const Problem& problem) const {
  return rank_bests_for(
      device, problem,
      rows::select_bests(
          db_,
          sql::Conditions().add("d.cc = ?", {int64_t(device.cc)}).add(rows::problem_is(problem))));
}

std::vector<BestRecord> TuningDb::bests_like(const DeviceKey& device, const Problem& like) const {
  DbFilter same_kind;
  same_kind.types = like.types;
  same_kind.layout = like.layout();
  same_kind.groups = like.groups;  // a grouped problem never borrows a dense one's tuning
  // Nor a masked one a contiguous one's: masked kernels skip the columns past each count.
  if (like.grouped()) same_kind.group_layout = like.group_layout;
  // Nor a fast float8 problem a precise one's, nor the reverse: other kernels, another error.
  if (like.scaling == Scaling::tensor || like.scaling == Scaling::row)
    same_kind.accumulation = like.accumulation;
  // Nor a fused problem a plain one's, nor the reverse: the store is another kernel.
  same_kind.epilogue = like.epilogue;
  // Nor a tf32 problem an exact one's: another kernel, another error.
  same_kind.precision = like.precision;
  return rows::fastest_current(
      rows::select_bests(db_, sql::Conditions()
                                  .add(rows::device_is(device))
                                  .add(rows::matching(same_kind))
                                  .add("p.scaling = ?", {std::string(to_string(like.scaling))})));
}

std::vector<BestRecord> TuningDb::list(const DbFilter& filter) const {
  return rows::select_bests(db_, rows::matching(filter));
}

std::vector<std::pair<DeviceKey, Problem>> TuningDb::problems(const DbFilter& filter) const {
  std::vector<std::pair<DeviceKey, Problem>> out;
  for (auto& row : rows::select_problems(db_, rows::matching(filter)))
    out.emplace_back(std::move(row.device), row.problem);
  return out;
}

DbStats TuningDb::stats() const {
  DbStats s;
  s.devices = single_integer(db_, "SELECT count(*) FROM devices");
  s.problems = single_integer(db_, "SELECT count(*) FROM problems");
  s.candidates = single_integer(db_, "SELECT count(*) FROM candidates");
  s.best = single_integer(db_, "SELECT count(*) FROM best");
  s.by_status = counts(db_,
                       "SELECT status, count(*) FROM candidates GROUP BY status "
                       "ORDER BY count(*) DESC, status");
  s.by_family =
      counts(db_, "SELECT family, count(*) FROM candidates GROUP BY family ORDER BY family");
  for (const auto& best : list({}))
    if (!best.current) ++s.best_stale;
  // The logical size: pages still in the WAL count too.
  s.file_bytes = single_integer(db_,
                                "SELECT page_count * page_size FROM pragma_page_count, "
                                "pragma_page_size");
  s.schema_version = schema_version();
  return s;
}

int64_t TuningDb::remove(const DbFilter& filter) {
  sql::Transaction transaction(db_);
  const auto doomed = rows::select_problems(db_, rows::matching(filter));
  // Best rows go with their candidates (ON DELETE CASCADE).
  sql::Statement remove_pair(db_, "DELETE FROM candidates WHERE device_id = ? AND problem_id = ?");
  for (const auto& row : doomed) remove_pair.bind_all({row.device_id, row.problem_id}).run();
  sql::exec(db_,
            "DELETE FROM problems WHERE id NOT IN (SELECT problem_id FROM candidates);"
            "DELETE FROM devices WHERE id NOT IN (SELECT device_id FROM candidates);");
  transaction.commit();
  return int64_t(doomed.size());
}

}  // namespace gemmtune
