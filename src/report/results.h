// Renders simulation results as a table (fmt), JSON (nlohmann, schema in docs/JSON.md) or CSV.
// The JSON schema is stable: fields are added, never renamed.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/time.h"
#include "report/trace.h"
#include "sim/physical.h"
#include "sim/metrics.h"

namespace ppsim {

struct Skipped {
  std::string schedule;
  std::string reason;
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

// Ticks in the scale's unit: integers without decimals, else up to 4 decimals ("2.5", "66").
std::string format_time(Time t, const TimeScale& s);

// Activations in rank shares, the one unit of compare, simulate, search, the pages and JSON
// (docs/JSON.md): one micro-batch's activations of a rank's layers of one pipe, 1/P of the model.
// A chunk of a rank holding v chunks per pipe (interleaved, V) is 1/v, so ZB-V's 2P chunks are P
// as the Zero Bubble paper counts; DualPipe's and Chimera's chunks are whole stages (PP+1 for
// DualPipe, as its README). The engine counts chunks (ScheduleMetrics::peak_activations).
double rank_shares(double chunks, int chunks_per_rank);

// "6 6 6 6" for small P, "min..max" otherwise.
std::string per_rank_summary(const std::vector<std::string>& values, std::size_t max_list = 8);

}  // namespace ppsim
