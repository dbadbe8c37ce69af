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

}  // namespace

TEST_CASE("peer_busy_share: the share of each action while another GPU computes", "[api][corun]") {
  Timeline t;
  t.pp = 2;
  // rank 0: [0,100) [120,220); rank 1: [50,150) [200,300)
  t.intervals = {compute(0, 0, 100), compute(1, 50, 150), compute(0, 120, 220), compute(1, 200, 300)};
  const auto phi = api::peer_busy_share(t, 2, {});
  REQUIRE(phi.size() == 2u);
  REQUIRE(phi[0].size() == 2u);
  CHECK(phi[0][0] == Approx(50.0 / 100));         // [50,100) of [0,100)
  CHECK(phi[0][1] == Approx((30.0 + 20.0) / 100));  // [120,150) and [200,220) of [120,220)
  CHECK(phi[1][0] == Approx((50.0 + 30.0) / 100));  // [50,100) and [120,150) of [50,150)
  CHECK(phi[1][1] == Approx(20.0 / 100));         // [200,220) of [200,300)
  // Both ranks on one GPU: neither has another GPU beside it.
  const auto same = api::peer_busy_share(t, 2, {0, 0});
  for (const auto& r : same)
    for (double p : r) CHECK(p == 0.0);
}

TEST_CASE("simulate_corun stretches the ops that overlap the other GPU's work", "[api][corun]") {
  // GPipe, P = 2, M = 2; F = 100, B = 200 (all input-grad: W = 0); transfers free.
  const Schedule s = make_schedule("gpipe", ScheduleParams{2, 2, 0, 0});
  SliceCosts sc;
  sc.f = 100;
  sc.b = 200;
  const SimCosts c = uniform_costs(2, sc);
  // Plain: rank 0 F0 [0,100) F1 [100,200); rank 1 F0 [100,200) F1 [200,300) B0 [300,500)
  // B1 [500,700); rank 0 B0 [500,700) B1 [700,900). Beside the other GPU: rank 0's F1 and rank 1's
  // F0 (both [100,200)), rank 1's B1 and rank 0's B0 (both [500,700)).
  api::CorunFactors f;
  f.busy = {1.2, 1.1, 1.0};  // F 20% longer beside the other GPU's work, I 10%
  const api::CorunResult r = api::simulate_corun(s, c, f);
  // Stretched: F1 and F0 [100,220); rank 1's F1 [220,320) (rank 0 idle), B0 [320,520); B1 and
  // rank 0's B0 [520,740) (200 * 1.1); rank 0's B1 [740,940). The same actions overlap again: a
  // fixed point after one round.
  CHECK(r.result.makespan() == 940);
  CHECK(spans(r.result.timeline, 0) == std::vector<std::pair<Time, Time>>{{0, 100}, {100, 220}, {520, 740}, {740, 940}});
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
  SliceCosts with_w = sc;
  with_w.w = 50;
  const api::CorunResult rw = api::simulate_corun(s, uniform_costs(2, with_w), f);
  CHECK(rw.result.makespan() == 935);
  CHECK(rw.factor[1][3] == Approx(1.075));
}
