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
#include <cstdlib>
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

// Where each op is: action id per (kind, stage, micro-batch), -1 = not seen; global action ids in
// rank order (rank r's actions are first_id[r] .. first_id[r+1]-1).
struct OpIndex {
  const Schedule& s;
  int S, mbp;
  std::size_t keys;
  std::vector<std::size_t> first_id;
  std::vector<std::int64_t> where;
  std::int64_t *wf, *wi, *ww, *wb;

  explicit OpIndex(const Schedule& sched)
      : s(sched),
        S(sched.num_stages()),
        mbp(sched.mb_per_pipe()),
        keys(static_cast<std::size_t>(S) * static_cast<std::size_t>(mbp)),
        first_id(sched.pp + 1, 0),
        where(kNumOpKinds * keys, -1) {
    for (int r = 0; r < s.pp; ++r) first_id[r + 1] = first_id[r] + s.ranks[r].size();
    wf = where.data() + static_cast<int>(OpKind::F) * keys;
    wi = where.data() + static_cast<int>(OpKind::I) * keys;
    ww = where.data() + static_cast<int>(OpKind::W) * keys;
    wb = where.data() + static_cast<int>(OpKind::B) * keys;
  }
  std::size_t size() const { return first_id[s.pp]; }
  std::size_t key_of(const Op& op) const { return static_cast<std::size_t>(op.stage) * mbp + op.microbatch; }
  int rank_of(std::int64_t id) const {
    return static_cast<int>(std::upper_bound(first_id.begin(), first_id.end(), static_cast<std::size_t>(id)) -
                            first_id.begin()) -
           1;
  }
  const Action& action_of(std::int64_t id) const {
    const int r = rank_of(id);
    return s.ranks[r][static_cast<std::size_t>(id) - first_id[r]];
  }
  std::int64_t bwd_of(std::size_t key) const { return wb[key] >= 0 ? wb[key] : wi[key]; }

  // Successors of an action (the dependency edges, read from its ops): the next action of its
  // rank; F -> the next stage's F and its own backward; backward -> the previous stage's backward
  // and its W.
  template <class Visit>
  void for_each_successor(int r, std::size_t id, const Action& a, Visit&& visit) const {
    if (id + 1 < first_id[r + 1]) visit(id + 1);
    for (int i = 0; i < a.size(); ++i) {
      const Op& op = a.op(i);
      const std::size_t key = key_of(op);
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
  }
};

void check_shape(const Schedule& s) {
  if (s.pp < 1 || s.num_stages() < 1) throw InputError("schedule has no ranks or no stages");
  if (static_cast<int>(s.ranks.size()) != s.pp)
    throw InputError(fmt::format("schedule lists {} ranks, expected P={}", s.ranks.size(), s.pp));
  if (s.microbatches % s.num_pipes != 0)
    throw InputError(fmt::format("{} micro-batches do not split evenly over {} pipes", s.microbatches, s.num_pipes));
}

// Checks one op's place (its stage, micro-batch and rank) and records it in the index.
void place_op(OpIndex& x, const Op& op, int r, std::int64_t id) {
  if (op.stage < 0 || op.stage >= x.S)
    throw InputError(
        fmt::format("op {} on rank {}: stage {} is out of range 0..{}", format_op(op), r, op.stage, x.S - 1));
  if (op.microbatch < 0 || op.microbatch >= x.mbp)
    throw InputError(fmt::format("op {} on rank {}: micro-batch {} is out of range 0..{}", format_op(op), r,
                                 op.microbatch, x.mbp - 1));
  if (x.s.stage_rank[op.stage] != r)
    throw InputError(fmt::format("op {} is on rank {}, but stage {} lives on rank {}", format_op(op), r, op.stage,
                                 x.s.stage_rank[op.stage]));
  std::int64_t& slot = x.where[static_cast<int>(op.kind) * x.keys + x.key_of(op)];
  if (slot >= 0)
    throw InputError(fmt::format("op {} appears twice (rank {} and rank {})", format_op(op), x.rank_of(slot), r));
  slot = id;
}

void place_ops(OpIndex& x) {
  const Schedule& s = x.s;
  for (int r = 0; r < s.pp; ++r) {
    for (int k = 0; k < static_cast<int>(s.ranks[r].size()); ++k) {
      const Action& a = s.ranks[r][k];
      if (a.overlapped) {
        if (a.first.kind != OpKind::F || (a.second.kind != OpKind::B && a.second.kind != OpKind::I))
          throw InputError(
              fmt::format("overlapped pair {} on rank {} must be an F with a backward (B or I)", format_action(a), r));
      }
      for (int i = 0; i < a.size(); ++i) place_op(x, a.op(i), r, static_cast<std::int64_t>(x.first_id[r]) + k);
    }
  }
}

// Completeness: one F, and either one B or one I and one W, per (stage, micro-batch).
void check_complete(const OpIndex& x) {
  for (int st = 0; st < x.S; ++st) {
    for (int m = 0; m < x.mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * x.mbp + m;
      auto missing = [&](OpKind k) {
        return InputError(fmt::format("missing op {} (every stage and micro-batch needs one F and one backward)",
                                      format_op(Op{k, st, m})));
      };
      if (x.wf[key] < 0) throw missing(OpKind::F);
      if (x.wb[key] >= 0 && (x.wi[key] >= 0 || x.ww[key] >= 0))
        throw InputError(fmt::format("stage {} micro-batch {} has both a full backward {} and a split one", st, m,
                                     format_op(Op{OpKind::B, st, m})));
      if (x.wb[key] < 0) {
        if (x.wi[key] < 0) throw missing(OpKind::B);
        if (x.ww[key] < 0) throw missing(OpKind::W);
      }
    }
  }
}

// Kahn's check: true when every action can run (no cycle).
bool acyclic(const OpIndex& x) {
  const Schedule& s = x.s;
  const std::size_t n = x.size();
  std::vector<std::uint32_t> indeg(n, 0);
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t id = x.first_id[r]; id < x.first_id[r + 1]; ++id)
      x.for_each_successor(r, id, s.ranks[r][id - x.first_id[r]], [&](std::size_t t) { ++indeg[t]; });
  // `ready` holds ids whose predecessors are all done; a rank's actions are released in order.
  std::vector<std::size_t> ready;
  ready.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (indeg[i] == 0) ready.push_back(i);
  for (std::size_t head = 0; head < ready.size(); ++head) {
    const std::size_t id = ready[head];
    const int r = x.rank_of(static_cast<std::int64_t>(id));
    x.for_each_successor(r, id, s.ranks[r][id - x.first_id[r]], [&](std::size_t t) {
      if (--indeg[t] == 0) ready.push_back(t);
    });
  }
  return ready.size() == n;
}

