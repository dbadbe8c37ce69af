// The local search's order timer (src/search/order_timer.h): a hand-worked timing, the engine's
// makespan, peak and rank ends on the orders the local search's moves make from families and list
// schedules on random small profiles (deadlocks included), and which costs it refuses.
#include "search/order_timer.h"

#include <catch.h>

#include <random>
#include <string>

#include "core/error.h"
#include "schedules/registry.h"
#include "search/search.h"
#include "search_test_util.h"
#include "sim/engine.h"

using namespace ppsim;

namespace {
constexpr Time U = kTicksPerUnit;
}

TEST_CASE("order timer: one micro-batch over two ranks with latency, and a pair (hand-worked)", "[search][timer]") {
  // Linear P=2, M=1, F = I = W = 1, latency 0.5: rank 0's F 0-1; rank 1's F 1.5-2.5, I 2.5-3.5,
  // W 3.5-4.5; rank 0's I when the gradient lands, 4-5, then its W 5-6. Makespan 6, one
  // activation per rank, rank ends 6 + 4.5.
  Schedule lin = placement_layout(Placement::linear, 2, 1);
  SimCosts c = test::unit_costs(lin, 1, 2, 1);
  c.link.latency = U / 2;
  lin.ranks[0] = {Action::single({OpKind::F, 0, 0}), Action::single({OpKind::I, 0, 0}),
                  Action::single({OpKind::W, 0, 0})};
  lin.ranks[1] = {Action::single({OpKind::F, 1, 0}), Action::single({OpKind::I, 1, 0}),
                  Action::single({OpKind::W, 1, 0})};
  REQUIRE(OrderTimer::exact_for(c));
  OrderTimer timer(lin, c);
  OrderTimer::Result r = timer.run(lin);
  REQUIRE(r.ok);
  REQUIRE(r.makespan == 6 * U);
  REQUIRE(r.peak == 1);
  REQUIRE(r.end_sum == 6 * U + 9 * U / 2);
  // Own spans: rank 0 from 0 to 6, rank 1 from 1.5 to 4.5.
  REQUIRE(r.max_span == 6 * U);
  REQUIRE(r.span_sum == 9 * U);
  // Rank 0 runs its W before its I: it waits for an input that never comes.
  std::swap(lin.ranks[0][1], lin.ranks[0][2]);
  REQUIRE_FALSE(timer.run(lin).ok);

  // Bidirectional P=2, M=2 (one micro-batch per pipe), F = I = W = 1, FB = 2.5 (a saving of
  // 0.5: an F&I pair lasts 1 + 1 - 0.5 = 1.5). Rank 0 holds stage 0 (pipe 0's first) and stage
  // 3 (pipe 1's last), rank 1 stages 1 and 2. Rank 0: 0F0 0-1, 3F0 (2F0's output at 1) 1-2, 3I0
  // 2-3, 3W0 3-4, 0I0 when 1I0's gradient lands (5.5) 5.5-6.5, 0W0 6.5-7.5. Rank 1: 2F0 0-1,
  // the pair (1F0; 2I0) when 3I0's gradient lands (3) 3-4.5, 1I0 4.5-5.5, 1W0 5.5-6.5, 2W0
  // 6.5-7.5. Makespan 7.5, rank ends 7.5 + 7.5; peak 2 (rank 0 holds 0F0 and 3F0 from 1 to 4).
  Schedule bi = placement_layout(Placement::bidirectional, 2, 2);
  SimCosts cb = test::unit_costs(bi, 1, 2, 1);
  for (SliceCosts& s : cb.slice) s.fb = 5 * U / 2;
  bi.ranks[0] = {Action::single({OpKind::F, 0, 0}), Action::single({OpKind::F, 3, 0}),
                 Action::single({OpKind::I, 3, 0}), Action::single({OpKind::W, 3, 0}),
                 Action::single({OpKind::I, 0, 0}), Action::single({OpKind::W, 0, 0})};
  bi.ranks[1] = {Action::single({OpKind::F, 2, 0}), Action::pair({OpKind::F, 1, 0}, {OpKind::I, 2, 0}),
                 Action::single({OpKind::I, 1, 0}), Action::single({OpKind::W, 1, 0}),
                 Action::single({OpKind::W, 2, 0})};
  OrderTimer tb(bi, cb);
  r = tb.run(bi);
  REQUIRE(r.ok);
  REQUIRE(r.makespan == 15 * U / 2);
  REQUIRE(r.peak == 2);
  REQUIRE(r.end_sum == 15 * U);
  REQUIRE(simulate(bi, cb).makespan() == 15 * U / 2);
}

