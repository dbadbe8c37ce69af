#include "cost/megatron_args.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/text_file.h"
#include "cost/megatron_model_config.h"
#include "cost/model_keys.h"
#include "cost/shell_script.h"

namespace ppsim {

namespace {

using Word = ShellWord;

// `s` as a whole integer (std::stoll's syntax, every character of it), or nothing.
std::optional<long long> whole_integer(const std::string& s) {
  std::size_t used = 0;
  long long x = 0;
  try {
    x = std::stoll(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size() || s.empty()) return std::nullopt;
  return x;
}

struct Flag {
  std::string name;  // without the leading "--", '_' read as '-'
  std::vector<Word> values;
  SourceLoc loc;
};

// What to do about a value the script does not decide: set the variable it names ($NAME,
// ${NAME}) as the user (megatron_args' env:), and where the script stopped with an error.
std::string unknown_advice(const std::string& text, const std::string& stop) {
  std::string out;
  const std::size_t d = text.find('$');
  if (d != std::string::npos) {
    std::size_t k = d + 1 + (d + 1 < text.size() && text[d + 1] == '{' ? 1 : 0);
    const std::size_t from = k;
    while (k < text.size() && (std::isalnum(static_cast<unsigned char>(text[k])) || text[k] == '_')) ++k;
    if (k > from && !std::isdigit(static_cast<unsigned char>(text[from])))
      out = fmt::format("; set {} in megatron_args env: (or --megatron-env {}=...)", text.substr(from, k - from),
                        text.substr(from, k - from));
  }
  if (!stop.empty()) out += fmt::format("; before it the script reaches an error exit ({})", stop);
  return out;
}

// A placeholder the script leaves to its user (`<path to data>`, shell_script.h).
bool is_placeholder(const std::string& v) {
  return v.size() > 2 && v.front() == '<' && v.find('>') != std::string::npos;
}

// The script's flags with argparse's meaning: a repeated flag's last value wins.
class Flags {
 public:
  Flags(std::vector<Flag> f, std::string stop) : flags_(std::move(f)), stop_(std::move(stop)) {
    for (std::size_t i = 0; i < flags_.size(); ++i) index_[flags_[i].name] = i;
  }
  bool has(const std::string& n) {
    used_.insert(n);
    return index_.count(n) != 0;
  }
  const Flag& get(const std::string& n) { return flags_[index_.at(n)]; }
  // Where the flag's value is (the flag itself when it has none).
  SourceLoc at(const std::string& n) {
    const Flag& f = get(n);
    return f.values.empty() ? f.loc : f.values[0].loc;
  }
  // Whether the script passes the flag, without counting it as used (a flag that names the
  // dialect, not a value ppsim reads).
  bool present(const std::string& n) const { return index_.count(n) != 0; }
  // The flag's k-th value (argparse's nargs '+' lists), checked as value() checks the first.
  std::string value(const std::string& n, std::size_t k = 0) {
    const Flag& f = get(n);
    if (f.values.size() <= k) throw InputError(f.loc, fmt::format("--{} needs a value", n));
    const Word& v = f.values[k];
    if (!v.unknown.empty())
      throw InputError(v.loc, fmt::format("--{} {}: {}{}", n, v.text, v.unknown, unknown_advice(v.text, stop_)));
    if (is_placeholder(v.text))
      throw InputError(v.loc, fmt::format("--{} {}: a placeholder the script leaves to its user; fill it in, or set "
                                          "the variable that holds it in megatron_args env:",
                                          n, v.text));
    return v.text;
  }
  long long integer(const std::string& n, long long min = 0, std::size_t k = 0) {
    const std::string v = value(n, k);
    const std::optional<long long> x = whole_integer(v);
    if (!x || *x < min)
      throw InputError(k == 0 ? at(n) : get(n).values[k].loc,
                       fmt::format("--{}: expected an integer >= {}, got '{}'", n, min, v));
    return *x;
  }
  double number(const std::string& n) {
    const std::string v = value(n);
    try {
      return std::stod(v);
    } catch (const std::exception&) {
      throw InputError(at(n), fmt::format("--{}: expected a number, got '{}'", n, v));
    }
  }
  std::vector<std::string> unused() const {
    std::vector<std::string> out;
    std::set<std::string> listed;
    for (const auto& f : flags_)
      if (!used_.count(f.name) && listed.insert(f.name).second) out.push_back("--" + f.name);
    return out;
  }

 private:
  std::vector<Flag> flags_;
  std::map<std::string, std::size_t> index_;
  std::set<std::string> used_;
  std::string stop_;
};

bool ends_with(const std::string& s, const char* tail) {
  const std::size_t n = std::char_traits<char>::length(tail);
  return s.size() >= n && s.compare(s.size() - n, n, tail) == 0;
}

// The training command: the launcher's words (up to the .py) and the script's arguments after it.
struct TrainingCommand {
  Word script;  // the .py
  std::vector<Word> launcher, args;
  SourceLoc loc;
  std::string hint;  // MegatronArgs::missing_hint
};

// MegatronArgs::missing_hint for the command `best` among `cmds`.
std::string missing_hint(const std::vector<ShellCommand>& cmds, const ShellCommand* best,
                         const std::vector<Word>& args) {
  for (const Word& w : args)
    if (!w.unknown.empty()) return fmt::format("the script's word {} is not known: {}", w.text, w.unknown);
  for (std::size_t k = 0; k + 1 < cmds.size(); ++k)
    if (&cmds[k] == best && !cmds[k + 1].words.empty() && cmds[k + 1].words[0].text.rfind("--", 0) == 0)
      return fmt::format("line {} starts with {}: is a '\\' missing at the end of line {}?", cmds[k + 1].loc.line,
                         cmds[k + 1].words[0].text, cmds[k + 1].loc.line - 1);
  return {};
}

std::size_t count_flags(const std::vector<Word>& w, std::size_t from) {
  std::size_t n = 0;
  for (std::size_t k = from; k < w.size(); ++k) n += w[k].text.rfind("--", 0) == 0 ? 1 : 0;
  return n;
}

// A word naming a Python script: `train.py`, or `$CODE_DIR/pretrain_gpt.py` (its folder unknown,
// its file name known).
bool names_py(const Word& w) {
  if (!ends_with(w.text, ".py")) return false;
  if (w.unknown.empty()) return true;
  const std::size_t slash = w.text.rfind('/');
  return slash != std::string::npos && w.text.find_first_of("$`", slash) == std::string::npos;
}

// Among the script's commands, the one running a .py with the most flags after it; with none, the
// words of all commands (a plain argument list, one `--flag value` per line).
TrainingCommand training_command(const std::vector<ShellCommand>& cmds, const std::string& name) {
  const ShellCommand* best = nullptr;
  std::size_t best_py = 0, best_flags = 0;
  for (const ShellCommand& c : cmds)
    for (std::size_t k = 0; k < c.words.size(); ++k)
      if (names_py(c.words[k])) {
        const std::size_t n = count_flags(c.words, k + 1);
        if (n > 0 && n >= best_flags) {
          best = &c;
          best_py = k;
          best_flags = n;
        }
      }
  TrainingCommand out;
  if (best == nullptr) {
    for (const ShellCommand& c : cmds)
      for (const Word& w : c.words) out.args.push_back(w);
    out.loc = cmds.empty() ? SourceLoc{name, 0, 0} : cmds.front().loc;
    return out;
  }
  if (!best->undecided.empty())
    throw InputError(best->loc, fmt::format("the training command ({}) runs only under {}", best->words[best_py].text,
                                            best->undecided));
  out.script = best->words[best_py];
  out.launcher = best->launcher;
  out.launcher.insert(out.launcher.end(), best->words.begin(),
                      best->words.begin() + static_cast<std::ptrdiff_t>(best_py));
  out.args.assign(best->words.begin() + static_cast<std::ptrdiff_t>(best_py) + 1, best->words.end());
  out.loc = best->loc;
  out.hint = missing_hint(cmds, best, out.args);
  return out;
}

// argparse's reading of the words: `--flag value...`, `--flag=value`; '_' in a name read as '-'.
std::vector<Flag> collect_flags(const std::vector<Word>& words) {
  std::vector<Flag> list;
  for (const Word& w : words) {
    const std::string head = w.text.substr(0, w.text.find('='));
    if (w.text.rfind("--", 0) == 0 && head.size() > 2 && (w.unknown.empty() || head.find('$') == std::string::npos)) {
      Flag f;
      std::string n = w.text.substr(2);
      const std::size_t eq = n.find('=');
      if (eq != std::string::npos) {
        f.values.push_back(Word{n.substr(eq + 1), w.loc, w.unknown});
        n = n.substr(0, eq);
      }
      for (char& c : n)
        if (c == '_') c = '-';
      f.name = n;
      f.loc = w.loc;
      list.push_back(std::move(f));
    } else if (!list.empty()) {
      list.back().values.push_back(w);
    }
  }
  return list;
}

// The first known integer among the words' values of `names` (torchrun --nproc-per-node 8).
std::optional<long long> launcher_flag(const std::vector<Word>& w, std::initializer_list<const char*> names,
                                       std::string& why) {
  for (std::size_t k = 0; k + 1 <= w.size(); ++k)
    for (const char* n : names) {
      std::string value;
      SourceLoc at;
      std::string unknown;
      if (w[k].text == n && k + 1 < w.size()) {
        value = w[k + 1].text;
        unknown = w[k + 1].unknown;
      } else if (w[k].text.rfind(std::string(n) + "=", 0) == 0) {
        value = w[k].text.substr(std::char_traits<char>::length(n) + 1);
        unknown = w[k].unknown;
      } else {
        continue;
      }
      if (!unknown.empty()) {
        why = fmt::format("{} {}: {}", n, value, unknown);
        return std::nullopt;
      }
      const std::size_t colon = value.find(':');  // --nnodes 2:2
      if (colon != std::string::npos && value.substr(0, colon) == value.substr(colon + 1))
        value = value.substr(0, colon);
      if (const std::optional<long long> v = whole_integer(value); v && *v > 0) return *v;
      why = fmt::format("{} {} is not a number of GPUs", n, value);
      return std::nullopt;
    }
  return std::nullopt;
}

// Slurm's task count (one Megatron rank per task) from sbatch's, salloc's and srun's options in
// launch order (a later one wins, as srun's own over its allocation's): --ntasks/-n, else
// --nodes/-N x --ntasks-per-node. 0 with `why` when they do not state it.
long long slurm_world(const std::vector<Word>& w, std::string& why) {
  const SlurmTasks t = slurm_tasks(w);
  if (!t.slurm) return 0;
  auto get = [&](const SlurmOption& o) -> std::optional<long long> {
    if (!o.set) return std::nullopt;
    if (!o.unknown.empty()) {
      if (why.empty()) why = fmt::format("Slurm's {} {}: {}", o.flag, o.value, o.unknown);
      return std::nullopt;
    }
    const std::optional<long long> v = whole_integer(o.value);
    if ((!v || *v < 1) && why.empty()) why = fmt::format("Slurm's {} {} is not a number of tasks", o.flag, o.value);
    return v && *v >= 1 ? v : std::nullopt;
  };
  if (const auto n = get(t.ntasks)) return *n;
  const auto nodes = get(t.nodes);
  const auto per_node = get(t.per_node);
  if (nodes && per_node) return *nodes * *per_node;
  if (why.empty())
    why = nodes ? fmt::format("Slurm's --nodes {} without --ntasks-per-node or --ntasks", *nodes)
                : "Slurm's options state no --ntasks or --nodes x --ntasks-per-node";
  return 0;
}

// The world size the launcher states: torchrun's (or torch.distributed.run's) --nproc-per-node x
// --nnodes (1 when absent), deepspeed's --num_gpus x --num_nodes; else slime's actor flags.
void launcher_world_size(const TrainingCommand& t, MegatronArgs& out) {
  std::string why;
  const auto procs =
      launcher_flag(t.launcher, {"--nproc_per_node", "--nproc-per-node", "--num_gpus", "--num-gpus"}, why);
  if (procs) {
    std::string node_why;
    const auto nodes = launcher_flag(t.launcher, {"--nnodes", "--num_nodes", "--num-nodes"}, node_why);
    if (nodes || node_why.empty()) {
      out.world_size = *procs * nodes.value_or(1);
      out.world_size_from = "the launcher's --nproc-per-node x --nnodes";
      return;
    }
    why = node_why;
  }
  if (!procs && why.empty()) {
    std::string slurm_why;
    if (const long long n = slurm_world(t.launcher, slurm_why); n > 0) {
      out.world_size = n;
      out.world_size_from = "Slurm's tasks (--ntasks, or --nodes x --ntasks-per-node)";
      return;
    }
    why = slurm_why;
  }
  std::string actor_why;
  const auto actor_nodes = launcher_flag(t.args, {"--actor-num-nodes", "--actor_num_nodes"}, actor_why);
  const auto actor_gpus = launcher_flag(t.args, {"--actor-num-gpus-per-node", "--actor_num_gpus_per_node"}, actor_why);
  if (actor_gpus) {
    out.world_size = *actor_gpus * actor_nodes.value_or(1);
    out.world_size_from = "--actor-num-nodes x --actor-num-gpus-per-node";
    return;
  }
  out.world_size_why = !why.empty() ? why : actor_why;
}
}  // namespace

long long megatron_padded_vocab(long long vocab, long long divisible_by, long long tp) {
  const long long multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

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

namespace {

void copy_int(Flags& a, const char* flag, YAML::Node node, const char* key, long long min = 1) {
  if (a.has(flag)) node[key] = a.integer(flag, min);
}

// The vocabulary: --vocab-size padded as Megatron pads a tokenizer's size (vocab_utils.py
// _vocab_size_with_padding: up to a multiple of --make-vocab-size-divisible-by (128) x tp; not with
// --no-pad-vocab-size, nor under Pai-Megatron-Patch's --patch-tokenizer-type, whose tokenizer sets
// the size itself: its vocabulary plus --extra-vocab-size); --padded-vocab-size and
// Megatron-DeepSpeed's --pad-vocab-size-to as written; GPT-2's BPE (--tokenizer-type
// GPT2BPETokenizer, or --vocab-file with --merge-file and no type): 50257 padded. Other tokenizers:
// named for the caller's message; the YAML's model.vocab is then padded (out.vocab_divisible_by).
void read_vocab(Flags& a, YAML::Node m, MegatronArgs& out) {
  const long long tp = a.has("tensor-model-parallel-size") ? a.integer("tensor-model-parallel-size", 1) : 1;
  const std::string pai = a.has("patch-tokenizer-type") ? a.value("patch-tokenizer-type") : "";
  const bool no_pad = a.has("no-pad-vocab-size") || a.has("disable-pad-vocab-size");
  const long long divisible_by =
      a.has("make-vocab-size-divisible-by") ? a.integer("make-vocab-size-divisible-by", 1) : 128;
  out.vocab_divisible_by = no_pad || !pai.empty() ? 0 : divisible_by;
  auto padded = [&](long long v) {
    return out.vocab_divisible_by > 0 ? megatron_padded_vocab(v, out.vocab_divisible_by, tp) : v;
  };
  if (a.has("vocab-size")) m["vocab"] = padded(a.integer("vocab-size", 1));
  copy_int(a, "padded-vocab-size", m, "vocab");
  copy_int(a, "pad-vocab-size-to", m, "vocab");  // Megatron-DeepSpeed's (BLOOM's 250880): the padded size itself
  const std::string type = a.has("tokenizer-type") ? a.value("tokenizer-type") : "";
  const bool gpt2 = type == "GPT2BPETokenizer" || (type.empty() && a.has("vocab-file") && a.has("merge-file"));
  if (!m["vocab"] && gpt2) m["vocab"] = padded(50257);
  if (!type.empty()) out.tokenizer = "--tokenizer-type " + type;
  if (!pai.empty())
    out.tokenizer =
        "--patch-tokenizer-type " + pai + ", Pai-Megatron-Patch's: its size plus --extra-vocab-size, unpadded";
  if (a.has("tokenizer-model") && !a.get("tokenizer-model").values.empty())
    out.tokenizer +=
        (out.tokenizer.empty() ? "" : " ") + ("--tokenizer-model " + a.get("tokenizer-model").values[0].text);
}

// Whether the attention core is FlashAttention-style (model.flash_attention), as Megatron decides:
// --attention-backend (Megatron-Core, default auto) unfused or local materialize the s x s scores,
// flash, fused and auto (Transformer Engine's choice of a fused kernel) do not; before it,
// --use-flash-attn (Megatron-LM 2023-2024; Megatron-DeepSpeed's --use-flash-attn-v1/v2/triton) turns
// it on, and without it the 2021-2022 scripts (--checkpoint-activations or
// --activations-checkpoint-method: removed before Megatron had FlashAttention) and --transformer-impl
// local ran the unfused core. Otherwise: written only where the script decides it (absent: the
// YAML's, default true).
void read_attention_backend(Flags& a, YAML::Node m) {
  if (a.has("attention-backend")) {
    const std::string b = a.value("attention-backend");
    if (b != "flash" && b != "fused" && b != "unfused" && b != "local" && b != "auto")
      throw InputError(a.at("attention-backend"),
                       fmt::format("--attention-backend {}: flash, fused, unfused, local or auto", b));
    m["flash_attention"] = b != "unfused" && b != "local";
    return;
  }
  for (const char* f : {"use-flash-attn", "use-flash-attn-v1", "use-flash-attn-v2", "use-flash-attn-triton"})
    if (a.has(f)) {
      m["flash_attention"] = true;
      return;
    }
  const bool era_2021 = a.has("checkpoint-activations") || a.has("activations-checkpoint-method");
  const bool local_impl = a.has("transformer-impl") && a.value("transformer-impl") == "local";
  if (era_2021 || local_impl) m["flash_attention"] = false;
}

// A per-layer 0/1 pattern flag as Megatron reads one (moe_freq_type): an integer N >= 1, entry i
// (0-based) of_int(i, N) for each of --num-layers; or a Python list, one entry per layer.
std::vector<int> layer_pattern_flag(Flags& a, const std::string& flag,
                                    const std::function<int(long long, long long)>& of_int) {
  const std::string f = a.value(flag);
  const SourceLoc at = a.at(flag);
  const long long layers = a.has("num-layers") ? a.integer("num-layers", 1) : 0;
  std::vector<int> pattern;
  if (const std::optional<long long> n = whole_integer(f)) {
    if (*n < 1) throw InputError(at, fmt::format("--{} {}: expected an integer >= 1", flag, f));
    for (long long i = 0; i < layers; ++i) pattern.push_back(of_int(i, *n));
    return pattern;
  }
  pattern = python_int_list(f, at, "--" + flag);
  if (layers > 0 && static_cast<long long>(pattern.size()) != layers)
    throw InputError(at, fmt::format("--{} {}: {} entries for --num-layers {} (Megatron requires one per layer)", flag,
                                     f, pattern.size(), layers));
  return pattern;
}

// --window-size L,R (Megatron's sliding window: each token sees L before it and R after; -1 is
// unbounded) and --window-attn-skip-freq (an integer N: the 1-based layer l is full attention when
// l % N == 0; or a Python list of 1 = window, 0 = full per layer): model.sliding_window = L + 1
// tokens and model.local_layers. A window that looks ahead (R > 0) is not a causal model: refused.
void read_window_flags(Flags& a, YAML::Node m) {
  if (!a.has("window-size")) {
    (void)a.has("window-attn-skip-freq");
    return;
  }
  const std::string w = a.value("window-size");
  const SourceLoc at = a.at("window-size");
  const std::size_t comma = w.find(',');
  const std::optional<long long> left = whole_integer(w.substr(0, comma)),
                                 right = comma == std::string::npos ? std::optional<long long>(0)
                                                                    : whole_integer(w.substr(comma + 1));
  if (!left || !right || *left < -1 || *right < -1)
    throw InputError(at, fmt::format("--window-size {}: expected L,R (tokens before and after; -1: unbounded)", w));
  if (*right != 0)
    throw InputError(at, fmt::format("--window-size {}: a window that sees {} tokens ahead is not a causal decoder; "
                                     "ppsim models causal attention (R = 0)",
                                     w, *right));
  if (*left < 0) return;  // unbounded to the left: full causal attention
  m["sliding_window"] = *left + 1;
  if (!a.has("window-attn-skip-freq")) return;
  // The 1-based layer i + 1 is full attention when (i + 1) % N == 0.
  std::vector<int> local =
      layer_pattern_flag(a, "window-attn-skip-freq", [](long long i, long long n) { return (i + 1) % n != 0; });
  for (int& x : local) x = x != 0 ? 1 : 0;
  m["local_layers"] = flow_list(local);
}

// BigScience's Megatron-DeepSpeed --glu-activation geglu|liglu|reglu|swiglu (its
// megatron/model/glu_activations.py): dense_h_to_4h is 2 x --ffn-hidden-size wide and the
// activation gates one half with the other (transformer.py ParallelMLP), so the MLP is gated: 3
// h x f matrices. The four differ only in the elementwise function, priced alike (ppsim's gated
// MLP, model.mlp swiglu); the activation is named in out.read_as.
bool glu_activation(Flags& a, MegatronArgs& out) {
  if (!a.has("glu-activation")) return false;
  const std::string g = a.value("glu-activation");
  if (g != "geglu" && g != "liglu" && g != "reglu" && g != "swiglu")
    throw InputError(
        a.at("glu-activation"),
        fmt::format("--glu-activation {}: geglu, liglu, reglu or swiglu (Megatron-DeepSpeed's choices)", g));
  out.read_as.push_back(fmt::format("--glu-activation {}: a gated MLP (3 matrices of h x ffn){}", g,
                                    g == "swiglu" ? "" : ", priced as SwiGLU (the same FLOPs and parameters)"));
  return true;
}

// Biases as Megatron's add_bias_linear sets them (TransformerConfig, default True): on every linear
// layer (q/k/v, the attention output, the MLP's and the experts' two; MLA's own projections have
// none in Megatron, as in ppsim) unless --disable-bias-linear; --add-qkv-bias keeps those of q/k/v
// (Qwen2). Megatron-DeepSpeed and 2021's Megatron-LM have no flag: always on. BigScience's
// --embed-layernorm (a LayerNorm after the embedding, 2h weights) has no ppsim key: named.
void read_biases(Flags& a, YAML::Node m, MegatronArgs& out) {
  const bool all = !a.has("disable-bias-linear");
  m["qkv_bias"] = all || a.has("add-qkv-bias");
  m["out_bias"] = all;
  m["mlp_bias"] = all;
  if (a.has("embed-layernorm"))
    out.read_as.push_back("--embed-layernorm: the LayerNorm after the embedding (2h weights) is not counted");
}

// Pai-Megatron-Patch's --qk-nope-head-dim / --qk-rope-head-dim (megatron_patch/arguments.py,
// a098ca5): parsed, but no training code reads them (its checkpoint converters do); Megatron builds
// MLA from --qk-head-dim / --qk-pos-emb-head-dim (`megatron_flag`, `used` its value or default).
// The same value: read; another: refused, unless the YAML writes `key`.
void pai_mla_flag(Flags& a, const char* pai, const char* megatron_flag, long long used, const char* key,
                  MegatronArgs& out) {
  if (!a.has(pai)) return;
  const long long v = a.integer(pai, 0);
  if (v == used) return;
  out.unless_written.push_back(
      {std::string("model.mla.") + key, a.at(pai),
       fmt::format("--{} {}: Pai-Megatron-Patch's flag, which its training code does not read: Megatron builds the "
                   "attention from --{} ({}{}); pass --{} {} if that is the run's, or write model.mla.{}",
                   pai, v, megatron_flag, used, a.present(megatron_flag) ? "" : ", its default", megatron_flag, v,
                   key)});
}

// --multi-latent-attention with Megatron's MLA defaults (d98e8a6 arguments.py _add_mla_args):
// --q-lora-rank None (queries projected directly: 0), --kv-lora-rank 32, --qk-head-dim 128,
// --qk-pos-emb-head-dim 64, --v-head-dim 128; the defaults applied are named in out.read_as.
YAML::Node read_mla(Flags& a, MegatronArgs& out) {
  YAML::Node mla(YAML::NodeType::Map);
  std::vector<std::string> defaults;
  auto read = [&](const char* flag, const char* key, long long min, long long dflt) {
    const bool given = a.has(flag);
    if (!given && dflt > 0) defaults.push_back(fmt::format("--{} {}", flag, dflt));
    mla[key] = given ? a.integer(flag, min) : dflt;
    return mla[key].as<long long>();
  };
  read("q-lora-rank", "q_lora_rank", 0, 0);
  read("kv-lora-rank", "kv_lora_rank", 1, 32);
  const long long nope = read("qk-head-dim", "qk_nope_head_dim", 1, 128);
  const long long rope = read("qk-pos-emb-head-dim", "qk_rope_head_dim", 0, 64);
  read("v-head-dim", "v_head_dim", 1, 128);
  pai_mla_flag(a, "qk-nope-head-dim", "qk-head-dim", nope, "qk_nope_head_dim", out);
  pai_mla_flag(a, "qk-rope-head-dim", "qk-pos-emb-head-dim", rope, "qk_rope_head_dim", out);
  if (!defaults.empty())
    out.read_as.push_back(
        fmt::format("--multi-latent-attention with Megatron's defaults {}", fmt::join(defaults, ", ")));
  return mla;
}

// Model dimensions, with Megatron's defaults where a flag is absent (megatron_args.h).
void read_model_flags(Flags& a, YAML::Node m, MegatronArgs& out) {
  copy_int(a, "num-layers", m, "layers");
  copy_int(a, "hidden-size", m, "hidden");
  copy_int(a, "num-attention-heads", m, "heads");
  copy_int(a, "kv-channels", m, "head_dim");
  copy_int(a, "seq-length", m, "seq_len");
  read_vocab(a, m, out);
  const bool swiglu = a.has("swiglu");
  if (a.has("ffn-hidden-size")) {
    m["ffn_hidden"] = a.integer("ffn-hidden-size", 1);
  } else if (a.has("hidden-size")) {  // Megatron's default (arguments.py): 4h, or with SwiGLU 8h/3 down to a multiple
                                      // of 64 (BigScience's --glu-activation keeps 4h: its arguments.py)
    const long long h = a.integer("hidden-size", 1);
    m["ffn_hidden"] = swiglu ? static_cast<long long>((4.0 * h * 2 / 3) / 64) * 64 : 4 * h;
  }
  // --num-query-groups counts only with --group-query-attention (Megatron ignores it otherwise).
  if (a.has("group-query-attention")) {
    if (!a.has("num-query-groups"))
      throw InputError(a.get("group-query-attention").loc, "--group-query-attention needs --num-query-groups");
    m["kv_heads"] = a.integer("num-query-groups", 1);
  } else {
    (void)a.has("num-query-groups");
    // Megatron-DeepSpeed's GQA flag (its arguments.py; default: --num-attention-heads).
    if (a.has("num-key-value-heads")) m["kv_heads"] = a.integer("num-key-value-heads", 1);
  }
  // --quick-geglu is gated too (argument_utils: gated_linear_unit), as GPT-OSS's experts run it.
  m["mlp"] = swiglu || a.has("quick-geglu") || glu_activation(a, out) ? "swiglu" : "gelu";
  read_window_flags(a, m);
  // Megatron-LM's choices are LayerNorm and RMSNorm; Megatron-DeepSpeed's (its arguments.py)
  // layernorm and rmsnorm: either spelling, in any case.
  std::string norm = "layernorm";
  if (a.has("normalization")) {
    norm = a.value("normalization");
    for (char& c : norm) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (norm != "layernorm" && norm != "rmsnorm")
      throw InputError(a.at("normalization"), fmt::format("--normalization {}: LayerNorm or RMSNorm (Megatron-LM), "
                                                          "layernorm or rmsnorm (Megatron-DeepSpeed)",
                                                          a.value("normalization")));
  }
  m["norm"] = norm;
  read_biases(a, m, out);
  m["tied_embeddings"] = !a.has("untie-embeddings-and-output-weights");
  const double hidden_dropout = a.has("hidden-dropout") ? a.number("hidden-dropout") : 0.1;
  const double attention_dropout = a.has("attention-dropout") ? a.number("attention-dropout") : 0.1;
  m["dropout"] = hidden_dropout > 0 || attention_dropout > 0;
  read_attention_backend(a, m);
  if (a.has("micro-batch-size")) out.micro_batch_size = static_cast<int>(a.integer("micro-batch-size", 1));
  m["micro_batch_size"] = out.micro_batch_size;
  if (a.has("global-batch-size")) {
    out.global_batch_size = static_cast<int>(a.integer("global-batch-size", 1));
    out.global_batch_at = a.at("global-batch-size");
  }
  if (a.has("mtp-num-layers")) m["mtp_depth"] = a.integer("mtp-num-layers", 0);
  if (a.has("use-dynamic-batch-size"))
    out.dynamic_batch = fmt::format(
        "--use-dynamic-batch-size packs each micro-batch to {} tokens per GPU from "
        "sequences whose lengths are known only when it runs",
        a.has("max-tokens-per-gpu") ? "--max-tokens-per-gpu " + a.value("max-tokens-per-gpu") : "a token budget");
  if (a.has("multi-latent-attention")) m["mla"] = read_mla(a, out);
}

// --moe-layer-freq as Megatron evaluates it (gpt_layer_specs.py): an integer k puts experts on
// layers i with i % k == 0; a string is a Python list of 0/1 per layer.
void read_moe_layer_freq(Flags& a, YAML::Node m) {
  if (!a.has("moe-layer-freq")) return;
  const std::vector<int> pattern =
      layer_pattern_flag(a, "moe-layer-freq", [](long long i, long long k) { return i % k == 0; });
  const std::string f = a.value("moe-layer-freq");
  const SourceLoc at = a.at("moe-layer-freq");
  for (std::size_t i = 0; i < pattern.size(); ++i)
    if (pattern[i] != 0 && pattern[i] != 1)
      throw InputError(
          at, fmt::format("--moe-layer-freq {}: layer {} is {}, neither 0 (dense) nor 1 (MoE)", f, i, pattern[i]));
  if (std::count(pattern.begin(), pattern.end(), 1) == 0 && !pattern.empty())
    throw InputError(at, fmt::format("--moe-layer-freq {}: no MoE layer", f));
  write_moe_layer_keys(m, pattern);
}

// The expert width (--moe-ffn-hidden-size, else --ffn-hidden-size as Megatron defaults it).
long long expert_width(Flags& a, const YAML::Node& m) {
  if (a.has("moe-ffn-hidden-size")) return a.integer("moe-ffn-hidden-size", 1);
  return m["ffn_hidden"] ? m["ffn_hidden"].as<long long>() : 0;
}

void read_moe_flags(Flags& a, YAML::Node m) {
  if (!a.has("num-experts")) return;
  // One expert: the dense MLP (Megatron-DeepSpeed's default, which its dense scripts pass as
  // --num-experts ${EP_SIZE} with EP_SIZE=1).
  if (a.integer("num-experts", 1) == 1) return;
  YAML::Node moe(YAML::NodeType::Map);
  moe["experts"] = a.integer("num-experts", 1);
  moe["top_k"] = a.has("moe-router-topk") ? a.integer("moe-router-topk", 1) : 2;  // Megatron's default
  const long long fe = expert_width(a, m);
  if (fe > 0) moe["expert_ffn_hidden"] = fe;
  if (a.has("moe-router-enable-expert-bias")) moe["router_bias"] = true;  // one per expert, as DeepSeek-V3's
  if (a.has("moe-shared-expert-intermediate-size")) {
    const long long sh = a.integer("moe-shared-expert-intermediate-size", 0);
    if (fe <= 0 || sh % fe != 0)
      throw InputError(
          a.at("moe-shared-expert-intermediate-size"),
          fmt::format("--moe-shared-expert-intermediate-size {} is not a whole number of experts {} wide", sh, fe));
    moe["shared_experts"] = sh / fe;
  }
  m["moe"] = moe;
  read_moe_layer_freq(a, m);
}

// The script is Megatron-DeepSpeed's: it passes --deepspeed or --deepspeed_config, which only
// DeepSpeed's parser adds (deepspeed.add_config_arguments, called by the fork's
// megatron/arguments.py parse_args; Megatron-LM has neither flag). Its MoE and sequence-parallel
// flags then have the fork's meaning (read_ds_moe_flags, refuse_ds_ulysses).
bool is_megatron_deepspeed(Flags& a) { return a.present("deepspeed") || a.present("deepspeed-config"); }

// --num-experts (nargs '+') as Megatron-DeepSpeed reads it: one count for every MoE layer, or one
// per MoE layer (its get_num_experts_per_layer asserts the list has 1 or layers / interval
// entries); ppsim has one expert count, so differing counts (PR-MoE's pyramid) are refused.
long long ds_expert_count(Flags& a, long long layers, long long interval) {
  const std::size_t n = a.get("num-experts").values.size();
  const long long e = a.integer("num-experts", 1);
  for (std::size_t k = 1; k < n; ++k)
    if (a.integer("num-experts", 1, k) != e) {
      std::string list;
      for (std::size_t j = 0; j < n; ++j) {
        if (j > 0) list += ' ';
        list += a.value("num-experts", j);
      }
      throw InputError(a.get("num-experts").values[k].loc,
                       fmt::format("--num-experts {}: the MoE layers' expert counts differ; ppsim models one expert "
                                   "count for every MoE layer",
                                   list));
    }
  if (n > 1 && layers > 0 && static_cast<long long>(n) != layers / interval)
    throw InputError(a.at("num-experts"),
                     fmt::format("--num-experts has {} counts for {} MoE layers (--num-layers {} / --expert-interval "
                                 "{}); Megatron-DeepSpeed asserts one, or one per MoE layer",
                                 n, layers / interval, layers, interval));
  return e;
}

// Megatron-DeepSpeed's DeepSpeed-MoE (microsoft/Megatron-DeepSpeed f4157be, megatron/arguments.py
// and megatron/model/transformer.py): --num-experts (default 1: dense); --topk (default 1);
// --expert-interval k (default 2): get_num_experts_per_layer makes layer i (0-based) MoE when
// (i + 1) % k == 0, so the 2nd, 4th, ... layers; --moe-expert-parallel-size (default 1):
// parallel.ep; --mlp-type residual (PR-MoE): a dense MLP of the experts' width beside them
// (DeepSpeed's MoE use_residual), one shared expert; token dropping (on unless
// --disable-moe-token-dropping) at --moe-train-capacity-factor (default 1.0) x the mean load:
// moe.capacity_factor. The experts are split over tp only with --enable-expert-tensor-parallelism.
void read_ds_moe_flags(Flags& a, YAML::Node m, YAML::Node par) {
  if (!a.has("num-experts")) return;
  const long long layers = a.has("num-layers") ? a.integer("num-layers", 1) : 0;
  const long long interval = a.has("expert-interval") ? a.integer("expert-interval", 1) : 2;
  if (layers == 0 && a.integer("num-experts", 1) > 1)
    throw InputError(a.get("num-experts").loc,
                     "--num-experts needs --num-layers here: Megatron-DeepSpeed puts the "
                     "experts on every --expert-interval-th layer of them");
  const long long experts = ds_expert_count(a, layers, interval);
  if (experts == 1 || (layers > 0 && layers < interval)) return;  // no MoE layer: the dense model
  YAML::Node moe(YAML::NodeType::Map);
  moe["experts"] = experts;
  moe["top_k"] = a.has("topk") ? a.integer("topk", 1) : 1;
  if (const long long fe = expert_width(a, m); fe > 0) moe["expert_ffn_hidden"] = fe;
  if (a.has("mlp-type")) {
    const std::string t = a.value("mlp-type");
    if (t != "standard" && t != "residual")
      throw InputError(a.at("mlp-type"), fmt::format("--mlp-type {}: standard or residual", t));
    if (t == "residual") moe["shared_experts"] = 1;
  }
  if (!a.has("disable-moe-token-dropping"))
    moe["capacity_factor"] = a.has("moe-train-capacity-factor") ? a.number("moe-train-capacity-factor") : 1.0;
  m["moe"] = moe;
  std::vector<int> mask;
  for (long long i = 0; i < layers; ++i) mask.push_back((i + 1) % interval == 0 ? 1 : 0);
  write_moe_layer_keys(m, mask);
  copy_int(a, "moe-expert-parallel-size", par, "ep");
  const long long tp = a.has("tensor-model-parallel-size") ? a.integer("tensor-model-parallel-size", 1) : 1;
  if (tp > 1 && !a.has("enable-expert-tensor-parallelism"))
    throw InputError(a.at("tensor-model-parallel-size"),
                     fmt::format("--tensor-model-parallel-size {} with DeepSpeed-MoE experts and no "
                                 "--enable-expert-tensor-parallelism: every tp rank holds whole experts; ppsim splits "
                                 "the experts over tp (--enable-expert-tensor-parallelism) only",
                                 tp));
}

// --ds-sequence-parallel-size N > 1: DeepSpeed-Ulysses (all-to-alls over the attention heads), not
// modelled; refused at the flag rather than read as sp 1 (a dp N times too large).
void refuse_ds_ulysses(Flags& a) {
  if (!a.has("ds-sequence-parallel-size")) return;
  const long long sp = a.integer("ds-sequence-parallel-size", 1);
  if (sp > 1)
    throw InputError(
        a.get("ds-sequence-parallel-size").loc,
        fmt::format("--ds-sequence-parallel-size {}: DeepSpeed-Ulysses sequence parallelism (all-to-all "
                    "over the attention heads) is not modelled; ppsim's context parallelism is parallel.cp "
                    "(ring/all-gather)",
                    sp));
}

// No layout and no first/last stage counts: Megatron's even split over pp x vpp stages, with
// --account-for-embedding-in-pipeline-split / --account-for-loss-in-pipeline-split counting the
// embedding / the loss as one layer of the first / last stage; the layers (+ those) must divide
// by pp, as Megatron asserts (arguments.py).
void even_split(Flags& a, YAML::Node par, int pp) {
  if (!a.has("num-layers")) return;
  const long long layers = a.integer("num-layers", 1);
  // Megatron-DeepSpeed's --pp-partition-method 'type:transformer|embedding' (BLOOM's): DeepSpeed's
  // pipeline counts the embedding of the first stage and the tied one of the last as layers.
  const bool ds_embedding =
      a.has("pp-partition-method") && a.value("pp-partition-method").find("embedding") != std::string::npos;
  const int e = a.has("account-for-embedding-in-pipeline-split") || ds_embedding ? 1 : 0;
  const int l = a.has("account-for-loss-in-pipeline-split") || ds_embedding ? 1 : 0;
  if ((layers + e + l) % pp != 0)
    throw InputError(a.at("num-layers"),
                     fmt::format("--num-layers {}{} is not divisible by --pipeline-model-parallel-size {} (Megatron "
                                 "refuses it: 'Number of layers should be divisible by the pipeline-model-parallel "
                                 "size'; --decoder-first/last-pipeline-num-layers split it unevenly)",
                                 layers, e + l > 0 ? fmt::format(" + {} (embedding, loss)", e + l) : "", pp));
  if (e + l == 0) return;
  const long long vpp = par["vpp"] ? par["vpp"].as<long long>() : 1;
  const long long stages = pp * vpp;
  if ((layers + e + l) % stages != 0)
    throw InputError(a.at("num-layers"), fmt::format("--num-layers {} + {} (embedding, loss) is not divisible by {} "
                                                     "pipeline stages",
                                                     layers, e + l, stages));
  YAML::Node split(YAML::NodeType::Sequence);
  for (long long s = 0; s < stages; ++s)
    split.push_back((layers + e + l) / stages - (s == 0 ? e : 0) - (s == stages - 1 ? l : 0));
  par["layer_split"] = split;
}

// Megatron FSDP (--use-megatron-fsdp, or torch FSDP2 with --use-torch-fsdp2): its
// --data-parallel-sharding-strategy (default optim_grads_params) as the ZeRO stage: optim 1,
// optim_grads 2, optim_grads_params 3, no_shard 0; else --use-distributed-optimizer: 1.
// parallel.dp_sync (cost/step_costs.h): microbatch where the runtime reduces every backward
// whatever the schedule's no_sync: Megatron FSDP with optim_grads(_params) (NVIDIA/Megatron-LM
// megatron/core/distributed/fsdp/src/megatron_fsdp/megatron_fsdp.py: grad_reduce_every_bprop;
// its no_sync(): "for grads shard mode there will actually always be gradient sync"), torch FSDP2
// (megatron/core/distributed/data_parallel_base.py: no_sync does nothing), DeepSpeed ZeRO 2/3
// (deepspeed/runtime/engine.py allreduce_gradients). Elsewhere the default (step below ZeRO 3).
void read_sharding(Flags& a, YAML::Node par) {
  const bool fsdp = a.has("use-megatron-fsdp") || a.has("use-torch-fsdp2");
  if (!fsdp) {
    if (a.has("use-distributed-optimizer")) par["zero"] = 1;
    // Megatron-DeepSpeed's --zero-stage N (with --deepspeed): DeepSpeed's ZeRO stage over dp.
    if (a.has("deepspeed") && a.has("zero-stage")) {
      const long long z = a.integer("zero-stage", 0);
      if (z > 3) throw InputError(a.at("zero-stage"), fmt::format("--zero-stage {}: DeepSpeed's stages are 0 to 3", z));
      // --bf16 with stage 0: DeepSpeed's BF16_Optimizer, which shards the fp32 master weights and
      // optimizer states over dp as stage 1 does (BLOOM's script: "bf16 must use z0! it implements
      // its own zero stage 1 equivalent").
      par["zero"] = z == 0 && a.has("bf16") ? 1 : z;
      if (z >= 2) par["dp_sync"] = "microbatch";
    }
    return;
  }
  (void)a.has("use-distributed-optimizer");
  const std::string st =
      a.has("data-parallel-sharding-strategy") ? a.value("data-parallel-sharding-strategy") : "optim_grads_params";
  static const std::map<std::string, int> kStage = {
      {"no_shard", 0}, {"optim", 1}, {"optim_grads", 2}, {"optim_grads_params", 3}};
  const auto it = kStage.find(st);
  if (it == kStage.end())
    throw InputError(a.at("data-parallel-sharding-strategy"),
                     fmt::format("--data-parallel-sharding-strategy {}: no_shard, optim, optim_grads or "
                                 "optim_grads_params",
                                 st));
  par["zero"] = it->second;
  if (it->second >= 2 || a.has("use-torch-fsdp2")) par["dp_sync"] = "microbatch";
}

// --pipeline-model-parallel-layout, or the first/last stages' layer counts.
void read_layer_split(Flags& a, YAML::Node par, YAML::Node m, int pp, const std::string& name) {
  if (a.has("pipeline-model-parallel-layout")) {
    const SourceLoc loc = a.at("pipeline-model-parallel-layout");
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
    return;
  }
  const bool has_first = a.has("decoder-first-pipeline-num-layers"),
             has_last = a.has("decoder-last-pipeline-num-layers");
  if (!has_first && !has_last) {
    even_split(a, par, pp);
    return;
  }
  if (!a.has("num-layers"))
    throw InputError(SourceLoc{name, 0, 0}, "--decoder-first/last-pipeline-num-layers need --num-layers");
  const long long layers = a.integer("num-layers", 1);
  const long long first = has_first ? a.integer("decoder-first-pipeline-num-layers", 0) : 0;
  const long long last = has_last ? a.integer("decoder-last-pipeline-num-layers", 0) : 0;
  const int middle = pp - (has_first ? 1 : 0) - (has_last ? 1 : 0);
  const long long rest = layers - first - last;
  if (middle <= 0 || rest < 0 || rest % middle != 0)
    throw InputError(a.get(has_first ? "decoder-first-pipeline-num-layers" : "decoder-last-pipeline-num-layers").loc,
                     fmt::format("{} layers less the first and last stages' do not split evenly over {} middle stages",
                                 layers, middle));
  YAML::Node split(YAML::NodeType::Sequence);
  if (has_first) split.push_back(first);
  for (int s = 0; s < middle; ++s) split.push_back(rest / middle);
  if (has_last) split.push_back(last);
  par["layer_split"] = split;
}

void read_parallel_flags(Flags& a, YAML::Node par, YAML::Node m, const std::string& name) {
  copy_int(a, "tensor-model-parallel-size", par, "tp");
  copy_int(a, "pipeline-model-parallel-size", par, "pp");
  copy_int(a, "expert-model-parallel-size", par, "ep");
  copy_int(a, "virtual-pipeline-model-parallel-size", par, "vpp");
  copy_int(a, "context-parallel-size", par, "cp");
  if (!par["pp"]) par["pp"] = 1;  // Megatron's defaults
  if (!par["tp"]) par["tp"] = 1;
  const long long tp = par["tp"].as<long long>();
  if (a.has("expert-tensor-parallel-size") && a.has("num-experts")) {  // a dense model has no experts to split
    const long long etp = a.integer("expert-tensor-parallel-size", 1);
    if (etp != tp && etp != 1)
      throw InputError(
          a.at("expert-tensor-parallel-size"),
          fmt::format("--expert-tensor-parallel-size {} with --tensor-model-parallel-size {}: ppsim splits "
                      "the experts over tp (Megatron's default) or not at all (1) only",
                      etp, tp));
    if (etp == 1 && tp > 1) par["etp"] = 1;  // whole experts, EP over dp x tp (parallel.etp)
  }
  // --sequence-parallel (Megatron-LM since 2022, Megatron-DeepSpeed's later versions): the per-token
  // ops split over TP by sequence; absent, every TP rank runs them on the whole sequence.
  par["sequence_parallel"] = a.has("sequence-parallel");
  const int pp = static_cast<int>(par["pp"].as<long long>());
  if (a.has("num-layers-per-virtual-pipeline-stage")) {
    const long long n = a.integer("num-layers-per-virtual-pipeline-stage", 1);
    if (!a.has("num-layers"))
      throw InputError(a.get("num-layers-per-virtual-pipeline-stage").loc, "needs --num-layers");
    const long long layers = a.integer("num-layers", 1);
    if (layers % (n * pp) != 0)
      throw InputError(a.at("num-layers-per-virtual-pipeline-stage"),
                       fmt::format("--num-layers {} is not a multiple of {} per chunk x pp {}", layers, n, pp));
    par["vpp"] = layers / (n * pp);
  }
  read_layer_split(a, par, m, pp, name);
  read_sharding(a, par);
}

void read_recompute_flags(Flags& a, YAML::Node par, MegatronArgs& out) {
  if (a.has("recompute-granularity")) {
    const std::string g = a.value("recompute-granularity");
    if (g != "full" && g != "selective")
      throw InputError(a.at("recompute-granularity"), fmt::format("--recompute-granularity {}: full or selective", g));
    // Megatron's selective recompute without --recompute-modules recomputes the attention core
    // (ppsim's `selective`); with modules, only those (ppsim's recompute_ops, below).
    if (g == "full")
      par["recompute"] = "full";
    else if (!a.has("recompute-modules"))
      par["recompute"] = "selective";
    if (g == "full" && a.has("recompute-num-layers")) par["recompute_layers"] = a.integer("recompute-num-layers", 0);
    (void)a.has("recompute-method");  // uniform and block both recompute recompute_layers layers per stage here
  } else if (a.has("checkpoint-activations")) {
    // Megatron-LM before 2022 (its SC'21 scripts): every layer's forward re-run before its
    // backward, --checkpoint-num-layers at a time (all of them either way); today's Megatron
    // refuses the flag. --recompute-activations (2022 on) is selective, as Megatron sets it.
    par["recompute"] = "full";
    (void)a.has("checkpoint-num-layers");
  } else if (a.has("recompute-activations")) {
    par["recompute"] = "selective";
  } else if (a.has("activations-checkpoint-method")) {
    // Megatron-LM from Aug 2021 to mid-2022 (the SC'21 scripts after 6985e58): uniform re-runs
    // every layer (--activations-checkpoint-num-layers at a time), block the first N of each stage.
    const std::string m = a.value("activations-checkpoint-method");
    if (m != "uniform" && m != "block")
      throw InputError(a.at("activations-checkpoint-method"),
                       fmt::format("--activations-checkpoint-method {}: uniform or block", m));
    par["recompute"] = "full";
    const long long n = a.has("activations-checkpoint-num-layers") ? a.integer("activations-checkpoint-num-layers", 0)
                                                                   : 1;  // its default
    if (m == "block") par["recompute_layers"] = n;
  }
  if (!a.has("recompute-modules")) return;
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

// How the gradients' data-parallel reduction meets the backward: Megatron-LM 2021's --DDP-impl
// local (after the backward, as the SC'21 scripts' larger runs) or torch (PyTorch DDP's buckets,
// under the backward); today's --overlap-grad-reduce. Written only where the script states it.
void read_dp_overlap(Flags& a, YAML::Node costs) {
  if (a.has("overlap-grad-reduce")) {
    costs["dp_overlap"] = 1;
  } else if (a.has("DDP-impl")) {
    const std::string d = a.value("DDP-impl");
    if (d != "local" && d != "torch")
      throw InputError(a.at("DDP-impl"), fmt::format("--DDP-impl {}: local or torch", d));
    costs["dp_overlap"] = d == "torch" ? 1 : 0;
  }
}

// --fp8-recipe (Megatron d98e8a6 TransformerConfig.fp8_recipe, default delayed; before the flag
// existed Megatron's FP8 was Transformer Engine's delayed scaling too): delayed and tensorwise
// scale per tensor (precision.fp8_recipe tensor), blockwise is DeepSeek-V3's 1x128 / 128x128 tiles
// (block). mxfp8 and custom have no figure in ppsim: refused unless the YAML writes its own
// precision.fp8_recipe, which wins as every key written there does (MegatronArgs::unless_written).
void read_fp8_recipe(Flags& a, YAML::Node prec, MegatronArgs& out) {
  const std::string r = a.has("fp8-recipe") ? a.value("fp8-recipe") : "delayed";
  if (r == "delayed" || r == "tensorwise") {
    prec["fp8_recipe"] = "tensor";
  } else if (r == "blockwise") {
    prec["fp8_recipe"] = "block";
  } else if (r == "mxfp8" || r == "custom") {
    out.unless_written.push_back(
        {"precision.fp8_recipe", a.at("fp8-recipe"),
         fmt::format("--fp8-recipe {}: ppsim has no figure for {}; it prices delayed and tensorwise (one scale per "
                     "tensor: precision.fp8_recipe tensor) and blockwise (1x128 / 128x128 tiles: block); write "
                     "precision.fp8_recipe in the config to price the run as one of them",
                     r, r == "mxfp8" ? "MXFP8 (a scale per 32 values)" : "a custom quantization recipe")});
  } else {
    throw InputError(a.at("fp8-recipe"),
                     fmt::format("--fp8-recipe {}: delayed, tensorwise, blockwise, mxfp8 or custom", r));
  }
}

void read_precision_flags(Flags& a, YAML::Node prec, MegatronArgs& out) {
  if (a.has("bf16")) prec["params"] = "bf16";
  // --fp16 forces no FP32 gradient accumulation (bf16 does): without
  // --accumulate-allreduce-grads-in-fp32 the gradients are kept and all-reduced in fp16, in 2021's
  // Megatron-LM as in d98e8a6 (arguments.py).
  if (a.has("fp16")) {
    prec["params"] = "fp16";
    prec["grads"] = a.has("accumulate-allreduce-grads-in-fp32") ? "fp32" : "fp16";
  }
  if (a.has("grad-reduce-in-bf16")) prec["grads"] = "bf16";  // the main grads kept and reduced in bf16
  // --optimizer-cpu-offload with --optimizer-offload-fraction (default 1.0: all on the host), the
  // share of the optimizer states on the host (d98e8a6 arguments.py; HybridDeviceOptimizer steps
  // that share on the CPU, the rest on the GPU).
  if (a.has("optimizer-cpu-offload")) {
    const double f = a.has("optimizer-offload-fraction") ? a.number("optimizer-offload-fraction") : 1.0;
    if (f < 0 || f > 1)
      throw InputError(a.at("optimizer-offload-fraction"),
                       fmt::format("--optimizer-offload-fraction {}: a share in [0, 1]", f));
    prec["optimizer_location"] = "host";
    if (f < 1) prec["optimizer_host_fraction"] = f;
  }
  if (a.has("fp8-format")) {
    const std::string f = a.value("fp8-format");
    if (f != "e4m3" && f != "hybrid")
      throw InputError(a.at("fp8-format"), fmt::format("--fp8-format {}: e4m3 or hybrid", f));
    prec["gemm"] = "fp8";
    read_fp8_recipe(a, prec, out);
  }
}

// The script's own values reach an error exit (`else echo "Invalid configuration"; exit 1`) and the
// training command after it has words they do not decide: what bash would pass there is not a
// run the script makes, refused at the exit (a variable the chain sets is missing, or empty).
void refuse_after_stop(const ShellRead& read, const TrainingCommand& cmd) {
  if (read.stop.empty()) return;
  for (const Word& w : cmd.args)
    if (!w.unknown.empty())
      throw InputError(read.stop_at,
                       fmt::format("the script stops here ({}) with the values it was read with, and its training "
                                   "command after it has {} ({}); set the variables its conditions test in "
                                   "megatron_args env: (or --megatron-env NAME=value)",
                                   read.stop, w.text, w.unknown));
}

MegatronArgs megatron_args_from_shell(const ShellRead& read, const std::string& name) {
  const std::vector<ShellCommand>& cmds = read.commands;
  const TrainingCommand cmd = training_command(cmds, name);
  const std::string stop =
      read.stop.empty() ? "" : fmt::format("{}:{}: {}", read.stop_at.file, read.stop_at.line, read.stop);
  refuse_after_stop(read, cmd);
  if (!cmd.script.text.empty()) {
    const std::string py = std::filesystem::path(cmd.script.text).filename().string();
    for (const char* other : {"pretrain_bert.py", "pretrain_t5.py", "pretrain_mamba.py", "pretrain_hybrid.py",
                              "pretrain_vlm.py", "pretrain_ict.py", "pretrain_retro.py", "pretrain_vision_classify.py"})
      if (py == other)
        throw InputError(cmd.script.loc, fmt::format("{}: ppsim models GPT decoders (pretrain_gpt.py and the "
                                                     "trainers that build one), not this model",
                                                     py));
  }
  std::vector<Flag> list = collect_flags(cmd.args);
  if (list.empty())
    throw InputError(SourceLoc{name, 0, 0},
                     fmt::format("no Megatron-LM arguments (--flag value) in the file{}{}",
                                 stop.empty() ? "" : fmt::format(" (the script reaches an error exit: {})", stop),
                                 read.missing.empty() ? "" : fmt::format("; {}", read.missing.front())));
  MegatronArgs out;
  out.source = cmd.loc.line > 0 ? fmt::format("{}:{}", cmd.loc.file, cmd.loc.line) : name;
  out.at = cmd.loc.line > 0 ? cmd.loc : SourceLoc{name, 0, 0};
  out.missing_hint = cmd.hint;
  if (!stop.empty())
    out.missing_hint +=
        (out.missing_hint.empty() ? "" : "; ") + fmt::format("the script reaches an error exit ({})", stop);
  launcher_world_size(cmd, out);
  Flags a(std::move(list), stop);
  YAML::Node m(YAML::NodeType::Map), par(YAML::NodeType::Map), prec(YAML::NodeType::Map), costs(YAML::NodeType::Map);
  read_model_flags(a, m, out);
  refuse_ds_ulysses(a);
  if (is_megatron_deepspeed(a)) {
    read_ds_moe_flags(a, m, par);
  } else {
    read_moe_flags(a, m);
  }
  read_parallel_flags(a, par, m, name);
  read_recompute_flags(a, par, out);
  read_precision_flags(a, prec, out);
  read_dp_overlap(a, costs);
  out.model = m;
  out.parallel = par;
  out.precision = prec;
  out.costs = costs;
  for (auto& u : a.unused()) out.ignored.push_back(u);
  return out;
}

}  // namespace

MegatronArgs megatron_args_from_text(const std::string& text, const std::string& name, const std::string& dir,
                                     const ScriptEnv& env) {
  if (is_model_config_yaml(text, name)) {  // a functional test's MODEL_ARGS, as its runner passes them
    ScriptEnv with_vars = env;
    const std::string args = model_config_args(text, name, with_vars);
    return megatron_args_from_shell(read_shell(args, name, dir, with_vars), name);
  }
  return megatron_args_from_shell(read_shell(text, name, dir, env), name);
}

bool is_script_variable(const std::string& name) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
         std::all_of(name.begin(), name.end(), word);
}

MegatronArgs read_megatron_args(const std::string& path, const SourceLoc& where, const ScriptEnv& env) {
  const std::string text = read_text_file(path, where, "megatron_args file", 4u << 20);
  return megatron_args_from_text(text, path, std::filesystem::path(path).parent_path().string(), env);
}

}  // namespace ppsim
