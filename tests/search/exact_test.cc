// The exact method (src/search/exact.h): a proven optimum on a case worked by hand, and the
// search's heuristic meets it there. Skips with the reason when ppsim was built without CBC.
#include "search/exact.h"

#include <catch.h>

#include <iostream>

#include "core/error.h"
#include "schedules/registry.h"
#include "schedules/validator.h"
#include "search/search.h"
#include "search_test_util.h"
#include "sim/engine.h"

using namespace ppsim;

using ppsim::test::SmallCase;
using ppsim::test::unit_costs;

TEST_CASE("exact: linear P=2, M=2 reaches rank 1's fill plus work (hand-worked)", "[search][exact]") {
  if (!exact_available()) {
    std::cout << "SKIP exact tests: " << exact_schedule(Schedule{}, SimCosts{}, 0, 1).status << "\n";
    return;
  }
  // F = I = W = 1. Rank 1 can start at 1 (after rank 0's F0) and has 6 unit ops: >= 7.
  // Reached: rank 1 F0 I0 F1 I1 W0 W1 over [1, 7]; rank 0 F0 F1 [0, 2], I0 [3, 4], W0, I1 [5, 6], W1.
  const Schedule layout = placement_layout(Placement::linear, 2, 2);
  const SimCosts c = unit_costs(layout, 1, 2, 1);
  const ExactResult r = exact_schedule(layout, c, 0, 30);
  INFO(r.status);
  REQUIRE(r.optimal);
  REQUIRE(r.objective == 7 * kTicksPerUnit);
  REQUIRE_NOTHROW(validate_schedule(r.schedule));
  REQUIRE(simulate(r.schedule, c).makespan() == 7 * kTicksPerUnit);
}

TEST_CASE("exact: a cap of one activation forces 1F1B-like alternation (hand-worked)", "[search][exact]") {
  if (!exact_available()) return;  // reason printed by the case above
  // Linear P=2, M=2, F=I=W=1, cap 1 chunk: rank 0 may not start F1 before W0 ends. Rank 0:
  // F0 [0,1]; rank 1 F0 [1,2], I0 [2,3]; rank 0 I0 [3,4], W0 [4,5], F1 [5,6]; rank 1 W0 [3,4]
  // ... F1 [6,7], I1 [7,8]; rank 0 I1 [8,9], W1 [9,10]: 10. With rank 1's W0 before its F1 the
  // chain F1 -> F1 -> I1 -> I1 -> W1 after W0 (t=5) is 5 long: the optimum is 10.
  const Schedule layout = placement_layout(Placement::linear, 2, 2);
  const SimCosts c = unit_costs(layout, 1, 2, 1);
  const ExactResult r = exact_schedule(layout, c, 1, 30);
  INFO(r.status);
  REQUIRE(r.optimal);
  REQUIRE(r.objective == 10 * kTicksPerUnit);
  const SimResult sim = simulate(r.schedule, c);
  REQUIRE(sim.makespan() == 10 * kTicksPerUnit);
  for (const RankStats& st : sim.ranks) REQUIRE(st.peak_activations <= 1);
}

TEST_CASE("exact: with an upper, proves that nothing reaches below the optimum (hand-worked case above)",
          "[search][exact]") {
  if (!exact_available()) return;
  // The cap-1 case above has the optimum 10: at or below 9.5 there is no schedule (proven),
  // at or below 10 the optimum is found.
  const Schedule layout = placement_layout(Placement::linear, 2, 2);
  const SimCosts c = unit_costs(layout, 1, 2, 1);
  const ExactResult below = exact_schedule(layout, c, 1, 30, 19 * kTicksPerUnit / 2);
  INFO(below.status);
  REQUIRE_FALSE(below.solved);
  REQUIRE(below.above_upper);
  const ExactResult at = exact_schedule(layout, c, 1, 30, 10 * kTicksPerUnit);
  INFO(at.status);
  REQUIRE(at.optimal);
  REQUIRE(at.objective == 10 * kTicksPerUnit);
  REQUIRE_FALSE(at.above_upper);
}

TEST_CASE("exact: the micro-batch order and the start windows lose nothing: never above a list or family schedule",
          "[search][exact]") {
  if (!exact_available()) return;
  // The model fixes every stage's F, I and W to micro-batch order and bounds each start by
  // heads and tails; a proven optimum must still be at or below every real schedule (no pairs)
  // that fits the same cap: the nine families and the list scheduler's rules.
  const SmallCase cases[] = {
      {Placement::linear, 2, 4, 0, 1, 2, 1, 0.3}, {Placement::linear, 3, 3, 2, 2, 2, 1, 0.2},
      {Placement::linear, 2, 4, 2, 1, 3, 2, 0},   {Placement::v_shape, 2, 2, 2, 1, 2, 1, 0.2},
      {Placement::v_shape, 2, 3, 3, 2, 2, 1, 0},  {Placement::bidirectional, 2, 4, 2, 1, 2, 1, 0.3},
  };
  int compared = 0;
  for (const SmallCase& k : cases) {
    const Schedule layout = placement_layout(k.p, k.pp, k.m);
    const SimCosts c = unit_costs(layout, k.f, k.b, k.w);
    SimCosts cl = c;
    cl.link.latency = static_cast<Time>(k.latency * kTicksPerUnit);
    const ExactResult e = exact_schedule(layout, cl, k.cap_chunks, 30);
    INFO(placement_name(k.p) << " P=" << k.pp << " M=" << k.m << " cap " << k.cap_chunks << ": " << e.status);
    REQUIRE(e.optimal);
    const Time opt = simulate(e.schedule, cl).makespan();
    auto check = [&](const Schedule& s) {
      const SimResult r = simulate(s, cl);
      if (k.cap_chunks > 0 && peak_shares(s, cl) * s.chunks_per_rank > k.cap_chunks + 1e-9) return;
      REQUIRE(opt <= r.makespan());
      ++compared;
    };
    for (int rule = 0; rule < 16; ++rule) {
      ListRule lr;
      lr.backward_first = rule % 2;
      lr.w_fills_only = (rule / 2) % 2;
      lr.deep_first = (rule / 4) % 2;
      lr.reserve_deeper = (rule / 8) % 2;
      const Schedule s = list_schedule(layout, cl, k.cap_chunks, lr);
      if (s.num_ops() > 0) check(s);
    }
    for (const Family& fam : families()) {
      Schedule s;
      try {
        s = make_schedule(fam.name, ScheduleParams{k.pp, k.m, 0, 0});
      } catch (const InputError&) {
        continue;
      }
      if (s.num_pipes != layout.num_pipes || s.stage_rank != layout.stage_rank || s.slice != layout.slice) continue;
      check(s);
    }
  }
  REQUIRE(compared > 40);
}
