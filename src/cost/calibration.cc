// Calibration files: writing, reading, applying over a config tree (calibration.h).
#include "cost/calibration.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "cost/config.h"
#include "cost/yaml_reader.h"

namespace ppsim {

namespace {

SchemaNode leaf(const char* n) { return SchemaNode{n, {}, false}; }

const SchemaNode& run_schema() {
  static const SchemaNode s{"run",
                            {leaf("gpu"), leaf("model"), leaf("gpus"), leaf("pp"), leaf("tp"), leaf("cp"), leaf("dp"),
                             leaf("ep"), leaf("vpp"), leaf("microbatches"), leaf("micro_batch_size"), leaf("seq_len"),
                             leaf("schedule"), leaf("gemm_precision")},
                            false};
  return s;
}

const SchemaNode& file_schema() {
  static const SchemaNode s{"",
                            {SchemaNode{"calibration",
                                        {leaf("version"), leaf("method"), leaf("config"), leaf("note"),
                                         leaf("measured_step_s"), leaf("preset_step_s"), leaf("calibrated_step_s"),
                                         run_schema(), leaf("fitted"), leaf("not_identified")},
                                        false}},
                            false};
  return s;
}

const SchemaNode& figure_schema() {
  static const SchemaNode s{
      "figure", {leaf("key"), leaf("preset"), leaf("value"), leaf("uncertainty"), leaf("from"), leaf("why")}, false};
  return s;
}

// A double-quoted YAML scalar.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch == '\n' ? ' ' : ch;
  }
  return out + "\"";
}

// The range a fitted key's value must lie in (the config validator's own, so that a file that
// reads also applies).
std::pair<double, double> key_range(const std::string& key) {
  if (key == "hardware.efficiency.accum_exposed") return {0, 2};
  if (key == "parallel.p2p_sm_share") return {0, 0.9};
  if (key == "hardware.clock.warm" || key == "hardware.clock.slow") return {-0.5, 0.5};
  if (key.rfind("hardware.efficiency.", 0) == 0) return {0.01, 1};
  return {0, 1e9};
}

CalibratedRun read_run(const MapReader& r) {
  CalibratedRun x;
  x.gpu = r.string("gpu", "");
  x.model = r.string("model", "");
  auto i = [&](const char* k, int def) { return static_cast<int>(r.integer(k, def, 1, 1 << 24)); };
  x.gpus = i("gpus", 1);
  x.pp = i("pp", 1);
  x.tp = i("tp", 1);
  x.cp = i("cp", 1);
  x.dp = i("dp", 1);
  x.ep = i("ep", 1);
  x.vpp = i("vpp", 1);
  x.microbatches = i("microbatches", 1);
  x.micro_batch_size = i("micro_batch_size", 1);
  x.seq_len = r.integer("seq_len", 0, 0);
  x.schedule = r.string("schedule", "");
  x.gemm_precision = r.string("gemm_precision", "");
  return x;
}

void read_figures(const MapReader& cr, Calibration& c) {
  const std::vector<std::string> keys = config_key_paths();
  for (const char* list : {"fitted", "not_identified"}) {
    if (!cr.has(list)) continue;
    const YAML::Node n = cr.value(list);
    if (!n.IsSequence()) cr.fail(list, fmt::format("calibration.{}: expected a list of figures", list));
    for (std::size_t i = 0; i < n.size(); ++i) {
      const MapReader fr(cr.ctx(), n[i], fmt::format("calibration.{}[{}]", list, i), figure_schema());
      const std::string key = fr.string("key", "");
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        fr.fail("key", fmt::format("'{}' is not a config key", key), closest_match(key, keys));
      const auto [lo, hi] = key_range(key);
      if (std::string(list) == "fitted") {
        CalibratedFigure f{key, fr.number("preset", 0, 0, 1e9, false), fr.number("value", 0, lo, hi, false),
                           std::nullopt, fr.string("from", "")};
        if (fr.has("uncertainty")) f.uncertainty = fr.number("uncertainty", 0, 0, 1e9, false);
        c.fitted.push_back(std::move(f));
      } else {
        c.unidentified.push_back({key, fr.number("preset", 0, 0, 1e9, false), fr.string("why", "")});
      }
    }
  }
}

}  // namespace

