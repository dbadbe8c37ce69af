// api::fidelity: configs/published/ against their sources (fidelity.h).
#include "api/fidelity.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

#include "api/calibrate.h"
#include "api/data_dir.h"
#include "api/fidelity_search.h"
#include "api/request.h"
#include "core/error.h"
#include "core/json_null.h"
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
  static const SchemaNode s{
      "published",
      {leaf("source"), leaf("flops"), leaf("baseline"), leaf("results"), leaf("memory_gb"), leaf("fits_gb")},
      false};
  return s;
}

const SchemaNode& result_schema() {
  static const SchemaNode s{
      "result",
      {leaf("label"), leaf("schedule"), leaf("microbatches"), leaf("vpp"), leaf("source"), leaf("tokens_per_s"),
       leaf("tokens_per_gpu_s"), leaf("step_time_s"), leaf("samples_per_gpu_s"), leaf("tflops_per_gpu"),
       leaf("gpu_hours_per_trillion_tokens"), leaf("memory_gb"), leaf("fits_gb"), leaf("search_cap"),
       leaf("post_validation"), leaf("set"), leaf("relative_to")},
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
      throw InputError(SourceLoc{path, n, 1},
                       fmt::format("expected '<key> <max |error| %> [<max relative pp>]', got '{}'", line));
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
  // Every *.yaml and *.yml below it, its subfolders included (a corpus kept by source), in path order.
  for (auto it = std::filesystem::recursive_directory_iterator(
           dir, std::filesystem::directory_options::skip_permission_denied, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    const std::string ext = it->path().extension().string();
    if (it->is_regular_file(ec) && (ext == ".yaml" || ext == ".yml")) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.empty())
    throw InputError(fmt::format("no *.yaml or *.yml files in '{}' or its subfolders", req.dir), {}, kExitInput);
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

// One published config: its base config and its published: block.
struct PublishedFile {
  std::string file, stem, source, flops, baseline;
  ModelConfig base;
  std::shared_ptr<const YamlContext> ctx;  // the readers below point at it
  YAML::Node pub, results;
  MapReader published() const { return MapReader(*ctx, pub, "published", published_schema()); }
  MapReader result(std::size_t i) const {
    return MapReader(*ctx, results[i], fmt::format("published.results[{}]", i), result_schema());
  }
};

PublishedFile read_published(const std::string& file, const FidelityRequest& req) {
  PublishedFile pf;
  pf.file = file;
  pf.base = load_config(file, req.sets);
  const ModelConfigData& c = *pf.base.data;
  pf.ctx = std::make_shared<const YamlContext>(file, std::vector<std::string>{});
  for (auto it = c.tree.begin(); it != c.tree.end(); ++it)
    if (it->first.Scalar() == "published") pf.pub.reset(it->second);
  if (!pf.pub.IsDefined() || !pf.pub.IsMap())
    throw InputError(SourceLoc{file, 1, 1}, "a published config needs a published: map (docs/FIDELITY.md)");
  const MapReader pr = pf.published();
  pf.source = pr.string("source", "");
  pf.flops = pr.choice("flops", "model", {"model", "megatron"});
  pf.baseline = pr.string("baseline", "");
  pf.results = pr.value("results");
  if (!pf.results.IsSequence() || pf.results.size() == 0)
    pr.fail("results", "published.results must be a non-empty list");
  pf.stem = std::filesystem::path(file).stem().string();
  return pf;
}

// The source up to its first comma: one paper or report, whatever table of it a row comes from.
std::string source_id(const std::string& source) { return source.substr(0, source.find(',')); }

// The GPU types that share one compute efficiency set (src/cost/config.cc's kGpuTypes).
std::string gpu_family(const ModelConfigData& c) {
  return c.gpu_type.rfind("a100", 0) == 0 ? "ampere" : c.gpu_type.empty() ? c.hardware.name : "hopper";
}

// The row's labels, source and memory claims from its result entry.
FidelityRow row_header(const PublishedFile& pf, const MapReader& rr) {
  const ModelConfigData& c = *pf.base.data;
  const MapReader pr = pf.published();
  FidelityRow row;
  row.run = c.name;
  row.schedule = family_name(rr, "schedule", rr.string("schedule", c.parallel.schedule));
  row.microbatches = static_cast<int>(rr.integer("microbatches", c.parallel.microbatches, 1, 1 << 20));
  row.vpp = static_cast<int>(rr.integer("vpp", c.parallel.has_vpp ? c.parallel.vpp : 2, 1, kMaxVpp));
  row.label = rr.string("label", fmt::format("{} M={}", row.schedule, row.microbatches));
  row.key = pf.stem + "/" + row.label;
  for (char& ch : row.key)
    if (ch == ' ') ch = '_';
  row.source = rr.string("source", pf.source);
  row.source_id = source_id(pf.source);  // the file's: a table's rows may name their own
  row.gpu_family = gpu_family(c);
  if (rr.has("memory_gb"))
    row.published_memory_gb = rr.number("memory_gb", 0, 0, 1e6, true);
  else if (pr.has("memory_gb"))
    row.published_memory_gb = pr.number("memory_gb", 0, 0, 1e6, true);
  if (rr.has("fits_gb"))
    row.fits_gb = rr.number("fits_gb", 0, 0, 1e6, true);
  else if (pr.has("fits_gb"))
    row.fits_gb = pr.number("fits_gb", 0, 0, 1e6, true);
  return row;
}

// The row's config: its own `set:` keys, its post-validation, the command line's --set, the
// micro-batches, then `extra` (a calibration's figures).
ModelConfig row_config(const PublishedFile& pf, const MapReader& rr, FidelityRow& row, const FidelityRequest& req,
                       const std::vector<std::string>& extra) {
  std::vector<std::string> sets;
  // The row's own vpp is the config's for this row, so that its set: (another layer count, pp) is
  // checked against it; a parallel.vpp in the set wins.
  if (rr.has("vpp") && family_takes_vpp(row.schedule)) sets.push_back(fmt::format("parallel.vpp={}", row.vpp));
  if (rr.has("set")) {
    const YAML::Node rs = rr.value("set");
    if (!rs.IsMap() || rs.size() == 0)
      rr.fail("set", "set: expected a map of config keys to values, e.g. {parallel.tp: 8}");
    for (auto it = rs.begin(); it != rs.end(); ++it) {
      if (!it->second.IsScalar())
        rr.fail("set",
                fmt::format("set.{}: expected a scalar value (a number, a string or a bool)", it->first.Scalar()));
      sets.push_back(it->first.Scalar() + "=" + it->second.Scalar());
      row.set += (row.set.empty() ? "" : " ") + sets.back();
    }
  }
  if (rr.has("post_validation"))
    sets.push_back(fmt::format("parallel.post_validation={}", rr.boolean("post_validation", false)));
  sets.insert(sets.end(), req.sets.begin(), req.sets.end());
  sets.push_back(fmt::format("parallel.microbatches={}", row.microbatches));
  sets.insert(sets.end(), extra.begin(), extra.end());
  try {
    return load_config(pf.file, sets);
  } catch (const InputError& e) {
    if (row.set.empty()) throw;
    rr.fail("set", e.message(), e.suggestion());  // an unknown key or a bad value, at the row
  }
}

// Simulates the row's schedule on `cfg`: throughput, step parts, memory.
void predict_row(const MapReader& rr, const ModelConfig& cfg, FidelityRow& row) {
  const ModelConfigData& cd = *cfg.data;
  row.gpus = cd.parallel.gpus();
  row.as_run = calibrated_run(cd, row.schedule, row.microbatches, family_takes_vpp(row.schedule) ? row.vpp : 1);
  Request rq;
  rq.loaded_config = cfg;
  rq.config_name = cd.name;
  rq.families = row.schedule;
  rq.single = true;
  rq.schedule.vpp = family_takes_vpp(row.schedule) ? row.vpp : 0;
  const double cap = rr.number("search_cap", 1, 0.01, 1e6, true);
  if (row.schedule == "searched") {
    // Zero Bubble's automatic schedules (ZB-1p, ZB-2p): ppsim's schedule search on this
    // config's costs, its activations capped at search_cap x P micro-batch shares per rank
    // (the paper's M_limit = pM_B or 2pM_B), deterministic (seed 1, one thread, bounded rounds).
    rq.schedule.schedule =
        searched_schedule(cfg, cd.parallel.pp, row.microbatches, cap * cd.parallel.pp, cd.parallel.post_validation);
  }
  Result res;
  try {
    res = run(rq);
  } catch (const InputError& e) {
    // What the schedule cannot run with the row's P, M and v (interleaved-1f1b at M = 15 of P = 8)
    // names no file: put it at the row's schedule key.
    if (!e.loc().file.empty()) throw;
    throw InputError(rr.loc("schedule"), e.message(), e.suggestion(), e.exit_code());  // its exit code kept
  }
  if (res.rows.empty()) rr.fail("schedule", fmt::format("{} produced no result", row.schedule));
  const ResultRow& r = res.rows.front();
  if (!family_takes_vpp(row.schedule)) row.vpp = r.metrics.vpp;
  const Schedule s = rq.schedule.schedule
                         ? *rq.schedule.schedule
                         : make_schedule(row.schedule, ScheduleParams{cd.parallel.pp, row.microbatches, row.vpp, 0});
  if (row.schedule == "searched") row.schedule = fmt::format("searched({:g}p)", cap);
  row.predicted_tokens_s = r.physical.tokens_per_second;
  row.step_s = r.physical.step_time_s;
  row.pipeline_s = static_cast<double>(r.metrics.makespan) / 1e9;
  row.bubble_ratio = r.metrics.bubble_ratio;
  row.mfu = r.physical.mfu;
  const StepCosts sc = step_costs(cd, s);
  const RankStepCosts& w = sc.ranks[static_cast<std::size_t>(sc.worst_rank)];
  row.dp_exposed_s = cd.costs.dp_comm ? w.dp_exposed_ns / 1e9 : 0.0;
  row.optimizer_s = cd.costs.optimizer_step ? w.optimizer_ns / 1e9 : 0.0;
  row.predicted_memory_gb = 0;
  for (double b : r.physical.peak_memory_bytes) row.predicted_memory_gb = std::max(row.predicted_memory_gb, b / 1e9);
  if (row.fits_gb) row.fits_limit_gb = std::min(*row.fits_gb * kGiBInGB, cd.hardware.hbm_gb);
  row.fits = !row.fits_limit_gb || row.predicted_memory_gb <= *row.fits_limit_gb;
}

// The published figure in tokens/s, with the source's own FLOP count.
void published_tokens(const PublishedFile& pf, const MapReader& rr, const ModelConfigData& cd, FidelityRow& row) {
  int given = 0;
  // The tokens of one step: M micro-batches of every data-parallel replica.
  const double tokens_step =
      static_cast<double>(row.microbatches) * static_cast<double>(cd.model.tokens_per_microbatch()) * cd.parallel.dp;
  if (rr.has("tokens_per_s")) {
    ++given;
    const double v = rr.number("tokens_per_s", 0, 0, 1e15, true);
    row.published_tokens_s = v;
    row.published_as = fmt::format("{:.4g} tokens/s", v);
  }
  if (rr.has("tokens_per_gpu_s")) {
    ++given;
    const double v = rr.number("tokens_per_gpu_s", 0, 0, 1e12, true);
    row.published_tokens_s = v * static_cast<double>(row.gpus);
    row.published_as = fmt::format("{:.4g} tokens/s/GPU", v);
  }
  if (rr.has("step_time_s")) {
    ++given;
    const double v = rr.number("step_time_s", 0, 0, 1e9, true);
    row.published_tokens_s = tokens_step / v;
    row.published_as = fmt::format("{:.4g} s a step", v);
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
    const double f_iter = pf.flops == "megatron" ? megatron_flops(cd.model, sequences)
                                                 : model_flops_per_microbatch(cd) * row.microbatches * cd.parallel.dp;
    const double step = f_iter / (v * 1e12 * row.gpus);
    row.published_tokens_s = tokens_step / step;
    row.published_as = fmt::format("{:.4g} TFLOP/s/GPU ({})", v, pf.flops);
  }
  if (rr.has("gpu_hours_per_trillion_tokens")) {
    ++given;
    const double v = rr.number("gpu_hours_per_trillion_tokens", 0, 0, 1e12, true);
    row.published_tokens_s = static_cast<double>(row.gpus) * 1e12 / (v * 3600.0);
    row.published_as = fmt::format("{:.4g} GPU-h per 1T tokens", v);
  }
  if (given != 1)
    rr.fail_here(
        "give exactly one of tokens_per_s, tokens_per_gpu_s, step_time_s, samples_per_gpu_s, tflops_per_gpu, "
        "gpu_hours_per_trillion_tokens");
}

// Result i of the file, predicted with `extra` config keys.
FidelityRow fidelity_row(const PublishedFile& pf, std::size_t i, const FidelityRequest& req,
                         const std::vector<std::string>& extra) {
  const MapReader rr = pf.result(i);
  FidelityRow row = row_header(pf, rr);
  const ModelConfig cfg = row_config(pf, rr, row, req, extra);
  predict_row(rr, cfg, row);
  published_tokens(pf, rr, *cfg.data, row);
  row.error = row.published_tokens_s > 0 ? row.predicted_tokens_s / row.published_tokens_s - 1.0 : 0.0;
  return row;
}

// Claims against another result of the same source: its throughput per GPU over that result's
// (a table of runs of one model at several scales or layouts), published against predicted. A
// result's relative_to: names the other by its label.
void relative_claims(const PublishedFile& pf, std::vector<FidelityRow>& rows) {
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const MapReader rr = pf.result(i);
    const std::string to = rr.string("relative_to", "");
    if (to.empty()) continue;
    FidelityRow& row = rows[i];
    std::vector<std::string> labels;
    const FidelityRow* other = nullptr;
    for (std::size_t j = 0; j < rows.size(); ++j) {
      if (j == i) continue;
      labels.push_back(rows[j].label);
      if (rows[j].label == to) other = &rows[j];
    }
    if (other == nullptr)
      rr.fail("relative_to", fmt::format("relative_to: no other result of this file is labelled '{}'", to),
              closest_match(to, labels));
    const auto per_gpu = [](double tokens_s, int gpus) { return tokens_s / std::max(gpus, 1); };
    row.baseline = other->label;
    row.published_relative =
        per_gpu(row.published_tokens_s, row.gpus) / per_gpu(other->published_tokens_s, other->gpus);
    row.predicted_relative =
        per_gpu(row.predicted_tokens_s, row.gpus) / per_gpu(other->predicted_tokens_s, other->gpus);
    row.relative_diff_pp = 100.0 * (*row.predicted_relative - *row.published_relative);
  }
}

// Schedule-relative claims: each result against the baseline schedule at the same M.
void baseline_claims(const PublishedFile& pf, std::vector<FidelityRow>& rows) {
  if (pf.baseline.empty()) return;
  const std::string bname = family_name(pf.published(), "baseline", pf.baseline);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    FidelityRow& row = rows[i];
    if (row.schedule == bname || pf.result(i).has("relative_to")) continue;
    for (const FidelityRow& b : rows) {
      if (b.schedule != bname || b.microbatches != row.microbatches || b.set != row.set) continue;
      row.baseline = b.schedule;
      row.published_relative = row.published_tokens_s / b.published_tokens_s;
      row.predicted_relative = row.predicted_tokens_s / b.predicted_tokens_s;
      row.relative_diff_pp = 100.0 * (*row.predicted_relative - *row.published_relative);
    }
  }
}

// Every result of the file with `extra` keys, and its claims.
std::vector<FidelityRow> file_rows(const PublishedFile& pf, const FidelityRequest& req,
                                   const std::vector<std::string>& extra) {
  std::vector<FidelityRow> rows;
  for (std::size_t i = 0; i < pf.results.size(); ++i) rows.push_back(fidelity_row(pf, i, req, extra));
  relative_claims(pf, rows);
  baseline_claims(pf, rows);
  return rows;
}

// The step the published figure implies for a row predicted at the presets: its step at the
// published throughput.
double published_step_s(const FidelityRow& at_preset) {
  return at_preset.step_s * at_preset.predicted_tokens_s / at_preset.published_tokens_s;
}

// The one compute scale that makes result i predict its published figure.
ScaleFit row_scale(const PublishedFile& pf, std::size_t i, const FidelityRequest& req, const FidelityRow& at_preset) {
  const auto keys = compute_scale_keys(pf.base.data->hardware);
  const double target = published_step_s(at_preset);
  return fit_scale([&](double s) { return fidelity_row(pf, i, req, compute_scale_sets(keys, s)).step_s; }, target,
                   compute_scale_range(keys));
}

// `rows` again at `scale` (preset errors kept), named as fitted on `on`.
std::vector<FidelityRow> rows_at_scale(const PublishedFile& pf, const FidelityRequest& req,
                                       const std::vector<FidelityRow>& preset, double scale, const std::string& on) {
  std::vector<FidelityRow> rows =
      file_rows(pf, req, compute_scale_sets(compute_scale_keys(pf.base.data->hardware), scale));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].preset_error = preset[i].error;
    rows[i].fitted_scale = preset[i].fitted_scale;
    rows[i].calibration_scale = scale;
    rows[i].calibrated_on = on;
  }
  return rows;
}

