// `ppsim search`: the flags and the output of api::search (src/api/search.h, docs/SEARCH.md):
// the searched schedule beside the best of the nine families under the same cap, as a table,
// JSON or CSV (--format); the schedule file (--out, --out-format) and the picture (--svg).
//
// Not obvious: the schedule file and the SVG are written together or not at all, after the
// search, so an error or an interrupted search leaves no partial file.
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "api/search.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"
#include "report/results.h"

namespace ppsim::cli {

Runner setup_search(CLI::App& sub) {
  auto a = bind_options(sub, "search");
  return [a]() {
    const std::string format = a->text("format"), out_format = a->text("out_format");
    if (format == "torch")
      throw InputError("--format torch: the schedule file's dialect is --out-format now (did you mean --out-format "
                       "torch?)",
                       {}, kExitUsage);
    const Format f = parse_format(format, {"table", "json", "csv"});
    if (out_format != "csv" && out_format != "torch")
      throw InputError(fmt::format("--out-format: expected csv or torch, got '{}'", out_format), {}, kExitUsage);
    api::SearchCall call = api::search_call(*a);
    // Progress only where someone watches: stderr a terminal; the line ends before the report.
    const bool progress = !a->flag("quiet") && isatty(fileno(stderr));
    bool shown = false;
    const TimeScale scale = call.config.empty() ? TimeScale::units() : TimeScale::millis();
    if (progress)
      call.progress = [&shown, &scale](std::uint64_t done, std::uint64_t all, Time best) {
        std::fprintf(stderr, "\rsearch: %llu/%llu trials, best makespan %s   ", static_cast<unsigned long long>(done),
                     static_cast<unsigned long long>(all), best ? fmt_time(best, scale).c_str() : "-");
        shown = true;
      };
    const api::SearchOutcome r = api::search(call);
    if (shown) std::fprintf(stderr, "\n");

    std::vector<std::pair<std::string, std::string>> files;
    const std::string out = a->text("out"), svg = a->text("svg"), html = a->text("html");
    if (!out.empty()) files.emplace_back(out, r.schedule_csv());
    if (!svg.empty()) files.emplace_back(svg, r.svg());
    if (!html.empty()) {
      const std::vector<api::SearchOutcome::NamedRun> runs = r.timelines();  // the report points into it
      HtmlReport rep;
      rep.kind = "search";
      rep.title = "ppsim search";
      rep.results = r.json;  // as --format json prints them
      for (std::size_t i = 0; i < runs.size(); ++i)
        rep.timelines.push_back({{runs[i].name, &runs[i].sim.timeline, nullptr}, static_cast<int>(i), {}});
      files.emplace_back(html, render_html(rep));
    }
    if (!stdout_taken(files))
      files.emplace_back("-", f == Format::Json  ? r.json.dump(2) + "\n"
                              : f == Format::Csv ? render_csv(r.rows, r.scale)
                                                 : r.table);
    write_outputs(files);
    return 0;
  };
}

}  // namespace ppsim::cli
