#include "report/results.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ppsim {

namespace {

std::string tfmt(Time t, const TimeScale& s, int decimals = 4) {
  if (t % s.ticks_per_unit == 0) return fmt::format("{}", t / s.ticks_per_unit);
  std::string out = fmt::format("{:.{}f}", s.to_display(t), decimals);
  while (!out.empty() && out.back() == '0') out.pop_back();
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

nlohmann::json per_rank_times(const std::vector<Time>& v, const TimeScale& s) {
  nlohmann::json a = nlohmann::json::array();
  for (Time t : v) a.push_back(s.to_display(t));
  return a;
}

nlohmann::json stats(const std::vector<Time>& v, const TimeScale& s, Time makespan) {
  nlohmann::json j;
  j["per_rank"] = per_rank_times(v, s);
  Time mx = 0, sum = 0;
  for (Time t : v) { mx = std::max(mx, t); sum += t; }
  j["max"] = s.to_display(mx);
  j["mean"] = v.empty() ? 0.0 : s.to_display(sum) / static_cast<double>(v.size());
  j["ratio"] = (v.empty() || makespan == 0) ? 0.0 : static_cast<double>(sum) / (static_cast<double>(v.size()) * makespan);
  return j;
}

}  // namespace

std::string format_time(Time t, const TimeScale& s) { return tfmt(t, s); }

std::string per_rank_summary(const std::vector<std::string>& values, std::size_t max_list) {
  if (values.empty()) return "";
  bool same = std::all_of(values.begin(), values.end(), [&](const std::string& x) { return x == values[0]; });
  if (same) return values.size() == 1 ? values[0] : fmt::format("{} (all)", values[0]);
  const std::string list = fmt::format("{}", fmt::join(values, " "));
  if (values.size() <= max_list && list.size() <= 22) return list;
  // Too long for a column: the range, smallest to largest.
  auto num_less = [](const std::string& a, const std::string& b) { return std::stod(a) < std::stod(b); };
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end(), num_less);
  return fmt::format("{} .. {}", *lo, *hi);
}

double rank_shares(double chunks, int chunks_per_rank) { return chunks / std::max(chunks_per_rank, 1); }

namespace {
std::vector<double> peak_shares_per_rank(const ScheduleMetrics& m) {
  std::vector<double> out;
  for (int a : m.peak_activations) out.push_back(rank_shares(a, m.vpp));
  return out;
}
double peak_shares_max(const ScheduleMetrics& m) {
  const std::vector<double> v = peak_shares_per_rank(m);
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}
}  // namespace

