// api::calibrate and cost/calibration: a step time made with a known scale gives that scale back,
// what one step cannot identify stays at the preset, and a calibration file changes exactly the
// figures it names.
#include "api/calibrate.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "api/fidelity.h"
#include "api/request.h"
#include "catch.h"
#include "core/error.h"
#include "cost/calibration.h"
#include "cost/config.h"
#include "cost/derive.h"
#include "trace/rank_builder.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("ppsim_calibrate_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// An A100 80GB: gemm 0.75, attention 0.55, elementwise 0.8, comm 0.75 (src/cost/config.cc).
const char* kRun = R"(name: tiny
model: {layers: 4, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 512}
cluster: {gpu: a100-80gb, gpus: 4}
parallel: {pp: 2, dp: 2, microbatches: 4, schedule: 1f1b}
)";

double step_at(const std::string& config, const std::vector<std::string>& sets) {
  api::Request rq;
  rq.config = config;
  rq.sets = sets;
  rq.families = "1f1b";
  rq.single = true;
  return api::run(rq).rows.front().physical.step_time_s;
}

const CalibratedFigure* fitted(const Calibration& c, const std::string& key) {
  for (const CalibratedFigure& f : c.fitted)
    if (f.key == key) return &f;
  return nullptr;
}

// A Kineto trace of two layers (attention and MLP, F then I and W in reverse) whose kernels take
// `factor` x the figures of `l`, one kernel per range.
std::string two_layer_trace(const LayerFigures& l, double factor, bool backward = true) {
  std::vector<std::string> ev;
  double ts = 0;
  long corr = 1;
  auto op = [&](int layer, const char* sub, const char* pass, double ns) {
    const double us = factor * ns / 1e3;
    ev.push_back(
        fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"layer{}.{}.{}","pid":100,"tid":1,"ts":{},"dur":1}})",
                    layer, sub, pass, ts));
    ev.push_back(fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":1,"ts":{},"dur":0.5,"args":{{"correlation":{}}}}})",
        ts + 0.1, corr));
    ev.push_back(fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{:.6f},"dur":{:.6f},"args":{{"stream":7,"device":0,"correlation":{}}}}})",
        ts + 1, us, corr));
    ++corr;
    ts += us + 2;
  };
  for (int layer = 0; layer < 2; ++layer) {
    op(layer, "attn", "F", l.attention.f);
    op(layer, "mlp", "F", l.mlp.f);
  }
  for (int layer = 1; backward && layer >= 0; --layer) {
    op(layer, "mlp", "I", l.mlp.b - l.mlp.w);
    op(layer, "mlp", "W", l.mlp.w);
    op(layer, "attn", "I", l.attention.b - l.attention.w);
    op(layer, "attn", "W", l.attention.w);
  }
  std::string json = R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"GPU","numSms":108}],"traceEvents":[)";
  for (std::size_t i = 0; i < ev.size(); ++i) json += (i ? ",\n" : "\n") + ev[i];
  return json + "\n]}\n";
}

// The one-line error of calibrating kRun (with `sets`) from two_layer_trace of its own figures at
// `factor` (forward only unless `backward`); the test fails where it calibrates.
std::string trace_calibration_error(const std::string& name, const std::vector<std::string>& sets, double factor,
                                    bool backward) {
  const std::string cfg = write_temp(name + ".yaml", kRun);
  const ModelConfig at = load_config(cfg, sets);
  const CostFigures f = cost_figures(*at.data, at.data->parallel.pp);
  api::CalibrateRequest req;
  req.config = cfg;
  req.traces = {write_temp(name + ".json", two_layer_trace(f.slices.front().layers.front(), factor, backward))};
  try {
    (void)api::calibrate(req);
  } catch (const InputError& e) {
    return e.one_line();
  }
  FAIL("no error");
  return "";
}

}  // namespace

TEST_CASE("fit_scale recovers the scale of step = 3/s + 1", "[calibrate]") {
  // 3 s of compute at scale 1, 1 s that no scale moves: at s = 0.8 the step is 3/0.8 + 1 = 4.75 s.
  const auto step = [](double s) { return 3.0 / s + 1.0; };
  const api::ScaleFit f = api::fit_scale(step, 4.75, {0.01, 2.0});
  CHECK(f.reached);
  CHECK_THAT(f.scale, WithinRel(0.8, 1e-6));
  CHECK_THAT(f.preset_step_s, WithinRel(4.0, 1e-12));
  // 0.9 s is below the 1 s no scale moves (and 3/2 + 1 = 2.5 s at the range's end): not reached.
  CHECK_FALSE(api::fit_scale(step, 0.9, {0.01, 2.0}).reached);
}

