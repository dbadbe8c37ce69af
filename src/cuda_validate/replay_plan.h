// Where a replay runs, decided once: the transport, each (pipeline rank, EP shard)'s process and
// GPU, and every refusal that needs no GPU work (a transport that cannot reach the peers, too few
// GPUs for the processes, expert parallelism across processes without CUDA IPC, NCCL's
// all-to-all with two shards of a group on one GPU). api::validate asks before it profiles,
// gpu::replay_schedule before it allocates: the same answer, from this one place. Header-only
// (no CUDA): the clients reach it through gpu_api.h, and the layers allow that one header.
#pragma once
#include <algorithm>
#include <string>

#include "core/error.h"
#include "ep/ep_placement.h"
#include "launch/launch.h"
#include "launch/mpi.h"

namespace ppsim::gpu {

struct ReplayWhere {
  int pp = 1, ep = 1;              // pipeline ranks; EP shards of each (1: none)
  std::string transport = "auto";  // as asked (choose_transport)
  ep::A2aBackend a2a = ep::A2aBackend::ours;
  int devices = 0;  // GPUs asked for in one process (0: all visible)
  int visible = 0;  // GPUs this process sees (0: not known yet: no placement)
  int processes = 1, rank = 0, local_rank = 0, local_size = 1;  // the launcher's (one process: 1, 0, 0, 1)
};

inline ReplayWhere replay_where(int pp, int ep, const std::string& transport, ep::A2aBackend a2a, int devices,
                                int visible, const mpi::World& world) {
  ReplayWhere w;
  w.pp = pp;
  w.ep = ep;
  w.transport = transport;
  w.a2a = a2a;
  w.devices = devices;
  w.visible = visible;
  w.processes = world.size;
  w.rank = world.rank;
  w.local_rank = world.local_rank;
  w.local_size = world.local_size;
  return w;
}

struct ReplayPlan {
  launch::TransportKind kind = launch::TransportKind::Peer;
  bool multi = false;        // several processes
  bool shared_gpus = false;  // PPSIM_ALLOW_SHARED_GPU (tests)
  int my_device = 0;         // this process's GPU (one process: 0)
  int gpus = 1;              // GPUs the ranks run on: the processes', or those used in one process
  ep::EpPlacement placement;
};

// Throws InputError(kExitUsage) with the one-line reason. With `visible` 0 (no GPU asked yet),
// only the refusals that need no GPU count, and no placement.
inline ReplayPlan plan_replay(const ReplayWhere& w) {
  ReplayPlan p;
  p.multi = w.processes > 1;
  p.kind = launch::choose_transport(w.transport, p.multi ? w.processes : 1, p.multi ? w.local_size : 1);
  p.shared_gpus = p.multi && launch::shared_gpus_allowed();
  const int ep = std::max(1, w.ep);
  const bool known = w.visible > 0;  // before any GPU call: the refusals that need no count
  if (p.multi && known) {
    const int gpus = p.shared_gpus ? w.local_size : w.visible;
    if (const std::string why = launch::placement_problem(w.processes, w.local_size, gpus, w.pp * ep); !why.empty())
      throw InputError(why, {}, kExitUsage);
    p.my_device = launch::gpu_of_process(w.local_rank, w.visible, p.shared_gpus);
    p.gpus = w.processes;
  } else if (known) {
    p.gpus = w.devices > 0 ? std::min(w.devices, w.visible) : w.visible;
  }
  if (ep > 1)
    if (const std::string why =
            launch::ep_launch_problem(p.multi ? w.processes : 1, p.multi ? w.local_size : 1, p.kind);
        !why.empty())
      throw InputError(why, {}, kExitUsage);
  if (!known) return p;
  p.placement =
      p.multi ? ep::place_across_processes(
                    w.pp, ep, launch::gpus_of_processes(w.processes, w.rank, w.local_rank, w.visible, p.shared_gpus))
              : ep::place_in_process(w.pp, ep, p.gpus);
  if (ep > 1 && w.a2a == ep::A2aBackend::nccl)
    if (const std::string why = ep::nccl_a2a_problem(p.placement); !why.empty()) throw InputError(why, {}, kExitUsage);
  return p;
}

}  // namespace ppsim::gpu
