// Reading the plan: section (search_space.h). Every value is checked where it is written: a
// misspelt key or schedule gets a suggestion, a number out of range its file:line:col.
#include "plan/search_space.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "core/enum_names.h"
#include "cost/yaml_reader.h"
#include "plan/searched_family.h"
#include "schedules/registry.h"
#include "schedules/schedule_list.h"

namespace ppsim {

const char* objective_name(Objective o) { return o == Objective::tokens_per_second ? "tokens_per_second" : "step_time"; }

const char* recompute_name(Recompute r) {
  return enum_name(r, {{Recompute::none, "none"}, {Recompute::selective, "selective"}, {Recompute::full, "full"}});
}

namespace {

SchemaNode leaf(const char* name) { return SchemaNode{name, {}, false}; }

const SchemaNode& plan_schema() {
  static const SchemaNode s{"plan",
                            {SchemaNode{"search",
                                        {leaf("schedules"), leaf("pp"), leaf("vpp"), leaf("microbatches"),
                                         leaf("micro_batch_size"), leaf("ep"), leaf("recompute")},
                                        false},
                             SchemaNode{"constraints", {leaf("memory_gb"), leaf("reserve_gb"), leaf("global_batch"), leaf("gpus")}, false},
                             leaf("objective"), leaf("top_k"), SchemaNode{"whatif", {}, true}},
                            false};
  return s;
}

const SchemaNode& child_schema(const char* name) {
  const SchemaNode* c = plan_schema().find(name);
  PPSIM_CHECK(c != nullptr, "plan schema has no '{}'", name);
  return *c;
}

// An integer list: a scalar, or a list whose items are integers or {from, to, step} ranges.
// Repeated values are an error (they would repeat candidates).
std::vector<int> int_list(const MapReader& r, const std::string& key, std::int64_t min, std::int64_t max) {
  std::vector<int> out;
  if (!r.has(key)) return out;
  const YAML::Node n = r.value(key);
  const std::string path = r.path(key);
  auto add = [&](std::int64_t v, const YAML::Node& at) {
    if (std::find(out.begin(), out.end(), static_cast<int>(v)) != out.end())
      r.ctx().fail(at, path, fmt::format("{} lists {} twice", path, v));
    out.push_back(static_cast<int>(v));
  };
  static const SchemaNode range_schema{"range", {leaf("from"), leaf("to"), leaf("step")}, false};
  auto item = [&](const YAML::Node& it, const std::string& item_path) {
    if (it.IsMap()) {
      const MapReader rr(r.ctx(), it, item_path, range_schema);
      const std::int64_t from = rr.required_integer("from", min, max);
      const std::int64_t to = rr.required_integer("to", min, max);
      const std::int64_t step = rr.integer("step", 1, 1, max);
      if (to < from) rr.fail("to", fmt::format("{}.to = {} is below {}.from = {}", item_path, to, item_path, from));
      if ((to - from) / step >= 100000) rr.fail("step", fmt::format("{} would list over 100000 values", item_path));
      for (std::int64_t v = from; v <= to; v += step) add(v, it);
      return;
    }
    add(r.to_integer(it, item_path, min, max), it);
  };
  if (n.IsSequence()) {
    if (n.size() == 0) r.fail(key, fmt::format("{} must not be an empty list (leave it out to use the config's value)", path));
    for (std::size_t i = 0; i < n.size(); ++i) item(n[i], fmt::format("{}[{}]", path, i));
  } else if (n.IsMap() || n.IsScalar()) {
    item(n, path);
  } else {
    r.fail(key, fmt::format("{} must be an integer or a list of integers, got {}", path, describe_node(n)));
  }
  return out;
}

// Scalars of a string list: a list, or one scalar that may hold a comma list.
std::vector<std::pair<std::string, YAML::Node>> string_items(const MapReader& r, const std::string& key) {
  std::vector<std::pair<std::string, YAML::Node>> out;
  const YAML::Node n = r.value(key);
  const std::string path = r.path(key);
  auto split = [&](const YAML::Node& item, const std::string& item_path) {
    if (!item.IsScalar()) r.ctx().fail(item, item_path, fmt::format("{} must be a name, got {}", item_path, describe_node(item)));
    const std::string& s = item.Scalar();
    // The list parser of schedules (schedule_list.h), whose "all" is kept here as an item.
    if (s.find_first_not_of(" \t") != std::string::npos && is_all_schedules(s)) out.emplace_back("all", item);
    for (std::string& name : split_schedule_names(s)) out.emplace_back(std::move(name), item);
  };
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) split(n[i], fmt::format("{}[{}]", path, i));
  } else {
    split(n, path);
  }
  if (out.empty()) r.fail(key, fmt::format("{} must name at least one value (leave it out to use the config's value)", path));
  return out;
}

