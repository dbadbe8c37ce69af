// From config to SimCosts and physical results (src/cost/derive.cc): one slice per stage of a
// pipe for every layout, embedding and head on the right slices, the link, explicit times and
// measured profiles, recompute, and step time / tokens / MFU.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/derive.h"
#include "cost/flops.h"
#include "report/results.h"
#include "schedules/registry.h"
#include "sim/engine.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// b = 2, s = 32, h = 64: 2*32*64*2 = 8,192 bytes of activations per micro-batch between stages.
const char* kDense = R"(model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 50000, seq_len: 32, micro_batch_size: 2}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8}
)";

ModelConfig cfg_of(const std::string& text, const std::vector<std::string>& sets = {}) {
  return load_config_text(text, "t.yaml", sets);
}

}  // namespace

TEST_CASE("derive_costs gives Schedule::stages_per_pipe slices for every family", "[cost]") {
  const ModelConfig cfg = cfg_of(kDense);
  for (const Family& fam : families()) {
    INFO(fam.name);
    const Schedule s = make_schedule(fam.name, resolve_params(fam, ScheduleParams{4, 8, 0, 0}));
    const SimCosts c = derive_costs(cfg, s);
    CHECK(static_cast<int>(c.slice.size()) == s.stages_per_pipe);
    CHECK(c.scale.ticks_per_unit == 1'000'000);  // ms
    for (const SliceCosts& x : c.slice) {
      CHECK(x.f > 0);
      CHECK(x.w <= x.b);
      CHECK(x.fb == x.f + x.b);
      CHECK(x.act_bytes == 8'192);
      CHECK(x.grad_bytes == 8'192);
    }
  }
}

TEST_CASE("the embedding goes on the first slice and the head on the last", "[cost]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts c = derive_costs(cfg_of(kDense), s);
  CHECK(c.slice[1].f == c.slice[2].f);
  CHECK(c.slice[0].f > c.slice[1].f);  // + embedding
  CHECK(c.slice[3].f > c.slice[0].f);  // + head: a 64 x 50000 GEMM outweighs two layers
  const SimCosts bare = derive_costs(cfg_of(kDense, {"parallel.embedding_on_first=false", "parallel.head_on_last=false"}), s);
  CHECK(bare.slice[0].f == bare.slice[1].f);
  CHECK(bare.slice[3].f == bare.slice[1].f);
  // V-shape: 2P slices; the first and last both sit on rank 0.
  const Schedule v = make_schedule("zbv", ScheduleParams{4, 8, 0, 0});
  const SimCosts cv = derive_costs(cfg_of(kDense), v);
  REQUIRE(cv.slice.size() == 8);
  CHECK(cv.slice[7].f > cv.slice[3].f);
}

TEST_CASE("the P2P link: NVLink inside a node, the network across nodes", "[cost]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  // pp*tp*dp = 4 <= 8 GPUs per node: NVLink, 900 GB/s both ways = 450 one way, x 0.8 efficiency
  const SimCosts in = derive_costs(cfg_of(kDense), s);
  CHECK_THAT(in.link.bytes_per_tick, WithinRel(360.0, 1e-12));
  CHECK(in.link.latency == 1'000);  // 1 us
  // pp*tp*dp = 16 over nodes of 8: each pipeline rank spans dp = 4 GPUs, two ranks a node. Hops
  // inside a node on NVLink, the one between nodes on the network, 50 GB/s x 0.8, 5 us.
  const SimCosts out = derive_costs(cfg_of(kDense, {"parallel.dp=4"}), s);
  CHECK(out.rank_node == std::vector<int>{0, 0, 1, 1});
  CHECK_THAT(out.link.bytes_per_tick, WithinRel(360.0, 1e-12));
  CHECK_THAT(out.inter_node_link.bytes_per_tick, WithinRel(40.0, 1e-12));
  CHECK(out.inter_node_link.latency == 5'000);
  // dp = 8: a node per pipeline rank, every hop on the network.
  const SimCosts all = derive_costs(cfg_of(kDense, {"parallel.dp=8"}), s);
  CHECK(all.rank_node.empty());
  CHECK_THAT(all.link.bytes_per_tick, WithinRel(40.0, 1e-12));
  CHECK(all.link.latency == 5'000);
}

TEST_CASE("the weight grad pays efficiency.accum_exposed of the FP32 accumulation's traffic", "[cost]") {
  // kDense's layer (h 64, SwiGLU f 256, 4 heads of 16, no GQA) has 64 x 192 (QKV) + 64 x 64 (out)
  // + 2 x 64 x 256 (gate, up) + 256 x 64 (down) = 65,536 weights. Each micro-batch's W reads and
  // writes their FP32 main grad, 8 bytes each; the middle slices hold 2 layers, so exposing a
  // share e of that traffic adds e x 2 x 65,536 x 8 bytes at HBM x elementwise (h100 preset
  // 3350 GB/s x the default 0.7) to W and to B, and nothing to F.
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts hidden = derive_costs(cfg_of(kDense, {"hardware.efficiency.accum_exposed=0"}), s);
  const SimCosts half = derive_costs(cfg_of(kDense, {"hardware.efficiency.accum_exposed=0.5"}), s);
  const SimCosts full = derive_costs(cfg_of(kDense, {"hardware.efficiency.accum_exposed=1"}), s);
  const double per_layer_ns = 65'536 * 8 / (3350 * 0.7);
  for (int i : {1, 2}) {
    INFO("slice " << i);
    CHECK(std::abs(static_cast<double>(full.slice[i].w - hidden.slice[i].w) - 2 * per_layer_ns) <= 2);
    CHECK(std::abs(static_cast<double>(half.slice[i].w - hidden.slice[i].w) - per_layer_ns) <= 2);
    CHECK(std::abs((full.slice[i].b - hidden.slice[i].b) - (full.slice[i].w - hidden.slice[i].w)) <=
          1);  // each rounded
    CHECK(full.slice[i].f == hidden.slice[i].f);
  }
  // The default is the measured 0.65, for a named hardware as for every GPU type.
  CHECK(cfg_of(kDense).data->hardware.efficiency.accum_exposed == 0.65);
  // Out of range: one line naming the key.
  CHECK_THROWS_WITH(cfg_of(kDense, {"hardware.efficiency.accum_exposed=3"}), PPSIM_CONTAINS("accum_exposed"));
}

TEST_CASE("Megatron's 1F1B calls run to the end on a derived P=8 config (a call posted after a wait wakes its partner)", "[cost]") {
  // The Zero Bubble 1.5B layer's shapes on 8 H100 ranks, 24 micro-batches: a warm-up rank posts
  // its next receive when its send lands (try_start, woken by the landing), and the transfer that
  // starts must wake the sender waiting on it; a lost wake left rank 0 waiting on its third send
  // ("deadlock: rank 0 cannot start 0F3"). Every action runs, and the step is at least the
  // busiest rank's work.
  const char* cfg = R"(model: {layers: 16, hidden: 2304, ffn_hidden: 9216, heads: 24, vocab: 500, seq_len: 1024}
hardware: {name: h100}
parallel: {pp: 8, microbatches: 24, p2p_runtime: megatron}
)";
  const ModelConfig c = cfg_of(cfg);
  const Schedule s = make_schedule("1f1b", ScheduleParams{8, 24, 0, 0});
  const SimCosts costs = derive_costs(c, s);
  SimResult r;
  REQUIRE_NOTHROW(r = simulate(as_run(c, s), costs));
  Time busiest = 0;
  for (const SliceCosts& x : costs.slice) busiest = std::max(busiest, 24 * (x.f + x.b));
  CHECK(r.makespan() >= busiest);
}

TEST_CASE("parallel.p2p_sync_us: the restart after each of Megatron's calls", "[cost]") {
  // 120 us = 120,000 ticks of 1 ns; only with Megatron's calls (the dataflow runtime makes none).
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  CHECK(derive_costs(cfg_of(kDense, {"parallel.p2p_runtime=megatron", "parallel.p2p_sync_us=120"}), s).call_restart == 120'000);
  CHECK(derive_costs(cfg_of(kDense, {"parallel.p2p_runtime=megatron"}), s).call_restart == 0);
  CHECK_THROWS_WITH(cfg_of(kDense, {"parallel.p2p_sync_us=120"}), PPSIM_CONTAINS("p2p_runtime: megatron"));
}

TEST_CASE("parallel.p2p_eager_mb: sends up to this size do not wait for their receiver", "[cost]") {
  // 64 MB = 64e6 bytes (SimCosts::eager_bytes); 0 by default; a negative size is refused.
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  CHECK(derive_costs(cfg_of(kDense, {"parallel.p2p_runtime=deepspeed", "parallel.p2p_eager_mb=64"}), s).eager_bytes == 64'000'000);
  CHECK(derive_costs(cfg_of(kDense, {"parallel.p2p_eager_mb=0.5"}), s).eager_bytes == 500'000);
  CHECK(derive_costs(cfg_of(kDense, {}), s).eager_bytes == 0);
  CHECK_THROWS_AS(cfg_of(kDense, {"parallel.p2p_eager_mb=-1"}), InputError);
}

// Wide enough that every GEMM is compute-bound at FP8 (the two FP8 tests below).
const char* const wide = R"(model: {layers: 8, hidden: 4096, ffn_hidden: 16384, heads: 32, vocab: 32000, seq_len: 4096}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8}
)";

TEST_CASE("FP8 GEMMs run at efficiency.gemm_fp8 of the FP8 peak", "[cost]") {
  // Wide enough that every GEMM is compute-bound at FP8: T = 4096 tokens, h = 4096, SwiGLU
  // f = 16384, 32 heads of 128 (no GQA), so a layer's GEMMs take 4096 x (4096 x 12288 + 4096 x 4096
  // + 3 x 4096 x 16384) = 4096 x 268,435,456 multiply-adds forward. The h100 preset's FP8 peak is
  // 1979 TFLOP/s; with efficiency.gemm 0.7 and gemm_fp8 0.35 each GEMM takes twice as long, so
  // the middle slices' F (2 layers) grows by 2 x 2 x 4096 x 268,435,456 / (1979e3 x 0.7) ns and
  // nothing else in F moves (the attention core stays at the BF16 peak, the quantization kernels
  // at HBM). BF16 GEMMs keep efficiency.gemm. The figure itself, so at every shape (costs.gemm_shape off).
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts as_gemm = derive_costs(cfg_of(wide, {"costs.gemm_shape=false", "precision.gemm=fp8"}), s);
  const SimCosts half = derive_costs(
      cfg_of(wide, {"costs.gemm_shape=false", "precision.gemm=fp8", "hardware.efficiency.gemm_fp8=0.35"}), s);
  const double extra = 2.0 * 2 * 4096 * 268'435'456.0 / (1979e3 * 0.7);
  for (int k : {1, 2}) {
    INFO("slice " << k);
    CHECK(std::abs(static_cast<double>(half.slice[k].f - as_gemm.slice[k].f) - extra) <= 4);
    CHECK(half.slice[k].input_grad() > as_gemm.slice[k].input_grad());
    CHECK(half.slice[k].w > as_gemm.slice[k].w);
  }
  const SimCosts bf = derive_costs(cfg_of(wide), s);
  const SimCosts bf_set = derive_costs(cfg_of(wide, {"hardware.efficiency.gemm_fp8=0.35"}), s);
  CHECK(bf.slice[1].f == bf_set.slice[1].f);
  CHECK(bf.slice[1].b == bf_set.slice[1].b);
  // A named preset leaves it unset (FP8 at efficiency.gemm); the Hopper GPU types carry 0.52
  // (their gemm 0.65 x the FP8 / BF16 ratio measured on an H100), the A100 types none.
  CHECK(cfg_of(wide).data->hardware.efficiency.gemm_fp8 == 0);
  CHECK(cfg_of(wide, {"cluster.gpu=h800", "cluster.gpus=4"}).data->hardware.efficiency.gemm_fp8 == 0.52);
  CHECK(cfg_of(wide, {"cluster.gpu=a100-80gb", "cluster.gpus=4"}).data->hardware.efficiency.gemm_at(true) == 0.75);
  CHECK_THROWS_WITH(cfg_of(wide, {"hardware.efficiency.gemm_fp8=0"}), PPSIM_CONTAINS("gemm_fp8"));
}

TEST_CASE("FP8 weight-gradient GEMMs run at efficiency.gemm_fp8_wgrad of the FP8 peak", "[cost]") {
  // The wide layer of the test above: 4096 x 268,435,456 multiply-adds in its weight-gradient
  // GEMMs too, compute-bound at FP8. With gemm_fp8 0.7 and gemm_fp8_wgrad 0.35 each wgrad GEMM
  // takes twice as long as at 0.7: the middle slices' W (2 layers) grows by 2 x 2 x 4096 x
  // 268,435,456 / (1979e3 x 0.7) ns, and F and the input grad do not move. Unset, it follows
  // gemm_fp8; BF16 GEMMs never read it.
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts same = derive_costs(
      cfg_of(wide, {"costs.gemm_shape=false", "precision.gemm=fp8", "hardware.efficiency.gemm_fp8=0.7"}), s);
  const SimCosts half =
      derive_costs(cfg_of(wide, {"costs.gemm_shape=false", "precision.gemm=fp8", "hardware.efficiency.gemm_fp8=0.7",
                                 "hardware.efficiency.gemm_fp8_wgrad=0.35"}),
                   s);
  const double extra = 2.0 * 2 * 4096 * 268'435'456.0 / (1979e3 * 0.7);
  for (int k : {1, 2}) {
    INFO("slice " << k);
    CHECK(std::abs(static_cast<double>(half.slice[k].w - same.slice[k].w) - extra) <= 4);
    CHECK(half.slice[k].f == same.slice[k].f);
    CHECK(std::abs(static_cast<double>(half.slice[k].input_grad() - same.slice[k].input_grad())) <= 2);  // B - W, each rounded
  }
  const SimCosts at_fp8 =
      derive_costs(cfg_of(wide, {"costs.gemm_shape=false", "precision.gemm=fp8", "hardware.efficiency.gemm_fp8=0.7",
                                 "hardware.efficiency.gemm_fp8_wgrad=0.7"}),
                   s);
  CHECK(at_fp8.slice[1].w == same.slice[1].w);
  const SimCosts bf = derive_costs(cfg_of(wide), s);
  CHECK(derive_costs(cfg_of(wide, {"hardware.efficiency.gemm_fp8_wgrad=0.35"}), s).slice[1].w == bf.slice[1].w);
  // The Hopper types carry 0.40 (their gemm 0.65 x the FP8 / BF16 wgrad ratio measured on an
  // H100); the A100 types none (as gemm); a named preset none (as gemm_fp8).
  CHECK(cfg_of(wide, {"cluster.gpu=h800", "cluster.gpus=4"}).data->hardware.efficiency.wgrad_at(true) == 0.40);
  CHECK(cfg_of(wide, {"cluster.gpu=h800", "cluster.gpus=4"}).data->hardware.efficiency.wgrad_at(false) == 0.65);
  CHECK(cfg_of(wide, {"cluster.gpu=a100-80gb", "cluster.gpus=4"}).data->hardware.efficiency.wgrad_at(true) == 0.75);
  CHECK(cfg_of(wide, {"hardware.efficiency.gemm_fp8=0.5"}).data->hardware.efficiency.wgrad_at(true) == 0.5);
  CHECK_THROWS_WITH(cfg_of(wide, {"hardware.efficiency.gemm_fp8_wgrad=1.5"}), PPSIM_CONTAINS("gemm_fp8_wgrad"));
}

TEST_CASE("FP8 GEMMs pay their quantization kernels' traffic (costs.fp8_quant)", "[cost]") {
  // kDense's layer with FP8 GEMMs, T = 2 x 32 = 64 tokens. Distinct GEMM inputs: QKV's, the
  // projection's and the gate's (the up reads the same X) of width 64, the down's of width 256:
  // 448 x 64 elements. Output grads: QKV 192, projection 64, gate 256, up 256, down 64 wide:
  // 832 x 64 elements. Per layer the piece adds, at HBM x elementwise (3350 x 0.7 bytes/ns):
  //   F: each distinct input quantized, read 2 + write 1 bytes + a 4-byte scale per 128;
  //   I: each output grad read once and written as 1x128 and 128x1 tiles, 2 + 1 + 1 bytes;
  //   W: each cached FP8 input read and written again transposed, 1 + 1 bytes.
  // The middle slices hold 2 layers.
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts on = derive_costs(cfg_of(kDense, {"precision.gemm=fp8"}), s);
  const SimCosts off = derive_costs(cfg_of(kDense, {"precision.gemm=fp8", "costs.fp8_quant=false"}), s);
  const double bw = 3350 * 0.7;
  const double f = 2 * 448 * 64 * (3 + 4.0 / 128) / bw, i = 2 * 832 * 64 * 4.0 / bw, w = 2 * 448 * 64 * 2.0 / bw;
  for (int k : {1, 2}) {
    INFO("slice " << k);
    CHECK(std::abs(static_cast<double>(on.slice[k].f - off.slice[k].f) - f) <= 2);
    CHECK(std::abs(static_cast<double>(on.slice[k].input_grad() - off.slice[k].input_grad()) - i) <= 2);
    CHECK(std::abs(static_cast<double>(on.slice[k].w - off.slice[k].w) - w) <= 2);
  }
  // BF16 GEMMs quantize nothing.
  const SimCosts bf = derive_costs(cfg_of(kDense), s);
  const SimCosts bf_off = derive_costs(cfg_of(kDense, {"costs.fp8_quant=false"}), s);
  CHECK(bf.slice[1].f == bf_off.slice[1].f);
  CHECK(bf.slice[1].b == bf_off.slice[1].b);
}

TEST_CASE("w_hold: what a slice's W keeps over what its F keeps, the Zero Bubble paper's M_W / M_B", "[cost]") {
  // A GPT layer as the Zero Bubble paper counts it (GELU, dropout, no flash attention): M_B =
  // 34 sbh + 5 a s^2 b, M_W = 32 sbh, so M_W / M_B = 32 h / (34 h + 5 a s) per token. h = 64,
  // a = 4, s = 32: 2048 / (2176 + 640) = 8/11. The middle slices (layers only) have it; explicit
  // times keep 1 (all of a share held until the W).
  const char* gpt = R"(model: {layers: 8, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 50000, seq_len: 32, micro_batch_size: 2,
        mlp: gelu, dropout: true, flash_attention: false}
hardware: {name: h100}
parallel: {pp: 4, microbatches: 8}
)";
  const Schedule s = make_schedule("zb-h1", ScheduleParams{4, 8, 0, 0});
  const SimCosts c = derive_costs(cfg_of(gpt), s);
  CHECK_THAT(c.slice[1].w_hold, WithinRel(8.0 / 11, 1e-12));
  CHECK_THAT(c.slice[2].w_hold, WithinRel(8.0 / 11, 1e-12));
  const SimCosts t = derive_costs(cfg_of(gpt, {"times={F: 1, B: 2, W: 1}"}), s);
  CHECK(t.slice[1].w_hold == 1);
  CHECK(derive_costs(cfg_of(gpt, {"costs.w_hold=false"}), s).slice[1].w_hold == 1);
}

TEST_CASE("times: in the config replace the derivation like compare --times", "[cost]") {
  const ModelConfig cfg = cfg_of(kDense, {"times={F: 4, B: 8, W: 2}"});
  const SimCosts one = derive_costs(cfg, make_schedule("1f1b", ScheduleParams{4, 8, 0, 0}));
  CHECK(one.slice[0].f == ms(4));
  CHECK(one.slice[3].b == ms(8));
  CHECK(one.slice[0].w == ms(2));
  CHECK(one.slice[0].fb == ms(12));
  // Interleaved with v = 2: each chunk is half of a rank's share.
  const SimCosts two = derive_costs(cfg, make_schedule("interleaved-1f1b", ScheduleParams{4, 8, 2, 0}));
  REQUIRE(two.slice.size() == 8);
  CHECK(two.slice[5].f == ms(2));
  CHECK(derive_costs(cfg_of(kDense, {"times={F: 4, B: 8, FB: 10}"}), make_schedule("1f1b", ScheduleParams{4, 8, 0, 0}))
            .slice[0]
            .fb == ms(10));
}

TEST_CASE("a measured profile: per-layer times summed per slice", "[cost]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ppsim_cost_profile_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream p(dir / "prof.yaml");
    p << "version: 1\ndevice: test\nper_layer: true\nop_ms: {F: 1, B: 2, W: 0.5}\nembedding_ms: {F: 0.25, B: 0.5, W: 0.25}\n"
         "head_ms: {F: 3, B: 6, W: 3}\nlink: {gbps: 10, latency_us: 2}\n";
    std::ofstream c(dir / "cfg.yaml");
    c << kDense << "profile: prof.yaml\n";
  }
  const ModelConfig cfg = load_config((dir / "cfg.yaml").string(), {});
  const SimCosts c = derive_costs(cfg, make_schedule("1f1b", ScheduleParams{4, 8, 0, 0}));
  // 2 layers per slice: F = 2 x 1 ms; slice 0 + embedding 0.25 ms; slice 3 + head 3 ms.
  CHECK(c.slice[1].f == ms(2));
  CHECK(c.slice[1].b == ms(4));
  CHECK(c.slice[1].w == ms(1));
  CHECK(c.slice[0].f == us(2'250));
  CHECK(c.slice[3].f == ms(5));
  CHECK(c.link.bytes_per_tick == 10.0);
  CHECK(c.link.latency == us(2));
  // A broken profile points into the profile file; a missing one at the config's key.
  {
    std::ofstream p(dir / "bad.yaml");
    p << "version: 1\nop_ms: {F: 1, B: x}\n";
    std::ofstream c(dir / "cfg_bad.yaml");
    c << kDense << "profile: bad.yaml\n";
    std::ofstream m(dir / "cfg_missing.yaml");
    m << kDense << "profile: nothing.yaml\n";
  }
  try {
    (void)load_config((dir / "cfg_bad.yaml").string(), {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.one_line() == (dir / "bad.yaml").string() + ":2:18: op_ms.B must be a number, got 'x'");
  }
  try {
    (void)load_config((dir / "cfg_missing.yaml").string(), {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.one_line() == (dir / "cfg_missing.yaml").string() + ":4:10: cannot read '" + (dir / "nothing.yaml").string() + "'");
    CHECK(e.exit_code() == kExitIo);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("recompute adds the forward to the backward", "[cost]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimCosts none = derive_costs(cfg_of(kDense), s);
  const SimCosts full = derive_costs(cfg_of(kDense, {"parallel.recompute=full"}), s);
  // A middle slice has only layers: B grows by exactly its F (to the ns, after rounding).
  CHECK(std::llabs(full.slice[1].b - none.slice[1].b - none.slice[1].f) <= 1);
  CHECK(full.slice[1].w == none.slice[1].w);
  // Selective with flash attention recomputes nothing extra; without flash it re-runs the core.
  CHECK(derive_costs(cfg_of(kDense, {"parallel.recompute=selective"}), s).slice[1].b == none.slice[1].b);
  const SimCosts nf = derive_costs(cfg_of(kDense, {"model.flash_attention=false"}), s);
  const SimCosts nfs = derive_costs(cfg_of(kDense, {"model.flash_attention=false", "parallel.recompute=selective"}), s);
  CHECK(nfs.slice[1].b > nf.slice[1].b);
}

TEST_CASE("physical result: step time, tokens per second, MFU, memory per rank", "[cost]") {
  const ModelConfig cfg = cfg_of(kDense, {"parallel.dp=2"});
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 8, 0, 0});
  const SimResult r = simulate(s, derive_costs(cfg, s));
  const PhysicalResult p = physical_result(cfg, s, r);
  REQUIRE(p.available);
  const double step = static_cast<double>(r.makespan()) / 1e9;
  CHECK_THAT(p.step_time_s, WithinRel(step, 1e-12));
  // tokens = M b s dp = 8 * 2 * 32 * 2 = 1024
  CHECK_THAT(p.tokens_per_second, WithinRel(1024.0 / step, 1e-12));
  // MFU = model FLOPs per micro-batch * M * dp / (pp*tp*dp GPUs * 989e12 * step)
  CHECK_THAT(p.mfu, WithinRel(model_flops_per_microbatch(*cfg.data) * 8 * 2 / (8 * 989e12 * step), 1e-12));
  REQUIRE(p.peak_memory_bytes.size() == 4);
  for (double m : p.peak_memory_bytes) CHECK(m > 0);
}

TEST_CASE("MoE figures: attention, experts and all-to-all apart, for the overlap model", "[cost]") {
  const ModelConfigData c = parse_config(R"(model: {layers: 4, hidden: 1024, heads: 8, vocab: 32000, seq_len: 1024,
        moe: {experts: 64, top_k: 8, expert_ffn_hidden: 512}}
hardware: {name: h800, comm_sms: 20}
parallel: {pp: 2, ep: 16, dp: 16, microbatches: 4}
)", "t.yaml", "", {});
  const CostFigures f = cost_figures(c, 2);
  REQUIRE(f.slices.size() == 2);
  const LayerFigures& l = f.slices[0].layers[0];
  CHECK(l.moe);
  // dispatch = T k h bytes (ep-1)/ep = 1024 * 8 * 1024 * 2 * 15/16 = 15,728,640
  CHECK(l.dispatch_bytes == 15'728'640.0);
  CHECK(l.combine_bytes == 15'728'640.0);
  // ep = 16 at stride tp = 1 over 8-GPU nodes: 8 per node, (16-8)/(16-1) of the bytes cross.
  CHECK_THAT(l.inter_node_fraction, WithinRel(8.0 / 15.0, 1e-12));
  // Network: 15,728,640 * 8/15 bytes at 50 GB/s * 0.8 = 40 bytes/ns, + 5 us latency; NVLink
  // (400/2 * 0.8 = 160 bytes/ns) carries the rest at the same time and is faster.
  CHECK_THAT(l.dispatch_ns, WithinRel(15'728'640.0 * 8 / 15 / 40 + 5'000, 1e-12));
  CHECK(l.attention.f > 0);
  CHECK(l.mlp.w > 0);
  CHECK_THAT(l.serial().f, WithinRel(l.attention.f + l.mlp.f + l.dispatch_ns + l.combine_ns, 1e-12));
  CHECK_THAT(f.compute_sm_fraction, WithinRel(112.0 / 132.0, 1e-12));
}

TEST_CASE("cost_summary: per-slice times and memory parts as JSON", "[cost]") {
  const ModelConfig cfg = cfg_of(kDense);
  const Schedule s = make_schedule("zbv", ScheduleParams{4, 8, 0, 0});
  const SimCosts costs = derive_costs(cfg, s);
  const SimResult r = simulate(s, costs);
  const nlohmann::json j = cost_summary(cfg, s, &r);
  REQUIRE(j["slices"].size() == 8);
  CHECK(j["slices"][0]["F_ms"].get<double>() == costs.slice[0].f / 1e6);
  REQUIRE(j["memory_per_rank_bytes"].size() == 4);
  const PhysicalResult p = physical_result(cfg, s, r);
  CHECK(j["memory_per_rank_bytes"][2]["total"].get<double>() == p.peak_memory_bytes[2]);
  // The results JSON carries the same parts per rank, summing to the total.
  const nlohmann::json row = result_to_json(ResultRow{compute_metrics(s, r, costs, nullptr, ScheduleParams{}), p}, costs.scale);
  const nlohmann::json& b = row["peak_memory_bytes"]["breakdown"][2];
  double sum = 0;
  for (const char* k : {"weights", "gradients", "optimizer", "ema", "activations", "comm_buffers", "workspace"}) sum += b[k].get<double>();
  CHECK_THAT(sum, WithinRel(p.peak_memory_bytes[2], 1e-12));
  CHECK(b["total"].get<double>() == p.peak_memory_bytes[2]);
  CHECK(!b["peak_op"].get<std::string>().empty());
}

TEST_CASE("hardware.clock: a busier step runs at a lower clock, at the duty's fixed point", "[cost]") {
  // Explicit times, one rank's share: F 1 ms, B 2 ms per micro-batch.
  const std::string base = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 32}
hardware: {name: h100}
times: {F: 1, B: 2}
)";
  auto makespan = [&](const std::string& parallel, const std::string& family, const std::vector<std::string>& sets) {
    const ModelConfig cfg = cfg_of(base + parallel, sets);
    int pp = 0, m = 0, v = 1;
    apply_config_parallel(cfg, pp, m, v);
    const Schedule s = make_schedule(family, resolve_params(find_family(family), ScheduleParams{pp, m, 0, 0}));
    SimCosts costs = derive_costs(cfg, s);
    return static_cast<double>(simulate_config(cfg, s, costs).makespan());
  };
  const std::vector<std::string> on = {"hardware.clock.duty_slope=0.5", "hardware.clock.duty_ref=0.8"};
  // One rank, two micro-batches: busy the whole 6 ms step (duty 1), so every op takes
  // 1 + 0.5 (1 - 0.8) = 1.1 times as long: 6.6 ms.
  const std::string one = "parallel: {pp: 1, microbatches: 2}\n";
  CHECK(makespan(one, "1f1b", {}) == 6e6);
  CHECK(makespan(one, "1f1b", on) == 6.6e6);
  // duty_ref 1: never above it, nothing changes; slope 1 from duty_ref 0.5: 1.5 times.
  CHECK(makespan(one, "1f1b", {"hardware.clock.duty_slope=0.5", "hardware.clock.duty_ref=1"}) == 6e6);
  CHECK(makespan(one, "1f1b", {"hardware.clock.duty_slope=1", "hardware.clock.duty_ref=0.5"}) == 9e6);
  // GPipe on two ranks, one micro-batch: each rank busy 3 of the 6 ms (and the links' latency):
  // duty 0.5 is below 0.8, so the step is the same.
  const std::string two = "parallel: {pp: 2, microbatches: 1}\n";
  CHECK(makespan(two, "gpipe", on) == makespan(two, "gpipe", {}));
  // The fixed point, where links keep their time: the same GPipe step with a 1 ms link latency
  // and slope 1 from duty 0. Each rank computes 3 f ms of a 6 f + 2 L ms step (L: one hop), so
  // f = 1 + 3 f / (6 f + 2 L): 6 f^2 + (2 L - 9) f - 2 L = 0. One rescaling from the base duty
  // alone (f1 = 1 + 3 / (6 + 2 L)) gives a shorter step than the fixed point.
  const std::vector<std::string> slow = {"hardware.nvlink_latency_us=1000"};
  const double L = (makespan(two, "gpipe", slow) - 6e6) / 2e6;  // ms
  REQUIRE(L > 0.99);
  const double f = ((9 - 2 * L) + std::sqrt((2 * L - 9) * (2 * L - 9) + 48 * L)) / 12;
  const double f1 = 1 + 3 / (6 + 2 * L);
  CHECK(f > f1 + 0.02);  // about 1.404 against 1.375
  const double hot = makespan(two, "gpipe", {"hardware.nvlink_latency_us=1000", "hardware.clock.duty_slope=1",
                                             "hardware.clock.duty_ref=0"});
  CHECK_THAT(hot, WithinRel((6 * f + 2 * L) * 1e6, 1e-4));
  // A bad figure is one located error.
  CHECK_THROWS_WITH(cfg_of(base + one, {"hardware.clock.duty_ref=2"}), PPSIM_CONTAINS("duty_ref"));
}

TEST_CASE("PyTorch's split backward: a W apart from its I copies each weight's output gradient once more", "[cost]") {
  // stage_backward_weight sums each parameter group's saved gradient with Python's sum() (0 + g):
  // one read and one write of it, bf16. T = 2 x 32 = 64 tokens; per layer the GEMMs' outputs
  // QKV 3 x 64 + O 64 + gate 256 + up 256 + down 64 = 832 wide, and the two norms' 2 x 64: 960
  // elements per token, 61,440 per layer; two layers a slice (pp 2, 1F1B): 122,880 elements,
  // 4 bytes each = 491,520 bytes at 1000 GB/s x 0.5 = 500 bytes/ns: 983.04 ns.
  const char* yaml = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, kv_heads: 4, head_dim: 16, vocab: 1000,
  seq_len: 32, micro_batch_size: 2, mlp: swiglu, norm: rmsnorm}
hardware: {name: h100, hbm_gbps: 1000, efficiency: {elementwise: 0.5}}
parallel: {pp: 2, microbatches: 4, p2p_runtime: torch, embedding_on_first: false, head_on_last: false}
)";
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const SimCosts torch = derive_costs(cfg_of(yaml), s);
  REQUIRE(torch.slice.size() == 2);
  const SliceCosts& x = torch.slice[1];  // the first stage's W runs a full backward (below)
  CHECK(x.w_apart == 983);
  CHECK(op_duration(x, OpKind::W) == x.w + 983);  // a W action pays it
  CHECK(op_duration(x, OpKind::B) == x.b);        // a full backward does not
  CHECK(op_duration(x, OpKind::I) == x.b - x.w);  // nor the I before its W
  // Any other runtime: none.
  const SimCosts mega = derive_costs(cfg_of(yaml, {"parallel.p2p_runtime=megatron"}), s);
  CHECK(mega.slice[1].w_apart == 0);
  CHECK(mega.slice[1].w == torch.slice[1].w);
  // On the last slice the head's vocab GEMM and final norm (T x 1000 + T x 64 = 68,096 elements):
  // 272,384 bytes more, 544.768 ns.
  const SimCosts ends = derive_costs(cfg_of(yaml, {"parallel.embedding_on_first=true", "parallel.head_on_last=true"}), s);
  CHECK(ends.slice[1].w_apart == 983 + 545);  // 1527.808 ns

  // Simulated: ZBV (every backward split) holds four slices of one layer, 245,760 bytes: 491.52 ns,
  // on every slice but the first. Rank 1 (slices 1 and 2) runs 2 x 4 W actions that pay it, rank 0
  // (slices 0 and 3) the 4 of slice 3: 8 and 4 x 492 ticks more than with the copy left out; 1F1B
  // (full backwards only) takes exactly as long as without it.
  const Schedule zbv = make_schedule("zbv", ScheduleParams{2, 4, 0, 0});
  SimCosts with = derive_costs(cfg_of(yaml), zbv), without = with;
  REQUIRE(with.slice.size() == 4);
  CHECK(with.slice[0].w_apart == 0);
  CHECK(with.slice[1].w_apart == 492);
  for (SliceCosts& y : without.slice) y.w_apart = 0;
  const SimResult a = simulate(zbv, with), b = simulate(zbv, without);
  for (int r = 0; r < 2; ++r) {
    int ws = 0;
    for (const Action& y : zbv.ranks[static_cast<std::size_t>(r)])
      for (int i = 0; i < y.size(); ++i) ws += y.op(i).kind == OpKind::W;
    CHECK(ws == 8);
    CHECK(a.ranks[static_cast<std::size_t>(r)].busy - b.ranks[static_cast<std::size_t>(r)].busy == (r == 0 ? 4 : 8) * 492);
  }
  SimCosts full = torch;
  for (SliceCosts& y : full.slice) y.w_apart = 0;
  CHECK(simulate(s, torch).makespan() == simulate(s, full).makespan());
}

TEST_CASE("PyTorch's split backward: the first stage's I computes nothing, its W the whole backward", "[cost]") {
  // stage.py: backward_one_chunk(full_backward=False) skips the input backward on the first stage
  // (its inputs need no gradient) and backward_weight_one_chunk runs the full backward there, which
  // sums no saved gradient. Slice 0 under torch: I = b - w = 0, W = b; every other slice and every
  // other runtime keep the derived weight-grad share.
  const char* yaml = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, kv_heads: 4, head_dim: 16, vocab: 1000,
  seq_len: 32, micro_batch_size: 2, mlp: swiglu, norm: rmsnorm}
hardware: {name: h100, hbm_gbps: 1000, efficiency: {elementwise: 0.5}}
parallel: {pp: 2, microbatches: 4, p2p_runtime: torch}
)";
  const Schedule zbv = make_schedule("zbv", ScheduleParams{2, 4, 0, 0});
  const SimCosts torch = derive_costs(cfg_of(yaml), zbv);
  const SimCosts mega = derive_costs(cfg_of(yaml, {"parallel.p2p_runtime=megatron"}), zbv);
  REQUIRE(torch.slice.size() == 4);
  const SliceCosts& first = torch.slice[0];
  CHECK(first.b == mega.slice[0].b);  // the same backward, split differently
  CHECK(mega.slice[0].w > 0);
  CHECK(mega.slice[0].w < mega.slice[0].b);
  CHECK(op_duration(first, OpKind::I) == 0);
  CHECK(op_duration(first, OpKind::W) == first.b);
  CHECK(op_duration(first, OpKind::B) == first.b);
  CHECK(first.w_hold == 1.0);  // the whole graph waits for the W
  for (std::size_t i = 1; i < 4; ++i) {
    CHECK(torch.slice[i].w == mega.slice[i].w);
    CHECK(op_duration(torch.slice[i], OpKind::I) == mega.slice[i].b - mega.slice[i].w);
  }
  // Simulated: rank 0's busy time is the same (I + W = b either way); its I actions end where
  // they start.
  const SimOptions rec{.record_timeline = true};
  const SimResult r = simulate(zbv, torch, rec);
  int zero = 0;
  for (const Interval& iv : r.timeline.intervals)
    if (iv.rank == 0 && iv.stream == Stream::Compute && iv.op_index < 0 && iv.duration() == 0) ++zero;
  CHECK(zero == 4);  // the four I of slice 0 (rank 0 runs slices 0 and 3)
}
