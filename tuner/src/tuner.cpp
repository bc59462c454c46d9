// Orchestration of a tuning run.
#include "gemmtune/tuner/tuner.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>

#include "gemmtune/generator/family.hpp"
#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/compiler.hpp"
#include "gemmtune/tuner/search.hpp"
#include "gemmtune/tuner/thread_pool.hpp"
#include "gemmtune/tuner/worker.hpp"
#include "protocol.hpp"

namespace gemmtune {
namespace {

std::atomic<bool> g_stop{false};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Planned {
  const Family* family;
  KernelConfig config;
  std::string name;
  double predicted_ms = 0;  // the cost model's
  bool always = false;      // an extra or a family's default: measured whatever the model says
  std::string structure;    // the family and the values of its parameters that are not refinements
  bool refinement = false;  // a structure's point after its first: the second pass (search.hpp)
};

// The kernels of the families' defaults for the problem: what an untuned library call runs.
std::set<std::string> default_names(const Problem& problem, const ArchInfo& arch) {
  std::set<std::string> names;
  for (const Family* family : families_for(problem, arch))
    names.insert(family->kernel_name(family->default_config(problem, arch)));
  return names;
}

// Valid configurations of every family that applies, by predicted time (ties in a fixed order, so
// that every run plans the same); the extras first, then the families' defaults, then the first
// point of every other structure, then the structures' other points (search.hpp).
std::vector<Planned> plan(const Problem& problem, const ArchInfo& arch,
                          const std::vector<std::string>& only,
                          const std::vector<KernelConfig>& extra, bool only_extra,
                          int64_t& enumerated, std::map<std::string, int64_t>& pruned_by) {
  std::vector<Planned> out;
  for (const auto& name : only) {
    const Family& family = find_family(name);  // throws for unknown names
    const std::string why = why_unsupported(family, problem, arch);
    GT_REQUIRE(why.empty(), Errc::invalid_argument, "family '{}' cannot solve {} on {}: {}", name,
               problem.describe(), arch.name(), why);
  }
  for (const auto& c : extra) {
    const Family& family = find_family(c.family);
    out.push_back(
        Planned{&family, c, family.kernel_name(c), family.predicted_ms(c, problem, arch), true});
    ++enumerated;
  }
  if (only_extra) return out;
  std::vector<Planned> ranked;
  for (const Family* family : families_for(problem, arch)) {
    if (!only.empty() && std::find(only.begin(), only.end(), family->name()) == only.end())
      continue;
    Pruning pruning = family->prune(problem, arch);
    enumerated += family->space_summary(problem, arch).size();
    for (const auto& [name, count] : pruning.pruned_by) pruned_by[name] += count;
    for (auto& c : pruning.valid) {
      std::string structure = family->structure_of(c);
      ranked.push_back(Planned{family, c, family->kernel_name(c),
                               family->predicted_ms(c, problem, arch), false,
                               std::move(structure)});
    }
  }
  // Ties keep the families' order and each space's enumeration order, in which a family lists
  // first the refinement values it would try first (a structure's first point is measured for it).
  std::stable_sort(ranked.begin(), ranked.end(), [](const Planned& a, const Planned& b) {
    return a.predicted_ms < b.predicted_ms;
  });
  // A family's default is its known good point for the shape class: measured first, so that a
  // budget never leaves the tuned kernel slower than the untuned call.
  const std::set<std::string> defaults = default_names(problem, arch);
  std::stable_partition(ranked.begin(), ranked.end(), [&](Planned& p) {
    p.always = defaults.count(p.name) > 0;
    return p.always;
  });
  std::set<std::string> structures;
  for (Planned& p : ranked) p.refinement = !structures.insert(p.structure).second;
  std::stable_partition(ranked.begin(), ranked.end(),
                        [](const Planned& p) { return !p.refinement; });
  out.insert(out.end(), std::make_move_iterator(ranked.begin()),
             std::make_move_iterator(ranked.end()));
  return out;
}

struct CompileOutcome {
  std::optional<CompiledKernel> kernel;
  std::string error;
};

// Whatever goes wrong with one candidate (NVRTC, a dump folder that cannot be written, memory)
// becomes its record, never the end of the run.
CompileOutcome compile_one(const Compiler& compiler, const Planned& p, const ArchInfo& arch) {
  CompileOutcome out;
  try {
    out.kernel = compiler.compile(emit_source(*p.family, p.config, arch), arch);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  return out;
}

// Compiles ahead of the measurements, at most `ahead` candidates beyond the one being measured,
// so that a search the cost model ends early compiles little it does not measure, and several
// tuning runs (one per GPU) share one pool fairly.
class CompileQueue {
 public:
  CompileQueue(const std::vector<Planned>& planned, const ArchInfo& arch, ThreadPool& pool)
      : planned_(planned), arch_(arch), pool_(pool), ahead_(std::max<size_t>(4, 2 * pool.size())) {}
  ~CompileQueue() {
    cancelled_ = true;  // queued compiles return at once; running ones finish
    for (auto& f : futures_)
      if (f.valid()) f.wait();
  }
  CompileQueue(const CompileQueue&) = delete;
  CompileQueue& operator=(const CompileQueue&) = delete;

  CompileOutcome take(size_t i) {
    while (futures_.size() < std::min(planned_.size(), i + 1 + ahead_)) {
      const Planned& p = planned_[futures_.size()];
      futures_.push_back(pool_.submit([this, &p] {
        return cancelled_ ? CompileOutcome{{}, "cancelled"} : compile_one(compiler_, p, arch_);
      }));
    }
    return futures_[i].get();
  }

 private:
  const std::vector<Planned>& planned_;
  const ArchInfo& arch_;
  ThreadPool& pool_;
  const size_t ahead_;
  const Compiler compiler_;
  std::atomic<bool> cancelled_{false};
  std::vector<std::future<CompileOutcome>> futures_;
};

CandidateRecord failed_record(const Planned& p, CandidateStatus status,
                              const std::string& message) {
  CandidateRecord r;
  r.kernel_name = p.name;
  r.template_version = template_version(*p.family);
  r.config = p.config;
  r.status = status;
  r.message = message;
  return r;
}

// The worker process with its problem set up; restarted after a fault or a timeout.
class Measurer {
 public:
  Measurer(const Problem& problem, const TuneOptions& options, int ordinal)
      : client_(find_worker()), problem_(problem), options_(options), ordinal_(ordinal) {}
  ~Measurer() { client_.stop(); }

  // Starts the worker and sets the problem up; throws Error(cuda) when it cannot.
  void start() { ensure_ready(); }

  // settle_ms: load the GPU that long first (it idled).
  CandidateRecord measure(const Planned& p, int id, const RankedSearch& search,
                          double settle_ms = 0) {
    ensure_ready();
    nlohmann::json request = {
        {"cmd", "measure"}, {"id", id}, {"config", nlohmann::json::parse(p.config.to_json())}};
    if (settle_ms > 0) request["settle_ms"] = settle_ms;
    if (search.abort_above_ms() > 0) request["abort_above_ms"] = search.abort_above_ms();
    if (search.enough_above_ms() > 0) request["enough_above_ms"] = search.enough_above_ms();
    auto answer = client_.call(request.dump(), options_.candidate_timeout_s);
    if (!answer) {
      ready_ = false;
      const bool timed_out = client_.failure().starts_with("no answer");
      return failed_record(p, timed_out ? CandidateStatus::timeout : CandidateStatus::fault,
                           client_.failure());
    }
    const auto j = nlohmann::json::parse(*answer);
    if (j.value("exiting",
                false)) {  // its context is poisoned: the next candidate gets a new worker
      client_.stop();
      ready_ = false;
    }
    if (j.at("event") != "result") {
      return failed_record(p, CandidateStatus::fault,
                           "worker error: " + j.value("message", std::string("?")));
    }
    return candidate_from_json(j.at("candidate"));
  }

  // Verified candidates, and cuBLAS when asked, timed again with their runs in turns; nullopt
  // when the worker failed.
  struct Retimed {
    std::vector<Timing> timings;  // one per config
    double baseline_ms = -1;
    std::string baseline_name;  // or why there is no baseline
  };
  std::optional<Retimed> retime(const std::vector<KernelConfig>& configs, bool with_baseline) {
    ensure_ready();
    nlohmann::json request = {
        {"cmd", "retime"}, {"configs", nlohmann::json::array()}, {"baseline", with_baseline}};
    for (const KernelConfig& c : configs)
      request["configs"].push_back(nlohmann::json::parse(c.to_json()));
    auto answer =
        client_.call(request.dump(), options_.candidate_timeout_s * double(configs.size() + 1));
    if (!answer) {
      ready_ = false;
      return std::nullopt;
    }
    const auto j = nlohmann::json::parse(*answer);
    if (j.at("event") != "timings" || j.at("timings").size() != configs.size()) return std::nullopt;
    Retimed r;
    for (const auto& t : j.at("timings")) r.timings.push_back(result_timing_from_json(t));
    const auto& b = j.at("baseline");
    if (b.value("available", false)) {
      r.baseline_ms = b.at("median_ms");
      r.baseline_name = b.at("name");
    } else {
      r.baseline_name = b.value("message", std::string(with_baseline ? "cuBLAS unavailable" : ""));
    }
    return r;
  }

  // cuBLAS in the same process, on the same data, timed the same way.
  std::pair<double, std::string> baseline() {
    ensure_ready();
    auto answer = client_.call(R"({"cmd":"baseline"})", options_.candidate_timeout_s);
    if (!answer) {
      ready_ = false;
      return {-1, "cuBLAS baseline failed: " + client_.failure()};
    }
    const auto j = nlohmann::json::parse(*answer);
    if (!j.value("available", false))
      return {-1, j.value("message", std::string("cuBLAS unavailable"))};
    return {j.at("median_ms").get<double>(), j.at("name").get<std::string>()};
  }

 private:
  // The beta of the measurements: the problem says whether C is read (TuneOptions::beta).
  float measured_beta() const {
    if (!problem_.reads_c) return 0.0f;
    return options_.beta != 0.0f ? options_.beta : 1.0f;
  }

  void ensure_ready() {
    if (ready_ && client_.running()) return;
    const nlohmann::json setup = {{"cmd", "setup"},
                                  {"device", ordinal_},
                                  {"problem", to_json(problem_)},
                                  {"alpha", options_.alpha},
                                  {"beta", measured_beta()},
                                  {"seed", options_.seed},
                                  {"timing", to_json(options_.timing)},
                                  {"settle_ms", options_.settle_ms}};
    auto answer = client_.call(setup.dump(), options_.setup_timeout_s);
    GT_REQUIRE(answer, Errc::cuda, "the measuring worker could not start: {}", client_.failure());
    const auto j = nlohmann::json::parse(*answer);
    GT_REQUIRE(j.at("event") == "ready", Errc::cuda, "the measuring worker could not set up {}: {}",
               problem_.describe(), j.value("message", std::string("?")));
    ready_ = true;
  }

  WorkerClient client_;
  Problem problem_;
  const TuneOptions& options_;
  int ordinal_;
  bool ready_ = false;
};

void notify(const TuneOptions& o, Progress p) {
  if (o.progress) o.progress(p);
}

void phase(const TuneOptions& o, std::string text) {
  Progress p;
  p.text = std::move(text);
  notify(o, p);
}

// The verified candidates of the problem on this device, fastest first, that this build can run:
// whatever else a database holds (an imported or edited row) is never retimed or crowned.
std::vector<CandidateRecord> runnable_ok(const TuningDb& db, const TuneReport& report) {
  std::vector<CandidateRecord> out;
  for (auto& c : db.candidates(report.device.key, report.problem))
    if (c.status == CandidateStatus::ok &&
        why_unusable(c.config, report.problem, report.device.arch).empty())
      out.push_back(std::move(c));
  return out;
}

// The candidates of the final round: the fastest, and those close enough to it that another
// round could change the order (every one of the fastest in an exhaustive search); and the
// families' defaults, so that the winner is never a kernel that only looked faster than the
// untuned call's in other conditions (the tuner once put the default 4-11% behind where the
// bench put it 0-4%; docs/PERF.md, 'The final round times the family defaults').
std::vector<CandidateRecord> finalists(const std::vector<CandidateRecord>& candidates,
                                       const TuneOptions& o,
                                       const std::set<std::string>& defaults) {
  std::vector<CandidateRecord> top;
  std::set<std::string> names;
  for (const auto& c : candidates) {
    if (c.status != CandidateStatus::ok || int(top.size()) >= o.final_candidates) continue;
    if (!o.search.exhaustive && !top.empty() &&
        c.median_ms > top.front().median_ms * (1 + o.search.final_margin))
      break;
    top.push_back(c);
    names.insert(c.kernel_name);
  }
  for (const auto& c : candidates)
    if (c.status == CandidateStatus::ok && defaults.count(c.kernel_name) &&
        !names.count(c.kernel_name))
      top.push_back(c);
  return top;
}

std::optional<CandidateRecord> fastest(const std::vector<CandidateRecord>& records) {
  return choose_winner(records, {}, 0);
}

// The final round's timings so far: each round's median of each candidate, and of cuBLAS.
struct FinalTimes {
  std::map<std::string, std::vector<double>> rounds_of;  // by kernel name
  std::vector<double> baseline_rounds;
  std::string baseline_name;
};

// The median of `rounds` medians, their spread, and the runs behind them.
Timing over_rounds(const std::vector<double>& rounds, int runs) {
  Timing t = summarize(rounds);
  t.runs = runs;
  return t;
}

// Times `top` and cuBLAS again `final_rounds` times, each time all of them with their runs in
// turns (Timer::time_together), so that the clocks' drift does not pick the winner. A
// candidate's time is then the median of its rounds. Updates the records (and the database).
void time_again(Measurer& measurer, TuningDb& db, const TuneReport& report, const TuneOptions& o,
                std::vector<CandidateRecord>& top, FinalTimes& times) {
  std::vector<KernelConfig> configs;
  for (const CandidateRecord& c : top) configs.push_back(c.config);
  std::map<std::string, int> runs;
  for (int round = 0; round < o.final_rounds && !stop_requested(); ++round) {
    const auto r = measurer.retime(configs, o.baseline);
    if (!r) continue;
    for (size_t i = 0; i < top.size(); ++i) {
      times.rounds_of[top[i].kernel_name].push_back(r->timings[i].median_ms);
      runs[top[i].kernel_name] += r->timings[i].runs;
    }
    times.baseline_name = r->baseline_name;
    if (r->baseline_ms > 0) times.baseline_rounds.push_back(r->baseline_ms);
  }
  static const std::string kNote = "timed again in the final round";
  for (CandidateRecord& c : top) {
    const auto it = times.rounds_of.find(c.kernel_name);
    if (it == times.rounds_of.end()) continue;
    const Timing t = over_rounds(it->second, runs[c.kernel_name]);
    c.median_ms = t.median_ms;
    c.min_ms = t.min_ms;
    c.max_ms = t.max_ms;
    c.runs = t.runs;
    c.tflops = report.problem.flops() / (c.median_ms * 1e-3) / 1e12;
    if (c.message.rfind(kNote, 0) != 0)
      c.message = kNote + (c.message.empty() ? "" : "; " + c.message);
    db.record(report.device.key, report.problem, c);
  }
}

// The final round: the finalists and cuBLAS timed again, in turns. When the round leaves a
// candidate outside it the fastest (the finalists timed slower than in the search: the clocks
// moved), that candidate was timed in other conditions; it is timed again beside the round's
// fastest, whose earlier rounds are set aside so that the two meet the same clocks (at most 3
// such rounds). The winner is thus always one the final round compared.
void final_round(Measurer& measurer, TuningDb& db, const TuneReport& report, const TuneOptions& o,
                 double& baseline_ms, std::string& baseline_name) {
  std::vector<CandidateRecord> top =
      finalists(runnable_ok(db, report), o, default_names(report.problem, report.device.arch));
  if (top.empty() || o.final_rounds <= 0) return;
  phase(o, fmt::format("final round: {} candidates (the fastest, and the defaults){} timed again "
                       "in turns, {} rounds",
                       top.size(), o.baseline ? " and cuBLAS" : "", o.final_rounds));
  FinalTimes times;
  for (int extra = 0; !top.empty() && !stop_requested(); ++extra) {
    time_again(measurer, db, report, o, top, times);
    const auto now = fastest(runnable_ok(db, report));
    const auto in_round = fastest(top);
    if (extra == 3 || !now || !in_round || times.rounds_of.count(now->kernel_name)) break;
    phase(o,
          fmt::format(
              "final round: {} ({:.4f} ms in the search) is now the fastest; timed again beside {}",
              now->kernel_name, now->median_ms, in_round->kernel_name));
    times.rounds_of.erase(in_round->kernel_name);
    top = {*in_round, *now};
  }
  if (!times.baseline_rounds.empty()) baseline_ms = summarize(times.baseline_rounds).median_ms;
  if (!times.baseline_name.empty()) baseline_name = times.baseline_name;
}

// Throws Error(unsupported) saying why no family can solve the problem on the architecture.
void require_family(const Problem& problem, const ArchInfo& arch) {
  if (!families_for(problem, arch).empty()) return;
  std::string why;
  for (const Family* f : all_families())
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", f->name(),
                       why_unsupported(*f, problem, arch));
  GT_THROW(Errc::unsupported, "no kernel family supports {} {} on {} ({})", problem.types.name(),
           problem.layout(), arch.name(), why);
}

}  // namespace

Budget Budget::parse(std::string_view text) {
  Budget b;
  if (text.empty()) return b;
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const std::string_view unit(end, size_t(text.data() + text.size() - end));
  GT_REQUIRE(ec == std::errc() && value > 0, Errc::invalid_argument,
             "budget '{}' must be a positive number of candidates (40) or seconds (300s, 5m, 1h)",
             text);
  if (unit.empty() || unit == "c") {
    GT_REQUIRE(value == double(int(value)), Errc::invalid_argument,
               "budget '{}': a whole number of candidates", text);
    b.candidates = int(value);
  } else if (unit == "s") {
    b.seconds = value;
  } else if (unit == "m") {
    b.seconds = value * 60;
  } else if (unit == "h") {
    b.seconds = value * 3600;
  } else {
    GT_THROW(Errc::invalid_argument,
             "budget '{}': unknown unit '{}' (use s, m, h, or none for candidates)", text, unit);
  }
  return b;
}

std::string Budget::describe() const {
  if (seconds) return fmt::format("{:.0f} s", *seconds);
  if (candidates) return fmt::format("{} candidates", *candidates);
  return "unlimited";
}

void request_stop() noexcept {
  g_stop.store(true);
}
bool stop_requested() noexcept {
  return g_stop.load();
}

namespace {

// The valid configurations still to measure: without those this device measured before
// (resume; their results seed the search), cut to the candidate budget. Sets the counts of the
// report; returns the planned list and how many were left before the budget.
std::pair<std::vector<Planned>, size_t> plan_run(TuningDb& db, TuneReport& report,
                                                 const TuneOptions& o, RankedSearch& search) {
  auto planned = plan(report.problem, report.device.arch, o.families, o.extra, o.only_extra,
                      report.enumerated, report.pruned_by);
  for (const auto& [name, count] : report.pruned_by) report.pruned += count;
  std::map<std::string, CandidateRecord> done;
  if (!o.force)
    for (auto& c : db.candidates(report.device.key, report.problem))
      done.emplace(c.kernel_name, std::move(c));
  std::erase_if(planned, [&](const Planned& p) {
    const auto it = done.find(p.name);
    if (it == done.end()) return false;
    search.add(p.predicted_ms, it->second, p.structure);
    ++report.already_measured;
    return true;
  });
  const size_t left = planned.size();
  if (o.budget.candidates && planned.size() > size_t(*o.budget.candidates))
    planned.resize(size_t(*o.budget.candidates));
  report.to_measure = int(planned.size());
  return {std::move(planned), left};
}

// Whether the run must stop before the next candidate: a request, or the time budget.
bool out_of_time(TuneReport& report, const TuneOptions& o, Clock::time_point start) {
  const bool over_time = o.budget.seconds && seconds_since(start) > *o.budget.seconds;
  if (!stop_requested() && !over_time) return false;
  report.interrupted = true;
  phase(o, stop_requested() ? "stopping on request" : "time budget spent");
  return true;
}

void notify_candidate(const TuneOptions& o, const TuneReport& report, size_t index, size_t total,
                      double best_ms) {
  Progress p;
  p.kind = Progress::Kind::candidate;
  p.index = int(index) + 1;
  p.total = int(total);
  p.candidate = &report.measured.back();
  p.best_ms = best_ms;
  notify(o, p);
}

// How long to load the GPU before a timing, after it idled `idle_s` while the tuner waited on a
// compile (as at the start of the second pass): as long as it idled, up to `most_ms` (the settling
// at the run's start). An idle GPU cools and clocks up (docs/PERF.md, 'An idle GPU times fast, so
// the tuner loads it first').
double settle_ms(double idle_s, double most_ms) {
  return idle_s > 0.1 ? std::min(1e3 * idle_s, most_ms) : 0;
}

// What the passes of one tuning run share: compiles on the pool, measurements by the worker
// (started with the first), results into the search, the database and the report.
struct Measuring {
  ThreadPool& pool;
  RankedSearch& search;
  TuningDb& db;
  TuneReport& report;
  const TuneOptions& o;
  Clock::time_point start;
  size_t total;  // candidates planned, for progress
  std::optional<Measurer> measurer;

