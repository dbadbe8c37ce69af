// Where a schedule comes from: a family with P, M, v, G (unset counts take the defaults P = 8,
// M = 20, or a config's parallel section), a PyTorch compute-only CSV file, or a schedule already
// in memory (the Python module's Schedule). Also what `ppsim schedules` and ppsim.families()
// report about each family.
//
// Not obvious: "unset" is std::nullopt, not 0, because --pp 0 must reach the registry and fail
// with its message rather than silently become the default.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/schedule.h"
#include "core/timeline.h"
#include "schedules/registry.h"

namespace ppsim::api {

struct ScheduleChoice {
  std::optional<int> pp;             // unset: the config's parallel.pp, else kDefaultPp
  std::optional<int> microbatches;   // unset: the config's, else kDefaultMicrobatches
  int vpp = 0;                       // 0: the config's, else the family's default
  int group_size = 0;                // 0: P
  std::string schedule_file;         // a PyTorch compute-only CSV instead of a family
  std::string layout = "auto";       // of an imported file: auto, linear, v, bidirectional
  std::string csv_dialect = "auto";  // of an imported file: auto, current, 2.5 (notation.h)
  bool keep_comm = true;             // false: an imported file's comm actions are dropped
  std::optional<Schedule> schedule;  // a schedule already imported or built (wins over the file)
  // With `schedule`: the family parameters it was generated with (its family is then registered
  // and results carry the published figures, as for the family itself); unset for imports.
  std::optional<ScheduleParams> generated_with;
  long long max_ops = 0;             // > 0: lowers or raises limits().max_ops (process-wide)
  static constexpr int kDefaultPp = 8;
  static constexpr int kDefaultMicrobatches = 20;
};

// Applies max_ops (InputError exit 2 when negative).
void apply_limits(const ScheduleChoice& c);
// The family's parameters with the choice's values (or the defaults) filled in.
ScheduleParams params_for(const Family& fam, const ScheduleChoice& c);
// Reads and validates schedule_file with the choice's P/M (unset: inferred), layout and dialect.
Schedule import_file(const ScheduleChoice& c);
// What results report about an imported schedule: its dialect and comm actions (JSON object).
nlohmann::json import_info(const Schedule& s);
// `ppsim show`'s rule: a family, or the file, not both (InputError exit 2); limits applied first.
Schedule load_schedule(const std::string& family, const ScheduleChoice& c);
// "all" (or "") -> every family; else a comma-separated list; unknown names throw with a suggestion.
std::vector<const Family*> pick_families(const std::string& list);

// What `ppsim schedules` prints for a family: its published bubble stated at P = 8, M = 20,
// F = 1, B = 2, W = 1, F&B = 3 (the formula and condition are the same for any P, M).
struct FamilyInfo {
  const Family* family = nullptr;
  PublishedBubble published;
};
std::vector<FamilyInfo> family_infos();
// One entry of `ppsim schedules --format json` (and of ppsim.families()).
nlohmann::json family_json(const FamilyInfo& f);

// The unit-step timeline `ppsim show` draws: F = 1, B = 2, W = 1, F&B = 3 per chunk, no latency.
Timeline unit_step_timeline(const Schedule& s);

}  // namespace ppsim::api
