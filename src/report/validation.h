// Predicted against measured: statistics of a Timeline (from the simulator or from the GPU
// replay, the same type) and a comparison table with the error of each figure.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/timeline.h"

namespace ppsim {

struct TimelineStats {
  Time makespan = 0;
  std::vector<Time> compute;       // per rank: sum of compute-stream intervals
  std::vector<Time> exposed_comm;  // per rank: given by the producer (simulator), else 0
  std::vector<Time> bubble;        // per rank: makespan - compute - exposed_comm
  std::map<std::string, Time> mean_duration;  // per op kind: "F", "I", "W", "B", "FB"
  std::map<std::string, int> count;
};

// `exposed_inside_ops`: the exposed communication was spent inside the timeline's op intervals
// (the replay's all-to-all waits), so it is taken out of their compute time.
TimelineStats timeline_stats(const Timeline& t, const std::vector<Time>& exposed_comm = {},
                             bool exposed_inside_ops = false);

struct ValidationRow {
  std::string what;      // "makespan", "bubble rank 0", "F mean", ...
  double predicted = 0;  // in ms
  double measured = 0;
  double error = 0;      // (predicted - measured) / measured; 0 when measured is 0
};

std::vector<ValidationRow> compare_timelines(const TimelineStats& predicted, const TimelineStats& measured);
std::string render_validation_table(const std::string& schedule, const std::vector<ValidationRow>& rows,
                                    double target_error);
nlohmann::json validation_json(const std::string& schedule, const std::vector<ValidationRow>& rows);

}  // namespace ppsim
