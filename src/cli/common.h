// Helpers shared by the subcommands: the options table bound to CLI11 (api/options.h), output
// formats, and writing files atomically (temp name, then rename).
// Nothing here decides a cost: times and costs are src/api/'s.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/options.h"
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

// The command's options from its table (api/options.h) on `sub`, parsed into the returned values
// (CLI11 fills them while it parses); options the table gives Python only are left out.
std::shared_ptr<api::Values> bind_options(CLI::App& sub, std::string_view command);
// The notes the request builders gathered, one "ppsim: note: ..." line each on stderr.
void print_notes(const api::Values& v);
// Whether an earlier file of `files` goes to stdout ("-"): the report then stays off it, so that
// `--trace -` writes only the trace (docs/CLI.md).
bool stdout_taken(const std::vector<std::pair<std::string, std::string>>& files);

enum class Format { Table, Json, Csv, Text };
Format parse_format(const std::string& s, const std::vector<std::string>& allowed);

}  // namespace ppsim::cli
