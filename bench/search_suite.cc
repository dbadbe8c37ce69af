// The schedule-search suite (issue 21; figures in docs/PERFORMANCE.md): cost profiles x (P, M,
// memory cap); for each, the best of the nine families that fits the cap, the searched schedule,
// the lower bound (docs/SEARCH.md), the gain and the gap, and the search's wall time.
// Usage: search_suite [threads] [time_limit_s] [csv_dir] [exact_limit_s] [cases]  (defaults 2, 10,
// none, 60, all; the exact method (CBC, when built) runs on cases with P x M <= 16, on each
// placement whose lower bound is below the searched makespan (the others cannot beat it), looking
// only for schedules at or below the searched makespan; csv_dir: write each searched schedule as
// <dir>/<case>.csv; cases: e.g. "9,10,20"). Environment: PPSIM_SUITE_TERMS=1 prints every
// placement's bound terms and CBC's status to stderr; PPSIM_SWAP_ROUNDS=n sets the local
// search's rounds per chain (default: from P and M) for experiments; PPSIM_SUITE_SEED=n the
// search's seed (default 1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "core/time.h"
#include "schedules/notation.h"
#include "search/exact.h"
#include "search/search.h"
#include "sim/engine.h"

using namespace ppsim;

namespace {

struct Profile {
  std::string name;
  double f, b, w;        // one rank's share, full backward b = input grad + W
  double head = 0;       // extra F/b/W-proportional cost of the last slice (the head and loss)
  double latency = 0;    // per transfer
  double fb_saving = 0;  // pair saving of a whole-stage chunk
};

struct Case {
  Profile prof;
  int pp, m;
  double cap;  // rank shares; 0 = none
};

std::string fmt_units(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

Time ticks(double u) { return static_cast<Time>(u * static_cast<double>(kTicksPerUnit) + 0.5); }

// Per-slice costs for any placement: each chunk is 1/chunks of a rank's share; the last slice
// carries `head` times the share's cost on top (the same absolute work for every placement).
SimCosts costs_for(const Profile& p, const Schedule& s) {
  SimCosts c;
  const int v = s.chunks_per_rank;
  for (int i = 0; i < s.stages_per_pipe; ++i) {
    const double k = 1.0 / v + (i == s.stages_per_pipe - 1 ? p.head : 0.0);
    SliceCosts sc;
    sc.f = ticks(p.f * k);
    sc.b = ticks(p.b * k);
    sc.w = ticks(p.w * k);
    sc.fb = p.fb_saving > 0 ? sc.f + sc.b - ticks(p.fb_saving * k) : 0;
    c.slice.push_back(sc);
  }
  c.link.latency = ticks(p.latency);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const double limit = argc > 2 ? std::atof(argv[2]) : 10;
  const std::string dir = argc > 3 ? argv[3] : "";
  const Profile uniform{"F=B=W (F=1,B=2,W=1)", 1, 2, 1};
  const Profile f_heavy{"F>B (F=2,B=2,W=1)", 2, 2, 1};
  const Profile w_heavy{"W-heavy (F=1,B=3,W=2)", 1, 3, 2};
  const Profile b2f{"B=2F,W=F (F=1,B=3,W=1)", 1, 3, 1};
  const Profile head{"heavy last stage (+50%)", 1, 2, 1, 0.5};
  const Profile lat{"latency 0.2 (F=1,B=2,W=1)", 1, 2, 1, 0, 0.2};
  const Profile pair{"F&B saving 0.5", 1, 2, 1, 0, 0, 0.5};
  const std::vector<Case> cases = {
      {uniform, 4, 4, 0},    {uniform, 4, 16, 4}, {uniform, 8, 32, 8}, {uniform, 8, 64, 0}, {f_heavy, 8, 32, 8},
      {w_heavy, 8, 32, 8},   {b2f, 8, 32, 8},     {head, 8, 32, 8},    {lat, 8, 32, 8},     {uniform, 8, 32, 4},
      {w_heavy, 16, 64, 16}, {head, 16, 64, 16},  {lat, 16, 64, 0},    {pair, 8, 32, 9},    {uniform, 16, 128, 8},
      {b2f, 4, 32, 0},       {w_heavy, 4, 4, 4},  {head, 4, 4, 4},     {lat, 4, 4, 0},      {f_heavy, 4, 4, 2},
  };
  const double exact_limit = argc > 4 ? std::atof(argv[4]) : 60;
  std::vector<int> only;  // argv[5]: comma-separated case numbers (default: all)
  if (argc > 5) {
    std::string list = argv[5];
    for (std::size_t at = 0; at < list.size();) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      only.push_back(std::atoi(list.substr(at, comma - at).c_str()));
      at = comma + 1;
    }
  }
  std::printf(
      "| # | profile | P | M | cap | best family (makespan, peak) | searched (makespan, peak) | gain | lower bound (set by) | "
      "gap to bound | exact (no pairs) | gap to exact | s |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  int idx = 0, ran = 0, faster = 0, never_slower = 0, within2 = 0, within_exact = 0, meets = 0;
  for (const Case& c : cases) {
    ++idx;
    if (!only.empty() && std::find(only.begin(), only.end(), idx) == only.end()) continue;
    ++ran;
    SearchRequest req;
    req.pp = c.pp;
    req.microbatches = c.m;
    req.placements = parse_placements("all");
    req.memory_cap = c.cap;
    req.costs = [&](const Schedule& s) { return costs_for(c.prof, s); };
    const char* seed = std::getenv("PPSIM_SUITE_SEED");
    req.seed = seed != nullptr ? std::strtoull(seed, nullptr, 10) : 1;
    req.time_limit_s = limit;
    req.threads = threads;
    if (const char* sr = std::getenv("PPSIM_SWAP_ROUNDS")) req.swap_rounds = std::atoi(sr);
    const auto t0 = std::chrono::steady_clock::now();
    const SearchResult r = search_schedule(req);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double u = static_cast<double>(kTicksPerUnit);
    const double fam = r.best_family.valid ? r.best_family.sim.makespan() / u : 0;
    const double got = r.best.sim.makespan() / u;
    const double lb = r.lower_bound / u;
    // Which placement and which term of docs/SEARCH.md set the bound (the least placement's
    // largest term); PPSIM_SUITE_TERMS=1 prints every placement's terms to stderr.
    std::string bound_by;
    {
      Time least = 0;
      for (Placement p : req.placements) {
        if (p == Placement::bidirectional && c.m % 2 != 0) continue;
        const Schedule layout = placement_layout(p, c.pp, c.m);
        const LowerBoundTerms t = lower_bound_terms(layout, costs_for(c.prof, layout), c.cap);
        const std::pair<const char*, Time> named[] = {{"chain", t.chain},          {"rank work", t.rank_work},
                                                      {"pair fill", t.pair_fill},  {"one-machine", t.one_machine},
                                                      {"Little", t.little},        {"cap fill", t.cap_fill},
                                                      {"cap drain", t.cap_drain}};
        const char* top = named[0].first;  // the first term (in this order) that reaches the total
        for (const auto& [name, v] : named)
          if (v == t.total) {
            top = name;
            break;
          }
        if (std::getenv("PPSIM_SUITE_TERMS") != nullptr) {
          std::fprintf(stderr, "case %d %s:", idx, placement_name(p));
          for (const auto& [name, v] : named) std::fprintf(stderr, " %s %.3f", name, v / u);
          std::fprintf(stderr, "\n");
        }
        if (bound_by.empty() || t.total < least) {
          least = t.total;
          bound_by = std::string(placement_name(p)) + ": " + top;
        }
      }
    }
    const double gain = r.best_family.valid ? (fam - got) / fam * 100 : 0;
    const double gap = (got - lb) / lb * 100;
    // The exact method on small cases: the best proven optimum over the placements (no pairs).
    std::string exact = "-", exact_gap = "-";
    if (c.pp * c.m <= 16 && exact_available()) {
      Time best = 0;
      bool all_optimal = true;
      for (Placement p : req.placements) {
        if (p == Placement::bidirectional && c.m % 2 != 0) continue;
        const Schedule layout = placement_layout(p, c.pp, c.m);
        const SimCosts pc = costs_for(c.prof, layout);
        const int cap = c.cap > 0 ? static_cast<int>(c.cap * layout.chunks_per_rank) : 0;
        if (lower_bound(layout, pc, c.cap) >= r.best.sim.makespan()) {
          // Settled without CBC: no schedule of this placement beats the searched one.
          if (best == 0 || r.best.sim.makespan() < best) best = r.best.sim.makespan();
          continue;
        }
        // Only schedules at or below the searched makespan are sought: a proof that there are
        // none settles the placement at the searched makespan, like a bound that reaches it.
        const ExactResult e = exact_schedule(layout, pc, cap, exact_limit, r.best.sim.makespan());
        if (!e.solved) {
          if (e.above_upper) {
            if (best == 0 || r.best.sim.makespan() < best) best = r.best.sim.makespan();
          } else {
            all_optimal = all_optimal && e.status.find("infeasible") != std::string::npos;
          }
          if (std::getenv("PPSIM_SUITE_TERMS") != nullptr)
            std::fprintf(stderr, "case %d %s exact: %s\n", idx, placement_name(p), e.status.c_str());
          continue;
        }
        if (std::getenv("PPSIM_SUITE_TERMS") != nullptr)
          std::fprintf(stderr, "case %d %s exact: %s, %.3f\n", idx, placement_name(p), e.status.c_str(),
                       e.objective / u);
        all_optimal = all_optimal && e.optimal;
        const Time mk = simulate(e.schedule, pc).makespan();
        if (best == 0 || mk < best) best = mk;
      }
      if (best > 0) {
        exact = fmt_units(best / u) + (all_optimal ? "" : " (not proven)");
        exact_gap = fmt_units((got - best / u) / (best / u) * 100) + "%";
        within_exact += all_optimal && got <= best / u * 1.02;
        meets += gap > 2.0 && all_optimal && got <= best / u * 1.02;
      }
    }
    faster += gain >= 1.0;
    never_slower += !r.best_family.valid || got <= fam;
    within2 += gap <= 2.0;
    meets += gap <= 2.0;
    char family[96] = "(none fits)", gain_s[16] = "-";
    if (r.best_family.valid) {
      std::snprintf(family, sizeof family, "%s %.3f, %.3g", r.best_family.name.c_str(), fam, r.best_family.peak_shares);
      std::snprintf(gain_s, sizeof gain_s, "%.1f%%", gain);
    }
    std::printf("| %d | %s | %d | %d | %s | %s | %.3f, %.3g (%s) | %s | %.3f (%s) | %.1f%% | %s | %s | %.1f%s |\n", idx,
                c.prof.name.c_str(), c.pp, c.m, c.cap > 0 ? std::to_string(static_cast<int>(c.cap)).c_str() : "none",
                family, got, r.best.peak_shares, placement_name(placement_of(r.best.schedule)), gain_s, lb,
                bound_by.c_str(), gap, exact.c_str(), exact_gap.c_str(), secs, r.time_limited ? " (limit)" : "");
    std::fflush(stdout);
    if (!dir.empty()) std::ofstream(dir + "/case" + std::to_string(idx) + ".csv") << schedule_to_csv(r.best.schedule);
  }
  std::printf(
      "\nnever slower: %d/%d; faster by >= 1%%: %d/%d; within 2%% of the bound: %d/%d; within 2%% of a proven exact "
      "optimum: %d; within 2%% of the bound or of a proven optimum: %d/%d\n",
      never_slower, ran, faster, ran, within2, ran, within_exact, meets, ran);
  return 0;
}