nlohmann::json result_to_json(const ResultRow& row, const TimeScale& scale) {
  const ScheduleMetrics& m = row.metrics;
  nlohmann::json j;
  j["schedule"] = m.schedule;
  j["pp"] = m.pp;
  j["microbatches"] = m.microbatches;
  j["vpp"] = m.vpp;
  j["makespan"] = scale.to_display(m.makespan);
  j["time_unit"] = scale.unit;
  j["bubble"] = stats(m.bubble, scale, m.makespan);
  j["compute_time"] = stats(m.compute, scale, m.makespan);
  j["exposed_comm"] = stats(m.exposed_comm, scale, m.makespan);
  j["own_span_idle"] = {{"per_rank", per_rank_times(m.own_span_idle, scale)}};
  if (m.published.available) {
    j["published_bubble"] = scale.to_display(m.published.value);
    j["published_formula"] = m.published.formula;
    j["published_condition"] = m.published.condition;
    j["published_own_span"] = m.published.own_span;
  } else {
    j["published_bubble"] = nullptr;
  }
  j["published_holds"] = m.published_holds;
  j["published_matches"] = m.published_matches;
  j["published_note"] = m.published_note;
  // In rank shares (rank_shares), as search's --memory-cap; max_rank_shares: the same as max, kept
  // for scripts written when per_rank counted chunks.
  j["peak_activations"] = {
      {"per_rank", peak_shares_per_rank(m)}, {"max", peak_shares_max(m)}, {"max_rank_shares", peak_shares_max(m)}};
  nlohmann::json pa = nlohmann::json::array();
  for (int v : m.published_activations)
    pa.push_back(v < 0 ? nlohmann::json(nullptr) : nlohmann::json(rank_shares(v, m.vpp)));
  j["published_activations"] = {{"per_rank", pa}};
  j["parameter_copies"] = m.parameter_copies;
  j["chunk_times"] = {{"F", scale.to_display(m.chunk_times.f)},
                      {"B", scale.to_display(m.chunk_times.b)},
                      {"W", scale.to_display(m.chunk_times.w)},
                      {"FB", scale.to_display(m.chunk_times.fb > 0 ? m.chunk_times.fb : m.chunk_times.f + m.chunk_times.b)}};
  j["fb_pair_time"] = m.fb_pair_time ? nlohmann::json(scale.to_display(*m.fb_pair_time)) : nlohmann::json(nullptr);
  nlohmann::json kinds = nlohmann::json::object();
  for (const auto& [kind, t] : m.fb_pair_times) kinds[kind] = scale.to_display(t);
  j["fb_pair_times"] = kinds;
  j["throughput"] = m.makespan ? static_cast<double>(m.microbatches) / scale.to_display(m.makespan) : 0.0;
  if (row.physical.available) {
    j["step_time"] = row.physical.step_time_s;
    j["tokens_per_second"] = row.physical.tokens_per_second;
    j["mfu"] = row.physical.mfu;
    double mx = 0;
    for (double b : row.physical.peak_memory_bytes) mx = std::max(mx, b);
    j["peak_memory_bytes"] = {{"per_rank", row.physical.peak_memory_bytes}, {"max", mx}};
    j["memory_capacity_bytes"] = row.physical.memory_capacity_bytes;
    j["over_capacity_ranks"] = row.physical.over_capacity_ranks;
    if (!row.physical.schedule_note.empty()) j["schedule_note"] = row.physical.schedule_note;
    if (!row.physical.memory.empty()) {
      nlohmann::json br = nlohmann::json::array();
      for (const MemoryBreakdown& b : row.physical.memory)
        br.push_back({{"weights", b.weights}, {"gradients", b.gradients}, {"optimizer", b.optimizer}, {"ema", b.ema},
                      {"activations", b.activations}, {"comm_buffers", b.comm_buffers}, {"workspace", b.workspace},
                      {"total", b.total}, {"host", {{"optimizer", b.host_optimizer}, {"ema", b.host_ema}}},
                      {"peak_op", b.peak_op}, {"peak_chunks", b.chunks},
                      {"peak_time", b.peak_time < 0 ? nlohmann::json(nullptr) : nlohmann::json(scale.to_display(b.peak_time))}});
      j["peak_memory_bytes"]["breakdown"] = std::move(br);
    }
  }
  return j;
}

std::string render_json(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped, const TimeScale& scale,
                        const nlohmann::json& extra) {
  return results_json(rows, skipped, scale, extra).dump(2) + "\n";
}

nlohmann::json results_json(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped,
                            const TimeScale& scale, const nlohmann::json& extra) {
  nlohmann::json j;
  j["results"] = nlohmann::json::array();
  for (const auto& r : rows) j["results"].push_back(result_to_json(r, scale));
  j["skipped"] = nlohmann::json::array();
  for (const auto& s : skipped) j["skipped"].push_back({{"schedule", s.schedule}, {"reason", s.reason}});
  if (!extra.is_null())
    for (auto it = extra.begin(); it != extra.end(); ++it) j[it.key()] = it.value();
  return j;
}

