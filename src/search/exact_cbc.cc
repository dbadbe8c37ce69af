// The exact method with CBC (exact.h). A disjunctive MILP:
//   variables  S_o (start of op o) in [head_o, UB - d_o - tail_o], C (makespan), y_ab in {0,1}
//              for ops a < b of one rank whose order the precedences below leave open (1: a
//              runs before b);
//   minimise   C
//   subject to C >= S_o + d_o + tail_o;
//              S_b >= S_a + d_a + hop(a,b) for each dependency a -> b (F chain, backward chain,
//              F -> own I, I -> W), and each stage's F's, I's and W's in micro-batch order
//              (no loss: micro-batches are interchangeable; see below);
//              for two ops of one rank that the precedences order (transitively): the later
//              starts after the earlier ends; otherwise
//              S_b >= S_a + d_a - M_ab(1 - y_ab),  S_a >= S_b + d_b - M_ba y_ab  (one op at a time),
//              with M_ab = hi_a + d_a - lo_b the widest gap the start windows allow;
//              at each F's start, the rank's activations 1 + #F before it - #W before it <= cap;
//              C >= the lower bound of search.h (valid, and it tightens the weak big-M relaxation).
// head/tail are longest paths through the precedences; UB is the list start's makespan, or the
// caller's `upper` when smaller (then only schedules at or below it are sought).
#include <fmt/format.h>

#include <CbcModel.hpp>
#include <CoinModel.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/time.h"
#include "schedules/validator.h"
#include "search/exact.h"
#include "search/search.h"
#include "sim/engine.h"

namespace ppsim {

namespace {

double units(Time t) { return static_cast<double>(t) / static_cast<double>(kTicksPerUnit); }

struct OpRef {
  Op op;
  int rank;
  double d;
};
struct Edge {
  int to;
  double lag;
};

// The ops of one layout with their scaled durations, precedences, heads, tails and reachability.
struct Milp {
  const Schedule& s;
  const SimCosts& costs;
  const int S, mbp;
  double scale = 1, H = 0;  // H: every duration and hop, a makespan no order exceeds
  std::vector<OpRef> ops;
  int n = 0;
  std::vector<std::vector<Edge>> succ;
  std::vector<double> head, tail;
  std::vector<std::vector<char>> reach;  // reach[a][b]: b must follow a
  std::vector<std::vector<int>> on_rank;

