#include "sim/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/error.h"
#include "sim/event_queue.h"
#include "sim/overlap.h"

namespace ppsim {

namespace {

enum EventKind : std::int32_t { kActionEnd = 0, kWake = 1 };

class Engine {
 public:
  Engine(const Schedule& s, const SimCosts& c, const SimOptions& opt)
      : s_(s), c_(c), opt_(opt), P_(s.pp), S_(s.num_stages()), mbp_(s.mb_per_pipe()), q_(s.pp) {
    PPSIM_CHECK(c.moe.empty() || c.moe.size() == c.slice.size(), "overlap costs cover {} slices, op costs {}",
                c.moe.size(), c.slice.size());
    for (int st = 0; st < S_; ++st)
      PPSIM_CHECK(s.slice[st] >= 0 && s.slice[st] < static_cast<int>(c.slice.size()),
                  "stage {} computes slice {}, but costs cover {} slices", st, s.slice[st], c.slice.size());
    const std::size_t keys = static_cast<std::size_t>(S_) * mbp_;
    slot_.assign(keys, Slot{});
    first_.resize(S_);
    last_.resize(S_);
    for (int st = 0; st < S_; ++st) {
      first_[st] = s.is_first_stage(st) ? 1 : 0;
      last_[st] = s.is_last_stage(st) ? 1 : 0;
    }
    // One link id per (src, dst) rank pair that some stage boundary uses, each direction.
    std::map<std::pair<int, int>, int> ids;
    auto link_id = [&](int a, int b) {
      auto [it, fresh] = ids.emplace(std::make_pair(a, b), static_cast<int>(ids.size()));
      return it->second;
    };
    fwd_link_.assign(S_, -1);
    bwd_link_.assign(S_, -1);
    for (int st = 0; st < S_; ++st) {
      if (!s.is_last_stage(st) && s.stage_rank[st] != s.stage_rank[st + 1])
        fwd_link_[st] = link_id(s.stage_rank[st], s.stage_rank[st + 1]);
      if (!s.is_first_stage(st) && s.stage_rank[st] != s.stage_rank[st - 1])
        bwd_link_[st] = link_id(s.stage_rank[st], s.stage_rank[st - 1]);
    }
    link_free_.assign(ids.size(), 0);
    // Explicit communication (an imported file's SEND/RECV actions): a transfer starts when its
    // producer has ended and both its send and its receive are posted (a rank posts its comm
    // actions when it reaches them in its list). A listed one is unposted until then; an absent
    // one counts as posted.
    if (!s.comm.empty()) {
      PPSIM_CHECK(static_cast<int>(s.comm.size()) == P_, "comm lists for {} ranks, schedule has {}", s.comm.size(), P_);
      for (int r = 0; r < P_; ++r)
        for (const CommAction& c : s.comm[r]) {
          if (c.kind > CommKind::RecvB) continue;  // FSDP actions: not modelled
          if (!explicit_) post_.assign(keys, Posts{});
          explicit_ = true;
          post_slot(c) = kNever;
        }
    }
    rank_.resize(P_);
    for (int r = 0; r < P_; ++r) {
      rank_[r].next = s.ranks[r].data();
      rank_[r].end = s.ranks[r].data() + s.ranks[r].size();
    }
    if (explicit_ && s.comm_in_order) {
      for (int r = 0; r < P_; ++r) {
        auto& gates = rank_[r].gates;
        for (const CommAction& c : s.comm[r])
          if (c.kind <= CommKind::RecvB && c.waited_by != CommAction::kNotWaited) {
            const TransferOf t = transfer_of(c);
            const std::size_t k = key(t.producer);
            gates.emplace_back(c.waited_by, t.fwd ? &slot_[k].f_avail : &slot_[k].bwd_avail);
          }
        std::stable_sort(gates.begin(), gates.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      }
    }
    // Single ops' durations per (slice, kind), so that starting one is a table lookup.
    if (c.moe.empty()) {
      op_dur_.resize(c.slice.size() * 4);
      for (std::size_t sl = 0; sl < c.slice.size(); ++sl)
        for (OpKind k : {OpKind::F, OpKind::I, OpKind::W, OpKind::B})
          op_dur_[sl * 4 + static_cast<std::size_t>(k)] = op_duration(c.slice[sl], k);
    }
    res_.ranks.resize(P_);
    PPSIM_CHECK(c.action_time.empty() || c.action_time.size() == static_cast<std::size_t>(P_),
                "action_time has {} ranks, schedule has {}", c.action_time.size(), P_);
    PPSIM_CHECK(c.rank_kind_scale.empty() || c.rank_kind_scale.size() == static_cast<std::size_t>(3 * P_),
                "rank_kind_scale has {} entries for {} ranks (3 per rank)", c.rank_kind_scale.size(), P_);
    for (double x : c.rank_kind_scale) PPSIM_CHECK(x > 0 && std::isfinite(x), "rank_kind_scale entry {} <= 0", x);
    // Devices shared by several ranks: those ranks' actions are re-timed as they come and go.
    if (!c.rank_device.empty()) {
      PPSIM_CHECK(static_cast<int>(c.rank_device.size()) == P_, "rank_device has {} entries for {} ranks",
                  c.rank_device.size(), P_);
      PPSIM_CHECK(c.share_slowdown >= 1.0, "share_slowdown {} < 1", c.share_slowdown);
      PPSIM_CHECK(c.share_copies >= 1, "share_copies {} < 1", c.share_copies);
      PPSIM_CHECK(c.share_by_kind.empty() || c.share_by_kind.size() == 9, "share_by_kind has {} entries, not 9",
                  c.share_by_kind.size());
      PPSIM_CHECK(c.share_aligned.empty() || c.share_aligned.size() == 3, "share_aligned has {} entries, not 3",
                  c.share_aligned.size());
      for (double x : c.share_aligned) PPSIM_CHECK(x >= 1.0 && std::isfinite(x), "share_aligned entry {} < 1", x);
      for (double x : c.share_by_kind) PPSIM_CHECK(x >= 1.0 && std::isfinite(x), "share_by_kind entry {} < 1", x);
      std::map<int, int> dev_index;
      for (int d : c.rank_device) dev_index.emplace(d, static_cast<int>(dev_index.size()));
      if (static_cast<int>(dev_index.size()) < P_ || c.share_copies > 1) {
        device_of_.resize(P_);
        for (int r = 0; r < P_; ++r) device_of_[r] = dev_index.at(c.rank_device[r]);
        devices_.resize(dev_index.size());
      }
    }
    if (opt.record_timeline) {
      res_.timeline.pp = P_;
      res_.timeline.scale = c.scale;
      res_.timeline.activations.resize(P_);
    }
  }

  SimResult run() {
    for (int r = 0; r < P_; ++r) q_.set(r, 0, kWake);
    if (explicit_)
      for (int r = 0; r < P_; ++r) post_comm(r, 0);
    pending_wakes_.clear();  // every rank looks at time 0 anyway
    Event e;
    while (q_.pop(e)) {
      if (e.kind == kActionEnd) on_end(e.rank, e.t);
      else try_start(e.rank, e.t);
      // The ranks its transfers woke: an ended action's idle receivers in send order, or the
      // partner a rank's next call met (CommAction::new_call).
      drain_wakes(e.t);
    }
    for (int r = 0; r < P_; ++r) {
      const auto& st = rank_[r];
      if (st.next != st.end)
        throw InputError(fmt::format("deadlock: rank {} cannot start {} (its inputs never arrive; {} of {} actions ran)",
                                     r, format_action(*st.next), st.next - s_.ranks[r].data(), s_.ranks[r].size()));
    }
    res_.start = kNever;
    res_.end = 0;
    for (const auto& rs : res_.ranks) {
      if (rs.first_start == kNever) continue;
      res_.start = std::min(res_.start, rs.first_start);
      res_.end = std::max(res_.end, rs.last_end);
    }
    if (res_.start == kNever) res_.start = 0;
    if (opt_.record_timeline && explicit_) {
      res_.comm_resident.resize(P_);
      for (const Resident& x : resident_) {
        const Time arrival = x.fwd ? slot_[x.key].f_avail : slot_[x.key].bwd_avail;
        if (arrival != kNever) res_.comm_resident[x.rank].emplace_back(x.posted, std::max(x.posted, arrival));
      }
    }
    res_.events = q_.scheduled();
    for (const auto& [k, cs] : pair_kinds_)
      res_.pair_kinds[fmt::format("F{}&{}{}", k >> 32, op_kind_char(static_cast<OpKind>(k & 3)), (k >> 2) & 0x3fffffff)] = cs;
    if (opt_.record_timeline) {
      res_.timeline.start = res_.start;
      res_.timeline.end = res_.end;
    }
    return std::move(res_);
  }

 private:
  struct RankState {
    const Action* next = nullptr;  // the next action to run (== end when all ran)
    const Action* end = nullptr;
    bool running = false;
    Time blocked_until = 0;
    int activations = 0;
    Time run_start = 0;          // of the running action
    Time run_exposed = 0;        // its exposed communication (overlap model)
    std::size_t interval = 0;    // its Interval in the timeline, when recorded
    double work_left = 0;        // shared device: its duration alone still to run, as of the device's `since`
    double factor = 1;           // shared device: how many times slower than alone it runs now
    std::array<double, 3> mix{};  // shared device, by kind: its F, I and W shares of its duration alone
    // Shared device, by kind: how hard it presses on the device beside it, as its ops would at their
    // own pace: their durations alone over its own (an F&B pair that saves time: above 1; one op: 1).
    double load = 1;
    // Shared device: its time alone, and its kind when it is one op (OpKind::B for a B; an F&B
    // pair: none), for SimCosts::share_aligned.
    double alone = 0;
    std::optional<OpKind> single;
    std::size_t comm_next = 0;    // explicit communication: its next comm action to post
    // Schedule::comm_in_order: the arrivals of its last posted batch's transfers, and when it was posted.
    std::vector<const Time*> batch;
    Time batch_at = 0;
    // Schedule::comm_in_order: (compute index, transfer arrival) its runtime waits on before that
    // compute action (CommAction::waited_by), by index; the next one not yet met.
    std::vector<std::pair<std::size_t, const Time*>> gates;
    std::size_t gate_next = 0;
    std::vector<Time> ended;          // Schedule::comm_in_order: when each of its actions ended
    std::vector<const Time*> waits;  // Schedule::comm_waits: arrival times of its posted call's transfers
  };
  // A device that several ranks share: its running ranks and when their work was last updated.
  struct Device {
    std::vector<int> running;
    Time since = 0;
  };

  // Micro-batch major: a micro-batch's consecutive stages are neighbours in memory, and ops that
  // run close in time touch nearby entries.
  std::size_t key(const Op& op) const { return static_cast<std::size_t>(op.microbatch) * S_ + op.stage; }

  // When the inputs of `op` are on its rank; kNever while unknown.
  Time ready_time(const Op& op) const {
    const std::size_t k = key(op);
    switch (op.kind) {
      case OpKind::F:
        return first_[op.stage] ? 0 : slot_[k - 1].f_avail;
      case OpKind::B:
      case OpKind::I: {
        const Time own = slot_[k].f_done;
        if (last_[op.stage] || own == kNever) return own;
        return std::max(own, slot_[k + 1].bwd_avail);
      }
      case OpKind::W:
        return slot_[k].bwd_done;
    }
    return kNever;
  }

  // The action's duration and the part of it the compute stream waits on its own
  // communication (overlap model only; cached per action shape).
  ActionCost cost(const Action& a) {
    const int sf = s_.slice[a.first.stage];
    const int sb = a.overlapped ? s_.slice[a.second.stage] : sf;
    if (c_.moe.empty()) {
      if (a.overlapped) return {pair_duration(c_.slice[sf], c_.slice[sb], a.second.kind), 0};
      return {op_dur_[static_cast<std::size_t>(sf) * 4 + static_cast<std::size_t>(a.first.kind)], 0};
    }
    const std::uint64_t k =
        ((static_cast<std::uint64_t>(sf) * 65536u + static_cast<std::uint64_t>(sb)) * 16u +
         static_cast<std::uint64_t>(a.first.kind) * 4u + (a.overlapped ? static_cast<std::uint64_t>(a.second.kind) : 0u)) *
            2u +
        (a.overlapped ? 1u : 0u);
    auto it = cache_.find(k);
    if (it != cache_.end()) return it->second;
    const ActionCost ac = overlap_action_cost(a, c_.moe[sf], c_.moe[sb], c_.comm_sm_fraction);
    cache_.emplace(k, ac);
    return ac;
  }

  void try_start(int r, Time now) {
    RankState& st = rank_[r];
    if (st.running || now < st.blocked_until) return;
    while (!st.waits.empty()) {  // a blocking call: wait until each of its transfers has arrived
      Time all = 0;
      for (const Time* t : st.waits) {
        if (*t == kNever) return;  // not started: a partner has not posted; its issue wakes this rank
        all = std::max(all, *t);
      }
      all += c_.call_restart;  // then the host restarts the drained GPU (SimCosts::call_restart)
      if (all > now) {
        if (q_.pending(r) > all) q_.set(r, all, kWake);
        return;
      }
      st.waits.clear();
      post_comm(r, now);  // the next call at this position (CommAction::new_call), if any
    }
    if (st.next == st.end) return;
    const Action& a = *st.next;
    Time ready = ready_time(a.first);
    if (ready == kNever) return;  // its producer has not run: the transfer will look again
    if (a.overlapped) {
      const Time t = ready_time(a.second);
      if (t == kNever) return;
      ready = std::max(ready, t);
    }
    // Sends its runtime waits on before this action (Schedule::comm_in_order, CommAction::waited_by).
    const std::size_t index = static_cast<std::size_t>(st.next - s_.ranks[r].data());
    std::size_t g = st.gate_next;
    for (; g < st.gates.size() && st.gates[g].first <= index; ++g) {
      if (*st.gates[g].second == kNever) return;  // not issued yet: its issue wakes this rank
      ready = std::max(ready, *st.gates[g].second);
    }
    st.gate_next = g;  // all met by `ready`, when this action starts
    if (ready > now) {  // inputs in flight
      if (!device_of_.empty()) {  // a shared device's rate depends on what runs then: wake when they land
        if (q_.pending(r) > ready) q_.set(r, ready, kWake);
        return;
      }
      // Every input is known, the rank is idle and unblocked: nothing can change when this action
      // starts, so it is committed now to start when the last input lands (no wake event).
      now = ready;
    }
    const ActionCost ac = cost(a);
    Time dur = ac.duration;
    if (!c_.action_time.empty()) {  // a replay: the action's own measured time
      const std::vector<Time>& own = c_.action_time[static_cast<std::size_t>(r)];
      if (index < own.size() && own[index] >= 0) dur = own[index];
    }
    if (!c_.rank_kind_scale.empty()) {  // this rank's speed, by the action's mix of op kinds
      const auto mix = mix_of(a);
      double f = 0;
      for (std::size_t k = 0; k < 3; ++k) f += mix[k] * c_.rank_kind_scale[3 * static_cast<std::size_t>(r) + k];
      dur = static_cast<Time>(std::llround(static_cast<double>(dur) * f));
    }
    st.running = true;
    st.run_start = now;
    st.run_exposed = ac.exposed_comm;
    if (device_of_.empty()) {
      q_.set(r, now + dur, kActionEnd);  // replaces a pending wake, which could only look again
    } else {
      Device& d = devices_[device_of_[r]];
      advance(d, now);
      st.work_left = static_cast<double>(dur);
      st.load = load_of(a, ac.duration);
      st.alone = static_cast<double>(dur);
      st.single = a.overlapped || a.size() != 1 ? std::nullopt : std::optional<OpKind>(a.op(0).kind);
      if (!c_.share_by_kind.empty() || !c_.share_aligned.empty()) st.mix = mix_of(a);
      d.running.push_back(r);
      retime(d, now);
    }
    RankStats& rs = res_.ranks[r];
    rs.exposed_comm += ac.exposed_comm;
    if (rs.first_start == kNever) rs.first_start = now;
    for (int i = 0; i < a.size(); ++i)
      if (a.op(i).kind == OpKind::F) {
        ++st.activations;
        rs.peak_activations = std::max(rs.peak_activations, st.activations);
        sample(r, now, st.activations);
      }
    if (a.overlapped) {
      ++res_.pairs;
      res_.pair_time_sum += dur;
      auto& kind = pair_kinds_[(static_cast<std::uint64_t>(s_.slice[a.first.stage]) << 32) |
                               (static_cast<std::uint64_t>(s_.slice[a.second.stage]) << 2) |
                               static_cast<std::uint64_t>(a.second.kind)];
      ++kind.first;
      kind.second += dur;
    }
    res_.ops += static_cast<std::uint64_t>(a.size());
    if (opt_.record_timeline) {
      st.interval = res_.timeline.intervals.size();
      Interval iv;
      iv.rank = r;
      iv.start = now;
      iv.end = now + dur;
      iv.action = a;
      res_.timeline.intervals.push_back(iv);
    }
  }

  // Sends `bytes` from rank `src` to `dst` over link `link` at `now`; returns the arrival time.
  Time transfer(int link, int src, int dst, Time now, Bytes bytes, const Op& producer) {
    const LinkModel& lm = c_.link_between(src, dst);
    const Time start = std::max(now, link_free_[link]);
    const Time busy = lm.occupancy(bytes);
    link_free_[link] = start + busy;
    const Time arrival = start + busy + lm.latency;
    // An idle receiver looks at its next action once this action's outputs are all recorded
    // (and sets a wake for when its inputs land); a busy one does so when it finishes.
    if (!rank_[dst].running) pending_wakes_.push_back(dst);
    if (s_.comm_waits && !rank_[src].running) pending_wakes_.push_back(src);  // a sender waiting on its call
    if (s_.comm_in_order) {  // both ranks' next comm actions may follow this one now
      fifo_wakes_.push_back(src);
      fifo_wakes_.push_back(dst);
      if (!rank_[src].gates.empty() && !rank_[src].running) pending_wakes_.push_back(src);  // a sender waiting on its send
    }
    if (opt_.record_timeline) res_.timeline.transfers.push_back(Transfer{src, dst, start, arrival, producer, bytes});
    return arrival;
  }

  void on_end(int r, Time now) {
    RankState& st = rank_[r];
    const Action& a = *st.next;
    st.running = false;
    ++st.next;
    if (s_.comm_in_order) st.ended.push_back(now);
    res_.ranks[r].last_end = now;
    res_.ranks[r].busy += now - st.run_start - st.run_exposed;
    if (opt_.record_timeline) res_.timeline.intervals[st.interval].end = now;
    if (!device_of_.empty()) {
      Device& d = devices_[device_of_[r]];
      advance(d, now);
      d.running.erase(std::find(d.running.begin(), d.running.end(), r));
      retime(d, now);
    }
    Time last_arrival = now;
    for (int i = 0; i < a.size(); ++i) {
      const Op& op = a.op(i);
      const std::size_t k = key(op);
      const SliceCosts& sc = c_.slice[s_.slice[op.stage]];
      switch (op.kind) {
        case OpKind::F:
          slot_[k].f_done = now;
          if (!last_[op.stage]) {
            const int link = fwd_link_[op.stage];
            if (link >= 0 && explicit_) issue_fwd(k, op);
            else slot_[k].f_avail = link < 0 ? now : transfer(link, r, s_.stage_rank[op.stage + 1], now, sc.act_bytes, op);
            if (slot_[k].f_avail != kNever) last_arrival = std::max(last_arrival, slot_[k].f_avail);
          }
          break;
        case OpKind::B:
        case OpKind::I:
          slot_[k].bwd_done = now;
          if (!first_[op.stage]) {
            const int link = bwd_link_[op.stage];
            if (link >= 0 && explicit_) {
              post_[k].bwd_kind = op.kind;
              issue_bwd(k, op.stage, op.microbatch);
            }
            else slot_[k].bwd_avail = link < 0 ? now : transfer(link, r, s_.stage_rank[op.stage - 1], now, sc.grad_bytes, op);
            if (slot_[k].bwd_avail != kNever) last_arrival = std::max(last_arrival, slot_[k].bwd_avail);
          }
          if (op.kind == OpKind::B) free_activation(r, now);
          break;
        case OpKind::W:
          free_activation(r, now);
          break;
      }
    }
    if (explicit_) post_comm(r, now);
    // SimCosts::action_gap: the rank's next action starts no earlier than this.
    const Time gap_end = c_.action_gap > 0 && st.next != st.end ? now + c_.action_gap : now;
    if (c_.link.blocking && last_arrival > now) {
      st.blocked_until = std::max(last_arrival, gap_end);
      res_.ranks[r].exposed_comm += last_arrival - now;
      q_.set(r, st.blocked_until, kWake);
    } else if (gap_end > now) {
      st.blocked_until = gap_end;
      q_.set(r, gap_end, kWake);
    } else {
      try_start(r, now);
    }
  }

  // Looks again at every rank a transfer issued since the last look woke; a rank that starts, or
  // posts its next blocking call (try_start), may issue transfers that wake more.
  void drain_wakes(Time now) {
    while (!pending_wakes_.empty() || !fifo_wakes_.empty()) {
      std::vector<int> fifo;
      fifo.swap(fifo_wakes_);
      for (int r : fifo) post_comm(r, now);
      std::vector<int> wakes;
      wakes.swap(pending_wakes_);
      for (int r : wakes) try_start(r, now);
    }
  }

  // Explicit communication. The transfer comm action c belongs to, by its producer's stage and
  // direction: SEND_F(s, m) and RECV_F(s+1, m) to the forward transfer of (s, m); SEND_B(s, m)
  // and RECV_B(s-1, m) to the backward transfer of (s, m).
  struct TransferOf {
    Op producer;  // the F of the transfer's slot: its stage and micro-batch
    bool fwd, send;
  };
  static TransferOf transfer_of(const CommAction& c) {
    switch (c.kind) {
      case CommKind::SendF: return {Op{OpKind::F, c.stage, c.microbatch}, true, true};
      case CommKind::RecvF: return {Op{OpKind::F, c.stage - 1, c.microbatch}, true, false};
      case CommKind::SendB: return {Op{OpKind::F, c.stage, c.microbatch}, false, true};
      default: return {Op{OpKind::F, c.stage + 1, c.microbatch}, false, false};
    }
  }
  // The post time of comm action c, in its transfer's slot.
  Time& post_slot(const CommAction& c) {
    const TransferOf t = transfer_of(c);
    Posts& p = post_[key(t.producer)];
    return t.fwd ? (t.send ? p.send_f : p.recv_f) : (t.send ? p.send_b : p.recv_b);
  }
  // Posts rank r's comm actions listed after its compute actions that have ended, at `now`;
  // a transfer whose producer has ended and both sides are posted starts now. With
  // Schedule::comm_waits the rank then waits for each of those transfers' arrival.
  void post_comm(int r, Time now) {
    if (s_.comm[r].empty()) return;
    RankState& st = rank_[r];
    const std::size_t done = static_cast<std::size_t>(st.next - s_.ranks[r].data());
    while (st.comm_next < s_.comm[r].size() && s_.comm[r][st.comm_next].after <= done) {
      // A call after one the rank still waits on is posted when that one completes (try_start).
      if (s_.comm_waits && s_.comm[r][st.comm_next].new_call && !st.waits.empty()) break;
      const CommAction& c = s_.comm[r][st.comm_next];
      Time at = now;
      bool joins = false;  // Schedule::comm_in_order: c joins the batch posted last
      if (s_.comm_in_order && c.kind <= CommKind::RecvB) {
        // One batch at a time in list order: after the compute listed before it and the batch
        // before it. Both are known here and neither is earlier than `now` would allow: compute
        // ends are past, and a transfer's arrival is known from when it is issued, which wakes
        // this rank (fifo_wakes_) at that event's time.
        const CommAction* prev = st.comm_next > 0 ? &s_.comm[r][st.comm_next - 1] : nullptr;
        joins = !c.new_call && prev != nullptr && prev->kind <= CommKind::RecvB && prev->after == c.after && !st.batch.empty();
        if (joins) {
          at = st.batch_at;
        } else {
          bool started = true;
          at = c.after == 0 ? 0 : st.ended[c.after - 1];
          for (const Time* p : st.batch) {
            started = started && *p != kNever;
            if (*p != kNever) at = std::max(at, *p);
          }
          if (!started) break;  // the batch before has not started
        }
      }
      ++st.comm_next;
      if (c.kind > CommKind::RecvB) continue;
      post_slot(c) = at;
      const TransferOf t = transfer_of(c);
      const std::size_t k = key(t.producer);
      if (opt_.record_timeline) resident_.push_back({r, at, k, t.fwd});
      if (s_.comm_in_order) {
        if (!joins) {
          st.batch.clear();
          st.batch_at = at;
        }
        st.batch.push_back(t.fwd ? &slot_[k].f_avail : &slot_[k].bwd_avail);
      }
      if (s_.comm_waits) st.waits.push_back(t.fwd ? &slot_[k].f_avail : &slot_[k].bwd_avail);
      if (t.fwd) issue_fwd(k, t.producer);
      else issue_bwd(k, t.producer.stage, t.producer.microbatch);
    }
  }
  // SimCosts::eager_bytes: a send this small does not wait for its receiver. Not with
  // Schedule::comm_in_order: there a receive completes no earlier than its turn on its rank's
  // stream, so every transfer waits for both sides.
  bool eager_send(Bytes bytes) const { return !s_.comm_in_order && c_.eager_bytes > 0 && bytes <= c_.eager_bytes; }
  // Starts the forward transfer of slot k (producer `op`) once its F ended and both sides posted
  // (the sender alone for an eager send).
  void issue_fwd(std::size_t k, const Op& op) {
    const Posts& p = post_[k];
    Slot& sl = slot_[k];
    const SliceCosts& sc = c_.slice[s_.slice[op.stage]];
    const bool eager = eager_send(sc.act_bytes);
    if (fwd_link_[op.stage] < 0 || sl.f_avail != kNever || sl.f_done == kNever || p.send_f == kNever || (p.recv_f == kNever && !eager))
      return;
    const Time start = std::max({sl.f_done, p.send_f, eager ? p.send_f : p.recv_f});
    sl.f_avail = transfer(fwd_link_[op.stage], s_.stage_rank[op.stage], s_.stage_rank[op.stage + 1], start, sc.act_bytes, op);
  }
  // The same for the backward transfer of slot k (its producer's kind recorded when it ended).
  void issue_bwd(std::size_t k, int stage, int mb) {
    const Posts& p = post_[k];
    Slot& sl = slot_[k];
    const SliceCosts& sc = c_.slice[s_.slice[stage]];
    const bool eager = eager_send(sc.grad_bytes);
    if (bwd_link_[stage] < 0 || sl.bwd_avail != kNever || sl.bwd_done == kNever || p.send_b == kNever || (p.recv_b == kNever && !eager))
      return;
    const Time start = std::max({sl.bwd_done, p.send_b, eager ? p.send_b : p.recv_b});
    sl.bwd_avail = transfer(bwd_link_[stage], s_.stage_rank[stage], s_.stage_rank[stage - 1], start, sc.grad_bytes,
                            Op{p.bwd_kind, stage, mb});
  }

  // An action's ops by kind, F, I and W: their durations alone (a B as its I and W parts), or with
  // `counts` one per op (a B half I, half W).
  std::array<double, 3> kind_parts(const Action& a, bool counts) const {
    std::array<double, 3> t{};
    for (int i = 0; i < a.size(); ++i) {
      const Op& op = a.op(i);
      const SliceCosts& sc = c_.slice[s_.slice[op.stage]];
      const double f = counts ? 1 : std::max<double>(0, sc.f), half = counts ? 0.5 : 1,
                   in = counts ? 1 : std::max<double>(0, sc.input_grad()), w = counts ? 1 : std::max<double>(0, sc.w);
      if (op.kind == OpKind::F) t[0] += f;
      if (op.kind == OpKind::I || op.kind == OpKind::B) t[1] += (op.kind == OpKind::B ? half : 1) * in;
      if (op.kind == OpKind::W || op.kind == OpKind::B) t[2] += (op.kind == OpKind::B ? half : 1) * w;
    }
    return t;
  }
  // An F&B pair runs its two ops' work in less time than they take one after the other; beside it
  // an op of the device meets both at their own pace (RankState::load). At most 2, one op: 1.
  double load_of(const Action& a, Time duration) const {
    if (!a.overlapped || duration <= 0) return 1;
    const auto t = kind_parts(a, false);
    return std::clamp((t[0] + t[1] + t[2]) / static_cast<double>(duration), 1.0, 2.0);
  }
  // An action's F, I and W shares of its duration alone (by op count where the costs are all 0).
  std::array<double, 3> mix_of(const Action& a) const {
    std::array<double, 3> by_time = kind_parts(a, false), by_count = kind_parts(a, true);
    std::array<double, 3>& m = by_time[0] + by_time[1] + by_time[2] > 0 ? by_time : by_count;
    const double total = m[0] + m[1] + m[2];
    for (double& x : m) x /= total;
    return m;
  }
  // How many times slower than alone rank r's action runs beside the device's other running ones:
  // 1 + the sum over them of (their slowdown on it - 1) x their load, each running action counted
  // share_copies times (this one's own copies but itself). The slowdown of one beside another:
  // share_slowdown (the uniform rule: k single ops at once run 1 + (k-1)(share_slowdown-1) times
  // slower), or by kind, the two mixes through share_by_kind.
  // Ops of one kind started together: at least share_aligned by its mix (SimCosts::share_aligned).
  double factor_beside(int r, const Device& d) const {
    double f = 1;
    const auto& mr = rank_[r].mix;
    for (int q : d.running) {
      double pair = c_.share_slowdown;
      if (!c_.share_by_kind.empty()) {
        const auto& mq = rank_[q].mix;
        pair = 0;
        for (int x = 0; x < 3; ++x)
          for (int y = 0; y < 3; ++y) pair += mr[x] * mq[y] * c_.share_by_kind[static_cast<std::size_t>(3 * x + y)];
      }
      if (q != r && started_together(rank_[r], rank_[q])) {
        double aligned = 0;
        for (std::size_t x = 0; x < 3; ++x) aligned += mr[x] * c_.share_aligned[x];
        pair = std::max(pair, aligned);
      }
      f += (q == r ? c_.share_copies - 1 : c_.share_copies) * (pair - 1) * rank_[q].load;
    }
    return f;
  }
  bool started_together(const RankState& a, const RankState& b) const {
    return !c_.share_aligned.empty() && a.single && a.single == b.single &&
           static_cast<double>(std::llabs(a.run_start - b.run_start)) <=
               c_.share_aligned_window * std::min(a.alone, b.alone);
  }
  // Charges the work the device's running actions did since `since` (at the rates of that while).
  void advance(Device& d, Time now) {
    if (now > d.since)
      for (int r : d.running)
        rank_[r].work_left = std::max(0.0, rank_[r].work_left - static_cast<double>(now - d.since) / rank_[r].factor);
    d.since = now;
  }
  // Re-schedules the end of every running action of the device at the present rates.
  void retime(Device& d, Time now) {
    for (int r : d.running) rank_[r].factor = factor_beside(r, d);
    for (int r : d.running)
      q_.set(r, now + static_cast<Time>(std::llround(rank_[r].work_left * rank_[r].factor)), kActionEnd);
  }

  void free_activation(int r, Time now) {
    --rank_[r].activations;
    sample(r, now, rank_[r].activations);
  }

  void sample(int r, Time now, int count) {
    if (!opt_.record_timeline) return;
    auto& v = res_.timeline.activations[r];
    if (!v.empty() && v.back().t == now) v.back().activations = count;
    else v.push_back(MemSample{now, count});
  }

  const Schedule& s_;
  const SimCosts& c_;
  const SimOptions& opt_;
  const int P_, S_, mbp_;
  // Per (micro-batch, stage): when its F ended, when that output is at the next stage's rank,
  // when its backward (B or I) ended, and when that gradient is at the previous stage's rank.
  struct Slot {
    Time f_done = kNever, f_avail = kNever, bwd_done = kNever, bwd_avail = kNever;
  };
  std::vector<Slot> slot_;
  // Explicit communication only: per slot, when each side of its two transfers was posted
  // (kNever: listed, not yet reached; 0: not listed), and the kind of its backward producer.
  struct Posts {
    Time send_f = 0, recv_f = 0, send_b = 0, recv_b = 0;
    OpKind bwd_kind = OpKind::B;
  };
  std::vector<Posts> post_;
  // Explicit communication, when the timeline is recorded: each posted send or receive (its rank,
  // post time and transfer slot), for SimResult::comm_resident.
  struct Resident {
    int rank = 0;
    Time posted = 0;
    std::size_t key = 0;
    bool fwd = true;
  };
  std::vector<Resident> resident_;
  bool explicit_ = false;
  std::vector<std::uint8_t> first_, last_;
  std::vector<int> fwd_link_, bwd_link_;
  std::vector<Time> link_free_;
  std::vector<RankState> rank_;
  std::vector<Time> op_dur_;  // per (slice, kind), without the overlap model
  std::vector<int> device_of_;     // per rank, an index into devices_; empty: no device is shared
  std::vector<Device> devices_;
  std::vector<int> pending_wakes_;
  std::vector<int> fifo_wakes_;  // Schedule::comm_in_order: ranks whose next comm action may post
  std::unordered_map<std::uint64_t, ActionCost> cache_;
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, Time>> pair_kinds_;  // (slice F, slice B, kind)
  RankEventQueue q_;
  SimResult res_;
};

}  // namespace

SimResult simulate(const Schedule& s, const SimCosts& costs, const SimOptions& opt) {
  Engine e(s, costs, opt);
  return e.run();
}

}  // namespace ppsim
