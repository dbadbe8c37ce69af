// The trace importer (src/trace/): hand-written Kineto traces whose sums are known, one per
// attribution rule: correlation ids over time overlap, ac2g flows, nested annotations, kernels
// with no annotation or no launch, overlapping streams and the slowdown measured there,
// communication waiting across devices, user rules, gzip, and truncated files.
#include "trace/import.h"

#include <fmt/format.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "robustness/run_ppsim.h"
#include "trace/predict.h"

using namespace ppsim;
using namespace ppsim::trace;

namespace {

// Builds a Kineto-shaped trace. Times in us (as Kineto writes them); CPU thread tid, GPU
// events under pid = device, tid = stream.
struct TraceBuilder {
  std::vector<std::string> ev;
  long next_corr = 1;
  void range(const std::string& name, double ts, double dur, int tid = 1, const char* cat = "user_annotation") {
    ev.push_back(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":100,"tid":{},"ts":{},"dur":{}}})", cat, name,
                             tid, ts, dur));
  }
  long launch(double ts, int tid = 1) {
    const long c = next_corr++;
    ev.push_back(fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":{},"ts":{},"dur":2,"args":{{"correlation":{}}}}})",
        tid, ts, c));
    return c;
  }
  // corr < 0: no correlation arg.
  void kernel(const std::string& name, long corr, double ts, double dur, int stream = 7, int device = 0, int grid = 0) {
    std::string args = fmt::format(R"("stream":{},"device":{})", stream, device);
    if (corr >= 0) args += fmt::format(R"(,"correlation":{})", corr);
    if (grid > 0) args += fmt::format(R"(,"grid":[{},1,1])", grid);
    ev.push_back(
        fmt::format(R"({{"ph":"X","cat":"kernel","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{{}}}}})", name,
                    device, stream, ts, dur, args));
  }
  // A launch inside `range` and its kernel: returns nothing, the common case.
  void launched(const std::string& kname, double launch_ts, double ts, double dur, int stream = 7, int device = 0,
                int tid = 1) {
    kernel(kname, launch(launch_ts, tid), ts, dur, stream, device);
  }
  std::string json() const {
    std::string s = R"({"schemaVersion":1,"deviceProperties":[{"id":0,"name":"GPU","numSms":132}],"traceEvents":[)";
    for (std::size_t i = 0; i < ev.size(); ++i) s += (i ? ",\n" : "\n") + ev[i];
    return s + "\n]}\n";
  }
};

ImportResult run(const TraceBuilder& b, std::vector<std::string> map = {}, std::string step = {}) {
  return import_trace(read_kineto_text(b.json(), "t.json"), ImportOptions{std::move(map), false, std::move(step)},
                      "t.json");
}

const Cell& cell(const ImportResult& r, int layer, SubOp s, Pass p) {
  return r.cells.at(layer)[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
}

constexpr Time kUs = 1000;

// t.json in `dir`: layer 0's attention forward, one 30 us GEMM, and its backward, one of 50 us.
void write_one_layer_trace(robust::Scratch& dir) {
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm", 2, 100, 30);
  b.range("layer0.attn.B", 20, 10);
  b.launched("dgrad", 22, 200, 50);
  dir.write("t.json", b.json());
}

}  // namespace

TEST_CASE("kernels belong to the range that launched them, not the one they overlap in time", "[trace]") {
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm_attn", 5, 100, 30);  // launched at 5 us in attention, runs 100..130
  b.range("layer0.mlp.F", 90, 50);      // the CPU is in MLP while the attention kernel runs
  b.launched("gemm_mlp", 95, 130, 20);
  const ImportResult r = run(b);
  // By correlation: attention 30 us, MLP 20 us; by time overlap MLP would get all 50.
  REQUIRE(cell(r, 0, SubOp::attention, Pass::F).busy == 30 * kUs);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::F).busy == 20 * kUs);
  REQUIRE(r.layers == 1);
  REQUIRE(r.profile.sub_ops->attn_f == 30 * kUs);
  REQUIRE(r.profile.op.f == 50 * kUs);
}

TEST_CASE("executions: two ranges of one sub-op in one micro-batch count once", "[trace]") {
  TraceBuilder b;
  // Two micro-batches; each runs a router range and an experts range, both MLP forward of layer 1.
  for (int mb = 0; mb < 2; ++mb) {
    b.range("layer1.router.F", 100 * mb, 10);
    b.launched("router_gemm", 100 * mb + 1, 1000 + 100 * mb, 5);
    b.range("layer1.mlp.F", 100 * mb + 20, 10);
    b.launched("expert_gemm", 100 * mb + 21, 1010 + 100 * mb, 45);
  }
  const ImportResult r = run(b);
  // (5 + 45) per micro-batch: executions 2, not 4.
  REQUIRE(cell(r, 1, SubOp::mlp, Pass::F).executions == 2);
  REQUIRE(r.profile.sub_ops->mlp_f == 50 * kUs);
}

