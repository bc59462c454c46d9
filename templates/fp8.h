// The two float8 formats of Hopper's tensor cores, decoded and encoded in plain code that
// compiles in kernels (NVRTC) and on the host, so that CPU tests check every code the kernels'
// helpers read and write (tests/test_fp8.cpp).
//   e4m3 ("e4m3fn"): bias 7, 3 mantissa bits, no infinities, NaN = S.1111.111, largest 448.
//   e5m2: bias 15, 2 mantissa bits, IEEE-like: infinities S.11111.00, NaNs above, largest 57344.
// Positive codes are ordered as their values in both formats, which encode() relies on.
#pragma once

#include "host_device.h"

namespace gemmtune {
namespace fp8 {

struct Format {
  int exponent_bits, mantissa_bits, bias;
  unsigned largest;  // the largest finite positive code
};
GEMMTUNE_HOST_DEVICE constexpr Format e4m3() {
  return {4, 3, 7, 0x7e};
}
GEMMTUNE_HOST_DEVICE constexpr Format e5m2() {
  return {5, 2, 15, 0x7b};
}

GEMMTUNE_HOST_DEVICE float float_of_bits(unsigned bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// 2^e for the exponents a float8 value needs (-18 to 16): a normal float, built from its bits.
GEMMTUNE_HOST_DEVICE float pow2(int e) {
  return float_of_bits(unsigned(e + 127) << 23);
}

GEMMTUNE_HOST_DEVICE float quiet_nan() {
  return float_of_bits(0x7fc00000u);
}

GEMMTUNE_HOST_DEVICE bool is_nan_code(unsigned code, Format f) {
  const unsigned magnitude = code & 0x7f;
  return magnitude > f.largest && (f.exponent_bits == 4 || magnitude > 0x7c);
}

// The value of a code (its low 8 bits), exactly.
GEMMTUNE_HOST_DEVICE float decode(unsigned code, Format f) {
  const unsigned magnitude = code & 0x7f;
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  if (is_nan_code(code, f)) return quiet_nan();
  if (magnitude > f.largest) return sign * float_of_bits(0x7f800000u);  // e5m2's infinities
  const int e = int(magnitude >> f.mantissa_bits);
  const int m = int(magnitude & ((1u << f.mantissa_bits) - 1));
  if (e == 0) return sign * float(m) * pow2(1 - f.bias - f.mantissa_bits);
  return sign * float((1 << f.mantissa_bits) + m) * pow2(e - f.bias - f.mantissa_bits);
}

// The nearest code to v, ties to the even code; beyond the largest finite value it saturates
// (as PTX's cvt.rn.satfinite), NaN stays NaN.
GEMMTUNE_HOST_DEVICE unsigned encode(float v, Format f) {
  if (!(v == v)) return 0x7f;  // NaN: S.1111.111 in e4m3, a NaN in e5m2 too
  const unsigned sign = v < 0.0f ? 0x80u : 0u;
  const float a = v < 0.0f ? -v : v;
  if (a >= decode(f.largest, f)) return sign | f.largest;
  unsigned low = 0, high = f.largest;  // decode(low) <= a < decode(high)
  while (high - low > 1) {
    const unsigned mid = (low + high) / 2;
    if (decode(mid, f) <= a)
      low = mid;
    else
      high = mid;
  }
  const float below = a - decode(low, f), above = decode(high, f) - a;
  const bool up = above < below || (above == below && (high & 1u) == 0);
  return sign | (up ? high : low);
}

}  // namespace fp8
}  // namespace gemmtune
