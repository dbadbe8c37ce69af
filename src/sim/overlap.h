// The overlap model: one action as sub-ops on two streams of its rank.
//   forward  (per layer):  attention -> dispatch (all-to-all) -> MLP/experts -> combine (all-to-all)
//   backward (per layer, reverse): combine-bwd -> MLP input-grad -> dispatch-bwd -> attention
//            input-grad, with MLP and attention weight-grads as W (left out of I, alone in W).
// An F&B pair interleaves its chunks layer by layer in the order of DeepSeek's published
// training profile: combine(B), attention(F), MLP(B), dispatch(F), dispatch(B), MLP(W), MLP(F),
// attention(B), attention(W), combine(F); compute sub-ops go on the compute stream in that
// order and communication sub-ops on the communication stream beside them.
// While a communication sub-op runs, compute slows by its profiled slowdown s (a measured
// profile's comm_slowdown: speed 1/s), or, where none was measured, runs on the SMs left (the
// linear rule: speed 1 - sigma, sigma = comm SMs / SMs), so a hidden all-to-all still costs
// sigma of its duration:
//   all communication hidden and compute always busy  =>  duration = sum(compute) + sigma * sum(comm).
// The pair's duration is an outcome of this, not an input. An action's communication does not
// overlap the next action (a documented limitation).
#pragma once
#include "core/op.h"
#include "sim/costs.h"

namespace ppsim {

struct ActionCost {
  Time duration = 0;
  Time exposed_comm = 0;  // time the compute stream waits on this action's own communication
  Time compute_busy = 0;  // time the compute stream runs a sub-op (stretched beside communication)
};

// `fwd` is the slice of the action's first op; `bwd` the slice of its second op (pairs only).
ActionCost overlap_action_cost(const Action& a, const MoeSliceCosts& first, const MoeSliceCosts& second, double sigma);

}  // namespace ppsim
