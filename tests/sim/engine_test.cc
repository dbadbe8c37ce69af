// The event engine: a timeline worked out by hand with latency, link serialization, blocking
// sends, per-stage costs, determinism, and deadlock detection.
#include <algorithm>
#include <set>

#include "catch.h"
#include "core/error.h"
#include "schedules/deepspeed_p2p.h"
#include "schedules/megatron_p2p.h"
#include "schedules/notation.h"
#include "schedules/torch_p2p.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {
struct WantInterval {
  int rank;
  const char* op;
  double start, end;  // in units
};
// The timeline holds exactly these actions, each at its hand-worked start and end.
void check_intervals(const Timeline& t, std::initializer_list<WantInterval> want) {
  REQUIRE(t.intervals.size() == want.size());
  for (const WantInterval& w : want) {
    INFO(w.op);
    bool found = false;
    for (const auto& iv : t.intervals)
      if (iv.rank == w.rank && format_action(iv.action) == w.op) {
        found = true;
        CHECK(iv.start == static_cast<Time>(w.start * U));
        CHECK(iv.end == static_cast<Time>(w.end * U));
      }
    CHECK(found);
  }
}
}  // namespace

TEST_CASE("1f1b P=2 M=2 with latency 0.5: the hand-worked timeline", "[sim][engine]") {
  // F=1, B=2, latency c=0.5.
  // rank 0: F0 [0,1]  F1 [1,2]             B0 [5,7]   B1 [8,10]
  // rank 1:      F0 [1.5,2.5] B0 [2.5,4.5] F1 [4.5,5.5] B1 [5.5,7.5]
  // F0 reaches rank 1 at 1 + 0.5; F1 (sent at 2) waits until rank 1 is free at 4.5; B0's
  // gradient reaches rank 0 at 4.5 + 0.5 = 5; B1's at 7.5 + 0.5 = 8. Makespan 10.
  const Run r = run("1f1b", 2, 2, unit_costs(1, 2, 0), U / 2, 0, true);
  REQUIRE(r.metrics.makespan == 10 * U);
  struct Want { int rank; const char* op; double start, end; };
  const Want want[] = {{0, "0F0", 0, 1}, {0, "0F1", 1, 2},     {1, "1F0", 1.5, 2.5}, {1, "1B0", 2.5, 4.5},
                       {1, "1F1", 4.5, 5.5}, {0, "0B0", 5, 7}, {1, "1B1", 5.5, 7.5}, {0, "0B1", 8, 10}};
  REQUIRE(r.result.timeline.intervals.size() == 8);
  for (const Want& w : want) {
    bool found = false;
    for (const auto& iv : r.result.timeline.intervals) {
      if (iv.rank != w.rank || format_action(iv.action) != w.op) continue;
      found = true;
      REQUIRE(iv.start == static_cast<Time>(w.start * U));
      REQUIRE(iv.end == static_cast<Time>(w.end * U));
    }
    INFO(w.op);
    REQUIRE(found);
  }
  // Bubbles: makespan 10 - busy 6 on both ranks.
  REQUIRE(r.metrics.bubble == std::vector<Time>{4 * U, 4 * U});
  // Four transfers, each arriving 0.5 after its op ends.
  REQUIRE(r.result.timeline.transfers.size() == 4);
  for (const auto& t : r.result.timeline.transfers) REQUIRE(t.end - t.start == U / 2);
}

TEST_CASE("a link carries one transfer at a time per direction", "[sim][engine]") {
  // GPipe P=2 M=2, F=1, B=1, 1-unit transfers (bandwidth: act_bytes / bytes_per_tick = 1 unit).
  // F0 [0,1] -> link [1,2], F1 [1,2] -> link busy until 2, so [2,3]: rank 1 F0 [2,3], F1 [3,4].
  Schedule s = make_schedule("gpipe", ScheduleParams{2, 2, 0, 0});
  SliceCosts c = unit_costs(1, 1, 0);
  c.act_bytes = 1000;
  SimCosts costs = uniform_costs(2, c);
  costs.link.bytes_per_tick = 1000.0 / static_cast<double>(U);
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  std::vector<Time> rank1_f;
  for (const auto& iv : r.timeline.intervals)
    if (iv.rank == 1 && iv.action.first.kind == OpKind::F) rank1_f.push_back(iv.start);
  REQUIRE(rank1_f == std::vector<Time>{2 * U, 3 * U});
}

TEST_CASE("blocking sends hold the sender's compute stream and count as exposed communication", "[sim][engine]") {
  // GPipe P=2 M=1, F=1, B=1, latency 1, blocking: rank 0 F0 [0,1], blocked until 2.
  Schedule s = make_schedule("gpipe", ScheduleParams{2, 1, 0, 0});
  SimCosts costs = uniform_costs(2, unit_costs(1, 1, 0));
  costs.link.latency = U;
  costs.link.blocking = true;
  const SimResult r = simulate(s, costs);
  // rank 1: F0 [2,3], B0 [3,4] blocked to 5; rank 0: B0 [5,6]. Makespan 6.
  REQUIRE(r.makespan() == 6 * U);
  REQUIRE(r.ranks[0].exposed_comm == U);
  REQUIRE(r.ranks[1].exposed_comm == U);
}

TEST_CASE("stages may differ in cost", "[sim][engine]") {
  // GPipe P=2 M=1; stage 0: F=1, B=1; stage 1 (head + loss): F=3, B=3.
  // F0@0 [0,1], F0@1 [1,4], B0@1 [4,7], B0@0 [7,8]: makespan 8; busy 2 and 6.
  Schedule s = make_schedule("gpipe", ScheduleParams{2, 1, 0, 0});
  SimCosts costs = uniform_costs(2, unit_costs(1, 1, 0));
  costs.slice[1] = unit_costs(3, 3, 0);
  const SimResult r = simulate(s, costs);
  REQUIRE(r.makespan() == 8 * U);
  REQUIRE(r.ranks[0].busy == 2 * U);
  REQUIRE(r.ranks[1].busy == 6 * U);
}

TEST_CASE("determinism: the same input gives identical results", "[sim][engine]") {
  for (const char* fam : {"dualpipe", "zbv", "chimera"}) {
    const Run a = run(fam, 8, 32, unit_costs(1, 2, 1, 3), U / 7, 0, true);
    const Run b = run(fam, 8, 32, unit_costs(1, 2, 1, 3), U / 7, 0, true);
    REQUIRE(a.result.timeline.intervals.size() == b.result.timeline.intervals.size());
    for (std::size_t i = 0; i < a.result.timeline.intervals.size(); ++i) {
      const auto& x = a.result.timeline.intervals[i];
      const auto& y = b.result.timeline.intervals[i];
      REQUIRE((x.rank == y.rank && x.start == y.start && x.end == y.end && x.action == y.action));
    }
    REQUIRE(a.result.events == b.result.events);
  }
}

TEST_CASE("a deadlocking order is rejected with the cycle in notation", "[sim][engine][schedules]") {
  // Rank 0 waits for its backward before sending the second forward that rank 1 runs first.
  const std::string csv = "0F0,0B0,0F1,0B1\n1F1,1B1,1F0,1B0\n";
  try {
    import_csv(csv, "dead.csv", 2, 2);
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string msg = e.one_line();
    INFO(msg);
    REQUIRE(msg.rfind("dead.csv: deadlock: a cycle of ops, each needed before the next: ", 0) == 0);
    REQUIRE(msg.find("1F1") != std::string::npos);
  }
}

TEST_CASE("two ranks sharing one device: actions re-timed as they come and go (hand-worked)", "[sim][engine]") {
  // 1F1B P=2 M=2, F=1, B=2, no latency; both ranks on one device, share_slowdown 2 (time-sliced:
  // two actions at once each take twice as long).
  //   t=0  r0 F0 alone                                   -> ends 1
  //   t=1  r0 F1 and r1 F0 together (work 1 each, x2)    -> both end 3
  //   t=3  r1 B0 alone (r0 waits for B0's gradient)      -> ends 5
  //   t=5  r0 B0 (work 2) with r1 F1 (work 1), x2        -> r1 F1 ends 7, r0 B0 has 1 left
  //   t=7  r1 B1 (work 2) joins r0 B0: both x2           -> r0 B0 ends 9, r1 B1 has 1 left
  //   t=9  r1 B1 alone                                   -> ends 10
  //   t=10 r0 B1 alone                                   -> ends 12
  // Busy: r0 1+2+4+2 = 9, r1 2+2+2+3 = 9; makespan 12 (9 when the device is not shared).
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.rank_device = {0, 0};
  costs.share_slowdown = 2.0;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == 12 * U);
  CHECK(r.ranks[0].busy == 9 * U);
  CHECK(r.ranks[1].busy == 9 * U);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 3}, {1, "1F0", 1, 3},  {1, "1B0", 3, 5},
                               {0, "0B0", 5, 9}, {1, "1F1", 5, 7}, {1, "1B1", 7, 10}, {0, "0B1", 10, 12}});
  // Separate devices, or a device that does not slow down: the ordinary 1F1B, (M+P-1)(F+B) = 9.
  costs.rank_device = {0, 1};
  CHECK(simulate(s, costs).makespan() == 9 * U);
  costs.rank_device = {0, 0};
  costs.share_slowdown = 1.0;
  CHECK(simulate(s, costs).makespan() == 9 * U);
  // Each action with a copy beside it (an EP shard in step, share_copies 2), time-sliced: k
  // actions running are 2k at once, each 2k times slower. Alone x2, two at once x4: the walk
  // above with every duration doubled (0-2 F0; 2-6 F1, F0; 6-10 B0; 10-14 F1 with B0 half done;
  // 14-18 B0's rest with B1 half done; 18-20 B1; 20-24 B1): 24.
  costs.share_slowdown = 2.0;
  costs.share_copies = 2;
  const SimResult c2 = simulate(s, costs, opt);
  CHECK(c2.makespan() == 24 * U);
  check_intervals(c2.timeline, {{0, "0F0", 0, 2}, {0, "0F1", 2, 6}, {1, "1F0", 2, 6},  {1, "1B0", 6, 10},
                                {0, "0B0", 10, 18}, {1, "1F1", 10, 14}, {1, "1B1", 14, 20}, {0, "0B1", 20, 24}});
  // The same by kind with every entry 2: the uniform rule with copies.
  costs.share_by_kind = std::vector<double>(9, 2.0);
  CHECK(simulate(s, costs).makespan() == 24 * U);
  costs.share_by_kind.clear();
  // Separate devices, each rank alone but for its copy, at 1.5: 1F1B's 9 x 1.5.
  costs.rank_device = {0, 1};
  costs.share_slowdown = 1.5;
  CHECK(simulate(s, costs).makespan() == static_cast<Time>(13.5 * U));
  costs.share_copies = 0;
  CHECK_THROWS(simulate(s, costs));
}

