#include "rows.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <optional>
#include <set>

#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune::rows {

std::string now_utc() {
  using namespace std::chrono;
  const auto now = system_clock::now();
  const std::time_t seconds = system_clock::to_time_t(now);
  const auto millis = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", utc.tm_year + 1900,
                     utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, millis);
}

void check_device(const DeviceKey& device) {
  GT_REQUIRE(!device.name.empty(), Errc::invalid_argument, "device name is empty");
  GT_REQUIRE(device.cc > 0, Errc::invalid_argument, "device cc must be positive (got {})",
             device.cc);
  GT_REQUIRE(device.sms > 0, Errc::invalid_argument, "device sms must be positive (got {})",
             device.sms);
  GT_REQUIRE(device.driver >= 0, Errc::invalid_argument,
             "device driver version must not be negative (got {})", device.driver);
}

void check_candidate(const Problem& problem, const CandidateRecord& c) {
  GT_REQUIRE(!c.kernel_name.empty(), Errc::invalid_argument, "kernel_name is empty");
  GT_REQUIRE(!c.template_version.empty(), Errc::invalid_argument, "template_version of {} is empty",
             c.kernel_name);
  GT_REQUIRE(!c.config.family.empty(), Errc::invalid_argument, "config of {} has no family",
             c.kernel_name);
  GT_REQUIRE(c.config.types == problem.types && c.config.scaling == problem.scaling &&
                 c.config.op_a == problem.op_a && c.config.op_b == problem.op_b,
             Errc::invalid_argument, "config of {} is for {} {}, the problem is {} {}",
             c.kernel_name, c.config.types.name(), c.config.layout(), problem.types.name(),
             problem.layout());
  // The config names the epilogue its kernel applies: one of another would be another kernel.
  GT_REQUIRE(c.config.epilogue == problem.epilogue, Errc::invalid_argument,
             "config of {} is for epilogue {}, the problem has epilogue {}", c.kernel_name,
             c.config.epilogue.name(), problem.epilogue.name());
  // A timing is what makes an ok candidate comparable; without one it could never be ranked.
  GT_REQUIRE(c.status != CandidateStatus::ok || c.median_ms > 0, Errc::invalid_argument,
             "median_ms of {} must be positive for an ok candidate (got {})", c.kernel_name,
             c.median_ms);
  GT_REQUIRE(c.runs >= 0, Errc::invalid_argument, "runs of {} must not be negative (got {})",
             c.kernel_name, c.runs);
}

namespace {

// The columns that identify a row of a table (its UNIQUE constraint in schema.sql).
struct KeyColumns {
  const char* table;
  const char* columns;
  int count;
};
constexpr KeyColumns kDeviceKey{"devices", "name, cc, sms, driver, nvrtc", 5};
constexpr KeyColumns kProblemKey{"problems",
                                 "type_a, type_b, type_c, type_d, type_acc, scaling, layout, m, n, "
                                 "k, lda, ldb, ldc, align, reads_c, groups, group_layout, "
                                 "accumulation, epilogue, precision",
                                 20};

std::vector<sql::Value> key_of(const DeviceKey& d) {
  return {d.name, int64_t(d.cc), int64_t(d.sms), int64_t(d.driver), d.nvrtc};
}

std::vector<sql::Value> key_of(const Problem& p) {
  return {std::string(to_string(p.types.a)),
          std::string(to_string(p.types.b)),
          std::string(to_string(p.types.c)),
          std::string(to_string(p.types.d)),
          std::string(to_string(p.types.acc)),
          std::string(to_string(p.scaling)),
          p.layout(),
          p.m,
          p.n,
          p.k,
          p.lda,
          p.ldb,
          p.ldc,
          int64_t(p.align),
          int64_t(p.reads_c),
          p.groups,
          std::string(to_string(p.group_layout)),
          std::string(to_string(p.accumulation)),
          p.epilogue.name(),
          std::string(to_string(p.precision))};
}

std::string placeholders(int count) {
  std::string out = "?";
  for (int i = 1; i < count; ++i) out += ", ?";
  return out;
}

// "SELECT id FROM devices WHERE (name, cc, ...) = (?, ?, ...)": served by the UNIQUE index.
std::string id_query(const KeyColumns& key) {
  return fmt::format("SELECT id FROM {} WHERE ({}) = ({})", key.table, key.columns,
                     placeholders(key.count));
}

// Inserts the row unless one with the same key exists; its id either way.
Written ensure_row(sqlite3* db, const KeyColumns& key, const std::vector<sql::Value>& values) {
  sql::Statement insert(db, fmt::format("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT DO NOTHING",
                                        key.table, key.columns, placeholders(key.count)));
  insert.bind_all(values).run();
  sql::Statement find(db, id_query(key));
  find.bind_all(values).step();
  return {find.integer(0), insert.changes() > 0};
}

}  // namespace

