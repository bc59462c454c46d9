// tuner/timer: the statistics of a timing, also when there is nothing to summarize.
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

}  // namespace
}  // namespace gemmtune