namespace {

// "! over the GPU's 80.0 GB (hardware.hbm_gb): dualpipe ranks 0 1 (up to 96.2 GB)", one line per row.
std::string over_capacity_notes(const std::vector<ResultRow>& rows) {
  std::string out;
  for (const auto& row : rows) {
    const PhysicalResult& p = row.physical;
    if (p.over_capacity_ranks.empty()) continue;
    if (out.empty())
      out += fmt::format("\n! over the GPU's memory of {:.1f} GB (hardware.hbm_gb):\n", p.memory_capacity_bytes / 1e9);
    std::vector<std::string> ranks;
    double mx = 0;
    for (int r : p.over_capacity_ranks) {
      ranks.push_back(std::to_string(r));
      mx = std::max(mx, p.peak_memory_bytes[static_cast<std::size_t>(r)]);
    }
    out += fmt::format("  {}: rank{} {} (up to {:.1f} GB)\n", row.metrics.schedule, ranks.size() > 1 ? "s" : "",
                       per_rank_summary(ranks, 8), mx / 1e9);
  }
  return out;
}

}  // namespace

std::string render_table(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped, const TimeScale& scale) {
  std::string out;
  const bool phys = std::any_of(rows.begin(), rows.end(), [](const ResultRow& r) { return r.physical.available; });
  bool any_comm = false;
  std::size_t w = 17;  // the schedule column: the longest name, at least 17
  for (const auto& r : rows) {
    for (Time e : r.metrics.exposed_comm) any_comm |= e > 0;
    w = std::max(w, r.metrics.schedule.size());
  }
  out += fmt::format("{:<{}} {:>9} {:>7} {:<22} {:<26} {:<23} {:>6}", "schedule", w, "makespan", "ratio",
                     "bubble per rank", "published bubble", "peak act (rank shares)", "params");
  if (any_comm) out += fmt::format(" {:<18}", "exposed comm/rank");
  if (phys) out += fmt::format(" {:>9} {:>11} {:>6} {:>10}", "step (s)", "tokens/s", "MFU", "mem GB max");
  else out += fmt::format(" {:>10}", "mb/unit");
  out += "\n";
  for (const auto& row : rows) {
    const ScheduleMetrics& m = row.metrics;
    std::vector<std::string> bub, act, exp;
    for (Time b : m.bubble) bub.push_back(tfmt(b, scale, 2));
    for (double a : peak_shares_per_rank(m)) act.push_back(fmt::format("{:g}", a));
    for (Time e : m.exposed_comm) exp.push_back(tfmt(e, scale, 2));
    std::string pub = "-";
    if (m.published.available) {
      pub = tfmt(m.published.value, scale);
      if (m.published.own_span) pub += " own-span";
      pub += m.published_holds ? (m.published_matches ? " (exact)" : " (MISMATCH)") : " (n/a*)";
    }
    out += fmt::format("{:<{}} {:>9} {:>6.1f}% {:<22} {:<26} {:<23} {:>5}x", m.schedule, w, tfmt(m.makespan, scale, 2),
                       100.0 * m.bubble_ratio, per_rank_summary(bub, 8), pub, per_rank_summary(act, 8),
                       m.parameter_copies);
    if (any_comm) out += fmt::format(" {:<18}", per_rank_summary(exp, 4));
    if (phys) {
      double mx = 0;
      for (double b : row.physical.peak_memory_bytes) mx = std::max(mx, b);
      const bool over = !row.physical.over_capacity_ranks.empty();
      out +=
          fmt::format(" {:>9.3f} {:>11.0f} {:>5.1f}% {:>10}", row.physical.step_time_s, row.physical.tokens_per_second,
                      100.0 * row.physical.mfu, fmt::format("{:.1f}{}", mx / 1e9, over ? "!" : ""));
    } else {
      out += fmt::format(" {:>10.4f}", m.makespan ? m.microbatches / scale.to_display(m.makespan) : 0.0);
    }
    out += "\n";
  }
  bool notes = false;
  for (const auto& row : rows) {
    const ScheduleMetrics& m = row.metrics;
    if (m.published.available && !m.published_holds) {
      if (!notes) out += "\n* published formula's conditions do not hold here; the simulated figure is the truth:\n";
      notes = true;
      out += fmt::format("  {}: {} {}\n", m.schedule, m.published.formula, m.published_note);
    }
  }
  out += over_capacity_notes(rows);
  for (const auto& row : rows)
    if (!row.physical.schedule_note.empty()) out += "\n" + row.physical.schedule_note + "\n";
  if (!skipped.empty()) {
    out += "\nskipped:\n";
    for (const auto& s : skipped) out += fmt::format("  {}: {}\n", s.schedule, s.reason);
  }
  return out;
}

