// What api::run adds to an answer computed from a model config, declared apart from
// api/calibrate.h so that run.cc needs no yaml-cpp: the page's engine (web/, unit times only)
// compiles run.cc and links stubs of these (web/engine_stubs.cc).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cost/cost_model.h"

namespace ppsim::api {

// One result, for how far it extrapolates from a calibrated run.
struct ScheduleAt {
  std::string schedule;
  int microbatches = 0, vpp = 1;
};

// A calibrated config's note (api/calibrate.h, calibration_notes of its data); null when the config
// names no calibration.
nlohmann::json calibration_notes(const ModelConfig& cfg, const std::vector<ScheduleAt>& results);

}  // namespace ppsim::api
