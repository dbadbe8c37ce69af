// The GPU commands' flow (api/gpu.h): moved from src/cli/cmd_gpu.cc, which now parses flags and
// prints. The outputs (profile YAML, validate's table and JSON) are the CLI's, byte for byte.
#include "api/gpu.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "api/gpu_costs.h"
#include "core/error.h"
#include "cost/config.h"
#include "cost/cost_model.h"
#include "ep/ep_placement.h"
#include "launch/launch.h"
#include "launch/mpi.h"
#include "report/trace.h"
#include "report/validation.h"
#include "schedules/notation.h"
#include "schedules/registry.h"
#include "schedules/schedule_list.h"
#include "sim/engine.h"

namespace ppsim::api {

namespace {

void require_gpu(const char* cmd) {
  if (auto why = gpu::gpu_unavailable_reason(); !why.empty())
    throw InputError(fmt::format("{}: {}", cmd, why), {}, kExitGpu);
}

}  // namespace

gpu::ChunkShape chunk_shape(const ModelConfigData& c, int layers, bool moe) {
  gpu::ChunkShape s;
  const ModelSpec& m = c.model;
  s.hidden = static_cast<int>(m.hidden);
  s.heads = m.heads;
  s.kv_heads = m.kv_heads > 0 ? m.kv_heads : m.heads;
  s.head_dim = static_cast<int>(m.head_dim > 0 ? m.head_dim : m.hidden / std::max(1, m.heads));
  s.ffn_hidden = static_cast<int>(m.ffn_hidden > 0 ? m.ffn_hidden : 4 * m.hidden);
  s.seq_len = static_cast<int>(m.seq_len);
  s.micro_batch = m.micro_batch_size;
  s.layers = layers;
  if (moe && m.moe.enabled()) {
    s.experts = m.moe.experts;
    s.top_k = m.moe.top_k;
    s.expert_ffn_hidden = static_cast<int>(m.moe.expert_ffn_hidden);
  }
  if (auto p = s.problem(); !p.empty())
    throw InputError(fmt::format("the model cannot run on the GPU back-end: {}", p));
  return s;
}

namespace {
// How a replay launches and orders its actions as `validate --launch` asks (the probe's and the
// schedules' alike): one CUDA graph per action, messages and pairs waiting on values.
void launch_as_asked(gpu::ReplayConfig& rc, bool graphs, bool value_waits) {
  rc.graphs = graphs;
  if (value_waits) {
    rc.value_waits = true;
    rc.value_waits_required = false;
  }
}
}  // namespace

std::optional<LinkProbe> probe_link(int pp, const gpu::ChunkShape& shape, int devices, const std::string& transport,
                                    bool sm_partitions, double timeout_s, bool graphs, bool value_waits) {
  // Collective under mpirun/srun: every process replays its share, every process gets the result.
  if (pp < 2) return std::nullopt;
  const Schedule s = make_schedule("gpipe", ScheduleParams{pp, 2 * pp, 0, 0});
  gpu::ReplayConfig rc;
  rc.stage_shapes = {shape};
  rc.devices = devices;
  rc.warmup_iterations = 3;
  rc.transport = transport;
  rc.nccl_timeout_s = timeout_s;
  rc.sm_partitions = sm_partitions;
  gpu::apply_replay_switches(rc);
  launch_as_asked(rc, graphs, value_waits);  // as replay() for the schedules
  // Three replays, each giving its median transfer; the middle one is kept. A replay now and then
  // runs slow as a whole (seen: a first probe of 1.4 ms per message where the others gave 20 us),
  // and one such probe would stand for every transfer of every prediction.
  // Each replay's timeline also gives the replay's own delays around its messages and between
  // its actions (api::replay_delays); the middle replay's are kept with its median.
  LinkProbe p;
  std::vector<ReplayDelays> delays;
  std::vector<Timeline> timelines;
  for (int run = 0; run < 3; ++run) {
    timelines.push_back(gpu::replay_schedule(s, rc));
    const Timeline& t = timelines.back();
    std::vector<Time> d;
    for (const auto& tr : t.transfers) {
      d.push_back(tr.end - tr.start);
      p.bytes = std::max(p.bytes, tr.bytes);
    }
    if (d.empty()) return std::nullopt;
    std::sort(d.begin(), d.end());
    p.runs_us.push_back(static_cast<double>(d[d.size() / 2]) / 1e3);
    p.transfers = d.size();
    delays.push_back(api::replay_delays(s, t));
  }
  p.median_us = api::middle_run(p.runs_us);
  for (std::size_t i = 0; i < p.runs_us.size(); ++i)
    if (p.runs_us[i] == p.median_us) {
      p.delays = delays[i];
      p.timeline = std::move(timelines[i]);
    }
  return p;
}

ProfileOutcome profile(const ProfileRequest& req) {
  const ModelConfig cfg = load_config(req.config, req.sets);
  require_gpu("profile");
  const ModelConfigData& c = *cfg.data;
  if (req.reps < 1 || req.warmup < 0) throw InputError("--reps must be >= 1 and --warmup >= 0", {}, kExitUsage);
  // Expert parallelism: dispatch and combine timed as our all-to-all among min(ep, GPUs, 8) EP
  // shards, one per GPU (a shard's compute then runs on a whole GPU, as in training); with one
  // GPU they stay local permutes, and the profile says so.
  gpu::ChunkShape shape = chunk_shape(c, 1, true);
  int ep_used = c.model.moe.enabled() && c.parallel.ep > 1 ? std::min({c.parallel.ep, gpu::device_count(), 8}) : 1;
  while (ep_used > 1 && c.model.moe.experts % ep_used != 0) --ep_used;  // ChunkShape: ep in 1..8, divides experts
  const ep::A2aBackend a2a = ep::parse_a2a_backend(req.a2a);
  if (ep_used > 1) {
    shape.ep = ep_used;
    shape.comm_sms = c.hardware.comm_sms > 0 ? c.hardware.comm_sms : 20;
    shape.a2a = a2a;
  }
  const gpu::ProfileResult r = gpu::profile_chunk(shape, req.warmup, req.reps, req.device);
  std::string a2a_note;
  if (ep_used > 1)
    a2a_note = a2a == ep::A2aBackend::ours
                   ? fmt::format(
                         "# dispatch/combine: our all-to-all among {} EP shards (config ep {}), one per GPU, "
                         "on {} SMs\n",
                         ep_used, c.parallel.ep, shape.comm_sms)
                   : fmt::format(
                         "# dispatch/combine: NCCL's grouped send/recv among {} EP shards (config ep {}), one "
                         "per GPU (--a2a nccl)\n",
                         ep_used, c.parallel.ep);
  else if (c.model.moe.enabled() && c.parallel.ep > 1)
    a2a_note = fmt::format(
        "# dispatch/combine: local permutes (config ep {}; an all-to-all needs 2 or more GPUs, {} "
        "visible{})\n",
        c.parallel.ep, gpu::device_count(), a2a == ep::A2aBackend::nccl ? "; --a2a nccl unused" : "");
  std::string y = fmt::format(
      "# ppsim cost profile: one transformer layer, one micro-batch, medians of {} runs\n"
      "version: {}\ndevice: \"{}\"\nsource: \"ppsim profile {}\"\nper_layer: true\n"
      "op_ms: {{F: {:.6f}, B: {:.6f}, W: {:.6f}, FB: {:.6f}}}\n",
      r.reps, r.sub_ops_ms.empty() ? 1 : 2, r.gpu, req.config, r.f_ms, r.b_ms, r.w_ms, r.fb_ms);
  if (c.model.moe.enabled() && c.model.dense_layers_first > 0) {
    const gpu::ProfileResult d = gpu::profile_chunk(chunk_shape(c, 1, false), req.warmup, req.reps, req.device);
    y += fmt::format("dense_op_ms: {{F: {:.6f}, B: {:.6f}, W: {:.6f}}}\n", d.f_ms, d.b_ms, d.w_ms);
  }
  y += fmt::format("# input-grad only (I): {:.6f} ms; attention backend: {}\n", r.input_grad_ms, r.attention_backend);
  y += a2a_note;
  // Version 2: the sub-op times the overlap model runs on (one layer; src/cost/profile.h).
  if (!r.sub_ops_ms.empty()) {
    auto sub = [&r](const char* k) {
      const auto it = r.sub_ops_ms.find(k);
      return it != r.sub_ops_ms.end() ? it->second : 0.0;
    };
    y += fmt::format(
        "sub_ops_ms:\n  attention: {{F: {:.6f}, I: {:.6f}, W: {:.6f}}}\n  mlp: {{F: {:.6f}, I: {:.6f}, W: {:.6f}}}\n",
        sub("attn_fwd"), sub("attn_bwd"), sub("attn_w"), sub("mlp_fwd"), sub("mlp_bwd"), sub("mlp_w"));
    y += fmt::format("  dispatch: {{F: {:.6f}, B: {:.6f}}}\n  combine: {{F: {:.6f}, B: {:.6f}}}\n", sub("dispatch_fwd"),
                     sub("dispatch_bwd"), sub("combine_fwd"), sub("combine_bwd"));
  }
  return ProfileOutcome{std::move(y), r};
}

namespace {

// What every schedule's validation shares: the request, the config, where the ranks run, the
// profiles taken so far, and the report being built (text and JSON side by side, in one order).
struct Validation {
  const ValidateRequest& req;
  ModelConfig cfg;
  const ModelConfigData& c;
  const mpi::World& world;
  bool multi = false;
  launch::TransportKind transport = launch::TransportKind::Peer;
  int pp = 0, m = 0, v = 0, ep_r = 1;
  ep::A2aBackend a2a = ep::A2aBackend::ours;
  int my_device = 0, ndev = 1, slots_total = 1;
  // Ranks sharing a GPU: each on its own SM partition (green contexts) where the GPU splits.
  int split = 0, split_sms = 0, device_sms = 0;
  std::string split_note;
  std::optional<LinkProbe> probe;
  // The NCCL transport: the share of a GPU its kernels take from compute beside them, fitted from the
  // probe's replay (api::fit_nccl_share); absent with the other transports or without the probe.
  std::optional<NcclShare> nccl;
  int probe_devices = 0;                       // the GPUs the link probe replays on (--devices, or 1: probe_links)
  double copy_us = 0;                          // the same message copied with nothing else running: the hardware's cost
  std::map<int, gpu::ProfileResult> profiles;  // by layers per chunk
  // How ranks sharing a GPU slow each other, profiled on the chunk the schedule's stages hold
  // (one layer and four gave the same figures within 0.04 on an H100; nothing says they must).
  std::map<int, gpu::SharingProfile> sharings;  // by layers per chunk
  // Partitions of one size need not run a chunk equally fast: F, I and W alone on each.
  std::map<int, std::vector<std::array<double, 3>>> speeds;  // by layers per chunk
  // --sharing replay: each kind's slowdown beside another op, fitted on a short replay of the chunk.
  // Empty where the fit's replay failed (replay_fit_failed in the JSON): the profile's step stands.
  std::map<int, std::optional<api::KindShareFit>> share_fits;  // by layers per chunk
  std::string sharing_summary;                                 // with --sharing replay: the profile's step instead
  std::string aligned_summary;  // with --sharing replay: the fit for ops of one kind started together too
  // Two GPUs or more in this process: how ops run beside another GPU's work (the co-run model).
  std::map<int, gpu::CorunProfile> coruns;  // by layers per chunk
  std::string corun_summary;                // the makespan table without the co-run model
  std::string corun_full_summary;           // with the 100%-duty factors (--co-run full), beside sustained
  std::string nccl_summary;                 // with --transport nccl: without its kernels' share
  std::string delays_summary;               // without the replay's delays the link probe measured
  bool graphs = false;                      // --launch graphs where it applies (not with EP: gpu::graphs_unavailable)
  // With graphs the replay waits on values unless PPSIM_REPLAY_WAITS chooses (plan_launch); the
  // waits named in the text.
  bool graph_value_waits = false;
  std::string waits;
  // EP: the prediction at the ops' GPU times (without the group's pace); the pace per chunk size
  std::string ep_pace_summary, ep_pace_text;
  nlohmann::json j;
  std::string text, summary;
  std::vector<Timeline> keep;  // predicted, measured, per schedule
  std::vector<std::string> names;

