// `ppsim profile` and `ppsim validate`: the GPU commands' flags and output. The flow (the chunk,
// the link probe, profiles, prediction against replay, the report) is a library call,
// src/api/gpu.h. Without a GPU (or without the CUDA back-end) each ends with one line and exit
// code 5.
//
// profile: times one transformer layer of the config's model on the GPU (F, full backward B,
// weight-grad W, overlapped pair FB; medians after warm-up) and writes a version-2 cost profile
// (with the sub-op times the overlap model uses)
// (src/cost/profile.h) that `compare`, `simulate` and `plan` read through `profile: file`.
// validate: for each schedule, profiles the chunk the schedule's stages hold, simulates the
// schedule with those measured op costs, replays it on the GPUs present, and prints predicted
// against measured; --trace writes one Perfetto trace with both timelines.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "api/gpu.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "report/html.h"

namespace ppsim::cli {

namespace {

struct ProfileArgs {
  api::ProfileRequest req;
  std::string output = "-";
};

struct ValidateArgs {
  api::ValidateRequest req;
  std::string calibration;
  std::string trace;
  std::string html;
  std::string format = "table";
  std::string output = "-";
};

}  // namespace

Runner setup_profile(CLI::App& sub) {
  auto a = std::make_shared<ProfileArgs>();
  sub.add_option("config", a->req.config, "YAML config whose model to profile")->required();
  sub.add_option("--set", a->req.sets, "override a config key: key.path=value (repeatable)");
  sub.add_option("--output,-o", a->output, "write the profile here (default: stdout)");
  sub.add_option("--warmup", a->req.warmup, "untimed repetitions first")->capture_default_str();
  sub.add_option("--reps", a->req.reps, "timed repetitions (the median is kept)")->capture_default_str();
  sub.add_option("--device", a->req.device, "GPU index")->capture_default_str();
  sub.add_option("--a2a", a->req.a2a,
                 "MoE with parallel.ep > 1 on 2+ GPUs: the all-to-all that dispatch and combine are timed through: "
                 "ours (the config's comm_sms) or nccl (NCCL's grouped send/recv)")
      ->check(CLI::IsMember({"ours", "nccl"}))
      ->capture_default_str();
  return [a]() {
    const api::ProfileOutcome p = api::profile(a->req);
    write_output(a->output, p.yaml);
    const gpu::ProfileResult& r = p.layer;
    std::fprintf(stderr, "profiled on %s: F %.3f ms, B %.3f ms, W %.3f ms, FB %.3f ms (per layer)\n", r.gpu.c_str(),
                 r.f_ms, r.b_ms, r.w_ms, r.fb_ms);
    return 0;
  };
}

Runner setup_validate(CLI::App& sub) {
  auto a = std::make_shared<ValidateArgs>();
  sub.add_option("config", a->req.config, "YAML config to replay on the GPUs")->required();
  sub.add_option("--set", a->req.sets, "override a config key: key.path=value (repeatable)");
  add_calibration_option(sub, a->calibration);
  sub.add_option("--schedule,-s", a->req.schedules, "a family, a comma list, or all (default: the config's parallel.schedule)");
  sub.add_option("--schedule-file", a->req.schedule_file,
                 "replay one schedule from PyTorch's compute-only CSV (e.g. one `ppsim search` wrote) instead of families");
  sub.add_option("--devices", a->req.devices, "GPUs to use (0 = all visible; fewer than ranks: ranks share GPUs)");
  sub.add_option("--reps", a->req.reps, "timed repetitions when profiling op costs")->capture_default_str();
  sub.add_option("--target", a->req.target, "makespan error to flag (default 0.05 on 2+ GPUs, 0.10 on one)");
  sub.add_option("--trace", a->trace, "one Perfetto trace with the predicted and measured timelines");
  sub.add_option("--html", a->html, "a self-contained HTML report: each measured timeline over its prediction, the table");
  sub.add_option("--format", a->format, "table or json")->capture_default_str();
  sub.add_option("--output,-o", a->output, "write the results here");
  sub.add_option("--transport", a->req.transport,
                 "how tensors move between ranks: auto (peer in one process, ipc for processes of one host, nccl "
                 "across hosts), peer (copy-engine peer copies), ipc (the same through CUDA IPC, one process per "
                 "GPU), nccl (one NCCL communicator, for comparison)")
      ->check(CLI::IsMember({"auto", "peer", "ipc", "nccl"}))
      ->capture_default_str();
  sub.add_option("--timeout", a->req.timeout_s,
                 "seconds a rank may wait for a message or its GPU before the replay ends with one line naming "
                 "the rank, its op and what it waited for (exit 5)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub.add_option("--sm-split", a->req.sm_split,
                 "ranks sharing a GPU: on = each on its own equal share of the SMs (CUDA green contexts), off = "
                 "time-slice all SMs, auto = on where the GPU can be split")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  sub.add_option("--sharing", a->req.sharing,
                 "ranks sharing a GPU: uniform = one slowdown for any two ops (two F+I+W steps at once, as "
                 "profiled); kind = an op's slowdown depends on the kinds (F, I, W) running beside it (profiled "
                 "pair by pair; in measured replays ops slow each other more than that: docs/VALIDATION.md)")
      ->check(CLI::IsMember({"kind", "uniform"}))
      ->capture_default_str();
  sub.add_option("--rank-speeds", a->req.rank_speeds,
                 "ranks on SM partitions: profiled = each rank's op times scaled by how fast its partition runs the "
                 "chunk alone against the one the costs were profiled on; equal = all as profiled")
      ->check(CLI::IsMember({"profiled", "equal"}))
      ->capture_default_str();
  sub.add_flag("--ep-replay", a->req.ep_replay,
               "replay parallel.ep > 1 as EP shards exchanging tokens by the all-to-all (one process, or one per GPU "
               "under mpirun on one host; op costs profiled the same way, in one process; exposed communication "
               "measured); without it the chunk's dispatch and combine stay local permutes");
  sub.add_option("--a2a", a->req.a2a,
                 "with --ep-replay, the all-to-all: ours (our SM-bounded kernel on the config's comm_sms) or nccl "
                 "(NCCL's grouped send/recv, one communicator per stage's EP group; its shards on distinct GPUs)")
      ->check(CLI::IsMember({"ours", "nccl"}))
      ->capture_default_str();
  sub.add_flag("--no-link-probe", a->req.no_link_probe,
               "predict with the config's link model instead of the transfer time the replay measures");
  return [a]() {
    add_calibration_set(a->calibration, a->req.sets);
    const Format f = parse_format(a->format, {"table", "json"});
    const api::ValidateOutcome out = api::validate(a->req);
    if (!out.reporter) return 0;  // process 0 reports for all
    std::vector<std::pair<std::string, std::string>> files;  // written together, or none
    if (!a->trace.empty()) files.emplace_back(a->trace, api::validate_trace(out));
    if (!a->html.empty()) {
      HtmlReport rep = json_tables_html("validate", "ppsim validate", out.json);
      for (std::size_t i = 0; i < out.names.size(); ++i) {
        rep.timelines.push_back({out.names[i], &out.measured[i], nullptr, -1, "measured"});
        rep.timelines.push_back({out.names[i], &out.predicted[i], nullptr, -1, "predicted"});
      }
      files.emplace_back(a->html, render_html(rep));
    }
    files.emplace_back(a->output, f == Format::Json ? out.json.dump(2) + "\n" : out.text);
    write_outputs(files);
    return 0;
  };
}

}  // namespace ppsim::cli
