// gpu::plan_replay: where a replay runs and what it refuses, without a GPU (the counts given).
#include <string>

#include "catch.h"
#include "core/error.h"
#include "cuda_validate/replay_plan.h"

using namespace ppsim;
using namespace ppsim::gpu;
using ppsim::launch::TransportKind;

namespace {
ReplayWhere one_process(int pp, int ep, int visible) {
  ReplayWhere w;
  w.pp = pp;
  w.ep = ep;
  w.visible = visible;
  return w;
}
int exit_code_of(const ReplayWhere& w) {
  try {
    (void)plan_replay(w);
  } catch (const InputError& e) {
    return e.exit_code();
  }
  return 0;
}
}  // namespace

TEST_CASE("plan_replay: one process deals rank r to GPU r % GPUs, capped by --devices", "[launch]") {
  const ReplayPlan p = plan_replay(one_process(4, 1, 2));
  CHECK(p.kind == TransportKind::Peer);
  CHECK_FALSE(p.multi);
  CHECK(p.gpus == 2);
  for (int r = 0; r < 4; ++r) CHECK(p.placement.gpu_of(r, 0) == r % 2);
  ReplayWhere w = one_process(4, 1, 2);
  w.devices = 1;  // fewer GPUs asked for than present: virtual ranks on GPU 0
  const ReplayPlan q = plan_replay(w);
  CHECK(q.gpus == 1);
  for (int r = 0; r < 4; ++r) CHECK(q.placement.gpu_of(r, 0) == 0);
  w.devices = 3;  // more than present: the present ones
  CHECK(plan_replay(w).gpus == 2);
}

TEST_CASE("plan_replay: the refusals, each a usage error", "[launch]") {
  ReplayWhere ipc = one_process(2, 1, 2);
  ipc.transport = "ipc";  // CUDA IPC needs several processes
  CHECK(exit_code_of(ipc) == kExitUsage);
  // NCCL's all-to-all cannot hold two shards of one EP group on one GPU.
  ReplayWhere a2a = one_process(2, 2, 1);
  a2a.a2a = ep::A2aBackend::nccl;
  CHECK(exit_code_of(a2a) == kExitUsage);
  a2a.visible = 2;  // one shard of every group per GPU: allowed
  CHECK(exit_code_of(a2a) == 0);
  a2a.visible = 0;  // no GPU count yet: no placement, so nothing to refuse
  CHECK(exit_code_of(a2a) == 0);
  CHECK(plan_replay(a2a).placement.gpu.empty());
  // Two processes on a node that shows one GPU (no PPSIM_ALLOW_SHARED_GPU in the tests' env).
  ReplayWhere two = one_process(2, 1, 1);
  two.processes = 2;
  two.local_size = 2;
  CHECK(exit_code_of(two) == kExitUsage);
  two.visible = 2;
  const ReplayPlan p = plan_replay(two);
  CHECK(p.multi);
  CHECK(p.kind == TransportKind::Ipc);  // auto: processes of one host
  CHECK(p.gpus == 2);
}
