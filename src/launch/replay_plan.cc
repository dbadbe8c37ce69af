// plan_replay (see replay_plan.h).
#include "launch/replay_plan.h"

#include <algorithm>

#include "core/error.h"

namespace ppsim::launch {

ReplayPlan plan_replay(const ReplayWhere& w) {
  ReplayPlan p;
  p.multi = w.processes > 1;
  p.kind = choose_transport(w.transport, p.multi ? w.processes : 1, p.multi ? w.local_size : 1);
  p.shared_gpus = p.multi && shared_gpus_allowed();
  const int ep = std::max(1, w.ep);
  const bool known = w.visible > 0;  // before any GPU call: the refusals that need no count
  if (p.multi && known) {
    if (const std::string why =
            placement_problem(w.processes, w.local_size, p.shared_gpus ? w.local_size : w.visible, w.pp * ep);
        !why.empty())
      throw InputError(why, {}, kExitUsage);
    p.my_device = gpu_of_process(w.local_rank, w.visible, p.shared_gpus);
    p.gpus = w.processes;
  } else if (known) {
    p.gpus = w.devices > 0 ? std::min(w.devices, w.visible) : w.visible;
  }
  if (ep > 1)
    if (const std::string why = ep_launch_problem(p.multi ? w.processes : 1, p.multi ? w.local_size : 1, p.kind);
        !why.empty())
      throw InputError(why, {}, kExitUsage);
  if (!known) return p;
  p.placement = p.multi ? ep::place_across_processes(
                              w.pp, ep, gpus_of_processes(w.processes, w.rank, w.local_rank, w.visible, p.shared_gpus))
                        : ep::place_in_process(w.pp, ep, p.gpus);
  if (ep > 1 && w.a2a == ep::A2aBackend::nccl)
    if (const std::string why = ep::nccl_a2a_problem(p.placement); !why.empty()) throw InputError(why, {}, kExitUsage);
  return p;
}

}  // namespace ppsim::launch
