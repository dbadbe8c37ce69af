// The importer on traces as users have them (issue 27): timestamps of every Kineto era (epoch
// microseconds, baseTimeNanoseconds, ns resolution, strings, the old category names), pass and
// communication names of DeepSeek, DeepEP and friends, layers numbered by module scopes or by the
// order of sub-op ranges, executions per entry of the layer's scope, autograd's backward on its
// own thread linked to the forward op, and every GPU event in exactly one bucket.
// Each trace is hand-made, shaped like the real file that had the feature (docs/TRACES.md).
#include <fmt/format.h>

#include <string>
#include <vector>

#include "catch.h"
#include "core/error.h"
#include "cost/profile.h"
#include "trace/import.h"

using namespace ppsim;
using namespace ppsim::trace;

namespace {

constexpr Time kUs = 1000;

// Events as JSON text; times as the caller writes them (numbers or strings of us).
struct Trace {
  std::vector<std::string> ev;
  std::string top = R"("schemaVersion":1,"deviceProperties":[{"id":0,"name":"GPU","numSms":132}])";
  long corr = 1;
  void add(std::string e) { ev.push_back(std::move(e)); }
  void range(const std::string& name, const std::string& ts, const std::string& dur, int tid = 1,
             const std::string& cat = "user_annotation", const std::string& args = "") {
    add(fmt::format(R"({{"ph":"X","cat":"{}","name":"{}","pid":100,"tid":{},"ts":{},"dur":{}{}}})", cat, name, tid, ts,
                    dur, args.empty() ? "" : ",\"args\":{" + args + "}"));
  }
  void range(const std::string& name, double ts, double dur, int tid = 1, const std::string& cat = "user_annotation",
             const std::string& args = "") {
    range(name, fmt::format("{}", ts), fmt::format("{}", dur), tid, cat, args);
  }
  // An op with a "Sequence number": a backward op names its forward thread ("Fwd thread id" 1),
  // a forward op has 0 there (as torch 2.x writes it).
  void op(const std::string& name, double ts, double dur, int tid, int seq, bool backward) {
    range(name, ts, dur, tid, "cpu_op",
          fmt::format(R"("Sequence number":{},"Fwd thread id":{})", seq, backward ? 1 : 0));
  }
  // A launch on `tid` at `launch` and its kernel on stream 7: [ts, ts + dur).
  void kernel(const std::string& name, const std::string& launch, const std::string& ts, const std::string& dur,
              int tid = 1, const std::string& kcat = "kernel", const std::string& rcat = "cuda_runtime",
              int stream = 7) {
    const long c = corr++;
    add(fmt::format(
        R"({{"ph":"X","cat":"{}","name":"cudaLaunchKernel","pid":100,"tid":{},"ts":{},"dur":1,"args":{{"correlation":{}}}}})",
        rcat, tid, launch, c));
    add(fmt::format(
        R"({{"ph":"X","cat":"{}","name":"{}","pid":0,"tid":{},"ts":{},"dur":{},"args":{{"device":0,"stream":{},"correlation":{}}}}})",
        kcat, name, stream, ts, dur, stream, c));
  }
  void kernel(const std::string& name, double launch, double ts, double dur, int tid = 1, int stream = 7) {
    kernel(name, fmt::format("{}", launch), fmt::format("{}", ts), fmt::format("{}", dur), tid, "kernel",
           "cuda_runtime", stream);
  }
  std::string json() const {
    std::string s = "{" + top + R"(,"traceEvents":[)";
    for (std::size_t i = 0; i < ev.size(); ++i) s += (i ? ",\n" : "\n") + ev[i];
    return s + "\n]}\n";
  }
};

ImportResult run(const Trace& b, ImportOptions o = {}) {
  return import_trace(read_kineto_text(b.json(), "t.json"), o, "t.json");
}

const Cell& cell(const ImportResult& r, int layer, SubOp s, Pass p) {
  return r.cells.at(layer)[static_cast<std::size_t>(s)][static_cast<std::size_t>(p)];
}

// The buckets: layer cells + outside layers + unmapped + unlinked = all GPU time, exactly.
Time buckets(const ImportResult& r) {
  Time sum = r.unmapped + r.unlinked;
  for (const auto& [layer, cells] : r.cells)
    for (const auto& per_sub : cells)
      for (const Cell& c : per_sub) sum += c.busy;
  return sum;
}

// Two layers without numbers, as DeepSeek's trace names them: each attn(F) then mlp(F), then their
// backward, mlp(B) then attn(B) of each; kernels of 10 + l, 20 + l, 30 + l and 40 + l us for
// layer l, one per 20 us range from `t`, which it advances.
void two_unnumbered_layers(Trace& b, double& t) {
  for (int l = 0; l < 2; ++l) {
    b.range("attn(F)", t, 10), b.kernel("fa", t + 1, 1000 + t, 10 + l), t += 20;
    b.range("mlp(F)", t, 10), b.kernel("ffn", t + 1, 1000 + t, 20 + l), t += 20;
  }
  for (int l = 0; l < 2; ++l) {
    b.range("mlp(B)", t, 10), b.kernel("ffn_b", t + 1, 1000 + t, 30 + l), t += 20;
    b.range("attn(B)", t, 10), b.kernel("fa_b", t + 1, 1000 + t, 40 + l), t += 20;
  }
}

}  // namespace