sql::Conditions device_is(const DeviceKey& device) {
  return sql::Conditions().add(fmt::format("d.id = ({})", id_query(kDeviceKey)), key_of(device));
}

sql::Conditions problem_is(const Problem& problem) {
  return sql::Conditions().add(fmt::format("p.id = ({})", id_query(kProblemKey)), key_of(problem));
}

sql::Conditions pair_is(int64_t device_id, int64_t problem_id) {
  return sql::Conditions().add("d.id = ? AND p.id = ?", {device_id, problem_id});
}

sql::Conditions matching(const DbFilter& f) {
  sql::Conditions where;
  if (f.device) where.add("instr(lower(d.name), lower(?)) > 0", {*f.device});
  if (f.types)
    where.add("(p.type_a, p.type_b, p.type_c, p.type_d, p.type_acc) = (?, ?, ?, ?, ?)",
              {std::string(to_string(f.types->a)), std::string(to_string(f.types->b)),
               std::string(to_string(f.types->c)), std::string(to_string(f.types->d)),
               std::string(to_string(f.types->acc))});
  if (f.layout) {
    std::string layout = *f.layout;
    for (char& ch : layout) ch = char(std::tolower(static_cast<unsigned char>(ch)));
    where.add("p.layout = ?", {layout});
  }
  const std::pair<const char*, const std::optional<int64_t>*> sizes[] = {
      {"p.m = ?", &f.m},     {"p.n = ?", &f.n},     {"p.k = ?", &f.k},
      {"p.lda = ?", &f.lda}, {"p.ldb = ?", &f.ldb}, {"p.ldc = ?", &f.ldc}};
  for (const auto& [clause, value] : sizes)
    if (value->has_value()) where.add(clause, {**value});
  if (f.reads_c) where.add("p.reads_c = ?", {int64_t(*f.reads_c)});
  if (f.groups) where.add("p.groups = ?", {*f.groups});
  if (f.group_layout)
    where.add("p.groups > 0 AND p.group_layout = ?", {std::string(to_string(*f.group_layout))});
  if (f.accumulation)
    where.add("p.scaling IN ('tensor', 'row') AND p.accumulation = ?",
              {std::string(to_string(*f.accumulation))});
  // Names are canonical (Epilogue::name()), so equal text is the same epilogue.
  if (f.epilogue) where.add("p.epilogue = ?", {f.epilogue->name()});
  if (f.precision) where.add("p.precision = ?", {std::string(to_string(*f.precision))});
  return where;
}