std::vector<std::string> schedule_list(const MapReader& r) {
  std::vector<std::string> out;
  if (!r.has("schedules")) return out;
  const std::string path = r.path("schedules");
  for (const auto& [name, node] : string_items(r, "schedules")) {
    if (name == "all") {
      for (const auto& f : families())
        if (family_in_all(f) && std::find(out.begin(), out.end(), f.name) == out.end()) out.push_back(f.name);
      continue;
    }
    std::string canonical;
    try {
      canonical = plan_family(name).name;
    } catch (const InputError& e) {
      r.ctx().fail(node, path, path + ": " + e.message(), e.suggestion());
    }
    if (std::find(out.begin(), out.end(), canonical) != out.end())
      r.ctx().fail(node, path, fmt::format("{} lists '{}' twice", path, canonical));
    out.push_back(canonical);
  }
  return out;
}

Recompute to_recompute(const std::string& s) {
  return s == "full" ? Recompute::full : s == "selective" ? Recompute::selective : Recompute::none;
}

std::vector<Recompute> recompute_list(const MapReader& r) {
  std::vector<Recompute> out;
  if (!r.has("recompute")) return out;
  const std::string path = r.path("recompute");
  const std::vector<std::string> allowed{"none", "selective", "full"};
  for (const auto& [name, node] : string_items(r, "recompute")) {
    std::string lower = name;
    for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (std::find(allowed.begin(), allowed.end(), lower) == allowed.end())
      r.ctx().fail(node, path, fmt::format("{} must be none, selective or full, got '{}'", path, name),
                   closest_match(lower, allowed));
    const Recompute v = to_recompute(lower);
    if (std::find(out.begin(), out.end(), v) != out.end())
      r.ctx().fail(node, path, fmt::format("{} lists '{}' twice", path, lower));
    out.push_back(v);
  }
  return out;
}

PlanConstraints read_constraints(const MapReader& r) {
  PlanConstraints c;
  if (r.has("memory_gb") && r.has("reserve_gb"))
    r.fail("reserve_gb", "give plan.constraints.memory_gb (a fixed cap) or reserve_gb (hardware.hbm_gb minus it), not both");
  if (r.has("memory_gb")) {
    c.memory_gb = r.number("memory_gb", 0, 0, 1e6, true);
    c.memory_gb_at = r.loc("memory_gb");
  }
  c.reserve_gb = r.number("reserve_gb", 0, 0, 1e6, false);
  if (r.has("global_batch")) {
    const YAML::Node n = r.value("global_batch");
    if (n.IsMap()) {
      static const SchemaNode range{"global_batch", {leaf("min"), leaf("max")}, false};
      const MapReader gb(r.ctx(), n, r.path("global_batch"), range);
      if (!gb.has("min") && !gb.has("max"))
        r.fail("global_batch", "plan.constraints.global_batch needs min, max or both (or one number: exact)");
      c.global_batch_min = gb.integer("min", 1, 1, 1LL << 40);
      c.global_batch_max = gb.integer("max", 1LL << 40, 1, 1LL << 40);
      if (c.global_batch_max < c.global_batch_min)
        gb.fail("max", fmt::format("plan.constraints.global_batch.max = {} is below its min = {}", c.global_batch_max,
                                   c.global_batch_min));
    } else {
      c.global_batch_min = c.global_batch_max = r.integer("global_batch", 0, 1, 1LL << 40);
    }
  }
  c.gpus = static_cast<int>(r.integer("gpus", 0, 1, 1 << 24));
  return c;
}

