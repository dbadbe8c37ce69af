// The cost pieces of issue 31, each derived by hand: GPU types (cluster.gpu), the TP collectives'
// switch and overlap, the DP gradient reduction / parameter all-gather, the optimizer step, and
// physical_result adding them to the step.
#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "catch.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "cost/derive.h"
#include "cost/layer_split.h"
#include "cost/memory.h"
#include "cost/step_costs.h"
#include "schedules/registry.h"
#include "sim/engine.h"

using namespace ppsim;
using Catch::Matchers::WithinRel;

namespace {

// h = 64, a = 4 (d = 16, MHA), f = 256 SwiGLU, RMSNorm (h parameters), V = 1000, 4 layers.
// One layer: attention 4h^2 = 16,384; norms 2h = 128; SwiGLU 3hf = 49,152: 65,664 parameters.
// pp 2 (1F1B: 2 slices of 2 layers): rank 0 holds 2 layers + the embedding (Vh = 64,000):
// 195,328; rank 1 two layers + the head (Vh + h = 64,064): 195,392.
const char* kModel = R"(model: {layers: 4, hidden: 64, ffn_hidden: 256, heads: 4, vocab: 1000, seq_len: 128}
cluster: {gpu: a100-80gb, gpus: 8}
parallel: {pp: 2, dp: 4, microbatches: 4}
)";

const ModelConfigData& data_of(const ModelConfig& c) { return *c.data; }

}  // namespace

TEST_CASE("cluster.gpu fills the datasheet figures and the type's one efficiency set", "[cost][fidelity]") {
  const ModelConfig cfg = load_config_text(kModel, "t.yaml", {});
  const HardwareSpec& h = data_of(cfg).hardware;
  CHECK(data_of(cfg).gpu_type == "a100-80gb");
  CHECK(h.peak_bf16_tflops == 312);
  CHECK(h.hbm_gbps == 2039);
  CHECK(h.hbm_gb == 81920 * 1048576.0 / 1e9);  // the A100 80GB as the driver reports it: 81,920 MiB
  CHECK(h.nvlink_gbps == 600);
  CHECK(h.network_gbps == 25);
  CHECK(h.efficiency.gemm == 0.75);
  CHECK(h.efficiency.elementwise == 0.8);
  CHECK(h.efficiency.comm == 0.75);
  // Spellings: case, separators and an SXM suffix are ignored; the 40 GB part differs in HBM.
  const ModelConfig a40 = load_config_text(kModel, "t.yaml", {"cluster.gpu=A100 40GB SXM4"});
  CHECK(data_of(a40).hardware.hbm_gbps == 1555);
  CHECK(data_of(a40).hardware.hbm_gb == 40960 * 1048576.0 / 1e9);
  const ModelConfig h800 = load_config_text(kModel, "t.yaml", {"cluster.gpu=H800"});
  CHECK(data_of(h800).hardware.nvlink_gbps == 400);
  CHECK(data_of(h800).hardware.peak_fp8_tflops == 1979);
  // An explicit hardware figure still wins over the type's.
  const ModelConfig over = load_config_text(kModel, "t.yaml", {"hardware.network_gbps=6.25"});
  CHECK(data_of(over).hardware.network_gbps == 6.25);
  // "a100" alone is ambiguous: an error naming the types, at the key.
  try {
    load_config_text(kModel, "t.yaml", {"cluster.gpu=a100"});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.message().find("is not a GPU type") != std::string::npos);
    CHECK(e.message().find("a100-40gb, a100-80gb") != std::string::npos);
    CHECK(e.loc().file == "--set");
  }
}

