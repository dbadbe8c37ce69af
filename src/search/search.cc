// The schedule search (search.h): families, then greedy list schedules under a grid of rules
// and randomised ties, then a local search of swaps and short moves of one rank's actions, timed
// by the order timer where it is the engine's (order_timer.h); every schedule kept is validated
// and simulated.
#include "search/search.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <mutex>
#include <random>

#include "core/error.h"
#include "core/thread_pool.h"
#include "schedules/registry.h"
#include "schedules/validator.h"
#include "search/order_timer.h"

namespace ppsim {

namespace {

constexpr Time kInf = std::numeric_limits<Time>::max() / 4;

Time hop(const Schedule& s, const SimCosts& c, int from, int to, bool forward) { return hop_time(s, c, from, to, forward); }

std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  std::uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  return x ^ (x >> 29);
}

}  // namespace

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::linear:
      return "linear";
    case Placement::v_shape:
      return "v";
    case Placement::bidirectional:
      return "bidirectional";
  }
  return "?";
}

std::vector<Placement> parse_placements(const std::string& name) {
  if (name == "linear") return {Placement::linear};
  if (name == "v") return {Placement::v_shape};
  if (name == "bidirectional") return {Placement::bidirectional};
  if (name == "all") return {Placement::linear, Placement::v_shape, Placement::bidirectional};
  if (name == "torch") return {Placement::linear, Placement::v_shape};
  throw InputError(fmt::format("--placement: unknown placement '{}' (torch, linear, v, bidirectional or all)", name),
                   {}, kExitUsage);
}

Placement placement_of(const Schedule& s) {
  if (s.num_pipes == 2) return Placement::bidirectional;
  if (s.chunks_per_rank == 2 && s.stages_per_pipe == 2 * s.pp && s.stage_rank.size() > 1 &&
      s.stage_rank[s.stages_per_pipe - 1] == 0)
    return Placement::v_shape;
  return Placement::linear;
}

Schedule placement_layout(Placement p, int pp, int microbatches) {
  Schedule s;
  s.family = "searched";
  s.microbatches = microbatches;
  switch (p) {
    case Placement::linear:
      layout_linear(s, pp, 1);
      break;
    case Placement::v_shape:
      layout_v_shape(s, pp);
      break;
    case Placement::bidirectional:
      layout_bidirectional(s, pp);
      s.parameter_copies = 2;
      break;
  }
  s.ranks.assign(pp, {});
  return s;
}

double held_peak_chunks(const Schedule& s, const SimCosts& c) {
  double peak = 0;
  for (const auto& acts : s.ranks) {
    double held = 0;
    for (const Action& a : acts) {
      for (int i = 0; i < a.size(); ++i)
        if (a.op(i).kind == OpKind::F) peak = std::max(peak, held += 1);
      for (int i = 0; i < a.size(); ++i) {
        const Op& op = a.op(i);
        const double w_hold = c.slice[static_cast<std::size_t>(s.slice[op.stage])].w_hold;
        if (op.kind == OpKind::B) held -= 1;
        if (op.kind == OpKind::I) held -= 1 - w_hold;
        if (op.kind == OpKind::W) held -= w_hold;
      }
    }
  }
  return peak;
}

double peak_shares(const Schedule& s, const SimCosts& c) { return held_peak_chunks(s, c) / s.chunks_per_rank; }

namespace {

// One greedy list schedule under way (list_schedule): each rank's next choice among its ready F,
// backward (I) and W, then the commit of the earliest rank's choice.
class ListScheduler {
 public:
  ListScheduler(const Schedule& layout, const SimCosts& c, double cap_chunks, const ListRule& rule)
      : s_(layout),
        c_(c),
        cap_(cap_chunks),
        rule_(rule),
        S_(s_.num_stages()),
        mbp_(s_.mb_per_pipe()),
        rng_(rule.noise_seed),
        held_(s_.pp),
        f_end_(static_cast<std::size_t>(S_) * mbp_, kInf),
        b_end_(f_end_.size(), kInf),
        next_f_(S_, 0),
        next_b_(S_, 0),
        pending_w_(S_),
        t_free_(s_.pp, 0),
        act_(s_.pp, 0),
        inflight_(s_.pp, 0),
        deeper_(S_, 0) {
    for (int st = 0; st < S_; ++st) held_[s_.stage_rank[st]].push_back(st);
    for (int r = 0; r < s_.pp; ++r) left_ += held_[r].size() * static_cast<std::size_t>(mbp_) * 3;
    for (int st = 0; st < S_; ++st)
      for (int o : held_[s_.stage_rank[st]])
        if (depth(o) > depth(st)) ++deeper_[st];
  }

