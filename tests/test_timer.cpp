// tuner/timer: the statistics of a timing, also when there is nothing to summarize; a grouped
// problem's timing over its routings, and the early stops of each routing's.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "gemmtune/tuner/timer.hpp"

namespace gemmtune {
namespace {

TEST(Timing, MedianMinAndMaxOfAnyOrder) {
  const Timing odd = summarize({3.0, 1.0, 2.0});
  EXPECT_EQ(odd.runs, 3);
  EXPECT_DOUBLE_EQ(odd.median_ms, 2.0);
  EXPECT_DOUBLE_EQ(odd.min_ms, 1.0);
  EXPECT_DOUBLE_EQ(odd.max_ms, 3.0);
  const Timing even = summarize({4.0, 1.0, 3.0, 2.0});
  EXPECT_EQ(even.runs, 4);
  EXPECT_DOUBLE_EQ(even.median_ms, 2.5);
  const Timing one = summarize({0.25});
  EXPECT_EQ(one.runs, 1);
  EXPECT_DOUBLE_EQ(one.median_ms, 0.25);
}

// No runs (max_runs 0 upstream, say) is an empty timing, never a read past an empty vector.
TEST(Timing, NoRunsIsAnEmptyTimingNotACrash) {
  const Timing none = summarize({});
  EXPECT_EQ(none.runs, 0);
  EXPECT_EQ(none.median_ms, 0);
  EXPECT_EQ(none.min_ms, 0);
  EXPECT_EQ(none.max_ms, 0);
}

// The launches Turns names, in order, until it says stop; each run takes `ms(launch, run)`.
std::vector<int> order_of(Turns& turns, const std::function<double(int, int)>& ms) {
  std::vector<int> order;
  for (int i = turns.next(); i >= 0 && order.size() < 100000; i = turns.next()) {
    turns.add(ms(i, int(order.size())));
    order.push_back(i);
  }
  return order;
}

TimingSettings runs_only(int min_runs, int max_runs) {
  TimingSettings s;
  s.min_runs = min_runs;
  s.max_runs = max_runs;
  s.min_total_ms = 0;
  return s;
}

// Forward, then backward: no launch always follows the same other, and each meets the others'
// clocks on both sides.
TEST(Turns, GoForwardThenBackward) {
  Turns turns(3, runs_only(4, 100));
  const std::vector<int> order = order_of(turns, [](int, int) { return 1.0; });
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 2, 1, 0, 0, 1, 2, 2, 1, 0}));
  Turns two(2, runs_only(3, 100));
  EXPECT_EQ(order_of(two, [](int, int) { return 1.0; }), (std::vector<int>{0, 1, 1, 0, 0, 1}));
}

// The fastest launch sets how long the turns go on (every launch needs min_total_ms of time),
// and every launch ends with as many runs.
TEST(Turns, EveryLaunchGetsAsManyRunsUntilTheFastestHasItsTotal) {
  TimingSettings s = runs_only(5, 1000);
  s.min_total_ms = 10;
  Turns turns(2, s);
  const std::vector<int> order = order_of(turns, [](int i, int) { return i == 0 ? 0.5 : 2.0; });
  const std::vector<Timing> t = turns.timings();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].runs, 20);  // 20 x 0.5 ms = 10 ms
  EXPECT_EQ(t[1].runs, 20);
  EXPECT_EQ(order.size(), 40u);
  EXPECT_DOUBLE_EQ(t[0].median_ms, 0.5);
  EXPECT_DOUBLE_EQ(t[1].median_ms, 2.0);
}

// max_runs ends the turns even when a launch never has its total; one run at the least.
TEST(Turns, MaxRunsEndsTheTurnsAndOneRunIsTheLeast) {
  TimingSettings s = runs_only(5, 7);
  s.min_total_ms = 1e9;
  Turns capped(3, s);
  EXPECT_EQ(order_of(capped, [](int, int) { return 1.0; }).size(), 21u);
  for (const Timing& t : capped.timings()) EXPECT_EQ(t.runs, 7);
  Turns none(2, runs_only(0, 0));
  EXPECT_EQ(order_of(none, [](int, int) { return 1.0; }), (std::vector<int>{0, 1}));
  Turns empty(0, runs_only(5, 10));
  EXPECT_EQ(empty.next(), -1);
  EXPECT_TRUE(empty.timings().empty());
}

