// Words: 32-bit flags in pinned host memory that streams of any GPU of the process write and wait
// for in stream order (cuStreamWriteValue32 / cuStreamWaitValue32), and the host sets.
//
// The replay's value waits (ReplayConfig::value_waits): a stream that waits on a word holds no
// pending cudaStreamWaitEvent, which slows the short kernels of the GPU's other streams by 5-9%
// (docs/VALIDATION.md); and the replay's clock gate: every GPU's epoch is recorded once one word,
// polled by a kernel on each GPU, is set by the host, so the GPUs' clocks start together.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ppsim::gpu::replay {

// Why stream memory operations cannot be used here ("" when they can).
std::string value_waits_unavailable();

class Words {
 public:
  explicit Words(std::size_t n);  // all 0
  ~Words();
  Words(const Words&) = delete;
  Words& operator=(const Words&) = delete;
  std::size_t size() const { return n_; }
  // After the work enqueued on `st` so far (with a memory barrier: what it wrote is visible first).
  void write(cudaStream_t st, std::size_t i, std::uint32_t value);
  // `st` waits until word i >= value.
  void wait(cudaStream_t st, std::size_t i, std::uint32_t value);
  void store(std::size_t i, std::uint32_t value);  // from the host
  void store_all(std::uint32_t value);             // from the host: releases every wait (abort)
  const std::uint32_t* device_word(std::size_t i) const { return words_ + i; }

 private:
  std::uint32_t* words_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace ppsim::gpu::replay