TEST_CASE("sharing by op kind: each action re-timed at its own rate (hand-worked)", "[sim][engine]") {
  // The run above with F=1, B=2, W=1 (so I=1; a B is half I, half W) and slowdowns by kind:
  // F beside F 2, F beside I or W 1.5, I or W beside F 3, I or W beside I or W 2; so F beside
  // B 1.5, B beside F 3, B beside B 2.
  //   t=0    r0 F0 alone                                  -> ends 1
  //   t=1    r0 F1 and r1 F0, both F beside F (x2)        -> both end 3
  //   t=3    r1 B0 alone                                  -> ends 5
  //   t=5    r1 F1 (work 1) beside r0 B0 (work 2): F x1.5, B x3 -> r1 F1 ends 6.5, r0 B0 has 1.5 left
  //   t=6.5  r1 B1 (work 2) beside r0 B0, both x2         -> r0 B0 ends 9.5, r1 B1 has 0.5 left
  //   t=9.5  r1 B1 alone                                  -> ends 10
  //   t=10   r0 B1 alone                                  -> ends 12
  // Busy: r0 1+2+4.5+2 = 9.5, r1 2+2+1.5+3.5 = 9.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 1));
  costs.rank_device = {0, 0};
  costs.share_slowdown = 1.0;  // not used once share_by_kind is set
  costs.share_by_kind = {2, 1.5, 1.5, 3, 2, 2, 3, 2, 2};
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == 12 * U);
  CHECK(r.ranks[0].busy == static_cast<Time>(9.5 * U));
  CHECK(r.ranks[1].busy == 9 * U);
  check_intervals(r.timeline, {{0, "0F0", 0, 1},   {0, "0F1", 1, 3},   {1, "1F0", 1, 3},    {1, "1B0", 3, 5},
                               {0, "0B0", 5, 9.5}, {1, "1F1", 5, 6.5}, {1, "1B1", 6.5, 10}, {0, "0B1", 10, 12}});
  // Malformed tables are refused.
  costs.share_by_kind = {2, 2, 2};
  CHECK_THROWS(simulate(s, costs));
  costs.share_by_kind = {2, 2, 2, 2, 0.5, 2, 2, 2, 2};
  CHECK_THROWS(simulate(s, costs));
}

TEST_CASE("sharing a device: ops of one kind started together run at least share_aligned (hand-worked)",
          "[sim][engine]") {
  // 1F1B on two ranks of one device, F = 1, B = 2, uniform share 1.5, share_aligned F 2.5:
  //   t=0    r0 F0 alone                                        -> ends 1
  //   t=1    r0 F1 and r1 F0 start together, F beside F: 2.5    -> both end 3.5
  //   t=3.5  r1 B0 alone                                        -> ends 5.5
  //   t=5.5  r0 B0 and r1 F1 start together but differ: 1.5     -> r1 F1 ends 7, r0 B0 has 1 left
  //   t=7    r1 B1 beside r0 B0, started 1.5 apart (> 0.15 x 2): 1.5 -> r0 B0 ends 8.5, r1 B1 has 1 left
  //   t=8.5  r1 B1 alone                                        -> ends 9.5
  //   t=9.5  r0 B1 alone                                        -> ends 11.5
  // Without the rule the ops at t=1 end at 2.5 and everything after moves 1 earlier: 10.5.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.rank_device = {0, 0};
  costs.share_slowdown = 1.5;
  CHECK(simulate(s, costs).makespan() == static_cast<Time>(10.5 * U));
  costs.share_aligned = {2.5, 1.0, 1.0};
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == static_cast<Time>(11.5 * U));
  check_intervals(r.timeline, {{0, "0F0", 0, 1},
                               {0, "0F1", 1, 3.5},
                               {1, "1F0", 1, 3.5},
                               {1, "1B0", 3.5, 5.5},
                               {0, "0B0", 5.5, 8.5},
                               {1, "1F1", 5.5, 7},
                               {1, "1B1", 7, 9.5},
                               {0, "0B1", 9.5, 11.5}});
  // Below the rule the others stand: an aligned figure under 1.5 changes nothing.
  costs.share_aligned = {1.2, 1.2, 1.2};
  CHECK(simulate(s, costs).makespan() == static_cast<Time>(10.5 * U));
  // A wider window takes in the two B at t=7 (1.5 apart, within 0.8 x 2): B beside B at 2.5 from then:
  // r0 B0 (1 left) ends 9.5, r1 B1 has 2 - 2.5/2.5 = 1 left, alone -> 10.5; r0 B1 10.5-12.5.
  costs.share_aligned = {2.5, 2.5, 2.5};
  costs.share_aligned_window = 0.8;
  CHECK(simulate(s, costs).makespan() == static_cast<Time>(12.5 * U));
  costs.share_aligned = {2.5, 0.5, 1.0};
  CHECK_THROWS(simulate(s, costs));
}

TEST_CASE("sharing a device: an F&B pair presses on the op beside it as its two ops would", "[sim][engine]") {
  // DualPipeV's two ranks on one device, share_slowdown 1.5 (and by kind, every entry 1.5), F = 1, B = 2 (I = W = 1),
  // an F&B pair 2.5 alone: beside a pair an action runs 1 + 0.5 x (1 + 2) / 2.5 = 1.6 times slower than alone, beside
  // one op 1.5 times. Checked on the engine's timeline: over each action's span, the integral of 1 / (1 + sum over the
  // actions beside it of 0.5 x their load) is its time alone (load: a pair's ops alone over the pair alone, 1.2; one
  // op: 1).
  const Schedule s = make_schedule("dualpipev", ScheduleParams{2, 6, 0, 0});
  const SliceCosts unit = unit_costs(1, 2, 1, 2.5);
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit);
  costs.rank_device = {0, 0};
  costs.share_slowdown = 1.5;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult uniform = simulate(s, costs, opt);
  costs.share_by_kind.assign(9, 1.5);  // the same by kind
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == uniform.makespan());
  std::vector<const Interval*> iv;
  for (const Interval& x : r.timeline.intervals)
    if (x.stream == Stream::Compute) iv.push_back(&x);
  auto alone = [&](const Action& a) -> double {
    if (a.overlapped) return static_cast<double>(pair_duration(unit, unit, a.second.kind));
    const OpKind k = a.first.kind;
    return static_cast<double>(k == OpKind::F   ? unit.f
                               : k == OpKind::B ? unit.b
                               : k == OpKind::I ? unit.input_grad()
                                                : unit.w);
  };
  auto load = [&](const Action& a) {
    if (!a.overlapped) return 1.0;
    const OpKind k = a.second.kind;
    const double parts = static_cast<double>(unit.f + (k == OpKind::B   ? unit.b
                                                       : k == OpKind::I ? unit.input_grad()
                                                                        : unit.w));
    return parts / alone(a);
  };
  int pairs = 0, beside_pair = 0;
  for (const Interval* x : iv) {
    std::set<Time> cuts = {x->start, x->end};
    for (const Interval* y : iv)
      if (y->rank != x->rank) {
        if (y->start > x->start && y->start < x->end) cuts.insert(y->start);
        if (y->end > x->start && y->end < x->end) cuts.insert(y->end);
      }
    double work = 0;
    for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
      const Time a = *it, b = *std::next(it);
      double f = 1;
      for (const Interval* y : iv)
        if (y->rank != x->rank && y->start <= a && y->end >= b) {
          f += 0.5 * load(y->action);
          beside_pair += y->action.overlapped;
        }
      work += static_cast<double>(b - a) / f;
    }
    pairs += x->action.overlapped;
    INFO(format_action(x->action) << " on rank " << x->rank);
    CHECK_THAT(work, Catch::Matchers::WithinRel(alone(x->action), 1e-3));
  }
  CHECK(pairs > 0);
  CHECK(beside_pair > 0);
}

