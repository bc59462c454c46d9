// The JSON export and import of the tuning database (docs/DATABASE.md describes the format).
// Import validates the whole document before it writes anything, then writes it in one
// transaction: a bad file changes nothing.
#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "rows.hpp"
#include "sql.hpp"

namespace gemmtune {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kFormat = "gemmtune-db";
// 2: a problem names the type of each operand ("types") and its scaling; version 1's "dtype"
// (one type of every operand, f32 accumulation) is read as those types, so old files keep their
// meaning. problem.reads_c did not raise the version: without it a problem does not read C
// (older builds tuned beta = 0 only). 3: a problem has "groups" (0: one GEMM); without it, as in
// versions 1 and 2, it is one GEMM. A build of version 2 would file a grouped problem as one
// GEMM, so it must refuse these files. 4: a problem has "group_layout" ("contiguous" or
// "masked"); without it, as in versions 1 to 3, it is contiguous. A build of version 3 would file
// a masked problem as a contiguous one, so it must refuse these files. 5: a problem has
// "accumulation" ("precise" or "fast"); without it, as in versions 1 to 4, it is precise. A
// build of version 4 would file a fast-accumulating float8 problem as a precise one, another
// kernel with another error, so it must refuse these files. 6: a problem has "epilogue" ("none",
// "bias,gelu", ... as Epilogue::name() writes it); without it, as in versions 1 to 5, it is none.
// A build of version 5 would file a fused problem (bias, activation) as the plain one, whose
// kernels compute another D, so it must refuse these files. 7: a problem has "precision"
// ("exact", "tf32" or "3xtf32"), last, where the tune queue's migration 10 puts it; without it,
// as in versions 1 to 6, it is exact. A build of version 6 would file a tf32 problem as the
// exact one, another kernel with another error, so it must refuse these files.
constexpr int64_t kFormatVersion = 7;

// Unknown values (-1 in the structs) are null in JSON.
Json number_or_null(double value) {
  return value < 0 ? Json(nullptr) : Json(value);
}
Json integer_or_null(int64_t value) {
  return value < 0 ? Json(nullptr) : Json(value);
}

Json device_json(const DeviceKey& d) {
  return {{"name", d.name}, {"cc", d.cc}, {"sms", d.sms}, {"driver", d.driver}, {"nvrtc", d.nvrtc}};
}

Json problem_json(const Problem& p) {
  return {{"types", p.types.name()},
          {"scaling", std::string(to_string(p.scaling))},
          {"layout", p.layout()},
          {"m", p.m},
          {"n", p.n},
          {"k", p.k},
          {"lda", p.lda},
          {"ldb", p.ldb},
          {"ldc", p.ldc},
          {"align", p.align},
          {"reads_c", p.reads_c},
          {"groups", p.groups},
          {"group_layout", std::string(to_string(p.group_layout))},
          {"accumulation", std::string(to_string(p.accumulation))},
          {"epilogue", p.epilogue.name()},
          {"precision", std::string(to_string(p.precision))}};
}

Json candidate_json(const CandidateRecord& c) {
  return {{"kernel_name", c.kernel_name},
          {"template_version", c.template_version},
          {"config", Json::parse(c.config.to_json())},
          {"status", std::string(to_string(c.status))},
          {"registers", integer_or_null(c.registers)},
          {"spills", integer_or_null(c.spills)},
          {"smem_bytes", integer_or_null(c.smem_bytes)},
          {"compile_ms", number_or_null(c.compile_ms)},
          {"median_ms", number_or_null(c.median_ms)},
          {"min_ms", number_or_null(c.min_ms)},
          {"max_ms", number_or_null(c.max_ms)},
          {"runs", c.runs},
          {"tflops", number_or_null(c.tflops)},
          {"max_error", number_or_null(c.max_error)},
          {"message", c.message},
          {"measured_at", c.measured_at}};
}

// The best row inside an export entry: the winner is named, its record is in "candidates".
Json best_entry_json(const BestRecord& b) {
  return {{"kernel_name", b.winner.kernel_name},
          {"template_version", b.winner.template_version},
          {"baseline_ms", number_or_null(b.baseline_ms)},
          {"complete", b.complete},
          {"tuned_at", b.tuned_at}};
}

// A JSON value and where it is in the document, so that every complaint says where.
class Field {
 public:
  Field(const Json& value, std::string path) : value_(value), path_(std::move(path)) {}

