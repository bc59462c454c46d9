// GEMMTUNE_HOST_DEVICE marks functions that compile both in kernels (NVRTC) and in host C++, so
// that CPU tests check the very code the kernels run (schedule.h, raster.h).
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define GEMMTUNE_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GEMMTUNE_HOST_DEVICE inline
#endif