TEST_CASE("sharing by op kind with every entry equal is the uniform rule (all families)", "[sim][engine]") {
  // 1 + sum over the others of (mix' S mix - 1) with S all s is 1 + (k-1)(s-1): the same timeline
  // up to the rounding of the mixes (a tick per re-timing at most).
  for (const auto& fam : families()) {
    ScheduleParams params = resolve_params(fam, ScheduleParams{4, 8, 0, 0});
    const Schedule s = make_schedule(fam.name, params);
    SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0.75, 2.5));
    costs.rank_device = {0, 1, 0, 1};
    costs.share_slowdown = 1.4;
    const SimResult uniform = simulate(s, costs);
    costs.share_by_kind.assign(9, 1.4);
    const SimResult by_kind = simulate(s, costs);
    INFO(fam.name);
    CHECK(std::llabs(by_kind.makespan() - uniform.makespan()) <= static_cast<Time>(uniform.events));
    const Time unshared = simulate(s, uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0.75, 2.5))).makespan();
    CHECK(uniform.makespan() > unshared);
    // A table that slows nothing is an unshared device.
    costs.share_by_kind.assign(9, 1.0);
    costs.share_slowdown = 1.0;
    CHECK(simulate(s, costs).makespan() == unshared);
  }
}

TEST_CASE("a rank slower by op kind: its actions scaled by their mix (hand-worked)", "[sim][engine]") {
  // 1F1B P=2 M=2, F=1, B=2, W=1 (a B is half I, half W); rank 1 runs F 2x, I 2x, W 1x as long,
  // so its F takes 2 and its B 0.5*2*2 + 0.5*1*2 = 3; rank 0 as profiled.
  //   r0 F0 [0,1]  F1 [1,2]                 B0 [6,8]          B1 [11,13]
  //   r1        F0 [1,3]  B0 [3,6]  F1 [6,8]  B1 [8,11]
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 1));
  costs.rank_kind_scale = {1, 1, 1, 2, 2, 1};
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == 13 * U);
  CHECK(r.ranks[0].busy == 6 * U);
  CHECK(r.ranks[1].busy == 10 * U);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {1, "1F0", 1, 3},  {1, "1B0", 3, 6},
                               {0, "0B0", 6, 8}, {1, "1F1", 6, 8}, {1, "1B1", 8, 11}, {0, "0B1", 11, 13}});
  // Every rank at 1 is no scaling; a table of the wrong size or a non-positive entry is refused.
  for (const auto& fam : families()) {
    const Schedule t = make_schedule(fam.name, resolve_params(fam, ScheduleParams{4, 8, 0, 0}));
    SimCosts c = uniform_costs(t.stages_per_pipe, unit_costs(1, 2, 0.75, 2.5));
    const Time plain = simulate(t, c).makespan();
    c.rank_kind_scale.assign(12, 1.0);
    INFO(fam.name);
    CHECK(simulate(t, c).makespan() == plain);
    c.rank_kind_scale.assign(12, 1.25);  // every rank 1.25x: the whole timeline stretches (no latency)
    CHECK(std::llabs(simulate(t, c).makespan() - plain * 5 / 4) <= 64);
  }
  costs.rank_kind_scale = {1, 1, 1};
  CHECK_THROWS(simulate(s, costs));
  costs.rank_kind_scale = {1, 1, 1, 1, 0, 1};
  CHECK_THROWS(simulate(s, costs));
}

namespace {
// The hand-worked runtime timelines' costs: F=1, B=2 on every stage, links of latency 0.5.
SimCosts half_latency_costs(const Schedule& s) {
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.link.latency = U / 2;
  return costs;
}
// `s` simulated on `costs`, its timeline recorded.
SimResult with_timeline(const Schedule& s, const SimCosts& costs) {
  SimOptions opt;
  opt.record_timeline = true;
  return simulate(s, costs, opt);
}
// Megatron's calls for 1f1b P=2 M=2 (F=1, B=2, latency 0.5), simulated with a restart after each call.
SimResult megatron_1f1b_p2_m2(Time restart) {
  const Schedule s = with_megatron_p2p(make_schedule("1f1b", ScheduleParams{2, 2, 0, 0}));
  SimCosts costs = half_latency_costs(s);
  costs.call_restart = restart;
  return with_timeline(s, costs);
}
}  // namespace

TEST_CASE("Megatron's p2p runtime: 1f1b P=2 M=2 with latency 0.5, the hand-worked timeline", "[sim][engine][fidelity]") {
  // Megatron-LM's calls (schedules/megatron_p2p.h), F=1, B=2, latency 0.5. Rank 0: F0, call
  // [SEND_F0], F1, call [SEND_F1 RECV_B0], B0, call [RECV_B1], B1. Rank 1: call [RECV_F0], F0, B0,
  // call [SEND_B0 RECV_F1], F1, B1, call [SEND_B1].
  // rank 0: F0 [0,1], waits for its send (arrives 1.5), F1 [1.5,2.5], then its call waits for
  //         rank 1 to post RECV_F1 after B0 (4.5): both transfers land at 5; B0 [5,7]; B1's
  //         gradient is sent when rank 1 posts SEND_B1 at 8: B1 [8.5,10.5].
  // rank 1: F0 [1.5,2.5], B0 [2.5,4.5], F1 [5,6], B1 [6,8].
  // Makespan 10.5 against the dataflow's 10 (the test above): rank 0's F1 waits for its send.
  const Schedule s = with_megatron_p2p(make_schedule("1f1b", ScheduleParams{2, 2, 0, 0}));
  REQUIRE(s.comm_waits);
  REQUIRE(s.comm[0].size() == 4);  // SEND_F0; SEND_F1, RECV_B0; RECV_B1
  REQUIRE(s.comm[1].size() == 4);  // RECV_F0; SEND_B0, RECV_F1; SEND_B1
  const SimResult r = megatron_1f1b_p2_m2(0);
  CHECK(r.makespan() == 21 * U / 2);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.5, 2.5}, {0, "0B0", 5, 7}, {0, "0B1", 8.5, 10.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1B0", 2.5, 4.5}, {1, "1F1", 5, 6}, {1, "1B1", 6, 8}});
}

TEST_CASE("Megatron's p2p runtime: the restart after each call's synchronize, the hand-worked timeline", "[sim][engine][fidelity]") {
  // The timeline above with SimCosts::call_restart 0.25: a rank that waited on a call starts its
  // next action 0.25 after the call's last transfer lands.
  // rank 0: F0 [0,1]; SEND_F0 lands 1.5, so F1 [1.75,2.75]; its call [SEND_F1 RECV_B0] meets rank
  //         1's call at 4.75 (after B0), both land 5.25: B0 [5.5,7.5]; [RECV_B1] meets rank 1's
  //         SEND_B1 at 8.5, lands 9: B1 [9.25,11.25].
  // rank 1: [RECV_F0] lands 1.5: F0 [1.75,2.75], B0 [2.75,4.75]; its call lands 5.25: F1 [5.5,6.5],
  //         B1 [6.5,8.5].
  // Makespan 11.25: rank 0's three calls on the critical path, 0.25 each over 10.5.
  const SimResult r = megatron_1f1b_p2_m2(U / 4);
  CHECK(r.makespan() == 45 * U / 4);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.75, 2.75}, {0, "0B0", 5.5, 7.5}, {0, "0B1", 9.25, 11.25},
                               {1, "1F0", 1.75, 2.75}, {1, "1B0", 2.75, 4.75}, {1, "1F1", 5.5, 6.5}, {1, "1B1", 6.5, 8.5}});
}

TEST_CASE("a gap between a rank's actions (SimCosts::action_gap), the hand-worked timeline", "[sim][engine]") {
  // 1f1b P=2 M=2, F=1, B=2, latency 0.5, every rank's next action at least 0.25 after its last.
  // rank 0: F0 [0,1], F1 [1.25,2.25]; B0's gradient (rank 1's B0 ends 4.75) lands 5.25: B0
  //         [5.25,7.25]; B1's lands 8.75: B1 [8.75,10.75].
  // rank 1: F0 lands 1.5: F0 [1.5,2.5] (a first action waits for no gap), B0 [2.75,4.75]; F1
  //         landed at 2.75, the rank is free at 5: F1 [5,6], B1 [6.25,8.25].
  // Makespan 10.75 against 10 without the gap; the gaps are idle time, not exposed communication.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = half_latency_costs(s);
  costs.action_gap = U / 4;
  const SimResult r = with_timeline(s, costs);
  CHECK(r.makespan() == 43 * U / 4);
  check_intervals(r.timeline, {{0, "0F0", 0, 1},
                               {0, "0F1", 1.25, 2.25},
                               {0, "0B0", 5.25, 7.25},
                               {0, "0B1", 8.75, 10.75},
                               {1, "1F0", 1.5, 2.5},
                               {1, "1B0", 2.75, 4.75},
                               {1, "1F1", 5, 6},
                               {1, "1B1", 6.25, 8.25}});
  for (const auto& rs : r.ranks) CHECK(rs.exposed_comm == 0);
  costs.action_gap = 0;
  CHECK(with_timeline(s, costs).makespan() == 10 * U);
}