CalibratedRun calibrated_run(const ModelConfigData& c, const std::string& schedule, int microbatches, int vpp) {
  CalibratedRun r;
  r.gpu = !c.gpu_type.empty() ? c.gpu_type : c.hardware.name;
  const ModelSpec& m = c.model;
  r.model = fmt::format("{} layers x {}", m.layers, m.hidden);
  if (m.moe.enabled())
    r.model += fmt::format(", {} experts x {} top-{}", m.moe.experts, m.moe.expert_ffn_hidden, m.moe.top_k);
  r.gpus = c.parallel.gpus();
  r.pp = c.parallel.pp;
  r.tp = c.parallel.tp;
  r.cp = c.parallel.cp;
  r.dp = c.parallel.dp;
  r.ep = c.parallel.ep;
  r.vpp = vpp;
  r.microbatches = microbatches;
  r.micro_batch_size = c.model.micro_batch_size;
  r.seq_len = c.model.seq_len;
  r.schedule = schedule;
  r.gemm_precision = dtype_name(c.precision.gemm);
  return r;
}

std::string render_calibration(const Calibration& c) {
  std::string o =
      "# ppsim calibration (docs/CALIBRATION.md): figures fitted on one run, applied over the GPU type's presets\n"
      "# by `calibration: FILE` in a config or `--calibration FILE`. `fitted`: each key's value replaces the preset;\n"
      "# uncertainty is one standard error in the key's unit (absent: fitted on one figure, no spread).\n"
      "# `not_identified`: what this run cannot tell apart; those keys keep their preset (not applied).\n"
      "# `run`: the calibrated run; a prediction at another layout, scale, schedule or sequence extrapolates.\n";
  o += fmt::format("calibration:\n  version: {}\n", c.version);
  o += fmt::format("  method: {}\n  config: {}\n  note: {}\n", c.method, quoted(c.config), quoted(c.note));
  o += fmt::format("  measured_step_s: {:.9g}\n  preset_step_s: {:.9g}\n  calibrated_step_s: {:.9g}\n",
                   c.measured_step_s, c.preset_step_s, c.calibrated_step_s);
  const CalibratedRun& r = c.run;
  o += fmt::format(
      "  run: {{gpu: {}, model: {}, gpus: {}, pp: {}, tp: {}, cp: {}, dp: {}, ep: {}, vpp: {}, microbatches: {}, "
      "micro_batch_size: {}, "
      "seq_len: {}, schedule: {}, gemm_precision: {}}}\n",
      quoted(r.gpu), quoted(r.model), r.gpus, r.pp, r.tp, r.cp, r.dp, r.ep, r.vpp, r.microbatches, r.micro_batch_size,
      r.seq_len, quoted(r.schedule), quoted(r.gemm_precision));
  o += c.fitted.empty() ? "  fitted: []\n" : "  fitted:\n";
  for (const CalibratedFigure& f : c.fitted)
    o += fmt::format("    - {{key: {}, preset: {:.6g}, value: {:.6g}{}, from: {}}}\n", f.key, f.preset, f.value,
                     f.uncertainty ? fmt::format(", uncertainty: {:.3g}", *f.uncertainty) : std::string(),
                     quoted(f.from));
  o += c.unidentified.empty() ? "  not_identified: []\n" : "  not_identified:\n";
  for (const UnidentifiedFigure& f : c.unidentified)
    o += fmt::format("    - {{key: {}, preset: {:.6g}, why: {}}}\n", f.key, f.preset, quoted(f.why));
  return o;
}

