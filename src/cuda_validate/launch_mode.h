// How the back-end enqueues an op's kernels (issue 47): one launch per kernel from the host
// thread (streams), or the op's kernels captured once per call into a CUDA graph and launched
// with one cudaGraphLaunch (graphs; graph_launch.h). The replay's actions and the profile's timed
// ops use the same mode, so that the profile measures what the replay runs. Header-only, no
// CUDA: the key arithmetic and the choice are tested without a GPU.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "core/op.h"

namespace ppsim::gpu {

enum class LaunchMode : std::uint8_t { streams, graphs };

inline std::optional<LaunchMode> parse_launch_mode(const std::string& s) {
  if (s == "streams") return LaunchMode::streams;
  if (s == "graphs") return LaunchMode::graphs;
  return std::nullopt;
}
inline const char* launch_mode_name(LaunchMode m) { return m == LaunchMode::graphs ? "graphs" : "streams"; }

// Which cached graph an action's part uses: one per (stage, op kind, micro-batch, stream role),
// role 0 for a lone op or a pair's forward on the compute stream, 1 for a pair's backward on the
// second stream. A micro-batch keeps its own buffers (Chunk::pin_sets), so the part captured once
// is launched again while its buffers' signature stays (GraphCache); a new signature captures it
// again and updates the executable in place. Distinct for stages and micro-batches below 2^24.
inline std::uint64_t graph_key(int stage, OpKind kind, int microbatch, int role) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(stage) & 0xffffffu) << 32) |
         (static_cast<std::uint64_t>(static_cast<std::uint32_t>(microbatch) & 0xffffffu) << 8) |
         (static_cast<std::uint64_t>(static_cast<std::uint8_t>(kind)) << 1) | static_cast<std::uint64_t>(role & 1);
}

// "" when an action's kernels can be captured into a graph; else why they are launched one by one.
// Expert parallelism cannot: an exchange's end spins until every peer shard's begin has run, and
// the shards meet on the host between the two (Chunk, "Expert parallelism"); captured, nothing of
// the action would run before the whole of it was enqueued.
inline std::string graphs_unavailable(int ep) {
  if (ep > 1)
    return "expert parallelism: an all-to-all's shards meet on the host inside the action, which a graph "
           "captured whole cannot";
  return {};
}

}  // namespace ppsim::gpu