TEST_CASE("Megatron's p2p runtime: 1F1B's warm-up sends and the next receives are two calls", "[sim][engine][fidelity]") {
  // forward_backward_pipelining_without_interleaving, P=3 M=2, F=1, B=2, latency 0.5. Rank 1
  // warms up with one forward: [RECV_F0] F0 [SEND_F0] [RECV_F1]: its receive of F1 is posted only
  // when the send of F0 has landed, where one merged call would post both at 2.5.
  // rank 0: F0 [0,1]; SEND_F0 lands 1.5: F1 [1.5,2.5]; SEND_F1 waits for rank 1's RECV_F1 (3):
  //         lands 3.5; [RECV_B0] meets rank 1's SEND_B0 at 8.5: B0 [9,11]; [RECV_B1] meets
  //         SEND_B1 at 12: B1 [12.5,14.5].
  // rank 1: F0 [1.5,2.5]; SEND_F0 meets rank 2's RECV_F0 (posted at 0): lands 3; then RECV_F1,
  //         lands 3.5: F1 [3.5,4.5]; [SEND_F1 RECV_B0] meets rank 2's call at 6: lands 6.5:
  //         B0 [6.5,8.5]; [SEND_B0] lands 9; [RECV_B1] meets SEND_B1 at 9.5: B1 [10,12].
  // rank 2: F0 [3,4], B0 [4,6]; [SEND_B0 RECV_F1] lands 6.5: F1 [6.5,7.5], B1 [7.5,9.5].
  const Schedule s = with_megatron_p2p(make_schedule("1f1b", ScheduleParams{3, 2, 0, 0}));
  const SimResult r = with_timeline(s, half_latency_costs(s));
  CHECK(r.makespan() == 29 * U / 2);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.5, 2.5}, {0, "0B0", 9, 11}, {0, "0B1", 12.5, 14.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1F1", 3.5, 4.5}, {1, "1B0", 6.5, 8.5}, {1, "1B1", 10, 12},
                               {2, "2F0", 3, 4}, {2, "2B0", 4, 6}, {2, "2F1", 6.5, 7.5}, {2, "2B1", 7.5, 9.5}});
  // Calls per rank as the loop makes them, P=4 M=8: w = min(P-1-r, M) warm-up and cool-down
  // steps, each with a receive call (rank > 0, resp. < P-1) and a send call (rank < P-1, resp.
  // > 0); one receive before the steady state (rank > 0); M - w steady iterations with a
  // send_forward_recv_backward (rank < P-1) and a send_backward[_recv_forward] (rank > 0):
  // 11, 21, 19, 9.
  const int P = 4, M = 8;
  const Schedule s4 = with_megatron_p2p(make_schedule("1f1b", ScheduleParams{P, M, 0, 0}));
  for (int rank = 0; rank < P; ++rank) {
    INFO("rank " << rank);
    const int w = std::min(P - 1 - rank, M), prev = rank > 0, next = rank < P - 1;
    const int expected = 2 * w * (prev + next) + (M - w > 0 ? prev : 0) + (M - w) * (prev + next);
    int calls = 0;
    for (const CommAction& c : s4.comm[static_cast<std::size_t>(rank)]) calls += c.new_call ? 1 : 0;
    CHECK(calls == expected);
  }
}

TEST_CASE("Megatron's p2p runtime: interleaved calls pair a steady F with its B, and other families are refused", "[sim][engine][fidelity]") {
  // Interleaved P=2, v=2, M=2: rank 0 warms up with 2(P-1-0) + (v-1)P = 4 forwards (all of its
  // 4), then backwards only; rank 1 with 2, then F B F B pairs... each pair one call: its calls
  // sit before each step, so no call sits between a steady F and the B after it.
  const Schedule s = with_megatron_p2p(make_schedule("interleaved-1f1b", ScheduleParams{2, 2, 2, 0}));
  REQUIRE(s.comm.size() == 2);
  for (int r = 0; r < 2; ++r) {
    const auto& acts = s.ranks[static_cast<std::size_t>(r)];
    for (const CommAction& c : s.comm[static_cast<std::size_t>(r)]) {
      REQUIRE(c.after <= acts.size());
      if (c.after > 0 && c.after < acts.size())
        CHECK_FALSE((acts[c.after - 1].first.kind == OpKind::F && acts[c.after].first.kind == OpKind::B));
    }
  }
  // Every transfer is posted once by each side: 3 stage boundaries x 2 micro-batches x 2 ways.
  std::size_t sends = 0, recvs = 0;
  for (const auto& l : s.comm)
    for (const CommAction& c : l) (c.kind == CommKind::SendF || c.kind == CommKind::SendB ? sends : recvs) += 1;
  CHECK(sends == 12);
  CHECK(recvs == 12);
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.link.latency = U / 2;
  CHECK_NOTHROW(simulate(s, costs));  // no deadlock
  CHECK_THROWS_AS(with_megatron_p2p(make_schedule("zb-h1", ScheduleParams{2, 4, 0, 0})), InputError);
}

TEST_CASE("Megatron's p2p runtime: interleaved 1F1B makes as many calls per rank as Megatron's loop", "[sim][engine][fidelity]") {
  // forward_backward_pipelining_with_interleaving on rank r of P, v chunks, M micro-batches: w_r =
  // 2(P-1-r) + (v-1)P warm-up forwards, each followed by one call; Mv - w_r steady F-B pairs, one
  // call each; w_r cool-down backwards, one call each; and one receive before the first forward.
  // Empty calls are not made: rank 0's first receive (its chunk 0 reads the data) and its last
  // backward's call (chunk 0 sends no input grad and nothing is left to receive). So
  // calls_r = [r > 0] + w_r + (Mv - w_r) + w_r - [r = 0]: P=4, v=3, M=8 gives w = 14, 12, 10, 8
  // and 37, 37, 35, 33 calls. (tools/experiments/megatron_plan.py builds the same loop independently, checks it
  // for deadlock and matching, and runs it on GPUs: docs/FIDELITY.md.)
  const int P = 4, v = 3, M = 8;
  const Schedule s = with_megatron_p2p(make_schedule("interleaved-1f1b", ScheduleParams{P, M, v, 0}));
  for (int r = 0; r < P; ++r) {
    INFO("rank " << r);
    const int w = 2 * (P - 1 - r) + (v - 1) * P;
    const int expected = (r > 0 ? 1 : 0) + w + (M * v - w) + w - (r == 0 ? 1 : 0);
    std::set<std::size_t> positions;
    for (const CommAction& c : s.comm[static_cast<std::size_t>(r)]) positions.insert(c.after);
    CHECK(static_cast<int>(positions.size()) == expected);
  }
}

TEST_CASE("links between nodes: a transfer between ranks of two nodes runs on the inter-node link", "[sim][engine]") {
  // 1f1b P=2 M=1, F=1, B=2. On one node (latency 0.5): F0 [0,1] on rank 0, F0 [1.5,2.5] and
  // B0 [2.5,4.5] on rank 1, B0 [5,7] on rank 0: 7. On two nodes, the inter-node link's latency 1:
  // F0 [2,3], B0 [3,5] on rank 1, the gradient back at 6, B0 [6,8]: 8.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 1, 0, 0});
  SimCosts c = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  c.link.latency = U / 2;
  c.inter_node_link.latency = U;
  c.rank_node = {0, 0};
  CHECK(simulate(s, c).makespan() == 7 * U);
  c.rank_node = {0, 1};
  CHECK(simulate(s, c).makespan() == 8 * U);
  CHECK(&c.link_between(0, 1) == &c.inter_node_link);
  CHECK(&c.link_between(1, 1) == &c.link);
}

TEST_CASE("DeepSpeed's p2p runtime: 1f1b P=2 M=2 with latency 0.5, the hand-worked timeline", "[sim][engine][fidelity]") {
  // TrainSchedule (schedules/deepspeed_p2p.h), F=1, B=2, latency 0.5; one call per instruction.
  // Rank 0 (forwards on even steps): t0 F0; t1 [SEND_F0]; t2 F1; t3 [RECV_B0] [SEND_F1] B0;
  // t5 [RECV_B1] B1. Rank 1: t1 [RECV_F0] F0; t2 B0; t3 [SEND_B0] [RECV_F1] F1; t4 B1;
  // t5 [SEND_B1].
  // rank 0: F0 [0,1]; SEND_F0 meets RECV_F0 (posted at 0), lands 1.5: F1 [1.5,2.5]; RECV_B0 meets
  //         SEND_B0 at 4.5, lands 5; only then SEND_F1, which meets RECV_F1 at 5, lands 5.5:
  //         B0 [5.5,7.5]; RECV_B1 meets SEND_B1 at 8.5, lands 9: B1 [9,11].
  // rank 1: F0 [1.5,2.5], B0 [2.5,4.5]; SEND_B0 lands 5; RECV_F1 lands 5.5: F1 [5.5,6.5],
  //         B1 [6.5,8.5].
  // Makespan 11 against Megatron's calls' 10.5 and the dataflow's 10: F1's output leaves rank 0
  // only after B0's gradient has arrived.
  const Schedule s = with_deepspeed_p2p(make_schedule("1f1b", ScheduleParams{2, 2, 0, 0}));
  REQUIRE(s.comm_waits);
  REQUIRE(s.comm[0].size() == 4);
  REQUIRE(s.comm[1].size() == 4);
  CHECK(s.comm[0][1].kind == CommKind::RecvB);  // RecvGrad before SendActivation at t3
  CHECK(s.comm[0][2].kind == CommKind::SendF);
  CHECK(s.comm[0][2].microbatch == 1);
  CHECK(s.comm[0][2].after == 2);
  for (const auto& rank : s.comm)
    for (const CommAction& c : rank) CHECK(c.new_call);
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.link.latency = U / 2;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == 11 * U);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.5, 2.5}, {0, "0B0", 5.5, 7.5}, {0, "0B1", 9, 11},
                               {1, "1F0", 1.5, 2.5}, {1, "1B0", 2.5, 4.5}, {1, "1F1", 5.5, 6.5}, {1, "1B1", 6.5, 8.5}});
}