  Validation(const ValidateRequest& r, ModelConfig config, const mpi::World& w)
      : req(r), cfg(std::move(config)), c(*cfg.data), world(w), multi(w.size > 1) {}
  gpu::ChunkShape with_ep(gpu::ChunkShape sh) const {
    sh.ep = ep_r;
    sh.comm_sms = c.hardware.comm_sms > 0 ? c.hardware.comm_sms : 20;
    sh.a2a = a2a;
    return sh;
  }
};

gpu::ReplayWhere replay_where(const Validation& x, int visible) {
  return gpu::replay_where(x.pp, x.ep_r, x.req.transport, x.a2a, x.req.devices, visible, x.world);
}

// --launch: graphs where an action can be captured whole (gpu::graphs_unavailable), else streams
// with a note; the profile's timed ops then run in the same mode as the replay's actions.
void plan_launch(Validation& x) {
  const std::optional<gpu::LaunchMode> m = gpu::parse_launch_mode(x.req.launch);
  if (!m)
    throw InputError("--launch " + x.req.launch + ": not a launch mode", "--launch streams or graphs", kExitUsage);
  const std::string why = *m == gpu::LaunchMode::graphs ? gpu::graphs_unavailable(x.ep_r) : std::string();
  x.graphs = *m == gpu::LaunchMode::graphs && why.empty();
  x.j["launch"] = x.graphs ? "graphs" : "streams";
  if (!why.empty()) x.j["launch_note"] = "--launch graphs not applied: " + why;
  gpu::set_graph_launch(x.graphs);
  const char* waits = std::getenv("PPSIM_REPLAY_WAITS");
  x.graph_value_waits = x.graphs && (!waits || !*waits);
  x.waits = x.graph_value_waits ? "value" : waits ? waits : "";
}

// The refusals: what the flags and the config say cannot run (the replay's own, from
// gpu::plan_replay, the same the replay applies), before any GPU work where they need none.
void plan(Validation& x) {
  const ValidateRequest& req = x.req;
  // Refuse a transport that cannot reach the peers before any GPU work.
  x.transport = launch::choose_transport(req.transport, x.world.size, x.multi ? x.world.local_size : 1);
  if (!req.schedule_file.empty() && !req.schedules.empty())
    throw InputError("give --schedule or --schedule-file, not both", {}, kExitUsage);
  if (req.replays < 1 || req.reps < 1)
    throw InputError(fmt::format("--{} {}: give at least 1", req.replays < 1 ? "replays" : "reps",
                                 req.replays < 1 ? req.replays : req.reps),
                     {}, kExitUsage);
  apply_config_parallel(x.cfg, x.pp, x.m, x.v);
  // Expert parallelism (MoE, parallel.ep > 1, --ep-replay): the replay runs every pipeline rank
  // as ep shards (docs/GPU.md, "Replay" and "Expert parallelism: our all-to-all"), shard (r, e) on GPU
  // (r * ep + e) % GPUs in one process, or in process (r * ep + e) % processes under mpirun; the
  // prediction simulates shard 0's pipeline, its ranks on their GPUs. Opt-in (--ep-replay); its
  // deadlocks of sessions 5-7 ended with the host handshake (EpGroupSync, docs/VALIDATION.md).
  x.ep_r = req.ep_replay && x.c.model.moe.enabled() && x.c.parallel.ep > 1 ? x.c.parallel.ep : 1;
  x.a2a = ep::parse_a2a_backend(req.a2a);
  if (x.a2a == ep::A2aBackend::nccl && x.ep_r == 1)
    throw InputError(
        "--a2a nccl: there is no all-to-all to run: it moves tokens only with --ep-replay on an MoE "
        "config with parallel.ep > 1",
        {}, kExitUsage);
  // Without a GPU count yet: in one process the GPUs asked for, whatever is present.
  (void)gpu::plan_replay(replay_where(x, !x.multi && req.devices > 0 ? req.devices : 0));
  require_gpu("validate");
  if (x.multi && req.devices > 0 && req.devices != x.world.size)
    throw InputError(fmt::format("--devices {} with {} processes: under {} each process uses one GPU (leave "
                                 "--devices out)",
                                 req.devices, x.world.size, x.world.launcher),
                     {}, kExitUsage);
  const gpu::ReplayPlan p = gpu::plan_replay(replay_where(x, gpu::device_count()));
  x.my_device = p.my_device;
  // Virtual ranks: fewer GPUs than ranks puts rank r on GPU r % GPUs, as the replay does; the
  // simulator then shares each GPU among its ranks at the slowdown profiled for two at once.
  x.ndev = p.gpus;
  x.slots_total = x.pp * x.ep_r;
  plan_launch(x);
}

std::vector<std::pair<std::string, const Family*>> what_to_replay(const Validation& x) {
  // The families, or one schedule imported from a file (ppsim search writes them).
  std::vector<std::pair<std::string, const Family*>> items;
  if (!x.req.schedule_file.empty()) {
    const std::string& f = x.req.schedule_file;
    const std::size_t slash = f.find_last_of('/');
    items.emplace_back(slash == std::string::npos ? f : f.substr(slash + 1), nullptr);
    return items;
  }
  const std::string list = x.req.schedules.empty() ? config_schedules(x.cfg) : x.req.schedules;
  for (const Family* fam : parse_schedule_list(list)) items.emplace_back(fam->name, fam);
  return items;
}

// Ranks sharing a GPU: each on its own SM partition (green contexts) where the GPU splits, so
// op costs are profiled on one partition; otherwise they time-slice the whole GPU.
void plan_sharing(Validation& x) {
  const int per_gpu = (x.slots_total + x.ndev - 1) / x.ndev;
  if (per_gpu > 1 && x.req.sm_split != "off") {
    const std::string why = gpu::sm_partition_check(x.my_device, per_gpu, &x.split_sms, &x.device_sms);
    if (why.empty())
      x.split = per_gpu;
    else if (x.req.sm_split == "on")
      throw InputError("validate --sm-split on: " + why + " (--sm-split off time-slices the GPU instead)", {},
                       kExitGpu);
    else
      x.split_note = why;
  }
  if (x.ndev < x.slots_total) {
    nlohmann::json& d = x.j["device_sharing"];
    d = {{"gpus", x.ndev}, {"ranks", x.slots_total}, {"model", x.req.sharing}};
    d["sm_partitions"] =
        x.split ? nlohmann::json{{"groups", x.split}, {"sms_each", x.split_sms}, {"device_sms", x.device_sms}}
                : nlohmann::json();
    if (!x.split_note.empty()) d["sm_partitions_unavailable"] = x.split_note;
    d["profiles"] = nlohmann::json::object();
  }
}

// The NCCL kernels' share of compute beside them: the probe's F and B against the same one-layer
// chunk's profile alone, over the time each ran beside a resident NCCL kernel (api::fit_nccl_share).
void nccl_share_of_probe(Validation& x, const gpu::ChunkShape& one_layer) {
  const gpu::ProfileResult alone = gpu::profile_chunk(one_layer, 3, x.req.reps, x.my_device, x.split);
  const Schedule probe = make_schedule("gpipe", ScheduleParams{x.pp, 2 * x.pp, 0, 0});
  std::vector<int> gpus;  // each rank's GPU as the replay places the probe's dense pipeline
  for (int r = 0; r < x.pp; ++r) gpus.push_back(api::replay_gpu(r, 1, x.ndev));
  x.nccl = api::fit_nccl_share(probe, x.probe->timeline, gpus, alone.f_ms, alone.b_ms);
  x.j["link_probe"]["nccl_sm_share"] = {
      {"share", x.nccl->share}, {"samples", x.nccl->samples}, {"alone_ms", {{"F", alone.f_ms}, {"B", alone.b_ms}}}};
}

void probe_links(Validation& x, const gpu::ChunkShape& one_layer) {
  // The probe replays a dense pipeline of pp ranks: with more processes than that (EP across
  // processes, pp x ep slots) it cannot run, and the config's link model stands.
  const bool probe_fits = !x.multi || x.world.size <= x.pp;
  // EP in one process: shard 0's pipeline ranks on GPU (r ep) % GPUs. When that is one GPU for
  // every r (PP 2 x EP 2 on two GPUs), its messages are copies within that GPU between its SM
  // partitions, and the probe replays so (both ranks on one GPU), not across the link.
  x.probe_devices = x.req.devices;
  if (!x.multi && api::pipeline_on_one_gpu(x.pp, x.ep_r, x.ndev)) {
    x.probe_devices = 1;
    x.j["link_probe_placement"] = "one GPU: shard 0's stages share it, as in the EP replay";
  }
  if (!x.req.no_link_probe && probe_fits)
    x.probe = probe_link(x.pp, one_layer, x.probe_devices, x.req.transport, x.split > 0, x.req.timeout_s, x.graphs,
                         x.graph_value_waits);
  if (!x.req.no_link_probe && !probe_fits)
    x.j["link_probe_skipped"] =
        fmt::format("{} processes for a {}-rank probe: the config's link model", x.world.size, x.pp);
  if (!x.probe) return;
  const LinkProbe& p = *x.probe;
  x.j["link_probe"] = {{"median_us", p.median_us}, {"runs_us", p.runs_us}, {"transfers", p.transfers},
                       {"bytes", p.bytes},         {"schedule", "gpipe"},  {"microbatches", 2 * x.pp}};
  x.j["link_probe"]["launch"] = x.graphs ? "graphs" : "streams";  // as the schedules' replays (probe_link)
  x.j["link_probe"]["waits"] = x.waits.empty() ? std::string("event") : std::string(x.waits);
  x.j["link_probe"]["replay_delays"] = {{"send_us", p.delays.send_us},          {"receive_us", p.delays.receive_us},
                                        {"action_gap_us", p.delays.gap_us},     {"send_samples", p.delays.sends},
                                        {"receive_samples", p.delays.receives}, {"gap_samples", p.delays.gaps}};
  if (x.transport == launch::TransportKind::Nccl && x.ep_r == 1) nccl_share_of_probe(x, one_layer);
  if (p.bytes > 0) {
    const int peer = x.ndev > 1 && !x.multi && x.probe_devices != 1 ? 1 : x.my_device;
    x.copy_us = gpu::copy_probe_us(static_cast<std::size_t>(p.bytes), x.my_device, peer, 20);
    x.j["link_probe"]["standalone_copy_us"] = x.copy_us;
    x.j["link_probe"]["standalone_copy_gpus"] = {x.my_device, peer};
  }
}

// The schedule to replay, or none (a skip noted in the JSON).
std::optional<Schedule> schedule_of(Validation& x, const std::string& name, const Family* fam) {
  Schedule s;
  if (!fam) {
    s = import_csv_file(x.req.schedule_file, x.pp, x.m);  // validated on import
  } else {
    ScheduleParams params = resolve_params(*fam, ScheduleParams{x.pp, x.m, x.v, 0});
    try {
      s = make_schedule(fam->name, params);
    } catch (const InputError& e) {
      if (e.exit_code() != kExitInput) throw;
      x.j["skipped"].push_back({{"schedule", fam->name}, {"reason", e.message()}});
      return std::nullopt;
    }
  }
  if (x.c.model.layers % s.stages_per_pipe != 0) {
    x.j["skipped"].push_back(
        {{"schedule", name},
         {"reason", fmt::format("{} layers do not split into {} equal chunks", x.c.model.layers, s.stages_per_pipe)}});
    return std::nullopt;
  }
  return s;
}

const gpu::SharingProfile& sharing_of(Validation& x, int layers, const gpu::ChunkShape& shape) {
  auto sit = x.sharings.find(layers);
  if (sit != x.sharings.end()) return sit->second;
  // EP: the step of the stages' EP groups at once, exchanging tokens, where it can be measured
  // (gpu::SharingProfile::ep_step); the tables by kind without EP.
  const gpu::ChunkShape sh = x.ep_r > 1 && !x.multi ? x.with_ep(shape) : shape;
  sit = x.sharings.emplace(layers, gpu::profile_sharing(sh, 3, x.req.reps, x.my_device, x.split)).first;
  const gpu::SharingProfile& sp = sit->second;
  nlohmann::json& pj = x.j["device_sharing"]["profiles"][std::to_string(layers)];
  pj["step"] = sp.step;
  if (x.ep_r > 1) pj["ep_step"] = sp.ep_step;
  pj["local_step"] = sp.local_step;
  static const char* kKinds[] = {"F", "I", "W"};
  for (int a = 0; a < 3; ++a) {
    pj["alone_ms"][kKinds[a]] = sp.alone_ms[static_cast<std::size_t>(a)];
    for (int b = 0; b < 3; ++b) {
      pj["by_kind"][kKinds[a]][kKinds[b]] = sp.by_kind[static_cast<std::size_t>(3 * a + b)];
      pj["by_kind_gpu"][kKinds[a]][kKinds[b]] = sp.by_kind_gpu[static_cast<std::size_t>(3 * a + b)];
    }
  }
  return sp;
}

// Expert parallelism: the replay launches kernel by kernel and its shards' threads meet at every
// exchange, so its ops run at the pace the EP group keeps fed back to back (the sharing profile's
// group alone) rather than at their GPU times held until enqueued: api::ep_pace_factor; 1 where not
// measured (no EP step: one GPU, several processes). In the JSON and the text once per chunk size.
double ep_pace_of(Validation& x, int layers) {
  const gpu::SharingProfile& sp = x.sharings.at(layers);
  if (sp.ep_alone_step_ms <= 0) return 1.0;  // not measured (one GPU, several processes): the ops' GPU times
  const gpu::ProfileResult& p = x.profiles.at(layers);
  const double f = api::ep_pace_factor(sp.ep_alone_step_ms, p.f_ms, p.input_grad_ms, p.w_ms);
  nlohmann::json& pj = x.j["device_sharing"]["profiles"][std::to_string(layers)];
  if (!pj.contains("ep_pace")) {
    pj["ep_pace"] = {
        {"factor", f}, {"fed_step_ms", sp.ep_alone_step_ms}, {"held_step_ms", p.f_ms + p.input_grad_ms + p.w_ms}};
    x.ep_pace_text += fmt::format(
        "  chunks of {} layer(s): the EP group's F+I+W step fed back to back {:.3f} ms against its ops held "
        "until enqueued {:.3f} ms: every op {:.3f}x\n",
        layers, sp.ep_alone_step_ms, p.f_ms + p.input_grad_ms + p.w_ms, f);
  }
  return f;
}

// The prediction's op costs: the chunk profiled (with EP shards, as they replay: stage 0's
// shards on partitions 0..ep-1 or their GPUs, exchanging tokens by the all-to-all, so that the
// op costs carry its time), shared among the ranks of a GPU, and the link probed.
// The link probe's delays the prediction takes: none with EP, whose replay launches kernel by
// kernel and whose ops run at the EP group's fed pace (ep_pace_of), which holds the gaps between them.
ReplayDelays replay_delays_of(const Validation& x) { return x.probe && x.ep_r == 1 ? x.probe->delays : ReplayDelays{}; }

// How the prediction shares a GPU among its ranks: as --sharing asks (the replay's fit where it was
// made), by the profile's step (the table printed beside the fit), or not at all (each op alone: what
// the fit is measured against).
// fit_only: the replay's fit for every two ops, ops of one kind started together too (what the
// prediction takes beside: at least the profile's figure for them, SimCosts::share_aligned).
enum class SharingAs { asked, profile_step, alone, fit_only };

// The engine's sharing for a GPU's ranks: --sharing kind: the profiled table by kind; replay: the
// fit on the chunk's replay (share_fit_of) where made; otherwise the profile's step for any two ops.
void apply_sharing(Validation& x, SimCosts& costs, int layers, const gpu::SharingProfile& sp, SharingAs how) {
  if (how == SharingAs::alone) {
    api::share_devices(costs, x.pp, x.ndev, 1.0, nullptr, x.ep_r);
    return;
  }
  std::vector<double> table;
  if (how == SharingAs::asked && x.req.sharing == "kind") table.assign(sp.by_kind.begin(), sp.by_kind.end());
  const auto f = x.share_fits.find(layers);
  const bool fitted = f != x.share_fits.end() && f->second.has_value();
  if (fitted && (how == SharingAs::asked || how == SharingAs::fit_only)) table = f->second->by_kind();
  api::share_devices(costs, x.pp, x.ndev, sp.step, table.empty() ? nullptr : &table, x.ep_r);
  // The fit comes from ops that meet at random; two of one kind started together meet kernel for
  // kernel, as the profile's side-by-side table timed them (its diagonal).
  if (fitted && how == SharingAs::asked && sp.by_kind[0] > 0)
    costs.share_aligned = {std::max(1.0, sp.by_kind[0]), std::max(1.0, sp.by_kind[4]), std::max(1.0, sp.by_kind[8])};
}

// ep_pace: with EP, every op at the EP group's fed pace (ep_pace_of), as reported; false: the ops'
// GPU times (the table printed beside).
SimCosts predicted_costs(Validation& x, const Schedule& s, int layers, const gpu::ChunkShape& shape,
                         bool ep_pace = true, SharingAs sharing = SharingAs::asked) {
  auto it = x.profiles.find(layers);
  if (it == x.profiles.end()) {
    // under mpirun: process 0 profiles the EP group in one process, the others take its figures.
    // PPSIM_EP_PROFILE=whole: the EP shards on whole GPUs as before 2026-11-28 (to show the change).
    const gpu::ChunkShape prof_shape = x.ep_r > 1 ? x.with_ep(shape) : shape;
    const char* whole = std::getenv("PPSIM_EP_PROFILE");
    const int groups = x.ep_r > 1 && whole && std::string(whole) == "whole" ? 0 : x.split;
    it = x.profiles.emplace(layers, gpu::profile_chunk(prof_shape, 3, x.req.reps, x.my_device, groups)).first;
  }
  const gpu::ProfileResult& prof = it->second;
  SimCosts costs =
      api::profiled_costs(x.cfg, s, api::ProfiledOps{prof.f_ms, prof.b_ms, prof.w_ms, prof.fb_ms, prof.input_grad_ms});
  if (x.ndev < x.slots_total) {
    const gpu::SharingProfile& sp = sharing_of(x, layers, shape);
    if (x.split > 0 && x.req.rank_speeds == "profiled") {
      auto pit = x.speeds.find(layers);
      if (pit == x.speeds.end()) {
        pit = x.speeds.emplace(layers, gpu::profile_partitions(shape, 3, x.req.reps, x.my_device, x.split)).first;
        nlohmann::json& pj = x.j["device_sharing"]["profiles"][std::to_string(layers)]["partition_alone_ms"];
        for (const auto& g : pit->second) pj.push_back({{"F", g[0]}, {"I", g[1]}, {"W", g[2]}});
      }
      // The op costs were profiled on partition 0; rank r runs on partition r / GPUs (the replay's order).
      api::scale_rank_speeds(costs, x.pp, x.ndev, pit->second, x.ep_r);
    }
    apply_sharing(x, costs, layers, sp, sharing);
    // The EP profile ran stage 0's shards at once, on this GPU when they share it.
    if (x.ep_r > 1) api::unshare_profiled_copies(costs, x.pp);
    if (x.ep_r > 1 && ep_pace) api::scale_every_rank(costs, x.pp, ep_pace_of(x, layers));
  }
  // The probe's time with the replay's delays around a message, less the bandwidth share, and the
  // replay's gap between two actions (the prediction without the delays: without_replay_delays).
  if (x.probe) api::apply_link_probe(costs, x.probe->median_us, x.probe->bytes, replay_delays_of(x));
  return costs;
}

// One schedule's replay and what it measured beside the numbers (EP figures, host, memory).
struct Measured {
  Timeline timeline;
  std::vector<Time> shard_ends, ep_waits, ep_exposed;
  gpu::ReplayHostStats host;
  gpu::ReplayMemory memory;
  int comm_sms = 0;
  std::vector<double> runs_ms;  // --replays: each replay's makespan, in the order run
};

Measured replay_once(const Validation& x, const Schedule& s, const gpu::ChunkShape& shape) {
  Measured out;
  gpu::ReplayConfig rc;
  rc.stage_shapes = {x.ep_r > 1 ? x.with_ep(shape) : shape};
  if (x.ep_r > 1) {
    rc.shard_makespans = &out.shard_ends;
    rc.ep_waits = &out.ep_waits;
    rc.ep_exposed = &out.ep_exposed;
  }
  rc.devices = x.req.devices;
  rc.transport = x.req.transport;
  rc.nccl_timeout_s = x.req.timeout_s;
  rc.sm_partitions = x.split > 0;
  gpu::apply_replay_switches(rc);
  // --launch, as the profile ran (PPSIM_REPLAY_LAUNCH is for the GPU tests). With graphs, messages
  // and pairs wait on values (no event wait left pending beside the graphs' kernels: 1.5-2 points
  // at the small shape, docs/VALIDATION.md) unless PPSIM_REPLAY_WAITS says.
  launch_as_asked(rc, x.graphs, x.graph_value_waits);
  // Graphs: the first run launches one by one (pools, libraries), the second captures, the
  // measured one launches what was captured.
  if (rc.graphs) rc.warmup_iterations = std::max(rc.warmup_iterations, 2);
  rc.host_stats = &out.host;
  rc.memory = &out.memory;
  out.comm_sms = rc.stage_shapes[0].comm_sms;
  out.timeline = gpu::replay_schedule(s, rc);
  return out;
}

// --replays N: the schedule replayed N times, each after its warm-ups; the replay of median makespan
// stands for it (one replay's makespan moves by up to 2% from one to the next on one H200), with
// every replay's makespan beside (runs_ms).
Measured replay(const Validation& x, const Schedule& s, const gpu::ChunkShape& shape) {
  std::vector<Measured> runs;
  std::vector<double> ms;
  for (int i = 0; i < x.req.replays; ++i) {
    runs.push_back(replay_once(x, s, shape));
    ms.push_back(static_cast<double>(timeline_stats(runs.back().timeline, runs.back().ep_exposed, true).makespan) /
                 1e6);
  }
  const auto median = std::find(ms.begin(), ms.end(), api::middle_run(ms));
  Measured out = std::move(runs[static_cast<std::size_t>(median - ms.begin())]);
  out.runs_ms = std::move(ms);
  return out;
}

// --sharing replay (ranks sharing a GPU in one process, no EP): before the first schedule of a chunk
// size, ZB-H2 with 4P micro-batches of that chunk is replayed as the schedules are (its F, I and W of a
// GPU's ranks beside each other), and each kind's slowdown beside another op is fitted on it
// (api::fit_share_by_kind) against the ops' profiled times alone on their partitions. The profile's
// two F+I+W steps side by side overstate the replay's: ops fed back to back keep both partitions busy.
void share_fit_of(Validation& x, int layers, const gpu::ChunkShape& shape) {
  if (x.req.sharing != "replay" || x.ndev >= x.slots_total || x.ep_r > 1 || x.multi || x.share_fits.count(layers))
    return;
  const Schedule probe = make_schedule("zb-h2", ScheduleParams{x.pp, 4 * x.pp, 0, 0});
  const SimCosts alone = predicted_costs(x, probe, layers, shape, true, SharingAs::alone);
  std::vector<api::KindShareFit> fits;
  try {
    for (int i = 0; i < x.req.replays; ++i)
      fits.push_back(api::fit_share_by_kind(probe, replay_once(x, probe, shape).timeline, alone));
  } catch (const InputError& e) {
    // ZB-H2 holds more micro-batches than most schedules: where its replay fails on the GPU (out
    // of memory), the profile's step stands for this chunk size, and the report says why.
    if (e.exit_code() != kExitGpu) throw;
    x.j["device_sharing"]["profiles"][std::to_string(layers)]["replay_fit_failed"] = e.one_line();
    x.share_fits.emplace(layers, std::nullopt);
    return;
  }
  // Each kind's factor: the median over the replays (one replay's moves by up to 0.04).
  api::KindShareFit fit = fits.front();
  for (std::size_t k = 0; k < 3; ++k) {
    std::vector<double> v;
    for (const api::KindShareFit& f : fits) v.push_back(f.factor[k]);
    fit.factor[k] = api::middle_run(v);
  }
  x.share_fits.emplace(layers, fit);
  nlohmann::json& pj = x.j["device_sharing"]["profiles"][std::to_string(layers)]["replay_fit"];
  pj = {{"schedule", "zb-h2"}, {"microbatches", 4 * x.pp}};
  static const char* kKinds[] = {"F", "I", "W"};
  for (std::size_t k = 0; k < 3; ++k) {
    pj["factor"][kKinds[k]] = fit.factor[k];
    pj["samples"][kKinds[k]] = fit.samples[k];
  }
}

// The host side (this process's ranks): enqueue time per action against the op's profiled GPU
// time; actions the GPU began before they were fully enqueued may include launch waits. Returns
// whether the replay was host-bound.
bool host_report(Validation& x, const gpu::ReplayHostStats& host, nlohmann::json& hj) {
  std::string host_line;
  hj = nlohmann::json::object();
  int actions = 0, early = 0;
  for (const auto& [kind, k] : host.by_kind) {
    if (k.actions == 0) continue;
    const double mean = k.enqueue_ms / k.actions;
    host_line += fmt::format("{}{} {:.3f} ms ({}/{} begun early)", host_line.empty() ? "" : ", ", kind, mean,
                             k.started_early, k.actions);
    hj[kind] = {{"actions", k.actions}, {"enqueue_ms_mean", mean}, {"begun_before_enqueued", k.started_early}};
    actions += k.actions;
    early += k.started_early;
  }
  if (!host_line.empty())
    x.text +=
        "  host enqueue time per action (how many the GPU began before their last kernel was enqueued, but for "
        "each rank's opening ones): " +
        host_line + "\n";
  // Once a rank's thread is ahead of its GPU (after its opening actions) it normally stays so;
  // when a quarter or more actions begin early anyway, the host fell behind its GPU and the
  // measured times include launches.
  const bool host_bound = actions > 0 && 4 * early >= actions;
  if (host_bound)
    x.text += fmt::format(
        "  HOST-BOUND: {} of {} actions began on the GPU before their last kernel was enqueued: the "
        "measured times include waits for this host's launches (a busy or slow host, or ops too "
        "short for it); compare with a run on a quiet host or larger chunks\n",
        early, actions);
  return host_bound;
}

// EP: the overlap model on the same profile's sub-ops (dispatch and combine timed through our
// all-to-all), with the same sharing, link and speeds: its exposed communication and F&B pairs
// against the measured ones. The communication's SM share is comm_sms of the SMs one rank runs on.
std::vector<ValidationRow> overlap_report(Validation& x, const std::string& name, const Schedule& s,
                                          const SimCosts& costs, int layers, const Measured& meas,
                                          const TimelineStats& meas_stats, double target) {
  SimCosts oc = costs;
  const int rank_sms = x.split > 0 ? x.split_sms : x.device_sms > 0 ? x.device_sms : 132;
  api::profiled_overlap_costs(oc, x.profiles.at(layers).sub_ops_ms, layers,
                              std::min(0.9, static_cast<double>(meas.comm_sms) / rank_sms));
  SimOptions opt;
  opt.record_timeline = true;
  const SimResult ov = simulate(s, oc, opt);
  std::vector<Time> ov_exposed;
  for (const auto& rs : ov.ranks) ov_exposed.push_back(rs.exposed_comm);
  std::vector<ValidationRow> rows = compare_timelines(timeline_stats(ov.timeline, ov_exposed), meas_stats);
  x.text += render_validation_table(
      fmt::format("{}, the overlap model on the profiled sub-ops (communication on {} of {} SMs)", name, meas.comm_sms,
                  rank_sms),
      rows, target);
  return rows;
}

std::vector<double> in_ms(const std::vector<Time>& v) {
  std::vector<double> out;
  for (Time t : v) out.push_back(static_cast<double>(t) / 1e6);
  return out;
}

void ep_report(Validation& x, const Measured& meas, nlohmann::json& r) {
  std::string waits;
  for (std::size_t i = 0; i < meas.ep_waits.size(); ++i)
    waits +=
        fmt::format("{}rank {} {:.3f} ms", waits.empty() ? "" : ", ", i, static_cast<double>(meas.ep_waits[i]) / 1e6);
  std::string ends;
  for (std::size_t e = 1; e < meas.shard_ends.size(); ++e)
    ends += fmt::format("{}shard {}: {:.3f} ms", ends.empty() ? "" : ", ", e,
                        static_cast<double>(meas.shard_ends[e]) / 1e6);
  const bool ours = x.a2a == ep::A2aBackend::ours;
  const std::string how = ours ? fmt::format("ours on {} SMs", meas.comm_sms)
                               : std::string("NCCL's grouped send/recv (its own channels; comm_sms not applied)");
  x.text += fmt::format(
      "  expert parallelism: {} shards of every stage{}, all-to-all: {}; the table is "
      "shard 0's pipeline; the other shards' makespans: {}. The prediction's op costs were "
      "profiled on stage 0's {} shards exchanging tokens the same way, started together{}. "
      "Measured exposed comm: the rank's all-to-all time while none of its streams computed "
      "(inside its ops, so taken out of its compute), of which waiting for peers' rows{}: {}; "
      "the op-level prediction has none, the overlap model's is its own\n",
      x.ep_r, x.multi ? fmt::format(" over {} processes (CUDA IPC)", x.world.size) : std::string(), how,
      ends.empty() ? "-" : ends, x.ep_r, x.multi ? " (in one process: process 0's, on the GPUs it sees)" : "",
      ours ? "" : " (not measured for NCCL)", waits);
  const auto& se = meas.shard_ends;
  r["expert_parallelism"] = {{"shards", x.ep_r},
                             {"a2a", ep::a2a_backend_name(x.a2a)},
                             {"exposed_comm_ms", in_ms(meas.ep_exposed)},
                             {"waiting_for_peers_ms", in_ms(meas.ep_waits)},
                             {"other_shards_makespan_ms",  // shard 1 on (shard 0's is the table's)
                              in_ms(std::vector<Time>(se.begin() + std::min<std::size_t>(1, se.size()), se.end()))}};
}

double mib(double b) { return b / (1024.0 * 1024.0); }

// Device memory, measured, beside the cost model's prediction for the same ranks (the replay
// holds no embedding or head and runs no optimizer step: those parts are left out of both).
nlohmann::json memory_report(Validation& x, const Schedule& s, const SimResult& pred, const gpu::ReplayMemory& mem) {
  const std::vector<api::ReplayMemoryPrediction> predicted_mem = api::replay_memory(x.req.config, x.req.sets, s, &pred);
  nlohmann::json mj = nlohmann::json::array();
  for (const auto& rm : mem.ranks) {
    if (rm.shard != 0) continue;  // EP shards hold the same as shard 0's ranks
    const std::size_t r = static_cast<std::size_t>(rm.rank);
    const api::ReplayMemoryPrediction* pm = r < predicted_mem.size() ? &predicted_mem[r] : nullptr;
    if (pm) {
      const double measured = static_cast<double>(rm.total());
      x.text += fmt::format(
          "  memory rank {} peak: predicted {:.1f} MiB (weights {:.1f}, grads {:.1f}, activations {:.1f} "
          "in {} chunk(s), buffers {:.1f}, workspace {:.1f}), measured {:.1f} MiB, error {:+.1f}%\n",
          rm.rank, mib(pm->total), mib(pm->parts.weights), mib(pm->parts.gradients), mib(pm->parts.activations),
          pm->parts.chunks, mib(pm->parts.comm_buffers), mib(pm->parts.workspace), mib(measured),
          measured > 0 ? 100.0 * (pm->total - measured) / measured : 0.0);
    }
    int predicted_peak = 0;
    if (r < pred.timeline.activations.size())
      for (const auto& smp : pred.timeline.activations[r]) predicted_peak = std::max(predicted_peak, smp.activations);
    x.text += fmt::format(
        "  memory rank {} (GPU {}): weights {:.1f} MiB, weight grads {:.1f} MiB, activations "
        "{:.1f} MiB (micro-batch sets in use at most, in program order, {:.1f} MiB, one "
        "micro-batch after its forward {:.1f} MiB; backward workspace {:.1f} MiB; {:.1f} MiB "
        "allocated, the host running ahead; the simulator's peak: {} micro-batch(es) in flight)\n",
        rm.rank, rm.device, mib(rm.weights), mib(rm.weight_grads), mib(rm.activations()), mib(rm.activations_peak),
        mib(rm.microbatch_bytes), mib(rm.workspace), mib(rm.activations_allocated), predicted_peak);
    mj.push_back({{"rank", rm.rank},
                  {"device", rm.device},
                  {"weights_bytes", rm.weights},
                  {"weight_grads_bytes", rm.weight_grads},
                  {"activations_peak_bytes", rm.activations_peak},
                  {"microbatch_bytes", rm.microbatch_bytes},
                  {"workspace_bytes", rm.workspace},
                  {"activations_allocated_bytes", rm.activations_allocated},
                  {"activations_bytes", rm.activations()},
                  {"predicted_peak_microbatches", predicted_peak}});
    if (pm)
      mj.back()["predicted"] = {{"weights", pm->parts.weights},         {"gradients", pm->parts.gradients},
                                {"activations", pm->parts.activations}, {"comm_buffers", pm->parts.comm_buffers},
                                {"workspace", pm->parts.workspace},     {"chunks", pm->parts.chunks}};
  }
  nlohmann::json dj = nlohmann::json::array();
  for (const auto& d : mem.devices) {
    x.text += fmt::format(
        "  memory GPU {}: {:.1f} MiB used before the replay, {:.1f} MiB after its measured run "
        "(cudaMemGetInfo; +{:.1f} MiB: chunks, transport buffers, workspaces)\n",
        d.device, mib(d.used_before), mib(d.used_after),
        mib(d.used_after > d.used_before ? d.used_after - d.used_before : 0));
    dj.push_back({{"device", d.device}, {"used_before_bytes", d.used_before}, {"used_after_bytes", d.used_after}});
  }
  return {{"ranks", mj}, {"devices", dj}};
}

// Whether the co-run model applies: asked for (--co-run sustained, full or held); one rank per GPU, two
// or more GPUs; the copy-engine transports (the profile's messages are copy-engine copies, as the
// peer transport's and CUDA IPC's are; NCCL's kernels take SMs, not measured); whole-action costs
// (no EP). Under mpirun/srun: every process on one node and every GPU visible to process 0, which
// profiles beside the next GPU while the other processes wait (corun_of); decided by all together.
bool corun_applies(const Validation& x) {
  const launch::TransportKind copies = x.multi ? launch::TransportKind::Ipc : launch::TransportKind::Peer;
  const bool asked =
      x.req.co_run != "off" && x.ep_r == 1 && x.ndev >= 2 && x.slots_total <= x.ndev && x.transport == copies;
  if (!x.multi) return asked && gpu::device_count() >= 2;
  return asked && x.world.local_size == x.world.size && !mpi::any_of(x.world.rank == 0 && gpu::device_count() < 2);
}

// The co-run profile's duty levels in the text and in `pj` (its JSON).
void corun_duty_report(Validation& x, const gpu::CorunProfile& p, nlohmann::json& pj) {
  if (p.duty.front().duty_idle <= 0) {
    x.text += "  duty levels: not measured (the driver has no stream memory operations to release each op)\n";
    return;
  }
  x.text += fmt::format(
      "  the sustained runs at lower duty (idle gaps between ops; {:.0f} ms of profile), F / I / W "
      "beside the idle GPU | beside the busy one:\n",
      p.duty_ms);
  pj["duty_levels"] = nlohmann::json::array();
  static const char* kKinds[] = {"F", "I", "W"};
  for (std::size_t l = 0; l < p.duty.size(); ++l) {
    const gpu::CorunDutyLevel& d = p.duty[l];
    x.text += fmt::format(
        "    duty {:.2f}: ran at {:.3f}, {:.3f}x / {:.3f}x / {:.3f}x, SM clock {:.0f} MHz | ran at {:.3f}, {:.3f}x / "
        "{:.3f}x / {:.3f}x, {:.0f} MHz\n",
        gpu::kCorunDuties[l], d.duty_idle, d.idle[0], d.idle[1], d.idle[2], d.clock_idle_mhz, d.duty_busy, d.busy[0],
        d.busy[1], d.busy[2], d.clock_busy_mhz);
    nlohmann::json lj = {{"target", gpu::kCorunDuties[l]},
                         {"duty", {{"idle", d.duty_idle}, {"busy", d.duty_busy}}},
                         {"clock_mhz", {{"idle", d.clock_idle_mhz}, {"busy", d.clock_busy_mhz}}}};
    for (std::size_t k = 0; k < 3; ++k) {
      lj["idle"][kKinds[k]] = d.idle[k];
      lj["busy"][kKinds[k]] = d.busy[k];
    }
    pj["duty_levels"].push_back(lj);
  }
  pj["duty_profile_ms"] = p.duty_ms;
}

// The co-run profile of the chunk (GPU my_device beside the next GPU), profiled once per chunk
// size; its figures in the text and the JSON.
const gpu::CorunProfile& corun_of(Validation& x, int layers, const gpu::ChunkShape& shape) {
  auto it = x.coruns.find(layers);
  if (it != x.coruns.end()) return it->second;
  const int peer = (x.my_device + 1) % gpu::device_count();
  gpu::CorunProfile measured{};
  if (!x.multi || x.world.rank == 0) measured = gpu::profile_corun(shape, 3, x.req.reps, x.my_device, peer);
  if (x.multi) {  // the others wait here, their GPUs idle, and take process 0's figures
    static_assert(std::is_trivially_copyable_v<gpu::CorunProfile>);
    mpi::bcast(&measured, sizeof measured, 0);
  }
  it = x.coruns.emplace(layers, measured).first;
  const gpu::CorunProfile& p = it->second;
  auto three = [](const std::array<double, 3>& v) {
    return fmt::format("{:.3f}x / {:.3f}x / {:.3f}x", v[0], v[1], v[2]);
  };
  x.text += fmt::format(
      "co-run profile, chunks of {} layer(s), GPU {} beside GPU {} (each op followed by a {}-byte message to the "
      "other GPU; against the op alone, F / I / W {:.3f} / {:.3f} / {:.3f} ms):\n"
      "  the other GPU idle: {} sustained ({} held); running F, I, W and sending its messages here: {} sustained "
      "({} held); SM clock over the sustained runs {:.0f} MHz beside the idle GPU, {:.0f} MHz beside the busy "
      "one\n",
      layers, p.device, p.peer, p.message_bytes, p.alone_ms[0], p.alone_ms[1], p.alone_ms[2], three(p.idle),
      three(p.idle_held), three(p.busy), three(p.busy_held), p.clock_idle_mhz, p.clock_busy_mhz);
  nlohmann::json& pj = x.j["corun"]["profiles"][std::to_string(layers)];
  static const char* kKinds[] = {"F", "I", "W"};
  for (std::size_t k = 0; k < 3; ++k) {
    pj["alone_ms"][kKinds[k]] = p.alone_ms[k];
    pj["idle"][kKinds[k]] = p.idle[k];
    pj["busy"][kKinds[k]] = p.busy[k];
    pj["idle_held"][kKinds[k]] = p.idle_held[k];
    pj["busy_held"][kKinds[k]] = p.busy_held[k];
  }
  pj["clock_mhz"] = {{"idle", p.clock_idle_mhz}, {"busy", p.clock_busy_mhz}};
  pj["message_bytes"] = p.message_bytes;
  pj["gpus"] = {p.device, p.peer};
  corun_duty_report(x, p, pj);
  return it->second;
}

// The co-run factors --co-run asks for: sustained = the sustained runs at the rank's own duty
// (the 100% run and each measured duty level); full = the 100% run at every duty; held = the held
// bursts.
api::CorunFactors corun_factors(const gpu::CorunProfile& p, const std::string& mode) {
  if (mode == "held") return api::CorunFactors{p.idle_held, p.busy_held, {}, {}};
  api::CorunFactors f{p.idle, p.busy, {}, {}};
  if (mode != "sustained") return f;
  f.idle_by_duty.push_back({1.0, p.idle});
  f.busy_by_duty.push_back({1.0, p.busy});
  for (const gpu::CorunDutyLevel& l : p.duty) {
    if (l.duty_idle > 0) f.idle_by_duty.push_back({l.duty_idle, l.idle});
    if (l.duty_busy > 0) f.busy_by_duty.push_back({l.duty_busy, l.busy});
  }
  return f;
}

std::vector<Time> exposed_of(const SimResult& sr) {
  std::vector<Time> e;
  for (const auto& rs : sr.ranks) e.push_back(rs.exposed_comm);
  return e;
}

// A prediction's makespan row against the measured timeline's.
ValidationRow makespan_row(const SimResult& sr, const TimelineStats& meas) {
  return compare_timelines(timeline_stats(sr.timeline, exposed_of(sr)), meas).front();
}

// One line of a makespan table: the summary and the tables printed under it.
std::string makespan_line(const std::string& name, const ValidationRow& r, const char* tail = "") {
  return fmt::format("{:<17} {:>14.3f} {:>13.3f} {:>+7.1f}%{}\n", name, r.predicted, r.measured, 100.0 * r.error, tail);
}

// The prediction the report gives, from `costs`: the co-run model where it applies, the NCCL
// kernels' share with that transport, else the plain run.
SimResult predict(Validation& x, const Schedule& s, const SimCosts& costs, int layers, const gpu::ChunkShape& shape,
                  const std::string& co_run) {
  if (corun_applies(x)) return api::simulate_corun(s, costs, corun_factors(corun_of(x, layers, shape), co_run)).result;
  if (x.nccl) return api::simulate_nccl(s, costs, x.nccl->share);
  SimOptions opt;
  opt.record_timeline = true;
  return simulate(s, costs, opt);
}

// The same prediction without the replay's own delays that the probe measured (around each
// message, between actions): for the JSON and the closing table, beside the reported one.
void without_replay_delays(Validation& x, const std::string& name, const Schedule& s, SimCosts costs, int layers,
                           const gpu::ChunkShape& shape, const TimelineStats& meas_stats, nlohmann::json& r) {
  const ReplayDelays d = replay_delays_of(x);
  if (d.gap_us <= 0 && d.send_us <= 0 && d.receive_us <= 0) return;
  api::apply_link_probe(costs, x.probe->median_us, x.probe->bytes);
  const SimResult w = predict(x, s, costs, layers, shape, x.req.co_run);
  const ValidationRow w0 = makespan_row(w, meas_stats);
  r["replay_delays"] = {{"predicted_without_ms", w0.predicted}, {"error_without", w0.error}};
  x.delays_summary += makespan_line(name, w0);
}

// One schedule: predicted, replayed, compared; its tables, lines and JSON.
void validate_one(Validation& x, const std::string& name, const Schedule& s) {
  const int layers = x.c.model.layers / s.stages_per_pipe;
  const gpu::ChunkShape shape = chunk_shape(x.c, layers, true);
  share_fit_of(x, layers, shape);
  const SimCosts costs = predicted_costs(x, s, layers, shape);
  SimOptions opt;
  opt.record_timeline = true;
  SimResult pred = simulate(s, costs, opt);
  std::optional<SimResult> without_nccl;  // with --transport nccl: the prediction without its kernels' share
  if (x.nccl) {
    without_nccl = std::move(pred);
    pred = api::simulate_nccl(s, costs, x.nccl->share);
  }
  std::optional<api::CorunResult> corun;
  std::optional<SimResult> full;  // beside the duty-aware model: the 100%-duty form's prediction
  if (corun_applies(x)) {
    const gpu::CorunProfile& p = corun_of(x, layers, shape);
    corun = api::simulate_corun(s, costs, corun_factors(p, x.req.co_run));
    std::swap(pred, corun->result);  // the co-run prediction is the one reported; corun keeps the plain one
    if (x.req.co_run == "sustained") full = api::simulate_corun(s, costs, corun_factors(p, "full")).result;
  }
  nlohmann::json r_unpaced;
  std::optional<SimResult> unpaced;  // EP: at the ops' GPU times (without the group's fed pace)
  if (x.ep_r > 1 && x.ndev < x.slots_total && x.sharings.at(layers).ep_alone_step_ms > 0)
    unpaced = simulate(s, predicted_costs(x, s, layers, shape, false), opt);
  Measured meas = replay(x, s, shape);
  const TimelineStats meas_stats = timeline_stats(meas.timeline, meas.ep_exposed, /*exposed_inside_ops=*/true);
  if (unpaced) {
    const ValidationRow u = makespan_row(*unpaced, meas_stats);
    r_unpaced = {{"predicted_ms", u.predicted}, {"error", u.error}};
    x.ep_pace_summary += makespan_line(name, u);
  }
  const auto rows = compare_timelines(timeline_stats(pred.timeline, exposed_of(pred)), meas_stats);
  const double target = x.req.target > 0 ? x.req.target : (x.ndev == 1 ? 0.10 : 0.05);
  x.text += render_validation_table(name, rows, target);
  if (meas.runs_ms.size() > 1) {
    std::vector<std::string> each;
    for (double v : meas.runs_ms) each.push_back(fmt::format("{:.3f}", v));
    x.text += fmt::format("  measured: the replay of median makespan of {} ({} ms; --replays)\n", each.size(),
                          fmt::join(each, ", "));
  }
  std::vector<ValidationRow> overlap_rows;
  if (x.ep_r > 1) overlap_rows = overlap_report(x, name, s, costs, layers, meas, meas_stats, target);
  nlohmann::json hj;
  const bool host_bound = host_report(x, meas.host, hj);
  nlohmann::json r = validation_json(name, rows);
  if (x.ep_r > 1) ep_report(x, meas, r);
  if (!r_unpaced.is_null()) r["expert_parallelism"]["without_pace"] = r_unpaced;
  const nlohmann::json memory = memory_report(x, s, pred, meas.memory);
  x.text += "\n";
  x.summary += makespan_line(name, rows.front(), host_bound ? "  host-bound" : "");
  const gpu::ProfileResult& prof = x.profiles.at(layers);
  r["profile_ms"] = {{"F", prof.f_ms}, {"B", prof.b_ms}, {"W", prof.w_ms}, {"FB", prof.fb_ms}};
  r["layers_per_chunk"] = layers;
  r["measured_runs_ms"] = meas.runs_ms;
  r["host"] = hj;
  r["host_bound"] = host_bound;
  r["memory_measured"] = memory;
  if (!overlap_rows.empty()) r["overlap_model"] = validation_json(name, overlap_rows);
  without_replay_delays(x, name, s, costs, layers, shape, meas_stats, r);
  if (auto f = x.share_fits.find(layers); f != x.share_fits.end() && f->second) {
    // --sharing replay: the profile's step for any two ops, beside
    const SimResult u =
        predict(x, s, predicted_costs(x, s, layers, shape, true, SharingAs::profile_step), layers, shape, x.req.co_run);
    const ValidationRow u0 = makespan_row(u, meas_stats);
    r["sharing_fit"] = {{"predicted_without_ms", u0.predicted}, {"error_without", u0.error}};
    x.sharing_summary += makespan_line(name, u0);
    const SimResult a =
        predict(x, s, predicted_costs(x, s, layers, shape, true, SharingAs::fit_only), layers, shape, x.req.co_run);
    const ValidationRow a0 = makespan_row(a, meas_stats);
    r["sharing_fit"]["predicted_fit_only_ms"] = a0.predicted;
    r["sharing_fit"]["error_fit_only"] = a0.error;
    x.aligned_summary += makespan_line(name, a0);
  }
  if (without_nccl) {
    const ValidationRow n0 = makespan_row(*without_nccl, meas_stats);
    r["nccl_share"] = {{"predicted_without_ms", n0.predicted}, {"error_without", n0.error}};
    x.nccl_summary += makespan_line(name, n0);
  }
  if (corun) {
    const ValidationRow p0 = makespan_row(corun->result, meas_stats);  // the plain prediction
    r["corun"] = {{"rounds", corun->rounds},
                  {"predicted_without_ms", p0.predicted},
                  {"error_without", p0.error},
                  {"duty", corun->duty}};
    x.corun_summary += makespan_line(name, p0);
    x.text += fmt::format("co-run model (--co-run {}, {} rounds): each rank's duty (compute over makespan) {:.3f}\n\n",
                          x.req.co_run, corun->rounds, fmt::join(corun->duty, ", "));
    if (full) {
      const ValidationRow f0 = makespan_row(*full, meas_stats);
      r["corun"]["predicted_full_ms"] = f0.predicted;
      r["corun"]["error_full"] = f0.error;
      x.corun_full_summary += makespan_line(name, f0);
    }
  }
  x.j["results"].push_back(r);
  x.names.push_back(name);
  x.keep.push_back(std::move(pred.timeline));
  x.keep.push_back(std::move(meas.timeline));
}

void sharing_text(Validation& x) {
  x.text += x.split ? fmt::format(
                          "device sharing: {} ranks on {} GPU(s), each on its own {} of the {} SMs (green "
                          "contexts; op costs profiled on one such share)\n",
                          x.slots_total, x.ndev, x.split_sms, x.device_sms)
                    : fmt::format("device sharing: {} ranks on {} GPU(s){}, time-slicing all SMs\n", x.slots_total,
                                  x.ndev, x.split_note.empty() ? "" : " (" + x.split_note + ")");
  for (const auto& [layers, sp] : x.sharings) {
    x.text += fmt::format(
        "  chunks of {} layer(s): two F+I+W steps at once each take {:.2f}x as long as alone; an op "
        "beside another (row: the op; column: the op beside it; each fed by its own host thread "
        "as in the replay; in brackets all enqueued before either starts):\n",
        layers, sp.step);
    if (sp.ep_step > 0)
      x.text += fmt::format(
          "    (expert parallelism: that step is the stages' EP groups at once, each shard on its partition and "
          "exchanging tokens, against one group alone; without EP, two chunks {:.2f}x; the table is without EP)\n",
          sp.local_step);
    x.text += fmt::format("    {:<4}{:>10}{:>7}{:>7}{:>7}\n", "", "alone ms", "F", "I", "W");
    const char* kinds[] = {"F", "I", "W"};
    for (std::size_t k = 0; k < 3; ++k)
      x.text += fmt::format("    {:<4}{:>10.3f}{:>7.2f}{:>7.2f}{:>7.2f}   (kernels alone: {:.2f} {:.2f} {:.2f})\n",
                            kinds[k], sp.alone_ms[k], sp.by_kind[3 * k], sp.by_kind[3 * k + 1], sp.by_kind[3 * k + 2],
                            sp.by_kind_gpu[3 * k], sp.by_kind_gpu[3 * k + 1], sp.by_kind_gpu[3 * k + 2]);
    if (auto pit = x.speeds.find(layers); pit != x.speeds.end()) {
      x.text += "    alone on each partition, F / I / W ms:";
      for (std::size_t g = 0; g < pit->second.size(); ++g)
        x.text += fmt::format("{} {}: {:.3f} / {:.3f} / {:.3f}", g ? ";" : "", g, pit->second[g][0], pit->second[g][1],
                              pit->second[g][2]);
      x.text += " (each rank's op times scaled by its partition's against partition 0's; --rank-speeds equal: not)\n";
    }
  }
  for (const auto& [layers, f] : x.share_fits)
    x.text +=
        f ? fmt::format(
                "  chunks of {} layer(s), fitted on {} ZB-H2 replay(s) of {} micro-batches (each kind's median): an op "
                "beside another takes F {:.2f}x, I {:.2f}x, W {:.2f}x as long as alone ({}, {}, {} actions)\n",
                layers, x.req.replays, 4 * x.pp, f->factor[0], f->factor[1], f->factor[2], f->samples[0], f->samples[1],
                f->samples[2])
          : fmt::format(
                "  chunks of {} layer(s): the ZB-H2 replay for the fit failed ({}); the profile's "
                "step stands for them\n",
                layers,
                x.j["device_sharing"]["profiles"][std::to_string(layers)]["replay_fit_failed"].get<std::string>());
  x.text += x.req.sharing == "kind" ? "  the prediction shares each GPU by the tables (--sharing kind)\n"
            : x.share_fits.empty()
                ? "  the prediction shares each GPU by the step figure (--sharing kind: by the tables)\n"
                : "  the prediction shares each GPU by the replay's fit, two ops of one kind started together at "
                  "least by the table's figure beside their kind (--sharing replay; the profile's step and the fit "
                  "alone: printed below)\n";
}

// The table report's closing lines: the probe, the transport, device sharing, the summary.
void closing_text(Validation& x, const std::optional<LinkProbe>& probe_after) {
  if (x.probe)
    x.text += fmt::format(
        "link probe: median transfer {:.1f} us over {} messages of {} bytes (gpipe, M={}; the middle "
        "of three replays: {:.1f} us){}; the replay's own delays: {:.1f} us from a producer's end to its "
        "copy, {:.1f} us from an arrival to a waiting consumer's start, {:.1f} us between two actions "
        "of a rank; {}\n",
        x.probe->median_us, x.probe->transfers, x.probe->bytes, 2 * x.pp, fmt::join(x.probe->runs_us, ", "),
        probe_after ? fmt::format(", {:.1f} us when probed again after the schedules", probe_after->median_us)
                    : std::string(),
        x.probe->delays.send_us, x.probe->delays.receive_us, x.probe->delays.gap_us,
        x.ep_r > 1 ? "the prediction's link latency is the transfer less the bandwidth share (with EP the ops run "
                     "at the EP group's pace, which holds the gaps; --no-link-probe: the config's link)"
                   : "the prediction's link latency is the transfer with both delays less the bandwidth share, and "
                     "each action starts no earlier than the gap after its rank's previous one (the table "
                     "\"without the replay's delays\": the transfer alone, no gap; --no-link-probe: the config's "
                     "link)");
  if (x.probe && x.copy_us > 0)
    x.text += fmt::format(
        "standalone copy of one message ({} bytes, {}): {:.1f} us; the replay's median is {:.2f}x that\n",
        x.probe->bytes, x.ndev > 1 && !x.multi && x.probe_devices != 1 ? "GPU 0 to GPU 1, peer copy" : "within the GPU",
        x.copy_us, x.probe->median_us / x.copy_us);
  if (x.multi)
    x.text += x.ep_r > 1 ? fmt::format(
                               "processes: {} started by {}, one GPU each; EP shard e of rank r replayed by process "
                               "(r * {} + e) % {}\n",
                               x.world.size, x.world.launcher, x.ep_r, x.world.size)
                         : fmt::format("processes: {} started by {}, one GPU each; rank r replayed by process r % {}\n",
                                       x.world.size, x.world.launcher, x.world.size);
  x.text += fmt::format("transport: {}\n", x.transport == launch::TransportKind::Peer
                                               ? "peer (copy-engine peer copies, ordered by CUDA events)"
                                           : x.transport == launch::TransportKind::Ipc
                                               ? "ipc (copy-engine copies into CUDA IPC memory of the peer process)"
                                               : "nccl (one communicator, one message order on every process)");
  if (x.nccl)
    x.text += fmt::format(
        "NCCL kernels: an action lasts its time alone plus {:.3f} of its time beside a resident send or receive "
        "kernel of its GPU (each GPU's NCCL stream runs its messages in order, a receive spinning from when the "
        "stream frees), fitted from the link probe's {} F and B actions against their one-layer profile\n",
        x.nccl->share, x.nccl->samples);
  x.text += x.graphs ? fmt::format(
                           "launch: graphs (each action's kernels one CUDA graph launch, as the profile timed "
                           "them; {} waits)\n",
                           x.waits)
                     : "launch: streams (one launch per kernel)\n";
  if (x.j.contains("launch_note")) x.text += x.j["launch_note"].get<std::string>() + "\n";
  if (x.ndev < x.slots_total) sharing_text(x);
  x.text += "summary (makespan):\n" + x.summary;
  if (!x.corun_summary.empty())
    x.text += fmt::format("\nwithout the co-run model (--co-run off predicts so; the above: --co-run {}):\n{}",
                          x.req.co_run, x.corun_summary);
  if (!x.corun_full_summary.empty())
    x.text += fmt::format("\nat 100% duty (--co-run full: the sustained factors whatever a rank's duty):\n{}",
                          x.corun_full_summary);
  if (!x.nccl_summary.empty()) x.text += "\nwithout the NCCL kernels' share (the above has it):\n" + x.nccl_summary;
  if (!x.sharing_summary.empty())
    x.text +=
        "\nwith the sharing profile's step instead of the replay's fit (--sharing uniform):\n" + x.sharing_summary;
  if (!x.aligned_summary.empty())
    x.text +=
        "\nwith the replay's fit for ops of one kind started together too (not the profile's figure beside "
        "their kind):\n" +
        x.aligned_summary;
  if (!x.ep_pace_text.empty())
    x.text +=
        "\nexpert parallelism: the ops at the EP group's pace (kernel by kernel, its shards' threads meeting "
        "at every exchange), measured before the replays:\n" +
        x.ep_pace_text;
  if (!x.ep_pace_summary.empty())
    x.text += "\nwithout that pace (the ops' GPU times held until enqueued):\n" + x.ep_pace_summary;
  if (!x.delays_summary.empty())
    x.text += fmt::format(
        "\nwithout the replay's delays (the link probe's: before and after each message's copy, between two "
        "actions; the above has them):\n{}",
        x.delays_summary);
  for (const auto& sk : x.j["skipped"])
    x.text += fmt::format("skipped {}: {}\n", sk["schedule"].get<std::string>(), sk["reason"].get<std::string>());
}

}  // namespace

ValidateOutcome validate(const ValidateRequest& req) {
  // Each rank has four or more streams (compute, pair, staging, transport): with CUDA's default
  // of 8 hardware queues per GPU, streams of different ranks share a queue, and a transfer that
  // waits for its producer there holds back the other rank's kernels behind it. Up to 32 queues,
  // read when the CUDA context is made, so before any CUDA call (a value the user set stays).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  // Under mpirun/srun every process runs this same command: each replays its share of the ranks
  // on its GPU (one GPU per process), and process 0 prints and writes the results.
  const mpi::World& world = mpi::init_if_launched();
  Validation x(req, load_config(req.config, req.sets), world);
  plan(x);
  const std::vector<std::pair<std::string, const Family*>> items = what_to_replay(x);
  x.j["config"] = req.config;
  x.j["gpu"] = gpu::device_name(x.my_device);
  if (x.multi) x.j["processes"] = {{"count", world.size}, {"launcher", world.launcher}};
  x.j["transport"] = launch::transport_name(x.transport);
  x.j["results"] = nlohmann::json::array();
  x.j["skipped"] = nlohmann::json::array();
  plan_sharing(x);
  const gpu::ChunkShape one_layer = chunk_shape(x.c, 1, true);  // what the link probe runs
  probe_links(x, one_layer);
  x.summary = fmt::format("{:<17} {:>14} {:>13} {:>8}\n", "schedule", "predicted ms", "measured ms", "error");
  for (const auto& [name, fam] : items)
    if (const std::optional<Schedule> s = schedule_of(x, name, fam)) validate_one(x, name, *s);
  std::optional<LinkProbe> probe_after;
  if (x.probe) {
    probe_after = probe_link(x.pp, one_layer, x.probe_devices, req.transport, x.split > 0, req.timeout_s, x.graphs,
                             x.graph_value_waits);
    if (probe_after) x.j["link_probe"]["median_us_after"] = probe_after->median_us;
  }
  closing_text(x, probe_after);
  ValidateOutcome out;
  out.reporter = world.rank == 0;
  out.json = std::move(x.j);
  out.text = std::move(x.text);
  out.names = std::move(x.names);
  for (std::size_t i = 0; i + 1 < x.keep.size(); i += 2) {
    out.predicted.push_back(std::move(x.keep[i]));
    out.measured.push_back(std::move(x.keep[i + 1]));
  }
  return out;
}

std::string validate_trace(const ValidateOutcome& out) {
  std::vector<NamedTimeline> named;
  for (std::size_t i = 0; i < out.names.size(); ++i) {
    named.push_back({out.names[i] + " predicted", &out.predicted[i]});
    named.push_back({out.names[i] + " measured", &out.measured[i]});
  }
  return render_trace(named);
}

}  // namespace ppsim::api