Calibration read_calibration(const std::string& path, const SourceLoc& referenced_from) {
  const YAML::Node root = parse_yaml(read_yaml_file(path, referenced_from), path);
  const YamlContext ctx(path, {});
  const MapReader top(ctx, root, "", file_schema());
  if (!top.has("calibration")) top.fail_here("a calibration file needs a calibration: map (docs/CALIBRATION.md)");
  const MapReader cr = top.child("calibration", *file_schema().find("calibration"));
  Calibration c;
  c.version = static_cast<int>(cr.integer("version", 3, 1, 3));
  c.path = path;
  c.method = cr.string("method", "");
  c.config = cr.string("config", "");
  c.note = cr.string("note", "");
  c.measured_step_s = cr.number("measured_step_s", 0, 0, 1e12, false);
  c.preset_step_s = cr.number("preset_step_s", 0, 0, 1e12, false);
  c.calibrated_step_s = cr.number("calibrated_step_s", 0, 0, 1e12, false);
  c.run = read_run(cr.child("run", run_schema()));
  read_figures(cr, c);
  // Older files fitted their efficiencies under older cost models: version 1 with one attention
  // rate (before costs.attention_shape), versions 1 and 2 with one GEMM rate (before
  // costs.gemm_shape). Applied, they keep those rates.
  const bool fitted_efficiency = std::any_of(c.fitted.begin(), c.fitted.end(), [](const CalibratedFigure& f) {
    return f.key.starts_with("hardware.efficiency.");
  });
  if (fitted_efficiency && c.version == 1) c.implied.push_back("costs.attention_shape=false");
  if (fitted_efficiency && c.version <= 2) c.implied.push_back("costs.gemm_shape=false");
  return c;
}

std::vector<std::string> calibration_sets(const Calibration& c) {
  std::vector<std::string> out;
  for (const CalibratedFigure& f : c.fitted) out.push_back(fmt::format("{}={:.9g}", f.key, f.value));
  out.insert(out.end(), c.implied.begin(), c.implied.end());
  return out;
}

namespace {

YAML::Node calibration_node(const YAML::Node& root) {
  YAML::Node at;
  if (!root.IsMap()) return at;
  for (auto it = root.begin(); it != root.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == "calibration") at.reset(it->second);
  return at;
}

}  // namespace

bool names_calibration(const YAML::Node& root) { return calibration_node(root).IsDefined(); }

std::optional<Calibration> apply_calibration(YAML::Node& root, const std::string& base_dir, const std::string& file,
                                             const std::vector<std::string>& set_paths) {
  std::optional<Calibration> cal = read_named_calibration(root, base_dir, file, set_paths);
  if (cal)
    for (const std::string& s : calibration_sets(*cal)) apply_set(root, s);
  return cal;
}

std::optional<Calibration> read_named_calibration(const YAML::Node& root, const std::string& base_dir,
                                                  const std::string& file, const std::vector<std::string>& set_paths) {
  const YAML::Node at = calibration_node(root);
  if (!at.IsDefined() || at.IsNull()) return std::nullopt;
  const YamlContext ctx(file, set_paths);
  if (!at.IsScalar())
    ctx.fail(at, "calibration", "calibration: expected the path of a calibration file (ppsim calibrate -o)");
  std::filesystem::path p(at.Scalar());
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(p, ec))
    throw InputError(
        ctx.loc(at, "calibration"),
        fmt::format("calibration: no calibration file '{}' (write one with ppsim calibrate -o)", p.string()), {},
        kExitIo);
  return read_calibration(p.string(), ctx.loc(at, "calibration"));
}

std::vector<std::string> calibration_extrapolation(const Calibration& cal, const CalibratedRun& p) {
  return run_extrapolation(p, cal.run);
}

std::vector<std::string> run_extrapolation(const CalibratedRun& p, const CalibratedRun& c) {
  std::vector<std::string> out;
  auto differs = [&](const char* what, auto now, auto then) {
    if (now != then) out.push_back(fmt::format("{} {} (calibrated at {})", what, now, then));
  };
  differs("GPU", p.gpu, c.gpu);
  if (!p.model.empty() && !c.model.empty()) differs("model", p.model, c.model);
  differs("GEMM precision", p.gemm_precision, c.gemm_precision);
  differs("GPUs", p.gpus, c.gpus);
  differs("pp", p.pp, c.pp);
  differs("tp", p.tp, c.tp);
  differs("cp", p.cp, c.cp);
  differs("dp", p.dp, c.dp);
  differs("ep", p.ep, c.ep);
  differs("schedule", p.schedule, c.schedule);
  differs("vpp", p.vpp, c.vpp);
  differs("micro-batches", p.microbatches, c.microbatches);
  differs("micro-batch size", p.micro_batch_size, c.micro_batch_size);
  differs("sequence length", p.seq_len, c.seq_len);
  return out;
}

}  // namespace ppsim