// The dependency graph over actions, with each rank's order as edges, in the order the DFS expects.
Graph dependency_graph(const OpIndex& x) {
  const Schedule& s = x.s;
  Graph g(x.size());
  for (int r = 0; r < s.pp; ++r)
    for (std::size_t id = x.first_id[r] + 1; id < x.first_id[r + 1]; ++id) boost::add_edge(id - 1, id, g);
  for (int st = 0; st < x.S; ++st) {
    for (int m = 0; m < x.mbp; ++m) {
      const std::size_t key = static_cast<std::size_t>(st) * x.mbp + m;
      const std::int64_t bwd = x.bwd_of(key);
      if (!s.is_first_stage(st)) boost::add_edge(x.wf[key - x.mbp], x.wf[key], g);
      if (!s.is_last_stage(st)) boost::add_edge(x.bwd_of(key + x.mbp), bwd, g);
      boost::add_edge(x.wf[key], bwd, g);
      if (x.ww[key] >= 0) boost::add_edge(x.wi[key], x.ww[key], g);
    }
  }
  return g;
}

// A cycle exists: a DFS names the cycle it meets first.
[[noreturn]] void report_cycle(const OpIndex& x) {
  const Graph g = dependency_graph(x);
  std::vector<Vertex> parent(x.size());
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
    auto name_of = [&](Vertex v) { return format_action(x.action_of(static_cast<std::int64_t>(v))); };
    std::string text;
    const std::size_t shown = std::min<std::size_t>(cyc.size(), 12);
    for (std::size_t i = 0; i < shown; ++i) text += name_of(cyc[i]) + " -> ";
    if (shown < cyc.size()) text += fmt::format("... ({} more) -> ", cyc.size() - shown);
    text += name_of(cyc.front());
    throw InputError("deadlock: a cycle of ops, each needed before the next: " + text);
  }
  PPSIM_CHECK(false, "validator: Kahn's check found a cycle that the DFS did not");
  std::abort();
}

}  // namespace

void validate_schedule(const Schedule& s) {
  check_shape(s);
  OpIndex index(s);
  place_ops(index);
  check_complete(index);
  if (!acyclic(index)) report_cycle(index);
}

}  // namespace ppsim
