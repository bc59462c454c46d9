#include "gemmtune/tuner/search.hpp"

#include <algorithm>

namespace gemmtune {

void RankedSearch::add(double predicted_ms, const CandidateRecord& measured) {
  if (measured.status != CandidateStatus::ok || measured.median_ms <= 0) return;
  ++timed_;
  const bool improved = best_ms_ < 0 || measured.median_ms < best_ms_ * (1 - settings_.improvement);
  since_improvement_ = improved ? 0 : since_improvement_ + 1;
  if (best_ms_ < 0 || measured.median_ms < best_ms_) best_ms_ = measured.median_ms;
  if (predicted_ms > 0) best_ratio_ = std::min(best_ratio_, measured.median_ms / predicted_ms);
}

bool RankedSearch::rest_cannot_win(double predicted_ms) const {
  if (settings_.exhaustive || timed_ < settings_.min_candidates || best_ms_ <= 0) return false;
  if (since_improvement_ >= settings_.patience) return true;
  return predicted_ms * best_ratio_ > best_ms_ * (1 + settings_.stop_margin);
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
