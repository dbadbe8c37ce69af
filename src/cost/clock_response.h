#pragma once
// The GPU's clock as a response to its own compute/idle history (hardware.clock's warm and slow
// terms). A power-limited GPU that has idled starts its work fast (the limiter's budget recharged)
// and settles to its sustained clock within warm_ms; later the limiter's slow loop, which averages
// power over a longer window, overshoots and slows the clock for a while before it recovers. An
// idle stretch of reset_idle_ms or more (or the step's start) recharges the budget and starts the
// response again. With tau the time (ms) from the start of the busy stretch to an action's start,
// the action takes
//   f(tau) = 1 - warm e^(-tau / warm_ms) + slow e^(-((tau - slow_at_ms) / slow_ms)^2 / 2)
// times its duration at the sustained clock (the efficiency figures' clock).
#include <utility>
#include <vector>

#include "core/time.h"

namespace ppsim {

struct HardwareSpec;

struct ClockResponse {
  double reset_idle_ms = 20;
  double warm = 0, warm_ms = 50;
  double slow = 0, slow_at_ms = 900, slow_ms = 150;
  bool on() const { return warm != 0 || slow != 0; }
  double factor(double tau_ms) const;
};

ClockResponse clock_response(const HardwareSpec& h);

// One rank's actions (start, end; ns, in time order): each one's tau (ms) from the start of its busy
// stretch. A stretch starts at every action that follows >= reset_idle_ms of idle after the previous
// one's end, and at the first action, unless the step repeats with `period` (ns, > 0: steps back to
// back, each starting `period` after the one before) and the previous step's last action ended
// less than reset_idle_ms before it: then the step's first stretch continues the previous step's
// last one (and a rank that never idles that long is at tau = kSteadyTau: the sustained clock).
constexpr double kSteadyTau = 1e9;
std::vector<double> busy_tau_ms(const std::vector<std::pair<Time, Time>>& actions, double reset_idle_ms,
                                Time period = 0);

}  // namespace ppsim