TEST_CASE("ac2g flows link kernels that carry no correlation argument", "[trace]") {
  TraceBuilder b;
  b.range("layer2.mlp.I", 0, 20);
  b.ev.push_back(R"({"ph":"s","cat":"ac2g","id":77,"pid":100,"tid":1,"ts":4,"name":"ac2g"})");
  b.ev.push_back(R"({"ph":"f","cat":"ac2g","id":77,"pid":0,"tid":7,"ts":50,"bp":"e","name":"ac2g"})");
  b.kernel("dgrad", -1, 50, 12);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 2, SubOp::mlp, Pass::I).busy == 12 * kUs);
  REQUIRE(r.unlinked == 0);
}

TEST_CASE("nested annotations: sub-op, pass and layer each from the innermost range that names it", "[trace]") {
  TraceBuilder b;
  // DeepSeek-style chunk > torchtitan-style module > an aten op: the pass from the chunk, the
  // sub-op and layer from the module, the op names nothing.
  b.range("_backward_chunk", 0, 100);
  b.range("layers.3.feed_forward", 10, 50);
  b.range("aten::mm", 12, 10, 1, "cpu_op");
  b.launched("gemm_1", 15, 200, 40);
  b.range("layers.3.attention", 70, 20);
  b.launched("gemm_2", 75, 240, 25);
  // A weight-grad range inside the backward chunk: the inner pass (W) wins over the outer (I).
  b.range("layers.3.feed_forward.wgrad", 92, 6);
  b.launched("wgrad_gemm", 93, 265, 8);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 3, SubOp::mlp, Pass::I).busy == 40 * kUs);
  REQUIRE(cell(r, 3, SubOp::attention, Pass::I).busy == 25 * kUs);
  REQUIRE(cell(r, 3, SubOp::mlp, Pass::W).busy == 8 * kUs);
  REQUIRE(r.unmapped == 0);
}

TEST_CASE("unannotated and unlinked kernels are reported with their time, never dropped", "[trace]") {
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm", 2, 100, 30);
  b.range("optimizer.step", 20, 10);  // names no pass: unmapped
  b.launched("adam", 22, 140, 15);
  b.launched("memset_free", 40, 160, 5);  // launched under no range at all
  b.kernel("orphan", -1, 170, 7);         // no correlation and no flow: unlinked
  b.range("embedding.F", 50, 5);          // a pass but no numbered layer: outside layers
  b.launched("embed", 51, 180, 3);
  const ImportResult r = run(b);
  // Every kernel's time is somewhere: 30 mapped + 3 outside layers + (15 + 5) unmapped + 7 unlinked = 60.
  REQUIRE(r.unmapped == 20 * kUs);
  REQUIRE(r.unmapped_kernels == 2);
  REQUIRE(r.unlinked == 7 * kUs);
  REQUIRE(r.outside_layers == 3 * kUs);
  REQUIRE(r.unmapped_top.front().first == "optimizer.step");
  REQUIRE(r.profile.op.f == 30 * kUs);  // outside-layer time is not per-layer time
  const std::string report = render_import_report(r);
  REQUIRE(report.find("unmapped (launched under no range that names a pass): 0.020 ms in 2") != std::string::npos);
  REQUIRE(report.find("unlinked (no correlation id or ac2g flow to a launch): 0.007 ms in 1") != std::string::npos);
}

