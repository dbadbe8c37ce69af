#include "cost/megatron_args.h"

#include <fmt/format.h>

#include <cctype>
#include <fstream>
#include <functional>
#include <map>
#include <regex>
#include <set>

namespace ppsim {

namespace {

struct Word {
  std::string text;
  SourceLoc loc;
};

// Shell-like words: quotes, backslash-newline continuations and `#` comments.
std::vector<Word> split_words(const std::string& text, const std::string& name) {
  std::vector<Word> out;
  int line = 1, col = 1;
  std::size_t i = 0;
  auto advance = [&](char c) {
    if (c == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  };
  while (i < text.size()) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      advance(c);
      ++i;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      advance(c);
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') advance(text[i++]);
      continue;
    }
    Word w;
    w.loc = SourceLoc{name, line, col};
    while (i < text.size() && !std::isspace(static_cast<unsigned char>(text[i]))) {
      const char d = text[i];
      if (d == '"' || d == '\'') {
        advance(text[i++]);
        while (i < text.size() && text[i] != d) {
          w.text += text[i];
          advance(text[i++]);
        }
        if (i >= text.size()) throw InputError(w.loc, "unterminated quote");
        advance(text[i++]);
        continue;
      }
      if (d == '\\' && i + 1 < text.size()) {
        advance(text[i++]);
        if (text[i] == '\n') {
          advance(text[i++]);
          break;
        }
      }
      w.text += text[i];
      advance(text[i++]);
    }
    if (!w.text.empty()) out.push_back(w);
  }
  return out;
}

struct Flag {
  std::string name;  // without the leading "--", '_' read as '-'
  std::vector<Word> values;
  SourceLoc loc;
};

class Flags {
 public:
  explicit Flags(std::vector<Flag> f) : flags_(std::move(f)) {
    for (std::size_t i = 0; i < flags_.size(); ++i) index_[flags_[i].name] = i;
  }
  bool has(const std::string& n) {
    used_.insert(n);
    return index_.count(n) != 0;
  }
  const Flag& get(const std::string& n) { return flags_[index_.at(n)]; }
  std::string value(const std::string& n) {
    const Flag& f = get(n);
    if (f.values.empty()) throw InputError(f.loc, fmt::format("--{} needs a value", n));
    const std::string& v = f.values[0].text;
    if (v.find('$') != std::string::npos)
      throw InputError(f.values[0].loc, fmt::format("--{} {}: a shell variable; write its value", n, v));
    return v;
  }
  long long integer(const std::string& n, long long min = 0) {
    const std::string v = value(n);
    const Flag& f = get(n);
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || v.empty() || x < min)
      throw InputError(f.values[0].loc, fmt::format("--{}: expected an integer >= {}, got '{}'", n, min, v));
    return x;
  }
  double number(const std::string& n) {
    const std::string v = value(n);
    try {
      return std::stod(v);
    } catch (const std::exception&) {
      throw InputError(get(n).values[0].loc, fmt::format("--{}: expected a number, got '{}'", n, v));
    }
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    for (const auto& f : flags_)
      if (!used_.count(f.name)) out.push_back("--" + f.name);
    return out;
  }

 private:
  std::vector<Flag> flags_;
  std::map<std::string, std::size_t> index_;
  std::set<std::string> used_;
};

}  // namespace

