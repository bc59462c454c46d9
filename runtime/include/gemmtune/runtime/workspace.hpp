#pragma once
// Workspaces of kernels that ask for scratch (LaunchGeometry::workspace_bytes): one zero-filled
// buffer per stream, grown when a launch needs more and kept, so that calls do not allocate.
// Kernels leave their counters zero again; partial sums need no clearing.
#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>

namespace gemmtune {

class Workspaces {
 public:
  Workspaces() = default;
  ~Workspaces();
  Workspaces(const Workspaces&) = delete;
  Workspaces& operator=(const Workspaces&) = delete;

  // A buffer of at least `bytes` for work enqueued on `stream` (0 when bytes is 0). Growing
  // frees the old buffer in stream order and zero-fills the new one on the stream.
  CUdeviceptr get(CUstream stream, uint64_t bytes);
  // Zero-fills every buffer again, in the order of its stream (the tuner does this before each
  // candidate, so that a wrong kernel's counters cannot reach the next one).
  void clear();

 private:
  struct Buffer {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
  };
  std::mutex mutex_;
  std::map<CUstream, Buffer> buffers_;
};

}  // namespace gemmtune
