#include "gemmtune/tuner/search.hpp"

#include <algorithm>

namespace gemmtune {

void RankedSearch::add(double predicted_ms, const CandidateRecord& measured,
                       const std::string& structure) {
  if (measured.status != CandidateStatus::ok || measured.median_ms <= 0) return;
  ++timed_;
  const bool improved = best_ms_ < 0 || measured.median_ms < best_ms_ * (1 - settings_.improvement);
  since_improvement_ = improved ? 0 : since_improvement_ + 1;
  if (best_ms_ < 0 || measured.median_ms < best_ms_) best_ms_ = measured.median_ms;
  if (predicted_ms <= 0) return;
  const double ratio = measured.median_ms / predicted_ms;
  best_ratio_ = std::min(best_ratio_, ratio);
  const auto [it, added] = structure_ratio_.emplace(structure, ratio);
  if (!added) it->second = std::min(it->second, ratio);
}

bool RankedSearch::rest_cannot_win(double predicted_ms) const {
  if (settings_.exhaustive || timed_ < settings_.min_candidates || best_ms_ <= 0) return false;
  if (since_improvement_ >= settings_.patience) return true;
  return predicted_ms * best_ratio_ > best_ms_ * (1 + settings_.stop_margin);
}

std::optional<double> RankedSearch::estimate_ms(double predicted_ms,
                                                const std::string& structure) const {
  const auto it = structure_ratio_.find(structure);
  if (it == structure_ratio_.end()) return std::nullopt;
  return predicted_ms * it->second;
}

void RankedSearch::begin_refinements() {
  since_improvement_ = 0;
}

bool RankedSearch::refinements_cannot_win(double estimated_ms) const {
  if (settings_.exhaustive || best_ms_ <= 0) return false;
  return since_improvement_ >= settings_.patience ||
         estimated_ms > best_ms_ * (1 + settings_.stop_margin);
}

double RankedSearch::abort_above_ms() const {
  if (settings_.exhaustive || best_ms_ <= 0) return 0;
  return best_ms_ * (1 + settings_.abort_margin);
}

double RankedSearch::enough_above_ms() const {
  if (settings_.exhaustive || best_ms_ <= 0) return 0;
  return best_ms_ * (1 + settings_.final_margin);
}

}  // namespace gemmtune
