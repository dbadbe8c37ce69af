// The edge (api/options.h): Values typed by the options table, and each command's request built
// from them once. Times and schedule lists are parsed here into their types.
#include <fmt/format.h>

#include <array>
#include <cctype>
#include <filesystem>
#include <limits>

#include "api/calibrate.h"
#include "api/gpu.h"
#include "api/options.h"
#include "api/times.h"
#include "core/error.h"
#include "cost/megatron_args.h"

namespace ppsim::api {

std::string calibration_set(const std::string& file) {
  return "calibration=" + std::filesystem::absolute(file).string();
}

// ---- Values -----------------------------------------------------------------------------------------

const Option& Values::row(std::string_view key) const {
  if (const Option* o = find_option(*cmd_, key)) return *o;
  throw InternalError(fmt::format("{}: no option '{}' in its table", cmd_->name, key));
}

const Value* Values::find(std::string_view key) const {
  (void)row(key);
  for (const auto& [k, v] : values_)
    if (k == key) return &v;
  return nullptr;
}

void Values::set(std::string_view key, Value v) {
  (void)row(key);
  for (auto& [k, old] : values_)
    if (k == key) {
      old = std::move(v);
      return;
    }
  values_.emplace_back(std::string(key), std::move(v));
}

bool Values::given(std::string_view key) const {
  const Value* v = find(key);
  return v && !std::holds_alternative<std::monostate>(*v);
}

bool Values::flag(std::string_view key) const {
  if (const Value* v = find(key); v && std::holds_alternative<bool>(*v)) return std::get<bool>(*v);
  return row(key).def == "true";
}

std::optional<long long> Values::integer(std::string_view key) const {
  if (const Value* v = find(key); v && std::holds_alternative<long long>(*v)) return std::get<long long>(*v);
  const std::string_view d = row(key).def;
  if (d.empty()) return std::nullopt;
  return std::stoll(std::string(d));
}

std::optional<double> Values::real(std::string_view key) const {
  if (const Value* v = find(key)) {
    if (std::holds_alternative<double>(*v)) return std::get<double>(*v);
    if (std::holds_alternative<long long>(*v)) return static_cast<double>(std::get<long long>(*v));
  }
  const std::string_view d = row(key).def;
  if (d.empty()) return std::nullopt;
  return std::stod(std::string(d));
}

std::string Values::text(std::string_view key) const {
  if (const Value* v = find(key); v && std::holds_alternative<std::string>(*v)) return std::get<std::string>(*v);
  return std::string(row(key).def);
}

std::vector<std::string> Values::texts(std::string_view key) const {
  if (const Value* v = find(key); v && std::holds_alternative<std::vector<std::string>>(*v))
    return std::get<std::vector<std::string>>(*v);
  return {};
}

std::vector<int> Values::ints(std::string_view key) const {
  std::vector<int> out;
  if (const Value* v = find(key); v && std::holds_alternative<std::vector<long long>>(*v))
    for (long long x : std::get<std::vector<long long>>(*v)) out.push_back(static_cast<int>(x));
  return out;
}

// ---- requests ---------------------------------------------------------------------------------------

namespace {

int to_int(long long v, const char* flag) {
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    throw InputError(fmt::format("{}: {} is out of range", flag, v), {}, kExitUsage);
  return static_cast<int>(v);
}

std::optional<int> opt_int(const Values& v, std::string_view key, const char* flag) {
  const std::optional<long long> x = v.integer(key);
  if (!x) return std::nullopt;
  return to_int(*x, flag);
}

// `s` as a YAML double-quoted scalar.
std::string yaml_quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// --set values, and --megatron-args (with --megatron-env) as the config key `megatron_args: FILE` (the path made
// absolute; the arguments ppsim does not use become a note).
std::vector<std::string> config_sets(const Values& v) {
  std::vector<std::string> sets = v.texts("overrides");
  // Both reach the config as --set values: without a config, the refusal names the option given.
  static const std::array<std::array<const char*, 3>, 2> kNeedConfig = {
      {{"calibration", "--calibration", "the model and cluster its figures apply to"},
       {"megatron_args", "--megatron-args", "the cluster, and what the arguments do not say"}}};
  const bool no_config = find_option(v.command(), "config") && v.text("config").empty();
  for (const auto& [key, flag, why] : kNeedConfig)
    if (no_config && find_option(v.command(), key) && !v.text(key).empty())
      throw InputError(fmt::format("{} needs a config file ({}): {} CONFIG {} FILE", flag, why, v.command().name, flag),
                       {}, kExitUsage);
  if (find_option(v.command(), "calibration") && !v.text("calibration").empty())
    sets.push_back(calibration_set(v.text("calibration")));
  if (!find_option(v.command(), "megatron_args")) return sets;
  const std::string path = v.text("megatron_args");
  ScriptEnv env;
  std::string env_yaml;  // {NAME: "value", ...}
  for (const std::string& a : v.texts("megatron_env")) {
    const std::size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    if (eq == std::string::npos || !is_script_variable(name))
      throw InputError(
          SourceLoc{"--megatron-env", 0, 0},
          fmt::format("expected NAME=value (a shell variable for the --megatron-args script), got '{}'", a));
    env[name] = a.substr(eq + 1);
  }
  if (path.empty()) {
    if (!env.empty())
      throw InputError(SourceLoc{"--megatron-env", 0, 0},
                       "--megatron-env sets variables of the --megatron-args script: give --megatron-args FILE (a "
                       "config's own key takes them as megatron_args: {script: FILE, env: {NAME: value}})");
    return sets;
  }
  for (const auto& [name, value] : env)
    env_yaml += fmt::format("{}{}: {}", env_yaml.empty() ? "" : ", ", name, yaml_quoted(value));
  const MegatronArgs args = read_megatron_args(path, SourceLoc{"--megatron-args", 0, 0}, env);
  if (!args.ignored.empty()) {
    std::string list;
    for (const auto& f : args.ignored) list += (list.empty() ? "" : " ") + f;
    v.notes.push_back(fmt::format("{}: Megatron-LM arguments not used: {}", path, list));
  }
  const std::string abs = std::filesystem::absolute(path).string();
  sets.push_back(env.empty() ? "megatron_args=" + abs
                             : fmt::format("megatron_args={{script: {}, env: {{{}}}}}", yaml_quoted(abs), env_yaml));
  return sets;
}

}  // namespace

ScheduleChoice schedule_choice(const Values& v) {
  ScheduleChoice c;
  c.pp = opt_int(v, "pp", "--pp");
  c.microbatches = opt_int(v, "microbatches", "--microbatches");
  c.vpp = to_int(*v.integer("vpp"), "--vpp");
  c.group_size = to_int(*v.integer("group_size"), "--group-size");
  c.schedule_file = v.text("schedule_file");
  c.layout = v.text("layout");
  c.csv_dialect = v.text("csv_dialect");
  c.keep_comm = !v.flag("drop_comm");
  c.max_ops = *v.integer("max_ops");
  return c;
}

UnitCosts unit_costs(const Values& v) {
  UnitCosts u;
  u.times = parse_times(v.text("times"), "--times");
  if (const std::string chunk = v.text("chunk_times"); !chunk.empty())
    u.chunk_times = parse_times(chunk, "--chunk-times");
  u.p2p_latency = *v.real("p2p_latency");
  u.a2a = v.real("a2a").value_or(-1);
  u.attn_share = *v.real("attn_share");
  u.layers = to_int(*v.integer("layers"), "--layers");
  u.comm_sms = to_int(*v.integer("comm_sms"), "--comm-sms");
  u.sms = to_int(*v.integer("sms"), "--sms");
  return u;
}

Request run_request(const Values& v) {
  Request r;
  r.schedule = schedule_choice(v);
  const bool simulate = v.command().name == "simulate";
  r.families = simulate ? v.text("schedule") : v.text("schedules");
  r.families_given = v.given(simulate ? "schedule" : "schedules") && !r.families.empty();
  if (r.families.empty() && !simulate) r.families = "all";
  r.single = simulate;
  r.units = unit_costs(v);
  r.config = v.text("config");
  r.sets = config_sets(v);
  // With a config, --pp, --microbatches and --vpp are its parallel keys (before the --set values,
  // which win): the config's checks then hold (pp x tp x cp x dp against its GPUs, the layer
  // split), where a schedule of another P over the config's dp would price GPUs it does not have.
  if (!r.config.empty() && r.schedule.schedule_file.empty()) {
    std::vector<std::string> flags;
    if (r.schedule.pp) flags.push_back(fmt::format("parallel.pp={}", *r.schedule.pp));
    if (r.schedule.microbatches) flags.push_back(fmt::format("parallel.microbatches={}", *r.schedule.microbatches));
    if (r.schedule.vpp > 0) flags.push_back(fmt::format("parallel.vpp={}", r.schedule.vpp));
    r.sets.insert(r.sets.begin(), flags.begin(), flags.end());
  }
  return r;
}

SearchCall search_call(const Values& v) {
  SearchCall c;
  c.config = v.text("config");
  c.sets = config_sets(v);
  c.pp = opt_int(v, "pp", "--pp");
  c.microbatches = opt_int(v, "microbatches", "--microbatches");
  c.units = unit_costs(v);
  const std::string cap = v.text("memory_cap");
  if (cap == "none") {
    c.memory_cap = 0.0;
  } else if (cap != "best") {
    const std::optional<double> x = parse_number(cap);
    if (!x || !(*x >= 0 && *x <= 1e9))
      throw InputError(fmt::format("--memory-cap: expected a number >= 0, none or best, got '{}'", cap), {},
                       kExitUsage);
    c.memory_cap = *x;
  }
  c.w_hold = v.real("w_hold");
  c.placement = v.text("placement");
  c.seed = static_cast<std::uint64_t>(*v.integer("seed"));
  c.time_limit = *v.real("time_limit");
  c.threads = to_int(*v.integer("threads"), "--threads");
  c.objective = v.text("objective");
  return c;
}

PlanRequest plan_request(const Values& v) {
  PlanRequest r;
  r.config = v.text("config");
  r.sets = config_sets(v);
  r.merge = v.texts("merge");
  r.shard = v.text("shard");
  r.top = to_int(*v.integer("top"), "--top");
  r.jobs = to_int(*v.integer("jobs"), "--jobs");
  r.max_ops = *v.integer("max_ops");
  return r;
}

ModelRequest model_request(const Values& v) {
  ModelRequest r;
  r.path = v.text("path");
  r.pp = opt_int(v, "pp", "--pp");
  if (r.pp == 0) r.pp.reset();  // --pp 0: as not given
  r.layer_split = v.ints("layer_split");
  r.seq_len = v.integer("seq_len");
  if (r.seq_len == 0) r.seq_len.reset();
  r.sets = v.texts("overrides");
  return r;
}

FidelityRequest fidelity_request(const Values& v) {
  FidelityRequest r;
  r.files = v.texts("files");
  r.dir = v.text("dir");
  r.sets = config_sets(v);
  r.thresholds = v.text("thresholds");
  r.calibrate = v.text("calibrate");
  return r;
}

CalibrateRequest calibrate_request(const Values& v) {
  CalibrateRequest r;
  r.config = v.text("config");
  r.sets = v.texts("overrides");
  r.traces = v.texts("traces");
  r.schedule = v.text("schedule");
  r.vpp = to_int(*v.integer("vpp"), "--vpp");
  r.trace_options.step_range = v.text("step_range");
  r.step_ms = v.real("step_ms");
  r.tokens_per_s = v.real("tokens_per_s");
  return r;
}

ImportTraceCall import_trace_call(const Values& v) {
  ImportTraceCall c;
  c.traces = v.texts("trace");
  c.options = {v.texts("map"), v.flag("no_default_rules"), v.text("step_range")};
  const std::string order = v.text("layer_order");
  if (order == "force")
    c.options.layer_order = trace::LayerOrder::force;
  else if (order == "off")
    c.options.layer_order = trace::LayerOrder::off;
  else if (order != "auto")
    throw InputError(fmt::format("--layer-order '{}': expected auto, force or off", order),
                     closest_match(order, {"auto", "force", "off"}), kExitUsage);
  c.options.comm_kernel = v.text("comm_kernel");
  c.predict.schedule = v.text("schedule");
  c.predict.p2p_runtime = v.text("p2p_runtime");
  c.predict.pp = to_int(*v.integer("pp"), "--pp");
  c.predict.microbatches = to_int(*v.integer("microbatches"), "--microbatches");
  c.predict.vpp = to_int(*v.integer("vpp"), "--vpp");
  c.predict.devices = to_int(*v.integer("devices"), "--devices");
  c.predict.layers_per_chunk = to_int(*v.integer("layers_per_chunk"), "--layers-per-chunk");
  c.predict.comm_sms = to_int(*v.integer("comm_sms"), "--comm-sms");
  c.predict.sms = to_int(*v.integer("sms"), "--sms");
  c.output = v.text("output");
  c.executed_csv = v.text("executed_csv");
  c.html = !v.text("html").empty();
  c.moe_layers_only = v.flag("moe_layers_only");
  c.inference = v.flag("inference");
  return c;
}

ProfileRequest profile_request(const Values& v) {
  return {v.text("config"),
          v.texts("overrides"),
          to_int(*v.integer("warmup"), "--warmup"),
          to_int(*v.integer("reps"), "--reps"),
          to_int(*v.integer("device"), "--device"),
          v.text("a2a")};
}

ValidateRequest validate_request(const Values& v) {
  ValidateRequest r;
  r.config = v.text("config");
  r.sets = config_sets(v);
  r.schedules = v.text("schedules");
  r.schedule_file = v.text("schedule_file");
  r.devices = to_int(*v.integer("devices"), "--devices");
  r.reps = to_int(*v.integer("reps"), "--reps");
  r.replays = to_int(*v.integer("replays"), "--replays");
  r.target = *v.real("target");
  r.no_link_probe = v.flag("no_link_probe");
  r.ep_replay = v.flag("ep_replay");
  r.a2a = v.text("a2a");
  r.transport = v.text("transport");
  r.timeout_s = *v.real("timeout");
  r.sm_split = v.text("sm_split");
  r.sharing = v.text("sharing");
  r.rank_speeds = v.text("rank_speeds");
  r.co_run = v.text("co_run");
  r.launch = v.text("launch");
  return r;
}

}  // namespace ppsim::api
