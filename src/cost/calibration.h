// A calibration: figures fitted on the user's own run (`ppsim calibrate`, api/calibrate.h), kept in
// a YAML file that applies on top of the GPU type's presets (docs/CALIBRATION.md gives the format).
//
// A config names one with `calibration: FILE` (relative to the config; `--calibration FILE` on the
// command line sets it): before the config is validated, each fitted figure is written over its key
// (`hardware.efficiency.gemm: 0.71`), as `--set` would, so every command that reads configs
// (compare, plan, search, fidelity, validate's prediction, Python) predicts with it. A figure the
// run could not identify is listed in the file with the preset it keeps, and is not applied.
//
// Not obvious: the values are absolute (the preset times the fitted scale), so applying a
// calibration twice, or to a config that set the key itself, gives the same figure.
#pragma once
#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace ppsim {

struct ModelConfigData;

struct CalibratedFigure {
  std::string key;                    // a config key path, e.g. hardware.efficiency.gemm
  double preset = 0;                  // the value without the calibration
  double value = 0;                   // fitted
  std::optional<double> uncertainty;  // one standard error, in the key's unit; absent: one figure, no spread
  std::string from;                   // what it was fitted on
};

struct UnidentifiedFigure {
  std::string key;
  double preset = 0;  // kept
  std::string why;
};

// The run the figures were fitted on: what a prediction extrapolates from.
struct CalibratedRun {
  std::string gpu;    // cluster.gpu or hardware.name
  std::string model;  // the model's shape in a line ("80 layers x 8192"; MoE: its experts); "" in older files
  int gpus = 0, pp = 1, tp = 1, cp = 1, dp = 1, ep = 1, vpp = 1, microbatches = 1, micro_batch_size = 1;
  std::int64_t seq_len = 0;
  std::string schedule, gemm_precision;
};

struct Calibration {
  int version = 3;     // the file format: 2 since costs.attention_shape, 3 since costs.gemm_shape (see implied)
  std::string path;    // where it was read from ("" when built)
  std::string method;  // step_time | tokens_per_s | trace | published
  std::string config;  // the config it was fitted with
  std::string note;    // one line: what was fitted and what it means
  double measured_step_s = 0, preset_step_s = 0, calibrated_step_s = 0;
  CalibratedRun run;
  std::vector<CalibratedFigure> fitted;
  std::vector<UnidentifiedFigure> unidentified;
  // Settings the file's version implies, applied with its figures: a version 1 file fitted its
  // efficiencies with one flash attention rate for every shape, so it keeps that rate
  // (costs.attention_shape=false); versions 1 and 2 one GEMM rate (costs.gemm_shape=false);
  // version 3 (the current) none.
  std::vector<std::string> implied;
};

// The run a config describes at its own schedule and micro-batches.
CalibratedRun calibrated_run(const ModelConfigData& c, const std::string& schedule, int microbatches, int vpp);

// The YAML file (documented inline) and its reader; InputError at file:line:col for a bad file.
std::string render_calibration(const Calibration& c);
Calibration read_calibration(const std::string& path, const SourceLoc& referenced_from = {});

// "key=value" for every fitted figure (what apply_calibration writes over the tree).
std::vector<std::string> calibration_sets(const Calibration& c);
// Whether `root` has a `calibration:` key (config.cc copies the tree only then).
bool names_calibration(const YAML::Node& root);
// config.cc's hook: when `root` names `calibration: FILE` (relative to base_dir), writes the
// fitted figures over it. Returns the calibration read, if any.
// The calibration `root` names, read (errors located at the key in `root`: give the parsed tree,
// not a clone, whose marks are lost), or none.
std::optional<Calibration> read_named_calibration(const YAML::Node& root, const std::string& base_dir,
                                                  const std::string& file,
                                                  const std::vector<std::string>& set_paths = {});
// `set_paths` as config.cc has them: a `calibration=` that came from --set / --calibration is
// located there, not in the file.
std::optional<Calibration> apply_calibration(YAML::Node& root, const std::string& base_dir, const std::string& file,
                                             const std::vector<std::string>& set_paths = {});

// How far a prediction for `c` (at this schedule and M) extrapolates from the calibrated run: one
// line per difference ("pp 8 (calibrated at 4)"); empty when it predicts the calibrated run itself.
std::vector<std::string> calibration_extrapolation(const Calibration& cal, const CalibratedRun& predicted);
// What differs between two runs, each "what now (calibrated at then)": the same list.
std::vector<std::string> run_extrapolation(const CalibratedRun& now, const CalibratedRun& then);

}  // namespace ppsim