  [[noreturn]] void fail(std::string_view why) const {
    GT_THROW(Errc::invalid_argument, "{}: {}", path_.empty() ? "document" : path_, why);
  }

  // A member that must be present and not null.
  Field operator[](std::string_view key) const {
    auto member = find(key);
    if (!member) fail(fmt::format("missing required field '{}'", key));
    return *member;
  }
  // A member that may be absent or null.
  std::optional<Field> find(std::string_view key) const {
    expect(value_.is_object(), "an object");
    auto it = value_.find(std::string(key));
    if (it == value_.end() || it->is_null()) return std::nullopt;
    return Field(*it, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key));
  }
  std::vector<Field> items() const {
    expect(value_.is_array(), "an array");
    std::vector<Field> out;
    for (size_t i = 0; i < value_.size(); ++i)
      out.emplace_back(value_[i], fmt::format("{}[{}]", path_, i));
    return out;
  }

  std::string text() const {
    expect(value_.is_string(), "a string");
    return value_.get<std::string>();
  }
  std::string nonempty_text() const {
    std::string out = text();
    if (out.empty()) fail("must not be empty");
    return out;
  }
  int64_t integer(int64_t at_least) const {
    expect(value_.is_number_integer(), "an integer");
    const int64_t out = value_.get<int64_t>();
    if (out < at_least) fail(fmt::format("must be at least {} (got {})", at_least, out));
    return out;
  }
  double number(double at_least) const {
    expect(value_.is_number(), "a number");
    const double out = value_.get<double>();
    if (out < at_least) fail(fmt::format("must be at least {} (got {})", at_least, out));
    return out;
  }
  bool boolean() const {
    expect(value_.is_boolean(), "true or false");
    return value_.get<bool>();
  }
  const Json& json() const { return value_; }
  const std::string& path() const { return path_; }

  // Runs a check of ours that throws Error(invalid_argument) and says where it failed.
  template <class Check>
  void checked(Check&& check) const {
    try {
      check();
    } catch (const Error& e) {
      if (e.code() != Errc::invalid_argument) throw;
      fail(e.what());
    }
  }

 private:
  void expect(bool ok, std::string_view what) const {
    if (!ok) fail(fmt::format("expected {}, got {}", what, value_.type_name()));
  }

  const Json& value_;
  std::string path_;
};

// Absent or null: unknown (-1).
double number_or_unknown(const Field& parent, std::string_view key) {
  auto field = parent.find(key);
  return field ? field->number(0) : -1;
}

// Sizes are stored as int: keep them in range rather than let them wrap.
int small_integer(const Field& field, int at_least) {
  const int64_t value = field.integer(at_least);
  if (value > std::numeric_limits<int>::max()) field.fail(fmt::format("{} is too large", value));
  return int(value);
}

int small_count_or_unknown(const Field& parent, std::string_view key) {
  auto field = parent.find(key);
  return field ? small_integer(*field, 0) : -1;
}

struct ImportEntry {
  DeviceKey device;
  Problem problem;
  std::vector<CandidateRecord> candidates;
  std::vector<rows::BestChoice> best;
};

DeviceKey parse_device(const Field& f) {
  DeviceKey d;
  d.name = f["name"].nonempty_text();
  d.cc = small_integer(f["cc"], 1);
  d.sms = small_integer(f["sms"], 1);
  d.driver = small_integer(f["driver"], 0);
  d.nvrtc = f["nvrtc"].text();
  f.checked([&] { rows::check_device(d); });
  return d;
}

