// Helpers for tests: unit costs (times in whole units) and a one-call simulate.
#pragma once
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "core/error.h"
#include "schedules/registry.h"
#include "sim/costs.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::test {

inline constexpr Time U = kTicksPerUnit;  // one time unit

// The exit code and one-line message of the InputError `f` throws; {0, ""} when it throws none.
template <class F>
std::pair<int, std::string> error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return {e.exit_code(), e.one_line()};
  }
  return {0, ""};
}

// Per-chunk costs in units: F, full B, W, pair FB (0 = F + B).
inline SliceCosts unit_costs(double f, double b, double w, double fb = 0) {
  SliceCosts c;
  c.f = static_cast<Time>(f * U);
  c.b = static_cast<Time>(b * U);
  c.w = static_cast<Time>(w * U);
  c.fb = static_cast<Time>(fb * U);
  return c;
}

struct Run {
  Schedule schedule;
  SimResult result;
  ScheduleMetrics metrics;
};

inline Run run(const std::string& family, int p, int m, const SliceCosts& c, Time latency = 0, int vpp = 0,
               bool timeline = false) {
  Run r;
  const Family& fam = find_family(family);
  const ScheduleParams params = resolve_params(fam, ScheduleParams{p, m, vpp, 0});
  r.schedule = make_schedule(family, params);
  SimCosts costs = uniform_costs(r.schedule.stages_per_pipe, c);
  costs.link.latency = latency;
  SimOptions opt;
  opt.record_timeline = timeline;
  r.result = simulate(r.schedule, costs, opt);
  r.metrics = compute_metrics(r.schedule, r.result, costs, &fam, params);
  return r;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace ppsim::test
