// Attribution of GPU events (attribution.h): the phases in the order attribute() runs them.
#include "trace/attribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/error.h"

namespace ppsim::trace {

namespace {

struct Query {
  Time ts;
  std::size_t gpu;  // a GPU event, or (sweeps over forward ops) a range index
};

// Which ranges of a stack are read: all, the user's annotations only, or the user's and the
// module scopes (what a forward re-run inside the backward opened on autograd's thread).
enum class Filter { all, user, forward };

// A forward run of one layer on one thread: [start, end) from its first to its last launch, or
// to the next run's first launch where the work between belongs to it (own_between_sub_ops).
struct Extent {
  Time start, end;
  int layer, layer_range;
  std::vector<int> ranges, names;  // the ranges that gave the layer in this run, and their names
};

class Attributor {
 public:
  Attributor(const KinetoTrace& t, const ImportOptions& o, const Rules& rules, const std::optional<std::regex>& step)
      : t_(t),
        o_(o),
        rules_(rules),
        step_re_(step),
        attr_(t.gpu.size()),
        queries_(t.threads.size()),
        ranges_of_(t.threads.size()),
        extents_(t.threads.size()),
        end_(t.ranges.size()) {
    for (std::size_t i = 0; i < t.ranges.size(); ++i) end_[i] = t.ranges[i].end();
    for (auto& m : meaning_) m.resize(t.names.size());
    step_name_.assign(t.names.size(), -1);
  }

  Attributed run() {
    link_launches();
    sort_ranges();
    clip_forward_ranges();
    launch_stacks();
    own_between_sub_ops();
    if (!autograd_events_.empty()) {
      link_backward_ops();
      forward_op_stacks();
      caller_stacks();
    }
    resolve_autograd();
    Attributed out;
    out.layer_rule = number_layers_by_order();
    if (out.layer_rule.empty()) out.layer_rule = name_layer_rule();
    finish_passes();
    out.events = std::move(attr_);
    return out;
  }

 private:
  const KinetoTrace& t_;
  const ImportOptions& o_;
  const Rules& rules_;
  const std::optional<std::regex>& step_re_;
  std::vector<Attribution> attr_;
  std::vector<std::vector<Query>> queries_;  // per launching thread: (launch time, GPU event)
  std::vector<std::vector<int>> ranges_of_;  // per thread: its ranges by start, outer first
  std::vector<std::vector<Extent>> extents_;
  std::vector<Time> end_;  // each range's end (clip_forward_ranges may shorten it)
  std::vector<std::optional<RangeMeaning>> meaning_[3];
  std::vector<signed char> step_name_;
  std::vector<std::size_t> autograd_events_;
  std::unordered_map<int, int> fwd_of_;  // backward op range -> forward op range
  std::unordered_map<int, Parts> fwd_found_;
  std::vector<Parts> caller_;

  const CpuRange& range(int i) const { return t_.ranges[static_cast<std::size_t>(i)]; }
  Time end(int i) const { return end_[static_cast<std::size_t>(i)]; }
  const std::string& name(int n) const { return t_.names[static_cast<std::size_t>(n)]; }

  const RangeMeaning& meaning_of(const CpuRange& cr) {
    auto& m = meaning_[static_cast<int>(cr.kind)][static_cast<std::size_t>(cr.name)];
    if (!m) m = rules_.classify(name(cr.name), cr.kind);
    return *m;
  }
  bool is_step(int n) {
    signed char& c = step_name_[static_cast<std::size_t>(n)];
    if (c < 0) c = std::regex_search(name(n), *step_re_) ? 1 : 0;
    return c == 1;
  }
  bool is_autograd_op(const CpuRange& cr) const {
    return cr.backward || name(cr.name).rfind("autograd::engine::", 0) == 0;
  }
  static bool is_module_scope(const std::string& n) { return n.rfind("nn.Module: ", 0) == 0; }

