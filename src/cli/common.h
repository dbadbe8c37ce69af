// Helpers shared by the subcommands: the schedule flags (turned into the library's
// api::ScheduleChoice), output formats, and writing files atomically (temp name, then rename).
// Nothing here decides a cost: times and costs are src/api/'s.
#pragma once
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/request.h"
#include "api/schedule_source.h"
#include "core/time.h"

namespace ppsim::cli {

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
  int vpp = 0;
  int group_size = 0;
  std::string schedule_file;
  std::string layout = "auto";  // for imported files: auto, linear, v, bidirectional
  std::string csv_dialect = "auto";  // for imported files: auto, current, 2.5
  bool drop_comm = false;            // drop an imported file's comm actions
  long long max_ops = 0;
};
void add_schedule_options(CLI::App& sub, ScheduleOptions& o, bool with_family_counts = true);
// The overlap model's unit flags (--a2a, --layers, --attn-share, --comm-sms, --sms), shared by
// compare/simulate and search: they fill the library's UnitCosts (off while --a2a is not given).
void add_overlap_options(CLI::App& sub, api::UnitCosts& u);
// The flags as the library's request (kUnset -> unset).
api::ScheduleChoice to_choice(const ScheduleOptions& o);

enum class Format { Table, Json, Csv, Text };
Format parse_format(const std::string& s, const std::vector<std::string>& allowed);

}  // namespace ppsim::cli
