// Multi-process launch (mpirun / srun): what a process can know without a GPU or MPI.
//
//   detect_launch()    reads the launcher's environment (OpenMPI, Slurm srun, PMI, PMIx) and
//                      says how many processes were started and which one this is
//   process_of_rank()  which process replays schedule rank r (r % W, as ranks share GPUs r % G)
//   link_sequences()   for every pair of ranks (src -> dst) that exchange tensors, the messages
//                      in the order src produces them
//   message_order()    every cross-rank message in one order all processes compute alike and an
//                      execution can follow (the NCCL transport issues in it on every process)
//   choose_transport() peer / ipc / nccl from the request and where the processes are
//   encode_part() / merge_parts()
//                      a process's share of a measured Timeline, as text, and the whole Timeline
//                      from every process's share (transfers are joined from the sender's half,
//                      which knows when the message left, and the receiver's, which knows when
//                      it arrived)
// Not obvious: the replay's sender issues its messages in its action order (an action's first op,
// then its second; replay.cc's finish() asks output_message() which message an op sends).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/op.h"
#include "core/schedule.h"
#include "core/timeline.h"

namespace ppsim::launch {

struct LaunchEnv {
  std::string launcher;  // "openmpi", "srun", "pmi", "pmix", or "" (started directly)
  int size = 1;          // processes in the job (1 when unknown)
  int rank = 0;
  int local_rank = 0;    // among the processes of this node
  bool multi() const { return size > 1; }
};

using EnvLookup = std::function<const char*(const char*)>;
// From the environment (`lookup` defaults to getenv). A malformed number reads as absent.
LaunchEnv detect_launch(const EnvLookup& lookup = {});

// "" when this process can take part: started alone, or by a launcher and built with MPI.
// Otherwise the one-line reason (several processes started, no MPI to reach the others: each
// would replay the whole schedule on its own, fighting the others for the GPUs).
std::string launch_problem(const LaunchEnv& env, bool built_with_mpi);

// "" when `processes` processes (`local` of them on this node, which shows `gpus` GPUs) can
// replay `ranks` pipeline ranks, one GPU per process; otherwise the one-line reason.
std::string placement_problem(int processes, int local, int gpus, int ranks);

inline int process_of_rank(int rank, int processes) { return processes > 1 ? rank % processes : 0; }

// PPSIM_ALLOW_SHARED_GPU=1 (for tests): processes may share GPUs, process p on GPU p % gpus, so
// that the multi-process paths (CUDA IPC, the shared flags) run on a one-GPU machine. Timings of
// such a run mean nothing.
bool shared_gpus_allowed(const EnvLookup& lookup = {});
// The GPU of the process with this node-local rank.
inline int gpu_of_process(int local_rank, int gpus, bool shared) {
  return shared && gpus > 0 ? local_rank % gpus : local_rank;
}
// The GPU of every process, seen from process `rank` (node-local rank `local_rank`): its own by
// gpu_of_process, the others' as on one host, where a process's local rank is its rank (what
// expert parallelism across processes needs, and allows: ep_launch_problem).
inline std::vector<int> gpus_of_processes(int processes, int rank, int local_rank, int gpus, bool shared) {
  std::vector<int> v;
  for (int p = 0; p < processes; ++p) v.push_back(gpu_of_process(p == rank ? local_rank : p, gpus, shared));
  return v;
}

// A message between stages: the activation into `stage` (grad 0) or the gradient into `stage`
// (grad 1) of one micro-batch. Every message of a schedule has a distinct key.
struct MsgKey {
  int grad = 0;
  int stage = 0;
  int microbatch = 0;
  friend bool operator<(const MsgKey& a, const MsgKey& b) {
    return std::tie(a.grad, a.stage, a.microbatch) < std::tie(b.grad, b.stage, b.microbatch);
  }
  friend bool operator==(const MsgKey& a, const MsgKey& b) {
    return a.grad == b.grad && a.stage == b.stage && a.microbatch == b.microbatch;
  }
};

// The message an op's output becomes, if any: F of a stage that is not its pipe's last sends the
// activation into stage+1; I or B of a stage that is not its pipe's first sends the gradient into
// stage-1. W and the ends of a pipe send nothing.
bool output_message(const Schedule& s, const Op& op, MsgKey& key);
// The message an op needs before it runs, if any: F of a stage that is not its pipe's first needs
// the activation into that stage; I or B of a stage that is not its pipe's last needs the gradient
// into it. W needs nothing from another stage (its own I ran before, on the same rank).
bool input_message(const Schedule& s, const Op& op, MsgKey& key);
// The rank that produces the message `key` (the previous stage's for an activation, the next
// stage's for a gradient) and the rank that consumes it.
int producer_rank(const Schedule& s, const MsgKey& key);
int consumer_rank(const Schedule& s, const MsgKey& key);

// (src rank, dst rank) -> messages in src's production order; only pairs with src != dst.
std::map<std::pair<int, int>, std::vector<MsgKey>> link_sequences(const Schedule& s);

// Every cross-rank message of the schedule in one order that every process computes alike and
// that an execution can follow: ranks run in turn (0, 1, ..., P-1, 0, ...), each as far as its
// next action's inputs have been produced, and a message joins the order when its op runs. So a
// message comes after every message its producer consumed before it, and on each link the order
// is the sender's production order (link_sequences). The NCCL transport issues its sends and
// receives in this order on every process, so the two ends of a message always match.
// Throws InputError when the schedule cannot run to its end (a deadlock the validator reports).
std::vector<MsgKey> message_order(const Schedule& s);

// How the replay moves tensors between ranks on different GPUs (docs/GPU.md):
//   peer: one process; copy-engine peer copies, ordered by CUDA events across devices
//   ipc:  one process per GPU on one host; the same copies into CUDA IPC memory
//   nccl: NCCL send/recv on one communicator, issued in message_order() on every process
enum class TransportKind { Peer, Ipc, Nccl };
const char* transport_name(TransportKind k);
// `requested` is auto|peer|ipc|nccl. auto: peer for one process, ipc when every process is on
// one host (`local` == `processes`), nccl across hosts. Throws InputError(kExitUsage) for a name
// that does not exist or a kind that cannot reach the peers (peer with several processes, ipc
// with one process or across hosts).
TransportKind choose_transport(const std::string& requested, int processes, int local);
// "" when a replay with expert parallelism can run on `processes` processes (`local` of them on
// this node) moving stage messages by `kind`: one process, or processes of one host with the ipc
// transport (each chunk's receive buffers travel as a CUDA IPC handle, the host handshake is in
// shared memory). Otherwise the one-line reason and what works.
std::string ep_launch_problem(int processes, int local, TransportKind kind);

// One process's share of a measured Timeline.
struct SendHalf {  // a message that left for another process
  MsgKey key;
  int src_rank = 0, dst_rank = 0;
  Time start = 0;
  Op producer;
  Bytes bytes = 0;
};
struct RecvHalf {  // a message that arrived from another process
  MsgKey key;
  Time end = 0;
};
struct TimelinePart {
  std::vector<int> ranks;          // the schedule ranks this process replayed
  Timeline local;                  // their intervals and activation samples; transfers among them
  std::vector<SendHalf> sends;
  std::vector<RecvHalf> receives;
};
// Text form of a part (JSON). Intervals name their action by its index in the rank's list.
std::string encode_part(const TimelinePart& part, const Schedule& s);
// The whole Timeline; throws InputError when the parts do not fit `s` (a rank missing or
// replayed twice, an action out of range, a message with only one half).
Timeline merge_parts(const std::vector<std::string>& parts, const Schedule& s);

}  // namespace ppsim::launch