// Each launch's timing is the summary of its own runs: a drift that every launch meets in turn
// moves their medians alike.
TEST(Turns, EachTimingSummarizesItsOwnRuns) {
  Turns turns(2, runs_only(6, 6));
  order_of(turns, [](int i, int run) { return (i == 0 ? 1.0 : 1.1) * (1.0 + 0.01 * run); });
  const std::vector<Timing> t = turns.timings();
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].runs, 6);
  EXPECT_NEAR(t[1].median_ms / t[0].median_ms, 1.1, 0.01);
  EXPECT_LT(t[0].min_ms, t[0].max_ms);
}

// The ranking time of a grouped problem is the mean of its routings' medians (min and max
// likewise), over all their runs; one routing (a dense problem) is its timing as it is.
TEST(Routings, TheTimingIsTheMeanOverTheRoutings) {
  const Timing uniform{1.0, 0.9, 1.2, 20}, skewed{1.5, 1.3, 1.9, 12, true};
  const Timing both = mean_over_routings({uniform, skewed});
  EXPECT_DOUBLE_EQ(both.median_ms, 1.25);
  EXPECT_DOUBLE_EQ(both.min_ms, 1.1);
  EXPECT_DOUBLE_EQ(both.max_ms, 1.55);
  EXPECT_EQ(both.runs, 32);
  EXPECT_TRUE(both.stopped_early);
  EXPECT_FALSE(mean_over_routings({uniform, uniform}).stopped_early);
  const Timing one = mean_over_routings({skewed});
  EXPECT_EQ(one.median_ms, 1.5);
  EXPECT_EQ(one.min_ms, 1.3);
  EXPECT_EQ(one.runs, 12);
  EXPECT_TRUE(one.stopped_early);
  EXPECT_EQ(mean_over_routings({}).runs, 0);
}

// The early stops compare means with means: the best's mean threshold against what this
// routing may take, the others' times counted (0 for those not timed yet). One routing (dense)
// leaves the settings exactly as they were.
TEST(Routings, EarlyStopsCompareTheMeanWithTheBestsMean) {
  TimingSettings s;
  s.abort_above_ms = 1.1;
  s.enough_above_ms = 1.03;
  const TimingSettings dense = stops_for_routing(s, {}, 1);
  EXPECT_EQ(dense.abort_above_ms, 1.1);
  EXPECT_EQ(dense.enough_above_ms, 1.03);
  EXPECT_EQ(dense.min_runs, s.min_runs);
  // The first of two: above twice the threshold even a free second routing cannot bring the
  // mean under it.
  const TimingSettings first = stops_for_routing(s, {}, 2);
  EXPECT_DOUBLE_EQ(first.abort_above_ms, 2.2);
  EXPECT_DOUBLE_EQ(first.enough_above_ms, 2.06);
  // The second: what the first left, its fastest for the abort, its median for enough.
  const TimingSettings second = stops_for_routing(s, {Timing{0.8, 0.7, 0.9, 20}}, 2);
  EXPECT_DOUBLE_EQ(second.abort_above_ms, 2.2 - 0.7);
  EXPECT_DOUBLE_EQ(second.enough_above_ms, 2.06 - 0.8);
  // A first routing that already took more than the mean allows: the second stops as soon as
  // its rules let it (a threshold above 0, below any time), never "do not stop" (0).
  const TimingSettings lost = stops_for_routing(s, {Timing{2.5, 2.4, 2.6, 5, true}}, 2);
  EXPECT_GT(lost.abort_above_ms, 0);
  EXPECT_LT(lost.abort_above_ms, 1e-300);
  EXPECT_GT(lost.enough_above_ms, 0);
  EXPECT_LT(lost.enough_above_ms, 1e-300);
  // No early stops asked (an exhaustive search, the first candidate): none on any routing.
  const TimingSettings none = stops_for_routing(TimingSettings{}, {Timing{2.5, 2.4, 2.6, 5}}, 2);
  EXPECT_EQ(none.abort_above_ms, 0);
  EXPECT_EQ(none.enough_above_ms, 0);
}

}  // namespace
}  // namespace gemmtune
