#include "sim/metrics.h"

#include <algorithm>

#include <fmt/format.h>

namespace ppsim {

namespace {
bool uniform(const SimCosts& c) {
  for (const auto& s : c.slice)
    if (s.f != c.slice[0].f || s.b != c.slice[0].b || s.w != c.slice[0].w || s.fb != c.slice[0].fb) return false;
  return true;
}
}  // namespace

ScheduleMetrics compute_metrics(const Schedule& s, const SimResult& r, const SimCosts& costs,
                                const Family* family, const ScheduleParams& params) {
  ScheduleMetrics m;
  m.schedule = s.family;
  m.pp = s.pp;
  m.microbatches = s.microbatches;
  m.vpp = s.chunks_per_rank;
  m.makespan = r.makespan();
  m.parameter_copies = s.parameter_copies;
  m.ops = r.ops;
  if (!costs.slice.empty()) m.chunk_times = costs.slice[0];
  Time bubble_sum = 0;
  for (int k = 0; k < s.pp; ++k) {
    const RankStats& rs = r.ranks[k];
    m.compute.push_back(rs.busy);
    m.exposed_comm.push_back(rs.exposed_comm);
    const Time bub = m.makespan - rs.busy - rs.exposed_comm;
    m.bubble.push_back(bub);
    m.own_span_idle.push_back(rs.own_span_idle());
    m.peak_activations.push_back(rs.peak_activations);
    bubble_sum += bub;
    m.bubble_max = std::max(m.bubble_max, bub);
  }
  m.bubble_mean = s.pp ? static_cast<double>(bubble_sum) / s.pp : 0.0;
  m.bubble_ratio = (s.pp && m.makespan) ? static_cast<double>(bubble_sum) / (static_cast<double>(s.pp) * m.makespan) : 0.0;
  if (r.pairs > 0) m.fb_pair_time = r.pair_time_sum / static_cast<Time>(r.pairs);
  for (const auto& [kind, cs] : r.pair_kinds) m.fb_pair_times[kind] = cs.second / static_cast<Time>(cs.first);

  if (family != nullptr && !costs.slice.empty()) {
    const SliceCosts& c0 = costs.slice[0];
    const UniformTimes t{c0.f, c0.b, c0.w, c0.fb > 0 ? c0.fb : c0.f + c0.b};
    m.published = family->published(params, t);
    std::vector<std::string> why;
    if (!m.published.holds) why.push_back("needs " + m.published.condition);
    if (!uniform(costs)) why.push_back("stages differ in cost");
    if (costs.link.latency > 0 || costs.link.bytes_per_tick > 0) why.push_back("links have latency or finite bandwidth");
    bool any_comm = false;
    for (Time e : m.exposed_comm) any_comm |= e > 0;
    if (any_comm) why.push_back("communication is exposed");
    m.published_holds = why.empty();
    for (std::size_t i = 0; i < why.size(); ++i) m.published_note += (i ? "; " : "") + why[i];
    Time simulated = 0;
    for (int k = 0; k < s.pp; ++k)
      simulated = std::max(simulated, m.published.own_span ? m.own_span_idle[k] : m.bubble[k]);
    m.published_matches = m.published.available && simulated == m.published.value;
    for (int k = 0; k < s.pp; ++k) m.published_activations.push_back(family->published_activations(params, k));
  }
  return m;
}

}  // namespace ppsim
