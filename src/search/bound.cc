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

}  // namespace

LowerBoundTerms lower_bound_terms(const Schedule& s, const SimCosts& c, double cap_shares) {
  const int S = s.stages_per_pipe;
  const int NS = s.num_stages();
  const int mbp = s.mb_per_pipe();
  LowerBoundTerms out;
  if (mbp <= 0 || NS == 0) return out;
  std::vector<std::vector<int>> held(s.pp);
  for (int st = 0; st < NS; ++st) held[s.stage_rank[st]].push_back(st);
  auto sc = [&](int st) -> const SliceCosts& { return c.slice[s.slice[st]]; };
  auto hopf = [&](int st) { return hop_time(s, c, st, st + 1, true); };   // st -> st+1
  auto hopb = [&](int st) { return hop_time(s, c, st, st - 1, false); };  // st -> st-1

  // Least durations of the action carrying an op, pairs included (a pair F of a with a
  // backward of b, both of one rank, lasts pair_duration(a, b)): fe for an F, ie for an input
  // grad (I, or the I part of a B), be for a full B; S_r the most one pair on rank r saves.
  std::vector<Time> fe(NS), ie(NS), be(NS), bw(NS);
  std::vector<Time> save(s.pp, 0);
  for (int st = 0; st < NS; ++st) {
    const SliceCosts& a = sc(st);
    fe[st] = a.f;
    ie[st] = a.input_grad();
    be[st] = a.b;
    for (int o : held[s.stage_rank[st]]) {
      const SliceCosts& q = sc(o);
      fe[st] = std::min(fe[st], pair_duration(a, q, OpKind::I));
      ie[st] = std::min(ie[st], pair_duration(q, a, OpKind::I));
      be[st] = std::min(be[st], pair_duration(q, a, OpKind::B));
      Time& sv = save[s.stage_rank[st]];
      sv = std::max(sv, a.f + q.input_grad() - pair_duration(a, q, OpKind::I));
      sv = std::max(sv, a.f + q.b - pair_duration(a, q, OpKind::B));
    }
    fe[st] = std::max<Time>(fe[st], 0);
    ie[st] = std::max<Time>(ie[st], 0);
    be[st] = std::max<Time>(be[st], 0);
    bw[st] = std::min(be[st], ie[st] + a.w);  // a backward with its W: B, or I then W
  }

  // Heads: rF[st][k] is the earliest start of the k-th F of stage st (in start order; one
  // rank runs one action at a time, so start order is end order), rB of its k-th backward.
  // Tails: qF[st][k] / qB[st][k] the least time from the end of the k-th-last F / backward
  // action of st to the makespan.
  auto at = [&](int st, int k) { return static_cast<std::size_t>(st) * mbp + k; };
  const std::size_t n = static_cast<std::size_t>(NS) * mbp;
  std::vector<Time> rF(n, 0), rB(n, 0), qF(n, 0), qB(n, 0);
  for (int pipe = 0; pipe < s.num_pipes; ++pipe) {
    for (int j = 0; j < S; ++j) {
      const int st = pipe * S + j;
      for (int k = 0; k < mbp; ++k) {
        Time h = k > 0 ? rF[at(st, k - 1)] + fe[st] : 0;
        if (j > 0) h = std::max(h, rF[at(st - 1, k)] + fe[st - 1] + hopf(st - 1));
        rF[at(st, k)] = h;
      }
    }
    for (int j = S - 1; j >= 0; --j) {
      const int st = pipe * S + j;
      for (int k = 0; k < mbp; ++k) {
        Time h = rF[at(st, k)] + fe[st];
        if (k > 0) h = std::max(h, rB[at(st, k - 1)] + ie[st]);
        if (j < S - 1) h = std::max(h, rB[at(st + 1, k)] + ie[st + 1] + hopb(st + 1));
        rB[at(st, k)] = h;
      }
    }
    // Backward tails, from the first stage up: the k later backwards of st (each with its W)
    // run on this rank; the k+1 last gradients go on upstream.
    for (int j = 0; j < S; ++j) {
      const int st = pipe * S + j;
      for (int k = 0; k < mbp; ++k) {
        Time q = static_cast<Time>(k) * bw[st];
        if (k > 0) q = std::max(q, ie[st] + qB[at(st, k - 1)]);
        if (j > 0)
          q = std::max(q, hopb(st) + std::max(ie[st - 1] + qB[at(st - 1, k)], static_cast<Time>(k + 1) * bw[st - 1]));
        qB[at(st, k)] = q;
      }
    }
    for (int j = S - 1; j >= 0; --j) {
      const int st = pipe * S + j;
      for (int k = 0; k < mbp; ++k) {
        Time q = k > 0 ? fe[st] + qF[at(st, k - 1)] : 0;
        if (j < S - 1)
          q = std::max(q, hopf(st) + fe[st + 1] + qF[at(st + 1, k)]);
        else
          q = std::max(q, std::max(ie[st] + qB[at(st, k)], static_cast<Time>(k + 1) * bw[st]));
        qF[at(st, k)] = q;
      }
    }
  }

  // Downstream round trip D[st]: from the end of an F of st until the gradient of the same
  // micro-batch is back at st. H[st]: least time a chunk of st holds its activation (from its
  // F's start to its W's or B's end).
  std::vector<Time> D(NS, 0), H(NS, 0);
  for (int pipe = 0; pipe < s.num_pipes; ++pipe) {
    Time d = 0;
    for (int j = S - 1; j >= 0; --j) {
      const int st = pipe * S + j;
      D[st] = d;
      H[st] = fe[st] + d + bw[st];
      if (j > 0) d += hopf(st - 1) + fe[st] + ie[st] + hopb(st);
    }
  }

  // 1. Chain (the old bound 2, with least durations): one micro-batch's forwards, its input
  // grads back, then the first stage's W (or a B there).
  for (int pipe = 0; pipe < s.num_pipes; ++pipe) {
    const int st0 = pipe * S;
    out.chain = std::max(out.chain, fe[st0] + D[st0] + bw[st0]);
  }

  // The cap terms (6, 7) count a share held until its W; where a slice frees part of it at its I
  // (SliceCosts::w_hold < 1, the search's cap then counts less), they are left out: still a bound.
  const bool whole_shares = std::all_of(c.slice.begin(), c.slice.end(), [](const SliceCosts& x) { return x.w_hold >= 1; });
  const int K = cap_shares > 0 && whole_shares ? static_cast<int>(cap_shares * s.chunks_per_rank + 1e-9) : 0;
  struct Drain {
    Time E, G, work, before, after, fill;
  };
  std::vector<Drain> drains;
  for (int r = 0; r < s.pp; ++r) {
    if (held[r].empty()) continue;
    const Time Sr = save[r];
    Time fill = kBig, work = 0, fmax = 0, imax = 0, freemax = 0, first_bwd = kBig, hold_sum = 0;
    Time pair_fi_max = 0;
    const Time nr = static_cast<Time>(held[r].size()) * mbp;  // chunks (F's, backwards) of the rank
    for (int st : held[r]) {
      const SliceCosts& a = sc(st);
      fill = std::min(fill, rF[at(st, 0)]);
      first_bwd = std::min(first_bwd, rB[at(st, 0)]);
      work += static_cast<Time>(mbp) * (a.f + a.b);
      fmax = std::max(fmax, a.f);
      imax = std::max(imax, a.input_grad());
      freemax = std::max({freemax, a.w, a.b});
      for (int o : held[r]) {
        pair_fi_max = std::max(pair_fi_max, pair_duration(sc(o), a, OpKind::I));
        freemax = std::max(freemax, pair_duration(sc(o), a, OpKind::B));
      }
      hold_sum += static_cast<Time>(mbp) * H[st];
    }
    imax = std::max(imax, pair_fi_max - fmax);  // an F slot plus a backward slot holds any pair
    const Time least_work = std::max<Time>(work - Sr * nr, 0);  // at most nr pairs

    // 2. Rank work (the old bound 1): nothing before the rank's first forward can arrive, then
    // all its work on one stream, each pair saving at most Sr.
    out.rank_work = std::max(out.rank_work, fill + least_work);

    // 3. Pairs need a backward: before first_bwd the rank runs single F's only (or idles). If u
    // F's start before it, at most nr - u pairs remain, and the window idles for at least
    // (first_bwd - fill) - u * fmax. Minimised over the u the heads allow.
    if (Sr > 0) {
      const Time window = first_bwd - fill;
      Time u_max = 0;
      for (int st : held[r])
        for (int k = 0; k < mbp; ++k) u_max += rF[at(st, k)] < first_bwd;
      u_max = std::min(u_max, nr);
      Time best = kBig;
      for (Time u = 0; u <= u_max; ++u)
        best = std::min(best, std::max<Time>(0, work - Sr * (nr - u)) + std::max<Time>(0, window - u * fmax));
      out.pair_fill = std::max(out.pair_fill, fill + best);
    }

    // 4. One-machine relaxation: every op of the rank as a preemptible piece with its head and
    // tail, a B as its I piece then its W piece. Pieces may not outlast their action: a pair
    // (F of a, backward of b) lasts f_a + d_b - saving >= f_a + d_b - Sr, so every F piece is
    // shortened by Sr (when Sr <= every f of the rank), else both F and I pieces by Sr.
    {
      Time fmin = kBig;
      for (int st : held[r]) fmin = std::min(fmin, sc(st).f);
      std::vector<Piece> pieces;
      pieces.reserve(static_cast<std::size_t>(nr) * 3);
      for (int st : held[r]) {
        const SliceCosts& a = sc(st);
        const Time pf = std::max<Time>(0, a.f - Sr);
        const Time pi = std::max<Time>(0, Sr <= fmin ? a.input_grad() : a.input_grad() - Sr);
        const Time pw = a.w;
        Time w_head = 0;
        for (int k = 0; k < mbp; ++k) {
          const int last_k = mbp - 1 - k;  // this op is the last_k-th last of its kind
          pieces.push_back({rF[at(st, k)], pf, qF[at(st, last_k)]});
          pieces.push_back(
              {rB[at(st, k)], pi, std::max(qB[at(st, last_k)], pw + static_cast<Time>(last_k) * bw[st])});
          w_head = std::max(k > 0 ? w_head + pw : 0, rB[at(st, k)] + std::min(ie[st], pi));
          pieces.push_back({w_head, pw, static_cast<Time>(last_k) * pw});
        }
      }
      out.one_machine = std::max(out.one_machine, jackson(std::move(pieces)));
    }

    if (K <= 0 || K >= nr) continue;  // the cap binds only below the rank's chunk count
    // 5. Little's law: the rank holds at most K chunks at once and each chunk at least H, from
    // the rank's first F to its last free: K (makespan - fill) >= sum of H.
    out.little = std::max(out.little, fill + ceil_div(hold_sum, K));

    // 6. Cap window: no chunk of the rank is freed before E, so before E at most K F's start,
    // at most K backwards (of those chunks) and at most one freeing action (W, B or F&B; it
    // ends at or after E, so it is the last to start). What runs before E is at most the work
    // released by any tau plus E - tau; the rest of the rank's work runs after E.
    Time E = kBig;
    for (int st : held[r]) E = std::min(E, rF[at(st, 0)] + H[st]);
    std::vector<std::pair<Time, int>> rel;  // (head, 0 F / 1 backward / 2 freeing)
    for (int st : held[r])
      for (int k = 0; k < mbp; ++k) {
        if (rF[at(st, k)] < E) rel.emplace_back(rF[at(st, k)], 0);
        if (rB[at(st, k)] < E) rel.emplace_back(rB[at(st, k)], 1);
      }
    if (first_bwd < E) rel.emplace_back(first_bwd, 2);
    std::sort(rel.begin(), rel.end());
    // For each tau (a release time, or E), what runs in [fill, tau) is at most tau - fill and
    // at most the work released before tau; what runs in [tau, E) at most E - tau.
    Time before = E - fill;  // tau = fill: nothing released earlier
    int nf = 0, nb = 0;
    bool fr = false;
    auto released = [&] { return std::min(nf, K) * fmax + std::min(nb, K) * imax + (fr ? freemax : 0); };
    for (std::size_t i = 0; i < rel.size(); ++i) {
      const auto& [tau, kind] = rel[i];
      if (i == 0 || rel[i - 1].first != tau)
        before = std::min(before, std::min(released(), tau - fill) + (E - tau));  // released before tau
      if (kind == 0) ++nf;
      if (kind == 1) ++nb;
      if (kind == 2) fr = true;
    }
    before = std::min(before, std::min(released(), E - fill));  // tau = E
    out.cap_fill = std::max(out.cap_fill, E + std::max<Time>(0, least_work - before));

    // 7. Cap drain, the cap window's mirror: from any F's start at least G = min fe + qF[.][0]
    // passes, so no F starts after C - G; every chunk with work after C - G is then held at
    // C - G (started, not freed), at most K of them. So after C - G the rank runs at most one
    // action with an F (which started by C - G) and the backwards and W's of K chunks (at most
    // a full b each). When C >= E + G (the windows do not overlap), what is not done before
    // E nor after C - G runs in between.
    // A pair straddling C - G is its F plus a backward of a held chunk, which the chunks' b
    // already count (a pair lasts no longer than its parts unless its saving is negative).
    Time G = kBig, fact = fmax, bfull = 0;
    for (int st : held[r]) {
      G = std::min(G, fe[st] + qF[at(st, 0)]);
      bfull = std::max(bfull, sc(st).b);
      for (int o : held[r])
        for (OpKind k : {OpKind::I, OpKind::B})
          fact = std::max(fact, fmax + pair_duration(sc(st), sc(o), k) - sc(st).f - op_duration(sc(o), k));
    }
    const Time after = std::min(G, fact + static_cast<Time>(K) * bfull);
    drains.push_back({E, G, least_work, before, after, fill});
  }
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
