// The co-run model (api/gpu_costs.h): ops stretched while a rank on another GPU computes beside
// them. Expected figures are worked out by hand on a two-rank GPipe timeline.
#include <array>

#include "api/gpu_costs.h"
#include "catch.h"
#include "core/timeline.h"
#include "schedules/registry.h"
#include "sim/costs.h"
#include "sim/engine.h"

using namespace ppsim;

namespace {

Interval compute(int rank, Time start, Time end) {
  Interval iv;
  iv.rank = rank;
  iv.start = start;
  iv.end = end;
  return iv;
}

// Each compute interval of rank r in `t`, as (start, end), in order.
std::vector<std::pair<Time, Time>> spans(const Timeline& t, int r) {
  std::vector<std::pair<Time, Time>> out;
  for (const Interval& iv : t.intervals)
    if (iv.rank == r && iv.stream == Stream::Compute) out.push_back({iv.start, iv.end});
  return out;
}

// GPipe, P = 2, M = 2; F = 100, B = 200 (all input-grad: W = 0); transfers free.
Schedule gpipe() { return make_schedule("gpipe", ScheduleParams{2, 2, 0, 0}); }
SimCosts gpipe_costs(Time w = 0) {
  SliceCosts sc;
  sc.f = 100;
  sc.b = 200;
  sc.w = w;
  return uniform_costs(2, sc);
}

}  // namespace

TEST_CASE("peer_busy_share: the share of each action while another GPU computes", "[api][corun]") {
  Timeline t;
  t.pp = 2;
  // rank 0: [0,100) [120,220); rank 1: [50,150) [200,300)
  t.intervals = {compute(0, 0, 100), compute(1, 50, 150), compute(0, 120, 220), compute(1, 200, 300)};
  const auto phi = api::peer_busy_share(t, 2, {});
  REQUIRE(phi.size() == 2u);
  REQUIRE(phi[0].size() == 2u);
  CHECK(phi[0][0] == Approx(50.0 / 100));           // [50,100) of [0,100)
  CHECK(phi[0][1] == Approx((30.0 + 20.0) / 100));  // [120,150) and [200,220) of [120,220)
  CHECK(phi[1][0] == Approx((50.0 + 30.0) / 100));  // [50,100) and [120,150) of [50,150)
  CHECK(phi[1][1] == Approx(20.0 / 100));           // [200,220) of [200,300)
  // Both ranks on one GPU: neither has another GPU beside it.
  const auto same = api::peer_busy_share(t, 2, {0, 0});
  for (const auto& r : same)
    for (double p : r) CHECK(p == 0.0);
}

