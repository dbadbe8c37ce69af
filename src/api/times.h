// Times in the user's units: the "F=1,B=2,W=1,FB=3" strings of --times / --chunk-times (and of
// the Python module's times=), and single amounts such as --p2p-latency, turned into ticks
// (kTicksPerUnit per unit) and per-chunk SliceCosts.
//
// Not obvious: every error names the CLI flag it came from (`flag`), because the Python module
// promises the CLI's messages word for word (python/tests/test_errors.py checks it).
#pragma once
#include <optional>
#include <string>

#include "core/time.h"
#include "schedules/registry.h"
#include "sim/costs.h"

namespace ppsim::api {

// "F=1,B=2,W=1,FB=3" in the user's units -> ticks. FB defaults to F+B, W to 0. Keys are
// case-insensitive; F&B is accepted for FB. InputError (exit 2) on a bad key, value or W > B.
UniformTimes parse_times(const std::string& spec, const std::string& flag);
// The whole text as a finite number ("1.5", "2e3"), else nullopt.
std::optional<double> parse_number(const std::string& text);
// One amount in units (>= 0, at most 1e9) -> ticks; InputError (exit 2) naming `flag` otherwise.
Time units_to_ticks(double v, const char* flag);

SliceCosts to_slice(const UniformTimes& t);
// Times for one rank's share cut into v chunks: each op 1/v of the rank's time.
SliceCosts chunk_costs(const UniformTimes& rank_share, int v);

}  // namespace ppsim::api