TEST_CASE("epoch-microsecond timestamps (older Kineto) are kept exact, relative to the first event", "[trace]") {
  Trace b;
  b.range("layer0.attn.F", 1695835542514261.0, 10);
  b.kernel("gemm", 1695835542514262.0, 1695835542514300.0, 30);
  const KinetoTrace k = read_kineto_text(b.json(), "t.json");
  REQUIRE(k.origin_ns == 1695835542514261LL * 1000);
  REQUIRE(k.ranges[0].ts == 0);
  REQUIRE(k.gpu[0].ts == 39 * kUs);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::F).busy == 30 * kUs);
  REQUIRE(r.devices.at(0).first == 39 * kUs);
}

TEST_CASE("ns resolution, string ts and baseTimeNanoseconds read to the nanosecond", "[trace]") {
  Trace b;
  b.top += R"(,"displayTimeUnit":"ns","baseTimeNanoseconds":"1735632360000000000")";
  b.range("layer1.mlp.F", "\"4203669603018.756\"", "\"9.5\"");
  // 3.5005 us: the 4th decimal rounds up to 3501 ns.
  b.kernel("gemm", "4203669603019.001", "4203669603020.123", "3.5005");
  const KinetoTrace k = read_kineto_text(b.json(), "t.json");
  REQUIRE(k.base_time_ns == 1735632360000000000LL);
  REQUIRE(k.origin_ns == 4203669603018756LL);
  REQUIRE(k.gpu[0].ts == 1367);  // 20.123 - 18.756 us
  REQUIRE(k.gpu[0].dur == 3501);
  REQUIRE(k.ranges[0].dur == 9500);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 1, SubOp::mlp, Pass::F).busy == 3501);
}

TEST_CASE("the old category names: Kernel, Runtime, Memcpy, Memset", "[trace]") {
  Trace b;
  b.range("layer0.attn.F", "100", "50");
  b.kernel("gemm", "101", "200", "20", 1, "Kernel", "Runtime");
  b.kernel("Memcpy DtoD", "102", "230", "5", 1, "Memcpy", "Runtime");
  b.kernel("Memset", "103", "240", "2", 1, "Memset", "Runtime");
  const ImportResult r = run(b);
  REQUIRE(r.gpu_events == 3);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::F).busy == 27 * kUs);
}

TEST_CASE("durations are bounded (a day), absolute times are not; no GPU work is one refusal", "[trace]") {
  Trace b;
  b.range("layer0.attn.F", 1.7e15, 10);
  b.kernel("gemm", "1700000000000001", "1700000000000002", "90000000000");  // 25 hours
  try {
    run(b);
    FAIL("accepted");
  } catch (const InputError& e) {
    REQUIRE(e.exit_code() == kExitInput);
    REQUIRE(std::string(e.what()).find("at most a day") != std::string::npos);
  }
  Trace cpu;  // a CPU-only trace with epoch timestamps: the "no GPU kernels" line, not a range error
  cpu.range("ProfilerStep#1", 1661203462598738.0, 100);
  cpu.range("aten::mm", 1661203462598740.0, 10, 1, "cpu_op");
  try {
    run(cpu);
    FAIL("accepted");
  } catch (const InputError& e) {
    REQUIRE(std::string(e.what()).find("no GPU kernels") != std::string::npos);
  }
}

TEST_CASE("pass suffixes (F)/(B)/(W), _fwd/_bwd; DeepEP, NVSHMEM and --comm-kernel kernels are communication",
          "[trace]") {
  Trace b;
  b.range("layer0.attn(F)", 0, 10);
  b.kernel("flash_fwd", 1, 100, 10);
  b.range("layer0.mlp(B)", 20, 10);
  b.kernel("dgrad", 21, 120, 20);
  b.range("layer0.mlp(W)", 40, 10);
  b.kernel("wgrad", 41, 150, 30);
  b.range("layer0.attn_bwd", 60, 10);
  b.kernel("flash_bwd", 61, 190, 40);
  b.range("layer0.mlp(F)", 80, 10);
  b.kernel("void dpsk::ep::internode::dispatch<false, 8>(int4*)", 81, 240, 7, 1, 9);
  b.kernel("nvshmemi_transfer_kernel", 82, 250, 3, 1, 9);
  b.kernel("my_fused_a2a", 83, 260, 4, 1, 11);
  ImportOptions o;
  o.comm_kernel = "fused_a2a";
  const ImportResult r = run(b, o);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::F).busy == 10 * kUs);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::I).busy == 20 * kUs);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::W).busy == 30 * kUs);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::I).busy == 40 * kUs);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::F).busy == 14 * kUs);
  REQUIRE(r.comm_total == 14 * kUs);  // all three are communication, by their names
  for (const auto& s : r.streams) REQUIRE(s.comm == (s.stream != 7));
  REQUIRE(Rules::is_comm_kernel("void deep_ep::intranode::combine<8>(...)"));
  REQUIRE(Rules::is_comm_kernel("c10d::symmetric_memory::one_shot_all_reduce_kernel"));
  REQUIRE_FALSE(Rules::is_comm_kernel("sm90_xmma_gemm_bf16"));
  ImportOptions bad;
  bad.comm_kernel = "(";
  REQUIRE_THROWS_AS(run(b, bad), InputError);
}

