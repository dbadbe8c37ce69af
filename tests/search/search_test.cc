// The schedule search (src/search): the lower bound worked by hand, the list scheduler's output
// is a valid schedule that respects the cap, and the search is never slower than the families,
// never below the bound, and the same for the same seed.
#include "search/search.h"

#include <catch.h>

#include "core/error.h"
#include "schedules/registry.h"
#include "search/order_timer.h"
#include "schedules/validator.h"
#include "search_test_util.h"
#include "sim/engine.h"

using namespace ppsim;

using ppsim::test::unit_costs;

TEST_CASE("lower bound: busiest rank's fill plus work, and one micro-batch's chain (hand-worked)", "[search]") {
  // Linear P=4, M=8, F=1, B=2 (b=1), W=1: rank 3 starts after 3 forwards (fill 3) and then
  // works 8 x (1 + 2) = 24 -> 27; the chain 4F + 4b + W = 9 is shorter. Bound 27.
  const Schedule lin = placement_layout(Placement::linear, 4, 8);
  REQUIRE(lower_bound(lin, unit_costs(lin, 1, 2, 1)) == 27 * kTicksPerUnit);
  // V, P=4, M=8: chunks of half the times. Rank 3 holds stages 3 and 4; its fill is 3 half
  // forwards = 1.5, its work 2 x 8 x 1.5 = 24 -> 25.5.
  const Schedule v = placement_layout(Placement::v_shape, 4, 8);
  REQUIRE(lower_bound(v, unit_costs(v, 1, 2, 1)) == 51 * kTicksPerUnit / 2);
  // The 1F1B family meets it only with its (P-1)(F+B) bubble: (M+P-1)(F+B) = 33 >= 27.
  const Schedule f = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  REQUIRE(simulate(f, unit_costs(f, 1, 2, 1)).makespan() >= lower_bound(lin, unit_costs(lin, 1, 2, 1)));
}

TEST_CASE("list scheduler: valid schedules within the activation cap, for every placement", "[search]") {
  for (Placement p : parse_placements("all")) {
    const Schedule layout = placement_layout(p, 4, 8);
    const SimCosts c = unit_costs(layout, 1, 2, 1);
    for (int cap : {0, 4 * layout.chunks_per_rank}) {
      ListRule rule;
      rule.pairs = p == Placement::bidirectional;
      const Schedule s = list_schedule(layout, c, cap, rule);
      INFO(placement_name(p) << " cap " << cap);
      REQUIRE(s.num_ops() == static_cast<std::size_t>(3 * layout.num_stages() * layout.mb_per_pipe()));
      REQUIRE_NOTHROW(validate_schedule(s));
      const SimResult r = simulate(s, c);
      if (cap > 0)
        for (const RankStats& st : r.ranks) REQUIRE(st.peak_activations <= cap);
      REQUIRE(r.makespan() >= lower_bound(layout, c));
    }
  }
}

TEST_CASE("search: never slower than the best family under the cap, never below the bound, same seed same result on 1 or 2 threads",
          "[search]") {
  SearchRequest req;
  req.pp = 4;
  req.microbatches = 8;
  req.placements = parse_placements("all");
  req.memory_cap = 4;                                                    // 1F1B's rank 0 peak: min(P, M) = 4
  req.costs = [](const Schedule& s) { return unit_costs(s, 1, 3, 2); };  // W-heavy: ZB-H1's formula fails
  req.threads = 2;
  req.swap_rounds = 200;
  const SearchResult a = search_schedule(req);
  REQUIRE(a.best_family.valid);
  REQUIRE(a.best.valid);
  REQUIRE(a.best.sim.makespan() <= a.best_family.sim.makespan());
  REQUIRE(a.best.sim.makespan() >= a.lower_bound);
  REQUIRE(a.best.peak_shares <= 4);
  REQUIRE_NOTHROW(validate_schedule(a.best.schedule));
  // The reported makespan is the engine's.
  REQUIRE(simulate(a.best.schedule, req.costs(a.best.schedule)).makespan() == a.best.sim.makespan());
  req.threads = 1;  // the same result on one thread
  const SearchResult b = search_schedule(req);
  REQUIRE(b.best.sim.makespan() == a.best.sim.makespan());
  REQUIRE(b.best.schedule.ranks == a.best.schedule.ranks);
}

