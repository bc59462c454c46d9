#pragma once
// Workspaces of kernels that ask for them (LaunchGeometry::counter_bytes, workspace_bytes), one
// pair of buffers per stream, grown when a launch needs more and kept, so that calls do not
// allocate. Counters are zero between launches: every kernel leaves the counters it used zero
// again, so kernels of any layout can share the buffer. Scratch (partial sums) needs no clearing,
// and lives apart, so that one kernel's partial sums are never another's counters.
#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {

class Workspaces {
 public:
  Workspaces() = default;
  ~Workspaces();
  Workspaces(const Workspaces&) = delete;
  Workspaces& operator=(const Workspaces&) = delete;

  // Sets ops.counters and ops.workspace to buffers of at least the sizes the launch asks for
  // (0 when it asks for none). Growing frees the old buffer in stream order and zero-fills the
  // new one on the stream.
  void provide(CUstream stream, const LaunchGeometry& geometry, GemmOperands& ops);
  // Zero-fills every counter buffer again, in the order of its stream (the tuner does this
  // before each candidate, so that a wrong kernel's counters cannot reach the next one).
  void clear();

 private:
  struct Buffer {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
  };
  CUdeviceptr grow(Buffer& buffer, CUstream stream, uint64_t bytes);
  std::mutex mutex_;
  std::map<CUstream, std::pair<Buffer, Buffer>> buffers_;  // counters, scratch
};

}  // namespace gemmtune
