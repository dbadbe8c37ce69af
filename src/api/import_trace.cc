#include "api/import_trace.h"

#include <fmt/format.h>

#include <utility>

#include "core/error.h"
#include "trace/pipeline_run.h"
#include "trace/ranks.h"

namespace ppsim::api {

namespace {

// -o: the profile must exist; the report names the file (not stdout), the JSON its path.
void name_profile(const ImportTraceCall& c, const std::string& path, const trace::ImportResult& r,
                  ImportTraceOutcome& out) {
  if (c.output.empty()) return;
  if (!r.profile.sub_ops)
    throw InputError(SourceLoc{path, 0, 0},
                     "no work in a numbered layer was found, so there is no per-layer profile to write",
                     "name ranges like 'layer3.attention.F' or give --map rules (docs/TRACES.md)");
  if (c.output != "-") out.report += fmt::format("\nwrote {}\n", c.output);
  out.json["profile_path"] = c.output;
}

// One trace's import report and profile (a forward-only trace refused unless --inference).
void report_one(const ImportTraceCall& c, const trace::ImportResult& r, ImportTraceOutcome& out) {
  const bool asked = !c.output.empty() || (!c.predict.schedule.empty() && c.predict.schedule != "executed");
  trace::check_training(r, c.inference, asked);
  out.json = trace::import_json(r);
  out.json["inference"] = c.inference;
  out.report = trace::render_import_report(r);
  if (r.profile.sub_ops) out.profile_yaml = trace::render_import_profile(r, c.moe_layers_only, c.inference);
}

// One trace: its import report, the prediction with a schedule, the profile.
void one_trace(const ImportTraceCall& c, ImportTraceOutcome& out) {
  const std::string& path = out.paths[0];
  const trace::ImportResult r = trace::import_trace_file(path, c.options);
  report_one(c, r, out);
  if (!c.predict.schedule.empty()) {
    const trace::Prediction p = trace::predict_traced(r, c.predict);
    out.json["prediction"] = trace::prediction_json(p);
    out.report += trace::render_prediction(p);
  }
  name_profile(c, path, r, out);
}

// Each rank's host-bound line (trace::host_bound_line), for several ranks' traces: the report's
// lines after the ranks' report, and the JSON's `host_bound` (path -> line).
nlohmann::json host_bound_ranks(const ImportTraceCall& c, const std::vector<trace::RankTrace>& rs, std::string& lines) {
  nlohmann::json j = nlohmann::json::object();
  for (const trace::RankTrace& r : rs) {
    std::string line;
    try {
      line = trace::host_bound_line(trace::import_trace(r.trace, c.options, r.path));
    } catch (const InputError&) {  // a rank with no work under --step-range: no line
      continue;
    }
    if (line.empty()) continue;
    lines += fmt::format("{}: {}\n", r.path, line);
    j[r.path] = line;
  }
  return j;
}

// Several ranks' traces, or a pipeline run (--schedule executed, --executed-csv): the ranks
// merged and aligned (trace/ranks.h), the executed order and its simulation (trace/pipeline_run.h).
void ranks(const ImportTraceCall& c, ImportTraceOutcome& out) {
  const std::vector<std::string>& paths = out.paths;
  const bool executed = c.predict.schedule == "executed";
  if (paths.size() > 1 && !c.predict.schedule.empty() && !executed)
    throw InputError(fmt::format("--schedule {}: with several traces only 'executed' (the order the ranks ran)",
                                 c.predict.schedule),
                     "--schedule executed", kExitUsage);
  if (paths.size() > 1 && !c.output.empty())
    throw InputError("--output: a cost profile comes from one rank's trace; import that trace alone", {}, kExitUsage);
  std::vector<trace::RankTrace> rs(paths.size());
  for (std::size_t i = 0; i < paths.size(); ++i) {
    rs[i].path = paths[i];
    rs[i].trace = trace::read_kineto(paths[i]);
  }
  if (paths.size() == 1) {  // one rank: its own import report first, as without these flags
    const trace::ImportResult r = trace::import_trace(rs[0].trace, c.options, paths[0]);
    report_one(c, r, out);
    name_profile(c, paths[0], r, out);
  }
  std::string host_lines;
  const nlohmann::json host = paths.size() > 1 ? host_bound_ranks(c, rs, host_lines) : nlohmann::json();
  const trace::MultiRank m = trace::merge_ranks(std::move(rs), c.options.comm_kernel);
  if (paths.size() > 1) {
    out.json["ranks"] = trace::ranks_json(m);
    out.json["host_bound"] = host;
    out.report += trace::render_ranks_report(m) + host_lines;
  }
  std::optional<trace::PipelineRun> run;
  if (executed || !c.executed_csv.empty()) {
    run = trace::rebuild_pipeline(m);  // refuses traces without pipeline ranges
  } else {
    try {
      run = trace::rebuild_pipeline(m);
    } catch (const InputError&) {
      out.report += "\nno pipeline action ranges (PP:{action}, Forward i / Backward i, Megatron's forward-compute): no executed order\n";
    }
  }
  if (!run) return;
  out.json["pipeline"] = trace::pipeline_run_json(*run);
  out.report += trace::render_pipeline_run(*run);
  if (executed) {
    const trace::ExecutedComparison cmp = trace::compare_executed(*run, c.predict.p2p_runtime == "torch");
    out.json["prediction"] = trace::executed_comparison_json(cmp);
    out.report += trace::render_executed_comparison(cmp);
  }
  out.executed_csv = run->csv;
  if (!c.executed_csv.empty()) {
    if (c.executed_csv != "-") out.report += fmt::format("\nwrote {}\n", c.executed_csv);
    out.json["executed_csv_path"] = c.executed_csv;
  }
}

}  // namespace

ImportTraceOutcome import_trace(const ImportTraceCall& call) {
  ImportTraceOutcome out;
  if (call.predict.p2p_runtime != "dataflow" && call.predict.p2p_runtime != "torch")
    throw InputError(fmt::format("--p2p-runtime '{}': expected dataflow or torch", call.predict.p2p_runtime),
                     closest_match(call.predict.p2p_runtime, {"dataflow", "torch"}), kExitUsage);
  if (call.predict.p2p_runtime == "torch" && call.predict.schedule != "executed")
    throw InputError("--p2p-runtime torch simulates the executed order: give --schedule executed", {}, kExitUsage);
  if (call.moe_layers_only && call.output.empty())
    throw InputError("--moe-layers-only marks the cost profile: give --output FILE", {}, kExitUsage);
  out.paths = trace::expand_trace_paths(call.traces);
  if (out.paths.size() > 1 || call.predict.schedule == "executed" || !call.executed_csv.empty()) {
    if (call.html)
      throw InputError("--html: the page covers one trace; several ranks' traces and --schedule executed have none yet",
                       {}, kExitUsage);
    ranks(call, out);
  } else {
    one_trace(call, out);
  }
  return out;
}

}  // namespace ppsim::api