std::vector<WhatIf> read_whatif(const MapReader& plan) {
  std::vector<WhatIf> out;
  if (!plan.has("whatif")) return out;
  const YAML::Node n = plan.value("whatif");
  const std::string path = plan.path("whatif");
  if (n.IsNull()) return out;
  if (!n.IsMap()) plan.fail("whatif", fmt::format("{} must be a map of named variants, got {}", path, describe_node(n)));
  // MapReader with an open schema checks key shapes and duplicates.
  static const SchemaNode open{"whatif", {}, true};
  const MapReader variants(plan.ctx(), n, path, open);
  for (auto it = n.begin(); it != n.end(); ++it) {
    const std::string name = it->first.Scalar();
    const std::string vpath = path + "." + name;
    WhatIf w;
    w.name = name;
    w.loc = plan.ctx().loc(it->first, vpath);
    if (name == "base")
      plan.ctx().fail(it->first, vpath, "what-if name 'base' is reserved for the config as written");
    const YAML::Node body = it->second;
    if (!body.IsMap() || body.size() == 0)
      plan.ctx().fail(body.IsNull() ? it->first : body, vpath,
                      fmt::format("{} must be a non-empty map of key.path: value overrides, got {}", vpath, describe_node(body)));
    const MapReader keys(plan.ctx(), body, vpath, open);
    for (auto kt = body.begin(); kt != body.end(); ++kt) {
      WhatIfOverride o;
      o.key = kt->first.Scalar();
      o.value = kt->second;
      o.key_loc = plan.ctx().loc(kt->first, vpath + "." + o.key);
      if (o.key == "plan" || o.key.rfind("plan.", 0) == 0)
        plan.ctx().fail(kt->first, vpath, fmt::format("what-if '{}': a variant cannot change the plan itself ('{}')", name, o.key));
      w.overrides.push_back(std::move(o));
    }
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace

PlanSpec read_plan_spec(const ModelConfigData& cfg, const std::vector<std::string>& set_paths) {
  PlanSpec spec;
  const YamlContext ctx(cfg.file, set_paths);
  const MapReader plan(ctx, cfg.plan, "plan", plan_schema());
  const MapReader search = plan.child("search", child_schema("search"));
  // List items are located by their own path ("plan.search.pp[1]"), which the --set prefix rule
  // does not match: a list that came from --set reports at "--set" here.
  auto guarded = [&](const std::string& key, auto&& read) {
    try {
      return read();
    } catch (const InputError& e) {
      const std::string path = search.path(key);
      for (const auto& p : set_paths)
        if (path == p || path.rfind(p + ".", 0) == 0) throw InputError(SourceLoc{"--set", 0, 0}, e.message(), e.suggestion(), e.exit_code());
      throw;
    }
  };
  spec.search.schedules = guarded("schedules", [&] { return schedule_list(search); });
  spec.search.pp = guarded("pp", [&] { return int_list(search, "pp", 1, 4096); });
  spec.search.vpp = guarded("vpp", [&] { return int_list(search, "vpp", 2, kMaxVpp); });
  spec.search.microbatches = guarded("microbatches", [&] { return int_list(search, "microbatches", 1, 1 << 20); });
  spec.search.micro_batch_size = guarded("micro_batch_size", [&] { return int_list(search, "micro_batch_size", 1, 65536); });
  spec.search.ep = guarded("ep", [&] { return int_list(search, "ep", 1, 65536); });
  spec.search.recompute = guarded("recompute", [&] { return recompute_list(search); });
  spec.constraints = read_constraints(plan.child("constraints", child_schema("constraints")));
  spec.objective = plan.choice("objective", "step_time", {"step_time", "tokens_per_second"}) == "tokens_per_second"
                       ? Objective::tokens_per_second
                       : Objective::step_time;
  spec.top_k = static_cast<int>(plan.integer("top_k", 10, 1, 100000));
  spec.whatif = read_whatif(plan);
  return spec;
}

std::uint64_t SearchSpace::size() const {
  std::uint64_t per_v = 0;
  for (const Family* f : families) per_v += family_takes_vpp(f->name) ? vpp.size() : 1;
  return per_v * pp.size() * microbatches.size() * micro_batch_size.size() * ep.size() * recompute.size();
}

SearchSpace resolve_space(const SearchLists& lists, const ModelConfigData& c) {
  SearchSpace s;
  std::vector<std::string> names = lists.schedules;
  if (names.empty()) {
    const std::string& list = c.parallel.schedule;
    if (is_all_schedules(list)) {
      for (const auto& f : families())
        if (family_in_all(f)) names.push_back(f.name);
    } else {
      for (const std::string& name : split_schedule_names(list)) {
        const std::string canonical = plan_family(name).name;
        if (std::find(names.begin(), names.end(), canonical) == names.end()) names.push_back(canonical);
      }
    }
  }
  for (const auto& n : names) s.families.push_back(&plan_family(n));
  s.pp = lists.pp.empty() ? std::vector<int>{c.parallel.pp} : lists.pp;
  s.vpp = lists.vpp.empty() ? std::vector<int>{c.parallel.has_vpp && c.parallel.vpp >= 2 ? c.parallel.vpp : 2} : lists.vpp;
  s.microbatches = lists.microbatches.empty() ? std::vector<int>{c.parallel.microbatches} : lists.microbatches;
  s.micro_batch_size = lists.micro_batch_size.empty() ? std::vector<int>{c.model.micro_batch_size} : lists.micro_batch_size;
  s.ep = lists.ep.empty() ? std::vector<int>{c.parallel.ep} : lists.ep;
  s.recompute = lists.recompute.empty() ? std::vector<Recompute>{c.parallel.recompute} : lists.recompute;
  return s;
}

void enumerate_candidates(const SearchSpace& space, int variant, std::vector<PlanCandidate>& out) {
  for (const Family* fam : space.families) {
    const bool interleaved = family_takes_vpp(fam->name);
    const std::vector<int> vs = interleaved ? space.vpp : std::vector<int>{fam->default_vpp};
    for (int v : vs)
      for (int pp : space.pp)
        for (int m : space.microbatches)
          for (int b : space.micro_batch_size)
            for (int ep : space.ep)
              for (Recompute rc : space.recompute) {
                PlanCandidate c;
                c.id = out.size();
                c.variant = variant;
                c.family = fam;
                c.pp = pp;
                c.v = v;
                c.microbatches = m;
                c.mbs = b;
                c.ep = ep;
                c.recompute = rc;
                out.push_back(c);
              }
  }
}

std::string describe_candidate(const PlanCandidate& c) {
  return fmt::format("{} pp={} v={} M={} mbs={} ep={} recompute={}", c.family->name, c.pp, c.v, c.microbatches, c.mbs, c.ep,
                     recompute_name(c.recompute));
}

}  // namespace ppsim
