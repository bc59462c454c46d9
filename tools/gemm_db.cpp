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
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

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
using cli::ProblemFilter;
using cli::ratio_text;
using cli::types_text;
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
  std::string device, types, dtype, scaling, accum, precision, layout, groups, group_layout,
      epilogue;
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;  // 0: not given
  std::optional<double> beta;                              // only whether it is 0 counts
};

// list --for-gpu: the GPU whose view to show.
struct ForGpuArgs {
  std::string name;  // exact name or substring, any case
  std::string cc;    // "90" or "9.0"; needed for a GPU without rows of its own
  int sms = 0;       // 0: not given
};

struct Options {
  std::string db = default_db_path().string();
  bool json = false;
  FilterArgs filter;
  ForGpuArgs for_gpu;              // list
  bool all = false;                // delete: everything
  bool all_versions = false;       // show: stale template versions too
  std::string output;              // export
  std::string shapes;              // export: only the problems of this shapes file
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
  auto* types = sub.add_option("--types", args.types, cli::kTypesHelp);
  sub.add_option("--dtype", args.dtype,
                 "One type of every operand (f32, f16, bf16; e4m3 or e5m2: A and B, with a bf16 "
                 "output, as gemm-tune's --dtype): the same as --types with one type")
      ->excludes(types);
  sub.add_option("--scaling", args.scaling, "Scaling of the operands: none, tensor, row or block");
  sub.add_option("--accum", args.accum,
                 "Only problems of this accumulation of float8 products, as gemm-tune's --accum: "
                 "precise or fast");
  sub.add_option("--precision", args.precision,
                 "Only problems computed so, as gemm-tune's --precision: exact (also every "
                 "problem that is not f32), tf32 or 3xtf32");
  sub.add_option("--layout", args.layout, "op(A) op(B): nn, nt, tn or tt");
  sub.add_option("--m", args.m, "M")->check(kPositive);
  sub.add_option("--n", args.n,
                 "N; with --groups, the mean N of a group (masked: a group's capacity), as "
                 "gemm-tune's --n")
      ->check(kPositive);
  sub.add_option("--k", args.k, "K")->check(kPositive);
  sub.add_option("--groups", args.groups,
                 "Only grouped problems of this many groups (0: only problems of one GEMM)");
  sub.add_option("--group-layout", args.group_layout,
                 "Only grouped problems of this group layout: contiguous or masked");
  sub.add_option(
      "--epilogue", args.epilogue,
      "Only problems of this epilogue, as gemm-tune's --epilogue: none, or a bias "
      "(bias, bias_n) and an activation (relu, gelu, gelu_tanh, silu), gated (swiglu, ...) "
      "and aux (the pre-activation kept), comma-separated");
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

// --dtype T means what gemm-tune's --dtype T tunes: every operand T (and f32 accumulation), but
// for float8 T, whose output is bf16 (e4m3*e4m3->bf16).
DataTypes uniform_types(const std::string& dtype) {
  GT_REQUIRE(dtype.find('*') == std::string::npos, Errc::invalid_argument,
             "--dtype names one type of every operand; mixed types go with --types ('{}')", dtype);
  return cli::problem_types({dtype}).types;
}

// Throws Error(invalid_argument) for unknown types, scaling or layout.
ProblemFilter to_filter(const FilterArgs& args) {
  ProblemFilter filter;
  DbFilter& f = filter.db;
  if (!args.device.empty()) f.device = args.device;
  if (!args.types.empty()) f.types = cli::problem_types({args.types}).types;
  if (!args.dtype.empty()) f.types = uniform_types(args.dtype);
  if (!args.scaling.empty()) filter.scaling = parse_scaling(args.scaling);
  if (!args.accum.empty()) filter.accumulation = parse_accumulation(args.accum);
  // The database keys fast problems (tensor or row scaled float8 alone); precise is every other.
  if (filter.accumulation == Accumulation::fast) f.accumulation = Accumulation::fast;
  // Every problem has an epilogue in the database's key (none included): it filters there.
  if (!args.epilogue.empty()) f.epilogue = parse_epilogue(args.epilogue);
  // So has a precision (exact included).
  if (!args.precision.empty()) f.precision = parse_precision(args.precision);
  if (!args.layout.empty()) {
    std::string layout = args.layout;
    std::transform(layout.begin(), layout.end(), layout.begin(),
                   [](unsigned char ch) { return char(std::tolower(ch)); });
    GT_REQUIRE(layout == "nn" || layout == "nt" || layout == "tn" || layout == "tt",
               Errc::invalid_argument, "unknown layout '{}' (expected nn, nt, tn or tt)",
               args.layout);
    f.layout = layout;
  }
  if (!args.groups.empty()) f.groups = cli::groups_of(args.groups);
  if (!args.group_layout.empty()) {
    f.group_layout = parse_group_layout(args.group_layout);
    GT_REQUIRE(f.groups.value_or(1) > 0, Errc::invalid_argument,
               "--group-layout is of grouped problems: not with --groups 0 (one GEMM)");
  }
  // --n with --groups is what gemm-tune was given: the mean N of a group, or a masked group's
  // capacity (G x either is N).
  const int64_t n = cli::columns_of(args.n, f.groups.value_or(0));
  f.m = given(args.m), f.n = given(n), f.k = given(args.k);
  f.lda = given(args.lda), f.ldb = given(args.ldb), f.ldc = given(args.ldc);
  if (args.beta) f.reads_c = *args.beta != 0;
  return filter;
}

bool is_empty(const ProblemFilter& filter) {
  const DbFilter& f = filter.db;
  return !f.device && !f.types && !f.layout && !f.m && !f.n && !f.k && !f.lda && !f.ldb && !f.ldc &&
         !f.reads_c && !f.groups && !f.group_layout && !f.epilogue && !f.precision &&
         !filter.scaling && !filter.accumulation;
}

template <class Rows, class ProblemOf>
void keep_matching(Rows& rows, const ProblemFilter& filter, ProblemOf problem_of) {
  std::erase_if(rows, [&](const auto& row) { return !filter.matches(problem_of(row)); });
}

// export and delete work on DbFilter alone, which has no scaling and takes only fast
// accumulation: with --scaling or --accum precise they go ahead only when every problem the rest
// of the filter matches has that scaling and accumulation.
void require_covered(const TuningDb& db, const ProblemFilter& filter) {
  if (!filter.scaling && (!filter.accumulation || filter.db.accumulation)) return;
  for (const auto& [device, problem] : db.problems(filter.db)) {
    if (filter.matches(problem)) continue;
    const bool scaling = filter.scaling && problem.scaling != *filter.scaling;
    GT_THROW(Errc::invalid_argument,
             "{}: export and delete cannot yet leave out {} ({}); narrow the other filters",
             scaling ? fmt::format("--scaling {}", to_string(*filter.scaling))
                     : fmt::format("--accum {}", to_string(*filter.accumulation)),
             problem.describe(),
             scaling ? fmt::format("scaling {}", to_string(problem.scaling))
                     : fmt::format("accumulation {}", to_string(problem.accumulation)));
  }
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

// ---------------------------------------------------------------------------------------------
// list --for-gpu

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  return text;
}

// "90" or "9.0".
int parse_cc(const std::string& text) {
  int cc = 0, minor = 0;
  const char* end = text.data() + text.size();
  auto read = std::from_chars(text.data(), end, cc);
  if (read.ec == std::errc() && read.ptr != end && *read.ptr == '.') {
    const char* digits = read.ptr + 1;
    read = std::from_chars(digits, end, minor);
    if (read.ptr != digits + 1) read.ec = std::errc::invalid_argument;  // one digit: 9.0, 8.6
    cc = cc * 10 + minor;
  }
  GT_REQUIRE(read.ec == std::errc() && read.ptr == end && cc > 0, Errc::invalid_argument,
             "--cc '{}': expected a compute capability such as 90 or 9.0", text);
  return cc;
}

std::string model_text(const DeviceKey& d) {
  return fmt::format("{} (cc {}, {} SMs)", d.name, d.cc, d.sms);
}

// The GPU of --for-gpu, as the library on this machine would see it: the model (name, compute
// capability, SMs) of the rows whose name is the one given, else contains it; --cc and --sms
// choose among models. A GPU with no rows of its own needs --cc. The driver and NVRTC are this
// machine's (where it has no driver: the one its own rows under this NVRTC were last tuned with).
DeviceKey gpu_for(const std::vector<BestRecord>& rows, const ForGpuArgs& args, const Software& here,
                  const std::string& db) {
  const int cc = args.cc.empty() ? 0 : parse_cc(args.cc);  // 0: not given
  const std::string wanted = lower(args.name);
  std::vector<DeviceKey> models;
  for (const bool exact : {true, false}) {
    for (const BestRecord& row : rows) {
      const DeviceKey model{row.device.name, row.device.cc, row.device.sms, 0, ""};
      const std::string name = lower(model.name);
      if ((exact ? name == wanted : name.find(wanted) != std::string::npos) &&
          (cc == 0 || model.cc == cc) && (args.sms == 0 || model.sms == args.sms) &&
          std::find(models.begin(), models.end(), model) == models.end())
        models.push_back(model);
    }
    if (!models.empty()) break;
  }
  if (models.size() > 1) {
    std::string all;
    for (const auto& m : models) all += (all.empty() ? "" : ", ") + model_text(m);
    GT_THROW(Errc::invalid_argument,
             "--for-gpu '{}' matches several GPUs in {}: {}; give the whole name, --cc or --sms",
             args.name, db, all);
  }
  GT_REQUIRE(!models.empty() || cc > 0, Errc::invalid_argument,
             "--for-gpu '{}': no GPU of that name has rows in {}; give its compute capability "
             "(--cc 90) to see which rows of other GPUs it would use",
             args.name, db);
  DeviceKey gpu = models.empty() ? DeviceKey{args.name, cc, args.sms, 0, ""} : models.front();
  gpu.driver = here.driver;
  gpu.nvrtc = here.nvrtc;
  if (gpu.driver > 0) return gpu;
  const BestRecord* latest = nullptr;
  for (const BestRecord& row : rows)
    if (row.current && row.device.name == gpu.name && row.device.cc == gpu.cc &&
        row.device.sms == gpu.sms && row.device.nvrtc == here.nvrtc &&
        (!latest || row.tuned_at > latest->tuned_at))
      latest = &row;
  if (latest) gpu.driver = latest->device.driver;
  return gpu;
}

bool listed_before(const Problem& a, const Problem& b) {
  auto key = [](const Problem& p) {
    return std::make_tuple(p.types.name(), std::string(to_string(p.scaling)), p.layout(), p.m, p.n,
                           p.k, p.lda, p.ldb, p.ldc, p.align, p.reads_c, p.groups, p.group_layout,
                           p.accumulation, p.epilogue.name(), p.precision);
  };
  return key(a) < key(b);
}

std::string source_text(const TieredBest& used, const DeviceKey& gpu) {
  const DeviceKey& d = used.best.device;
  switch (used.tier) {
    case BestTier::tuned:
      return "tuned";
    case BestTier::other_version:
      return fmt::format("other version (driver {}, NVRTC {})", d.driver, d.nvrtc);
    case BestTier::sibling:
      return d.name == gpu.name ? fmt::format("sibling (tuned on {} with {} SMs)", d.name, d.sms)
                                : fmt::format("sibling (tuned on {})", d.name);
  }
  return "?";
}

// Per problem, the row the library uses on the GPU and why (rank_bests_for: its own row, else a
// sibling's of the same compute capability, the most recently tuned first).
int list_for_gpu(const TuningDb& db, const ProblemFilter& filter, const Options& opts,
                 const Software& here) {
  const DeviceKey gpu = gpu_for(db.list({}), opts.for_gpu, here, opts.db);
  auto rows = db.list(filter.db);
  keep_matching(rows, filter, [](const BestRecord& b) { return b.problem; });
  std::vector<Problem> problems;
  std::unordered_map<Problem, std::vector<BestRecord>, ProblemHash> rows_of;
  for (auto& row : rows) {
    auto [at, added] = rows_of.try_emplace(row.problem);
    if (added) problems.push_back(row.problem);
    at->second.push_back(std::move(row));
  }
  std::sort(problems.begin(), problems.end(), listed_before);
  std::vector<TieredBest> used;
  size_t unserved = 0;
  for (const Problem& p : problems) {
    auto ranked = rank_bests_for(gpu, p, rows_of[p]);
    if (ranked.empty())
      ++unserved;
    else
      used.push_back(std::move(ranked.front()));
  }
  if (opts.json) {
    Json out = Json::array();
    for (const auto& u : used) {
      Json row = best_json(u.best, here);
      row["source"] = std::string(to_string(u.tier));
      out.push_back(std::move(row));
    }
    print_json(out);
    return 0;
  }
  const std::string who =
      fmt::format("{} (cc {}.{}{})", gpu.name, gpu.cc / 10, gpu.cc % 10,
                  gpu.sms > 0 ? fmt::format(", {} SMs", gpu.sms) : std::string());
  if (used.empty()) {
    std::cout << fmt::format(
        "no row serves {}: nothing matching was tuned on a GPU of its compute capability\n", who);
    return 0;
  }
  std::cout << fmt::format("what the library uses on {} under driver {} and NVRTC {}:\n", who,
                           gpu.driver > 0 ? std::to_string(gpu.driver) : "unknown", gpu.nvrtc);
  cli::Table table({"types", "layout", "shape", "source", "family", "kernel", "time ms", "TFLOP/s",
                    "cuBLAS ms", "ratio", "tuned_at"});
  for (const auto& u : used) {
    const BestRecord& b = u.best;
    table.add({types_text(b.problem), b.problem.layout(), cli::shape_text(b.problem),
               source_text(u, gpu), b.winner.config.family, b.winner.kernel_name,
               cli::format_ms(b.winner.median_ms), tflops_text(b.winner.tflops),
               cli::format_ms(b.baseline_ms), ratio_text(cublas_ratio(b)), b.tuned_at});
  }
  std::cout << table.render()
            << fmt::format(
                   "tuned: its own row; other version: its own row, tuned under another driver or "
                   "NVRTC; sibling: it has no row of its own, so the library uses the most "
                   "recently tuned row of another GPU of compute capability {}.{} until gemm-tune "
                   "tunes the problem on it\n",
                   gpu.cc / 10, gpu.cc % 10);
  if (unserved)
    std::cout << fmt::format(
        "{} problem{} tuned only on GPUs of other compute capabilities, or with stale rows "
        "only, not listed: the library takes the nearest tuned shape or its defaults there\n",
        unserved, unserved == 1 ? "" : "s");
  return 0;
}

// ---------------------------------------------------------------------------------------------
// list

int list_bests(const Options& opts) {
  const ProblemFilter filter = to_filter(opts.filter);
  const auto db = open_existing(opts.db);
  const Software here = this_software();
  if (!opts.for_gpu.name.empty()) return list_for_gpu(*db, filter, opts, here);
  auto bests = db->list(filter.db);
  keep_matching(bests, filter, [](const BestRecord& b) { return b.problem; });
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
    table.add({b.device.name, types_text(b.problem), b.problem.layout(), cli::shape_text(b.problem),
               b.winner.config.family, b.winner.kernel_name, cli::format_ms(b.winner.median_ms),
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
  const ProblemFilter filter = to_filter(opts.filter);
  const auto db = open_existing(opts.db);
  auto found = db->problems(filter.db);
  keep_matching(found, filter, [](const auto& pair) { return pair.second; });
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

// The problems of a shapes file, as gemm-tune tunes its lines (GEMMTUNE_RECORD writes one).
std::vector<Problem> workload_problems(const std::string& shapes) {
  std::vector<Problem> out;
  for (const auto& line : cli::read_shapes_file(shapes))
    out.push_back(cli::problem_of_line(line, cli::TypeArgs{}, "nn", 0.0f));
  return out;
}

int export_db(const Options& opts) {
  const ProblemFilter filter = to_filter(opts.filter);
  const auto db = open_existing(opts.db);
  require_covered(*db, filter);
  const std::string text = opts.shapes.empty()
                               ? db->export_json(filter.db)
                               : db->export_json(filter.db, workload_problems(opts.shapes));
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

// Problems per data types (and scaling, where not none), each problem once whatever its GPUs.
std::vector<std::pair<std::string, int64_t>> problems_by_types(const TuningDb& db) {
  std::unordered_set<Problem, ProblemHash> seen;
  std::map<std::string, int64_t> counts;
  for (const auto& [device, problem] : db.problems({}))
    if (seen.insert(problem).second) ++counts[types_text(problem)];
  return {counts.begin(), counts.end()};
}

int show_stats(const Options& opts) {
  const auto db = open_existing(opts.db);
  const DbStats s = db->stats();
  const auto by_types = problems_by_types(*db);
  if (opts.json) {
    print_json({{"database", opts.db},
                {"schema_version", s.schema_version},
                {"file_bytes", s.file_bytes},
                {"devices", s.devices},
                {"problems", s.problems},
                {"by_types", counts_json(by_types)},
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
  table.add({"problems", fmt::format("{} ({})", s.problems, counts_text(by_types))});
  table.add({"candidates", fmt::format("{} ({})", s.candidates, counts_text(s.by_status))});
  table.add({"families", counts_text(s.by_family)});
  table.add({"best rows", fmt::format("{} ({} stale)", s.best, s.best_stale)});
  std::cout << table.render();
  return 0;
}

int delete_problems(const Options& opts) {
  const ProblemFilter filter = to_filter(opts.filter);
  GT_REQUIRE(opts.all || !is_empty(filter), Errc::invalid_argument,
             "delete needs a filter (--device, --types, --scaling, --accum, --precision, --layout, "
             "--m, --n, --k, --groups, --group-layout, --epilogue, --beta) or --all");
  GT_REQUIRE(!opts.all || is_empty(filter), Errc::invalid_argument,
             "delete takes filters or --all, not both");
  const auto db = open_existing(opts.db);
  require_covered(*db, filter);
  const int64_t deleted = db->remove(filter.db);
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
  const ProblemFilter filter = to_filter(opts.filter);
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
  auto* for_gpu =
      sub.list
          ->add_option("--for-gpu", opts.for_gpu.name,
                       "Per problem, the row the library uses on this GPU (its name, or part of "
                       "it) and why: its own, or a sibling's of the same compute capability")
          ->excludes(sub.list->get_option("--device"));
  sub.list
      ->add_option("--cc", opts.for_gpu.cc,
                   "With --for-gpu: its compute capability (90 or 9.0), needed when it has no "
                   "rows of its own")
      ->needs(for_gpu);
  sub.list
      ->add_option("--sms", opts.for_gpu.sms,
                   "With --for-gpu: its SM count, where GPUs of one name differ")
      ->needs(for_gpu)
      ->check(kPositive);

  sub.show = app.add_subcommand("show", "Every candidate of one problem and why the winner won");
  add_filter_options(*sub.show, opts.filter);
  add_ld_options(*sub.show, opts.filter);
  for (const char* size : {"--m", "--n", "--k"}) sub.show->get_option(size)->required();
  sub.show->add_flag("--all-versions", opts.all_versions, "Include stale template versions");

  sub.exporter = app.add_subcommand("export", "Write the database (or a filtered part) as JSON");
  add_filter_options(*sub.exporter, opts.filter);
  sub.exporter->add_option("--output,-o", opts.output, "File to write (default: stdout)");
  sub.exporter->add_option(
      "--shapes", opts.shapes,
      "Only the problems of this shapes file, as gemm-tune tunes its lines: the rows a recorded "
      "workload (GEMMTUNE_RECORD) needs, to ship with a model");

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
