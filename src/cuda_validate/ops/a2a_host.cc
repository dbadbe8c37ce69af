// The host-only half of ops/a2a.h: the call check, receive-buffer allocation
// (kept out of a2a.cu so that fmt is compiled by the host compiler, with -Werror).
#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/ops/a2a.h"

namespace ppsim::gpu {

A2aBufferSet::A2aBufferSet(const ep::EpGeometry& g) {
  rows_.resize(static_cast<std::size_t>(g.rows()) * static_cast<std::size_t>(g.hidden));
  counts_.resize(static_cast<std::size_t>(g.ep) * static_cast<std::size_t>(g.experts_per_rank()));
  flags_.resize(static_cast<std::size_t>(g.ep) * kA2aMaxBlocks);
  rows_.poison();  // NaN until rows arrive: a row read before it was sent shows in the outputs
  counts_.zero();
  flags_.zero();  // epochs start at 1: nothing has arrived
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

A2aSlab::A2aSlab(const ep::EpGeometry& g, std::size_t buffers) : layout_(layout_for(g, buffers)) {
  if (layout_.total_bytes() == 0) return;
  PPSIM_CUDA_CHECK(cudaMalloc(&base_, layout_.total_bytes()));
  // Rows NaN (a row read before it was sent shows in the outputs); counts and flags zero (epochs
  // start at 1: nothing has arrived).
  PPSIM_CUDA_CHECK(cudaMemsetAsync(base_, 0xFF, layout_.rows_region(), nullptr));
  PPSIM_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(base_) + layout_.rows_region(), 0,
                                   layout_.total_bytes() - layout_.rows_region(), nullptr));
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
}

A2aSlab::~A2aSlab() {
  if (base_) (void)cudaFree(base_);
}

A2aRecvBuffer A2aSlab::view_at(void* base, const ep::EpSlabLayout& l, std::size_t i) {
  char* b = static_cast<char*>(base);
  return A2aRecvBuffer{reinterpret_cast<__nv_bfloat16*>(b + l.rows_offset(i)), reinterpret_cast<int*>(b + l.counts_offset(i)),
                       reinterpret_cast<unsigned long long*>(b + l.flags_offset(i))};
}

void check_a2a_call(const A2aCall& c) {
  const auto& g = c.g;
  auto fail = [](const std::string& m) { throw InputError("all-to-all: " + m, {}, kExitInput); };
  if (g.ep < 1 || g.ep > kA2aMaxRanks) fail(fmt::format("ep={} must be in 1..{}", g.ep, kA2aMaxRanks));
  if (g.experts < 1 || g.experts % g.ep != 0) fail(fmt::format("ep={} must divide the {} experts", g.ep, g.experts));
  if (c.rank < 0 || c.rank >= g.ep) fail(fmt::format("rank {} outside the EP group of {}", c.rank, g.ep));
  if (g.top_k < 1 || g.top_k > g.experts) fail(fmt::format("top_k={} must be in 1..{}", g.top_k, g.experts));
  if (g.hidden <= 0 || g.hidden % 8 != 0) fail(fmt::format("hidden={} must be a positive multiple of 8", g.hidden));
  if (g.capacity < 0 || g.tokens < 0) fail("tokens and capacity must not be negative");
  if (c.backend == A2aBackend::ours) {
    if (c.comm_sms < 1 || c.comm_sms > kA2aMaxBlocks)
      fail(fmt::format("comm_sms={} must be in 1..{}", c.comm_sms, kA2aMaxBlocks));
    if (c.epoch == 0) fail("epoch must be positive (flags start at 0)");
  } else if (c.comm == nullptr) {
    fail("the nccl path needs the EP group's communicator");
  }
}

}  // namespace ppsim::gpu