TEST_CASE("compute kernels side by side on two streams count their wall time once (DeepSeek's wgrad)", "[trace]") {
  // One layer: F 20 us alone; W two GEMMs launched on streams 7 and 23 that overlap for 10 us
  // ([100, 130) and [120, 150)): 60 us of durations, 50 us of wall time. Of the 10 us together
  // each counts half, so W = 20 + 5 + 5 + 20 = 50 us. A third kernel on stream 7 overlapping the
  // first by 1 us (clock jitter: one stream runs one kernel at a time) counts in full.
  Trace b;
  b.range("layer0.mlp(F)", 0, 10);
  b.kernel("ffn", 1, 40, 20);
  b.range("layer0.mlp(W)", 20, 10);
  b.kernel("wgrad_expert0", 21, 100, 30, 1, 7);
  b.kernel("wgrad_expert1", 22, 120, 30, 1, 23);
  const ImportResult r = run(b);
  REQUIRE(r.layers == 1);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::W).busy == 60 * kUs);  // the kernels' durations, as the GPU time adds up
  REQUIRE(std::abs(r.compute_concurrent - 10.0 * kUs) < 1e-6);
  REQUIRE(r.profile.op.w == 50 * kUs);
  REQUIRE(r.profile.op.f == 20 * kUs);
  REQUIRE(r.gpu_total == buckets(r));
  Trace j;
  j.range("layer0.mlp(F)", 0, 10);
  j.kernel("ffn", 1, 40, 20);
  j.range("layer0.mlp(W)", 20, 10);
  j.kernel("wgrad_expert0", 21, 100, 30, 1, 7);
  j.kernel("wgrad_tail", 22, 129, 5, 1, 7);  // [129, 134) on stream 7: overlaps [100, 130) by 1 us
  const ImportResult rj = run(j);
  REQUIRE(rj.compute_concurrent == 0);
  REQUIRE(rj.profile.op.w == 35 * kUs);
}

TEST_CASE("layers without numbers: the k-th occurrence of each sub-op range is layer k (DeepSeek)", "[trace]") {
  Trace b;
  // Two layers, each attn(F) then mlp(F), then their backward in reverse order (as a chunk's
  // backward runs): attn(B) of the second-run range is the second occurrence, so layer 1.
  double t = 0;
  two_unnumbered_layers(b, t);
  const ImportResult r = run(b);
  REQUIRE(r.layers == 2);
  REQUIRE(r.layer_rule.find("order") != std::string::npos);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::F).busy == 10 * kUs);
  REQUIRE(cell(r, 1, SubOp::mlp, Pass::F).busy == 21 * kUs);
  REQUIRE(cell(r, 1, SubOp::attention, Pass::I).busy == 41 * kUs);
  REQUIRE(cell(r, 1, SubOp::attention, Pass::I).executions == 1);
  // Per layer: F = ((10 + 20) + (11 + 21)) / 2 = 31 us.
  REQUIRE(r.profile.op.f == 31 * kUs);
  ImportOptions off;
  off.layer_order = LayerOrder::off;
  const ImportResult n = run(b, off);
  REQUIRE(n.layers == 0);
  REQUIRE(n.outside_layers == buckets(n));
  // Unequal counts: not applied unless forced.
  b.range("attn(F)", t, 10), b.kernel("fa", t + 1, 1000 + t, 5);
  REQUIRE(run(b).layers == 0);
  ImportOptions force;
  force.layer_order = LayerOrder::force;
  REQUIRE(run(b, force).layers == 3);
}

