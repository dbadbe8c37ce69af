// Every published closed form reproduced exactly by simulation wherever docs/SCHEDULES.md says it
// holds (P in {2, 4, 8, 16}, several M), the figures where it does not, and the DualPipe figure
// case (DeepSeek-V3 Fig. 5 / DualPipe README).
#include "catch.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {

struct Case {
  const char* family;
  double f, b, w, fb;  // one rank's share, in units (chunk times are 1/v of these)
};

// The worst rank's bubble (global makespan - busy), or own-span idle for the ZB-H2/ZB-V figures.
Time simulated_figure(const Run& r) {
  Time worst = 0;
  for (int k = 0; k < r.schedule.pp; ++k)
    worst = std::max(worst, r.metrics.published.own_span ? r.metrics.own_span_idle[k] : r.metrics.bubble[k]);
  return worst;
}

}  // namespace

TEST_CASE("published bubbles are exact where their conditions hold", "[sim][published]") {
  const Case cases[] = {
      {"gpipe", 1, 3, 0, 0},          {"1f1b", 1, 2, 0, 0},        {"1f1b", 2, 3, 1, 0},
      {"interleaved-1f1b", 2, 4, 0, 0}, {"zb-h1", 1, 2, 1, 0},     {"zb-h1", 2, 3, 1, 0},
      {"zb-h2", 1, 2, 1, 0},          {"zbv", 2, 4, 2, 0},         {"chimera", 1, 1, 0, 0},
      {"dualpipe", 1, 2, 1, 3},       {"dualpipe", 2, 3, 1, 4},    {"dualpipe", 2, 4, 2, 5},
      {"dualpipev", 2, 4, 2, 6},      {"dualpipev", 2, 4, 1, 5},
  };
  int checked = 0;
  for (const Case& c : cases) {
    const std::string name = c.family;  // a reference into the registry, from no temporary
    const Family& fam = find_family(name);
    for (int p : {2, 4, 8, 16}) {
      for (int m : {p, 2 * p, 2 * p + 2, 3 * p, 4 * p}) {
        const ScheduleParams params = resolve_params(fam, ScheduleParams{p, m, 0, 0});
        if (!fam.check(params).empty()) continue;
        const int v = fam.default_vpp;
        const SliceCosts chunk = unit_costs(c.f / v, c.b / v, c.w / v, c.fb / v);
        const Run r = run(c.family, p, m, chunk);
        INFO(c.family << " P=" << p << " M=" << m << " F=" << c.f << " B=" << c.b << " W=" << c.w << " FB=" << c.fb);
        if (!r.metrics.published_holds) continue;  // e.g. ZB-H2 with M < 2P-1
        // Closed forms, written out independently of the registry:
        const Time F = chunk.f, B = chunk.b, W = chunk.w, FB = chunk.fb, b = B - W;
        Time expected = -1;
        const std::string f = c.family;
        if (f == "gpipe" || f == "1f1b" || f == "interleaved-1f1b") expected = (p - 1) * (F + B);
        if (f == "zb-h1") expected = (p - 1) * (F + B - 2 * W);
        if (f == "zb-h2" || f == "zbv") expected = 0;
        if (f == "chimera") expected = (p - 2) * F;
        if (f == "dualpipe") expected = (p / 2 - 1) * (FB + B - 3 * W);
        if (f == "dualpipev") expected = (p - 1) * (FB + B - 3 * W);  // PP = 2P
        (void)b;
        REQUIRE(r.metrics.published.value == expected);
        REQUIRE(simulated_figure(r) == expected);
        REQUIRE(r.metrics.published_matches);
        ++checked;
      }
    }
  }
  REQUIRE(checked > 150);
}

TEST_CASE("1f1b and gpipe: every rank's bubble is (P-1)(F+B) and the makespan (M+P-1)(F+B)", "[sim][published]") {
  // 1F1B, P=4, M=8, F=1, B=2: makespan = (M+P-1)(F+B) = 11*3 = 33, bubble = 3*3 = 9 on every rank.
  const Run r = run("1f1b", 4, 8, unit_costs(1, 2, 0));
  REQUIRE(r.metrics.makespan == 33 * U);
  for (Time bub : r.metrics.bubble) REQUIRE(bub == 9 * U);
  const Run g = run("gpipe", 4, 8, unit_costs(1, 2, 0));
  REQUIRE(g.metrics.makespan == 33 * U);
  for (int a : g.metrics.peak_activations) REQUIRE(a == 8);
}

TEST_CASE("the DualPipe figure case: makespan 66, bubble 6 and 9 activations on every rank", "[sim][published]") {
  // P=8, M=20, F=1, B=2, W=1, F&B=3 (DualPipe README / DeepSeek-V3 Fig. 5).
  const Run r = run("dualpipe", 8, 20, unit_costs(1, 2, 1, 3));
  REQUIRE(r.metrics.makespan == 66 * U);
  for (int k = 0; k < 8; ++k) {
    REQUIRE(r.metrics.bubble[k] == 6 * U);
    REQUIRE(r.metrics.peak_activations[k] == 9);  // PP + 1
  }
  // Published: (PP/2-1)(F&B+B-3W) = 3 * (3 + 2 - 3) = 6.
  REQUIRE(r.metrics.published.value == 6 * U);
  REQUIRE(r.metrics.parameter_copies == 2);
}