  Milp(const Schedule& layout, const SimCosts& c)
      : s(layout), costs(c), S(layout.num_stages()), mbp(layout.mb_per_pipe()) {}
  int id(OpKind k, int st, int m) const {
    return (static_cast<int>(st) * mbp + m) * 3 + (k == OpKind::F ? 0 : k == OpKind::I ? 1 : 2);
  }
  int op_id(const Op& o) const { return id(o.kind, o.stage, o.microbatch); }
  double hop(int from, int to, bool fwd) const {
    return static_cast<double>(hop_time(s, costs, from, to, fwd)) / scale;
  }
};

void build_ops(Milp& m) {
  Time dmax = 1;
  for (int st = 0; st < m.S; ++st)
    for (int mb = 0; mb < m.mbp; ++mb)
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        dmax = std::max(dmax, op_duration(m.costs.slice[m.s.slice[st]], k));
  m.scale = static_cast<double>(dmax) / 10.0;  // durations in [0, 10]
  for (int st = 0; st < m.S; ++st)
    for (int mb = 0; mb < m.mbp; ++mb)
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        m.ops.push_back({Op{k, st, mb}, m.s.stage_rank[st],
                         static_cast<double>(op_duration(m.costs.slice[m.s.slice[st]], k)) / m.scale});
  m.n = static_cast<int>(m.ops.size());
  for (const OpRef& o : m.ops) m.H += o.d;
  for (int st = 0; st + 1 < m.S; ++st) m.H += m.hop(st, st + 1, true) + m.hop(st + 1, st, false);
  m.H += 1;
  m.on_rank.assign(m.s.pp, {});
  for (int i = 0; i < m.n; ++i) m.on_rank[m.ops[i].rank].push_back(i);
}

// Precedences S_b >= S_a + d_a + lag: the dependencies, and every stage's F's, I's and W's in
// micro-batch order. The order is no loss: micro-batches are interchangeable, so giving the j-th
// start of each (stage, kind) to micro-batch j keeps every dependency (the j-th start of F(s)
// follows j distinct ends of F(s-1), so the j-th of those ends, and likewise for I and W), every
// rank's busy intervals and its counts of F starts and W ends (the cap).
void precedences(Milp& m) {
  m.succ.assign(m.n, {});
  for (int st = 0; st < m.S; ++st)
    for (int mb = 0; mb < m.mbp; ++mb) {
      const int f = m.id(OpKind::F, st, mb), ii = m.id(OpKind::I, st, mb), w = m.id(OpKind::W, st, mb);
      if (!m.s.is_first_stage(st)) m.succ[m.id(OpKind::F, st - 1, mb)].push_back({f, m.hop(st - 1, st, true)});
      if (!m.s.is_last_stage(st)) m.succ[m.id(OpKind::I, st + 1, mb)].push_back({ii, m.hop(st + 1, st, false)});
      m.succ[f].push_back({ii, 0});
      m.succ[ii].push_back({w, 0});
      if (mb + 1 < m.mbp)
        for (OpKind k : {OpKind::F, OpKind::I, OpKind::W}) m.succ[m.id(k, st, mb)].push_back({m.id(k, st, mb + 1), 0});
    }
}

// Heads (earliest start) and tails (least time from an op's end to the makespan) by longest paths
// over a topological order (the graph is acyclic: every edge goes down the F chain, from F to I,
// up the I chain, from I to W, or to a later micro-batch), and reachability.
void longest_paths(Milp& m) {
  const int n = m.n;
  std::vector<int> indeg(n, 0), topo;
  for (int a = 0; a < n; ++a)
    for (const Edge& e : m.succ[a]) ++indeg[e.to];
  for (int a = 0; a < n; ++a)
    if (indeg[a] == 0) topo.push_back(a);
  for (std::size_t k = 0; k < topo.size(); ++k)
    for (const Edge& e : m.succ[topo[k]])
      if (--indeg[e.to] == 0) topo.push_back(e.to);
  m.head.assign(n, 0);
  m.tail.assign(n, 0);
  for (int a : topo)
    for (const Edge& e : m.succ[a]) m.head[e.to] = std::max(m.head[e.to], m.head[a] + m.ops[a].d + e.lag);
  m.reach.assign(n, std::vector<char>(n, 0));
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    const int a = *it;
    for (const Edge& e : m.succ[a]) {
      m.tail[a] = std::max(m.tail[a], e.lag + m.ops[e.to].d + m.tail[e.to]);
      m.reach[a][e.to] = 1;
      for (int b = 0; b < n; ++b) m.reach[a][b] |= m.reach[e.to][b];
    }
  }
}

// The best of the list scheduler's rules (no pairs) by simulated makespan; empty ranks if none.
Schedule best_list_schedule(const Schedule& layout, const SimCosts& costs, int cap_chunks) {
  Schedule best;
  Time best_mk = 0;
  for (int bf = 0; bf < 2; ++bf)
    for (int wf = 0; wf < 2; ++wf)
      for (int deep = 0; deep < 2; ++deep)
        for (int reserve = 0; reserve < (cap_chunks > 0 ? 2 : 1); ++reserve) {
          ListRule rule;
          rule.backward_first = bf;
          rule.w_fills_only = wf;
          rule.deep_first = deep;
          rule.reserve_deeper = reserve == 0;
          Schedule cand = list_schedule(layout, costs, cap_chunks, rule);
          if (cand.num_ops() == 0) continue;
          try {
            validate_schedule(cand);
            const Time mk = simulate(cand, costs).makespan();
            if (best_mk == 0 || mk < best_mk) {
              best_mk = mk;
              best = std::move(cand);
            }
          } catch (const InputError&) {
          }
        }
  if (best_mk == 0) best.ranks.clear();
  return best;
}

// A start for the solver: the list schedule's order, its starts as early as the order and the
// dependencies allow (st empty when some op could not be placed); pos: each op's place on its rank.
struct Start {
  std::vector<double> st;
  std::vector<int> pos;
  double c = 0;
};

Start list_start(const Milp& m, const Schedule& best) {
  const int n = m.n;
  const Schedule& s = m.s;
  Start out;
  out.pos.assign(n, 0);
  if (best.ranks.empty()) return out;
  std::vector<double> st(n, -1);
  std::vector<std::size_t> next(s.pp, 0);
  std::vector<double> free(s.pp, 0);
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t k = 0; k < best.ranks[r].size(); ++k)
      out.pos[m.op_id(best.ranks[r][k].first)] = static_cast<int>(k);
  bool progress = true;
  while (progress) {
    progress = false;
    for (int r = 0; r < s.pp; ++r) {
      while (next[r] < best.ranks[r].size()) {
        const Op& o = best.ranks[r][next[r]].first;
        const int i = m.op_id(o);
        double t = free[r];
        auto need = [&](int a, double extra) {
          if (st[a] < 0) return false;
          t = std::max(t, st[a] + m.ops[a].d + extra);
          return true;
        };
        bool ok = true;
        if (o.kind == OpKind::F && !s.is_first_stage(o.stage))
          ok = need(m.id(OpKind::F, o.stage - 1, o.microbatch), m.hop(o.stage - 1, o.stage, true));
        if (o.kind == OpKind::I) {
          ok = need(m.id(OpKind::F, o.stage, o.microbatch), 0);
          if (ok && !s.is_last_stage(o.stage))
            ok = need(m.id(OpKind::I, o.stage + 1, o.microbatch), m.hop(o.stage + 1, o.stage, false));
        }
        if (o.kind == OpKind::W) ok = need(m.id(OpKind::I, o.stage, o.microbatch), 0);
        if (!ok) break;
        st[i] = t;
        free[r] = t + m.ops[i].d;
        ++next[r];
        progress = true;
      }
    }
  }
  if (std::all_of(st.begin(), st.end(), [](double v) { return v >= 0; })) {
    out.st = st;
    for (int i = 0; i < n; ++i) out.c = std::max(out.c, st[i] + m.ops[i].d);
  }
  return out;
}

