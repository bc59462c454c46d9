// The work decomposition the kernels use (templates/schedule.h): walked as the kernels walk it
// (has_segment), every (tile, k-block) is computed exactly once, in every mode, for many shapes
// and worker counts; the parts of a tile are numbered in k order and their workspace slots are
// distinct and in range.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "schedule.h"

namespace gemmtune::schedule {
namespace {

struct Coverage {
  std::vector<int> times;                        // tile * k_blocks + k-block -> how often computed
  std::map<int, std::vector<Segment>> parts_of;  // tile -> its segments
};

Coverage cover(const Work& w) {
  Coverage c;
  c.times.assign(size_t(w.tiles) * size_t(w.k_blocks), 0);
  for (int worker = 0; worker < w.workers; ++worker) {
    int i = 0;
    for (; has_segment(w, worker, i); ++i) {  // as the kernels walk their segments
      const Segment s = segment(w, worker, i);
      EXPECT_LT(s.k_begin, s.k_end) << "empty segment";
      EXPECT_GE(s.tile, 0);
      EXPECT_LT(s.tile, w.tiles);
      for (int kb = s.k_begin; kb < s.k_end; ++kb)
        ++c.times[size_t(s.tile) * size_t(w.k_blocks) + size_t(kb)];
      c.parts_of[s.tile].push_back(s);
    }
    EXPECT_EQ(i, segments(w, worker)) << "worker " << worker;
  }
  return c;
}

void expect_exact_cover(const Work& w) {
  SCOPED_TRACE(testing::Message() << "mode " << w.mode << ", " << w.tiles << " tiles x "
                                  << w.k_blocks << " k-blocks, " << w.workers << " workers, "
                                  << w.splits << " splits");
  const Coverage c = cover(w);
  for (size_t i = 0; i < c.times.size(); ++i)
    ASSERT_EQ(c.times[i], 1) << "tile " << i / size_t(w.k_blocks) << " k-block "
                             << i % size_t(w.k_blocks);
  std::set<int> slots_used;
  for (const auto& [tile, segs] : c.parts_of) {
    const int parts = segs.front().parts;
    ASSERT_EQ(int(segs.size()), parts) << "tile " << tile;
    std::map<int, Segment> by_part;
    for (const Segment& s : segs) {
      ASSERT_EQ(s.parts, parts);
      by_part[s.part] = s;
    }
    ASSERT_EQ(int(by_part.size()), parts) << "part numbers repeat in tile " << tile;
    int k = 0;
    for (const auto& [part, s] : by_part) {  // parts cover the tile's k-blocks in order
      ASSERT_EQ(s.k_begin, k) << "tile " << tile << " part " << part;
      k = s.k_end;
      if (parts > 1) {
        ASSERT_EQ(s.slot, slot_of(w, tile, part));
        ASSERT_GE(s.slot, 0);
        ASSERT_LT(s.slot, slots(w));
        ASSERT_TRUE(slots_used.insert(s.slot).second) << "slot " << s.slot << " used twice";
        ASSERT_LT(tile, counters(w)) << "a tile in parts has no counter";
      }
    }
  }
}

TEST(Schedule, EveryTileAndKBlockExactlyOnce) {
  for (int mode : {DATA_PARALLEL, SPLIT_K, STREAM_K})
    for (int tiles : {1, 2, 7, 64, 131, 132, 133, 200, 264, 300, 1000})
      for (int k_blocks : {1, 2, 3, 8, 64, 129})
        for (int workers : {1, 3, 66, 128, 132})
          for (int splits : {1, 2, 3, 4, 8}) {
            if (mode != SPLIT_K && splits > 1) continue;
            expect_exact_cover(make_work(mode, tiles, k_blocks, workers, splits));
          }
}

TEST(Schedule, DataParallelTilesAreWhole) {
  const Work w = make_work(DATA_PARALLEL, 300, 64, 132, 1);
  EXPECT_EQ(segments(w, 0), 3);
  EXPECT_EQ(segments(w, 131), 2);
  const Segment s = segment(w, 5, 2);
  EXPECT_EQ(s.tile, 5 + 2 * 132);
  EXPECT_EQ(s.parts, 1);
  EXPECT_EQ(slots(w), 0);
}

TEST(Schedule, SplitKClampsSplitsToKBlocks) {
  const Work w = make_work(SPLIT_K, 10, 3, 132, 8);
  EXPECT_EQ(w.splits, 3);
  EXPECT_EQ(slots(w), 30);
  EXPECT_EQ(counters(w), 10);
}

TEST(Schedule, StreamKOnlyWhereWavesAreNotWhole) {
  // 264 tiles on 132 workers: two whole waves, no stream-K.
  EXPECT_EQ(make_work(STREAM_K, 264, 64, 132, 1).sk_tiles, 0);
  // 300 tiles: one data-parallel wave, then 132 + 36 tiles in stream-K runs.
  const Work w = make_work(STREAM_K, 300, 64, 132, 1);
  EXPECT_EQ(w.sk_tiles, 168);
  // Fewer tiles than workers: all of them stream-K; runs are as equal as integers allow.
  const Work few = make_work(STREAM_K, 64, 64, 132, 1);
  EXPECT_EQ(few.sk_tiles, 64);
  for (int worker = 0; worker < 132; ++worker) {
    const int run = sk_begin(few, worker + 1) - sk_begin(few, worker);
    EXPECT_TRUE(run == 31 || run == 32) << run;
  }
  // A tile of 2 k-blocks on 132 workers: only two workers get a run.
  EXPECT_EQ(make_work(STREAM_K, 1, 2, 132, 1).sk_workers, 2);
}

}  // namespace
}  // namespace gemmtune::schedule
