// Transport: moves activations and gradients between the ranks of a replay. A message is named
// by where it goes (MsgKey: activation into stage s, or gradient into stage s, micro-batch m).
//
//   producer thread: send()    -> on its comm stream: wait for the op, copy the tensor into a
//                                 stream-ordered staging buffer, record `staged`; post the message
//   consumer thread: receive() -> wait (host, bounded by the timeout) for the post, then move the
//                                 staged bytes into the consumer's buffer on its comm stream:
//                                 a device copy when both ranks share a GPU, else an NCCL
//                                 send/recv pair issued in ONE group by this thread; returns the
//                                 `arrived` event for the consumer's compute stream to wait on.
// Not obvious: NCCL matches sends and receives by issue order per peer; issuing each matched
// pair together in one ncclGroupStart/End, under one lock, makes that order the same on both
// sides whatever order the ranks' schedules produce or consume messages in, so no rank order
// can deadlock or mismatch. The staging copy frees the producer's buffers at once.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "core/op.h"
#include "core/time.h"

namespace ppsim::gpu::replay {

struct MsgKey {
  int grad = 0;  // 0: activation into `stage`; 1: gradient into `stage`
  int stage = 0;
  int microbatch = 0;
  friend bool operator<(const MsgKey& a, const MsgKey& b) {
    return std::tie(a.grad, a.stage, a.microbatch) < std::tie(b.grad, b.stage, b.microbatch);
  }
};

class Transport {
 public:
  // rank_device[r]: the GPU of rank r. NCCL communicators (one per GPU in use) are created
  // when more than one GPU is in use.
  Transport(std::vector<int> rank_device, double timeout_s);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Called from the rank's thread. Returns `staged`: the producer must not reuse `src` before it.
  cudaEvent_t send(const MsgKey& key, const void* src, std::size_t bytes, int src_rank, cudaEvent_t ready,
                   const Op& producer);
  // Called from the consumer's thread; returns the `arrived` event (on the consumer's GPU).
  cudaEvent_t receive(const MsgKey& key, void* dst, std::size_t bytes, int dst_rank);

  struct Record {
    int src_rank = 0, dst_rank = 0;
    cudaEvent_t start = nullptr;  // on the source GPU: the staging copy began
    cudaEvent_t end = nullptr;    // on the destination GPU: the data arrived
    Op producer;
    Bytes bytes = 0;
  };
  // Cross-rank messages of the current iteration (after every stream is done).
  const std::vector<Record>& records() const { return records_; }
  // Forgets the iteration's messages and events (all work must be complete).
  void reset();
  // Wakes every waiting receive() (it throws) and aborts the NCCL communicators.
  void abort(const std::string& why);
  bool aborted() const;
  // Throws InputError(kExitGpu) when an NCCL communicator of `device` reports an async error.
  void check_async_error(int device);
  cudaStream_t comm_stream(int rank) const { return comm_streams_[static_cast<std::size_t>(rank)]; }
  bool uses_nccl() const { return !comms_.empty(); }

 private:
  struct Posted {
    void* staging = nullptr;
    std::size_t bytes = 0;
    int src_rank = 0;
    cudaEvent_t copy_start = nullptr, staged = nullptr;
    Op producer;
  };
  cudaEvent_t new_event(int device);
  int device_of(int rank) const { return rank_device_[static_cast<std::size_t>(rank)]; }

  std::vector<int> rank_device_;
  std::vector<int> devices_;              // distinct GPUs in use, index = NCCL rank
  std::map<int, int> nccl_rank_of_device_;
  std::vector<ncclComm_t> comms_;         // per entry of devices_, when > 1
  std::vector<cudaStream_t> comm_streams_;  // per rank
  double timeout_s_;

  mutable std::mutex mu_;  // the board, records, events, abort flag
  std::condition_variable posted_cv_;
  std::map<MsgKey, Posted> board_;
  std::vector<Record> records_;
  std::vector<std::pair<int, cudaEvent_t>> events_;  // (device, event) to destroy at reset
  bool aborted_ = false;
  std::string abort_reason_;
  std::mutex nccl_mu_;  // one NCCL group at a time, in one global order
};

}  // namespace ppsim::gpu::replay
