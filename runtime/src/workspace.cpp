#include "gemmtune/runtime/workspace.hpp"

#include <algorithm>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

Workspaces::~Workspaces() {
  // At exit the context may be gone already: freeing is best effort.
  for (auto& [stream, buffer] : buffers_)
    if (buffer.ptr) cu::api().cuMemFree(buffer.ptr);
}

CUdeviceptr Workspaces::get(CUstream stream, uint64_t bytes) {
  if (bytes == 0) return 0;
  std::lock_guard lock(mutex_);
  Buffer& buffer = buffers_[stream];
  if (buffer.bytes >= bytes) return buffer.ptr;
  // Round up, so that a few larger problems do not reallocate one after the other.
  const uint64_t size = std::max<uint64_t>(bytes + bytes / 4, 1 << 20);
  CUdeviceptr fresh = 0;
  GT_CU(cuMemAllocAsync(&fresh, size, stream));
  GT_CU(cuMemsetD8Async(fresh, 0, size, stream));
  if (buffer.ptr) GT_CU(cuMemFreeAsync(buffer.ptr, stream));
  buffer = Buffer{fresh, size};
  return fresh;
}

void Workspaces::clear() {
  std::lock_guard lock(mutex_);
  for (auto& [stream, buffer] : buffers_)
    if (buffer.ptr) GT_CU(cuMemsetD8Async(buffer.ptr, 0, buffer.bytes, stream));
}

}  // namespace gemmtune
