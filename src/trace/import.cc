// Attribution and figures of an imported trace (import.h). Passes over the GPU events:
//   1. link each event to its launch point (correlation id, else its ac2g flow);
//   2. per launching thread, sweep launches and CPU ranges in time order: the open ranges at a
//      launch are its stack; the rules read sub-op, pass and layer from it, innermost first;
//   3. per device: communication intervals, each compute kernel's fraction beside them, the
//      slowdown per sub-op from the same kernel (name, sub-op, pass, position in its range)
//      beside and away from communication; collectives matched across devices for waiting;
//   4. cells per (layer, sub-op, pass) -> the per-layer profile.
#include "trace/import.h"
#include "trace/intervals.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "core/error.h"
#include "cost/profile.h"

namespace ppsim::trace {

namespace {

enum class Path { stack, caller, forward };

struct Attribution {  // compact: one per GPU event
  bool linked = false;
  bool in_step = false;   // launched under a range matching ImportOptions::step_range
  bool autograd = false;  // launched under an op of autograd's engine
  Path path = Path::stack;
  int layer = -1;
  int sub_range = -1, pass_range = -1, layer_range = -1;
  int instance = -1;   // the execution: the range that gave the layer (else the sub-op, else the pass)
  int top_range = -1;  // innermost range on the stack, for naming unmapped work
  int bwd_op = -1;     // the autograd op it was launched under
  signed char subop = -1, pass = -1;
};

// What a list of open ranges gave: each part and the range that gave it.
struct Found {
  int subop = -1, pass = -1, layer = -1;
  int sub_range = -1, pass_range = -1, layer_range = -1, top = -1;
  bool in_step = false;
};


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

}  // namespace

Time ImportResult::step() const {
  Time s = 0;
  for (const auto& d : devices) s = std::max(s, d.span());
  return s;
}

Time ImportResult::compute_busy() const {
  const DeviceFigures* best = nullptr;
  for (const auto& d : devices)
    if (best == nullptr || d.span() > best->span()) best = &d;
  return best != nullptr ? best->compute_busy : 0;
}

ImportResult import_trace(const KinetoTrace& t, const ImportOptions& o, const std::string& path) {
  Rules rules(o.map, o.no_default_rules);
  rules.set_comm_kernel(o.comm_kernel);
  std::optional<std::regex> step_re;
  if (!o.step_range.empty()) {
    try {
      step_re.emplace(o.step_range, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw InputError(fmt::format("--step-range '{}': bad regular expression ({})", o.step_range, e.what()), {},
                       kExitUsage);
    }
  }
  std::vector<signed char> step_name(t.names.size(), -1);
  auto is_step = [&](int name) {
    signed char& c = step_name[static_cast<std::size_t>(name)];
    if (c < 0) c = std::regex_search(t.names[static_cast<std::size_t>(name)], *step_re) ? 1 : 0;
    return c == 1;
  };
  ImportResult r;
  r.step_range = o.step_range;
  r.path = path;
  r.events = t.events;
  r.bytes = t.bytes;
  r.gpu_events = static_cast<int>(t.gpu.size());
  const std::size_t n = t.gpu.size();

  // ---- 1. launch points ---------------------------------------------------------------------
  // By correlation id first; the ac2g flows' maps are built only for events that remain.
  struct Query {
    Time ts;
    std::size_t gpu;
  };
  std::vector<std::vector<Query>> queries(t.threads.size());
  std::vector<Attribution> attr(n);
  std::vector<std::size_t> rest;
  {
    std::unordered_map<std::int64_t, int> by_corr;  // correlation -> launch index
    by_corr.reserve(t.launches.size());
    for (std::size_t k = 0; k < t.launches.size(); ++k) by_corr.emplace(t.launches[k].correlation, static_cast<int>(k));
    for (std::size_t i = 0; i < n; ++i) {
      const GpuEvent& g = t.gpu[i];
      auto it = g.correlation >= 0 ? by_corr.find(g.correlation) : by_corr.end();
      if (it == by_corr.end()) {
        rest.push_back(i);
        continue;
      }
      const Launch& l = t.launches[static_cast<std::size_t>(it->second)];
      attr[i].linked = true;
      queries[static_cast<std::size_t>(l.thread)].push_back({l.ts, i});
    }
  }
  if (!rest.empty()) {
    std::unordered_map<std::int64_t, const FlowPoint*> flow_start;
    std::map<std::pair<int, Time>, std::int64_t> flow_end;  // (thread, ts) of the kernel -> flow id
    for (const auto& f : t.flows) {
      if (f.start)
        flow_start.emplace(f.id, &f);
      else
        flow_end.emplace(std::make_pair(f.thread, f.ts), f.id);
    }
    for (std::size_t i : rest) {
      const GpuEvent& g = t.gpu[i];
      const FlowPoint* s0 = nullptr;
      if (g.correlation >= 0)
        if (auto f = flow_start.find(g.correlation); f != flow_start.end()) s0 = f->second;
      if (s0 == nullptr)
        if (auto e = flow_end.find({g.thread, g.ts}); e != flow_end.end())
          if (auto f = flow_start.find(e->second); f != flow_start.end()) s0 = f->second;
      if (s0 == nullptr) continue;
      attr[i].linked = true;
      queries[static_cast<std::size_t>(s0->thread)].push_back({s0->ts, i});
    }
  }

  // ---- 2. stacks of CPU ranges at each launch ------------------------------------------------
  std::vector<std::vector<int>> ranges_of(t.threads.size());
  for (std::size_t i = 0; i < t.ranges.size(); ++i)
    ranges_of[static_cast<std::size_t>(t.ranges[i].thread)].push_back(static_cast<int>(i));
  for (auto& rs : ranges_of)  // outer ranges first at equal starts, so that the stack is innermost on top
    std::sort(rs.begin(), rs.end(), [&](int a, int b) {
      const CpuRange &x = t.ranges[static_cast<std::size_t>(a)], &y = t.ranges[static_cast<std::size_t>(b)];
      return x.ts != y.ts ? x.ts < y.ts : x.dur > y.dur;
    });
  std::vector<std::optional<RangeMeaning>> meaning(t.names.size());
  auto meaning_of = [&](int name) -> const RangeMeaning& {
    auto& m = meaning[static_cast<std::size_t>(name)];
    if (!m) m = rules.classify(t.names[static_cast<std::size_t>(name)]);
    return *m;
  };
  // Sweeps one thread's ranges in time order, calling f(query, stack) with the ranges open at each
  // query's time (outermost first; ended ones under a range that still runs may remain: skip them).
  auto sweep = [&](std::size_t th, std::vector<Query>& q, auto&& f) {
    std::sort(q.begin(), q.end(), [](const Query& a, const Query& b) { return a.ts < b.ts; });
    const auto& rs = ranges_of[th];
    std::vector<int> stack;
    std::size_t next = 0;
    for (const Query& qu : q) {
      while (next < rs.size() && t.ranges[static_cast<std::size_t>(rs[next])].ts <= qu.ts) {
        const Time start = t.ranges[static_cast<std::size_t>(rs[next])].ts;
        while (!stack.empty() && t.ranges[static_cast<std::size_t>(stack.back())].end() <= start) stack.pop_back();
        stack.push_back(rs[next++]);
      }
      while (!stack.empty() && t.ranges[static_cast<std::size_t>(stack.back())].end() <= qu.ts) stack.pop_back();
      f(qu, stack);
    }
  };
  enum Filter { all_ranges, user_ranges, op_ranges };
  // Fills the parts `f` lacks from `stack` (innermost first): sub-op, pass, layer ("layer" numbers
  // before "block" numbers), and which range gave each.
  auto absorb = [&](Found& f, const std::vector<int>& stack, Time ts, Filter filter, bool take_pass) {
    bool gave = false;
    int weak = -1, weak_range = -1;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it) {
      const CpuRange& cr = t.ranges[static_cast<std::size_t>(*it)];
      if (cr.end() <= ts && !(cr.dur == 0 && cr.ts == ts)) continue;  // ended, under a range that still runs
      const bool user = cr.kind == RangeKind::user;
      if ((filter == user_ranges && !user) || (filter == op_ranges && user)) continue;
      if (f.top < 0) f.top = *it;
      const RangeMeaning& m = meaning_of(cr.name);
      if (f.subop < 0 && m.subop) f.subop = static_cast<int>(*m.subop), f.sub_range = *it, gave = true;
      if (take_pass && f.pass < 0 && m.pass) f.pass = static_cast<int>(*m.pass), f.pass_range = *it, gave = true;
      if (f.layer < 0 && m.layer >= 0) {
        if (m.layer_strong)
          f.layer = m.layer, f.layer_range = *it, gave = true;
        else if (weak < 0)
          weak = m.layer, weak_range = *it;
      }
      if (step_re && !f.in_step) f.in_step = is_step(cr.name);
    }
    if (f.layer < 0 && weak >= 0) f.layer = weak, f.layer_range = weak_range, gave = true;
    return gave;
  };
  auto is_autograd_op = [&](const CpuRange& cr) {
    return cr.backward || t.names[static_cast<std::size_t>(cr.name)].rfind("autograd::engine::", 0) == 0;
  };

  // Sweep 1: each launch's own stack. Work launched under an op autograd's engine ran (a backward
  // op: "Fwd thread id" given, or autograd::engine::...) keeps its user ranges and its ops apart,
  // for the precedence below, and the innermost backward op for the link to its forward op.
  auto store = [&](Attribution& a, const Found& f) {
    a.subop = static_cast<signed char>(f.subop);
    a.pass = static_cast<signed char>(f.pass);
    a.layer = f.layer;
    a.sub_range = f.sub_range;
    a.pass_range = f.pass_range;
    a.layer_range = f.layer_range;
    a.top_range = f.top;
    a.in_step = a.in_step || f.in_step;
  };
  auto load = [&](const Attribution& a) {
    Found f;
    f.subop = a.subop;
    f.pass = a.pass;
    f.layer = a.layer;
    f.sub_range = a.sub_range;
    f.pass_range = a.pass_range;
    f.layer_range = a.layer_range;
    f.top = a.top_range;
    f.in_step = a.in_step;
    return f;
  };
  std::vector<std::size_t> autograd_events;
  for (std::size_t th = 0; th < t.threads.size(); ++th) {
    auto& q = queries[th];
    if (q.empty()) continue;
    sweep(th, q, [&](const Query& qu, const std::vector<int>& stack) {
      int op = -1;
      for (auto it = stack.rbegin(); it != stack.rend() && op < 0; ++it) {
        const CpuRange& cr = t.ranges[static_cast<std::size_t>(*it)];
        if (cr.end() > qu.ts && is_autograd_op(cr)) op = *it;
      }
      Found f;
      if (op < 0) {
        absorb(f, stack, qu.ts, all_ranges, true);
        store(attr[qu.gpu], f);
        return;
      }
      // The outermost autograd op of the nest carries the link (evaluate_function: XBackward0).
      for (int r : stack) {
        const CpuRange& cr = t.ranges[static_cast<std::size_t>(r)];
        if (cr.end() > qu.ts && is_autograd_op(cr) && (cr.seq >= 0 || r == op)) {
          op = r;
          break;
        }
      }
      attr[qu.gpu].bwd_op = op;
      attr[qu.gpu].autograd = true;
      autograd_events.push_back(qu.gpu);
      absorb(f, stack, qu.ts, user_ranges, true);
      store(attr[qu.gpu], f);
    });
  }
  // The forward op of each backward op: its fwdbwd flow, else the forward op of the same
  // Sequence number (an op with that number and no "Fwd thread id").
  std::unordered_map<int, int> fwd_of;  // backward op range -> forward op range
  if (!autograd_events.empty()) {
    std::set<int> bwd_ops;
    for (std::size_t i : autograd_events) bwd_ops.insert(attr[i].bwd_op);
    std::map<std::pair<int, Time>, std::int64_t> flow_f;
    std::unordered_map<std::int64_t, std::pair<int, Time>> flow_s;
    for (const auto& f : t.fwdbwd) {
      if (f.start)
        flow_s.emplace(f.id, std::make_pair(f.thread, f.ts));
      else
        flow_f.emplace(std::make_pair(f.thread, f.ts), f.id);
    }
    std::map<std::pair<int, Time>, int> want_start;      // (thread, ts) of a flow's forward end -> range
    std::unordered_map<int, std::vector<int>> want_seq;  // seq -> backward ops
    std::unordered_map<int, std::pair<int, Time>> by_flow;
    for (int b : bwd_ops) {
      const CpuRange& cr = t.ranges[static_cast<std::size_t>(b)];
      if (auto e = flow_f.find({cr.thread, cr.ts}); e != flow_f.end())
        if (auto s0 = flow_s.find(e->second); s0 != flow_s.end()) {
          by_flow[b] = s0->second;
          want_start.emplace(s0->second, -1);
          continue;
        }
      if (cr.seq >= 0) want_seq[cr.seq].push_back(b);
    }
    std::unordered_map<int, int> fwd_seq;
    for (std::size_t i = 0; i < t.ranges.size(); ++i) {
      const CpuRange& cr = t.ranges[i];
      if (cr.backward || cr.kind == RangeKind::user) continue;
      if (!want_start.empty())
        if (auto w = want_start.find({cr.thread, cr.ts}); w != want_start.end())
          if (w->second < 0 || cr.dur > t.ranges[static_cast<std::size_t>(w->second)].dur)
            w->second = static_cast<int>(i);
      if (cr.seq >= 0 && want_seq.count(cr.seq) != 0) {
        auto [it, fresh] = fwd_seq.try_emplace(cr.seq, static_cast<int>(i));
        if (!fresh && cr.ts < t.ranges[static_cast<std::size_t>(it->second)].ts) it->second = static_cast<int>(i);
      }
    }
    for (const auto& [b, at] : by_flow)
      if (const int fr = want_start[at]; fr >= 0) fwd_of[b] = fr;
    for (const auto& [seq, bs] : want_seq)
      if (auto it = fwd_seq.find(seq); it != fwd_seq.end())
        for (int b : bs)
          if (t.ranges[static_cast<std::size_t>(it->second)].ts < t.ranges[static_cast<std::size_t>(b)].ts)
            fwd_of[b] = it->second;
  }
  // Sweep 2: the stacks around those forward ops (their layer and sub-op), and the user ranges
  // open on the process's other threads while autograd ran (the thread that called backward).
  std::unordered_map<int, Found> fwd_found;
  std::vector<Found> caller(autograd_events.empty() ? 0 : n);
  if (!autograd_events.empty()) {
    std::vector<std::vector<Query>> q2(t.threads.size());
    std::vector<int> fwd_list;
    for (const auto& [b, fr] : fwd_of) fwd_list.push_back(fr);
    std::sort(fwd_list.begin(), fwd_list.end());
    fwd_list.erase(std::unique(fwd_list.begin(), fwd_list.end()), fwd_list.end());
    for (int fr : fwd_list) {
      const CpuRange& cr = t.ranges[static_cast<std::size_t>(fr)];
      q2[static_cast<std::size_t>(cr.thread)].push_back({cr.ts, static_cast<std::size_t>(fr)});
    }
    for (std::size_t th = 0; th < t.threads.size(); ++th)
      if (!q2[th].empty())
        sweep(th, q2[th], [&](const Query& qu, const std::vector<int>& stack) {
          Found f;
          absorb(f, stack, qu.ts, all_ranges, false);
          fwd_found[static_cast<int>(qu.gpu)] = f;
        });
    std::vector<char> has_user(t.threads.size(), 0);
    for (const auto& cr : t.ranges)
      if (cr.kind == RangeKind::user) has_user[static_cast<std::size_t>(cr.thread)] = 1;
    std::vector<std::vector<Query>> q3(t.threads.size());
    std::vector<Time> launch_ts(n, 0);
    std::vector<int> launch_thread(n, -1);
    for (std::size_t th = 0; th < t.threads.size(); ++th)
      for (const Query& qu : queries[th]) launch_ts[qu.gpu] = qu.ts, launch_thread[qu.gpu] = static_cast<int>(th);
    for (std::size_t i : autograd_events) {
      const int lt = launch_thread[i];
      for (std::size_t th = 0; th < t.threads.size(); ++th)
        if (has_user[th] && static_cast<int>(th) != lt &&
            t.thread_pid[th] == t.thread_pid[static_cast<std::size_t>(lt)])
          q3[th].push_back({launch_ts[i], i});
    }
    for (std::size_t th = 0; th < t.threads.size(); ++th)
      if (!q3[th].empty())
        sweep(th, q3[th], [&](const Query& qu, const std::vector<int>& stack) {
          Found& f = caller[qu.gpu];
          if (f.subop >= 0 || f.pass >= 0 || f.layer >= 0) return;  // a thread before gave something
          Found g;
          if (absorb(g, stack, qu.ts, user_ranges, true) || g.in_step) {
            const bool step = f.in_step || g.in_step;
            f = g;
            f.in_step = step;
          }
        });
  }
  // Precedence for autograd's work: user ranges on its own thread (tensor hooks), then those open
  // on the thread that called backward, then the forward op's ranges (layer, sub-op), then the
  // autograd ops' own names; the pass is I unless a range says otherwise (W).
  for (std::size_t i : autograd_events) {
    Attribution& a = attr[i];
    Found f = load(a);
    a.path = Path::stack;
    {
      const Found& c = caller[i];
      if (c.in_step) f.in_step = true;
      auto take = [&](const Found& g, bool pass) {
        bool used = false;
        if (f.subop < 0 && g.subop >= 0) f.subop = g.subop, f.sub_range = g.sub_range, used = true;
        if (pass && f.pass < 0 && g.pass >= 0) f.pass = g.pass, f.pass_range = g.pass_range, used = true;
        if (f.layer < 0 && g.layer >= 0) f.layer = g.layer, f.layer_range = g.layer_range, used = true;
        if (f.top < 0) f.top = g.top;
        return used;
      };
      if (take(c, true)) a.path = Path::caller;
      if (auto it = fwd_of.find(a.bwd_op); it != fwd_of.end())
        if (auto ff = fwd_found.find(it->second); ff != fwd_found.end()) {
          if (ff->second.in_step) f.in_step = true;
          if (take(ff->second, false) && a.path == Path::stack) a.path = Path::forward;
        }
      // Else it is autograd's backward: the input-grad pass (an autograd op names no W).
      if (f.pass < 0) f.pass = static_cast<int>(Pass::I), f.pass_range = a.bwd_op;
      if (f.top < 0) f.top = a.bwd_op;
    }
    store(a, f);
  }
  // Layers: numbers in range names or module scopes; where none (or --layer-order force), the
  // order rule: every sub-op range name repeats L times, and its k-th occurrence is layer k.
  bool any_layer = false;
  for (std::size_t i = 0; i < n; ++i) any_layer |= attr[i].linked && attr[i].layer >= 0;
  if (o.layer_order == LayerOrder::force || (o.layer_order == LayerOrder::automatic && !any_layer)) {
    std::set<int> sub_names;
    for (std::size_t i = 0; i < n; ++i)
      if (attr[i].linked && attr[i].sub_range >= 0)
        sub_names.insert(t.ranges[static_cast<std::size_t>(attr[i].sub_range)].name);
    std::map<int, std::vector<int>> occurrences;  // name -> its ranges in time order
    for (std::size_t i = 0; i < t.ranges.size(); ++i)
      if (sub_names.count(t.ranges[i].name) != 0) occurrences[t.ranges[i].name].push_back(static_cast<int>(i));
    int count = -1;
    bool same = true;
    for (auto& [name, v] : occurrences) {
      std::sort(v.begin(), v.end(), [&](int a, int b) {
        return t.ranges[static_cast<std::size_t>(a)].ts < t.ranges[static_cast<std::size_t>(b)].ts;
      });
      if (count < 0) count = static_cast<int>(v.size());
      same &= static_cast<int>(v.size()) == count;
    }
    if (!occurrences.empty() && (o.layer_order == LayerOrder::force || (same && count >= 2))) {
      std::unordered_map<int, int> occ;
      for (const auto& [name, v] : occurrences)
        for (std::size_t k = 0; k < v.size(); ++k) occ[v[k]] = static_cast<int>(k);
      for (std::size_t i = 0; i < n; ++i)
        if (attr[i].linked && attr[i].sub_range >= 0) {
          attr[i].layer = occ[attr[i].sub_range];
          attr[i].layer_range = attr[i].sub_range;
        }
      r.layer_rule = fmt::format("order of sub-op ranges: the k-th of each ({} names, {} times each{}) is layer k",
                                 occurrences.size(), count, same ? "" : " or fewer; forced");
    }
  }
  if (r.layer_rule.empty()) {
    Time user = 0, scope = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (attr[i].linked && attr[i].layer_range >= 0)
        (t.ranges[static_cast<std::size_t>(attr[i].layer_range)].kind == RangeKind::user ? user : scope) +=
            t.gpu[i].dur;
    r.layer_rule = user + scope == 0 ? "none (no range or module scope numbers a layer; the order rule did not apply)"
                   : user >= scope   ? "numbers in range names (layer3, layers.3, block3)"
                                     : "module scopes and op names (nn.Module: XLayer_3, model.layers.3)";
  }
  // A kernel in a layer under no range that names a pass, outside autograd's backward: forward.
  // Each execution is one entry of the range that gave the layer (else the sub-op, else the pass).
  for (std::size_t i = 0; i < n; ++i) {
    Attribution& a = attr[i];
    if (!a.linked) continue;
    if (a.layer >= 0 && a.pass < 0 && !a.autograd) a.pass = static_cast<signed char>(Pass::F);
    a.instance = a.layer >= 0 && a.layer_range >= 0 ? a.layer_range : a.sub_range >= 0 ? a.sub_range : a.pass_range;
  }

  // ---- 3. streams, communication, SM sharing -------------------------------------------------
  std::vector<bool> is_comm(n);
  std::vector<signed char> comm_name(t.names.size(), -1);  // regex once per kernel name
  auto comm_kernel = [&](int name) {
    signed char& c = comm_name[static_cast<std::size_t>(name)];
    if (c < 0) c = rules.comm(t.names[static_cast<std::size_t>(name)]) ? 1 : 0;
    return c == 1;
  };
  std::map<std::pair<int, std::int64_t>, StreamStats> streams;
  for (std::size_t i = 0; i < n; ++i) {
    const GpuEvent& g = t.gpu[i];
    const int sub = attr[i].subop;
    is_comm[i] =
        comm_kernel(g.name) ||
        (attr[i].pass >= 0 && (sub == static_cast<int>(SubOp::dispatch) || sub == static_cast<int>(SubOp::combine)));
    StreamStats& s = streams[{g.device, g.stream}];
    s.device = g.device;
    s.stream = g.stream;
    ++s.kernels;
    s.busy += g.dur;
    if (is_comm[i]) s.comm_busy += g.dur;
  }
  for (auto& [k, s] : streams) {
    s.comm = 2 * s.comm_busy > s.busy;
    r.streams.push_back(s);
  }
  std::map<int, std::vector<std::pair<Time, Time>>> comm_iv, comp_iv_by_stream_role;
  std::map<int, DeviceFigures> dev;
  std::map<int, std::vector<std::size_t>> comm_by_dev;
  for (std::size_t i = 0; i < n; ++i) {
    const GpuEvent& g = t.gpu[i];
    auto [it, fresh] = dev.try_emplace(g.device);
    DeviceFigures& d = it->second;
    if (fresh) d.device = g.device, d.first = g.ts, d.last = g.end();
    d.first = std::min(d.first, g.ts);
    d.last = std::max(d.last, g.end());
    if (is_comm[i]) {
      comm_iv[g.device].emplace_back(g.ts, g.end());
      comm_by_dev[g.device].push_back(i);
    }
  }
  // The step's figures: span and busy time of its GPU work (all of it without step_range).
  std::map<int, std::vector<std::pair<Time, Time>>> comp_streams_iv, comm_streams_iv;
  std::map<int, DeviceFigures> step_dev;
  for (std::size_t i = 0; i < n; ++i) {
    const GpuEvent& g = t.gpu[i];
    if (step_re && !attr[i].in_step) continue;
    ++r.step_events;
    auto [it, fresh] = step_dev.try_emplace(g.device);
    DeviceFigures& d = it->second;
    if (fresh) d.device = g.device, d.first = g.ts, d.last = g.end();
    d.first = std::min(d.first, g.ts);
    d.last = std::max(d.last, g.end());
    (streams[{g.device, g.stream}].comm ? comm_streams_iv : comp_streams_iv)[g.device].emplace_back(g.ts, g.end());
  }
  if (step_re && r.step_events == 0)
    throw InputError(
        fmt::format("--step-range '{}': no GPU work was launched under a range of that name", o.step_range), {},
        kExitUsage);
  for (auto& [k, d] : step_dev) {
    d.compute_busy = total(merge_intervals(comp_streams_iv[k]));
    d.comm_busy = total(merge_intervals(comm_streams_iv[k]));
    r.devices.push_back(d);
  }
  for (auto& [k, v] : comm_iv) v = merge_intervals(std::move(v));

  // Fraction of each compute kernel's time that ran beside communication on its device.
  std::vector<double> beside(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const GpuEvent& g = t.gpu[i];
    if (is_comm[i] || g.dur <= 0) continue;
    auto it = comm_iv.find(g.device);
    if (it == comm_iv.end()) continue;
    beside[i] = static_cast<double>(covered(it->second, g.ts, g.end())) / static_cast<double>(g.dur);
  }
  // The same kernel (name, sub-op, pass, position in its range) away from communication (alone
  // time a: under 2% of it beside) and partly or wholly beside it (duration d, of it o beside).
  // Beside communication it progresses at 1/s, so d = (d - o) + o s  with  a = (d - o) + o / s:
  //   d - a = o (1 - 1/s),  and over all samples  1 - 1/s = sum(d - a) / sum(o)
  // (a least-squares fit through the origin, weighted by o). Samples under 20% beside are left
  // out: there the kernel's own noise outweighs the slowdown.
  std::vector<std::size_t> order(n);
  for (std::size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return t.gpu[a].ts < t.gpu[b].ts; });
  std::unordered_map<long, int> position;
  struct Samples {
    double alone_sum = 0;
    int alone_n = 0;
    std::vector<std::pair<double, double>> beside;  // (duration, time beside)
  };
  std::map<std::tuple<int, int, int, int>, Samples> samples;
  for (std::size_t i : order) {
    const Attribution& a = attr[i];
    if (is_comm[i] || a.instance < 0 || a.pass < 0) continue;
    const int sub = a.subop < 0 ? static_cast<int>(SubOp::other) : a.subop;
    const int pos = position[a.instance]++;
    Samples& s = samples[{sub, a.pass, t.gpu[i].name, pos}];
    const double d = static_cast<double>(t.gpu[i].dur);
    if (beside[i] < 0.02)
      s.alone_sum += d, ++s.alone_n;
    else if (beside[i] >= 0.2)
      s.beside.emplace_back(d, d * beside[i]);
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
  r.attn_slowdown = slowdown(SubOp::attention);
  r.mlp_slowdown = slowdown(SubOp::mlp);
  r.attn_slowdown_samples = cnt[0];
  r.mlp_slowdown_samples = cnt[1];

  // Communication: transfer vs waiting, matching the k-th collective of every device.
  std::vector<Time> transfer(n, 0);
  for (std::size_t i = 0; i < n; ++i) transfer[i] = t.gpu[i].dur;
  std::size_t count = 0;
  bool equal = true;
  for (auto& [d, v] : comm_by_dev) {
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) { return t.gpu[a].ts < t.gpu[b].ts; });
    if (count == 0) count = v.size();
    equal &= v.size() == count;
  }
  if (comm_by_dev.size() < 2) {
    r.comm_split_note =
        "one device in the trace: waiting for a peer cannot be told from transfer; all counted as transfer";
  } else if (!equal) {
    r.comm_split_note = "devices ran different numbers of communication kernels: not split";
  } else {
    r.comm_split = true;
    for (std::size_t k = 0; k < count; ++k) {
      Time last_start = 0;
      for (auto& [d, v] : comm_by_dev) last_start = std::max(last_start, t.gpu[v[k]].ts);
      // A collective moves data once every peer has joined: before that, the kernel waits.
      for (auto& [d, v] : comm_by_dev) {
        const GpuEvent& g = t.gpu[v[k]];
        transfer[v[k]] = std::clamp<Time>(g.end() - std::max(g.ts, last_start), 0, g.dur);
      }
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (is_comm[i]) {
      r.comm_total += t.gpu[i].dur;
      r.comm_transfer += transfer[i];
    }
  r.comm_wait = r.comm_total - r.comm_transfer;

  // SM share of the communication kernels: their grid (one block per SM for NCCL's channels).
  double sm_num = 0, sm_den = 0;
  if (t.sms > 0)
    for (std::size_t i = 0; i < n; ++i)
      if (is_comm[i] && t.gpu[i].blocks > 0 && comm_kernel(t.gpu[i].name)) {
        sm_num += static_cast<double>(t.gpu[i].dur) * std::min(1.0, static_cast<double>(t.gpu[i].blocks) / t.sms);
        sm_den += static_cast<double>(t.gpu[i].dur);
      }

  // Compute kernels that run side by side on several compute streams of one device (DeepSeek's
  // trace runs its experts' weight-gradient GEMMs on two) share the wall clock: each instant with
  // compute kernels of k streams running counts 1/k to each, so a cell's time is the time its
  // kernels held the device, and two kernels that ran together are not counted twice (kernels of
  // one stream cannot run together: an overlap there is the clocks' jitter and counts in full).
  // `wall[i]` is that share of kernel i (its duration where it ran alone among compute kernels).
  std::vector<double> wall(n, 0);
  {
    std::map<int, std::vector<std::tuple<Time, int, std::size_t>>> edges;  // (time, +1 start / -1 end, kernel)
    for (std::size_t i = 0; i < n; ++i) {
      wall[i] = static_cast<double>(t.gpu[i].dur);
      if (is_comm[i] || t.gpu[i].dur <= 0) continue;
      edges[t.gpu[i].device].emplace_back(t.gpu[i].ts, 1, i);
      edges[t.gpu[i].device].emplace_back(t.gpu[i].end(), -1, i);
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
          for (std::size_t j : active) on.push_back(t.gpu[j].stream);
          std::sort(on.begin(), on.end());
          const double k = static_cast<double>(std::unique(on.begin(), on.end()) - on.begin());
          const double len = static_cast<double>(time - prev);
          for (std::size_t j : active) wall[j] -= len * (1.0 - 1.0 / k);
        }
        prev = time;
        if (kind > 0)
          active.push_back(i);
        else
          active.erase(std::find(active.begin(), active.end(), i));
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!is_comm[i]) r.compute_concurrent += static_cast<double>(t.gpu[i].dur) - wall[i];
  }

  // ---- 4. cells and the profile --------------------------------------------------------------
  std::set<std::tuple<int, int, int, long>> instances;
  std::map<std::string, Time> unmapped_by;
  for (std::size_t i = 0; i < n; ++i) {
    const GpuEvent& g = t.gpu[i];
    const Attribution& a = attr[i];
    r.gpu_total += g.dur;
    if (!a.linked) {
      r.unlinked += g.dur;
      ++r.unlinked_kernels;
      continue;
    }
    if (a.pass < 0) {
      r.unmapped += g.dur;
      ++r.unmapped_kernels;
      const std::string& key =
          a.top_range >= 0 ? t.names[static_cast<std::size_t>(t.ranges[static_cast<std::size_t>(a.top_range)].name)]
                           : "(no range) " + t.names[static_cast<std::size_t>(g.name)];
      unmapped_by[key] += g.dur;
      continue;
    }
    const int sub = a.subop < 0 ? static_cast<int>(SubOp::other) : a.subop;
    Cell& c = r.cells[a.layer][static_cast<std::size_t>(sub)][static_cast<std::size_t>(a.pass)];
    c.busy += g.dur;
    if (is_comm[i]) {
      c.alone += static_cast<double>(transfer[i]);
    } else {
      const double s = sub == static_cast<int>(SubOp::attention) ? r.attn_slowdown
                       : sub == static_cast<int>(SubOp::mlp)     ? r.mlp_slowdown
                                                                 : 0;
      const double sd = s >= 1 ? s : 1;
      c.alone += wall[i] * ((1 - beside[i]) + beside[i] / sd);
    }
    instances.insert({a.layer, sub, a.pass, a.instance});
    if (a.layer < 0) r.outside_layers += g.dur;
    (a.path == Path::caller ? r.by_caller : a.path == Path::forward ? r.by_forward : r.by_stack) += g.dur;
  }
  // Executions of a cell: the most instances of any one range name in it (a router range and an
  // experts range that both map to the MLP of one layer are one execution, not two).
  std::map<std::tuple<int, int, int, int>, int> per_name;
  for (const auto& [layer, sub, pass, inst] : instances) {
    int& k = per_name[{layer, sub, pass, t.ranges[static_cast<std::size_t>(inst)].name}];
    Cell& c = r.cells[layer][static_cast<std::size_t>(sub)][static_cast<std::size_t>(pass)];
    c.executions = std::max(c.executions, ++k);
  }
  for (const auto& [k, v] : unmapped_by) r.unmapped_top.emplace_back(k, v);
  std::sort(r.unmapped_top.begin(), r.unmapped_top.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  if (r.unmapped_top.size() > 8) r.unmapped_top.resize(8);

  for (const auto& [layer, cells] : r.cells) {
    if (layer < 0) continue;
    ++r.layers;
    for (const auto& per_sub : cells)
      for (const Cell& c : per_sub) r.executions = std::max(r.executions, c.executions);
  }
  // Per layer, per execution; "other" work of a layer counts as its attention (norms, residuals).
  double sums[kSubOps][kPasses] = {};
  for (const auto& [layer, cells] : r.cells) {
    if (layer < 0) continue;
    for (int s = 0; s < kSubOps; ++s)
      for (int p = 0; p < kPasses; ++p) {
        const Cell& c = cells[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
        if (c.executions > 0) sums[s][p] += c.alone / c.executions;
      }
  }
  CostProfile& prof = r.profile;
  prof.present = true;
  prof.path = path;
  prof.per_layer = true;
  if (r.layers > 0) {
    const double L = r.layers;
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
  }
  prof.attn_comm_slowdown = r.attn_slowdown > 0 ? std::clamp(r.attn_slowdown, 1.0, 10.0) : 0;
  prof.mlp_comm_slowdown = r.mlp_slowdown > 0 ? std::clamp(r.mlp_slowdown, 1.0, 10.0) : 0;
  prof.comm_sm_fraction = sm_den > 0 ? sm_num / sm_den : 0;
  return r;
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
  if (r.profile.sub_ops) {
    const OpTimes& t = r.profile.op;
    o += fmt::format("\nprofile, one layer: F {} ms, B {} ms (W {} ms)\n", ms(t.f), ms(t.b), ms(t.w));
  } else {
    o += "\nno numbered layer found: the profile has no per-layer times (see docs/TRACES.md on naming ranges)\n";
  }
  return o;
}

nlohmann::json import_json(const ImportResult& r) {
  auto ms = [](double t) { return t / 1e6; };
  nlohmann::json j;
  j["trace"] = r.path;
  j["events"] = r.events;
  j["gpu_events"] = r.gpu_events;
  j["json_bytes"] = r.bytes;
  j["layers"] = r.layers;
  j["executions"] = r.executions;
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& [layer, per_sub] : r.cells)
    for (int s = 0; s < kSubOps; ++s)
      for (int p = 0; p < kPasses; ++p) {
        const Cell& c = per_sub[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
        if (c.busy == 0 && c.executions == 0) continue;
        cells.push_back({{"layer", layer < 0 ? nlohmann::json(nullptr) : nlohmann::json(layer)},
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
                       {"communication_busy_ms", ms(static_cast<double>(d.comm_busy))}});
  j["step"] = {{"range", r.step_range.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.step_range)},
               {"events", r.step_events},
               {"devices", devices}};
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
  return j;
}

std::string render_import_profile(const ImportResult& r, bool moe_layers_only) {
  std::string h = fmt::format("# ppsim cost profile imported from {} (ppsim import-trace)\n", r.path);
  h += fmt::format(
      "# {} layers, up to {} executions each; unmapped {:.3f} ms, unlinked {:.3f} ms, outside layers {:.3f} ms\n",
      r.layers, r.executions, static_cast<double>(r.unmapped) / 1e6, static_cast<double>(r.unlinked) / 1e6,
      static_cast<double>(r.outside_layers) / 1e6);
  h += r.attn_slowdown > 0 || r.mlp_slowdown > 0
           ? "# comm_slowdown measured from the trace (SM sharing: profiled)\n"
           : "# no comm_slowdown in the trace: the overlap model uses the linear rule\n";
  if (!moe_layers_only) return render_profile(r.profile, h);
  CostProfile p = r.profile;
  p.moe_layers_only = true;
  p.recompute_included = true;
  h += "# applies_to: moe_layers: a config's MoE layers take these times, the rest stays derived\n";
  h += "# recompute: included: the traced backward kernels hold whatever the run recomputed\n";
  return render_profile(p, h);
}

}  // namespace ppsim::trace
