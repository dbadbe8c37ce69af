#include "cli/compare_run.h"

#include "api/calibrate.h"
#include "report/html.h"
#include "schedules/registry.h"
#include "report/svg.h"
#include "report/trace.h"

namespace ppsim::cli {

api::Request to_api(const RunRequest& req) {
  api::Request r;
  r.schedule = to_choice(req.so);
  r.families = req.schedules;
  r.single = req.single;
  r.units.times = req.times;
  r.units.chunk_times = req.chunk_times;
  r.units.p2p_latency = req.p2p_latency;
  r.units.a2a = req.a2a;
  r.units.attn_share = req.attn_share;
  r.units.layers = req.layers;
  r.units.comm_sms = req.comm_sms;
  r.units.sms = req.sms;
  r.config = req.config;
  r.sets = req.sets;
  r.timelines = req.keep_timeline || !req.html.empty() || !req.trace.empty() || !req.svg.empty() || !req.timeline_path.empty();
  return r;
}

RunOutput run_schedules(const RunRequest& req) {
  api::Result res = api::run(to_api(req));
  RunOutput out;
  out.rows = std::move(res.rows);
  out.skipped = std::move(res.skipped);
  out.timelines = std::move(res.timelines);
  out.scale = res.scale;
  out.extra = std::move(res.extra);
  if (!req.trace.empty() || !req.svg.empty()) {
    std::vector<NamedTimeline> named;
    for (std::size_t i = 0; i < out.timelines.size(); ++i)
      named.push_back({out.rows[i].metrics.schedule, &out.timelines[i],
                       out.rows[i].physical.memory_curve.empty() ? nullptr : &out.rows[i].physical.memory_curve});
    if (!req.trace.empty()) out.side_files.emplace_back(req.trace, render_trace(named));
    if (!req.svg.empty()) out.side_files.emplace_back(req.svg, render_svg(named));
  }
  if (!req.html.empty()) {
    HtmlReport rep;
    rep.kind = req.kind;
    rep.title = "ppsim " + req.kind;
    rep.results = results_json(out.rows, out.skipped, out.scale, out.extra);
    for (std::size_t i = 0; i < out.timelines.size(); ++i)
      rep.timelines.push_back({out.rows[i].metrics.schedule, &out.timelines[i],
                               out.rows[i].physical.memory_curve.empty() ? nullptr : &out.rows[i].physical.memory_curve,
                               static_cast<int>(i), {}});
    // The page's controls (and its engine) work on unit times of generated families.
    if (req.config.empty() && req.chunk_times.empty() && req.so.schedule_file.empty() && !out.rows.empty()) {
      nlohmann::json fams = nlohmann::json::array();
      for (const Family& f : families()) fams.push_back(f.name);
      rep.inputs = {{"families", fams},
                    {"family", req.schedules.empty() ? std::string("all") : req.schedules},
                    {"pp", out.rows.front().metrics.pp},
                    {"m", out.rows.front().metrics.microbatches},
                    {"times", req.times},
                    {"p2p_latency", req.p2p_latency},
                    {"a2a", req.a2a}};
    }
    out.side_files.emplace_back(req.html, render_html(rep));
  }
  if (!req.timeline_path.empty() && !out.timelines.empty())
    out.side_files.emplace_back(req.timeline_path, render_timeline_json(out.timelines.front()));
  return out;
}

void emit_results(const RunOutput& out, Format f, const std::string& path) {
  std::string text;
  switch (f) {
    case Format::Json: text = render_json(out.rows, out.skipped, out.scale, out.extra); break;
    case Format::Csv: text = render_csv(out.rows, out.scale); break;
    default:
      text = render_table(out.rows, out.skipped, out.scale);
      if (out.extra.contains("calibration")) text += api::calibration_note_text(out.extra["calibration"]);
      break;
  }
  std::vector<std::pair<std::string, std::string>> files = out.side_files;
  files.emplace_back(path, text);
  write_outputs(files);  // all of them or none
}

}  // namespace ppsim::cli