TEST_CASE("a step time made at scale 0.8 calibrates back to 0.8, the rest at the preset", "[calibrate]") {
  const std::string cfg = write_temp("run.yaml", kRun);
  const auto keys = api::compute_scale_keys(load_config(cfg, {}).data->hardware);
  REQUIRE(keys.size() == 3);  // no FP8 on an A100
  const double t = step_at(cfg, api::compute_scale_sets(keys, 0.8));
  api::CalibrateRequest req;
  req.config = cfg;
  req.step_ms = t * 1e3;
  const api::CalibrateOutcome out = api::calibrate(req);
  const Calibration& c = out.calibration;
  CHECK(c.method == "step_time");
  REQUIRE(fitted(c, "hardware.efficiency.gemm") != nullptr);
  CHECK_THAT(fitted(c, "hardware.efficiency.gemm")->value, WithinRel(0.75 * 0.8, 1e-5));
  CHECK_THAT(fitted(c, "hardware.efficiency.attention")->value, WithinRel(0.55 * 0.8, 1e-5));
  CHECK_THAT(fitted(c, "hardware.efficiency.elementwise")->value, WithinRel(0.8 * 0.8, 1e-5));
  CHECK_FALSE(fitted(c, "hardware.efficiency.gemm")->uncertainty.has_value());  // one figure: no spread
  CHECK(fitted(c, "hardware.efficiency.comm") == nullptr);
  bool comm_named = false;
  for (const UnidentifiedFigure& u : c.unidentified)
    if (u.key == "hardware.efficiency.comm") comm_named = u.preset == 0.75;
  CHECK(comm_named);
  CHECK(c.run.pp == 2);
  CHECK(c.run.schedule == "1f1b");

  // The same run as tokens/s: 4 micro-batches x 512 tokens x dp 2 = 4096 tokens per step.
  api::CalibrateRequest by_tokens;
  by_tokens.config = cfg;
  by_tokens.tokens_per_s = 4096.0 / t;
  CHECK_THAT(fitted(api::calibrate(by_tokens).calibration, "hardware.efficiency.gemm")->value, WithinRel(0.6, 1e-5));

  // Applied through `calibration:`, the config predicts the measured step.
  const std::string cal = write_temp("cal.yaml", out.yaml);
  CHECK_THAT(step_at(cfg, {"calibration=" + cal}), WithinRel(t, 1e-5));
}

TEST_CASE("a calibration file changes exactly the figures it fitted", "[calibrate]") {
  const std::string cal = write_temp("fixed.yaml", R"(calibration:
  version: 3
  method: step_time
  run: {gpu: a100-80gb, gpus: 4, pp: 4, schedule: 1f1b}
  fitted:
    - {key: hardware.efficiency.gemm, preset: 0.75, value: 0.6}
  not_identified:
    - {key: hardware.efficiency.comm, preset: 0.5, why: not applied}
)");
  const std::string cfg = write_temp("with_cal.yaml", std::string(kRun) + "calibration: " + cal + "\n");
  const ModelConfig plain = load_config(write_temp("plain.yaml", kRun), {});
  const ModelConfig with = load_config(cfg, {});
  const EfficiencySpec& a = plain.data->hardware.efficiency;
  const EfficiencySpec& b = with.data->hardware.efficiency;
  CHECK(b.gemm == 0.6);
  CHECK(b.attention == a.attention);
  CHECK(b.elementwise == a.elementwise);
  CHECK(b.comm == a.comm);  // not_identified is not applied
  CHECK(b.accum_exposed == a.accum_exposed);
  // Calibrated at pp 4; this config is pp 2.
  const Calibration c = read_calibration(cal);
  const auto lines = calibration_extrapolation(c, calibrated_run(*with.data, "1f1b", 4, 1));
  CHECK(std::find(lines.begin(), lines.end(), "pp 2 (calibrated at 4)") != lines.end());
  // Written and read again: the same figures.
  const Calibration again = read_calibration(write_temp("again.yaml", render_calibration(c)));
  REQUIRE(again.fitted.size() == 1);
  CHECK(again.fitted[0].value == 0.6);
  CHECK(again.unidentified.at(0).preset == 0.5);
  CHECK(with.data->costs.attention_shape);
}

