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

std::optional<LinkProbe> probe_link(int pp, const gpu::ChunkShape& shape, int devices, const std::string& transport,
                                    bool sm_partitions, double timeout_s) {
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
  // Three replays, each giving its median transfer; the middle one is kept. A replay now and then
  // runs slow as a whole (seen: a first probe of 1.4 ms per message where the others gave 20 us),
  // and one such probe would stand for every transfer of every prediction.
  LinkProbe p;
  for (int run = 0; run < 3; ++run) {
    const Timeline t = gpu::replay_schedule(s, rc);
    std::vector<Time> d;
    for (const auto& tr : t.transfers) {
      d.push_back(tr.end - tr.start);
      p.bytes = std::max(p.bytes, tr.bytes);
    }
    if (d.empty()) return std::nullopt;
    std::sort(d.begin(), d.end());
    p.runs_us.push_back(static_cast<double>(d[d.size() / 2]) / 1e3);
    p.transfers = d.size();
  }
  p.median_us = api::middle_run(p.runs_us);
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

ValidateOutcome validate(const ValidateRequest& req) {
  // Each rank has four or more streams (compute, pair, staging, transport): with CUDA's default
  // of 8 hardware queues per GPU, streams of different ranks share a queue, and a transfer that
  // waits for its producer there holds back the other rank's kernels behind it. Up to 32 queues,
  // read when the CUDA context is made, so before any CUDA call (a value the user set stays).
  setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
  // Under mpirun/srun every process runs this same command: each replays its share of the ranks
  // on its GPU (one GPU per process), and process 0 prints and writes the results.
  const mpi::World& world = mpi::init_if_launched();
  const ModelConfig cfg = load_config(req.config, req.sets);
  const bool multi = world.size > 1;
  // Refuse a transport that cannot reach the peers before any GPU work.
  const launch::TransportKind transport =
      launch::choose_transport(req.transport, world.size, multi ? world.local_size : 1);
  if (!req.schedule_file.empty() && !req.schedules.empty())
    throw InputError("give --schedule or --schedule-file, not both", {}, kExitUsage);
  const ModelConfigData& c = *cfg.data;
  int pp = 0, m = 0, v = 0;
  apply_config_parallel(cfg, pp, m, v);
  // Expert parallelism (MoE, parallel.ep > 1, --ep-replay): the replay runs every pipeline rank
  // as ep shards (docs/GPU.md, "Expert parallelism in the replay"), shard (r, e) on GPU
  // (r * ep + e) % GPUs in one process, or in process (r * ep + e) % processes under mpirun; the
  // prediction simulates shard 0's pipeline, its ranks on their GPUs. Opt-in (--ep-replay); its
  // deadlocks of sessions 5-7 ended with the host handshake (EpGroupSync, docs/VALIDATION.md).
  const int ep_r = req.ep_replay && c.model.moe.enabled() && c.parallel.ep > 1 ? c.parallel.ep : 1;
  const ep::A2aBackend a2a = ep::parse_a2a_backend(req.a2a);
  // Refusals that need no GPU: what the flags and the config say cannot run.
  if (a2a == ep::A2aBackend::nccl && ep_r == 1)
    throw InputError(
        "--a2a nccl: there is no all-to-all to run: it moves tokens only with --ep-replay on an MoE "
        "config with parallel.ep > 1",
        {}, kExitUsage);
  if (ep_r > 1)
    if (const std::string why = launch::ep_launch_problem(world.size, multi ? world.local_size : 1, transport);
        !why.empty())
      throw InputError(why, {}, kExitUsage);
  if (a2a == ep::A2aBackend::nccl && !multi && req.devices > 0)  // the GPUs asked for, whatever is present
    if (const std::string why = ep::nccl_a2a_problem(ep::place_in_process(pp, ep_r, req.devices)); !why.empty())
      throw InputError(why, {}, kExitUsage);
  require_gpu("validate");
  if (multi && req.devices > 0 && req.devices != world.size)
    throw InputError(fmt::format("--devices {} with {} processes: under {} each process uses one GPU (leave "
                                 "--devices out)",
                                 req.devices, world.size, world.launcher),
                     {}, kExitUsage);
  const bool shared_gpus = launch::shared_gpus_allowed();
  const int my_device = multi ? launch::gpu_of_process(world.local_rank, gpu::device_count(), shared_gpus) : 0;
  if (multi)
    if (const std::string why = launch::placement_problem(
            world.size, world.local_size, shared_gpus ? world.local_size : gpu::device_count(), pp * ep_r);
        !why.empty())
      throw InputError(why, {}, kExitUsage);
  if (a2a == ep::A2aBackend::nccl) {  // the replay's placement (it refuses the same, later)
    const ep::EpPlacement placement =
        multi ? ep::place_across_processes(pp, ep_r,
                                           launch::gpus_of_processes(world.size, world.rank, world.local_rank,
                                                                     gpu::device_count(), shared_gpus))
              : ep::place_in_process(
                    pp, ep_r, req.devices > 0 ? std::min(req.devices, gpu::device_count()) : gpu::device_count());
    if (const std::string why = ep::nccl_a2a_problem(placement); !why.empty()) throw InputError(why, {}, kExitUsage);
  }
  std::string list = req.schedules.empty() ? config_schedules(cfg) : req.schedules;
  const std::vector<const Family*> fams = parse_schedule_list(list);
  std::string text;
  nlohmann::json j;
  j["config"] = req.config;
  j["gpu"] = gpu::device_name(my_device);
  if (multi) j["processes"] = {{"count", world.size}, {"launcher", world.launcher}};
  j["transport"] = launch::transport_name(transport);
  j["results"] = nlohmann::json::array();
  j["skipped"] = nlohmann::json::array();
  std::vector<Timeline> keep;
  std::vector<std::string> names;
  std::map<int, gpu::ProfileResult> profiles;  // by layers per chunk
  // Virtual ranks: fewer GPUs than ranks puts rank r on GPU r % GPUs, as the replay does; the
  // simulator then shares each GPU among its ranks at the slowdown profiled for two at once.
  const int ndev = multi             ? world.size
                   : req.devices > 0 ? std::min(req.devices, gpu::device_count())
                                     : gpu::device_count();
  const gpu::ChunkShape one_layer = chunk_shape(c, 1, true);  // what the link probe runs
  const int slots_total = pp * ep_r;
  // Ranks sharing a GPU: each on its own SM partition (green contexts) where the GPU splits, so
  // op costs are profiled on one partition; otherwise they time-slice the whole GPU.
  const int per_gpu = (slots_total + ndev - 1) / ndev;
  int split = 0, split_sms = 0, device_sms = 0;
  std::string split_note;
  if (per_gpu > 1 && req.sm_split != "off") {
    const std::string why = gpu::sm_partition_check(my_device, per_gpu, &split_sms, &device_sms);
    if (why.empty())
      split = per_gpu;
    else if (req.sm_split == "on")
      throw InputError("validate --sm-split on: " + why + " (--sm-split off time-slices the GPU instead)", {},
                       kExitGpu);
    else
      split_note = why;
  }
  // How ranks sharing a GPU slow each other, profiled on the chunk the schedule's stages hold
  // (one layer and four gave the same figures within 0.04 on an H100; nothing says they must).
  std::map<int, gpu::SharingProfile> sharings;  // by layers per chunk
  // Partitions of one size need not run a chunk equally fast: F, I and W alone on each.
  std::map<int, std::vector<std::array<double, 3>>> speeds;  // by layers per chunk
  if (ndev < slots_total) {
    j["device_sharing"] = {{"gpus", ndev}, {"ranks", slots_total}, {"model", req.sharing}};
    j["device_sharing"]["sm_partitions"] =
        split ? nlohmann::json{{"groups", split}, {"sms_each", split_sms}, {"device_sms", device_sms}}
              : nlohmann::json();
    if (!split_note.empty()) j["device_sharing"]["sm_partitions_unavailable"] = split_note;
    j["device_sharing"]["profiles"] = nlohmann::json::object();
  }
  std::optional<LinkProbe> probe;
  // The probe replays a dense pipeline of pp ranks: with more processes than that (EP across
  // processes, pp x ep slots) it cannot run, and the config's link model stands.
  const bool probe_fits = !multi || world.size <= pp;
  if (!req.no_link_probe && probe_fits)
    probe = probe_link(pp, one_layer, req.devices, req.transport, split > 0, req.timeout_s);
  if (!req.no_link_probe && !probe_fits)
    j["link_probe_skipped"] = fmt::format("{} processes for a {}-rank probe: the config's link model", world.size, pp);
  double copy_us = 0;  // the same message copied with nothing else running: the hardware's cost
  if (probe) {
    j["link_probe"] = {{"median_us", probe->median_us}, {"runs_us", probe->runs_us}, {"transfers", probe->transfers},
                       {"bytes", probe->bytes},         {"schedule", "gpipe"},       {"microbatches", 2 * pp}};
    if (probe->bytes > 0) {
      const int peer = ndev > 1 && !multi ? 1 : my_device;
      copy_us = gpu::copy_probe_us(static_cast<std::size_t>(probe->bytes), my_device, peer, 20);
      j["link_probe"]["standalone_copy_us"] = copy_us;
      j["link_probe"]["standalone_copy_gpus"] = {my_device, peer};
    }
  }
  std::string summary = fmt::format("{:<17} {:>14} {:>13} {:>8}\n", "schedule", "predicted ms", "measured ms", "error");
  // What to replay: the families, or one schedule imported from a file (ppsim search writes them).
  std::vector<std::pair<std::string, const Family*>> items;
  if (!req.schedule_file.empty()) {
    const std::size_t slash = req.schedule_file.find_last_of('/');
    items.emplace_back(slash == std::string::npos ? req.schedule_file : req.schedule_file.substr(slash + 1), nullptr);
  } else {
    for (const Family* fam : fams) items.emplace_back(fam->name, fam);
  }
  for (const auto& [item_name, fam] : items) {
    const std::string& name = item_name;
    Schedule s;
    if (!fam) {
      s = import_csv_file(req.schedule_file, pp, m);  // validated on import
    } else {
      ScheduleParams params = resolve_params(*fam, ScheduleParams{pp, m, v, 0});
      try {
        s = make_schedule(fam->name, params);
      } catch (const InputError& e) {
        if (e.exit_code() != kExitInput) throw;
        j["skipped"].push_back({{"schedule", fam->name}, {"reason", e.message()}});
        continue;
      }
    }
    const int slices = s.stages_per_pipe;
    if (c.model.layers % slices != 0) {
      j["skipped"].push_back(
          {{"schedule", name},
           {"reason", fmt::format("{} layers do not split into {} equal chunks", c.model.layers, slices)}});
      continue;
    }
    const int layers = c.model.layers / slices;
    const gpu::ChunkShape shape = chunk_shape(c, layers, true);
    auto it = profiles.find(layers);
    if (it == profiles.end()) {
      // With EP shards, profiled as they replay: stage 0's shards on partitions 0..ep-1 (or their
      // GPUs), exchanging tokens by our all-to-all, so that the op costs carry its time.
      gpu::ChunkShape prof_shape = shape;
      if (ep_r > 1) {
        prof_shape.ep = ep_r;
        prof_shape.comm_sms = c.hardware.comm_sms > 0 ? c.hardware.comm_sms : 20;
        prof_shape.a2a = a2a;  // under mpirun: process 0 profiles the group in one process, the others take its figures
      }
      it = profiles.emplace(layers, gpu::profile_chunk(prof_shape, 3, req.reps, my_device, split)).first;
    }
    const gpu::ProfileResult& prof = it->second;
    SimCosts costs = api::profiled_costs(cfg, s, api::ProfiledOps{prof.f_ms, prof.b_ms, prof.w_ms, prof.fb_ms});
    if (ndev < slots_total) {
      auto sit = sharings.find(layers);
      if (sit == sharings.end()) {
        sit = sharings.emplace(layers, gpu::profile_sharing(shape, 3, req.reps, my_device, split)).first;
        const gpu::SharingProfile& sp = sit->second;
        nlohmann::json& pj = j["device_sharing"]["profiles"][std::to_string(layers)];
        pj["step"] = sp.step;
        static const char* kKinds[] = {"F", "I", "W"};
        for (int x = 0; x < 3; ++x) {
          pj["alone_ms"][kKinds[x]] = sp.alone_ms[static_cast<std::size_t>(x)];
          for (int y = 0; y < 3; ++y) {
            pj["by_kind"][kKinds[x]][kKinds[y]] = sp.by_kind[static_cast<std::size_t>(3 * x + y)];
            pj["by_kind_gpu"][kKinds[x]][kKinds[y]] = sp.by_kind_gpu[static_cast<std::size_t>(3 * x + y)];
          }
        }
      }
      const gpu::SharingProfile& sp = sit->second;
      if (split > 0 && req.rank_speeds == "profiled") {
        auto pit = speeds.find(layers);
        if (pit == speeds.end()) {
          pit = speeds.emplace(layers, gpu::profile_partitions(shape, 3, req.reps, my_device, split)).first;
          nlohmann::json& pj = j["device_sharing"]["profiles"][std::to_string(layers)]["partition_alone_ms"];
          for (const auto& g : pit->second) pj.push_back({{"F", g[0]}, {"I", g[1]}, {"W", g[2]}});
        }
        // The op costs were profiled on partition 0; rank r runs on partition r / GPUs (the replay's order).
        api::scale_rank_speeds(costs, pp, ndev, pit->second, ep_r);
      }
      const std::vector<double> by_kind(sp.by_kind.begin(), sp.by_kind.end());
      api::share_devices(costs, pp, ndev, sp.step, req.sharing == "kind" ? &by_kind : nullptr, ep_r);
      // The EP profile ran stage 0's shards at once, on this GPU when they share it.
      if (ep_r > 1) api::unshare_profiled_copies(costs, pp);
    }
    if (probe) api::apply_link_probe(costs, probe->median_us, probe->bytes);  // measured time less bandwidth share
    SimOptions opt;
    opt.record_timeline = true;
    SimResult pred = simulate(s, costs, opt);
    gpu::ReplayConfig rc;
    rc.stage_shapes = {shape};
    std::vector<Time> shard_ends, ep_waits, ep_exposed;
    if (ep_r > 1) {
      rc.stage_shapes[0].ep = ep_r;
      rc.stage_shapes[0].comm_sms = c.hardware.comm_sms > 0 ? c.hardware.comm_sms : 20;
      rc.stage_shapes[0].a2a = a2a;
      rc.shard_makespans = &shard_ends;
      rc.ep_waits = &ep_waits;
      rc.ep_exposed = &ep_exposed;
    }
    rc.devices = req.devices;
    rc.transport = req.transport;
    rc.nccl_timeout_s = req.timeout_s;
    rc.sm_partitions = split > 0;
    gpu::ReplayHostStats host;
    rc.host_stats = &host;
    gpu::ReplayMemory mem;
    rc.memory = &mem;
    Timeline meas = gpu::replay_schedule(s, rc);
    std::vector<Time> exposed;
    for (const auto& rs : pred.ranks) exposed.push_back(rs.exposed_comm);
    const TimelineStats meas_stats = timeline_stats(meas, ep_exposed, /*exposed_inside_ops=*/true);
    const auto rows = compare_timelines(timeline_stats(pred.timeline, exposed), meas_stats);
    const double target = req.target > 0 ? req.target : (ndev == 1 ? 0.10 : 0.05);
    text += render_validation_table(name, rows, target);
    // EP: the overlap model on the same profile's sub-ops (dispatch and combine timed through
    // our all-to-all), with the same sharing, link and speeds: its exposed communication and
    // F&B pairs against the measured ones. The communication's SM share is comm_sms of the
    // SMs one rank runs on.
    std::vector<ValidationRow> overlap_rows;
    if (ep_r > 1) {
      SimCosts oc = costs;
      const int rank_sms = split > 0 ? split_sms : device_sms > 0 ? device_sms : 132;
      api::profiled_overlap_costs(oc, prof.sub_ops_ms, layers,
                                  std::min(0.9, static_cast<double>(rc.stage_shapes[0].comm_sms) / rank_sms));
      const SimResult ov = simulate(s, oc, opt);
      std::vector<Time> ov_exposed;
      for (const auto& rs : ov.ranks) ov_exposed.push_back(rs.exposed_comm);
      overlap_rows = compare_timelines(timeline_stats(ov.timeline, ov_exposed), meas_stats);
      text += render_validation_table(
          fmt::format("{}, the overlap model on the profiled sub-ops (communication on {} of {} SMs)", name,
                      rc.stage_shapes[0].comm_sms, rank_sms),
          overlap_rows, target);
    }
    // The host side (this process's ranks): enqueue time per action against the op's profiled
    // GPU time; actions the GPU began before they were fully enqueued may include launch waits.
    std::string host_line;
    nlohmann::json hj = nlohmann::json::object();
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
      text +=
          "  host enqueue time per action (how many the GPU began before their last kernel was enqueued, but for "
          "each rank's opening ones): " +
          host_line + "\n";
    // Once a rank's thread is ahead of its GPU (after its opening actions) it normally stays so;
    // when a quarter or more actions begin early anyway, the host fell behind its GPU and the
    // measured times include launches.
    const bool host_bound = actions > 0 && 4 * early >= actions;
    if (host_bound)
      text += fmt::format(
          "  HOST-BOUND: {} of {} actions began on the GPU before their last kernel was enqueued: the "
          "measured times include waits for this host's launches (a busy or slow host, or ops too "
          "short for it); compare with a run on a quiet host or larger chunks\n",
          early, actions);
    if (ep_r > 1) {
      std::string waits;
      for (std::size_t r = 0; r < ep_waits.size(); ++r)
        waits +=
            fmt::format("{}rank {} {:.3f} ms", waits.empty() ? "" : ", ", r, static_cast<double>(ep_waits[r]) / 1e6);
      std::string ends;
      for (std::size_t e = 1; e < shard_ends.size(); ++e)
        ends +=
            fmt::format("{}shard {}: {:.3f} ms", ends.empty() ? "" : ", ", e, static_cast<double>(shard_ends[e]) / 1e6);
      const std::string how = a2a == ep::A2aBackend::ours
                                  ? fmt::format("ours on {} SMs", rc.stage_shapes[0].comm_sms)
                                  : std::string("NCCL's grouped send/recv (its own channels; comm_sms not applied)");
      text += fmt::format(
          "  expert parallelism: {} shards of every stage{}, all-to-all: {}; the table is "
          "shard 0's pipeline; the other shards' makespans: {}. The prediction's op costs were "
          "profiled on stage 0's {} shards exchanging tokens the same way, started together{}. "
          "Measured exposed comm: the rank's all-to-all time while none of its streams computed "
          "(inside its ops, so taken out of its compute), of which waiting for peers' rows{}: {}; "
          "the op-level prediction has none, the overlap model's is its own\n",
          ep_r, multi ? fmt::format(" over {} processes (CUDA IPC)", world.size) : std::string(), how,
          ends.empty() ? "-" : ends, ep_r, multi ? " (in one process: process 0's, on the GPUs it sees)" : "",
          a2a == ep::A2aBackend::ours ? "" : " (not measured for NCCL)", waits);
    }
    // Device memory, measured, beside the cost model's prediction for the same ranks (the replay
    // holds no embedding or head and runs no optimizer step: those parts are left out of both).
    const std::vector<api::ReplayMemoryPrediction> predicted_mem = api::replay_memory(req.config, req.sets, s, &pred);
    nlohmann::json mj = nlohmann::json::array();
    auto mib = [](auto b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
    for (const auto& rm : mem.ranks) {
      if (rm.shard != 0) continue;  // EP shards hold the same as shard 0's ranks
      const std::size_t r = static_cast<std::size_t>(rm.rank);
      const api::ReplayMemoryPrediction* pm = r < predicted_mem.size() ? &predicted_mem[r] : nullptr;
      if (pm) {
        const double measured = static_cast<double>(rm.total());
        text += fmt::format(
            "  memory rank {} peak: predicted {:.1f} MiB (weights {:.1f}, grads {:.1f}, activations {:.1f} "
            "in {} chunk(s), buffers {:.1f}, workspace {:.1f}), measured {:.1f} MiB, error {:+.1f}%\n",
            rm.rank, mib(pm->total), mib(pm->parts.weights), mib(pm->parts.gradients), mib(pm->parts.activations),
            pm->parts.chunks, mib(pm->parts.comm_buffers), mib(pm->parts.workspace), mib(measured),
            measured > 0 ? 100.0 * (pm->total - measured) / measured : 0.0);
      }
      int predicted_peak = 0;
      if (r < pred.timeline.activations.size())
        for (const auto& smp : pred.timeline.activations[r]) predicted_peak = std::max(predicted_peak, smp.activations);
      text += fmt::format(
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
      text += fmt::format(
          "  memory GPU {}: {:.1f} MiB used before the replay, {:.1f} MiB after its measured run "
          "(cudaMemGetInfo; +{:.1f} MiB: chunks, transport buffers, workspaces)\n",
          d.device, mib(d.used_before), mib(d.used_after),
          mib(d.used_after > d.used_before ? d.used_after - d.used_before : 0));
      dj.push_back({{"device", d.device}, {"used_before_bytes", d.used_before}, {"used_after_bytes", d.used_after}});
    }
    text += "\n";
    summary += fmt::format("{:<17} {:>14.3f} {:>13.3f} {:>+7.1f}%{}\n", name, rows.front().predicted,
                           rows.front().measured, 100.0 * rows.front().error, host_bound ? "  host-bound" : "");
    nlohmann::json r = validation_json(name, rows);
    r["profile_ms"] = {{"F", prof.f_ms}, {"B", prof.b_ms}, {"W", prof.w_ms}, {"FB", prof.fb_ms}};
    r["layers_per_chunk"] = layers;
    r["host"] = hj;
    r["host_bound"] = host_bound;
    r["memory_measured"] = {{"ranks", mj}, {"devices", dj}};
    if (!overlap_rows.empty()) r["overlap_model"] = validation_json(name, overlap_rows);
    if (ep_r > 1) {
      auto ms = [](const std::vector<Time>& v) {
        std::vector<double> out;
        for (Time t : v) out.push_back(static_cast<double>(t) / 1e6);
        return out;
      };
      r["expert_parallelism"] = {
          {"shards", ep_r},
          {"a2a", ep::a2a_backend_name(a2a)},
          {"exposed_comm_ms", ms(ep_exposed)},
          {"waiting_for_peers_ms", ms(ep_waits)},
          {"other_shards_makespan_ms",  // shard 1 on (shard 0's is the table's)
           ms(std::vector<Time>(shard_ends.begin() + std::min<std::size_t>(1, shard_ends.size()), shard_ends.end()))}};
    }
    j["results"].push_back(r);
    names.push_back(name);
    keep.push_back(std::move(pred.timeline));
    keep.push_back(std::move(meas));
  }
  std::optional<LinkProbe> probe_after;
  if (probe) {
    probe_after = probe_link(pp, one_layer, req.devices, req.transport, split > 0, req.timeout_s);
    if (probe_after) j["link_probe"]["median_us_after"] = probe_after->median_us;
  }
  {  // the table report's closing lines: the probe, the transport, device sharing, the summary
    if (probe)
      text += fmt::format(
          "link probe: median transfer {:.1f} us over {} messages of {} bytes (gpipe, M={}; the middle "
          "of three replays: {:.1f} us){}; the prediction's link latency is that less the bandwidth "
          "share (--no-link-probe: the config's)\n",
          probe->median_us, probe->transfers, probe->bytes, 2 * pp, fmt::join(probe->runs_us, ", "),
          probe_after ? fmt::format(", {:.1f} us when probed again after the schedules", probe_after->median_us)
                      : std::string());
    if (probe && copy_us > 0)
      text +=
          fmt::format("standalone copy of one message ({} bytes, {}): {:.1f} us; the replay's median is {:.2f}x that\n",
                      probe->bytes, ndev > 1 && !multi ? "GPU 0 to GPU 1, peer copy" : "within the GPU", copy_us,
                      probe->median_us / copy_us);
    if (multi)
      text += ep_r > 1 ? fmt::format(
                             "processes: {} started by {}, one GPU each; EP shard e of rank r replayed by process "
                             "(r * {} + e) % {}\n",
                             world.size, world.launcher, ep_r, world.size)
                       : fmt::format("processes: {} started by {}, one GPU each; rank r replayed by process r % {}\n",
                                     world.size, world.launcher, world.size);
    text += fmt::format("transport: {}\n", transport == launch::TransportKind::Peer
                                               ? "peer (copy-engine peer copies, ordered by CUDA events)"
                                           : transport == launch::TransportKind::Ipc
                                               ? "ipc (copy-engine copies into CUDA IPC memory of the peer process)"
                                               : "nccl (one communicator, one message order on every process)");
    if (ndev < slots_total) {
      text += split ? fmt::format(
                          "device sharing: {} ranks on {} GPU(s), each on its own {} of the {} SMs (green "
                          "contexts; op costs profiled on one such share)\n",
                          slots_total, ndev, split_sms, device_sms)
                    : fmt::format("device sharing: {} ranks on {} GPU(s){}, time-slicing all SMs\n", slots_total, ndev,
                                  split_note.empty() ? "" : " (" + split_note + ")");
      for (const auto& [layers, sp] : sharings) {
        text += fmt::format(
            "  chunks of {} layer(s): two F+I+W steps at once each take {:.2f}x as long as alone; an op "
            "beside another (row: the op; column: the op beside it; each fed by its own host thread "
            "as in the replay; in brackets all enqueued before either starts):\n",
            layers, sp.step);
        text += fmt::format("    {:<4}{:>10}{:>7}{:>7}{:>7}\n", "", "alone ms", "F", "I", "W");
        const char* kinds[] = {"F", "I", "W"};
        for (std::size_t x = 0; x < 3; ++x)
          text += fmt::format("    {:<4}{:>10.3f}{:>7.2f}{:>7.2f}{:>7.2f}   (kernels alone: {:.2f} {:.2f} {:.2f})\n",
                              kinds[x], sp.alone_ms[x], sp.by_kind[3 * x], sp.by_kind[3 * x + 1], sp.by_kind[3 * x + 2],
                              sp.by_kind_gpu[3 * x], sp.by_kind_gpu[3 * x + 1], sp.by_kind_gpu[3 * x + 2]);
        if (auto pit = speeds.find(layers); pit != speeds.end()) {
          text += "    alone on each partition, F / I / W ms:";
          for (std::size_t g = 0; g < pit->second.size(); ++g)
            text += fmt::format("{} {}: {:.3f} / {:.3f} / {:.3f}", g ? ";" : "", g, pit->second[g][0],
                                pit->second[g][1], pit->second[g][2]);
          text += " (each rank's op times scaled by its partition's against partition 0's; --rank-speeds equal: not)\n";
        }
      }
      text += req.sharing == "kind"
                  ? "  the prediction shares each GPU by these tables (--sharing kind)\n"
                  : "  the prediction shares each GPU by the step figure (--sharing kind: by the tables)\n";
    }
    text += "summary (makespan):\n" + summary;
    for (const auto& sk : j["skipped"])
      text += fmt::format("skipped {}: {}\n", sk["schedule"].get<std::string>(), sk["reason"].get<std::string>());
  }
  ValidateOutcome out;
  out.reporter = world.rank == 0;
  out.json = std::move(j);
  out.text = std::move(text);
  out.names = std::move(names);
  for (std::size_t i = 0; i + 1 < keep.size(); i += 2) {
    out.predicted.push_back(std::move(keep[i]));
    out.measured.push_back(std::move(keep[i + 1]));
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