TEST_CASE("search: the span objective (post-validation) reaches every rank's own work as its span", "[search]") {
  // Linear P = 4, M = 8, F = I = W = 1, no cap, no latency: each rank's work is 8 x 3 = 24. A
  // rank's own span (first start to last end) can be exactly its work: it runs its forwards as
  // they arrive and fills every wait with W's of earlier micro-batches, and rank 0, whose first
  // gradient returns at 7 (F through 4 ranks, I back through 3), has 8 forwards to run until then.
  // The makespan cannot go below 3 + 24 = 27 (rank 3 starts at 3), and a makespan-optimal
  // schedule need not keep rank 0 busy.
  SearchRequest req;
  req.pp = 4;
  req.microbatches = 8;
  req.placements = parse_placements("linear");
  req.costs = [](const Schedule& s) { return unit_costs(s, 1, 2, 1); };
  req.threads = 1;
  req.swap_rounds = 2000;
  req.objective_span = true;
  const SearchResult a = search_schedule(req);
  REQUIRE(a.best.valid);
  Time span = 0;
  for (const RankStats& st : a.best.sim.ranks) span = std::max(span, st.last_end - st.first_start);
  CHECK(span == 24 * kTicksPerUnit);
  CHECK(a.best.sim.makespan() >= 27 * kTicksPerUnit);
  REQUIRE_NOTHROW(validate_schedule(a.best.schedule));
}

TEST_CASE("search: a cap no schedule meets is an input error", "[search]") {
  SearchRequest req;
  req.pp = 4;
  req.microbatches = 8;
  req.placements = parse_placements("linear");
  req.memory_cap = 0.5;  // less than one micro-batch's activations
  req.costs = [](const Schedule& s) { return unit_costs(s, 1, 2, 1); };
  REQUIRE_THROWS_AS(search_schedule(req), InputError);
  REQUIRE_THROWS_AS(parse_placements("diagonal"), InputError);
}

TEST_CASE("list scheduler: steady injection spaces the first stage's forwards (hand-worked)", "[search]") {
  // Linear P=2, M=3, F = I = W = 1, gap 10: one micro-batch's round trip (F, F, I, I, W0) takes
  // 5 < 10, so the list scheduler finishes each micro-batch before the next may start: rank 0
  // runs F I W per micro-batch. The engine runs the orders without the gap's idle: 3 x 5 = 15,
  // with one activation per rank. Without spacing, rank 0 starts all three F's first.
  const Schedule lin = placement_layout(Placement::linear, 2, 3);
  const SimCosts c = unit_costs(lin, 1, 2, 1);
  ListRule rule;
  rule.inject_gap = 10 * kTicksPerUnit;
  const Schedule s = list_schedule(lin, c, 0, rule);
  REQUIRE_NOTHROW(validate_schedule(s));
  for (int m = 0; m < 3; ++m) {
    REQUIRE(s.ranks[0][3 * m] == Action::single({OpKind::F, 0, m}));
    REQUIRE(s.ranks[0][3 * m + 1] == Action::single({OpKind::I, 0, m}));
    REQUIRE(s.ranks[0][3 * m + 2] == Action::single({OpKind::W, 0, m}));
  }
  const SimResult r = simulate(s, c);
  REQUIRE(r.makespan() == 15 * kTicksPerUnit);
  REQUIRE(peak_shares(s, c) == 1);
  const Schedule greedy = list_schedule(lin, c, 0, ListRule{});
  REQUIRE(greedy.ranks[0][1] == Action::single({OpKind::F, 0, 1}));
}

TEST_CASE("search: no local search from a schedule that meets the bound; chains where it does not", "[search]") {
  // P=4, M=4, F=1, B=2, W=1, no cap (suite case 1): a list schedule of the bidirectional
  // placement meets the bound (13), so no chain runs and the rounds change nothing evaluated.
  SearchRequest req;
  req.pp = 4;
  req.microbatches = 4;
  req.placements = parse_placements("all");
  req.costs = [](const Schedule& s) { return unit_costs(s, 1, 2, 1); };
  req.threads = 2;
  req.swap_rounds = 10;
  const SearchResult a = search_schedule(req);
  REQUIRE(a.best.sim.makespan() == a.lower_bound);
  req.swap_rounds = 1000;
  const SearchResult b = search_schedule(req);
  REQUIRE(b.evaluated == a.evaluated);
  REQUIRE(b.trials_run == b.trials);
  // With a link latency of 0.2 (suite case 19) the best start (14) is above the bound (13.8):
  // the chains run their rounds.
  req.costs = [](const Schedule& s) {
    SimCosts c = unit_costs(s, 1, 2, 1);
    c.link.latency = kTicksPerUnit / 5;
    return c;
  };
  req.swap_rounds = 10;
  const SearchResult c = search_schedule(req);
  REQUIRE(c.best.sim.makespan() > c.lower_bound);
  req.swap_rounds = 1000;
  const SearchResult d = search_schedule(req);
  REQUIRE(d.evaluated >= c.evaluated + 1000);  // 4 x 990 more rounds (some moves are skipped unevaluated)
}