TEST_CASE("DP collectives and the optimizer step, counted by hand", "[cost][fidelity]") {
  const ModelConfig cfg = load_config_text(kModel, "t.yaml", {});
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const StepCosts sc = step_costs(data_of(cfg), s);
  REQUIRE(sc.ranks.size() == 2);
  CHECK(sc.ranks[0].dense_params == 195328);
  CHECK(sc.ranks[1].dense_params == 195392);
  CHECK(sc.ranks[1].expert_params == 0);
  // ZeRO 0: all-reduce of fp32 gradients, 2 (n-1)/n G 4 bytes, n = dp = 4: 6 G.
  CHECK_THAT(sc.ranks[1].dp_bytes, WithinRel(6.0 * 195392, 1e-12));
  // tp * dp = 4 <= 8: NVLink, 600/2 GB/s x 0.75 = 225 bytes/ns, one all-reduce, 1 us latency.
  CHECK_THAT(sc.ranks[1].dp_ns, WithinRel(6.0 * 195392 / 225 + 1000, 1e-12));
  // Nothing switched on: nothing added.
  CHECK(sc.added_ns == 0);
  // Adam on every parameter (ZeRO 0): 2x4 (grad read twice) + 8 (fp32 master) + 4x4 (moments
  // read and written) + 2 (bf16 weights written) = 34 bytes, at 2039 x 0.8 GB/s.
  CHECK_THAT(sc.ranks[1].optimizer_ns, WithinRel(34.0 * 195392 / (2039 * 0.8), 1e-12));

  // ZeRO 1 (distributed optimizer): reduce-scatter fp32 grads + all-gather bf16 params:
  // (4 + 2) x 3/4 G; two collectives; Adam on G/4.
  const ModelConfig z1 = load_config_text(kModel, "t.yaml", {"parallel.zero=1", "costs.dp_comm=true", "costs.dp_overlap=0.25",
                                                             "costs.optimizer_step=true"});
  const StepCosts sz = step_costs(data_of(z1), s);
  CHECK_THAT(sz.ranks[1].dp_bytes, WithinRel(4.5 * 195392, 1e-12));
  CHECK_THAT(sz.ranks[1].dp_ns, WithinRel(4.5 * 195392 / 225 + 2000, 1e-12));
  CHECK_THAT(sz.ranks[1].dp_exposed_ns, WithinRel(0.75 * (4.5 * 195392 / 225 + 2000), 1e-12));
  CHECK_THAT(sz.ranks[1].optimizer_ns, WithinRel(34.0 * 195392 / 4 / (2039 * 0.8), 1e-12));
  // Rank 1 holds the most: it decides.
  CHECK(sz.worst_rank == 1);
  CHECK_THAT(sz.added_ns, WithinRel(sz.ranks[1].dp_exposed_ns + sz.ranks[1].optimizer_ns, 1e-12));

  // DP over 16 ranks of tp 1 does not fit a node of 8: the network, 5 us. NCCL's rings leave a node
  // through as many NICs as the group has GPUs there: 8 x 25 GB/s = 200 (under NVLink's 300 one
  // way), x 0.75.
  const ModelConfig wide = load_config_text(kModel, "t.yaml", {"cluster.gpus=32", "parallel.dp=16"});
  const StepCosts sw = step_costs(data_of(wide), s);
  CHECK_THAT(sw.ranks[1].dp_ns, WithinRel(2.0 * 4 * 15.0 / 16 * 195392 / (200 * 0.75) + 5000, 1e-12));
  // TP 4: two of the group in a node of 8, two NICs (50 GB/s); in a node of 4, one: its own NIC
  // (25 GB/s). The ranks hold a quarter of the weights.
  const ModelConfig tp4 = load_config_text(kModel, "t.yaml", {"cluster.gpus=128", "parallel.dp=16", "parallel.tp=4"});
  const ModelConfig tp4n4 = load_config_text(
      kModel, "t.yaml", {"cluster.gpus=128", "parallel.dp=16", "parallel.tp=4", "hardware.gpus_per_node=4"});
  const StepCosts s4 = step_costs(data_of(tp4), s), s1 = step_costs(data_of(tp4n4), s);
  CHECK_THAT(s4.ranks[1].dp_ns, WithinRel(s4.ranks[1].dp_bytes / (50 * 0.75) + 5000, 1e-12));
  CHECK_THAT(s1.ranks[1].dp_ns, WithinRel(s1.ranks[1].dp_bytes / (25 * 0.75) + 5000, 1e-12));
  CHECK_THAT(s4.ranks[1].dp_bytes, WithinRel(2.0 * 4 * 15.0 / 16 * s4.ranks[1].dense_params, 1e-12));
}

