// The discrete-event engine. Each rank runs its actions strictly in schedule order on its
// compute stream, each as soon as its inputs are there; cross-rank inputs travel over links
// (sim/costs.h LinkModel). An overlapped pair starts when both of its ops' inputs are there and
// lasts pair_duration(). Activation accounting: +1 when an F starts, -1 when the W or full B of
// that (stage, micro-batch) ends, in units of one chunk of one micro-batch.
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "core/timeline.h"
#include "sim/costs.h"

namespace ppsim {

struct RankStats {
  Time busy = 0;             // sum of compute durations
  Time first_start = kNever;
  Time last_end = 0;
  int peak_activations = 0;
  Time exposed_comm = 0;     // compute stream waiting on its own communication (overlap model)
  Time span() const { return first_start == kNever ? 0 : last_end - first_start; }  // own first start to last end
  Time own_span_idle() const { return first_start == kNever ? 0 : span() - busy - exposed_comm; }
};

struct SimOptions {
  bool record_timeline = false;
};

struct SimResult {
  Time start = 0;  // first op start, all ranks
  Time end = 0;    // last op end, all ranks
  Time makespan() const { return end - start; }
  // The longest rank's own span (the step period under Zero Bubble's optimizer post-validation).
  Time longest_span() const {
    Time m = 0;
    for (const RankStats& r : ranks) m = std::max(m, r.span());
    return m;
  }
  std::vector<RankStats> ranks;
  std::uint64_t events = 0;
  std::uint64_t ops = 0;
  std::uint64_t pairs = 0;
  Time pair_time_sum = 0;    // sum of overlapped-pair durations
  // Per pair kind "F<slice>&<B|I><slice>" (the model slices of its two chunks): count and sum.
  std::map<std::string, std::pair<std::uint64_t, Time>> pair_kinds;
  Timeline timeline;         // filled when SimOptions::record_timeline
  // Explicit communication, when SimOptions::record_timeline: per rank, each send or receive it
  // posted, from its post to its transfer's arrival (the stretch its kernel sits on the GPU,
  // waiting for the peer or moving data), in post order.
  std::vector<std::vector<std::pair<Time, Time>>> comm_resident;
};

// Runs the schedule. Throws InputError when the schedule cannot finish (a deadlock).
SimResult simulate(const Schedule& s, const SimCosts& costs, const SimOptions& opt = {});

}  // namespace ppsim