TEST_CASE("overlapping streams: roles, busy time, and the slowdown beside communication", "[trace]") {
  TraceBuilder b;
  // Micro-batch 0 alone: MLP GEMM 100 us. Micro-batch 1: the same GEMM (same name, sub-op, pass,
  // first in its range) runs 120 us beside an NCCL all-to-all on stream 20: slowdown 1.2.
  b.range("layer0.mlp.F", 0, 10);
  b.launched("gemm_x", 1, 100, 100);
  b.range("layer0.mlp.F", 20, 10);
  b.launched("gemm_x", 21, 300, 120);
  b.range("layer0.dispatch.F", 40, 10, 2);
  b.kernel("ncclDevKernel_AllToAll", b.launch(41, 2), 290, 140, 20, 0, 16);
  const ImportResult r = run(b);
  REQUIRE(r.mlp_slowdown == Approx(1.2));
  REQUIRE(r.mlp_slowdown_samples == 1);
  REQUIRE(r.attn_slowdown == 0);  // not measured: the linear rule stays for attention
  REQUIRE(r.profile.mlp_comm_slowdown == Approx(1.2));
  // Alone time: 100 + 120 / 1.2 = 200 over 2 executions = 100 us per layer.
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::F).executions == 2);
  REQUIRE(r.profile.sub_ops->mlp_f == 100 * kUs);
  REQUIRE(r.profile.sub_ops->dispatch == 140 * kUs);
  // Streams: 7 compute, 20 communication. Device span 100..430; compute busy 100 + 120.
  REQUIRE(r.streams.size() == 2);
  REQUIRE_FALSE(r.streams[0].comm);
  REQUIRE(r.streams[1].comm);
  REQUIRE(r.devices.at(0).span() == 330 * kUs);
  REQUIRE(r.devices.at(0).compute_busy == 220 * kUs);
  REQUIRE(r.devices.at(0).comm_busy == 140 * kUs);
  // The all-to-all's grid of 16 blocks on 132 SMs.
  REQUIRE(r.profile.comm_sm_fraction == Approx(16.0 / 132));
}

TEST_CASE("slowdown from kernels only partly beside communication", "[trace]") {
  TraceBuilder b;
  // Alone the GEMM takes 100 us. In micro-batch 1 it takes 110 us, 50 of them beside an
  // all-to-all. Beside communication it runs at 1/s: 100 = (110 - 50) + 50 / s, so s = 1.25.
  b.range("layer0.mlp.F", 0, 10);
  b.launched("gemm_x", 1, 100, 100);
  b.range("layer0.mlp.F", 20, 10);
  b.launched("gemm_x", 21, 300, 110);
  b.range("layer0.dispatch.F", 40, 10, 2);
  b.kernel("ncclDevKernel_AllToAll", b.launch(41, 2), 360, 80, 20, 0);  // 360..440: 50 us of 300..410
  const ImportResult r = run(b);
  REQUIRE(r.mlp_slowdown == Approx(1.25));
  // Alone time of the second run: 60 + 50 / 1.25 = 100, so 100 us per execution.
  REQUIRE(std::llabs(r.profile.sub_ops->mlp_f - 100 * kUs) <= 1);
}

TEST_CASE("communication across devices: waiting until the last peer joins, then transfer", "[trace]") {
  TraceBuilder b;
  b.range("layer0.combine.F", 0, 10, 1);
  b.kernel("ncclDevKernel_AllToAll", b.launch(1, 1), 100, 50, 20, 0);  // device 0: 100..150
  b.range("layer0.combine.F", 0, 10, 2);
  b.kernel("ncclDevKernel_AllToAll", b.launch(1, 2), 130, 20, 20, 1);  // device 1: 130..150
  const ImportResult r = run(b);
  // The last peer starts at 130: both transfer 20 us; device 0 waited 30 us.
  REQUIRE(r.comm_split);
  REQUIRE(r.comm_total == 70 * kUs);
  REQUIRE(r.comm_transfer == 40 * kUs);
  REQUIRE(r.comm_wait == 30 * kUs);
  REQUIRE(r.profile.sub_ops->combine == 20 * kUs);  // transfer per execution, both devices alike
}

TEST_CASE("user rules come before the defaults; bad rules are usage errors", "[trace]") {
  TraceBuilder b;
  b.range("my_block_7_thing", 0, 10);
  b.launched("k", 1, 100, 10);
  // No default names a pass in it: a layer's work outside autograd's backward counts as forward.
  REQUIRE(cell(run(b), 7, SubOp::other, Pass::F).busy == 10 * kUs);
  const ImportResult r = run(b, {"thing=mlp:W"});
  REQUIRE(cell(r, 7, SubOp::mlp, Pass::W).busy == 10 * kUs);  // layer from "block_7"
  try {
    run(b, {"thing=mpl:F"});
    FAIL("bad sub-op accepted");
  } catch (const InputError& e) {
    REQUIRE(e.exit_code() == kExitUsage);
    REQUIRE(std::string(e.what()).find("unknown sub-op 'mpl'") != std::string::npos);
  }
  REQUIRE_THROWS_AS(run(b, {"(=mlp:F"}), InputError);
  REQUIRE_THROWS_AS(run(b, {"x=mlp:Q"}), InputError);
}