TEST_CASE("context parallelism: the cp ranks join the gradient reduction and the ZeRO shards", "[cost][fidelity]") {
  // The cp ranks of one replica hold the same weights (Megatron-LM's data-parallel group with
  // context parallelism; torchtitan's fsdp mesh dimension dp_shard x cp): dp 2 x cp 2 reduce
  // and shard over 4 ranks, as dp 4 does; dp 2 alone over 2.
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const ModelConfig cp = load_config_text(kModel, "t.yaml", {"parallel.dp=2", "parallel.cp=2", "parallel.zero=1"});
  const ModelConfig dp = load_config_text(kModel, "t.yaml", {"cluster.gpus=4", "parallel.dp=2", "parallel.zero=1"});
  CHECK(data_of(cp).parallel.grad_dp() == 4);
  const StepCosts a = step_costs(data_of(cp), s), b = step_costs(data_of(dp), s);
  // ZeRO 1: (4 + 2) bytes x (n-1)/n of G: n = 4 gives 4.5 G, n = 2 gives 3 G; tp cp dp = 4 fit
  // a node: NVLink at 225 bytes/ns, two collectives of 1 us.
  CHECK_THAT(a.ranks[1].dp_bytes, WithinRel(4.5 * 195392, 1e-12));
  CHECK_THAT(b.ranks[1].dp_bytes, WithinRel(3.0 * 195392, 1e-12));
  CHECK_THAT(a.ranks[1].dp_ns, WithinRel(4.5 * 195392 / 225 + 2000, 1e-12));
  // Adam on G / 4 and G / 2.
  CHECK_THAT(a.ranks[1].optimizer_ns, WithinRel(34.0 * 195392 / 4 / (2039 * 0.8), 1e-12));
  CHECK_THAT(b.ranks[1].optimizer_ns, WithinRel(34.0 * 195392 / 2 / (2039 * 0.8), 1e-12));
  // The optimizer states (12 bytes a parameter, ZeRO 1) shard over 4; weights and grads do not.
  const auto mem = [&](const ModelConfig& c) {
    return rank_memory(data_of(c), s.stage_rank, s.slice, slice_layouts(data_of(c), s.stages_per_pipe), {2, 1});
  };
  const std::vector<RankMemory> ma = mem(cp), mb = mem(dp);
  CHECK_THAT(ma[1].optimizer, WithinRel(12.0 * 195392 / 4, 1e-12));
  CHECK_THAT(mb[1].optimizer, WithinRel(12.0 * 195392 / 2, 1e-12));
  CHECK_THAT(ma[1].weights, WithinRel(2.0 * 195392, 1e-12));
}

TEST_CASE("physical_result adds the switched-on step pieces to the makespan", "[cost][fidelity]") {
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const ModelConfig off = load_config_text(kModel, "t.yaml", {});
  const ModelConfig on = load_config_text(kModel, "t.yaml", {"costs.dp_comm=true", "costs.optimizer_step=true"});
  const SimResult r = simulate(s, derive_costs(off, s));
  const SimResult r2 = simulate(s, derive_costs(on, s));
  CHECK(r.makespan() == r2.makespan());  // the pipeline itself is unchanged
  const PhysicalResult p = physical_result(off, s, r);
  const PhysicalResult p2 = physical_result(on, s, r2);
  const StepCosts sc = step_costs(data_of(on), s);
  CHECK_THAT(p2.step_time_s, WithinRel(p.step_time_s + (sc.ranks[1].dp_ns + sc.ranks[1].optimizer_ns) / 1e9, 1e-12));
  CHECK_THAT(p2.tokens_per_second, WithinRel(p.tokens_per_second * p.step_time_s / p2.step_time_s, 1e-12));
}

TEST_CASE("post-validation: the step period is the longest rank's own span plus its step pieces", "[cost][fidelity]") {
  // Zero Bubble's optimizer post-validation: each rank steps when its own work ends. GPipe at P 2,
  // M 2 with equal slices F, B (no W): rank 0 runs F0 F1 [0, 2F] then waits for B1 from rank 1;
  // rank 1 starts at F (F0 arrives, no link time on one node: latency only). The period is
  // max over ranks of (last end - first start + DP + optimizer), below the makespan.
  const Schedule s = make_schedule("gpipe", ScheduleParams{2, 2, 0, 0});
  const ModelConfig g = load_config_text(kModel, "t.yaml", {"costs.dp_comm=true", "costs.optimizer_step=true"});
  const ModelConfig pv = load_config_text(kModel, "t.yaml",
                                          {"costs.dp_comm=true", "costs.optimizer_step=true", "parallel.post_validation=true"});
  const SimResult r = simulate(s, derive_costs(g, s));
  const StepCosts sc = step_costs(data_of(g), s);
  double period = 0;
  for (std::size_t q = 0; q < 2; ++q)
    period = std::max(period, static_cast<double>(r.ranks[q].last_end - r.ranks[q].first_start) +
                                  sc.ranks[q].dp_ns + sc.ranks[q].optimizer_ns);
  const PhysicalResult global = physical_result(g, s, r);
  const PhysicalResult bypass = physical_result(pv, s, r);
  CHECK_THAT(bypass.step_time_s, WithinRel(period / 1e9, 1e-12));
  // Rank 1 starts one F after rank 0 and ends before it: its span is shorter, so rank 0 decides;
  // without post-validation the whole makespan is followed by the worst rank's pieces.
  CHECK(r.ranks[1].first_start > r.ranks[0].first_start);
  CHECK(r.ranks[1].last_end - r.ranks[1].first_start < r.makespan());
  CHECK(bypass.step_time_s <= global.step_time_s);
  CHECK_THAT(global.step_time_s, WithinRel((static_cast<double>(r.makespan()) + sc.added_ns) / 1e9, 1e-12));
}

