// The search's lower bound (search.h, docs/SEARCH.md "The lower bound"): for one layout, costs
// and activation cap, a time no schedule of that layout can beat in the engine (without the
// overlap model, shared devices or per-rank speeds). Each term is a separate argument; the bound
// is their maximum. Every op duration used here is the least the engine can give that op,
// counting F&B pairs (an op inside a pair may take less than alone).
#include <algorithm>
#include <limits>
#include <queue>
#include <vector>

#include "search/search.h"

namespace ppsim {

Time hop_time(const Schedule& s, const SimCosts& c, int from, int to, bool forward) {
  if (s.stage_rank[from] == s.stage_rank[to]) return 0;
  const SliceCosts& sc = c.slice[s.slice[from]];
  return c.link.latency + c.link.occupancy(forward ? sc.act_bytes : sc.grad_bytes);
}

namespace {

constexpr Time kBig = std::numeric_limits<Time>::max() / 4;

// One op of a rank in the one-machine relaxation: released at `head`, runs `dur` (preemptible),
// and after it ends at least `tail` must pass before the makespan.
struct Piece {
  Time head, dur, tail;
};

// Jackson's preemptive schedule (largest tail first, preempting on each release) is optimal for
// one machine with heads, tails and preemption; its max(end + tail) is a lower bound on any
// non-preemptive schedule of the same pieces.
Time jackson(std::vector<Piece> p) {
  std::sort(p.begin(), p.end(), [](const Piece& a, const Piece& b) { return a.head < b.head; });
  using Item = std::pair<Time, std::size_t>;  // (tail, index)
  std::priority_queue<Item> ready;
  std::vector<Time> left(p.size());
  for (std::size_t i = 0; i < p.size(); ++i) left[i] = p[i].dur;
  Time t = 0, best = 0;
  std::size_t next = 0;
  while (next < p.size() || !ready.empty()) {
    if (ready.empty()) t = std::max(t, p[next].head);
    while (next < p.size() && p[next].head <= t) {
      ready.emplace(p[next].tail, next);
      ++next;
    }
    const std::size_t i = ready.top().second;
    const Time until = next < p.size() ? p[next].head : kBig;
    const Time run = std::min(left[i], until - t);
    t += run;
    left[i] -= run;
    if (left[i] == 0) {
      best = std::max(best, t + p[i].tail);
      ready.pop();
    }
  }
  return best;
}

Time ceil_div(Time a, Time b) { return (a + b - 1) / b; }

// The per-stage figures every term reads: least durations, heads and tails, round trips.
struct Bound {
  const Schedule& s;
  const SimCosts& c;
  const int S, NS, mbp;
  std::vector<std::vector<int>> held;  // stages per rank
  // Least durations of the action carrying an op, pairs included (a pair F of a with a backward
  // of b, both of one rank, lasts pair_duration(a, b)): fe for an F, ie for an input grad (I, or
  // the I part of a B), be for a full B, bw a backward with its W; save[r] the most one pair on
  // rank r saves.
  std::vector<Time> fe, ie, be, bw, save;
  // Heads: rF[at(st, k)] is the earliest start of the k-th F of stage st (in start order; one rank
  // runs one action at a time, so start order is end order), rB of its k-th backward. Tails:
  // qF / qB the least time from the end of the k-th-last F / backward action of st to the makespan.
  std::vector<Time> rF, rB, qF, qB;
  // D[st]: from the end of an F of st until the gradient of the same micro-batch is back at st.
  // H[st]: least time a chunk of st holds its activation (from its F's start to its W's or B's end).
  std::vector<Time> D, H;

