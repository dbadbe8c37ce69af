// Loading and validating a model config (schema in docs/CONFIG.md).
//
// The order is: parse the YAML (syntax errors at their mark), apply each --set on the tree,
// then read every section through the schema table below (unknown keys, types and ranges),
// then check that the sections agree with each other (parallelism, layer split). Each check
// raises one InputError at the node it is about, so the first problem is the one reported.
#include "cost/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <functional>
#include <numeric>
#include <string_view>

#include "core/enum_names.h"
#include "core/schedule.h"
#include "core/split.h"
#include "cost/calibration.h"
#include "cost/hf_config.h"
#include "cost/megatron_args.h"
#include "cost/model_keys.h"
#include "cost/profile.h"
#include "cost/torchtitan.h"
#include "cost/torchtitan_model.h"
#include "cost/yaml_reader.h"
#include "schedules/registry.h"
#include "schedules/schedule_list.h"

namespace ppsim {

double dtype_bytes(Dtype d) {
  return enum_lookup<Dtype, double>(d, {{Dtype::fp8, 1}, {Dtype::bf16, 2}, {Dtype::fp16, 2}, {Dtype::fp32, 4}}, 2);
}

const char* dtype_name(Dtype d) {
  return enum_name(d, {{Dtype::fp8, "fp8"}, {Dtype::bf16, "bf16"}, {Dtype::fp16, "fp16"}, {Dtype::fp32, "fp32"}});
}

const char* recompute_op_name(unsigned op) {
  return enum_name<unsigned>(op, {{kRecomputeNorm, "norm"},
                                  {kRecomputeMlaUp, "mla_up_proj"},
                                  {kRecomputeActFn, "act_fn"},
                                  {kRecomputeAttnCore, "attn_core"}});
}

double cache_bytes_per_elem(CacheType t) {
  return enum_lookup<CacheType, double>(
      t,
      {{CacheType::bf16, 2}, {CacheType::fp8, 1 + 4 / kCacheTileElems}, {CacheType::e5m6, 1.5 + 4 / kCacheTileElems}},
      2);
}

const char* cache_type_name(CacheType t) {
  return enum_name(t, {{CacheType::bf16, "bf16"}, {CacheType::fp8, "fp8"}, {CacheType::e5m6, "e5m6"}});
}

double PrecisionSpec::optimizer_bytes_per_param() const {
  const double master = params == Dtype::fp32 ? 0.0 : 4.0;
  return 2.0 * dtype_bytes(optimizer) + master;
}

namespace {

// ---- the schema: every key a config may hold -------------------------------------------------

SchemaNode leaf(const char* name) { return SchemaNode{name, {}, false}; }
SchemaNode section(const char* name, std::vector<SchemaNode> children) { return SchemaNode{name, std::move(children), false}; }

const SchemaNode& schema() {
  static const SchemaNode root = section(
      "", {
              leaf("name"), leaf("description"), leaf("megatron_args"), leaf("torchtitan"),
              section("model",
                      {leaf("layers"),
                       leaf("hidden"),
                       leaf("ffn_hidden"),
                       leaf("heads"),
                       leaf("kv_heads"),
                       leaf("head_dim"),
                       leaf("vocab"),
                       leaf("seq_len"),
                       leaf("micro_batch_size"),
                       leaf("dense_layers_first"),
                       leaf("mlp"),
                       leaf("norm"),
                       leaf("dropout"),
                       leaf("flash_attention"),
                       leaf("causal"),
                       leaf("tied_embeddings"),
                       leaf("mtp_depth"),
                       leaf("hf_config"),
                       leaf("qkv_bias"),
                       leaf("out_bias"),
                       leaf("mlp_bias"),
                       leaf("norms_per_layer"),
                       leaf("qk_norm"),
                       leaf("attention_sinks"),
                       leaf("learned_positions"),
                       leaf("sliding_window"),
                       leaf("local_layers"),
                       leaf("moe_layers"),
                       section("moe", {leaf("experts"), leaf("top_k"), leaf("shared_experts"),
                                       leaf("expert_ffn_hidden"), leaf("capacity_factor"), leaf("keep_expert_output"),
                                       leaf("max_nodes"), leaf("shared_expert_ffn_hidden"), leaf("router_bias")}),
                       section("mla", {leaf("q_lora_rank"), leaf("kv_lora_rank"), leaf("qk_nope_head_dim"),
                                       leaf("qk_rope_head_dim"), leaf("v_head_dim")})}),
              section("precision",
                      {leaf("gemm"), leaf("params"), leaf("grads"), leaf("optimizer"), leaf("gemm_input_cache"),
                       leaf("output_grad_cache"), leaf("attention_out_cache"), leaf("expert_act_cache"),
                       leaf("optimizer_location"), leaf("optimizer_host_fraction"), leaf("ema"), leaf("fp8_recipe")}),
              section("hardware",
                      {leaf("name"), leaf("gpus"), section("peak_tflops", {leaf("bf16"), leaf("fp8")}),
                       leaf("hbm_gbps"), leaf("hbm_gb"), leaf("gpus_per_node"), leaf("sms"), leaf("nvlink_gbps"),
                       leaf("nvlink_latency_us"), leaf("network_gbps"), leaf("network_latency_us"),
                       section("efficiency", {leaf("gemm"), leaf("attention"), leaf("elementwise"), leaf("comm"),
                                              leaf("accum_exposed"), leaf("gemm_fp8"), leaf("gemm_fp8_wgrad")}),
                       leaf("comm_sms"),
                       section("clock", {leaf("duty_slope"), leaf("duty_ref"), leaf("reset_idle_ms"), leaf("warm"),
                                         leaf("warm_ms"), leaf("slow"), leaf("slow_at_ms"), leaf("slow_ms")})}),
              section("cluster", {leaf("gpus"), leaf("gpu")}),
              section("costs",
                      {leaf("tp_comm"), leaf("tp_overlap"), leaf("dp_comm"), leaf("dp_overlap"), leaf("optimizer_step"),
                       leaf("cp_comm"), leaf("cp_overlap"), leaf("megatron_loss"), leaf("p2p_per_node"),
                       leaf("fp8_quant"), leaf("w_hold"), leaf("attention_shape"), leaf("gemm_shape")}),
              section("parallel", {leaf("pp"),
                                   leaf("vpp"),
                                   leaf("ep"),
                                   leaf("etp"),
                                   leaf("tp"),
                                   leaf("cp"),
                                   leaf("dp"),
                                   leaf("microbatches"),
                                   leaf("global_batch"),
                                   leaf("schedule"),
                                   leaf("layer_split"),
                                   leaf("embedding_on_first"),
                                   leaf("head_on_last"),
                                   leaf("recompute"),
                                   leaf("recompute_layers"),
                                   leaf("recompute_ops"),
                                   leaf("zero"),
                                   leaf("zero_shard"),
                                   leaf("fsdp"),
                                   leaf("dp_sync"),
                                   leaf("blocking_p2p"),
                                   leaf("post_validation"),
                                   leaf("w_deferral"),
                                   leaf("p2p_runtime"),
                                   leaf("cp_runtime"),
                                   leaf("sequence_parallel"),
                                   leaf("p2p_sync_us"),
                                   leaf("p2p_eager_mb"),
                                   leaf("p2p_sm_share")}),
              section("times", {leaf("F"), leaf("B"), leaf("W"), leaf("FB")}), leaf("profile"),
              leaf("calibration"),  // a calibration file (cost/calibration.h), applied before validation
              SchemaNode{"plan", {}, true},
              SchemaNode{"published", {}, true},  // read by `ppsim fidelity` (api/fidelity.h) only
          });
  return root;
}

const SchemaNode& sub(const SchemaNode& s, const char* name) {
  const SchemaNode* c = s.find(name);
  PPSIM_CHECK(c != nullptr, "schema has no section '{}'", name);
  return *c;
}

// ---- hardware presets -----------------------------------------------------------------------
// Datasheet figures for SXM parts: dense (no sparsity) peaks, HBM bandwidth and size, NVLink as
// NVIDIA lists it (both directions), one 400 Gb/s (50 GB/s) NIC per GPU (A100: 200 Gb/s).

// Memory: the capacity the driver reports (nvidia-smi's memory.total, NVML), in GB of 1e9 bytes.
// NVIDIA's product sizes are binary and rounded: an "80GB" H100 reports 81,559 MiB, 85.52 GB (read
// on an H100 80GB HBM3 here, 2026-11-26, tools/experiments/measure_gpu_memory.py; CUDA's own cudaMemGetInfo
// total there was 81,079 MiB and a process with a context, cuBLAS and one NCCL communicator had
// 83.67 GB left, docs/FIDELITY.md "What fits"). The other types as NVML reports them (Modal's
// table of nvidia-smi figures, thundergolfer.com/blog/nvidia-gpu-memory-capacity): A100 80GB
// 81,920 MiB, A100 40GB 40,960 MiB, H200 143,771 MiB. The H800 has the H100 SXM's five HBM3
// stacks: its figure (our choice).
constexpr double kMiB = 1048576.0;
constexpr double kH100MemGB = 81559 * kMiB / 1e9;    // 85.52
constexpr double kH200MemGB = 143771 * kMiB / 1e9;   // 150.75
constexpr double kA100_80MemGB = 81920 * kMiB / 1e9; // 85.90
constexpr double kA100_40MemGB = 40960 * kMiB / 1e9; // 42.95

// Datasheet figures of a GPU (a `hardware.name` preset, or a `cluster.gpu` type's).
struct Preset {
  const char* key;
  double bf16, fp8, hbm_gbps, hbm_gb;
  int sms;
  double nvlink_gbps, network_gbps;
};

// GPU types for `cluster.gpu`: datasheet figures and ONE efficiency set per type, the same for every
// run on that GPU, never tuned per run. Columns of `eff`: gemm, attention, elementwise, comm,
// accum_exposed, gemm_fp8, gemm_fp8_wgrad. docs/CONFIG.md "cluster.gpu" gives each figure's source
// and measurement; docs/FIDELITY.md tests the sets against published runs.
struct GpuType {
  Preset hw;
  EfficiencySpec eff;
};

constexpr GpuType kGpuTypes[] = {
    {{"a100-40gb", 312, 0, 1555, kA100_40MemGB, 108, 600, 25}, {0.75, 0.55, 0.8, 0.75, 0.65, 0, 0}},
    {{"a100-80gb", 312, 0, 2039, kA100_80MemGB, 108, 600, 25}, {0.75, 0.55, 0.8, 0.75, 0.65, 0, 0}},
    {{"h100", 989, 1979, 3350, kH100MemGB, 132, 900, 50}, {0.65, 0.45, 0.8, 0.75, 0.65, 0.52, 0.40}},
    {{"h800", 989, 1979, 3350, kH100MemGB, 132, 400, 50}, {0.65, 0.45, 0.8, 0.75, 0.65, 0.52, 0.40}},
    {{"h200", 989, 1979, 4800, kH200MemGB, 132, 900, 50}, {0.65, 0.45, 0.8, 0.75, 0.65, 0.52, 0.40}},
};

// A `hardware.name` preset: the datasheet figures of GPU type `type_key` (a compile error if none).
constexpr Preset preset_of(const char* key, std::string_view type_key) {
  for (const GpuType& g : kGpuTypes)
    if (type_key == g.hw.key) {
      Preset p = g.hw;
      p.key = key;
      return p;
    }
  throw "preset_of: no such GPU type";
}

constexpr Preset kPresets[] = {preset_of("h100", "h100"), preset_of("h800", "h800"), preset_of("h200", "h200"),
                               preset_of("a100", "a100-80gb")};

// A GPU's name as people and nvidia-smi write it, reduced to its type's key: case and separators
// ignored; "NVIDIA" before it, the SXM form factor and the HBM generation dropped ("NVIDIA
// H100 80GB HBM3", "H100-SXM5-80GB" and "H100 SXM" are h100); the memory size dropped where it is
// the type's only one (H100 and H800 80GB, H200 141GB; the A100's 40 and 80 GB stay to tell them
// apart). Other products keep what makes them so: "H100 PCIe", "H100 NVL", "H100 94GB" are no h100.
std::string preset_key(const std::string& name) {
  std::string k;
  for (char c : name)
    if (std::isalnum(static_cast<unsigned char>(c))) k += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (k.starts_with("nvidia") && k.size() > 6) k.erase(0, 6);
  for (const char* part : {"sxm5", "sxm4", "sxm", "hbm3e", "hbm3", "hbm2e"})
    for (std::size_t at; k.size() > std::string(part).size() && (at = k.find(part, 1)) != std::string::npos;)
      k.erase(at, std::string(part).size());
  for (const auto& [type, memory] : {std::pair{"h100", "80gb"}, {"h800", "80gb"}, {"h200", "141gb"}})
    if (k == std::string(type) + memory) k = type;
  return k;
}

const Preset* find_preset(const std::string& name) {
  const std::string k = preset_key(name);
  for (const auto& p : kPresets)
    if (k == p.key) return &p;
  return nullptr;
}

std::string gpu_type_key(const std::string& name) {
  // Case and separators ignored, an "-sxm"/"sxm4"/"sxm5" suffix dropped: "H100 SXM" is h100,
  // "A100-80GB" a100-80gb; "a100" alone is ambiguous (40 or 80 GB) and not accepted.
  std::string k = preset_key(name);
  for (const char* gb : {"40gb", "80gb"})
    if (k.size() > 4 && k.ends_with(gb)) k = k.substr(0, k.size() - 4) + "-" + gb;
  return k;
}

// GPUs one character from a type's name that are other products, with other figures: never
// offered as a misspelling of it.
constexpr std::string_view kOtherGpus[] = {"a10",   "a30",  "a40",      "a800",     "b100",    "b200",
                                           "gb200", "h20",  "h800pcie", "h100pcie", "h100nvl", "l4",
                                           "l40",   "l40s", "v100",     "mi300x"};

// Which of `keys` (GPU types or presets) a misspelt GPU name meant, or "" when it names another GPU:
// the same first letter, one character off ('hh100', 'h10'); never another product ('b200' is no
// h200, 'h20' no h200, 'a800' no h800).
std::string gpu_suggestion(const std::string& key, const std::vector<std::string>& keys) {
  if (std::find(std::begin(kOtherGpus), std::end(kOtherGpus), key) != std::end(kOtherGpus)) return "";
  const std::string best = closest_match(key, keys);
  if (best.empty() || key.empty() || best[0] != key[0]) return "";
  return edit_distance(key, best) <= 1 ? best : "";  // one character inserted, dropped or changed
}

const GpuType* find_gpu_type(const std::string& name) {
  const std::string k = gpu_type_key(name);
  for (const auto& g : kGpuTypes)
    if (k == g.hw.key) return &g;
  return nullptr;
}

std::string preset_list() {
  std::string s;
  for (const auto& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.key);
  return s;
}

Dtype to_dtype(const std::string& s) {
  if (s == "fp8") return Dtype::fp8;
  if (s == "fp16") return Dtype::fp16;
  if (s == "fp32") return Dtype::fp32;
  return Dtype::bf16;
}

// ---- sections -------------------------------------------------------------------------------

constexpr std::int64_t kMaxDim = 1 << 20;       // hidden sizes, head dims
constexpr std::int64_t kMaxTokens = 1 << 24;    // sequence length
constexpr std::int64_t kMaxCount = 1 << 16;     // layers, heads, experts, ranks

// A per-layer list of 0/1 (model.local_layers, model.moe_layers): `layers` entries.
std::vector<bool> read_layer_mask(const MapReader& r, const char* key, int layers) {
  if (!r.has(key)) return {};
  const YAML::Node n = r.value(key);
  if (!n.IsSequence() || static_cast<int>(n.size()) != layers)
    r.fail(key, fmt::format("model.{} must be a list of {} entries (one per layer, 1 or 0), got {}", key, layers,
                            describe_node(n)));
  std::vector<bool> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    out.push_back(r.to_integer(n[i], fmt::format("model.{}[{}]", key, i), 0, 1) == 1);
  return out;
}

// The details Hugging Face configs carry (biases, extra norms, windows, the MoE layers' places).
void read_model_details(const MapReader& r, ModelSpec& m) {
  m.qkv_bias = r.boolean("qkv_bias", false);
  m.out_bias = r.boolean("out_bias", false);
  m.mlp_bias = r.boolean("mlp_bias", false);
  m.norms_per_layer = static_cast<int>(r.integer("norms_per_layer", 2, 0, 8));
  const std::string qk = r.choice("qk_norm", "none", {"none", "per_head", "full"});
  m.qk_norm = qk == "per_head" ? ModelSpec::QkNorm::per_head
              : qk == "full"   ? ModelSpec::QkNorm::full
                               : ModelSpec::QkNorm::none;
  m.attention_sinks = r.boolean("attention_sinks", false);
  m.learned_positions = r.integer("learned_positions", 0, 0, kMaxTokens);
  m.sliding_window = r.integer("sliding_window", 0, 0, kMaxTokens);
  m.local_layers = read_layer_mask(r, "local_layers", m.layers);
  if (!m.local_layers.empty() && m.sliding_window == 0)
    r.fail("local_layers", "model.local_layers needs model.sliding_window (the window those layers use)");
  m.moe_layers = read_layer_mask(r, "moe_layers", m.layers);
  if (!m.moe_layers.empty() && !m.moe.enabled()) r.fail("moe_layers", "model.moe_layers needs a model.moe section");
  if (!m.moe_layers.empty() && r.has("dense_layers_first"))
    r.fail("moe_layers", "give model.moe_layers or model.dense_layers_first, not both");
}

ModelSpec read_model(const MapReader& r) {
  ModelSpec m;
  m.layers = static_cast<int>(r.required_integer("layers", 1, kMaxCount));
  m.hidden = r.required_integer("hidden", 1, kMaxDim);
  m.heads = static_cast<int>(r.required_integer("heads", 1, kMaxCount));
  m.kv_heads = static_cast<int>(r.integer("kv_heads", m.heads, 1, m.heads));
  if (m.heads % m.kv_heads != 0)
    r.fail("kv_heads", fmt::format("model.kv_heads={} must divide model.heads={}", m.kv_heads, m.heads));
  if (!r.has("head_dim") && m.hidden % m.heads != 0)
    r.fail("heads", fmt::format("model.hidden={} is not a multiple of model.heads={}; give model.head_dim", m.hidden, m.heads));
  m.head_dim = r.integer("head_dim", m.hidden / m.heads, 1, kMaxDim);
  m.vocab = r.required_integer("vocab", 1, 1LL << 27);
  m.seq_len = r.required_integer("seq_len", 1, kMaxTokens);
  m.micro_batch_size = static_cast<int>(r.integer("micro_batch_size", 1, 1, kMaxCount));
  if (static_cast<double>(m.seq_len) * m.micro_batch_size > static_cast<double>(kMaxTokens))
    r.fail("micro_batch_size", fmt::format("model.micro_batch_size * model.seq_len = {} tokens is over the limit of {}",
                                           static_cast<long long>(m.seq_len) * m.micro_batch_size, kMaxTokens));
  m.mlp = r.choice("mlp", "swiglu", {"swiglu", "gelu"}) == "gelu" ? MlpKind::gelu : MlpKind::swiglu;
  m.norm = r.choice("norm", "rmsnorm", {"rmsnorm", "layernorm"}) == "layernorm" ? NormKind::layernorm : NormKind::rmsnorm;
  m.dropout = r.boolean("dropout", false);
  m.flash_attention = r.boolean("flash_attention", true);
  m.causal = r.boolean("causal", true);
  m.tied_embeddings = r.boolean("tied_embeddings", false);
  m.mtp_depth = static_cast<int>(r.integer("mtp_depth", 0, 0, 64));

  if (r.has("moe")) {
    const MapReader moe = r.child("moe", sub(sub(schema(), "model"), "moe"));
    m.moe.experts = static_cast<int>(moe.required_integer("experts", 1, kMaxCount));
    m.moe.top_k = static_cast<int>(moe.required_integer("top_k", 1, m.moe.experts));
    m.moe.shared_experts = static_cast<int>(moe.integer("shared_experts", 0, 0, kMaxCount));
    m.moe.expert_ffn_hidden = moe.required_integer("expert_ffn_hidden", 1, kMaxDim);
    m.moe.capacity_factor = moe.number("capacity_factor", 1.0, 0, 1e3, true);
    m.moe.keep_expert_output = moe.boolean("keep_expert_output", true);
    m.moe.max_nodes = static_cast<int>(moe.integer("max_nodes", 0, 0, kMaxCount));
    m.moe.shared_expert_ffn_hidden = moe.integer("shared_expert_ffn_hidden", 0, 1, kMaxDim);
    m.moe.router_bias = moe.boolean("router_bias", false);
  }
  m.dense_layers_first = static_cast<int>(r.integer("dense_layers_first", 0, 0, m.layers));
  if (m.dense_layers_first > 0 && !m.moe.enabled())
    r.fail("dense_layers_first", "model.dense_layers_first needs a model.moe section (every layer of a dense model is dense)");
  read_model_details(r, m);
  bool has_dense_layers = !m.moe.enabled() || m.dense_layers_first > 0;
  for (bool moe_layer : m.moe_layers) has_dense_layers = has_dense_layers || !moe_layer;
  if (has_dense_layers) m.ffn_hidden = r.required_integer("ffn_hidden", 1, kMaxDim);
  else m.ffn_hidden = r.integer("ffn_hidden", 0, 1, kMaxDim);

  if (r.has("mla")) {
    const MapReader mla = r.child("mla", sub(sub(schema(), "model"), "mla"));
    m.mla.enabled = true;
    m.mla.q_lora_rank = mla.integer("q_lora_rank", 0, 0, kMaxDim);
    m.mla.kv_lora_rank = mla.required_integer("kv_lora_rank", 1, kMaxDim);
    m.mla.qk_nope_head_dim = mla.required_integer("qk_nope_head_dim", 1, kMaxDim);
    m.mla.qk_rope_head_dim = mla.integer("qk_rope_head_dim", 0, 0, kMaxDim);
    m.mla.v_head_dim = mla.required_integer("v_head_dim", 1, kMaxDim);
    if (r.has("kv_heads") && m.kv_heads != m.heads)
      r.fail("kv_heads", "model.kv_heads must equal model.heads with model.mla (latent attention up-projects K and V per head)");
  }
  return m;
}

PrecisionSpec read_precision(const MapReader& r) {
  PrecisionSpec p;
  p.gemm = to_dtype(r.choice("gemm", "bf16", {"bf16", "fp8"}));
  p.params = to_dtype(r.choice("params", "bf16", {"bf16", "fp16", "fp32"}));
  p.grads = to_dtype(r.choice("grads", "fp32", {"bf16", "fp16", "fp32"}));
  p.optimizer = to_dtype(r.choice("optimizer", "fp32", {"bf16", "fp16", "fp32"}));
  auto cache = [&](const char* key, std::vector<std::string> allowed) {
    const std::string v = r.choice(key, "bf16", allowed);
    return v == "fp8" ? CacheType::fp8 : v == "e5m6" ? CacheType::e5m6 : CacheType::bf16;
  };
  p.gemm_input_cache = cache("gemm_input_cache", {"bf16", "fp8"});
  if (p.gemm_input_cache == CacheType::fp8 && p.gemm != Dtype::fp8)
    r.fail("gemm_input_cache", "precision.gemm_input_cache: fp8 caches the inputs of FP8 GEMMs; it needs precision.gemm: fp8");
  p.output_grad_cache = cache("output_grad_cache", {"bf16", "fp8"});
  if (p.output_grad_cache == CacheType::fp8 && p.gemm != Dtype::fp8)
    r.fail("output_grad_cache",
           "precision.output_grad_cache: fp8 keeps the output-grads that FP8 weight-grad GEMMs read; it needs precision.gemm: fp8");
  p.attention_out_cache = cache("attention_out_cache", {"bf16", "fp8", "e5m6"});
  p.expert_act_cache = cache("expert_act_cache", {"bf16", "fp8"});
  p.optimizer_location = r.choice("optimizer_location", "device", {"device", "host"}) == "host" ? StateLocation::host : StateLocation::device;
  p.optimizer_host_fraction = r.number("optimizer_host_fraction", 1.0, 0.0, 1.0, false);
  if (r.has("optimizer_host_fraction") && p.optimizer_location != StateLocation::host)
    r.fail("optimizer_host_fraction",
           "precision.optimizer_host_fraction is the host's share with precision.optimizer_location: host");
  const std::string ema = r.choice("ema", "none", {"none", "device", "host"});
  p.ema = ema == "host" ? StateLocation::host : ema == "device" ? StateLocation::device : StateLocation::none;
  return p;
}

HardwareSpec read_hardware(const MapReader& r, const GpuType* type) {
  const SchemaNode& hs = sub(schema(), "hardware");
  HardwareSpec h;
  h.name = r.string("name", type != nullptr ? type->hw.key : "");
  const Preset* preset = type != nullptr ? nullptr : find_preset(h.name);
  // cluster.gpu: the type's datasheet figures and its one efficiency set; else a named preset's.
  if (const Preset* hw = type != nullptr ? &type->hw : preset) {
    h.peak_bf16_tflops = hw->bf16;
    h.peak_fp8_tflops = hw->fp8;
    h.hbm_gbps = hw->hbm_gbps;
    h.hbm_gb = hw->hbm_gb;
    h.sms = hw->sms;
    h.nvlink_gbps = hw->nvlink_gbps;
    h.network_gbps = hw->network_gbps;
  }
  if (type != nullptr) h.efficiency = type->eff;
  // A required figure: from the config, else from the preset, else an error naming both ways.
  auto needed = [&](const MapReader& m, const std::string& key, double preset_value) {
    if (m.has(key) || preset_value > 0) return m.number(key, preset_value, kMinFigure, 1e9, false);
    m.fail_here(fmt::format("{} is required (or name a preset in hardware.name: {})", m.path(key), preset_list()));
  };
  if (type == nullptr && !h.name.empty() && preset == nullptr && !r.has("peak_tflops")) {
    // A name that is neither a preset nor backed by figures is most likely a misspelt preset.
    std::vector<std::string> keys;
    for (const auto& p : kPresets) keys.emplace_back(p.key);
    r.fail("name",
           fmt::format("hardware.name '{}' is not a preset ({}) and hardware.peak_tflops is not given", h.name,
                       preset_list()),
           gpu_suggestion(preset_key(h.name), keys));
  }
  h.gpus = static_cast<int>(r.integer("gpus", 0, 1, 1 << 24));
  const MapReader peak = r.child("peak_tflops", sub(hs, "peak_tflops"));
  h.peak_bf16_tflops = needed(peak, "bf16", h.peak_bf16_tflops);
  h.peak_fp8_tflops = peak.number("fp8", h.peak_fp8_tflops, 0, 1e9, false);
  h.hbm_gbps = needed(r, "hbm_gbps", h.hbm_gbps);
  h.hbm_gb = needed(r, "hbm_gb", h.hbm_gb);
  h.gpus_per_node = static_cast<int>(r.integer("gpus_per_node", 8, 1, 1024));
  h.sms = static_cast<int>(r.integer("sms", h.sms, 1, 100000));
  h.nvlink_gbps = needed(r, "nvlink_gbps", h.nvlink_gbps);
  h.nvlink_latency_us = r.number("nvlink_latency_us", h.nvlink_latency_us, 0, 1e6, false);
  h.network_gbps = needed(r, "network_gbps", h.network_gbps);
  h.network_latency_us = r.number("network_latency_us", h.network_latency_us, 0, 1e6, false);
  const MapReader eff = r.child("efficiency", sub(hs, "efficiency"));
  h.efficiency.gemm = eff.number("gemm", h.efficiency.gemm, 0.01, 1, false);
  h.efficiency.attention = eff.number("attention", h.efficiency.attention, 0.01, 1, false);
  h.efficiency.elementwise = eff.number("elementwise", h.efficiency.elementwise, 0.01, 1, false);
  h.efficiency.comm = eff.number("comm", h.efficiency.comm, 0.01, 1, false);
  h.efficiency.accum_exposed = eff.number("accum_exposed", h.efficiency.accum_exposed, 0, 2, false);
  if (eff.has("gemm_fp8")) h.efficiency.gemm_fp8 = eff.number("gemm_fp8", h.efficiency.gemm, 0.01, 1, false);
  if (eff.has("gemm_fp8_wgrad"))
    h.efficiency.gemm_fp8_wgrad = eff.number("gemm_fp8_wgrad", h.efficiency.gemm_fp8, 0.01, 1, false);
  h.comm_sms = static_cast<int>(r.integer("comm_sms", 0, 0, h.sms - 1));
  const MapReader clock = r.child("clock", sub(hs, "clock"));
  h.clock_duty_slope = clock.number("duty_slope", 0, 0, 10, false);
  h.clock_duty_ref = clock.number("duty_ref", 0.8, 0, 1, false);
  h.clock_reset_idle_ms = clock.number("reset_idle_ms", 20, 0, 1e4, false);
  h.clock_warm = clock.number("warm", 0, -0.5, 0.5, false);
  h.clock_warm_ms = clock.number("warm_ms", 50, 0.1, 1e4, false);
  h.clock_slow = clock.number("slow", 0, -0.5, 0.5, false);
  h.clock_slow_at_ms = clock.number("slow_at_ms", 900, 0, 1e5, false);
  h.clock_slow_ms = clock.number("slow_ms", 150, 0.1, 1e4, false);
  return h;
}

// precision.fp8_recipe: how FP8 GEMMs are scaled. block (the default): DeepSeek-V3's 1x128 / 128x128
// tiles, the efficiency set's gemm_fp8 and gemm_fp8_wgrad. tensor: one scale per tensor (Transformer
// Engine's delayed scaling, NVIDIA's FP8 recipes): both at gemm x kFp8TensorRatio, unless the config
// sets them. tools/measure_fp8_gemm.py on one H200 (2026-11-28, torch 2.11, cuBLAS 13; DeepSeek-V3's
// eight GEMM shapes, FLOP-weighted): per-tensor FP8 reached 0.652 of the FP8 peak where BF16 reached
// 0.746 of its own (0.874), and on the weight gradients 0.641 against 0.734 (0.873); the same run's
// block scaling 0.559 (0.749) and 1x128 x 1x128 0.435 (0.593), as the Hopper set's 0.52 and 0.40 say.
constexpr double kFp8TensorRatio = 0.87;

void apply_fp8_recipe(const MapReader& root, ModelConfigData& c) {
  const SchemaNode& sc = schema();
  const MapReader pr = root.child("precision", sub(sc, "precision"));
  if (pr.choice("fp8_recipe", "block", {"block", "tensor"}) != "tensor") return;
  const MapReader hw = root.child("hardware", sub(sc, "hardware"));
  const MapReader eff = hw.child("efficiency", sub(sub(sc, "hardware"), "efficiency"));
  EfficiencySpec& e = c.hardware.efficiency;
  if (!eff.has("gemm_fp8")) e.gemm_fp8 = e.gemm * kFp8TensorRatio;
  if (!eff.has("gemm_fp8_wgrad")) e.gemm_fp8_wgrad = e.gemm * kFp8TensorRatio;
}

std::vector<int> read_layer_split(const MapReader& r, ParallelSpec& p) {
  if (!r.has("layer_split")) return {};
  const YAML::Node n = r.value("layer_split");
  p.layer_split_loc = r.loc("layer_split");
  if (n.IsScalar()) {
    const std::string v = r.choice("layer_split", "uniform", {"uniform"});
    (void)v;
    return {};
  }
  if (!n.IsSequence())
    r.fail("layer_split", fmt::format("parallel.layer_split must be 'uniform' or a list of layer counts, got {}", describe_node(n)));
  std::vector<int> out;
  for (std::size_t i = 0; i < n.size(); ++i)
    out.push_back(static_cast<int>(r.to_integer(n[i], fmt::format("parallel.layer_split[{}]", i), 0, kMaxCount)));
  if (out.empty()) r.fail("layer_split", "parallel.layer_split must not be an empty list");
  return out;
}

ParallelSpec read_parallel(const MapReader& r) {
  ParallelSpec p;
  p.pp = static_cast<int>(r.required_integer("pp", 1, 4096));
  p.has_vpp = r.has("vpp");
  p.vpp = static_cast<int>(r.integer("vpp", 1, 1, kMaxVpp));
  p.ep = static_cast<int>(r.integer("ep", 1, 1, kMaxCount));
  p.tp = static_cast<int>(r.integer("tp", 1, 1, 1024));
  p.etp = static_cast<int>(r.integer("etp", 0, 1, 1024));
  p.cp = static_cast<int>(r.integer("cp", 1, 1, 1024));
  p.dp = static_cast<int>(r.integer("dp", 1, 1, 1 << 20));
  p.microbatches = static_cast<int>(r.required_integer("microbatches", 1, 1 << 20));
  p.global_batch = r.integer("global_batch", 0, 1, 1LL << 40);
  p.schedule = r.string("schedule", "all");
  for (const std::string& name : split_schedule_names(p.schedule)) {
    try {
      (void)find_family(name);
    } catch (const InputError& e) {
      r.fail("schedule", "parallel.schedule: " + e.message(), e.suggestion());
    }
  }
  p.layer_split = read_layer_split(r, p);
  p.embedding_on_first = r.boolean("embedding_on_first", true);
  p.head_on_last = r.boolean("head_on_last", true);
  const std::string rc = r.choice("recompute", "none", {"none", "selective", "full"});
  p.recompute = rc == "full" ? Recompute::full : rc == "selective" ? Recompute::selective : Recompute::none;
  p.recompute_layers = static_cast<int>(r.integer("recompute_layers", -1, 0, kMaxCount));
  if (r.has("recompute_layers") && p.recompute != Recompute::full)
    r.fail("recompute_layers", "parallel.recompute_layers counts fully recomputed layers per stage; it needs parallel.recompute: full");
  if (r.has("recompute_ops")) {
    const YAML::Node n = r.value("recompute_ops");
    const std::string path = r.path("recompute_ops");
    auto add = [&](const YAML::Node& item, const std::string& item_path) {
      static const std::vector<std::string> names{"norm", "mla_up_proj", "act_fn", "attn_core"};
      // Errors point at the key's value (a list item's own mark is wrong for a --set value).
      if (!item.IsScalar()) r.fail("recompute_ops", fmt::format("{} must be an op class, got {}", item_path, describe_node(item)));
      const std::string v = item.Scalar();
      for (unsigned bit = 1, i = 0; i < names.size(); bit <<= 1, ++i)
        if (v == names[i]) {
          p.recompute_ops |= bit;
          return;
        }
      r.fail("recompute_ops", fmt::format("{}: unknown op class '{}' (norm, mla_up_proj, act_fn, attn_core)", item_path, v),
             closest_match(v, names));
    };
    if (n.IsSequence()) {
      for (std::size_t i = 0; i < n.size(); ++i) add(n[i], fmt::format("{}[{}]", path, i));
    } else if (!n.IsNull()) {
      add(n, path);
    }
  }
  if (p.recompute == Recompute::selective) p.recompute_ops |= kRecomputeAttnCore;
  p.zero = static_cast<int>(r.integer("zero", 0, 0, 3));
  p.zero_shard = static_cast<int>(r.integer("zero_shard", 0, 1, 1 << 20));
  p.fsdp = r.boolean("fsdp", false);
  if (p.fsdp && p.zero != 3) r.fail("fsdp", "parallel.fsdp (PyTorch FSDP2's layout) needs parallel.zero: 3");
  const std::string sync = r.choice("dp_sync", "automatic", {"automatic", "microbatch", "no_sync", "step"});
  p.dp_sync = sync == "microbatch" ? DpSync::microbatch
              : sync == "no_sync"  ? DpSync::no_sync
              : sync == "step"     ? DpSync::step
                                   : DpSync::automatic;
  p.blocking_p2p = r.boolean("blocking_p2p", false);
  p.post_validation = r.boolean("post_validation", false);
  p.w_deferral_full = r.choice("w_deferral", "memory", {"memory", "full"}) == "full";
  const std::string runtime = r.choice("p2p_runtime", "dataflow", {"dataflow", "megatron", "deepspeed", "torch"});
  p.p2p_runtime = runtime == "megatron"    ? P2pRuntime::megatron
                  : runtime == "deepspeed" ? P2pRuntime::deepspeed
                  : runtime == "torch"     ? P2pRuntime::torch
                                           : P2pRuntime::dataflow;
  p.cp_torch = r.choice("cp_runtime", "te", {"te", "torch"}) == "torch";
  p.sequence_parallel = r.boolean("sequence_parallel", true);
  p.p2p_sync_us = r.number("p2p_sync_us", 0, 0, 1e6, false);
  p.p2p_eager_mb = r.number("p2p_eager_mb", 0, 0, 1e6, false);
  if (p.p2p_sync_us > 0 && p.p2p_runtime != P2pRuntime::megatron)
    r.fail("p2p_sync_us", "parallel.p2p_sync_us is the restart after each of Megatron's p2p calls: it needs parallel.p2p_runtime: megatron");
  p.p2p_sm_share = r.number("p2p_sm_share", 0, 0, 0.9, false);
  if (p.p2p_sm_share > 0 && p.p2p_runtime != P2pRuntime::torch)
    r.fail("p2p_sm_share",
           "parallel.p2p_sm_share is what PyTorch's send and receive kernels take from compute beside them: it needs "
           "parallel.p2p_runtime: torch");
  return p;
}

OpTimes read_op_ms(const MapReader& r, bool need_fb_ok) {
  OpTimes t = read_op_times(r, false);
  if (t.f + t.b == 0) r.fail("B", fmt::format("{} + {} must be > 0", r.path("F"), r.path("B")));
  if (need_fb_ok) t.fb = static_cast<Time>(std::llround(r.number("FB", 0, 0, kMaxOpMs, true) * 1e6));
  return t;
}

// ---- cross-section checks -------------------------------------------------------------------

void check_consistency(const MapReader& root, ModelConfigData& c) {
  const MapReader par = root.child("parallel", sub(schema(), "parallel"));
  const MapReader hw = root.child("hardware", sub(schema(), "hardware"));
  const MapReader cl = root.child("cluster", sub(schema(), "cluster"));
  ParallelSpec& p = c.parallel;
  const ModelSpec& m = c.model;

  // Total GPUs: hardware.gpus or cluster.gpus (equal when both are given).
  int gpus = c.hardware.gpus;
  const MapReader* gpus_at = &hw;
  if (cl.has("gpus")) {
    const int g = static_cast<int>(cl.integer("gpus", 0, 1, 1 << 24));
    if (gpus > 0 && g != gpus)
      cl.fail("gpus", fmt::format("cluster.gpus = {} but hardware.gpus = {}", g, gpus));
    gpus = g;
    gpus_at = &cl;
    c.hardware.gpus = g;
  }
  if (gpus > 0) {
    const long long per_replica = static_cast<long long>(p.pp) * p.tp * p.cp;
    if (!par.has("dp")) {
      if (gpus % per_replica != 0)
        gpus_at->fail("gpus", p.cp == 1 ? fmt::format("{} = {} GPUs is not a multiple of parallel.pp*tp = {}*{} = {}",
                                                      gpus_at->path("gpus"), gpus, p.pp, p.tp, per_replica)
                                        : fmt::format("{} = {} GPUs is not a multiple of parallel.pp*tp*cp = {}*{}*{} = {}",
                                                      gpus_at->path("gpus"), gpus, p.pp, p.tp, p.cp, per_replica));
      p.dp = static_cast<int>(gpus / per_replica);
    } else if (per_replica * p.dp != gpus) {
      gpus_at->fail("gpus", p.cp == 1 ? fmt::format("parallel.pp*tp*dp = {}*{}*{} = {} GPUs, but {} = {}", p.pp, p.tp, p.dp,
                                                    per_replica * p.dp, gpus_at->path("gpus"), gpus)
                                      : fmt::format("parallel.pp*tp*cp*dp = {}*{}*{}*{} = {} GPUs, but {} = {}", p.pp, p.tp,
                                                    p.cp, p.dp, per_replica * p.dp, gpus_at->path("gpus"), gpus));
    }
  }
  if (p.zero_shard > 0 && p.dp % p.zero_shard != 0)
    par.fail("zero_shard", fmt::format("parallel.zero_shard={} must divide parallel.dp={} (the other dp / zero_shard "
                                       "ranks hold replicas of each shard)",
                                       p.zero_shard, p.dp));
  if (p.ep > 1) {
    if (!m.moe.enabled()) par.fail("ep", fmt::format("parallel.ep={} needs a model.moe section (a dense model has no experts)", p.ep));
    if (m.moe.experts % p.ep != 0)
      par.fail("ep", fmt::format("parallel.ep={} must divide model.moe.experts={}", p.ep, m.moe.experts));
    // Out of dp x cp (the context-parallel ranks hold the same experts: Megatron-LM's expert grid
    // folds cp into its data-parallel dimension, torchtitan's efsdp is dp_shard x cp x tp / (etp x ep)).
    const bool whole = p.expert_tp() == 1 && p.tp > 1;  // etp checked below
    const bool cp = p.cp > 1;
    const std::string ranks = cp ? "data- and context-parallel" : "data-parallel";
    if ((whole || p.expert_tp() == p.tp) && p.expert_pool(p.grad_dp()) % p.ep != 0)
      par.fail("ep",
               whole ? fmt::format("parallel.ep={} must divide parallel.dp x {}tp = {} x {}{} (with parallel.etp: 1 "
                                   "expert parallelism is carved out of the {} ranks)",
                                   p.ep, cp ? "cp x " : "", p.dp, cp ? fmt::format("{} x ", p.cp) : "", p.tp,
                                   cp ? "data-, context- and tensor-parallel" : "data- and tensor-parallel")
                     : fmt::format("parallel.ep={} must divide parallel.{} (expert parallelism is carved out "
                                   "of the {} ranks{})",
                                   p.ep, cp ? fmt::format("dp x cp = {} x {}", p.dp, p.cp) : fmt::format("dp={}", p.dp),
                                   ranks, p.tp > 1 ? "; with parallel.etp: 1, of them x tp" : ""));
  }
  if (p.etp > 0) {
    if (!m.moe.enabled())
      par.fail("etp", fmt::format("parallel.etp={} needs a model.moe section (a dense model has no experts)", p.etp));
    if (p.etp != 1 && p.etp != p.tp)
      par.fail("etp", fmt::format("parallel.etp={}: expected 1 (whole experts) or parallel.tp={} (experts split as the "
                                  "dense layers)",
                                  p.etp, p.tp));
  }
  if (m.heads % p.tp != 0)
    par.fail("tp", fmt::format("parallel.tp={} must divide model.heads={}", p.tp, m.heads));
  if (p.cp > 1 && m.seq_len % (2 * p.cp) != 0)
    par.fail("cp", fmt::format("parallel.cp={}: model.seq_len={} must split into 2*cp = {} equal chunks", p.cp, m.seq_len,
                               2 * p.cp));

  // Layers per stage: pp*vpp stages, each 1/(pp*vpp) of the layers or as listed.
  const int stages = p.pp * p.vpp;
  // Each stage needs a layer, or the embedding (first) or the head (last): no split serves more.
  const int most_stages = m.layers + (p.embedding_on_first ? 1 : 0) + (p.head_on_last ? 1 : 0);
  if (stages > most_stages)
    par.fail("pp", fmt::format("pp*vpp = {}*{} = {} stages for model.layers={}: a stage needs a layer, the embedding "
                               "or the head, so at most {} stages; lower parallel.pp (or vpp)",
                               p.pp, p.vpp, stages, m.layers, most_stages));
  if (p.layer_split.empty()) {
    if (m.layers % stages != 0) {
      const std::string key = par.has("layer_split") ? "layer_split" : "pp";
      par.fail(key, fmt::format("model.layers={} cannot be split uniformly into pp*vpp = {}*{} = {} stages; give "
                                "parallel.layer_split as a list of {} layer counts",
                                m.layers, p.pp, p.vpp, stages, stages));
    }
  } else {
    if (static_cast<int>(p.layer_split.size()) != stages)
      par.fail("layer_split", fmt::format("parallel.layer_split has {} entries, but pp*vpp = {}*{} = {} stages need one each",
                                          p.layer_split.size(), p.pp, p.vpp, stages));
    const long long sum = std::accumulate(p.layer_split.begin(), p.layer_split.end(), 0LL);
    if (sum != m.layers)
      par.fail("layer_split", fmt::format("parallel.layer_split sums to {} layers, but model.layers = {}", sum, m.layers));
    for (int s = 0; s < stages; ++s) {
      const bool carries = (s == 0 && p.embedding_on_first) || (s == stages - 1 && p.head_on_last);
      if (p.layer_split[static_cast<std::size_t>(s)] == 0 && !carries)
        par.fail("layer_split", fmt::format("parallel.layer_split[{}] is 0: a stage needs a layer, the embedding or the head", s));
    }
  }
  if (c.precision.gemm == Dtype::fp8 && c.hardware.peak_fp8_tflops <= 0) {
    const MapReader prec = root.child("precision", sub(schema(), "precision"));
    prec.fail("gemm", "precision.gemm is fp8 but hardware.peak_tflops.fp8 is not known; give it");
  }
}

}  // namespace

// ---- public ---------------------------------------------------------------------------------

std::string gpu_type_list() {
  std::string s;
  for (const auto& g : kGpuTypes) s += (s.empty() ? "" : ", ") + std::string(g.hw.key);
  return s;
}

std::vector<std::string> config_key_paths() {
  std::vector<std::string> out;
  auto walk = [&](auto&& self, const SchemaNode& n, const std::string& prefix) -> void {
    for (const auto& c : n.children) {
      const std::string p = prefix.empty() ? c.name : prefix + "." + c.name;
      out.push_back(p);
      self(self, c, p);
    }
  };
  walk(walk, schema(), "");
  return out;
}

std::string apply_set(YAML::Node& root, const std::string& assignment) {
  const SourceLoc at{"--set", 0, 0};
  const std::size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(at, fmt::format("expected key.path=value, got '{}'", assignment));
  const std::string key_path = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);

