// api::fidelity: the published figure turned into tokens/s by hand for every form a source
// states it in, the schedule-relative claims, and the thresholds check.
#include "api/fidelity.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "catch.h"
#include "core/error.h"
#include "schedules/registry.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// One folder per process: CTest runs these test cases as processes side by side, and two of them
// writing the same tiny.yaml at once read each other's half-written file (a CI run saw "model is
// required" from one).
std::string write_temp(const std::string& name, const std::string& text) {
  const auto dir = std::filesystem::temp_directory_path() / ("ppsim_fidelity_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

// The error api::fidelity raises for this config text (the test fails where it raises none).
InputError fidelity_error(const std::string& name, const std::string& text) {
  api::FidelityRequest req;
  req.files = {write_temp(name, text)};
  try {
    api::fidelity(req);
  } catch (const InputError& e) {
    return e;
  }
  FAIL("no error");
  return InputError("no error");
}

// 8 GPUs (pp 2, dp 4), seq 128, h 64, 4 layers, V 1000.
const char* kRun = R"(name: tiny
model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 128}
cluster: {gpu: a100-80gb, gpus: 8}
parallel: {pp: 2, dp: 4, microbatches: 4}
published:
  source: a test
  flops: megatron
  baseline: 1f1b
  results:
    - {label: a, schedule: 1f1b, microbatches: 4, tokens_per_s: 1000000}
    - {label: b, schedule: zb-h1, microbatches: 4, samples_per_gpu_s: 1000}
    - {label: c, schedule: 1f1b, microbatches: 8, tflops_per_gpu: 100}
    - {label: d, schedule: zb-h1, microbatches: 8, gpu_hours_per_trillion_tokens: 2000}
)";

}  // namespace

TEST_CASE("fidelity turns each published form into tokens/s", "[api][fidelity]") {
  api::FidelityRequest req;
  req.files = {write_temp("tiny.yaml", kRun)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 4);
  CHECK(r.rows[0].key == "tiny/a");
  CHECK(r.rows[0].published_tokens_s == 1e6);
  // 1000 samples/s/GPU x 8 GPUs x 128 tokens.
  CHECK_THAT(r.rows[1].published_tokens_s, WithinRel(1000.0 * 8 * 128, 1e-12));
  // Megatron's eq. (3) for one step: B = 8 micro-batches x 4 replicas = 32 sequences:
  // F = 96 B s l h^2 (1 + s/6h + V/16lh); step = F / (8 GPUs x 100e12); tokens = 32 x 128.
  const double F = 96.0 * 32 * 128 * 4 * 64 * 64 * (1 + 128.0 / (6 * 64) + 1000.0 / (16 * 4 * 64));
  CHECK_THAT(r.rows[2].published_tokens_s, WithinRel(32.0 * 128 / (F / (8 * 100e12)), 1e-12));
  // 8 GPUs x 1e12 tokens / (2000 GPU-hours x 3600 s).
  CHECK_THAT(r.rows[3].published_tokens_s, WithinRel(8e12 / (2000.0 * 3600), 1e-12));
  for (const auto& row : r.rows) {
    CHECK(row.predicted_tokens_s > 0);
    CHECK_THAT(row.error, WithinRel(row.predicted_tokens_s / row.published_tokens_s - 1, 1e-12));
  }
  // Relative claims: zb-h1 against 1f1b at the same micro-batches.
  CHECK_FALSE(r.rows[0].relative_diff_pp.has_value());
  REQUIRE(r.rows[1].relative_diff_pp.has_value());
  CHECK_THAT(*r.rows[1].published_relative, WithinRel(1000.0 * 8 * 128 / 1e6, 1e-12));
  CHECK_THAT(*r.rows[1].relative_diff_pp,
             WithinRel(100 * (r.rows[1].predicted_tokens_s / r.rows[0].predicted_tokens_s - *r.rows[1].published_relative), 1e-9));
  // ZB-H1 is never slower than 1F1B on the same costs.
  CHECK(*r.rows[1].predicted_relative >= 1.0);
}