TEST_CASE("an older calibration keeps the one attention and GEMM rates its figures were fitted with", "[calibrate]") {
  // Before costs.attention_shape (version 1) a fitted efficiency absorbed the flash core's rate at
  // the run's shape, and before costs.gemm_shape (versions 1 and 2) the GEMMs' rate at the run's
  // shapes; applied now it would count those rates twice. A file with an efficiency figure applies
  // the settings of its version with it, and says so: version 1 both, version 2 the GEMMs' one,
  // version 3 none.
  const char* body = R"(
  method: step_time
  run: {gpu: a100-80gb, gpus: 4, pp: 2, schedule: 1f1b}
  fitted:
    - {key: hardware.efficiency.gemm, preset: 0.75, value: 0.6}
)";
  const std::string v1 = write_temp("v1.yaml", std::string("calibration:\n  version: 1") + body);
  const std::string v2 = write_temp("v2.yaml", std::string("calibration:\n  version: 2") + body);
  const std::string v3 = write_temp("v3.yaml", std::string("calibration:\n  version: 3") + body);
  const Calibration c1 = read_calibration(v1);
  CHECK(c1.implied == std::vector<std::string>{"costs.attention_shape=false", "costs.gemm_shape=false"});
  CHECK(calibration_sets(c1).back() == "costs.gemm_shape=false");
  CHECK(read_calibration(v2).implied == std::vector<std::string>{"costs.gemm_shape=false"});
  CHECK(read_calibration(v3).implied.empty());
  const std::string cfg = write_temp("run.yaml", kRun);
  CHECK_FALSE(load_config(cfg, {"calibration=" + v1}).data->costs.attention_shape);
  CHECK(load_config(cfg, {"calibration=" + v2}).data->costs.attention_shape);
  CHECK_FALSE(load_config(cfg, {"calibration=" + v2}).data->costs.gemm_shape);
  CHECK(load_config(cfg, {"calibration=" + v3}).data->costs.gemm_shape);
  // The prediction under an older file is the config's with its settings written out.
  CHECK(step_at(cfg, {"calibration=" + v1}) ==
        step_at(cfg, {"hardware.efficiency.gemm=0.6", "costs.attention_shape=false", "costs.gemm_shape=false"}));
  CHECK(step_at(cfg, {"calibration=" + v2}) ==
        step_at(cfg, {"hardware.efficiency.gemm=0.6", "costs.gemm_shape=false"}));
  CHECK(step_at(cfg, {"calibration=" + v3}) != step_at(cfg, {"calibration=" + v2}));
  // Written again, a file keeps its version (and with it what it implies).
  CHECK(read_calibration(write_temp("v1again.yaml", render_calibration(c1))).implied == c1.implied);
}

TEST_CASE("a bad calibration file is one error at its line", "[calibrate]") {
  const std::string cal = write_temp("bad.yaml", R"(calibration:
  version: 1
  fitted:
    - {key: hardware.efficiency.gem, preset: 0.75, value: 0.6}
)");
  try {
    read_calibration(cal);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 4);
    CHECK(e.suggestion() == "hardware.efficiency.gemm");
  }
  const std::string over =
      write_temp("over.yaml", "calibration:\n  fitted:\n    - {key: hardware.efficiency.gemm, value: 1.5}\n");
  CHECK_THROWS_AS(read_calibration(over), InputError);
}

namespace {
// kRun with two published results, a (M 4, `first_tokens` tokens/s) and b (M 8, 1.4M): fidelity at
// the presets, then calibrated on a.
std::pair<api::FidelityResult, api::FidelityResult> preset_and_first(const std::string& name,
                                                                     const std::string& first_tokens) {
  const std::string cfg =
      write_temp(name, std::string(kRun) +
                           "published:\n  source: a test\n  results:\n"
                           "    - {label: a, schedule: 1f1b, microbatches: 4, tokens_per_s: " +
                           first_tokens +
                           "}\n"
                           "    - {label: b, schedule: 1f1b, microbatches: 8, tokens_per_s: 1400000}\n");
  api::FidelityRequest req;
  req.files = {cfg};
  api::FidelityResult preset = api::fidelity(req);
  req.calibrate = "first";
  return {std::move(preset), api::fidelity(req)};
}
}  // namespace