  // The schedule, or the empty layout when the rules get stuck.
  Schedule run(const Schedule& layout) {
    std::vector<Choice> choice(s_.pp);
    while (left_ > 0) {
      int best = -1;
      for (int r = 0; r < s_.pp; ++r) {
        // Every commit can make ops of any rank ready, so all are re-chosen (P is small).
        choice[r] = choose(r);
        if (choice[r].start < kInf && (best < 0 || choice[r].start < choice[best].start)) best = r;
      }
      if (best < 0) return placement_layout(placement_of(layout), layout.pp, layout.microbatches);  // stuck
      commit(best, choice[best]);
    }
    return std::move(s_);
  }

 private:
  struct Choice {
    Time start = kInf;
    int f_stage = -1, b_stage = -1, w_stage = -1;  // one, or f and b for a pair
  };
  // A rank's candidates at its free time: the best available F, backward and W, and the earliest
  // F and backward to wait for.
  struct Avail {
    int f_av = -1, b_av = -1, w_av = -1;
    Time f_min = kInf, b_min = kInf;
    int f_wait = -1, b_wait = -1;
  };

  std::size_t key(int st, int m) const { return static_cast<std::size_t>(st) * mbp_ + m; }
  double w_hold(int st) const { return rule_.whole_shares ? 1.0 : c_.slice[s_.slice[st]].w_hold; }
  Time dur(int st, OpKind k) const { return op_duration(c_.slice[s_.slice[st]], k); }
  int depth(int st) const { return st % s_.stages_per_pipe; }

  Time f_ready(int st) const {
    const int m = next_f_[st];
    if (m >= mbp_) return kInf;
    if (s_.is_first_stage(st)) return rule_.inject_gap * std::max(0, m - rule_.inject_free);
    const Time e = f_end_[key(st - 1, m)];
    return e >= kInf ? kInf : e + hop(s_, c_, st - 1, st, true);
  }
  Time b_ready(int st) const {
    const int m = next_b_[st];
    if (m >= mbp_ || m >= next_f_[st]) return kInf;
    Time t = f_end_[key(st, m)];
    if (!s_.is_last_stage(st)) {
      const Time e = b_end_[key(st + 1, m)];
      if (e >= kInf) return kInf;
      t = std::max(t, e + hop(s_, c_, st + 1, st, false));
    }
    return t;
  }
  bool better_stage(int a, int b, bool fwd) const {  // true when stage a goes before stage b
    if (b < 0) return true;
    const int ma = fwd ? next_f_[a] : next_b_[a], mb = fwd ? next_f_[b] : next_b_[b];
    if (ma != mb) return ma < mb;
    return rule_.deep_first ? depth(a) > depth(b) : depth(a) < depth(b);
  }

  Avail scan(int r) const {
    Avail v;
    const Time t = t_free_[r];
    const bool f_allowed =
        (cap_ <= 0 || act_[r] + 1 <= cap_ + 1e-9) && (rule_.max_inflight <= 0 || inflight_[r] < rule_.max_inflight);
    for (int st : held_[r]) {
      if (f_allowed && (cap_ <= 0 || !rule_.reserve_deeper || act_[r] + 1 + deeper_[st] <= cap_ + 1e-9)) {
        const Time fr = f_ready(st);
        if (fr <= t && better_stage(st, v.f_av, true)) v.f_av = st;
        if (fr < v.f_min) {
          v.f_min = fr;
          v.f_wait = st;
        }
      }
      const Time br = b_ready(st);
      if (br <= t && better_stage(st, v.b_av, false)) v.b_av = st;
      if (br < v.b_min) {
        v.b_min = br;
        v.b_wait = st;
      }
      if (!pending_w_[st].empty() &&
          (v.w_av < 0 || b_end_[key(st, pending_w_[st].front())] < b_end_[key(v.w_av, pending_w_[v.w_av].front())]))
        v.w_av = st;
    }
    return v;
  }

