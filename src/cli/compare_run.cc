#include "cli/compare_run.h"

#include "api/calibrate.h"
#include "report/html.h"
#include "report/svg.h"
#include "report/trace.h"
#include "schedules/registry.h"

namespace ppsim::cli {

namespace {

std::string text_if(const api::Values& v, std::string_view key) { return v.has(key) ? v.text(key) : std::string{}; }

// The HTML page of the results; its controls (and its engine) work on unit times of generated
// families, so those inputs go with it only then.
std::string html_page(const api::Values& v, const RunOutput& out) {
  const std::string kind(v.command().name);
  HtmlReport rep;
  rep.kind = kind;
  rep.title = "ppsim " + kind;
  rep.results = results_json(out.rows, out.skipped, out.scale, out.extra);
  for (std::size_t i = 0; i < out.timelines.size(); ++i)
    rep.timelines.push_back({{out.rows[i].metrics.schedule, &out.timelines[i],
                              out.rows[i].physical.memory_curve.empty() ? nullptr : &out.rows[i].physical.memory_curve},
                             static_cast<int>(i),
                             {}});
  if (v.text("config").empty() && v.text("chunk_times").empty() && v.text("schedule_file").empty() &&
      !out.rows.empty()) {
    nlohmann::json fams = nlohmann::json::array();
    for (const Family& f : families())
      if (family_in_all(f)) fams.push_back(f.name);
    const std::string family = text_if(v, kind == "simulate" ? "schedule" : "schedules");
    rep.inputs = {{"families", fams},
                  {"family", family.empty() ? std::string("all") : family},
                  {"pp", out.rows.front().metrics.pp},
                  {"m", out.rows.front().metrics.microbatches},
                  {"times", v.text("times")},
                  {"p2p_latency", *v.real("p2p_latency")},
                  {"a2a", v.real("a2a").value_or(-1)}};
  }
  return render_html(rep);
}

}  // namespace

RunOutput run_schedules(const api::Values& v, api::Request req, bool keep_timeline) {
  const std::string trace = v.text("trace"), svg = v.text("svg"), html = v.text("html");
  const std::string timeline = text_if(v, "timeline_file");
  req.timelines = keep_timeline || !html.empty() || !trace.empty() || !svg.empty() || !timeline.empty();
  api::Result res = api::run(req);
  RunOutput out{std::move(res.rows), std::move(res.skipped), std::move(res.timelines),
                res.scale,           std::move(res.extra),   {}};
  if (!trace.empty() || !svg.empty()) {
    std::vector<NamedTimeline> named;
    for (std::size_t i = 0; i < out.timelines.size(); ++i)
      named.push_back({out.rows[i].metrics.schedule, &out.timelines[i],
                       out.rows[i].physical.memory_curve.empty() ? nullptr : &out.rows[i].physical.memory_curve});
    if (!trace.empty()) out.side_files.emplace_back(trace, render_trace(named));
    if (!svg.empty()) out.side_files.emplace_back(svg, render_svg(named));
  }
  if (!html.empty()) out.side_files.emplace_back(html, html_page(v, out));
  if (!timeline.empty() && !out.timelines.empty())
    out.side_files.emplace_back(timeline, render_timeline_json(out.timelines.front()));
  return out;
}

bool emit_results(const RunOutput& out, Format f, const std::string& path) {
  std::vector<std::pair<std::string, std::string>> files = out.side_files;
  const bool report = !(path == "-" && stdout_taken(files));
  if (report) {
    switch (f) {
      case Format::Json:
        files.emplace_back(path, render_json(out.rows, out.skipped, out.scale, out.extra));
        break;
      case Format::Csv:
        files.emplace_back(path, render_csv(out.rows, out.scale));
        break;
      default: {
        std::string text = render_table(out.rows, out.skipped, out.scale);
        if (out.extra.contains("calibration")) text += api::calibration_note_text(out.extra["calibration"]);
        files.emplace_back(path, text);
        break;
      }
    }
  }
  write_outputs(files);  // all of them or none
  return !stdout_taken(out.side_files);
}

}  // namespace ppsim::cli