TEST_CASE("fidelity --calibrate first: a first result no compute scale reaches leaves its source at the presets",
          "[calibrate]") {
  // 1e12 tokens/s is beyond every compute efficiency at its bound (1): the scale stops at the end of
  // its range without meeting the row. The source's rows stay at the presets, say why, and are in
  // neither count (calibrate on the same run refuses it).
  const auto both = preset_and_first("far.yaml", "1000000000000");
  const api::FidelityResult &preset = both.first, &cal = both.second;
  REQUIRE(cal.rows.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    INFO(i);
    CHECK_THAT(cal.rows[i].not_calibrated,
               PPSIM_CONTAINS("not calibrated: far/a is outside one compute scale's reach"));
    CHECK(cal.rows[i].calibration_scale == 1.0);
    CHECK_THAT(cal.rows[i].error, WithinRel(preset.rows[i].error, 1e-9));
  }
  CHECK(api::fidelity_counts(cal, false).rows == 0);
  CHECK(api::fidelity_counts(cal, true).rows == 0);
  CHECK_THAT(api::fidelity_summary(cal), PPSIM_CONTAINS("2 rows not calibrated"));
}

TEST_CASE("fidelity --calibrate first: the first result is met, the others carry their preset error", "[calibrate]") {
  const auto both = preset_and_first("pub.yaml", "1200000");
  const api::FidelityResult &preset = both.first, &cal = both.second;
  REQUIRE(cal.rows.size() == 2);
  CHECK(std::abs(cal.rows[0].error) < 1e-4);
  CHECK(cal.rows[0].calibrated_on == cal.rows[0].key);
  REQUIRE(cal.rows[1].preset_error.has_value());
  CHECK_THAT(*cal.rows[1].preset_error, WithinRel(preset.rows[1].error, 1e-9));
  // The counts leave the calibrated row out.
  CHECK(api::fidelity_counts(cal, false).rows == 1);
  // Row b differs from the calibrated row a only in its micro-batches: that is all it extrapolates.
  CHECK(cal.rows[0].extrapolates.empty());
  CHECK(cal.rows[1].extrapolates == std::vector<std::string>{"micro-batches 8 (calibrated at 4)"});
  CHECK(cal.rows[1].as_run.model == "4 layers x 256");
}

TEST_CASE("fidelity --calibrate loso: one vote per other source, however many rows it has", "[calibrate]") {
  // Source Y has three rows published at about 0.8 of the presets' figure, Z one at 1.25, X one at
  // the preset. X's scale is the median of Y's and Z's own medians (their geometric mean); by rows
  // it would be Y's alone.
  api::FidelityRequest req;
  req.files = {write_temp("loso_probe.yaml", std::string(kRun) + R"(published:
  source: probe
  results:
    - {label: a, schedule: 1f1b, microbatches: 4, tokens_per_s: 1}
    - {label: b, schedule: 1f1b, microbatches: 8, tokens_per_s: 1}
    - {label: c, schedule: 1f1b, microbatches: 16, tokens_per_s: 1}
)")};
  const api::FidelityResult probe = api::fidelity(req);
  REQUIRE(probe.rows.size() == 3);
  const auto file = [&](const std::string& name, const std::string& source, std::vector<double> factors) {
    std::string text = std::string(kRun) + "published:\n  source: " + source + ", a table\n  results:\n";
    for (std::size_t i = 0; i < factors.size(); ++i)
      text += fmt::format("    - {{label: r{}, schedule: 1f1b, microbatches: {}, tokens_per_s: {}}}\n", i,
                          probe.rows[i].microbatches, probe.rows[i].predicted_tokens_s * factors[i]);
    return write_temp(name, text);
  };
  req.files = {file("x.yaml", "X", {1.0}), file("y.yaml", "Y", {0.78, 0.8, 0.82}), file("z.yaml", "Z", {1.25})};
  req.calibrate = "loso";
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 5);
  std::map<std::string, std::vector<double>> logs;  // source -> log of each row's own scale
  for (const api::FidelityRow& row : r.rows) {
    REQUIRE(row.fitted_scale > 0);
    logs[row.source_id].push_back(std::log(row.fitted_scale));
  }
  REQUIRE(logs.size() == 3);
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
  };
  for (const api::FidelityRow& row : r.rows) {
    std::vector<double> others;
    for (const auto& [id, v] : logs)
      if (id != row.source_id) others.push_back(median(v));
    CHECK_THAT(row.calibration_scale, WithinRel(std::exp(median(others)), 1e-9));
    CHECK(row.calibrated_on == "median of 2 other sources on ampere");
  }
  // X's scale sits between Y's and Z's, away from Y's own.
  const double y = std::exp(median(logs["Y"]));
  CHECK(r.rows[0].calibration_scale > y * 1.1);
}