PipelineLayout parse_pipeline_layout(const std::string& layout, const SourceLoc& loc) {
  std::string s;
  for (char c : layout)
    if (!std::isspace(static_cast<unsigned char>(c)) && c != ',' && c != '\\' && c != '"' && c != '\'') s += c;
  std::size_t pos = 0;
  auto bad = [&](const std::string& why) {
    return InputError(loc, fmt::format("--pipeline-model-parallel-layout '{}': {}", layout, why));
  };
  // sequence := item*; item := atom ('*' n)?; atom := E | t | m | L | '|' | '(' sequence ')'
  std::function<std::string(int)> sequence = [&](int depth) -> std::string {
    std::string out;
    while (pos < s.size() && s[pos] != ')') {
      std::string atom;
      const char c = s[pos];
      if (c == '(') {
        ++pos;
        atom = sequence(depth + 1);
        if (pos >= s.size() || s[pos] != ')') throw bad("unbalanced '('");
        ++pos;
      } else if (c == 'E' || c == 't' || c == 'm' || c == 'L' || c == '|') {
        atom = std::string(1, c);
        ++pos;
      } else {
        throw bad(fmt::format("unexpected '{}' (E, t, m, L, |, (...)*n)", c));
      }
      if (pos < s.size() && s[pos] == '*') {
        ++pos;
        const std::size_t start = pos;
        while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
        if (start == pos || pos - start > 6) throw bad("'*' needs a repeat count");
        const int n = std::stoi(s.substr(start, pos - start));
        std::string rep;
        for (int k = 0; k < n; ++k) rep += atom;
        if (rep.size() > (1u << 20)) throw bad("too long");
        atom = rep;
      }
      out += atom;
    }
    if (depth == 0 && pos < s.size()) throw bad("unbalanced ')'");
    return out;
  };
  const std::string flat = sequence(0);
  PipelineLayout r;
  std::vector<std::string> chunks(1);
  for (char c : flat) {
    if (c == '|')
      chunks.emplace_back();
    else
      chunks.back() += c;
  }
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    int t = 0;
    for (char c : chunks[i]) {
      if (c == 't') ++t;
      if (c == 'm') ++r.mtp;
      if (c == 'E' && i != 0) r.embedding_first = false;
      if (c == 'L' && i + 1 != chunks.size()) r.loss_last = false;
    }
    r.layers.push_back(t);
  }
  return r;
}

