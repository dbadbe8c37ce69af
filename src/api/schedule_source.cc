#include "api/schedule_source.h"

#include <fmt/format.h>

#include "core/error.h"
#include "schedules/notation.h"
#include "schedules/schedule_list.h"
#include "sim/engine.h"

namespace ppsim::api {

void apply_limits(const ScheduleChoice& c) {
  if (c.max_ops < 0) throw InputError(fmt::format("--max-ops: expected a count >= 1, got {}", c.max_ops), {}, kExitUsage);
  if (c.max_ops > 0) limits().max_ops = c.max_ops;
}

ScheduleParams params_for(const Family& fam, const ScheduleChoice& c) {
  ScheduleParams p;
  p.pp = c.pp.value_or(ScheduleChoice::kDefaultPp);
  p.microbatches = c.microbatches.value_or(ScheduleChoice::kDefaultMicrobatches);
  p.vpp = c.vpp;
  p.group_size = c.group_size;
  return resolve_params(fam, p);
}

Schedule import_file(const ScheduleChoice& c) {
  return import_csv_file(c.schedule_file, c.pp.value_or(0), c.microbatches.value_or(0), parse_layout(c.layout),
                         parse_dialect(c.csv_dialect), c.keep_comm);
}

nlohmann::json import_info(const Schedule& s) {
  nlohmann::json j;
  j["dialect"] = s.dialect;
  std::size_t transfers = 0, fsdp = 0;
  for (const auto& r : s.comm)
    for (const auto& c : r) (c.kind <= CommKind::RecvB ? transfers : fsdp) += 1;
  j["comm_actions"] = transfers + fsdp;
  j["explicit_transfers"] = transfers > 0;
  j["fsdp_actions_ignored"] = fsdp;
  return j;
}

Schedule load_schedule(const std::string& family, const ScheduleChoice& c) {
  apply_limits(c);
  if (c.schedule) return *c.schedule;
  if (!c.schedule_file.empty()) {
    if (!family.empty()) throw InputError("give a schedule family or --schedule-file, not both", {}, kExitUsage);
    return import_file(c);
  }
  if (family.empty()) throw InputError("show needs a schedule family (see 'ppsim schedules') or --schedule-file", {}, kExitUsage);
  const Family& fam = find_family(family);
  return make_schedule(fam.name, params_for(fam, c));
}

std::vector<const Family*> pick_families(const std::string& list) {
  std::vector<const Family*> out = parse_schedule_list(list);
  if (out.empty()) throw InputError("--schedules: no schedule named", {}, kExitUsage);
  return out;
}

std::vector<FamilyInfo> family_infos() {
  std::vector<FamilyInfo> out;
  const UniformTimes t{1, 2, 1, 3};
  for (const auto& fam : families()) out.push_back({&fam, fam.published(ScheduleParams{8, 20, fam.default_vpp, 8}, t)});
  return out;
}

nlohmann::json family_json(const FamilyInfo& f) {
  const Family& fam = *f.family;
  return {{"name", fam.name},
          {"aliases", fam.aliases},
          {"description", fam.description},
          {"constraints", fam.constraints},
          {"parameter_copies", fam.parameter_copies},
          {"chunks_per_rank", fam.default_vpp},
          {"published_bubble", f.published.formula},
          {"published_condition", f.published.condition},
          {"activations_per_rank", fam.activation_formula},
          {"in_all", family_in_all(fam)}};
}

Timeline unit_step_timeline(const Schedule& s) {
  SliceCosts c;
  c.f = kTicksPerUnit;
  c.b = 2 * kTicksPerUnit;
  c.w = kTicksPerUnit;
  c.fb = 3 * kTicksPerUnit;
  SimOptions opt;
  opt.record_timeline = true;
  return simulate(s, uniform_costs(s.stages_per_pipe, c), opt).timeline;
}

}  // namespace ppsim::api
