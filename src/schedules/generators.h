// One generator per family, each in its own file, written as named phases with closed-form
// counts. Each returns the per-rank action lists; constraints are checked by the registry.
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/schedule.h"
#include "schedules/registry.h"

namespace ppsim {

Schedule generate_gpipe(const ScheduleParams& p);
Schedule generate_1f1b(const ScheduleParams& p);
Schedule generate_interleaved_1f1b(const ScheduleParams& p);
Schedule generate_interleaved_1f1b_overlap(const ScheduleParams& p);
Schedule generate_zb_h1(const ScheduleParams& p);
Schedule generate_zb_h1_deferral(const ScheduleParams& p, const std::vector<int>& max_pending);
Schedule generate_zb_h2(const ScheduleParams& p);
Schedule generate_zbv(const ScheduleParams& p);
Schedule generate_chimera(const ScheduleParams& p);
Schedule generate_dualpipe(const ScheduleParams& p);
Schedule generate_dualpipev(const ScheduleParams& p);

// Appends actions to one rank's list, keeping per-stage F/backward counters and the FIFO of
// deferred weight-grads (DualPipe's WeightGradStore, ZB's pending W).
class RankEmitter {
 public:
  explicit RankEmitter(std::vector<Action>& out) : out_(out) {}
  void f(int stage, int mb) { out_.push_back(Action::single({OpKind::F, stage, mb})); }
  void b(int stage, int mb) { out_.push_back(Action::single({OpKind::B, stage, mb})); }
  // Input-grad now, weight-grad queued.
  void i(int stage, int mb) {
    out_.push_back(Action::single({OpKind::I, stage, mb}));
    pending_w_.push_back({OpKind::W, stage, mb});
  }
  // The oldest deferred weight-grad; false when none is pending.
  bool w() {
    if (pending_w_.empty()) return false;
    out_.push_back(Action::single(pending_w_.front()));
    pending_w_.pop_front();
    return true;
  }
  void fb(Op f, Op bwd) { out_.push_back(Action::pair(f, bwd)); }
  std::size_t pending_w() const { return pending_w_.size(); }

 private:
  std::vector<Action>& out_;
  std::deque<Op> pending_w_;
};

// An empty schedule of `family`: M micro-batches, `copies` copies of the parameters per rank; the
// generator sets its layout.
inline Schedule new_schedule(const char* family, const ScheduleParams& p, int copies = 1) {
  Schedule s;
  s.family = family;
  s.microbatches = p.microbatches;
  s.parameter_copies = copies;
  return s;
}

// A schedule of one stage per rank (linear layout): `rank(r, e)` emits rank r's actions through
// its emitter; `ops_per_mb` actions per micro-batch is the reserve hint.
template <class RankOrder>
Schedule linear_schedule(const char* family, const ScheduleParams& p, std::size_t ops_per_mb, RankOrder&& rank) {
  Schedule s = new_schedule(family, p);
  layout_linear(s, p.pp, 1);
  for (int r = 0; r < p.pp; ++r) {
    s.ranks[r].reserve(ops_per_mb * static_cast<std::size_t>(p.microbatches));
    RankEmitter e(s.ranks[r]);
    rank(r, e);
  }
  return s;
}

// The eight DualPipe phases for one rank; shared by DualPipe and DualPipeV.
struct DualPipeRankPlan {
  int stage[2] = {0, 0};       // near, far
  int h = 0;                   // DualPipe: min(r, P-1-r); DualPipeV: r
  int half_ranks = 0;          // DualPipe: P/2; DualPipeV: P
  int half_microbatches = 0;   // micro-batches per pipe (DualPipe: M/2; DualPipeV: M)
  bool is_middle = false;      // first main-phase pair runs without overlap
};
void emit_dualpipe_phases(std::vector<Action>& out, const DualPipeRankPlan& plan);

}  // namespace ppsim
