// Times a schedule's per-rank orders without the engine, for the search's local search
// (docs/SEARCH.md): every action starts when its rank is free and its inputs are there, a pair
// when both ops' inputs are, with the engine's op and pair durations and link latency. Where the
// costs have nothing else (no overlap model, shared devices, per-rank speeds, link occupancy or
// blocking sends: `exact_for`) that is what the engine does, so the makespan and peak are the
// engine's (checked against it in tests/search/search_test.cc); the search still validates and
// simulates what it keeps.
#pragma once
#include <vector>

#include "core/schedule.h"
#include "sim/costs.h"

namespace ppsim {

class OrderTimer {
 public:
  // True when run() gives the engine's makespan and peak for schedules with these costs.
  static bool exact_for(const SimCosts& c);
  // `layout`: the stage layout (stage_rank, slices) of every schedule run() will be given.
  OrderTimer(const Schedule& layout, const SimCosts& c);

  struct Result {
    bool ok = false;  // false: a rank waits for an input that never comes (a deadlock)
    Time makespan = 0;
    double peak = 0;   // activations held, chunks, max over ranks, as held_peak_chunks counts them
                       // (search.h; the engine's peak_activations where every w_hold is 1)
    Time end_sum = 0;  // sum over ranks of their last action's end
    double end_sq = 0;
    Time idle_sum = 0;
    Time max_span = 0;  // max over ranks of (own last end - own first start)
    Time span_sum = 0;  // sum over ranks of the same
  };
  // Assumes every (stage, micro-batch) has one F and one backward (B, or I then W) on its stage's
  // rank, which the local search's moves keep.
  Result run(const Schedule& s);

 private:
  Time action_duration(const Action& a) const;
  int P_, S_, mbp_;
  std::vector<int> stage_rank_, slice_;
  std::vector<std::uint8_t> first_, last_;
  std::vector<Time> hop_fwd_, hop_bwd_;  // per stage: latency to the next / previous stage's rank (0 on one rank)
  std::vector<SliceCosts> slices_;
  std::vector<Time> op_dur_;  // per (slice, kind)
  // Per (micro-batch, stage), as in the engine.
  std::vector<Time> f_done_, f_avail_, bwd_done_, bwd_avail_;
  std::vector<std::size_t> next_;
};

}  // namespace ppsim
