// GraphCache: an op's kernels as one CUDA graph launch (LaunchMode::graphs, launch_mode.h).
//
// launch(key, s, enqueue) captures what `enqueue` puts on stream `s` (and on streams forked from
// it inside, joined back before it returns), updates the executable cached under `key` with it
// (cudaGraphExecUpdate: same kernels, new arguments) or instantiates one, and launches it on `s`;
// called while `s` is already being captured, it only runs `enqueue` (the work joins that graph).
// The host still runs `enqueue` every call (a chunk takes and gives back its buffer sets as it
// enqueues), so whatever the host decides stays as in stream mode; the GPU gets the op as one
// launch whose kernels follow each other without a host launch between them.
//
// Not obvious: the capture is relaxed (cudaStreamCaptureModeRelaxed: the replay's other rank
// threads keep calling the runtime meanwhile); work that must outlive the capture as an event
// record (a pool's "free after") records with record_in_capture(). One cache per host thread.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <map>

namespace ppsim::gpu {

class GraphCache {
 public:
  GraphCache() = default;
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

  void launch(std::uint64_t key, cudaStream_t s, const std::function<void()>& enqueue);
  // When the executable cached under `key` was captured with the same `signature`, it is launched
  // again as it is, without running `enqueue` (no capture, no library call on the host: the caller
  // vouches that the same signature means the same work on the same buffers); otherwise as
  // launch() above. Returns whether `enqueue` ran.
  bool launch(std::uint64_t key, cudaStream_t s, const std::function<void()>& enqueue, std::uint64_t signature);

  struct Stats {
    long captures = 0;        // launches
    long updates = 0;         // of those, an executable updated in place
    long instantiations = 0;  // of those, a new executable (first use of a key, or an update refused)
    long reused = 0;          // launches of a cached executable without a capture
  };
  const Stats& stats() const { return stats_; }

 private:
  std::map<std::uint64_t, cudaGraphExec_t> execs_;
  std::map<std::uint64_t, std::uint64_t> signatures_;  // of each executable's last capture
  Stats stats_;
};

// Records `e` after the work enqueued on `s` so far, also when `s` is being captured (then as an
// event-record node of the graph, so that the event completes when the launched graph reaches it).
void record_in_capture(cudaEvent_t e, cudaStream_t s);

// The profile's timed ops (profile.cc) in the mode validate asked for (set_graph_launch, gpu_api.h).
bool graph_launch();

}  // namespace ppsim::gpu
