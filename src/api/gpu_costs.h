// validate's prediction costs, from figures the GPU measured (the GPU calls are
// src/api/gpu.cc's and src/cuda_validate/'s): the chunk's profiled op times on every slice, the
// config's link model and transfer sizes, the link probe's transfer time as latency, and ranks
// sharing GPUs (virtual ranks, SM partitions).
//
// Not obvious: the probe measures a whole transfer (staging copy, launch, wire), so its latency
// is that time less the bandwidth share the link model already charges for the same bytes.
#pragma once
#include <array>
#include <map>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "cost/cost_model.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace ppsim::api {

struct ProfiledOps {
  double f_ms = 0, b_ms = 0, w_ms = 0, fb_ms = 0;  // one chunk, one micro-batch
  double i_ms = 0;                                 // the input grad alone (0: not timed)
};

// Every slice at the profiled times (W capped at B), in ns; an I action at the input grad timed
// alone where that is longer than B - W (SliceCosts::i_apart); the config's link model and each
// slice's activation and gradient bytes (derive_costs).
SimCosts profiled_costs(const ModelConfig& cfg, const Schedule& s, const ProfiledOps& p);

// Where the replay puts rank r (of shard 0, with `ep` expert-parallel shards of every rank): GPU
// (r * ep) % gpus, and its SM partition there: how many lower ranks share that GPU (ep = 1: GPU
// r % gpus, partition r / gpus).
int replay_gpu(int r, int ep, int gpus);
int replay_partition(int r, int ep, int gpus);
// Ranks on fewer GPUs than ranks: rank r on replay_gpu(r), slowed by `step` (>= 1) while another
// runs beside it; with by_kind (the 3x3 F/I/W table, kinds F = 0, I = 1, W = 2) per pair of kinds.
// The other EP shards of rank r on the same GPU (ep > gpus) run beside it in step: share_copies.
void share_devices(SimCosts& c, int pp, int gpus, double step, const std::vector<double>* by_kind, int ep = 1);
// The op costs were profiled with each rank's share_copies - 1 copies running beside it on its
// GPU (the EP profile's shards, on one GPU): scales every rank's F, I and W times by
// 1 / (1 + (share_copies - 1)(share_slowdown - 1)), the alone time, so that the engine's sharing
// (which counts the copies) does not count them twice. After share_devices and scale_rank_speeds.
void unshare_profiled_copies(SimCosts& c, int pp);
// Every rank's F, I and W times (rank_kind_scale, made for pp ranks if empty) times `factor`.
void scale_every_rank(SimCosts& c, int pp, double factor);
// Expert parallelism: shard 0's pipeline ranks all on one GPU (replay_gpu the same for r < pp: PP 2
// x EP 2 on two GPUs), so that its stage-to-stage messages are copies within that GPU.
bool pipeline_on_one_gpu(int pp, int ep, int gpus);
// Expert parallelism (the replay launches kernel by kernel and each exchange meets its peer shards'
// threads on the host): how much longer the EP group's F, I, W step runs fed back to back by the
// shards' threads (`fed_step_ms`, SharingProfile::ep_alone_step_ms) than its ops' GPU times held
// until enqueued (f + i + w ms, the same group alone): the host's pace and the shards' waits for each
// other's rows. At least 1; 1 where any figure is missing (<= 0).
double ep_pace_factor(double fed_step_ms, double f_ms, double i_ms, double w_ms);
// The overlap model on profiled sub-ops: every slice's MoeSliceCosts from `sub_ops_ms` (ms summed
// over a chunk of `layers` layers, as profile_chunk times them: attn_fwd, attn_bwd, attn_w,
// mlp_fwd, mlp_bwd, mlp_w, dispatch_fwd, combine_fwd, dispatch_bwd, combine_bwd; a missing one is
// 0), per layer, and the communication's SM share. Throws InputError naming an unknown key.
void profiled_overlap_costs(SimCosts& c, const std::map<std::string, double>& sub_ops_ms, int layers,
                            double comm_sm_fraction);
