// What a torchtitan TOML trains (see torchtitan_model.h).
#include "cost/torchtitan_model.h"

#include <fmt/format.h>

#include <string>

#include "core/error.h"

namespace ppsim {

namespace {

// train_spec.model_args of pytorch/torchtitan 238fa99 (torchtitan/models/*/__init__.py): layers,
// dim, heads, MLA, routed experts. gpt_oss's dim and heads are its ModelArgs defaults (2880, 64).
constexpr TorchtitanFlavor kFlavors[] = {
    {"llama3", "debugmodel", 6, 256, 16, 0, 0},
    {"llama3", "debugmodel_flex_attn", 6, 256, 16, 0, 0},
    {"llama3", "debugmodel_varlen_attn", 6, 256, 16, 0, 0},
    {"llama3", "8B", 32, 4096, 32, 0, 0},
    {"llama3", "8B_flex", 32, 4096, 32, 0, 0},
    {"llama3", "8B_varlen", 32, 4096, 32, 0, 0},
    {"llama3", "70B", 80, 8192, 64, 0, 0},
    {"llama3", "405B", 126, 16384, 128, 0, 0},
    {"llama4", "debugmodel", 6, 256, 16, 0, -1},
    {"llama4", "debugmodel_irope", 6, 256, 16, 0, -1},
    {"llama4", "17bx16e", 48, 5120, 40, 0, 16},
    {"llama4", "17bx16e_irope", 48, 5120, 40, 0, 16},
    {"llama4", "17bx128e", 48, 5120, 40, 0, 128},
    {"llama4", "17bx128e_irope", 48, 5120, 40, 0, 128},
    {"deepseek_v3", "debugmodel", 6, 256, 16, 1, 8},
    {"deepseek_v3", "debugmodel_flex_attn", 6, 256, 16, 1, 8},
    {"deepseek_v3", "16B", 27, 2048, 16, 1, 64},
    {"deepseek_v3", "236B", 60, 5120, 128, 1, 160},
    {"deepseek_v3", "671B", 61, 7168, 128, 1, 256},
    {"qwen3", "debugmodel", 8, 256, 16, 0, 0},
    {"qwen3", "0.6B", 28, 1024, 16, 0, 0},
    {"qwen3", "1.7B", 28, 2048, 16, 0, 0},
    {"qwen3", "4B", 36, 2560, 32, 0, 0},
    {"qwen3", "8B", 36, 4096, 32, 0, 0},
    {"qwen3", "14B", 40, 5120, 40, 0, 0},
    {"qwen3", "32B", 64, 5120, 64, 0, 0},
    {"qwen3", "debugmodel_moe", 8, 256, 16, 0, 64},
    {"qwen3", "30B-A3B", 48, 2048, 32, 0, 128},
    {"qwen3", "235B-A22B", 94, 4096, 64, 0, 128},
    {"gpt_oss", "debugmodel", 4, -1, -1, 0, 8},
    {"gpt_oss", "20b", 24, 2880, 64, 0, 32},
    {"gpt_oss", "120b", 36, 2880, 64, 0, 128},
};

long long int_at(const YAML::Node& n, const char* key) {
  const YAML::Node v = n[key];
  return v && v.IsScalar() ? v.as<long long>(-1) : -1;
}

struct Read {
  long long layers, dim, heads, experts;
  bool mla;
};

Read read_of(const YAML::Node& model) {
  const YAML::Node moe = model["moe"];
  return {int_at(model, "layers"), int_at(model, "hidden"), int_at(model, "heads"),
          moe && moe.IsMap() ? int_at(moe, "experts") : 0, static_cast<bool>(model["mla"])};
}

std::string describe(long long layers, long long dim, long long heads, int mla, long long experts) {
  std::string s = fmt::format("{} layers x {}, {} heads", layers, dim, heads);
  if (mla >= 0) s += mla ? ", MLA" : ", no MLA";
  if (experts >= 0) s += experts > 0 ? fmt::format(", {} experts", experts) : ", dense";
  return s;
}

void check_flavor(const TorchtitanKeys& keys, const YAML::Node& model) {
  const TorchtitanFlavor* f = torchtitan_flavor(keys.model_name, keys.flavor);
  const std::string fix =
      "torchtitan builds the flavor from its own table; give the model in the YAML (model.hf_config of the "
      "flavor's config.json, or its keys)";
  if (!f)
    throw InputError(keys.flavor_at,
                     fmt::format("[model] name = \"{}\", flavor = \"{}\" is not in ppsim's table of torchtitan's "
                                 "flavors (238fa99), so hf_assets_path's config.json cannot be checked as the model "
                                 "trained: {}",
                                 keys.model_name, keys.flavor, fix));
  const Read r = read_of(model);
  const bool same = r.layers == f->layers && (f->dim < 0 || r.dim == f->dim) && (f->heads < 0 || r.heads == f->heads) &&
                    (f->mla < 0 || r.mla == (f->mla == 1)) && (f->experts < 0 || r.experts == f->experts);
  if (!same)
    throw InputError(keys.flavor_at,
                     fmt::format("[model] flavor \"{}\"{} of {} is {}; hf_assets_path's config.json is "
                                 "{}: {}",
                                 keys.flavor, keys.flavor_default ? " (JobConfig's default: the TOML names none)" : "",
                                 keys.model_name, describe(f->layers, f->dim, f->heads, f->mla, f->experts),
                                 describe(r.layers, r.dim, r.heads, r.mla ? 1 : 0, r.experts), fix));
}

}  // namespace

const TorchtitanFlavor* torchtitan_flavor(const std::string& model, const std::string& flavor) {
  for (const TorchtitanFlavor& f : kFlavors)
    if (model == f.model && flavor == f.flavor) return &f;
  return nullptr;
}

void check_torchtitan_model(const TorchtitanKeys& keys, const YAML::Node& model) {
  if (!keys.present) return;
  if (keys.model_from_assets) check_flavor(keys, model);
  if (keys.gemm_stated) return;
  if (!keys.unpriced.empty())
    throw InputError(keys.converters_at,
                     fmt::format("[model] converters: {} has no figure in ppsim; write precision.gemm (bf16 or fp8, "
                                 "with precision.fp8_recipe) in the YAML for the precision to price",
                                 keys.unpriced));
  const YAML::Node moe = model["moe"];
  if (keys.fp8_linear && moe && moe.IsMap() && int_at(moe, "experts") > 0)
    throw InputError(keys.converters_at,
                     "[model] converters: float8 converts the linear layers but not the experts' grouped GEMMs "
                     "(their float8 is rowwise: quantize.grouped_mm.float8), and ppsim prices every GEMM but the "
                     "router and the head in one precision; write precision.gemm (fp8 or bf16) in the YAML");
}

}  // namespace ppsim
