// The plan report (plan_report.h): per variant the search, the rejections by reason with an
// example each, the top k, the best plan of every schedule family and a one-line "why"; then
// the what-if table. Every figure is derived from the PlanResult alone, so a merged result
// prints byte for byte what an unsharded run prints.
#include "plan/plan_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ppsim {

namespace {

constexpr double kGB = 1e9;

// A text table: columns left-aligned (text) or right-aligned (numbers), two spaces apart.
class TextTable {
 public:
  explicit TextTable(std::vector<std::pair<std::string, bool>> header) : header_(std::move(header)) {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render(const std::string& indent) const {
    std::vector<std::size_t> w(header_.size(), 0);
    for (std::size_t c = 0; c < header_.size(); ++c) w[c] = header_[c].first.size();
    for (const auto& r : rows_)
      for (std::size_t c = 0; c < r.size() && c < w.size(); ++c) w[c] = std::max(w[c], r[c].size());
    auto line = [&](const std::vector<std::string>& cells) {
      std::string s = indent;
      for (std::size_t c = 0; c < header_.size(); ++c) {
        const std::string cell = c < cells.size() ? cells[c] : "";
        const std::string pad(w[c] - std::min(w[c], cell.size()), ' ');
        const bool right = header_[c].second;
        if (c) s += "  ";
        s += right ? pad + cell : (c + 1 == header_.size() ? cell : cell + pad);
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      return s + "\n";
    };
    std::vector<std::string> head;
    for (const auto& h : header_) head.push_back(h.first);
    std::string out = line(head);
    for (const auto& r : rows_) out += line(r);
    return out;
  }

 private:
  std::vector<std::pair<std::string, bool>> header_;
  std::vector<std::vector<std::string>> rows_;
};

std::string ms_text(Time ns) { return fmt::format("{:.2f}", static_cast<double>(ns) / 1e6); }
std::string pct(double x) { return fmt::format("{:.1f}%", 100.0 * x); }
std::string gb(double bytes) { return fmt::format("{:.1f}", bytes / kGB); }
std::string signed_pct(double x) { return fmt::format("{:+.1f}%", x); }

std::string layout_text(const PlanRow& r) {
  return fmt::format("pp={} v={} M={} mbs={} ep={} recompute={}", r.pp, r.v, r.microbatches, r.mbs, r.ep, recompute_name(r.recompute));
}

double delta_pct(const PlanRow& a, const PlanRow& base) {
  return base.step_ns > 0 ? 100.0 * (static_cast<double>(a.step_ns) - static_cast<double>(base.step_ns)) / static_cast<double>(base.step_ns)
                          : 0.0;
}

// The objective's change from `base` to `a`, percent: step time (+ = slower) or tokens/s
// (- = fewer).
double objective_delta_pct(const PlanResult& r, const PlanRow& a, const PlanRow& base) {
  if (r.objective == Objective::step_time) return delta_pct(a, base);
  return base.tokens_per_second > 0 ? 100.0 * (a.tokens_per_second / base.tokens_per_second - 1.0) : 0.0;
}

bool same_layout(const PlanRow& a, const PlanRow& b) {
  return a.pp == b.pp && a.v == b.v && a.microbatches == b.microbatches && a.mbs == b.mbs && a.ep == b.ep &&
         a.recompute == b.recompute;
}

std::string quote_set(const std::string& s) {
  for (char c : s)
    if (c == ' ' || c == '[' || c == '{' || c == ',' || c == '*' || c == '\'') return "'" + s + "'";
  return s;
}

std::string rows_table(const VariantResult& v, const std::vector<PlanRow>& rows) {
  TextTable t({{"#", true}, {"schedule", false}, {"pp", true}, {"v", true}, {"M", true}, {"mbs", true}, {"ep", true},
               {"recompute", false}, {"dp", true}, {"step ms", true}, {"tokens/s", true}, {"MFU", true}, {"bubble", true},
               {"exp.comm ms", true}, {"peak GB", true}, {"headroom GB", true}});
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const PlanRow& r = rows[i];
    t.add({std::to_string(i + 1), r.schedule, std::to_string(r.pp), std::to_string(r.v), std::to_string(r.microbatches),
           std::to_string(r.mbs), std::to_string(r.ep), recompute_name(r.recompute), std::to_string(r.dp), ms_text(r.step_ns),
           fmt::format("{:.0f}", r.tokens_per_second), pct(r.mfu), pct(r.bubble_ratio), ms_text(r.exposed_comm_ns),
           gb(r.peak_memory_bytes), gb(v.memory_cap_bytes - r.peak_memory_bytes)});
  }
  return t.render("  ");
}

// "memory cap 12, schedule constraint 3" for a family with no feasible plan.
std::string reasons_text(const std::array<std::uint64_t, kReasons>& counts) {
  std::vector<std::pair<std::uint64_t, int>> order;
  for (int k = 0; k < kReasons; ++k)
    if (counts[static_cast<std::size_t>(k)] > 0) order.emplace_back(counts[static_cast<std::size_t>(k)], k);
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string s;
  for (const auto& [n, k] : order) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", reason_name(static_cast<Reason>(k)), n);
  return s.empty() ? "not in the search" : s;
}

// The nearest change that makes a plan feasible: the candidate rejected for memory that needed
// the least, and the cap it needs; else the reason that rejected the most candidates.
std::string nearest_change_text(const VariantResult& v) {
  if (v.nearest.any && !v.nearest.simulated)
    return fmt::format(
        "nearest change: #{} {} needs at least {} GB per GPU for its weights, gradients and optimizer states "
        "alone ({} GB over the cap; its activations come on top): give GPUs with more memory, or more GPUs or "
        "pipeline stages to share the states\n",
        v.nearest.id, v.nearest.candidate, gb(v.nearest.need_bytes), gb(v.nearest.need_bytes - v.memory_cap_bytes));
  if (v.nearest.any) {
    const double need_gb = std::ceil(v.nearest.need_bytes / kGB * 10.0) / 10.0;
    return fmt::format(
        "nearest change: #{} {} needs {} GB per GPU, {} GB over the cap: allow {:g} GB per GPU "
        "(plan.constraints.memory_gb, or a GPU with more memory), or add recompute or GPUs to the search\n",
        v.nearest.id, v.nearest.candidate, gb(v.nearest.need_bytes), gb(v.nearest.need_bytes - v.memory_cap_bytes),
        need_gb);
  }
  int most = -1;
  for (int k = 0; k < kReasons; ++k)
    if (v.rejected[static_cast<std::size_t>(k)].count > 0 &&
        (most < 0 || v.rejected[static_cast<std::size_t>(k)].count > v.rejected[static_cast<std::size_t>(most)].count))
      most = k;
  if (most < 0) return {};
  const Rejections& x = v.rejected[static_cast<std::size_t>(most)];
  return fmt::format("nearest change: relax the {} constraint, which rejected {} of {} candidates (e.g. #{} {})\n",
                     reason_name(static_cast<Reason>(most)), x.count, v.candidates, x.example_id, x.example);
}

std::string why_text(const PlanResult& r, const VariantResult& v) {
  const PlanRow& w = v.ranking.front();
  const PlanRow* other = v.best_per_schedule.size() > 1 ? &v.best_per_schedule[1] : nullptr;
  if (other == nullptr) {
    if (v.best_per_schedule.size() == 1)
      return fmt::format("why: {} is the only schedule family with a feasible plan.", w.schedule);
    return {};
  }
  const std::string metric = r.objective == Objective::tokens_per_second
                                 ? fmt::format("{:.1f}% fewer tokens/s", -objective_delta_pct(r, *other, w))
                                 : fmt::format("{:.1f}% slower per step", delta_pct(*other, w));
  return fmt::format(
      "why: {} ({}) wins; the best other family, {} ({}), is {}: bubble {} vs {}, exposed communication {} vs {} ms "
      "(worst rank), peak memory {} vs {} GB.",
      w.schedule, layout_text(w), other->schedule, layout_text(*other), metric, pct(w.bubble_ratio), pct(other->bubble_ratio),
      ms_text(w.exposed_comm_ns), ms_text(other->exposed_comm_ns), gb(w.peak_memory_bytes), gb(other->peak_memory_bytes));
}

std::string variant_section(const PlanResult& r, const VariantResult& v) {
  std::string out;
  out += fmt::format("== {}{} ==\n", v.name, v.overrides.empty() ? std::string{} : fmt::format(" ({})", fmt::join(v.overrides, ", ")));
  out += fmt::format("search: {}\n", fmt::join(v.space, "; "));
  std::uint64_t rejected = 0;
  for (const auto& x : v.rejected) rejected += x.count;
  out += fmt::format("candidates: {}, feasible: {}, rejected: {}; memory cap {} GB per GPU, {} GPUs\n", v.candidates,
                     v.feasible.size(), rejected, gb(v.memory_cap_bytes), v.gpus);
  if (rejected > 0) {
    out += "rejected by reason (first candidate as an example):\n";
    TextTable t({{"reason", false}, {"count", true}, {"example", false}});
    for (int k = 0; k < kReasons; ++k) {
      const Rejections& x = v.rejected[static_cast<std::size_t>(k)];
      if (x.count > 0) t.add({reason_name(static_cast<Reason>(k)), std::to_string(x.count), fmt::format("#{} {}", x.example_id, x.example)});
    }
    out += t.render("  ");
  }
  if (v.ranking.empty()) {
    out += "no feasible plan: relax the constraints or widen the search (see the reasons above)\n";
    out += nearest_change_text(v);
    return out;
  }
  out += fmt::format("top {} by {}:\n", v.ranking.size(),
                     r.objective == Objective::tokens_per_second ? "tokens per second" : "step time");
  out += rows_table(v, v.ranking);
  out += "best per schedule:\n";
  TextTable t({{"schedule", false}, {"step ms", true}, {"tokens/s", true}, {"vs best", true}, {"plan", false}});
  const PlanRow& best = v.ranking.front();
  // Families with a plan in ranking order, then the others in the order of the search.
  for (const PlanRow& b : v.best_per_schedule)
    t.add({b.schedule, ms_text(b.step_ns), fmt::format("{:.0f}", b.tokens_per_second), signed_pct(objective_delta_pct(r, b, best)),
           layout_text(b)});
  for (const auto& [name, counts] : v.rejected_by_schedule) {
    bool has_plan = false;
    for (const PlanRow& x : v.best_per_schedule) has_plan |= x.schedule == name;
    if (!has_plan) t.add({name, "-", "-", "-", "none feasible: " + reasons_text(counts)});
  }
  out += t.render("  ");
  out += why_text(r, v) + "\n";
  std::string cmd = fmt::format("reproduce: ppsim compare {}", r.config_file);
  for (const auto& s : reproduce_sets(v, best)) cmd += " --set " + quote_set(s);
  out += cmd + "\n";
  return out;
}

}  // namespace

std::vector<WhatIfRow> whatif_rows(const PlanResult& r) {
  std::vector<WhatIfRow> out;
  const PlanRow* base = r.variants.empty() || r.variants.front().ranking.empty() ? nullptr : &r.variants.front().ranking.front();
  for (std::size_t i = 0; i < r.variants.size(); ++i) {
    const VariantResult& v = r.variants[i];
    WhatIfRow w;
    w.index = i;
    w.variant = v.name;
    if (!v.ranking.empty()) {
      w.best = &v.ranking.front();
      if (base != nullptr) {
        w.delta_pct = delta_pct(*w.best, *base);
        w.schedule_changed = w.best->schedule != base->schedule;
        w.layout_changed = !same_layout(*w.best, *base);
      }
    }
    out.push_back(w);
  }
  return out;
}

std::string render_plan_table(const PlanResult& r) {
  std::string out = fmt::format("ppsim plan: {} ({})\n", r.config_name, r.config_file);
  out += fmt::format("objective: {}; constraints: {}\n", r.objective == Objective::tokens_per_second
                                                             ? "tokens per second (higher is better)"
                                                             : "step time (lower is better)",
                     r.constraints);
  if (r.shard_count > 1) out += fmt::format("shard {}/{}: candidates with id % {} == {} only\n", r.shard_index, r.shard_count, r.shard_count, r.shard_index);
  for (const VariantResult& v : r.variants) {
    out += "\n";
    out += variant_section(r, v);
  }
  if (r.variants.size() > 1) {
    out += "\n== what-if: best plan per variant ==\n";
    TextTable t({{"variant", false}, {"overrides", false}, {"schedule", false}, {"pp", true}, {"v", true}, {"M", true},
                 {"mbs", true}, {"ep", true}, {"recompute", false}, {"step ms", true}, {"tokens/s", true}, {"step vs base", true},
                 {"changed vs base", false}});
    const PlanRow* base = r.variants.front().ranking.empty() ? nullptr : &r.variants.front().ranking.front();
    for (const WhatIfRow& w : whatif_rows(r)) {
      const VariantResult& v = r.variants[w.index];
      const std::string ov = v.overrides.empty() ? "-" : fmt::format("{}", fmt::join(v.overrides, ", "));
      if (w.best == nullptr) {
        t.add({w.variant, ov, "no feasible plan"});
        continue;
      }
      const PlanRow& b = *w.best;
      std::string changed;
      if (w.index == 0) changed = "(base)";
      else if (base == nullptr) changed = "base has no plan";
      else if (!w.schedule_changed && !w.layout_changed) changed = "same plan";
      else {
        std::vector<std::string> parts;
        if (w.schedule_changed) parts.push_back(fmt::format("schedule {} -> {}", base->schedule, b.schedule));
        if (w.layout_changed) parts.push_back("layout " + layout_text(b));
        changed = fmt::format("{}", fmt::join(parts, "; "));
      }
      t.add({w.variant, ov, b.schedule, std::to_string(b.pp), std::to_string(b.v), std::to_string(b.microbatches),
             std::to_string(b.mbs), std::to_string(b.ep), recompute_name(b.recompute), ms_text(b.step_ns),
             fmt::format("{:.0f}", b.tokens_per_second), w.index == 0 || base == nullptr ? "-" : signed_pct(w.delta_pct), changed});
    }
    out += t.render("  ");
  }
  return out;
}

std::string render_plan_csv(const PlanResult& r) {
  std::string out =
      "variant,rank,id,schedule,pp,vpp,microbatches,micro_batch_size,ep,recompute,dp,gpus,global_batch,step_time_ms,"
      "tokens_per_second,mfu,bubble_ratio,exposed_comm_ms,peak_memory_gb,headroom_gb\n";
  for (const VariantResult& v : r.variants)
    for (std::size_t i = 0; i < v.ranking.size(); ++i) {
      const PlanRow& x = v.ranking[i];
      out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{:.6f},{:.3f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f}\n", v.name, i + 1,
                         x.id, x.schedule, x.pp, x.v, x.microbatches, x.mbs, x.ep, recompute_name(x.recompute), x.dp, x.gpus,
                         static_cast<long long>(x.microbatches) * x.mbs * x.dp, static_cast<double>(x.step_ns) / 1e6,
                         x.tokens_per_second, x.mfu, x.bubble_ratio, static_cast<double>(x.exposed_comm_ns) / 1e6,
                         x.peak_memory_bytes / kGB, (v.memory_cap_bytes - x.peak_memory_bytes) / kGB);
    }
  return out;
}

}  // namespace ppsim
