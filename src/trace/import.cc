// Figures of an imported trace (import.h), after the attribution (attribution.h): named phases
// over the GPU events, in the order import_trace runs them:
//   stream_roles          communication kernels and each stream's role;
//   device_figures        each device's span, its communication intervals, and the step's span,
//                         busy times and the GPU's idle time with nothing queued (host-bound);
//   beside_communication  each compute kernel's fraction of time beside communication;
//   measure_slowdown      the slowdown per sub-op from the same kernel beside and away from it;
//   split_communication   transfer and waiting, matching the k-th collective of every device;
//   sm_share, wall_shares the communication kernels' SM share; compute on several streams once;
//   fill_cells, count_executions, build_profile   the cells per (layer, sub-op, pass) and the
//                         per-layer profile.
#include "trace/import.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "core/intervals.h"
#include "core/json_null.h"
#include "cost/profile.h"
#include "trace/attribution.h"

namespace ppsim::trace {

namespace {

Time total(const std::vector<std::pair<Time, Time>>& v) {
  Time t = 0;
  for (const auto& [a, b] : v) t += b - a;
  return t;
}

// Length of [a, b) covered by the merged, sorted intervals.
Time covered(const std::vector<std::pair<Time, Time>>& m, Time a, Time b) {
  auto it = std::upper_bound(m.begin(), m.end(), std::make_pair(a, std::numeric_limits<Time>::max()));
  if (it != m.begin()) --it;
  Time c = 0;
  for (; it != m.end() && it->first < b; ++it) c += std::max<Time>(0, std::min(b, it->second) - std::max(a, it->first));
  return c;
}

// The idle time of one device's step with nothing queued: each gap in its GPU work that began
// before the kernel ending it was launched (the GPU waited for the host; a kernel queued before
// the gap began waited for something else: a dependency, an event). `events` in start order.
Time idle_unqueued(const KinetoTrace& t, const std::vector<Attribution>& attr, const std::vector<std::size_t>& events) {
  Time idle = 0, busy_end = std::numeric_limits<Time>::min();
  for (std::size_t i : events) {
    const GpuEvent& g = t.gpu[i];
    if (busy_end != std::numeric_limits<Time>::min() && g.ts > busy_end && attr[i].launch > busy_end)
      idle += g.ts - busy_end;
    busy_end = std::max(busy_end, g.end());
  }
  return idle;
}

class Measure {
 public:
  Measure(const KinetoTrace& t, const Rules& rules, const std::optional<std::regex>& step_re,
          std::vector<Attribution> attr, ImportResult& r)
      : r_(r),
        t_(t),
        rules_(rules),
        step_re_(step_re),
        attr_(std::move(attr)),
        n_(t.gpu.size()),
        is_comm_(n_),
        beside_(n_, 0),
        transfer_(n_, 0),
        wall_(n_, 0) {
    comm_name_.assign(t.names.size(), -1);
  }

  void run() {
    stream_roles();
    device_figures();
    beside_communication();
    measure_slowdown();
    split_communication();
    sm_share();
    wall_shares();
    fill_cells();
    count_executions();
    build_profile();
  }

 private:
  ImportResult& r_;
  const KinetoTrace& t_;
  const Rules& rules_;
  const std::optional<std::regex>& step_re_;
  std::vector<Attribution> attr_;
  std::size_t n_;
  std::vector<bool> is_comm_;
  std::vector<signed char> comm_name_;  // the regex once per kernel name
  std::map<std::pair<int, std::int64_t>, StreamStats> streams_;
  std::map<int, std::vector<std::pair<Time, Time>>> comm_iv_;  // per device, merged
  std::map<int, std::vector<std::size_t>> comm_by_dev_;
  std::vector<double> beside_;  // fraction of each compute kernel's time beside communication
  std::vector<Time> transfer_;  // each communication kernel's transfer part
  std::vector<double> wall_;    // each kernel's share of the wall clock among compute streams
  std::set<std::tuple<int, int, int, int>> instances_;
  double sm_num_ = 0, sm_den_ = 0;

  bool comm_kernel(int name) {
    signed char& c = comm_name_[static_cast<std::size_t>(name)];
    if (c < 0) c = rules_.comm(t_.names[static_cast<std::size_t>(name)]) ? 1 : 0;
    return c == 1;
  }
  int subop_of(const Attribution& a) const { return a.p.subop < 0 ? static_cast<int>(SubOp::other) : a.p.subop; }

