// The shared body of compare / simulate / plan's evaluation: pick the schedules, build their
// costs (from --times, --chunk-times, or a YAML config through the cost model), simulate, and
// collect metrics; plus writing the results and pictures.
#pragma once
#include <string>
#include <vector>

#include "cli/common.h"
#include "core/timeline.h"
#include "report/results.h"

namespace ppsim::cli {

struct RunRequest {
  ScheduleOptions so;
  std::string schedules = "all";  // "all", a list, or one family
  bool single = false;            // simulate: exactly one schedule, errors instead of skips
  std::string times;
  std::string chunk_times;
  double p2p_latency = 0;
  // Overlap model in units (off while a2a < 0): see docs/OVERLAP.md.
  double a2a = -1;          // one dispatch or combine of one layer
  double attn_share = 0.5;  // share of F, b and W that is attention (the rest MLP/experts)
  int layers = 1;           // layers in one rank's share
  int comm_sms = 20;
  int sms = 132;
  std::string config;
  std::vector<std::string> sets;
  std::string trace, svg, timeline_path;
  bool keep_timeline = false;
};

struct RunOutput {
  std::vector<ResultRow> rows;
  std::vector<Skipped> skipped;
  std::vector<Timeline> timelines;  // one per row, when timelines were asked for
  TimeScale scale;
  nlohmann::json extra;             // e.g. the config's name and derived per-op costs
  // --trace, --svg, --timeline: (path, content), written with the results by emit_results.
  std::vector<std::pair<std::string, std::string>> side_files;
};

RunOutput run_schedules(const RunRequest& req);
void emit_results(const RunOutput& out, Format f, const std::string& path);

}  // namespace ppsim::cli