// A text member that may be absent (then `value` keeps its default), read by `parse`.
template <class T>
void read_if_present(const Field& parent, std::string_view key, T& value,
                     T (*parse)(std::string_view)) {
  if (const auto field = parent.find(key)) {
    const std::string text = field->text();
    field->checked([&] { value = parse(text); });
  }
}

Problem parse_problem(const Field& f) {
  const std::string layout = f["layout"].text();
  if (layout != "nn" && layout != "nt" && layout != "tn" && layout != "tt")
    f["layout"].fail(fmt::format("unknown layout '{}' (expected nn, nt, tn or tt)", layout));
  Problem p;
  // Version 1 had one type of every operand ("dtype"); version 2 names each ("types").
  if (f.find("types"))
    f["types"].checked([&] { p.types = parse_data_types(f["types"].text()); });
  else
    f["dtype"].checked([&] { p.types = DataTypes::uniform(parse_data_type(f["dtype"].text())); });
  if (f.find("scaling"))
    f["scaling"].checked([&] { p.scaling = parse_scaling(f["scaling"].text()); });
  p.op_a = parse_op(layout[0]);
  p.op_b = parse_op(layout[1]);
  // M, N and K are checked for sign by validate() below, with its own words.
  p.m = f["m"].integer(std::numeric_limits<int64_t>::min());
  p.n = f["n"].integer(std::numeric_limits<int64_t>::min());
  p.k = f["k"].integer(std::numeric_limits<int64_t>::min());
  p.lda = f["lda"].integer(1);
  p.ldb = f["ldb"].integer(1);
  p.ldc = f["ldc"].integer(1);
  p.align = small_integer(f["align"], 1);
  // Absent in exports of builds before it existed, which tuned only problems with beta = 0.
  p.reads_c = f.find("reads_c") ? f["reads_c"].boolean() : false;
  // Absent before format 3: every problem was one GEMM. validate() bounds it by kMaxGroups.
  p.groups = f.find("groups") ? f["groups"].integer(0) : 0;
  // Absent before format 4: every grouped problem was contiguous. validate() refuses masked
  // without groups or with N not a multiple of them.
  read_if_present(f, "group_layout", p.group_layout, parse_group_layout);
  // Absent before format 5: every problem was precise. validate() refuses fast other than of
  // float8 with tensor or row scaling.
  read_if_present(f, "accumulation", p.accumulation, parse_accumulation);
  // Absent before format 6: no problem had an epilogue. validate() refuses one with groups.
  read_if_present(f, "epilogue", p.epilogue, parse_epilogue);
  // Absent before format 7: every problem was exact. validate() refuses another of other than f32.
  read_if_present(f, "precision", p.precision, parse_precision);
  f.checked([&] { validate(p); });
  return p;
}

CandidateRecord parse_candidate(const Field& f, const Problem& problem) {
  CandidateRecord c;
  c.kernel_name = f["kernel_name"].nonempty_text();
  c.template_version = f["template_version"].nonempty_text();
  const Field config = f["config"];
  config.checked([&] { c.config = KernelConfig::from_json(config.json().dump()); });
  const Field status = f["status"];
  status.checked([&] { c.status = parse_status(status.text()); });
  c.registers = small_count_or_unknown(f, "registers");
  c.spills = small_count_or_unknown(f, "spills");
  c.smem_bytes = small_count_or_unknown(f, "smem_bytes");
  c.compile_ms = number_or_unknown(f, "compile_ms");
  c.median_ms = number_or_unknown(f, "median_ms");
  c.min_ms = number_or_unknown(f, "min_ms");
  c.max_ms = number_or_unknown(f, "max_ms");
  c.runs = f.find("runs") ? small_integer(f["runs"], 0) : 0;
  c.tflops = number_or_unknown(f, "tflops");
  c.max_error = number_or_unknown(f, "max_error");
  c.message = f.find("message") ? f["message"].text() : "";
  c.measured_at = f["measured_at"].nonempty_text();
  f.checked([&] { rows::check_candidate(problem, c); });
  return c;
}