TEST_CASE("the order rule counts layers within an iteration; once per iteration is no layer", "[trace]") {
  // Three iterations (ProfilerStep#N), each: attn(F), mlp(F) of 2 layers, their backward: each name
  // recurs 6 times, 2 per iteration, so layer k is the k-th within its iteration, each layer
  // executed 3 times (busy summed over them: layer 1's attention F 11 us x 3).
  Trace b;
  double t = 0;
  for (int it = 0; it < 3; ++it) {
    b.range("ProfilerStep#" + std::to_string(it), t, 160);
    two_unnumbered_layers(b, t);
  }
  const ImportResult r = run(b);
  REQUIRE(r.layers == 2);
  CHECK(r.layer_rule.find("within an iteration (4 names, 2 times in each of 3 iterations)") != std::string::npos);
  CHECK(cell(r, 1, SubOp::attention, Pass::F).busy == 3 * 11 * kUs);
  CHECK(cell(r, 1, SubOp::attention, Pass::F).executions == 3);
  // A loss and an optimizer range once per iteration (PyTorch's Optimizer.step#SGD.step): not layers.
  Trace o;
  t = 0;
  for (int it = 0; it < 4; ++it) {
    o.range("aten::cross_entropy_loss", t, 10, 1, "cpu_op"), o.kernel("loss", t + 1, 1000 + t, 5), t += 20;
    o.range("Optimizer.step#SGD.step", t, 10), o.kernel("sgd", t + 1, 1000 + t, 5), t += 20;
  }
  const ImportResult n = run(o);
  CHECK(n.layers == 0);
  CHECK(n.layer_rule.find("recurs once per iteration, 4 iterations") != std::string::npos);
}

TEST_CASE("module scopes number layers; executions are entries of the layer's scope, not inner modules", "[trace]") {
  Trace b;
  // with_stack: two micro-batches through `nn.Module: ToyDecoderLayer_3`, each running an inner
  // Linear module 4 times (python "forward" gives the pass). F per execution = 4 x 5 us.
  for (int mb = 0; mb < 2; ++mb) {
    const double t0 = 1000.0 * mb;
    b.range("nn.Module: ToyDecoderLayer_3", t0, 500, 1, "python_function");
    b.range("model.py(10): forward", t0 + 1, 498, 1, "python_function");
    for (int k = 0; k < 4; ++k) {
      b.range("nn.Module: Linear_" + std::to_string(7 + k), t0 + 10 + 100 * k, 50, 1, "python_function");
      b.kernel("gemm", t0 + 11 + 100 * k, 5000 + t0 + 10 * k, 5);
    }
  }
  const ImportResult r = run(b);
  REQUIRE(r.layers == 1);
  REQUIRE(r.layer_rule.find("module scopes") != std::string::npos);
  REQUIRE(cell(r, 3, SubOp::other, Pass::F).executions == 2);
  REQUIRE(r.profile.op.f == 20 * kUs);
  // Explicit per-layer backward ranges around ops that repeat (MmBackward0 x 5): B = the sum.
  Trace c;
  c.range("layers.0.B", 0, 100);
  for (int k = 0; k < 5; ++k) {
    c.range("MmBackward0", 1 + 10 * k, 8, 1, "cpu_op");
    c.kernel("dgrad", 2 + 10 * k, 500 + 10 * k, 6);
  }
  const ImportResult q = run(c);
  REQUIRE(cell(q, 0, SubOp::other, Pass::I).executions == 1);
  REQUIRE(q.profile.op.b == 30 * kUs);
}

TEST_CASE("autograd's backward on its own thread: linked to the forward op's layer and sub-op", "[trace]") {
  Trace b;
  // Forward on thread 1: layer 2's attention op (seq 10), its MLP op (seq 11, fwdbwd flow below).
  b.range("layers.2.attention", 0, 50);
  b.op("aten::linear", 5, 10, 1, 10, false);
  b.kernel("fwd_gemm", 6, 1000, 8);
  b.range("layers.2.mlp", 60, 50);
  b.op("aten::linear", 65, 10, 1, 11, false);
  b.kernel("fwd_gemm2", 66, 1010, 9);
  // Backward on autograd's thread 2, nothing open on thread 1 but a "## backward ##"-less step.
  b.op("autograd::engine::evaluate_function: MmBackward0", 200, 20, 2, 10, true);
  b.op("MmBackward0", 201, 18, 2, 10, true);
  b.kernel("dgrad_attn", 202, 1100, 12, 2);
  b.range("autograd::engine::evaluate_function: AddmmBackward0", 230, 20, 2, "cpu_op", R"("Fwd thread id":1)");
  b.kernel("dgrad_mlp", 232, 1120, 14, 2);
  b.add(R"({"ph":"s","cat":"fwdbwd","id":5,"pid":100,"tid":1,"ts":65,"name":"fwdbwd"})");
  b.add(R"({"ph":"f","cat":"fwdbwd","id":5,"pid":100,"tid":2,"ts":230,"bp":"e","name":"fwdbwd"})");
  const ImportResult r = run(b);
  REQUIRE(cell(r, 2, SubOp::attention, Pass::I).busy == 12 * kUs);
  REQUIRE(cell(r, 2, SubOp::mlp, Pass::I).busy == 14 * kUs);
  REQUIRE(r.by_forward == 26 * kUs);
  REQUIRE(r.by_stack == 17 * kUs);
  REQUIRE(r.gpu_total == buckets(r));
  REQUIRE(r.profile.op.b == 26 * kUs);
}