TEST_CASE("simulate_corun stretches the ops that overlap the other GPU's work", "[api][corun]") {
  // gpipe(): P = 2, M = 2, F = 100, B = 200, W = 0. Plain: rank 0 F0 [0,100) F1 [100,200); rank 1
  // F0 [100,200) F1 [200,300) B0 [300,500) B1 [500,700); rank 0 B0 [500,700) B1 [700,900). Beside
  // the other GPU: rank 0's F1 and rank 1's F0 (both [100,200)), rank 1's B1 and rank 0's B0 (both
  // [500,700)).
  const Schedule s = gpipe();
  const SimCosts c = gpipe_costs();
  api::CorunFactors f;
  f.busy = {1.2, 1.1, 1.0};  // F 20% longer beside the other GPU's work, I 10%
  const api::CorunResult r = api::simulate_corun(s, c, f);
  // Stretched: F1 and F0 [100,220); rank 1's F1 [220,320) (rank 0 idle), B0 [320,520); B1 and
  // rank 0's B0 [520,740) (200 * 1.1); rank 0's B1 [740,940). The same actions overlap again: a
  // fixed point after one round.
  CHECK(r.result.makespan() == 940);
  CHECK(spans(r.result.timeline, 0) ==
        std::vector<std::pair<Time, Time>>{{0, 100}, {100, 220}, {520, 740}, {740, 940}});
  CHECK(spans(r.result.timeline, 1) ==
        std::vector<std::pair<Time, Time>>{{100, 220}, {220, 320}, {320, 520}, {520, 740}});
  CHECK(r.rounds == 1);
  REQUIRE(r.factor.size() == 2u);
  CHECK(r.factor[0] == std::vector<double>{1.0, 1.2, 1.1, 1.0});
  CHECK(r.factor[1][0] == Approx(1.2));
  CHECK(r.factor[1][3] == Approx(1.1));
  CHECK(r.busy_share[1][1] == 0.0);
  // Idle and busy alike at 1: the plain simulation, 900.
  CHECK(api::simulate_corun(s, c, api::CorunFactors{}).result.makespan() == simulate(s, c).makespan());
  CHECK(simulate(s, c).makespan() == 900);
  // An idle factor stretches the actions with the other GPU idle too: rank 0's F0 [0,105) and
  // rank 1's F1 [225,330) at 1.05 each put 5 more on the critical path: 950.
  api::CorunFactors g = f;
  g.idle = {1.05, 1.0, 1.0};
  CHECK(api::simulate_corun(s, c, g).result.makespan() == 950);
  // A B with a weight-grad part: W = 50 of B = 200, so B's mix is I 0.75, W 0.25 and beside the
  // other GPU it takes 200 (0.75 * 1.1 + 0.25 * 1.0) = 215: rank 1's B1 and rank 0's B0 [520,735),
  // rank 0's B1 [735,935).
  const api::CorunResult rw = api::simulate_corun(s, gpipe_costs(50), f);
  CHECK(rw.result.makespan() == 935);
  CHECK(rw.factor[1][3] == Approx(1.075));
}

TEST_CASE("factors_at_duty: piecewise linear between the measured duties, clamped at the ends", "[api][corun]") {
  const std::array<double, 3> fixed{1.5, 1.5, 1.5};
  // Levels in any order: duty 1.0 at 1.08 / 1.09 / 1.04, 0.7 at 1.00 / 1.03 / 1.01, 0.85 at 1.05 / 1.06 / 1.02.
  const std::vector<api::CorunLevel> levels = {
      {1.0, {1.08, 1.09, 1.04}}, {0.7, {1.00, 1.03, 1.01}}, {0.85, {1.05, 1.06, 1.02}}};
  CHECK(api::factors_at_duty({}, fixed, 0.8) == fixed);  // no levels: the fixed factors at any duty
  // 0.8 lies 2/3 of the way from 0.7 to 0.85: 1.00 + (2/3) 0.05, 1.03 + (2/3) 0.03, 1.01 + (2/3) 0.01.
  const auto mid = api::factors_at_duty(levels, fixed, 0.8);
  CHECK(mid[0] == Approx(1.0 + 2.0 / 3 * 0.05));
  CHECK(mid[1] == Approx(1.03 + 2.0 / 3 * 0.03));
  CHECK(mid[2] == Approx(1.01 + 2.0 / 3 * 0.01));
  // 0.925 halfway between 0.85 and 1.0.
  CHECK(api::factors_at_duty(levels, fixed, 0.925)[0] == Approx((1.05 + 1.08) / 2));
  // On a level: its factors; outside the levels: the nearest end's.
  CHECK(api::factors_at_duty(levels, fixed, 0.85)[1] == Approx(1.06));
  CHECK(api::factors_at_duty(levels, fixed, 0.3) == std::array<double, 3>{1.00, 1.03, 1.01});
  CHECK(api::factors_at_duty(levels, fixed, 1.2) == std::array<double, 3>{1.08, 1.09, 1.04});
}

