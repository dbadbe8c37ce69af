// MessageCheck (see message_check.h).
#include "cuda_validate/replay/message_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/ops/elementwise.h"
#include "launch/mpi.h"

namespace ppsim::gpu::replay {

MessageCheck::MessageCheck(const Schedule& s, const std::vector<int>& devices)
    : stages_(s.num_stages()),
      microbatches_(s.microbatches),
      keys_(2 * static_cast<std::size_t>(s.num_stages()) * static_cast<std::size_t>(s.microbatches)) {
  DeviceGuard guard;
  for (int d : devices) {
    if (sums_.count(d)) continue;
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    void* p = nullptr;
    PPSIM_CUDA_CHECK(cudaMalloc(&p, 2 * keys_ * sizeof(unsigned long long)));
    sums_[d] = static_cast<unsigned long long*>(p);
  }
  reset();
}

MessageCheck::~MessageCheck() {
  DeviceGuard guard;
  for (auto& [d, p] : sums_) {
    (void)cudaSetDevice(d);
    (void)cudaFree(p);
  }
}

std::size_t MessageCheck::slot(const launch::MsgKey& k) const {
  return (static_cast<std::size_t>(k.grad) * static_cast<std::size_t>(stages_) + static_cast<std::size_t>(k.stage)) *
             static_cast<std::size_t>(microbatches_) +
         static_cast<std::size_t>(k.microbatch);
}

unsigned long long* MessageCheck::sums(int device) {
  const auto it = sums_.find(device);
  PPSIM_CHECK(it != sums_.end(), "replay: no checksum slots on GPU {}", device);
  return it->second;
}

void MessageCheck::produced(const launch::MsgKey& k, int device, const void* p, std::size_t bytes, cudaStream_t st) {
  checksum(p, bytes, sums(device) + slot(k), st);
}

void MessageCheck::consumed(const launch::MsgKey& k, int device, const void* p, std::size_t bytes, cudaStream_t st) {
  checksum(p, bytes, sums(device) + keys_ + slot(k), st);
}

void MessageCheck::reset() {
  DeviceGuard guard;
  for (auto& [d, p] : sums_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    PPSIM_CUDA_CHECK(cudaMemset(p, 0, 2 * keys_ * sizeof(unsigned long long)));
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

MessageCheck::Outcome MessageCheck::outcome() const {
  // Each slot is written on one GPU (its end's); the others hold 0: the sums add up.
  std::vector<unsigned long long> all(2 * keys_, 0), mine(2 * keys_);
  DeviceGuard guard;
  for (const auto& [d, p] : sums_) {
    PPSIM_CUDA_CHECK(cudaSetDevice(d));
    PPSIM_CUDA_CHECK(cudaMemcpy(mine.data(), p, mine.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < all.size(); ++i) all[i] += mine[i];
  }
  if (mpi::world().size > 1) {
    const std::string text(reinterpret_cast<const char*>(all.data()), all.size() * sizeof(unsigned long long));
    std::fill(all.begin(), all.end(), 0ull);
    for (const std::string& part : mpi::allgather(text)) {
      PPSIM_CHECK(part.size() == text.size(), "replay: a process's checksums have {} bytes, {} expected", part.size(),
                  text.size());
      for (std::size_t i = 0; i < all.size(); ++i) {
        unsigned long long v = 0;
        std::memcpy(&v, part.data() + i * sizeof v, sizeof v);
        all[i] += v;
      }
    }
  }
  Outcome o;
  for (int g = 0; g < 2; ++g)
    for (int st = 0; st < stages_; ++st)
      for (int m = 0; m < microbatches_; ++m) {
        const std::size_t i = slot(launch::MsgKey{g, st, m});
        const unsigned long long sent = all[i], read = all[keys_ + i];
        if (read == 0) continue;  // no consumer read it (not a message of this schedule)
        ++o.compared;
        if (sent == read) continue;
        const std::string what =
            sent == 0 ? "read, never produced" : fmt::format("checksum {:016x} written, {:016x} read", sent, read);
        o.mismatches.push_back(
            fmt::format("{} into stage {}, micro-batch {}: {}", g ? "gradient" : "activation", st, m, what));
      }
  return o;
}

}  // namespace ppsim::gpu::replay