namespace {

// Column lists and their readers, kept side by side so that they stay in step.
constexpr const char* kDeviceColumns = "d.name, d.cc, d.sms, d.driver, d.nvrtc";
constexpr const char* kProblemColumns =
    "p.type_a, p.type_b, p.type_c, p.type_d, p.type_acc, p.scaling, p.layout, p.m, p.n, p.k, "
    "p.lda, p.ldb, p.ldc, p.align, p.reads_c, p.groups, p.group_layout, p.accumulation, "
    "p.epilogue, p.precision";
constexpr const char* kCandidateColumns =
    "c.id, c.kernel_name, c.template_version, c.config, c.status, c.registers, c.spills, "
    "c.smem_bytes, c.compile_ms, c.median_ms, c.min_ms, c.max_ms, c.runs, c.tflops, "
    "c.max_error, c.message, c.measured_at";
constexpr const char* kCandidatesJoined =
    "candidates c JOIN devices d ON d.id = c.device_id JOIN problems p ON p.id = c.problem_id";
constexpr const char* kProblemOrder =
    "d.name, d.cc, d.sms, d.driver, d.nvrtc, p.type_a, p.type_b, p.type_c, p.type_d, p.type_acc, "
    "p.scaling, p.layout, p.m, p.n, p.k, p.lda, p.ldb, p.ldc, p.align, p.reads_c, p.groups, "
    "p.group_layout, p.accumulation, p.epilogue, p.precision";

DeviceKey read_device(sql::Row& row) {
  DeviceKey d;
  d.name = row.text();
  d.cc = int(row.integer());
  d.sms = int(row.integer());
  d.driver = int(row.integer());
  d.nvrtc = row.text();
  return d;
}

Problem read_problem(sql::Row& row) {
  Problem p;
  p.types.a = parse_data_type(row.text());
  p.types.b = parse_data_type(row.text());
  p.types.c = parse_data_type(row.text());
  p.types.d = parse_data_type(row.text());
  p.types.acc = parse_data_type(row.text());
  p.scaling = parse_scaling(row.text());
  const std::string layout = row.text();
  p.op_a = parse_op(layout.at(0));
  p.op_b = parse_op(layout.at(1));
  p.m = row.integer();
  p.n = row.integer();
  p.k = row.integer();
  p.lda = row.integer();
  p.ldb = row.integer();
  p.ldc = row.integer();
  p.align = int(row.integer());
  p.reads_c = row.integer() != 0;
  p.groups = row.integer();
  p.group_layout = parse_group_layout(row.text());
  p.accumulation = parse_accumulation(row.text());
  p.epilogue = parse_epilogue(row.text());
  p.precision = parse_precision(row.text());
  return p;
}

KernelConfig config_of(const std::string& json, const std::string& kernel_name) {
  try {
    return KernelConfig::from_json(json);
  } catch (const Error& e) {
    GT_THROW(Errc::database, "the stored config of {} is damaged: {}", kernel_name, e.what());
  }
}

CandidateRecord read_candidate(sql::Row& row) {
  CandidateRecord c;
  c.id = row.integer();
  c.kernel_name = row.text();
  c.template_version = row.text();
  c.config = config_of(row.text(), c.kernel_name);
  c.status = parse_status(row.text());
  c.registers = row.int_or_unknown();
  c.spills = row.int_or_unknown();
  c.smem_bytes = row.int_or_unknown();
  c.compile_ms = row.real_or_unknown();
  c.median_ms = row.real_or_unknown();
  c.min_ms = row.real_or_unknown();
  c.max_ms = row.real_or_unknown();
  c.runs = int(row.integer());
  c.tflops = row.real_or_unknown();
  c.max_error = row.real_or_unknown();
  c.message = row.text();
  c.measured_at = row.text();
  return c;
}

}  // namespace

std::vector<ProblemRow> select_problems(sqlite3* db, const sql::Conditions& where) {
  sql::Statement s(
      db,
      fmt::format("SELECT DISTINCT d.id, p.id, {}, {} FROM {} WHERE {} ORDER BY {}", kDeviceColumns,
                  kProblemColumns, kCandidatesJoined, where.sql(), kProblemOrder));
  s.bind_all(where.values());
  std::vector<ProblemRow> out;
  while (s.step()) {
    sql::Row row(s);
    ProblemRow& r = out.emplace_back();
    r.device_id = row.integer();
    r.problem_id = row.integer();
    r.device = read_device(row);
    r.problem = read_problem(row);
  }
  return out;
}

std::vector<CandidateRecord> select_candidates(sqlite3* db, const sql::Conditions& where) {
  // The order of ranks_before().
  sql::Statement s(
      db,
      fmt::format("SELECT {} FROM {} WHERE {} ORDER BY c.status <> 'ok', "
                  "CASE WHEN c.status = 'ok' THEN c.median_ms END, "
                  "CASE WHEN c.status = 'ok' THEN c.min_ms END, c.kernel_name, c.template_version",
                  kCandidateColumns, kCandidatesJoined, where.sql()));
  s.bind_all(where.values());
  std::vector<CandidateRecord> out;
  while (s.step()) {
    sql::Row row(s);
    out.push_back(read_candidate(row));
  }
  return out;
}