  Choice choose(int r) {
    Choice ch;
    const Avail v = scan(r);
    bool bfirst = rule_.backward_first, wfill = rule_.w_fills_only;
    if (rule_.noise_seed != 0) {
      const std::uint64_t x = rng_();
      if ((x & 15) == 0) bfirst = !bfirst;
      if (((x >> 4) & 31) == 0) wfill = !wfill;
    }
    if (v.f_av >= 0 || v.b_av >= 0 || v.w_av >= 0) {
      ch.start = t_free_[r];
      if (rule_.pairs && v.f_av >= 0 && v.b_av >= 0) {
        ch.f_stage = v.f_av;
        ch.b_stage = v.b_av;
        return ch;
      }
      // 0 F, 1 backward, 2 W. W last: it fills what would be idle (Zero Bubble's rule).
      static constexpr int kOrders[4][3] = {{0, 2, 1}, {0, 1, 2}, {1, 2, 0}, {1, 0, 2}};
      for (int k : kOrders[2 * bfirst + wfill]) {
        if (k == 0 && v.f_av >= 0) {
          ch.f_stage = v.f_av;
          return ch;
        }
        if (k == 1 && v.b_av >= 0) {
          ch.b_stage = v.b_av;
          return ch;
        }
        if (k == 2 && v.w_av >= 0) {
          ch.w_stage = v.w_av;
          return ch;
        }
      }
    }
    // Nothing available now: wait for the earliest.
    if (v.b_min <= v.f_min && v.b_wait >= 0) {
      ch.start = v.b_min;
      ch.b_stage = v.b_wait;
    } else if (v.f_wait >= 0) {
      ch.start = v.f_min;
      ch.f_stage = v.f_wait;
    }
    return ch;
  }

  // Appends `a` (ending at `end`, `ops` ops) to rank `best`.
  void emit(int best, const Action& a, Time end, std::size_t ops) {
    s_.ranks[best].push_back(a);
    t_free_[best] = end;
    left_ -= ops;
  }

  void commit(int best, const Choice& ch) {
    const Time t = ch.start;
    if (ch.f_stage >= 0 && ch.b_stage >= 0) {
      // Both ops were available at t (choose() pairs only available ops).
      const int fm = next_f_[ch.f_stage]++, bm = next_b_[ch.b_stage]++;
      const Time e = t + pair_duration(c_.slice[s_.slice[ch.f_stage]], c_.slice[s_.slice[ch.b_stage]], OpKind::I);
      f_end_[key(ch.f_stage, fm)] = e;
      b_end_[key(ch.b_stage, bm)] = e;
      pending_w_[ch.b_stage].push_back(bm);
      act_[best] += w_hold(ch.b_stage);  // the F's share in, the I's 1 - w_hold out
      emit(best, Action::pair({OpKind::F, ch.f_stage, fm}, {OpKind::I, ch.b_stage, bm}), e, 2);
    } else if (ch.f_stage >= 0) {
      const int m = next_f_[ch.f_stage]++;
      const Time e = t + dur(ch.f_stage, OpKind::F);
      f_end_[key(ch.f_stage, m)] = e;
      act_[best] += 1;
      inflight_[best] += 1;
      emit(best, Action::single({OpKind::F, ch.f_stage, m}), e, 1);
    } else if (ch.b_stage >= 0) {
      const int m = next_b_[ch.b_stage]++;
      const Time e = t + dur(ch.b_stage, OpKind::I);
      b_end_[key(ch.b_stage, m)] = e;
      pending_w_[ch.b_stage].push_back(m);
      act_[best] -= 1 - w_hold(ch.b_stage);
      inflight_[best] -= 1;
      emit(best, Action::single({OpKind::I, ch.b_stage, m}), e, 1);
    } else {
      const int m = pending_w_[ch.w_stage].front();
      pending_w_[ch.w_stage].pop_front();
      act_[best] -= w_hold(ch.w_stage);
      emit(best, Action::single({OpKind::W, ch.w_stage, m}), t + dur(ch.w_stage, OpKind::W), 1);
    }
  }

