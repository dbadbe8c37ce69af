// DeepSpeed's pipeline engine: TrainSchedule's blocking p2p instructions (deepspeed_p2p.h).
#include "schedules/deepspeed_p2p.h"

#include <utility>

#include <fmt/format.h>

#include "core/error.h"

namespace ppsim {

namespace {

// TrainSchedule._step_to_micro_batch for stage `st` of P: the micro-batch of step t (possibly out
// of [0, M)) and whether the step is a forward. Even stages run forwards on even steps, odd
// stages on odd steps.
std::pair<int, bool> step_micro_batch(int t, int st, int P) {
  const bool even_t = t % 2 == 0, even_s = st % 2 == 0;
  if (even_t && even_s) return {t / 2 - st / 2, true};
  if (!even_t && !even_s) return {(t - 1) / 2 - st / 2, true};
  if (even_t && !even_s) return {t / 2 - P + (st + 1) / 2, false};
  return {(t - 1) / 2 - P + 1 + st / 2, false};
}

}  // namespace

Schedule with_deepspeed_p2p(Schedule s) {
  if (s.family != "1f1b" || s.num_pipes != 1 || s.chunks_per_rank != 1)
    throw InputError(fmt::format("parallel.p2p_runtime deepspeed: defined for 1f1b (DeepSpeed's TrainSchedule), not {}", s.family));
  if (!s.comm.empty()) return s;  // an imported order keeps its own communication
  const int P = s.pp, M = s.microbatches;
  auto valid = [&](int mb) { return mb >= 0 && mb < M; };
  s.comm.assign(static_cast<std::size_t>(P), {});
  for (int r = 0; r < P; ++r) {
    const int st = r;  // one chunk per rank: stage r on rank r
    const std::vector<Action>& acts = s.ranks[static_cast<std::size_t>(r)];
    std::vector<CommAction>& out = s.comm[static_cast<std::size_t>(r)];
    const bool prev = st > 0, next = st < P - 1;
    std::size_t pos = 0;  // actions computed so far
    auto call = [&](CommKind k, int mb) { out.push_back(CommAction{k, st, mb, pos, true}); };
    int prev_mb = -1;
    for (int t = 0; t < 2 * (M + P - 1); ++t) {
      const auto [mb, forward] = step_micro_batch(t, st, P);
      if (forward) {
        if (valid(prev_mb) && prev) call(CommKind::SendB, prev_mb);  // SendGrad
        if (valid(mb) && prev) call(CommKind::RecvF, mb);            // RecvActivation
      } else {
        if (valid(mb) && next) call(CommKind::RecvB, mb);            // RecvGrad
        if (valid(prev_mb) && next) call(CommKind::SendF, prev_mb);  // SendActivation
      }
      if (valid(mb)) {
        const OpKind kind = forward ? OpKind::F : OpKind::B;
        if (pos >= acts.size() || !(acts[pos] == Action::single(Op{kind, st, mb})))
          throw InternalError(fmt::format("deepspeed p2p: rank {}'s action {} is not TrainSchedule's {}{}", r, pos,
                                          forward ? 'F' : 'B', mb));
        ++pos;
      }
      prev_mb = mb;
    }
    if (pos != acts.size()) throw InternalError(fmt::format("deepspeed p2p: rank {} has actions past TrainSchedule's", r));
  }
  s.comm_waits = true;
  return s;
}

}  // namespace ppsim