  void stream_roles();
  void device_figures();
  void beside_communication();
  void measure_slowdown();
  void split_communication();
  void sm_share();
  void wall_shares();
  void fill_cells();
  void count_executions();
  void build_profile();
};

void Measure::stream_roles() {
  for (std::size_t i = 0; i < n_; ++i) {
    const GpuEvent& g = t_.gpu[i];
    const int sub = attr_[i].p.subop;
    is_comm_[i] =
        comm_kernel(g.name) ||
        (attr_[i].p.pass >= 0 && (sub == static_cast<int>(SubOp::dispatch) || sub == static_cast<int>(SubOp::combine)));
    StreamStats& s = streams_[{g.device, g.stream}];
    s.device = g.device;
    s.stream = g.stream;
    ++s.kernels;
    s.busy += g.dur;
    if (is_comm_[i]) s.comm_busy += g.dur;
  }
  for (auto& [k, s] : streams_) {
    s.comm = 2 * s.comm_busy > s.busy;
    r_.streams.push_back(s);
  }
}

// The step's figures: span, busy time and idle time with nothing queued of its GPU work (all of
// it without step_range), and each device's communication intervals.
void Measure::device_figures() {
  std::map<int, std::vector<std::pair<Time, Time>>> comp_iv, comm_streams_iv;
  std::map<int, DeviceFigures> step_dev;
  std::map<int, std::vector<std::size_t>> step_events;
  for (std::size_t i = 0; i < n_; ++i) {
    const GpuEvent& g = t_.gpu[i];
    if (is_comm_[i]) {
      comm_iv_[g.device].emplace_back(g.ts, g.end());
      comm_by_dev_[g.device].push_back(i);
    }
    if (step_re_ && !attr_[i].p.in_step) continue;
    ++r_.step_events;
    auto [it, fresh] = step_dev.try_emplace(g.device);
    DeviceFigures& d = it->second;
    if (fresh) d.device = g.device, d.first = g.ts, d.last = g.end();
    d.first = std::min(d.first, g.ts);
    d.last = std::max(d.last, g.end());
    (streams_[{g.device, g.stream}].comm ? comm_streams_iv : comp_iv)[g.device].emplace_back(g.ts, g.end());
    step_events[g.device].push_back(i);
  }
  if (step_re_ && r_.step_events == 0)
    throw InputError(
        fmt::format("--step-range '{}': no GPU work was launched under a range of that name", r_.step_range), {},
        kExitUsage);
  for (auto& [k, d] : step_dev) {
    d.compute_busy = total(merge_intervals(comp_iv[k]));
    d.comm_busy = total(merge_intervals(comm_streams_iv[k]));
    auto& ev = step_events[k];
    std::sort(ev.begin(), ev.end(), [&](std::size_t a, std::size_t b) { return t_.gpu[a].ts < t_.gpu[b].ts; });
    d.host_idle = idle_unqueued(t_, attr_, ev);
    r_.devices.push_back(d);
  }
  for (auto& [k, v] : comm_iv_) v = merge_intervals(std::move(v));
}

void Measure::beside_communication() {
  for (std::size_t i = 0; i < n_; ++i) {
    const GpuEvent& g = t_.gpu[i];
    if (is_comm_[i] || g.dur <= 0) continue;
    auto it = comm_iv_.find(g.device);
    if (it == comm_iv_.end()) continue;
    beside_[i] = static_cast<double>(covered(it->second, g.ts, g.end())) / static_cast<double>(g.dur);
  }
}

// The same kernel (name, sub-op, pass, position in its range) away from communication (alone
// time a: under 2% of it beside) and partly or wholly beside it (duration d, of it o beside).
// Beside communication it progresses at 1/s, so d = (d - o) + o s  with  a = (d - o) + o / s:
//   d - a = o (1 - 1/s),  and over all samples  1 - 1/s = sum(d - a) / sum(o)
// (a least-squares fit through the origin, weighted by o). Samples under 20% beside are left
// out: there the kernel's own noise outweighs the slowdown.
void Measure::measure_slowdown() {
  std::vector<std::size_t> order(n_);
  for (std::size_t i = 0; i < n_; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return t_.gpu[a].ts < t_.gpu[b].ts; });
  std::unordered_map<long, int> position;
  struct Samples {
    double alone_sum = 0;
    int alone_n = 0;
    std::vector<std::pair<double, double>> beside;  // (duration, time beside)
  };
  std::map<std::tuple<int, int, int, int>, Samples> samples;
  for (std::size_t i : order) {
    const Attribution& a = attr_[i];
    if (is_comm_[i] || a.instance < 0 || a.p.pass < 0) continue;
    const int pos = position[a.instance]++;
    Samples& s = samples[{subop_of(a), a.p.pass, t_.gpu[i].name, pos}];
    const double d = static_cast<double>(t_.gpu[i].dur);
    if (beside_[i] < 0.02)
      s.alone_sum += d, ++s.alone_n;
    else if (beside_[i] >= 0.2)
      s.beside.emplace_back(d, d * beside_[i]);
  }
  double num[kSubOps] = {}, den[kSubOps] = {};
  int cnt[kSubOps] = {};
  for (const auto& [k, s] : samples) {
    if (s.alone_n == 0 || s.beside.empty()) continue;
    const int sub = std::get<0>(k);
    const double alone = s.alone_sum / s.alone_n;
    for (const auto& [d, o] : s.beside) {
      num[sub] += d - alone;
      den[sub] += o;
      ++cnt[sub];
    }
  }
  auto slowdown = [&](SubOp s) {
    const int i = static_cast<int>(s);
    if (den[i] <= 0) return 0.0;
    const double x = num[i] / den[i];  // 1 - 1/s
    return x < 0.9 ? 1.0 / (1.0 - x) : 10.0;
  };
  r_.attn_slowdown = slowdown(SubOp::attention);
  r_.mlp_slowdown = slowdown(SubOp::mlp);
  r_.attn_slowdown_samples = cnt[0];
  r_.mlp_slowdown_samples = cnt[1];
}

// A collective moves data once every peer has joined: before that, the kernel waits.
void Measure::split_communication() {
  for (std::size_t i = 0; i < n_; ++i) transfer_[i] = t_.gpu[i].dur;
  std::size_t count = 0;
  bool equal = true;
  for (auto& [d, v] : comm_by_dev_) {
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return t_.gpu[a].ts < t_.gpu[b].ts; });
    if (count == 0) count = v.size();
    equal &= v.size() == count;
  }
  if (comm_by_dev_.size() < 2) {
    r_.comm_split_note =
        "one device in the trace: waiting for a peer cannot be told from transfer; all counted as transfer";
  } else if (!equal) {
    r_.comm_split_note = "devices ran different numbers of communication kernels: not split";
  } else {
    r_.comm_split = true;
    for (std::size_t k = 0; k < count; ++k) {
      Time last_start = 0;
      for (auto& [d, v] : comm_by_dev_) last_start = std::max(last_start, t_.gpu[v[k]].ts);
      for (auto& [d, v] : comm_by_dev_) {
        const GpuEvent& g = t_.gpu[v[k]];
        transfer_[v[k]] = std::clamp<Time>(g.end() - std::max(g.ts, last_start), 0, g.dur);
      }
    }
  }
  for (std::size_t i = 0; i < n_; ++i)
    if (is_comm_[i]) {
      r_.comm_total += t_.gpu[i].dur;
      r_.comm_transfer += transfer_[i];
    }
  r_.comm_wait = r_.comm_total - r_.comm_transfer;
}

