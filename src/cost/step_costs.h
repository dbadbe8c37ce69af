// Per-step costs outside the pipeline's makespan: the data-parallel gradient reduction (and the
// parameter all-gather of a sharded optimizer) and the optimizer step. Both are switched on in
// the config's `costs:` section (dp_comm, optimizer_step; docs/CONFIG.md) and then added to the
// simulated makespan by physical_result(): step = makespan + max over ranks of
// (exposed DP communication + optimizer step).
//
// Counts, per rank, G = the parameters it holds (its slices' layers, embedding and head; dense
// ones split over tp, routed experts over ep x etp), n = the ranks holding copies (dp for dense
// parameters, dp / ep for routed experts: EP is carved out of DP), bytes(x) = precision.x:
//   ZeRO 0 (DDP): ring all-reduce of the gradients, 2 (n-1)/n G bytes(grads)
//   ZeRO 1, 2 (Megatron's distributed optimizer): reduce-scatter of the gradients, (n-1)/n G
//     bytes(grads), then all-gather of the updated parameters, (n-1)/n G bytes(params)
//   ZeRO 3: the parameters are all-gathered for the forward and again for the backward:
//     (n-1)/n G (bytes(grads) + 2 bytes(params))
//   n is ZeRO's shard group (parallel.zero_shard x cp; dp x cp by default). HSDP (zero_shard <
//   dp): each shard's r = dp / zero_shard replicas also all-reduce its gradients, 2 (r-1)/r G/n
//   bytes(grads).
//   Under gradient accumulation (M micro-batches a step, of one pipe) parallel.dp_sync says how
//   often these run: microbatch (ZeRO 3's two gathers and the gradient reduction, with HSDP's
//   all-reduce, M times), no_sync (ZeRO 3's gathers M times, the reduction once), step (all once).
//   ZeRO 1/2's all-gather of the updated parameters is once a step in every mode. The default
//   (automatic, dp_sync_of) follows the runtimes' code:
//   - PyTorch FSDP1, FULL_SHARD (pytorch/pytorch torch/distributed/fsdp/_runtime_utils.py, commit
//     00ae0bc: _post_forward_reshard frees a non-root unit's gathered weights after its forward,
//     _pre_backward_hook gathers them again, _post_backward_hook reduce-scatters every backward
//     unless no_sync() cleared _sync_gradients, _post_backward_final_callback waits for the
//     reduce-scatters; _should_free_in_backward frees FULL_SHARD's weights even under no_sync).
//     Composer, MPT's trainer, wraps the model's children, not the model, so its no_sync path
//     never applies (mosaicml/composer composer/trainer/trainer.py:2778 and dist_strategy.py:400,
//     commit 67d8624 of 2024-04-22); metaseq skips no_sync under FSDP (metaseq/trainer.py:749).
//   - FSDP2 fully_shard: torchtitan reshards after forward at pp 1 and not under PP
//     (pytorch/torchtitan torchtitan/distributed/fsdp.py get_fsdp_reshard_after_forward_policy),
//     never calls set_requires_gradient_sync at pp 1 (torchtitan/trainer.py train_step); PyTorch's
//     pipelining sets set_requires_gradient_sync(False) and set_reshard_after_backward(False) on
//     every backward and reduces after the last (torch/distributed/pipelining/stage.py
//     backward_maybe_with_nosync): microbatch at pp 1, step under PP.
//   - DeepSpeed ZeRO 2/3 reduce every micro-step and refuse no_sync; ZeRO 3 fetches a module's
//     weights before each forward and backward and releases them after (deepspeedai/DeepSpeed
//     deepspeed/runtime/engine.py allreduce_gradients, no_sync; runtime/zero/parameter_offload.py
//     pre_sub_module_forward_function / _backward_function).
//   - Megatron-LM's DDP and distributed optimizer run all but the last micro-batch under no_sync
//     and gather the parameters once a step (NVIDIA/Megatron-LM megatron/core/pipeline_parallel/
//     schedules.py forward_backward_no_pipelining); Megatron FSDP reduces every backward with
//     optim_grads(_params) and releases the weights after each forward (megatron/core/distributed/
//     fsdp/src/megatron_fsdp/megatron_fsdp.py grad_reduce_every_bprop, _post_forward).
//   So: microbatch with ZeRO 3 (step for fsdp at pp > 1), step below it; the readers of
//   torchtitan and Megatron arguments write it where their runtime differs.
//   FSDP's prefetch (ZeRO 3, costs.dp_overlap not written, with the simulation's per-rank compute
//   C): each layer's all-gather hides under the layer before it, each reduce-scatter under the
//   layer after it, so the exposed time is, in each of the step's rounds, the first layer's forward
//   all-gather (of L layers: G bytes(params) (n-1)/n / L at the link's rate) plus the last layer's
//   reduce-scatter (G bytes(grads) (n-1)/n / L), plus whatever of the rest outlasts C:
//     exposed = first + last + max(0, T - first - last - C), T the whole DP time, first and last
//     summed over the rounds of the gathers and of the reduction.
// (Rajbhandari et al. 2020, ZeRO, section 7: DDP moves 2 Psi per rank, ZeRO-1/2 as much, ZeRO-3
// 3 Psi.) Bytes leave each rank at the link's one-way bandwidth times efficiency.comm: NVLink
// when the DP group fits one node (tp * dp <= gpus_per_node, Megatron's rank order), else the
// network (each GPU its NIC). The exposed part is (1 - costs.dp_overlap) of it (Megatron-LM's
// --overlap-grad-reduce / --overlap-param-gather hide the rest under the backward / forward).
//
// Optimizer step (Adam, HBM-bound): per parameter the rank updates (all of G, or with ZeRO >= 1
// its 1/n shard), it reads the gradient twice (the global norm for clipping, then the update),
// reads and writes the fp32 master copy (when params are narrower than fp32) and both moments,
// and writes the new parameters: 2 bytes(grads) + 8 + 4 bytes(optimizer) + bytes(params) bytes
// (fp32 grads and moments, bf16 params: 34), at hbm_gbps * efficiency.elementwise. An optimizer
// kept on the host (precision.optimizer_location: host) costs the GPU nothing here.
#pragma once
#include <vector>

#include "core/schedule.h"
#include "cost/config.h"

namespace ppsim {

struct RankStepCosts {
  double dense_params = 0;   // on this rank, after the tp split (before ZeRO)
  double expert_params = 0;  // routed experts on this rank, after the ep x etp split
  double dp_bytes = 0;       // bytes this rank sends in the step's DP collectives
  double dp_ns = 0;          // their time on idle links
  double dp_exposed_ns = 0;  // (1 - dp_overlap) of dp_ns
  double optimizer_bytes = 0;
  double optimizer_ns = 0;
  double added_ns = 0;       // exposed DP + optimizer, switched-on pieces only
};

struct StepCosts {
  std::vector<RankStepCosts> ranks;  // one per pipeline rank
  double added_ns = 0;               // max over ranks of exposed DP + optimizer (switched-on pieces only)
  int worst_rank = 0;
};

// Always computes both pieces' figures; added_ns counts only those switched on in c.costs.
// busy_ns: each pipeline rank's compute time in the step (the simulation's RankStats::busy), for
// FSDP's prefetch model; without it, dp_overlap applies.
StepCosts step_costs(const ModelConfigData& c, const Schedule& s, const std::vector<double>* busy_ns = nullptr);

// parallel.dp_sync as it applies to a run of pp ranks: the written mode, or automatic's choice.
DpSync dp_sync_of(const ParallelSpec& p, int pp);

}  // namespace ppsim