TEST_CASE("DeepSpeed's p2p runtime: one call per transfer, 1F1B's compute order, other families refused", "[sim][engine][fidelity]") {
  // Stage s sends and receives 2M transfers with each neighbour it has: (s > 0) 2M + (s < P-1) 2M
  // calls; the compute order is unchanged; the run ends (no deadlock) at P=4 M=8 and P=5 M=3.
  for (auto [P, M] : {std::pair{4, 8}, std::pair{5, 3}, std::pair{3, 1}}) {
    const Schedule base = make_schedule("1f1b", ScheduleParams{P, M, 0, 0});
    const Schedule s = with_deepspeed_p2p(base);
    for (int r = 0; r < P; ++r) {
      CHECK(s.comm[static_cast<std::size_t>(r)].size() == static_cast<std::size_t>((r > 0 ? 2 * M : 0) + (r < P - 1 ? 2 * M : 0)));
      CHECK(s.ranks[static_cast<std::size_t>(r)] == base.ranks[static_cast<std::size_t>(r)]);
    }
    SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
    costs.link.latency = U / 2;
    const SimResult r = simulate(s, costs, {});
    // Never faster than the dataflow runtime on the same costs, and every op ran.
    CHECK(r.makespan() >= simulate(base, costs, {}).makespan());
    CHECK(r.ranks[0].busy == M * 3 * U);
  }
  CHECK_THROWS_AS(with_deepspeed_p2p(make_schedule("zb-h1", ScheduleParams{2, 4, 0, 0})), InputError);
  CHECK_THROWS_AS(with_deepspeed_p2p(make_schedule("interleaved-1f1b", ScheduleParams{2, 4, 2, 0})), InputError);
}

TEST_CASE("eager sends: a send no larger than SimCosts::eager_bytes does not wait for its receiver (hand-worked)", "[sim][engine][fidelity]") {
  // Megatron's 1F1B calls, P=3 M=2, F=1, B=2, latency 0.5 (the timeline of "1F1B's warm-up sends
  // and the next receives are two calls"), every transfer 1000 bytes. With eager sends:
  // rank 0: F0 [0,1]; SEND_F0 lands 1.5; F1 [1.5,2.5]; SEND_F1 starts at 2.5 without rank 1's
  //         RECV_F1 and lands 3 (it waited for 3 and landed 3.5); B0 [9,11], B1 [12.5,14.5] as before.
  // rank 1: F0 [1.5,2.5]; SEND_F0 lands 3; its RECV_F1, posted at 3, finds F1's output landed:
  //         F1 [3,4] (was [3.5,4.5]); SEND_F1 lands 4.5, long before rank 2 posts its receive (6);
  //         RECV_B0 still waits for rank 2's SEND_B0 (posted 6, lands 6.5): B0 [6.5,8.5], B1 [10,12].
  // rank 2: as before. Makespan 14.5 either way. A threshold one byte short: the rendezvous.
  const Schedule s = with_megatron_p2p(make_schedule("1f1b", ScheduleParams{3, 2, 0, 0}));
  SliceCosts sc = unit_costs(1, 2, 0);
  sc.act_bytes = sc.grad_bytes = 1000;
  SimCosts costs = uniform_costs(s.stages_per_pipe, sc);
  costs.link.latency = U / 2;
  SimOptions opt;
  opt.record_timeline = true;
  costs.eager_bytes = 1000;
  const SimResult e = simulate(s, costs, opt);
  CHECK(e.makespan() == 29 * U / 2);
  check_intervals(e.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.5, 2.5}, {0, "0B0", 9, 11}, {0, "0B1", 12.5, 14.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1F1", 3, 4}, {1, "1B0", 6.5, 8.5}, {1, "1B1", 10, 12},
                               {2, "2F0", 3, 4}, {2, "2B0", 4, 6}, {2, "2F1", 6.5, 7.5}, {2, "2B1", 7.5, 9.5}});
  costs.eager_bytes = 999;
  const SimResult r = simulate(s, costs, opt);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1.5, 2.5}, {0, "0B0", 9, 11}, {0, "0B1", 12.5, 14.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1F1", 3.5, 4.5}, {1, "1B0", 6.5, 8.5}, {1, "1B1", 10, 12},
                               {2, "2F0", 3, 4}, {2, "2B0", 4, 6}, {2, "2F1", 6.5, 7.5}, {2, "2B1", 7.5, 9.5}});
  CHECK(r.makespan() == 29 * U / 2);
  // DeepSpeed's order, P=4 M=8 with a latency: eager sends never make the step longer.
  const Schedule ds = with_deepspeed_p2p(make_schedule("1f1b", ScheduleParams{4, 8, 0, 0}));
  SimCosts dc = uniform_costs(ds.stages_per_pipe, sc);
  dc.link.latency = U / 2;
  const Time rendezvous = simulate(ds, dc, {}).makespan();
  dc.eager_bytes = 1000;
  CHECK(simulate(ds, dc, {}).makespan() <= rendezvous);
}

namespace {
// A rank's actions and comm actions merged in list order, in PyTorch's notation (its CSV row).
std::string merged_list(const Schedule& s, int r) {
  const std::vector<std::vector<std::string>> rows = schedule_tokens(s);
  std::string out;
  for (const std::string& tok : rows[static_cast<std::size_t>(r)]) out += (out.empty() ? "" : ",") + tok;
  return out;
}
}  // namespace