// SM share of the communication kernels: their grid (one block per SM for NCCL's channels).
void Measure::sm_share() {
  if (t_.sms <= 0) return;
  for (std::size_t i = 0; i < n_; ++i)
    if (is_comm_[i] && t_.gpu[i].blocks > 0 && comm_kernel(t_.gpu[i].name)) {
      sm_num_ += static_cast<double>(t_.gpu[i].dur) * std::min(1.0, static_cast<double>(t_.gpu[i].blocks) / t_.sms);
      sm_den_ += static_cast<double>(t_.gpu[i].dur);
    }
}

// Compute kernels that run side by side on several compute streams of one device (DeepSeek's
// trace runs its experts' weight-gradient GEMMs on two) share the wall clock: each instant with
// compute kernels of k streams running counts 1/k to each, so a cell's time is the time its
// kernels held the device, and two kernels that ran together are not counted twice (kernels of
// one stream cannot run together: an overlap there is the clocks' jitter and counts in full).
// `wall_[i]` is that share of kernel i (its duration where it ran alone among compute kernels).
void Measure::wall_shares() {
  std::map<int, std::vector<std::tuple<Time, int, std::size_t>>> edges;  // (time, +1 start / -1 end, kernel)
  for (std::size_t i = 0; i < n_; ++i) {
    wall_[i] = static_cast<double>(t_.gpu[i].dur);
    if (is_comm_[i] || t_.gpu[i].dur <= 0) continue;
    edges[t_.gpu[i].device].emplace_back(t_.gpu[i].ts, 1, i);
    edges[t_.gpu[i].device].emplace_back(t_.gpu[i].end(), -1, i);
  }
  for (auto& [d, e] : edges) {
    std::sort(e.begin(), e.end(), [](const auto& a, const auto& b) {
      return std::get<0>(a) != std::get<0>(b) ? std::get<0>(a) < std::get<0>(b) : std::get<1>(a) < std::get<1>(b);
    });
    std::vector<std::size_t> active;
    Time prev = 0;
    for (const auto& [time, kind, i] : e) {
      if (active.size() > 1) {  // the segment [prev, time) ran with kernels of k streams
        std::vector<std::int64_t> on;
        for (std::size_t j : active) on.push_back(t_.gpu[j].stream);
        std::sort(on.begin(), on.end());
        const double k = static_cast<double>(std::unique(on.begin(), on.end()) - on.begin());
        const double len = static_cast<double>(time - prev);
        for (std::size_t j : active) wall_[j] -= len * (1.0 - 1.0 / k);
      }
      prev = time;
      if (kind > 0)
        active.push_back(i);
      else
        active.erase(std::find(active.begin(), active.end(), i));
    }
  }
  for (std::size_t i = 0; i < n_; ++i)
    if (!is_comm_[i]) r_.compute_concurrent += static_cast<double>(t_.gpu[i].dur) - wall_[i];
}

