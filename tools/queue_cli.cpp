// gemm-tune --serve and --status.
#include "queue_cli.hpp"

#include <csignal>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_common.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune::cli {
namespace {

using nlohmann::json;

extern "C" void on_stop_signal(int) {
  request_stop();  // the claim in progress goes back to the queue; a second signal ends at once
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

// "2026-11-27 06:40:12": a daemon's log is read hours later.
std::string clock_text() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S", &local);
  return text;
}

std::string timestamp_line(const std::string& text) {
  return fmt::format("gemm-tune --serve: {} {}\n", clock_text(), text);
}

json entry_json(const QueueEntry& e) {
  return {{"id", e.id},
          {"state", std::string(to_string(e.state))},
          {"problem", json::parse(json_of(e.problem))},
          {"describe", e.problem.describe()},
          {"device", json::parse(json_of(e.device))},
          {"calls", e.calls},
          {"predicted_us", e.predicted_us},
          {"priority", e.priority()},
          {"attempts", e.attempts},
          {"claimed_by", e.claimed_by},
          {"message", e.message},
          {"requested_at", e.requested_at},
          {"updated_at", e.updated_at}};
}

std::vector<std::string> entry_row(const QueueEntry& e) {
  return {std::to_string(e.id),       std::string(to_string(e.state)),
          std::to_string(e.calls),    fmt::format("{:.1f}", e.predicted_us),
          e.problem.describe(),       e.device.name,
          std::to_string(e.attempts), e.state == QueueState::tuning ? e.claimed_by : e.message};
}

}  // namespace

int serve_queue(ServeOptions options) {
  options.log = [](const std::string& line) { std::cerr << timestamp_line(line) << std::flush; };
  std::signal(SIGINT, on_stop_signal);
  std::signal(SIGTERM, on_stop_signal);
  const ServeSummary summary = serve(options);
  std::cerr << timestamp_line(fmt::format("{} tuned, {} failed, {} put back from dead daemons",
                                          summary.tuned, summary.failed, summary.released));
  if (stop_requested()) return 130;
  return summary.failed > 0 && options.only_id ? 1 : 0;
}

int show_queue(const std::filesystem::path& db, bool as_json) {
  GT_REQUIRE(std::filesystem::exists(db), Errc::invalid_argument,
             "no tuning database at {}: nothing was queued there", db.string());
  const std::vector<QueueEntry> entries = TuningDb(db, TuningDb::Mode::read_only).queue();
  if (as_json) {
    json out = json::array();
    for (const auto& e : entries) out.push_back(entry_json(e));
    std::cout << json{{"database", db.string()}, {"queue", out}}.dump(2) << "\n";
    return 0;
  }
  Table table({"id", "state", "calls", "pred. us", "problem", "GPU", "tries", "daemon / result"});
  for (const auto& e : entries) table.add(entry_row(e));
  std::cout << fmt::format("queue of {}: {} entr{}\n", db.string(), entries.size(),
                           entries.size() == 1 ? "y" : "ies");
  if (!table.empty()) std::cout << table.render("  ");
  return 0;
}

}  // namespace gemmtune::cli
