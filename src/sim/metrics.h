// Metrics of one simulated schedule: makespan, per-rank compute / exposed communication /
// bubble (bubble = global makespan - compute - exposed communication of the rank, as
// docs/SCHEDULES.md defines it when there is no communication), the published closed form beside the
// simulated truth, peak activations and parameter copies.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "schedules/registry.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace ppsim {

struct ScheduleMetrics {
  std::string schedule;
  int pp = 0;
  int microbatches = 0;
  int vpp = 1;                 // chunks per rank per pipe
  Time makespan = 0;
  std::vector<Time> compute;       // per rank
  std::vector<Time> exposed_comm;  // per rank
  std::vector<Time> bubble;        // per rank
  std::vector<Time> own_span_idle; // per rank: idle between its own first start and last end
  Time bubble_max = 0;
  double bubble_mean = 0;
  double bubble_ratio = 0;         // sum of bubbles / (P * makespan)
  PublishedBubble published;       // available=false for imported schedules
  bool published_holds = false;    // its conditions hold for these costs
  bool published_matches = false;  // the simulated figure equals it
  std::string published_note;      // why it does not hold, when it does not
  std::vector<int> peak_activations;
  std::vector<int> published_activations;  // -1 where no formula
  int parameter_copies = 1;
  SliceCosts chunk_times;          // slice 0's per-chunk costs
  std::optional<Time> fb_pair_time;  // mean emergent pair duration; none without pairs
  std::map<std::string, Time> fb_pair_times;  // mean per pair kind "F<slice>&B<slice>"
  std::uint64_t ops = 0;
};

// `family` may be null (an imported schedule): no published figures then.
ScheduleMetrics compute_metrics(const Schedule& s, const SimResult& r, const SimCosts& costs,
                                const Family* family, const ScheduleParams& params);

}  // namespace ppsim
