// The GPU commands as library calls (`ppsim profile`, `ppsim validate`, and ppsim.profile /
// ppsim.validate in Python): a request in, a result out. The GPU work itself is the CUDA
// back-end's (cuda_validate/gpu_api.h: dlopen'ed by the ppsim binary, linked by the GPU tests);
// this file holds the flow around it: the chunk a schedule's stages hold, the link probe, the
// profiles a prediction needs, the prediction and the replay, and the report of both.
//
// Without a GPU (or without the CUDA back-end) each call throws InputError with kExitGpu (5).
// Compiled into the clients (ppsim_cli, the Python module), not into ppsim_core: it calls the
// back-end and MPI, which only they link.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/gpu_costs.h"
#include "core/timeline.h"
#include "cost/config.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::api {

// The GPU chunk for `layers` layers of the config's model (MoE layers when the model has experts);
// InputError when the back-end cannot run it.
gpu::ChunkShape chunk_shape(const ModelConfigData& c, int layers, bool moe);

// The link as the replay sees it: replays GPipe with 2P micro-batches (three warm-up iterations
// first) and takes the median time from a message's staging copy on the sender to its arrival on
// the receiver. That time, less the config's bandwidth share, becomes the link latency of the
// prediction: it carries what a per-byte NVLink model does not (NCCL send/recv moves a message
// over few channels, far below the link's peak, plus the staging copy and the launch). It is
// measured before the schedules (three replays, the middle of their medians is used) and again
// after them, to show drift.
struct LinkProbe {
  double median_us = 0;         // the middle of runs_us
  std::vector<double> runs_us;  // each replay's median transfer
  std::size_t transfers = 0;
  Bytes bytes = 0;
  ReplayDelays delays;  // the middle replay's send and receive delays and gap between actions
  Timeline timeline;    // the middle replay's (the NCCL transport's share is fitted from it)
};
// Collective under mpirun/srun: every process replays its share, every process gets the result.
// `graphs`, `value_waits`: launched and ordered as the schedules' replays are (validate --launch),
// so that the delays it measures are theirs.
std::optional<LinkProbe> probe_link(int pp, const gpu::ChunkShape& shape, int devices, const std::string& transport,
                                    bool sm_partitions, double timeout_s, bool graphs = false,
                                    bool value_waits = false);

struct ProfileRequest {
  std::string config;
  std::vector<std::string> sets;
  int warmup = 5;
  int reps = 20;
  int device = 0;
  std::string a2a = "ours";  // ours | nccl
};

struct ProfileOutcome {
  std::string yaml;          // the version-2 cost profile (src/cost/profile.h)
  gpu::ProfileResult layer;  // one layer's medians (the model's MoE layer when it has experts)
};

ProfileOutcome profile(const ProfileRequest& req);

struct ValidateRequest {
  std::string config;
  std::vector<std::string> sets;
  std::string schedules;      // a family, a comma list, or all (empty: the config's)
  std::string schedule_file;  // one schedule from PyTorch's compute-only CSV instead
  int devices = 0;
  int reps = 10;
  int replays = 3;  // measured replays per schedule (and per sharing fit): the median stands
  double target = 0;
  bool no_link_probe = false;
  bool ep_replay = false;
  std::string a2a = "ours";
  std::string transport = "auto";
  double timeout_s = 120;
  std::string sm_split = "auto";
  std::string sharing = "replay";
  std::string rank_speeds = "profiled";
  std::string co_run = "sustained";  // sustained | full | held | off: ops stretched beside another GPU's work
  std::string launch = "graphs";     // graphs | streams: how the replay and the profile enqueue an op (launch_mode.h)
};

struct ValidateOutcome {
  bool reporter = true;  // process 0 under mpirun/srun (or the only process): the one that reports
  nlohmann::json json;   // docs/JSON.md's validate object
  std::string text;      // the table report
  // Per schedule replayed: its name, and its predicted and measured timelines.
  std::vector<std::string> names;
  std::vector<Timeline> predicted, measured;
};

// Sets CUDA_DEVICE_MAX_CONNECTIONS (unless set) and joins the launcher's processes first.
ValidateOutcome validate(const ValidateRequest& req);
// One Perfetto trace with each schedule's predicted and measured timelines.
std::string validate_trace(const ValidateOutcome& out);

}  // namespace ppsim::api
