// Plan results to and from JSON (plan_json.h).
#include "plan/plan_json.h"

#include <fmt/format.h>

#include <type_traits>

#include "plan/plan_report.h"

namespace ppsim {

namespace {

using nlohmann::json;
constexpr double kGB = 1e9;

Recompute recompute_from(const std::string& s) {
  return s == "full" ? Recompute::full : s == "selective" ? Recompute::selective : Recompute::none;
}

// A plan row's stored fields with their JSON keys, declared once for both ways: row_json writes
// them, row_from reads them back (a shard file) in this order. `f(key, field)` for each.
template <class Row, class F>
void stored_fields(Row& r, F&& f) {
  f("id", r.id);
  f("schedule", r.schedule);
  f("pp", r.pp);
  f("vpp", r.v);
  f("microbatches", r.microbatches);
  f("micro_batch_size", r.mbs);
  f("ep", r.ep);
  f("recompute", r.recompute);
  f("dp", r.dp);
  f("gpus", r.gpus);
  f("step_time_ns", r.step_ns);
  f("tokens_per_second", r.tokens_per_second);
  f("mfu", r.mfu);
  f("bubble_ratio", r.bubble_ratio);
  f("exposed_comm_ns", r.exposed_comm_ns);
  f("peak_memory_bytes", r.peak_memory_bytes);
}

json row_json(const VariantResult& v, const PlanRow& r, int rank, bool with_sets) {
  json j;
  if (rank > 0) j["rank"] = rank;
  stored_fields(r, [&](const char* key, const auto& x) {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, Recompute>)
      j[key] = recompute_name(x);
    else
      j[key] = x;
  });
  // Derived, for readers of the file (row_from does not read them back).
  j["global_batch"] = static_cast<long long>(r.microbatches) * r.mbs * r.dp;
  j["step_time_ms"] = static_cast<double>(r.step_ns) / 1e6;
  j["exposed_comm_ms"] = static_cast<double>(r.exposed_comm_ns) / 1e6;
  j["peak_memory_gb"] = r.peak_memory_bytes / kGB;
  j["headroom_gb"] = (v.memory_cap_bytes - r.peak_memory_bytes) / kGB;
  if (with_sets) j["sets"] = reproduce_sets(v, r);
  return j;
}

// A field of an object, with an error naming the file and the field when it is missing or of
// the wrong type.
struct Reader {
  const std::string& name;
  template <typename T>
  T get(const json& j, const char* key) const {
    if (!j.is_object() || !j.contains(key))
      throw InputError(SourceLoc{name, 0, 0}, fmt::format("not a ppsim plan shard file: '{}' is missing", key));
    try {
      return j.at(key).get<T>();
    } catch (const json::exception&) {
      throw InputError(SourceLoc{name, 0, 0}, fmt::format("not a ppsim plan shard file: '{}' has the wrong type", key));
    }
  }
  const json& at(const json& j, const char* key) const {
    if (!j.is_object() || !j.contains(key))
      throw InputError(SourceLoc{name, 0, 0}, fmt::format("not a ppsim plan shard file: '{}' is missing", key));
    return j.at(key);
  }
};

PlanRow row_from(const Reader& rd, const json& j, int variant) {
  PlanRow r;
  r.variant = variant;
  stored_fields(r, [&](const char* key, auto& x) {
    using T = std::decay_t<decltype(x)>;
    if constexpr (std::is_same_v<T, Recompute>)
      x = recompute_from(rd.get<std::string>(j, key));
    else
      x = rd.get<T>(j, key);
  });
  return r;
}

}  // namespace