rows::BestChoice parse_best(const Field& f, const std::vector<CandidateRecord>& candidates) {
  rows::BestChoice b;
  b.kernel_name = f["kernel_name"].nonempty_text();
  b.template_version = f["template_version"].nonempty_text();
  b.baseline_ms = number_or_unknown(f, "baseline_ms");
  b.complete = f.find("complete") ? f["complete"].boolean() : false;
  b.tuned_at = f["tuned_at"].nonempty_text();
  auto winner = std::find_if(candidates.begin(), candidates.end(), [&](const CandidateRecord& c) {
    return c.kernel_name == b.kernel_name && c.template_version == b.template_version;
  });
  if (winner == candidates.end())
    f.fail(fmt::format("the winner {} (template {}) is not among this entry's candidates",
                       b.kernel_name, b.template_version));
  if (winner->status != CandidateStatus::ok)
    f.fail(fmt::format("the winner {} has status {}; only an ok candidate can be the best",
                       b.kernel_name, to_string(winner->status)));
  return b;
}

// An import may name only the families registered in this process: a test family, or anything
// unknown, never gets into an installed build's database. A candidate measured with this build's
// templates of its family could be run by the library or the tuner, so its parameters must also be
// a valid point of the family for the problem on the device's architecture; one of another template
// version is history, never run.
void check_runnable(const Field& config, const CandidateRecord& c, const Problem& problem,
                    const ArchInfo& arch) {
  const Family* family = family_named(c.config.family);
  if (family == nullptr) config["family"].fail(why_unusable(c.config, problem, arch));
  if (c.template_version != template_version(*family)) return;
  if (std::string why = why_unusable(c.config, problem, arch); !why.empty()) config.fail(why);
}

ImportEntry parse_entry(const Field& f) {
  ImportEntry e;
  e.device = parse_device(f["device"]);
  e.problem = parse_problem(f["problem"]);
  const ArchInfo arch = ArchInfo::from_cc(e.device.cc);
  for (const Field& candidate : f["candidates"].items()) {
    e.candidates.push_back(parse_candidate(candidate, e.problem));
    check_runnable(candidate["config"], e.candidates.back(), e.problem, arch);
  }
  if (auto best = f.find("best"))
    for (const Field& row : best->items()) e.best.push_back(parse_best(row, e.candidates));
  return e;
}

Json parsed(std::string_view text) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    GT_THROW(Errc::invalid_argument, "not valid JSON: {}", e.what());
  }
}

std::vector<ImportEntry> parse_document(std::string_view text) {
  const Json document = parsed(text);
  const Field root(document, "");
  if (root["format"].text() != kFormat)
    root["format"].fail(fmt::format("expected \"{}\", got \"{}\"", kFormat, root["format"].text()));
  const int64_t version = root["version"].integer(1);
  if (version > kFormatVersion)
    root["version"].fail(
        fmt::format("version {} is newer than this build reads ({})", version, kFormatVersion));
  std::vector<ImportEntry> entries;
  for (const Field& entry : root["entries"].items()) entries.push_back(parse_entry(entry));
  return entries;
}

// The entry's device, problem and candidates (the later measurement of a candidate wins).
rows::ProblemRow write_candidates(sqlite3* db, const ImportEntry& entry, ImportSummary& summary) {
  const rows::Written device = rows::ensure_device(db, entry.device);
  const rows::Written problem = rows::ensure_problem(db, entry.problem);
  summary.devices += device.changed;
  summary.problems += problem.changed;
  const rows::ProblemRow at{device.id, problem.id, entry.device, entry.problem};
  for (const auto& candidate : entry.candidates)
    summary.candidates +=
        rows::upsert_candidate(db, at, candidate, rows::Merge::keep_newer).changed;
  return at;
}