TEST_CASE("TP collectives: switched off, or partly hidden by costs.tp_overlap", "[cost][fidelity]") {
  // tp 2, no embedding or head: a slice's F is its 2 layers; each block's forward moves
  // 2 T h 2 (t-1)/t = 2 x 128 x 64 = 16,384 bytes at 225 bytes/ns + 1 us: 4 blocks per slice.
  const std::vector<std::string> base = {"parallel.tp=2", "parallel.dp=2", "parallel.embedding_on_first=false",
                                         "parallel.head_on_last=false"};
  auto f_of = [&](std::vector<std::string> extra) {
    std::vector<std::string> sets = base;
    sets.insert(sets.end(), extra.begin(), extra.end());
    const ModelConfig c = load_config_text(kModel, "t.yaml", sets);
    const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
    return static_cast<double>(derive_costs(c, s).slice[0].f);
  };
  const double none = f_of({"costs.tp_comm=false"});
  const double all = f_of({});
  const double half = f_of({"costs.tp_overlap=0.5"});
  const double per_slice = 4 * (16384.0 / 225 + 1000);
  CHECK(std::abs(all - none - per_slice) <= 1.0);          // ns rounding
  CHECK(std::abs(half - none - per_slice / 2) <= 1.0);
}

TEST_CASE("node-limited routing: the network carries at most max_nodes sends per token", "[cost][fidelity]") {
  // ep 16 at tp 1, 8 GPUs a node: N = 2 nodes. A token sends k (ep-1)/ep = 4 x 15/16 = 3.75
  // copies, (16 - 8)/15 = 8/15 of them remote: 2 network sends. With max_nodes 1 at most
  // 1 x (N-1)/N = 0.5 do: 0.5 / 3.75 of the bytes, and NVLink carries all of them.
  const char* moe = R"(model: {layers: 2, hidden: 64, heads: 4, vocab: 1000, seq_len: 128,
        moe: {experts: 16, top_k: 4, expert_ffn_hidden: 128}}
cluster: {gpu: h100, gpus: 32}
parallel: {pp: 2, dp: 16, ep: 16, microbatches: 4}
)";
  const ModelConfig free_cfg = load_config_text(moe, "t.yaml", {});
  const ModelConfig lim_cfg = load_config_text(moe, "t.yaml", {"model.moe.max_nodes=1"});
  const LayerFigures f = cost_figures(data_of(free_cfg), 2).slices[0].layers[0];
  const LayerFigures g = cost_figures(data_of(lim_cfg), 2).slices[0].layers[0];
  CHECK_THAT(f.inter_node_fraction, WithinRel(8.0 / 15, 1e-12));
  CHECK_THAT(f.intra_node_share, WithinRel(7.0 / 15, 1e-12));
  CHECK_THAT(g.inter_node_fraction, WithinRel(0.5 / 3.75, 1e-12));
  CHECK(g.intra_node_share == 1);
  // h100: NVLink 450 GB/s one way, network 50, both x 0.75; the slower side decides, + 5 us.
  const double b = g.dispatch_bytes;
  REQUIRE(b > 0);
  CHECK_THAT(g.dispatch_ns, WithinRel(std::max(b / (450 * 0.75), b * (0.5 / 3.75) / (50 * 0.75)) + 5000, 1e-12));
  CHECK_THAT(f.dispatch_ns, WithinRel(std::max(b * 7 / 15 / (450 * 0.75), b * 8 / 15 / (50 * 0.75)) + 5000, 1e-12));
}