TEST_CASE("fidelity reads tokens per GPU and a step time as the tables print them", "[api][fidelity]") {
  std::string text = kRun;
  text = text.substr(0, text.find("    - {label: a,")) +
         "    - {label: a, schedule: 1f1b, microbatches: 4, tokens_per_s: 1000000}\n"
         "    - {label: e, schedule: 1f1b, microbatches: 4, tokens_per_gpu_s: 125000}\n"
         "    - {label: f, schedule: 1f1b, microbatches: 4, step_time_s: 2}\n";
  api::FidelityRequest req;
  req.files = {write_temp("tables.yaml", text)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 3);
  // 125,000 tokens/s per GPU x 8 GPUs: the first row's figure, so its error.
  CHECK_THAT(r.rows[1].published_tokens_s, WithinRel(1e6, 1e-12));
  CHECK_THAT(r.rows[1].error, WithinRel(r.rows[0].error, 1e-12));
  // A step of M = 4 micro-batches of one 128-token sequence on each of dp = 4 replicas: 2048
  // tokens in 2 s.
  CHECK_THAT(r.rows[2].published_tokens_s, WithinRel(4.0 * 128 * 4 / 2, 1e-12));
  CHECK(r.rows[2].published_as == "2 s a step");
}

TEST_CASE("fidelity --check: a row past its threshold, or without one, fails", "[api][fidelity]") {
  api::FidelityRequest req;
  req.files = {write_temp("tiny.yaml", kRun)};
  const api::FidelityResult base = api::fidelity(req);
  std::string th;
  for (const auto& row : base.rows)
    th += row.key + " " + std::to_string(std::abs(row.error) * 100 + 0.01) + " 1000\n";
  req.thresholds = write_temp("ok.txt", th);
  const api::FidelityResult ok = api::fidelity(req);
  CHECK(ok.checked);
  CHECK(ok.failures == 0);
  // One threshold below the row's error, one row missing.
  std::string tight = "# comment\n" + base.rows[0].key + " " + std::to_string(std::abs(base.rows[0].error) * 100 / 2) + "\n";
  for (std::size_t i = 1; i + 1 < base.rows.size(); ++i)
    tight += base.rows[i].key + " " + std::to_string(std::abs(base.rows[i].error) * 100 + 0.01) + "\n";
  req.thresholds = write_temp("tight.txt", tight);
  const api::FidelityResult bad = api::fidelity(req);
  CHECK(bad.failures == 2);
  CHECK_FALSE(bad.rows[0].within);
  CHECK_FALSE(bad.rows[3].within);
}

TEST_CASE("fidelity: a bad published block is one located error", "[api][fidelity]") {
  std::string text = kRun;
  text.replace(text.find("tokens_per_s: 1000000"), 21, "tokens_per_s: 1000000, samples_per_gpu_s: 3");
  {
    const InputError e = fidelity_error("bad.yaml", text);
    CHECK(e.loc().line == 10);
    CHECK(e.message().find("exactly one of") != std::string::npos);
  }
  text = kRun;
  text.replace(text.find("schedule: zb-h1, microbatches: 4"), 15, "schedule: zb-h9");
  {
    const InputError e = fidelity_error("bad2.yaml", text);
    CHECK(e.loc().line == 11);
    CHECK(e.message().find("zb-h9") != std::string::npos);
  }
}

TEST_CASE("fidelity: a row's M that its schedule cannot run is one error at that row", "[api][fidelity]") {
  // pp 2, v 2: Megatron's groups of G = P = 2 micro-batches leave M = 3 with one of 2 over
  // (M mod G = 1 < P), which interleaved-1f1b refuses; the error names the row's line.
  std::string text = kRun;
  text += "    - {label: e, schedule: interleaved-1f1b, vpp: 2, microbatches: 3, tokens_per_s: 1000}\n";
  const InputError e = fidelity_error("badm.yaml", text);
  CHECK(e.loc().file.find("badm.yaml") != std::string::npos);
  CHECK(e.loc().line == 14);
  CHECK(e.message().find("M=3") != std::string::npos);
  CHECK(e.message().find("M mod G = 1") != std::string::npos);
}