TEST_CASE("gzip traces read like plain ones; truncated ones are one error", "[trace]") {
  robust::Scratch dir("trace_gz");
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm", 2, 100, 30);
  const std::string text = b.json();
  const std::string gz = dir.path("t.json.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const ImportResult r = import_trace_file(gz, {});
  REQUIRE(r.profile.sub_ops->attn_f == 30 * kUs);
  REQUIRE(r.bytes == text.size());
  // The .gz cut in half: zlib reports the early end.
  std::string bytes = ppsim::test::read_file(gz);
  dir.write("cut.json.gz", bytes.substr(0, bytes.size() / 2));
  REQUIRE_THROWS_AS(import_trace_file(dir.path("cut.json.gz"), {}), InputError);
  // Plain JSON cut mid-event: line and column of the end.
  try {
    read_kineto_text(text.substr(0, text.size() - 20), "cut.json");
    FAIL("truncated trace accepted");
  } catch (const InputError& e) {
    REQUIRE(e.loc().file == "cut.json");
    REQUIRE(e.loc().line > 1);
    REQUIRE(std::string(e.what()).find("ends early") != std::string::npos);
  }
}

TEST_CASE("a git-LFS pointer and a trace whose kernels were dropped are named as such", "[trace]") {
  robust::Scratch dir("trace_lfs");
  // A repository's large trace not pulled: git-LFS's pointer text (spec v1), at the file's start.
  dir.write("lfs.json", "version https://git-lfs.github.com/spec/v1\noid sha256:0123\nsize 564000000\n");
  try {
    (void)import_trace_file(dir.path("lfs.json"), {});
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(e.loc().line == 1);
    CHECK_THAT(std::string(e.what()), PPSIM_CONTAINS("a git-LFS pointer, not the trace"));
  }
  // CUDA activity on (a launch on the host) but no kernel record: not "was CUDA profiled?".
  const std::string launched_only =
      R"({"traceEvents":[{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":1,"dur":2,"args":{"correlation":7}}]})";
  try {
    (void)read_kineto_text(launched_only, "t.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), PPSIM_CONTAINS("no GPU kernels, though its host launched 1"));
  }
  const std::string cpu_only =
      R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":1,"dur":2}]})";
  try {
    (void)read_kineto_text(cpu_only, "t.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), PPSIM_CONTAINS("was the profiler run with ProfilerActivity.CUDA?"));
  }
}

TEST_CASE("timestamps out of range are one error, not rounded", "[trace]") {
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm", 2, 1e18, 30);  // 1e18 us = 1e21 ns: past 64-bit ns
  try {
    run(b);
    FAIL("accepted");
  } catch (const InputError& e) {
    REQUIRE(e.exit_code() == kExitInput);
    REQUIRE(std::string(e.what()).find("out of range") != std::string::npos);
  }
}

TEST_CASE("import-trace CLI: a truncated trace is one line, exit code 3, no output file", "[trace][cli]") {
  robust::Scratch dir("trace_cli");
  TraceBuilder b;
  b.range("layer0.attn.F", 0, 10);
  b.launched("gemm", 2, 100, 30);
  const std::string text = b.json();
  dir.write("cut.json", text.substr(0, text.size() / 2));
  const robust::Result bad = robust::run_ppsim(dir, "import-trace cut.json -o p.yaml");
  REQUIRE(bad.code == kExitInput);
  REQUIRE(bad.one_error_line());
  REQUIRE(bad.err.find("cut.json:") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  dir.write("t.json", text);
  // A forward only: refused as a training profile (one line, exit 3, no file), read with --inference.
  const robust::Result fwd = robust::run_ppsim(dir, "import-trace t.json -o p.yaml");
  REQUIRE(fwd.code == kExitInput);
  REQUIRE(fwd.one_error_line());
  REQUIRE(fwd.err.find("t.json: the trace has no backward") != std::string::npos);
  REQUIRE(fwd.err.find("--inference") != std::string::npos);
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  const robust::Result ok = robust::run_ppsim(dir, "import-trace t.json -o p.yaml --inference");
  REQUIRE(ok.code == 0);
  REQUIRE(ppsim::test::read_file(dir.path("p.yaml")).find("attention: {F: 0.030000") != std::string::npos);
  REQUIRE(robust::run_ppsim(dir, "import-trace t.json --map 'x=nope'").code == kExitUsage);
  // --format json: the same figures for scripts (attention F of layer 0: the 30 us kernel).
  const robust::Result js = robust::run_ppsim(dir, "import-trace t.json --format json --schedule pair --inference");
  REQUIRE(js.code == 0);
  const nlohmann::json j = nlohmann::json::parse(js.out);
  REQUIRE(j["cells"][0]["subop"] == "attention");
  REQUIRE(j["cells"][0]["busy_ms"].get<double>() == Approx(0.030));
  REQUIRE(j["unlinked_ms"].get<double>() == 0);
  REQUIRE(j["prediction"]["predicted_ms"].get<double>() == Approx(0.030));  // one F layer, nothing else
}

TEST_CASE("import-trace CLI: the profile and the page are written together or not at all", "[trace][cli]") {
  robust::Scratch dir("trace_cli_outputs");
  write_one_layer_trace(dir);
  // The page cannot be written (no such folder): exit 4, one line naming it, and no profile
  // either, though its path could be written.
  const robust::Result bad = robust::run_ppsim(dir, "import-trace t.json -o p.yaml --html nodir/r.html");
  REQUIRE(bad.code == kExitIo);
  REQUIRE(bad.one_error_line());
  REQUIRE(bad.err.find("nodir/r.html") != std::string::npos);
  REQUIRE(bad.out.empty());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("p.yaml")));
  // The other way round, and with the prediction: no page.
  const robust::Result bad2 = robust::run_ppsim(dir, "import-trace t.json -o nodir/p.yaml --html r.html --schedule pair");
  REQUIRE(bad2.code == kExitIo);
  REQUIRE(bad2.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(dir.path("r.html")));
  // Both writable: both written, the report names the profile.
  const robust::Result ok = robust::run_ppsim(dir, "import-trace t.json -o p.yaml --html r.html");
  REQUIRE(ok.code == 0);
  REQUIRE(ok.out.find("\nwrote p.yaml\n") != std::string::npos);
  REQUIRE(ppsim::test::read_file(dir.path("p.yaml")).find("attention: {F: 0.030000") != std::string::npos);
  REQUIRE(ppsim::test::read_file(dir.path("r.html")).find("ppsim import-trace t.json") != std::string::npos);
}