TEST_CASE("cap with the W's share (w_hold): an I frees 1 - w_hold, the W the rest (hand-worked)", "[search]") {
  // Linear P=2, M=2, F = I = W = 1, no link latency, a cap of 1.5 shares per rank.
  // Whole shares (w_hold = 1): rank 0 holds micro-batch 0 until its W ends, so F1 waits for it:
  //   rank 0 F0 [0,1]; rank 1 F0 [1,2] I0 [2,3]; rank 0 I0 [3,4] W0 [4,5] F1 [5,6];
  //   rank 1 F1 [6,7] I1 [7,8]; rank 0 I1 [8,9] W1 [9,10]: 10, the optimum (each micro-batch's
  //   round trip, 5, is serial on rank 0).
  // w_hold = 1/4: I0's end (4) leaves 1/4 held, so F1 fits (1/4 + 1 = 5/4 <= 3/2) before W0:
  //   rank 0 F1 [4,5] W0 [5,6]; rank 1 F1 [5,6] I1 [6,7] W1 [7,8]; rank 0 I1 [7,8] W1 [8,9]: 9,
  //   with a peak of 5/4 on rank 0 (after F1: 1/4 + 1).
  const Schedule lin = placement_layout(Placement::linear, 2, 2);
  auto costs = [](const Schedule& s, double w_hold) {
    SimCosts c = unit_costs(s, 1, 2, 1);
    for (SliceCosts& x : c.slice) x.w_hold = w_hold;
    return c;
  };
  SearchRequest req;
  req.pp = 2;
  req.microbatches = 2;
  req.placements = {Placement::linear};
  req.memory_cap = 1.5;
  req.threads = 1;
  req.swap_rounds = 200;
  req.costs = [&](const Schedule& s) { return costs(s, 1.0); };
  const SearchResult whole = search_schedule(req);
  REQUIRE(whole.best.valid);
  CHECK(whole.best.sim.makespan() == 10 * kTicksPerUnit);
  CHECK(whole.best.peak_shares == 1);
  req.costs = [&](const Schedule& s) { return costs(s, 0.25); };
  const SearchResult part = search_schedule(req);
  REQUIRE(part.best.valid);
  CHECK(part.best.sim.makespan() == 9 * kTicksPerUnit);
  CHECK(part.best.peak_shares == 1.25);
  // The walk itself, on the order above: rank 0 F0 I0 F1 W0 I1 W1 peaks at 5/4, and at 2 when
  // every share is held until its W.
  Schedule s = lin;
  s.ranks[0] = {Action::single({OpKind::F, 0, 0}), Action::single({OpKind::I, 0, 0}), Action::single({OpKind::F, 0, 1}),
                Action::single({OpKind::W, 0, 0}), Action::single({OpKind::I, 0, 1}), Action::single({OpKind::W, 0, 1})};
  s.ranks[1] = {Action::single({OpKind::F, 1, 0}), Action::single({OpKind::I, 1, 0}), Action::single({OpKind::W, 1, 0}),
                Action::single({OpKind::F, 1, 1}), Action::single({OpKind::I, 1, 1}), Action::single({OpKind::W, 1, 1})};
  REQUIRE_NOTHROW(validate_schedule(s));
  CHECK(held_peak_chunks(s, costs(s, 0.25)) == 1.25);
  CHECK(held_peak_chunks(s, costs(s, 1.0)) == 2);
  // The local search's order timer counts the same way.
  CHECK(OrderTimer(s, costs(s, 0.25)).run(s).peak == 1.25);
  CHECK(OrderTimer(s, costs(s, 1.0)).run(s).peak == 2);
  CHECK(simulate(s, costs(s, 0.25)).makespan() == 9 * kTicksPerUnit);
}