TEST_CASE("device_duty: each GPU's compute time over the timeline's span", "[api][corun]") {
  Timeline t;
  t.pp = 2;
  // rank 0: [0,100) [120,220); rank 1: [50,150) [200,300); the span [0,300).
  t.intervals = {compute(0, 0, 100), compute(1, 50, 150), compute(0, 120, 220), compute(1, 200, 300)};
  const auto d = api::device_duty(t, 2, {});
  CHECK(d == std::vector<double>{200.0 / 300, 200.0 / 300});
  // Both ranks on one GPU: it computes over [0,300) but for nothing: 1.
  CHECK(api::device_duty(t, 2, {0, 0}) == std::vector<double>{1.0, 1.0});
  t.end = 400;  // a recorded span wins: [0,400)
  CHECK(api::device_duty(t, 2, {})[0] == Approx(200.0 / 400));
}

TEST_CASE("simulate_corun takes each rank's factors at its own duty, to a fixed point", "[api][corun]") {
  // The GPipe case above (P = 2, M = 2, F = 100, B = 200, W = 0, transfers free); busy factors 1,
  // F beside the idle GPU by duty: 1.0 at duty 0.5, 1.5 at duty 1.0, so f(d) = 0.5 + d between.
  const Schedule s = gpipe();
  const SimCosts c = gpipe_costs();
  api::CorunFactors f;
  f.idle = {9, 9, 9};  // never used: the levels replace them
  f.idle_by_duty = {{1.0, {1.5, 1.0, 1.0}}, {0.5, {1.0, 1.0, 1.0}}};
  // With rank 0's F0 and rank 1's F1 at 100k (the other GPU idle: phi 0) and every other action
  // as alone (phi 1, or I at 1): rank 0 F0 [0,100k) F1 [100k,100k+100); rank 1 F0 likewise, F1
  // [100k+100, 200k+100), B0, B1 to 200k+500; rank 0's B0, B1 to 200k+700. Each rank computes
  // 100k + 500 of the span 200k + 700.
  // Round 1 at the plain timeline's duty 600/900: k = 0.5 + 2/3, F0 = llround(116.67) = 117, span 934.
  // Round 2 at duty 617/934 = 0.6606: k = 1.1606, F0 = 116, span 932, duty 616/932 = 0.6609,
  // moved by 0.0003 (< 0.001): done. (The fixed point: 4k^2 + 10k - 17 = 0, k = 1.1609.)
  const api::CorunResult r = api::simulate_corun(s, c, f);
  CHECK(r.rounds == 2);
  CHECK(r.result.makespan() == 932);
  REQUIRE(r.duty.size() == 2u);
  CHECK(r.duty[0] == Approx(617.0 / 934));
  CHECK(r.duty[1] == Approx(617.0 / 934));
  CHECK(r.factor[0][0] == Approx(0.5 + 617.0 / 934));  // rank 0's F0: the interpolated factor
  CHECK(r.factor[0][1] == Approx(1.0));                // its F1, beside rank 1's F0: busy, 1
  CHECK(r.factor[1][1] == Approx(0.5 + 617.0 / 934));  // rank 1's F1
  CHECK(spans(r.result.timeline, 1) ==
        std::vector<std::pair<Time, Time>>{{116, 216}, {216, 332}, {332, 532}, {532, 732}});
  // All at duty 1 (one level, or the fixed factors): 1.5 for those two: F0 150, span 1000.
  api::CorunFactors g;
  g.idle = {1.5, 1.0, 1.0};
  CHECK(api::simulate_corun(s, c, g).result.makespan() == 1000);
}

namespace {
Interval action(int rank, OpKind k, int stage, int mb, Time start, Time end) {
  Interval iv = compute(rank, start, end);
  iv.action = Action::single(Op{k, stage, mb});
  return iv;
}
}  // namespace

