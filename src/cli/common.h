// Helpers shared by the subcommands: --times parsing, where a schedule comes from (a family or
// --schedule-file), output formats, and writing files atomically (temp name, then rename).
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/schedule.h"
#include "schedules/registry.h"
#include "sim/costs.h"

namespace ppsim::cli {

// "F=1,B=2,W=1,FB=3" in the user's units -> ticks (kTicksPerUnit per unit). FB defaults to
// F+B, W to 0. Keys are case-insensitive; F&B is accepted for FB.
UniformTimes parse_times(const std::string& spec, const std::string& flag);
// Times for one rank's share cut into v chunks: each op 1/v of the rank's time.
SliceCosts chunk_costs(const UniformTimes& rank_share, int v);
SliceCosts to_slice(const UniformTimes& t);

// Formats ticks in the scale's unit: integers without decimals, else up to 4 decimals.
std::string fmt_time(Time t, const TimeScale& s);
double to_unit(Time t, const TimeScale& s);

// Writes `content` to `path` via a temporary file and a rename; "-" writes to stdout.
void write_output(const std::string& path, const std::string& content);
// Several outputs that appear together or not at all: each file is written to a temporary name
// first, and only when all are written are they renamed into place ("-" or "" is stdout, printed
// after the files). A failure on any leaves none of the files.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& files);

// Options every schedule-taking command shares.
struct ScheduleOptions {
  // kUnset = not given: the config's value, else the defaults below.
  static constexpr int kUnset = -2147483647 - 1;
  int pp = kUnset;
  int microbatches = kUnset;
  static constexpr int kDefaultPp = 8;
  static constexpr int kDefaultMicrobatches = 20;
  int vpp = 0;
  int group_size = 0;
  std::string schedule_file;
  std::string layout = "auto";  // for imported files: auto, linear, v, bidirectional
  long long max_ops = 0;
};
void add_schedule_options(CLI::App& sub, ScheduleOptions& o, bool with_family_counts = true);
void apply_limits(const ScheduleOptions& o);

// The family's parameters with the CLI's values filled in.
ScheduleParams params_for(const Family& fam, const ScheduleOptions& o);

enum class Format { Table, Json, Csv, Text };
Format parse_format(const std::string& s, const std::vector<std::string>& allowed);

}  // namespace ppsim::cli