  // Walk the schema first, so that a misspelt key gets a suggestion and the tree is untouched.
  const std::vector<std::string> parts = split(key_path, '.');
  const SchemaNode* s = &schema();
  std::string walked;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    if (part.empty()) throw InputError(at, fmt::format("empty key in '{}'", key_path));
    if (s != nullptr && !s->open) {
      const SchemaNode* next = s->find(part);
      if (next == nullptr) {
        std::string hint = suggest_key(part, s->names());
        if (!hint.empty()) hint = walked.empty() ? hint : walked + "." + hint;
        throw InputError(at, fmt::format("unknown key '{}'", key_path), hint);
      }
      if (!next->is_section() && i + 1 < parts.size())
        throw InputError(at, fmt::format("'{}' is a value, not a section, in '{}'", walked.empty() ? part : walked + "." + part,
                                         key_path));
      s = next->open ? nullptr : next;
    }
    walked = walked.empty() ? part : walked + "." + part;
  }
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(at, fmt::format("cannot parse the value of '{}': {}", key_path, e.msg));
  }

  // Then write it, creating the sections on the way; a section that holds a value is an error.
  if (!root.IsDefined() || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) throw InputError(at, fmt::format("cannot set '{}': the config is not a map", key_path));
  auto find_entry = [](const YAML::Node& node, const std::string& key, YAML::Node& out) {
    for (auto it = node.begin(); it != node.end(); ++it)
      if (it->first.IsScalar() && it->first.Scalar() == key) {
        out.reset(it->second);
        return true;
      }
    return false;
  };
  auto set_in = [&](auto&& self, YAML::Node node, std::size_t i) -> void {
    const std::string& part = parts[i];
    YAML::Node existing;
    const bool found = find_entry(node, part, existing);
    if (i + 1 == parts.size()) {
      if (found) existing = value;  // yaml-cpp assignment rebinds the entry in the tree
      else node[part] = value;
      return;
    }
    if (!found || existing.IsNull()) {
      node[part] = YAML::Node(YAML::NodeType::Map);
      find_entry(node, part, existing);
    }
    if (!existing.IsMap()) {
      std::string prefix;
      for (std::size_t k = 0; k <= i; ++k) prefix += (k ? "." : "") + parts[k];
      throw InputError(at, fmt::format("cannot set '{}': '{}' holds {}, not a section", key_path, prefix, describe_node(existing)));
    }
    self(self, existing, i + 1);
  };
  set_in(set_in, root, 0);
  return key_path;
}

