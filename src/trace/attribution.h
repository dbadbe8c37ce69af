// Attribution of each GPU event of a trace to a (layer, sub-op, pass), the first half of
// import_trace (import.h; docs/TRACES.md "Attribution"), as a list of named phases:
//   link_launches        each GPU event to the runtime call that launched it (correlation id,
//                        else its ac2g flow);
//   clip_forward_ranges  a forward range opened inside the backward (a recompute) and left open
//                        when the recompute stopped early ends with the autograd op it ran in;
//   launch_stacks        the CPU ranges open at each launch, read by the rules innermost first;
//                        work under autograd's engine kept apart, and recompute found there;
//   own_between_sub_ops  forward work between a layer's sub-ops (norms, residual adds) and up to
//                        the next layer's first sub-op belongs to that layer;
//   link_backward_ops, forward_op_stacks, caller_stacks, resolve_autograd
//                        autograd's work takes layer and sub-op from its own thread's ranges,
//                        the thread that called backward, or the forward op it differentiates;
//   number_layers_by_order, name_layer_rule, finish_passes.
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "trace/import.h"

namespace ppsim::trace {

enum class Path { stack, caller, forward };

// What the ranges open at a launch gave: each part (-1: none) and the range that gave it.
struct Parts {
  int subop = -1, pass = -1, layer = -1;
  int sub_range = -1, pass_range = -1, layer_range = -1;
  int top = -1;          // innermost range on the stack, for naming unmapped work
  bool in_step = false;  // launched under a range matching ImportOptions::step_range
};

struct Attribution {  // one per GPU event
  Parts p;
  bool linked = false;
  bool autograd = false;   // launched under an op of autograd's engine
  bool recompute = false;  // a forward re-run inside the backward (activation checkpointing)
  Path path = Path::stack;
  int instance = -1;  // the execution: the range that gave the layer (else the sub-op, else the pass)
  int bwd_op = -1;    // the autograd op it was launched under
  Time launch = -1;   // when the launching call ran (-1: unlinked)
};

struct Attributed {
  std::vector<Attribution> events;  // one per KinetoTrace::gpu
  std::string layer_rule;           // which rule found the layers
};

// The step range's regex (an InputError at --step-range if bad); none for an empty option.
std::optional<std::regex> step_regex(const std::string& step_range);

Attributed attribute(const KinetoTrace& t, const ImportOptions& o, const Rules& rules,
                     const std::optional<std::regex>& step_re);

}  // namespace ppsim::trace