void write_entry(sqlite3* db, const ImportEntry& entry, ImportSummary& summary) {
  const rows::ProblemRow at = write_candidates(db, entry, summary);
  for (const auto& best : entry.best)
    summary.best += rows::upsert_best(db, at, best, rows::Merge::keep_newer);
}

// Like write_entry, but the bests are chosen again over every candidate now in the database.
void merge_entry(sqlite3* db, const ImportEntry& entry, ImportSummary& summary) {
  const rows::ProblemRow at = write_candidates(db, entry, summary);
  std::set<std::string> versions;
  for (const auto& candidate : entry.candidates) versions.insert(candidate.template_version);
  for (const auto& version : versions) {
    const auto incoming =
        std::find_if(entry.best.begin(), entry.best.end(),
                     [&](const rows::BestChoice& b) { return b.template_version == version; });
    summary.best +=
        rows::rechoose_best(db, at, version, incoming == entry.best.end() ? nullptr : &*incoming);
  }
}

}  // namespace

std::string json_of(const DeviceKey& device) {
  return device_json(device).dump();
}

std::string json_of(const Problem& problem) {
  return problem_json(problem).dump();
}

std::string json_of(const CandidateRecord& candidate) {
  return candidate_json(candidate).dump();
}

DeviceKey device_from_json(std::string_view json) {
  const Json document = parsed(json);
  return parse_device(Field(document, "device"));
}

Problem problem_from_json(std::string_view json) {
  const Json document = parsed(json);
  return parse_problem(Field(document, "problem"));
}

std::string json_of(const BestRecord& best) {
  return Json{{"device", device_json(best.device)},
              {"problem", problem_json(best.problem)},
              {"winner", candidate_json(best.winner)},
              {"baseline_ms", number_or_null(best.baseline_ms)},
              {"complete", best.complete},
              {"current", best.current},
              {"tuned_at", best.tuned_at}}
      .dump();
}

namespace {

// The export document of these (device, problem) pairs.
std::string export_rows(sqlite3* db, const std::vector<rows::ProblemRow>& problems) {
  Json entries = Json::array();
  for (const auto& row : problems) {
    const auto where = rows::pair_is(row.device_id, row.problem_id);
    Json candidates = Json::array();
    for (const auto& candidate : rows::select_candidates(db, where))
      candidates.push_back(candidate_json(candidate));
    Json best = Json::array();
    for (const auto& b : rows::select_bests(db, where)) best.push_back(best_entry_json(b));
    entries.push_back({{"device", device_json(row.device)},
                       {"problem", problem_json(row.problem)},
                       {"candidates", std::move(candidates)},
                       {"best", std::move(best)}});
  }
  const Json document = {{"format", kFormat}, {"version", kFormatVersion}, {"entries", entries}};
  return document.dump(2) + "\n";
}

}  // namespace

std::string TuningDb::export_json(const DbFilter& filter) const {
  return export_rows(db_, rows::select_problems(db_, rows::matching(filter)));
}

std::string TuningDb::export_json(const DbFilter& filter, const std::vector<Problem>& only) const {
  auto rows = rows::select_problems(db_, rows::matching(filter));
  std::erase_if(rows, [&](const rows::ProblemRow& row) {
    return std::find(only.begin(), only.end(), row.problem) == only.end();
  });
  return export_rows(db_, rows);
}

ImportSummary TuningDb::merge(const TuningDb& other) {
  // Through the export format: the other file's rows are checked like any import.
  const std::vector<ImportEntry> entries = parse_document(other.export_json({}));
  ImportSummary summary;
  sql::Transaction transaction(db_);
  for (const auto& entry : entries) merge_entry(db_, entry, summary);
  transaction.commit();
  return summary;
}

ImportSummary TuningDb::import_json(std::string_view json) {
  const std::vector<ImportEntry> entries = parse_document(json);
  ImportSummary summary;
  sql::Transaction transaction(db_);
  for (const auto& entry : entries) write_entry(db_, entry, summary);
  transaction.commit();
  return summary;
}

}  // namespace gemmtune
