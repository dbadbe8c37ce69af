// The options table (api/options.h): one row per option, one table per command. Shared rows are
// named constants so that each is written once.
#include "api/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <iterator>

#include "core/error.h"

namespace ppsim::api {

namespace {

using K = Kind;
using R = Reach;

// ---- schedules: where one comes from --------------------------------------------------------------
constexpr Option kPp{"--pp,-p", K::Int, "", "ranks", "pipeline ranks P (default 8, or the config's parallel.pp)"};
constexpr Option kMicrobatches{"--microbatches,-m", K::Int, "", "micro-batches",
                               "micro-batches M per step (default 20, or the config's)"};
constexpr Option kVpp{"--vpp", K::Int, "0", "chunks", "chunks per rank for interleaved-1f1b (0: 2, or the config's)"};
constexpr Option kGroupSize{"--group-size", K::Int, "0", "micro-batches",
                            "interleaved-1f1b micro-batch group G (0: P)"};
constexpr Option kScheduleFile{"--schedule-file", K::Text, "", "", "import a schedule from PyTorch's compute-only CSV"};
constexpr Option kLayout{"--layout",
                         K::Text,
                         "auto",
                         "",
                         "stage layout of an imported file: auto, linear, v, bidirectional",
                         R::Both,
                         "auto|linear|v|bidirectional"};
constexpr Option kCsvDialect{"--csv-dialect",
                             K::Text,
                             "auto",
                             "",
                             "PyTorch CSV dialect of an imported file: auto, current (torch >= 2.6: I, W, B full), 2.5 "
                             "(B input-grad beside W, BW full)",
                             R::Both,
                             "auto|current|2.5"};
constexpr Option kDropComm{"--drop-comm", K::Flag, "", "",
                           "ignore an imported file's SEND/RECV actions (each transfer then starts when its producer "
                           "ends)"};
constexpr Option kMaxOps{"--max-ops", K::Int64, "0", "ops", "refuse requests that would generate more ops (0: 2e8)"};

// ---- costs -----------------------------------------------------------------------------------------
constexpr Option kConfig{"config", K::Text, "",    "", "YAML config (model, hardware, parallel); optional",
                         R::Both,  {},      false, {}, false};
constexpr Option kConfigRequired{"config", K::Text, "", "", "YAML config", R::Both, {}, false, {}, true};
constexpr Option kSet{"--set", K::Texts, "",    "",         "override a config key: key.path=value (repeatable)",
                      R::Both, {},       false, "overrides"};
constexpr Option kCalibration{"--calibration", K::Text, "", "",
                              "apply a calibration file (ppsim calibrate -o) over the config's presets, as "
                              "calibration: FILE in it (docs/CALIBRATION.md)"};
constexpr Option kMegatronArgs{"--megatron-args", K::Text, "", "",
                               "model, parallelism and batch from a Megatron-LM argument list (with a config)"};
constexpr Option kMegatronEnv{"--megatron-env", K::Texts, "", "",
                              "NAME=value for the --megatron-args script, over its own assignment (repeatable)"};
constexpr Option kTimes{"--times", K::Text, "F=1,B=2,W=1,FB=3", "time unit",
                        "one rank's share: F=..,B=..(full backward),W=..,FB=..(pair); FB defaults to F+B"};
constexpr Option kSearchTimes{"--times", K::Text, "F=1,B=2,W=1", "time unit",
                              "one rank's share: F=..,B=..(full backward),W=..,FB=..; FB defaults to F+B"};
constexpr Option kChunkTimes{"--chunk-times", K::Text, "", "time unit",
                             "per-chunk times instead of --times (same keys)"};
constexpr Option kP2pLatency{"--p2p-latency", K::Real, "0", "time unit", "latency of each stage-to-stage transfer"};
constexpr Option kA2a{"--a2a", K::Real, "", "time unit",
                      "overlap model: time of one layer's all-to-all dispatch (and of its combine); unset: off"};
constexpr Option kLayers{"--layers", K::Int, "1", "layers", "overlap model: layers in one rank's share"};
constexpr Option kAttnShare{"--attn-share", K::Real, "0.5", "share", "overlap model: share of F/b/W that is attention"};
constexpr Option kCommSms{"--comm-sms", K::Int, "20", "SMs", "overlap model: SMs reserved for communication"};
constexpr Option kSms{"--sms", K::Int, "132", "SMs", "overlap model: SMs per GPU"};

// ---- outputs (the CLI's) ---------------------------------------------------------------------------
constexpr Option kFormatResults{"--format", K::Text,         "table", "", "the report: table, json or csv",
                                R::Cli,     "table|json|csv"};
constexpr Option kFormatTableJson{"--format", K::Text, "table", "", "the report: table or json", R::Cli, "table|json"};
constexpr Option kOutput{"--output,-o", K::Text, "-", "", "write the report to this file (-: stdout)", R::Cli};
constexpr Option kTrace{"--trace", K::Text, "", "", "write a Chrome/Perfetto trace (JSON) of the timeline(s)", R::Cli};
constexpr Option kSvg{"--svg", K::Text, "", "", "write an SVG timeline", R::Cli};
constexpr Option kHtml{
    "--html", K::Text, "", "", "write a self-contained interactive HTML report (timelines, table, in-page engine)",
    R::Cli};
constexpr Option kColor{
    "--color",          K::Text, "auto", "", "terminal colours: auto, always, never (NO_COLOR: never)", R::Cli,
    "auto|always|never"};
constexpr Option kMemory{
    "--memory", K::Flag, "", "", "with a config: print each rank's peak memory by part, and the op at the peak",
    R::Cli};

// Tables made of shared groups of rows and a command's own rows, in order.
template <std::size_t... N>
constexpr auto join(const Option (&... groups)[N]) {
  std::array<Option, (N + ...)> out{};
  std::size_t i = 0;
  ((std::copy(std::begin(groups), std::end(groups), out.begin() + static_cast<std::ptrdiff_t>(i)), i += N), ...);
  return out;
}

constexpr Option kScheduleRows[] = {kPp,     kMicrobatches, kVpp,      kGroupSize, kScheduleFile,
                                    kLayout, kCsvDialect,   kDropComm, kMaxOps};
constexpr Option kOverlapRows[] = {kA2a, kLayers, kAttnShare, kCommSms, kSms};
constexpr Option kOverlapDict[] = {{"overlap", K::Text, "", "",
                                    "the overlap keywords as one dict {a2a, layers, attn_share, comm_sms, sms}",
                                    R::Python}};
// compare and simulate: the schedules, their costs, the pictures.
constexpr Option kRunRows[] = {kSet, kCalibration, kMegatronArgs, kMegatronEnv, kTimes, kChunkTimes, kP2pLatency};
constexpr Option kPictureRows[] = {kFormatResults, kOutput, kTrace, kSvg, kHtml, kColor, kMemory};

constexpr Option kCompareOwn[] = {
    {"--schedules,-s", K::Text, "", "",
     "all, or a comma-separated list of families (default: the config's parallel.schedule with a config, else all)"},
    {"timelines", K::Flag, "", "", "return each result's simulated timeline", R::Python},
};
constexpr Option kConfigRow[] = {kConfig};
constexpr auto kCompare =
    join(kConfigRow, kScheduleRows, kRunRows, kOverlapRows, kPictureRows, kCompareOwn, kOverlapDict);

constexpr Option kSimulateFirst[] = {
    {"--schedule,-s", K::Text, "", "", "schedule family (or, in Python, a Schedule)"},
    {"family_or_config", K::Texts, "", "", "[FAMILY] [CONFIG]: a schedule family and/or a YAML config", R::Cli},
    {"config", K::Text, "", "", "YAML config (the CLI's positional CONFIG)", R::Python},
};
constexpr Option kSimulateOwn[] = {
    {"--timeline",
     K::Text,
     "",
     "",
     "write the simulated timeline (intervals per rank) as JSON",
     R::Cli,
     {},
     false,
     "timeline_file"},
    {"--chart", K::Flag, "", "", "print a time-step chart of the timeline after the table", R::Cli},
    {"timeline", K::Flag, "true", "", "return the simulated timeline", R::Python},
};
constexpr auto kSimulate =
    join(kSimulateFirst, kScheduleRows, kRunRows, kOverlapRows, kPictureRows, kSimulateOwn, kOverlapDict);

constexpr Option kShowFirst[] = {
    {"family", K::Text, "", "", "schedule family (ppsim schedules lists them)"},
};
constexpr Option kShowOwn[] = {
    {"--format", K::Text, "text", "", "text, csv or torch (PyTorch's CSV), or json", R::Cli, "text|csv|torch|json"},
    {"--output,-o", K::Text, "-", "", "write to this file instead of stdout", R::Cli},
    kColor,
    {"--write-dialect", K::Text, "auto", "",
     "the PyTorch CSV dialect --format csv|torch writes: auto (an imported file's own, else current), current, 2.5 (I "
     "as B, B as BW)",
     R::Cli, "auto|current|2.5"},
    {"--lower", K::Text, "none", "",
     "none, or torch: the sends, receives and FSDP-style actions PyTorch's pipelining runtime lists for this order",
     R::Cli, "none|torch"},
};
constexpr auto kShow = join(kShowFirst, kScheduleRows, kShowOwn);

constexpr Option kSchedules[] = {
    {"--format", K::Text, "table", "", "table or json", R::Cli, "table|json"},
};

constexpr Option kPlan[] = {
    {"config", K::Text, "", "", "YAML config with a plan: section"},
    kSet,
    kCalibration,
    kMegatronArgs,
    kMegatronEnv,
    kFormatResults,
    kOutput,
    {"--html", K::Text, "", "", "write a self-contained HTML report: ranked plans and what ruled candidates out",
     R::Cli},
    {"--top", K::Int, "0", "plans", "plans to list per variant (0: plan.top_k, else 10)"},
    {"--jobs,-j", K::Int, "0", "threads", "threads (0: every core)"},
    {"--shard", K::Text, "", "", "evaluate only candidates with id % n == i (i/n); write --format json for --merge"},
    {"--merge", K::Texts, "", "", "merge shard JSON files into the full ranking"},
    kMaxOps,
};

constexpr Option kSearchFirst[] = {
    kConfig, kSet, kCalibration, kPp, kMicrobatches, kSearchTimes, kChunkTimes, kP2pLatency,
};
constexpr Option kSearchOwn[] = {
    {"--memory-cap", K::Text, "best", "rank shares",
     "activations per rank, as compare counts them (a V chunk counts 1/2); none (or 0): no cap; best: the best "
     "family's peak, so that a win is at equal memory"},
    {"--w-hold", K::Real, "", "share",
     "share of a micro-batch's activations its W still holds after its I (Zero Bubble's M_W/M_B), in [0, 1]; unset: "
     "1 with --times, the memory model's with a config"},
    {"--placement", K::Text, "torch", "",
     "torch (linear and v: one parameter copy, what PyTorch runs), linear, v, bidirectional or all (adds DualPipe's "
     "two copies)",
     R::Both, "torch|linear|v|bidirectional|all"},
    {"--seed", K::Int64, "1", "", "random seed (same seed, same result unless the time limit binds)"},
    {"--time-limit", K::Real, "10", "s", "seconds for the whole search"},
    {"--objective", K::Text, "", "",
     "makespan, or span: the longest rank's own span (the default when the config sets parallel.post_validation)",
     R::Both, "makespan|span"},
    {"--threads,-j", K::Int, "0", "threads", "threads (0: every core)"},
    {"--svg", K::Text, "", "", "write an SVG timeline of the searched schedule and the best family", R::Cli},
    {"--html", K::Text, "", "", "write a self-contained HTML report of the searched schedule and the best family",
     R::Cli},
    {"--out", K::Text, "", "", "write the searched schedule to this file", R::Cli},
    {"--out-format", K::Text, "csv", "", "schedule file dialect: csv or torch (both PyTorch's compute-only CSV)",
     R::Cli, "csv|torch"},
    kFormatResults,
    {"--quiet,-q", K::Flag, "", "", "no progress line on stderr (it is shown only when stderr is a terminal)", R::Cli},
};
constexpr auto kSearch = join(kSearchFirst, kOverlapRows, kSearchOwn, kOverlapDict);

constexpr Option kModel[] = {
    {"file", K::Text, "", "", "a ppsim YAML config or a Hugging Face config.json", R::Both, {}, false, "path", true},
    {"--pp,-p", K::Int, "", "stages", "pipeline stages: the parameters each holds (default: a YAML's parallel.pp)"},
    {"--layer-split", K::Ints, "", "layers", "layers per stage, comma-separated (default: the config's, else even)"},
    {"--seq-len", K::Int64, "", "tokens", "sequence length for the FLOPs (default: the config's)"},
    kSet,
    kFormatTableJson,
    kOutput,
};

constexpr Option kFidelity[] = {
    {"files", K::Texts, "", "", "published configs (default: every *.yaml in --dir)"},
    {"--dir", K::Text, "configs/published", "", "folder of published configs (its *.yaml and *.yml, subfolders too)"},
    kSet,
    kCalibration,
    {"--calibrate", K::Text, "", "",
     "first: calibrate each source on its first result and predict the others; loso: each source predicted with the "
     "compute scale fitted on the other sources (docs/CALIBRATION.md)",
     R::Both, "first|loso", true},
    kFormatTableJson,
    kOutput,
    {"--check",
     K::Text,
     "",
     "",
     "a thresholds file: exit 7 when a result's |error| (or relative pp) is past it",
     R::Both,
     {},
     false,
     "thresholds"},
};

constexpr Option kProfile[] = {
    {"config", K::Text, "", "", "YAML config whose model to profile", R::Both, {}, false, {}, true},
    kSet,
    {"--output,-o", K::Text, "", "", "write the profile here (default: stdout)"},
    {"--warmup", K::Int, "5", "repetitions", "untimed repetitions first"},
    {"--reps", K::Int, "20", "repetitions", "timed repetitions (the median is kept)"},
    {"--device", K::Int, "0", "", "GPU index"},
    {"--a2a", K::Text, "ours", "",
     "MoE with parallel.ep > 1 on 2+ GPUs: the all-to-all that dispatch and combine are timed through: ours (the "
     "config's comm_sms) or nccl (NCCL's grouped send/recv)",
     R::Both, "ours|nccl", true},
};

constexpr Option kValidate[] = {
    {"config", K::Text, "", "", "YAML config to replay on the GPUs", R::Both, {}, false, {}, true},
    kSet,
    kCalibration,
    {"--schedule,-s",
     K::Text,
     "",
     "",
     "a family, a comma list, or all (default: the config's parallel.schedule; all: every family)",
     R::Both,
     {},
     false,
     "schedules"},
    {"--schedule-file", K::Text, "", "",
     "replay one schedule from PyTorch's compute-only CSV (e.g. one `ppsim search` wrote) instead of families"},
    {"--devices", K::Int, "0", "GPUs", "GPUs to use (0 = all visible; fewer than ranks: ranks share GPUs)"},
    {"--reps", K::Int, "10", "repetitions", "timed repetitions when profiling op costs"},
    {"--replays", K::Int, "3", "replays",
     "measured replays of each schedule (each after its warm-ups): the one of median makespan is reported; the "
     "sharing fit's ZB-H2 replay as often, each kind's median factor"},
    {"--target", K::Real, "0", "share", "makespan error to flag (0: 0.05 on 2+ GPUs, 0.10 on one)"},
    {"--trace", K::Text, "", "", "one Perfetto trace with the predicted and measured timelines", R::Cli},
    {"--html", K::Text, "", "", "a self-contained HTML report: each measured timeline over its prediction, the table",
     R::Cli},
    kFormatTableJson,
    kOutput,
    {"--transport", K::Text, "auto", "",
     "how tensors move between ranks: auto (peer in one process, ipc for processes of one host, nccl across hosts), "
     "peer (copy-engine peer copies), ipc (the same through CUDA IPC, one process per GPU), nccl (one NCCL "
     "communicator, for comparison)",
     R::Both, "auto|peer|ipc|nccl", true},
    {"--timeout",
     K::Real,
     "120",
     "s",
     "seconds a rank may wait for a message or its GPU before the replay ends with one line naming the rank, its op "
     "and what it waited for (exit 5)",
     R::Both,
     {},
     false,
     {},
     false,
     true},
    {"--sm-split", K::Text, "auto", "",
     "ranks sharing a GPU: on = each on its own equal share of the SMs (CUDA green contexts), off = time-slice all "
     "SMs, auto = on where the GPU can be split",
     R::Both, "auto|on|off", true},
    {"--sharing", K::Text, "replay", "",
     "ranks sharing a GPU: replay = each kind's (F, I, W) slowdown beside another op, fitted on a short replay of "
     "the chunk before the schedules; uniform = one slowdown for any two ops (two F+I+W steps side by side, "
     "profiled); kind = a profiled slowdown per pair of kinds (docs/VALIDATION.md)",
     R::Both, "replay|kind|uniform", true},
    {"--rank-speeds", K::Text, "profiled", "",
     "ranks on SM partitions: profiled = each rank's op times scaled by how fast its partition runs the chunk alone; "
     "equal = all as profiled",
     R::Both, "profiled|equal", true},
    {"--co-run", K::Text, "sustained", "",
     "one rank per GPU on two or more GPUs (one process, or processes of one host under mpirun/srun): each op's time "
     "stretched by how its GPU ran it beside the other GPU "
     "idle or busy, profiled before the replay: sustained = ops at the clock the GPU keeps at the rank's own duty "
     "(profiled at several duties), full = ops back to back at the clock it keeps at 100% duty, held = short held "
     "bursts; off = as profiled alone (docs/VALIDATION.md)",
     R::Both, "sustained|full|held|off", true},
    {"--launch", K::Text, "graphs", "",
     "how the replay's actions and the profile's timed ops enqueue their kernels: graphs = each op captured into a "
     "CUDA graph once and launched as one, messages ordered by waits on values (not with --ep-replay: streams "
     "there); streams = one launch per kernel, event waits",
     R::Both, "graphs|streams", true},
    {"--ep-replay", K::Flag, "", "",
     "replay parallel.ep > 1 as EP shards exchanging tokens by the all-to-all (one process, or one per GPU under "
     "mpirun on one host); without it the chunk's dispatch and combine stay local permutes"},
    {"--a2a", K::Text, "ours", "",
     "with --ep-replay, the all-to-all: ours (our SM-bounded kernel on the config's comm_sms) or nccl (NCCL's grouped "
     "send/recv, one communicator per stage's EP group)",
     R::Both, "ours|nccl", true},
    {"--no-link-probe", K::Flag, "", "",
     "predict with the config's link model instead of the transfer time the replay measures"},
};

constexpr Option kImportTrace[] = {
    {"trace",
     K::Texts,
     "",
     "",
     "the trace: Chrome trace JSON from torch.profiler (.json or .json.gz); several (or a folder): one per rank of one "
     "run",
     R::Both,
     {},
     false,
     {},
     true},
    {"--output,-o", K::Text, "", "", "write the cost profile (YAML, version 2) here"},
    {"--moe-layers-only", K::Flag, "", "",
     "with -o: the profile stands for a config's MoE layers only (applies_to: moe_layers), the rest stays derived"},
    {"--inference", K::Flag, "", "",
     "read a forward-only (inference) trace: its profile has F times only (without it such a trace is refused as a "
     "training profile)"},
    {"--map", K::Texts, "", "",
     "a mapping rule REGEX=SUBOP:PASS (sub-ops: attention, mlp, dispatch, combine, other; passes: F, I or B, W), "
     "tried before the defaults (repeatable)"},
    {"--no-default-rules", K::Flag, "", "", "use only the --map rules"},
    {"--step-range", K::Text, "", "",
     "the step to report and predict: GPU work launched under CPU ranges matching this regex (default: all of the "
     "trace)"},
    {"--layer-order", K::Text, "auto", "",
     "number layers by the order of sub-op ranges (the k-th 'attn(F)' is layer k): auto (where no name numbers them), "
     "force, off",
     R::Both, "auto|force|off"},
    {"--comm-kernel", K::Text, "", "",
     "kernels whose names match this regex are communication too (beside NCCL, DeepEP, NVSHMEM, ...)"},
    {"--schedule,-s", K::Text, "", "",
     "the schedule the trace ran (pair, or a family): the traced step against the prediction; executed: the order the "
     "ranks ran, simulated with its own costs"},
    {"--p2p-runtime", K::Text, "dataflow", "",
     "with --schedule executed: dataflow (each transfer starts when its producer ends) or torch (PyTorch's sends and "
     "receives, one stream per rank)",
     R::Both, "dataflow|torch"},
    {"--executed-csv", K::Text, "", "", "write the executed order (pipeline ranges) as a schedule CSV", R::Cli},
    {"--pp,-p", K::Int, "1", "ranks", "with --schedule: pipeline ranks P"},
    {"--microbatches,-m", K::Int, "1", "micro-batches", "with --schedule: micro-batches M"},
    {"--vpp", K::Int, "0", "chunks", "with --schedule: chunks per rank (interleaved-1f1b)"},
    {"--devices", K::Int, "1", "GPUs", "with --schedule: GPUs the step ran on (ranks share them)"},
    {"--layers-per-chunk", K::Int, "0", "layers",
     "with --schedule: layers in one chunk (0: the trace's layers / stages; pair: all)"},
    kFormatTableJson,
    {"--html", K::Text, "", "", "write a self-contained HTML report: per-layer cells and streams as tables", R::Cli},
    {"--comm-sms", K::Int, "20", "SMs", "linear rule fallback: SMs held by communication"},
    {"--sms", K::Int, "132", "SMs", "linear rule fallback: SMs per GPU"},
};

constexpr Option kCalibrate[] = {
    {"config",
     K::Text,
     "",
     "",
     "the YAML config of the run you measured (its layout, batch and GPU type)",
     R::Both,
     {},
     false,
     {},
     true},
    {"trace",
     K::Texts,
     "",
     "",
     "PyTorch profiler (Kineto) traces of that run: fit per-op efficiencies from their kernels",
     R::Both,
     {},
     false,
     "traces"},
    {"--step-ms", K::Real, "", "ms", "the run's measured step time: fit one compute scale"},
    {"--tokens-per-s", K::Real, "", "tokens/s", "the run's measured throughput: fit one compute scale"},
    {"--schedule,-s", K::Text, "", "", "the schedule family the run used (default: the config's parallel.schedule)"},
    {"--vpp,-v", K::Int, "0", "chunks", "chunks per rank of an interleaved run (0: the config's)"},
    kSet,
    {"--step-range", K::Text, "", "", "with traces: the step is the GPU work under CPU ranges matching this regex"},
    {"--output,-o", K::Text, "", "", "write the calibration YAML here (the CLI needs it)"},
    kFormatTableJson,
};

constexpr CommandSpec kCommands[] = {
    {"schedules", "list the schedule families, their constraints and published formulas", kSchedules, ""},
    {"show", "print one schedule's per-rank op order (text, PyTorch CSV or JSON)", kShow, ""},
    {"compare", "simulate schedules side by side: makespan, bubbles, memory, throughput", kCompare, "compare"},
    {"simulate", "simulate one schedule and write its timeline", kSimulate, "simulate"},
    {"plan", "search schedules and layouts for a YAML config under memory and GPU limits", kPlan, "plan"},
    {"profile", "time a config's ops on the GPU and write a cost profile", kProfile, "profile"},
    {"validate", "replay a schedule on the GPUs and compare measured with predicted", kValidate, "validate"},
    {"import-trace", "read a PyTorch profiler (Kineto) trace and write a cost profile", kImportTrace, "import_trace"},
    {"search", "search per-rank op orders for your costs under a memory cap; beside the best family", kSearch,
     "search"},
    {"model", "parameters (total, active) by part, FLOPs per token, params per stage of a config or config.json",
     kModel, "model"},
    {"fidelity", "predict every configs/published/ run and compare with its source (docs/FIDELITY.md)", kFidelity,
     "fidelity"},
    {"calibrate", "fit a config's efficiencies to your own run (traces, or a step time) and write a calibration file",
     kCalibrate, "calibrate"},
};

}  // namespace

std::span<const CommandSpec> command_specs() { return kCommands; }

const CommandSpec& command_spec(std::string_view name) {
  for (const auto& c : kCommands)
    if (c.name == name) return c;
  throw InternalError(fmt::format("no options table for command '{}'", name));
}

bool positional(const Option& o) { return !o.names.starts_with("-"); }

std::string option_name(const Option& o) {
  if (positional(o)) return std::string(o.names);
  std::string_view n = o.names;
  while (!n.empty()) {
    const std::size_t comma = n.find(',');
    const std::string_view part = n.substr(0, comma);
    if (part.starts_with("--")) return std::string(part.substr(2));
    if (comma == std::string_view::npos) break;
    n.remove_prefix(comma + 1);
  }
  throw InternalError(fmt::format("option '{}' has no long name", o.names));
}

std::string python_name(const Option& o) {
  if (!o.py.empty()) return std::string(o.py);
  std::string n = option_name(o);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

const Option* find_option(const CommandSpec& c, std::string_view py_name) {
  for (const Option& o : c.options)
    if (python_name(o) == py_name) return &o;
  return nullptr;
}

std::vector<std::string> choice_list(const Option& o) {
  std::vector<std::string> out;
  std::string_view c = o.choices;
  while (!c.empty()) {
    const std::size_t bar = c.find('|');
    out.emplace_back(c.substr(0, bar));
    if (bar == std::string_view::npos) break;
    c.remove_prefix(bar + 1);
  }
  return out;
}

void check_choice(const Option& o, const std::string& value) {
  if (!o.strict) return;
  const std::vector<std::string> list = choice_list(o);
  if (std::find(list.begin(), list.end(), value) != list.end()) return;
  throw InputError(fmt::format("--{}: '{}' is not one of {}", option_name(o), value, o.choices),
                   closest_match(value, list), kExitUsage);
}

}  // namespace ppsim::api