TEST_CASE("PyTorch's p2p runtime: its lowering of Interleaved1F1B, as its own runtime ran it on four GPUs", "[sim][engine][fidelity]") {
  // Each rank's PP: ranges in a PyTorch 2.11 profiler trace of ScheduleInterleaved1F1B (P = 4,
  // M = 8, two stages per rank; tools/experiments/record_pp_traces.py on four H200s, session 18): the order in
  // which its runtime issued computation, sends, receives and its FSDP-style actions. ppsim's
  // interleaved-1f1b order is PyTorch's at this size, and its lowering lists every action where
  // PyTorch's did (UNSHARD, REDUCE_GRAD and RESHARD take a round of the lowering each: without
  // them rank 3's 3RECV_B7 comes after its 3B5).
  const Schedule s = with_torch_p2p(make_schedule("interleaved-1f1b", ScheduleParams{4, 8, 2, 0}));
  CHECK(s.comm_in_order);
  CHECK(merged_list(s, 0) ==
        "0UNSHARD,4UNSHARD,0F0,0SEND_F0,4RECV_F0,0F1,0SEND_F1,4RECV_F1,0F2,0SEND_F2,4RECV_F2,0F3,0SEND_F3,4RECV_F3,4F0,"
        "4SEND_F0,4F1,4SEND_F1,4F2,4SEND_F2,4F3,4SEND_F3,0F4,0SEND_F4,0F5,0SEND_F5,4RECV_B0,0F6,0SEND_F6,4B0,4SEND_B0,"
        "4RECV_B1,0F7,0SEND_F7,4RECV_F4,4B1,4SEND_B1,4RECV_B2,4F4,4SEND_F4,4RECV_F5,4B2,4SEND_B2,4RECV_B3,4F5,4SEND_F5,"
        "4RECV_F6,4B3,4SEND_B3,0RECV_B0,4F6,4SEND_F6,4RECV_F7,0B0,0RECV_B1,4F7,4SEND_F7,0B1,0RECV_B2,0B2,0RECV_B3,0B3,"
        "4RECV_B4,4B4,4SEND_B4,4RECV_B5,4B5,4SEND_B5,4RECV_B6,4B6,4SEND_B6,4RECV_B7,4B7,4SEND_B7,4REDUCE_GRAD,4RESHARD,"
        "0RECV_B4,0B4,0RECV_B5,0B5,0RECV_B6,0B6,0RECV_B7,0B7,0REDUCE_GRAD,0RESHARD");
  CHECK(merged_list(s, 1) ==
        "1UNSHARD,5UNSHARD,1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,1RECV_F2,1F2,1SEND_F2,1RECV_F3,1F3,1SEND_F3,"
        "5RECV_F0,5F0,5SEND_F0,5RECV_F1,5F1,5SEND_F1,5RECV_F2,5F2,5SEND_F2,5RECV_F3,5F3,5SEND_F3,5RECV_B0,1RECV_F4,1F4,"
        "1SEND_F4,1RECV_F5,5B0,5SEND_B0,5RECV_B1,1RECV_F6,1F5,1SEND_F5,5B1,5SEND_B1,5RECV_B2,1RECV_F7,1F6,1SEND_F6,5B2,"
        "5SEND_B2,5RECV_B3,5RECV_F4,1F7,1SEND_F7,5B3,5SEND_B3,1RECV_B0,5RECV_F5,5F4,5SEND_F4,1B0,1SEND_B0,1RECV_B1,"
        "5RECV_F6,5F5,5SEND_F5,1B1,1SEND_B1,1RECV_B2,5RECV_F7,5F6,5SEND_F6,1B2,1SEND_B2,1RECV_B3,5F7,5SEND_F7,1B3,"
        "1SEND_B3,5RECV_B4,5B4,5SEND_B4,5RECV_B5,5B5,5SEND_B5,5RECV_B6,5B6,5SEND_B6,5RECV_B7,5B7,5SEND_B7,5REDUCE_GRAD,"
        "5RESHARD,1RECV_B4,1B4,1SEND_B4,1RECV_B5,1B5,1SEND_B5,1RECV_B6,1B6,1SEND_B6,1RECV_B7,1B7,1SEND_B7,1REDUCE_GRAD,"
        "1RESHARD");
  CHECK(merged_list(s, 2) ==
        "2UNSHARD,6UNSHARD,2RECV_F0,2F0,2SEND_F0,2RECV_F1,2F1,2SEND_F1,2RECV_F2,2F2,2SEND_F2,2RECV_F3,2F3,2SEND_F3,"
        "6RECV_F0,6F0,6SEND_F0,6RECV_F1,6F1,6SEND_F1,6RECV_B0,6RECV_F2,6F2,6SEND_F2,6RECV_F3,6B0,6SEND_B0,6RECV_B1,"
        "2RECV_F4,6F3,6SEND_F3,6B1,6SEND_B1,6RECV_B2,2RECV_F5,2F4,2SEND_F4,6B2,6SEND_B2,6RECV_B3,2RECV_F6,2F5,2SEND_F5,"
        "6B3,6SEND_B3,2RECV_B0,2RECV_F7,2F6,2SEND_F6,2B0,2SEND_B0,2RECV_B1,6RECV_F4,2F7,2SEND_F7,2B1,2SEND_B1,2RECV_B2,"
        "6RECV_F5,6F4,6SEND_F4,2B2,2SEND_B2,2RECV_B3,6RECV_F6,6F5,6SEND_F5,2B3,2SEND_B3,6RECV_B4,6RECV_F7,6F6,6SEND_F6,"
        "6B4,6SEND_B4,6RECV_B5,6F7,6SEND_F7,6B5,6SEND_B5,6RECV_B6,6B6,6SEND_B6,6RECV_B7,6B7,6SEND_B7,6REDUCE_GRAD,"
        "6RESHARD,2RECV_B4,2B4,2SEND_B4,2RECV_B5,2B5,2SEND_B5,2RECV_B6,2B6,2SEND_B6,2RECV_B7,2B7,2SEND_B7,2REDUCE_GRAD,"
        "2RESHARD");
  CHECK(merged_list(s, 3) ==
        "3UNSHARD,7UNSHARD,3RECV_F0,3F0,3SEND_F0,3RECV_F1,3F1,3SEND_F1,3RECV_F2,3F2,3SEND_F2,3RECV_F3,3F3,3SEND_F3,"
        "7RECV_F0,7F0,7RECV_F1,7B0,7SEND_B0,7RECV_F2,7F1,7B1,7SEND_B1,7RECV_F3,7F2,7B2,7SEND_B2,3RECV_F4,7F3,3RECV_B0,"
        "7B3,7SEND_B3,3RECV_F5,3F4,3SEND_F4,3RECV_B1,3B0,3SEND_B0,3RECV_F6,3F5,3SEND_F5,3RECV_B2,3B1,3SEND_B1,3RECV_F7,"
        "3F6,3SEND_F6,3RECV_B3,3B2,3SEND_B2,7RECV_F4,3F7,3SEND_F7,3B3,3SEND_B3,7RECV_F5,7F4,7B4,7SEND_B4,7RECV_F6,7F5,"
        "7B5,7SEND_B5,7RECV_F7,7F6,3RECV_B4,7B6,7SEND_B6,7F7,3RECV_B5,7B7,7SEND_B7,3RECV_B6,7REDUCE_GRAD,7RESHARD,"
        "3RECV_B7,3B4,3SEND_B4,3B5,3SEND_B5,3B6,3SEND_B6,3B7,3SEND_B7,3REDUCE_GRAD,3RESHARD");
  // Two more orders PyTorch ran (the same runs, the same four GPUs), which ppsim generates as
  // PyTorch does: Interleaved1F1B with four stages per rank, where only three stay unsharded at
  // once (RESHARD and UNSHARD as the window moves), and ZBVZeroBubble (V-shaped, I and W apart).
  const Schedule v4 = with_torch_p2p(make_schedule("interleaved-1f1b", ScheduleParams{4, 8, 4, 0}));
  CHECK(merged_list(v4, 3) ==
        "3UNSHARD,7UNSHARD,11UNSHARD,3RECV_F0,3F0,3SEND_F0,3RECV_F1,3F1,3SEND_F1,3RECV_F2,3F2,3SEND_F2,3RECV_F3,3F3,"
        "3SEND_F3,3RESHARD,15UNSHARD,7RECV_F0,7F0,7SEND_F0,7RECV_F1,7F1,7SEND_F1,7RECV_F2,7F2,7SEND_F2,7RECV_F3,7F3,"
        "7SEND_F3,7RESHARD,3UNSHARD,11RECV_F0,11F0,11SEND_F0,11RECV_F1,11F1,11SEND_F1,11RECV_F2,11F2,11SEND_F2,"
        "11RECV_F3,11F3,11SEND_F3,15RECV_F0,15F0,15RECV_F1,15B0,15SEND_B0,15RECV_F2,15F1,15B1,15SEND_B1,15RECV_F3,15F2,"
        "15B2,15SEND_B2,3RECV_F4,15F3,11RECV_B0,15B3,15SEND_B3,3RECV_F5,15RESHARD,7UNSHARD,3F4,3SEND_F4,11RECV_B1,11B0,"
        "11SEND_B0,3RECV_F6,3F5,3SEND_F5,11RECV_B2,11B1,11SEND_B1,3RECV_F7,3F6,3SEND_F6,11RECV_B3,11B2,11SEND_B2,"
        "7RECV_F4,3F7,3SEND_F7,7RECV_B0,11B3,11SEND_B3,7RECV_F5,7F4,7SEND_F4,7RECV_B1,7B0,7SEND_B0,7RECV_F6,7F5,"
        "7SEND_F5,7RECV_B2,7B1,7SEND_B1,7RECV_F7,7F6,7SEND_F6,7RECV_B3,7B2,7SEND_B2,11RECV_F4,7F7,7SEND_F7,3RECV_B0,7B3,"
        "7SEND_B3,11RECV_F5,7RESHARD,15UNSHARD,11F4,11SEND_F4,3RECV_B1,3B0,3SEND_B0,11RECV_F6,11F5,11SEND_F5,3RECV_B2,"
        "3B1,3SEND_B1,11RECV_F7,11F6,11SEND_F6,3RECV_B3,3B2,3SEND_B2,15RECV_F4,11F7,11SEND_F7,3B3,3SEND_B3,15RECV_F5,"
        "3RESHARD,7UNSHARD,15F4,15B4,15SEND_B4,15RECV_F6,15F5,15B5,15SEND_B5,15RECV_F7,15F6,15B6,15SEND_B6,15F7,"
        "11RECV_B4,15B7,15SEND_B7,11RECV_B5,15REDUCE_GRAD,11RECV_B6,15RESHARD,11RECV_B7,3UNSHARD,11B4,11SEND_B4,11B5,"
        "11SEND_B5,11B6,11SEND_B6,7RECV_B4,11B7,11SEND_B7,7RECV_B5,11REDUCE_GRAD,7RECV_B6,11RESHARD,7RECV_B7,7B4,"
        "7SEND_B4,7B5,7SEND_B5,7B6,7SEND_B6,3RECV_B4,7B7,7SEND_B7,3RECV_B5,7REDUCE_GRAD,3RECV_B6,7RESHARD,3RECV_B7,3B4,"
        "3SEND_B4,3B5,3SEND_B5,3B6,3SEND_B6,3B7,3SEND_B7,3REDUCE_GRAD,3RESHARD");
  const Schedule zbv = with_torch_p2p(make_schedule("zbv", ScheduleParams{4, 8, 0, 0}));
  CHECK(merged_list(zbv, 0) ==
        "0UNSHARD,7UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0F3,0SEND_F3,0F4,0SEND_F4,0F5,0SEND_F5,7RECV_F0,0F6,"
        "0SEND_F6,7F0,7RECV_F1,7I0,7SEND_B0,7W0,7F1,7RECV_F2,7I1,7SEND_B1,7W1,7F2,7RECV_F3,7I2,7SEND_B2,7W2,7F3,7I3,"
        "7SEND_B3,0RECV_B0,7W3,0F7,0SEND_F7,7RECV_F4,0I0,0W0,7F4,7I4,7SEND_B4,0RECV_B1,7W4,0I1,7RECV_F5,0W1,7F5,7I5,"
        "7SEND_B5,0RECV_B2,7W5,0I2,7RECV_F6,0W2,7F6,7I6,7SEND_B6,0RECV_B3,7W6,0I3,7RECV_F7,0W3,7F7,7I7,7SEND_B7,"
        "0RECV_B4,7W7,7REDUCE_GRAD,0RECV_B5,7RESHARD,0I4,0RECV_B6,0W4,0I5,0RECV_B7,0W5,0I6,0W6,0I7,0W7,0REDUCE_GRAD,"
        "0RESHARD");
  CHECK(merged_list(zbv, 3) ==
        "3UNSHARD,4UNSHARD,3RECV_F0,3F0,3RECV_F1,4F0,4SEND_F0,3RECV_F2,3F1,4F1,4SEND_F1,3RECV_F3,3F2,4F2,4SEND_F2,"
        "3RECV_F4,3F3,4F3,4SEND_F3,4RECV_B0,4I0,4W0,3F4,4RECV_B1,3I0,3SEND_B0,3W0,3RECV_F5,4F4,4SEND_F4,4I1,4W1,3F5,"
        "4RECV_B2,3I1,3SEND_B1,3W1,3RECV_F6,4F5,4SEND_F5,4I2,4W2,3F6,4RECV_B3,3I2,3SEND_B2,3W2,3RECV_F7,4F6,4SEND_F6,"
        "4I3,4W3,3F7,4RECV_B4,3I3,3SEND_B3,3W3,4F7,4SEND_F7,4I4,4W4,4RECV_B5,3I4,3SEND_B4,4I5,3I5,3SEND_B5,4RECV_B6,4I6,"
        "3I6,3SEND_B6,4RECV_B7,4I7,3I7,3SEND_B7,3W4,4W5,4W6,4W7,4REDUCE_GRAD,4RESHARD,3W5,3W6,3W7,3REDUCE_GRAD,3RESHARD");
  // DualPipeV (a third call): its F&B pairs are PyTorch's OVERLAP_F_B, placed once both ops'
  // inputs are there, each op's send after the pair.
  const Schedule dv = with_torch_p2p(make_schedule("dualpipev", ScheduleParams{4, 8, 0, 0}));
  CHECK(merged_list(dv, 0) ==
        "0UNSHARD,7UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0F2,0SEND_F2,0F3,0SEND_F3,0F4,0SEND_F4,0F5,0SEND_F5,7RECV_F0,0F6,"
        "0SEND_F6,7F0,7RECV_F1,7I0,7SEND_B0,7W0,7F1,7RECV_F2,7I1,7SEND_B1,7W1,7F2,7RECV_F3,7I2,7SEND_B2,7W2,7RECV_F4,"
        "0RECV_B0,7F3,(0F7;7B3)OVERLAP_F_B,0SEND_F7,7SEND_B3,(7F4;0B0)OVERLAP_F_B,7RECV_F5,0RECV_B1,7B4,7SEND_B4,"
        "(7F5;0B1)OVERLAP_F_B,7RECV_F6,0RECV_B2,7B5,7SEND_B5,(7F6;0B2)OVERLAP_F_B,7RECV_F7,0RECV_B3,7B6,7SEND_B6,"
        "(7F7;0B3)OVERLAP_F_B,0RECV_B4,7B7,7SEND_B7,7REDUCE_GRAD,0RECV_B5,7RESHARD,0I4,0W4,0I5,0RECV_B6,0W5,0I6,"
        "0RECV_B7,0W6,0I7,0W7,0REDUCE_GRAD,0RESHARD");
  CHECK(merged_list(dv, 2) ==
        "2UNSHARD,5UNSHARD,2RECV_F0,2F0,2SEND_F0,2RECV_F1,2F1,2SEND_F1,5RECV_F0,2RECV_F2,2F2,2SEND_F2,2RECV_F3,5F0,"
        "5SEND_F0,5RECV_F1,2RECV_F4,2F3,2SEND_F3,5F1,5SEND_F1,5RECV_F2,2RECV_F5,2F4,2SEND_F4,5F2,5SEND_F2,5RECV_F3,"
        "5RECV_B0,5I0,5SEND_B0,5W0,5F3,5SEND_F3,5RECV_F4,2RECV_B0,5RECV_B1,(2F5;5B1)OVERLAP_F_B,2SEND_F5,5SEND_B1,"
        "(5F4;2B0)OVERLAP_F_B,5SEND_F4,2SEND_B0,5RECV_F5,2RECV_B1,2RECV_F6,5RECV_B2,(2F6;5B2)OVERLAP_F_B,2SEND_F6,"
        "5SEND_B2,(5F5;2B1)OVERLAP_F_B,5SEND_F5,2SEND_B1,5RECV_F6,2RECV_B2,2RECV_F7,5RECV_B3,(2F7;5B3)OVERLAP_F_B,"
        "2SEND_F7,5SEND_B3,(5F6;2B2)OVERLAP_F_B,5SEND_F6,2SEND_B2,5RECV_F7,2RECV_B3,5RECV_B4,5B4,5SEND_B4,"
        "(5F7;2B3)OVERLAP_F_B,5SEND_F7,2SEND_B3,2RECV_B4,5RECV_B5,5B5,5SEND_B5,2B4,2SEND_B4,2RECV_B5,5RECV_B6,5B6,"
        "5SEND_B6,2I5,2SEND_B5,2RECV_B6,5RECV_B7,5I7,5SEND_B7,2I6,2SEND_B6,2RECV_B7,2W5,2I7,2SEND_B7,5W7,5REDUCE_GRAD,"
        "5RESHARD,2W6,2W7,2REDUCE_GRAD,2RESHARD");
  // Two pipes are refused.
  CHECK_THROWS_AS(with_torch_p2p(make_schedule("dualpipe", ScheduleParams{4, 8, 0, 0})), InputError);
  CHECK_THROWS_AS(with_torch_p2p(make_schedule("chimera", ScheduleParams{4, 8, 0, 0})), InputError);
}