namespace {

// model: {hf_config: config.json}: the file's model keys, those written beside it winning (a
// section such as moe: merged key by key). Returns the tree to validate (a copy when expanded).
// Copies `from`'s keys into `to` where `to` has none (maps merged key by key).
void merge_under(YAML::Node to, const YAML::Node& from) {
  const YAML::Node& given = to;  // const reads do not insert keys
  for (auto it = from.begin(); it != from.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    const YAML::Node mine = given[k];
    if (!mine) to[k] = it->second;
    else if (mine.IsMap() && it->second.IsMap()) merge_under(to[k], it->second);
  }
}

// The file `key` names (refused with `if_empty` when it names none), relative to the config's
// folder `base_dir`.
std::string named_file(const MapReader& r, const std::string& key, const std::string& base_dir,
                       const std::string& if_empty) {
  const std::string rel = r.string(key, "");
  if (rel.empty()) r.fail(key, if_empty);
  std::filesystem::path p(rel);
  if (p.is_relative() && !base_dir.empty()) p = std::filesystem::path(base_dir) / p;
  return p.string();
}

// A copy of the config with a launch file's model, parallel and precision keys under its own
// (its own winning; a section it lacks, or leaves empty, is the file's).
YAML::Node under_own_sections(const YAML::Node& root_node, const YAML::Node& model, const YAML::Node& parallel,
                              const YAML::Node& precision) {
  YAML::Node out = YAML::Clone(root_node);
  const YAML::Node& given = out;
  for (const char* section : {"model", "parallel", "precision"})
    if (!given[section] || given[section].IsNull()) out[section] = YAML::Node(YAML::NodeType::Map);
  merge_under(out["model"], model);
  merge_under(out["parallel"], parallel);
  merge_under(out["precision"], precision);
  return out;
}

// The world size a config states: hardware.gpus or cluster.gpus (0: neither).
long long stated_gpus(const YAML::Node& root) {
  for (const char* section : {"cluster", "hardware"}) {
    const YAML::Node s = root[section];
    if (s && s.IsMap() && s["gpus"]) return s["gpus"].as<long long>(0);
  }
  return 0;
}

// Megatron's data-parallel size for splitting --global-batch-size: parallel.dp when the YAML
// writes it, else world size / (tp x pp x cp) (Megatron's own rule), the world size from the YAML
// (hardware.gpus, cluster.gpus) or the launcher in the script (torchrun --nproc-per-node x
// --nnodes). Refused, naming what is missing, when neither is known.
// Where an error about what the script and the config decide together points: the megatron_args
// key in the YAML, or --megatron-args when the command line gave the file (it reaches the config
// as a --set, which is not what the user wrote).
SourceLoc megatron_file_loc(const MapReader& root) {
  const SourceLoc at = root.loc("megatron_args");
  return at.file == "--set" ? SourceLoc{"--megatron-args", 0, 0} : at;
}

long long megatron_dp(const MapReader& root, const YAML::Node& out, const MegatronArgs& args) {
  const YAML::Node& par = out["parallel"];
  if (par["dp"]) return par["dp"].as<long long>(1);
  const auto degree = [&](const char* key) { return par[key] ? std::max(1LL, par[key].as<long long>(1)) : 1LL; };
  const long long per_replica = degree("tp") * degree("pp") * degree("cp");
  long long world = stated_gpus(out);
  std::string from = "hardware.gpus";
  if (world <= 0 && args.world_size > 0) {
    world = args.world_size;
    from = args.world_size_from;
  }
  if (world <= 0)
    throw InputError(
        megatron_file_loc(root),
        fmt::format("--global-batch-size {} needs the world size to split it (Megatron's dp = GPUs / (tp x pp x "
                    "cp)): the script's launcher does not state it{}; give hardware.gpus or parallel.dp",
                    args.global_batch_size, args.world_size_why.empty() ? "" : " (" + args.world_size_why + ")"));
  if (world % per_replica != 0)
    throw InputError(megatron_file_loc(root),
                     fmt::format("{} = {} GPUs is not a multiple of --tensor-model-parallel-size x "
                                 "--pipeline-model-parallel-size x --context-parallel-size = {}",
                                 from, world, per_replica));
  return world / per_replica;
}

// What Megatron itself requires (its arguments.py) and the YAML did not give: one line naming the
// flag, at the script's training command, not ppsim's key.
void check_megatron_required(const YAML::Node& out, const MegatronArgs& args) {
  static const std::pair<const char*, const char*> kRequired[] = {
      {"layers", "--num-layers"}, {"hidden", "--hidden-size"}, {"heads", "--num-attention-heads"}};
  const YAML::Node& m = out["model"];
  if (m["hf_config"]) return;  // the config.json gives the rest (expand_hf_config names what it lacks)
  const std::string hint = args.missing_hint.empty() ? "" : "; " + args.missing_hint;
  for (const auto& [key, flag] : kRequired)
    if (!m[key])
      throw InputError(args.at, fmt::format("no {} in the Megatron-LM arguments (Megatron requires it){}", flag, hint));
  if (!m["seq_len"])
    throw InputError(args.at, fmt::format("no --seq-length (tokens per sequence{}); give it, or model.seq_len{}",
                                          args.dynamic_batch.empty() ? "" : ": " + args.dynamic_batch, hint));
  if (!m["vocab"])
    throw InputError(args.at,
                     fmt::format("no --vocab-size: Megatron takes the vocabulary from the tokenizer{}, which ppsim "
                                 "does not read; give it as model.vocab (the tokenizer's vocab_size{})",
                                 args.tokenizer.empty() ? "" : " (" + args.tokenizer + ")",
                                 args.vocab_divisible_by > 0 ? ", padded here as Megatron pads it" : ""));
}

// A model.vocab the YAML gives where the arguments give none is the tokenizer's size, which
// Megatron pads (MegatronArgs::vocab_divisible_by) with the run's tp: padded, the rule in read_as.
void pad_yaml_vocab(YAML::Node out, const MegatronArgs& args, std::vector<std::string>& read_as) {
  const YAML::Node& given = out;
  const YAML::Node v = given["model"]["vocab"];
  if (args.model["vocab"] || args.vocab_divisible_by <= 0 || !v || !v.IsScalar()) return;
  const long long vocab = v.as<long long>(0);
  const YAML::Node tp_node = given["parallel"]["tp"];
  const long long tp = tp_node && tp_node.IsScalar() ? std::max(1LL, tp_node.as<long long>(1)) : 1;
  if (vocab <= 0) return;  // not a count: model.vocab's own check says so
  const long long padded = megatron_padded_vocab(vocab, args.vocab_divisible_by, tp);
  if (padded == vocab) return;
  out["model"]["vocab"] = padded;
  read_as.push_back(
      fmt::format("model.vocab {} padded to {} as Megatron pads the tokenizer's vocabulary (a multiple "
                  "of --make-vocab-size-divisible-by {} x tp {})",
                  vocab, padded, args.vocab_divisible_by, tp));
}

[[noreturn]] void ctx_fail(const MapReader& m, const YAML::Node& at, const std::string& message) {
  m.ctx().fail(at, m.path("env"), message);
}

// megatron_args: FILE, or {script: FILE, env: {NAME: value, ...}}: the file and the variables the
// user sets for it (docs/CONFIG.md).
MegatronArgs read_megatron_key(const MapReader& root, const std::string& base_dir) {
  const YAML::Node v = root.value("megatron_args");
  if (!v.IsMap())
    return read_megatron_args(
        named_file(root, "megatron_args", base_dir, "megatron_args must name a file of Megatron-LM arguments"),
        root.loc("megatron_args"));
  static const SchemaNode kSchema{"megatron_args", {leaf("script"), SchemaNode{"env", {}, true}}, false};
  const MapReader m = root.child("megatron_args", kSchema);
  const std::string path =
      named_file(m, "script", base_dir, "megatron_args.script must name a launch script (or argument list)");
  ScriptEnv env;
  const YAML::Node e = m.value("env");
  if (e.IsDefined() && !e.IsNull() && !e.IsMap())
    m.fail("env", fmt::format("megatron_args.env must be a map of NAME: value, got {}", describe_node(e)));
  if (e.IsMap())
    for (auto it = e.begin(); it != e.end(); ++it) {
      const std::string name = it->first.as<std::string>("");
      if (!is_script_variable(name))
        ctx_fail(m, it->first, fmt::format("megatron_args.env: '{}' is not a shell variable name", name));
      if (!it->second.IsScalar())
        ctx_fail(m, it->second,
                 fmt::format("megatron_args.env.{} must be a value (text or number), got {}", name,
                             describe_node(it->second)));
      env[name] = it->second.Scalar();
    }
  return read_megatron_args(path, m.loc("script"), env);
}

// Whether the YAML writes the dotted key path ("precision.fp8_recipe"); const reads insert nothing.
bool written(const YAML::Node& node, const std::string& path) {
  if (!node.IsMap()) return false;
  const std::size_t dot = path.find('.');
  const YAML::Node child = node[path.substr(0, dot)];
  if (!child || child.IsNull()) return false;
  return dot == std::string::npos || written(child, path.substr(dot + 1));
}

// megatron_args: the launch arguments' model, parallel and precision keys under the config's
// own. microbatches = global batch / (micro-batch size x dp), dp from megatron_dp.
// `read_as`: the file's MegatronArgs::read_as.
YAML::Node expand_megatron_args(const YamlContext& ctx, const YAML::Node& root_node, const std::string& base_dir,
                                std::vector<std::string>& read_as) {
  const MapReader root(ctx, root_node, "", schema());
  if (!root.has("megatron_args")) return root_node;
  const MegatronArgs args = read_megatron_key(root, base_dir);
  read_as = args.read_as;
  for (const MegatronArgs::Refusal& r : args.unless_written)
    if (!written(root_node, r.key)) throw InputError(r.at, r.message);
  YAML::Node out = under_own_sections(root_node, args.model, args.parallel, args.precision);
  if (args.costs.size() > 0) {  // the YAML's costs: win, key by key
    if (!root_node["costs"] || root_node["costs"].IsNull()) out["costs"] = YAML::Node(YAML::NodeType::Map);
    merge_under(out["costs"], args.costs);
  }
  pad_yaml_vocab(out, args, read_as);
  check_megatron_required(out, args);
  const YAML::Node& par = out["parallel"];
  // The launcher's world size gives dp wherever the YAML states neither dp nor the GPUs, also when
  // it writes the micro-batches itself (else dp would fall to 1: one replica's memory and tokens).
  if (!par["dp"] && stated_gpus(out) <= 0 && args.world_size > 0) out["parallel"]["dp"] = megatron_dp(root, out, args);
  if (par["microbatches"]) return out;
  if (args.global_batch_size <= 0) {  // Megatron's default global batch: micro-batch size x dp
    out["parallel"]["microbatches"] = 1;
    return out;
  }
  const long long dp = megatron_dp(root, out, args);  // the YAML's, or the launcher's set above
  const long long per_step = static_cast<long long>(args.micro_batch_size) * dp;
  if (args.global_batch_size % per_step != 0)
    throw InputError(args.global_batch_at,
                     fmt::format("--global-batch-size {} is not a multiple of --micro-batch-size {} x dp {}",
                                 args.global_batch_size, args.micro_batch_size, dp));
  out["parallel"]["microbatches"] = args.global_batch_size / per_step;
  out["parallel"]["global_batch"] = args.global_batch_size;  // checked against the final dp (cost/invariants.h)
  return out;
}

// torchtitan: FILE: its [parallelism] and [training] keys (and [model]'s config.json) under the
// config's own; pipeline_parallel_layers_per_stage is applied by finish_torchtitan once the
// model's layers are known.
YAML::Node expand_torchtitan(const YamlContext& ctx, const YAML::Node& root_node, const std::string& base_dir,
                             TorchtitanKeys& keys) {
  const MapReader root(ctx, root_node, "", schema());
  if (!root.has("torchtitan")) return root_node;
  const std::string path =
      named_file(root, "torchtitan", base_dir, "torchtitan must name a torchtitan TOML job config");
  const long long gpus = stated_gpus(root_node);
  keys = read_torchtitan(path, gpus, root.loc("torchtitan"));
  const YAML::Node& own = root_node;  // const reads insert nothing
  keys.model_from_assets = keys.model["hf_config"] && !(own["model"] && own["model"]["hf_config"]);
  keys.gemm_stated = own["precision"] && own["precision"]["gemm"];
  YAML::Node out = under_own_sections(root_node, keys.model, keys.parallel, keys.precision);
  const YAML::Node& given = out;
  if (keys.costs && keys.costs.size() > 0) {
    if (!given["costs"] || given["costs"].IsNull()) out["costs"] = YAML::Node(YAML::NodeType::Map);
    merge_under(out["costs"], keys.costs);
  }
  return out;
}

// torchtitan's layer SAC (selective_ac_option N): each rank counts the blocks it wraps over its
// stages in stage order and fully recomputes every Nth. ppsim's recompute_layers recomputes as
// many in every stage: the most any stage recomputes (where the counts differ, an uneven split's
// short stages, those are priced at it too).
void apply_layer_sac(YAML::Node& out, const std::vector<int>& split, long long pp, const std::string& schedule,
                     long long every) {
  const int n_stages = static_cast<int>(split.size());
  if (pp < 1 || n_stages % pp != 0) return;  // the layout readers name it
  // The stages' ranks as the schedules place them (core/schedule.h): V-shaped, or looped.
  Schedule lay;
  if ((schedule == "zbv" || schedule == "dualpipev") && n_stages == 2 * pp)
    layout_v_shape(lay, static_cast<int>(pp));
  else
    layout_linear(lay, static_cast<int>(pp), n_stages / static_cast<int>(pp));
  std::vector<long long> per_stage(split.size(), 0);
  for (int r = 0; r < pp; ++r) {
    long long count = 0;
    for (int s = 0; s < n_stages; ++s)
      if (lay.stage_rank[static_cast<std::size_t>(s)] == r)
        for (int l = 0; l < split[static_cast<std::size_t>(s)]; ++l)
          if (++count % every == 0) ++per_stage[static_cast<std::size_t>(s)];
  }
  const long long k = *std::max_element(per_stage.begin(), per_stage.end());
  out["parallel"]["recompute"] = k > 0 ? "full" : "none";
  if (k > 0) out["parallel"]["recompute_layers"] = k;
}

// torchtitan's stages and layer split (its get_pipeline_metadata and
// generate_llm_fqn_per_model_part), once the model's layers are known: with
// pipeline_parallel_layers_per_stage, ceil((layers + first_less + last_less) / it) stages, which
// must be a multiple of pp (vpp = stages / pp); else pp stages, or 2 pp for a multi-stage
// schedule. The layers go over the stages with the embedding and the norm + output counted as
// first_less and last_less layers (parallel.layer_split, where not even). What the YAML writes wins.
YAML::Node finish_torchtitan(const YamlContext& ctx, const YAML::Node& root_node, const TorchtitanKeys& keys) {
  if (!keys.present) return root_node;
  const MapReader root(ctx, root_node, "", schema());
  const YAML::Node& given = root_node;
  const YAML::Node par = given["parallel"], model = given["model"];
  if (!par || !par.IsMap() || !model || !model.IsMap()) return root_node;  // the readers name it
  const YAML::Node layers_node = model["layers"];
  if (!layers_node && !model["hf_config"] && !keys.missing_model.empty()) root.fail("torchtitan", keys.missing_model);
  if (!layers_node) return root_node;  // read_model names the missing key
  check_torchtitan_model(keys, model);
  const long long layers = layers_node.as<long long>(0), lps = keys.layers_per_stage;
  const long long pp = par["pp"] ? par["pp"].as<long long>(1) : 1;
  const long long effective = layers + keys.first_less + keys.last_less;
  YAML::Node out = YAML::Clone(root_node);
  long long stages = pp * keys.stages_per_rank;
  if (lps > 0) {
    stages = (effective + lps - 1) / lps;
    if (stages % pp != 0)
      root.fail("torchtitan", fmt::format("pipeline_parallel_layers_per_stage {}: {} layers + {} + {} (first/last stage "
                                          "less layers) make {} stages, not a multiple of pp {} (torchtitan refuses it)",
                                          lps, layers, keys.first_less, keys.last_less, stages, pp));
    if (!par["vpp"] && stages / pp > 1) out["parallel"]["vpp"] = stages / pp;
  }
  if (par["vpp"]) stages = pp * par["vpp"].as<long long>(1);  // a vpp given (YAML, or the TOML's default 2) decides
  if (!keys.recompute_unstated.empty() && !par["recompute"] && !par["recompute_ops"])
    throw InputError(keys.recompute_unstated_at, keys.recompute_unstated);
  std::vector<int> split;
  if (par["layer_split"]) {
    for (const auto& n : par["layer_split"]) split.push_back(n.as<int>(0));
  } else {
    split = torchtitan_layer_split(layers, stages, keys.first_less, keys.last_less);
    if (split.empty())
      root.fail("torchtitan", fmt::format("{} layers + {} + {} (first/last stage less layers) over {} stages: a stage "
                                          "would get no layer, or less than the embedding's or output's weight "
                                          "(torchtitan refuses it)",
                                          layers, keys.first_less, keys.last_less, stages));
    if (std::adjacent_find(split.begin(), split.end(), std::not_equal_to<>()) != split.end())
      out["parallel"]["layer_split"] = flow_list(split);
  }
  if (keys.layer_sac_every > 0 && !par["recompute"] && !par["recompute_layers"])
    apply_layer_sac(out, split, pp, par["schedule"] ? par["schedule"].as<std::string>("") : "", keys.layer_sac_every);
  return out;
}

YAML::Node expand_hf_config(const YamlContext& ctx, const YAML::Node& root_node, const std::string& base_dir) {
  const MapReader root(ctx, root_node, "", schema());
  if (!root.has("model")) return root_node;
  const MapReader model = root.child("model", sub(schema(), "model"));
  if (!model.has("hf_config")) return root_node;
  const std::string path = named_file(model, "hf_config", base_dir, "hf_config must name a Hugging Face config.json");
  const YAML::Node keys = hf_model_keys(path, model.loc("hf_config"));
  YAML::Node out = YAML::Clone(root_node);
  YAML::Node m = out["model"];
  const YAML::Node& given = m;  // const reads do not insert keys
  for (auto it = keys.begin(); it != keys.end(); ++it) {
    const std::string k = it->first.as<std::string>();
    const YAML::Node mine = given[k];
    if (!mine) {
      m[k] = it->second;
    } else if (mine.IsMap() && it->second.IsMap()) {
      YAML::Node inner = m[k];
      const YAML::Node& inner_given = inner;
      for (auto jt = it->second.begin(); jt != it->second.end(); ++jt)
        if (!inner_given[jt->first.as<std::string>()]) inner[jt->first.as<std::string>()] = jt->second;
    }
  }
  // The file's per-layer lists follow its own layer count: the MoE places give way to a
  // dense_layers_first written beside; a layer count written beside them needs its own lists.
  if (model.has("dense_layers_first") && !model.has("moe_layers")) m.remove("moe_layers");
  for (const char* list : {"moe_layers", "local_layers"}) {
    const YAML::Node from_file = keys[list];
    if (from_file && !model.has(list) && model.has("layers") && from_file.size() != m["layers"].as<std::size_t>(0))
      model.fail("layers", fmt::format("model.layers is {} beside hf_config, whose {} per-layer pattern has {} "
                                       "entries; give model.{} for {} layers",
                                       m["layers"].as<std::string>(""), std::filesystem::path(path).filename().string(),
                                       from_file.size(), list, m["layers"].as<std::string>("")));
  }
  return out;
}

}  // namespace

