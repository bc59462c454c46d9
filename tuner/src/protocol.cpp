#include "protocol.hpp"

namespace gemmtune {

// A problem as the tuning database's export writes and reads it (json_of, problem_from_json), so
// that a field added to Problem is carried by one pair of functions, checked by validate().
nlohmann::json to_json(const Problem& p) {
  return nlohmann::json::parse(json_of(p));
}

Problem problem_from_json(const nlohmann::json& j) {
  return problem_from_json(std::string_view(j.dump()));
}

nlohmann::json to_json(const TimingSettings& t) {
  return {{"min_runs", t.min_runs},
          {"max_runs", t.max_runs},
          {"min_total_ms", t.min_total_ms},
          {"warmup_ms", t.warmup_ms},
          {"flush_l2", t.flush_l2},
          {"abort_above_ms", t.abort_above_ms},
          {"abort_after_runs", t.abort_after_runs},
          {"enough_above_ms", t.enough_above_ms}};
}

TimingSettings timing_from_json(const nlohmann::json& j) {
  TimingSettings t;
  t.min_runs = j.at("min_runs");
  t.max_runs = j.at("max_runs");
  t.min_total_ms = j.at("min_total_ms");
  t.warmup_ms = j.at("warmup_ms");
  t.flush_l2 = j.at("flush_l2");
  t.abort_above_ms = j.value("abort_above_ms", 0.0);
  t.abort_after_runs = j.value("abort_after_runs", t.abort_after_runs);
  t.enough_above_ms = j.value("enough_above_ms", 0.0);
  return t;
}

nlohmann::json to_json(const Timing& t) {
  return {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"runs", t.runs}};
}

Timing result_timing_from_json(const nlohmann::json& j) {
  return Timing{j.at("median_ms"), j.at("min_ms"), j.at("max_ms"), j.at("runs")};
}

nlohmann::json to_json(const CandidateRecord& c) {
  return {{"kernel_name", c.kernel_name},
          {"template_version", c.template_version},
          {"config", nlohmann::json::parse(c.config.to_json())},
          {"status", std::string(to_string(c.status))},
          {"registers", c.registers},
          {"spills", c.spills},
          {"smem_bytes", c.smem_bytes},
          {"compile_ms", c.compile_ms},
          {"median_ms", c.median_ms},
          {"min_ms", c.min_ms},
          {"max_ms", c.max_ms},
          {"runs", c.runs},
          {"tflops", c.tflops},
          {"max_error", c.max_error},
          {"message", c.message}};
}

CandidateRecord candidate_from_json(const nlohmann::json& j) {
  CandidateRecord c;
  c.kernel_name = j.at("kernel_name");
  c.template_version = j.at("template_version");
  c.config = KernelConfig::from_json(j.at("config").dump());
  c.status = parse_status(j.at("status").get<std::string>());
  c.registers = j.at("registers");
  c.spills = j.at("spills");
  c.smem_bytes = j.at("smem_bytes");
  c.compile_ms = j.at("compile_ms");
  c.median_ms = j.at("median_ms");
  c.min_ms = j.at("min_ms");
  c.max_ms = j.at("max_ms");
  c.runs = j.at("runs");
  c.tflops = j.at("tflops");
  c.max_error = j.at("max_error");
  c.message = j.at("message");
  return c;
}

}  // namespace gemmtune
