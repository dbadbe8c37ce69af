// A pipeline run rebuilt from its ranks' traces: each rank's executed order of actions and the
// GPU time of each, the order written as a schedule (PyTorch's CSV notation), and that order
// simulated with its own measured costs beside the measured figures (`--schedule executed`).
//
// Actions are read from CPU ranges on each rank:
//   `PP:{action}`            torch.distributed.pipelining's runtime (`PP:0F3`, `PP:1I2`, `PP:2W0`,
//                            `PP:(0F7;7B3)OVERLAP_F_B`); its communication actions (`PP:1SEND_F3`,
//                            `PP:0RECV_B2`, UNSHARD, RESHARD, REDUCE_GRAD) are not in the order,
//                            their kernels are communication
//   `Forward {i}` / `Backward {i}`     its GPipe schedule (the rank's one stage, micro-batch i)
//   `forward-compute` / `backward-compute`   Megatron (the rank's stage; the k-th of each on a rank
//                            is micro-batch k)
// A GPU event belongs to the action whose range was open in its process when it was launched
// (on any thread: autograd's engine launches a backward's kernels from its own thread while the
// action's range is open on the caller's). An action's time is the union of its compute kernels.
//
// Measured, per rank, on the aligned clock (ranks.h), over the step from the first action's first
// kernel to the last one's last on any rank (the makespan): compute = the union of the actions'
// compute kernels; exposed communication = the transfer part of its communication kernels (the
// last `transfer` ns of each) while it computed nothing; bubble = makespan - compute - exposed.
// Simulated: the executed order as a schedule, each slice's F, B (or I and W) and F&B pair the
// mean of its measured actions, links with a latency of the mean transfer of the point-to-point
// kernels; sim/metrics defines the same three figures.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/op.h"
#include "core/schedule.h"
#include "sim/costs.h"
#include "trace/ranks.h"

namespace ppsim::trace {

// What a range name says: a compute action, a pipeline communication action, or neither.
struct PipelineRange {
  enum class Kind { compute, comm, megatron_f, megatron_b } kind = Kind::compute;
  Action action;  // compute (and Megatron, with stage/micro-batch filled in later)
};
std::optional<PipelineRange> parse_pipeline_range(const std::string& name);

struct ExecutedAction {
  Action action;
  Time cpu_start = 0, cpu_end = 0;        // the range, on its rank's own clock
  Time gpu_start = kNever, gpu_end = 0;   // its compute kernels, aligned clock (kNever: none)
  Time compute = 0;                       // union of its compute kernels
  Time comm = 0;                          // its communication kernels' time
  int kernels = 0;
};

struct RankRun {
  int rank = 0;
  std::string source;  // "PP:", "Forward i" (ScheduleGPipe's, or Schedule1F1B marked), "Megatron"
  std::vector<ExecutedAction> actions;
  Time first = kNever, last = 0;  // its compute kernels, aligned
  Time compute = 0, exposed_comm = 0, bubble = 0, comm_wait = 0;
};

struct PipelineRun {
  std::vector<RankRun> ranks;  // one per trace, ascending rank
  Time start = 0, end = 0;     // the measured step
  Time makespan() const { return end - start; }
  std::string csv;             // the executed order, one line per rank
  Schedule schedule;           // the same, validated
  SimCosts costs;              // per slice, measured
};

// Throws InputError (exit 3) when a rank has no pipeline ranges, or the order is not a valid
// schedule (the validator's message, e.g. a partial step).
PipelineRun rebuild_pipeline(const MultiRank& m);

struct RankComparison {
  int rank = 0;
  Time measured_compute = 0, measured_exposed = 0, measured_bubble = 0;
  Time simulated_compute = 0, simulated_exposed = 0, simulated_bubble = 0;
};
struct ExecutedComparison {
  Time measured_makespan = 0, simulated_makespan = 0;
  // The same order replayed with each action's own measured time in place of its slice's mean:
  // what is left is the runtime's and the links' (and the measured step's own spread).
  Time replayed_makespan = 0;
  std::vector<RankComparison> ranks;
  Time link_latency = 0;
  bool torch_runtime = false;
  double error() const { return relative(simulated_makespan); }
  double replay_error() const { return relative(replayed_makespan); }
  double relative(Time t) const {
    return measured_makespan > 0 ? (static_cast<double>(t) - static_cast<double>(measured_makespan)) / static_cast<double>(measured_makespan)
                                 : 0;
  }
};
// torch_runtime: the order run with PyTorch's sends and receives (schedules/torch_p2p.h) in place
// of links that start each transfer when its producer ends: its runtime's where every rank's
// actions came in PP: ranges, else its single-stage schedules' where the order is theirs.
ExecutedComparison compare_executed(const PipelineRun& p, bool torch_runtime = false);

std::string render_pipeline_run(const PipelineRun& p);
std::string render_executed_comparison(const ExecutedComparison& c);
nlohmann::json pipeline_run_json(const PipelineRun& p);
nlohmann::json executed_comparison_json(const ExecutedComparison& c);

}  // namespace ppsim::trace
