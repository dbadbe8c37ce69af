// EpWiring: connects the EP groups of a replay (or of an EP profile) once every chunk exists:
// each stage's shards to each other's receive buffers (Chunk::connect_ep), the group's host
// handshake (launch::EpGroupSync), and with --a2a nccl one NCCL communicator per group.
//
//   one process        peer pointers (the caller enabled peer access), a LocalEpGroupSync per
//                      group, ncclCommInitAll over the group's GPUs
//   processes of one   each chunk's receive slab (one allocation) exported as a CUDA IPC handle,
//   host (mpirun)      published with mpi::allgather and opened once per process by the
//                      processes holding its peers (buffer offsets follow from the shape:
//                      Chunk::ep_slab_layout); SharedEpGroupSync words in one launch::SharedFlags
//                      segment that process 0 makes; each group's NCCL id made by the process
//                      holding its shard 0 and broadcast
// Not obvious: across processes the constructor is collective, and it stays so when this
// process failed to build a chunk (local_ok = false): every process then throws, none waits in a
// collective the others left. A mapping of a peer's slab must outlive this process's kernels
// that write into it, and the slab must outlive every peer's: destroy the wiring after every
// process's rank threads are done (an MPI collective between), and free the chunks after that.
#pragma once
#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "cuda_validate/chunk.h"
#include "ep/ep_placement.h"
#include "launch/shared_flags.h"

namespace ppsim::gpu {

class EpWiring {
 public:
  struct Member {
    int stage = 0, shard = 0, device = 0;
    Chunk* chunk = nullptr;
  };
  // stages: the EP groups (one per schedule stage); process_of[stage * ep + shard]: the process
  // (mpi rank) holding that shard; local: this process's chunks; shapes[stage]: the stage's chunk
  // shape (receive buffers sized); across_processes: the groups span the processes of the MPI
  // world (else every shard is in `local`); handshake: install the host handshake.
  EpWiring(int stages, int ep, std::vector<int> process_of, std::vector<Member> local, std::vector<ChunkShape> shapes,
           bool across_processes, bool local_ok, bool handshake, ep::A2aBackend backend);
  ~EpWiring();
  EpWiring(const EpWiring&) = delete;
  EpWiring& operator=(const EpWiring&) = delete;
  // Wakes every handshake waiter (here and, across processes, in the others) and marks the NCCL
  // communicators for abort (at destruction: a kernel waiting for a peer that failed is killed).
  void abort();
  int communicators() const { return static_cast<int>(comms_.size()); }

 private:
  void connect_in_process(bool handshake);
  void connect_across_processes(bool local_ok, bool handshake);
  void make_communicators();
  std::vector<const Member*> members_of(int stage) const;

  int stages_, ep_;
  std::vector<int> process_of_;
  std::vector<Member> local_;
  std::vector<ChunkShape> shapes_;
  ep::A2aBackend backend_;
  bool multi_ = false;
  std::vector<std::shared_ptr<EpGroupSync>> syncs_;
  std::shared_ptr<launch::SharedFlags> shared_;
  std::map<std::pair<int, int>, std::pair<int, void*>> opened_;  // (stage, shard) -> (device, IPC mapping)
  std::vector<std::pair<int, ncclComm_t>> comms_;                  // (device, communicator)
  std::atomic<bool> aborted_{false};
};

}  // namespace ppsim::gpu
