#include "cost/clock_response.h"

#include <cmath>

#include "cost/config.h"

namespace ppsim {

double ClockResponse::factor(double tau_ms) const {
  const double z = (tau_ms - slow_at_ms) / slow_ms;
  return 1.0 - warm * std::exp(-tau_ms / warm_ms) + slow * std::exp(-0.5 * z * z);
}

ClockResponse clock_response(const HardwareSpec& h) {
  ClockResponse c;
  c.reset_idle_ms = h.clock_reset_idle_ms;
  c.warm = h.clock_warm;
  c.warm_ms = h.clock_warm_ms;
  c.slow = h.clock_slow;
  c.slow_at_ms = h.clock_slow_at_ms;
  c.slow_ms = h.clock_slow_ms;
  return c;
}

std::vector<double> busy_tau_ms(const std::vector<std::pair<Time, Time>>& actions, double reset_idle_ms, Time period) {
  std::vector<double> tau;
  tau.reserve(actions.size());
  const double reset = reset_idle_ms * 1e6;
  Time stretch = 0, prev_end = 0;
  bool reset_inside = false;  // a stretch started after the first action
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const auto [start, end] = actions[i];
    if (i == 0 || static_cast<double>(start - prev_end) >= reset) {
      reset_inside = reset_inside || i > 0;
      stretch = start;
    }
    tau.push_back(static_cast<double>(start - stretch) / 1e6);
    prev_end = end;
  }
  if (period <= 0 || actions.empty() ||
      static_cast<double>(actions.front().first + period - actions.back().second) >= reset)
    return tau;
  // The previous step's last stretch began at stretch - period: the first stretch started then.
  const double shift = static_cast<double>(actions.front().first - (stretch - period)) / 1e6;
  for (std::size_t i = 0; i < tau.size(); ++i) {
    if (i > 0 && tau[i] == 0) break;  // the first stretch ends at the first reset
    tau[i] = reset_inside ? tau[i] + shift : kSteadyTau;
  }
  return tau;
}

}  // namespace ppsim