// The model's columns: S_o in [lo, hi], C in [lb_c, ub], and a y for each pair of one rank whose
// order the precedences leave open (ycol[i * n + j], -1 where none). Returns the column count.
int add_columns(const Milp& m, CoinModel& cm, const std::vector<double>& lo, const std::vector<double>& hi, double lb_c,
                double ub, std::vector<int>& ycol) {
  const int n = m.n;
  for (int i = 0; i < n; ++i) cm.addColumn(0, nullptr, nullptr, lo[i], hi[i], 0.0);
  cm.addColumn(0, nullptr, nullptr, lb_c, ub, 1.0);
  ycol.assign(static_cast<std::size_t>(n) * n, -1);
  int cols = n + 1;
  for (const auto& list : m.on_rank)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b) {
        const int i = list[a], j = list[b];
        if (m.reach[i][j] || m.reach[j][i]) continue;
        cm.addColumn(0, nullptr, nullptr, 0.0, 1.0, 0.0, nullptr, true);
        ycol[static_cast<std::size_t>(i) * n + j] = cols++;
      }
  return cols;
}

// The makespan, precedence and one-op-at-a-time rows (column C = n is the makespan).
void add_order_rows(const Milp& m, CoinModel& cm, const std::vector<double>& lo, const std::vector<double>& hi,
                    const std::vector<int>& ycol) {
  const int n = m.n, C = n;
  auto row2 = [&](int c1, double v1, int c2, double v2, double lo_v) {
    const int idx[2] = {c1, c2};
    const double val[2] = {v1, v2};
    cm.addRow(2, idx, val, lo_v, COIN_DBL_MAX);
  };
  for (int i = 0; i < n; ++i) row2(C, 1.0, i, -1.0, m.ops[i].d + m.tail[i]);  // C - S_i >= d_i + tail_i
  for (int a = 0; a < n; ++a)
    for (const Edge& e : m.succ[a]) row2(e.to, 1.0, a, -1.0, m.ops[a].d + e.lag);
  for (const auto& list : m.on_rank)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b) {
        const int i = list[a], j = list[b];
        if (m.reach[i][j] || m.reach[j][i]) {
          const int x = m.reach[i][j] ? i : j, z = m.reach[i][j] ? j : i;
          row2(z, 1.0, x, -1.0, m.ops[x].d);  // one rank: z starts after x ends
          continue;
        }
        const int y = ycol[static_cast<std::size_t>(i) * n + j];
        const double m1 = std::max(0.0, hi[i] + m.ops[i].d - lo[j]);  // y = 0 relaxes S_j >= S_i + d_i
        const double m2 = std::max(0.0, hi[j] + m.ops[j].d - lo[i]);  // y = 1 relaxes S_i >= S_j + d_j
        const int idx[3] = {j, i, y};
        const double v1[3] = {1.0, -1.0, -m1};  // S_j - S_i - m1 y >= d_i - m1
        cm.addRow(3, idx, v1, m.ops[i].d - m1, COIN_DBL_MAX);
        const double v2[3] = {-1.0, 1.0, m2};  // S_i - S_j + m2 y >= d_j
        cm.addRow(3, idx, v2, m.ops[j].d, COIN_DBL_MAX);
      }
}

