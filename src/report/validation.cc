#include "report/validation.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ppsim {

TimelineStats timeline_stats(const Timeline& t, const std::vector<Time>& exposed_comm, bool exposed_inside_ops) {
  TimelineStats s;
  s.makespan = t.end - t.start;
  s.compute.assign(static_cast<std::size_t>(t.pp), 0);
  s.exposed_comm.assign(static_cast<std::size_t>(t.pp), 0);
  for (std::size_t r = 0; r < exposed_comm.size() && r < s.exposed_comm.size(); ++r) s.exposed_comm[r] = exposed_comm[r];
  std::map<std::string, Time> sum;
  for (const Interval& iv : t.intervals) {
    if (iv.stream != Stream::Compute || iv.part != Part::Whole) continue;
    if (iv.rank < 0 || iv.rank >= t.pp) continue;
    s.compute[static_cast<std::size_t>(iv.rank)] += iv.duration();
    const std::string kind = iv.action.overlapped ? "FB" : std::string(1, op_kind_char(iv.action.first.kind));
    sum[kind] += iv.duration();
    ++s.count[kind];
  }
  for (const auto& [k, v] : sum) s.mean_duration[k] = v / s.count[k];
  if (exposed_inside_ops)
    for (std::size_t r = 0; r < s.compute.size(); ++r)
      s.compute[r] -= std::min(s.compute[r], s.exposed_comm[r]);
  for (int r = 0; r < t.pp; ++r)
    s.bubble.push_back(s.makespan - s.compute[static_cast<std::size_t>(r)] - s.exposed_comm[static_cast<std::size_t>(r)]);
  return s;
}

std::vector<ValidationRow> compare_timelines(const TimelineStats& p, const TimelineStats& m) {
  std::vector<ValidationRow> rows;
  auto add = [&](std::string what, Time pred, Time meas) {
    ValidationRow r;
    r.what = std::move(what);
    r.predicted = static_cast<double>(pred) / 1e6;
    r.measured = static_cast<double>(meas) / 1e6;
    r.error = meas != 0 ? (r.predicted - r.measured) / r.measured : 0.0;
    rows.push_back(r);
  };
  add("makespan", p.makespan, m.makespan);
  const std::size_t ranks = std::min(p.bubble.size(), m.bubble.size());
  for (std::size_t r = 0; r < ranks; ++r) add(fmt::format("bubble rank {}", r), p.bubble[r], m.bubble[r]);
  for (std::size_t r = 0; r < ranks; ++r) add(fmt::format("exposed comm rank {}", r), p.exposed_comm[r], m.exposed_comm[r]);
  for (const auto& [kind, t] : p.mean_duration) {
    auto it = m.mean_duration.find(kind);
    if (it != m.mean_duration.end()) add(kind + " mean", t, it->second);
  }
  return rows;
}

std::string render_validation_table(const std::string& schedule, const std::vector<ValidationRow>& rows, double target) {
  std::string out = fmt::format("{}: predicted vs measured (ms)\n", schedule);
  out += fmt::format("  {:<22} {:>12} {:>12} {:>9}\n", "", "predicted", "measured", "error");
  for (const auto& r : rows) {
    std::string mark;
    if (r.what == "makespan") mark = std::fabs(r.error) <= target ? "  within target" : "  OUTSIDE target";
    out += fmt::format("  {:<22} {:>12.3f} {:>12.3f} {:>+8.1f}%{}\n", r.what, r.predicted, r.measured, 100.0 * r.error, mark);
  }
  return out;
}

nlohmann::json validation_json(const std::string& schedule, const std::vector<ValidationRow>& rows) {
  nlohmann::json j;
  j["schedule"] = schedule;
  j["rows"] = nlohmann::json::array();
  for (const auto& r : rows)
    j["rows"].push_back({{"what", r.what}, {"predicted_ms", r.predicted}, {"measured_ms", r.measured}, {"error", r.error}});
  return j;
}

}  // namespace ppsim
