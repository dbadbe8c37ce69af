// Schedule search (issue 21; docs/SEARCH.md): per-rank orders of F, I, W (and F&B pairs on the
// bidirectional placement) for one or all placements, under a per-rank activation cap, for the
// caller's own costs. Candidates come from a greedy list scheduler run under many priority
// rules (Zero Bubble's automatic scheduler is one of them), then swaps and short moves of one
// rank's actions (timed by a lighter timer where it gives the engine's times); each schedule
// kept is checked by the validator and timed by the engine (src/sim), and the reported makespan
// is always the engine's.
//
// Not obvious:
// - The cap counts activations in rank shares: one micro-batch of a whole stage is 1, a chunk
//   of a V (half a rank's layers) is 1/2, so placements compare on the same memory. Parameter
//   copies (2 on the bidirectional placement) are reported, not capped.
// - Deterministic for a seed as long as the time limit does not bind: the work is a fixed list
//   of trials, each with its own seed, results kept per slot and reduced in slot order; a trial
//   that the deadline skips is the only source of run-to-run difference (`time_limited`).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace ppsim {

enum class Placement { linear, v_shape, bidirectional };
const char* placement_name(Placement p);
// "linear", "v", "bidirectional", "torch" (linear and v: one parameter copy, the placements
// PyTorch's pipelining runs) or "all"; InputError (usage) otherwise.
std::vector<Placement> parse_placements(const std::string& name);
Placement placement_of(const Schedule& s);

struct SearchRequest {
  int pp = 0;
  int microbatches = 0;  // total; the bidirectional placement splits them over two pipes
  std::vector<Placement> placements;
  // Families holding two parameter copies (DualPipe, Chimera) are not compared either (--placement
  // torch: what PyTorch's pipelining runs).
  bool one_parameter_copy = false;
  double memory_cap = 0;  // activations per rank, in rank shares (see above); 0 = no cap
  // With memory_cap 0: cap at the best family's peak (in rank shares), the nine families first
  // simulated without a cap, so that a searched win is at equal memory (SearchResult::memory_cap).
  bool cap_at_best_family = false;
  // Costs for a schedule of any placement (per slice: Schedule::slice). Called once per
  // placement and once per family; must be thread-safe to call.
  std::function<SimCosts(const Schedule&)> costs;
  std::uint64_t seed = 1;
  double time_limit_s = 10;  // wall clock for the whole search
  int threads = 1;
  // What "faster" means: the makespan, or (span) the longest rank's own span, first start to last
  // end: the step period under Zero Bubble's optimizer post-validation (parallel.post_validation),
  // where each rank starts the next step when its own work ends.
  bool objective_span = false;
  int swap_rounds = 0;  // local-search moves per chain; 0 = from P and M (docs/SEARCH.md)
  // Called on the calling thread about every 200 ms: trials done, trials in all, best makespan.
  std::function<void(std::uint64_t, std::uint64_t, Time)> progress;
};

// One checked and simulated schedule.
struct Candidate {
  std::string name;  // family name, or "searched" with its origin
  Schedule schedule;
  SimResult sim;           // the engine's run (with its makespan)
  double peak_shares = 0;  // max over ranks of peak activations, in rank shares
  bool valid = false;
};

struct SearchResult {
  Candidate best;         // the searched schedule (name "searched")
  Candidate best_family;  // the best of the nine families under the cap (valid=false: none fits)
  std::vector<std::pair<std::string, std::string>> family_notes;  // family -> why not compared
  Time lower_bound = 0;                                           // docs/SEARCH.md
  std::uint64_t evaluated = 0;                                    // candidates simulated
  std::uint64_t trials = 0, trials_run = 0;
  bool time_limited = false;
  double seconds = 0;
  double memory_cap = 0;  // the cap used (rank shares; 0 = none)
};

// Throws InputError when no schedule of the placements fits the cap.
SearchResult search_schedule(const SearchRequest& req);