TEST_CASE("a user range open on the thread that called backward takes precedence (DeepSeek's attn(B))", "[trace]") {
  Trace b;
  b.range("layer0.mlp.F", 0, 50);
  b.op("aten::linear", 5, 10, 1, 10, false);
  b.kernel("fwd_gemm", 6, 1000, 8);
  // The calling thread opens attn(B), then mlp(W); autograd's thread runs op 10's backward in each.
  b.range("layer0.attn(B)", 100, 50);
  b.op("autograd::engine::evaluate_function: MmBackward0", 110, 20, 2, 10, true);
  b.kernel("dgrad", 111, 1100, 12, 2);
  b.range("layer0.mlp(W)", 200, 50);
  b.op("autograd::engine::evaluate_function: MmBackward0", 210, 20, 2, 10, true);
  b.kernel("wgrad", 211, 1200, 7, 2);
  // Autograd work with no range open anywhere and no forward op: still the backward (I), outside layers.
  b.op("autograd::engine::evaluate_function: SumBackward0", 300, 20, 2, 99, true);
  b.kernel("fill", 301, 1300, 3, 2);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 0, SubOp::attention, Pass::I).busy == 12 * kUs);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::W).busy == 7 * kUs);
  REQUIRE(r.by_caller == 19 * kUs);
  REQUIRE(cell(r, -1, SubOp::other, Pass::I).busy == 3 * kUs);
  REQUIRE(r.outside_layers == 3 * kUs);
  REQUIRE(r.gpu_total == 30 * kUs);
  REQUIRE(r.gpu_total == buckets(r));
}

TEST_CASE("the JSON scanner: escapes, exponents, and bad JSON as one line with its place", "[trace]") {
  Trace b;
  b.range("layer0.attn.F", 0, 10);
  b.add(
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":100,"tid":1,"ts":1,"dur":1,"args":{"correlation":1}})");
  b.add(
      R"({"ph":"X","cat":"kernel","name":"k\"\\\/\u00e9\ud83d\ude00","pid":0,"tid":7,"ts":2.5e1,"dur":3E0,"args":{"device":0,"stream":7,"correlation":1,"x":[true,false,null,{"y":-0.5}]}})");
  const KinetoTrace k = read_kineto_text(b.json(), "t.json");
  REQUIRE(k.names.at(static_cast<std::size_t>(k.gpu.at(0).name)) == "k\"\\/\xc3\xa9\xf0\x9f\x98\x80");
  REQUIRE(k.gpu[0].ts == 25 * kUs);
  REQUIRE(k.gpu[0].dur == 3 * kUs);
  REQUIRE(cell(run(b), 0, SubOp::attention, Pass::F).busy == 3 * kUs);
  // A missing comma on the third line: "file:3:11: not a valid JSON trace".
  const std::string bad = "{\"traceEvents\":[\n{\"ph\":\"X\",\"ts\":1},\n{\"ph\":\"X\" \"ts\":2}]}";
  try {
    read_kineto_text(bad, "bad.json");
    FAIL("accepted");
  } catch (const InputError& e) {
    REQUIRE(e.loc().line == 3);
    REQUIRE(e.loc().col == 11);
    REQUIRE(std::string(e.what()).find("not a valid JSON trace") != std::string::npos);
  }
  REQUIRE_THROWS_AS(read_kineto_text("{\"traceEvents\":[tru]}", "x.json"), InputError);
  REQUIRE_THROWS_AS(read_kineto_text("{\"traceEvents\":[]} x", "x.json"), InputError);
}