TEST_CASE("PyTorch's p2p runtime: one stream per rank, a receive posted early holds the sends behind it (hand-worked)", "[sim][engine][fidelity]") {
  // interleaved-1f1b P=2 M=2 (v = 2: rank 0 holds stages 0 and 2, rank 1 stages 1 and 3), F=1,
  // B=2, latency 0.5. The lowering (rounds, rank 0 first):
  //   rank 0: 0F0 0SEND_F0 2RECV_F0 0F1 0SEND_F1 2RECV_F1 2F0 2SEND_F0 2F1 2SEND_F1 2RECV_B0 2B0
  //           2SEND_B0 2RECV_B1 2B1 2SEND_B1 2REDUCE_GRAD 0RECV_B0 0B0 0RECV_B1 0B1 0REDUCE_GRAD
  //   rank 1: 1RECV_F0 1F0 1SEND_F0 1RECV_F1 1F1 1SEND_F1 3RECV_F0 3F0 3RECV_F1 3B0 3SEND_B0
  //           1RECV_B0 3F1 3B1 3SEND_B1 1RECV_B1 3REDUCE_GRAD 1B0 1SEND_B0 1B1 1SEND_B1 1REDUCE_GRAD
  // (a REDUCE_GRAD after each stage's last backward takes a round, and no time here: no DP).
  // A comm action starts after the compute listed before it and the comm action before it on its
  // rank; a transfer runs when its producer has ended and both its sides have started, and ends
  // both. rank 0: 0F0 [0,1], 0F1 [1,2]; 0SEND_F0 meets 1RECV_F0 at 1, lands 1.5; 2RECV_F0 starts
  // 1.5, meets 1SEND_F0 at 2.5 (after 1F0 [1.5,2.5]), lands 3: 2F0 [3,4]; 0SEND_F1 and 1RECV_F1
  // start at 3, land 3.5: 1F1 [3.5,4.5]; 2RECV_F1 (3.5) meets 1SEND_F1 at 4.5, lands 5: 2F1 [5,6];
  // 2SEND_F0 and 3RECV_F0 at 5, land 5.5: 3F0 [5.5,6.5], 3B0 [6.5,8.5]; 2SEND_F1 (6) meets
  // 3RECV_F1 (6.5), lands 7; 2RECV_B0 (7) meets 3SEND_B0 (8.5), lands 9: 3F1 [8.5,9.5], 2B0
  // [9,11], 3B1 [9.5,11.5]; 1RECV_B0 (9) meets 2SEND_B0 (11), lands 11.5: 1B0 [11.5,13.5];
  // 3SEND_B1, behind 1RECV_B0, starts 11.5 with 2RECV_B1, lands 12: 2B1 [12,14]; 1RECV_B1 (12)
  // meets 2SEND_B1 (14), lands 14.5: 1B1 [14.5,16.5]; 0RECV_B0 and 1SEND_B0 at 14.5, land 15:
  // 0B0 [15,17]; 1SEND_B1 (16.5) meets 0RECV_B1 (17), lands 17.5: 0B1 [17.5,19.5].
  // Makespan 19.5 against the dataflow runtime's 18 on the same costs.
  const Schedule base = make_schedule("interleaved-1f1b", ScheduleParams{2, 2, 2, 0});
  const Schedule s = with_torch_p2p(base);
  CHECK(merged_list(s, 0) == "0UNSHARD,2UNSHARD,0F0,0SEND_F0,2RECV_F0,0F1,0SEND_F1,2RECV_F1,2F0,2SEND_F0,2F1,2SEND_F1,2RECV_B0,2B0,"
                             "2SEND_B0,2RECV_B1,2B1,2SEND_B1,2REDUCE_GRAD,2RESHARD,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD");
  CHECK(merged_list(s, 1) == "1UNSHARD,3UNSHARD,1RECV_F0,1F0,1SEND_F0,1RECV_F1,1F1,1SEND_F1,3RECV_F0,3F0,3RECV_F1,3B0,3SEND_B0,"
                             "1RECV_B0,3F1,3B1,3SEND_B1,1RECV_B1,3REDUCE_GRAD,3RESHARD,1B0,1SEND_B0,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD");
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  costs.link.latency = U / 2;
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, costs, opt);
  CHECK(r.makespan() == 39 * U / 2);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {0, "2F0", 3, 4}, {0, "2F1", 5, 6}, {0, "2B0", 9, 11},
                               {0, "2B1", 12, 14}, {0, "0B0", 15, 17}, {0, "0B1", 17.5, 19.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1F1", 3.5, 4.5}, {1, "3F0", 5.5, 6.5}, {1, "3B0", 6.5, 8.5},
                               {1, "3F1", 8.5, 9.5}, {1, "3B1", 9.5, 11.5}, {1, "1B0", 11.5, 13.5}, {1, "1B1", 14.5, 16.5}});
  CHECK(simulate(base, costs, {}).makespan() == 18 * U);
  // Eager sends do not apply: every transfer waits for both of its sides' turns.
  costs.eager_bytes = 1 << 20;
  CHECK(simulate(s, costs, {}).makespan() == 39 * U / 2);
}