// At each F's start, the rank's activations 1 + #F before it - #W before it <= cap. before(j, k):
// 1 or 0 when the precedences fix it, else y_jk (j < k) or 1 - y_kj.
void add_cap_rows(const Milp& m, CoinModel& cm, const std::vector<int>& ycol, int cap_chunks) {
  const int n = m.n;
  for (const auto& list : m.on_rank)
    for (int k : list) {
      if (m.ops[k].op.kind != OpKind::F) continue;
      std::vector<int> idx;
      std::vector<double> val;
      double rhs = cap_chunks - 1;
      for (int j : list) {
        if (j == k || m.ops[j].op.kind == OpKind::I) continue;
        const double sign = m.ops[j].op.kind == OpKind::F ? 1.0 : -1.0;
        if (m.reach[j][k]) {
          rhs -= sign;
        } else if (m.reach[k][j]) {
        } else if (j < k) {
          idx.push_back(ycol[static_cast<std::size_t>(j) * n + k]);
          val.push_back(sign);
        } else {
          idx.push_back(ycol[static_cast<std::size_t>(k) * n + j]);  // before(j,k) = 1 - y_kj
          val.push_back(-sign);
          rhs -= sign;
        }
      }
      cm.addRow(static_cast<int>(idx.size()), idx.data(), val.data(), -COIN_DBL_MAX, rhs);
    }
}

// The start as a solution vector of the model's columns (empty without a start).
std::vector<double> start_vector(const Milp& m, const Start& st, const std::vector<int>& ycol, int cols) {
  std::vector<double> start;
  if (st.st.empty()) return start;
  const int n = m.n;
  start.assign(cols, 0.0);
  for (int i = 0; i < n; ++i) start[i] = st.st[i];
  start[n] = st.c;
  for (const auto& list : m.on_rank)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b) {
        const int y = ycol[static_cast<std::size_t>(list[a]) * n + list[b]];
        if (y >= 0) start[y] = st.pos[list[a]] < st.pos[list[b]] ? 1.0 : 0.0;
      }
  return start;
}

