#include "gemmtune/cache/nearest.hpp"

#include <cmath>
#include <limits>

namespace gemmtune {

double shape_distance(const Problem& a, const Problem& b) {
  constexpr double kFar = std::numeric_limits<double>::infinity();
  if (a.groups != b.groups || a.group_layout != b.group_layout) return kFar;
  if (a.accumulation != b.accumulation) return kFar;  // another kernel, another error
  if (a.precision != b.precision) return kFar;        // the same
  if (a.epilogue != b.epilogue) return kFar;  // another store: a plain winner never fuses a bias
  // A grouped problem's M and K are its experts' (fixed by the model): only N, the tokens, moves.
  if (a.grouped() && (a.m != b.m || a.k != b.k)) return kFar;
  double total = a.reads_c == b.reads_c ? 0 : std::log(kOtherBetaFactor);
  for (auto [x, y] : {std::pair{a.m, b.m}, std::pair{a.n, b.n}, std::pair{a.k, b.k}}) {
    const double d = std::abs(std::log(double(x) / double(y)));
    if (d > std::log(kNearestShapeCutoff) + 1e-9) return kFar;
    total += d;
  }
  return total;
}

std::optional<NearestBest> nearest_best(
    const std::vector<BestRecord>& like, const Problem& problem, const ArchInfo& arch,
    const std::function<bool(const BestRecord& tuned, const KernelConfig& adapted)>& usable) {
  std::optional<NearestBest> nearest;
  double nearest_distance = std::numeric_limits<double>::max();
  for (const BestRecord& b : like) {
    const double d = shape_distance(problem, b.problem);
    if (!std::isfinite(d) || d >= nearest_distance) continue;
    KernelConfig adapted = with_derived_params(b.winner.config, b.problem, problem, arch);
    if (!usable(b, adapted)) continue;
    nearest = NearestBest{b, std::move(adapted)};
    nearest_distance = d;
  }
  return nearest;
}

}  // namespace gemmtune
