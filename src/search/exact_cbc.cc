// The exact method with CBC (exact.h). A disjunctive MILP:
//   variables  S_o >= 0 (start of op o), C (makespan), y_ab in {0,1} for ops a < b of one rank
//              (1: a runs before b);
//   minimise   C
//   subject to C >= S_o + d_o;
//              S_b >= S_a + d_a + hop(a,b) for each dependency a -> b (F chain, backward chain,
//              F -> own I, I -> W);
//              S_b >= S_a + d_a - H(1 - y_ab),  S_a >= S_b + d_b - H y_ab  (one op at a time);
//              at each F's start, the rank's activations 1 + #F before it - #W before it <= cap;
//              C >= the lower bound of search.h (valid, and it tightens the weak big-M relaxation);
//              stage 0's forwards in micro-batch order (micro-batches are interchangeable).
// H is the serial length (every op one after another), an upper bound on any start.
#include <fmt/format.h>

#include <CbcModel.hpp>
#include <CoinModel.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "schedules/validator.h"
#include "search/exact.h"
#include "search/search.h"
#include "sim/engine.h"

namespace ppsim {

bool exact_available() { return true; }

ExactResult exact_schedule(const Schedule& layout, const SimCosts& costs, int cap_chunks, double time_limit_s) {
  ExactResult res;
  res.built = true;
  const Schedule& s = layout;
  const int S = s.num_stages(), mbp = s.mb_per_pipe();
  struct OpRef {
    Op op;
    int rank;
    double d;
  };
  std::vector<OpRef> ops;
  auto id = [&](OpKind k, int st, int m) {
    return (static_cast<int>(st) * mbp + m) * 3 + (k == OpKind::F ? 0 : k == OpKind::I ? 1 : 2);
  };
  Time dmax = 1;
  for (int st = 0; st < S; ++st)
    for (int m = 0; m < mbp; ++m)
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        dmax = std::max(dmax, op_duration(costs.slice[s.slice[st]], k));
  const double scale = static_cast<double>(dmax) / 10.0;  // durations in [0, 10]
  for (int st = 0; st < S; ++st)
    for (int m = 0; m < mbp; ++m)
      for (OpKind k : {OpKind::F, OpKind::I, OpKind::W})
        ops.push_back(
            {Op{k, st, m}, s.stage_rank[st], static_cast<double>(op_duration(costs.slice[s.slice[st]], k)) / scale});
  const int n = static_cast<int>(ops.size());
  auto hop = [&](int from, int to, bool fwd) -> double {
    return static_cast<double>(hop_time(s, costs, from, to, fwd)) / scale;
  };
  double H = 0;
  for (const OpRef& o : ops) H += o.d;
  for (int st = 0; st + 1 < S; ++st) H += hop(st, st + 1, true) + hop(st + 1, st, false);
  H += 1;

  // The search's lower bound under the same cap (valid here: no pairs, no contention).
  const Time lb = lower_bound(s, costs, cap_chunks > 0 ? static_cast<double>(cap_chunks) / s.chunks_per_rank : 0);
  CoinModel cm;
  for (int i = 0; i < n; ++i) cm.addColumn(0, nullptr, nullptr, 0.0, H, 0.0);
  const int C = n;
  cm.addColumn(0, nullptr, nullptr, static_cast<double>(lb) / scale, H, 1.0);
  // y columns for pairs of one rank.
  std::vector<std::vector<int>> on_rank(s.pp);
  for (int i = 0; i < n; ++i) on_rank[ops[i].rank].push_back(i);
  std::vector<int> ycol(static_cast<std::size_t>(n) * n, -1);
  int cols = n + 1;
  for (const auto& list : on_rank)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b) {
        cm.addColumn(0, nullptr, nullptr, 0.0, 1.0, 0.0, nullptr, true);
        ycol[static_cast<std::size_t>(list[a]) * n + list[b]] = cols++;
      }
  auto row2 = [&](int c1, double v1, int c2, double v2, double lo) {
    const int idx[2] = {c1, c2};
    const double val[2] = {v1, v2};
    cm.addRow(2, idx, val, lo, COIN_DBL_MAX);
  };
  for (int i = 0; i < n; ++i) row2(C, 1.0, i, -1.0, ops[i].d);  // C - S_i >= d_i
  auto dep = [&](int a, int b, double extra) { row2(b, 1.0, a, -1.0, ops[a].d + extra); };
  for (int st = 0; st < S; ++st)
    for (int m = 0; m < mbp; ++m) {
      const int f = id(OpKind::F, st, m), ii = id(OpKind::I, st, m), w = id(OpKind::W, st, m);
      if (!s.is_first_stage(st)) dep(id(OpKind::F, st - 1, m), f, hop(st - 1, st, true));
      if (!s.is_last_stage(st)) dep(id(OpKind::I, st + 1, m), ii, hop(st + 1, st, false));
      dep(f, ii, 0);
      dep(ii, w, 0);
      if (s.is_first_stage(st) && m + 1 < mbp) dep(f, id(OpKind::F, st, m + 1), 0);
    }
  for (const auto& list : on_rank)
    for (std::size_t a = 0; a < list.size(); ++a)
      for (std::size_t b = a + 1; b < list.size(); ++b) {
        const int i = list[a], j = list[b], y = ycol[static_cast<std::size_t>(i) * n + j];
        const int idx[3] = {j, i, y};
        const double v1[3] = {1.0, -1.0, -H};  // S_j - S_i - H y >= d_i - H
        cm.addRow(3, idx, v1, ops[i].d - H, COIN_DBL_MAX);
        const double v2[3] = {-1.0, 1.0, H};  // S_i - S_j + H y >= d_j
        cm.addRow(3, idx, v2, ops[j].d, COIN_DBL_MAX);
      }
  if (cap_chunks > 0) {
    // before(a, b) as a linear term: y_ab (a < b) or 1 - y_ba.
    for (const auto& list : on_rank)
      for (int k : list) {
        if (ops[k].op.kind != OpKind::F) continue;
        std::vector<int> idx;
        std::vector<double> val;
        double rhs = cap_chunks - 1;
        for (int j : list) {
          if (j == k || ops[j].op.kind == OpKind::I) continue;
          const double sign = ops[j].op.kind == OpKind::F ? 1.0 : -1.0;
          if (j < k) {
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

  // A start for the solver: the best of the list scheduler's rules (no pairs), its starts
  // computed as early as its order and the dependencies allow. With C >= the lower bound, a
  // start that meets the bound is proven optimal at once.
  std::vector<double> start;
  {
    Schedule best;
    Time best_mk = 0;
    for (int bf = 0; bf < 2; ++bf)
      for (int wf = 0; wf < 2; ++wf)
        for (int deep = 0; deep < 2; ++deep) {
          ListRule rule;
          rule.backward_first = bf;
          rule.w_fills_only = wf;
          rule.deep_first = deep;
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
    if (best_mk > 0) {
      std::vector<double> st(n, -1);
      std::vector<int> pos(n, 0);
      std::vector<std::size_t> next(s.pp, 0);
      std::vector<double> free(s.pp, 0);
      auto op_id = [&](const Op& o) { return id(o.kind, o.stage, o.microbatch); };
      for (int r = 0; r < s.pp; ++r)
        for (std::size_t k = 0; k < best.ranks[r].size(); ++k) pos[op_id(best.ranks[r][k].first)] = static_cast<int>(k);
      bool progress = true;
      while (progress) {
        progress = false;
        for (int r = 0; r < s.pp; ++r) {
          while (next[r] < best.ranks[r].size()) {
            const Op& o = best.ranks[r][next[r]].first;
            const int i = op_id(o);
            double t = free[r];
            auto need = [&](int a, double extra) {
              if (st[a] < 0) return false;
              t = std::max(t, st[a] + ops[a].d + extra);
              return true;
            };
            bool ok = true;
            if (o.kind == OpKind::F && !s.is_first_stage(o.stage))
              ok = need(id(OpKind::F, o.stage - 1, o.microbatch), hop(o.stage - 1, o.stage, true));
            if (o.kind == OpKind::I) {
              ok = need(id(OpKind::F, o.stage, o.microbatch), 0);
              if (ok && !s.is_last_stage(o.stage))
                ok = need(id(OpKind::I, o.stage + 1, o.microbatch), hop(o.stage + 1, o.stage, false));
            }
            if (o.kind == OpKind::W) ok = need(id(OpKind::I, o.stage, o.microbatch), 0);
            if (!ok) break;
            st[i] = t;
            free[r] = t + ops[i].d;
            ++next[r];
            progress = true;
          }
        }
      }
      if (std::all_of(st.begin(), st.end(), [](double v) { return v >= 0; })) {
        start.assign(cols, 0.0);
        double cmax = 0;
        for (int i = 0; i < n; ++i) {
          start[i] = st[i];
          cmax = std::max(cmax, st[i] + ops[i].d);
        }
        start[C] = std::max(cmax, static_cast<double>(lb) / scale);
        for (const auto& list : on_rank)
          for (std::size_t a = 0; a < list.size(); ++a)
            for (std::size_t b = a + 1; b < list.size(); ++b)
              start[ycol[static_cast<std::size_t>(list[a]) * n + list[b]]] = pos[list[a]] < pos[list[b]] ? 1.0 : 0.0;
      }
    }
  }

  OsiClpSolverInterface solver;
  solver.loadFromCoinModel(cm);
  solver.messageHandler()->setLogLevel(0);
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(time_limit_s);
  if (!start.empty()) model.setBestSolution(start.data(), cols, start[C], true);
  model.branchAndBound();
  const double* x = model.bestSolution();
  if (!x) {
    res.status =
        model.isProvenInfeasible() ? "infeasible under the cap" : fmt::format("no solution in {} s", time_limit_s);
    return res;
  }
  res.solved = true;
  res.optimal = model.isProvenOptimal();
  res.status = res.optimal ? "optimal" : fmt::format("time limit ({} s): best found, not proven", time_limit_s);
  res.objective = static_cast<Time>(std::llround(x[C] * scale));
  res.schedule = layout;
  res.schedule.family = "exact";
  for (int r = 0; r < s.pp; ++r) {
    std::vector<int> list = on_rank[r];
    std::stable_sort(list.begin(), list.end(), [&](int a, int b) { return x[a] < x[b]; });
    res.schedule.ranks[r].clear();
    for (int i : list) res.schedule.ranks[r].push_back(Action::single(ops[i].op));
  }
  return res;
}

}  // namespace ppsim
