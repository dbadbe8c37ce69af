// `ppsim import-trace`: a PyTorch profiler (Kineto) trace in, a cost profile and a report out.
// A thin client: the flags, then api::import_trace (src/api/import_trace.h: which of src/trace/'s
// steps run, the report), then every output written together or none (write_outputs).
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/import_trace.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"

namespace ppsim::cli {

Runner setup_import_trace(CLI::App& sub) {
  auto a = bind_options(sub, "import-trace");
  return [a]() {
    const Format f = parse_format(a->text("format"), {"table", "json"});
    const api::ImportTraceOutcome r = api::import_trace(api::import_trace_call(*a));
    const std::string output = a->text("output"), executed_csv = a->text("executed_csv"), html = a->text("html");
    // Every output together or none (write_outputs): the files, then the report on stdout, or on
    // stderr where a file went to stdout.
    std::vector<std::pair<std::string, std::string>> files;
    if (!output.empty()) files.emplace_back(output, *r.profile_yaml);
    if (!executed_csv.empty()) files.emplace_back(executed_csv, *r.executed_csv);
    if (!html.empty()) {
      nlohmann::json page = r.json;  // the page names the profile's path only with --format json, as it did
      if (f != Format::Json) page.erase("profile_path");
      files.emplace_back(html, render_html(json_tables_html("import-trace", "ppsim import-trace " + r.paths[0], page)));
    }
    const std::string report = f == Format::Json ? r.json.dump(2) + "\n" : r.report;
    const bool report_to_stderr = stdout_taken(files);
    if (!report_to_stderr) files.emplace_back("-", report);
    write_outputs(files);
    if (report_to_stderr) std::fputs(report.c_str(), stderr);
    return 0;
  };
}

}  // namespace ppsim::cli