TEST_CASE("parallel.p2p_runtime: megatron gives Megatron's two schedules their blocking calls, nothing else", "[cost][fidelity]") {
  const ModelConfig dataflow = load_config_text(kModel, "t.yaml", {});
  const ModelConfig mega = load_config_text(kModel, "t.yaml", {"parallel.p2p_runtime=megatron"});
  const Schedule one = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  CHECK_FALSE(as_run(dataflow, one).comm_waits);
  CHECK(as_run(mega, one).comm_waits);
  CHECK(as_run(mega, one).comm.size() == 2);
  const Schedule zb = make_schedule("zb-h1", ScheduleParams{2, 4, 0, 0});
  CHECK_FALSE(as_run(mega, zb).comm_waits);  // Zero Bubble's own runtime: left as it is
  CHECK(as_run(mega, zb).comm.empty());
  // The blocking calls never make the step shorter than the dataflow's.
  const SimResult a = simulate(one, derive_costs(dataflow, one));
  const Schedule run = as_run(mega, one);
  const SimResult b = simulate(run, derive_costs(mega, run));
  CHECK(b.makespan() >= a.makespan());
  // deepspeed: DeepSpeed's TrainSchedule for 1f1b only (its engine has no other schedule).
  const ModelConfig ds = load_config_text(kModel, "t.yaml", {"parallel.p2p_runtime=deepspeed"});
  const Schedule dsr = as_run(ds, one);
  CHECK(dsr.comm_waits);
  CHECK(dsr.comm[0].size() == 8);  // rank 0: 2M transfers with rank 1, one call each
  CHECK(as_run(ds, zb).comm.empty());
  CHECK(as_run(ds, make_schedule("interleaved-1f1b", ScheduleParams{2, 4, 2, 0})).comm.empty());
  CHECK(simulate(dsr, derive_costs(ds, dsr)).makespan() >= a.makespan());
  CHECK_THROWS_WITH(load_config_text(kModel, "t.yaml", {"parallel.p2p_runtime=deepspeed", "parallel.p2p_sync_us=100"}),
                    PPSIM_CONTAINS("p2p_runtime: megatron"));
  try {
    load_config_text(kModel, "t.yaml", {"parallel.p2p_runtime=nccl"});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.message().find("p2p_runtime") != std::string::npos);
  }
}

TEST_CASE("p2p links: NVLink inside a node, the network between nodes (Megatron's order, the pipeline outermost)", "[cost][fidelity]") {
  // pp 4, tp 2, dp 1 on nodes of 4 GPUs: pipeline rank r holds GPUs 2r, 2r+1, so ranks 0 and 1
  // share node 0 and ranks 2 and 3 node 1. A100: NVLink 600 GB/s (300 one way), network 25 GB/s,
  // comm efficiency 0.75.
  const ModelConfig cfg = load_config_text(kModel, "t.yaml", {"parallel.pp=4", "parallel.tp=2", "parallel.dp=1",
                                                              "hardware.gpus_per_node=4", "cluster.gpus=8"});
  const Schedule s = make_schedule("1f1b", ScheduleParams{4, 4, 0, 0});
  const SimCosts c = derive_costs(cfg, s);
  CHECK(c.rank_node == std::vector<int>{0, 0, 1, 1});
  CHECK_THAT(c.link.bytes_per_tick, WithinRel(300 * 0.75, 1e-12));
  CHECK_THAT(c.inter_node_link.bytes_per_tick, WithinRel(25 * 0.75, 1e-12));
  // costs.p2p_per_node false: the network for every hop, as before.
  const ModelConfig flat = load_config_text(kModel, "t.yaml", {"parallel.pp=4", "parallel.tp=2", "parallel.dp=1",
                                                               "hardware.gpus_per_node=4", "cluster.gpus=8",
                                                               "costs.p2p_per_node=false"});
  const SimCosts f = derive_costs(flat, s);
  CHECK(f.rank_node.empty());
  CHECK_THAT(f.link.bytes_per_tick, WithinRel(25 * 0.75, 1e-12));
  // The whole pipeline on one node, or one rank per node or more: one link for every hop.
  const ModelConfig one = load_config_text(kModel, "t.yaml", {"parallel.pp=4", "parallel.tp=2", "parallel.dp=1",
                                                              "hardware.gpus_per_node=8", "cluster.gpus=8"});
  CHECK(derive_costs(one, s).rank_node.empty());
  const ModelConfig wide = load_config_text(kModel, "t.yaml", {"parallel.pp=4", "parallel.tp=2", "parallel.dp=2",
                                                               "hardware.gpus_per_node=4", "cluster.gpus=16"});
  const SimCosts w = derive_costs(wide, s);
  CHECK(w.rank_node.empty());
  CHECK_THAT(w.link.bytes_per_tick, WithinRel(25 * 0.75, 1e-12));
}