TEST_CASE("a trace made at 0.8 of the GEMM and attention presets calibrates back to them", "[calibrate]") {
  // Two layers whose kernels take exactly what the model derives at gemm 0.6 and attention 0.44
  // (0.8 of the A100's 0.75 and 0.55), elementwise at its preset: the fit must find 0.6 and 0.44.
  const std::string cfg = write_temp("trace_run.yaml", kRun);
  const ModelConfig slow = load_config(cfg, {"hardware.efficiency.gemm=0.6", "hardware.efficiency.attention=0.44"});
  const CostFigures f = cost_figures(*slow.data, slow.data->parallel.pp);
  const std::string json = two_layer_trace(f.slices.front().layers.front(), 1.0);
  api::CalibrateRequest req;
  req.config = cfg;
  req.traces = {write_temp("t.json", json)};
  const Calibration c = api::calibrate(req).calibration;
  CHECK(c.method == "trace");
  // Kernel times in the trace are rounded to the ns: a relative 1e-3 covers it.
  CHECK_THAT(fitted(c, "hardware.efficiency.gemm")->value, WithinRel(0.6, 1e-3));
  CHECK_THAT(fitted(c, "hardware.efficiency.attention")->value, WithinRel(0.44, 1e-3));
  // Two identical layers: no spread.
  CHECK(*fitted(c, "hardware.efficiency.gemm")->uncertainty < 1e-3 * 0.6);
  CHECK(fitted(c, "hardware.efficiency.elementwise") == nullptr);
}

TEST_CASE("a forward-only trace is refused: the fit compares forward and backward", "[calibrate]") {
  // The two layers' forward kernels alone, at the preset figures: fitted against F + B they would
  // read as a GPU three times as fast (clamped, or refused as faster than the GPU); refused for
  // what it is, naming the trace, and nothing written.
  const std::string e = trace_calibration_error("fwd", {}, 1.0, false);
  CHECK_THAT(e, PPSIM_CONTAINS("fwd.json: the trace has no backward"));
  CHECK_THAT(e, PPSIM_CONTAINS("a forward-only trace cannot calibrate it"));
}

TEST_CASE("precision.fp8_recipe: tensor sets both FP8 GEMM figures at 0.87 of gemm unless given", "[calibrate]") {
  const std::string base = R"(name: f
model: {layers: 2, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 512}
cluster: {gpu: h100, gpus: 1}
parallel: {pp: 1, microbatches: 1}
)";
  // The Hopper set: gemm 0.65, gemm_fp8 0.52, gemm_fp8_wgrad 0.40 (block scaling, the default).
  const ModelConfig block = load_config(write_temp("fp8a.yaml", base + "precision: {gemm: fp8}\n"), {});
  CHECK(block.data->hardware.efficiency.gemm_fp8 == 0.52);
  CHECK(block.data->hardware.efficiency.gemm_fp8_wgrad == 0.40);
  const ModelConfig tensor =
      load_config(write_temp("fp8b.yaml", base + "precision: {gemm: fp8, fp8_recipe: tensor}\n"), {});
  CHECK_THAT(tensor.data->hardware.efficiency.gemm_fp8, WithinRel(0.65 * 0.87, 1e-12));
  CHECK_THAT(tensor.data->hardware.efficiency.gemm_fp8_wgrad, WithinRel(0.65 * 0.87, 1e-12));
  // A figure the config gives wins.
  const ModelConfig given = load_config(write_temp("fp8c.yaml", base + "precision: {gemm: fp8, fp8_recipe: tensor}\n"),
                                        {"hardware.efficiency.gemm_fp8=0.5"});
  CHECK(given.data->hardware.efficiency.gemm_fp8 == 0.5);
  CHECK_THAT(given.data->hardware.efficiency.gemm_fp8_wgrad, WithinRel(0.65 * 0.87, 1e-12));
}

