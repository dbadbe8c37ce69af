// `ppsim fidelity`: every configs/published/ file simulated at its published setting and compared
// with what its source states (tokens/s, TFLOP/s per GPU, samples/s, GPU-hours; memory). The
// config's `published:` block (docs/FIDELITY.md gives its keys) lists one or more results, each a
// schedule and micro-batch count with the published figure; the hardware comes from
// cluster.gpu's one set per GPU type, never from the run.
//
// Every published throughput is turned into tokens/s with the source's own FLOP count
// (`flops: megatron` = Narayanan et al. 2021, eq. 3, which counts the recompute forward;
// `flops: model` = ppsim's model FLOPs, forward + backward, no recompute), so that predicted and
// published compare on one unit. Schedule-relative claims: a result's throughput over the
// `baseline` schedule's at the same micro-batch count, or a result's throughput per GPU over the
// result its `relative_to:` names (one source's runs at several scales), published against
// predicted, in percentage points.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cost/calibration.h"

namespace ppsim::api {

struct FidelityRequest {
  std::string dir = "configs/published";  // every *.yaml in it, in name order
  std::vector<std::string> files;         // instead of dir, when given
  std::vector<std::string> sets;          // "key.path=value" applied to every file (e.g. costs.dp_comm=false)
  std::string thresholds;                 // a thresholds file: check each row against it
  // "": the presets. "first": each source (a file's published.source up to its first comma)
  // calibrated on its first result (one compute scale, api/calibrate.h; the first file of the
  // source in name order) predicts its other results. "loso": leave one source out: each source's rows
  // predicted with the compute scale fitted on every other source's rows of the same GPU family
  // (their median per-row scale; nothing fitted on the source itself), docs/CALIBRATION.md.
  std::string calibrate;
  // Called before each file: files done, files in all, the file (the CLI's progress on a terminal).
  std::function<void(std::size_t, std::size_t, const std::string&)> progress;
};

struct FidelityRow {
  std::string key;     // "<file stem>/<label>": the thresholds file's key
  std::string run;     // the config's name
  std::string label;   // the result's label (schedule, micro-batches)
  std::string source;  // where the figure is stated
  std::string schedule;
  int microbatches = 0;
  int vpp = 1;
  int gpus = 0;
  std::string set;                // the result's own config keys ("parallel.tp=8 model.heads=64"), or empty
  std::string published_as;       // the figure as the source states it, e.g. "148 TFLOP/s/GPU (megatron)"
  double published_tokens_s = 0;  // converted to tokens/s
  double predicted_tokens_s = 0;
  double error = 0;  // predicted / published - 1
  // The parts of the step (seconds): the pipeline's makespan, of it the mean bubble, the exposed
  // DP communication and the optimizer step added after it.
  double step_s = 0, pipeline_s = 0, bubble_ratio = 0, dp_exposed_s = 0, optimizer_s = 0, tp_comm_s = 0;
  double mfu = 0;
  std::optional<double> published_memory_gb;  // as stated
  std::optional<double> fits_gb;              // the source says the run fit GPUs of this size, as it writes it
  // What fits_gb holds in GB of 1e9: NVIDIA's memory sizes are binary (an "80 GB" GPU is 80 GiB at
  // most), so fits_gb GiB, capped at the GPU type's capacity as the driver reports it
  // (hardware.hbm_gb: 85.52 for an H100's 81,559 MiB).
  std::optional<double> fits_limit_gb;
  double predicted_memory_gb = 0;  // the largest rank's peak
  bool fits = true;                // predicted_memory_gb <= fits_limit_gb (true when not stated)
  // Against the baseline schedule at the same micro-batches (absent for the baseline itself), or,
  // where the result says relative_to: <label>, against that result per GPU (baseline = the label).
  std::string baseline;
  std::optional<double> published_relative, predicted_relative, relative_diff_pp;
  // With a thresholds file: the allowed |error| in percent (and |relative_diff_pp|), and whether
  // this row is within it (and, where the source says the run fit its GPUs, fits).
  std::optional<double> max_error_pct, max_relative_pp;
  bool within = true;
  // With FidelityRequest::calibrate: the error at the presets, the scale applied to every compute
  // efficiency and what it was fitted on ("" at the presets), and the row's source and GPU family.
  std::optional<double> preset_error;
  double calibration_scale = 1;
  std::string calibrated_on;
  // calibrate "first": why the source's rows stay at the presets ("" when calibrated): its first
  // row lies outside what one compute scale reaches (every efficiency within its range). Such rows
  // are not in the calibrated counts.
  std::string not_calibrated;
  std::string source_id;    // the file's published.source up to its first comma (one paper, one report)
  std::string gpu_family;   // ampere (A100) or hopper (H100, H800, H200): one compute efficiency set
  double fitted_scale = 0;  // loso: the scale that explains this row alone (0: not fitted)
  // The run the row predicts (its layout, model, schedule); with calibrate "first", how it differs
  // from the row its source was calibrated on ("model 80 layers x 8192 (calibrated at ...)").
  CalibratedRun as_run;
  std::vector<std::string> extrapolates;
};

struct FidelityResult {
  std::vector<FidelityRow> rows;
  // Files that could not be read or predicted (a bad config, a result a schedule cannot run): the
  // file and its one-line error. The other files' rows stand; when every file is refused, fidelity()
  // throws the first file's error instead. With a thresholds file each one counts as a failure.
  std::vector<std::pair<std::string, std::string>> skipped;
  std::size_t files = 0;  // the files read, skipped ones included
  int skipped_exit = 0;   // the first skipped file's exit code (3, 4 or 8); 0 when none was skipped
  bool checked = false;   // a thresholds file was given
  int failures = 0;       // rows past their thresholds
};

// InputError (file:line:col) for a bad published block or thresholds file.
// When stderr is a terminal: a progress line redrawn there before each file ("fidelity: 3/18
// megatron-18.4b.yaml"), for FidelityRequest::progress; else empty. Clear it with
// end_terminal_progress() after the call. The CLI and the Python module both use it.
std::function<void(std::size_t, std::size_t, const std::string&)> terminal_progress();
void end_terminal_progress();

FidelityResult fidelity(const FidelityRequest& req);
nlohmann::json fidelity_json(const FidelityResult& r);

// Counts over the throughput rows (the row a file was calibrated on left out): how many within
// 5% and 10%, the median |error|, at the presets and as predicted; one line each.
struct FidelityCounts {
  int rows = 0, within5 = 0, within10 = 0;
  double median_abs_pct = 0;
};
FidelityCounts fidelity_counts(const FidelityResult& r, bool preset);
std::string fidelity_summary(const FidelityResult& r);

}  // namespace ppsim::api
