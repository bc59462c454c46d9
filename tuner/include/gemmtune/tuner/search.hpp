#pragma once
// The ranked search: candidates are measured in the order of the cost model's predicted times
// (Family::predicted_ms), and the search stops when the model says that the rest cannot win.
// A candidate whose first timed runs are clearly slower than the best so far stops being timed.
//
// The stop rule. The model's absolute times are optimistic, and by how much differs from one
// kernel to another; each measured candidate i shows it as the ratio r_i = measured_i /
// predicted_i. A candidate predicted at p could at best run in p * min_i r_i (as well as the
// measured candidate that beat its prediction most). When that is more than `stop_margin` above
// the best measured time, neither it nor anything predicted slower can win, and the search ends
// -- after at least `min_candidates` verified and timed candidates. Where the model cannot tell
// candidates apart, it also ends after `patience` timed candidates in a row that did not beat the
// best by more than `improvement`.
//
// Two passes. Parameters the model has no reliable opinion on (refinements: stages, clusters,
// raster groups, how C is stored; Param::refinement) would otherwise fill the first candidates
// with near copies of one kernel and use up the patience before another structure is measured.
// So the first pass measures one point of each structure (its best predicted), by the rules
// above; the second the other points of the structures measured, in the order of their estimates:
// a point's prediction scaled by its structure's best ratio measured / predicted. It ends when
// the next estimate is more than `stop_margin` above the best, or after `patience` timed
// candidates without improvement.
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "gemmtune/cache/tuning_db.hpp"

namespace gemmtune {

struct SearchSettings {
  bool exhaustive = false;    // measure every valid candidate and time each one fully
  int min_candidates = 8;     // timed ones, before the cost model may end the search
  double stop_margin = 0.10;  // see above
  int patience = 12;
  double improvement = 0.01;
  // Timing stops after `abort_after_runs` runs when even the fastest of them is more than
  // `abort_margin` slower than the best median so far, and after the minimum number of runs when
  // their median is more than `final_margin` slower (it will not be among the finalists).
  double abort_margin = 0.10;
  int abort_after_runs = 5;
  // The final round times again the candidates within `final_margin` of the fastest (at most
  // TuneOptions::final_candidates of them); exhaustive searches take the fastest regardless.
  double final_margin = 0.03;
  // A family's default stays the winner unless the final round timed another kernel more than
  // `default_margin` faster: the default is what an untuned call runs, and a kernel that won by
  // less won by the clocks (choose_winner, cache/tuning_db.hpp).
  double default_margin = kWinnerMargin;
};

class RankedSearch {
 public:
  explicit RankedSearch(const SearchSettings& settings) : settings_(settings) {}

  // A measured candidate (any status), what the model predicted for it, and its structure.
  void add(double predicted_ms, const CandidateRecord& measured, const std::string& structure = {});
  // First pass: true when a structure predicted at predicted_ms, and every one predicted slower,
  // cannot win.
  bool rest_cannot_win(double predicted_ms) const;
  // Second pass. The estimate of a refinement of `structure` predicted at predicted_ms; nullopt
  // when no point of the structure was timed (it failed, or the first pass ruled it out).
  std::optional<double> estimate_ms(double predicted_ms, const std::string& structure) const;
  void begin_refinements();  // patience counts afresh
  // True when a refinement estimated at estimated_ms, and every one estimated slower, cannot win.
  bool refinements_cannot_win(double estimated_ms) const;
  // The next candidate's early stops (TimingSettings); 0: time it fully.
  double abort_above_ms() const;
  double enough_above_ms() const;

  double best_ms() const { return best_ms_; }  // < 0: nothing timed yet
  int timed() const { return timed_; }

 private:
  SearchSettings settings_;
  double best_ms_ = -1;
  double best_ratio_ = std::numeric_limits<double>::infinity();  // min measured / predicted
  std::map<std::string, double> structure_ratio_;                // the same, per structure
  int timed_ = 0;
  int since_improvement_ = 0;  // timed candidates since the best last improved by `improvement`
};

}  // namespace gemmtune