// The median of `logs` (not empty), as a scale.
double median_scale(std::vector<double> logs) {
  std::sort(logs.begin(), logs.end());
  const std::size_t n = logs.size();
  return std::exp(n % 2 ? logs[n / 2] : 0.5 * (logs[n / 2 - 1] + logs[n / 2]));
}

// Leave one source out: each source's rows at the median over every other source on the same GPU
// family of that source's median per-row scale (one vote per source, however many rows it has; the
// preset where no other source ran on the family).
void leave_one_source_out(const std::vector<PublishedFile>& files, const FidelityRequest& req,
                          std::vector<std::vector<FidelityRow>>& per_file) {
  std::map<std::pair<std::string, std::string>, std::vector<double>> logs;  // (family, source) -> log scales
  for (std::size_t f = 0; f < files.size(); ++f)
    for (std::size_t i = 0; i < per_file[f].size(); ++i) {
      FidelityRow& r = per_file[f][i];
      r.fitted_scale = row_scale(files[f], i, req, r).scale;
      if (r.fitted_scale > 0) logs[{r.gpu_family, r.source_id}].push_back(std::log(r.fitted_scale));
    }
  std::vector<std::vector<FidelityRow>> out(files.size());
  for (std::size_t f = 0; f < files.size(); ++f) {
    const FidelityRow& me = per_file[f].front();
    std::vector<double> others;
    for (const auto& [at, v] : logs)
      if (at.first == me.gpu_family && at.second != me.source_id) others.push_back(std::log(median_scale(v)));
    double scale = 1;
    std::string on = "preset (no other source on " + me.gpu_family + ")";
    if (!others.empty()) {
      scale = median_scale(others);
      on =
          fmt::format("median of {} other source{} on {}", others.size(), others.size() == 1 ? "" : "s", me.gpu_family);
    }
    out[f] = rows_at_scale(files[f], req, per_file[f], scale, on);
  }
  per_file = std::move(out);
}

