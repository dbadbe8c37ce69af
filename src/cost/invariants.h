// The invariants every answer is checked against before a client prints, writes or returns it
// (docs/INVARIANTS.md lists them). An answer that breaks one is an InputError with exit code
// kExitInvariant (8) naming the input that led there: ppsim gives no number it cannot stand behind.
//
// Not obvious: memory over the GPU's capacity is not a violation: the answer is right, the
// layout does not fit. It is a flag every output carries (over_capacity_ranks).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "core/schedule.h"
#include "cost/cost_model.h"
#include "sim/costs.h"
#include "sim/metrics.h"
#include "sim/physical.h"

namespace ppsim {

// What the answer was computed from, for the error line: "configs/x.yaml" or "--times F=1,B=2".
struct AnswerSource {
  std::string input;
  std::string profile;    // a measured cost profile the costs came from ("" if none)
  bool physical = false;  // times in ns (a config), else in the user's units
};

// The step is no shorter than its critical path: every rank's compute fits in the makespan, every
// rank's bubble is >= 0, and (where every op takes its slice's cost: no overlapped pairs, no
// sub-op model, no per-action times) the makespan is at least one micro-batch's forward and
// input-gradient chain through every model slice.
void check_timing(const Schedule& s, const SimCosts& costs, const ScheduleMetrics& m, const AnswerSource& src);

// The chain bound above: the sum over the model slices of F + I (the input-gradient part of B).
Time chain_bound(const SimCosts& costs);

// A step with physical units: achieved TFLOP/s per GPU at or below the GPU's peak (MFU <= 1), a
// step no shorter than the longest rank's own span, each rank's memory parts adding up to its total
// and none negative.
void check_physical(const ModelConfig& cfg, const Schedule& s, const SimResult& r, const PhysicalResult& p,
                    const AnswerSource& src);

// A config's answer: check_global_batch with the config's micro-batch size, dp and stated global
// batch, then check_physical (invariants_config.cc).
void check_config_answer(const ModelConfig& cfg, const Schedule& s, const SimResult& r, const PhysicalResult& p,
                         const AnswerSource& src);

// The one-line error of a broken invariant: "input: the answer breaks an invariant: what; cause".
[[noreturn]] void broken(const AnswerSource& src, const std::string& what, const std::string& cause);

// micro-batches x micro-batch size x dp = global batch, when the input stated a global batch.
void check_global_batch(long long microbatches, long long micro_batch_size, long long dp, long long global_batch,
                        const AnswerSource& src);

// A count and its parts: the parts add up to the total (relative 1e-9), none negative.
void check_parts_add_up(const std::string& what, double total, const std::vector<std::pair<std::string, double>>& parts,
                        const AnswerSource& src);

// The ranks whose peak memory is over `capacity_bytes` (empty when capacity_bytes <= 0).
std::vector<int> over_capacity_ranks(const std::vector<double>& peak_bytes, double capacity_bytes);

// The source of a config's answer: its file (or name) and its cost profile, if any.
AnswerSource source_of(const ModelConfig& cfg);

}  // namespace ppsim