// Solves; the result's schedule orders each rank's ops by their solved starts.
void solve(const Milp& m, CoinModel& cm, const std::vector<double>& start, int cols, double time_limit_s, Time upper,
           const Schedule& layout, ExactResult& res) {
  OsiClpSolverInterface solver;
  solver.loadFromCoinModel(cm);
  solver.messageHandler()->setLogLevel(0);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(time_limit_s);
  if (!start.empty()) model.setBestSolution(start.data(), cols, start[m.n], true);
  model.branchAndBound();
  const double* x = model.bestSolution();
  if (!x) {
    if (model.isProvenInfeasible()) {
      res.above_upper = upper > 0;
      res.status = upper > 0 ? fmt::format("no schedule at or below {:.6g} units (proven)", units(upper))
                             : "infeasible under the cap";
    } else {
      res.status = fmt::format("no solution in {} s", time_limit_s);
    }
    return;
  }
  res.solved = true;
  res.optimal = model.isProvenOptimal();
  res.status = res.optimal ? "optimal" : fmt::format("time limit ({} s): best found, not proven", time_limit_s);
  res.objective = static_cast<Time>(std::llround(x[m.n] * m.scale));
  res.schedule = layout;
  res.schedule.family = "exact";
  for (int r = 0; r < m.s.pp; ++r) {
    std::vector<int> list = m.on_rank[r];
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) { return x[a] < x[b]; });
    res.schedule.ranks[r].clear();
    for (int i : list) res.schedule.ranks[r].push_back(Action::single(m.ops[i].op));
  }
}

}  // namespace

bool exact_available() { return true; }

ExactResult exact_schedule(const Schedule& layout, const SimCosts& costs, int cap_chunks, double time_limit_s,
                           Time upper) {
  ExactResult res;
  res.built = true;
  Milp m(layout, costs);
  build_ops(m);
  precedences(m);
  longest_paths(m);
  // The search's lower bound under the same cap (valid here: no pairs, no contention).
  const Time lb =
      lower_bound(layout, costs, cap_chunks > 0 ? static_cast<double>(cap_chunks) / layout.chunks_per_rank : 0);
  double lb_c = static_cast<double>(lb) / m.scale;
  for (int a = 0; a < m.n; ++a) lb_c = std::max(lb_c, m.head[a] + m.ops[a].d + m.tail[a]);
  // With C >= the lower bound, a start that meets the bound is proven optimal at once.
  Start st = list_start(m, best_list_schedule(layout, costs, cap_chunks));
  if (!st.st.empty()) st.c = std::max(st.c, lb_c);
  // An upper bound on the makespan of interest: the start's, or `upper`. Every start then lies in
  // [head, UB - d - tail], and the big-M of each order pair is the widest gap those windows allow
  // (not the serial length).
  double ub = m.H;
  if (!st.st.empty()) ub = st.c + 1e-6;
  const double upper_c = upper > 0 ? static_cast<double>(upper) / m.scale + 1e-6 : 0;
  if (upper > 0 && upper_c < ub) {
    ub = upper_c;
    if (st.c > ub) st.st.clear();
  }
  if (lb_c > ub) {
    res.above_upper = upper > 0;
    res.status = fmt::format("no schedule at or below {:.6g} units (the lower bound is above it)", units(upper));
    return res;
  }
  std::vector<double> lo(m.n), hi(m.n);
  for (int i = 0; i < m.n; ++i) {
    lo[i] = m.head[i];
    hi[i] = std::max(lo[i], ub - m.ops[i].d - m.tail[i]);
  }
  CoinModel cm;
  std::vector<int> ycol;
  const int cols = add_columns(m, cm, lo, hi, lb_c, ub, ycol);
  add_order_rows(m, cm, lo, hi, ycol);
  if (cap_chunks > 0) add_cap_rows(m, cm, ycol, cap_chunks);
  solve(m, cm, start_vector(m, st, ycol, cols), cols, time_limit_s, upper, layout, res);
  return res;
}

}  // namespace ppsim