// Each source calibrated on its first result (the first file of it in name order): that scale
// predicts every result of the source.
void calibrate_first(const std::vector<PublishedFile>& files, const FidelityRequest& req,
                     std::vector<std::vector<FidelityRow>>& per_file) {
  struct Fit {
    double scale;
    std::string on;      // the row's key
    CalibratedRun run;   // the run it describes
    std::string failed;  // why no scale meets the row ("" when one does)
  };
  std::map<std::string, Fit> by_source;  // source id -> its calibration
  for (std::size_t f = 0; f < files.size(); ++f) {
    const std::string id = per_file[f].front().source_id;
    if (!by_source.count(id)) {
      const FidelityRow& first = per_file[f].front();
      const ScaleFit fit = row_scale(files[f], 0, req, first);
      per_file[f].front().fitted_scale = fit.scale;
      std::string failed;
      if (!fit.reached)  // the scale stopped at its range's end: the row is not met (calibrate refuses it too)
        failed = fmt::format(
            "not calibrated: {} is outside one compute scale's reach (at {:.3g}, every compute "
            "efficiency at its bound, the step is {:.4g} s against the published {:.4g} s)",
            first.key, fit.scale, fit.step_s, published_step_s(first));
      by_source[id] = {failed.empty() ? fit.scale : 1.0, first.key, first.as_run, failed};
    }
    const Fit& at = by_source[id];
    per_file[f] = rows_at_scale(files[f], req, per_file[f], at.scale, at.failed.empty() ? at.on : "presets");
    for (FidelityRow& r : per_file[f]) {
      r.not_calibrated = at.failed;
      if (r.key != at.on && at.failed.empty()) r.extrapolates = run_extrapolation(r.as_run, at.run);
    }
  }
}

