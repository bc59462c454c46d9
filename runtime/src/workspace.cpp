#include "gemmtune/runtime/workspace.hpp"

#include <algorithm>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

Workspaces::~Workspaces() {
  // At exit the context may be gone already: freeing is best effort.
  for (auto& [stream, pair] : buffers_)
    for (const Buffer* b : {&pair.first, &pair.second})
      if (b->ptr) cu::api().cuMemFree(b->ptr);
}

CUdeviceptr Workspaces::grow(Buffer& buffer, CUstream stream, uint64_t bytes) {
  if (bytes == 0) return 0;
  if (buffer.bytes >= bytes) return buffer.ptr;
  // Round up, so that a few larger problems do not reallocate one after the other.
  const uint64_t size = std::max<uint64_t>(bytes + bytes / 4, 1 << 16);
  CUdeviceptr fresh = 0;
  GT_CU(cuMemAllocAsync(&fresh, size, stream));
  GT_CU(cuMemsetD8Async(fresh, 0, size, stream));
  if (buffer.ptr) GT_CU(cuMemFreeAsync(buffer.ptr, stream));
  buffer = Buffer{fresh, size};
  return fresh;
}

void Workspaces::provide(CUstream stream, const LaunchGeometry& geometry, GemmOperands& ops) {
  if (geometry.counter_bytes == 0 && geometry.workspace_bytes == 0) return;
  std::lock_guard lock(mutex_);
  auto& [counters, scratch] = buffers_[stream];
  ops.counters = grow(counters, stream, geometry.counter_bytes);
  ops.workspace = grow(scratch, stream, geometry.workspace_bytes);
}

void Workspaces::clear() {
  std::lock_guard lock(mutex_);
  for (auto& [stream, pair] : buffers_)
    if (pair.first.ptr) GT_CU(cuMemsetD8Async(pair.first.ptr, 0, pair.first.bytes, stream));
}

}  // namespace gemmtune