TEST_CASE("torch runtime: p2p_sm_share stretches what runs beside a posted receive, twice the actions move",
          "[calibrate][torch]") {
  // P = 2, M = 2, explicit times F 2 ms, B 4 ms a rank's share (interleaved: 1 and 2 ms a chunk),
  // links of no latency and a few bytes (the tiny model: under 0.1 us a transfer).
  // 1F1B (Schedule1F1B's calls) computes only after each batch has landed: nothing runs beside a
  // send or receive, so the step stays (M + P - 1)(F + B) = 18 ms at any share.
  // Interleaved1F1B (two stages a rank, each send and receive its own batch on the rank's one
  // stream, receives posted early), at share 0, ms:
  //   rank 0: 0F0 [0,1) 0F1 [1,2) 2F0 [2,3) 2F1 [3,4)   2B0 [6,8)   2B1 [9,11)  0B0 [11,13) 0B1 [13,15)
  //   rank 1: 1F0 [1,2) 1F1 [2,3) 3F0 [3,4) 3B0 [4,6) 3F1 [6,7) 3B1 [7,9) 1B0 [9,11) 1B1 [11,13)
  // with these beside a posted receive: 0F1 (2RECV_F0, posted at 1, lands at 2 after 1F0), 2F0
  // (2RECV_F1, to 1F1's end), 3F1 and the first ms of 3B1 (1RECV_B0, to 2B0's end at 8), 1B0
  // (1RECV_B1, to 2B1's end). At share s an action of d ms with o of them beside lasts d + s o:
  // 0F1 ends s late, which delays 1F1 and so 2F0, itself beside a receive until 1F1's end: the
  // forwards end 2s late. 3F1 (1 / (1 - s) ms, all of it beside) and 3B1 (beside for the rest of
  // the 2 ms) end 2s later still: 2 + 2 + 2s ms after 6 + 2s. 1B0 waits for 3B1 and runs 2 + 2s
  // (its receive lands when 2B1 ends, 2 ms after 3B1), and 0B0, 0B1 follow it: the step is
  // 15 + 6s ms, 16.5 at s = 0.25.
  const std::string cfg = write_temp("torch_share.yaml", R"(name: share
model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 100, seq_len: 16}
hardware: {name: h200, nvlink_latency_us: 0}
parallel: {pp: 2, vpp: 2, microbatches: 2, p2p_runtime: torch}
times: {F: 2, B: 4}
)");
  auto step = [&](const char* family, double share) {
    api::Request rq;
    rq.config = cfg;
    rq.sets = {fmt::format("parallel.p2p_sm_share={}", share)};
    rq.families = family;
    rq.single = true;
    return api::run(rq).rows.front().physical.step_time_s;
  };
  using Catch::Matchers::WithinAbs;
  CHECK_THAT(step("1f1b", 0), WithinAbs(18e-3, 1e-7));
  CHECK_THAT(step("1f1b", 0.25), WithinAbs(18e-3, 1e-7));
  CHECK_THAT(step("interleaved-1f1b", 0), WithinAbs(15e-3, 1e-7));
  CHECK_THAT(step("interleaved-1f1b", 0.25) - step("interleaved-1f1b", 0), WithinAbs(6 * 0.25e-3, 1e-7));
  CHECK_THAT(step("interleaved-1f1b", 0.1) - step("interleaved-1f1b", 0), WithinAbs(6 * 0.1e-3, 1e-7));
  // Only with PyTorch's runtime: elsewhere no list says when a receive is posted.
  CHECK_THROWS_WITH(load_config(cfg, {"parallel.p2p_runtime=dataflow", "parallel.p2p_sm_share=0.2"}),
                    PPSIM_CONTAINS("needs parallel.p2p_runtime: torch"));
}

TEST_CASE("calibrate fit_clock: each rank's plateau against its actions as run gives the clock's slope",
          "[calibrate]") {
  // Two ranks of a 100 ms step, each with three F of 9, 10, 10 ms and three B of 18, 20, 20 ms
  // (the first of each ran after an idle GPU): plateau 3 x 10 + 3 x 20 = 90 ms, as run 87 ms, so
  // rho = 30/29 at duty 0.87. With duty_ref 0.8: k = (1/29) / (0.2 - (30/29) 0.07) = 1 / 3.7.
  // Check: f(1) / f(0.87) = (1 + 0.2/3.7) / (1 + 0.07/3.7) = 3.9 / 3.77 = 30/29.
  trace::PipelineRun run;
  run.start = 0;
  run.end = 100'000'000;
  for (int r = 0; r < 2; ++r) {
    trace::RankRun rr;
    rr.rank = r;
    int mb = 0;
    for (double ms : {9.0, 10.0, 10.0})
      rr.actions.push_back({Action::single(Op{OpKind::F, r, mb++}), 0, 0, 0, 0, static_cast<Time>(ms * 1e6)});
    mb = 0;
    for (double ms : {18.0, 20.0, 20.0})
      rr.actions.push_back({Action::single(Op{OpKind::B, r, mb++}), 0, 0, 0, 0, static_cast<Time>(ms * 1e6)});
    run.ranks.push_back(rr);
  }
  const api::ClockFit f = api::fit_clock(run, 0.8);
  REQUIRE(f.identified);
  CHECK_THAT(f.rho, WithinRel(30.0 / 29, 1e-12));
  CHECK_THAT(f.duty, WithinRel(0.87, 1e-12));
  CHECK_THAT(f.slope, WithinRel(1 / 3.7, 1e-12));
  CHECK(f.uncertainty == 0);  // two equal ranks
  // Every action at its plateau: no clock to see.
  for (trace::RankRun& rr : run.ranks)
    for (trace::ExecutedAction& a : rr.actions) a.compute = a.action.first.kind == OpKind::F ? 10'000'000 : 20'000'000;
  CHECK_FALSE(api::fit_clock(run, 0.8).identified);
}

