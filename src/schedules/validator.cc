#include "schedules/validator.h"

#include <algorithm>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using Vertex = boost::graph_traits<Graph>::vertex_descriptor;
using Edge = boost::graph_traits<Graph>::edge_descriptor;

struct CycleFound {
  Vertex from, to;
};

// Records DFS tree parents; throws at the first back edge.
struct CycleVisitor : boost::default_dfs_visitor {
  std::vector<Vertex>* parent;
  void tree_edge(Edge e, const Graph& g) { (*parent)[boost::target(e, g)] = boost::source(e, g); }
  void back_edge(Edge e, const Graph& g) { throw CycleFound{boost::source(e, g), boost::target(e, g)}; }
};

struct ActionRef {
  int rank;
  int index;
};

}  // namespace

void validate_schedule(const Schedule& s) {
  const int S = s.num_stages();
  if (s.pp < 1 || S < 1) throw InputError("schedule has no ranks or no stages");
  if (static_cast<int>(s.ranks.size()) != s.pp)
    throw InputError(fmt::format("schedule lists {} ranks, expected P={}", s.ranks.size(), s.pp));
  if (s.microbatches % s.num_pipes != 0)
    throw InputError(fmt::format("{} micro-batches do not split evenly over {} pipes", s.microbatches, s.num_pipes));
  const int mbp = s.mb_per_pipe();
  const std::size_t keys = static_cast<std::size_t>(S) * static_cast<std::size_t>(mbp);

  // Global action ids, in rank order.
  std::vector<ActionRef> refs;
  std::vector<std::size_t> first_id(s.pp + 1, 0);
  for (int r = 0; r < s.pp; ++r) {
    first_id[r] = refs.size();
    for (int k = 0; k < static_cast<int>(s.ranks[r].size()); ++k) refs.push_back({r, k});
  }
  first_id[s.pp] = refs.size();

  // Where each op is: action id per (kind, stage, micro-batch); -1 = not seen.
  std::vector<std::int64_t> where[kNumOpKinds];
  for (auto& w : where) w.assign(keys, -1);
  auto name_of = [&](std::int64_t id) { return format_action(s.ranks[refs[id].rank][refs[id].index]); };

  for (int r = 0; r < s.pp; ++r) {
    for (int k = 0; k < static_cast<int>(s.ranks[r].size()); ++k) {
      const Action& a = s.ranks[r][k];
      const std::int64_t id = static_cast<std::int64_t>(first_id[r]) + k;
      if (a.overlapped) {
        if (a.first.kind != OpKind::F || (a.second.kind != OpKind::B && a.second.kind != OpKind::I))
          throw InputError(fmt::format("overlapped pair {} on rank {} must be an F with a backward (B or I)",
                                       format_action(a), r));
      }
      for (int i = 0; i < a.size(); ++i) {
        const Op& op = a.op(i);
        if (op.stage < 0 || op.stage >= S)
          throw InputError(fmt::format("op {} on rank {}: stage {} is out of range 0..{}", format_op(op), r, op.stage, S - 1));
        if (op.microbatch < 0 || op.microbatch >= mbp)
          throw InputError(fmt::format("op {} on rank {}: micro-batch {} is out of range 0..{}", format_op(op), r,
                                       op.microbatch, mbp - 1));
        if (s.stage_rank[op.stage] != r)
          throw InputError(fmt::format("op {} is on rank {}, but stage {} lives on rank {}", format_op(op), r, op.stage,
                                       s.stage_rank[op.stage]));
        const std::size_t key = static_cast<std::size_t>(op.stage) * mbp + op.microbatch;
        auto& slot = where[static_cast<int>(op.kind)][key];
        if (slot >= 0)
          throw InputError(fmt::format("op {} appears twice (rank {} and rank {})", format_op(op), refs[slot].rank, r));
        slot = id;
      }
    }
  }

  // Completeness: one F, and either one B or one I and one W, per (stage, micro-batch).
  auto& wf = where[static_cast<int>(OpKind::F)];
  auto& wb = where[static_cast<int>(OpKind::B)];
  auto& wi = where[static_cast<int>(OpKind::I)];
  auto& ww = where[static_cast<int>(OpKind::W)];
  for (int st = 0; st < S; ++st) {
    for (int m = 0; m < mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * mbp + m;
      auto missing = [&](OpKind k) {
        return InputError(fmt::format("missing op {} (every stage and micro-batch needs one F and one backward)",
                                      format_op(Op{k, st, m})));
      };
      if (wf[key] < 0) throw missing(OpKind::F);
      if (wb[key] >= 0 && (wi[key] >= 0 || ww[key] >= 0))
        throw InputError(fmt::format("stage {} micro-batch {} has both a full backward {} and a split one",
                                     st, m, format_op(Op{OpKind::B, st, m})));
      if (wb[key] < 0) {
        if (wi[key] < 0) throw missing(OpKind::B);
        if (ww[key] < 0) throw missing(OpKind::W);
      }
    }
  }

  // Dependency graph over actions, with each rank's order as edges.
  Graph g(refs.size());
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t id = first_id[r] + 1; id < first_id[r + 1]; ++id) boost::add_edge(id - 1, id, g);
  for (int st = 0; st < S; ++st) {
    for (int m = 0; m < mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * mbp + m;
      const std::int64_t bwd = wb[key] >= 0 ? wb[key] : wi[key];
      if (!s.is_first_stage(st)) boost::add_edge(wf[key - mbp], wf[key], g);
      if (!s.is_last_stage(st)) {
        const std::int64_t next_bwd = wb[key + mbp] >= 0 ? wb[key + mbp] : wi[key + mbp];
        boost::add_edge(next_bwd, bwd, g);
      }
      boost::add_edge(wf[key], bwd, g);
      if (ww[key] >= 0) boost::add_edge(wi[key], ww[key], g);
    }
  }
  std::vector<Vertex> parent(refs.size());
  for (std::size_t i = 0; i < parent.size(); ++i) parent[i] = i;
  CycleVisitor vis;
  vis.parent = &parent;
  try {
    boost::depth_first_search(g, boost::visitor(vis));
  } catch (const CycleFound& c) {
    // The cycle: c.to -> ... -> c.from (tree path) -> c.to (back edge).
    std::vector<Vertex> cyc;
    for (Vertex v = c.from;; v = parent[v]) {
      cyc.push_back(v);
      if (v == c.to || parent[v] == v) break;
    }
    std::reverse(cyc.begin(), cyc.end());
    std::string text;
    const std::size_t shown = std::min<std::size_t>(cyc.size(), 12);
    for (std::size_t i = 0; i < shown; ++i) text += name_of(static_cast<std::int64_t>(cyc[i])) + " -> ";
    if (shown < cyc.size()) text += fmt::format("... ({} more) -> ", cyc.size() - shown);
    text += name_of(static_cast<std::int64_t>(cyc.front()));
    throw InputError("deadlock: a cycle of ops, each needed before the next: " + text);
  }
}

}  // namespace ppsim
