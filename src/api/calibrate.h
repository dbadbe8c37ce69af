// `ppsim calibrate` as a library call (the CLI and ppsim.calibrate): from the user's own run, as
// its config describes it, fit the figures that run exposes and write them as a calibration
// (cost/calibration.h; docs/CALIBRATION.md).
//
// - From a step time (--step-ms) or a throughput (--tokens-per-s): ONE scale, applied to every
//   compute efficiency of the GPU type (GEMM, FP8 GEMM and weight-gradient GEMM, attention,
//   elementwise), solved so that the config's schedule predicts exactly that step. One figure
//   cannot tell compute from communication or overhead: the calibration says so and leaves
//   communication, latencies, overlap and the clock at their presets.
// - From traces (PyTorch profiler / Kineto, read by trace/import.h): the GEMM scale from the MLP
//   blocks' kernels, the attention efficiency from the attention blocks' (their GEMMs at the fitted
//   GEMM scale), the all-to-all efficiency from MoE dispatch and combine, each with one standard
//   error from the spread of the layers it was fitted on. It fits from the ops, never the step's
//   span, so a step that the host or the profiler slowed does not move it; the span is reported
//   beside the calibrated prediction.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/config_answer.h"
#include "cost/calibration.h"
#include "trace/import.h"
#include "trace/pipeline_run.h"

namespace ppsim {
struct HardwareSpec;
}

namespace ppsim::api {

struct CalibrateRequest {
  std::string config;
  std::vector<std::string> sets;
  std::string schedule;  // the family the run used; "": the config's parallel.schedule (must name one)
  int vpp = 0;           // 0: the config's
  std::vector<std::string> traces;
  trace::ImportOptions trace_options;
  std::optional<double> step_ms, tokens_per_s;
};

struct CalibrateOutcome {
  Calibration calibration;
  std::string yaml;    // render_calibration
  std::string report;  // the table: each figure, preset -> fitted (+- uncertainty), and what stays
  nlohmann::json json;
};

// InputError: kExitUsage unless exactly one of traces, step_ms, tokens_per_s; kExitInput for a
// step the model cannot reach with every compute efficiency in (0.01, 1], or a trace without
// per-layer attention or MLP work.
CalibrateOutcome calibrate(const CalibrateRequest& req);

// ---- pieces `ppsim fidelity --calibrate` shares ---------------------------------------------

// The compute efficiencies one scale multiplies: (key, preset) for each that the type sets.
std::vector<std::pair<std::string, double>> compute_scale_keys(const HardwareSpec& h);
// "key=value" for each, at `scale` times its preset.
std::vector<std::string> compute_scale_sets(const std::vector<std::pair<std::string, double>>& keys, double scale);
// The largest scale that keeps every one at most 1, the smallest that keeps them at least 0.01.
std::pair<double, double> compute_scale_range(const std::vector<std::pair<std::string, double>>& keys);

struct ScaleFit {
  double scale = 1;
  double preset_step_s = 0;  // at scale 1
  double step_s = 0;         // at the fitted scale
  int evaluations = 0;
  bool reached = true;  // false: the target lies outside the range (scale at its end)
};
// Solves step_at(scale) = target_step_s (step_at decreasing in scale) by a safeguarded secant in
// 1/scale, to a relative 1e-6 on the step.
ScaleFit fit_scale(const std::function<double(double)>& step_at, double target_step_s, std::pair<double, double> range);

// The calibration of one compute scale (method step_time, tokens_per_s or published).
Calibration scale_calibration(const std::vector<std::pair<std::string, double>>& keys, const ScaleFit& fit,
                              const std::string& method, const std::string& from);

nlohmann::json calibration_json(const Calibration& c);

// ---- a traced pipeline run of PyTorch's runtime (one trace per rank, p2p_runtime torch) -------
// Besides the blocks' efficiencies: the p2p kernels' share, the clock under load, and one scale
// on the compute efficiencies that makes the run's own schedule predict the traced step (the
// step's span, first to last action kernel on aligned clocks, when no rank's host slowed it).

// parallel.p2p_sm_share: 1 - 1/s where every trace measured the slowdown s of its compute kernels
// beside communication on at least 20 kernels (attention and MLP, weighted by their counts); else
// the communication kernels' grid over the SMs (time-weighted, the linear rule). The mean over
// the ranks, its standard error the uncertainty (0: equal shares).
struct ShareFit {
  double share = 0, uncertainty = 0;
  bool measured = false;  // from the slowdown, not the grid
  std::string from;
};
ShareFit p2p_share(const std::vector<trace::ImportResult>& imports);

// hardware.clock.duty_slope at duty_ref `ref`: per rank, rho = (its actions at their plateau: the
// median of each stage and kind, times their count) / (its actions as they ran), at its duty d
// (compute / the run's step). With the clock's factor f(d) = 1 + k max(0, d - ref), rho = f(1) / f(d),
// so on the ranks' means  k = (rho - 1) / ((1 - ref) - rho max(0, d - ref)).  Not identified where
// rho <= 1 (no action ran faster than its plateau). Uncertainty: rho's standard error over the
// ranks through dk/drho.
struct ClockFit {
  double slope = 0, uncertainty = 0, rho = 1, duty = 0;
  bool identified = false;
};
ClockFit fit_clock(const trace::PipelineRun& run, double ref);

// What a calibrated config's prediction states (api::run's extra "calibration"; the compare table's
// note): the file, each figure it changed against the presets, and per result how far it
// extrapolates from the calibrated run. Null when the config names no calibration.
nlohmann::json calibration_notes(const ModelConfigData& c, const std::vector<ScheduleAt>& results);
// The same as lines of text for a table.
std::string calibration_note_text(const nlohmann::json& notes);

}  // namespace ppsim::api