  Schedule s_;
  const SimCosts& c_;
  const double cap_;
  const ListRule& rule_;
  const int S_, mbp_;
  std::mt19937_64 rng_;
  std::vector<std::vector<int>> held_;  // stages per rank
  std::vector<Time> f_end_, b_end_;
  std::vector<int> next_f_, next_b_;
  std::vector<std::deque<int>> pending_w_;
  std::vector<Time> t_free_;
  std::vector<double> act_;  // activations held, in chunks (SliceCosts::w_hold after an I)
  std::vector<int> inflight_;
  std::vector<int> deeper_;  // stages of the same rank deeper in their pipe than st
  std::size_t left_ = 0;
};

}  // namespace

Schedule list_schedule(const Schedule& layout, const SimCosts& c, double cap_chunks, const ListRule& rule) {
  return ListScheduler(layout, c, cap_chunks, rule).run(layout);
}

namespace {

// Validates and simulates; valid=false when the validator or the engine refuses it or it is
// over the cap.
Candidate evaluate(std::string name, Schedule s, const SimCosts& c, double cap) {
  Candidate out;
  out.name = std::move(name);
  out.schedule = std::move(s);
  if (out.schedule.num_ops() == 0) return out;
  try {
    validate_schedule(out.schedule);
    out.sim = simulate(out.schedule, c);
  } catch (const InputError&) {
    return out;
  }
  out.peak_shares = peak_shares(out.schedule, c);
  out.valid = cap <= 0 || out.peak_shares <= cap + 1e-9;
  return out;
}

// What the search minimises (SearchRequest::objective_span).
Time score(const Candidate& a, bool span) { return span ? a.sim.longest_span() : a.sim.makespan(); }

bool better(const Candidate& a, const Candidate& b, bool span) {
  if (!a.valid) return false;
  if (!b.valid) return true;
  return score(a, span) < score(b, span);
}

double cap_chunks(const Schedule& s, double cap) { return cap <= 0 ? 0 : cap * s.chunks_per_rank; }

struct LocalResult {
  Candidate best;
  std::uint64_t evaluated = 0;
};

// One chain of the local search (docs/SEARCH.md, Method 3): `rounds` moves on one random rank,
// each an adjacent swap (3 in 5) or a move of one action up to kWindow places either way, kept
// when (makespan, sum of the ranks' ends) is not worse and the cap holds. The sum lets the chain
// cross the makespan's plateaus (a rank off the critical path finishing earlier frees the ones
// that wait on it). Timed by the order timer when `timed` (the engine's times for these costs),
// else validated and simulated; ends early at `stop_at` (the lower bound: nothing is faster) or
// the deadline. What it returns is always validated and simulated.
LocalResult local_search(const Candidate& start, const SimCosts& c, double cap, bool timed, int rounds, Time stop_at,
                         std::uint64_t seed, std::chrono::steady_clock::time_point deadline, std::atomic<bool>& late,
                         bool span) {
  constexpr long kWindow = 8;
  LocalResult out;
  out.best = start;
  std::mt19937_64 rng(seed);
  OrderTimer timer(start.schedule, c);
  // (makespan, sum of the ranks' ends); makespan kInf: deadlocked, refused or over the cap.
  auto judge = [&](const Schedule& s) -> std::pair<Time, Time> {
    ++out.evaluated;
    if (timed) {
      const OrderTimer::Result t = timer.run(s);
      if (!t.ok || (cap > 0 && t.peak / s.chunks_per_rank > cap + 1e-9)) return {kInf, 0};
      return span ? std::pair<Time, Time>{t.max_span, t.span_sum} : std::pair<Time, Time>{t.makespan, t.end_sum};
    }
    const Candidate e = evaluate("searched", s, c, cap);
    if (!e.valid) return {kInf, 0};
    Time sum = 0;
    for (const RankStats& st : e.sim.ranks) sum += span ? st.span() : st.last_end;
    return {score(e, span), sum};
  };
  Schedule s = start.schedule;
  std::pair<Time, Time> cur = judge(s);
  if (cur.first >= kInf) return out;
  for (int it = 0; it < rounds && cur.first > stop_at; ++it) {
    if ((it & 15) == 0 && std::chrono::steady_clock::now() > deadline) {
      late = true;
      break;
    }
    std::vector<Action>& acts = s.ranks[rng() % static_cast<std::size_t>(s.pp)];
    if (acts.size() < 2) continue;
    const std::vector<Action> saved = acts;
    if (rng() % 5 < 2) {
      const std::size_t i = rng() % acts.size();
      const long j = static_cast<long>(i) + static_cast<long>(rng() % (2 * kWindow + 1)) - kWindow;
      if (j < 0 || j >= static_cast<long>(acts.size()) || j == static_cast<long>(i)) continue;
      const Action a = acts[i];
      acts.erase(acts.begin() + static_cast<long>(i));
      acts.insert(acts.begin() + j, a);
    } else {
      const std::size_t i = rng() % (acts.size() - 1);
      const Action& a = acts[i];
      const Action& b = acts[i + 1];
      if (!a.overlapped && !b.overlapped && a.first.kind == b.first.kind && a.first.stage == b.first.stage) continue;
      std::swap(acts[i], acts[i + 1]);
    }
    const std::pair<Time, Time> next = judge(s);
    if (next.first < kInf && next <= cur)
      cur = next;
    else
      acts = saved;
  }
  Candidate e = evaluate("searched", std::move(s), c, cap);
  ++out.evaluated;
  if (better(e, out.best, span)) out.best = std::move(e);
  return out;
}

void check_request(const SearchRequest& req) {
  if (req.pp < 2) throw InputError(fmt::format("--pp: search needs P >= 2, got {}", req.pp), {}, kExitUsage);
  if (req.microbatches < 1)
    throw InputError(fmt::format("--microbatches: M must be >= 1, got {}", req.microbatches), {}, kExitUsage);
  if (req.placements.empty()) throw InputError("--placement: no placement given", {}, kExitUsage);
  if (!(req.memory_cap >= 0)) throw InputError("--memory-cap must be >= 0", {}, kExitUsage);
}

// A schedule holding two parameter copies, left out of a search of one-copy placements
// (SearchRequest::one_parameter_copy: --placement torch).
bool two_copies(const SearchRequest& req, const Candidate& c) {
  return req.one_parameter_copy && c.schedule.parameter_copies > 1;
}

struct FamilyRun {
  std::string name, note;  // note: why not compared (no candidate)
  Candidate cand;
};

// Each of the nine families under its own layout's costs (without a cap first when the cap is the
// best family's peak: then the fastest family's peak becomes the cap).
std::vector<FamilyRun> run_families(const SearchRequest& req, double& memory_cap,
                                    std::atomic<std::uint64_t>& evaluated) {
  const bool cap_from_family = req.cap_at_best_family && req.memory_cap <= 0;
  std::vector<FamilyRun> runs;
  for (const Family& fam : families()) {
    if (!family_in_all(fam)) continue;
    Schedule s;
    try {
      s = make_schedule(fam.name, ScheduleParams{req.pp, req.microbatches, 0, 0});
    } catch (const InputError& e) {
      runs.push_back({fam.name, e.message(), {}});
      continue;
    }
    SimCosts c;
    try {
      c = req.costs(s);  // a config may not cut its layers into this family's slices
    } catch (const InputError& e) {
      runs.push_back({fam.name, e.message(), {}});
      continue;
    }
    runs.push_back({fam.name, {}, evaluate(fam.name, std::move(s), c, cap_from_family ? 0 : memory_cap)});
    ++evaluated;
  }
  // --placement torch: a family holding two parameter copies neither sets the cap nor is compared.
  if (cap_from_family) {
    const Candidate* fastest = nullptr;
    for (const FamilyRun& f : runs)
      if (f.note.empty() && f.cand.valid && !two_copies(req, f.cand) &&
          (!fastest || f.cand.sim.makespan() < fastest->sim.makespan()))
        fastest = &f.cand;
    if (fastest) memory_cap = fastest->peak_shares;
    for (FamilyRun& f : runs)
      if (f.note.empty() && f.cand.valid && memory_cap > 0 && f.cand.peak_shares > memory_cap + 1e-9)
        f.cand.valid = false;
  }
  return runs;
}

// The families' notes and the best family into `res`; the families of the searched placements
// are returned as seeds.
std::vector<Candidate> family_seeds(const SearchRequest& req, std::vector<FamilyRun>& runs, SearchResult& res) {
  std::vector<Candidate> seeds;
  for (FamilyRun& f : runs) {
    if (!f.note.empty()) {
      res.family_notes.emplace_back(f.name, f.note);
      continue;
    }
    Candidate& cand = f.cand;
    if (two_copies(req, cand)) {
      res.family_notes.emplace_back(
          f.name, fmt::format("{} parameter copies (--placement all compares it)", cand.schedule.parameter_copies));
      continue;
    }
    if (!cand.valid) {
      res.family_notes.emplace_back(
          f.name, cand.sim.ranks.empty() ? std::string("could not be simulated")
                                         : fmt::format("peak {:.4g} rank shares, over the cap", cand.peak_shares));
      continue;
    }
    const Placement p = placement_of(cand.schedule);
    if (better(cand, res.best_family, req.objective_span)) res.best_family = cand;
    if (std::find(req.placements.begin(), req.placements.end(), p) != req.placements.end()) seeds.push_back(cand);
  }
  return seeds;
}

struct Trial {
  Placement placement;
  ListRule rule;
};

// A list rule: backward first (bf), deeper stages first (deep), and for reserve 0 room kept for
// the deeper stages under the cap.
ListRule base_rule(int bf, int deep, int reserve) {
  ListRule r;
  r.backward_first = bf;
  r.deep_first = deep;
  r.reserve_deeper = reserve == 0;
  return r;
}

// The grid of rules: backward or F first, W filling only, deep first, pairs (two pipes), the
// in-flight limit and (under a cap) reserving room for deeper stages.
void add_grid_trials(std::vector<Trial>& trials, Placement p, int pp, int chunks, double memory_cap) {
  for (int bf = 0; bf < 2; ++bf)
    for (int wf = 0; wf < 2; ++wf)
      for (int deep = 0; deep < 2; ++deep)
        for (int pairs = 0; pairs < (p == Placement::bidirectional ? 2 : 1); ++pairs)
          for (int inflight : {0, pp * chunks, 2 * pp * chunks})
            for (int reserve = 0; reserve < (memory_cap > 0 ? 2 : 1); ++reserve) {
              ListRule r = base_rule(bf, deep, reserve);
              r.w_fills_only = wf;
              r.pairs = pairs;
              r.max_inflight = inflight;
              trials.push_back({p, r});
            }
}

// Steady injection under a cap: gaps of 60-110% of the busiest rank's work per micro-batch of each
// pipe, after a burst of 0-3, a quarter, a third, a half or 3/4 of the cap's chunks.
void add_injection_trials(std::vector<Trial>& trials, Placement p, const Schedule& L, const SimCosts& costs,
                          double memory_cap) {
  std::vector<Time> per_mb(L.pp, 0);
  for (int st = 0; st < L.num_stages(); ++st) {
    const SliceCosts& sc = costs.slice[L.slice[st]];
    per_mb[L.stage_rank[st]] += sc.f + sc.b;
  }
  const Time gap = *std::max_element(per_mb.begin(), per_mb.end());  // one micro-batch of each pipe
  const int cap = static_cast<int>(cap_chunks(L, memory_cap) + 1e-9);
  // Bursts up to 3/4 of the cap (suite case 9: 104.6 -> 104 against bursts up to 1/2; gaps in
  // steps of 5% instead gained nothing there and doubled the time of case 15); repeated
  // bursts (small caps) are run once.
  std::vector<int> bursts = {0, 1, 2, 3, cap / 4, cap / 3, cap / 2, 3 * cap / 4};
  std::sort(bursts.begin(), bursts.end());
  bursts.erase(std::unique(bursts.begin(), bursts.end()), bursts.end());
  for (int pct : {60, 75, 90, 100, 110})
    for (int burst : bursts)
      for (int bf = 0; bf < 2; ++bf)
        for (int deep = 0; deep < 2; ++deep)
          for (int reserve = 0; reserve < 2; ++reserve) {
            ListRule r = base_rule(bf, deep, reserve);
            r.inject_gap = gap * pct / 100;
            r.inject_free = burst;
            trials.push_back({p, r});
          }
}

// Every list-schedule trial of every layout, in a fixed order (the result does not depend on
// --threads): the grid, steady injection, 48 randomised ties, and under a cap with fractional W
// holds each again counting whole shares until W.
std::vector<Trial> list_trials(const SearchRequest& req, const std::vector<Schedule>& layouts,
                               const std::vector<SimCosts>& costs, double memory_cap) {
  std::vector<Trial> trials;
  for (std::size_t li = 0; li < layouts.size(); ++li) {
    const Placement p = placement_of(layouts[li]);
    const std::size_t first_trial = trials.size();
    add_grid_trials(trials, p, req.pp, layouts[li].chunks_per_rank, memory_cap);
    if (memory_cap > 0) add_injection_trials(trials, p, layouts[li], costs[li], memory_cap);
    for (int k = 0; k < 48; ++k) {
      ListRule r;
      r.backward_first = k % 2 == 0;
      r.deep_first = (k / 2) % 2 == 0;
      r.pairs = p == Placement::bidirectional && (k / 4) % 2 == 0;
      r.noise_seed = mix(req.seed, k * 7919 + static_cast<int>(p) + 1);
      trials.push_back({p, r});
    }
    const bool fractional = std::any_of(costs[li].slice.begin(), costs[li].slice.end(),
                                        [](const SliceCosts& x) { return x.w_hold < 1; });
    if (fractional && memory_cap > 0) {
      const std::size_t end = trials.size();
      for (std::size_t i = first_trial; i < end; ++i) {
        Trial t = trials[i];
        t.rule.whole_shares = true;
        trials.push_back(t);
      }
    }
  }
  return trials;
}

// The shared state of the parallel phases: counters, the best score seen, the deadline, and the
// progress callback.
struct Progress {
  using Clock = std::chrono::steady_clock;
  const SearchRequest& req;
  Clock::time_point deadline;
  std::uint64_t trials = 0;
  std::atomic<std::uint64_t> evaluated{0}, done{0};
  std::atomic<Time> best_seen{kInf};
  std::atomic<bool> late{false};