TEST_CASE("import-trace --moe-layers-only writes applies_to: moe_layers, and needs -o", "[trace][cli]") {
  robust::Scratch dir("trace_cli_moe_only");
  write_one_layer_trace(dir);
  const robust::Result ok = robust::run_ppsim(dir, "import-trace t.json -o p.yaml --moe-layers-only");
  REQUIRE(ok.code == 0);
  const std::string yaml = ppsim::test::read_file(dir.path("p.yaml"));
  CHECK(yaml.find("\napplies_to: moe_layers\n") != std::string::npos);
  CHECK(yaml.find("\nrecompute: included\n") != std::string::npos);  // the traced backward is what ran
  CHECK(yaml.find("attention: {F: 0.030000") != std::string::npos);
  // Without -o there is nothing to mark: a usage error, one line.
  const robust::Result bad = robust::run_ppsim(dir, "import-trace t.json --moe-layers-only");
  CHECK(bad.code == kExitUsage);
  CHECK(bad.one_error_line());
  CHECK(bad.err.find("--output") != std::string::npos);
}

TEST_CASE("a DualPipe-shaped pair trace predicts its own span", "[trace]") {
  // Shaped like tools/experiments/record_moe_trace.py's pair: one layer, compute stream 7 runs attention(F)
  // 40, MLP(I) 60, MLP(W) 30, MLP(F) 50, attention(I) 40, attention(W) 20 (DeepSeek's order);
  // stream 20 runs combine(B) 10, dispatch(F) 10, dispatch(B) 10, combine(F) 10. Hand timeline:
  //   comm: combine_b 0..10; compute: attn_f 0..40 (alone), mlp_i needs combine_b: 40..100;
  //   dispatch_f (after attn_f) 40..50 beside mlp_i; dispatch_b (after mlp_i) 100..110 beside
  //   mlp_w 100..130; mlp_f 130..180; attn_i (after dispatch_b) 180..220; attn_w 220..240;
  //   combine_f (after mlp_f) 180..190 beside attn_i.
  // The trace is written with no slowdown (kernels as long beside communication as alone), so
  // the model must give the span 240 and compute busy 240 back.
  TraceBuilder b;
  auto op = [&](const std::string& name, double ts, double dur, int stream) {
    const int tid = stream == 7 ? 1 : 2;
    b.range(name, ts - 5, 3, tid);
    b.launched("k_" + name.substr(name.find('.') + 1), ts - 4, ts, dur, stream, 0, tid);
  };
  op("layer0.combine.B", 0, 10, 20);
  op("layer0.attn.F", 0, 40, 7);
  op("layer0.mlp.I", 40, 60, 7);
  op("layer0.dispatch.F", 40, 10, 20);
  op("layer0.dispatch.B", 100, 10, 20);
  op("layer0.mlp.W", 100, 30, 7);
  op("layer0.mlp.F", 130, 50, 7);
  op("layer0.attn.I", 180, 40, 7);
  op("layer0.combine.F", 180, 10, 20);
  op("layer0.attn.W", 220, 20, 7);
  // The pair ran under a "pair" range on both threads; a plain forward of micro-batch 2 follows
  // outside it (GPU 300..340): --step-range pair keeps the step to the pair's kernels.
  b.range("pair", -10, 260, 1);
  b.range("pair", -10, 260, 2);
  b.range("layer0.attn.F", 400, 5);
  b.launched("k_attn.F", 401, 300, 40);
  REQUIRE(run(b).step() == 340 * kUs);
  const ImportResult r = run(b, {}, "^pair$");
  REQUIRE(r.step_events == 10);
  REQUIRE(r.devices.at(0).span() == 240 * kUs);
  REQUIRE(r.compute_busy() == 240 * kUs);
  PredictRequest req;
  req.schedule = "pair";
  req.comm_sms = 0;  // no slowdown measured (each kernel ran only beside or only away): none assumed
  const Prediction p = predict_traced(r, req);
  REQUIRE(p.traced == 240 * kUs);
  REQUIRE(p.predicted == 240 * kUs);
  REQUIRE(p.predicted_busy == 240 * kUs);
}

