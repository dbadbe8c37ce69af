// `ppsim import-trace` as a library call (the CLI and ppsim.import_trace): one trace, or one per
// rank of a run, in; the report (table and JSON), the cost profile and the executed order out.
// The reading, attribution and prediction are src/trace/ (docs/TRACES.md); this call decides
// which of them run: one trace is imported (and predicted with a schedule); several traces, or
// `--schedule executed` / `--executed-csv`, are merged and aligned (trace/ranks.h) and the
// executed order rebuilt (trace/pipeline_run.h), a single trace keeping its own import report
// first. It writes no file: the caller writes every output together (or none).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trace/import.h"
#include "trace/predict.h"

namespace ppsim::api {

struct ImportTraceCall {
  std::vector<std::string> traces;  // files, or folders (their *.json, *.json.gz: trace::expand_trace_paths)
  trace::ImportOptions options;
  trace::PredictRequest predict;  // schedule "": none; "pair" or a family; "executed": the order the ranks ran
  // The outputs the caller will write (names only; "" none, "-" stdout). They are refused where
  // they do not apply (a profile of several ranks, a page of several), named in the report and
  // the JSON ("profile_path", "executed_csv_path"); an executed CSV asks for the executed order.
  std::string output;        // the cost profile (-o)
  std::string executed_csv;  // the executed order as a schedule CSV
  bool html = false;         // a page of the JSON report (one trace only)
  // The profile's times stand for a config's MoE layers only (profile applies_to: moe_layers;
  // the rest of the model stays derived): needs `output`.
  bool moe_layers_only = false;
  // A forward-only (inference) trace is read, its profile with F times only; without it, a trace
  // whose layers ran no backward is refused as a training profile (trace::check_training).
  bool inference = false;
};

struct ImportTraceOutcome {
  std::vector<std::string> paths;  // the traces read, as expanded
  std::string report;              // the table report (`--format table`), "wrote" lines included
  nlohmann::json json;             // the same as JSON (`--format json`)
  // The version-2 profile's YAML: one trace with per-layer work, else none.
  std::optional<std::string> profile_yaml;
  // The executed order as PyTorch's CSV: where a pipeline run was rebuilt, else none.
  std::optional<std::string> executed_csv;
};

// InputError: kExitUsage for outputs or a schedule that do not apply, kExitInput for bad traces
// (and a profile asked of a trace without per-layer work), kExitIo for a trace that cannot be read.
ImportTraceOutcome import_trace(const ImportTraceCall& call);

}  // namespace ppsim::api
