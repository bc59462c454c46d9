#include "db_summary.hpp"

#include <algorithm>
#include <cmath>

#include "cli_common.hpp"
#include "gemmtune/generator/util.hpp"

namespace gemmtune::cli {

std::string types_text(const Problem& p) {
  return p.types.name() + computing_text(p);
}

std::string computing_text(const Problem& p) {
  std::string text;
  if (p.scaling != Scaling::none) text += fmt::format(" scaling={}", to_string(p.scaling));
  if (p.fast_accumulation()) text += " accum=fast";
  if (p.precision != Precision::exact) text += fmt::format(" precision={}", to_string(p.precision));
  return text;
}

std::string groups_text(const Problem& p) {
  if (!p.grouped()) return "";
  return fmt::format(" groups={}{}", p.groups, p.masked() ? " masked" : "");
}

std::string epilogue_text(const Problem& p) {
  return p.epilogue.none() ? "" : " epilogue=" + p.epilogue.name();
}

std::string shape_text(const Problem& p) {
  return p.shape() + groups_text(p) + epilogue_text(p) + p.beta_mark();
}

double cublas_ratio(const BestRecord& best) {
  if (best.baseline_ms <= 0 || best.winner.median_ms <= 0) return -1;
  return best.baseline_ms / best.winner.median_ms;
}

std::string ratio_text(double ratio) {
  return ratio < 0 ? "-" : fmt::format("{:.2f}x", ratio);
}

bool is_winner(const CandidateRecord& c, const std::optional<BestRecord>& best) {
  return best && c.kernel_name == best->winner.kernel_name &&
         c.template_version == best->winner.template_version;
}

std::string why_it_won(const BestRecord& best, const std::vector<CandidateRecord>& candidates) {
  const auto& w = best.winner;
  auto runner_up = std::find_if(candidates.begin(), candidates.end(), [&](const auto& c) {
    return c.status == CandidateStatus::ok && !is_winner(c, best);
  });
  std::string why = "the only candidate that passed verification";
  if (runner_up != candidates.end()) {
    const double margin = (runner_up->median_ms / w.median_ms - 1) * 100;
    why = fmt::format("{:.1f}% {} than the runner-up {} ({} ms vs {} ms)", std::abs(margin),
                      margin >= 0 ? "faster" : "slower", runner_up->kernel_name,
                      format_ms(w.median_ms), format_ms(runner_up->median_ms));
  }
  const double ratio = cublas_ratio(best);
  why += ratio < 0 ? "; no cuBLAS baseline"
                   : fmt::format("; {} cuBLAS's speed (cuBLAS {} ms)", ratio_text(ratio),
                                 format_ms(best.baseline_ms));
  if (!best.complete) why += "; the search did not cover the whole space";
  return fmt::format("winner: {} ({}): {}", w.kernel_name, w.config.family, why);
}

}  // namespace gemmtune::cli
