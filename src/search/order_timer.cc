// The local search's timer (order_timer.h): the engine's rules without its event queue.
#include "search/order_timer.h"

#include <algorithm>

namespace ppsim {

bool OrderTimer::exact_for(const SimCosts& c) {
  if (!c.moe.empty() || !c.rank_device.empty() || !c.rank_kind_scale.empty() || c.link.blocking || !c.rank_node.empty())
    return false;
  for (const SliceCosts& sc : c.slice)
    if (c.link.occupancy(sc.act_bytes) != 0 || c.link.occupancy(sc.grad_bytes) != 0) return false;
  return true;
}

OrderTimer::OrderTimer(const Schedule& layout, const SimCosts& c)
    : P_(layout.pp),
      S_(layout.num_stages()),
      mbp_(layout.mb_per_pipe()),
      stage_rank_(layout.stage_rank),
      slice_(layout.slice),
      slices_(c.slice) {
  first_.resize(S_);
  last_.resize(S_);
  hop_fwd_.assign(S_, 0);
  hop_bwd_.assign(S_, 0);
  for (int st = 0; st < S_; ++st) {
    first_[st] = layout.is_first_stage(st) ? 1 : 0;
    last_[st] = layout.is_last_stage(st) ? 1 : 0;
    if (!last_[st] && stage_rank_[st] != stage_rank_[st + 1]) hop_fwd_[st] = c.link.latency;
    if (!first_[st] && stage_rank_[st] != stage_rank_[st - 1]) hop_bwd_[st] = c.link.latency;
  }
  op_dur_.resize(slices_.size() * 4);
  for (std::size_t sl = 0; sl < slices_.size(); ++sl)
    for (OpKind k : {OpKind::F, OpKind::I, OpKind::W, OpKind::B})
      op_dur_[sl * 4 + static_cast<std::size_t>(k)] = op_duration(slices_[sl], k);
}

Time OrderTimer::action_duration(const Action& a) const {
  const int sf = slice_[a.first.stage];
  if (a.overlapped) return pair_duration(slices_[sf], slices_[slice_[a.second.stage]], a.second.kind);
  return op_dur_[static_cast<std::size_t>(sf) * 4 + static_cast<std::size_t>(a.first.kind)];
}

OrderTimer::Result OrderTimer::run(const Schedule& s) {
  const std::size_t keys = static_cast<std::size_t>(S_) * mbp_;
  f_done_.assign(keys, kNever);
  f_avail_.assign(keys, kNever);
  bwd_done_.assign(keys, kNever);
  bwd_avail_.assign(keys, kNever);
  next_.assign(P_, 0);
  auto key = [&](const Op& op) { return static_cast<std::size_t>(op.microbatch) * S_ + op.stage; };
  auto ready = [&](const Op& op) -> Time {  // when op's inputs are on its rank; kNever while unknown
    const std::size_t k = key(op);
    switch (op.kind) {
      case OpKind::F:
        return first_[op.stage] ? 0 : f_avail_[k - 1];
      case OpKind::B:
      case OpKind::I: {
        const Time own = f_done_[k];
        if (last_[op.stage] || own == kNever) return own;
        const Time g = bwd_avail_[k + 1];
        return g == kNever ? kNever : std::max(own, g);
      }
      case OpKind::W:
        return bwd_done_[k];
    }
    return kNever;
  };
  Result res;
  Time first = kNever, last = 0;
  std::vector<Time> free(P_, 0), own_first(P_, kNever);
  std::vector<double> act(P_, 0);  // held_peak_chunks's count (search.h)
  bool moved = true;
  while (moved) {
    moved = false;
    for (int r = 0; r < P_; ++r) {
      const std::vector<Action>& acts = s.ranks[r];
      while (next_[r] < acts.size()) {
        const Action& a = acts[next_[r]];
        Time t = ready(a.first);
        if (t == kNever) break;
        if (a.overlapped) {
          const Time t2 = ready(a.second);
          if (t2 == kNever) break;
          t = std::max(t, t2);
        }
        const Time start = std::max(free[r], t);
        const Time end = start + action_duration(a);
        if (next_[r] == 0) {
          first = std::min(first, start);
          own_first[r] = start;
        }
        for (int i = 0; i < a.size(); ++i)
          if (a.op(i).kind == OpKind::F) res.peak = std::max(res.peak, act[r] += 1);
        for (int i = 0; i < a.size(); ++i) {
          const Op& op = a.op(i);
          const std::size_t k = key(op);
          switch (op.kind) {
            case OpKind::F:
              f_done_[k] = end;
              f_avail_[k] = end + hop_fwd_[op.stage];
              break;
            case OpKind::B:
            case OpKind::I:
              bwd_done_[k] = end;
              bwd_avail_[k] = end + hop_bwd_[op.stage];
              act[r] -= op.kind == OpKind::B ? 1 : 1 - slices_[slice_[op.stage]].w_hold;
              break;
            case OpKind::W:
              act[r] -= slices_[slice_[op.stage]].w_hold;
              break;
          }
        }
        free[r] = end;
        ++next_[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < P_; ++r) {
    if (next_[r] != s.ranks[r].size()) return res;  // ok = false: a deadlock
    res.end_sum += free[r];
    res.end_sq += static_cast<double>(free[r]) * static_cast<double>(free[r]);
    last = std::max(last, free[r]);
    const Time span = own_first[r] == kNever ? 0 : free[r] - own_first[r];
    res.max_span = std::max(res.max_span, span);
    res.span_sum += span;
  }
  res.ok = true;
  res.makespan = first == kNever ? 0 : last - first;
  return res;
}

}  // namespace ppsim
