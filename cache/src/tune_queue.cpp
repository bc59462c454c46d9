// The tuning daemon's queue: TuningDb's tune_queue table (schema.sql, migration 9).
#include <algorithm>
#include <array>
#include <tuple>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/util.hpp"
#include "rows.hpp"
#include "sql.hpp"

namespace gemmtune {
namespace {

constexpr std::array<std::pair<QueueState, std::string_view>, 4> kStateNames = {{
    {QueueState::queued, "queued"},
    {QueueState::tuning, "tuning"},
    {QueueState::done, "done"},
    {QueueState::failed, "failed"},
}};

QueueState parse_state(std::string_view text) {
  for (const auto& [value, name] : kStateNames)
    if (name == text) return value;
  GT_THROW(Errc::database, "tune_queue: unknown state '{}'", text);
}

// Unix seconds as SQLite computes them (julianday: unixepoch's fractions need SQLite 3.42).
constexpr const char* kNowSeconds = "((julianday('now') - 2440587.5) * 86400.0)";

constexpr const char* kEntryColumns =
    "id, device, problem, state, calls, predicted_us, attempts, claimed_by, heartbeat, message, "
    "requested_at, updated_at";

QueueEntry read_entry(const sql::Statement& s) {
  sql::Row row(s);
  QueueEntry e;
  e.id = row.integer();
  e.device = device_from_json(row.text());
  e.problem = problem_from_json(row.text());
  e.state = parse_state(row.text());
  e.calls = row.integer();
  e.predicted_us = row.real();
  e.attempts = int(row.integer());
  e.claimed_by = row.text();
  e.heartbeat = row.real_or_unknown();
  e.message = row.text();
  e.requested_at = row.text();
  e.updated_at = row.text();
  return e;
}

std::vector<QueueEntry> select_entries(sqlite3* db, const std::string& where,
                                       const std::vector<sql::Value>& values) {
  sql::Statement s(db, fmt::format("SELECT {} FROM tune_queue WHERE {}", kEntryColumns, where));
  s.bind_all(values);
  std::vector<QueueEntry> out;
  while (s.step()) out.push_back(read_entry(s));
  return out;
}

int state_rank(QueueState state) {
  switch (state) {
    case QueueState::tuning:
      return 0;
    case QueueState::queued:
      return 1;
    case QueueState::failed:
      return 2;
    case QueueState::done:
      return 3;
  }
  return 4;
}

// Highest priority first; the earlier request breaks ties.
bool waits_before(const QueueEntry& a, const QueueEntry& b) {
  if (a.priority() != b.priority()) return a.priority() > b.priority();
  return std::tie(a.requested_at, a.id) < std::tie(b.requested_at, b.id);
}

}  // namespace

std::string_view to_string(QueueState state) noexcept {
  for (const auto& [value, name] : kStateNames)
    if (value == state) return name;
  return "?";
}

int64_t TuningDb::enqueue(const DeviceKey& device, const Problem& problem, double predicted_us) {
  rows::check_device(device);
  validate(problem);
  const std::string now = rows::now_utc();
  sql::Transaction transaction(db_);
  sql::Statement upsert(db_,
                        "INSERT INTO tune_queue (device, problem, gpu, cc, sms, predicted_us, "
                        "requested_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                        "ON CONFLICT (device, problem) DO UPDATE SET "
                        "predicted_us = excluded.predicted_us, updated_at = excluded.updated_at, "
                        "state = CASE state WHEN 'done' THEN 'queued' ELSE state END");
  upsert
      .bind_all({json_of(device), json_of(problem), device.name, int64_t(device.cc),
                 int64_t(device.sms), std::max(predicted_us, 0.0), now, now})
      .run();
  sql::Statement id(db_, "SELECT id FROM tune_queue WHERE device = ? AND problem = ?");
  id.bind_all({json_of(device), json_of(problem)});
  GT_REQUIRE(id.step(), Errc::internal, "tune_queue: the entry just written is missing");
  const int64_t out = id.integer(0);
  transaction.commit();
  return out;
}

void TuningDb::add_calls(int64_t id, int64_t calls) {
  if (calls <= 0) return;
  sql::Statement s(db_, "UPDATE tune_queue SET calls = calls + ? WHERE id = ?");
  s.bind_all({calls, id}).run();
}

std::optional<QueueEntry> TuningDb::claim_next(const DeviceKey& device, const std::string& claimer,
                                               std::optional<int64_t> only_id) {
  sql::Transaction transaction(db_);
  sql::Conditions where;
  where.add("state = 'queued'")
      .add("gpu = ? AND cc = ? AND sms = ?",
           {device.name, int64_t(device.cc), int64_t(device.sms)});
  if (only_id) where.add("id = ?", {*only_id});
  std::vector<QueueEntry> waiting = select_entries(db_, where.sql(), where.values());
  if (waiting.empty()) return std::nullopt;
  QueueEntry entry = *std::min_element(waiting.begin(), waiting.end(), waits_before);
  sql::Statement claim(db_, fmt::format("UPDATE tune_queue SET state = 'tuning', claimed_by = ?, "
                                        "heartbeat = {}, attempts = attempts + 1, "
                                        "updated_at = ? WHERE id = ?",
                                        kNowSeconds));
  claim.bind_all({claimer, rows::now_utc(), entry.id}).run();
  transaction.commit();
  entry.state = QueueState::tuning;
  entry.claimed_by = claimer;
  ++entry.attempts;
  return entry;
}

bool TuningDb::heartbeat(int64_t id, const std::string& claimer) {
  sql::Statement s(db_, fmt::format("UPDATE tune_queue SET heartbeat = {} WHERE id = ? AND "
                                    "state = 'tuning' AND claimed_by = ?",
                                    kNowSeconds));
  s.bind_all({id, claimer}).run();
  return s.changes() == 1;
}

void TuningDb::finish(int64_t id, const std::string& claimer, QueueState state,
                      const std::string& message) {
  GT_REQUIRE(state == QueueState::done || state == QueueState::failed, Errc::internal,
             "tune_queue: a claim ends done or failed, not {}", to_string(state));
  sql::Statement s(db_,
                   "UPDATE tune_queue SET state = ?, message = ?, claimed_by = NULL, "
                   "heartbeat = NULL, updated_at = ? WHERE id = ? AND claimed_by = ?");
  s.bind_all({std::string(to_string(state)), message, rows::now_utc(), id, claimer}).run();
}

int TuningDb::release_claims(const std::function<bool(const std::string&, double)>& gone) {
  sql::Transaction transaction(db_);
  sql::Statement release(db_,
                         "UPDATE tune_queue SET state = 'queued', claimed_by = NULL, "
                         "heartbeat = NULL, updated_at = ? WHERE id = ? AND state = 'tuning'");
  int released = 0;
  for (const QueueEntry& e : select_entries(db_, "state = 'tuning'", {})) {
    if (!gone(e.claimed_by, e.heartbeat)) continue;
    release.bind_all({rows::now_utc(), e.id}).run();
    released += release.changes();
  }
  transaction.commit();
  return released;
}

int TuningDb::retry_failed() {
  sql::Statement s(db_,
                   "UPDATE tune_queue SET state = 'queued', message = '', updated_at = ? "
                   "WHERE state = 'failed'");
  s.bind_all({rows::now_utc()}).run();
  return s.changes();
}

std::vector<QueueEntry> TuningDb::queue() const {
  std::vector<QueueEntry> out = select_entries(db_, "1", {});
  std::sort(out.begin(), out.end(), [](const QueueEntry& a, const QueueEntry& b) {
    if (a.state != b.state) return state_rank(a.state) < state_rank(b.state);
    return waits_before(a, b);
  });
  return out;
}

std::optional<QueueEntry> TuningDb::queue_entry(int64_t id) const {
  auto found = select_entries(db_, "id = ?", {id});
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

int64_t TuningDb::data_version() const {
  sql::Statement s(db_, "PRAGMA data_version");
  s.step();
  return s.integer(0);
}

std::string TuningDb::results_signature() const {
  sql::Statement s(db_, "SELECT count(*), coalesce(max(tuned_at), '') FROM best");
  s.step();
  return fmt::format("{} {}", s.integer(0), s.text(1));
}

}  // namespace gemmtune
