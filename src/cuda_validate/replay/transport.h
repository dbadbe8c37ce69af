// Transport: moves activations and gradients between the ranks of a replay. A message is named
// by where it goes (MsgKey: activation into stage s, or gradient into stage s, micro-batch m);
// every message of an iteration has a receive buffer of its own (its mailbox, on the consumer's
// GPU), so no message waits for another's buffer to be freed.
//
// Three ways (launch::TransportKind, chosen by launch::choose_transport):
//   peer (one process, any GPUs of the host, also virtual ranks sharing one GPU)
//     producer thread: on the link's stream (src GPU): wait for the op, cudaMemcpyPeerAsync into
//                      the mailbox (a copy engine; no SM), record `copied`; post `copied` on the
//                      board (the one host step: the consumer learns which event to wait on)
//     consumer thread: take the post (bounded wait), then on its comm stream: wait `copied`
//                      (a cross-device event wait on the GPU), record `arrived`; the consumer's
//                      op reads the mailbox in place (Chunk::bind_input), so a message is moved
//                      once, by the copy engine, as the hardware would
//   ipc  (one process per GPU on one host): the same, with the mailbox in the consumer process's
//        memory (a CUDA IPC handle, opened once at start), `copied` an interprocess event (handle
//        exchanged once at start), and the post a word in shared host memory (launch::SharedFlags)
//        holding the iteration's number. Messages between ranks of one process go the peer way.
//   nccl (any processes, for hosts without a common memory, and for comparison): one NCCL
//        communicator over every GPU of the job; one sequencer thread per process issues every
//        message it is an end of in launch::message_order(), the same on every process, so the
//        two ends always match; sends leave from a staging copy, receives land in a buffer that
//        the consumer copies from. Messages between ranks of one GPU go the peer way.
// Never a hang: every host wait is bounded by the timeout and names the rank, its op and the
// message it waited for; abort() wakes every waiter, aborts NCCL and raises the shared abort word
// that the other processes' waits watch.
#pragma once
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/op.h"
#include "core/schedule.h"
#include "core/time.h"
#include "cuda_validate/replay/words.h"
#include "launch/launch.h"
#include "launch/shared_flags.h"

namespace ppsim::gpu::replay {

using launch::MsgKey;
using launch::TransportKind;

class Transport {
 public:
  // rank_device[r]: the GPU of rank r, or -1 for a rank of another process (process_of[r]).
  // message_bytes: the size of every message (stage shapes share hidden, seq_len, micro_batch).
  // Across processes the constructor is collective (handles and ids are exchanged over MPI).
  Transport(const Schedule& s, std::vector<int> rank_device, std::vector<int> process_of, TransportKind kind,
            std::size_t message_bytes, double timeout_s);
  ~Transport();
  Transport(const Transport&) = delete;
  Transport& operator=(const Transport&) = delete;

  // Switches, before the first run. Value waits (peer messages): the link stream waits for a word
  // the producer's stream (`ready_stream` of send()) writes after its op, the consumer's stream for
  // a word the link stream writes after the copy, in place of event waits (words.h). Poisoning
  // (the checking mode, message_check.h): every receive buffer is filled with 0xff before each
  // run, so a read before the message landed reads other bytes.
  void set_value_waits(bool on);
  void set_poison(bool on);
  bool value_waits() const { return words_ != nullptr; }

  // Called from the producer's thread after its op was enqueued (`ready`, on `ready_stream`).
  // Returns the event after which `src` may be reused. Never waits for the consumer.
  cudaEvent_t send(const MsgKey& key, const void* src, std::size_t bytes, int src_rank, cudaEvent_t ready,
                   const Op& producer, cudaStream_t ready_stream = nullptr);
  // Makes `st` wait until the message `key` that send() returned `sent` for has left `src`.
  void wait_sent(const MsgKey& key, cudaEvent_t sent, cudaStream_t st);
  // Called from the consumer's thread, for `consumer` (the op that needs the message); returns the
  // event (on the consumer's GPU) after which `dst` holds the message. With `in_place`, a message
  // that landed in its mailbox is not copied: *in_place points at it (valid until reset()), else
  // *in_place is null and `dst` holds it.
  // With value waits and `consumer_stream`, that stream waits for the message itself and the
  // result is null.
  cudaEvent_t receive(const MsgKey& key, void* dst, std::size_t bytes, int dst_rank, const Op& consumer,
                      const void** in_place = nullptr, cudaStream_t consumer_stream = nullptr);