TEST_CASE("outside their conditions the published figures are wrong, in both directions", "[sim][published]") {
  // ZB-H1, F=1, B=3, W=2 (W > b = 1): published (P-1)(F+B-2W) = 0, simulated P-1 = 3.
  const Run zb = run("zb-h1", 4, 8, unit_costs(1, 3, 2));
  REQUIRE(!zb.metrics.published_holds);
  REQUIRE(zb.metrics.published.value == 0);
  for (Time bub : zb.metrics.bubble) REQUIRE(bub == 3 * U);
  // DualPipe, F=1, B=1, W=0.5, F&B=2 (b = 0.5 < F): published 3 * (2 + 1 - 1.5) = 4.5, more simulated.
  const Run dp = run("dualpipe", 8, 20, unit_costs(1, 1, 0.5, 2));
  REQUIRE(!dp.metrics.published_holds);
  REQUIRE(dp.metrics.published.value == 9 * U / 2);
  REQUIRE(dp.metrics.bubble_max > dp.metrics.published.value);
}

TEST_CASE("a per-hop latency makes DualPipe's bubble grow with M", "[sim][published]") {
  const Time lat = U / 10;
  const Run a = run("dualpipe", 8, 16, unit_costs(1, 2, 1, 3), lat);
  const Run b = run("dualpipe", 8, 32, unit_costs(1, 2, 1, 3), lat);
  REQUIRE(!a.metrics.published_holds);
  REQUIRE(b.metrics.bubble_max > a.metrics.bubble_max);
}

TEST_CASE("interleaved 1F1B past 16 chunks per rank: (P-1)(F+B)/v, and v = 65 refused", "[sim][published]") {
  // v = 24 (a Megatron-Bridge recipe's VP for Qwen3-30B-A3B at PP 2): one rank's share F = 1, B = 2
  // cut into 24 chunks of F = 1/24, B = 2/24 units (750,750 and 1,501,500 ticks, exact). The
  // interleaved bubble is (P-1)(F+B) of the chunks' times: 3 x 3 / 24 units at P = 4.
  for (int v : {24, 48}) {
    const SliceCosts chunk = unit_costs(1.0 / v, 2.0 / v, 0);
    const Run r = run("interleaved-1f1b", 4, 8, chunk, 0, v);
    INFO("v=" << v);
    REQUIRE(r.schedule.chunks_per_rank == v);
    REQUIRE(r.metrics.published_holds);
    for (Time bub : r.metrics.bubble) REQUIRE(bub == 3 * (chunk.f + chunk.b));
    // Every rank runs its M x v forwards and backwards: busy M (F + B) = 24 units.
    REQUIRE(r.metrics.makespan == 8 * v * (chunk.f + chunk.b) + 3 * (chunk.f + chunk.b));
  }
  try {
    make_schedule("interleaved-1f1b", ScheduleParams{4, 8, kMaxVpp + 1, 0});
    FAIL("v = 65 was accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("must be in 1..64, got 65") != std::string::npos);
  }
}

TEST_CASE("Megatron's EP all-to-all overlap: one more warm-up, steady F and B paired", "[sim][published]") {
  // P = 1, v = 1 (combined_1f1b_schedule_for_no_pipelining): F0, (F1;B0), (F2;B1), B2. With
  // F = 1, B = 2 and a pair F&B = 2.5: makespan F + 2 F&B + B = 8 units.
  const Run one = run("interleaved-1f1b-overlap", 1, 3, unit_costs(1, 2, 0, 2.5), 0, 1);
  REQUIRE(one.schedule.ranks[0].size() == 4);
  CHECK(format_action(one.schedule.ranks[0][0]) == "0F0");
  CHECK(format_action(one.schedule.ranks[0][1]) == "(0F1;0B0)OVERLAP_F_B");
  CHECK(format_action(one.schedule.ranks[0][2]) == "(0F2;0B1)OVERLAP_F_B");
  CHECK(format_action(one.schedule.ranks[0][3]) == "0B2");
  CHECK(one.metrics.makespan == 8 * U);
  // P = 4, v = 2, M = 8: rank r warms up 2(P-1-r) + (v-1)P + 1 forwards (one more than interleaved
  // 1F1B's), then pairs every steady forward with a backward, then drains the same count of B.
  const Run r = run("interleaved-1f1b-overlap", 4, 8, unit_costs(0.5, 1, 0, 1.25), 0, 2);
  const Run plain = run("interleaved-1f1b", 4, 8, unit_costs(0.5, 1, 0, 1.25), 0, 2);
  for (int k = 0; k < 4; ++k) {
    const auto& acts = r.schedule.ranks[static_cast<std::size_t>(k)];
    const int warmup = 2 * (4 - 1 - k) + 4 + 1, pairs = 16 - warmup;
    REQUIRE(static_cast<int>(acts.size()) == warmup + pairs + warmup);
    for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
      INFO("rank " << k << " action " << i);
      CHECK(acts[static_cast<std::size_t>(i)].overlapped == (i >= warmup && i < warmup + pairs));
    }
    CHECK(plain.schedule.ranks[static_cast<std::size_t>(k)].size() == 32);
  }
}