TEST_CASE("calibrate p2p_share: the slowdown where 20 kernels ran beside, else the kernels' grid over the SMs",
          "[calibrate]") {
  // Grid: 27 blocks of 108 SMs on both ranks = 0.25, no spread. Slowdown: 1.25 on 12 attention and
  // 1.25 on 8 MLP kernels = 1.25 on 20, share 1 - 1/1.25 = 0.2; with 19 on one rank, the grid again.
  std::vector<trace::ImportResult> imports(2);
  for (trace::ImportResult& r : imports) r.profile.comm_sm_fraction = 27.0 / 108;
  api::ShareFit f = api::p2p_share(imports);
  CHECK_THAT(f.share, WithinRel(0.25, 1e-12));
  CHECK(f.uncertainty == 0);
  CHECK_FALSE(f.measured);
  for (trace::ImportResult& r : imports) {
    r.attn_slowdown = r.mlp_slowdown = 1.25;
    r.attn_slowdown_samples = 12;
    r.mlp_slowdown_samples = 8;
  }
  f = api::p2p_share(imports);
  CHECK(f.measured);
  CHECK_THAT(f.share, WithinRel(0.2, 1e-12));
  imports[1].mlp_slowdown_samples = 7;
  CHECK_THAT(api::p2p_share(imports).share, WithinRel(0.25, 1e-12));
}

