// Transport: moves activations and gradients between the ranks of a replay. A message is named
// by where it goes (MsgKey: activation into stage s, or gradient into stage s, micro-batch m).
//
//   producer thread: send()    -> on its staging stream: wait for the op, copy the tensor into a
//                                 stream-ordered staging buffer, record `staged`; then either post
//                                 the message on the board, or (a link: the consumer is in another
//                                 process, or mode "links") ncclSend it on that link's own
//                                 communicator and stream
//   consumer thread: receive() -> from the board: wait (host, bounded by the timeout) for the
//                                 post, then move the staged bytes into the consumer's buffer on
//                                 its comm stream: a device copy when both ranks share a GPU, else
//                                 an NCCL send/recv pair issued in ONE group by this thread (mode
//                                 "pairs"). From a link: ncclRecv on the link's communicator, in
//                                 the sender's order (messages not yet needed land in spare
//                                 buffers). Returns the `arrived` event for the compute stream.
// Not obvious: NCCL matches sends and receives by issue order per peer. Within a process, issuing
// each matched pair together in one ncclGroupStart/End, under one lock, makes that order the same
// on both sides whatever order the ranks' schedules produce or consume messages in. Across
// processes (mpirun/srun) nothing can be issued for the other side, so every directed pair of
// ranks gets its own two-rank communicator, carrying one direction only, and both ends follow
// the sender's order (launch::link_sequences): no order of ranks can deadlock or mismatch. The
// staging copy frees the producer's buffers at once; it has a stream of its own so that a send
// never queues behind the staging of a later output (which waits for a later op).
// Modes within one process: "pairs" (one communicator per GPU, pairs under a lock) or "links"
// (the per-pair communicators, as across processes: a message never waits behind another pair's).
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
#include "core/schedule.h"
#include "core/time.h"
#include "launch/launch.h"

namespace ppsim::gpu::replay {

using launch::MsgKey;

class Transport {
 public:
  // rank_device[r]: the GPU of rank r, or -1 for a rank of another process (process_of[r]).
  // Within the process, NCCL communicators (one per GPU in use) are created when more than one
  // GPU is in use; across processes, one two-rank communicator per directed pair of ranks that
  // exchange tensors, bootstrapped over MPI.
  // `links`: within the process too, GPUs exchange tensors over per-pair communicators.
  Transport(const Schedule& s, std::vector<int> rank_device, std::vector<int> process_of, bool links, double timeout_s);
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
    cudaEvent_t start = nullptr;  // on the source GPU: the staging copy began (null: other process)
    cudaEvent_t end = nullptr;    // on the destination GPU: the data arrived (null: other process)
    Op producer;
    Bytes bytes = 0;
    MsgKey key;
  };
  // Cross-rank messages of the current iteration (after every stream is done); a message to or
  // from another process appears with only this process's event.
  const std::vector<Record>& records() const { return records_; }
  bool is_local(int rank) const { return rank_device_[static_cast<std::size_t>(rank)] >= 0; }
  // Forgets the iteration's messages and events (all work must be complete).
  void reset();
  // Wakes every waiting receive() (it throws) and aborts the NCCL communicators.
  void abort(const std::string& why);
  bool aborted() const;
  // Throws InputError(kExitGpu) when an NCCL communicator of `device` reports an async error.
  void check_async_error(int device);
  cudaStream_t comm_stream(int rank) const { return comm_streams_[static_cast<std::size_t>(rank)]; }
  // Makes `s` (on rank's GPU) wait for all the transport work of `rank` enqueued so far.
  void join_into(int rank, cudaStream_t s);
  bool uses_nccl() const { return !comms_.empty(); }

 private:
  struct Posted {
    void* staging = nullptr;
    std::size_t bytes = 0;
    int src_rank = 0;
    cudaEvent_t copy_start = nullptr, staged = nullptr;
    Op producer;
  };
  // One end of a directed pair of ranks with its own communicator (in another process, or
  // mode "links"); a pair with both ends here has a sending and a receiving Link.
  struct Link {
    int src_rank = 0, dst_rank = 0;
    int device = 0;              // this end's GPU
    ncclComm_t comm = nullptr;   // two ranks: 0 = sender, 1 = receiver
    cudaStream_t stream = nullptr;
    std::map<MsgKey, std::size_t> position;  // in the sender's order
    std::size_t issued = 0;      // sender: sends issued so far, in `order`
    launch::LinkReceiver receiver{{}};  // receiver: what to receive when
    struct Landed {
      void* buffer = nullptr;
      cudaEvent_t arrived = nullptr;
    };
    std::map<MsgKey, Landed> landed;  // receiver: arrived ahead of their use
  };
  cudaEvent_t new_event(int device);
  int device_of(int rank) const { return rank_device_[static_cast<std::size_t>(rank)]; }
  int producer_of(const MsgKey& k) const { return stage_rank_.at(static_cast<std::size_t>(k.grad ? k.stage + 1 : k.stage - 1)); }
  int consumer_of(const MsgKey& k) const { return stage_rank_.at(static_cast<std::size_t>(k.stage)); }
  void open_links(const Schedule& s, bool links);
  Link make_link(int src, int dst, int device, const std::vector<MsgKey>& order);
  cudaEvent_t receive_link(Link& l, const MsgKey& key, void* dst, std::size_t bytes, int dst_rank);

  std::vector<int> rank_device_;
  std::vector<int> process_of_;
  std::vector<int> stage_rank_;
  std::map<std::pair<int, int>, Link> send_links_, recv_links_;  // by (src rank, dst rank)
  std::vector<int> devices_;              // distinct GPUs in use, index = NCCL rank
  std::map<int, int> nccl_rank_of_device_;
  std::vector<ncclComm_t> comms_;         // per entry of devices_, when > 1
  std::vector<cudaStream_t> comm_streams_;   // per rank (null for ranks of other processes)
  std::vector<cudaStream_t> stage_streams_;  // per rank: the staging copies
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