  // Measures `planned` in order while the compile queue works ahead, recording each result as it
  // arrives, until `rest_cannot_win` says so of the next candidate (by its index). Returns
  // whether it did.
  bool in_order(const std::vector<Planned>& planned,
                const std::function<bool(size_t)>& rest_cannot_win) {
    CompileQueue compiles(planned, report.device.arch, pool);
    // The worker starts while the first candidates compile; one that cannot start fails the run
    // now, and the compile queue (a few ahead) is dropped with it.
    if (!planned.empty() && !measurer)
      measurer.emplace(report.problem, o, report.device.ordinal).start();
    for (size_t i = 0; i < planned.size(); ++i) {
      if (out_of_time(report, o, start)) return false;
      if (!planned[i].always && rest_cannot_win(i)) return true;
      const auto waiting = Clock::now();
      CompileOutcome outcome = compiles.take(i);
      CandidateRecord rec;
      const int id = int(report.measured.size());
      if (!outcome.kernel) {
        rec = failed_record(planned[i], CandidateStatus::compile_error, outcome.error);
        ++report.compile_failed;
      } else {
        // The worker restarts after a fault.
        rec = measurer->measure(planned[i], id, search,
                                settle_ms(seconds_since(waiting), o.settle_ms));
      }
      db.record(report.device.key, report.problem, rec);
      search.add(planned[i].predicted_ms, rec, planned[i].structure);
      report.measured.push_back(rec);
      notify_candidate(o, report, size_t(id), total, search.best_ms());
    }
    return false;
  }
};

// The second pass: the refinements of the structures the first pass timed, by their estimates.
std::vector<Planned> by_estimate(std::vector<Planned> refinements, const RankedSearch& search,
                                 std::vector<double>& estimates) {
  std::vector<std::pair<double, Planned>> known;
  for (auto& p : refinements)
    if (const auto e = search.estimate_ms(p.predicted_ms, p.structure))
      known.emplace_back(*e, std::move(p));
  std::stable_sort(known.begin(), known.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<Planned> out;
  for (auto& [estimate, p] : known) {
    estimates.push_back(estimate);
    out.push_back(std::move(p));
  }
  return out;
}

// The ranked search's two passes (search.hpp): one point of each structure, then the refinements
// of the structures timed. Counts what neither measured as ruled out.
void two_passes(const std::vector<Planned>& planned, Measuring& m) {
  const RankedSearch& search = m.search;
  TuneReport& report = m.report;
  const auto first_refinement =
      std::find_if(planned.begin(), planned.end(), [](const Planned& p) { return p.refinement; });
  const std::vector<Planned> structures(planned.begin(), first_refinement);
  if (m.in_order(structures,
                 [&](size_t i) { return search.rest_cannot_win(structures[i].predicted_ms); }))
    phase(m.o, fmt::format("cost model: the structures left cannot beat {:.4g} ms by its "
                           "prediction; {} of {} timed",
                           search.best_ms(), report.measured.size(), structures.size()));
  std::vector<double> estimates;
  const std::vector<Planned> refinements =
      by_estimate(std::vector<Planned>(first_refinement, planned.end()), search, estimates);
  if (!report.interrupted && !refinements.empty()) {
    phase(m.o, fmt::format(
                   "refinements (stages, clusters, ...) of the structures timed: {}, by estimate; "
                   "stopping where the estimate cannot win",
                   refinements.size()));
    m.search.begin_refinements();
    m.in_order(refinements, [&](size_t i) { return search.refinements_cannot_win(estimates[i]); });
  }
  if (!report.interrupted && report.measured.size() < planned.size()) {
    report.stopped_by_model = true;
    report.ruled_out = int(planned.size() - report.measured.size());
    phase(m.o,
          fmt::format(
              "cost model: {} candidates ruled out; stopping after {} timed (--exhaustive measures "
              "them all)",
              report.ruled_out, search.timed()));
  }
}

// The search (--exhaustive: everything in the planned order), then the final round against cuBLAS.
void measure_all(const std::vector<Planned>& planned, RankedSearch& search, TuningDb& db,
                 TuneReport& report, const TuneOptions& o, Clock::time_point start) {
  std::optional<ThreadPool> own_pool;
  ThreadPool& pool = o.compile_pool ? *o.compile_pool : own_pool.emplace(o.compile_threads);
  Measuring m{pool, search, db, report, o, start, planned.size(), std::nullopt};
  if (o.search.exhaustive)
    m.in_order(planned, [](size_t) { return false; });
  else
    two_passes(planned, m);
  if (stop_requested() || (!o.baseline && o.final_rounds <= 0)) return;
  if (!m.measurer) m.measurer.emplace(report.problem, o, report.device.ordinal);
  final_round(*m.measurer, db, report, o, report.baseline_ms, report.baseline_name);
  if (o.baseline && report.baseline_ms < 0) {  // nothing to compare in a final round
    phase(o, "timing cuBLAS on the same problem");
    std::tie(report.baseline_ms, report.baseline_name) = m.measurer->baseline();
  }
}

// The stored answer, when the database has one that this run may return without measuring.
std::optional<BestRecord> stored_answer(const TuningDb& db, const TuneReport& report,
                                        const TuneOptions& o, bool nothing_left) {
  if (o.force || !o.extra.empty()) return std::nullopt;
  auto best = db.best(report.device.key, report.problem);
  // A ranked search that ended is an answer; an exhaustive one wants every candidate measured.
  if (best && (o.search.exhaustive ? nothing_left : best->complete)) return best;
  return std::nullopt;
}

TuneReport& answer_from(TuneReport& report, const BestRecord& best, Clock::time_point start) {
  report.from_db = true;
  report.best = best.winner;
  report.baseline_ms = best.baseline_ms;
  report.complete = true;
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace

TuneReport tune(const Problem& problem, const TuneOptions& options, int ordinal) {
  validate(problem);
  const auto start = Clock::now();
  TuneReport report;
  report.problem = problem;
  report.device = query_device(ordinal);
  TuningDb db(options.db_path.empty() ? results_db_path() : options.db_path);

  // A search that ran to its end answers from the database; an interrupted one resumes.
  if (auto best = stored_answer(db, report, options, false))
    return answer_from(report, *best, start);
  if (options.extra.empty()) require_family(problem, report.device.arch);

  RankedSearch search(options.search);
  const auto [planned, left] = plan_run(db, report, options, search);
  if (planned.empty())
    if (auto best = stored_answer(db, report, options, true))
      return answer_from(report, *best, start);
  phase(
      options,
      fmt::format(
          "{}: {} configurations, {} pruned, {} measured before, {} to measure in the cost model's "
          "order (budget: {}{})",
          problem.describe(), report.enumerated, report.pruned, report.already_measured,
          report.to_measure, options.budget.describe(),
          options.search.exhaustive ? ", exhaustive" : ""));
  measure_all(planned, search, db, report, options, start);

  // Complete: every candidate has a record, or the cost model ruled out the rest.
  report.complete = !report.interrupted && (planned.size() == left || report.stopped_by_model);
  report.best = choose_winner(runnable_ok(db, report), default_names(problem, report.device.arch),
                              options.search.default_margin);
  if (report.best)
    db.set_best(report.device.key, problem, report.best->kernel_name, report.best->template_version,
                report.baseline_ms, report.complete);
  report.seconds = seconds_since(start);
  return report;
}

DryRunReport dry_run(const Problem& problem, const ArchInfo& arch, unsigned compile_threads,
                     const std::vector<std::string>& families,
                     const std::function<void(const Progress&)>& progress, int max_candidates,
                     bool compile) {
  validate(problem);
  require_family(problem, arch);
  const auto start = Clock::now();
  DryRunReport report;
  report.problem = problem;
  report.arch = arch.name();
  auto planned = plan(problem, arch, families, {}, false, report.enumerated, report.pruned_by);
  for (const auto& [name, count] : report.pruned_by) report.pruned += count;
  if (max_candidates > 0 && planned.size() > size_t(max_candidates))
    planned.resize(size_t(max_candidates));
  const Compiler compiler;
  std::vector<std::future<CompileOutcome>> futures;
  ThreadPool pool(compile_threads);
  for (const auto& p : planned)
    if (compile)
      futures.push_back(
          pool.submit([&compiler, &p, &arch] { return compile_one(compiler, p, arch); }));
  for (size_t i = 0; i < planned.size(); ++i) {
    DryRunEntry e;
    e.name = planned[i].name;
    e.family = std::string(planned[i].family->name());
    e.config = planned[i].config;
    e.predicted_ms = planned[i].predicted_ms;
    e.refinement = planned[i].refinement;
    if (!compile) {
      e.status = "listed";
      report.candidates.push_back(std::move(e));
      continue;
    }
    CompileOutcome outcome = futures[i].get();
    if (outcome.kernel) {
      const PtxasReport& r = outcome.kernel->report;
      e.status = "compiled";
      e.registers = r.registers;
      e.spills = r.found ? r.spills() : -1;
      e.smem_bytes = int(planned[i].family->plan(planned[i].config, problem, arch).smem_bytes) +
                     std::max(0, r.smem_static);
      e.compile_ms = outcome.kernel->compile_ms;
      e.compile_cpu_ms = outcome.kernel->compile_cpu_ms;
      e.from_cache = outcome.kernel->from_cache;
      ++report.compiled;
    } else {
      e.status = "compile_error";
      e.message = outcome.error;
      ++report.failed;
    }
    report.candidates.push_back(std::move(e));
    if (progress) {
      Progress p;
      p.kind = Progress::Kind::phase;
      p.index = int(i) + 1;
      p.total = int(planned.size());
      p.text = fmt::format("[{}/{}] {} {}", i + 1, planned.size(), report.candidates.back().name,
                           report.candidates.back().status);
      progress(p);
    }
  }
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace gemmtune
