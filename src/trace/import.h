// From a Kineto trace to a cost profile: attribution of GPU work to annotated sub-ops, stream
// roles, communication split into transfer and waiting, and SM sharing measured from the trace.
//
// Attribution (docs/TRACES.md): a GPU event is tied to the runtime call that launched it by its
// correlation id (args.correlation, else the ac2g flow that ends at it), and so to the stack of
// CPU ranges open on the launching thread at that moment; the rules (rules.h) read sub-op, pass
// and layer from that stack, innermost first. Time overlap alone never attributes anything:
// kernels without a link to a launch are reported as unlinked.
// Not obvious: the profile's compute sub-op times are the kernels' time *alone*: a compute
// kernel that ran o of its d ns beside communication counts d - o (1 - 1/s), s the slowdown
// measured for its sub-op (import.cc has the fit), since the overlap model stretches it again.
#pragma once
#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost/config.h"
#include "trace/kineto_reader.h"
#include "trace/rules.h"

namespace ppsim::trace {

// Time per (layer, sub-op, pass): GPU busy time (ns) and how many times the range ran.
struct Cell {
  Time busy = 0;       // kernel time as measured
  double alone = 0;    // kernel time with the communication slowdown taken out (compute only)
  int executions = 0;  // distinct range instances that gave the sub-op (or pass)
  Time recompute = 0;  // of busy: a forward re-run inside the backward (pass I only)
  double recompute_alone = 0;
};

struct StreamStats {
  int device = 0;
  std::int64_t stream = 0;
  bool comm = false;  // most of its time is communication kernels
  int kernels = 0;
  Time busy = 0;       // sum of durations
  Time comm_busy = 0;  // of it, communication kernels
};

struct DeviceFigures {
  int device = 0;
  Time first = 0, last = 0;  // first GPU event start, last end
  Time compute_busy = 0;     // union of the compute streams' events
  Time comm_busy = 0;        // union of the communication streams' events
  // The GPU idle with nothing queued: gaps in its work before the next kernel was even launched
  // (the host, or the profiler's own work per op, set the pace there).
  Time host_idle = 0;
  Time span() const { return last - first; }
};

struct ImportResult {
  std::string path;
  std::uint64_t events = 0, bytes = 0;
  int gpu_events = 0;
  // cells[layer][subop][pass]; layer -1 (key) = work outside any numbered layer.
  std::map<int, std::array<std::array<Cell, kPasses>, kSubOps>> cells;
  Time unmapped = 0;  // linked to a launch, but no rule gave a pass (or a sub-op)
  int unmapped_kernels = 0;
  std::vector<std::pair<std::string, Time>> unmapped_top;  // largest unmapped by range/kernel name
  Time unlinked = 0;                                       // no correlation id / flow to a launch
  int unlinked_kernels = 0;
  Time outside_layers = 0;  // mapped, but in no numbered layer (not in the per-layer profile)
  std::vector<StreamStats> streams;
  std::vector<DeviceFigures> devices;  // of the step's GPU work (ImportOptions::step_range)
  std::string step_range;              // "" = the whole trace
  int step_events = 0;                 // GPU events in the step
  // Communication: transfer vs waiting (only where several devices' collectives can be matched).
  Time comm_total = 0, comm_transfer = 0, comm_wait = 0;
  bool comm_split = false;
  std::string comm_split_note;
  // SM sharing: compute time beside communication / alone, per compute sub-op (0: not measured)
  // and the number of kernel pairs it rests on.
  double attn_slowdown = 0, mlp_slowdown = 0;
  int attn_slowdown_samples = 0, mlp_slowdown_samples = 0;
  std::string layer_rule;  // which rule found the layers (numbers in names, module scopes, the order rule, none)
  // Every GPU event is in exactly one bucket: a layer cell, outside layers (a cell of layer -1),
  // unmapped or unlinked; they add up to gpu_total.
  Time gpu_total = 0;
  // Compute-kernel time that ran beside other compute kernels of its device on other streams,
  // counted once in the cells' times (their durations add up to this much more).
  double compute_concurrent = 0;
  // Mapped GPU time by the path that attributed it: the launch's own stack, the user ranges open on
  // the thread that called backward while autograd ran, or autograd's link to the forward op.
  Time by_stack = 0, by_caller = 0, by_forward = 0;
  Time recompute = 0;            // kernel time of forwards re-run inside the backward, in layers
  Time recompute_per_layer = 0;  // of the profile's B: the recompute, one layer, one execution
  Time backward = 0;             // kernel time in passes I and W (0: a forward-only trace)
  bool python_stacks = false;    // the trace holds Python stacks (with_stack=True)
  int layers = 0;             // distinct numbered layers
  int executions = 0;         // micro-batches seen (most executions of one layer's sub-op)
  CostProfile profile;        // per layer, version 2
  Time step() const;          // longest device span
  Time compute_busy() const;  // of the device with the longest span
  const DeviceFigures* longest() const;  // the device with the longest span (none without GPU work)
};

// What the host (or the profiler) cost the step: one line where the GPU sat idle with nothing
// queued for more than 10% of the longest device's span (else ""): how much, and the step without
// those gaps.
std::string host_bound_line(const ImportResult& r);

// Layers by the order of sub-op ranges (import.cc): where no name numbers them, always, never.
enum class LayerOrder { automatic, force, off };

struct ImportOptions {
  std::vector<std::string> map;  // user rules
  bool no_default_rules = false;
  // The step whose span and busy time are reported (and predicted): the GPU work launched under
  // a CPU range whose name matches this regex; empty: all GPU work in the trace.
  std::string step_range;
  LayerOrder layer_order = LayerOrder::automatic;
  std::string comm_kernel = {};  // --comm-kernel: kernels matching this regex are communication too
};

// Checks that a trace is a training step (api/import_trace.cc): a trace with no backward whose
// numbered layers (or the profile or prediction asked of it: `profile_asked`) would make a training
// profile is refused (an InputError naming the file, kExitInput) unless `inference` (then its
// profile has F times only, and says so).
void check_training(const ImportResult& r, bool inference, bool profile_asked);

ImportResult import_trace(const KinetoTrace& t, const ImportOptions& o, const std::string& path);
ImportResult import_trace_file(const std::string& path, const ImportOptions& o);

// The report: what was found per layer and pass, streams, communication, SM sharing.
std::string render_import_report(const ImportResult& r);
// The same as JSON (docs/TRACES.md lists the keys); times in ms.
nlohmann::json import_json(const ImportResult& r);
// The profile YAML with a header naming the trace.
// moe_layers_only: written with `applies_to: moe_layers` (cost/profile.h). A backward that held
// a recompute is written with `recompute: included` and its time in a comment.
std::string render_import_profile(const ImportResult& r, bool moe_layers_only = false, bool inference = false);

}  // namespace ppsim::trace
