// hardware.clock's response (cost/clock_response.h): each action's duration scaled by the clock at
// its start, given its rank's idle history, in a hand-worked timeline.
#include "cost/clock_response.h"

#include <cmath>
#include <string>
#include <vector>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/derive.h"
#include "schedules/registry.h"

using namespace ppsim;
using Catch::Matchers::WithinAbs;

namespace {

// Explicit times: F 1 ms, B 2 ms per micro-batch and stage.
const char* kBase = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
times: {F: 1, B: 2}
)";

double makespan_ms(const std::string& parallel, const std::string& family, const std::vector<std::string>& sets) {
  const ModelConfig cfg = load_config_text(kBase + parallel, "t.yaml", sets);
  int pp = 0, m = 0, v = 1;
  apply_config_parallel(cfg, pp, m, v);
  const Schedule s = make_schedule(family, resolve_params(find_family(family), ScheduleParams{pp, m, 0, 0}));
  SimCosts costs = derive_costs(cfg, s);
  return static_cast<double>(simulate_config(cfg, s, costs).makespan()) / 1e6;
}

}  // namespace

TEST_CASE("clock response: the factor and each action's time into its busy stretch", "[cost][clock]") {
  const ClockResponse c{.warm = 0.1, .warm_ms = 50, .slow = 0.08, .slow_at_ms = 900, .slow_ms = 150};
  CHECK_THAT(c.factor(0), WithinAbs(0.9 + 0.08 * std::exp(-18.0), 1e-12));
  CHECK_THAT(c.factor(900), WithinAbs(1 - 0.1 * std::exp(-18.0) + 0.08, 1e-12));
  CHECK_THAT(c.factor(1050), WithinAbs(1 + 0.08 * std::exp(-0.5), 1e-6));
  CHECK(!ClockResponse{}.on());
  // Idle of 5 ms does not reset at 20 ms, 30 ms does; the first action starts a stretch.
  const std::vector<std::pair<Time, Time>> acts = {
      {10'000'000, 20'000'000}, {25'000'000, 40'000'000}, {70'000'000, 80'000'000}, {80'000'000, 95'000'000}};
  const std::vector<double> tau = busy_tau_ms(acts, 20);
  REQUIRE(tau.size() == 4);
  CHECK(tau[0] == 0);
  CHECK(tau[1] == 15);
  CHECK(tau[2] == 0);
  CHECK(tau[3] == 10);
  CHECK(busy_tau_ms(acts, 40)[2] == 60);  // 30 ms idle under a 40 ms reset: the same stretch
  // Steps back to back every 100 ms: the last action ends 15 ms before the next step's first
  // starts (95 -> 110), under 20: the first stretch continues the last one, which began at 70 - 100
  // = -30 ms: tau 40 and 55. Every 120 ms: 35 ms of idle, a fresh start.
  const std::vector<double> wrapped = busy_tau_ms(acts, 20, 100'000'000);
  CHECK(wrapped[0] == 40);
  CHECK(wrapped[1] == 55);
  CHECK(wrapped[2] == 0);
  CHECK(busy_tau_ms(acts, 20, 120'000'000)[0] == 0);
  // A rank that never idles 40 ms: one stretch, step after step: the sustained clock.
  CHECK(busy_tau_ms(acts, 40, 100'000'000)[3] == kSteadyTau);
}

TEST_CASE("clock response: a rank idle then busy runs fast, in the simulated step", "[cost][clock]") {
  // GPipe, two ranks, one micro-batch, F 1 ms and B 2 ms, steps back to back; warm 0.2 over
  // warm_ms 1: f(tau) = 1 - 0.2 e^(-tau). Rank 1 idles before its F (tau 0: 0.8 ms), then its B at
  // tau 0.8: b1 = 2 (1 - 0.2 e^-0.8). Rank 0 idles about 3.6 ms (over reset_idle_ms 0.5) before its
  // B: tau 0, 1.6 ms; its next step's F follows that B with no idle, so the F is 1.6 ms into the
  // B's stretch: 1 - 0.2 e^-1.6.
  const std::string two = "parallel: {pp: 2, microbatches: 1}\n";
  const double L = (makespan_ms(two, "gpipe", {}) - 6) / 2;  // one hop
  REQUIRE(L >= 0);
  std::vector<std::string> warm = {"hardware.clock.warm=0.2", "hardware.clock.warm_ms=1",
                                   "hardware.clock.reset_idle_ms=0.5"};
  const double f0 = 1 - 0.2 * std::exp(-1.6), b1 = 2 * (1 - 0.2 * std::exp(-0.8));
  CHECK_THAT(makespan_ms(two, "gpipe", warm), WithinAbs(f0 + L + 0.8 + b1 + L + 1.6, 1e-5));
  // A reset longer than any idle: each rank's steps run as one busy stretch, at the sustained clock.
  warm.back() = "hardware.clock.reset_idle_ms=100";
  CHECK_THAT(makespan_ms(two, "gpipe", warm), WithinAbs(6 + 2 * L, 1e-5));
  // The slow loop alone, slow 0.1 at 1 ms, width 1 ms: g(tau) = 1 + 0.1 e^(-(tau - 1)^2 / 2).
  auto g = [](double tau) { return 1 + 0.1 * std::exp(-0.5 * (tau - 1) * (tau - 1)); };
  const double F1 = g(0), B1 = 2 * g(F1), B0 = 2 * g(0), F0 = g(B0);
  CHECK_THAT(makespan_ms(two, "gpipe",
                         {"hardware.clock.slow=0.1", "hardware.clock.slow_at_ms=1", "hardware.clock.slow_ms=1",
                          "hardware.clock.reset_idle_ms=0.5"}),
             WithinAbs(F0 + L + F1 + B1 + L + B0, 1e-5));
  CHECK_THROWS_WITH(load_config_text(std::string(kBase) + two, "t.yaml", {"hardware.clock.warm=0.9"}),
                    PPSIM_CONTAINS("warm"));
}