// GPipe P = 2, M = 2 as replayed over NCCL (us): the messages in launch::message_order a0, a1, g0,
// g1; each GPU's NCCL stream runs them in turn, a receive from when its stream frees, a send from
// the message's start, each until the message lands.
TEST_CASE("nccl_resident and fit_nccl_share: the NCCL stream's spans, the share over them", "[api][corun]") {
  constexpr Time us = 1000;
  Timeline t;
  t.pp = 2;
  t.intervals = {action(0, OpKind::F, 0, 0, 0, 100 * us),        action(0, OpKind::F, 0, 1, 100 * us, 200 * us),
                 action(1, OpKind::F, 1, 0, 120 * us, 220 * us), action(1, OpKind::F, 1, 1, 230 * us, 330 * us),
                 action(1, OpKind::B, 1, 0, 330 * us, 530 * us), action(1, OpKind::B, 1, 1, 530 * us, 730 * us),
                 action(0, OpKind::B, 0, 0, 550 * us, 750 * us), action(0, OpKind::B, 0, 1, 750 * us, 950 * us)};
  t.transfers = {Transfer{0, 1, 105 * us, 115 * us, Op{OpKind::F, 0, 0}, 1},
                 Transfer{0, 1, 205 * us, 225 * us, Op{OpKind::F, 0, 1}, 1},
                 Transfer{1, 0, 535 * us, 545 * us, Op{OpKind::B, 1, 0}, 1},
                 Transfer{1, 0, 735 * us, 745 * us, Op{OpKind::B, 1, 1}, 1}};
  const auto on = api::nccl_resident(gpipe(), t, {});
  REQUIRE(on.size() == 2);
  // GPU 0: a0's send [105, 115]; a1's send [205, 225], then g0's receive from 225 to 545 and g1's to 745.
  CHECK(on[0] == std::vector<std::pair<Time, Time>>{{105 * us, 115 * us}, {205 * us, 745 * us}});
  // GPU 1: a0's receive from the start to 115, a1's to 225; g0's send [535, 545], g1's [735, 745].
  CHECK(on[1] == std::vector<std::pair<Time, Time>>{{0, 225 * us}, {535 * us, 545 * us}, {735 * us, 745 * us}});
  // Against F = 90 us and B = 180 alone, the actions beside a kernel (o, T - d): rank 0's F1 (10, 10)
  // and B0 (195, 20), rank 1's F0 (100, 10) and B1 (10, 20): share = 5200 / 48225.
  const api::NcclShare sh = api::fit_nccl_share(gpipe(), t, {}, 0.09, 0.18);
  CHECK(sh.samples == 4);
  CHECK(sh.share == Approx(5200.0 / 48225.0));
  // Both ranks on one GPU: every message moves within it, no NCCL kernel.
  const auto one = api::nccl_resident(gpipe(), t, {0, 0});
  CHECK(one[0].empty());
  CHECK(api::fit_nccl_share(gpipe(), t, {0, 0}, 0.09, 0.18).samples == 0);
}

// The same GPipe with free transfers (F = 100, B = 200). Plain: rank 0 F0 [0, 100], F1 [100, 200],
// B0 [500, 700], B1 [700, 900]; rank 1 F0 [100, 200] ... B1 [500, 700]. Rank 1's receives spin from
// 0 to 200 (its F0 beside them 100), rank 0's from 200 to 700 (its B0 beside them 200). At share 0.5:
// rank 1's F0 lasts 150, rank 0's B0 300, so rank 1 ends at 750 and rank 0's B0 runs [550, 850]
// beside the receives [200, 750] for 200 again: the fixed point, rank 0's B1 ends at 1050.
TEST_CASE("simulate_nccl: actions stretched by their time beside the NCCL kernels", "[api][corun]") {
  const SimCosts c = gpipe_costs();
  CHECK(api::simulate_nccl(gpipe(), c, 0).makespan() == 900);
  const SimResult r = api::simulate_nccl(gpipe(), c, 0.5);
  CHECK(r.makespan() == 1050);
  CHECK(spans(r.timeline, 0) == std::vector<std::pair<Time, Time>>{{0, 100}, {100, 200}, {550, 850}, {850, 1050}});
  CHECK(spans(r.timeline, 1) == std::vector<std::pair<Time, Time>>{{100, 250}, {250, 350}, {350, 550}, {550, 750}});
}

