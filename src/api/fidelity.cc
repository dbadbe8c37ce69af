// api::fidelity: configs/published/ against their sources (fidelity.h).
#include "api/fidelity.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "api/data_dir.h"
#include "api/fidelity_search.h"
#include "api/request.h"
#include "core/error.h"
#include "cost/config.h"
#include "cost/flops.h"
#include "cost/step_costs.h"
#include "cost/yaml_reader.h"
#include "schedules/registry.h"

namespace ppsim::api {

namespace {

constexpr double kGiBInGB = 1.073741824;  // 2^30 / 1e9

SchemaNode leaf(const char* n) { return SchemaNode{n, {}, false}; }

const SchemaNode& published_schema() {
  static const SchemaNode s{"published",
                            {leaf("source"), leaf("flops"), leaf("baseline"), leaf("results"), leaf("memory_gb"), leaf("fits_gb")},
                            false};
  return s;
}

const SchemaNode& result_schema() {
  static const SchemaNode s{"result",
                            {leaf("label"), leaf("schedule"), leaf("microbatches"), leaf("vpp"), leaf("source"),
                             leaf("tokens_per_s"), leaf("samples_per_gpu_s"), leaf("tflops_per_gpu"),
                             leaf("gpu_hours_per_trillion_tokens"), leaf("memory_gb"), leaf("fits_gb"), leaf("search_cap"), leaf("post_validation"), leaf("set"),
                             leaf("relative_to")},
                            false};
  return s;
}

// Narayanan et al. 2021, eq. (3): FLOPs of one iteration with full recompute (the forward counted
// twice), B sequences of s tokens, l layers, hidden h, vocabulary V:
//   F = 96 B s l h^2 (1 + s / (6h) + V / (16 l h))
double megatron_flops(const ModelSpec& m, double sequences) {
  const double s = static_cast<double>(m.seq_len), l = m.layers, h = static_cast<double>(m.hidden),
               V = static_cast<double>(m.vocab);
  return 96.0 * sequences * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

struct Thresholds {
  std::map<std::string, std::pair<double, std::optional<double>>> by_key;
};

Thresholds read_thresholds(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(fmt::format("cannot read the thresholds file '{}'", path), {}, kExitIo);
  Thresholds t;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    const std::size_t hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    std::string key;
    if (!(ls >> key)) continue;
    double err = 0;
    if (!(ls >> err) || !(err >= 0))
      throw InputError(SourceLoc{path, n, 1}, fmt::format("expected '<key> <max |error| %> [<max relative pp>]', got '{}'", line));
    std::optional<double> rel;
    double r = 0;
    if (ls >> r) rel = r;
    t.by_key[key] = {err, rel};
  }
  return t;
}

std::vector<std::string> published_files(const FidelityRequest& req) {
  if (!req.files.empty()) return req.files;
  std::vector<std::string> out;
  std::error_code ec;
  const std::string dir = shipped_dir(req.dir);  // beside the binary or module when not here
  if (!std::filesystem::is_directory(dir, ec))
    throw InputError(fmt::format("'{}' is not a directory of published configs", req.dir), {}, kExitIo);
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  if (out.empty()) throw InputError(fmt::format("no *.yaml files in '{}'", req.dir), {}, kExitInput);
  return out;
}

// A schedule family's registry name; an unknown one fails at the key, with the registry's suggestion.
std::string family_name(const MapReader& r, const std::string& key, const std::string& name) {
  if (name == "searched") return name;
  try {
    return find_family(name).name;
  } catch (const InputError& e) {
    r.fail(key, e.message(), e.suggestion());
  }
}

}  // namespace

FidelityResult fidelity(const FidelityRequest& req) {
  FidelityResult out;
  std::optional<Thresholds> th;
  if (!req.thresholds.empty()) th = read_thresholds(req.thresholds);
  const std::vector<std::string> files = published_files(req);
  for (const std::string& file : files) {
    if (req.progress) req.progress(static_cast<std::size_t>(&file - files.data()), files.size(), file);
    const ModelConfig base = load_config(file, req.sets);
    const ModelConfigData& c = *base.data;
    const YamlContext ctx(file, {});
    YAML::Node pub;
    for (auto it = c.tree.begin(); it != c.tree.end(); ++it)
      if (it->first.Scalar() == "published") pub.reset(it->second);
    if (!pub.IsDefined() || !pub.IsMap())
      throw InputError(SourceLoc{file, 1, 1}, "a published config needs a published: map (docs/FIDELITY.md)");
    const MapReader pr(ctx, pub, "published", published_schema());
    const std::string source = pr.string("source", "");
    const std::string flops = pr.choice("flops", "model", {"model", "megatron"});
    const std::string baseline = pr.string("baseline", "");
    const YAML::Node results = pr.value("results");
    if (!results.IsSequence() || results.size() == 0) pr.fail("results", "published.results must be a non-empty list");
    const std::string stem = std::filesystem::path(file).stem().string();
    const std::size_t first_row = out.rows.size();
    std::vector<std::string> relative_to(results.size());  // each result's relative_to: label, or empty
    for (std::size_t i = 0; i < results.size(); ++i) {
      const MapReader rr(ctx, results[i], fmt::format("published.results[{}]", i), result_schema());
      FidelityRow row;
      row.run = c.name;
      row.schedule = rr.string("schedule", c.parallel.schedule);
      row.schedule = family_name(rr, "schedule", row.schedule);
      row.microbatches = static_cast<int>(rr.integer("microbatches", c.parallel.microbatches, 1, 1 << 20));
      row.vpp = static_cast<int>(rr.integer("vpp", c.parallel.has_vpp ? c.parallel.vpp : 2, 1, 64));
      row.label = rr.string("label", fmt::format("{} M={}", row.schedule, row.microbatches));
      row.key = stem + "/" + row.label;
      for (char& ch : row.key)
        if (ch == ' ') ch = '_';
      row.source = rr.string("source", source);
      relative_to[i] = rr.string("relative_to", "");
      if (rr.has("memory_gb")) row.published_memory_gb = rr.number("memory_gb", 0, 0, 1e6, true);
      else if (pr.has("memory_gb")) row.published_memory_gb = pr.number("memory_gb", 0, 0, 1e6, true);
      if (rr.has("fits_gb")) row.fits_gb = rr.number("fits_gb", 0, 0, 1e6, true);
      else if (pr.has("fits_gb")) row.fits_gb = pr.number("fits_gb", 0, 0, 1e6, true);

      // Simulate this result's schedule and micro-batches on the config.
      // The run's optimizer step: Zero Bubble's post-validation (parallel.post_validation) where the
      // source's code enabled it for this schedule and not for its baselines; --set overrides it.
      std::vector<std::string> sets;
      // The row's own layout or model (a source's table of runs that differ in TP, heads, ...):
      // config keys as --set takes them, before the command line's --set.
      if (rr.has("set")) {
        const YAML::Node rs = rr.value("set");
        if (!rs.IsMap() || rs.size() == 0) rr.fail("set", "set: expected a map of config keys to values, e.g. {parallel.tp: 8}");
        for (auto it = rs.begin(); it != rs.end(); ++it) {
          if (!it->second.IsScalar())
            rr.fail("set", fmt::format("set.{}: expected a scalar value (a number, a string or a bool)", it->first.Scalar()));
          sets.push_back(it->first.Scalar() + "=" + it->second.Scalar());
          row.set += (row.set.empty() ? "" : " ") + sets.back();
        }
      }
      if (rr.has("post_validation")) sets.push_back(fmt::format("parallel.post_validation={}", rr.boolean("post_validation", false)));
      sets.insert(sets.end(), req.sets.begin(), req.sets.end());
      sets.push_back(fmt::format("parallel.microbatches={}", row.microbatches));
      ModelConfig cfg;
      try {
        cfg = load_config(file, sets);
      } catch (const InputError& e) {
        if (row.set.empty()) throw;
        rr.fail("set", e.message(), e.suggestion());  // an unknown key or a bad value, at the row
      }
      const ModelConfigData& cd = *cfg.data;
      row.gpus = cd.parallel.gpus();
      Request rq;
      rq.loaded_config = cfg;
      rq.config_name = c.name;
      rq.families = row.schedule;
      rq.single = true;
      rq.schedule.vpp = row.schedule == "interleaved-1f1b" ? row.vpp : 0;
      if (row.schedule == "searched") {
        // Zero Bubble's automatic schedules (ZB-1p, ZB-2p): ppsim's schedule search on this
        // config's costs, its activations capped at search_cap x P micro-batch shares per rank
        // (the paper's M_limit = pM_B or 2pM_B), deterministic (seed 1, one thread, bounded rounds).
        Schedule found = searched_schedule(cfg, cd.parallel.pp, row.microbatches,
                                           rr.number("search_cap", 1, 0.01, 1e6, true) * cd.parallel.pp,
                                           cd.parallel.post_validation);
        rq.schedule.schedule = found;
      }
      const Result res = run(rq);
      if (res.rows.empty()) rr.fail("schedule", fmt::format("{} produced no result", row.schedule));
      const ResultRow& r = res.rows.front();
      if (row.schedule != "interleaved-1f1b") row.vpp = r.metrics.vpp;
      if (row.schedule == "searched") row.schedule = fmt::format("searched({:g}p)", rr.number("search_cap", 1, 0.01, 1e6, true));
      const double tokens_step = static_cast<double>(row.microbatches) * static_cast<double>(cd.model.tokens_per_microbatch()) *
                                 cd.parallel.dp;
      row.predicted_tokens_s = r.physical.tokens_per_second;
      row.step_s = r.physical.step_time_s;
      row.pipeline_s = static_cast<double>(r.metrics.makespan) / 1e9;
      row.bubble_ratio = r.metrics.bubble_ratio;
      row.mfu = r.physical.mfu;
      {
        const Schedule s = rq.schedule.schedule ? *rq.schedule.schedule
                                                : make_schedule(row.schedule, ScheduleParams{cd.parallel.pp, row.microbatches, row.vpp, 0});
        const StepCosts sc = step_costs(cd, s);
        const RankStepCosts& w = sc.ranks[static_cast<std::size_t>(sc.worst_rank)];
        row.dp_exposed_s = cd.costs.dp_comm ? w.dp_exposed_ns / 1e9 : 0.0;
        row.optimizer_s = cd.costs.optimizer_step ? w.optimizer_ns / 1e9 : 0.0;
      }
      for (double b : r.physical.peak_memory_bytes) row.predicted_memory_gb = std::max(row.predicted_memory_gb, b / 1e9);
      if (row.fits_gb) row.fits_limit_gb = std::min(*row.fits_gb * kGiBInGB, cd.hardware.hbm_gb);
      row.fits = !row.fits_limit_gb || row.predicted_memory_gb <= *row.fits_limit_gb;

      // The published figure, in tokens/s.
      int given = 0;
      if (rr.has("tokens_per_s")) {
        ++given;
        const double v = rr.number("tokens_per_s", 0, 0, 1e15, true);
        row.published_tokens_s = v;
        row.published_as = fmt::format("{:.4g} tokens/s", v);
      }
      if (rr.has("samples_per_gpu_s")) {
        ++given;
        const double v = rr.number("samples_per_gpu_s", 0, 0, 1e9, true);
        row.published_tokens_s = v * static_cast<double>(row.gpus) * static_cast<double>(cd.model.seq_len);
        row.published_as = fmt::format("{:.3g} samples/s/GPU", v);
      }
      if (rr.has("tflops_per_gpu")) {
        ++given;
        const double v = rr.number("tflops_per_gpu", 0, 0, 1e6, true);
        const double sequences = static_cast<double>(row.microbatches) * cd.model.micro_batch_size * cd.parallel.dp;
        const double f_iter = flops == "megatron" ? megatron_flops(cd.model, sequences)
                                                  : model_flops_per_microbatch(cd) * row.microbatches * cd.parallel.dp;
        const double step = f_iter / (v * 1e12 * row.gpus);
        row.published_tokens_s = tokens_step / step;
        row.published_as = fmt::format("{:.4g} TFLOP/s/GPU ({})", v, flops);
      }
      if (rr.has("gpu_hours_per_trillion_tokens")) {
        ++given;
        const double v = rr.number("gpu_hours_per_trillion_tokens", 0, 0, 1e12, true);
        row.published_tokens_s = static_cast<double>(row.gpus) * 1e12 / (v * 3600.0);
        row.published_as = fmt::format("{:.4g} GPU-h per 1T tokens", v);
      }
      if (given != 1)
        rr.fail_here("give exactly one of tokens_per_s, samples_per_gpu_s, tflops_per_gpu, gpu_hours_per_trillion_tokens");
      row.error = row.published_tokens_s > 0 ? row.predicted_tokens_s / row.published_tokens_s - 1.0 : 0.0;
      out.rows.push_back(std::move(row));
    }
    // Claims against another result of the same source: its throughput per GPU over that
    // result's (a table of runs of one model at several scales or layouts), published against
    // predicted. A result's relative_to: names the other by its label.
    for (std::size_t i = 0; i < results.size(); ++i) {
      if (relative_to[i].empty()) continue;
      const MapReader rr(ctx, results[i], fmt::format("published.results[{}]", i), result_schema());
      FidelityRow& row = out.rows[first_row + i];
      std::vector<std::string> labels;
      const FidelityRow* other = nullptr;
      for (std::size_t j = first_row; j < out.rows.size(); ++j) {
        if (j == first_row + i) continue;
        labels.push_back(out.rows[j].label);
        if (out.rows[j].label == relative_to[i]) other = &out.rows[j];
      }
      if (other == nullptr) {
        rr.fail("relative_to", fmt::format("relative_to: no other result of this file is labelled '{}'", relative_to[i]),
                closest_match(relative_to[i], labels));
      }
      const auto per_gpu = [](double tokens_s, int gpus) { return tokens_s / std::max(gpus, 1); };
      row.baseline = other->label;
      row.published_relative = per_gpu(row.published_tokens_s, row.gpus) / per_gpu(other->published_tokens_s, other->gpus);
      row.predicted_relative = per_gpu(row.predicted_tokens_s, row.gpus) / per_gpu(other->predicted_tokens_s, other->gpus);
      row.relative_diff_pp = 100.0 * (*row.predicted_relative - *row.published_relative);
    }
    // Schedule-relative claims: each result against the baseline schedule at the same M.
    if (!baseline.empty()) {
      const std::string bname = family_name(pr, "baseline", baseline);
      for (std::size_t i = first_row; i < out.rows.size(); ++i) {
        FidelityRow& row = out.rows[i];
        if (row.schedule == bname || !relative_to[i - first_row].empty()) continue;
        for (std::size_t j = first_row; j < out.rows.size(); ++j) {
          const FidelityRow& b = out.rows[j];
          if (b.schedule != bname || b.microbatches != row.microbatches || b.set != row.set) continue;
          row.baseline = b.schedule;
          row.published_relative = row.published_tokens_s / b.published_tokens_s;
          row.predicted_relative = row.predicted_tokens_s / b.predicted_tokens_s;
          row.relative_diff_pp = 100.0 * (*row.predicted_relative - *row.published_relative);
        }
      }
    }
  }
  if (th) {
    out.checked = true;
    for (FidelityRow& row : out.rows) {
      const auto it = th->by_key.find(row.key);
      if (it == th->by_key.end()) {
        row.within = false;
      } else {
        row.max_error_pct = it->second.first;
        row.max_relative_pp = it->second.second;
        row.within = std::abs(row.error) * 100.0 <= *row.max_error_pct + 1e-9;
        if (row.relative_diff_pp && row.max_relative_pp)
          row.within = row.within && std::abs(*row.relative_diff_pp) <= *row.max_relative_pp + 1e-9;
      }
      // A run its source says fit its GPUs must fit in ppsim too.
      if (!row.fits) row.within = false;
      if (!row.within) ++out.failures;
    }
  }
  return out;
}

nlohmann::json fidelity_json(const FidelityResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const FidelityRow& x : r.rows) {
    nlohmann::json j;
    j["key"] = x.key;
    j["run"] = x.run;
    j["label"] = x.label;
    j["source"] = x.source;
    j["schedule"] = x.schedule;
    j["microbatches"] = x.microbatches;
    j["vpp"] = x.vpp;
    j["gpus"] = x.gpus;
    j["set"] = x.set;
    j["published"] = x.published_as;
    j["published_tokens_per_s"] = x.published_tokens_s;
    j["predicted_tokens_per_s"] = x.predicted_tokens_s;
    j["error"] = x.error;
    j["step_s"] = x.step_s;
    j["pipeline_s"] = x.pipeline_s;
    j["bubble_ratio"] = x.bubble_ratio;
    j["dp_exposed_s"] = x.dp_exposed_s;
    j["optimizer_s"] = x.optimizer_s;
    j["mfu"] = x.mfu;
    j["predicted_memory_gb"] = x.predicted_memory_gb;
    j["published_memory_gb"] = opt(x.published_memory_gb);
    j["fits_gb"] = opt(x.fits_gb);
    j["fits_limit_gb"] = opt(x.fits_limit_gb);
    j["fits"] = x.fits;
    j["baseline"] = x.baseline.empty() ? nlohmann::json(nullptr) : nlohmann::json(x.baseline);
    j["published_relative"] = opt(x.published_relative);
    j["predicted_relative"] = opt(x.predicted_relative);
    j["relative_diff_pp"] = opt(x.relative_diff_pp);
    if (r.checked) {
      j["max_error_pct"] = opt(x.max_error_pct);
      j["max_relative_pp"] = opt(x.max_relative_pp);
      j["within"] = x.within;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json out;
  out["rows"] = rows;
  if (r.checked) out["failures"] = r.failures;
  return out;
}

}  // namespace ppsim::api
