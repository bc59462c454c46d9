#pragma once
// The CUDA Driver API, loaded at run time from libcuda.so.1.
// Nothing links against libcuda: a machine without a GPU driver (CI) still runs every tool,
// and the first driver call says plainly that there is no GPU.
#include <cuda.h>

#include <string>

namespace gemmtune::cu {

// One driver function a line.
// clang-format off
#define GEMMTUNE_DRIVER_FUNCTIONS(X) \
  X(cuInit) \
  X(cuDriverGetVersion) \
  X(cuDeviceGet) \
  X(cuDeviceGetCount) \
  X(cuDeviceGetName) \
  X(cuDeviceGetAttribute) \
  X(cuDeviceTotalMem) \
  X(cuDevicePrimaryCtxRetain) \
  X(cuDevicePrimaryCtxRelease) \
  X(cuCtxGetCurrent) \
  X(cuCtxSetCurrent) \
  X(cuCtxGetDevice) \
  X(cuCtxGetId) \
  X(cuCtxSynchronize) \
  X(cuModuleLoadData) \
  X(cuModuleUnload) \
  X(cuModuleGetFunction) \
  X(cuFuncSetAttribute) \
  X(cuFuncGetAttribute) \
  X(cuLaunchKernelEx) \
  X(cuMemAlloc) \
  X(cuMemFree) \
  X(cuMemcpyHtoDAsync) \
  X(cuMemcpyDtoH) \
  X(cuMemcpyDtoDAsync) \
  X(cuMemsetD32Async) \
  X(cuMemsetD16Async) \
  X(cuMemsetD8Async) \
  X(cuStreamCreate) \
  X(cuStreamDestroy) \
  X(cuStreamSynchronize) \
  X(cuStreamGetCtx) \
  X(cuStreamIsCapturing) \
  X(cuEventCreate) \
  X(cuEventDestroy) \
  X(cuEventRecord) \
  X(cuEventSynchronize) \
  X(cuEventElapsedTime) \
  X(cuGetErrorName) \
  X(cuGetErrorString) \
  X(cuTensorMapEncodeTiled) \
  X(cuOccupancyMaxActiveBlocksPerMultiprocessor) \
  X(cuOccupancyMaxActiveClusters) \
  X(cuMemGetInfo) \
  X(cuPointerGetAttribute) \
  X(cuDeviceGetPCIBusId) \
  X(cuMemAllocAsync) \
  X(cuMemFreeAsync) \
  X(cuStreamBeginCapture) \
  X(cuStreamEndCapture) \
  X(cuGraphInstantiate) \
  X(cuGraphLaunch) \
  X(cuGraphExecDestroy) \
  X(cuGraphDestroy)
// clang-format on

struct Api {
#define GEMMTUNE_DRIVER_MEMBER(fn) decltype(&::fn) fn = nullptr;
  GEMMTUNE_DRIVER_FUNCTIONS(GEMMTUNE_DRIVER_MEMBER)
#undef GEMMTUNE_DRIVER_MEMBER
};

// Loads the driver and cuInit()s it on first use. Throws Error(no_device) when there is no
// driver, only the toolkit's stub, or no GPU.
const Api& api();
// True when a driver and at least one GPU are present (never throws).
bool available() noexcept;
// Why available() is false, for skip messages and errors.
std::string unavailable_reason();

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered"
std::string error_text(CUresult result);
// Errors after which the context is unusable (the process must not launch again).
bool is_sticky(CUresult result) noexcept;

[[noreturn]] void throw_cu(CUresult result, const char* call, const char* file, int line);

}  // namespace gemmtune::cu

// Calls a driver function through the loaded table; throws Error(cuda) with the call text.
#define GT_CU(call)                                                    \
  do {                                                                 \
    const CUresult gt_result_ = ::gemmtune::cu::api().call;            \
    if (gt_result_ != CUDA_SUCCESS)                                    \
      ::gemmtune::cu::throw_cu(gt_result_, #call, __FILE__, __LINE__); \
  } while (0)