json plan_to_json(const PlanResult& r) {
  const bool shard = r.shard_count > 1;
  json j;
  j["ppsim_plan"] = 1;
  j["config"] = r.config_name;
  j["config_file"] = r.config_file;
  j["fingerprint"] = r.fingerprint;
  j["objective"] = objective_name(r.objective);
  j["top_k"] = r.top_k;
  j["constraints"] = r.constraints;
  if (shard) j["shard"] = {{"index", r.shard_index}, {"count", r.shard_count}};
  json vars = json::array();
  for (std::size_t vi = 0; vi < r.variants.size(); ++vi) {
    const VariantResult& v = r.variants[vi];
    json jv;
    jv["name"] = v.name;
    jv["overrides"] = v.overrides;
    jv["given_sets"] = v.given_sets;
    jv["space"] = v.space;
    jv["candidates"] = v.candidates;
    jv["evaluated"] = v.evaluated;
    jv["feasible"] = v.feasible.size();
    jv["memory_cap_bytes"] = v.memory_cap_bytes;
    jv["memory_cap_gb"] = v.memory_cap_bytes / kGB;
    jv["gpus"] = v.gpus;
    json rej = json::array();
    for (int k = 0; k < kReasons; ++k) {
      const Rejections& x = v.rejected[static_cast<std::size_t>(k)];
      if (x.count == 0) continue;
      rej.push_back({{"reason", reason_name(static_cast<Reason>(k))}, {"count", x.count}, {"example_id", x.example_id},
                     {"example", x.example}});
    }
    jv["rejected"] = rej;
    if (v.nearest.any)
      jv["nearest_rejected_for_memory"] = {{"id", v.nearest.id},
                                           {"candidate", v.nearest.candidate},
                                           {"peak_memory_bytes", v.nearest.need_bytes},
                                           {"simulated", v.nearest.simulated}};
    json by = json::array();
    for (const auto& [name, counts] : v.rejected_by_schedule) {
      json c = json::object();
      for (int k = 0; k < kReasons; ++k)
        if (counts[static_cast<std::size_t>(k)] > 0) c[reason_name(static_cast<Reason>(k))] = counts[static_cast<std::size_t>(k)];
      by.push_back({{"schedule", name}, {"rejected", c}});
    }
    jv["rejected_by_schedule"] = by;
    json ranking = json::array();
    for (std::size_t i = 0; i < v.ranking.size(); ++i) ranking.push_back(row_json(v, v.ranking[i], static_cast<int>(i + 1), true));
    jv["ranking"] = ranking;
    json best = json::array();
    for (const PlanRow& b : v.best_per_schedule) best.push_back(row_json(v, b, 0, true));
    jv["best_per_schedule"] = best;
    if (shard) {
      json all = json::array();
      for (const PlanRow& f : v.feasible) all.push_back(row_json(v, f, 0, false));
      jv["feasible_plans"] = all;
      json lays = json::array();
      for (const auto& [k, sets] : v.layout_sets)
        lays.push_back({{"pp", k.pp}, {"vpp", k.v}, {"micro_batch_size", k.mbs}, {"ep", k.ep},
                        {"recompute", recompute_name(k.recompute)}, {"sets", sets}});
      jv["layouts"] = lays;
    }
    vars.push_back(jv);
  }
  j["variants"] = vars;
  if (r.variants.size() > 1) {
    json w = json::array();
    for (const WhatIfRow& x : whatif_rows(r)) {
      json e;
      e["variant"] = x.variant;
      e["feasible"] = x.best != nullptr;
      if (x.best != nullptr) {
        e["best"] = row_json(r.variants[x.index], *x.best, 0, false);
        e["step_time_delta_pct"] = x.delta_pct;
        e["schedule_changed"] = x.schedule_changed;
        e["layout_changed"] = x.layout_changed;
      }
      w.push_back(e);
    }
    j["whatif"] = w;
  }
  return j;
}

std::string render_plan_json(const PlanResult& r) { return plan_to_json(r).dump(2) + "\n"; }

