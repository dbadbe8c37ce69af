// Measured op costs: the YAML file `ppsim profile` and `ppsim import-trace` write and a config
// names with `profile:`.
//
// Schema (times in ms for one micro-batch on one GPU, docs/CONFIG.md):
//   version: 2                      # required: 1 or 2 (version 1 has none of the v2 keys)
//   device: "NVIDIA H100 80GB HBM3" # optional, informational
//   source: "ppsim profile ..."     # optional, informational
//   per_layer: true                 # op_ms is per transformer layer (default) or one rank's share
//   op_ms: {F: .., B: .., W: .., FB: ..}   # B = full backward (input + weight grad); required in
//                                   # v1, in v2 only without sub_ops_ms (else their sums)
//   dense_op_ms: {F, B, W}          # optional: the first dense layers of an MoE model
//   embedding_ms: {F, B, W}         # optional, per_layer only: added to the first slice
//   head_ms: {F, B, W}              # optional, per_layer only: head + loss, added to the last slice
//   link: {gbps: .., latency_us: ..}  # optional: measured stage-to-stage link, one direction
//   # version 2 only, one layer (per_layer: true):
//   sub_ops_ms:                     # the overlap model's sub-op costs (sim/overlap.h)
//     attention: {F: .., I: .., W: ..}  # I = input grad (the backward without W)
//     mlp: {F: .., I: .., W: ..}        # MLP / router + experts
//     dispatch: {F: .., B: ..}          # all-to-all, forward and backward direction
//     combine: {F: .., B: ..}
//   comm_slowdown: {attention: 1.05, mlp: 1.08}  # compute beside communication / alone
//   comm_sm_fraction: 0.15          # informational: SM share the communication kernels held
//   applies_to: moe_layers          # optional (default all): the sub-op times are the config's MoE
//                                   # layers'; dense layers, embedding, head, MTP, recompute and
//                                   # links stay derived (needs sub_ops_ms; refuses dense_op_ms,
//                                   # embedding_ms, head_ms, link; the config must be MoE)
//   recompute: included             # optional (default derived): the backward already holds the
//                                   # run's recompute; ppsim adds none (import-trace writes it for
//                                   # --moe-layers-only, and where the trace's backward re-ran a
//                                   # forward); a whole-model profile with it needs a config that
//                                   # recomputes (full or recompute_ops; cost/config.cc refuses none)
// Not obvious: with sub_ops_ms the overlap model runs on a profile (any model, not only MoE
// configs), and comm_slowdown replaces the linear comm_sms / sms rule (docs/OVERLAP.md).
#pragma once
#include <string>

#include "core/error.h"
#include "cost/config.h"

namespace ppsim {

// Reads and validates a profile; errors inside it point into the profile file, and a file that
// cannot be read points at `referenced_from` (the config's `profile:` key).
CostProfile load_profile(const std::string& path, const SourceLoc& referenced_from);
CostProfile parse_profile(const std::string& text, const std::string& name);

// The profile as YAML (version 2 when it has sub-op times, else 1), after `header` (comment
// lines, each starting with '#'). parse_profile(render_profile(p)) gives p back to 1 us.
std::string render_profile(const CostProfile& p, const std::string& header = {});

// One layer's totals from its sub-op times: F, full backward B, W.
OpTimes sub_op_totals(const MoeSliceCosts& s);

class MapReader;
// F, B, W (and with `with_fb` FB) of a YAML map, in ms, as ticks; W <= B is checked. The
// profile's op_ms and a config's `times` are read so.
OpTimes read_op_times(const MapReader& r, bool with_fb);

}  // namespace ppsim