  Bound(const Schedule& sched, const SimCosts& costs)
      : s(sched), c(costs), S(sched.stages_per_pipe), NS(sched.num_stages()), mbp(sched.mb_per_pipe()) {}
  const SliceCosts& sc(int st) const { return c.slice[s.slice[st]]; }
  Time hopf(int st) const { return hop_time(s, c, st, st + 1, true); }   // st -> st+1
  Time hopb(int st) const { return hop_time(s, c, st, st - 1, false); }  // st -> st-1
  std::size_t at(int st, int k) const { return static_cast<std::size_t>(st) * mbp + k; }
};

void least_durations(Bound& b) {
  const Schedule& s = b.s;
  b.held.assign(s.pp, {});
  for (int st = 0; st < b.NS; ++st) b.held[s.stage_rank[st]].push_back(st);
  b.fe.assign(b.NS, 0);
  b.ie.assign(b.NS, 0);
  b.be.assign(b.NS, 0);
  b.bw.assign(b.NS, 0);
  b.save.assign(s.pp, 0);
  for (int st = 0; st < b.NS; ++st) {
    const SliceCosts& a = b.sc(st);
    b.fe[st] = a.f;
    b.ie[st] = a.input_grad();
    b.be[st] = a.b;
    for (int o : b.held[s.stage_rank[st]]) {
      const SliceCosts& q = b.sc(o);
      b.fe[st] = std::min(b.fe[st], pair_duration(a, q, OpKind::I));
      b.ie[st] = std::min(b.ie[st], pair_duration(q, a, OpKind::I));
      b.be[st] = std::min(b.be[st], pair_duration(q, a, OpKind::B));
      Time& sv = b.save[s.stage_rank[st]];
      sv = std::max(sv, a.f + q.input_grad() - pair_duration(a, q, OpKind::I));
      sv = std::max(sv, a.f + q.b - pair_duration(a, q, OpKind::B));
    }
    b.fe[st] = std::max<Time>(b.fe[st], 0);
    b.ie[st] = std::max<Time>(b.ie[st], 0);
    b.be[st] = std::max<Time>(b.be[st], 0);
    b.bw[st] = std::min(b.be[st], b.ie[st] + a.w);  // a backward with its W: B, or I then W
  }
}

void heads(Bound& b, int pipe) {
  const auto& fe = b.fe;
  const auto& ie = b.ie;
  for (int j = 0; j < b.S; ++j) {
    const int st = pipe * b.S + j;
    for (int k = 0; k < b.mbp; ++k) {
      Time h = k > 0 ? b.rF[b.at(st, k - 1)] + fe[st] : 0;
      if (j > 0) h = std::max(h, b.rF[b.at(st - 1, k)] + fe[st - 1] + b.hopf(st - 1));
      b.rF[b.at(st, k)] = h;
    }
  }
  for (int j = b.S - 1; j >= 0; --j) {
    const int st = pipe * b.S + j;
    for (int k = 0; k < b.mbp; ++k) {
      Time h = b.rF[b.at(st, k)] + fe[st];
      if (k > 0) h = std::max(h, b.rB[b.at(st, k - 1)] + ie[st]);
      if (j < b.S - 1) h = std::max(h, b.rB[b.at(st + 1, k)] + ie[st + 1] + b.hopb(st + 1));
      b.rB[b.at(st, k)] = h;
    }
  }
}

void tails(Bound& b, int pipe) {
  const auto& fe = b.fe;
  const auto& ie = b.ie;
  const auto& bw = b.bw;
  // Backward tails, from the first stage up: the k later backwards of st (each with its W) run on
  // this rank; the k+1 last gradients go on upstream.
  for (int j = 0; j < b.S; ++j) {
    const int st = pipe * b.S + j;
    for (int k = 0; k < b.mbp; ++k) {
      Time q = static_cast<Time>(k) * bw[st];
      if (k > 0) q = std::max(q, ie[st] + b.qB[b.at(st, k - 1)]);
      if (j > 0)
        q = std::max(q,
                     b.hopb(st) + std::max(ie[st - 1] + b.qB[b.at(st - 1, k)], static_cast<Time>(k + 1) * bw[st - 1]));
      b.qB[b.at(st, k)] = q;
    }
  }
  for (int j = b.S - 1; j >= 0; --j) {
    const int st = pipe * b.S + j;
    for (int k = 0; k < b.mbp; ++k) {
      Time q = k > 0 ? fe[st] + b.qF[b.at(st, k - 1)] : 0;
      if (j < b.S - 1)
        q = std::max(q, b.hopf(st) + fe[st + 1] + b.qF[b.at(st + 1, k)]);
      else
        q = std::max(q, std::max(ie[st] + b.qB[b.at(st, k)], static_cast<Time>(k + 1) * bw[st]));
      b.qF[b.at(st, k)] = q;
    }
  }
}

void heads_tails_trips(Bound& b) {
  const std::size_t n = static_cast<std::size_t>(b.NS) * b.mbp;
  b.rF.assign(n, 0);
  b.rB.assign(n, 0);
  b.qF.assign(n, 0);
  b.qB.assign(n, 0);
  for (int pipe = 0; pipe < b.s.num_pipes; ++pipe) {
    heads(b, pipe);
    tails(b, pipe);
  }
  b.D.assign(b.NS, 0);
  b.H.assign(b.NS, 0);
  for (int pipe = 0; pipe < b.s.num_pipes; ++pipe) {
    Time d = 0;
    for (int j = b.S - 1; j >= 0; --j) {
      const int st = pipe * b.S + j;
      b.D[st] = d;
      b.H[st] = b.fe[st] + d + b.bw[st];
      if (j > 0) d += b.hopf(st - 1) + b.fe[st] + b.ie[st] + b.hopb(st);
    }
  }
}

// One rank's figures that the per-rank terms share.
struct RankFigures {
  Time Sr = 0, fill = kBig, work = 0, fmax = 0, imax = 0, freemax = 0, first_bwd = kBig, hold_sum = 0;
  Time nr = 0;          // chunks (F's, backwards) of the rank
  Time least_work = 0;  // its work less what nr pairs can save
};

RankFigures rank_figures(const Bound& b, int r) {
  RankFigures x;
  x.Sr = b.save[r];
  Time pair_fi_max = 0;
  x.nr = static_cast<Time>(b.held[r].size()) * b.mbp;
  for (int st : b.held[r]) {
    const SliceCosts& a = b.sc(st);
    x.fill = std::min(x.fill, b.rF[b.at(st, 0)]);
    x.first_bwd = std::min(x.first_bwd, b.rB[b.at(st, 0)]);
    x.work += static_cast<Time>(b.mbp) * (a.f + a.b);
    x.fmax = std::max(x.fmax, a.f);
    x.imax = std::max(x.imax, a.input_grad());
    x.freemax = std::max({x.freemax, a.w, a.b});
    for (int o : b.held[r]) {
      pair_fi_max = std::max(pair_fi_max, pair_duration(b.sc(o), a, OpKind::I));
      x.freemax = std::max(x.freemax, pair_duration(b.sc(o), a, OpKind::B));
    }
    x.hold_sum += static_cast<Time>(b.mbp) * b.H[st];
  }
  x.imax = std::max(x.imax, pair_fi_max - x.fmax);         // an F slot plus a backward slot holds any pair
  x.least_work = std::max<Time>(x.work - x.Sr * x.nr, 0);  // at most nr pairs
  return x;
}

// 3. Pairs need a backward: before first_bwd the rank runs single F's only (or idles). If u F's
// start before it, at most nr - u pairs remain, and the window idles for at least
// (first_bwd - fill) - u * fmax. Minimised over the u the heads allow.
Time pair_fill_term(const Bound& b, int r, const RankFigures& x) {
  const Time window = x.first_bwd - x.fill;
  Time u_max = 0;
  for (int st : b.held[r])
    for (int k = 0; k < b.mbp; ++k) u_max += b.rF[b.at(st, k)] < x.first_bwd;
  u_max = std::min(u_max, x.nr);
  Time best = kBig;
  for (Time u = 0; u <= u_max; ++u)
    best = std::min(best, std::max<Time>(0, x.work - x.Sr * (x.nr - u)) + std::max<Time>(0, window - u * x.fmax));
  return x.fill + best;
}

// 4. One-machine relaxation: every op of the rank as a preemptible piece with its head and tail, a
// B as its I piece then its W piece. Pieces may not outlast their action: a pair (F of a, backward
// of b) lasts f_a + d_b - saving >= f_a + d_b - Sr, so every F piece is shortened by Sr (when Sr <=
// every f of the rank), else both F and I pieces by Sr.
Time one_machine_term(const Bound& b, int r, const RankFigures& x) {
  Time fmin = kBig;
  for (int st : b.held[r]) fmin = std::min(fmin, b.sc(st).f);
  std::vector<Piece> pieces;
  pieces.reserve(static_cast<std::size_t>(x.nr) * 3);
  for (int st : b.held[r]) {
    const SliceCosts& a = b.sc(st);
    const Time pf = std::max<Time>(0, a.f - x.Sr);
    const Time pi = std::max<Time>(0, x.Sr <= fmin ? a.input_grad() : a.input_grad() - x.Sr);
    const Time pw = a.w;
    Time w_head = 0;
    for (int k = 0; k < b.mbp; ++k) {
      const int last_k = b.mbp - 1 - k;  // this op is the last_k-th last of its kind
      pieces.push_back({b.rF[b.at(st, k)], pf, b.qF[b.at(st, last_k)]});
      pieces.push_back(
          {b.rB[b.at(st, k)], pi, std::max(b.qB[b.at(st, last_k)], pw + static_cast<Time>(last_k) * b.bw[st])});
      w_head = std::max(k > 0 ? w_head + pw : 0, b.rB[b.at(st, k)] + std::min(b.ie[st], pi));
      pieces.push_back({w_head, pw, static_cast<Time>(last_k) * pw});
    }
  }
  return jackson(std::move(pieces));
}

// 6. Cap window: no chunk of the rank is freed before E, so before E at most K F's start, at most
// K backwards (of those chunks) and at most one freeing action (W, B or F&B; it ends at or after
// E, so it is the last to start). What runs before E is at most the work released by any tau plus
// E - tau; the rest of the rank's work runs after E. Returns what can run before E.
Time cap_window_before(const Bound& b, int r, const RankFigures& x, int K, Time E) {
  std::vector<std::pair<Time, int>> rel;  // (head, 0 F / 1 backward / 2 freeing)
  for (int st : b.held[r])
    for (int k = 0; k < b.mbp; ++k) {
      if (b.rF[b.at(st, k)] < E) rel.emplace_back(b.rF[b.at(st, k)], 0);
      if (b.rB[b.at(st, k)] < E) rel.emplace_back(b.rB[b.at(st, k)], 1);
    }
  if (x.first_bwd < E) rel.emplace_back(x.first_bwd, 2);
  std::sort(rel.begin(), rel.end());
  // For each tau (a release time, or E), what runs in [fill, tau) is at most tau - fill and at
  // most the work released before tau; what runs in [tau, E) at most E - tau.
  Time before = E - x.fill;  // tau = fill: nothing released earlier
  int nf = 0, nb = 0;
  bool fr = false;
  auto released = [&] { return std::min(nf, K) * x.fmax + std::min(nb, K) * x.imax + (fr ? x.freemax : 0); };
  for (std::size_t i = 0; i < rel.size(); ++i) {
    const auto& [tau, kind] = rel[i];
    if (i == 0 || rel[i - 1].first != tau)
      before = std::min(before, std::min(released(), tau - x.fill) + (E - tau));  // released before tau
    if (kind == 0) ++nf;
    if (kind == 1) ++nb;
    if (kind == 2) fr = true;
  }
  return std::min(before, std::min(released(), E - x.fill));  // tau = E
}

struct Drain {
  Time E, G, work, before, after, fill;
};

// 7. Cap drain, the cap window's mirror: from any F's start at least G = min fe + qF[.][0] passes,
// so no F starts after C - G; every chunk with work after C - G is then held at C - G (started,
// not freed), at most K of them. So after C - G the rank runs at most one action with an F (which
// started by C - G) and the backwards and W's of K chunks (at most a full b each). When C >= E + G
// (the windows do not overlap), what is not done before E nor after C - G runs in between.
// A pair straddling C - G is its F plus a backward of a held chunk, which the chunks' b already
// count (a pair lasts no longer than its parts unless its saving is negative).
Drain cap_drain(const Bound& b, int r, const RankFigures& x, int K, Time E, Time before) {
  Time G = kBig, fact = x.fmax, bfull = 0;
  for (int st : b.held[r]) {
    G = std::min(G, b.fe[st] + b.qF[b.at(st, 0)]);
    bfull = std::max(bfull, b.sc(st).b);
    for (int o : b.held[r])
      for (OpKind k : {OpKind::I, OpKind::B})
        fact = std::max(fact, x.fmax + pair_duration(b.sc(st), b.sc(o), k) - b.sc(st).f - op_duration(b.sc(o), k));
  }
  const Time after = std::min(G, fact + static_cast<Time>(K) * bfull);
  return {E, G, x.least_work, before, after, x.fill};
}

// The terms of one rank into `out`; its drain (when the cap binds) into `drains`.
void rank_terms(const Bound& b, int r, int K, LowerBoundTerms& out, std::vector<Drain>& drains) {
  const RankFigures x = rank_figures(b, r);
  // 2. Rank work (the old bound 1): nothing before the rank's first forward can arrive, then all
  // its work on one stream, each pair saving at most Sr.
  out.rank_work = std::max(out.rank_work, x.fill + x.least_work);
  if (x.Sr > 0) out.pair_fill = std::max(out.pair_fill, pair_fill_term(b, r, x));
  out.one_machine = std::max(out.one_machine, one_machine_term(b, r, x));
  if (K <= 0 || K >= x.nr) return;  // the cap binds only below the rank's chunk count
  // 5. Little's law: the rank holds at most K chunks at once and each chunk at least H, from the
  // rank's first F to its last free: K (makespan - fill) >= sum of H.
  out.little = std::max(out.little, x.fill + ceil_div(x.hold_sum, K));
  Time E = kBig;
  for (int st : b.held[r]) E = std::min(E, b.rF[b.at(st, 0)] + b.H[st]);
  const Time before = cap_window_before(b, r, x, K, E);
  out.cap_fill = std::max(out.cap_fill, E + std::max<Time>(0, x.least_work - before));
  drains.push_back(cap_drain(b, r, x, K, E, before));
}

}  // namespace

LowerBoundTerms lower_bound_terms(const Schedule& s, const SimCosts& c, double cap_shares) {
  LowerBoundTerms out;
  Bound b(s, c);
  if (b.mbp <= 0 || b.NS == 0) return out;
  least_durations(b);
  heads_tails_trips(b);

  // 1. Chain (the old bound 2, with least durations): one micro-batch's forwards, its input grads
  // back, then the first stage's W (or a B there).
  for (int pipe = 0; pipe < s.num_pipes; ++pipe) {
    const int st0 = pipe * b.S;
    out.chain = std::max(out.chain, b.fe[st0] + b.D[st0] + b.bw[st0]);
  }

  // The cap terms (6, 7) count a share held until its W; where a slice frees part of it at its I
  // (SliceCosts::w_hold < 1, the search's cap then counts less), they are left out: still a bound.
  const bool whole_shares =
      std::all_of(c.slice.begin(), c.slice.end(), [](const SliceCosts& x) { return x.w_hold >= 1; });
  const int K = cap_shares > 0 && whole_shares ? static_cast<int>(cap_shares * s.chunks_per_rank + 1e-9) : 0;
  std::vector<Drain> drains;
  for (int r = 0; r < s.pp; ++r)
    if (!b.held[r].empty()) rank_terms(b, r, K, out, drains);
  out.total = std::max({out.chain, out.rank_work, out.pair_fill, out.one_machine, out.little, out.cap_fill});
  // The drain needs the windows apart: C >= E + G, which the other terms must already prove
  // (else only the drain alone, when C >= fill + G is proven).
  for (const Drain& d : drains) {
    if (out.total >= d.E + d.G)
      out.cap_drain = std::max(out.cap_drain, d.E + d.G + std::max<Time>(0, d.work - d.before - d.after));
    else if (out.total >= d.fill + d.G)
      out.cap_drain = std::max(out.cap_drain, d.fill + d.work + std::max<Time>(0, d.G - d.after));
  }
  out.total = std::max(out.total, out.cap_drain);
  return out;
}

Time lower_bound(const Schedule& s, const SimCosts& c, double cap_shares) {
  return lower_bound_terms(s, c, cap_shares).total;
}

}  // namespace ppsim