MegatronArgs megatron_args_from_text(const std::string& text, const std::string& name) {
  const std::vector<Word> words = split_words(text, name);
  std::vector<Flag> list;
  for (const Word& w : words) {
    if (w.text.rfind("--", 0) == 0 && w.text.size() > 2) {
      Flag f;
      std::string n = w.text.substr(2);
      std::string val;
      const std::size_t eq = n.find('=');
      if (eq != std::string::npos) {
        val = n.substr(eq + 1);
        n = n.substr(0, eq);
      }
      for (char& c : n)
        if (c == '_') c = '-';
      f.name = n;
      f.loc = w.loc;
      if (eq != std::string::npos) f.values.push_back(Word{val, w.loc});
      list.push_back(std::move(f));
    } else if (w.text.size() > 3 && w.text.compare(w.text.size() - 3, 3, ".py") == 0) {
      list.clear();  // the flags so far were the launcher's (torchrun ... pretrain_gpt.py)
    } else if (!list.empty()) {
      list.back().values.push_back(w);
    }
  }
  if (list.empty()) throw InputError(SourceLoc{name, 0, 0}, "no Megatron-LM arguments (--flag value) in the file");
  {
    std::map<std::string, SourceLoc> seen;
    for (const Flag& f : list) {
      auto [it, fresh] = seen.emplace(f.name, f.loc);
      if (!fresh)
        throw InputError(f.loc, fmt::format("--{} is given twice (first at line {})", f.name, it->second.line));
    }
  }
  Flags a(std::move(list));
  MegatronArgs out;
  YAML::Node m(YAML::NodeType::Map), par(YAML::NodeType::Map), prec(YAML::NodeType::Map);
  auto copy_int = [&](const char* flag, YAML::Node node, const char* key, long long min = 1) {
    if (a.has(flag)) node[key] = a.integer(flag, min);
  };
  copy_int("num-layers", m, "layers");
  copy_int("hidden-size", m, "hidden");
  copy_int("ffn-hidden-size", m, "ffn_hidden");
  copy_int("num-attention-heads", m, "heads");
  copy_int("kv-channels", m, "head_dim");
  copy_int("seq-length", m, "seq_len");
  copy_int("vocab-size", m, "vocab");
  copy_int("padded-vocab-size", m, "vocab");
  if (a.has("group-query-attention")) {
    if (!a.has("num-query-groups"))
      throw InputError(a.get("group-query-attention").loc, "--group-query-attention needs --num-query-groups");
    m["kv_heads"] = a.integer("num-query-groups", 1);
  } else if (a.has("num-query-groups")) {
    (void)0;  // read only with --group-query-attention (Megatron ignores it otherwise)
  }
  // Megatron's defaults: GELU, LayerNorm, tied embeddings, dropout 0.1.
  m["mlp"] = a.has("swiglu") ? "swiglu" : "gelu";
  std::string norm = "LayerNorm";
  if (a.has("normalization")) norm = a.value("normalization");
  if (norm != "LayerNorm" && norm != "RMSNorm")
    throw InputError(a.get("normalization").values[0].loc,
                     fmt::format("--normalization {}: LayerNorm or RMSNorm", norm));
  m["norm"] = norm == "RMSNorm" ? "rmsnorm" : "layernorm";
  m["tied_embeddings"] = !a.has("untie-embeddings-and-output-weights");
  const double hidden_dropout = a.has("hidden-dropout") ? a.number("hidden-dropout") : 0.1;
  const double attention_dropout = a.has("attention-dropout") ? a.number("attention-dropout") : 0.1;
  m["dropout"] = hidden_dropout > 0 || attention_dropout > 0;
  if (a.has("micro-batch-size")) {
    out.micro_batch_size = static_cast<int>(a.integer("micro-batch-size", 1));
    m["micro_batch_size"] = out.micro_batch_size;
  }
  if (a.has("global-batch-size")) out.global_batch_size = static_cast<int>(a.integer("global-batch-size", 1));
  if (a.has("mtp-num-layers")) m["mtp_depth"] = a.integer("mtp-num-layers", 0);

  if (a.has("num-experts")) {
    YAML::Node moe(YAML::NodeType::Map);
    moe["experts"] = a.integer("num-experts", 1);
    if (a.has("moe-router-topk"))
      moe["top_k"] = a.integer("moe-router-topk", 1);
    else
      moe["top_k"] = 2;  // Megatron's default
    long long fe = 0;
    if (a.has("moe-ffn-hidden-size"))
      fe = a.integer("moe-ffn-hidden-size", 1);
    else if (a.has("ffn-hidden-size"))
      fe = a.integer("ffn-hidden-size", 1);
    if (fe > 0) moe["expert_ffn_hidden"] = fe;
    if (a.has("moe-router-enable-expert-bias")) moe["router_bias"] = true;  // one per expert, as DeepSeek-V3's
    if (a.has("moe-shared-expert-intermediate-size")) {
      const long long sh = a.integer("moe-shared-expert-intermediate-size", 0);
      if (fe <= 0 || sh % fe != 0)
        throw InputError(
            a.get("moe-shared-expert-intermediate-size").loc,
            fmt::format("--moe-shared-expert-intermediate-size {} is not a whole number of experts {} wide", sh, fe));
      moe["shared_experts"] = sh / fe;
    }
    m["moe"] = moe;
    if (a.has("moe-layer-freq")) {
      const std::string f = a.value("moe-layer-freq");
      static const std::regex kPattern(R"(\(?\[0\]\*(\d+)\+\[1\]\*(\d+)\)?)");
      std::smatch mt;
      std::string compact;
      for (char c : f)
        if (!std::isspace(static_cast<unsigned char>(c))) compact += c;
      if (std::regex_match(compact, mt, kPattern)) {
        m["dense_layers_first"] = std::stoi(mt[1].str());
      } else if (compact != "1") {
        throw InputError(
            a.get("moe-layer-freq").values[0].loc,
            fmt::format("--moe-layer-freq {}: only 1 or ([0]*k+[1]*n) (the first k layers dense) are modelled", f));
      }
    }
  }
  if (a.has("multi-latent-attention")) {
    YAML::Node mla(YAML::NodeType::Map);
    mla["q_lora_rank"] = a.has("q-lora-rank") ? a.integer("q-lora-rank", 0) : 0;
    if (a.has("kv-lora-rank")) mla["kv_lora_rank"] = a.integer("kv-lora-rank", 1);
    if (a.has("qk-head-dim")) mla["qk_nope_head_dim"] = a.integer("qk-head-dim", 1);
    if (a.has("qk-pos-emb-head-dim")) mla["qk_rope_head_dim"] = a.integer("qk-pos-emb-head-dim", 0);
    if (a.has("v-head-dim")) mla["v_head_dim"] = a.integer("v-head-dim", 1);
    m["mla"] = mla;
  }

  copy_int("tensor-model-parallel-size", par, "tp");
  copy_int("pipeline-model-parallel-size", par, "pp");
  copy_int("expert-model-parallel-size", par, "ep");
  copy_int("virtual-pipeline-model-parallel-size", par, "vpp");
  if (a.has("context-parallel-size") && a.integer("context-parallel-size", 1) > 1)
    throw InputError(a.get("context-parallel-size").values[0].loc,
                     "--context-parallel-size > 1: context parallelism is not modelled");
  if (a.has("expert-tensor-parallel-size") && a.integer("expert-tensor-parallel-size", 1) > 1)
    throw InputError(a.get("expert-tensor-parallel-size").values[0].loc,
                     "--expert-tensor-parallel-size > 1: expert tensor parallelism is not modelled");
  (void)a.has("sequence-parallel");  // ppsim's TP collectives are sequence-parallel's (reduce-scatter + all-gather)
  const int pp =
      a.has("pipeline-model-parallel-size") ? static_cast<int>(a.integer("pipeline-model-parallel-size", 1)) : 1;
  if (a.has("num-layers-per-virtual-pipeline-stage")) {
    const long long n = a.integer("num-layers-per-virtual-pipeline-stage", 1);
    if (!a.has("num-layers"))
      throw InputError(a.get("num-layers-per-virtual-pipeline-stage").loc, "needs --num-layers");
    const long long layers = a.integer("num-layers", 1);
    if (layers % (n * pp) != 0)
      throw InputError(a.get("num-layers-per-virtual-pipeline-stage").values[0].loc,
                       fmt::format("--num-layers {} is not a multiple of {} per chunk x pp {}", layers, n, pp));
    par["vpp"] = layers / (n * pp);
  }
  if (a.has("pipeline-model-parallel-layout")) {
    const Flag& f = a.get("pipeline-model-parallel-layout");
    const SourceLoc loc = f.values.empty() ? f.loc : f.values[0].loc;
    const PipelineLayout pl = parse_pipeline_layout(a.value("pipeline-model-parallel-layout"), loc);
    const int chunks = static_cast<int>(pl.layers.size());
    if (chunks % pp != 0)
      throw InputError(
          loc, fmt::format("--pipeline-model-parallel-layout has {} chunks, not a multiple of pp {}", chunks, pp));
    if (!pl.embedding_first || !pl.loss_last)
      throw InputError(
          loc, "--pipeline-model-parallel-layout: E must be in the first chunk and L in the last (ppsim's placement)");
    YAML::Node split(YAML::NodeType::Sequence);
    for (int x : pl.layers) split.push_back(x);
    par["layer_split"] = split;
    if (chunks / pp > 1) par["vpp"] = chunks / pp;
    if (pl.mtp > 0) m["mtp_depth"] = pl.mtp;
  } else if (a.has("decoder-first-pipeline-num-layers") || a.has("decoder-last-pipeline-num-layers")) {
    if (!a.has("num-layers"))
      throw InputError(SourceLoc{name, 0, 0}, "--decoder-first/last-pipeline-num-layers need --num-layers");
    const long long layers = a.integer("num-layers", 1);
    const bool has_first = a.has("decoder-first-pipeline-num-layers"),
               has_last = a.has("decoder-last-pipeline-num-layers");
    const long long first = has_first ? a.integer("decoder-first-pipeline-num-layers", 0) : 0;
    const long long last = has_last ? a.integer("decoder-last-pipeline-num-layers", 0) : 0;
    const int middle = pp - (has_first ? 1 : 0) - (has_last ? 1 : 0);
    const long long rest = layers - first - last;
    if (middle <= 0 || rest < 0 || rest % middle != 0)
      throw InputError(
          a.get(has_first ? "decoder-first-pipeline-num-layers" : "decoder-last-pipeline-num-layers").loc,
          fmt::format("{} layers less the first and last stages' do not split evenly over {} middle stages", layers,
                      middle));
    YAML::Node split(YAML::NodeType::Sequence);
    if (has_first) split.push_back(first);
    for (int s = 0; s < middle; ++s) split.push_back(rest / middle);
    if (has_last) split.push_back(last);
    par["layer_split"] = split;
  }
  if (a.has("recompute-granularity")) {
    const std::string g = a.value("recompute-granularity");
    if (g != "full" && g != "selective")
      throw InputError(a.get("recompute-granularity").values[0].loc,
                       fmt::format("--recompute-granularity {}: full or selective", g));
    // Megatron's selective recompute without --recompute-modules recomputes the attention core
    // (ppsim's `selective`); with modules, only those (ppsim's recompute_ops, below).
    if (g == "full")
      par["recompute"] = "full";
    else if (!a.has("recompute-modules"))
      par["recompute"] = "selective";
    if (g == "full" && a.has("recompute-num-layers")) par["recompute_layers"] = a.integer("recompute-num-layers", 0);
    (void)a.has("recompute-method");  // uniform and block both recompute recompute_layers layers per stage here
  }
  if (a.has("recompute-modules")) {
    static const std::map<std::string, std::string> kOps = {
        {"layernorm", "norm"}, {"mla_up_proj", "mla_up_proj"}, {"moe_act", "act_fn"}, {"core_attn", "attn_core"}};
    YAML::Node ops(YAML::NodeType::Sequence);
    for (const Word& w : a.get("recompute-modules").values) {
      auto it = kOps.find(w.text);
      if (it != kOps.end())
        ops.push_back(it->second);
      else
        out.ignored.push_back("--recompute-modules " + w.text);
    }
    if (ops.size() > 0) par["recompute_ops"] = ops;
  }
  if (a.has("use-distributed-optimizer")) par["zero"] = 1;
  if (a.has("bf16")) prec["params"] = "bf16";
  if (a.has("fp16")) prec["params"] = "fp16";
  if (a.has("fp8-format")) prec["gemm"] = "fp8";
  out.model = m;
  out.parallel = par;
  out.precision = prec;
  for (auto& u : a.unused()) out.ignored.push_back(u);
  return out;
}

MegatronArgs read_megatron_args(const std::string& path, const SourceLoc& where) {
  std::ifstream in(path, std::ios::binary);
  const SourceLoc at = where.file.empty() ? SourceLoc{path, 0, 0} : where;
  if (!in) throw InputError(at, fmt::format("cannot open the megatron_args file '{}'", path), {}, kExitIo);
  std::string text;
  char buf[1 << 14];
  while (text.size() <= (4u << 20) && in.read(buf, sizeof buf).gcount() > 0)
    text.append(buf, static_cast<std::size_t>(in.gcount()));
  if (text.size() > (4u << 20)) throw InputError(at, fmt::format("'{}' is over 4 MiB", path), {}, kExitLimit);
  return megatron_args_from_text(text, path);
}

}  // namespace ppsim