namespace {
// ZB-H2's slices at F = f, B = b, W = w alone, both of its two ranks on GPU 0.
SimCosts on_one_gpu(const Schedule& s, Time f, Time b, Time w) {
  SliceCosts sc;
  sc.f = f;
  sc.b = b;
  sc.w = w;
  SimCosts c = uniform_costs(s.stages_per_pipe, sc);
  c.rank_device = {0, 0};
  return c;
}
}  // namespace

// Ranks sharing a GPU (validate --sharing replay): each kind's slowdown beside another op of its
// GPU, fitted on a measured timeline. By hand, ZB-H2 P = 2 (F = 80, I = 120, W = 60 alone, both
// ranks on GPU 0): rank 0's F0 [0, 100] beside rank 1's I0 [50, 150] for o = 50, T - a = 20, so
// x_F = 20 * 50 / 50^2 = 0.4 and F's factor 1 / (1 - 0.4); rank 1's I0 beside it for 50, T - a
// = -20: x_I < 0, I's factor clamped at 1; no W beside anything: 1, no samples.
TEST_CASE("fit_share_by_kind: each kind's slowdown beside another op of its GPU", "[api][corun]") {
  const Schedule s = make_schedule("zb-h2", ScheduleParams{2, 4, 0, 0});
  SimCosts alone = on_one_gpu(s, 80, 180, 60);
  Timeline t;
  t.pp = 2;
  t.intervals = {action(0, OpKind::F, 0, 0, 0, 100), action(1, OpKind::I, 1, 0, 50, 150),
                 action(0, OpKind::W, 0, 0, 200, 260)};
  api::KindShareFit f = api::fit_share_by_kind(s, t, alone);
  CHECK(f.factor[0] == Approx(1.0 / 0.6));
  CHECK(f.samples[0] == 1);
  CHECK(f.factor[1] == 1.0);
  CHECK(f.samples[1] == 1);
  CHECK(f.factor[2] == 1.0);
  CHECK(f.samples[2] == 0);
  // The table the engine takes: each row at its kind's factor whatever runs beside.
  const std::vector<double> table = f.by_kind();
  CHECK(table[1] == Approx(1.0 / 0.6));
  CHECK(table[2] == Approx(1.0 / 0.6));
  CHECK(table[5] == 1.0);
  // Rank 0 on a partition 1.25x slower for F: its F alone is 100, no longer slowed at all.
  alone.rank_kind_scale = {1.25, 1, 1, 1, 1, 1};
  CHECK(api::fit_share_by_kind(s, t, alone).factor[0] == 1.0);
  // Each rank on its own GPU: nothing beside, nothing fitted.
  alone.rank_device = {0, 1};
  CHECK(api::fit_share_by_kind(s, t, alone).samples == std::array<std::size_t, 3>{0, 0, 0});
}

// The fit inverts the engine's own sharing: ZB-H2 (P = 2, M = 8) simulated on one GPU with F at
// 1.10x, I at 1.30x and W at 1.05x beside another op gives back those factors.
TEST_CASE("fit_share_by_kind recovers the slowdowns the engine shared a GPU by", "[api][corun]") {
  const Schedule s = make_schedule("zb-h2", ScheduleParams{2, 8, 0, 0});
  const SimCosts alone = on_one_gpu(s, 400000, 1000000, 300000);
  SimCosts shared = alone;
  api::KindShareFit truth;
  truth.factor = {1.10, 1.30, 1.05};
  shared.share_by_kind = truth.by_kind();
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult r = simulate(s, shared, opt);
  const api::KindShareFit f = api::fit_share_by_kind(s, r.timeline, alone);
  for (std::size_t k = 0; k < 3; ++k) {
    CHECK(f.samples[k] > 0);
    CHECK(f.factor[k] == Approx(truth.factor[k]).epsilon(1e-4));
  }
}