TEST_CASE("fidelity: a result's set: runs its own layout, as the config with those keys would", "[api][fidelity]") {
  // Row e changes the layout (pp 2 dp 4 -> tp 2 pp 2 dp 2) and the heads; row f is the same
  // run written out as its own config. Their predictions, GPU counts and published tokens/s agree.
  std::string text = kRun;
  text += "    - {label: e, set: {parallel.tp: 2, parallel.dp: 2, model.heads: 8}, schedule: 1f1b, microbatches: 8, tflops_per_gpu: 100}\n";
  api::FidelityRequest req;
  req.files = {write_temp("set.yaml", text)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 5);
  const api::FidelityRow& e = r.rows[4];
  CHECK(e.set == "parallel.tp=2 parallel.dp=2 model.heads=8");
  CHECK(e.gpus == 8);

  std::string direct = kRun;
  direct.replace(direct.find("heads: 4"), 8, "heads: 8");
  direct.replace(direct.find("parallel: {pp: 2, dp: 4"), 23, "parallel: {tp: 2, pp: 2, dp: 2");
  req.files = {write_temp("direct.yaml", direct)};
  const api::FidelityResult d = api::fidelity(req);
  const api::FidelityRow& c = d.rows[2];  // 1f1b, M=8, 100 TFLOP/s/GPU
  CHECK(c.set.empty());
  CHECK_THAT(e.predicted_tokens_s, WithinRel(c.predicted_tokens_s, 1e-12));
  // The same TFLOP/s on 2 replicas of 8 micro-batches: half of row c's sequences per step at the
  // same step time... the published tokens/s is the config's own, not the file's first layout.
  CHECK_THAT(e.published_tokens_s, WithinRel(c.published_tokens_s, 1e-12));
  // The layout changed the prediction (TP collectives, half the replicas).
  CHECK(std::abs(e.predicted_tokens_s / r.rows[2].predicted_tokens_s - 1) > 0.01);
  // A set: row is nobody's baseline unless it shares the set: e (1f1b, M=8) leaves row d's claim
  // against row c.
  REQUIRE(r.rows[3].relative_diff_pp.has_value());
  CHECK_THAT(*r.rows[3].predicted_relative, WithinRel(r.rows[3].predicted_tokens_s / r.rows[2].predicted_tokens_s, 1e-12));
}

TEST_CASE("fidelity: a row's vpp is its config's, so that its set: is checked against it", "[api][fidelity]") {
  // The file runs 4 layers on pp 2 at vpp 2 (1 layer a chunk). Row g: 8 layers at vpp 4, 8 / (2 x 4) = 1 a
  // chunk. Row h: 6 layers at vpp 3, 6 / (2 x 3) = 1 a chunk, which the file's vpp 2 cannot split (6 over 4
  // chunks): checked against the file's vpp, as before, the row was refused.
  std::string text = kRun;
  text.replace(text.find("parallel: {pp: 2, dp: 4"), 23, "parallel: {pp: 2, vpp: 2, dp: 4");
  text +=
      "    - {label: g, schedule: interleaved-1f1b, vpp: 4, set: {model.layers: 8}, microbatches: 8, tokens_per_s: "
      "1000000}\n";
  text +=
      "    - {label: h, schedule: interleaved-1f1b, vpp: 3, set: {model.layers: 6}, microbatches: 8, tokens_per_s: "
      "1000000}\n";
  api::FidelityRequest req;
  req.files = {write_temp("vpp.yaml", text)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 6);
  CHECK(r.rows[4].vpp == 4);
  CHECK(r.rows[5].vpp == 3);
  CHECK(r.rows[5].predicted_tokens_s > 0);
}

TEST_CASE("fidelity: a bad set: is one error at its row", "[api][fidelity]") {
  api::FidelityRequest req;
  std::string text = kRun;
  text += "    - {label: e, schedule: 1f1b, set: {parallel.tpp: 2}, microbatches: 8, tflops_per_gpu: 100}\n";
  {
    const InputError e = fidelity_error("badset.yaml", text);
    CHECK(e.loc().line == 14);
    CHECK(e.message().find("tpp") != std::string::npos);
    CHECK((e.message() + e.suggestion()).find("parallel.pp") != std::string::npos);  // the nearest key
  }
  text = kRun;
  text += "    - {label: e, schedule: 1f1b, set: {parallel.tp: [2]}, microbatches: 8, tflops_per_gpu: 100}\n";
  req.files = {write_temp("badset2.yaml", text)};
  CHECK_THROWS_AS(api::fidelity(req), InputError);
}

