#include "db_report.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "db_summary.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune {
#ifdef GEMMTUNE_HAVE_CHART_JS
std::string_view chart_js();  // Debian's libjs-chart.js, embedded at build time
#endif
}  // namespace gemmtune

namespace gemmtune::cli {
namespace {

using Json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------
// What the page shows, gathered from the database

struct ProblemReport {
  Problem problem;
  std::optional<BestRecord> best;
  std::vector<CandidateRecord> candidates;  // current templates; ok ones fastest first
};

struct GpuReport {
  DeviceKey device;
  std::vector<ProblemReport> problems;
  std::vector<BestRecord> stale;  // winners measured with templates this build does not have
};

GpuReport& gpu_of(std::vector<GpuReport>& gpus, const DeviceKey& device) {
  auto it =
      std::find_if(gpus.begin(), gpus.end(), [&](const auto& g) { return g.device == device; });
  if (it != gpus.end()) return *it;
  gpus.push_back(GpuReport{device, {}, {}});
  return gpus.back();
}

std::vector<GpuReport> gather(const TuningDb& db, const ProblemFilter& filter) {
  std::vector<GpuReport> gpus;
  for (const auto& [device, problem] : db.problems(filter.db)) {
    if (!filter.matches(problem)) continue;
    ProblemReport p{problem, db.best(device, problem), db.candidates(device, problem)};
    if (!p.candidates.empty()) gpu_of(gpus, device).problems.push_back(std::move(p));
  }
  for (auto& best : db.list(filter.db))
    if (!best.current && filter.matches(best.problem))
      gpu_of(gpus, best.device).stale.push_back(std::move(best));
  return gpus;
}

// ---------------------------------------------------------------------------------------------
// Text

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// "bf16 tn 4096x8x4096" or "f16*bf16->f32 nn 4096x8x4096", with the leading dimensions that are
// not tight, the scaling where there is one (and "accum=fast" where it is fast, as describe()
// says), the precision where it is not exact ("precision=tf32"), the groups where it is grouped
// (and "masked" for that layout), the epilogue where there is one ("epilogue=bias,gelu") and "
// beta!=0" when it reads C.
std::string problem_label(const Problem& p) {
  std::string label = fmt::format("{} {} {}", p.types.name(), p.layout(), p.shape());
  const Problem tight = make_problem(p.types, p.op_a, p.op_b, p.m, p.n, p.k);
  if (p.lda != tight.lda) label += fmt::format(" lda={}", p.lda);
  if (p.ldb != tight.ldb) label += fmt::format(" ldb={}", p.ldb);
  if (p.ldc != tight.ldc) label += fmt::format(" ldc={}", p.ldc);
  label += computing_text(p) + groups_text(p) + epilogue_text(p);
  return label + p.beta_mark();
}

double cublas_tflops(const BestRecord& best) {
  return best.baseline_ms > 0 ? best.problem.flops() / (best.baseline_ms * 1e9) : -1;
}

// "2025-11-21 10:00" of "2025-11-21T10:00:00.000Z"
std::string minutes(std::string time) {
  if (time.size() > 16) time.resize(16);
  if (time.size() > 10 && time[10] == 'T') time[10] = ' ';
  return time;
}

std::string number(double value) {
  return value < 0 ? "-" : fmt::format("{:.1f}", value);
}

int failures(const ProblemReport& p) {
  return int(std::count_if(p.candidates.begin(), p.candidates.end(),
                           [](const auto& c) { return c.status != CandidateStatus::ok; }));
}

std::string element_id(size_t gpu, std::string_view what, size_t index = SIZE_MAX) {
  return index == SIZE_MAX ? fmt::format("gpu{}-{}", gpu, what)
                           : fmt::format("gpu{}-{}{}", gpu, what, index);
}

// ---------------------------------------------------------------------------------------------
// The plots' data (read by the page's script)

Json candidates_json(const ProblemReport& p) {
  Json list = Json::array();
  for (const auto& c : p.candidates)
    if (c.status == CandidateStatus::ok)
      list.push_back(
          {{"kernel", c.kernel_name}, {"tflops", c.tflops}, {"winner", is_winner(c, p.best)}});
  return list;
}

Json gpu_json(const GpuReport& gpu, size_t index) {
  Json problems = Json::array();
  for (size_t i = 0; i < gpu.problems.size(); ++i) {
    const ProblemReport& p = gpu.problems[i];
    const double ratio = p.best ? cublas_ratio(*p.best) : -1;
    const double cublas = p.best ? cublas_tflops(*p.best) : -1;
    auto unknown_is_null = [](double v) { return v < 0 ? Json(nullptr) : Json(v); };
    problems.push_back({{"id", element_id(index, "problem", i)},
                        {"label", problem_label(p.problem)},
                        {"ours", p.best ? unknown_is_null(p.best->winner.tflops) : Json(nullptr)},
                        {"cublas", unknown_is_null(cublas)},
                        {"ratio", unknown_is_null(ratio)},
                        {"candidates", candidates_json(p)}});
  }
  return {{"id", element_id(index, "")}, {"name", gpu.device.name}, {"problems", problems}};
}

// JSON inside <script>: "</" would end the element.
std::string script_safe(std::string json) {
  for (size_t at = 0; (at = json.find("</", at)) != std::string::npos; at += 3)
    json.replace(at, 2, "<\\/");
  return json;
}

// ---------------------------------------------------------------------------------------------
// HTML

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1180px; padding: 16px 24px; color: #1f2937; }
h1 { margin: 0 0 4px; } h2 { margin-top: 40px; border-bottom: 2px solid #e5e7eb; }
h3 { margin-top: 28px; } .muted { color: #6b7280; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; margin: 12px 0; }
.card { border: 1px solid #e5e7eb; border-radius: 8px; padding: 8px 14px; min-width: 150px; }
.card b { display: block; font-size: 22px; }
table { border-collapse: collapse; margin: 8px 0; font-size: 13px; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 3px 10px; text-align: left; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.slower td.ratio { color: #c2410c; } tr.faster td.ratio { color: #15803d; }
code { font-size: 12px; } .why { margin: 4px 0; }
article { border-top: 1px solid #f3f4f6; padding-top: 6px; margin-top: 18px; }
.note { background: #fef3c7; padding: 8px 12px; border-radius: 6px; }
canvas { max-width: 100%; }
)";

std::string cards(const GpuReport& gpu) {
  int tuned = 0, with_baseline = 0, faster = 0, candidates = 0, failed = 0;
  double log_sum = 0;
  for (const auto& p : gpu.problems) {
    candidates += int(p.candidates.size());
    failed += failures(p);
    if (!p.best) continue;
    ++tuned;
    if (const double r = cublas_ratio(*p.best); r > 0) {
      ++with_baseline;
      faster += r >= 1;
      log_sum += std::log(r);
    }
  }
  auto card = [](const std::string& value, const std::string& what) {
    return fmt::format("<div class=\"card\"><b>{}</b>{}</div>", value, what);
  };
  std::string out = "<div class=\"cards\">";
  out += card(std::to_string(tuned), "problems tuned");
  out += card(with_baseline ? ratio_text(std::exp(log_sum / with_baseline)) : "-",
              "geometric mean of cuBLAS time / ours");
  out += card(fmt::format("{} of {}", faster, with_baseline), "as fast as cuBLAS or faster");
  out += card(fmt::format("{} ({} failed)", candidates, failed), "candidates measured");
  out += card(std::to_string(gpu.stale.size()), "stale best rows (not used)");
  return out + "</div>\n";
}

std::string problems_table(const GpuReport& gpu) {
  std::string out =
      "<table><tr><th>problem</th><th>winner</th><th class=num>ours TFLOP/s</th>"
      "<th class=num>cuBLAS TFLOP/s</th><th class=num>cuBLAS time / ours</th>"
      "<th class=num>candidates ok / failed</th><th>tuned at</th></tr>\n";
  for (const auto& p : gpu.problems) {
    const int failed = failures(p);
    const int ok = int(p.candidates.size()) - failed;
    if (!p.best) {
      out += fmt::format(
          "<tr><td>{}</td><td colspan=4 class=muted>no winner yet (the tuning run "
          "did not finish)</td><td class=num>{} / {}</td><td></td></tr>\n",
          escape(problem_label(p.problem)), ok, failed);
      continue;
    }
    const double ratio = cublas_ratio(*p.best);
    out += fmt::format(
        "<tr class=\"{}\"><td>{}</td><td><code>{}</code> ({})</td><td class=num>{}</td>"
        "<td class=num>{}</td><td class=\"num ratio\">{}</td><td class=num>{} / {}</td>"
        "<td>{}</td></tr>\n",
        ratio < 0    ? ""
        : ratio >= 1 ? "faster"
                     : "slower",
        escape(problem_label(p.problem)), escape(p.best->winner.kernel_name),
        escape(p.best->winner.config.family), number(p.best->winner.tflops),
        number(cublas_tflops(*p.best)), ratio_text(ratio), ok, failed,
        escape(minutes(p.best->tuned_at)));
  }
  return out + "</table>\n";
}

std::string failures_details(const ProblemReport& p) {
  const int failed = failures(p);
  if (failed == 0) return "";
  std::map<std::string, int> by_status;
  std::string rows;
  for (const auto& c : p.candidates) {
    if (c.status == CandidateStatus::ok) continue;
    ++by_status[std::string(to_string(c.status))];
    rows += fmt::format("<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>\n",
                        escape(c.kernel_name), to_string(c.status), escape(c.message));
  }
  std::string summary;
  for (const auto& [status, count] : by_status)
    summary += fmt::format("{}{} {}", summary.empty() ? "" : ", ", count, status);
  return fmt::format(
      "<details><summary>{} failed candidates: {}</summary><table><tr><th>kernel"
      "</th><th>status</th><th>message</th></tr>\n{}</table></details>\n",
      failed, summary, rows);
}

std::string problem_article(const ProblemReport& p, const std::string& id) {
  std::string out = fmt::format("<article><h4>{}</h4><div class=muted>{}</div>\n",
                                escape(problem_label(p.problem)), escape(p.problem.describe()));
  out += fmt::format("<p class=why>{}</p>\n",
                     escape(p.best ? why_it_won(*p.best, p.candidates)
                                   : "no winner yet: the tuning run did not finish"));
  const auto ok = p.candidates.size() - size_t(failures(p));
  if (ok > 0)
    out += fmt::format(
        "<canvas id=\"{}\" width=\"1100\" height=\"220\" role=\"img\" aria-label="
        "\"TFLOP/s of the {} candidates that passed verification\"></canvas>\n",
        id, ok);
  return out + failures_details(p) + "</article>\n";
}

std::string stale_table(const GpuReport& gpu) {
  if (gpu.stale.empty()) return "";
  std::string out =
      "<h3>Stale results</h3><p class=muted>Winners measured with kernel templates this build "
      "does not have: kept in the database, never used. Tune the problem again to replace "
      "them.</p>\n<table><tr><th>problem</th><th>kernel</th><th>template version</th>"
      "<th class=num>TFLOP/s</th><th>tuned at</th></tr>\n";
  for (const auto& b : gpu.stale)
    out += fmt::format(
        "<tr><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td class=num>{}</td>"
        "<td>{}</td></tr>\n",
        escape(problem_label(b.problem)), escape(b.winner.kernel_name),
        escape(b.winner.template_version), number(b.winner.tflops), escape(minutes(b.tuned_at)));
  return out + "</table>\n";
}

std::string gpu_section(const GpuReport& gpu, size_t index, ReportCounts& counts) {
  const DeviceKey& d = gpu.device;
  std::string out = fmt::format(
      "<section id=\"{}\"><h2>{}</h2><div class=muted>compute capability {}.{}, {} SMs, driver "
      "{}, NVRTC {}</div>\n",
      element_id(index, "section"), escape(d.name), d.cc / 10, d.cc % 10, d.sms, d.driver,
      escape(d.nvrtc));
  out += cards(gpu);
  if (!gpu.problems.empty()) {
    const int width = std::clamp(int(gpu.problems.size()) * 70, 520, 1100);
    out += fmt::format(
        "<h3>TFLOP/s per problem</h3><canvas id=\"{}\" width=\"{}\" height=\"320\" role=\"img\" "
        "aria-label=\"gemmtune and cuBLAS TFLOP/s per problem\"></canvas>\n"
        "<h3>cuBLAS time / ours</h3><p class=muted>Above 1: faster than cuBLAS (green), measured "
        "in "
        "the same run, interleaved.</p><canvas id=\"{}\" width=\"{}\" height=\"260\" role=\"img\" "
        "aria-label=\"ratio to cuBLAS per problem\"></canvas>\n",
        element_id(index, "tflops"), width, element_id(index, "ratio"), width);
    counts.charts += 2;
  }
  out += problems_table(gpu);
  out +=
      "<h3>Every candidate, per problem</h3><p class=muted>Each bar is one kernel that passed "
      "verification, fastest first; red is the winner, the dashed line cuBLAS.</p>\n";
  for (size_t i = 0; i < gpu.problems.size(); ++i) {
    out += problem_article(gpu.problems[i], element_id(index, "problem", i));
    counts.charts += gpu.problems[i].candidates.size() > size_t(failures(gpu.problems[i]));
    counts.candidates += int(gpu.problems[i].candidates.size());
  }
  counts.problems += int(gpu.problems.size());
  return out + stale_table(gpu) + "</section>\n";
}

// Draws every plot from #report-data, then leaves evidence for tests and curious readers:
// body[data-charts] (charts made) and canvas[data-painted] (pixels drawn, sampled).
constexpr const char* kPlotScript = R"(
(function () {
  try {
    const data = JSON.parse(document.getElementById('report-data').textContent);
    const color = {ours: '#2563eb', cublas: '#9ca3af', faster: '#16a34a', slower: '#ea580c',
                   winner: '#dc2626', other: '#93c5fd'};
    const made = [];
    function chart(id, config) {
      const canvas = document.getElementById(id);
      config.options = Object.assign({animation: false, responsive: false}, config.options);
      if (canvas) made.push([canvas, new Chart(canvas, config)]);
    }
    function level(label, value, count) {
      return {type: 'line', label: label, data: Array(count).fill(value), borderColor: '#374151',
              borderDash: [6, 4], borderWidth: 1.5, pointRadius: 0};
    }
    for (const gpu of data.gpus) {
      const labels = gpu.problems.map(p => p.label);
      chart(gpu.id + 'tflops', {type: 'bar', data: {labels: labels, datasets: [
          {label: 'gemmtune', data: gpu.problems.map(p => p.ours), backgroundColor: color.ours},
          {label: 'cuBLAS', data: gpu.problems.map(p => p.cublas), backgroundColor: color.cublas}]},
        options: {scales: {y: {beginAtZero: true, title: {display: true, text: 'TFLOP/s'}}}}});
      const ratios = gpu.problems.map(p => p.ratio);
      chart(gpu.id + 'ratio', {type: 'bar', data: {labels: labels, datasets: [
          {label: 'cuBLAS time / ours', data: ratios, base: 1,
           backgroundColor: ratios.map(r => r >= 1 ? color.faster : color.slower)},
          level('as fast as cuBLAS', 1, labels.length)]},
        options: {scales: {y: {beginAtZero: false, suggestedMin: 0.9, suggestedMax: 1.1}}}});
      for (const p of gpu.problems) {
        const sets = [{label: 'TFLOP/s', data: p.candidates.map(c => c.tflops),
                       backgroundColor: p.candidates.map(c => c.winner ? color.winner : color.other)}];
        if (p.cublas !== null) sets.push(level('cuBLAS', p.cublas, p.candidates.length));
        chart(p.id, {type: 'bar', data: {labels: p.candidates.map(c => c.kernel), datasets: sets},
          options: {plugins: {legend: {display: false}},
                    scales: {x: {ticks: {display: false}}, y: {beginAtZero: true,
                             title: {display: true, text: 'TFLOP/s'}}}}});
      }
    }
    for (const [canvas] of made) {
      const pixels = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
      let painted = 0;
      for (let i = 3; i < pixels.length; i += 4 * 5) painted += pixels[i] > 0;
      canvas.dataset.painted = painted;
    }
    document.body.dataset.charts = made.length;
  } catch (e) {
    document.body.dataset.reportError = String(e);
    throw e;
  }
})();
)";

std::string scripts(const std::vector<GpuReport>& gpus) {
  Json data = {{"gpus", Json::array()}};
  for (size_t i = 0; i < gpus.size(); ++i) data["gpus"].push_back(gpu_json(gpus[i], i));
  std::string out;
#ifdef GEMMTUNE_HAVE_CHART_JS
  out += "<script>\n" + std::string(chart_js()) + "\n</script>\n";
#endif
  out += "<script type=\"application/json\" id=\"report-data\">" + script_safe(data.dump()) +
         "</script>\n";
#ifdef GEMMTUNE_HAVE_CHART_JS
  out += std::string("<script>") + kPlotScript + "</script>\n";
#endif
  return out;
}

}  // namespace

std::string html_report(const TuningDb& db, const ProblemFilter& filter, ReportCounts& counts) {
  const auto gpus = gather(db, filter);
  counts = ReportCounts{};
  counts.gpus = int(gpus.size());
  std::string body;
  for (size_t i = 0; i < gpus.size(); ++i) body += gpu_section(gpus[i], i, counts);
  std::string out =
      "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<title>gemmtune tuning report</title><style>";
  out += kStyle;
  out += "</style></head>\n<body>\n<h1>gemmtune tuning report</h1>\n";
  out += fmt::format("<div class=muted>{} · {} GPUs, {} problems, {} candidates</div>\n",
                     escape(db.path().string()), counts.gpus, counts.problems, counts.candidates);
#ifndef GEMMTUNE_HAVE_CHART_JS
  out +=
      "<p class=note>This gemm-db was built without Chart.js (Debian's libjs-chart.js): "
      "tables only. Install it and rebuild for the plots.</p>\n";
  counts.charts = 0;
#endif
  if (gpus.empty()) out += "<p>No tuning results match.</p>\n";
  out += body + scripts(gpus) + "</body></html>\n";
  return out;
}

}  // namespace gemmtune::cli
