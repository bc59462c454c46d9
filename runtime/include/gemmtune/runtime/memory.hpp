#pragma once
// Owning wrappers of driver objects: device memory, streams, events.
#include <cuda.h>

#include <cstddef>
#include <utility>

namespace gemmtune {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);  // throws Error(cuda) when out of memory
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  CUdeviceptr ptr() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(ptr_);
  }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_ = 0;
};

class StreamHandle {
 public:
  StreamHandle();  // a non-blocking stream
  ~StreamHandle();
  StreamHandle(const StreamHandle&) = delete;
  StreamHandle& operator=(const StreamHandle&) = delete;
  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

class EventHandle {
 public:
  EventHandle();
  ~EventHandle();
  EventHandle(const EventHandle&) = delete;
  EventHandle& operator=(const EventHandle&) = delete;
  CUevent get() const { return event_; }
  void record(CUstream stream) const;
  // Milliseconds from start to this event; both must have completed.
  float since(const EventHandle& start) const;

 private:
  CUevent event_ = nullptr;
};

}  // namespace gemmtune
