// compare / simulate: the request built from the options (api::run_request, src/api/options.h),
// and writing its results and pictures: the table, JSON or CSV, --trace, --svg, --timeline, --html.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "api/options.h"
#include "api/request.h"
#include "cli/common.h"
#include "core/timeline.h"
#include "report/results.h"

namespace ppsim::cli {

struct RunOutput {
  std::vector<ResultRow> rows;
  std::vector<Skipped> skipped;
  std::vector<Timeline> timelines;  // one per row, when timelines were asked for
  TimeScale scale;
  nlohmann::json extra;  // e.g. the config's name
  // --trace, --svg, --timeline, --html: (path, content), written with the results by emit_results.
  std::vector<std::pair<std::string, std::string>> side_files;
};

// Runs `req` (built from `v`); keeps timelines where `keep_timeline` or a picture asks for them.
RunOutput run_schedules(const api::Values& v, api::Request req, bool keep_timeline);
// Writes the pictures and the report (all or none); returns false when a picture took stdout
// (`--trace -`): the report and anything printed after it then stay off stdout.
bool emit_results(const RunOutput& out, Format f, const std::string& path);

}  // namespace ppsim::cli
