// The float8 codes that the data making, the reference and the checks read and write
// (templates/fp8.h, used by common.cuh's load_as_f32 and store_from_f32): every code decoded
// against an independent formula, every finite one encoded back, ties to even, saturation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "fp8.h"

namespace gemmtune {
namespace {

struct Case {
  const char* name;
  fp8::Format format;
  float largest;
};
const Case kCases[] = {{"e4m3", fp8::e4m3(), 448.0f}, {"e5m2", fp8::e5m2(), 57344.0f}};

// The value of a code by the definition: (-1)^s 2^(e - bias) (1 + m / 2^M), subnormal at e = 0.
double by_definition(unsigned code, const fp8::Format& f) {
  const int e = int((code & 0x7f) >> f.mantissa_bits);
  const int m = int(code & ((1u << f.mantissa_bits) - 1));
  const double fraction = double(m) / double(1 << f.mantissa_bits);
  const double magnitude =
      e == 0 ? std::ldexp(fraction, 1 - f.bias) : std::ldexp(1.0 + fraction, e - f.bias);
  return (code & 0x80) ? -magnitude : magnitude;
}

TEST(Fp8, EveryCodeDecodesAsItsDefinitionSays) {
  for (const Case& c : kCases) {
    int nans = 0, infinities = 0;
    for (unsigned code = 0; code < 256; ++code) {
      const float v = fp8::decode(code, c.format);
      if (std::isnan(v)) {
        ++nans;
        continue;
      }
      if (std::isinf(v)) {
        ++infinities;
        continue;
      }
      EXPECT_EQ(double(v), by_definition(code, c.format)) << c.name << " code " << code;
    }
    // e4m3fn: one NaN code a sign, no infinities; e5m2: three NaNs and one infinity a sign.
    EXPECT_EQ(nans, c.format.exponent_bits == 4 ? 2 : 6) << c.name;
    EXPECT_EQ(infinities, c.format.exponent_bits == 4 ? 0 : 2) << c.name;
    EXPECT_EQ(fp8::decode(c.format.largest, c.format), c.largest) << c.name;
    EXPECT_EQ(fp8::decode(0x80 | c.format.largest, c.format), -c.largest) << c.name;
  }
  EXPECT_EQ(fp8::decode(0x38, fp8::e4m3()), 1.0f);
  EXPECT_EQ(fp8::decode(0x01, fp8::e4m3()), std::ldexp(1.0f, -9));
  EXPECT_EQ(fp8::decode(0x3c, fp8::e5m2()), 1.0f);
  EXPECT_EQ(fp8::decode(0x01, fp8::e5m2()), std::ldexp(1.0f, -16));
  EXPECT_TRUE(std::isinf(fp8::decode(0x7c, fp8::e5m2())));
}

TEST(Fp8, EveryFiniteCodeEncodesBackToItself) {
  for (const Case& c : kCases)
    for (unsigned code = 0; code < 256; ++code) {
      const float v = fp8::decode(code, c.format);
      if (!std::isfinite(v) || code == 0x80) continue;  // -0 encodes as +0
      EXPECT_EQ(fp8::encode(v, c.format), code) << c.name << " " << v;
    }
}

TEST(Fp8, ValuesBetweenCodesRoundToTheNearestTiesToEven) {
  for (const Case& c : kCases)
    for (unsigned code = 0; code < c.format.largest; ++code) {
      const float low = fp8::decode(code, c.format), high = fp8::decode(code + 1, c.format);
      const float middle = (low + high) / 2;  // exact: float has the bits
      const unsigned even = code % 2 == 0 ? code : code + 1;
      EXPECT_EQ(fp8::encode(middle, c.format), even)
          << c.name << " between " << low << " and " << high;
      EXPECT_EQ(fp8::encode(std::nextafter(middle, low), c.format), code) << c.name;
      EXPECT_EQ(fp8::encode(std::nextafter(middle, high), c.format), code + 1) << c.name;
      EXPECT_EQ(fp8::encode(-std::nextafter(middle, high), c.format), 0x80 | (code + 1)) << c.name;
    }
}

TEST(Fp8, BeyondTheLargestSaturatesAndNanStaysNan) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const Case& c : kCases) {
    EXPECT_EQ(fp8::encode(c.largest * 4, c.format), c.format.largest) << c.name;
    EXPECT_EQ(fp8::encode(inf, c.format), c.format.largest) << c.name;
    EXPECT_EQ(fp8::encode(-inf, c.format), 0x80 | c.format.largest) << c.name;
    EXPECT_TRUE(std::isnan(fp8::decode(fp8::encode(std::nanf(""), c.format), c.format))) << c.name;
    EXPECT_EQ(fp8::encode(1e-30f, c.format), 0u) << c.name;  // below half the least: zero
  }
}

}  // namespace
}  // namespace gemmtune