  struct Record {
    int src_rank = 0, dst_rank = 0;
    cudaEvent_t start = nullptr;  // on the source GPU: the copy (or staging) began (null: other process)
    cudaEvent_t end = nullptr;    // the data is in place (null: other process): on the destination GPU,
                                  // or, with end_on_source, the copy's end on the source GPU's engine
    Op producer;
    Bytes bytes = 0;
    MsgKey key;
    bool end_on_source = false;
  };
  // Cross-rank messages of the current iteration (after every stream is done); a message to or
  // from another process appears with only this process's event.
  const std::vector<Record>& records() const { return records_; }
  bool is_local(int rank) const { return rank_device_[static_cast<std::size_t>(rank)] >= 0; }
  TransportKind kind() const { return kind_; }
  // Ends the iteration (every rank's streams are done): waits for the NCCL sequencer and every
  // local GPU, forgets the iteration's messages and events, and starts the next iteration.
  void reset();
  // Wakes every waiting receive() (it throws), aborts NCCL, tells the other processes.
  void abort(const std::string& why);
  bool aborted() const;
  std::string abort_reason() const;
  // Throws InputError(kExitGpu) when NCCL reports an async error on `device`, or another process
  // gave up.
  void check_async_error(int device);
  cudaStream_t comm_stream(int rank) const { return comm_streams_[static_cast<std::size_t>(rank)]; }
  // Makes `s` (on rank's GPU) wait for all the transport work of `rank` enqueued so far.
  void join_into(int rank, cudaStream_t s);

 private:
  enum class Path { Peer, Ipc, Nccl };
  struct Msg {
    int src = 0, dst = 0;
    Path path = Path::Peer;
    std::size_t order = 0;       // position in launch::message_order
    std::size_t flag = 0;        // Ipc: its word in flags_
    void* mailbox = nullptr;     // Peer/Ipc: the receive buffer (a local or an opened IPC pointer)
    cudaEvent_t ipc_event = nullptr;  // Ipc: created here (producer) or opened here (consumer)
  };
  struct Posted {                // what a waiting thread learns
    cudaEvent_t event = nullptr;      // peer: `copied`; nccl: staged (to the sequencer) or landed (to the consumer)
    cudaEvent_t copy_start = nullptr;
    void* buffer = nullptr;           // nccl: the staging or landing buffer
    Op producer;
  };
  struct Board {                 // posts by key, one waiter each
    std::map<MsgKey, Posted> posts;
    std::condition_variable cv;
  };

  cudaEvent_t new_event(int device);
  int device_of(int rank) const { return rank_device_[static_cast<std::size_t>(rank)]; }
  std::size_t device_index(int device) const {  // position in devices_ (its NCCL stream and communicator)
    return static_cast<std::size_t>(std::find(devices_.begin(), devices_.end(), device) - devices_.begin());
  }
  cudaStream_t link_stream(int src, int dst);
  void post(Board& b, const MsgKey& key, const Posted& p);
  // Waits (bounded) for the post of `key`; `who` names the waiter for the timeout's one line.
  Posted take(Board& b, const MsgKey& key, const std::string& who);
  void wait_flag(const MsgKey& key, const Msg& m, const std::string& who);
  [[noreturn]] void fail_wait(const std::string& who, const MsgKey& key, int src_rank, double waited_s);
  std::string describe(const MsgKey& key) const;
  void setup_mailboxes(const Schedule& s, const std::vector<MsgKey>& order);
  void setup_ipc(const std::vector<MsgKey>& order);
  void setup_nccl();
  void poison();
  bool by_value(const Msg& m) const { return words_ && m.path == Path::Peer; }
  std::size_t ready_word(const Msg& m) const { return 2 * m.order; }
  std::size_t copied_word(const Msg& m) const { return 2 * m.order + 1; }
  void start_sequencer();
  void join_sequencer();
  void sequence();  // the NCCL sequencer thread's body

  TransportKind kind_;
  std::vector<int> rank_device_;
  std::vector<int> process_of_;
  int my_process_ = 0;
  std::size_t message_bytes_ = 0;
  double timeout_s_;
  std::map<MsgKey, Msg> msgs_;
  std::vector<MsgKey> nccl_order_;       // the Nccl messages with an end here, in message_order
  std::vector<int> devices_;             // local GPUs in use
  std::map<int, void*> mailbox_alloc_;   // per local GPU: one allocation for its mailboxes
  std::map<int, std::size_t> mailbox_size_;  // its bytes
  std::map<int, void*> opened_;          // per other process: its mailbox allocation, opened
  std::map<std::pair<int, int>, cudaStream_t> link_streams_;  // (src, dst) -> stream on src's GPU
  std::vector<cudaStream_t> comm_streams_;  // per rank (null for ranks of other processes)
  std::unique_ptr<launch::SharedFlags> flags_;
  std::uint64_t generation_ = 1;         // this iteration's number, as the shared words carry it
  std::unique_ptr<Words> words_;         // value waits: [ready, copied] per message, in message order
  bool poison_ = false;
  // NCCL: one communicator; per local GPU its handle and stream (index = position in devices_).
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> nccl_streams_;
  std::map<int, int> nccl_rank_of_device_;  // one process: NCCL rank of each local GPU
  std::thread sequencer_;
  // The message the NCCL sequencer is waiting for its producer to stage (under mu_): messages go
  // in one order, so a consumer's wait that times out behind it names it as the cause.
  std::optional<MsgKey> sequencer_waits_for_;

  mutable std::mutex mu_;  // boards, records, events, abort state
  Board to_consumer_;      // peer: `copied` from producers; nccl: landed messages from the sequencer
  Board to_sequencer_;     // nccl: staged sends from producers
  std::vector<Record> records_;
  std::vector<std::pair<int, cudaEvent_t>> events_;  // (device, event) to destroy at reset
  std::atomic<bool> aborted_{false};
  std::string abort_reason_;
};

}  // namespace ppsim::gpu::replay