TEST_CASE("a ROCm-shaped trace: hip launches, device 2 stream 0, RCCL on its own stream, backward thread", "[trace]") {
  Trace b;
  b.top += R"(,"baseTimeNanoseconds":"1735632360000000000")";
  auto hip = [&](const std::string& kname, double launch, double ts, double dur, int tid, int stream) {
    const long c = b.corr++;
    b.add(fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"hipLaunchKernel","pid":597913,"tid":{},"ts":{:.3f},"dur":5.5,"args":{{"correlation":{},"stream":"0x0"}}}})",
        tid, launch, c));
    b.add(fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"{}","pid":2,"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{"device":2,"stream":{},"correlation":{}}}}})",
        kname, stream, ts, dur, stream, c));
  };
  auto range = [&](const std::string& name, double ts, double dur, int tid, const std::string& cat,
                   const std::string& args) {
    b.add(fmt::format(
        R"({{"ph":"X","cat":"{}","name":"{}","pid":597913,"tid":{},"ts":{:.3f},"dur":{:.3f},"args":{{{}}}}})", cat,
        name, tid, ts, dur, args));
  };
  const double t0 = 4203669603018.756;
  range("layers.0.mlp", t0, 100, 597913, "user_annotation", "");
  range("aten::addmm", t0 + 10, 20, 597913, "cpu_op", R"("Sequence number":7,"Fwd thread id":0)");
  hip("Cijk_Alik_Bljk_SB_Bias_MT64x16x32", t0 + 12, t0 + 200, 17.6, 597913, 0);
  hip("ncclDevKernel_Generic", t0 + 50, t0 + 210, 30, 597913, 3);
  range("autograd::engine::evaluate_function: AddmmBackward0", t0 + 400, 30, 598009, "cpu_op",
        R"("Sequence number":7,"Fwd thread id":1)");
  hip("Cijk_Ailk_Bjlk_SB_MT64x16x16", t0 + 405, t0 + 500, 12.64, 598009, 0);
  const ImportResult r = run(b);
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::F).busy == 47600);  // 17.6 + 30 us
  REQUIRE(cell(r, 0, SubOp::mlp, Pass::I).busy == 12640);
  REQUIRE(r.by_forward == 12640);
  REQUIRE(r.comm_total == 30 * kUs);
  REQUIRE(r.devices.at(0).device == 2);
  REQUIRE(r.gpu_total == buckets(r));
}

// Issue 43's rules for traces of Hugging Face models (docs/TRACES.md "Attribution").

TEST_CASE("module classes by role, case-insensitively; a model file's name names no sub-op", "[trace]") {
  CHECK(module_role("Qwen2Attention_12") == SubOp::attention);
  CHECK(module_role("LlamaSdpaAttention") == SubOp::attention);
  CHECK(module_role("GPT2MLP_0") == SubOp::mlp);
  CHECK(module_role("MixtralSparseMoeBlock") == SubOp::mlp);
  CHECK(module_role("DeepseekV3MoE") == SubOp::mlp);
  CHECK(module_role("Qwen2MoeTopKRouter") == SubOp::mlp);
  CHECK(module_role("Qwen2RMSNorm") == SubOp::other);
  CHECK_FALSE(module_role("Qwen2MoeDecoderLayer_0").has_value());
  CHECK_FALSE(module_role("GPT2Block").has_value());
  CHECK_FALSE(module_role("Linear_3").has_value());
  const Rules rules({});
  const RangeMeaning h = rules.classify("transformer.h.3.attn.forward", RangeKind::user);  // GPT-2's path
  CHECK(h.layer == 3);
  CHECK(h.subop == SubOp::attention);
  CHECK(h.pass == Pass::F);
  // A frame by its function: the file (modeling_qwen2_moe.py) is every frame's of the model.
  CHECK_FALSE(rules.classify("transformers/models/qwen2_moe/modeling_qwen2_moe.py(120): forward", RangeKind::python)
                  .subop.has_value());
  CHECK(rules.classify("aten::scaled_dot_product_attention", RangeKind::op).subop == SubOp::attention);
  CHECK(rules.classify("layers.0.SelfAttention", RangeKind::user).subop == SubOp::attention);
  CHECK_FALSE(rules.classify("DropoutAddLayerNormFn", RangeKind::op).subop.has_value());  // DeepSeek's op

  // with_stack scopes of one Qwen2-MoE layer and one GPT-2 block (us): per layer, the attention
  // module's kernels are attention, the MoE block's mlp, the norms and the residual add other.
  Trace b;
  // A Python range (scope or frame) on thread 1: [ts, ts + dur) us.
  auto py = [&](const std::string& name, double ts, double dur) { b.range(name, ts, dur, 1, "python_function"); };
  const std::string file = "transformers/models/qwen2_moe/modeling_qwen2_moe.py";
  py("nn.Module: Qwen2MoeDecoderLayer_0", 0, 400);
  py(file + "(300): forward", 1, 398);
  py("nn.Module: Qwen2MoeRMSNorm_0", 10, 20);
  b.kernel("norm", 11, 1000, 3);
  py("nn.Module: Qwen2MoeAttention_0", 40, 60);
  py(file + "(120): forward", 41, 57);
  py("nn.Module: Linear_0", 45, 10);
  b.kernel("gemm_q", 46, 1010, 10);
  b.range("aten::scaled_dot_product_attention", 60, 10, 1, "cpu_op");
  b.kernel("flash", 61, 1020, 20);
  b.kernel("add", 110, 1040, 2);
  py("nn.Module: Qwen2MoeSparseMoeBlock_0", 200, 100);
  py(file + "(200): forward", 201, 98);
  py("nn.Module: Qwen2MoeTopKRouter_0", 205, 10);
  b.kernel("router", 206, 1050, 4);
  py("nn.Module: Qwen2MoeExperts_0", 220, 60);
  b.kernel("experts", 221, 1060, 30);
  // GPT-2's block: a norm, the attention, the MLP, one kernel each (1, 7, 9 us).
  py("nn.Module: GPT2Block_1", 500, 100);
  const char* gpt2[] = {"nn.Module: LayerNorm_1", "nn.Module: GPT2Attention_1", "nn.Module: GPT2MLP_1"};
  for (int k = 0; k < 3; ++k) {
    py(gpt2[k], 505 + 20 * k, 10);
    b.kernel(fmt::format("k{}", k), 506 + 20 * k, 1100 + 10 * k, k == 0 ? 1 : k == 1 ? 7 : 9);
  }
  const ImportResult r = run(b);
  CHECK(cell(r, 0, SubOp::attention, Pass::F).busy == 30 * kUs);  // q projection + SDPA
  CHECK(cell(r, 0, SubOp::mlp, Pass::F).busy == 34 * kUs);        // router + experts
  CHECK(cell(r, 0, SubOp::other, Pass::F).busy == 5 * kUs);       // norm + residual add
  CHECK(cell(r, 1, SubOp::attention, Pass::F).busy == 7 * kUs);
  CHECK(cell(r, 1, SubOp::mlp, Pass::F).busy == 9 * kUs);
  CHECK(cell(r, 1, SubOp::other, Pass::F).busy == 1 * kUs);
}

