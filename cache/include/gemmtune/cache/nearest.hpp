#pragma once
// The nearest tuned shape: the fallback for a problem that has no tuned kernel on this GPU. A
// winner of a shape close in every dimension, made for the call's problem, usually beats the
// untuned default; one of a shape far away says little (a 4096^3 winner fills 1024^3 badly).
#include <functional>
#include <optional>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/generator/family.hpp"

namespace gemmtune {

// Shapes more than this factor apart in any dimension are not near.
inline constexpr double kNearestShapeCutoff = 2.0;
// A problem tuned with the other beta class counts as this much farther, as a dimension this
// factor away: the shape decides most of the choice (tiles against waves) and reading C shifts
// it (docs/PERF.md, 'Reading C changes the winning tile at short K'), so the same shape tuned
// with the other beta is preferred to shapes with the same beta more than 1.25x away.
inline constexpr double kOtherBetaFactor = 1.25;

// Sum of |log| size ratios, plus log(kOtherBetaFactor) when one reads C and the other does not;
// infinite when any dimension differs by more than kNearestShapeCutoff, when the groups or their
// layouts differ, when the accumulations, precisions or epilogues differ, and between grouped
// problems of other M or K (only their N may differ).
double shape_distance(const Problem& a, const Problem& b);

struct NearestBest {
  BestRecord best;      // the tuned problem's row
  KernelConfig config;  // its winner made for the call's problem (with_derived_params)
};

// Of `like` (the bests of the problem's types, scaling, accumulation, epilogue, precision, layout,
// groups and group layout on this GPU, as TuningDb::bests_like returns them), the one of the
// nearest shape whose winner, made for `problem`, `usable` accepts; none when no shape is near.
std::optional<NearestBest> nearest_best(
    const std::vector<BestRecord>& like, const Problem& problem, const ArchInfo& arch,
    const std::function<bool(const BestRecord& tuned, const KernelConfig& adapted)>& usable);

}  // namespace gemmtune