std::vector<BestRecord> select_bests(sqlite3* db, const sql::Conditions& where) {
  sql::Statement s(
      db,
      fmt::format("SELECT {}, {}, {}, b.baseline_ms, b.complete, b.tuned_at FROM best b "
                  "JOIN candidates c ON c.id = b.candidate_id "
                  "JOIN devices d ON d.id = b.device_id JOIN problems p ON p.id = b.problem_id "
                  "WHERE {} ORDER BY {}, c.median_ms, c.min_ms, c.kernel_name, b.template_version",
                  kDeviceColumns, kProblemColumns, kCandidateColumns, where.sql(), kProblemOrder));
  s.bind_all(where.values());
  std::vector<BestRecord> out;
  CurrentVersions versions;
  while (s.step()) {
    sql::Row row(s);
    BestRecord& b = out.emplace_back();
    b.device = read_device(row);
    b.problem = read_problem(row);
    b.winner = read_candidate(row);
    b.baseline_ms = row.real_or_unknown();
    b.complete = row.integer() != 0;
    b.tuned_at = row.text();
    b.current = versions.is_current(b.winner.config.family, b.winner.template_version);
  }
  return out;
}

std::vector<BestRecord> fastest_current(std::vector<BestRecord> bests) {
  std::vector<BestRecord> out;
  for (auto& best : bests) {
    const bool same_problem = !out.empty() && out.back().device == best.device &&
                              out.back().problem.describe() == best.problem.describe();
    if (best.current && !same_problem) out.push_back(std::move(best));
  }
  return out;
}

bool CurrentVersions::is_current(const std::string& family, const std::string& version) {
  auto it = by_family_.find(family);
  if (it == by_family_.end()) {
    std::string current;
    try {
      current = template_version(find_family(family));
    } catch (const Error&) {
      // A family this build does not have: its results can never be used here.
    }
    it = by_family_.emplace(family, current).first;
  }
  return !it->second.empty() && it->second == version;
}

Written ensure_device(sqlite3* db, const DeviceKey& device) {
  return ensure_row(db, kDeviceKey, key_of(device));
}

Written ensure_problem(sqlite3* db, const Problem& problem) {
  return ensure_row(db, kProblemKey, key_of(problem));
}

Written upsert_candidate(sqlite3* db, const ProblemRow& at, const CandidateRecord& c, Merge merge) {
  sql::Statement s(db,
                   "INSERT INTO candidates (device_id, problem_id, template_version, kernel_name, "
                   "family, config, status, registers, spills, smem_bytes, compile_ms, median_ms, "
                   "min_ms, max_ms, runs, tflops, max_error, message, measured_at) "
                   "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
                   "?17, ?18, ?19) "
                   "ON CONFLICT (device_id, problem_id, template_version, kernel_name) DO UPDATE "
                   "SET family = ?5, config = ?6, status = ?7, registers = ?8, spills = ?9, "
                   "smem_bytes = ?10, compile_ms = ?11, median_ms = ?12, min_ms = ?13, "
                   "max_ms = ?14, runs = ?15, tflops = ?16, max_error = ?17, message = ?18, "
                   "measured_at = ?19 WHERE ?20 OR ?19 > candidates.measured_at "
                   "RETURNING id");
  s.bind_all({at.device_id, at.problem_id, c.template_version, c.kernel_name, c.config.family,
              c.config.to_json(), std::string(to_string(c.status))});
  s.bind_or_null(8, c.registers).bind_or_null(9, c.spills).bind_or_null(10, c.smem_bytes);
  s.bind_or_null(11, c.compile_ms).bind_or_null(12, c.median_ms).bind_or_null(13, c.min_ms);
  s.bind_or_null(14, c.max_ms).bind(15, int64_t(c.runs)).bind_or_null(16, c.tflops);
  s.bind_or_null(17, c.max_error).bind(18, c.message).bind(19, c.measured_at);
  s.bind(20, int64_t(merge == Merge::replace));
  // RETURNING yields the row only when it was inserted or updated.
  const bool changed = s.step();
  const int64_t id = changed ? s.integer(0) : 0;
  while (s.step()) {
  }
  return {id, changed};
}