TEST_CASE("calibrate from two ranks' traces of a 1F1B step: the p2p share, the clock and the step",
          "[calibrate][torch]") {
  // PyTorch's Schedule1F1B on two ranks, M = 3, two layers a rank, marked as
  // tools/experiments/record_pp_traces.py marks it: 'Forward m' / 'Backward m' around each action,
  // 'layers.l.attention.F' / 'layers.l.mlp.F' around each block (the backward's 'layer l...B').
  // Each block's kernel runs twice what the model derives at the presets, and each rank's first
  // forward 0.8 of its plateau (after an idle GPU). Every transfer is a SendRecv kernel of 27
  // blocks on both ranks (1 us, ending together); the device has 108 SMs. By hand:
  //   share = 27 / 108 = 0.25 (the linear rule: nothing computes beside the p2p kernels);
  //   per rank, F and B the actions' plateau: as run 2.8 F + 3 B, plateau 3 F + 3 B, so
  //   rho = (3F + 3B) / (2.8F + 3B); duty d = (2.8F + 3B) / step, and
  //   duty_slope = (rho - 1) / (0.2 - rho max(0, d - 0.8));
  // and one scale on the compute figures makes 1F1B predict the traced step itself.
  const std::string cfg = write_temp("pp_run.yaml", R"(name: pp
model: {layers: 4, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000, seq_len: 512}
cluster: {gpu: a100-80gb, gpus: 2}
parallel: {pp: 2, microbatches: 3, schedule: 1f1b, p2p_runtime: torch, embedding_on_first: false,
  head_on_last: false}
)");
  const ModelConfig c = load_config(cfg, {});
  const CostFigures figures = cost_figures(*c.data, 2);
  const LayerFigures& l = figures.slices.front().layers.front();
  const double af = 2 * l.attention.f / 1e3, mf = 2 * l.mlp.f / 1e3;  // us
  const double ab = 2 * l.attention.b / 1e3, mb = 2 * l.mlp.b / 1e3;
  const double F = 2 * (af + mf), B = 2 * (ab + mb);
  // The 1F1B orders and, with transfers of no time, when each action starts (us from 100).
  const std::vector<std::vector<std::pair<char, int>>> order = {
      {{'F', 0}, {'F', 1}, {'B', 0}, {'F', 2}, {'B', 1}, {'B', 2}},
      {{'F', 0}, {'B', 0}, {'F', 1}, {'B', 1}, {'F', 2}, {'B', 2}}};
  std::vector<test::RankBuilder> rb(2);
  double cpu[2] = {0, 0}, free_at[2] = {100, 100}, f_end[3] = {}, b_end[3] = {};
  std::size_t next[2] = {0, 0};
  double compute = 0, last = 0;
  for (int r = 0; r < 2; ++r) {
    rb[r].rank = r;
    rb[r].pid = 100 + r;
    rb[r].device = r;
    rb[r].sms = 108;
  }
  auto p2p = [&](double at) {
    for (int r = 0; r < 2; ++r) rb[r].launched("ncclDevKernel_SendRecv(x)", cpu[r]++, at, 1, 20, 1, 27);
  };
  while (next[0] < 6 || next[1] < 6)
    for (int r = 0; r < 2; ++r) {
      if (next[r] == 6) continue;
      const auto [kind, m] = order[r][next[r]];
      // Rank 1's F waits for rank 0's, rank 0's B for rank 1's (their kernels' ends, 1 us on).
      const double dep = kind == 'F' ? (r == 1 ? f_end[m] : 0) : (r == 0 ? b_end[m] : 0);
      if ((kind == 'F' && r == 1 && f_end[m] == 0) || (kind == 'B' && r == 0 && b_end[m] == 0)) continue;
      double t = std::max(free_at[r], dep);
      const double scale = kind == 'F' && m == 0 ? 0.8 : 1.0;
      rb[r].range(fmt::format("{} {}", kind == 'F' ? "Forward" : "Backward", m), cpu[r], 20);
      for (int k = 0; k < 2; ++k) {
        const int layer = 2 * r + (kind == 'F' ? k : 1 - k);
        for (const bool attn : {kind == 'F', kind != 'F'}) {
          const double d = scale * (kind == 'F' ? (attn ? af : mf) : (attn ? ab : mb));
          rb[r].range(kind == 'F' ? fmt::format("layers.{}.{}.F", layer, attn ? "attention" : "mlp")
                                  : fmt::format("layer{}.{}.B", layer, attn ? "attn" : "mlp"),
                      cpu[r] + 1, 2);
          rb[r].launched("k", cpu[r] + 2, t, d);
          cpu[r] += 4;
          t += d;
          compute += d;
        }
      }
      cpu[r] += 8;
      free_at[r] = t;
      last = std::max(last, t);
      if (kind == 'F' && r == 0) f_end[m] = t + 1, p2p(t);
      if (kind == 'B' && r == 1) b_end[m] = t + 1, p2p(t);
      ++next[r];
    }
  const double step_us = last - 100;
  std::vector<std::string> paths;
  for (int r = 0; r < 2; ++r) paths.push_back(write_temp(fmt::format("pp_rank{}.json", r), rb[r].json()));
  api::CalibrateRequest req;
  req.config = cfg;
  req.traces = paths;
  const Calibration cal = api::calibrate(req).calibration;
  const CalibratedFigure* share = fitted(cal, "parallel.p2p_sm_share");
  REQUIRE(share != nullptr);
  CHECK_THAT(share->value, WithinRel(0.25, 1e-9));
  CHECK(*share->uncertainty == 0);
  const double rho = (3 * F + 3 * B) / (2.8 * F + 3 * B), duty = compute / 2 / step_us;
  const double slope = (rho - 1) / (0.2 - rho * std::max(0.0, duty - 0.8));
  const CalibratedFigure* clock = fitted(cal, "hardware.clock.duty_slope");
  REQUIRE(clock != nullptr);
  CHECK_THAT(clock->value, WithinRel(slope, 1e-3));  // the trace's times are whole ns
  // The step, first to last action kernel: the calibrated 1F1B predicts it (the fit's 1e-4).
  CHECK_THAT(cal.measured_step_s, WithinRel(step_us / 1e6, 1e-6));
  CHECK_THAT(cal.calibrated_step_s, WithinRel(step_us / 1e6, 1e-4));
  CHECK(fitted(cal, "hardware.efficiency.elementwise") != nullptr);
}

TEST_CASE("a trace faster than the config's GPU allows is refused, not fitted at the bound", "[calibrate]") {
  // The kernels at half of what gemm 0.6 and attention 0.44 derive: the MLP blocks would need a GEMM
  // efficiency above 1 (about 1.2), so the fit stops at 1 and its blocks stay about 1.2x the trace's
  // (the elementwise part does not scale), far outside the layers' spread (none): an error, no file.
  const std::string e = trace_calibration_error(
      "fast", {"hardware.efficiency.gemm=0.6", "hardware.efficiency.attention=0.44"}, 0.5, true);
  CHECK_THAT(e, PPSIM_CONTAINS("hardware.efficiency.gemm: the trace's MLP blocks' kernels take"));
  CHECK_THAT(e, PPSIM_CONTAINS("even at efficiency 1 (the bound of its range)"));
}
