// The tile mapping the kernels use (templates/raster.h): division by a launch value through its
// multiplier is exact wherever a kernel divides, and grouped_tile with the launch's divisors
// (raster_divisors, as the families' geometry passes them) visits every tile exactly once, in
// the order of plain division: down each group's rows, then along N.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "raster.h"

namespace gemmtune {
namespace {

void expect_divides(unsigned d, int x) {
  ASSERT_EQ(divide(x, make_divisor(d)), x / int(d)) << x << " / " << d;
}

TEST(Raster, DivisionByItsMultiplierIsExact) {
  std::mt19937 rng(7);
  std::vector<unsigned> divisors;
  for (unsigned d = 1; d <= 4096; ++d) divisors.push_back(d);
  for (int s = 12; s <= 30; ++s) {  // around every power of two up to 2^30, and 2^31 - 1
    const unsigned p = 1u << s;
    for (unsigned d : {p - 1, p, p + 1}) divisors.push_back(d);
  }
  divisors.push_back(0x7fffffffu);
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + rng() % 0x7fffffffu);
  const int largest = 0x7fffffff;
  for (unsigned d : divisors) {
    for (int x : {0, 1, int(d) - 1, int(d), largest, largest - 1, largest - int(d) + 1}) {
      if (x >= 0) expect_divides(d, x);
    }
    for (int i = 0; i < 64; ++i) expect_divides(d, int(rng() % 0x80000000u));
    for (int q : {1, 2, 3, 1000}) {  // around multiples of d
      const long long m = (long long)q * d;
      if (m < largest) {
        expect_divides(d, int(m));
        expect_divides(d, int(m - 1));
      }
    }
  }
}

// The mapping with plain division (what grouped_tile computed before the multipliers).
void plain_grouped_tile(int linear, int tiles_m, int tiles_n, int group, int& tile_m, int& tile_n) {
  const int per_group = group * tiles_n;
  const int first_m = (linear / per_group) * group;
  const int rows = std::min(tiles_m - first_m, group);
  const int in_group = linear % per_group;
  tile_m = first_m + in_group % rows;
  tile_n = in_group / rows;
}

TEST(Raster, GroupedTilesCoverEveryTileOnceInPlainOrder) {
  for (int tiles_m : {1, 2, 3, 7, 8, 9, 16, 17, 31, 64, 65, 100})
    for (int tiles_n : {1, 2, 5, 8, 13, 64, 129})
      for (int group : {1, 2, 4, 8, 16, 64}) {
        unsigned values[2];
        raster_divisors(tiles_m, tiles_n, group, values);
        const GemmDivisor divisors[2] = {make_divisor(values[0]), make_divisor(values[1])};
        std::vector<int> seen(size_t(tiles_m) * tiles_n, 0);
        for (int linear = 0; linear < tiles_m * tiles_n; ++linear) {
          int m = -1, n = -1, pm = -1, pn = -1;
          grouped_tile(linear, tiles_m, group, divisors, m, n);
          plain_grouped_tile(linear, tiles_m, tiles_n, group, pm, pn);
          ASSERT_EQ(m, pm) << tiles_m << "x" << tiles_n << " group " << group << " tile " << linear;
          ASSERT_EQ(n, pn) << tiles_m << "x" << tiles_n << " group " << group << " tile " << linear;
          ASSERT_TRUE(m >= 0 && m < tiles_m && n >= 0 && n < tiles_n);
          ++seen[size_t(n) * tiles_m + m];
        }
        for (int times : seen)
          ASSERT_EQ(times, 1) << tiles_m << "x" << tiles_n << " group " << group;
      }
}

}  // namespace
}  // namespace gemmtune
