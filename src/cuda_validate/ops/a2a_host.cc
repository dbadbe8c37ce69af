// The host-only half of ops/a2a.h: backend names, the call check, receive-buffer allocation
// (kept out of a2a.cu so that fmt is compiled by the host compiler, with -Werror).
#include <fmt/format.h>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/ops/a2a.h"

namespace ppsim::gpu {

A2aBackend parse_a2a_backend(const std::string& name) {
  if (name == "ours") return A2aBackend::ours;
  if (name == "nccl") return A2aBackend::nccl;
  throw InputError(fmt::format("unknown all-to-all '{}': choose ours or nccl", printable(name)),
                   closest_match(name, {"ours", "nccl"}), kExitUsage);
}

const char* a2a_backend_name(A2aBackend b) { return b == A2aBackend::ours ? "ours" : "nccl"; }

A2aBufferSet::A2aBufferSet(const ep::EpGeometry& g) {
  rows_.resize(static_cast<std::size_t>(g.rows()) * static_cast<std::size_t>(g.hidden));
  counts_.resize(static_cast<std::size_t>(g.ep) * static_cast<std::size_t>(g.experts_per_rank()));
  flags_.resize(static_cast<std::size_t>(g.ep) * kA2aMaxBlocks);
  rows_.poison();  // NaN until rows arrive: a row read before it was sent shows in the outputs
  counts_.zero();
  flags_.zero();  // epochs start at 1: nothing has arrived
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(nullptr));
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
