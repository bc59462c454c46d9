#include "gemmtune/runtime/memory.hpp"

#include "gemmtune/runtime/driver.hpp"

namespace gemmtune {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) GT_CU(cuMemAlloc(&ptr_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cu::api().cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cu::api().cuMemFree(ptr_);
    ptr_ = std::exchange(o.ptr_, 0);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

StreamHandle::StreamHandle() {
  GT_CU(cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
}
StreamHandle::~StreamHandle() {
  if (stream_) cu::api().cuStreamDestroy(stream_);
}
void StreamHandle::synchronize() const {
  GT_CU(cuStreamSynchronize(stream_));
}

EventHandle::EventHandle() {
  GT_CU(cuEventCreate(&event_, CU_EVENT_DEFAULT));
}
EventHandle::~EventHandle() {
  if (event_) cu::api().cuEventDestroy(event_);
}
void EventHandle::record(CUstream stream) const {
  GT_CU(cuEventRecord(event_, stream));
}
float EventHandle::since(const EventHandle& start) const {
  float ms = 0;
  GT_CU(cuEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace gemmtune