// The lower bound of docs/SEARCH.md for one layout (src/search/bound.cc): no schedule of the
// layout whose peak activations stay within cap_shares (rank shares; 0 = no cap) runs faster in
// the engine with these costs (without the overlap model, shared devices or per-rank speeds:
// then it is an estimate). Each term is one argument, worked in docs/SEARCH.md; total is their
// maximum. Exposed for tests.
struct LowerBoundTerms {
  Time chain = 0;        // one micro-batch's forwards, input grads back and first W
  Time rank_work = 0;    // max over ranks: fill + all work (pairs saving their most)
  Time pair_fill = 0;    // ... with pairs impossible before the rank's first backward
  Time one_machine = 0;  // max over ranks: Jackson's preemptive bound with heads and tails
  Time little = 0;       // cap: Little's law (each chunk held for its least round trip)
  Time cap_fill = 0;     // cap: no free before the first round trip, so at most K F's
  Time cap_drain = 0;    // cap: ... and no F in the last least tail, so at most K chunks' backwards
  Time total = 0;
};
// Least time for a value to cross from stage `from` to stage `to` (0 within a rank): latency +
// occupancy; link contention only delays a transfer.
Time hop_time(const Schedule& layout, const SimCosts& costs, int from, int to, bool forward);
LowerBoundTerms lower_bound_terms(const Schedule& layout, const SimCosts& costs, double cap_shares = 0);
Time lower_bound(const Schedule& layout, const SimCosts& costs, double cap_shares = 0);
// An empty schedule (no actions) with the placement's layout.
Schedule placement_layout(Placement p, int pp, int microbatches);
// Peak activations held by a schedule's ranks, in chunks: +1 at an F, -1 at a full B's end, and
// with the backward split -(1 - w_hold) at an I's end and -w_hold at its W's end (SliceCosts::
// w_hold, the Zero Bubble paper's M_W / M_B: the memory its own scheduler caps). A rank runs its
// actions in order, so this does not depend on timing. peak_shares: the same in rank shares.
double held_peak_chunks(const Schedule& s, const SimCosts& costs);
double peak_shares(const Schedule& s, const SimCosts& costs);

// The greedy list scheduler (exposed for tests): builds every rank's order for `layout` by
// simulating the ranks with the costs' op durations and link latency, choosing at each step the
// earliest-startable action by the rule. cap_chunks = per-rank activation cap in chunks (0 =
// none), counted as held_peak_chunks counts. Returns a schedule with empty ranks when the rule
// cannot finish under the cap.
struct ListRule {
  bool backward_first = true;  // an available I/B before an available F
  bool pairs = false;          // pair an available F with an available backward (F&B)
  bool w_fills_only = true;    // W only when nothing else is available (else W before F)
  bool deep_first = true;      // among equal-priority stages: the deeper stage first
  int max_inflight = 0;        // F ahead of their backward per rank (0: cap only)
  // Under a cap, an F keeps one slot free for each stage of its rank that lies deeper in its
  // pipe (a V's far chunk, the other pipe's stage), so that the ranks cannot fill their caps
  // with shallow forwards that wait on each other (the deadlock of a V or two pipes at cap P/2).
  bool reserve_deeper = true;
  std::uint64_t noise_seed = 0;  // 0: deterministic ties; else random ties and rule flips
  // Steady injection: a first stage's F of micro-batch m (per pipe) is ready no earlier than
  // max(0, m - inject_free) * inject_gap (0: no spacing). Under a tight cap, greedy forwards
  // fill the cap in a burst and the pipe runs in waves; spacing them by the busiest rank's work
  // per micro-batch lets every op run as its input arrives (docs/SEARCH.md).
  Time inject_gap = 0;
  int inject_free = 0;
  // Count every share as held until its W (w_hold taken as 1): the orders a whole-share cap
  // gives, which also fit the costs' own (fractional) cap. The search runs each rule both ways
  // when a slice frees part of its share at its I, so that a looser count never loses a schedule
  // the stricter one finds.
  bool whole_shares = false;
};
Schedule list_schedule(const Schedule& layout, const SimCosts& costs, double cap_chunks, const ListRule& rule);

}  // namespace ppsim
