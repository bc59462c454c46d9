// gemm-tune: tune GEMM shapes on this GPU, see the winner beside cuBLAS, store it.
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/driver.hpp"
#include "gemmtune/tuner/shard.hpp"
#include "gemmtune/tuner/tuner.hpp"
#include "queue_cli.hpp"

namespace gt = gemmtune;
using nlohmann::json;

namespace {

struct Args {
  int64_t m = 0, n = 0, k = 0, lda = 0, ldb = 0, ldc = 0;
  gt::cli::TypeArgs types;  // --dtype, --dtype-b, --out, --scaling, --accum, --groups, ...
  std::string layout = "nn";
  float alpha = 1.0f, beta = 0.0f;
  std::string db, budget, shapes, arch, families, devices, shard;
  int top = 5;
  bool json = false, force = false, dry_run = false, list_only = false, no_baseline = false,
       exhaustive = false;
  bool serve = false, status = false, once = false, retry_failed = false;
  int64_t queue_id = 0;  // 0: any entry
  double poll = 1.0;
  double timeout = 60;
  double margin = gt::SearchSettings{}.stop_margin;
  unsigned threads = 0;
  int device = 0;
  uint64_t seed = 1;
};

// The tuning daemon: processes with GEMMTUNE_TUNE=background queue their untuned problems.
void add_serve_options(CLI::App& app, Args& a) {
  app.add_flag("--serve", a.serve,
               "Run as the tuning daemon: tune the problems that processes queue in the database "
               "(GEMMTUNE_TUNE=background), the most costly first, each within --budget "
               "(default 2m), on --device or --devices, until SIGINT or SIGTERM");
  app.add_flag("--status", a.status, "Show the tuning queue of the database and exit");
  app.add_flag("--once", a.once, "With --serve: stop when nothing waits");
  app.add_option("--queue-id", a.queue_id, "With --serve: tune only this entry of the queue")
      ->check(CLI::PositiveNumber);
  app.add_flag("--retry-failed", a.retry_failed,
               "With --serve: queue the problems whose tuning failed again");
  app.add_option("--poll", a.poll, "With --serve: seconds between looks at an empty queue")
      ->capture_default_str()
      ->check(CLI::Range(0.05, 3600.0));
}

void add_options(CLI::App& app, Args& a) {
  app.add_option("--m", a.m, "Rows of op(A) and C");
  app.add_option("--n", a.n,
                 "Columns of op(B) and C; with --groups, of a group on average (masked: a "
                 "group's capacity)");
  app.add_option("--k", a.k, "Columns of op(A), rows of op(B)");
  gt::cli::add_type_options(app, a.types);
  app.add_option("--layout", a.layout, "op(A)op(B): nn, nt, tn or tt")->capture_default_str();
  app.add_option("--lda", a.lda, "Leading dimension of A (default: rows of A as stored)");
  app.add_option("--ldb", a.ldb, "Leading dimension of B (default: rows of B as stored)");
  app.add_option("--ldc", a.ldc, "Leading dimension of C (default: M)");
  app.add_option("--alpha", a.alpha, "alpha")->capture_default_str();
  app.add_option("--beta", a.beta,
                 "beta (0: C is never read); problems that read C are tuned and stored apart from "
                 "those that do not")
      ->capture_default_str();
  app.add_option("--shapes", a.shapes, gt::cli::kShapesHelp);
  app.add_option("--db", a.db,
                 "Tuning database (default: $GEMMTUNE_DB_OVERLAY, else $GEMMTUNE_DB, else "
                 "~/.cache/gemmtune/tuning.db); %t: the shard index");
  app.add_option("--budget", a.budget,
                 "Stop after this many candidates (40) or this long (300s, 5m)");
  app.add_option("--top", a.top, "How many of the best candidates to show")
      ->capture_default_str()
      ->check(CLI::Range(0, 10000));
  app.add_option("--families", a.families, "Only these kernel families (comma-separated)");
  app.add_option("--timeout", a.timeout, "Seconds a candidate may take before it counts as hung")
      ->capture_default_str()
      ->check(CLI::Range(0.1, 86400.0));
  app.add_option("--threads", a.threads, "Compile threads (default: one per core)");
  app.add_option("--device", a.device, "GPU ordinal")
      ->capture_default_str()
      ->check(CLI::Range(0, 63));
  app.add_option("--devices", a.devices,
                 "Spread the shapes over these GPUs: 'all' or ordinals, e.g. 0,1");
  app.add_option(
      "--shard", a.shard,
      "Tune the I-th of N parts of the shapes (I/N; default: from SLURM_PROCID/SLURM_NTASKS, "
      "OMPI_COMM_WORLD_RANK/_SIZE, PMI_RANK/_SIZE or RANK/WORLD_SIZE); %t in --db is I");
  app.add_option("--seed", a.seed, "Seed of the random test data")->capture_default_str();
  app.add_option("--arch", a.arch,
                 "Architecture for --dry-run: sm_80, sm_86, sm_89, sm_90, sm_90a (default: the "
                 "GPU's, else sm_90a)");
  app.add_flag("--dry-run", a.dry_run,
               "No GPU: enumerate, prune and compile the candidates, report ptxas figures");
  app.add_flag(
      "--list", a.list_only,
      "With --dry-run: list the candidates (and their parameters) in the cost model's order with "
      "predicted times, without compiling");
  app.add_flag("--force", a.force, "Tune again even if the database has the shape");
  app.add_option("--margin", a.margin,
                 "Ranked search: stop when the cost model puts the rest this much above the best "
                 "(0.10: 10%)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_flag(
      "--exhaustive", a.exhaustive,
      "Measure every valid candidate and time each fully (default: in the cost model's order, "
      "until the rest cannot win)");
  app.add_flag("--no-baseline", a.no_baseline, "Do not time cuBLAS");
  app.add_flag("--json", a.json, "Print JSON on stdout instead of tables");
  add_serve_options(app, a);
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

std::vector<gt::Problem> problems_of(const Args& a) {
  std::vector<gt::Problem> out;
  if (!a.shapes.empty()) {
    GT_REQUIRE(a.m == 0 && a.n == 0 && a.k == 0, gt::Errc::invalid_argument,
               "give either --shapes or --m/--n/--k, not both");
    for (const auto& s : gt::cli::read_shapes_file(a.shapes))
      out.push_back(gt::cli::problem_of_line(s, a.types, a.layout, a.beta));
    return out;
  }
  GT_REQUIRE(a.m != 0 || a.n != 0 || a.k != 0, gt::Errc::invalid_argument,
             "give the shape with --m, --n and --k (or a file with --shapes)");
  out.push_back(
      gt::cli::make_cli_problem(a.types, a.layout, a.m, a.n, a.k, a.lda, a.ldb, a.ldc, a.beta));
  return out;
}

void print_progress(const gt::Progress& p) {
  const std::string gpu = p.device >= 0 ? fmt::format("gpu{} ", p.device) : "";
  if (p.kind == gt::Progress::Kind::phase) {
    std::cerr << "gemm-tune: " << gpu << p.text << "\n";
    return;
  }
  const gt::CandidateRecord& c = *p.candidate;
  const std::string timing =
      c.status == gt::CandidateStatus::ok
          ? fmt::format("{:>9} ms {:7.1f} TFLOP/s", gt::cli::format_ms(c.median_ms), c.tflops)
          : std::string(30, ' ');
  std::cerr << fmt::format("{}[{:>4}/{}] {:<16} {} {}{}\n", gpu, p.index, p.total,
                           gt::to_string(c.status), timing, c.kernel_name,
                           c.median_ms > 0 && c.median_ms == p.best_ms ? "  *best" : "");
}

// ---- dry run -------------------------------------------------------------------------------

json dry_run_json(const gt::DryRunReport& r) {
  json cands = json::array();
  for (const auto& c : r.candidates)
    cands.push_back({{"name", c.name},
                     {"family", c.family},
                     {"config", c.config.params},
                     {"status", c.status},
                     {"registers", c.registers},
                     {"spills", c.spills},
                     {"smem_bytes", c.smem_bytes},
                     {"compile_ms", c.compile_ms},
                     {"compile_cpu_ms", c.compile_cpu_ms},
                     {"predicted_ms", c.predicted_ms},
                     {"refinement", c.refinement},
                     {"cached", c.from_cache},
                     {"message", c.message}});
  return {{"problem", r.problem.describe()},
          {"arch", r.arch},
          {"enumerated", r.enumerated},
          {"pruned", r.pruned},
          {"pruned_by", r.pruned_by},
          {"compiled", r.compiled},
          {"failed", r.failed},
          {"seconds", r.seconds},
          {"candidates", cands}};
}

void print_list(const gt::DryRunReport& r) {
  gt::cli::Table t({"rank", "kernel", "family", "predicted ms", "TFLOP/s", "pass"});
  int rank = 0;
  for (const auto& c : r.candidates)
    t.add({std::to_string(++rank), c.name, c.family, gt::cli::format_ms(c.predicted_ms),
           fmt::format("{:.1f}", r.problem.flops() / (c.predicted_ms * 1e-3) / 1e12),
           c.refinement ? "refinement" : "structure"});
  std::cout << "candidates of " << r.problem.describe() << " for " << r.arch
            << ", in the order a ranked search takes them: one point of each structure, then the "
               "other points\n"
            << t.render("  ")
            << fmt::format("{} configurations: {} pruned, {} valid\n", r.enumerated, r.pruned,
                           r.candidates.size());
}

void print_dry_run(const gt::DryRunReport& r) {
  gt::cli::Table t({"kernel", "family", "status", "regs", "spills", "smem", "predicted ms",
                    "compile ms", "CPU ms"});
  std::vector<double> times, cpu_times;
  int spilling = 0;
  for (const auto& c : r.candidates) {
    t.add({c.name, c.family, c.status, std::to_string(c.registers), std::to_string(c.spills),
           std::to_string(c.smem_bytes), gt::cli::format_ms(c.predicted_ms),
           fmt::format("{:.0f}{}", c.compile_ms, c.from_cache ? " (cached)" : ""),
           fmt::format("{:.0f}", c.compile_cpu_ms)});
    if (c.status == "compiled" && !c.from_cache) {
      times.push_back(c.compile_ms);
      cpu_times.push_back(c.compile_cpu_ms);
    }
    spilling += c.spills > 0;
  }
  std::cout << "dry run: " << r.problem.describe() << " for " << r.arch
            << ", in the cost model's order\n"
            << t.render("  ");
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::cout << fmt::format(
      "{} configurations: {} pruned, {} compiled, {} failed, {} with spills; {} compiled now, "
      "median {:.0f} ms "
      "({:.0f} ms CPU); {:.1f} s\n",
      r.enumerated, r.pruned, r.compiled, r.failed, spilling, times.size(), median(times),
      median(cpu_times), r.seconds);
  for (const auto& [name, count] : r.pruned_by)
    std::cout << fmt::format("  pruned by {}: {}\n", name, count);
}

int run_dry(const Args& a, const std::vector<gt::Problem>& problems) {
  std::string arch = a.arch;
  if (arch.empty()) arch = gt::cu::available() ? gt::query_device(a.device).arch.name() : "sm_90a";
  const gt::ArchInfo info = gt::ArchInfo::from_name(arch);
  const gt::Budget budget = gt::Budget::parse(a.budget);
  GT_REQUIRE(!budget.seconds, gt::Errc::invalid_argument,
             "--dry-run takes a budget in candidates, not time");
  json all = json::array();
  int failed = 0;
  for (const auto& p : problems) {
    const auto report =
        gt::dry_run(p, info, a.threads, split(a.families), a.list_only ? nullptr : print_progress,
                    budget.candidates.value_or(0), !a.list_only);
    failed += report.failed;
    if (a.json)
      all.push_back(dry_run_json(report));
    else if (a.list_only)
      print_list(report);
    else
      print_dry_run(report);
  }
  if (a.json) std::cout << (all.size() == 1 ? all[0] : json{{"problems", all}}).dump(2) << "\n";
  return failed ? 1 : 0;
}

// ---- tuning --------------------------------------------------------------------------------

std::string ratio_text(double baseline_ms, double ms) {
  return baseline_ms > 0 && ms > 0 ? fmt::format("{:.2f}x", baseline_ms / ms) : "-";
}

json candidate_json(const gt::CandidateRecord& c) {
  return {{"kernel", c.kernel_name},
          {"family", c.config.family},
          {"status", gt::to_string(c.status)},
          {"median_ms", c.median_ms},
          {"min_ms", c.min_ms},
          {"max_ms", c.max_ms},
          {"tflops", c.tflops},
          {"registers", c.registers},
          {"spills", c.spills},
          {"config", json::parse(c.config.to_json())}};
}

json tune_json(const gt::TuneReport& r, const std::vector<gt::CandidateRecord>& top) {
  json j = {{"problem", r.problem.describe()},
            {"device", r.device.name},
            {"gpu", r.device.ordinal},
            {"arch", r.device.arch.name()},
            {"from_db", r.from_db},
            {"complete", r.complete},
            {"interrupted", r.interrupted},
            {"seconds", r.seconds},
            {"enumerated", r.enumerated},
            {"pruned", r.pruned},
            {"already_measured", r.already_measured},
            {"measured", r.measured.size()},
            {"stopped_by_model", r.stopped_by_model},
            {"ruled_out", r.ruled_out},
            {"baseline_ms", r.baseline_ms},
            {"baseline", r.baseline_name}};
  if (!r.error.empty()) j["error"] = r.error;
  if (r.best) {
    j["best"] = candidate_json(*r.best);
    j["peak_fraction"] = r.best->tflops / r.device.peak_tflops(r.problem);
    j["ratio_to_cublas"] =
        r.baseline_ms > 0 ? json(r.baseline_ms / r.best->median_ms) : json(nullptr);
  }
  j["top"] = json::array();
  for (const auto& c : top) j["top"].push_back(candidate_json(c));
  return j;
}

void print_tune(const gt::TuneReport& r, const std::vector<gt::CandidateRecord>& top) {
  const double peak = r.device.peak_tflops(r.problem);
  std::cout << fmt::format("{} on GPU {}, {} ({}, {} SMs)\n", r.problem.describe(),
                           r.device.ordinal, r.device.name, r.device.arch.name(),
                           r.device.arch.sms);
  if (!r.error.empty()) {
    std::cout << "not tuned: " << r.error << "\n";
    return;
  }
  gt::cli::Table t({"rank", "kernel", "ms", "TFLOP/s", "% peak", "vs cuBLAS"});
  int rank = 0;
  for (const auto& c : top)
    t.add({std::to_string(++rank), c.kernel_name, gt::cli::format_ms(c.median_ms),
           fmt::format("{:.1f}", c.tflops), fmt::format("{:.0f}%", 100 * c.tflops / peak),
           ratio_text(r.baseline_ms, c.median_ms)});
  if (r.baseline_ms > 0) {
    const double tflops = r.problem.flops() / (r.baseline_ms * 1e-3) / 1e12;
    t.add({"", r.baseline_name, gt::cli::format_ms(r.baseline_ms), fmt::format("{:.1f}", tflops),
           fmt::format("{:.0f}%", 100 * tflops / peak), "1.00x"});
  }
  if (!t.empty()) std::cout << t.render("  ");
  if (!r.best) {
    std::cout << "no candidate passed verification: nothing stored\n";
    return;
  }
  const auto& b = *r.best;
  std::cout << fmt::format(
      "winner: {} ({}) {} ms, {:.1f} TFLOP/s, {:.0f}% of the {:.0f} TFLOP/s peak", b.kernel_name,
      b.config.family, gt::cli::format_ms(b.median_ms), b.tflops, 100 * b.tflops / peak, peak);
  if (r.baseline_ms > 0)
    std::cout << fmt::format("; cuBLAS {} ms; ratio {} (cuBLAS time / ours)",
                             gt::cli::format_ms(r.baseline_ms),
                             ratio_text(r.baseline_ms, b.median_ms));
  else if (!r.baseline_name.empty())
    std::cout << "; no cuBLAS baseline: " << r.baseline_name;
  // The winner is not the table's first when a preferred kernel was within the margin of it: a
  // family's default in a tuning, or the winner a tuning named when `gemm-db merge` combined two.
  if (!top.empty() && top.front().kernel_name != b.kernel_name &&
      top.front().median_ms < b.median_ms)
    std::cout << fmt::format(
        "; kept within {:.0f}% of the fastest (a family's default, or a merged tuning's winner)",
        100 * gt::kWinnerMargin);
  std::cout << "\n";
  if (r.from_db) {
    std::cout << fmt::format(
        "answered from the database in {:.3f} s ({} search); --force tunes again\n", r.seconds,
        r.complete ? "complete" : "partial");
  } else {
    int failures = 0;
    for (const auto& c : r.measured) failures += c.status != gt::CandidateStatus::ok;
    std::cout << fmt::format(
        "measured {} candidates ({} failed, {} measured before, {} pruned{}) in {:.1f} s{}\n",
        r.measured.size(), failures, r.already_measured, r.pruned,
        r.stopped_by_model ? fmt::format(", {} ruled out by the cost model", r.ruled_out) : "",
        r.seconds, r.interrupted ? "; interrupted: run again to measure the rest" : "");
  }
}

std::vector<gt::CandidateRecord> top_candidates(const gt::TuningDb& db, const gt::TuneReport& r,
                                                int top) {
  std::vector<gt::CandidateRecord> out;
  for (auto& c : db.candidates(r.device.key, r.problem))
    if (c.status == gt::CandidateStatus::ok && int(out.size()) < top) out.push_back(std::move(c));
  return out;
}

extern "C" void on_interrupt(int) {
  gt::request_stop();
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the program at once
}

// A --db that is not a gemmtune database, or a damaged one, is refused before anything is tuned
// (and without a GPU), and left exactly as it is: TuningDb checks a file before it writes to it.
void check_database(const std::filesystem::path& path) {
  if (std::filesystem::exists(path)) gt::TuningDb checked(path);
}

// "all" or "0,1": the GPUs to tune on; without --devices the one of --device.
std::vector<int> device_ordinals(const Args& a) {
  if (a.devices.empty()) return {a.device};
  const int count = gt::device_count();
  std::vector<int> out;
  if (a.devices == "all") {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  for (const auto& item : split(a.devices)) {
    int ordinal = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), ordinal);
    GT_REQUIRE(ec == std::errc() && end == item.data() + item.size() && ordinal >= 0,
               gt::Errc::invalid_argument,
               "--devices '{}': expected 'all' or GPU ordinals such as 0,1", a.devices);
    GT_REQUIRE(ordinal < count, gt::Errc::invalid_argument,
               "--devices: there is no GPU {} (this machine has {})", ordinal, count);
    GT_REQUIRE(std::find(out.begin(), out.end(), ordinal) == out.end(), gt::Errc::invalid_argument,
               "--devices: GPU {} is listed twice", ordinal);
    out.push_back(ordinal);
  }
  return out;
}

gt::TuneOptions tune_options(const Args& a, const std::filesystem::path& db) {
  gt::TuneOptions options;
  options.db_path = db;
  options.budget = gt::Budget::parse(a.budget);
  options.force = a.force;
  options.alpha = a.alpha;
  options.beta = a.beta;
  options.seed = a.seed;
  options.compile_threads = a.threads;
  options.candidate_timeout_s = a.timeout;
  options.baseline = !a.no_baseline;
  options.families = split(a.families);
  options.search.exhaustive = a.exhaustive;
  options.search.stop_margin = a.margin;
  options.progress = print_progress;
  return options;
}

// The summary's line of one report.
std::vector<std::string> summary_row(const gt::TuneReport& r) {
  std::vector<std::string> row = {r.problem.describe(), std::to_string(r.device.ordinal)};
  if (!r.best) {
    row.push_back(!r.error.empty() ? "error: " + r.error.substr(0, r.error.find('\n'))
                  : r.interrupted  ? "interrupted"
                                   : "no candidate passed");
    return row;
  }
  const auto& b = *r.best;
  const std::string source =
      r.from_db ? "database" : fmt::format("{} measured, {:.1f} s", r.measured.size(), r.seconds);
  row.insert(row.end(),
             {b.kernel_name, gt::cli::format_ms(b.median_ms), fmt::format("{:.1f}", b.tflops),
              gt::cli::format_ms(r.baseline_ms), ratio_text(r.baseline_ms, b.median_ms), source});
  return row;
}

int run_tune(const Args& a, const std::vector<gt::Problem>& problems,
             const std::filesystem::path& db) {
  check_database(db);
  GT_REQUIRE(gt::cu::available(), gt::Errc::no_device,
             "no GPU: {} (--dry-run compiles without one)", gt::cu::unavailable_reason());
  const std::vector<int> ordinals = device_ordinals(a);
  for (int ordinal : ordinals) {
    const gt::DeviceInfo device = gt::query_device(ordinal);
    GT_REQUIRE(a.arch.empty() || gt::ArchInfo::from_name(a.arch).name() == device.arch.name(),
               gt::Errc::invalid_argument,
               "--arch {} does not match GPU {} ({}): --arch is for --dry-run", a.arch, ordinal,
               device.arch.name());
  }
  gt::TuneOptions options = tune_options(a, db);
  // Lines of several GPUs interleave: say which GPU each is about.
  if (ordinals.size() == 1)
    options.progress = [](gt::Progress p) {
      p.device = -1;
      print_progress(p);
    };
  std::signal(SIGINT, on_interrupt);

  json all = json::array();
  const auto on_report = [&](const gt::TuneReport& report) {
    if (report.problem.m == 0) return;
    std::vector<gt::CandidateRecord> top;
    if (report.error.empty()) top = top_candidates(gt::TuningDb(options.db_path), report, a.top);
    if (a.json)
      all.push_back(tune_json(report, top));
    else
      print_tune(report, top);
  };
  const auto start = std::chrono::steady_clock::now();
  const auto reports = gt::tune_on_devices(problems, options, ordinals, on_report);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // One problem on one GPU fails as it always did: the error is the program's.
  if (reports.size() == 1 && reports[0].failure) std::rethrow_exception(reports[0].failure);

  int failed = 0;
  gt::cli::Table summary(
      {"problem", "GPU", "winner", "ms", "TFLOP/s", "cuBLAS ms", "vs cuBLAS", "source"});
  for (const auto& r : reports) {
    failed += !r.error.empty();
    summary.add(summary_row(r));
  }
  if (a.json) {
    std::cout << (all.size() == 1
                      ? all[0]
                      : json{{"problems", all}, {"seconds", seconds}, {"gpus", ordinals}})
                     .dump(2)
              << "\n";
  } else {
    if (reports.size() > 1)
      std::cout << fmt::format("\nsummary: {} problems on {} GPU{} in {:.1f} s\n", problems.size(),
                               ordinals.size(), ordinals.size() > 1 ? "s" : "", seconds)
                << summary.render("  ");
    std::cout << "database: " << options.db_path.string() << "\n";
  }
  if (gt::stop_requested()) return 130;
  return failed ? 1 : 0;
}

int run_serve(const Args& a, const std::filesystem::path& db) {
  GT_REQUIRE(a.m == 0 && a.n == 0 && a.k == 0 && a.shapes.empty(), gt::Errc::invalid_argument,
             "--serve takes its problems from the queue, not from --m/--n/--k or --shapes");
  check_database(db);
  GT_REQUIRE(gt::cu::available(), gt::Errc::no_device, "no GPU to tune on: {}",
             gt::cu::unavailable_reason());
  gt::ServeOptions options;
  Args per_problem = a;
  if (per_problem.budget.empty()) per_problem.budget = "2m";
  options.tune = tune_options(per_problem, db);
  options.gpus = device_ordinals(a);
  options.once = a.once;
  if (a.queue_id > 0) options.only_id = a.queue_id;
  options.poll_s = a.poll;
  if (a.retry_failed) {
    const int queued = gt::TuningDb(db).retry_failed();
    std::cerr << fmt::format("gemm-tune --serve: {} failed problem{} queued again\n", queued,
                             queued == 1 ? "" : "s");
  }
  return gt::cli::serve_queue(options);
}

// The shard of the shape list this process tunes: --shard, else the launcher's rank and size.
gt::Shard shard_of(const Args& a) {
  if (!a.shard.empty()) return gt::Shard::parse(a.shard);
  return gt::Shard::from_environment([](const char* name) -> std::optional<std::string> {
    const char* value = std::getenv(name);
    return value && *value ? std::optional<std::string>(value) : std::nullopt;
  });
}

std::vector<gt::Problem> this_shard(const std::vector<gt::Problem>& problems,
                                    const gt::Shard& shard) {
  if (!shard.sharded()) return problems;
  std::vector<gt::Problem> out;
  for (size_t i : shard.items(problems.size())) out.push_back(problems[i]);
  std::cerr << fmt::format("gemm-tune: shard {}/{} (from {}): {} of {} shapes\n", shard.index,
                           shard.count, shard.source, out.size(), problems.size());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"gemm-tune: tune GEMM shapes for this GPU, compare with cuBLAS, store the winner"};
  Args args;
  add_options(app, args);
  if (int rc = gt::cli::parse("gemm-tune", app, argc, argv); rc >= 0) return rc;
  return gt::cli::guarded_main("gemm-tune", [&] {
    GT_REQUIRE(args.devices.empty() || args.device == 0, gt::Errc::invalid_argument,
               "give either --device or --devices, not both");
    if (args.status || args.serve) {
      const std::string db = args.db.empty() ? gt::results_db_path().string() : args.db;
      if (args.status) return gt::cli::show_queue(db, args.json);
      return run_serve(args, db);
    }
    GT_REQUIRE(!args.once && args.queue_id == 0 && !args.retry_failed, gt::Errc::invalid_argument,
               "--once, --queue-id and --retry-failed go with --serve");
    const gt::Shard shard = shard_of(args);
    const auto problems = this_shard(problems_of(args), shard);
    if (problems.empty()) {
      std::cerr << "gemm-tune: nothing to do: this shard has no shapes\n";
      return 0;
    }
    if (args.dry_run) return run_dry(args, problems);
    const std::string db = args.db.empty() ? gt::results_db_path().string() : args.db;
    return run_tune(args, problems, gt::expand_shard_pattern(db, shard));
  });
}