std::string render_memory_table(const std::vector<ResultRow>& rows, const TimeScale& scale) {
  std::string out;
  for (const auto& row : rows) {
    if (row.physical.memory.empty()) continue;
    out += fmt::format("\n{}: peak device memory per rank, GB (host: kept off the GPU, not in the total)\n", row.metrics.schedule);
    out += fmt::format("{:>4} {:>8} {:>8} {:>8} {:>7} {:>8} {:>8} {:>9} {:>8} {:>7} {:>10} {:>6}  {}\n", "rank", "weights", "grads",
                       "optim", "ema", "activ", "comm buf", "workspace", "total", "host", fmt::format("at ({})", scale.unit), "chunks", "op");
    for (std::size_t r = 0; r < row.physical.memory.size(); ++r) {
      const MemoryBreakdown& b = row.physical.memory[r];
      const std::string at = b.peak_time < 0 ? "-" : tfmt(b.peak_time, scale, 2);
      out += fmt::format("{:>4} {:>8.2f} {:>8.2f} {:>8.2f} {:>7.2f} {:>8.2f} {:>8.2f} {:>9.2f} {:>8.2f} {:>7.2f} {:>10} {:>6}  {}\n", r,
                         b.weights / 1e9, b.gradients / 1e9, b.optimizer / 1e9, b.ema / 1e9, b.activations / 1e9,
                         b.comm_buffers / 1e9, b.workspace / 1e9, b.total / 1e9, (b.host_optimizer + b.host_ema) / 1e9, at,
                         b.chunks, b.peak_op);
    }
  }
  return out;
}

std::string render_csv(const std::vector<ResultRow>& rows, const TimeScale& scale) {
  std::string out =
      "schedule,pp,microbatches,vpp,makespan,bubble_max,bubble_mean,bubble_ratio,published_bubble,"
      "published_holds,published_matches,peak_activations_max_rank_shares,parameter_copies,exposed_comm_max,"
      "fb_pair_time,step_time,tokens_per_second,mfu,peak_memory_bytes_max,memory_capacity_bytes,over_capacity_ranks\n";
  for (const auto& row : rows) {
    const ScheduleMetrics& m = row.metrics;
    const double act = peak_shares_max(m);
    Time exp = 0;
    for (Time e : m.exposed_comm) exp = std::max(exp, e);
    double mem = 0;
    for (double b : row.physical.peak_memory_bytes) mem = std::max(mem, b);
    std::vector<std::string> over;
    for (int r : row.physical.over_capacity_ranks) over.push_back(std::to_string(r));
    out += fmt::format("{},{},{},{},{},{},{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", m.schedule, m.pp,
                       m.microbatches, m.vpp, tfmt(m.makespan, scale), tfmt(m.bubble_max, scale),
                       m.bubble_mean / scale.ticks_per_unit, m.bubble_ratio,
                       m.published.available ? tfmt(m.published.value, scale) : "", m.published_holds ? 1 : 0,
                       m.published_matches ? 1 : 0, act, m.parameter_copies, tfmt(exp, scale),
                       m.fb_pair_time ? tfmt(*m.fb_pair_time, scale) : "",
                       row.physical.available ? fmt::format("{:.6f}", row.physical.step_time_s) : "",
                       row.physical.available ? fmt::format("{:.1f}", row.physical.tokens_per_second) : "",
                       row.physical.available ? fmt::format("{:.4f}", row.physical.mfu) : "",
                       row.physical.available ? fmt::format("{:.0f}", mem) : "",
                       row.physical.available ? fmt::format("{:.0f}", row.physical.memory_capacity_bytes) : "",
                       fmt::format("{}", fmt::join(over, " ")));
  }
  return out;
}

}  // namespace ppsim
