// The request/result API every client calls (the CLI's compare and simulate, the Python module):
// a request names the schedules (families or an imported schedule; P, M, v), their costs (per-op
// or per-chunk times in units, or a YAML config with --set overrides), and the overlap and link
// settings; run() returns the simulated metrics, memory, timelines and the families it skipped.
//
// Not obvious: a family's own constraint (exit code 3, e.g. "dualpipe needs an even number of
// micro-batches") skips that family when several were asked for; every other error (bad times,
// limits, unknown names) stops the whole request, so a typo is never mistaken for a skip.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/schedule_source.h"
#include "core/timeline.h"
#include "cost/cost_model.h"
#include "report/results.h"

namespace ppsim::api {

// Costs in the user's units, used when no config is given. The times are parsed at the edge
// (api::parse_times, api/options.h), in ticks: kTicksPerUnit per unit.
struct UnitCosts {
  // One rank's share (F=1, B=2, W=1, FB=3 by default); each of v chunks gets 1/v.
  UniformTimes times{kTicksPerUnit, 2 * kTicksPerUnit, kTicksPerUnit, 3 * kTicksPerUnit};
  std::optional<UniformTimes> chunk_times;  // per-chunk times instead (wins when set)
  double p2p_latency = 0;                   // each stage-to-stage transfer, in units
  // Overlap model (off while a2a < 0): docs/OVERLAP.md.
  double a2a = -1;          // one dispatch or combine of one layer
  double attn_share = 0.5;  // share of F, b and W that is attention (the rest MLP/experts)
  int layers = 1;           // layers in one rank's share
  int comm_sms = 20;
  int sms = 132;
};

struct Request {
  ScheduleChoice schedule;
  std::string families = "all";  // "all", a comma list, or one family; ignored for an imported schedule
  // The caller named the families (compare -s all included); else "all" means the config's
  // parallel.schedule when a config is given.
  bool families_given = false;
  bool single = false;           // exactly one schedule: its constraint is an error, not a skip
  UnitCosts units;
  std::string config;                       // a YAML config path (costs from the cost model)
  std::vector<std::string> sets;            // "key.path=value" overrides of the config
  std::optional<ModelConfig> loaded_config; // an already loaded config (wins over `config`)
  std::string config_name;                  // the name results carry for loaded_config
  bool timelines = false;                   // keep each schedule's simulated timeline
};

struct Result {
  std::vector<ResultRow> rows;
  std::vector<Skipped> skipped;
  std::vector<Timeline> timelines;  // one per row, when asked for
  TimeScale scale;                  // units for unit times, ms for a config
  nlohmann::json extra;             // e.g. the config's name
};

Result run(const Request& req);

// The object `ppsim compare --format json` prints (docs/JSON.md).
nlohmann::json to_json(const Result& r);

// The overlap model's sub-op costs from unit settings: each chunk holds layers/v layers; a
// chunk's F, b and W are split evenly over its layers and into attention (attn_share) and MLP;
// each layer's dispatch and combine take a2a. InputError (exit 2) for settings that do not fit.
void add_unit_overlap_costs(SimCosts& costs, const UnitCosts& u, int v);
// The flag the unit times came from, as an error line names the input: "--times F=1,B=2,W=1,FB=3".
std::string unit_source(const UnitCosts& u);
// The simulator's costs for `s` from unit settings (no config).
SimCosts unit_costs(const Schedule& s, const UnitCosts& u);

}  // namespace ppsim::api