void check_thresholds(const Thresholds& th, FidelityResult& out) {
  out.checked = true;
  for (FidelityRow& row : out.rows) {
    const auto it = th.by_key.find(row.key);
    if (it == th.by_key.end()) {
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
  out.failures += static_cast<int>(out.skipped.size());  // no figure for any of their results
}

}  // namespace

FidelityResult fidelity(const FidelityRequest& req) {
  if (!req.calibrate.empty() && req.calibrate != "first" && req.calibrate != "loso")
    throw InputError(fmt::format("--calibrate '{}': expected first or loso", req.calibrate), {}, kExitUsage);
  std::optional<Thresholds> th;
  if (!req.thresholds.empty()) th = read_thresholds(req.thresholds);
  std::vector<PublishedFile> files;
  std::vector<std::vector<FidelityRow>> per_file;
  const std::vector<std::string> names = published_files(req);
  FidelityResult out;
  out.files = names.size();
  std::exception_ptr first;  // thrown when no file could be predicted
  for (const std::string& file : names) {
    if (req.progress) req.progress(static_cast<std::size_t>(&file - names.data()), names.size(), file);
    try {
      PublishedFile pf = read_published(file, req);
      std::vector<FidelityRow> rows = file_rows(pf, req, {});
      files.push_back(std::move(pf));
      per_file.push_back(std::move(rows));
    } catch (const InputError& e) {
      // What is wrong with this file (its config, a result, its answer, reading it) skips it; a
      // usage error or a resource limit is the request's, and ends the run as for one file.
      const int code = e.exit_code();
      if (code != kExitInput && code != kExitIo && code != kExitInvariant) throw;
      if (!first) first = std::current_exception();
      if (out.skipped_exit == 0) out.skipped_exit = code;
      const std::string why = e.one_line();  // the file named first, where the error names none
      out.skipped.emplace_back(file, why.rfind(file, 0) == 0 ? why : file + ": " + why);
    }
  }
  if (files.empty()) std::rethrow_exception(first);
  if (req.calibrate == "first") {
    calibrate_first(files, req, per_file);
  } else if (req.calibrate == "loso") {
    leave_one_source_out(files, req, per_file);
  }
  for (auto& rows : per_file)
    for (FidelityRow& r : rows) out.rows.push_back(std::move(r));
  if (th) check_thresholds(*th, out);
  return out;
}

std::function<void(std::size_t, std::size_t, const std::string&)> terminal_progress() {
  if (!isatty(STDERR_FILENO)) return {};  // 71 runs take a minute: say where it is, on a terminal only
  return [](std::size_t done, std::size_t all, const std::string& file) {
    fmt::print(stderr, "\rfidelity: {}/{} {:<60.60}", done + 1, all, std::filesystem::path(file).filename().string());
  };
}

void end_terminal_progress() {
  if (isatty(STDERR_FILENO)) fmt::print(stderr, "\r{:80}\r", "");
}

nlohmann::json fidelity_json(const FidelityResult& r) {
  nlohmann::json rows = nlohmann::json::array();
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
    j["published_memory_gb"] = or_null(x.published_memory_gb);
    j["fits_gb"] = or_null(x.fits_gb);
    j["fits_limit_gb"] = or_null(x.fits_limit_gb);
    j["fits"] = x.fits;
    j["baseline"] = or_null(!x.baseline.empty(), x.baseline);
    j["published_relative"] = or_null(x.published_relative);
    j["predicted_relative"] = or_null(x.predicted_relative);
    j["relative_diff_pp"] = or_null(x.relative_diff_pp);
    j["source_id"] = x.source_id;
    j["gpu_family"] = x.gpu_family;
    if (x.preset_error) {
      j["preset_error"] = *x.preset_error;
      j["calibration_scale"] = x.calibration_scale;
      j["calibrated_on"] = x.calibrated_on;
      if (!x.not_calibrated.empty()) j["not_calibrated"] = x.not_calibrated;
      if (!x.extrapolates.empty()) j["extrapolates"] = x.extrapolates;
      j["fitted_scale"] = x.fitted_scale;
    }
    if (r.checked) {
      j["max_error_pct"] = or_null(x.max_error_pct);
      j["max_relative_pp"] = or_null(x.max_relative_pp);
      j["within"] = x.within;
    }
    rows.push_back(std::move(j));
  }
  nlohmann::json out;
  out["rows"] = rows;
  out["skipped"] = nlohmann::json::array();
  for (const auto& [file, why] : r.skipped) out["skipped"].push_back({{"file", file}, {"reason", why}});
  if (r.checked) out["failures"] = r.failures;
  return out;
}