bool upsert_best(sqlite3* db, const ProblemRow& at, const BestChoice& best, Merge merge) {
  sql::Statement find(
      db,
      "SELECT id, status FROM candidates WHERE device_id = ? AND problem_id = ? AND "
      "template_version = ? AND kernel_name = ?");
  find.bind_all({at.device_id, at.problem_id, best.template_version, best.kernel_name});
  GT_REQUIRE(find.step(), Errc::invalid_argument,
             "cannot mark {} (template {}) as the best for {} on {}: it was never recorded",
             best.kernel_name, best.template_version, at.problem.describe(), at.device.name);
  // A merge met a newer measurement of the winner that failed: that newer result stands.
  if (merge == Merge::keep_newer && find.text(1) != "ok") return false;
  // A wrong or failed kernel is never stored as best.
  GT_REQUIRE(find.text(1) == "ok", Errc::invalid_argument,
             "cannot mark {} as the best: its status is {}, only an ok candidate can win",
             best.kernel_name, find.text(1));
  sql::Statement s(db,
                   "INSERT INTO best (device_id, problem_id, template_version, candidate_id, "
                   "baseline_ms, complete, tuned_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                   "ON CONFLICT (device_id, problem_id, template_version) DO UPDATE SET "
                   "candidate_id = ?4, baseline_ms = ?5, complete = ?6, tuned_at = ?7 "
                   "WHERE ?8 OR ?7 > best.tuned_at");
  s.bind_all({at.device_id, at.problem_id, best.template_version, find.integer(0)});
  s.bind_or_null(5, best.baseline_ms).bind(6, int64_t(best.complete)).bind(7, best.tuned_at);
  s.bind(8, int64_t(merge == Merge::replace));
  s.run();
  return s.changes() > 0;
}

namespace {

// The best row of the pair and template version, as a BestChoice naming its winner.
std::optional<BestChoice> stored_best(sqlite3* db, const ProblemRow& at,
                                      const std::string& version) {
  sql::Statement s(db,
                   "SELECT c.kernel_name, b.baseline_ms, b.complete, b.tuned_at FROM best b "
                   "JOIN candidates c ON c.id = b.candidate_id "
                   "WHERE b.device_id = ? AND b.problem_id = ? AND b.template_version = ?");
  s.bind_all({at.device_id, at.problem_id, version});
  if (!s.step()) return std::nullopt;
  return BestChoice{s.text(0), version, s.real_or_unknown(1), s.integer(2) != 0, s.text(3)};
}

}  // namespace

bool rechoose_best(sqlite3* db, const ProblemRow& at, const std::string& template_version,
                   const BestChoice* incoming_row) {
  const auto stored = stored_best(db, at, template_version);
  if (!incoming_row && !stored) return false;  // never tuned to the end here: no best to choose
  const BestChoice& incoming = incoming_row ? *incoming_row : *stored;
  const auto ok = select_candidates(
      db, sql::Conditions()
              .add(pair_is(at.device_id, at.problem_id))
              .add("c.template_version = ? AND c.status = 'ok'", {template_version}));
  if (ok.empty()) return false;  // a later failed measurement of the winner stands
  BestChoice chosen = incoming;
  std::set<std::string> named = {incoming.kernel_name};
  if (stored) named.insert(stored->kernel_name);
  chosen.kernel_name = choose_winner(ok, named, kWinnerMargin)->kernel_name;
  if (stored) {
    chosen.complete = stored->complete || incoming.complete;
    chosen.tuned_at = std::max(stored->tuned_at, incoming.tuned_at);
    const bool stored_named_it = stored->kernel_name == chosen.kernel_name;
    const bool incoming_named_it = incoming.kernel_name == chosen.kernel_name;
    if (stored_named_it && !incoming_named_it) chosen.baseline_ms = stored->baseline_ms;
    if (stored_named_it == incoming_named_it && stored->tuned_at > incoming.tuned_at)
      chosen.baseline_ms = stored->baseline_ms;
    if (stored->kernel_name == chosen.kernel_name && stored->complete == chosen.complete &&
        stored->baseline_ms == chosen.baseline_ms && stored->tuned_at == chosen.tuned_at)
      return false;
  }
  upsert_best(db, at, chosen, Merge::replace);
  return true;
}

}  // namespace gemmtune::rows
