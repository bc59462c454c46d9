#pragma once
// Buffers that launches need, kept per stream (StreamBuffers): the workspaces of kernels that
// ask for them (LaunchPlan::counter_bytes, workspace_bytes), and the launcher's packed
// copies of operands. Counters are zero between launches: every kernel leaves the counters it
// used zero again, so kernels of any layout can share the buffer. Scratch (partial sums) needs no
// clearing, and lives apart, so that one kernel's partial sums are never another's counters.
#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>

#include "gemmtune/runtime/kernel.hpp"

namespace gemmtune {

// Device buffers kept per (stream, slot), grown when a call needs more and kept, so that calls
// do not allocate. Growing frees the old buffer in stream order and allocates the new one on the
// stream (zero-filled there where asked). What is left is freed with the owner.
class StreamBuffers {
 public:
  StreamBuffers() = default;
  ~StreamBuffers();
  StreamBuffers(const StreamBuffers&) = delete;
  StreamBuffers& operator=(const StreamBuffers&) = delete;

  // A buffer of at least `bytes` for the stream and slot (0 when bytes is 0).
  CUdeviceptr at_least(CUstream stream, int slot, uint64_t bytes, bool zero_fill);
  // Zero-fills the slot's buffer of every stream again, in the order of its stream.
  void zero_fill(int slot);

 private:
  struct Buffer {
    CUdeviceptr ptr = 0;
    uint64_t bytes = 0;
  };
  std::mutex mutex_;
  std::map<std::pair<CUstream, int>, Buffer> buffers_;
};

class Workspaces {
 public:
  // Sets ops.counters and ops.workspace to buffers of at least the sizes the launch asks for
  // (0 when it asks for none); a new counter buffer is zero-filled on the stream.
  void provide(CUstream stream, const LaunchPlan& plan, GemmOperands& ops);
  // Zero-fills every counter buffer again, in the order of its stream (the tuner does this
  // before each candidate, so that a wrong kernel's counters cannot reach the next one).
  void clear();

 private:
  enum Slot { kCounters, kScratch };
  StreamBuffers buffers_;
};

}  // namespace gemmtune