TEST_CASE("fidelity: fits_gb is read in GiB and capped at the GPU's reported capacity", "[api][fidelity]") {
  // NVIDIA's "80 GB" is binary: 80 x 2^30 bytes = 85.90 GB of 1e9, more than an H100 reports
  // (81,559 MiB = 85.52 GB), so an H100 row's limit is the H100's; 40 GiB on the same GPU is 42.95.
  std::string text = kRun;
  text.replace(text.find("gpu: a100-80gb"), 14, "gpu: h100");
  text.replace(text.find("tokens_per_s: 1000000}"), 22, "tokens_per_s: 1000000, fits_gb: 80}");
  text.replace(text.find("samples_per_gpu_s: 1000}"), 24, "samples_per_gpu_s: 1000, fits_gb: 40}");
  text.replace(text.find("tflops_per_gpu: 100}"), 20, "tflops_per_gpu: 100, fits_gb: 1e-6}");
  api::FidelityRequest req;
  req.files = {write_temp("fits.yaml", text)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 4);
  REQUIRE(r.rows[0].fits_limit_gb.has_value());
  CHECK_THAT(*r.rows[0].fits_limit_gb, WithinRel(81559.0 * 1048576 / 1e9, 1e-12));
  CHECK(r.rows[0].fits);
  CHECK_THAT(*r.rows[1].fits_limit_gb, WithinRel(40.0 * 1073741824 / 1e9, 1e-12));
  CHECK(r.rows[1].fits);
  // 1e-6 GiB = 1074 bytes: the model's weights alone are more.
  CHECK_THAT(*r.rows[2].fits_limit_gb, WithinRel(1e-6 * 1073741824 / 1e9, 1e-12));
  CHECK(r.rows[2].predicted_memory_gb > *r.rows[2].fits_limit_gb);
  CHECK_FALSE(r.rows[2].fits);
  CHECK_FALSE(r.rows[3].fits_limit_gb.has_value());
  CHECK(r.rows[3].fits);
  // --check: thresholds every error is within still fail the row that does not fit, only it.
  std::string th;
  for (const auto& row : r.rows) th += row.key + " " + std::to_string(std::abs(row.error) * 100 + 1) + " 1000\n";
  req.thresholds = write_temp("fits_th.txt", th);
  const api::FidelityResult c = api::fidelity(req);
  CHECK(c.failures == 1);
  CHECK_FALSE(c.rows[2].within);
  CHECK(c.rows[0].within);
  CHECK(c.rows[3].within);
}

TEST_CASE("fidelity: relative_to compares a result per GPU with another of the same source", "[api][fidelity]") {
  // Row g is row c's model and micro-batches on half the replicas (4 GPUs instead of 8), stated at
  // 90 TFLOP/s/GPU against c's 100: per GPU the same FLOPs per token, so the published ratio is
  // 0.9 exactly; the predicted one is each row's tokens/s over its own GPUs.
  std::string text = kRun;
  text += "    - {label: g, set: {parallel.dp: 2, cluster.gpus: 4}, schedule: zb-h1, microbatches: 8, tflops_per_gpu: 90, relative_to: c}\n";
  api::FidelityRequest req;
  req.files = {write_temp("rel.yaml", text)};
  const api::FidelityResult r = api::fidelity(req);
  REQUIRE(r.rows.size() == 5);
  const api::FidelityRow& c = r.rows[2];
  const api::FidelityRow& g = r.rows[4];
  CHECK(g.gpus == 4);
  CHECK(g.baseline == "c");  // relative_to wins over the schedule baseline (zb-h1 against 1f1b)
  REQUIRE(g.relative_diff_pp.has_value());
  CHECK_THAT(*g.published_relative, WithinRel(0.9, 1e-12));
  CHECK_THAT(*g.predicted_relative, WithinRel((g.predicted_tokens_s / 4) / (c.predicted_tokens_s / 8), 1e-12));
  CHECK_THAT(*g.relative_diff_pp, WithinRel(100 * (*g.predicted_relative - 0.9), 1e-9));
  // ZB-H1 on the same pipeline is faster than 1F1B per GPU, and half the replicas move less DP
  // traffic: g's prediction per GPU is above c's.
  CHECK(*g.predicted_relative > 1.0);
  // The other rows keep their claims: d against c (zb-h1 against 1f1b at M = 8).
  REQUIRE(r.rows[3].relative_diff_pp.has_value());
  CHECK(r.rows[3].baseline == "1f1b");

  // A label nobody has: one error at the row, with the nearest label.
  text = kRun;
  text += "    - {label: g, schedule: 1f1b, microbatches: 8, tflops_per_gpu: 90, relative_to: cc}\n";
  {
    const InputError e = fidelity_error("relbad.yaml", text);
    CHECK(e.loc().line == 14);
    CHECK(e.message().find("'cc'") != std::string::npos);
    CHECK(e.suggestion() == "c");
  }
}

