// hardware.clock's response fitted from a traced step (api/calibrate_clock.h), on hand-made actions.
#include "api/calibrate_clock.h"

#include <cmath>
#include <vector>

#include "catch.h"

using namespace ppsim;
using namespace ppsim::api;
using Catch::Matchers::WithinAbs;

namespace {

// One rank of back-to-back actions of `ms` each (alternating F and B of stage 0), starting at
// `t0` ms, each taking its nominal time times `f(tau)` (tau from the first one's start).
template <class F>
void busy_stretch(trace::RankRun& r, double t0, int n, double ms, F f) {
  double t = t0;
  for (int i = 0; i < n; ++i) {
    trace::ExecutedAction x;
    x.action = Action::single(Op{i % 2 ? OpKind::B : OpKind::F, 0, i / 2});
    const double d = (i % 2 ? 2 * ms : ms) * f(t - t0);
    x.gpu_start = static_cast<Time>(std::llround(t * 1e6));
    x.gpu_end = static_cast<Time>(std::llround((t + d) * 1e6));
    x.compute = x.gpu_end - x.gpu_start;
    r.actions.push_back(x);
    t += d;
  }
}

}  // namespace

TEST_CASE("clock response fit: the actions' ratios against their time into a busy stretch", "[calibrate][clock]") {
  // Two stretches 30 ms apart (over the 20 ms reset): F 10 ms, B 20 ms at the sustained clock;
  // the second stretch's first F runs at 0.9. Each ratio is over its kind's mean.
  trace::PipelineRun run;
  run.ranks.resize(1);
  busy_stretch(run.ranks[0], 0, 4, 10, [](double) { return 1.0; });
  busy_stretch(run.ranks[0], 90, 2, 10, [](double tau) { return tau == 0 ? 0.9 : 1.0; });
  const std::vector<ClockPoint> p = clock_points(run, 20);
  REQUIRE(p.size() == 6);
  // F: 10, 10, 9 ms (mean 29/3); B: 20, 20, 20.
  CHECK_THAT(p[0].ratio, WithinAbs(30.0 / 29, 1e-6));
  CHECK_THAT(p[4].ratio, WithinAbs(27.0 / 29, 1e-6));
  CHECK(p[5].ratio == 1.0);
  CHECK(p[3].tau_ms == 40);  // F 10, B 20, F 10
  CHECK(p[4].tau_ms == 0);   // after 30 ms idle: a new stretch
  CHECK_THAT(p[5].tau_ms, WithinAbs(9, 1e-6));
}

TEST_CASE("clock response fit: a hand-made step recovers its response", "[calibrate][clock]") {
  // Two ranks busy for 1.2 s: f(tau) = 1.02 (1 - 0.1 e^(-tau/60) + 0.08 e^(-((tau - 800)/120)^2/2)), each
  // action's time off by +-0.4% (alternating), F 10 ms and B 20 ms at the sustained clock.
  const ClockResponse truth{.warm = 0.1, .warm_ms = 60, .slow = 0.08, .slow_at_ms = 800, .slow_ms = 120};
  trace::PipelineRun run;
  run.ranks.resize(2);
  for (int q = 0; q < 2; ++q) {
    int k = 0;
    busy_stretch(run.ranks[q], 5.0 * q, 80, 10,
                 [&](double tau) { return 1.02 * truth.factor(tau) * (1 + ((k++ / 2 + q) % 2 ? 0.004 : -0.004)); });
  }
  const ClockResponseFit f = fit_clock_response(clock_points(run, 20), 20);
  REQUIRE(f.warm_identified);
  REQUIRE(f.slow_identified);
  CHECK(f.points == 160);
  CHECK_THAT(f.response.warm, WithinAbs(0.1, 3 * f.warm_err + 0.01));
  CHECK_THAT(f.response.slow, WithinAbs(0.08, 3 * f.slow_err + 0.01));
  CHECK_THAT(f.response.warm_ms, WithinAbs(60, 2 * f.warm_ms_err + 10));
  CHECK_THAT(f.response.slow_at_ms, WithinAbs(800, 2 * f.slow_at_err + 20));
  CHECK_THAT(f.response.slow_ms, WithinAbs(120, 2 * f.slow_ms_err + 25));
  CHECK(f.warm_err > 0);
  CHECK(f.warm_err < 0.02);
  CHECK(f.rms < 0.01);

  // A flat step (the same +-0.4% only): neither term is identified, the presets stay.
  trace::PipelineRun flat;
  flat.ranks.resize(1);
  int k = 0;
  busy_stretch(flat.ranks[0], 0, 80, 10, [&](double) { return (k++ / 2) % 2 ? 1.004 : 0.996; });
  const ClockResponseFit g = fit_clock_response(clock_points(flat, 20), 20);
  CHECK(!g.warm_identified);
  CHECK(!g.slow_identified);
  CHECK(!g.response.on());
}
