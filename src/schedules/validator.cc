// The validator (validator.h). Not obvious: the acyclicity check is Kahn's topological sort over
// flat arrays, with each action's successors derived from the op it holds (next action of its
// rank; F -> next stage's F and its own backward; backward -> previous stage's backward and its
// W), so no edge list is built on the common path. Only when Kahn leaves actions behind (a
// cycle exists) is the Boost.Graph DFS run, over the same edges in the same insertion order as
// before, so the deadlock report names the same cycle (tests/sim/engine_test.cc, and
// tests/schedules/validator_test.cc).
#include "schedules/validator.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/depth_first_search.hpp>
#include <cstdint>
#include <vector>

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

  // Global action ids, in rank order: rank r's actions are first_id[r] .. first_id[r+1]-1.
  std::vector<std::size_t> first_id(s.pp + 1, 0);
  for (int r = 0; r < s.pp; ++r) first_id[r + 1] = first_id[r] + s.ranks[r].size();
  const std::size_t n = first_id[s.pp];
  auto rank_of = [&](std::int64_t id) {
    return static_cast<int>(std::upper_bound(first_id.begin(), first_id.end(), static_cast<std::size_t>(id)) -
                            first_id.begin()) -
           1;
  };
  auto action_of = [&](std::int64_t id) -> const Action& {
    const int r = rank_of(id);
    return s.ranks[r][static_cast<std::size_t>(id) - first_id[r]];
  };

  // Where each op is: action id per (kind, stage, micro-batch); -1 = not seen.
  std::vector<std::int64_t> where(kNumOpKinds * keys, -1);
  std::int64_t* const wf = where.data() + static_cast<int>(OpKind::F) * keys;
  std::int64_t* const wi = where.data() + static_cast<int>(OpKind::I) * keys;
  std::int64_t* const ww = where.data() + static_cast<int>(OpKind::W) * keys;
  std::int64_t* const wb = where.data() + static_cast<int>(OpKind::B) * keys;
  auto name_of = [&](std::int64_t id) { return format_action(action_of(id)); };

  for (int r = 0; r < s.pp; ++r) {
    for (int k = 0; k < static_cast<int>(s.ranks[r].size()); ++k) {
      const Action& a = s.ranks[r][k];
      const std::int64_t id = static_cast<std::int64_t>(first_id[r]) + k;
      if (a.overlapped) {
        if (a.first.kind != OpKind::F || (a.second.kind != OpKind::B && a.second.kind != OpKind::I))
          throw InputError(
              fmt::format("overlapped pair {} on rank {} must be an F with a backward (B or I)", format_action(a), r));
      }
      for (int i = 0; i < a.size(); ++i) {
        const Op& op = a.op(i);
        if (op.stage < 0 || op.stage >= S)
          throw InputError(
              fmt::format("op {} on rank {}: stage {} is out of range 0..{}", format_op(op), r, op.stage, S - 1));
        if (op.microbatch < 0 || op.microbatch >= mbp)
          throw InputError(fmt::format("op {} on rank {}: micro-batch {} is out of range 0..{}", format_op(op), r,
                                       op.microbatch, mbp - 1));
        if (s.stage_rank[op.stage] != r)
          throw InputError(fmt::format("op {} is on rank {}, but stage {} lives on rank {}", format_op(op), r, op.stage,
                                       s.stage_rank[op.stage]));
        const std::size_t key = static_cast<std::size_t>(op.stage) * mbp + op.microbatch;
        std::int64_t& slot = where[static_cast<int>(op.kind) * keys + key];
        if (slot >= 0)
          throw InputError(fmt::format("op {} appears twice (rank {} and rank {})", format_op(op), rank_of(slot), r));
        slot = id;
      }
    }
  }

  // Completeness: one F, and either one B or one I and one W, per (stage, micro-batch).
  for (int st = 0; st < S; ++st) {
    for (int m = 0; m < mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * mbp + m;
      auto missing = [&](OpKind k) {
        return InputError(fmt::format("missing op {} (every stage and micro-batch needs one F and one backward)",
                                      format_op(Op{k, st, m})));
      };
      if (wf[key] < 0) throw missing(OpKind::F);
      if (wb[key] >= 0 && (wi[key] >= 0 || ww[key] >= 0))
        throw InputError(fmt::format("stage {} micro-batch {} has both a full backward {} and a split one", st, m,
                                     format_op(Op{OpKind::B, st, m})));
      if (wb[key] < 0) {
        if (wi[key] < 0) throw missing(OpKind::B);
        if (ww[key] < 0) throw missing(OpKind::W);
      }
    }
  }

  // Kahn's check. Successors of an action (the dependency edges below, read from its ops).
  auto bwd_of = [&](std::size_t key) { return wb[key] >= 0 ? wb[key] : wi[key]; };
  auto for_each_successor = [&](int r, std::size_t id, const Action& a, auto&& visit) {
    if (id + 1 < first_id[r + 1]) visit(id + 1);
    for (int i = 0; i < a.size(); ++i) {
      const Op& op = a.op(i);
      const std::size_t key = static_cast<std::size_t>(op.stage) * mbp + op.microbatch;
      switch (op.kind) {
        case OpKind::F:
          if (!s.is_last_stage(op.stage)) visit(static_cast<std::size_t>(wf[key + mbp]));
          visit(static_cast<std::size_t>(bwd_of(key)));
          break;
        case OpKind::I:
          visit(static_cast<std::size_t>(ww[key]));
          [[fallthrough]];
        case OpKind::B:
          if (!s.is_first_stage(op.stage)) visit(static_cast<std::size_t>(bwd_of(key - mbp)));
          break;
        case OpKind::W:
          break;
      }
    }
  };
  std::vector<std::uint32_t> indeg(n, 0);
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t id = first_id[r]; id < first_id[r + 1]; ++id)
      for_each_successor(r, id, s.ranks[r][id - first_id[r]], [&](std::size_t t) { ++indeg[t]; });
  // `ready` holds ids whose predecessors are all done; a rank's actions are released in order.
  std::vector<std::size_t> ready;
  ready.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push_back(i);
  for (std::size_t head = 0; head < ready.size(); ++head) {
    const std::size_t id = ready[head];
    const int r = rank_of(static_cast<std::int64_t>(id));
    for_each_successor(r, id, s.ranks[r][id - first_id[r]], [&](std::size_t t) {
      if (--indeg[t] == 0) ready.push_back(t);
    });
  }
  if (ready.size() == n) return;

  // A cycle exists: the dependency graph over actions, with each rank's order as edges, and a
  // DFS that names the cycle it meets first.
  Graph g(n);
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t id = first_id[r] + 1; id < first_id[r + 1]; ++id) boost::add_edge(id - 1, id, g);
  for (int st = 0; st < S; ++st) {
    for (int m = 0; m < mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * mbp + m;
      const std::int64_t bwd = bwd_of(key);
      if (!s.is_first_stage(st)) boost::add_edge(wf[key - mbp], wf[key], g);
      if (!s.is_last_stage(st)) boost::add_edge(bwd_of(key + mbp), bwd, g);
      boost::add_edge(wf[key], bwd, g);
      if (ww[key] >= 0) boost::add_edge(wi[key], ww[key], g);
    }
  }
  std::vector<Vertex> parent(n);
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
  PPSIM_CHECK(false, "validator: Kahn's check found a cycle that the DFS did not");
}

}  // namespace ppsim