PlanResult plan_from_json(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw InputError(SourceLoc{name, 0, 0}, fmt::format("not a ppsim plan shard file: invalid JSON ({})", e.what()));
  }
  const Reader rd{name};
  if (!j.is_object() || !j.contains("ppsim_plan"))
    throw InputError(SourceLoc{name, 0, 0}, "not a ppsim plan JSON file (no 'ppsim_plan' field)");
  if (!j.contains("shard"))
    throw InputError(SourceLoc{name, 0, 0}, "not a shard file: write shards with ppsim plan --shard i/n --format json");
  PlanResult r;
  r.config_name = rd.get<std::string>(j, "config");
  r.config_file = rd.get<std::string>(j, "config_file");
  r.fingerprint = rd.get<std::string>(j, "fingerprint");
  r.objective = rd.get<std::string>(j, "objective") == "tokens_per_second" ? Objective::tokens_per_second : Objective::step_time;
  r.top_k = rd.get<int>(j, "top_k");
  r.constraints = rd.get<std::string>(j, "constraints");
  r.shard_index = rd.get<int>(rd.at(j, "shard"), "index");
  r.shard_count = rd.get<int>(rd.at(j, "shard"), "count");
  if (r.shard_count < 1 || r.shard_index < 0 || r.shard_index >= r.shard_count)
    throw InputError(SourceLoc{name, 0, 0}, fmt::format("shard {}/{} is not a valid i/n", r.shard_index, r.shard_count));
  const json& vars = rd.at(j, "variants");
  if (!vars.is_array()) throw InputError(SourceLoc{name, 0, 0}, "not a ppsim plan shard file: 'variants' is not a list");
  for (std::size_t vi = 0; vi < vars.size(); ++vi) {
    const json& jv = vars[vi];
    VariantResult v;
    v.name = rd.get<std::string>(jv, "name");
    v.overrides = rd.get<std::vector<std::string>>(jv, "overrides");
    if (jv.contains("given_sets")) v.given_sets = rd.get<std::vector<std::string>>(jv, "given_sets");
    v.space = rd.get<std::vector<std::string>>(jv, "space");
    v.candidates = rd.get<std::uint64_t>(jv, "candidates");
    v.evaluated = rd.get<std::uint64_t>(jv, "evaluated");
    v.memory_cap_bytes = rd.get<double>(jv, "memory_cap_bytes");
    v.gpus = rd.get<int>(jv, "gpus");
    for (const json& x : rd.at(jv, "rejected")) {
      const std::string reason = rd.get<std::string>(x, "reason");
      int k = 0;
      while (k < kReasons && reason != reason_name(static_cast<Reason>(k))) ++k;
      if (k == kReasons) throw InputError(SourceLoc{name, 0, 0}, fmt::format("unknown rejection reason '{}'", reason));
      Rejections& rj = v.rejected[static_cast<std::size_t>(k)];
      rj.count = rd.get<std::uint64_t>(x, "count");
      rj.example_id = rd.get<std::uint64_t>(x, "example_id");
      rj.example = rd.get<std::string>(x, "example");
    }
    if (jv.contains("nearest_rejected_for_memory")) {
      const json& x = jv["nearest_rejected_for_memory"];
      v.nearest = {true, rd.get<std::uint64_t>(x, "id"), rd.get<std::string>(x, "candidate"),
                   rd.get<double>(x, "peak_memory_bytes"), !x.contains("simulated") || rd.get<bool>(x, "simulated")};
    }
    for (const json& x : rd.at(jv, "rejected_by_schedule")) {
      std::array<std::uint64_t, kReasons> counts{};
      const json& c = rd.at(x, "rejected");
      for (int k = 0; k < kReasons; ++k) {
        const char* key = reason_name(static_cast<Reason>(k));
        if (c.contains(key)) counts[static_cast<std::size_t>(k)] = rd.get<std::uint64_t>(c, key);
      }
      v.rejected_by_schedule.emplace_back(rd.get<std::string>(x, "schedule"), counts);
    }
    for (const json& x : rd.at(jv, "feasible_plans")) v.feasible.push_back(row_from(rd, x, static_cast<int>(vi)));
    for (const json& x : rd.at(jv, "layouts")) {
      LayoutKey k{static_cast<int>(vi), rd.get<int>(x, "pp"), rd.get<int>(x, "vpp"), rd.get<int>(x, "micro_batch_size"),
                  rd.get<int>(x, "ep"), recompute_from(rd.get<std::string>(x, "recompute"))};
      v.layout_sets.emplace(k, rd.get<std::vector<std::string>>(x, "sets"));
    }
    r.variants.push_back(std::move(v));
  }
  return r;
}

}  // namespace ppsim