TEST_CASE("order timer: refuses costs it does not time as the engine does", "[search][timer]") {
  const Schedule lin = placement_layout(Placement::linear, 2, 2);
  const SimCosts base = test::unit_costs(lin, 1, 2, 1);
  REQUIRE(OrderTimer::exact_for(base));
  SimCosts c = base;
  c.slice[0].act_bytes = 1000;  // bytes without a bandwidth take no link time: still exact
  REQUIRE(OrderTimer::exact_for(c));
  c.link.bytes_per_tick = 1;  // ... with one, transfers queue on the link
  REQUIRE_FALSE(OrderTimer::exact_for(c));
  c = base;
  c.link.blocking = true;
  REQUIRE_FALSE(OrderTimer::exact_for(c));
  c = base;
  c.moe.resize(c.slice.size());
  REQUIRE_FALSE(OrderTimer::exact_for(c));
  c = base;
  c.rank_device = {0, 0};
  REQUIRE_FALSE(OrderTimer::exact_for(c));
  c = base;
  c.rank_kind_scale.assign(6, 1.0);
  REQUIRE_FALSE(OrderTimer::exact_for(c));
}

TEST_CASE("order timer: the engine's makespan, peak and rank ends on moved orders, random small profiles",
          "[search][timer]") {
  std::mt19937_64 rng(2111);
  auto pick = [&](int lo, int hi) { return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1)); };
  const Time tenth = U / 10;
  int compared = 0, deadlocks = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int P = pick(2, 4);
    const int M = 2 * pick(1, 4);
    const Time latency = trial % 3 == 0 ? 0 : pick(0, 5) * tenth;
    const std::vector<SliceCosts> base = test::random_slices(rng, trial % 2 == 0, false);  // in tenths
    auto costs = [&](const Schedule& s) {
      SimCosts c;
      for (int k = 0; k < s.stages_per_pipe; ++k) c.slice.push_back(base[static_cast<std::size_t>(k)]);
      c.link.latency = latency;
      return c;
    };
    std::vector<Schedule> orders;
    for (const Family& fam : families()) {
      try {
        orders.push_back(make_schedule(fam.name, ScheduleParams{P, M, 0, 0}));
      } catch (const InputError&) {
      }
    }
    for (Placement p : parse_placements("all")) {
      ListRule rule;
      rule.pairs = p == Placement::bidirectional;
      orders.push_back(list_schedule(placement_layout(p, P, M), costs(placement_layout(p, P, M)), 0, rule));
    }
    for (const Schedule& s0 : orders) {
      const SimCosts c = costs(s0);
      REQUIRE(OrderTimer::exact_for(c));
      OrderTimer timer(s0, c);
      Schedule s = s0;
      for (int step = 0; step < 30; ++step) {
        // The local search's moves: swap two neighbours, or move one action up to 8 places.
        std::vector<Action>& acts = s.ranks[rng() % static_cast<std::size_t>(P)];
        if (acts.size() >= 2) {
          const std::size_t i = rng() % (acts.size() - 1);
          if (step % 2 == 0) {
            std::swap(acts[i], acts[i + 1]);
          } else {
            const Action a = acts[i];
            acts.erase(acts.begin() + static_cast<long>(i));
            const std::size_t j = std::min(acts.size(), i + rng() % 9);
            acts.insert(acts.begin() + static_cast<long>(j), a);
          }
        }
        INFO(s0.family << " P=" << P << " M=" << M << " trial " << trial << " step " << step);
        const OrderTimer::Result t = timer.run(s);
        SimResult r;
        try {
          r = simulate(s, c);
        } catch (const InputError&) {
          REQUIRE_FALSE(t.ok);  // the engine's deadlock is the timer's
          ++deadlocks;
          s = s0;  // start again from the family or list order
          continue;
        }
        REQUIRE(t.ok);
        REQUIRE(t.makespan == r.makespan());
        int peak = 0;
        Time ends = 0;
        for (const RankStats& st : r.ranks) {
          peak = std::max(peak, st.peak_activations);
          ends += st.last_end;
        }
        REQUIRE(t.peak == peak);
        REQUIRE(t.end_sum == ends);
        ++compared;
      }
    }
  }
  // Both outcomes occur (so the comparison is not vacuous).
  REQUIRE(compared > 1000);
  REQUIRE(deadlocks > 50);
}