namespace {

// A forward in the user's ranges around attention and MLP only (module paths), as HF models run
// it: embedding, per layer [norm: pow, rsqrt] attention [add] [norm] MLP [add], then the final
// norm and the head. Kernel k at GPU time 1000 + 100 k (us); launches as given.
void two_layers_sub_ranges(Trace& b) {
  int k = 0;
  auto kern = [&](const std::string& name, double launch, double dur) {
    b.kernel(name, launch, 1000 + 100 * k++, dur);
  };
  b.range("aten::embedding", 0, 5, 1, "cpu_op");
  kern("emb", 1, 5);
  kern("pow", 10, 2);
  kern("rsqrt", 12, 1);
  for (int l = 0; l < 2; ++l) {
    const double t0 = 20 + 80 * l;
    b.range(fmt::format("model.layers.{}.self_attn.forward", l), t0, 20);
    kern("attn", t0 + 1, 10);
    kern("add", t0 + 25, 1);
    kern("pow", t0 + 27, 2);
    kern("rsqrt", t0 + 29, 1);
    b.range(fmt::format("model.layers.{}.mlp.forward", l), t0 + 40, 20);
    kern("mlp", t0 + 41, 20);
    kern("add", t0 + 65, 1);
    if (l == 0) b.op("aten::pow", 86.5, 1.5, 1, 7, false);  // layer 1's norm: a forward op of its own
    kern("pow", t0 + 67, 2);
    kern("rsqrt", t0 + 69, 1);
  }
  kern("gemm_head", 171, 30);
}

}  // namespace

TEST_CASE("a layer owns its norms and residual adds, and their backward, whichever ranges were drawn", "[trace]") {
  Trace b;
  two_layers_sub_ranges(b);
  // The backward of layer 1's norm (the pow op of sequence number 7) on autograd's thread.
  b.op("autograd::engine::evaluate_function: PowBackward0", 300, 10, 2, 7, true);
  b.kernel("pow_bwd", 301, 5000, 4, 2);
  const ImportResult r = run(b);
  // Each layer: norm 3 + attention 10 + add 1 + norm 3 + MLP 20 + add 1 = 38 us. The gap
  // between the layers (add, pow, rsqrt) splits where the work before layer 0 ends alike (its
  // norm: pow, rsqrt): the add closes layer 0, the norm opens layer 1; layer 1 closes with the
  // add after it, before the final norm (pow, rsqrt) and the head, which stay out of the layers.
  CHECK(r.layers == 2);
  for (int l = 0; l < 2; ++l) {
    CHECK(cell(r, l, SubOp::attention, Pass::F).busy == 10 * kUs);
    CHECK(cell(r, l, SubOp::mlp, Pass::F).busy == 20 * kUs);
    CHECK(cell(r, l, SubOp::other, Pass::F).busy == 8 * kUs);
    CHECK(cell(r, l, SubOp::other, Pass::F).executions == 1);
  }
  CHECK(r.unmapped == (5 + 3 + 30) * kUs);                   // embedding, final norm, head: no layer, no pass
  CHECK(cell(r, 1, SubOp::other, Pass::I).busy == 4 * kUs);  // through autograd's link to the pow op
  CHECK(r.profile.op.f == 38 * kUs);
  CHECK(r.gpu_total == buckets(r));
}