FidelityCounts fidelity_counts(const FidelityResult& r, bool preset) {
  FidelityCounts c;
  std::vector<double> errs;
  for (const FidelityRow& x : r.rows) {
    if (!x.preset_error && preset) continue;
    if (x.calibrated_on == x.key) continue;   // the row a source was calibrated on
    if (!x.not_calibrated.empty()) continue;  // a source no scale calibrates: in neither count
    const double e = 100.0 * std::abs(preset && x.preset_error ? *x.preset_error : x.error);
    errs.push_back(e);
    ++c.rows;
    c.within5 += e <= 5.0 ? 1 : 0;
    c.within10 += e <= 10.0 ? 1 : 0;
  }
  if (!errs.empty()) {
    std::sort(errs.begin(), errs.end());
    const std::size_t n = errs.size();
    c.median_abs_pct = n % 2 ? errs[n / 2] : 0.5 * (errs[n / 2 - 1] + errs[n / 2]);
  }
  return c;
}

std::string fidelity_summary(const FidelityResult& r) {
  auto line = [](const char* what, const FidelityCounts& c) {
    return fmt::format("{}: {} of {} within 5%, {} within 10%, median |error| {:.1f}%\n", what, c.within5, c.rows,
                       c.within10, c.median_abs_pct);
  };
  std::string out;
  const FidelityCounts now = fidelity_counts(r, false);
  const bool calibrated =
      std::any_of(r.rows.begin(), r.rows.end(), [](const FidelityRow& x) { return x.preset_error.has_value(); });
  if (calibrated) out += line("at the presets (same rows)", fidelity_counts(r, true));
  out += line(calibrated ? "calibrated" : "at the presets", now);
  const auto uncalibrated =
      std::count_if(r.rows.begin(), r.rows.end(), [](const FidelityRow& x) { return !x.not_calibrated.empty(); });
  if (uncalibrated > 0)
    out += fmt::format(
        "{} rows not calibrated (their source's first row is outside one compute scale's reach): "
        "not in the counts\n",
        uncalibrated);
  for (const auto& [file, why] : r.skipped) out += fmt::format("skipped: {}\n", why);
  if (!r.skipped.empty())
    out += fmt::format("{} of {} files skipped (their results are not in the counts)\n", r.skipped.size(), r.files);
  return out;
}

}  // namespace ppsim::api
