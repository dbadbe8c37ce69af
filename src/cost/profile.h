// Measured op costs: the YAML file `ppsim profile` writes and a config names with `profile:`.
//
// Schema (version 1; times in ms for one micro-batch on one GPU, docs/CONFIG.md):
//   version: 1                      # required
//   device: "NVIDIA H100 80GB HBM3" # optional, informational
//   source: "ppsim profile ..."     # optional, informational
//   per_layer: true                 # op_ms is per transformer layer (default) or one rank's share
//   op_ms: {F: .., B: .., W: .., FB: ..}   # required; B = full backward (input + weight grad)
//   dense_op_ms: {F, B, W}          # optional: the first dense layers of an MoE model
//   embedding_ms: {F, B, W}         # optional, per_layer only: added to the first slice
//   head_ms: {F, B, W}              # optional, per_layer only: head + loss, added to the last slice
//   link: {gbps: .., latency_us: ..}  # optional: measured stage-to-stage link, one direction
#pragma once
#include <string>

#include "core/error.h"
#include "cost/config.h"

namespace ppsim {

// Reads and validates a profile; errors inside it point into the profile file, and a file that
// cannot be read points at `referenced_from` (the config's `profile:` key).
CostProfile load_profile(const std::string& path, const SourceLoc& referenced_from);
CostProfile parse_profile(const std::string& text, const std::string& name);

}  // namespace ppsim