ModelConfigData validate_config_tree(const YAML::Node& original, const std::string& name, const std::string& base_dir,
                                     const std::vector<std::string>& set_paths) {
  const YamlContext ctx(name, set_paths);
  const SchemaNode& sc = schema();
  TorchtitanKeys titan;
  std::vector<std::string> megatron_read_as;
  // `calibration: FILE`: its fitted figures written over a copy of the tree (cost/calibration.h).
  YAML::Node tree = original;
  if (const std::optional<Calibration> cal = read_named_calibration(original, base_dir, name, set_paths)) {
    tree = YAML::Clone(original);
    for (const std::string& s : calibration_sets(*cal)) apply_set(tree, s);
  }
  const YAML::Node root_node = finish_torchtitan(
      ctx,
      expand_hf_config(
          ctx, expand_megatron_args(ctx, expand_torchtitan(ctx, tree, base_dir, titan), base_dir, megatron_read_as),
          base_dir),
      titan);
  const MapReader root(ctx, root_node, "", sc);
  ModelConfigData c;
  c.file = name;
  c.tree = original;
  c.read_as = megatron_read_as;
  c.name = root.string("name", std::filesystem::path(name).stem().string());
  c.description = root.string("description", "");
  if (!root.has("model")) root.fail_here("model is required (the model's dimensions)");
  c.model = read_model(root.child("model", sub(sc, "model")));
  c.precision = read_precision(root.child("precision", sub(sc, "precision")));
  const GpuType* type = nullptr;
  {
    const MapReader cl = root.child("cluster", sub(sc, "cluster"));
    if (cl.has("gpu")) {
      c.gpu_type = cl.string("gpu", "");
      type = find_gpu_type(c.gpu_type);
      if (type == nullptr) {
        std::vector<std::string> keys, variants;  // variants: 'a100' is a100-40gb or a100-80gb
        const std::string key = gpu_type_key(c.gpu_type);
        for (const auto& g : kGpuTypes) {
          keys.emplace_back(g.hw.key);
          if (std::string_view(g.hw.key).starts_with(key + "-")) variants.emplace_back(g.hw.key);
        }
        const std::string hint = gpu_suggestion(key, keys);
        std::string more;
        if (!variants.empty())
          more = fmt::format("; '{}' names {}: say which", c.gpu_type, fmt::join(variants, " or "));
        else if (hint.empty())
          more =
              "; for another NVIDIA-style GPU (ppsim models NVLink and NCCL's collectives; not TPUs) drop cluster.gpu "
              "and give its figures under hardware: peak_tflops, hbm_gbps, hbm_gb, nvlink_gbps, network_gbps and "
              "efficiency (docs/CONFIG.md, \"hardware\")";
        cl.fail("gpu", fmt::format("cluster.gpu '{}' is not a GPU type ({}){}", c.gpu_type, gpu_type_list(), more),
                hint);
      }
      c.gpu_type = type->hw.key;
    }
  }
  if (!root.has("hardware") && type == nullptr)
    root.fail_here("hardware is required (peak FLOP/s, memory and link bandwidths), or name a GPU type in cluster.gpu");
  c.hardware = read_hardware(root.child("hardware", sub(sc, "hardware")), type);
  apply_fp8_recipe(root, c);
  {
    const MapReader co = root.child("costs", sub(sc, "costs"));
    c.costs.tp_comm = co.boolean("tp_comm", true);
    c.costs.tp_overlap = co.number("tp_overlap", 0, 0, 1, false);
    c.costs.dp_comm = co.boolean("dp_comm", false);
    c.costs.dp_overlap = co.number("dp_overlap", 0, 0, 1, false);
    c.costs.fsdp_prefetch = !co.has("dp_overlap");
    c.costs.optimizer_step = co.boolean("optimizer_step", false);
    c.costs.cp_comm = co.boolean("cp_comm", true);
    c.costs.cp_overlap = co.number("cp_overlap", 0, 0, 1, false);
    c.costs.megatron_loss = co.boolean("megatron_loss", true);
    c.costs.p2p_per_node = co.boolean("p2p_per_node", true);
    c.costs.fp8_quant = co.boolean("fp8_quant", true);
    c.costs.w_hold = co.boolean("w_hold", true);
    c.costs.attention_shape = co.boolean("attention_shape", true);
    c.costs.gemm_shape = co.boolean("gemm_shape", true);
  }
  if (!root.has("parallel")) root.fail_here("parallel is required (at least pp and microbatches)");
  c.parallel = read_parallel(root.child("parallel", sub(sc, "parallel")));
  if (root.has("times")) {
    c.times.present = true;
    c.times.share = read_op_ms(root.child("times", sub(sc, "times")), true);
  }
  if (root.has("times") && root.has("profile")) root.fail("profile", "give either times or profile, not both");
  if (root.has("profile")) {
    c.profile = load_profile(named_file(root, "profile", base_dir, "profile must name a file"), root.loc("profile"));
    if (c.profile.moe_layers_only && !c.model.moe.enabled())
      root.fail("profile", fmt::format("{} applies to the MoE layers only (applies_to: moe_layers), and model has no MoE layers",
                                       c.profile.path));
    // A whole-model profile whose backward holds the traced run's recompute (import-trace of a run
    // with activation checkpointing) stands for that run: its times are taken as they are (ppsim
    // adds no recompute to a profile), so the config must say the run recomputed.
    if (c.profile.recompute_included && !c.profile.moe_layers_only && c.parallel.recompute == Recompute::none &&
        c.parallel.recompute_ops == 0)
      root.fail("profile", fmt::format("{} says recompute: included (its backward holds the traced run's recompute), "
                                       "but parallel.recompute is none and no recompute_ops are given: write the run's "
                                       "recompute (recompute: full, or recompute_ops), or import a trace recorded "
                                       "without checkpointing",
                                       c.profile.path));
  }
  if (root.has("plan")) {
    const YAML::Node plan = root.value("plan");
    if (!plan.IsNull() && !plan.IsMap()) root.fail("plan", fmt::format("plan must be a map, got {}", describe_node(plan)));
    c.plan = plan;
  }
  check_consistency(root, c);
  return c;
}

ModelConfigData parse_config(const std::string& text, const std::string& name, const std::string& base_dir,
                             const std::vector<std::string>& sets) {
  YAML::Node root = parse_yaml(text, name);
  std::vector<std::string> set_paths;
  for (const auto& s : sets) set_paths.push_back(apply_set(root, s));
  return validate_config_tree(root, name, base_dir, set_paths);
}

}  // namespace ppsim