TEST_CASE("FSDP (ZeRO-3, FSDP2's layout): memory and the per-layer prefetch model, by hand", "[cost][fidelity]") {
  // kModel at pp 2, dp 4, zero 3 with parallel.fsdp: rank 0 holds G = 195,328 parameters (2
  // layers of 65,664 + the embedding 64,000). FSDP2's shard is the fp32 parameter: per parameter
  // 4 (fp32 shard, the master copy) + 8 (moments) with the optimizer, / 4; the gathered bf16
  // weights: at pp > 1 the whole stage (torchtitan keeps them through the step), 2 G bytes; the
  // fp32 grads at pp > 1 unsharded, 4 G (PyTorch's pipelining reduces them at the last backward,
  // FSDP2 holding each micro-batch's sum unsharded until then), at pp 1 reduced each micro-batch: / 4.
  const ModelConfig cfg = load_config_text(kModel, "t.yaml", {"parallel.zero=3", "parallel.fsdp=true"});
  const Schedule s = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  const std::vector<RankPeak> mem = predict_rank_memory(data_of(cfg), s);
  const double g0 = 2 * 65664 + 64000;
  CHECK_THAT(mem[0].parts.optimizer, WithinRel(g0 * 12 / 4, 1e-12));
  CHECK_THAT(mem[0].parts.grads, WithinRel(g0 * 4, 1e-12));
  CHECK_THAT(mem[0].parts.weights, WithinRel(g0 * 2, 1e-12));
  // Plain ZeRO-3 (DeepSpeed's layout): a bf16 shard 2 G / 4 beside the 12-byte optimizer state.
  const ModelConfig z3 = load_config_text(kModel, "t.yaml", {"parallel.zero=3"});
  CHECK_THAT(predict_rank_memory(data_of(z3), s)[0].parts.weights, WithinRel(g0 * 2 / 4, 1e-12));
  // At pp 1, 4 layers + embedding + head on one rank: the two largest pieces gathered, two
  // layers (65,664 each, above the embedding's 64,000 and the head's 64,064): 2 x 65,664 x 2 bytes.
  const ModelConfig one =
      load_config_text(kModel, "t.yaml", {"parallel.pp=1", "parallel.zero=3", "parallel.fsdp=true", "parallel.dp=8"});
  const Schedule s1 = make_schedule("1f1b", ScheduleParams{1, 4, 0, 0});
  CHECK_THAT(predict_rank_memory(data_of(one), s1)[0].parts.weights, WithinRel(2 * 65664 * 2.0, 1e-12));
  // The whole model G1 = 4 layers + embedding + head on the one rank, fp32 grads / 8.
  const double g1 = 4 * 65664 + 64000 + 64064;
  CHECK_THAT(predict_rank_memory(data_of(one), s1)[0].parts.grads, WithinRel(g1 * 4 / 8, 1e-12));
  // HSDP: zero_shard 2 of dp 4: the shards are halves (not quarters).
  const ModelConfig hsdp =
      load_config_text(kModel, "t.yaml", {"parallel.zero=3", "parallel.fsdp=true", "parallel.zero_shard=2"});
  CHECK_THAT(predict_rank_memory(data_of(hsdp), s)[0].parts.optimizer, WithinRel(g0 * 12 / 2, 1e-12));

  // The DP time on rank 0 (A100 80GB: NVLink 600 GB/s -> 300 bytes/ns one way, x comm 0.75 =
  // 225 bytes/ns; tp x dp = 4 <= 8 GPUs per node; ZeRO-3 over n = 4: (n-1)/n = 0.75):
  // all-gathers 2 x 2 bytes, reduce-scatter 4 bytes: T = 0.75 G (4 + 4) / 225 + 3 latencies.
  const ModelConfig on =
      load_config_text(kModel, "t.yaml", {"parallel.zero=3", "parallel.fsdp=true", "costs.dp_comm=true"});
  const HardwareSpec& h = data_of(on).hardware;
  const double bw = 300 * 0.75, lat = 3 * 1e3 * h.nvlink_latency_us;
  const double gather = 0.75 * g0 * 4, scatter = 0.75 * g0 * 4, T = (gather + scatter) / bw + lat;
  const StepCosts none = step_costs(data_of(on), s);  // no compute given: dp_overlap (0) applies
  CHECK_THAT(none.ranks[0].dp_ns, WithinRel(T, 1e-12));
  CHECK_THAT(none.ranks[0].dp_exposed_ns, WithinRel(T, 1e-12));
  // With the rank's compute C: exposed = first + last + max(0, T - first - last - C), first the
  // first of its 2 layers' forward all-gather (gather / 2 / 2 / bw), last the last layer's
  // reduce-scatter (scatter / 2 / bw).
  const double first = gather / 2 / 2 / bw, last = scatter / 2 / bw;
  const std::vector<double> idle = {0, 0}, busy = {1e12, 1e12}, some = {T / 4, T / 4};
  CHECK_THAT(step_costs(data_of(on), s, &idle).ranks[0].dp_exposed_ns, WithinRel(T, 1e-12));
  CHECK_THAT(step_costs(data_of(on), s, &busy).ranks[0].dp_exposed_ns, WithinRel(first + last, 1e-12));
  CHECK_THAT(step_costs(data_of(on), s, &some).ranks[0].dp_exposed_ns, WithinRel(T - T / 4, 1e-12));
  // A written dp_overlap keeps its meaning.
  const ModelConfig half = load_config_text(
      kModel, "t.yaml", {"parallel.zero=3", "parallel.fsdp=true", "costs.dp_comm=true", "costs.dp_overlap=0.5"});
  CHECK_THAT(step_costs(data_of(half), s, &busy).ranks[0].dp_exposed_ns, WithinRel(T / 2, 1e-12));
}