  void note(const Candidate& c) {
    if (!c.valid) return;
    Time cur = best_seen.load();
    while (score(c, req.objective_span) < cur && !best_seen.compare_exchange_weak(cur, score(c, req.objective_span))) {
    }
  }
  void tick() const {
    if (req.progress) req.progress(done.load(), trials, best_seen.load() >= kInf ? 0 : best_seen.load());
  }
};

std::vector<Candidate> run_trials(const std::vector<Trial>& trials, const std::vector<Schedule>& layouts,
                                  const std::vector<SimCosts>& costs, double memory_cap, int threads, Progress& pr) {
  std::vector<Candidate> slots(trials.size());
  parallel_for(
      trials.size(), threads,
      [&](std::size_t i) {
        if (Progress::Clock::now() > pr.deadline) {
          pr.late = true;
          return;
        }
        const Trial& t = trials[i];
        std::size_t li = 0;
        while (placement_of(layouts[li]) != t.placement) ++li;
        Schedule s = list_schedule(layouts[li], costs[li], cap_chunks(layouts[li], memory_cap), t.rule);
        slots[i] = evaluate("searched", std::move(s), costs[li], memory_cap);
        ++pr.evaluated;
        pr.note(slots[i]);
        ++pr.done;
      },
      [&] { pr.tick(); }, 200);
  return slots;
}

// Local search (docs/SEARCH.md, Method 3): four chains, the even ones from the best schedule so far
// and the odd ones from the best list schedule that differs from it (a family that wins often sits
// in a local optimum that a slower list schedule does not: suite case 14; and two starts find more
// than one: case 9), each seeded. Returns the best of the start and the chains.
Candidate local_phase(const SearchRequest& req, const Candidate& start, const std::vector<Candidate>& slots,
                      double memory_cap, Time lb, std::size_t swap_chains, int threads, Progress& pr) {
  Candidate listed;
  for (const Candidate& c : slots)
    if (c.schedule.ranks != start.schedule.ranks && better(c, listed, req.objective_span)) listed = c;
  std::vector<const Candidate*> chain_start(swap_chains, &start);
  for (std::size_t k = 1; k < swap_chains; k += 2)
    if (listed.valid) chain_start[k] = &listed;
  std::vector<SimCosts> chain_costs;
  for (const Candidate* c : chain_start) chain_costs.push_back(req.costs(c->schedule));
  // Rounds per chain: with the order timer (about 10x cheaper than validating and simulating) a
  // fixed count of timed actions, 120000 rounds at P M = 256 (at most 120000); else 60000 / (P M
  // / 8 + 1) as before. Counts, not seconds, so that the result is the same on any machine.
  bool timed = true;
  for (const SimCosts& c : chain_costs) timed = timed && OrderTimer::exact_for(c);
  const int rounds = req.swap_rounds > 0 ? req.swap_rounds
                     : timed ? std::clamp(120000 * 256 / (req.pp * req.microbatches), 200, 120000)
                             : std::max(200, 60000 / (req.pp * req.microbatches / 8 + 1));
  // With the span objective the bound is the busiest rank's work (a rank's span holds its work).
  Time stop_at = lb;
  if (req.objective_span) {
    stop_at = 0;
    for (const RankStats& st : start.sim.ranks) stop_at = std::max(stop_at, st.busy);
  }
  std::vector<LocalResult> chains(score(start, req.objective_span) <= stop_at ? 0 : swap_chains);  // none: optimal
  pr.done += swap_chains - chains.size();
  parallel_for(
      chains.size(), threads,
      [&](std::size_t k) {
        chains[k] = local_search(*chain_start[k], chain_costs[k], memory_cap, timed, rounds, stop_at,
                                 mix(req.seed, 1000003 + k), pr.deadline, pr.late, req.objective_span);
        pr.evaluated += chains[k].evaluated;
        pr.note(chains[k].best);
        ++pr.done;
      },
      [&] { pr.tick(); }, 200);
  Candidate best = start;
  for (const LocalResult& c : chains)
    if (better(c.best, best, req.objective_span)) best = c.best;
  return best;
}

}  // namespace

