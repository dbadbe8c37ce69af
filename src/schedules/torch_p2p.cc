// PyTorch's pipelining runtime: its send/receive lowering and one stream per rank (torch_p2p.h).
#include "schedules/torch_p2p.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

namespace {

// What a rank has placed: compute ops and comm actions, keyed as PyTorch's _Action is compared.
enum PlacedKind : int { kF, kB, kI, kW, kRecvF, kRecvB };
using Placed = std::tuple<int, int, int>;  // (kind, stage, micro-batch)

int placed_kind(OpKind k) {
  switch (k) {
    case OpKind::F: return kF;
    case OpKind::B: return kB;
    case OpKind::I: return kI;
    case OpKind::W: return kW;
  }
  return kF;
}

}  // namespace

Schedule with_torch_p2p(Schedule s) {
  if (s.num_pipes != 1)
    throw InputError(fmt::format("parallel.p2p_runtime torch: {} has {} pipes; PyTorch's runtime lowers one pipe", s.family, s.num_pipes));
  const int P = s.pp;
  auto rank_of = [&](int stage) { return s.stage_rank[static_cast<std::size_t>(stage)]; };
  s.comm.assign(static_cast<std::size_t>(P), {});
  std::vector<std::set<Placed>> placed(static_cast<std::size_t>(P));
  // What each rank lowers, in order: its compute actions and the FSDP-style actions PyTorch's
  // runtime adds to them before lowering, each taking a round like a compute action. Before each
  // action, the next max_active_stages (3) distinct stages it will compute are fetched (UNSHARD,
  // in that order) and the other active stages evicted first (RESHARD, ascending); after each
  // stage's last backward (B or W) its REDUCE_GRAD; at the end the stages still active are
  // resharded (_add_unshard_reshard, _add_reduce_grad). They take no time here.
  struct Item {                      // the rank's next compute action, or one of these
    CommKind extra = CommKind::SendF;  // Unshard, ReduceGrad or Reshard
    int stage = -1;                    // its stage; -1: a compute action
  };
  constexpr std::size_t kMaxActiveStages = 3;  // PyTorch's default
  std::vector<std::vector<Item>> items(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
    std::vector<Item>& out = items[static_cast<std::size_t>(r)];
    std::vector<std::size_t> last_bwd(static_cast<std::size_t>(s.num_stages()), acts.size());
    for (std::size_t i = 0; i < acts.size(); ++i)
      for (int j = 0; j < acts[i].size(); ++j)  // an F&B pair's ops count as PyTorch's sub-actions do
        if (acts[i].op(j).kind == OpKind::B || acts[i].op(j).kind == OpKind::W) last_bwd[static_cast<std::size_t>(acts[i].op(j).stage)] = i;
    // How many distinct stages the rank computes from each action on: the scan for the next three
    // stops there (without it, a rank left with fewer would scan to its end at every action).
    std::vector<std::size_t> distinct_after(acts.size() + 1, 0);
    {
      std::set<int> seen;
      for (std::size_t i = acts.size(); i-- > 0;) {
        for (int j = 0; j < acts[i].size(); ++j) seen.insert(acts[i].op(j).stage);
        distinct_after[i] = seen.size();
      }
    }
    std::set<int> active;
    for (std::size_t i = 0; i < acts.size(); ++i) {
      std::vector<int> next_n;
      const std::size_t want = std::min(kMaxActiveStages, distinct_after[i]);
      for (std::size_t j = i; j < acts.size() && next_n.size() < want; ++j)
        for (int q = 0; q < acts[j].size() && next_n.size() < want; ++q)
          if (std::find(next_n.begin(), next_n.end(), acts[j].op(q).stage) == next_n.end()) next_n.push_back(acts[j].op(q).stage);
      for (auto it = active.begin(); it != active.end();) {
        if (std::find(next_n.begin(), next_n.end(), *it) == next_n.end()) {
          out.push_back(Item{CommKind::Reshard, *it});
          it = active.erase(it);
        } else {
          ++it;
        }
      }
      for (int st : next_n)
        if (active.insert(st).second) out.push_back(Item{CommKind::Unshard, st});
      out.push_back(Item{});
      for (int j = 0; j < acts[i].size(); ++j) {
        const Op& op = acts[i].op(j);
        if ((op.kind == OpKind::B || op.kind == OpKind::W) && last_bwd[static_cast<std::size_t>(op.stage)] == i)
          out.push_back(Item{CommKind::ReduceGrad, op.stage});
      }
    }
    for (int st : active) out.push_back(Item{CommKind::Reshard, st});
  }
  std::vector<std::size_t> next(static_cast<std::size_t>(P), 0);   // compute actions placed
  std::vector<std::size_t> item(static_cast<std::size_t>(P), 0);   // items placed
  // The input of `op` is on rank r: its receive was placed there, or its producer ran there.
  auto ready = [&](int r, const Op& op) {
    const std::set<Placed>& have = placed[static_cast<std::size_t>(r)];
    if (op.kind == OpKind::F) {
      if (s.is_first_stage(op.stage)) return true;
      return have.count({kRecvF, op.stage, op.microbatch}) > 0 || have.count({kF, op.stage - 1, op.microbatch}) > 0;
    }
    if (op.kind == OpKind::B || op.kind == OpKind::I) {
      if (s.is_last_stage(op.stage)) return true;
      return have.count({kRecvB, op.stage, op.microbatch}) > 0 || have.count({kI, op.stage + 1, op.microbatch}) > 0 ||
             have.count({kB, op.stage + 1, op.microbatch}) > 0;
    }
    return true;  // W: its own I ran on this rank
  };
  std::size_t left = 0;
  for (const auto& it : items) left += it.size();
  while (left > 0) {
    bool progress = false;
    for (int r = 0; r < P; ++r) {
      const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      std::size_t& k = item[static_cast<std::size_t>(r)];
      if (k == items[static_cast<std::size_t>(r)].size()) continue;
      const Item& it = items[static_cast<std::size_t>(r)][k];
      if (it.stage >= 0) {  // UNSHARD, REDUCE_GRAD or RESHARD: listed, and a round spent
        s.comm[static_cast<std::size_t>(r)].push_back(CommAction{it.extra, it.stage, -1, i, false});
        ++k;
        --left;
        progress = true;
        continue;
      }
      // An F&B pair (PyTorch's OVERLAP_F_B) waits until both of its ops' inputs are there, then
      // places each op's send after it in the pair's order.
      const Action& a = acts[i];
      bool all_ready = true;
      for (int j = 0; j < a.size(); ++j) all_ready = all_ready && ready(r, a.op(j));
      if (!all_ready) continue;
      ++k;
      ++i;
      --left;
      progress = true;
      for (int j = 0; j < a.size(); ++j) {
        const Op& op = a.op(j);
        placed[static_cast<std::size_t>(r)].insert({placed_kind(op.kind), op.stage, op.microbatch});
        // Its output crosses to another rank: the send here, after it; the receive on the consumer.
        int to = -1;
        CommKind send = CommKind::SendF, recv = CommKind::RecvF;
        if (op.kind == OpKind::F && !s.is_last_stage(op.stage) && rank_of(op.stage + 1) != r) {
          to = op.stage + 1;
        } else if ((op.kind == OpKind::B || op.kind == OpKind::I) && !s.is_first_stage(op.stage) && rank_of(op.stage - 1) != r) {
          to = op.stage - 1;
          send = CommKind::SendB;
          recv = CommKind::RecvB;
        }
        if (to < 0) continue;
        s.comm[static_cast<std::size_t>(r)].push_back(CommAction{send, op.stage, op.microbatch, i, false});
        const int dst = rank_of(to);
        s.comm[static_cast<std::size_t>(dst)].push_back(CommAction{recv, to, op.microbatch, next[static_cast<std::size_t>(dst)], false});
        placed[static_cast<std::size_t>(dst)].insert({recv == CommKind::RecvF ? kRecvF : kRecvB, to, op.microbatch});
      }
    }
    if (!progress) {
      for (int r = 0; r < P; ++r)
        if (item[static_cast<std::size_t>(r)] < items[static_cast<std::size_t>(r)].size())
          throw InputError(fmt::format("parallel.p2p_runtime torch: cannot place sends and receives for {}: rank {}'s action {} never gets "
                                       "its input (PyTorch's lowering stops there too)",
                                       s.family, r, format_action(s.ranks[static_cast<std::size_t>(r)][next[static_cast<std::size_t>(r)]])));
    }
  }
  s.comm_in_order = true;
  return s;
}

}  // namespace ppsim
