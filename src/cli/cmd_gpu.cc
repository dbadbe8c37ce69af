// `ppsim profile` and `ppsim validate`: the GPU commands' flags and output. The flow (the chunk,
// the link probe, profiles, prediction against replay, the report) is a library call,
// src/api/gpu.h. Without a GPU (or without the CUDA back-end) each ends with one line and exit
// code 5.
//
// profile: times one transformer layer of the config's model on the GPU (F, full backward B,
// weight-grad W, overlapped pair FB; medians after warm-up) and writes a version-2 cost profile
// (with the sub-op times the overlap model uses)
// (src/cost/profile.h) that `compare`, `simulate` and `plan` read through `profile: file`.
// validate: for each schedule, profiles the chunk the schedule's stages hold, simulates the
// schedule with those measured op costs, replays it on the GPUs present, and prints predicted
// against measured; --trace writes one Perfetto trace with both timelines.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/gpu.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "report/html.h"

namespace ppsim::cli {

Runner setup_profile(CLI::App& sub) {
  auto a = bind_options(sub, "profile");
  return [a]() {
    const api::ProfileOutcome p = api::profile(api::profile_request(*a));
    write_output(a->text("output"), p.yaml);
    const gpu::ProfileResult& r = p.layer;
    std::fprintf(stderr, "profiled on %s: F %.3f ms, B %.3f ms, W %.3f ms, FB %.3f ms (per layer)\n", r.gpu.c_str(),
                 r.f_ms, r.b_ms, r.w_ms, r.fb_ms);
    return 0;
  };
}

Runner setup_validate(CLI::App& sub) {
  auto a = bind_options(sub, "validate");
  return [a]() {
    const Format f = parse_format(a->text("format"), {"table", "json"});
    const api::ValidateOutcome out = api::validate(api::validate_request(*a));
    if (!out.reporter) return 0;  // process 0 reports for all
    std::vector<std::pair<std::string, std::string>> files;  // written together, or none
    const std::string trace = a->text("trace"), html = a->text("html"), output = a->text("output");
    if (!trace.empty()) files.emplace_back(trace, api::validate_trace(out));
    if (!html.empty()) {
      HtmlReport rep = json_tables_html("validate", "ppsim validate", out.json);
      const auto add = [&rep](const std::string& name, const Timeline& t, const char* label) {
        HtmlTimeline h;
        h.name = name, h.timeline = &t, h.label = label;
        rep.timelines.push_back(std::move(h));
      };
      for (std::size_t i = 0; i < out.names.size(); ++i) {
        add(out.names[i], out.measured[i], "measured");
        add(out.names[i], out.predicted[i], "predicted");
      }
      files.emplace_back(html, render_html(rep));
    }
    if (!(output == "-" && stdout_taken(files)))
      files.emplace_back(output, f == Format::Json ? out.json.dump(2) + "\n" : out.text);
    write_outputs(files);
    // Nothing ran: every schedule asked for was skipped.
    const auto results = out.json.find("results"), skipped = out.json.find("skipped");
    const bool none_ran =
        results != out.json.end() && results->empty() && skipped != out.json.end() && !skipped->empty();
    return none_ran ? kExitInput : 0;
  };
}

}  // namespace ppsim::cli
