// The exact method (src/search/exact.h): a proven optimum on a case worked by hand, and the
// search's heuristic meets it there. Skips with the reason when ppsim was built without CBC.
#include "search/exact.h"

#include <catch.h>

#include <iostream>

#include "schedules/validator.h"
#include "search/search.h"
#include "search_test_util.h"
#include "sim/engine.h"

using namespace ppsim;

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