TEST_CASE("parallel.dp_sync: ZeRO's collectives per micro-batch, with no_sync, or once a step", "[cost][fidelity]") {
  // kModel at pp 2, dp 4, ZeRO 3 (DeepSpeed's layout): rank 0 holds G = 195,328 parameters in 2
  // layers. Per round over n = 4 ((n-1)/n = 0.75): the forward and backward all-gathers of bf16
  // weights, 2 x 2 x 0.75 G = 3 G bytes, and the reduce-scatter of fp32 gradients, 4 x 0.75 G = 3 G.
  // NVLink: 300 bytes/ns one way x comm 0.75 = 225 bytes/ns; one latency per collective.
  const double g0 = 2 * 65664 + 64000, bw = 225;
  auto costs = [&](int m, const std::string& sync, const std::vector<double>* busy = nullptr) {
    std::vector<std::string> set = {"parallel.zero=3", "costs.dp_comm=true"};
    if (!sync.empty()) set.push_back("parallel.dp_sync=" + sync);
    const ModelConfig cfg = load_config_text(kModel, "t.yaml", set);
    return step_costs(data_of(cfg), make_schedule("1f1b", ScheduleParams{2, m, 0, 0}), busy).ranks[0];
  };
  const double lat = 1e3 * load_config_text(kModel, "t.yaml", {}).data->hardware.nvlink_latency_us;
  // microbatch (ZeRO 3's default, FSDP FULL_SHARD): M rounds of everything, 3M collectives.
  // M = 1: 6 G bytes; M = 4: 24 G.
  for (const std::string& sync : {std::string(), std::string("microbatch")}) {
    CHECK_THAT(costs(1, sync).dp_bytes, WithinRel(6 * g0, 1e-12));
    CHECK_THAT(costs(4, sync).dp_bytes, WithinRel(24 * g0, 1e-12));
    CHECK_THAT(costs(4, sync).dp_ns, WithinRel(24 * g0 / bw + 12 * lat, 1e-12));
  }
  // no_sync: the gathers per micro-batch (3 G each), the reduce-scatter once (3 G): M = 1: 6 G;
  // M = 4: 15 G, in 2 x 4 + 1 = 9 collectives.
  CHECK_THAT(costs(1, "no_sync").dp_bytes, WithinRel(6 * g0, 1e-12));
  CHECK_THAT(costs(4, "no_sync").dp_bytes, WithinRel(15 * g0, 1e-12));
  CHECK_THAT(costs(4, "no_sync").dp_ns, WithinRel(15 * g0 / bw + 9 * lat, 1e-12));
  // step: once whatever M: 6 G in 3 collectives.
  CHECK_THAT(costs(1, "step").dp_bytes, WithinRel(6 * g0, 1e-12));
  CHECK_THAT(costs(4, "step").dp_ns, WithinRel(6 * g0 / bw + 3 * lat, 1e-12));

  // FSDP's prefetch (dp_overlap not written) with compute enough to hide the rest: each round
  // shows its first layer's forward all-gather (3 G / 2 / 2 layers) and its last layer's
  // reduce-scatter (3 G / 2 layers): 2.25 G / bw a round. microbatch at M = 4: 4 rounds, 9 G / bw;
  // no_sync: 4 gathers' and one reduce-scatter's, (4 x 0.75 + 1.5) G / bw; step: one round.
  const std::vector<double> busy = {1e12, 1e12};
  CHECK_THAT(costs(1, "", &busy).dp_exposed_ns, WithinRel(2.25 * g0 / bw, 1e-12));
  CHECK_THAT(costs(4, "", &busy).dp_exposed_ns, WithinRel(9 * g0 / bw, 1e-12));
  CHECK_THAT(costs(4, "no_sync", &busy).dp_exposed_ns, WithinRel(4.5 * g0 / bw, 1e-12));
  CHECK_THAT(costs(4, "step", &busy).dp_exposed_ns, WithinRel(2.25 * g0 / bw, 1e-12));
  // Compute C shorter than the rest: exposed = T - C, T the M = 4 rounds' whole time.
  const double T = 24 * g0 / bw + 12 * lat;
  const std::vector<double> some = {T / 2, T / 2};
  CHECK_THAT(costs(4, "", &some).dp_exposed_ns, WithinRel(T / 2, 1e-12));

  // ZeRO 1 with microbatch: the reduce-scatter per micro-batch (3 G each), the updated
  // parameters' all-gather once (1.5 G): M = 4: 13.5 G; the default (step): 4.5 G.
  const ModelConfig z1 = load_config_text(kModel, "t.yaml", {"parallel.zero=1", "parallel.dp_sync=microbatch"});
  const ModelConfig z1d = load_config_text(kModel, "t.yaml", {"parallel.zero=1"});
  const Schedule s4 = make_schedule("1f1b", ScheduleParams{2, 4, 0, 0});
  CHECK_THAT(step_costs(data_of(z1), s4).ranks[0].dp_bytes, WithinRel(13.5 * g0, 1e-12));
  CHECK_THAT(step_costs(data_of(z1d), s4).ranks[0].dp_bytes, WithinRel(4.5 * g0, 1e-12));

  // automatic: ZeRO 3 per micro-batch, except FSDP2 under PP (PyTorch's pipelining); below ZeRO 3 once.
  const ModelConfig fsdp = load_config_text(kModel, "t.yaml", {"parallel.zero=3", "parallel.fsdp=true"});
  CHECK(dp_sync_of(data_of(fsdp).parallel, 2) == DpSync::step);
  CHECK(dp_sync_of(data_of(fsdp).parallel, 1) == DpSync::microbatch);
  CHECK(dp_sync_of(data_of(z1d).parallel, 1) == DpSync::step);

  // Memory: no_sync holds the unsharded fp32 gradients, 4 G, where ZeRO 3 holds 4 G / 4.
  const ModelConfig ns = load_config_text(kModel, "t.yaml", {"parallel.zero=3", "parallel.dp_sync=no_sync"});
  const ModelConfig mb = load_config_text(kModel, "t.yaml", {"parallel.zero=3"});
  CHECK_THAT(predict_rank_memory(data_of(ns), s4)[0].parts.grads, WithinRel(g0 * 4, 1e-12));
  CHECK_THAT(predict_rank_memory(data_of(mb), s4)[0].parts.grads, WithinRel(g0 * 4 / 4, 1e-12));

  // A value it does not know: one line at the value (line 3 of kModel), the choices and the nearest.
  std::string bad = kModel;
  bad.replace(bad.find("microbatches: 4}"), 16, "microbatches: 4, dp_sync: nosync}");
  const std::string line3 = "parallel: {pp: 2, dp: 4, microbatches: 4, dp_sync: nosync}";
  try {
    load_config_text(bad, "t.yaml", {});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().file == "t.yaml");
    CHECK(e.loc().line == 3);
    CHECK(e.loc().col == static_cast<int>(line3.find("nosync")) + 1);
    // t.yaml:3:N: parallel.dp_sync must be one of ..., got 'nosync', did you mean 'no_sync'?
    CHECK_THAT(e.one_line(), PPSIM_CONTAINS(fmt::format("t.yaml:3:{}: parallel.dp_sync must be one of "
                                                        "automatic|microbatch|no_sync|step",
                                                        line3.find("nosync") + 1)));
    CHECK_THAT(e.one_line(), PPSIM_CONTAINS("did you mean 'no_sync'?"));
  }
  try {
    load_config_text(kModel, "t.yaml", {"parallel.dp_sync=always"});
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.loc().file == "--set");
  }
}