SearchResult search_schedule(const SearchRequest& req) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  Progress pr{req, t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(req.time_limit_s))};
  check_request(req);
  SearchResult res;
  const int threads = resolve_jobs(req.threads);

  // 1. The nine families.
  double memory_cap = req.memory_cap;
  std::vector<FamilyRun> runs = run_families(req, memory_cap, pr.evaluated);
  res.memory_cap = memory_cap;
  const std::vector<Candidate> seeds = family_seeds(req, runs, res);

  // 2. Greedy list schedules: a grid of rules per placement, then randomised ties.
  std::vector<Schedule> layouts;
  std::vector<SimCosts> costs;
  Time lb = kInf;
  for (Placement p : req.placements) {
    if (p == Placement::bidirectional && req.microbatches % 2 != 0) continue;  // two pipes of M/2
    layouts.push_back(placement_layout(p, req.pp, req.microbatches));
    costs.push_back(req.costs(layouts.back()));
    lb = std::min(lb, lower_bound(layouts.back(), costs.back(), memory_cap));
  }
  if (layouts.empty()) throw InputError("search: no placement fits (bidirectional needs an even M)");
  res.lower_bound = lb;
  const std::vector<Trial> trials = list_trials(req, layouts, costs, memory_cap);
  const std::size_t swap_chains = 4;  // fixed, so that the result does not depend on --threads
  res.trials = trials.size() + swap_chains;
  pr.trials = res.trials;
  for (const Candidate& c : seeds) pr.note(c);
  const std::vector<Candidate> slots = run_trials(trials, layouts, costs, memory_cap, threads, pr);
  Candidate start;
  for (const Candidate& c : seeds)
    if (better(c, start, req.objective_span)) start = c;
  for (const Candidate& c : slots)
    if (better(c, start, req.objective_span)) start = c;
  if (!start.valid)
    throw InputError(fmt::format("search: no schedule of placement {} fits the cap of {} activations per rank",
                                 req.placements.size() == 1 ? placement_name(req.placements[0]) : "all", memory_cap));

  // 3. Local search.
  Candidate best = local_phase(req, start, slots, memory_cap, lb, swap_chains, threads, pr);
  best.schedule.family = "searched";
  best.name = "searched";
  res.best = std::move(best);
  res.evaluated = pr.evaluated.load();
  res.time_limited = pr.late.load();
  res.trials_run = pr.done.load();
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace ppsim
