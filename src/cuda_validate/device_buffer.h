// DeviceBuffer<T>: one cudaMalloc'd array, freed on destruction (errors there are ignored:
// destructors never throw). Also the small RAII owners for streams and events.
#pragma once
#include <cstddef>
#include <memory>
#include <cstdint>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_validate/check.h"

namespace ppsim::gpu {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(std::size_t count) { resize(count); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      ptr_ = std::exchange(o.ptr_, nullptr);
      count_ = std::exchange(o.count_, 0);
    }
    return *this;
  }
  ~DeviceBuffer() { release(); }

  // Reallocates (contents are lost) unless the size is unchanged.
  void resize(std::size_t count) {
    if (count == count_) return;
    release();
    if (count > 0) {
      void* p = nullptr;
      PPSIM_CUDA_CHECK(cudaMalloc(&p, count * sizeof(T)));
      ptr_ = static_cast<T*>(p);
      count_ = count;
    }
  }
  T* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(T); }

  // Fills every byte with 0xFF: NaN for float and bf16, -1 for integers.
  void poison(cudaStream_t stream = nullptr) {
    if (count_) PPSIM_CUDA_CHECK(cudaMemsetAsync(ptr_, 0xFF, bytes(), stream));
  }
  void zero(cudaStream_t stream = nullptr) {
    if (count_) PPSIM_CUDA_CHECK(cudaMemsetAsync(ptr_, 0, bytes(), stream));
  }
  std::vector<T> to_host() const {
    std::vector<T> h(count_);
    if (count_) PPSIM_CUDA_CHECK(cudaMemcpy(h.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
  void from_host(const std::vector<T>& h) {
    resize(h.size());
    if (count_) PPSIM_CUDA_CHECK(cudaMemcpy(ptr_, h.data(), bytes(), cudaMemcpyHostToDevice));
  }

 private:
  void release() {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
  }
  T* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// Restores the calling thread's current GPU when leaving a scope that switched it.
class DeviceGuard {
 public:
  DeviceGuard() { PPSIM_CUDA_CHECK(cudaGetDevice(&saved_)); }
  ~DeviceGuard() { (void)cudaSetDevice(saved_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

class Stream {
 public:
  // priority: lower numbers run first (cudaDeviceGetStreamPriorityRange); 0 = default.
  explicit Stream(int priority = 0) {
    PPSIM_CUDA_CHECK(cudaStreamCreateWithPriority(&s_, cudaStreamNonBlocking, priority));
  }
  // Takes ownership of a stream made elsewhere (e.g. SmPartitions::create_stream).
  static std::unique_ptr<Stream> adopt(cudaStream_t s) { return std::unique_ptr<Stream>(new Stream(s, 0)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    if (s_) (void)cudaStreamDestroy(s_);
  }
  cudaStream_t get() const { return s_; }
  void sync() const { PPSIM_CUDA_CHECK(cudaStreamSynchronize(s_)); }

 private:
  Stream(cudaStream_t s, int) : s_(s) {}
  cudaStream_t s_ = nullptr;
};

class Event {
 public:
  explicit Event(bool timing = true) {
    PPSIM_CUDA_CHECK(cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  ~Event() {
    if (e_) (void)cudaEventDestroy(e_);
  }
  cudaEvent_t get() const { return e_; }
  void record(cudaStream_t s) { PPSIM_CUDA_CHECK(cudaEventRecord(e_, s)); }
  void sync() const { PPSIM_CUDA_CHECK(cudaEventSynchronize(e_)); }
  // True when the work before the event's last record is done (never recorded: true).
  bool done() const {
    const cudaError_t q = cudaEventQuery(e_);
    if (q == cudaErrorNotReady) return false;
    PPSIM_CUDA_CHECK(q);
    return true;
  }
  // Milliseconds from `start` to this event (both recorded and complete).
  float ms_since(const Event& start) const {
    float ms = 0;
    PPSIM_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e_, e_));
    return ms;
  }

 private:
  cudaEvent_t e_ = nullptr;
};

}  // namespace ppsim::gpu
