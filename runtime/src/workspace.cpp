#include "gemmtune/runtime/workspace.hpp"

#include <algorithm>

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

StreamBuffers::~StreamBuffers() {
  // At exit the context may be gone already: freeing is best effort.
  for (auto& [key, buffer] : buffers_)
    if (buffer.ptr) cu::api().cuMemFree(buffer.ptr);
}

CUdeviceptr StreamBuffers::at_least(CUstream stream, int slot, uint64_t bytes, bool zero_fill) {
  if (bytes == 0) return 0;
  std::lock_guard lock(mutex_);
  Buffer& buffer = buffers_[{stream, slot}];
  if (buffer.bytes >= bytes) return buffer.ptr;
  // Round up, so that a few larger problems do not reallocate one after the other.
  const uint64_t size = std::max<uint64_t>(bytes + bytes / 4, 1 << 16);
  CUdeviceptr fresh = 0;
  GT_CU(cuMemAllocAsync(&fresh, size, stream));
  if (zero_fill) GT_CU(cuMemsetD8Async(fresh, 0, size, stream));
  if (buffer.ptr) GT_CU(cuMemFreeAsync(buffer.ptr, stream));
  buffer = Buffer{fresh, size};
  return fresh;
}

void StreamBuffers::zero_fill(int slot) {
  std::lock_guard lock(mutex_);
  for (auto& [key, buffer] : buffers_)
    if (key.second == slot && buffer.ptr)
      GT_CU(cuMemsetD8Async(buffer.ptr, 0, buffer.bytes, key.first));
}

void Workspaces::provide(CUstream stream, const LaunchPlan& plan, GemmOperands& ops) {
  ops.counters = buffers_.at_least(stream, kCounters, plan.counter_bytes, true);
  ops.workspace = buffers_.at_least(stream, kScratch, plan.workspace_bytes, true);
}

void Workspaces::clear() {
  buffers_.zero_fill(kCounters);
}

}  // namespace gemmtune
