// Every command's options, declared once (ninja's one table of tools; clap's derive): name, type,
// default, unit, help, and whether the option is the CLI's only (outputs, colours) or Python's
// only. From this table come the CLI11 options and `--help` (src/cli/), the Python keyword
// arguments (python/module.cc), the type stubs (python/ppsim/__init__.pyi), the shell completions
// and docs/CLI.md's option tables (tools/gen_options.py; CTest options_generated).
//
// The edge: a client parses its arguments into Values (typed by the table), and the request of the
// command is built from them once, below (schedule lists and times parsed into types here).
//
// Adding an option: one row in the command's table in options.cc, then read it in the command's
// request builder (requests.cc) or, for a CLI-only output, in src/cli/cmd_<name>.cc; run
// tools/gen_options.py to regenerate the stubs and docs. Adding a command: a table and one row in
// kCommands (options.cc), a setup function in src/cli/commands.h, a Python call in module.cc.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "api/fidelity.h"
#include "api/import_trace.h"
#include "api/model.h"
#include "api/plan.h"
#include "api/request.h"
#include "api/search.h"

namespace ppsim::api {

struct CalibrateRequest;
struct ProfileRequest;
struct ValidateRequest;

enum class Kind {
  Flag,   // a switch (Python: bool)
  Int,    // an integer that fits an int (Python: int)
  Int64,  // a 64-bit integer: counts and seeds (Python: int)
  Real,   // a number (Python: float)
  Text,   // a string (Python: str)
  Texts,  // repeatable or several strings (Python: list[str])
  Ints,   // comma-separated integers (Python: list[int])
};

enum class Reach {
  Both,    // a CLI option and a Python keyword, same name (dashes as underscores) and default
  Cli,     // the CLI's only: an output (a file, a format, colours, progress) or a positional spelling
  Python,  // Python's only: what a Python call returns (timelines) or a Python-shaped input
};

struct Option {
  std::string_view names;  // CLI11's: "--pp,-p"; a positional: its name, without dashes
  Kind kind;
  std::string_view def;  // the default as text; "": unset (None in Python; the command decides)
  std::string_view unit;
  std::string_view help;
  Reach reach = Reach::Both;
  std::string_view choices = {};  // "auto|linear|v": completion and docs
  bool strict = false;            // a value outside `choices` is refused
  std::string_view py = {};       // the Python keyword where it differs from the flag's name
  bool required = false;
  bool positive = false;  // a number that must be > 0
};

struct CommandSpec {
  std::string_view name;
  std::string_view help;
  std::span<const Option> options;
  std::string_view py;  // the Python function ("" none)
};

std::span<const CommandSpec> command_specs();
// The command's table; InternalError when none has that name.
const CommandSpec& command_spec(std::string_view name);
// The option's long name ("pp", "p2p-latency"), or a positional's name.
std::string option_name(const Option& o);
// The Python keyword: `py`, else the long name with dashes as underscores.
std::string python_name(const Option& o);
bool positional(const Option& o);
// The option of `c` with this Python keyword, or nullptr.
const Option* find_option(const CommandSpec& c, std::string_view py_name);

using Value = std::variant<std::monostate, bool, long long, double, std::string, std::vector<std::string>,
                           std::vector<long long>>;

// A command's parsed values, by Python keyword; what was not given reads as the table's default.
// Reading a keyword the table does not have is an InternalError (a typo in a builder).
class Values {
 public:
  explicit Values(const CommandSpec& c) : cmd_(&c) {}
  const CommandSpec& command() const { return *cmd_; }
  void set(std::string_view key, Value v);
  bool given(std::string_view key) const;
  // Whether the command's table has this keyword.
  bool has(std::string_view key) const { return find_option(*cmd_, key) != nullptr; }
  bool flag(std::string_view key) const;
  std::optional<long long> integer(std::string_view key) const;
  std::optional<double> real(std::string_view key) const;
  std::string text(std::string_view key) const;
  std::vector<std::string> texts(std::string_view key) const;
  std::vector<int> ints(std::string_view key) const;
  // Notes for the user the builders gathered (e.g. Megatron-LM arguments not used): stderr.
  mutable std::vector<std::string> notes;

 private:
  const Option& row(std::string_view key) const;
  const Value* find(std::string_view key) const;
  const CommandSpec* cmd_;
  std::vector<std::pair<std::string, Value>> values_;
};

// The choices of `o` ("a|b" -> {a, b}).
std::vector<std::string> choice_list(const Option& o);
// Checks a value against the option's choices (strict options): InputError (exit 2) naming the flag.
void check_choice(const Option& o, const std::string& value);

// The requests, built once from the values (requests.cc). Times and schedule lists are parsed
// here; an error names the CLI flag (Python promises the CLI's messages).
ScheduleChoice schedule_choice(const Values& v);
UnitCosts unit_costs(const Values& v);
Request run_request(const Values& v);  // compare, simulate
SearchCall search_call(const Values& v);
PlanRequest plan_request(const Values& v);
ModelRequest model_request(const Values& v);
FidelityRequest fidelity_request(const Values& v);
CalibrateRequest calibrate_request(const Values& v);
ImportTraceCall import_trace_call(const Values& v);
ProfileRequest profile_request(const Values& v);
ValidateRequest validate_request(const Values& v);
// --calibration FILE as the config override "calibration=<absolute FILE>", so that it is not read
// relative to the config's folder (cost/calibration.h); Python's load_config(calibration=) too.
std::string calibration_set(const std::string& file);

}  // namespace ppsim::api
