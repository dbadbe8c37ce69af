// Renders simulation results as a table (fmt), JSON (nlohmann, schema in docs/JSON.md) or CSV.
// The JSON schema is stable: fields are added, never renamed.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "report/trace.h"
#include "sim/metrics.h"

namespace ppsim {

struct Skipped {
  std::string schedule;
  std::string reason;
};

// One rank's predicted peak device memory, in bytes, by part (cost/memory.h lists the tensors).
struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, ema = 0, activations = 0, comm_buffers = 0, workspace = 0;
  double host_optimizer = 0, host_ema = 0;  // kept on the host: not in total
  double total = 0;
  std::string peak_op;  // the action running at the peak
  Time peak_time = -1;  // its start (ticks), -1 when no timeline was recorded
  int chunks = 0;       // micro-batch chunks alive at the peak
};

// Physical quantities known when costs come from a model config (cost model / profile).
struct PhysicalResult {
  bool available = false;
  double step_time_s = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  std::vector<double> peak_memory_bytes;  // per rank
  std::vector<MemoryBreakdown> memory;    // per rank, the parts of peak_memory_bytes
  std::vector<std::vector<MemorySample>> memory_curve;  // per rank, when the timeline was recorded
};

struct ResultRow {
  ScheduleMetrics metrics;
  PhysicalResult physical;
};

nlohmann::json result_to_json(const ResultRow& row, const TimeScale& scale);
std::string render_json(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped, const TimeScale& scale,
                        const nlohmann::json& extra = nullptr);
// The object render_json prints (extra's keys added at the top level).
nlohmann::json results_json(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped,
                            const TimeScale& scale, const nlohmann::json& extra = nullptr);
std::string render_table(const std::vector<ResultRow>& rows, const std::vector<Skipped>& skipped, const TimeScale& scale);
std::string render_csv(const std::vector<ResultRow>& rows, const TimeScale& scale);

// Per rank: the memory breakdown at the peak (`--memory`), one line per rank.
std::string render_memory_table(const std::vector<ResultRow>& rows, const TimeScale& scale);

// "6 6 6 6" for small P, "min..max" otherwise.
std::string per_rank_summary(const std::vector<std::string>& values, std::size_t max_list = 8);

}  // namespace ppsim
