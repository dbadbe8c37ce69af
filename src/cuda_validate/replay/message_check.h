// MessageCheck: the replay's checking mode (ReplayConfig::verify_messages). Every message (an
// activation into stage s or a gradient into stage s, micro-batch m) is checksummed twice on the
// GPUs: where its producer wrote it, right after the producing op, and where its consumer reads
// it, right before the consuming op, in the consumer's stream after its wait for the message. The
// transport poisons its receive buffers before each run, so a consumer that read before its
// message arrived reads other bytes and the two sums differ. Each GPU adds into its own slots;
// across processes the slots are gathered. A kernel per message end: for tests, not timings.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "launch/launch.h"

namespace ppsim::gpu::replay {

class MessageCheck {
 public:
  // devices: the local GPUs that run ranks.
  MessageCheck(const Schedule& s, const std::vector<int>& devices);
  ~MessageCheck();
  MessageCheck(const MessageCheck&) = delete;
  MessageCheck& operator=(const MessageCheck&) = delete;
  // Enqueued on `st` (a stream of `device`, the current device).
  void produced(const launch::MsgKey& k, int device, const void* p, std::size_t bytes, cudaStream_t st);
  void consumed(const launch::MsgKey& k, int device, const void* p, std::size_t bytes, cudaStream_t st);
  void reset();  // before a run, the GPUs idle: every sum to 0, nothing seen
  struct Outcome {
    std::size_t compared = 0;             // messages with both ends summed
    std::vector<std::string> mismatches;  // "activation into stage 2, micro-batch 3: ..."
  };
  // After the run (every stream done); collective across processes.
  Outcome outcome() const;

 private:
  std::size_t slot(const launch::MsgKey& k) const;
  unsigned long long* sums(int device);
  int stages_ = 0, microbatches_ = 0;
  std::size_t keys_ = 0;
  std::map<int, unsigned long long*> sums_;  // per device: [produced keys_][consumed keys_]
};

}  // namespace ppsim::gpu::replay
