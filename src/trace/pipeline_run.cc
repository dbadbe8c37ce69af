// A pipeline run rebuilt from its traces (pipeline_run.h).
#include "trace/pipeline_run.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <regex>
#include <unordered_map>

#include "core/error.h"
#include "core/intervals.h"
#include "schedules/notation.h"
#include "schedules/torch_p2p.h"
#include "sim/engine.h"
#include "sim/metrics.h"

namespace ppsim::trace {

namespace {


Time length(const Intervals& m) {
  Time t = 0;
  for (const auto& [a, b] : m) t += b - a;
  return t;
}

// Length of the merged intervals `a` not covered by the merged intervals `b`.
Time uncovered(const Intervals& a, const Intervals& b) {
  Time t = 0;
  std::size_t j = 0;
  for (const auto& [s, e] : a) {
    Time cur = s, free = 0;
    while (j < b.size() && b[j].second <= s) ++j;
    for (std::size_t k = j; k < b.size() && b[k].first < e; ++k) {
      if (b[k].first > cur) free += b[k].first - cur;
      cur = std::max(cur, b[k].second);
    }
    if (cur < e) free += e - cur;
    t += free;
  }
  return t;
}

std::string pid_of(const std::string& thread) { return thread.substr(0, thread.find('/')); }

std::string ms(Time t) { return fmt::format("{:.3f}", static_cast<double>(t) / 1e6); }

struct Window {
  Time start = 0, end = 0;
  std::string pid;
  int action = -1;  // index into RankRun::actions; -1: a communication action
};

}  // namespace

std::optional<PipelineRange> parse_pipeline_range(const std::string& name) {
  static const std::regex kCompute(R"(\d+[FIWB]\d+)");
  static const std::regex kPair(R"(\(\s*\d+F\d+\s*;\s*\d+[BI]\d+\s*\)OVERLAP_F_B)");
  static const std::regex kComm(R"(\d+(?:UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)\d*)");
  static const std::regex kGpipe(R"((Forward|Backward) (\d{1,8}))");
  PipelineRange r;
  if (name.size() > 3 && name.compare(0, 3, "PP:") == 0) {
    const std::string a = name.substr(3);
    if (std::regex_match(a, kCompute) || std::regex_match(a, kPair)) {
      try {
        r.action = parse_action(a, SourceLoc{});
      } catch (const InputError&) {
        return std::nullopt;  // a number out of range: not an action of ours
      }
      return r;
    }
    if (std::regex_match(a, kComm)) {
      r.kind = PipelineRange::Kind::comm;
      return r;
    }
    return std::nullopt;
  }
  std::smatch m;
  if (std::regex_match(name, m, kGpipe)) {
    r.action = Action::single(Op{m[1].str() == "Forward" ? OpKind::F : OpKind::B, -1, std::stoi(m[2].str())});
    return r;
  }
  if (name == "forward-compute") return PipelineRange{PipelineRange::Kind::megatron_f, {}};
  if (name == "backward-compute") return PipelineRange{PipelineRange::Kind::megatron_b, {}};
  return std::nullopt;
}

namespace {

// Per rank, the GPU time the step is measured from: compute kernels of its actions, and the
// transfer part of its communication kernels; and the point-to-point transfers' sum and count.
struct StepIntervals {
  std::vector<Intervals> compute, transfer;
  Time p2p_sum = 0;
  long p2p_n = 0;
};

// Rank ri's actions, its outermost pipeline ranges in time order, into run.actions; returns the
// windows of its ranges (compute and communication actions), in time order.
std::vector<Window> rank_actions(const RankTrace& rt, int ri, RankRun& run) {
  const KinetoTrace& t = rt.trace;
  std::vector<std::optional<PipelineRange>> meaning(t.names.size());
  std::vector<char> known(t.names.size(), 0);
  std::vector<std::pair<std::size_t, PipelineRange>> found;
  for (std::size_t i = 0; i < t.ranges.size(); ++i) {
    const auto name = static_cast<std::size_t>(t.ranges[i].name);
    if (!known[name]) meaning[name] = parse_pipeline_range(t.names[name]), known[name] = 1;
    if (meaning[name]) found.emplace_back(i, *meaning[name]);
  }
  std::stable_sort(found.begin(), found.end(), [&](const auto& a, const auto& b) {
    const CpuRange &x = t.ranges[a.first], &y = t.ranges[b.first];
    return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
  });
  std::vector<Window> windows;
  int mega_f = 0, mega_b = 0;
  for (const auto& [i, pr] : found) {
    const CpuRange& cr = t.ranges[i];
    if (!windows.empty() && cr.ts < windows.back().end) continue;  // nested in (or overlapping) the last one
    Window w{cr.ts, cr.end(), pid_of(t.threads[static_cast<std::size_t>(cr.thread)]), -1};
    if (pr.kind != PipelineRange::Kind::comm) {
      ExecutedAction a;
      a.cpu_start = cr.ts;
      a.cpu_end = cr.end();
      switch (pr.kind) {
        case PipelineRange::Kind::megatron_f:
          a.action = Action::single(Op{OpKind::F, ri, mega_f++});
          run.source = "Megatron";
          break;
        case PipelineRange::Kind::megatron_b:
          a.action = Action::single(Op{OpKind::B, ri, mega_b++});
          run.source = "Megatron";
          break;
        default:
          a.action = pr.action;
          if (a.action.first.stage < 0) {
            a.action.first.stage = ri;
            run.source = "Forward i";
          } else {
            run.source = "PP:";
          }
      }
      w.action = static_cast<int>(run.actions.size());
      run.actions.push_back(a);
    }
    windows.push_back(std::move(w));
  }
  if (run.actions.empty())
    throw InputError(SourceLoc{rt.path, 0, 0},
                     fmt::format("rank {}: no pipeline action ranges (PP:{{action}}, 'Forward i'/'Backward i', or "
                                 "Megatron's forward-compute/backward-compute)",
                                 rt.rank),
                     "record the step with torch.profiler while torch.distributed.pipelining runs it "
                     "(docs/TRACES.md, \"Pipeline runs\")");
  return windows;
}

// The action whose window was open at `ts` in the process of the launching thread (its name):
// -1 for none, or a communication action's.
int action_open_at(const std::vector<Window>& windows, Time ts, const std::string& thread) {
  auto it = std::upper_bound(windows.begin(), windows.end(), ts, [](Time v, const Window& w) { return v < w.start; });
  if (it == windows.begin()) return -1;
  --it;
  return ts < it->end && it->pid == pid_of(thread) ? it->action : -1;
}

// Rank ri's GPU events to the action open at their launch: each action's kernels, compute and
// communication; the rank's compute and transfer intervals into `iv`.
void attribute_gpu_events(const RankTrace& rt, std::size_t ri, const std::vector<Window>& windows, RankRun& run,
                          StepIntervals& iv) {
  const KinetoTrace& t = rt.trace;
  std::unordered_map<std::int64_t, const Launch*> by_corr;
  by_corr.reserve(t.launches.size());
  for (const auto& l : t.launches) by_corr.emplace(l.correlation, &l);
  std::unordered_map<std::int64_t, const FlowPoint*> flow_start;
  for (const auto& f : t.flows)
    if (f.start) flow_start.emplace(f.id, &f);
  std::vector<Intervals> per_action(run.actions.size());
  for (std::size_t i = 0; i < t.gpu.size(); ++i) {
    const GpuEvent& g = t.gpu[i];
    int thread = -1;
    Time ts = 0;
    if (auto it = by_corr.find(g.correlation); g.correlation >= 0 && it != by_corr.end())
      thread = it->second->thread, ts = it->second->ts;
    else if (auto f = flow_start.find(g.correlation); g.correlation >= 0 && f != flow_start.end())
      thread = f->second->thread, ts = f->second->ts;
    if (thread < 0) continue;
    const int action = action_open_at(windows, ts, t.threads[static_cast<std::size_t>(thread)]);
    const Time s = g.ts + rt.shift, e = g.end() + rt.shift;
    if (rt.comm[i]) {
      // Communication counts inside a window or not: PyTorch's single-stage schedules and
      // Megatron issue their calls between the compute ranges.
      iv.transfer[ri].emplace_back(e - rt.transfer[i], e);
      run.comm_wait += g.dur - rt.transfer[i];
      if (is_p2p_kernel(t.names[static_cast<std::size_t>(g.name)])) iv.p2p_sum += rt.transfer[i], ++iv.p2p_n;
      if (action >= 0) run.actions[static_cast<std::size_t>(action)].comm += g.dur;
    } else if (action >= 0) {
      per_action[static_cast<std::size_t>(action)].emplace_back(s, e);
      iv.compute[ri].emplace_back(s, e);
    }
    if (action >= 0) ++run.actions[static_cast<std::size_t>(action)].kernels;
  }
  for (std::size_t a = 0; a < run.actions.size(); ++a) {
    const Intervals merged = merge_intervals(std::move(per_action[a]));
    ExecutedAction& ea = run.actions[a];
    ea.compute = length(merged);
    if (!merged.empty()) {
      ea.gpu_start = merged.front().first;
      ea.gpu_end = merged.back().second;
      run.first = std::min(run.first, ea.gpu_start);
      run.last = std::max(run.last, ea.gpu_end);
    }
  }
}

// The step, measured: its span over all ranks, and each rank's compute, exposed communication
// and bubble within it.
void measure_step(PipelineRun& p, StepIntervals& iv) {
  p.start = kNever;
  for (const auto& r : p.ranks)
    if (r.first != kNever) p.start = std::min(p.start, r.first), p.end = std::max(p.end, r.last);
  if (p.start == kNever) p.start = p.end = 0;
  for (std::size_t ri = 0; ri < p.ranks.size(); ++ri) {
    RankRun& r = p.ranks[ri];
    const Intervals c = merge_intervals(std::move(iv.compute[ri]));
    Intervals tr;
    for (const auto& [a, b] : merge_intervals(std::move(iv.transfer[ri]))) {
      const Time s = std::max(a, p.start), e = std::min(b, p.end);
      if (s < e) tr.emplace_back(s, e);
    }
    r.compute = length(c);
    r.exposed_comm = uncovered(tr, c);
    r.bubble = p.makespan() - r.compute - r.exposed_comm;
  }
}

// The executed order as a schedule (CSV notation, one line per rank, then validated).
void executed_schedule(PipelineRun& p) {
  for (const auto& r : p.ranks) {
    std::string line;
    for (const auto& a : r.actions) {
      if (!line.empty()) line += ',';
      line += format_action(a.action);
    }
    p.csv += line + "\n";
  }
  p.schedule = import_csv(p.csv, "the executed order", static_cast<int>(p.ranks.size()), 0);
  p.schedule.family = "executed";
}

// Its costs: per slice, the mean of its measured actions; an F&B pair's saving against the two
// ops alone, shared by the two slices; links, the mean point-to-point transfer.
void executed_costs(PipelineRun& p, const StepIntervals& iv) {
  int slices = 0;
  for (int s : p.schedule.slice) slices = std::max(slices, s + 1);
  struct Acc {
    Time sum[kNumOpKinds] = {};
    int n[kNumOpKinds] = {};
    double saving = 0;
    int pairs = 0;
  };
  std::vector<Acc> acc(static_cast<std::size_t>(slices));
  auto slice_of = [&](const Op& o) {
    return static_cast<std::size_t>(p.schedule.slice[static_cast<std::size_t>(o.stage)]);
  };
  for (const auto& r : p.ranks)
    for (const auto& a : r.actions)
      if (!a.action.overlapped) {
        Acc& x = acc[slice_of(a.action.first)];
        x.sum[static_cast<int>(a.action.first.kind)] += a.compute;
        ++x.n[static_cast<int>(a.action.first.kind)];
      }
  auto mean = [](const Acc& x, OpKind k) -> Time {
    const int i = static_cast<int>(k);
    return x.n[i] > 0 ? x.sum[i] / x.n[i] : 0;
  };
  p.costs.slice.resize(static_cast<std::size_t>(slices));
  for (std::size_t s = 0; s < acc.size(); ++s) {
    SliceCosts& c = p.costs.slice[s];
    const Acc& x = acc[s];
    c.f = mean(x, OpKind::F);
    c.w = mean(x, OpKind::W);
    c.b = x.n[static_cast<int>(OpKind::B)] > 0 ? mean(x, OpKind::B) : mean(x, OpKind::I) + c.w;
  }
  for (const auto& r : p.ranks)
    for (const auto& a : r.actions)
      if (a.action.overlapped) {
        const SliceCosts& fa = p.costs.slice[slice_of(a.action.first)];
        const SliceCosts& bb = p.costs.slice[slice_of(a.action.second)];
        const Time alone = fa.f + (a.action.second.kind == OpKind::I ? bb.input_grad() : bb.b);
        const double saving = static_cast<double>(alone - a.compute);
        for (std::size_t s : {slice_of(a.action.first), slice_of(a.action.second)}) {
          acc[s].saving += saving;
          ++acc[s].pairs;
        }
      }
  for (std::size_t s = 0; s < acc.size(); ++s)
    if (acc[s].pairs > 0) {
      SliceCosts& c = p.costs.slice[s];
      const Time fb = c.f + c.b - static_cast<Time>(std::llround(acc[s].saving / acc[s].pairs));
      c.fb = std::max({fb, c.f, c.b, Time{1}});
    }
  p.costs.link.latency = iv.p2p_n > 0 ? iv.p2p_sum / iv.p2p_n : 0;
  p.costs.scale = TimeScale::millis();
}

}  // namespace

PipelineRun rebuild_pipeline(const MultiRank& m) {
  PipelineRun p;
  StepIntervals iv;
  iv.compute.resize(m.ranks.size());
  iv.transfer.resize(m.ranks.size());
  for (std::size_t ri = 0; ri < m.ranks.size(); ++ri) {
    const RankTrace& rt = m.ranks[ri];
    RankRun run;
    run.rank = rt.rank;
    const std::vector<Window> windows = rank_actions(rt, static_cast<int>(ri), run);
    attribute_gpu_events(rt, ri, windows, run, iv);
    p.ranks.push_back(std::move(run));
  }
  measure_step(p, iv);
  executed_schedule(p);
  executed_costs(p, iv);
  return p;
}

ExecutedComparison compare_executed(const PipelineRun& p, bool torch_runtime) {
  ExecutedComparison c;
  c.torch_runtime = torch_runtime;
  // Actions in PP: ranges ran through PyTorch's runtime whatever their order; 'Forward i' /
  // 'Backward i' ranges come from its single-stage schedules.
  bool runtime_ranges = !p.ranks.empty();
  for (const RankRun& r : p.ranks) runtime_ranges = runtime_ranges && r.source == "PP:";
  const Schedule run =
      torch_runtime ? with_torch_p2p(p.schedule, runtime_ranges ? TorchRuntime::multi_stage : TorchRuntime::automatic) : p.schedule;
  const SimResult sim = simulate(run, p.costs);
  const ScheduleMetrics mt = compute_metrics(run, sim, p.costs, nullptr, ScheduleParams{run.pp, run.microbatches});
  c.measured_makespan = p.makespan();
  c.simulated_makespan = mt.makespan;
  SimCosts own = p.costs;
  own.action_time.resize(p.ranks.size());
  for (std::size_t r = 0; r < p.ranks.size(); ++r)
    for (const ExecutedAction& a : p.ranks[r].actions) own.action_time[r].push_back(a.compute);
  c.replayed_makespan = simulate(run, own).makespan();
  c.link_latency = p.costs.link.latency;
  for (std::size_t r = 0; r < p.ranks.size(); ++r) {
    RankComparison rc;
    rc.rank = p.ranks[r].rank;
    rc.measured_compute = p.ranks[r].compute;
    rc.measured_exposed = p.ranks[r].exposed_comm;
    rc.measured_bubble = p.ranks[r].bubble;
    rc.simulated_compute = mt.compute[r];
    rc.simulated_exposed = mt.exposed_comm[r];
    rc.simulated_bubble = mt.bubble[r];
    c.ranks.push_back(rc);
  }
  return c;
}

std::string render_pipeline_run(const PipelineRun& p) {
  std::string o = fmt::format("\npipeline run: {} ranks, {} micro-batches, layout {}; the step {} ms (first to last "
                              "action kernel, aligned clocks)\n",
                              p.schedule.pp, p.schedule.microbatches,
                              p.schedule.num_pipes == 2 ? "two pipes" : p.schedule.chunks_per_rank > 1 ? "v/interleaved" : "linear",
                              ms(p.makespan()));
  for (const auto& r : p.ranks) {
    o += fmt::format("rank {} ({} ranges): {} actions, compute {} ms, communication waiting {} ms\n", r.rank, r.source,
                     r.actions.size(), ms(r.compute), ms(r.comm_wait));
    std::string line;
    for (const auto& a : r.actions) {
      const std::string item = fmt::format("{} {}", format_action(a.action), ms(a.compute));
      if (!line.empty() && line.size() + item.size() > 100) o += "  " + line + "\n", line.clear();
      line += (line.empty() ? "" : "  ") + item;
    }
    o += "  " + line + "\n";
  }
  o += "per slice, mean of its actions (ms):";
  for (std::size_t s = 0; s < p.costs.slice.size(); ++s) {
    const SliceCosts& c = p.costs.slice[s];
    o += fmt::format(" [{}] F {} B {} W {}{}", s, ms(c.f), ms(c.b), ms(c.w), c.fb > 0 ? " F&B " + ms(c.fb) : "");
  }
  o += "\n";
  return o;
}

std::string render_executed_comparison(const ExecutedComparison& c) {
  std::string o = fmt::format(
      "\nexecuted order, measured against simulated with its own costs (links: {} ms latency, the mean "
      "point-to-point transfer; {}):\n",
      ms(c.link_latency),
      c.torch_runtime ? "PyTorch's sends and receives, one stream per rank" : "each transfer starts when its producer ends");
  o += fmt::format("makespan: measured {} ms, simulated {} ms ({:+.1f}%); each action at its own measured time {} ms "
                   "({:+.1f}%)\n",
                   ms(c.measured_makespan), ms(c.simulated_makespan), 100 * c.error(), ms(c.replayed_makespan),
                   100 * c.replay_error());
  o += fmt::format("{:>5} {:>12} {:>12} {:>14} {:>14} {:>12} {:>12}\n", "rank", "compute ms", "(simulated)",
                   "exposed comm", "(simulated)", "bubble ms", "(simulated)");
  for (const auto& r : c.ranks)
    o += fmt::format("{:>5} {:>12} {:>12} {:>14} {:>14} {:>12} {:>12}\n", r.rank, ms(r.measured_compute),
                     ms(r.simulated_compute), ms(r.measured_exposed), ms(r.simulated_exposed), ms(r.measured_bubble),
                     ms(r.simulated_bubble));
  return o;
}

nlohmann::json pipeline_run_json(const PipelineRun& p) {
  auto msd = [](Time t) { return static_cast<double>(t) / 1e6; };
  nlohmann::json j;
  j["ranks"] = p.schedule.pp;
  j["microbatches"] = p.schedule.microbatches;
  j["step_ms"] = msd(p.makespan());
  j["csv"] = p.csv;
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : p.ranks) {
    nlohmann::json acts = nlohmann::json::array();
    for (const auto& a : r.actions)
      acts.push_back({{"action", format_action(a.action)},
                      {"compute_ms", msd(a.compute)},
                      {"communication_ms", msd(a.comm)},
                      {"start_ms", a.gpu_start == kNever ? nlohmann::json(nullptr) : nlohmann::json(msd(a.gpu_start - p.start))},
                      {"end_ms", a.gpu_start == kNever ? nlohmann::json(nullptr) : nlohmann::json(msd(a.gpu_end - p.start))},
                      {"kernels", a.kernels}});
    rs.push_back({{"rank", r.rank},
                  {"source", r.source},
                  {"compute_ms", msd(r.compute)},
                  {"exposed_communication_ms", msd(r.exposed_comm)},
                  {"bubble_ms", msd(r.bubble)},
                  {"communication_waiting_ms", msd(r.comm_wait)},
                  {"actions", acts}});
  }
  j["per_rank"] = rs;
  nlohmann::json sl = nlohmann::json::array();
  for (const auto& c : p.costs.slice)
    sl.push_back({{"F_ms", msd(c.f)}, {"B_ms", msd(c.b)}, {"W_ms", msd(c.w)}, {"FB_ms", c.fb > 0 ? nlohmann::json(msd(c.fb)) : nlohmann::json(nullptr)}});
  j["slices"] = sl;
  return j;
}

nlohmann::json executed_comparison_json(const ExecutedComparison& c) {
  auto msd = [](Time t) { return static_cast<double>(t) / 1e6; };
  nlohmann::json j;
  j["measured_makespan_ms"] = msd(c.measured_makespan);
  j["simulated_makespan_ms"] = msd(c.simulated_makespan);
  j["replayed_makespan_ms"] = msd(c.replayed_makespan);
  j["link_latency_ms"] = msd(c.link_latency);
  j["p2p_runtime"] = c.torch_runtime ? "torch" : "dataflow";
  nlohmann::json rs = nlohmann::json::array();
  for (const auto& r : c.ranks)
    rs.push_back({{"rank", r.rank},
                  {"measured", {{"compute_ms", msd(r.measured_compute)}, {"exposed_communication_ms", msd(r.measured_exposed)}, {"bubble_ms", msd(r.measured_bubble)}}},
                  {"simulated", {{"compute_ms", msd(r.simulated_compute)}, {"exposed_communication_ms", msd(r.simulated_exposed)}, {"bubble_ms", msd(r.simulated_bubble)}}}});
  j["per_rank"] = rs;
  return j;
}

}  // namespace ppsim::trace
