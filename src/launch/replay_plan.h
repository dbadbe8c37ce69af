// Where a replay runs, decided once: the transport, each (pipeline rank, EP shard)'s process and
// GPU, and every refusal that needs no GPU work (a transport that cannot reach the peers, too few
// GPUs for the processes, expert parallelism across processes without CUDA IPC, NCCL's
// all-to-all with two shards of a group on one GPU). api::validate asks before it profiles,
// gpu::replay_schedule before it allocates: the same answer, from this one place.
#pragma once
#include <string>

#include "ep/ep_placement.h"
#include "launch/launch.h"

namespace ppsim::launch {

struct ReplayWhere {
  int pp = 1, ep = 1;             // pipeline ranks; EP shards of each (1: none)
  std::string transport = "auto";  // as asked (choose_transport)
  ep::A2aBackend a2a = ep::A2aBackend::ours;
  int devices = 0;                 // GPUs asked for in one process (0: all visible)
  int visible = 0;                 // GPUs this process sees (0: not known yet: no placement)
  int processes = 1, rank = 0, local_rank = 0, local_size = 1;  // the launcher's (one process: 1, 0, 0, 1)
};

struct ReplayPlan {
  TransportKind kind = TransportKind::Peer;
  bool multi = false;        // several processes
  bool shared_gpus = false;  // PPSIM_ALLOW_SHARED_GPU (tests)
  int my_device = 0;         // this process's GPU (one process: 0)
  int gpus = 1;              // GPUs the ranks run on: the processes', or those used in one process
  ep::EpPlacement placement;
};

// Throws InputError(kExitUsage) with the one-line reason. With `visible` 0 (no GPU asked yet),
// only the refusals that need no GPU count, and no placement.
ReplayPlan plan_replay(const ReplayWhere& w);

}  // namespace ppsim::launch