TEST_CASE("a 1F1B step of virtual stages on one GPU predicts its own step time", "[trace]") {
  // Shaped like tools/experiments/record_moe_trace.py's 1F1B trace: P = 2 stages of one layer each, M = 2,
  // every op run back to back on one stream in a valid serial order. Per layer (us):
  //   F = attn 30 + dispatch 5 + mlp 40 + combine 5 = 80
  //   B = combine.B 5 + mlp.I 50 + mlp.W 20 + dispatch.B 5 + attn.I 35 + attn.W 15 = 130
  // Step = 4 F + 4 B = 4 * 80 + 4 * 130 = 840 us. The simulator shares the one GPU among the two
  // ranks (time-sliced) and some rank always has work, so it must predict 840 too.
  TraceBuilder b;
  double cpu = 0, gpu = 0;
  auto sub = [&](int layer, const std::string& what, double dur) {
    const std::string name = fmt::format("layer{}.{}", layer, what);
    b.range(name, cpu, 2);
    b.launched("k_" + what, cpu + 1, gpu, dur);
    cpu += 3;
    gpu += dur;
  };
  auto fwd = [&](int s) { sub(s, "attn.F", 30), sub(s, "dispatch.F", 5), sub(s, "mlp.F", 40), sub(s, "combine.F", 5); };
  auto bwd = [&](int s) {
    sub(s, "combine.B", 5), sub(s, "mlp.I", 50), sub(s, "mlp.W", 20), sub(s, "dispatch.B", 5), sub(s, "attn.I", 35),
        sub(s, "attn.W", 15);
  };
  // s0F0, s1F0, s1B0, s0F1, s0B0, s1F1, s1B1, s0B1
  fwd(0), fwd(1), bwd(1), fwd(0), bwd(0), fwd(1), bwd(1), bwd(0);
  const ImportResult r = run(b);
  REQUIRE(r.step() == 840 * kUs);
  REQUIRE(r.executions == 2);
  REQUIRE(r.profile.op.f == 80 * kUs);
  REQUIRE(r.profile.op.b == 130 * kUs);
  PredictRequest req;
  req.schedule = "1f1b";
  req.pp = 2;
  req.microbatches = 2;
  req.devices = 1;
  const Prediction p = predict_traced(r, req);
  REQUIRE(std::llabs(p.predicted - 840 * kUs) <= 10);
  // On two GPUs the same profile pipelines: (M + P - 1)(F + B) = 3 * 210 = 630 us.
  req.devices = 2;
  REQUIRE(std::llabs(predict_traced(r, req).predicted - 630 * kUs) <= 10);
  CHECK(p.outside_layers == 0);
  // A kernel of no layer (60 us, after the step's last, under a range no rule maps): in the traced
  // span (900 us), not in the prediction, and the report says how much.
  b.range("embedding", cpu, 2);
  b.launched("k_embed", cpu + 1, gpu, 60);
  const ImportResult with = run(b);
  REQUIRE(with.step() == 900 * kUs);
  req.devices = 1;
  const Prediction q = predict_traced(with, req);
  CHECK(q.outside_layers + q.unmapped == 60 * kUs);
  CHECK(std::llabs(q.predicted - 840 * kUs) <= 10);
  CHECK_THAT(render_prediction(q), PPSIM_CONTAINS("not in the prediction: "));
  CHECK_THAT(render_prediction(q), PPSIM_CONTAINS("0.060 ms"));
}

