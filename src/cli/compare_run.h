// compare / simulate's flags as one request to the library (api::run, src/api/request.h), and
// writing its results and pictures: the table, JSON or CSV, --trace, --svg, --timeline, --html.
#pragma once
#include <string>
#include <vector>

#include "api/request.h"
#include "cli/common.h"
#include "core/timeline.h"
#include "report/results.h"

namespace ppsim::cli {

// The flag values as given (units, strings); api::Request is built from them.
struct RunRequest {
  ScheduleOptions so;
  std::string schedules = "all";  // "all", a list, or one family
  bool single = false;            // simulate: exactly one schedule, errors instead of skips
  std::string times;
  std::string chunk_times;
  double p2p_latency = 0;
  // Overlap model in units (off while a2a < 0): see docs/OVERLAP.md.
  double a2a = -1;
  double attn_share = 0.5;
  int layers = 1;
  int comm_sms = 20;
  int sms = 132;
  std::string config;
  std::vector<std::string> sets;
  std::string trace, svg, timeline_path;
  std::string html;    // --html: the self-contained report (src/report/html.h)
  std::string kind = "compare";  // the report's kind: compare or simulate
  bool keep_timeline = false;
};

struct RunOutput {
  std::vector<ResultRow> rows;
  std::vector<Skipped> skipped;
  std::vector<Timeline> timelines;  // one per row, when timelines were asked for
  TimeScale scale;
  nlohmann::json extra;             // e.g. the config's name
  // --trace, --svg, --timeline: (path, content), written with the results by emit_results.
  std::vector<std::pair<std::string, std::string>> side_files;
};

api::Request to_api(const RunRequest& req);
RunOutput run_schedules(const RunRequest& req);
void emit_results(const RunOutput& out, Format f, const std::string& path);

}  // namespace ppsim::cli