// Ranks on SM partitions: rank r on replay_partition(r); its F, I, W times scaled by how long its
// partition runs each alone (partition_alone_ms[g] = {F, I, W}) against partition 0, where the
// costs were profiled.
void scale_rank_speeds(SimCosts& c, int pp, int gpus, const std::vector<std::array<double, 3>>& partition_alone_ms,
                       int ep = 1);
// Two or more GPUs (issue 47): an op runs slower while another GPU computes beside it than while
// that GPU is idle (gpu::profile_corun measures both, per kind F = 0, I = 1, W = 2, against the op
// alone). The co-run model gives each action alone * sum over kinds k of mix_k ((1 - phi) idle_k +
// phi busy_k), where mix is the action's F, I and W shares of its time alone (B: I and W; an F&B
// pair: its F, I and W) and phi the share of the action's interval during which a rank on another
// GPU (SimCosts::rank_device; empty: every other rank) computes. phi comes from the previous
// simulation's timeline: simulated again with the stretched times until no action's phi moves by
// more than 0.001 (at most 12 rounds). Not for the overlap model's sub-op costs (c.moe).
//
// The duty-aware form (issue 47: the clock a GPU keeps under its power cap depends on how much of
// the time it computes): with idle_by_duty / busy_by_duty given, idle_k and busy_k are taken at
// the rank's own duty d (its GPU's compute time over the makespan of the previous simulation's
// timeline), piecewise linear in d between the levels (measured duty, factors), clamped to the
// first and last level outside them. d is iterated with phi, until neither moves by 0.001.
struct CorunLevel {
  double duty = 1.0;                            // share of the wall time the GPU computed
  std::array<double, 3> factor{1.0, 1.0, 1.0};  // F, I, W against alone at that duty
};
struct CorunFactors {
  std::array<double, 3> idle{1.0, 1.0, 1.0};  // at every duty, where the levels below are empty
  std::array<double, 3> busy{1.0, 1.0, 1.0};
  std::vector<CorunLevel> idle_by_duty, busy_by_duty;  // any order; each side empty or used alone
};
// The factors at duty d: piecewise linear between the levels sorted by duty, clamped at the ends;
// `levels` empty: `fixed`.
std::array<double, 3> factors_at_duty(const std::vector<CorunLevel>& levels, const std::array<double, 3>& fixed,
                                      double d);
struct CorunResult {
  SimResult result;  // with the stretched times (timeline recorded)
  int rounds = 0;    // simulations run after the first
  // Per rank and action (schedule order): phi in the last timeline, and the time factor applied.
  std::vector<std::vector<double>> busy_share, factor;
  std::vector<double> duty;  // per rank: the duty its factors were taken at (the last round's input)
};
CorunResult simulate_corun(const Schedule& s, const SimCosts& c, const CorunFactors& f);
// Per rank: its device's compute time (the union of the Compute intervals of the ranks on it;
// rank_device empty: its own) over the timeline's span (end - start; where those are unset, its
// intervals' span; 0 for an empty timeline).
std::vector<double> device_duty(const Timeline& t, int pp, const std::vector<int>& rank_device);
// Per rank and action of `t` (Compute intervals in schedule order), the share of its interval
// during which a rank on another device computes (rank_device empty: every other rank).
std::vector<std::vector<double>> peer_busy_share(const Timeline& t, int pp, const std::vector<int>& rank_device);

// What the replay holds of each rank's predicted peak memory (cost/cost_model.h's
// predicted_memory): the config loaded with `sets` and without embedding and head (the replay's
// chunks hold transformer layers only); optimizer and EMA left out (the replay runs no optimizer
// step). `total` = weights + gradients + activations + comm buffers + workspace.
struct ReplayMemoryPrediction {
  MemoryBreakdown parts;
  double total = 0;
};
std::vector<ReplayMemoryPrediction> replay_memory(const std::string& config, const std::vector<std::string>& sets,
                                                  const Schedule& s, const SimResult* r);