namespace {

// A kernel-level two-stream GPU for the test below: each sub-op is a few kernels; a compute
// kernel runs `slowdown` times slower while a communication kernel runs (the effect the importer
// must measure), communication kernels at their own speed.
struct SynthOp {
  int stream;  // 7 compute, 13 communication
  std::string sub;
  int layer;
  std::vector<int> deps;
};
struct SynthKernel {
  int op, index, stream;
  double ts, dur;
};

const std::map<std::string, std::vector<double>>& synth_kernels() {
  static const std::map<std::string, std::vector<double>> k = {{"attn.F", {30, 60, 40, 20, 50}},
                                                               {"router.F", {5, 3}},
                                                               {"dispatch.F", {25}},
                                                               {"mlp.F", {120, 30, 120}},
                                                               {"combine.F", {25}},
                                                               {"combine.B", {25}},
                                                               {"mlp.I", {120, 40, 30, 120}},
                                                               {"mlp.W", {110, 110}},
                                                               {"dispatch.B", {25}},
                                                               {"attn.I", {40, 60, 60, 50, 40, 30, 40}},
                                                               {"attn.W", {30, 30, 30, 30}}};
  return k;
}

std::vector<SynthKernel> synth_run(const std::vector<SynthOp>& ops, double t0, double slowdown, double& t_end) {
  const auto& K = synth_kernels();
  std::vector<double> end(ops.size(), -1);
  std::map<int, std::vector<int>> queue;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) queue[ops[static_cast<std::size_t>(i)].stream].push_back(i);
  std::map<int, std::size_t> next;
  std::map<int, int> cur, kidx;
  std::map<int, double> rem, kstart;
  for (int s : {7, 13}) cur[s] = -1, next[s] = 0, queue[s];  // both streams, even when one has no ops
  std::vector<SynthKernel> out;
  double t = t0;
  auto pending = [&] {
    for (const auto& [s, q] : queue)
      if (next[s] < q.size() || cur[s] >= 0) return true;
    return false;
  };
  while (pending()) {
    for (auto& [s, q] : queue) {
      if (cur[s] >= 0 || next[s] >= q.size()) continue;
      const int i = q[next[s]];
      bool ready = true;
      for (int d : ops[static_cast<std::size_t>(i)].deps) ready &= end[static_cast<std::size_t>(d)] >= 0;
      if (!ready) continue;
      cur[s] = i, kidx[s] = 0, rem[s] = K.at(ops[static_cast<std::size_t>(i)].sub)[0], kstart[s] = t;
    }
    REQUIRE((cur[7] >= 0 || cur[13] >= 0));
    const double rate7 = cur[7] >= 0 && cur[13] >= 0 ? 1 / slowdown : 1;
    double dt = 1e300;
    if (cur[7] >= 0) dt = std::min(dt, rem[7] / rate7);
    if (cur[13] >= 0) dt = std::min(dt, rem[13]);
    t += dt;
    for (int s : {7, 13}) {
      if (cur[s] < 0) continue;
      rem[s] -= dt * (s == 7 ? rate7 : 1);
      if (rem[s] > 1e-9) continue;
      const SynthOp& op = ops[static_cast<std::size_t>(cur[s])];
      out.push_back({cur[s], kidx[s], s, kstart[s], t - kstart[s]});
      kstart[s] = t;
      if (++kidx[s] < static_cast<int>(K.at(op.sub).size())) {
        rem[s] = K.at(op.sub)[static_cast<std::size_t>(kidx[s])];
      } else {
        end[static_cast<std::size_t>(cur[s])] = t;
        cur[s] = -1;
        ++next[s];
      }
    }
  }
  t_end = t;
  return out;
}

// Writes one phase: a range per op on CPU thread 1 with its kernels' launches inside, all under
// one outer range `tag`.
void synth_record(TraceBuilder& b, double& cpu, const std::vector<SynthOp>& ops, const std::vector<SynthKernel>& ks,
                  const std::string& tag) {
  const double t0 = cpu++;
  std::map<int, std::vector<SynthKernel>> by_op;
  for (const auto& k : ks) by_op[k.op].push_back(k);
  for (const auto& [i, list] : by_op) {
    const SynthOp& op = ops[static_cast<std::size_t>(i)];
    b.range(fmt::format("layer{}.{}", op.layer, op.sub), cpu, 1.0 + static_cast<double>(list.size()));
    for (std::size_t j = 0; j < list.size(); ++j)
      b.launched(fmt::format("k_{}_{}", op.sub, list[j].index), cpu + 0.5 + static_cast<double>(j), list[j].ts,
                 list[j].dur, list[j].stream);
    cpu += 2.0 + static_cast<double>(list.size());
  }
  b.range(tag, t0, cpu - t0);
  cpu += 1;
}

}  // namespace

