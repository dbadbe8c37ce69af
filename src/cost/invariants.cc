// The answer's invariants (cost/invariants.h; docs/INVARIANTS.md).
#include "cost/invariants.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace ppsim {

void broken(const AnswerSource& src, const std::string& what, const std::string& cause) {
  std::string msg = fmt::format("the answer breaks an invariant: {}", what);
  if (!cause.empty()) msg += "; " + cause;
  throw InputError(SourceLoc{src.input, 0, 0}, msg, {}, kExitInvariant);
}

namespace {

std::string time_text(Time t, bool physical) {
  return physical ? fmt::format("{:.3f} ms", static_cast<double>(t) / 1e6)
                  : fmt::format("{:g} units", static_cast<double>(t) / kTicksPerUnit);
}

// Every op of the schedule costs its slice's figure: no pair runs shorter than its two ops, no
// sub-op model decides a duration, no traced action keeps its own time.
bool ops_take_slice_costs(const Schedule& s, const SimCosts& costs) {
  if (!costs.moe.empty() || !costs.action_time.empty()) return false;
  for (const auto& rank : s.ranks)
    for (const Action& a : rank)
      if (a.overlapped) return false;
  return true;
}

}  // namespace

Time chain_bound(const SimCosts& costs) {
  Time t = 0;
  for (const SliceCosts& c : costs.slice) t += c.f + c.input_grad();
  return t;
}

void check_timing(const Schedule& s, const SimCosts& costs, const ScheduleMetrics& m, const AnswerSource& src) {
  const bool physical = src.physical;
  for (std::size_t r = 0; r < m.compute.size(); ++r) {
    if (m.compute[r] > m.makespan)
      broken(src,
             fmt::format("{}: rank {} computes for {} in a step of {}", m.schedule, r,
                         time_text(m.compute[r], physical), time_text(m.makespan, physical)),
             "the simulator lost an op's time");
    if (r < m.bubble.size() && m.bubble[r] < 0)
      broken(src,
             fmt::format("{}: rank {} has a negative bubble ({})", m.schedule, r, time_text(m.bubble[r], physical)),
             "its compute and exposed communication exceed the step");
  }
  if (!ops_take_slice_costs(s, costs)) return;
  const Time bound = chain_bound(costs);
  if (m.makespan < bound)
    broken(src,
           fmt::format("{}: the step ({}) is shorter than one micro-batch's forward and input-gradient chain through "
                       "every slice ({})",
                       m.schedule, time_text(m.makespan, physical), time_text(bound, physical)),
           "an op ran shorter than its cost");
}

void check_global_batch(long long microbatches, long long micro_batch_size, long long dp, long long global_batch,
                        const AnswerSource& src) {
  if (global_batch <= 0) return;
  if (microbatches * micro_batch_size * dp != global_batch)
    broken(src,
           fmt::format("{} micro-batches x micro-batch size {} x dp {} = {} sequences, not the global batch of {}",
                       microbatches, micro_batch_size, dp, microbatches * micro_batch_size * dp, global_batch),
           "");
}

void check_parts_add_up(const std::string& what, double total, const std::vector<std::pair<std::string, double>>& parts,
                        const AnswerSource& src) {
  double sum = 0;
  for (const auto& [name, v] : parts) {
    if (v < 0 || std::isnan(v)) broken(src, fmt::format("{}: its {} is {:g}", what, name, v), "");
    sum += v;
  }
  if (std::isnan(total) || std::abs(sum - total) > 1e-9 * std::max(1.0, std::abs(total)))
    broken(src, fmt::format("{}: its parts add up to {:g}, not its total {:g}", what, sum, total), "");
}

std::vector<int> over_capacity_ranks(const std::vector<double>& peak_bytes, double capacity_bytes) {
  std::vector<int> out;
  if (capacity_bytes <= 0) return out;
  for (std::size_t r = 0; r < peak_bytes.size(); ++r)
    if (peak_bytes[r] > capacity_bytes) out.push_back(static_cast<int>(r));
  return out;
}

}  // namespace ppsim
