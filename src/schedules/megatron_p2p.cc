// Megatron-LM's p2p calls for 1F1B and interleaved 1F1B (megatron_p2p.h).
#include "schedules/megatron_p2p.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

Schedule with_megatron_p2p(Schedule s) {
  if (s.family != "1f1b" && s.family != "interleaved-1f1b")
    throw InputError(fmt::format("parallel.p2p_runtime megatron: defined for 1f1b and interleaved-1f1b, not {}", s.family));
  if (!s.comm.empty()) return s;  // an imported order keeps its own communication
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
          if (op.kind == OpKind::F && with_next(op)) out.push_back({CommKind::SendF, op.stage, op.microbatch, at});
          if (op.kind == OpKind::B && with_prev(op)) out.push_back({CommKind::SendB, op.stage, op.microbatch, at});
        }
      if (k < steps.size())
        for (std::size_t i = steps[k].first; i < steps[k].second; ++i) {
          const Op& op = acts[i].first;
          if (op.kind == OpKind::F && with_prev(op)) out.push_back({CommKind::RecvF, op.stage, op.microbatch, at});
          if (op.kind == OpKind::B && with_next(op)) out.push_back({CommKind::RecvB, op.stage, op.microbatch, at});
        }
    }
  }
  s.comm_waits = true;
  return s;
}

}  // namespace ppsim