TEST_CASE("fidelity --dir reads *.yaml and *.yml in its subfolders too", "[api][fidelity]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ppsim_fidelity_dir_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "by-source" / "deeper");
  std::ofstream(dir / "top.yaml") << kRun;
  std::ofstream(dir / "by-source" / "deeper" / "nested.yml") << kRun;
  std::ofstream(dir / "by-source" / "notes.txt") << "not a config";
  api::FidelityRequest req;
  req.dir = dir.string();
  const api::FidelityResult r = api::fidelity(req);
  CHECK(r.files == 2);
  REQUIRE(r.rows.size() == 8);         // four results in each
  CHECK(r.rows[0].key == "nested/a");  // path order: by-source/deeper/nested.yml, then top.yaml
  CHECK(r.rows[4].key == "top/a");
  std::filesystem::remove_all(dir / "by-source");
  std::filesystem::remove(dir / "top.yaml");
  req.dir = dir.string();
  try {
    api::fidelity(req);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.message().find("no *.yaml or *.yml files in") != std::string::npos);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("fidelity: a file it cannot read is skipped with its error, the others predicted", "[api][fidelity]") {
  std::string bad = kRun;
  bad.replace(bad.find("hidden: 64"), 10, "hiddn: 64");  // line 2
  api::FidelityRequest req;
  req.files = {write_temp("good.yaml", kRun), write_temp("skipme.yaml", bad)};
  const api::FidelityResult r = api::fidelity(req);
  CHECK(r.files == 2);
  CHECK(r.rows.size() == 4);  // good.yaml's four results
  for (const auto& row : r.rows) CHECK(row.key.rfind("good/", 0) == 0);
  REQUIRE(r.skipped.size() == 1);
  CHECK(r.skipped[0].first == req.files[1]);
  CHECK(r.skipped[0].second.rfind(req.files[1] + ":2:", 0) == 0);  // the file's own file:line:col error
  CHECK_THAT(r.skipped[0].second, PPSIM_CONTAINS("did you mean 'hidden'"));
  CHECK_THAT(api::fidelity_summary(r), PPSIM_CONTAINS("1 of 2 files skipped"));
  // With a thresholds file that passes every good row, the skipped file fails the check.
  std::string th;
  for (const auto& row : r.rows) th += row.key + " 1e9 1e9\n";
  req.thresholds = write_temp("all.txt", th);
  CHECK(api::fidelity(req).failures == 1);
  // A resource limit is the request's, not a file's: it ends the run (exit 6), skipping nothing.
  req.thresholds.clear();
  const Limits saved = limits();
  limits().max_ops = 10;  // below kRun's 2 ranks x 4 micro-batches x 2 ops
  try {
    api::fidelity(req);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitLimit);
  }
  limits() = saved;
  // Every file refused: the first file's error, as for one file.
  req.thresholds.clear();
  req.files = {req.files[1]};
  CHECK_THROWS_AS(api::fidelity(req), InputError);
}