// What a measured timeline (the link probe's replay) shows of the replay's own mechanics around
// its ops, in us (medians over the samples; 0 where there are none; Time in ns):
//   send_us:    a producer's end to its message's copy start (the copy's wait on the op),
//   receive_us: a message's arrival to its consumer's start, where the consumer waited for it
//               (its rank's previous action had ended before the arrival),
//   gap_us:     a rank's action end to its next action's start, where that one waited for no
//               message (none, or all landed before the end): the GPU's gap between two launches.
struct ReplayDelays {
  double send_us = 0, receive_us = 0, gap_us = 0;
  std::size_t sends = 0, receives = 0, gaps = 0;  // samples
};
ReplayDelays replay_delays(const Schedule& s, const Timeline& t);  // `t`: a replay of `s`
// The link probe: the measured median transfer time of messages of `bytes` with the replay's
// send and receive delays, less the bandwidth share, as the link latency (never negative); the
// replay's gap between actions as SimCosts::action_gap.
void apply_link_probe(SimCosts& c, double median_us, Bytes bytes, const ReplayDelays& d = {});
// The NCCL transport (validate --transport nccl): each GPU runs its ends of every message on one
// NCCL stream, in launch::message_order. A receive's kernel spins on its GPU from when that stream
// frees (the host issues ahead of the GPUs) until its message lands; a send's from the message's
// start until then. Per rank, the merged spans its GPU holds an NCCL kernel, read from a timeline
// of `s` (its transfers; a message within one GPU moves without NCCL). `rank_device`: empty is
// rank r on GPU r.
std::vector<std::vector<std::pair<Time, Time>>> nccl_resident(const Schedule& s, const Timeline& t,
                                                              const std::vector<int>& rank_device);
// The share of a GPU's compute the NCCL kernels take: an action of alone time d that spends o
// beside them lasts d + share * o. Fitted from a measured replay of `s` (the link probe's) by least
// squares over its F and B actions against their alone times (ms): share = sum o (T - d) / sum o^2,
// clamped to [0, 0.9]; samples: the actions with o > 0.
struct NcclShare {
  double share = 0;
  std::size_t samples = 0;
};
NcclShare fit_nccl_share(const Schedule& s, const Timeline& t, const std::vector<int>& rank_device, double f_ms,
                         double b_ms);
// The prediction with that share: each action lasts its alone time plus share times its time
// beside the NCCL kernels, iterated from the plain run to a fixed point (cost's
// with_action_effects, as the torch runtime's p2p share).
SimResult simulate_nccl(const Schedule& s, const SimCosts& c, double share);
// Ranks sharing a GPU, fitted on a replay (validate --sharing replay): how many times longer an op
// of each kind (F = 0, I = 1, W = 2) runs while another op of the same GPU runs beside it. From a
// measured replay `t` of `s` whose ranks share GPUs as alone.rank_device says: an action of kind k,
// alone time a (its slice's cost in `alone`, times its rank's rank_kind_scale) and o of its time
// beside another rank's compute on its GPU lasts a + o (1 - 1 / factor_k) (the engine's processor
// sharing); least squares over the F, I and W actions with o > 0: x_k = sum o (T - a) / sum o^2,
// factor_k = 1 / (1 - x_k), clamped to [1, 4]; 1 (and samples 0) for a kind with no such action.
struct KindShareFit {
  std::array<double, 3> factor{1.0, 1.0, 1.0};
  std::array<std::size_t, 3> samples{};
  // The engine's share_by_kind table (row: the op, column: the op beside it) with each row at its
  // kind's factor.
  std::vector<double> by_kind() const;
};
KindShareFit fit_share_by_kind(const Schedule& s, const Timeline& t, const SimCosts& alone);
// The middle of several runs' figures (the lower middle of an even count): the probe's runs (each a
// replay's median transfer), so that one slow replay does not stand for every transfer; validate's
// replays of a schedule (--replays) and their sharing fits.
double middle_run(std::vector<double> runs);

}  // namespace ppsim::api