// Every GPU event in exactly one bucket: unlinked, unmapped, or a cell (layer -1: outside layers).
void Measure::fill_cells() {
  std::map<std::string, Time> unmapped_by;
  for (std::size_t i = 0; i < n_; ++i) {
    const GpuEvent& g = t_.gpu[i];
    const Attribution& a = attr_[i];
    r_.gpu_total += g.dur;
    if (!a.linked) {
      r_.unlinked += g.dur;
      ++r_.unlinked_kernels;
      continue;
    }
    if (a.p.pass < 0) {
      r_.unmapped += g.dur;
      ++r_.unmapped_kernels;
      const std::string& key =
          a.p.top >= 0 ? t_.names[static_cast<std::size_t>(t_.ranges[static_cast<std::size_t>(a.p.top)].name)]
                       : "(no range) " + t_.names[static_cast<std::size_t>(g.name)];
      unmapped_by[key] += g.dur;
      continue;
    }
    const int sub = subop_of(a);
    Cell& c = r_.cells[a.p.layer][static_cast<std::size_t>(sub)][static_cast<std::size_t>(a.p.pass)];
    c.busy += g.dur;
    double alone = static_cast<double>(transfer_[i]);
    if (!is_comm_[i]) {
      const double s = sub == static_cast<int>(SubOp::attention) ? r_.attn_slowdown
                       : sub == static_cast<int>(SubOp::mlp)     ? r_.mlp_slowdown
                                                                 : 0;
      alone = wall_[i] * ((1 - beside_[i]) + beside_[i] / (s >= 1 ? s : 1));
    }
    c.alone += alone;
    if (a.recompute) c.recompute += g.dur, c.recompute_alone += alone;
    if (a.instance >= 0) instances_.insert({a.p.layer, sub, a.p.pass, a.instance});
    if (a.p.layer < 0) r_.outside_layers += g.dur;
    if (a.p.layer >= 0 && a.recompute) r_.recompute += g.dur;
    if (a.p.pass != static_cast<int>(Pass::F)) r_.backward += g.dur;
    (a.path == Path::caller ? r_.by_caller : a.path == Path::forward ? r_.by_forward : r_.by_stack) += g.dur;
  }
  for (const auto& [k, v] : unmapped_by) r_.unmapped_top.emplace_back(k, v);
  std::sort(r_.unmapped_top.begin(), r_.unmapped_top.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (r_.unmapped_top.size() > 8) r_.unmapped_top.resize(8);
}

// Executions of a cell: the most instances of any one range name in it (a router range and an
// experts range that both map to the MLP of one layer are one execution, not two). A cell whose
// kernels all came from a recompute (no instance of its own) takes its layer's executions.
void Measure::count_executions() {
  std::map<std::tuple<int, int, int, int>, int> per_name;
  for (const auto& [layer, sub, pass, inst] : instances_) {
    int& k = per_name[{layer, sub, pass, t_.ranges[static_cast<std::size_t>(inst)].name}];
    Cell& c = r_.cells[layer][static_cast<std::size_t>(sub)][static_cast<std::size_t>(pass)];
    c.executions = std::max(c.executions, ++k);
  }
  for (auto& [layer, cells] : r_.cells) {
    int most = 0;
    for (const auto& per_sub : cells)
      for (const Cell& c : per_sub) most = std::max(most, c.executions);
    for (auto& per_sub : cells)
      for (Cell& c : per_sub)
        if (c.executions == 0 && c.busy > 0 && most > 0) c.executions = most;
    if (layer < 0) continue;
    ++r_.layers;
    r_.executions = std::max(r_.executions, most);
  }
}

// Per layer, per execution; "other" work of a layer counts as its attention (norms, residuals).
void Measure::build_profile() {
  double sums[kSubOps][kPasses] = {}, recompute = 0;
  for (const auto& [layer, cells] : r_.cells) {
    if (layer < 0) continue;
    for (int s = 0; s < kSubOps; ++s)
      for (int p = 0; p < kPasses; ++p) {
        const Cell& c = cells[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
        if (c.executions <= 0) continue;
        sums[s][p] += c.alone / c.executions;
        recompute += c.recompute_alone / c.executions;
      }
  }
  CostProfile& prof = r_.profile;
  prof.present = true;
  prof.per_layer = true;
  if (r_.layers > 0) {
    const double L = r_.layers;
    auto ticks = [&](double v) { return static_cast<Time>(std::llround(v / L)); };
    MoeSliceCosts m;
    const int A = 0, M = 1, D = 2, C = 3, O = 4, F = 0, I = 1, W = 2;
    m.attn_f = ticks(sums[A][F] + sums[O][F]);
    m.attn_b = ticks(sums[A][I] + sums[O][I]);
    m.attn_w = ticks(sums[A][W] + sums[O][W]);
    m.mlp_f = ticks(sums[M][F]);
    m.mlp_b = ticks(sums[M][I]);
    m.mlp_w = ticks(sums[M][W]);
    m.dispatch = ticks(sums[D][F]);
    m.dispatch_b = ticks(sums[D][I] + sums[D][W]);
    m.combine = ticks(sums[C][F]);
    m.combine_b = ticks(sums[C][I] + sums[C][W]);
    prof.sub_ops = m;
    prof.op = sub_op_totals(m);
    r_.recompute_per_layer = ticks(recompute);
    prof.recompute_included = r_.recompute_per_layer > 0;
  }
  prof.attn_comm_slowdown = r_.attn_slowdown > 0 ? std::clamp(r_.attn_slowdown, 1.0, 10.0) : 0;
  prof.mlp_comm_slowdown = r_.mlp_slowdown > 0 ? std::clamp(r_.mlp_slowdown, 1.0, 10.0) : 0;
  prof.comm_sm_fraction = sm_den_ > 0 ? sm_num_ / sm_den_ : 0;
}

}  // namespace

const DeviceFigures* ImportResult::longest() const {
  const DeviceFigures* best = nullptr;
  for (const auto& d : devices)
    if (best == nullptr || d.span() > best->span()) best = &d;
  return best;
}

Time ImportResult::step() const { return longest() != nullptr ? longest()->span() : 0; }

Time ImportResult::compute_busy() const { return longest() != nullptr ? longest()->compute_busy : 0; }

ImportResult import_trace(const KinetoTrace& t, const ImportOptions& o, const std::string& path) {
  Rules rules(o.map, o.no_default_rules);
  rules.set_comm_kernel(o.comm_kernel);
  const std::optional<std::regex> step_re = step_regex(o.step_range);
  ImportResult r;
  r.step_range = o.step_range;
  r.path = path;
  r.events = t.events;
  r.bytes = t.bytes;
  r.gpu_events = static_cast<int>(t.gpu.size());
  r.profile.path = path;
  for (const CpuRange& cr : t.ranges) r.python_stacks |= cr.kind == RangeKind::python;
  Attributed a = attribute(t, o, rules, step_re);
  r.layer_rule = std::move(a.layer_rule);
  Measure(t, rules, step_re, std::move(a.events), r).run();
  return r;
}

std::string host_bound_line(const ImportResult& r) {
  const DeviceFigures* d = r.longest();
  if (d == nullptr || d->span() <= 0 || 10 * d->host_idle <= d->span()) return {};
  return fmt::format(
      "host-bound: the GPU was idle {:.0f}% of the step with nothing queued (its next kernel not yet launched); "
      "the kernels alone take {:.3f} ms of the {:.3f} ms step{}",
      100.0 * static_cast<double>(d->host_idle) / static_cast<double>(d->span()),
      static_cast<double>(d->span() - d->host_idle) / 1e6, static_cast<double>(d->span()) / 1e6,
      r.python_stacks ? " (recorded with Python stacks, with_stack=True: the profiler's own work per call adds host "
                        "time)"
                      : "");
}

void check_training(const ImportResult& r, bool inference, bool profile_asked) {
  if (inference || r.backward > 0 || (r.layers == 0 && !profile_asked)) return;
  throw InputError(SourceLoc{r.path, 0, 0},
                   "the trace has no backward (no kernel of autograd's backward or of a range naming a backward "
                   "pass): a forward-only step is not a training profile; --inference reads it as an inference one",
                   {}, kExitInput);
}

ImportResult import_trace_file(const std::string& path, const ImportOptions& o) {
  Rules check(o.map, o.no_default_rules);  // bad --map / --comm-kernel values fail before a long read
  check.set_comm_kernel(o.comm_kernel);
  return import_trace(read_kineto(path), o, path);
}

namespace {
std::string ms(Time t) { return fmt::format("{:.3f}", static_cast<double>(t) / 1e6); }
std::string msd(double t) { return fmt::format("{:.3f}", t / 1e6); }
}  // namespace

std::string render_import_report(const ImportResult& r) {
  std::string o;
  o += fmt::format("trace {}: {} events, {} GPU events, {:.1f} MB of JSON\n", r.path, r.events, r.gpu_events,
                   static_cast<double>(r.bytes) / 1e6);
  o += fmt::format("layers found: {}, executions (micro-batches) per layer sub-op: up to {}\n", r.layers, r.executions);
  o += fmt::format("layers by: {}\n", r.layer_rule);
  if (r.by_caller + r.by_forward > 0)
    o += fmt::format(
        "attributed by: launch stack {} ms, ranges open on the thread that called backward {} ms, autograd's link "
        "to the forward op {} ms\n",
        ms(r.by_stack), ms(r.by_caller), ms(r.by_forward));
  o += "\n";
  o += "per layer and pass, ms per execution (kernel time; compute with the communication slowdown taken out):\n";
  o += fmt::format("{:>6} {:>4} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6}\n", "layer", "pass", "attention", "mlp",
                   "dispatch", "combine", "other", "runs");
  for (const auto& [layer, cells] : r.cells) {
    for (int p = 0; p < kPasses; ++p) {
      bool any = false;
      int runs = 0;
      std::string row = fmt::format("{:>6} {:>4}", layer < 0 ? std::string("-") : std::to_string(layer),
                                    pass_name(static_cast<Pass>(p)));
      for (int s = 0; s < kSubOps; ++s) {
        const Cell& c = cells[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
        any |= c.busy > 0;
        runs = std::max(runs, c.executions);
        row += fmt::format(" {:>10}", c.executions > 0 ? msd(c.alone / c.executions) : std::string("-"));
      }
      if (any) o += row + fmt::format(" {:>6}\n", runs);
    }
  }
  o += fmt::format("\noutside numbered layers (not in the per-layer profile): {} ms\n", ms(r.outside_layers));
  o += fmt::format("unmapped (launched under no range that names a pass): {} ms in {} GPU events\n", ms(r.unmapped),
                   r.unmapped_kernels);
  for (const auto& [name, t] : r.unmapped_top) o += fmt::format("  {:>10} ms  {}\n", ms(t), name.substr(0, 100));
  o += fmt::format("unlinked (no correlation id or ac2g flow to a launch): {} ms in {} GPU events\n", ms(r.unlinked),
                   r.unlinked_kernels);
  Time in_layers = 0;
  for (const auto& [layer, cells] : r.cells)
    if (layer >= 0)
      for (const auto& per_sub : cells)
        for (const Cell& c : per_sub) in_layers += c.busy;
  o += fmt::format("GPU time {} ms = layers {} + outside layers {} + unmapped {} + unlinked {}\n\n", ms(r.gpu_total),
                   ms(in_layers), ms(r.outside_layers), ms(r.unmapped), ms(r.unlinked));
  if (r.compute_concurrent > 0)
    o += fmt::format("compute kernels side by side on several streams: {} ms of their durations ran beside another "
                     "compute kernel; the cells count that wall time once (each instant split among the kernels)\n\n",
                     msd(r.compute_concurrent));
  o += "streams:\n";
  for (const auto& s : r.streams)
    o += fmt::format("  device {} stream {:<4} {:<13} {:>6} events {:>10} ms busy ({} ms communication)\n", s.device,
                     s.stream, s.comm ? "communication" : "compute", s.kernels, ms(s.busy), ms(s.comm_busy));
  if (!r.step_range.empty())
    o += fmt::format("step: the {} GPU events launched under ranges matching '{}'\n", r.step_events, r.step_range);
  for (const auto& d : r.devices)
    o += fmt::format("device {}: span {} ms, compute streams busy {} ms, communication streams busy {} ms\n", d.device,
                     ms(d.span()), ms(d.compute_busy), ms(d.comm_busy));
  o += fmt::format("\ncommunication: {} ms, transfer {} ms, waiting {} ms{}\n", ms(r.comm_total), ms(r.comm_transfer),
                   ms(r.comm_wait), r.comm_split ? "" : " (" + r.comm_split_note + ")");
  auto sd = [](double s, int n) {
    return s > 0 ? fmt::format("{:.3f} (from {} kernels beside communication)", s, n)
                 : std::string("not measured (no kernel ran both beside and away from communication): linear rule");
  };
  o += fmt::format("compute slowdown beside communication: attention {}, mlp {}\n",
                   sd(r.attn_slowdown, r.attn_slowdown_samples), sd(r.mlp_slowdown, r.mlp_slowdown_samples));
  if (r.profile.comm_sm_fraction > 0)
    o += fmt::format("communication kernels held {:.1f}% of the SMs (grid size, time-weighted)\n",
                     100 * r.profile.comm_sm_fraction);
  if (const std::string h = host_bound_line(r); !h.empty()) o += h + "\n";
  if (r.profile.sub_ops) {
    const OpTimes& t = r.profile.op;
    o += fmt::format("\nprofile, one layer: F {} ms, B {} ms (W {} ms)\n", ms(t.f), ms(t.b), ms(t.w));
    if (r.recompute_per_layer > 0)
      o += fmt::format(
          "recompute: B holds {} ms of forward re-run inside the backward (activation checkpointing); "
          "the profile says recompute: included, so a config adds none\n",
          ms(r.recompute_per_layer));
    if (r.backward == 0) o += "forward only (inference): no backward in the trace; the profile has F times only\n";
  } else if (r.backward == 0 && r.gpu_total > 0) {
    o += "\nno backward in the trace (a forward-only step): as a training profile it is refused; --inference "
         "reads it as an inference one\n";
  } else {
    o += "\nno numbered layer found: the profile has no per-layer times (see docs/TRACES.md on naming ranges)\n";
  }
  return o;
}

nlohmann::json import_json(const ImportResult& r) {
  auto ms = [](double t) { return t / 1e6; };
  nlohmann::json j = {{"trace", r.path},       {"events", r.events}, {"gpu_events", r.gpu_events},
                      {"json_bytes", r.bytes}, {"layers", r.layers}, {"executions", r.executions}};
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [layer, per_sub] : r.cells)
    for (int s = 0; s < kSubOps; ++s)
      for (int p = 0; p < kPasses; ++p) {
        const Cell& c = per_sub[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
        if (c.busy == 0 && c.executions == 0) continue;
        cells.push_back({{"layer", or_null(layer >= 0, layer)},
                         {"subop", subop_name(static_cast<SubOp>(s))},
                         {"pass", pass_name(static_cast<Pass>(p))},
                         {"busy_ms", ms(static_cast<double>(c.busy))},
                         {"alone_ms", ms(c.alone)},
                         {"executions", c.executions}});
      }
  j["cells"] = cells;
  j["unmapped_ms"] = ms(static_cast<double>(r.unmapped));
  j["unmapped_events"] = r.unmapped_kernels;
  nlohmann::json top = nlohmann::json::array();
  for (const auto& [name, t] : r.unmapped_top) top.push_back({{"range", name}, {"ms", ms(static_cast<double>(t))}});
  j["unmapped_by_range"] = top;
  j["unlinked_ms"] = ms(static_cast<double>(r.unlinked));
  j["unlinked_events"] = r.unlinked_kernels;
  j["outside_layers_ms"] = ms(static_cast<double>(r.outside_layers));
  j["gpu_ms"] = ms(static_cast<double>(r.gpu_total));
  j["compute_concurrent_ms"] = ms(r.compute_concurrent);
  j["layer_rule"] = r.layer_rule;
  j["attributed_by"] = {{"launch_stack_ms", ms(static_cast<double>(r.by_stack))},
                        {"backward_caller_ms", ms(static_cast<double>(r.by_caller))},
                        {"forward_link_ms", ms(static_cast<double>(r.by_forward))}};
  nlohmann::json streams = nlohmann::json::array();
  for (const auto& s : r.streams)
    streams.push_back({{"device", s.device},
                       {"stream", s.stream},
                       {"role", s.comm ? "communication" : "compute"},
                       {"events", s.kernels},
                       {"busy_ms", ms(static_cast<double>(s.busy))},
                       {"communication_ms", ms(static_cast<double>(s.comm_busy))}});
  j["streams"] = streams;
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& d : r.devices)
    devices.push_back({{"device", d.device},
                       {"span_ms", ms(static_cast<double>(d.span()))},
                       {"compute_busy_ms", ms(static_cast<double>(d.compute_busy))},
                       {"communication_busy_ms", ms(static_cast<double>(d.comm_busy))},
                       {"idle_unqueued_ms", ms(static_cast<double>(d.host_idle))}});
  j["step"] = {
      {"range", or_null(!r.step_range.empty(), r.step_range)}, {"events", r.step_events}, {"devices", devices}};
  j["communication"] = {{"total_ms", ms(static_cast<double>(r.comm_total))},
                        {"transfer_ms", ms(static_cast<double>(r.comm_transfer))},
                        {"waiting_ms", ms(static_cast<double>(r.comm_wait))},
                        {"split", r.comm_split},
                        {"note", r.comm_split_note}};
  auto sd = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  j["comm_slowdown"] = {{"attention", sd(r.attn_slowdown)},
                        {"mlp", sd(r.mlp_slowdown)},
                        {"attention_samples", r.attn_slowdown_samples},
                        {"mlp_samples", r.mlp_slowdown_samples}};
  j["comm_sm_fraction"] = sd(r.profile.comm_sm_fraction);
  const std::string host = host_bound_line(r);
  j["host_bound"] = or_null(!host.empty(), host);
  j["backward_ms"] = ms(static_cast<double>(r.backward));
  j["recompute"] = {{"ms", ms(static_cast<double>(r.recompute))},
                    {"per_layer_ms", ms(static_cast<double>(r.recompute_per_layer))}};
  return j;
}

std::string render_import_profile(const ImportResult& r, bool moe_layers_only, bool inference) {
  std::string h = fmt::format("# ppsim cost profile imported from {} (ppsim import-trace)\n", r.path);
  h += fmt::format(
      "# {} layers, up to {} executions each; unmapped {:.3f} ms, unlinked {:.3f} ms, outside layers {:.3f} ms\n",
      r.layers, r.executions, static_cast<double>(r.unmapped) / 1e6, static_cast<double>(r.unlinked) / 1e6,
      static_cast<double>(r.outside_layers) / 1e6);
  h += r.attn_slowdown > 0 || r.mlp_slowdown > 0
           ? "# comm_slowdown measured from the trace (SM sharing: profiled)\n"
           : "# no comm_slowdown in the trace: the overlap model uses the linear rule\n";
  if (r.recompute_per_layer > 0)
    h += fmt::format(
        "# recompute: included: B holds {:.3f} ms of forward re-run inside the backward per layer "
        "(activation checkpointing); a config must say it recomputes (full or recompute_ops), and "
        "adds none\n",
        static_cast<double>(r.recompute_per_layer) / 1e6);
  if (inference && r.backward == 0) h += "# forward only (import-trace --inference): B and W are 0, not measured\n";
  if (!moe_layers_only) return render_profile(r.profile, h);
  CostProfile p = r.profile;
  p.moe_layers_only = true;
  p.recompute_included = true;
  h += "# applies_to: moe_layers: a config's MoE layers take these times, the rest stays derived\n";
  h += "# recompute: included: the traced backward kernels hold whatever the run recomputed\n";
  return render_profile(p, h);
}

}  // namespace ppsim::trace