TEST_CASE("a forward re-run inside the backward is recompute: part of B, and the profile says so", "[trace]") {
  Trace b;
  b.range("model.layers.0.self_attn.forward", 0, 20);
  b.op("aten::linear", 1, 4, 1, 3, false);
  b.kernel("attn", 2, 1000, 10);
  // Reentrant checkpointing: the layer's forward again inside CheckpointFunctionBackward (its
  // range re-entered; a forward op with a sequence number), then the backward proper.
  b.op("autograd::engine::evaluate_function: CheckpointFunctionBackward", 100, 100, 2, 3, true);
  b.range("model.layers.0.self_attn.forward", 110, 40, 2);
  b.kernel("attn", 111, 1100, 10, 2);
  b.op("aten::mul", 160, 10, 2, 50, false);
  b.kernel("mul", 161, 1120, 2, 2);
  b.kernel("dgrad", 180, 1130, 5, 2);
  // Non-reentrant: a recompute stopped early leaves the MLP's range open (to the trace's end);
  // it ends with the autograd op it ran in, so the next op's kernel is the backward proper.
  b.op("autograd::engine::evaluate_function: MmBackward0", 300, 20, 2, 3, true);
  b.range("model.layers.0.mlp.forward", 305, 1000, 2);
  b.kernel("mlp", 306, 1200, 6, 2);
  b.op("autograd::engine::evaluate_function: AddmmBackward0", 400, 20, 2, 3, true);
  b.kernel("dgrad2", 401, 1300, 3, 2);
  const ImportResult r = run(b);
  CHECK(cell(r, 0, SubOp::attention, Pass::F).busy == 10 * kUs);
  CHECK(cell(r, 0, SubOp::attention, Pass::I).busy == 20 * kUs);  // recompute 10 + 2, backward 5 + 3
  CHECK(cell(r, 0, SubOp::attention, Pass::I).recompute == 12 * kUs);
  CHECK(cell(r, 0, SubOp::mlp, Pass::I).busy == 6 * kUs);  // all recompute: its layer's one execution
  CHECK(cell(r, 0, SubOp::mlp, Pass::I).executions == 1);
  CHECK(r.recompute == 18 * kUs);
  CHECK(r.recompute_per_layer == 18 * kUs);
  CHECK(r.profile.op.f == 10 * kUs);
  CHECK(r.profile.op.b == 26 * kUs);
  const std::string yaml = render_import_profile(r);
  CHECK(yaml.find("\nrecompute: included\n") != std::string::npos);
  CHECK(yaml.find("B holds 0.018 ms of forward re-run") != std::string::npos);
  CHECK(parse_profile(yaml, "p.yaml").recompute_included);
  CHECK(render_import_report(r).find("recompute: B holds 0.018 ms") != std::string::npos);
}

TEST_CASE("a step the host set: the GPU idle with nothing queued, and the kernels alone", "[trace]") {
  Trace b;
  b.range("layers.0.F", 0, 100);
  b.kernel("k1", 0, 5, 10);    // [5, 15)
  b.kernel("k2", 40, 45, 10);  // launched at 40, after k1 ended: the GPU idled [15, 45) for the host
  b.kernel("k3", 50, 60, 10);  // launched at 50, before k2 ended: queued; its gap [55, 60) is not the host's
  const ImportResult r = run(b);
  // Span [5, 70) = 65 us, of it idle with nothing queued 30 us (46%): 35 us without the host.
  REQUIRE(r.devices.size() == 1);
  CHECK(r.devices[0].host_idle == 30 * kUs);
  CHECK(host_bound_line(r) ==
        "host-bound: the GPU was idle 46% of the step with nothing queued (its next kernel not yet launched); the "
        "kernels alone take 0.035 ms of the 0.065 ms step");
  CHECK(render_import_report(r).find("\nhost-bound: the GPU was idle 46%") != std::string::npos);
  // Under 10% of the span: no line.
  Trace c;
  c.range("layers.0.F", 0, 100);
  c.kernel("k1", 0, 5, 100);
  c.kernel("k2", 104, 106, 100);  // idle 1 us of 201
  CHECK(host_bound_line(run(c)).empty());
}

TEST_CASE("a forward-only trace is refused as a training profile, or read with --inference", "[trace]") {
  Trace b;
  b.range("layers.0.attn.F", 0, 10);
  b.kernel("gemm", 1, 100, 30);
  const ImportResult r = run(b);
  CHECK(r.backward == 0);
  try {
    check_training(r, false, false);
    FAIL("no refusal");
  } catch (const InputError& e) {
    CHECK(e.exit_code() == kExitInput);
    CHECK(std::string(e.what()).find("the trace has no backward") != std::string::npos);
  }
  CHECK_NOTHROW(check_training(r, true, true));
  CHECK(render_import_profile(r, false, true).find("# forward only") != std::string::npos);
  // No numbered layer and no profile asked: the report says it, nothing is refused.
  Trace c;
  c.kernel("gemm", 1, 100, 30);
  CHECK_NOTHROW(check_training(run(c), false, false));
  CHECK(render_import_report(run(c)).find("no backward in the trace") != std::string::npos);
}
