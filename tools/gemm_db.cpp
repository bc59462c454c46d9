// gemm-db: inspect the tuning database. What was tuned on which GPU, every candidate of a
// problem and why the winner won; export, import (merge), statistics, delete.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "db_report.hpp"
#include "db_summary.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/device.hpp"
#include "gemmtune/runtime/driver.hpp"

namespace {

using namespace gemmtune;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;
using cli::cublas_ratio;
using cli::is_winner;
using cli::ratio_text;
using cli::why_it_won;

// ---------------------------------------------------------------------------------------------
// Output

// Unknown values are -1 in the records and "-" on screen.
std::string tflops_text(double tflops) {
  return tflops < 0 ? "-" : fmt::format("{:.1f}", tflops);
}
std::string count_text(int64_t count) {
  return count < 0 ? "-" : std::to_string(count);
}
std::string error_text(double error) {
  return error < 0 ? "-" : fmt::format("{:.1e}", error);
}

std::string device_text(const DeviceKey& d) {
  return fmt::format("{} (cc {}, {} SMs, driver {}, NVRTC {})", d.name, d.cc, d.sms, d.driver,
                     d.nvrtc);
}

void print_json(const Json& json) {
  std::cout << json.dump(2) << '\n';
}

// ---------------------------------------------------------------------------------------------
// Options

struct FilterArgs {
  std::string device, dtype, layout;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;  // 0: not given
  std::optional<double> beta;                              // only whether it is 0 counts
};

struct Options {
  std::string db = default_db_path().string();
  bool json = false;
  FilterArgs filter;
  bool all = false;                // delete: everything
  bool all_versions = false;       // show: stale template versions too
  std::string output;              // export
  std::string input;               // import
  std::string html;                // report
  std::vector<std::string> merge;  // merge: OUT IN...
};

// "--m -5: must be a positive integer" (CLI11's own range check prints a 300-digit bound).
const CLI::Validator kPositive(
    [](std::string& text) -> std::string {
      int64_t value = 0;
      const char* end = text.data() + text.size();
      const auto [stop, error] = std::from_chars(text.data(), end, value);
      if (error != std::errc() || stop != end || value < 1)
        return fmt::format("must be a positive integer (got '{}')", text);
      return {};
    },
    "POSITIVE");

void add_filter_options(CLI::App& sub, FilterArgs& args) {
  sub.add_option("--device", args.device, "Substring of the device name (any case)");
  sub.add_option("--dtype", args.dtype, "f32, f16 or bf16");
  sub.add_option("--layout", args.layout, "op(A) op(B): nn, nt, tn or tt");
  sub.add_option("--m", args.m, "M")->check(kPositive);
  sub.add_option("--n", args.n, "N")->check(kPositive);
  sub.add_option("--k", args.k, "K")->check(kPositive);
  sub.add_option("--beta", args.beta,
                 "Only problems that read C (not 0: tuned with beta != 0) or that do not (0)");
}

void add_ld_options(CLI::App& sub, FilterArgs& args) {
  sub.add_option("--lda", args.lda, "Leading dimension of A")->check(kPositive);
  sub.add_option("--ldb", args.ldb, "Leading dimension of B")->check(kPositive);
  sub.add_option("--ldc", args.ldc, "Leading dimension of C")->check(kPositive);
}

std::optional<int64_t> given(int64_t size) {
  return size > 0 ? std::optional<int64_t>(size) : std::nullopt;
}

// Throws Error(invalid_argument) for an unknown dtype or layout.
DbFilter to_filter(const FilterArgs& args) {
  DbFilter f;
  if (!args.device.empty()) f.device = args.device;
  if (!args.dtype.empty()) f.types = parse_data_types(args.dtype);
  if (!args.layout.empty()) {
    std::string layout = args.layout;
    std::transform(layout.begin(), layout.end(), layout.begin(),
                   [](unsigned char ch) { return char(std::tolower(ch)); });
    GT_REQUIRE(layout == "nn" || layout == "nt" || layout == "tn" || layout == "tt",
               Errc::invalid_argument, "unknown layout '{}' (expected nn, nt, tn or tt)",
               args.layout);
    f.layout = layout;
  }
  f.m = given(args.m), f.n = given(args.n), f.k = given(args.k);
  f.lda = given(args.lda), f.ldb = given(args.ldb), f.ldc = given(args.ldc);
  if (args.beta) f.reads_c = *args.beta != 0;
  return f;
}

bool is_empty(const DbFilter& f) {
  return !f.device && !f.types && !f.layout && !f.m && !f.n && !f.k && !f.lda && !f.ldb && !f.ldc &&
         !f.reads_c;
}

// ---------------------------------------------------------------------------------------------
// Opening the database

// Subcommands that read must not create a database: say plainly that there is none yet.
std::unique_ptr<TuningDb> open_existing(const fs::path& path) {
  if (!fs::exists(path))
    throw_error(Errc::database,
                fmt::format("no tuning database at {} yet: nothing has been tuned there (run "
                            "gemm-tune first, or pass --db or set GEMMTUNE_DB)",
                            path.string()));
  // A writable file is opened read-write, so that an older schema is upgraded on the way.
  const auto mode =
      ::access(path.c_str(), W_OK) == 0 ? TuningDb::Mode::read_write : TuningDb::Mode::read_only;
  return std::make_unique<TuningDb>(path, mode);
}

// ---------------------------------------------------------------------------------------------
// list

// The CUDA driver and NVRTC of this machine, to tell which results were tuned under others
// (driver 0: unknown, no driver here).
struct Software {
  int driver = 0;
  std::string nvrtc;
};

Software this_software() {
  Software here;
  here.nvrtc = nvrtc_version();
  if (cu::available()) cu::api().cuDriverGetVersion(&here.driver);
  return here;
}

// current: what the library uses on that GPU here; other version: tuned under another driver or
// NVRTC than this machine's, used for that exact problem only until gemm-tune re-tunes it there;
// stale: other templates, never used; not in this build: a family this build lacks (a test's or a
// newer version's), kept and exported but never served here.
std::string state_of(const BestRecord& best, const Software& here) {
  if (!family_named(best.winner.config.family)) return "not in this build";
  if (!best.current) return "stale";
  const bool same =
      best.device.nvrtc == here.nvrtc && (here.driver == 0 || best.device.driver == here.driver);
  return same ? "current" : "other version";
}

Json best_json(const BestRecord& best, const Software& here) {
  Json json = Json::parse(json_of(best));
  const double ratio = cublas_ratio(best);
  json["cublas_ratio"] = ratio < 0 ? Json(nullptr) : Json(ratio);
  json["state"] = state_of(best, here);
  return json;
}

int list_bests(const Options& opts) {
  const DbFilter filter = to_filter(opts.filter);
  const auto bests = open_existing(opts.db)->list(filter);
  const Software here = this_software();
  if (opts.json) {
    Json out = Json::array();
    for (const auto& best : bests) out.push_back(best_json(best, here));
    print_json(out);
    return 0;
  }
  if (bests.empty()) {
    std::cout << "no best configurations match\n";
    return 0;
  }
  cli::Table table({"device", "types", "layout", "shape", "family", "kernel", "time ms", "TFLOP/s",
                    "cuBLAS ms", "ratio", "state", "tuned_at"});
  for (const auto& b : bests)
    table.add({b.device.name, b.problem.types.name(), b.problem.layout(),
               b.problem.shape() + b.problem.beta_mark(), b.winner.config.family,
               b.winner.kernel_name, cli::format_ms(b.winner.median_ms),
               tflops_text(b.winner.tflops), cli::format_ms(b.baseline_ms),
               ratio_text(cublas_ratio(b)), state_of(b, here), b.tuned_at});
  std::cout << table.render()
            << "ratio: cuBLAS time / ours (above 1.00x: faster than cuBLAS); stale: measured "
               "with other templates, not used\n";
  const bool others = std::any_of(bests.begin(), bests.end(), [&](const BestRecord& b) {
    return state_of(b, here) == "other version";
  });
  if (others)
    std::cout << fmt::format(
        "other version: tuned under another CUDA driver or NVRTC than this machine's (driver {}, "
        "NVRTC {}): used for that exact problem on that GPU until gemm-tune tunes it again there\n",
        here.driver > 0 ? std::to_string(here.driver) : "unknown", here.nvrtc);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// show

cli::Table candidate_table(const std::vector<CandidateRecord>& candidates,
                           const std::optional<BestRecord>& best) {
  cli::Table table({"rank", "best", "kernel", "status", "regs", "spills", "median ms", "min ms",
                    "max ms", "TFLOP/s", "max error", "message"});
  int rank = 0;
  for (const auto& c : candidates) {
    const bool ok = c.status == CandidateStatus::ok;
    table.add({ok ? std::to_string(++rank) : "-", is_winner(c, best) ? "*" : "", c.kernel_name,
               std::string(to_string(c.status)), count_text(c.registers), count_text(c.spills),
               cli::format_ms(c.median_ms), cli::format_ms(c.min_ms), cli::format_ms(c.max_ms),
               tflops_text(c.tflops), error_text(c.max_error), c.message});
  }
  return table;
}

// `stale`: candidates measured with other templates, left out (after a template change every
// earlier result of its family is stale; without a word, a tuned problem looked untuned).
void print_problem(const DeviceKey& device, const Problem& problem,
                   const std::vector<CandidateRecord>& candidates,
                   const std::optional<BestRecord>& best, size_t stale) {
  std::cout << device_text(device) << '\n' << problem.describe() << "\n\n";
  std::cout << candidate_table(candidates, best).render() << '\n';
  std::cout << (best ? why_it_won(*best, candidates) : "no current best yet") << "\n";
  if (stale)
    std::cout << fmt::format(
        "{} candidate{} measured with other templates left out (--all-versions shows them)\n",
        stale, stale == 1 ? "" : "s");
  std::cout << '\n';
}

Json problem_json(const DeviceKey& device, const Problem& problem,
                  const std::vector<CandidateRecord>& candidates,
                  const std::optional<BestRecord>& best) {
  Json list = Json::array();
  for (const auto& c : candidates) list.push_back(Json::parse(json_of(c)));
  return {{"device", Json::parse(json_of(device))},
          {"problem", Json::parse(json_of(problem))},
          {"candidates", std::move(list)},
          {"best", best ? best_json(*best, this_software()) : Json(nullptr)},
          {"why", best ? why_it_won(*best, candidates) : ""}};
}

int show_problem(const Options& opts) {
  const DbFilter filter = to_filter(opts.filter);
  const auto db = open_existing(opts.db);
  const auto found = db->problems(filter);
  if (found.empty())
    throw_error(Errc::database,
                fmt::format("no candidates recorded in {} for {}x{}x{} matching the filters",
                            opts.db, opts.filter.m, opts.filter.n, opts.filter.k));
  Json out = Json::array();
  for (const auto& [device, problem] : found) {
    const auto candidates = db->candidates(device, problem, opts.all_versions);
    const auto best = db->best(device, problem);
    if (opts.json)
      out.push_back(problem_json(device, problem, candidates, best));
    else
      print_problem(device, problem, candidates, best,
                    db->candidates(device, problem, true).size() - candidates.size());
  }
  if (opts.json) print_json(out);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// export, import

int export_db(const Options& opts) {
  const DbFilter filter = to_filter(opts.filter);
  const std::string text = open_existing(opts.db)->export_json(filter);
  if (opts.output.empty()) {
    std::cout << text;
    return 0;
  }
  std::ofstream out(opts.output, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  GT_REQUIRE(out, Errc::io, "cannot write {}", opts.output);
  std::cerr << fmt::format("exported {} to {} ({} bytes)\n", opts.db, opts.output, text.size());
  return 0;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  GT_REQUIRE(in, Errc::invalid_argument, "cannot read {}", path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A failed import into a database that did not exist must not leave an empty one behind.
void remove_database_files(const fs::path& db) {
  std::error_code ignored;
  for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix, ignored);
}

ImportSummary import_into(const fs::path& db, const std::string& json) {
  const bool existed = fs::exists(db);
  try {
    return TuningDb(db).import_json(json);
  } catch (...) {
    if (!existed) remove_database_files(db);
    throw;
  }
}

int import_file(const Options& opts) {
  const std::string text = read_text(opts.input);
  ImportSummary s;
  try {
    s = import_into(opts.db, text);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("cannot import {}: {}", opts.input, e.what()));
  }
  if (opts.json) {
    print_json({{"devices", s.devices},
                {"problems", s.problems},
                {"candidates", s.candidates},
                {"best", s.best}});
    return 0;
  }
  std::cout << fmt::format(
      "imported {} into {}: {} devices, {} problems, {} candidates and {} "
      "best rows added or updated\n",
      opts.input, opts.db, s.devices, s.problems, s.candidates, s.best);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// merge

// Every input is opened (and so checked) before anything is written.
std::vector<std::unique_ptr<TuningDb>> open_inputs(const fs::path& output,
                                                   const std::vector<std::string>& inputs) {
  std::vector<std::unique_ptr<TuningDb>> out;
  for (const auto& input : inputs) {
    std::error_code ec;
    GT_REQUIRE(!fs::equivalent(input, output, ec), Errc::invalid_argument,
               "cannot merge {} into itself: the output is also an input", input);
    try {
      out.push_back(open_existing(input));
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("cannot merge {}: {}", input, e.what()));
    }
  }
  return out;
}

int merge_databases(const Options& opts) {
  GT_REQUIRE(opts.merge.size() >= 2, Errc::invalid_argument,
             "merge needs the output and at least one input: OUT IN...");
  const fs::path output = opts.merge[0];
  const std::vector<std::string> inputs(opts.merge.begin() + 1, opts.merge.end());
  const auto sources = open_inputs(output, inputs);
  TuningDb target(output);
  Json per_input = Json::array();
  ImportSummary total;
  for (size_t i = 0; i < sources.size(); ++i) {
    const ImportSummary s = target.merge(*sources[i]);
    total.devices += s.devices;
    total.problems += s.problems;
    total.candidates += s.candidates;
    total.best += s.best;
    per_input.push_back({{"input", inputs[i]},
                         {"devices", s.devices},
                         {"problems", s.problems},
                         {"candidates", s.candidates},
                         {"best", s.best}});
    if (!opts.json)
      std::cout << fmt::format(
          "merged {}: {} devices, {} problems, {} candidates, {} best rows added or updated\n",
          inputs[i], s.devices, s.problems, s.candidates, s.best);
  }
  const DbStats stats = target.stats();
  if (opts.json) {
    print_json({{"output", output.string()},
                {"inputs", per_input},
                {"candidates", stats.candidates},
                {"best", stats.best}});
    return 0;
  }
  std::cout << fmt::format("{} now holds {} problems, {} candidates, {} best rows\n",
                           output.string(), stats.problems, stats.candidates, stats.best);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// stats, delete

Json counts_json(const std::vector<std::pair<std::string, int64_t>>& counts) {
  Json out = Json::object();
  for (const auto& [name, count] : counts) out[name] = count;
  return out;
}

std::string counts_text(const std::vector<std::pair<std::string, int64_t>>& counts) {
  std::string out;
  for (const auto& [name, count] : counts)
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name.empty() ? "(none)" : name, count);
  return out.empty() ? "-" : out;
}

int show_stats(const Options& opts) {
  const DbStats s = open_existing(opts.db)->stats();
  if (opts.json) {
    print_json({{"database", opts.db},
                {"schema_version", s.schema_version},
                {"file_bytes", s.file_bytes},
                {"devices", s.devices},
                {"problems", s.problems},
                {"candidates", s.candidates},
                {"by_status", counts_json(s.by_status)},
                {"by_family", counts_json(s.by_family)},
                {"best", s.best},
                {"best_stale", s.best_stale}});
    return 0;
  }
  cli::Table table({"statistic", "value"});
  table.add({"database", opts.db});
  table.add({"schema version", std::to_string(s.schema_version)});
  table.add({"size", fmt::format("{} bytes", s.file_bytes)});
  table.add({"devices", std::to_string(s.devices)});
  table.add({"problems", std::to_string(s.problems)});
  table.add({"candidates", fmt::format("{} ({})", s.candidates, counts_text(s.by_status))});
  table.add({"families", counts_text(s.by_family)});
  table.add({"best rows", fmt::format("{} ({} stale)", s.best, s.best_stale)});
  std::cout << table.render();
  return 0;
}

int delete_problems(const Options& opts) {
  const DbFilter filter = to_filter(opts.filter);
  GT_REQUIRE(opts.all || !is_empty(filter), Errc::invalid_argument,
             "delete needs a filter (--device, --dtype, --layout, --m, --n, --k) or --all");
  GT_REQUIRE(!opts.all || is_empty(filter), Errc::invalid_argument,
             "delete takes filters or --all, not both");
  const int64_t deleted = open_existing(opts.db)->remove(filter);
  if (opts.json)
    print_json({{"deleted", deleted}});
  else
    std::cout << fmt::format("deleted {} tuned problems with their candidates and best rows\n",
                             deleted);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// report

int write_report(const Options& opts) {
  const DbFilter filter = to_filter(opts.filter);
  cli::ReportCounts counts;
  const std::string page = cli::html_report(*open_existing(opts.db), filter, counts);
  std::ofstream out(opts.html, std::ios::binary | std::ios::trunc);
  out << page;
  out.close();
  GT_REQUIRE(out, Errc::io, "cannot write {}", opts.html);
  if (opts.json)
    print_json({{"html", opts.html},
                {"gpus", counts.gpus},
                {"problems", counts.problems},
                {"candidates", counts.candidates},
                {"charts", counts.charts}});
  else
    std::cout << fmt::format("wrote {}: {} GPUs, {} problems, {} candidates, {} charts\n",
                             opts.html, counts.gpus, counts.problems, counts.candidates,
                             counts.charts);
  return 0;
}

// ---------------------------------------------------------------------------------------------
// main

struct Subcommands {
  CLI::App *list, *show, *exporter, *importer, *merger, *stats, *remover, *report;
};

Subcommands add_subcommands(CLI::App& app, Options& opts) {
  Subcommands sub{};
  sub.list = app.add_subcommand("list", "Best configurations, filtered");
  add_filter_options(*sub.list, opts.filter);
  add_ld_options(*sub.list, opts.filter);

  sub.show = app.add_subcommand("show", "Every candidate of one problem and why the winner won");
  add_filter_options(*sub.show, opts.filter);
  add_ld_options(*sub.show, opts.filter);
  for (const char* size : {"--m", "--n", "--k"}) sub.show->get_option(size)->required();
  sub.show->add_flag("--all-versions", opts.all_versions, "Include stale template versions");

  sub.exporter = app.add_subcommand("export", "Write the database (or a filtered part) as JSON");
  add_filter_options(*sub.exporter, opts.filter);
  sub.exporter->add_option("--output,-o", opts.output, "File to write (default: stdout)");

  sub.importer = app.add_subcommand("import", "Merge a JSON export into the database");
  sub.importer->add_option("file", opts.input, "JSON file written by gemm-db export")
      ->required()
      ->check(CLI::ExistingFile);

  sub.merger = app.add_subcommand(
      "merge",
      "Merge databases into OUT (created if needed): every candidate, the best chosen again");
  sub.merger->add_option("databases", opts.merge, "OUT IN... (tuning databases)")
      ->required()
      ->expected(2, -1);

  sub.stats = app.add_subcommand("stats", "Counts, file size and schema version");

  sub.remover = app.add_subcommand("delete", "Delete matching problems with their results");
  add_filter_options(*sub.remover, opts.filter);
  sub.remover->add_flag("--all", opts.all, "Delete everything");

  sub.report = app.add_subcommand("report", "One self-contained HTML page with plots, per GPU");
  add_filter_options(*sub.report, opts.filter);
  sub.report->add_option("--html", opts.html, "The page to write")->required();
  return sub;
}

int run(const Subcommands& sub, const Options& opts) {
  if (sub.list->parsed()) return list_bests(opts);
  if (sub.show->parsed()) return show_problem(opts);
  if (sub.exporter->parsed()) return export_db(opts);
  if (sub.importer->parsed()) return import_file(opts);
  if (sub.merger->parsed()) return merge_databases(opts);
  if (sub.stats->parsed()) return show_stats(opts);
  if (sub.remover->parsed()) return delete_problems(opts);
  if (sub.report->parsed()) return write_report(opts);
  GT_THROW(
      Errc::invalid_argument,
      "a subcommand is required: list, show, export, import, merge, stats, delete or report (see "
      "gemm-db --help)");
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  CLI::App app{
      "gemm-db: inspect the gemmtune tuning database: what was tuned, every candidate, "
      "why the winner won; export, import, merge"};
  app.add_option("--db", opts.db, "Database file (GEMMTUNE_DB)")->capture_default_str();
  app.add_flag("--json", opts.json, "Print JSON, for scripts");
  app.fallthrough();  // --db and --json may follow the subcommand too
  const Subcommands sub = add_subcommands(app, opts);
  if (int rc = cli::parse("gemm-db", app, argc, argv); rc >= 0) return rc;
  return cli::guarded_main("gemm-db", [&] { return run(sub, opts); });
}