TEST_CASE("the slowdown a pair trace was made with is measured back, and the span predicted", "[trace]") {
  // As tools/experiments/record_moe_trace.py records it: a plain F of micro-batch 0 (each kernel away from
  // communication), the F&B pair in DeepSeek's order (the overlap model's), a plain B after it.
  // The GPU here slows compute kernels by s while a communication kernel runs, kernel by kernel;
  // the importer must find s from the same kernels in and out of the pair, and the overlap model,
  // given the profile, must reproduce the pair's span (it is the same model at sub-op level).
  const double s = GENERATE(1.1, 1.3);
  const int L = 4;
  TraceBuilder b;
  double cpu = 0, t = 1000;
  std::vector<SynthOp> ops;
  std::vector<int> prev;
  for (int l = 0; l < L; ++l) {
    const int a = static_cast<int>(ops.size());
    ops.push_back({7, "attn.F", l, prev});
    ops.push_back({7, "router.F", l, {a}});
    ops.push_back({7, "dispatch.F", l, {a + 1}});
    ops.push_back({7, "mlp.F", l, {a + 2}});
    ops.push_back({7, "combine.F", l, {a + 3}});
    prev = {a + 4};
  }
  synth_record(b, cpu, ops, synth_run(ops, t, s, t), "warmup.F");
  ops.clear();
  int f_prev = -1, b_prev = -1;
  auto dep = [](int i) { return i < 0 ? std::vector<int>{} : std::vector<int>{i}; };
  for (int i = 0; i < L; ++i) {
    const int lb = L - 1 - i, a = static_cast<int>(ops.size());
    ops.push_back({13, "combine.B", lb, dep(b_prev)});  // a
    ops.push_back({7, "attn.F", i, dep(f_prev)});       // a+1
    ops.push_back({7, "router.F", i, {a + 1}});         // a+2
    ops.push_back({7, "mlp.I", lb, {a}});               // a+3
    ops.push_back({13, "dispatch.F", i, {a + 2}});      // a+4
    ops.push_back({13, "dispatch.B", lb, {a + 3}});     // a+5
    ops.push_back({7, "mlp.W", lb, {a + 3}});           // a+6
    ops.push_back({7, "mlp.F", i, {a + 4}});            // a+7
    ops.push_back({7, "attn.I", lb, {a + 5}});          // a+8
    ops.push_back({7, "attn.W", lb, {a + 8}});          // a+9
    ops.push_back({13, "combine.F", i, {a + 7}});       // a+10
    f_prev = a + 10, b_prev = a + 8;
  }
  const double pair_start = t + 20;
  double pair_end = 0;
  synth_record(b, cpu, ops, synth_run(ops, pair_start, s, pair_end), "pair");
  ops.clear();
  prev.clear();
  for (int l = L - 1; l >= 0; --l) {
    const int a = static_cast<int>(ops.size());
    int j = 0;
    for (const char* sub : {"combine.B", "mlp.I", "mlp.W", "dispatch.B", "attn.I", "attn.W"})
      ops.push_back({7, sub, l, j++ == 0 ? prev : std::vector<int>{a + j - 2}});
    prev = {a + 5};
  }
  double t_end = 0;
  synth_record(b, cpu, ops, synth_run(ops, pair_end + 20, s, t_end), "cooldown.B");

  const ImportResult r = run(b, {}, "^pair$");
  REQUIRE(r.attn_slowdown == Approx(s).epsilon(1e-3));
  REQUIRE(r.mlp_slowdown == Approx(s).epsilon(1e-3));
  REQUIRE(r.layers == L);
  PredictRequest req;
  req.schedule = "pair";
  const Prediction p = predict_traced(r, req);
  // The trace's span, to the rounding of its microsecond timestamps to ns.
  REQUIRE(std::abs(static_cast<double>(p.traced) - (pair_end - pair_start) * 1e3) < 5);
  REQUIRE(std::abs(p.error()) < 1e-3);
  REQUIRE(std::abs(p.busy_error()) < 1e-3);
}
