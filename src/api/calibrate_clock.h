#pragma once
// hardware.clock's response (cost/clock_response.h) fitted from a traced pipeline step.
#include <string>
#include <vector>

#include "cost/clock_response.h"
#include "trace/pipeline_run.h"

namespace ppsim::api {

// One action of the trace: tau (ms) from the start of its busy stretch, and its compute time over
// the mean of its kind (stage and F, B, I, W or a pair) on its rank.
struct ClockPoint {
  double tau_ms = 0, ratio = 1;
};
// Every action of a kind that ran at least 3 times on its rank (ranks' own clocks; busy stretches
// as busy_tau_ms splits them at reset_idle_ms).
std::vector<ClockPoint> clock_points(const trace::PipelineRun& run, double reset_idle_ms);

// ratio = a0 (1 - warm e^(-tau/warm_ms) + slow g(tau; slow_at_ms, slow_ms)) by least squares: a0, a0 warm
// and a0 slow linear at each point of a grid over warm_ms (5 .. 400 ms), slow_at_ms (0 .. the span
// the points cover) and slow_ms (20 ms .. half that span); a0 is the sustained level, divided out.
// A term is kept where its coefficient is at least twice its standard error (else it is refitted
// without it and left at 0: not identified). Uncertainty: the linear terms' standard errors (over a0);
// a time constant's, half the range of grid values whose best fit is within one residual variance of
// the minimum.
struct ClockResponseFit {
  ClockResponse response;
  double warm_err = 0, warm_ms_err = 0, slow_err = 0, slow_at_err = 0, slow_ms_err = 0;
  bool warm_identified = false, slow_identified = false;
  int points = 0;
  double span_ms = 0, level = 1, rms = 0;
};
ClockResponseFit fit_clock_response(const std::vector<ClockPoint>& points, double reset_idle_ms);

}  // namespace ppsim::api
