// The cost model's interface to the rest of ppsim: load a YAML config (model, precision,
// hardware, parallel, times/profile) and derive the simulator's per-slice costs for a schedule,
// and the physical results (step time, tokens/s, MFU, memory per rank) of a simulation.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/schedule.h"
#include "cost/clock_response.h"
#include "sim/costs.h"
#include "sim/engine.h"
#include "sim/physical.h"

namespace ppsim {

struct ModelConfigData;  // defined in cost/config.h

// An opaque, copyable handle on a validated config.
struct ModelConfig {
  std::shared_ptr<const ModelConfigData> data;
};

// Loads and validates `path`, applying `sets` ("key.path=value") on top; every error is an
// InputError with file:line:col (for --set: the flag and the key).
ModelConfig load_config(const std::string& path, const std::vector<std::string>& sets);
ModelConfig load_config_text(const std::string& text, const std::string& name, const std::vector<std::string>& sets);

// The config's parallel.pp / microbatches / vpp, written into the CLI's values.
void apply_config_parallel(const ModelConfig& cfg, int& pp, int& microbatches, int& vpp);
// parallel.schedule (a family name, a list, or "all").
std::string config_schedules(const ModelConfig& cfg);

// Per-slice costs (ns) for this schedule's layout: Schedule::stages_per_pipe slices.
SimCosts derive_costs(const ModelConfig& cfg, const Schedule& s);
// The schedule as the config's runtime executes it: with parallel.p2p_runtime megatron, 1f1b and
// interleaved-1f1b get Megatron-LM's blocking p2p calls (schedules/megatron_p2p.h); with
// deepspeed, 1f1b gets DeepSpeed's TrainSchedule instructions (schedules/deepspeed_p2p.h); with
// torch, every single-pipe schedule gets PyTorch's sends and receives on one stream per rank: its
// runtime's lowering, or for 1f1b and gpipe at one stage per rank its single-stage schedules'
// calls (schedules/torch_p2p.h; InputError for two pipes); any other schedule, or one that lists
// its own communication, is returned as it is.
Schedule as_run(const ModelConfig& cfg, const Schedule& s);
// Simulates `s` on `costs` (from derive_costs), with hardware.clock's power-limited clock when
// duty_slope > 0: after a first simulation the ranks' mean compute duty cycle d (compute busy /
// the step period: the makespan, or the longest own span with parallel.post_validation) sets a factor 1 + duty_slope * max(0, d - duty_ref) on every compute duration (the
// slices' F, B, W and pairs, the overlap model's attention and MLP sub-ops; links, all-to-alls
// and the step's DP and optimizer costs unchanged), `costs` is scaled by it and the schedule is
// simulated again, the factor taken from each run's duty until it moves by less than 1e-4 (the
// fixed point f = 1 + duty_slope * max(0, d(f) - duty_ref); `costs` is left at it). duty_slope 0,
// or a duty at or below duty_ref: one simulation.
SimResult simulate_config(const ModelConfig& cfg, const Schedule& s, SimCosts& costs, const SimOptions& opt = {});
// Per rank, the spans (ns) during which a send or receive kernel sits beside its compute, read
// from a run with its timeline (simulate_config: the engine's SimResult::comm_resident; validate
// over NCCL: api::nccl_resident).
using ResidentSpans = std::function<std::vector<std::vector<std::pair<Time, Time>>>(const SimResult&)>;
// Each action's own effects on its duration d, iterated from `r` (a run of `costs`) to a fixed
// point in costs.action_time (each step half way from the last durations to the ones their run
// gives, since the time beside the kernels can jump with the alignment and an undamped step
// oscillates; until no action moves by more than 1 ns, at most 40 runs): it runs its own work at
// 1 - share beside `resident`'s spans, so it lasts d + share * (the time beside); and d times the
// clock response's factor at its start, given its rank's idle history (1 where `clk` is off).
SimResult with_action_effects(const Schedule& s, SimCosts& costs, const SimOptions& opt, double share,
                              const ResidentSpans& resident, const ClockResponse& clk, SimResult r);
// parallel.post_validation: the step period is the longest rank's own span (physical_result).
bool post_validation(const ModelConfig& cfg);
// The overlap model simulates each action layer by layer (sim/overlap.h), about ops x layers
// per chunk steps: InputError (exit 6) when that is over limits().max_ops, before any work.
// derive_costs checks its own costs; callers that build overlap costs themselves call it.
void check_overlap_work(const Schedule& s, const SimCosts& costs);
PhysicalResult physical_result(const ModelConfig& cfg, const Schedule& s, const SimResult& r);
// Each rank's predicted peak device memory by part (weights, gradients, optimizer, EMA,
// activations, all-to-all buffers, recompute workspace; host-side states named apart), with
// the action at the peak; dated when `r` recorded a timeline. cost/memory.h lists the tensors.
// physical_result(...).memory is the same figure; this one needs no simulation.
std::vector<MemoryBreakdown> predicted_memory(const ModelConfig& cfg, const Schedule& s, const SimResult* r = nullptr);

}  // namespace ppsim