  void link_launches();
  void sort_ranges();
  void clip_forward_ranges();
  // Calls f(query, stack) for each query of thread `th` in time order with the ranges open then
  // (outermost first; ended ones under a range that still runs may remain: skip them).
  template <class F>
  void sweep(std::size_t th, std::vector<Query>& q, F&& f);
  bool absorb(Parts& f, const std::vector<int>& stack, Time ts, Filter filter, bool take_pass);
  void launch_stacks();
  void on_launch(const Query& qu, const std::vector<int>& stack);
  // Unnumbered forward launches between two runs (prev, next: indices into extents_, -1 none);
  // consecutive: the next run is the next layer's.
  struct Boundary {
    int prev, next;
    bool consecutive;
    std::vector<std::size_t> pending;
  };
  void own_between_sub_ops();
  std::vector<Boundary> runs_of(std::size_t th);
  std::vector<int> kernel_names(const std::vector<std::size_t>& events) const;
  static std::size_t common_suffix(const std::vector<int>& a, const std::vector<int>& b);
  void own(std::size_t gpu, const Extent& e);
  void split_boundary(std::size_t th, const Boundary& b, const std::vector<int>& gap, std::size_t closing);
  const Extent* extent_at(int thread, Time ts) const;
  void link_backward_ops();
  void forward_op_stacks();
  void caller_stacks();
  void resolve_autograd();
  std::string number_layers_by_order();
  int iteration_count() const;
  std::string name_layer_rule() const;
  std::string order_skipped_;  // why the order rule did not apply, where it was close to
  void finish_passes();
};

void store(Attribution& a, const Parts& f) {
  const bool step = a.p.in_step || f.in_step;
  a.p = f;
  a.p.in_step = step;
}

// By correlation id first; the ac2g flows' maps are built only for the events that remain.
void Attributor::link_launches() {
  std::vector<std::size_t> rest;
  std::unordered_map<std::int64_t, int> by_corr;  // correlation -> launch index
  by_corr.reserve(t_.launches.size());
  for (std::size_t k = 0; k < t_.launches.size(); ++k) by_corr.emplace(t_.launches[k].correlation, static_cast<int>(k));
  auto link = [&](std::size_t i, int thread, Time ts) {
    attr_[i].linked = true;
    attr_[i].launch = ts;
    queries_[static_cast<std::size_t>(thread)].push_back({ts, i});
  };
  for (std::size_t i = 0; i < t_.gpu.size(); ++i) {
    const GpuEvent& g = t_.gpu[i];
    auto it = g.correlation >= 0 ? by_corr.find(g.correlation) : by_corr.end();
    if (it == by_corr.end()) {
      rest.push_back(i);
      continue;
    }
    const Launch& l = t_.launches[static_cast<std::size_t>(it->second)];
    link(i, l.thread, l.ts);
  }
  if (rest.empty()) return;
  std::unordered_map<std::int64_t, const FlowPoint*> flow_start;
  std::map<std::pair<int, Time>, std::int64_t> flow_end;  // (thread, ts) of the kernel -> flow id
  for (const auto& f : t_.flows) {
    if (f.start)
      flow_start.emplace(f.id, &f);
    else
      flow_end.emplace(std::make_pair(f.thread, f.ts), f.id);
  }
  for (std::size_t i : rest) {
    const GpuEvent& g = t_.gpu[i];
    const FlowPoint* s0 = nullptr;
    if (g.correlation >= 0)
      if (auto f = flow_start.find(g.correlation); f != flow_start.end()) s0 = f->second;
    if (s0 == nullptr)
      if (auto e = flow_end.find({g.thread, g.ts}); e != flow_end.end())
        if (auto f = flow_start.find(e->second); f != flow_start.end()) s0 = f->second;
    if (s0 != nullptr) link(i, s0->thread, s0->ts);
  }
}

void Attributor::sort_ranges() {
  for (std::size_t i = 0; i < t_.ranges.size(); ++i)
    ranges_of_[static_cast<std::size_t>(t_.ranges[i].thread)].push_back(static_cast<int>(i));
  for (auto& rs : ranges_of_)  // outer ranges first at equal starts, so that the stack is innermost on top
    std::sort(rs.begin(), rs.end(), [&](int a, int b) {
      const CpuRange &x = range(a), &y = range(b);
      return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
    });
}

// A user range that says F, opened inside an autograd op (a forward re-run by activation
// checkpointing) and still open after that op ended, was left open by a recompute that stopped
// early (torch's non-reentrant checkpoint stops once it has what the backward needs, and a range
// opened by a module hook is then never closed): it ends with the last forward op (one with a
// sequence number) that began in it inside that autograd op, else with the autograd op.
void Attributor::clip_forward_ranges() {
  for (const auto& rs : ranges_of_) {
    std::vector<int> ops;  // autograd ops open, innermost last
    for (std::size_t k = 0; k < rs.size(); ++k) {
      const int i = rs[k];
      const CpuRange& cr = range(i);
      while (!ops.empty() && end(ops.back()) <= cr.ts) ops.pop_back();
      if (is_autograd_op(cr)) {
        ops.push_back(i);
        continue;
      }
      if (ops.empty() || cr.kind != RangeKind::user || end(i) <= end(ops.back())) continue;
      const RangeMeaning& m = meaning_of(cr);
      if (!m.pass || *m.pass != Pass::F) continue;
      const Time op_end = end(ops.back());
      Time last = -1;
      for (std::size_t j = k + 1; j < rs.size() && range(rs[j]).ts < op_end; ++j) {
        const CpuRange& f = range(rs[j]);
        if (f.kind == RangeKind::op && f.seq >= 0 && !is_autograd_op(f))
          last = std::max(last, std::min(op_end, end(rs[j])));
      }
      end_[static_cast<std::size_t>(i)] = last >= 0 ? last : op_end;
    }
  }
}

template <class F>
void Attributor::sweep(std::size_t th, std::vector<Query>& q, F&& f) {
  std::sort(q.begin(), q.end(), [](const Query& a, const Query& b) { return a.ts < b.ts; });
  const auto& rs = ranges_of_[th];
  std::vector<int> stack;
  std::size_t next = 0;
  for (const Query& qu : q) {
    while (next < rs.size() && range(rs[next]).ts <= qu.ts) {
      const Time start = range(rs[next]).ts;
      while (!stack.empty() && end(stack.back()) <= start) stack.pop_back();
      stack.push_back(rs[next++]);
    }
    while (!stack.empty() && end(stack.back()) <= qu.ts) stack.pop_back();
    f(qu, stack);
  }
}

// Fills the parts `f` lacks from `stack` (innermost first): sub-op, pass, layer ("layer" numbers
// before "block" numbers), and which range gave each. True if it gave anything.
bool Attributor::absorb(Parts& f, const std::vector<int>& stack, Time ts, Filter filter, bool take_pass) {
  bool gave = false;
  int weak = -1, weak_range = -1;
  for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
    const CpuRange& cr = range(*it);
    if (end(*it) <= ts && !(cr.dur == 0 && cr.ts == ts)) continue;  // ended, under a range that still runs
    const bool user = cr.kind == RangeKind::user;
    if (filter == Filter::user && !user) continue;
    if (filter == Filter::forward && !user && !(cr.kind == RangeKind::python && is_module_scope(name(cr.name))))
      continue;
    if (f.top < 0) f.top = *it;
    const RangeMeaning& m = meaning_of(cr);
    if (f.subop < 0 && m.subop) f.subop = static_cast<int>(*m.subop), f.sub_range = *it, gave = true;
    if (take_pass && f.pass < 0 && m.pass) f.pass = static_cast<int>(*m.pass), f.pass_range = *it, gave = true;
    if (f.layer < 0 && m.layer >= 0) {
      if (m.layer_strong)
        f.layer = m.layer, f.layer_range = *it, gave = true;
      else if (weak < 0)
        weak = m.layer, weak_range = *it;
    }
    if (step_re_ && !f.in_step) f.in_step = is_step(cr.name);
  }
  if (f.layer < 0 && weak >= 0) f.layer = weak, f.layer_range = weak_range, gave = true;
  return gave;
}

// Sweep 1: each launch's own stack. Work launched under an op autograd's engine ran (a backward
// op: "Fwd thread id" given, or autograd::engine::...) keeps its user ranges and its ops apart,
// for the precedence in resolve_autograd, and the innermost backward op for the link to its
// forward op.
void Attributor::launch_stacks() {
  for (std::size_t th = 0; th < t_.threads.size(); ++th)
    if (!queries_[th].empty())
      sweep(th, queries_[th], [&](const Query& qu, const std::vector<int>& stack) { on_launch(qu, stack); });
}

void Attributor::on_launch(const Query& qu, const std::vector<int>& stack) {
  Attribution& a = attr_[qu.gpu];
  int op = -1, outer = -1;  // the innermost autograd op, and where the outermost one sits on the stack
  for (std::size_t k = 0; k < stack.size(); ++k) {
    const CpuRange& cr = range(stack[k]);
    if (end(stack[k]) <= qu.ts || !is_autograd_op(cr)) continue;
    op = stack[k];
    if (outer < 0) outer = static_cast<int>(k);
  }
  Parts f;
  if (op < 0) {
    absorb(f, stack, qu.ts, Filter::all, true);
    store(a, f);
    return;
  }
  // The outermost autograd op of the nest carries the link (evaluate_function: XBackward0).
  for (int r : stack) {
    const CpuRange& cr = range(r);
    if (end(r) > qu.ts && is_autograd_op(cr) && (cr.seq >= 0 || r == op)) {
      op = r;
      break;
    }
  }
  a.bwd_op = op;
  a.autograd = true;
  autograd_events_.push_back(qu.gpu);
  // A forward re-run inside the backward: a forward op recorded with a sequence number (autograd
  // records one only with grad mode on, which the backward has off), a module scope, or a range
  // that says F, open inside the autograd op.
  for (std::size_t k = static_cast<std::size_t>(outer) + 1; k < stack.size() && !a.recompute; ++k) {
    const CpuRange& cr = range(stack[k]);
    if (end(stack[k]) <= qu.ts) continue;
    a.recompute = (cr.kind == RangeKind::op && cr.seq >= 0 && !is_autograd_op(cr)) ||
                  (cr.kind == RangeKind::python && is_module_scope(name(cr.name))) ||
                  (cr.kind == RangeKind::user && meaning_of(cr).pass == Pass::F);
  }
  absorb(f, stack, qu.ts, a.recompute ? Filter::forward : Filter::user, !a.recompute);
  store(a, f);
}

// Forward work that no range gave a layer, between two runs of numbered work on its thread:
// inside one layer's run (between its sub-ops: norms, residual adds) it belongs to that layer;
// between layer l's last sub-op and layer l + 1's first it is l's closing part (its residual
// add) then l + 1's opening part (its norm), split where the work before layer 0's first sub-op
// (its own norm, after the embedding) ends alike; that opening part before the first layer, and
// the closing part after the last, belong to them too. The runs also give forward ops without a
// layer of their own one (extent_at), for the backward linked to them.
void Attributor::own_between_sub_ops() {
  for (std::size_t th = 0; th < t_.threads.size(); ++th) {
    std::vector<Boundary> bounds = runs_of(th);
    const Boundary* ref = nullptr;  // the first gap between consecutive layers, and the first start
    const Boundary* start = nullptr;
    for (const Boundary& b : bounds) {
      if (ref == nullptr && b.consecutive) ref = &b;
      if (start == nullptr && !b.consecutive && b.next >= 0) start = &b;
    }
    if (ref == nullptr) {  // no gap to learn the split from: each run keeps only its inside
      continue;
    }
    const std::vector<int> gap = kernel_names(ref->pending);
    const std::size_t closing = gap.size() - (start != nullptr ? common_suffix(gap, kernel_names(start->pending)) : 0);
    for (const Boundary& b : bounds) split_boundary(th, b, gap, closing);
  }
}

// One thread's runs of numbered forward work (extents_) and the unnumbered launches between them.
std::vector<Attributor::Boundary> Attributor::runs_of(std::size_t th) {
  std::vector<Boundary> bounds;
  std::vector<std::size_t> pending;  // forward launches since the last numbered one
  std::vector<Extent>& ext = extents_[th];
  for (const Query& qu : queries_[th]) {  // in time order (sorted by launch_stacks)
    Attribution& a = attr_[qu.gpu];
    if (a.autograd) continue;
    if (a.p.layer < 0 || a.p.layer_range < 0) {
      pending.push_back(qu.gpu);
      continue;
    }
    Extent* last = ext.empty() ? nullptr : &ext.back();
    // One execution of a layer: its ranges (one per sub-op, or the layer's scope) until a range
    // name repeats in another instance (the next micro-batch, or the next step).
    const int nm = range(a.p.layer_range).name;
    const auto has = [](const std::vector<int>& v, int x) { return std::count(v.begin(), v.end(), x) != 0; };
    if (last != nullptr && last->layer == a.p.layer && (has(last->ranges, a.p.layer_range) || !has(last->names, nm))) {
      for (std::size_t p : pending) own(p, *last);
      pending.clear();
      last->end = qu.ts + 1;
      if (!has(last->ranges, a.p.layer_range)) last->ranges.push_back(a.p.layer_range), last->names.push_back(nm);
      continue;
    }
    const int prev = last != nullptr ? static_cast<int>(ext.size()) - 1 : -1;
    bounds.push_back({prev, prev + 1, last != nullptr && last->layer + 1 == a.p.layer, std::move(pending)});
    pending.clear();
    ext.push_back({qu.ts, qu.ts + 1, a.p.layer, a.p.layer_range, {a.p.layer_range}, {nm}});
  }
  if (!ext.empty()) bounds.push_back({static_cast<int>(ext.size()) - 1, -1, false, std::move(pending)});
  return bounds;
}

std::vector<int> Attributor::kernel_names(const std::vector<std::size_t>& events) const {
  std::vector<int> v;
  for (std::size_t i : events) v.push_back(t_.gpu[i].name);
  return v;
}

std::size_t Attributor::common_suffix(const std::vector<int>& a, const std::vector<int>& b) {
  std::size_t k = 0;
  while (k < a.size() && k < b.size() && a[a.size() - 1 - k] == b[b.size() - 1 - k]) ++k;
  return k;
}

void Attributor::own(std::size_t gpu, const Extent& e) {
  attr_[gpu].p.layer = e.layer;
  attr_[gpu].p.layer_range = e.layer_range;
}

// The launches of one boundary: between consecutive layers, the first `closing` to the layer
// before (all of them where the gap differs from the reference gap); elsewhere, a start of the
// reference's closing part to the run before, an end of its opening part to the run after.
void Attributor::split_boundary(std::size_t th, const Boundary& b, const std::vector<int>& gap, std::size_t closing) {
  std::vector<Extent>& ext = extents_[th];
  const std::vector<int> names = kernel_names(b.pending);
  const std::size_t n = names.size(), opening = gap.size() - closing;
  std::size_t to_prev = 0, to_next = 0;
  if (b.consecutive) {
    to_prev = names == gap ? closing : n;
    to_next = n - to_prev;
  } else {
    if (b.prev >= 0 && closing <= n && std::equal(gap.begin(), gap.begin() + static_cast<long>(closing), names.begin()))
      to_prev = closing;
    if (b.next >= 0 && opening <= n - to_prev &&
        std::equal(gap.end() - static_cast<long>(opening), gap.end(), names.end() - static_cast<long>(opening)))
      to_next = opening;
  }
  for (std::size_t k = 0; k < to_prev; ++k) own(b.pending[k], ext[static_cast<std::size_t>(b.prev)]);
  for (std::size_t k = n - to_next; k < n; ++k) own(b.pending[k], ext[static_cast<std::size_t>(b.next)]);
  if (to_prev > 0) ext[static_cast<std::size_t>(b.prev)].end = attr_[b.pending[to_prev - 1]].launch + 1;
  if (to_next > 0)  // from just after the launch before its opening part (the opening ops start before their launches)
    ext[static_cast<std::size_t>(b.next)].start =
        n > to_next ? attr_[b.pending[n - to_next - 1]].launch + 1 : attr_[b.pending[0]].launch;
  if (b.consecutive) ext[static_cast<std::size_t>(b.next)].start = ext[static_cast<std::size_t>(b.prev)].end;
}

const Extent* Attributor::extent_at(int thread, Time ts) const {
  const auto& ext = extents_[static_cast<std::size_t>(thread)];
  auto it = std::upper_bound(ext.begin(), ext.end(), ts, [](Time v, const Extent& e) { return v < e.start; });
  if (it == ext.begin()) return nullptr;
  --it;
  return ts < it->end ? &*it : nullptr;
}

// The forward op of each backward op: its fwdbwd flow, else the forward op of the same
// Sequence number (an op with that number and no "Fwd thread id").
void Attributor::link_backward_ops() {
  std::set<int> bwd_ops;
  for (std::size_t i : autograd_events_) bwd_ops.insert(attr_[i].bwd_op);
  std::map<std::pair<int, Time>, std::int64_t> flow_f;
  std::unordered_map<std::int64_t, std::pair<int, Time>> flow_s;
  for (const auto& f : t_.fwdbwd) {
    if (f.start)
      flow_s.emplace(f.id, std::make_pair(f.thread, f.ts));
    else
      flow_f.emplace(std::make_pair(f.thread, f.ts), f.id);
  }
  std::map<std::pair<int, Time>, int> want_start;      // (thread, ts) of a flow's forward end -> range
  std::unordered_map<int, std::vector<int>> want_seq;  // seq -> backward ops
  std::unordered_map<int, std::pair<int, Time>> by_flow;
  for (int b : bwd_ops) {
    const CpuRange& cr = range(b);
    if (auto e = flow_f.find({cr.thread, cr.ts}); e != flow_f.end())
      if (auto s0 = flow_s.find(e->second); s0 != flow_s.end()) {
        by_flow[b] = s0->second;
        want_start.emplace(s0->second, -1);
        continue;
      }
    if (cr.seq >= 0) want_seq[cr.seq].push_back(b);
  }
  std::unordered_map<int, int> fwd_seq;
  for (std::size_t i = 0; i < t_.ranges.size(); ++i) {
    const CpuRange& cr = t_.ranges[i];
    if (cr.backward || cr.kind == RangeKind::user) continue;
    if (!want_start.empty())
      if (auto w = want_start.find({cr.thread, cr.ts}); w != want_start.end())
        if (w->second < 0 || cr.dur > range(w->second).dur) w->second = static_cast<int>(i);
    if (cr.seq >= 0 && want_seq.count(cr.seq) != 0) {
      auto [it, fresh] = fwd_seq.try_emplace(cr.seq, static_cast<int>(i));
      if (!fresh && cr.ts < range(it->second).ts) it->second = static_cast<int>(i);
    }
  }
  for (const auto& [b, at] : by_flow)
    if (const int fr = want_start[at]; fr >= 0) fwd_of_[b] = fr;
  for (const auto& [seq, bs] : want_seq)
    if (auto it = fwd_seq.find(seq); it != fwd_seq.end())
      for (int b : bs)
        if (range(it->second).ts < range(b).ts) fwd_of_[b] = it->second;
}

// Sweep 2: the stacks around those forward ops (their layer and sub-op; a forward op in no
// layer's range takes the layer whose run it sat in, own_between_sub_ops).
void Attributor::forward_op_stacks() {
  std::vector<std::vector<Query>> q(t_.threads.size());
  std::vector<int> fwd_list;
  for (const auto& [b, fr] : fwd_of_) fwd_list.push_back(fr);
  std::sort(fwd_list.begin(), fwd_list.end());
  fwd_list.erase(std::unique(fwd_list.begin(), fwd_list.end()), fwd_list.end());
  for (int fr : fwd_list)
    q[static_cast<std::size_t>(range(fr).thread)].push_back({range(fr).ts, static_cast<std::size_t>(fr)});
  for (std::size_t th = 0; th < t_.threads.size(); ++th)
    if (!q[th].empty())
      sweep(th, q[th], [&](const Query& qu, const std::vector<int>& stack) {
        Parts f;
        absorb(f, stack, qu.ts, Filter::all, false);
        if (f.layer < 0)
          if (const Extent* e = extent_at(static_cast<int>(th), qu.ts))
            f.layer = e->layer, f.layer_range = e->layer_range;
        fwd_found_[static_cast<int>(qu.gpu)] = f;
      });
}

// Sweep 3: the user ranges open on the process's other threads while autograd ran (the thread
// that called backward: DeepSeek's attn(B)).
void Attributor::caller_stacks() {
  caller_.assign(t_.gpu.size(), Parts{});
  std::vector<char> has_user(t_.threads.size(), 0);
  for (const auto& cr : t_.ranges)
    if (cr.kind == RangeKind::user) has_user[static_cast<std::size_t>(cr.thread)] = 1;
  std::vector<int> launch_thread(t_.gpu.size(), -1);
  for (std::size_t th = 0; th < t_.threads.size(); ++th)
    for (const Query& qu : queries_[th]) launch_thread[qu.gpu] = static_cast<int>(th);
  std::vector<std::vector<Query>> q(t_.threads.size());
  for (std::size_t i : autograd_events_) {
    const int lt = launch_thread[i];
    for (std::size_t th = 0; th < t_.threads.size(); ++th)
      if (has_user[th] && static_cast<int>(th) != lt &&
          t_.thread_pid[th] == t_.thread_pid[static_cast<std::size_t>(lt)])
        q[th].push_back({attr_[i].launch, i});
  }
  for (std::size_t th = 0; th < t_.threads.size(); ++th)
    if (!q[th].empty())
      sweep(th, q[th], [&](const Query& qu, const std::vector<int>& stack) {
        Parts& f = caller_[qu.gpu];
        if (f.subop >= 0 || f.pass >= 0 || f.layer >= 0) return;  // a thread before gave something
        Parts g;
        if (absorb(g, stack, qu.ts, Filter::user, true) || g.in_step) {
          const bool step = f.in_step || g.in_step;
          f = g;
          f.in_step = step;
        }
      });
}

// Precedence for autograd's work: user ranges on its own thread (tensor hooks; a recompute's
// ranges and module scopes), then those open on the thread that called backward, then the
// forward op's ranges (layer, sub-op); the pass is I unless a range says otherwise (W). A
// recompute is part of B: pass I.
void Attributor::resolve_autograd() {
  for (std::size_t i : autograd_events_) {
    Attribution& a = attr_[i];
    Parts f = a.p;
    a.path = Path::stack;
    auto take = [&](const Parts& g, bool pass) {
      bool used = false;
      if (f.subop < 0 && g.subop >= 0) f.subop = g.subop, f.sub_range = g.sub_range, used = true;
      if (pass && f.pass < 0 && g.pass >= 0) f.pass = g.pass, f.pass_range = g.pass_range, used = true;
      if (f.layer < 0 && g.layer >= 0) f.layer = g.layer, f.layer_range = g.layer_range, used = true;
      if (f.top < 0) f.top = g.top;
      return used;
    };
    if (!caller_.empty()) {
      const Parts& c = caller_[i];
      if (c.in_step) f.in_step = true;
      if (take(c, !a.recompute)) a.path = Path::caller;
    }
    if (auto it = fwd_of_.find(a.bwd_op); it != fwd_of_.end())
      if (auto ff = fwd_found_.find(it->second); ff != fwd_found_.end()) {
        if (ff->second.in_step) f.in_step = true;
        if (take(ff->second, false) && a.path == Path::stack) a.path = Path::forward;
      }
    // Else it is autograd's backward: the input-grad pass (an autograd op names no W).
    if (f.pass < 0) f.pass = static_cast<int>(Pass::I), f.pass_range = a.bwd_op;
    if (f.top < 0) f.top = a.bwd_op;
    store(a, f);
  }
}

// Where no range or module scope numbers a layer (or --layer-order force): every sub-op range
// name repeats L times, and its k-th occurrence is layer k. "" where the rule did not apply.
std::string Attributor::number_layers_by_order() {
  const std::size_t n = attr_.size();
  bool any_layer = false;
  for (std::size_t i = 0; i < n; ++i) any_layer |= attr_[i].linked && attr_[i].p.layer >= 0;
  if (!(o_.layer_order == LayerOrder::force || (o_.layer_order == LayerOrder::automatic && !any_layer))) return {};
  std::set<int> sub_names;
  for (std::size_t i = 0; i < n; ++i)
    if (attr_[i].linked && attr_[i].p.sub_range >= 0) sub_names.insert(range(attr_[i].p.sub_range).name);
  std::map<int, std::vector<int>> occurrences;  // name -> its ranges in time order
  for (std::size_t i = 0; i < t_.ranges.size(); ++i)
    if (sub_names.count(t_.ranges[i].name) != 0) occurrences[t_.ranges[i].name].push_back(static_cast<int>(i));
  int count = -1;
  bool same = true;
  for (auto& [nm, v] : occurrences) {
    std::sort(v.begin(), v.end(), [&](int a, int b) { return range(a).ts < range(b).ts; });
    if (count < 0) count = static_cast<int>(v.size());
    same &= static_cast<int>(v.size()) == count;
  }
  if (occurrences.empty() || !(o_.layer_order == LayerOrder::force || (same && count >= 2))) return {};
  // Ranges that recur once per training iteration (a loss, the optimizer's) are not layers: with
  // N >= 2 iterations marked (ProfilerStep#, Optimizer.step / zero_grad ranges) and each name
  // recurring N times, the rule does not apply; k N times: layer k within each iteration.
  const int iterations = iteration_count();
  int per = count;
  if (o_.layer_order == LayerOrder::automatic && iterations >= 2 && count % iterations == 0) {
    per = count / iterations;
    if (per < 2) {
      order_skipped_ = fmt::format(
          "none (the order rule did not apply: each of the {} sub-op range names recurs once per iteration, {} "
          "iterations, not once per layer)",
          occurrences.size(), iterations);
      return {};
    }
  }
  std::unordered_map<int, int> occ;
  for (const auto& [nm, v] : occurrences)
    for (std::size_t k = 0; k < v.size(); ++k) occ[v[k]] = static_cast<int>(k) % per;
  for (std::size_t i = 0; i < n; ++i)
    if (attr_[i].linked && attr_[i].p.sub_range >= 0) {
      attr_[i].p.layer = occ[attr_[i].p.sub_range];
      attr_[i].p.layer_range = attr_[i].p.sub_range;
    }
  if (per != count)
    return fmt::format(
        "order of sub-op ranges: the k-th of each within an iteration ({} names, {} times in each of "
        "{} iterations) is layer k",
        occurrences.size(), per, iterations);
  return fmt::format("order of sub-op ranges: the k-th of each ({} names, {} times each{}) is layer k",
                     occurrences.size(), count, same ? "" : " or fewer; forced");
}

// Training iterations the trace marks: its ProfilerStep#N ranges, or the optimizer's step (or
// zero_grad) ranges, whichever recur most; 0 when none.
int Attributor::iteration_count() const {
  int steps = 0, opt_step = 0, zero_grad = 0;
  for (const CpuRange& r : t_.ranges) {
    const std::string& nm = name(r.name);
    if (nm.rfind("ProfilerStep#", 0) == 0) ++steps;
    if (nm.rfind("Optimizer.step", 0) == 0) ++opt_step;
    if (nm.rfind("Optimizer.zero_grad", 0) == 0) ++zero_grad;
  }
  return std::max({steps, opt_step, zero_grad});
}

std::string Attributor::name_layer_rule() const {
  if (!order_skipped_.empty()) return order_skipped_;
  Time user = 0, scope = 0;
  for (std::size_t i = 0; i < attr_.size(); ++i)
    if (attr_[i].linked && attr_[i].p.layer_range >= 0)
      (range(attr_[i].p.layer_range).kind == RangeKind::user ? user : scope) += t_.gpu[i].dur;
  return user + scope == 0 ? "none (no range or module scope numbers a layer; the order rule did not apply)"
         : user >= scope   ? "numbers in range names (layer3, layers.3, block3, transformer.h.3)"
                           : "module scopes and op names (nn.Module: XLayer_3, model.layers.3)";
}

// A kernel in a layer under no range that names a pass, outside autograd's backward: forward.
// Each execution is one entry of the range that gave the layer (else the sub-op, else the
// pass); a recompute's kernels count no execution of their own (their layer's backward does).
void Attributor::finish_passes() {
  for (Attribution& a : attr_) {
    if (!a.linked) continue;
    if (a.p.layer >= 0 && a.p.pass < 0 && !a.autograd) a.p.pass = static_cast<int>(Pass::F);
    a.instance = a.p.layer >= 0 && a.p.layer_range >= 0 ? a.p.layer_range
                 : a.p.sub_range >= 0                   ? a.p.sub_range
                                                        : a.p.pass_range;
    if (a.recompute) a.instance = -1;
  }
}

}  // namespace

std::optional<std::regex> step_regex(const std::string& step_range) {
  if (step_range.empty()) return std::nullopt;
  try {
    return std::regex(step_range, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    throw InputError(fmt::format("--step-range '{}': bad regular expression ({})", step_range, e.what()), {},
                     kExitUsage);
  }
}

Attributed attribute(const KinetoTrace& t, const ImportOptions& o, const Rules& rules,
                     const std::optional<std::regex>& step_re) {
  return Attributor(t, o, rules, step_re).run();
}

}  // namespace ppsim::trace
