// The registry of schedule families: name, aliases, description, constraints, parameter copies,
// published bubble and activation formulas, and the generator. `ppsim schedules` prints it; the
// invariant suite (tests/schedules/invariants_test.cc) runs over every entry.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/time.h"

namespace ppsim {

struct ScheduleParams {
  int pp = 0;
  int microbatches = 0;
  int vpp = 0;         // chunks per rank for interleaved 1F1B; 0 = the family's default
  int group_size = 0;  // interleaved 1F1B micro-batch group G; 0 = P
};

// Per-chunk durations the published formulas are stated in: F, full backward B, weight-grad W,
// input-grad b = B - W, and the overlapped pair F&B.
struct UniformTimes {
  Time f = 0, b = 0, w = 0, fb = 0;
  Time input_grad() const { return b - w; }
};

struct PublishedBubble {
  bool available = false;  // the family has a published closed form
  Time value = 0;          // per rank (DualPipe: the worst rank)
  bool own_span = false;   // the figure is idle time within the rank's own first-start..last-end
  bool holds = false;      // the stated conditions hold for these times
  std::string formula;     // e.g. "(P-1)(F+B)"
  std::string condition;   // when it is exact
};

struct Family {
  std::string name;
  std::vector<std::string> aliases;
  std::string description;
  std::string constraints;         // human-readable
  std::string activation_formula;  // per rank, in chunk-microbatches
  int parameter_copies = 1;
  int default_vpp = 1;             // chunks per rank per pipe
  std::function<std::string(const ScheduleParams&)> check;  // "" when the request is legal
  std::function<Schedule(const ScheduleParams&)> generate;
  std::function<PublishedBubble(const ScheduleParams&, const UniformTimes&)> published;
  std::function<int(const ScheduleParams&, int rank)> published_activations;  // -1: none
};

const std::vector<Family>& families();
// Looks a family up by name or alias; throws InputError with a suggestion when unknown.
const Family& find_family(const std::string& name);
// The families whose chunks per rank are the request's vpp (the interleaved ones); the others
// have their default_vpp.
bool family_takes_vpp(const std::string& name);
// The families `all` expands to (compare, plan, search beside the best): every one but Megatron's
// EP all-to-all overlap, which pays only with MoE all-to-alls and is run when named.
bool family_in_all(const Family& f);
// Fills defaults (vpp, group size) for the family.
ScheduleParams resolve_params(const Family& fam, ScheduleParams p);
// Checks limits and constraints (InputError naming the rule and the values), generates and
// validates the schedule.
Schedule make_schedule(const std::string& name, const ScheduleParams& params);

// Chunks per rank of an interleaved schedule: 1..kMaxVpp (`parallel.vpp`, `--vpp`, a published row's
// `vpp`). In abstract units times split exactly for v <= 16 (core/time.h); above, to the tick.
inline constexpr int kMaxVpp = 64;

// Resource limits (docs/ROBUSTNESS.md). Overridable from the CLI with --max-ops.
struct Limits {
  long long max_pp = 4096;
  long long max_microbatches = 1 << 20;
  long long max_ops = 200'000'000;
};
Limits& limits();

}  // namespace ppsim
