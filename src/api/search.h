// `ppsim search` as a library call (the CLI and ppsim.search): the costs for any placement (unit
// times or a config through the cost model), the search (src/search, docs/SEARCH.md), and its
// report: the searched schedule beside the best of the nine families under the same cap, as a
// table, as docs/JSON.md's results, as the schedule file and as an SVG.
//
// Not obvious: without a cap given, the cap is the best family's peak activations, so that a
// searched win is at equal memory; `memory_cap = 0` lifts it (`--memory-cap none`).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/request.h"
#include "report/results.h"
#include "core/schedule.h"
#include "sim/costs.h"
#include "sim/engine.h"

namespace ppsim::api {

struct SearchCall {
  std::string config;  // optional YAML config (costs from the cost model, times in ms)
  std::vector<std::string> sets;
  std::optional<int> pp, microbatches;  // unset: the config's, else 8 and 20
  UnitCosts units;                      // times, latency and the overlap model (off while a2a < 0) without a config
  std::optional<double> memory_cap;  // rank shares; unset: the best family's peak; 0: none
  // The share of a micro-batch's activations still held from its I to its W (SliceCosts::w_hold,
  // the Zero Bubble paper's M_W / M_B), in [0, 1]; unset: 1 with --times, the memory model's with
  // a config.
  std::optional<double> w_hold;
  // torch (the default): linear and V, one parameter copy, as PyTorch's pipelining runs; "all"
  // adds the bidirectional placement (DualPipe's two copies); or one placement.
  std::string placement = "torch";
  std::uint64_t seed = 1;
  double time_limit = 10;
  int threads = 0;
  // What the search minimises: "makespan", "span" (the longest rank's own span, the step period
  // under Zero Bubble's optimizer post-validation) or "" (span when the config sets
  // parallel.post_validation, else makespan).
  std::string objective;
  // Called on the calling thread about every 200 ms: trials done, trials in all, best makespan.
  std::function<void(std::uint64_t, std::uint64_t, Time)> progress;
};

struct SearchOutcome {
  Schedule searched;     // the searched schedule
  Schedule best_family;  // the best family's under the same cap (has_family)
  bool has_family = false;
  TimeScale scale;
  int pp = 0, microbatches = 0;
  std::string placement;
  std::string cap_source;  // "given", "best family" or "none"
  std::vector<ResultRow> rows;  // the searched schedule's, then the best family's (when one fits)
  std::string table;            // the report `ppsim search` prints
  nlohmann::json json;          // docs/JSON.md's results, "search" added
  // The searched schedule as PyTorch's compute-only CSV; the SVG of it beside the best family.
  std::string schedule_csv() const;
  std::string svg() const;
  // The searched schedule's and (has_family) the best family's simulated timelines, named as
  // the rows are: what svg() draws and `search --html` shows.
  struct NamedRun {
    std::string name;
    SimResult sim;
  };
  std::vector<NamedRun> timelines() const;
  SimCosts best_costs, family_costs;
};

// Flag errors: InputError with kExitUsage; no schedule fits the cap: kExitInput.
SearchOutcome search(const SearchCall& call);

}  // namespace ppsim::api
