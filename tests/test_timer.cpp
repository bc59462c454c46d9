// tuner/timer: the statistics of a timing, also when there is nothing to summarize.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace gemmtune
