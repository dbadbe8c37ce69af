// Megatron-LM's p2p calls for 1F1B and interleaved 1F1B (megatron_p2p.h).
#include "schedules/megatron_p2p.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

namespace {

// forward_backward_pipelining_without_interleaving on rank r: w = min(P-1-r, M) warm-up
// forwards, each between recv_forward and send_forward (two calls); then recv_forward; M - w
// steady iterations of F, send_forward_recv_backward, B, send_backward_recv_forward (the last:
// send_backward); w cool-down backwards between recv_backward and send_backward. Calls with
// nothing to do (the first stage's receives of its input, the last stage's sends) are not made.
// False when the rank's actions are not in that order (then the caller pairs them generically).
bool megatron_1f1b_calls(const Schedule& s, int r, std::vector<CommAction>& out) {
  const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
  const int P = s.pp, M = s.microbatches, stage = r;
  const bool prev = r > 0, next = r < P - 1;
  const int w = std::min(P - 1 - r, M), rem = M - w;
  std::size_t pos = 0;
  bool ok = true;
  auto compute = [&](OpKind kind, int mb) {
    ok = ok && pos < acts.size() && acts[pos] == Action::single(Op{kind, stage, mb});
    ++pos;
  };
  auto call = [&](std::initializer_list<std::pair<bool, CommAction>> ops) {
    bool first = true;
    for (const auto& [made, c] : ops) {
      if (!made) continue;
      out.push_back(c);
      out.back().after = pos;
      out.back().new_call = first;
      first = false;
    }
  };
  auto op = [&](CommKind k, int mb) { return CommAction{k, stage, mb, 0, false}; };
  int f = 0, b = 0;
  for (int i = 0; i < w; ++i, ++f) {
    call({{prev, op(CommKind::RecvF, f)}});
    compute(OpKind::F, f);
    call({{next, op(CommKind::SendF, f)}});
  }
  if (rem > 0) call({{prev, op(CommKind::RecvF, f)}});
  for (int k = 0; k < rem; ++k, ++f, ++b) {
    compute(OpKind::F, f);
    call({{next, op(CommKind::SendF, f)}, {next, op(CommKind::RecvB, b)}});
    compute(OpKind::B, b);
    if (k == rem - 1) call({{prev, op(CommKind::SendB, b)}});
    else call({{prev, op(CommKind::SendB, b)}, {prev, op(CommKind::RecvF, f + 1)}});
  }
  for (int i = 0; i < w; ++i, ++b) {
    call({{next, op(CommKind::RecvB, b)}});
    compute(OpKind::B, b);
    call({{prev, op(CommKind::SendB, b)}});
  }
  return ok && pos == acts.size();
}

}  // namespace

Schedule with_megatron_p2p(Schedule s) {
  if (s.family != "1f1b" && s.family != "interleaved-1f1b")
    throw InputError(fmt::format("parallel.p2p_runtime megatron: defined for 1f1b and interleaved-1f1b, not {}", s.family));
  if (!s.comm.empty()) return s;  // an imported order keeps its own communication
  if (s.family == "1f1b" && s.num_pipes == 1 && s.chunks_per_rank == 1) {
    std::vector<std::vector<CommAction>> calls(static_cast<std::size_t>(s.pp));
    bool all = true;
    for (int r = 0; r < s.pp && all; ++r) all = megatron_1f1b_calls(s, r, calls[static_cast<std::size_t>(r)]);
    if (all) {
      s.comm = std::move(calls);
      s.comm_waits = true;
      return s;
    }
  }
  const bool pairs = s.chunks_per_rank > 1;
  // A transfer exists between two stages on different ranks: with the previous stage (an F's
  // input, a B's output) or with the next (an F's output, a B's input).
  auto with_prev = [&](const Op& op) { return !s.is_first_stage(op.stage) && s.stage_rank[op.stage - 1] != s.stage_rank[op.stage]; };
  auto with_next = [&](const Op& op) { return !s.is_last_stage(op.stage) && s.stage_rank[op.stage + 1] != s.stage_rank[op.stage]; };
  s.comm.assign(static_cast<std::size_t>(s.pp), {});
  for (int r = 0; r < s.pp; ++r) {
    const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
    std::vector<CommAction>& out = s.comm[static_cast<std::size_t>(r)];
    // Steps: [begin, end) ranges of actions.
    std::vector<std::pair<std::size_t, std::size_t>> steps;
    for (std::size_t i = 0; i < acts.size();) {
      const bool pair = pairs && i + 1 < acts.size() && acts[i].first.kind == OpKind::F && acts[i + 1].first.kind == OpKind::B;
      steps.emplace_back(i, i + (pair ? 2 : 1));
      i += pair ? 2 : 1;
    }
    // The call before step k (k = steps.size(): after the last) at `after` = its first action.
    for (std::size_t k = 0; k <= steps.size(); ++k) {
      const std::size_t at = k < steps.size() ? steps[k].first : acts.size();
      if (k > 0)
        for (std::size_t i = steps[k - 1].first; i < steps[k - 1].second; ++i) {
          const Op& op = acts[i].first;
          if (op.kind == OpKind::F && with_next(op)) out.push_back({CommKind::SendF, op.stage, op.microbatch, at, false});
          if (op.kind == OpKind::B && with_prev(op)) out.push_back({CommKind::SendB, op.stage, op.microbatch, at, false});
        }
      if (k < steps.size())
        for (std::size_t i = steps[k].first; i < steps[k].second; ++i) {
          const Op& op = acts[i].first;
          if (op.kind == OpKind::F && with_prev(op)) out.push_back({CommKind::RecvF, op.stage, op.microbatch, at, false});
          if (op.kind == OpKind::B && with_next(op)) out.push_back({CommKind::RecvB, op.stage, op.microbatch, at, false});
        }
    }
  }
  s.comm_waits = true;
  return s;
}

}  // namespace ppsim