TEST_CASE("PyTorch's single-stage schedules: Schedule1F1B and ScheduleGPipe, hand-worked", "[sim][engine][fidelity]") {
  // P=2 M=2, F=1, B=2, latency 0.5. Schedule1F1B's calls (schedules/torch_p2p.h): rank 0 (two
  // warm-up forwards) F0, [SEND_F0], F1, [SEND_F1 + RECV_B0] (one batch), B0, [RECV_B1], B1;
  // rank 1 [RECV_F0], F0, B0, [SEND_B0 + RECV_F1], F1, B1, [SEND_B1]. Batches run one at a time
  // per rank, each after the compute before it; the compute after a batch waits for all of it.
  // rank 0: F0 [0,1]; SEND_F0 meets RECV_F0 at 1, lands 1.5; F1 [1,2]. rank 1: F0 [1.5,2.5], B0
  // [2.5,4.5], then posts SEND_B0 + RECV_F1 at 4.5: rank 0's batch (posted at 2) meets it, both
  // land at 5: rank 1's F1 [5,6] (the dataflow runtime's starts at 4.5: its receive was not posted
  // before B0 ended), B1 [6,8]; rank 0's B0 [5,7]; RECV_B1 posted at 7 meets SEND_B1 at 8, lands
  // 8.5: B1 [8.5,10.5]. Makespan 10.5 against the dataflow runtime's 10.
  const Schedule base = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  const Schedule s = with_torch_p2p(base);
  REQUIRE(s.comm_in_order);
  CHECK(merged_list(s, 0) == "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1");
  CHECK(merged_list(s, 1) == "1RECV_F0,1F0,1B0,1SEND_B0,1RECV_F1,1F1,1B1,1SEND_B1");
  // The fused batches: the second action joins the first; SEND_F0 holds rank 0's B0 (index 2).
  CHECK(s.comm[0][1].new_call);
  CHECK_FALSE(s.comm[0][2].new_call);
  CHECK(s.comm[0][0].waited_by == 2);
  CHECK(s.comm[0][1].waited_by == 2);
  CHECK(s.comm[1][3].waited_by == CommAction::kNotWaited);  // the last send: waited on at the step's end
  const SimCosts costs = half_latency_costs(s);
  const SimResult r = with_timeline(s, costs);
  CHECK(r.makespan() == 21 * U / 2);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {0, "0B0", 5, 7}, {0, "0B1", 8.5, 10.5},
                               {1, "1F0", 1.5, 2.5}, {1, "1B0", 2.5, 4.5}, {1, "1F1", 5, 6}, {1, "1B1", 6, 8}});
  CHECK(simulate(base, costs, {}).makespan() == 10 * U);
  // PyTorch's runtime (PP: ranges, a lowered order) on the same order posts RECV_F1 early: 10.
  CHECK(simulate(with_torch_p2p(base, TorchRuntime::multi_stage), costs, {}).makespan() == 10 * U);

  // ScheduleGPipe: a receive before and a send after each action; the forward sends are waited
  // on before the first backward. rank 0: F0 [0,1], SEND_F0 lands 1.5, F1 [1,2], SEND_F1 posted
  // at 2. rank 1: F0 [1.5,2.5]; RECV_F1 posted at 2.5 (after F0), lands 3: F1 [3,4], B0 [4,6],
  // SEND_B0 at 6, B1 [6,8], SEND_B1 at 8. rank 0: RECV_B0 posted at 3 (after SEND_F1 landed),
  // lands 6.5: B0 [6.5,8.5]; RECV_B1 posted at 8.5 meets SEND_B1 (8), lands 9: B1 [9,11].
  const Schedule gbase = make_schedule("gpipe", ScheduleParams{2, 2, 0, 0});
  const Schedule g = with_torch_p2p(gbase);
  CHECK(merged_list(g, 0) == "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1");
  CHECK(merged_list(g, 1) == "1RECV_F0,1F0,1RECV_F1,1F1,1B0,1SEND_B0,1B1,1SEND_B1");
  const SimResult gr = with_timeline(g, costs);
  CHECK(gr.makespan() == 11 * U);
  check_intervals(gr.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {0, "0B0", 6.5, 8.5}, {0, "0B1", 9, 11},
                                {1, "1F0", 1.5, 2.5}, {1, "1F1", 3, 4}, {1, "1B0", 4, 6}, {1, "1B1", 6, 8}});
  CHECK(simulate(gbase, costs, {}).makespan() == 10 * U);
  // Other orders are not a single-stage schedule's.
  CHECK_THROWS_AS(with_torch_p2p(make_schedule("interleaved-1f1b", ScheduleParams{2, 4, 2, 0}), TorchRuntime::single_stage),
                  InputError);
  CHECK_THROWS_AS(with_torch_p2p(make_schedule("zb-h1", ScheduleParams{2, 4, 0, 0}), TorchRuntime::single_stage), InputError);
}

TEST_CASE("PyTorch's single-stage schedules: as many NCCL calls per rank as PyTorch 2.11's own traces", "[sim][engine][fidelity]") {
  // Each batch is one ncclDevKernel_SendRecv. Schedule1F1B, stage r of N with w = min(M, N - r)
  // warm-up forwards: a middle rank receives w, sends w - 1 in the warm-up, makes M - w + 1
  // forward-send + backward-receive batches and M - w backward-send + forward-receive ones, one
  // backward send after the loop and a receive and a send for each of the w - 1 cool-down
  // backwards: 2M + 2w - 1. The first rank: w - 1 + (M - w + 1) + (w - 1) = M + w - 1; the last
  // (w = 1): 1 + (M - 1) + 1 = M + 1. ScheduleGPipe: a send and a receive per action, 2M at the
  // ends, 4M between. Four H200s, tools/experiments/record_pp_traces.py (docs/FIDELITY.md): 11 21 19 9 at
  // M = 8, 19 37 35 17 at M = 16; GPipe 16 32 32 16 and 32 64 64 32; two H200s, 1F1B at M = 4: 5 5.
  auto batches = [](const Schedule& s, int r) {
    int n = 0;
    for (const CommAction& c : s.comm[static_cast<std::size_t>(r)]) n += c.new_call ? 1 : 0;
    return n;
  };
  auto one_f_one_b = [](int N, int M, int r) {
    const int w = std::min(M, N - r);
    return r == 0 ? M + w - 1 : r == N - 1 ? M + 1 : 2 * M + 2 * w - 1;
  };
  for (const auto& [N, M] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{2, 4}, std::pair{8, 8}, std::pair{8, 24}}) {
    const Schedule s = with_torch_p2p(make_schedule("1f1b", ScheduleParams{N, M, 0, 0}));
    const Schedule g = with_torch_p2p(make_schedule("gpipe", ScheduleParams{N, M, 0, 0}));
    for (int r = 0; r < N; ++r) {
      CHECK(batches(s, r) == one_f_one_b(N, M, r));
      CHECK(batches(g, r) == (r == 0 || r == N - 1 ? 2 * M : 4 * M));
    }
  }
  const std::vector<int> m8{11, 21, 19, 9}, m16{19, 37, 35, 17};
  const Schedule s8 = with_torch_p2p(make_schedule("1f1b", ScheduleParams{4, 8, 0, 0}));
  const Schedule s16 = with_torch_p2p(make_schedule("1f1b", ScheduleParams{4, 16, 0, 0}));
  for (int r = 0; r < 4; ++r) {
    CHECK(batches(s8, r) == m8[static_cast<std::size_t>(r)]);
    CHECK(batches(s16, r) == m16[static_cast<std::size_t>(r)]);
  }
}

TEST_CASE("a replay: each action at its own measured time (SimCosts::action_time, hand-worked)", "[sim][engine]") {
  // 1f1b P=2 M=2, F=1, B=2, links free: rank 0 F0 [0,1] F1 [1,2]; rank 1 F0 [1,2] B0 [2,4] F1 [4,5]
  // B1 [5,7]; rank 0 B0 [4,6] B1 [7,9]: 9. Rank 1's B0 as it ran, 4: it ends at 6, its F1 [6,7],
  // B1 [7,9]; rank 0's B0 [6,8], B1 [9,11]: 11. A negative entry keeps the slice's cost.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 2, 0, 0});
  SimCosts costs = uniform_costs(s.stages_per_pipe, unit_costs(1, 2, 0));
  CHECK(simulate(s, costs).makespan() == 9 * U);
  costs.action_time = {{-1, -1, -1, -1}, {-1, 4 * U, -1, -1}};
  const SimResult r = with_timeline(s, costs);
  CHECK(r.makespan() == 11 * U);
  check_intervals(r.timeline, {{0, "0F0", 0, 1}, {0, "0F1", 1, 2}, {0, "0B0", 6, 8}, {0, "0B1", 9, 11},
                               {1, "1F0", 1, 2}, {1, "1B0", 2, 6}, {1, "1F1", 6, 7}, {1, "1B1", 7, 9}});
  costs.action_time = {{-1, -1, -1, -1}};  // one rank's list for two ranks
  CHECK_THROWS(simulate(s, costs));
}
