// Shared device helpers for every family: no system includes, so NVRTC compiles fast.
#pragma once
#include "data_types.h"
#include "fp8.h"
#include "kernel_args.h"
#include "raster.h"

#ifndef GEMMTUNE_DEVICE_INLINE
#define GEMMTUNE_DEVICE_INLINE __device__ __forceinline__
#endif

namespace gemmtune {

typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// A value every lane of the warp holds, as lane 0's, so that ptxas knows it is uniform: what a
// warp reads from shared memory or works out from threadIdx is per-thread to it, and a loop over
// such values keeps its wgmma descriptors in per-thread registers (four R2UR a wgmma; docs/PERF.md,
// 'Loop state read as uniform keeps descriptors uniform').
GEMMTUNE_DEVICE_INLINE int warp_uniform(int v) {
  return __shfl_sync(0xffffffffu, v, 0);
}

// 16-bit float conversions through PTX: NVRTC then needs no cuda_fp16.h / cuda_bf16.h.
GEMMTUNE_DEVICE_INLINE float bf16_to_f32(u16 x) {
  return __uint_as_float(u32(x) << 16);
}
GEMMTUNE_DEVICE_INLINE float f16_to_f32(u16 x) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x));
  return f;
}
GEMMTUNE_DEVICE_INLINE u16 f32_to_bf16(float f) {
  u16 x;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(x) : "f"(f));
  return x;
}
GEMMTUNE_DEVICE_INLINE u16 f32_to_f16(float f) {
  u16 x;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(x) : "f"(f));
  return x;
}
// Two floats to a packed pair (low half = first).
GEMMTUNE_DEVICE_INLINE u32 pack_bf16x2(float lo, float hi) {
  u32 x;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(x) : "f"(hi), "f"(lo));
  return x;
}
GEMMTUNE_DEVICE_INLINE u32 pack_f16x2(float lo, float hi) {
  u32 x;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(x) : "f"(hi), "f"(lo));
  return x;
}

// Element access by type code (data_types.h), for the generic helper kernels: data making,
// the reference, checks, packing. float8 goes through fp8.h's exact code, not PTX's cvt, so that
// the host tests check it.
GEMMTUNE_DEVICE_INLINE float load_as_f32(const void* p, long long i, int type) {
  if (type == GEMMTUNE_TYPE_F32) return static_cast<const float*>(p)[i];
  if (type == GEMMTUNE_TYPE_E4M3 || type == GEMMTUNE_TYPE_E5M2) {
    const unsigned code = static_cast<const unsigned char*>(p)[i];
    return fp8::decode(code, type == GEMMTUNE_TYPE_E4M3 ? fp8::e4m3() : fp8::e5m2());
  }
  const u16 x = static_cast<const u16*>(p)[i];
  return type == GEMMTUNE_TYPE_F16 ? f16_to_f32(x) : bf16_to_f32(x);
}
GEMMTUNE_DEVICE_INLINE void store_from_f32(void* p, long long i, int type, float v) {
  if (type == GEMMTUNE_TYPE_F32)
    static_cast<float*>(p)[i] = v;
  else if (type == GEMMTUNE_TYPE_E4M3 || type == GEMMTUNE_TYPE_E5M2)
    static_cast<unsigned char*>(p)[i] =
        (unsigned char)fp8::encode(v, type == GEMMTUNE_TYPE_E4M3 ? fp8::e4m3() : fp8::e5m2());
  else
    static_cast<u16*>(p)[i] = type == GEMMTUNE_TYPE_F16 ? f32_to_f16(v) : f32_to_bf16(v);
}

}  // namespace gemmtune
