// A bash script read statically (shell_script.h): a lexer, then an executor over the tokens that
// evaluates what the script's own values decide and records the simple commands.
#include "cost/shell_script.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "core/text_file.h"

namespace ppsim {

namespace {

constexpr int kMaxDepth = 16;        // nested source / bash -c / eval / function calls
constexpr int kMaxLoopItems = 4096;  // for-loop iterations over known lists, in all
constexpr std::size_t kMaxValue = 1 << 20;

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// ---- lexer ----------------------------------------------------------------------------------

enum class Tok { word, array, op, arith };

struct Token {
  Tok kind = Tok::word;
  std::string text;  // word: its raw text (quotes kept); op: the operator; arith: inside (( ))
  SourceLoc loc;
  std::vector<Token> elems;  // array: the elements' raw words
  std::string name;          // array: the variable
  bool append = false;       // array: NAME+=(...)
};

class Lexer {
 public:
  Lexer(const std::string& text, std::string name, int line0, int col0)
      : s_(text), name_(std::move(name)), line_(line0), col_(col0) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    while (true) {
      skip_blanks();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') next();
        continue;
      }
      if (c == '\n') {
        out.push_back(op("\n"));
        next();
        read_heredocs();
        continue;
      }
      if (c == '(' && peek(1) == '(') {
        out.push_back(arith());
        continue;
      }
      if (std::string o = placeholder() > 0 ? std::string() : operator_at(); !o.empty()) {
        Token t = op(o);
        for (std::size_t k = 0; k < o.size(); ++k) next();
        if (o == "<<" || o == "<<-") heredoc_word(o == "<<-");
        out.push_back(t);
        continue;
      }
      out.push_back(word());
    }
    return out;
  }

 private:
  char peek(std::size_t k) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  void next() {
    if (s_[i_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++i_;
  }
  SourceLoc here() const { return SourceLoc{name_, line_, col_}; }
  Token op(const std::string& o) const {
    Token t;
    t.kind = Tok::op;
    t.text = o;
    t.loc = here();
    return t;
  }
  void skip_blanks() {
    while (i_ < s_.size()) {
      if (s_[i_] == '\\' && (peek(1) == '\n' || (peek(1) == '\r' && peek(2) == '\n'))) {
        next();
        if (s_[i_] == '\r') next();
        next();
      } else if (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r') {
        next();
      } else {
        break;
      }
    }
  }
  std::string operator_at() const {
    static const char* kOps[] = {";;", "&&", "||", "|&", "&>>", "&>", ">>", ">&", "<<<", "<<-",
                                 "<<", "<&", ";",  "&",  "|",   "(",  ")",  ">",  "<"};
    for (const char* o : kOps)
      if (s_.compare(i_, std::char_traits<char>::length(o), o) == 0) return o;
    // A file descriptor before a redirection: 2>, 1>&2.
    std::size_t k = i_;
    while (k < s_.size() && std::isdigit(static_cast<unsigned char>(s_[k]))) ++k;
    if (k > i_ && k < s_.size() && (s_[k] == '>' || s_[k] == '<')) {
      const bool amp = k + 1 < s_.size() && s_[k + 1] == '&';
      const bool twice = k + 1 < s_.size() && s_[k + 1] == s_[k];
      return s_.substr(i_, k - i_ + 1 + (amp || twice ? 1 : 0));
    }
    return {};
  }
  [[noreturn]] void fail(const SourceLoc& at, const std::string& what) const { throw InputError(at, what); }
  // The length of a placeholder left to the script's user at i_ (`<path to data>`,
  // `<Specify path>`, `<N>/`): a '<' then a letter, up to a '>' on the line, not after a blank,
  // that has a blank inside or ends the word; 0 when none (a redirection).
  std::size_t placeholder() const {
    if (peek(0) != '<' || !std::isalpha(static_cast<unsigned char>(peek(1)))) return 0;
    bool blank = false;
    for (std::size_t k = i_ + 1; k < s_.size(); ++k) {
      const char c = s_[k];
      if (c == '\n' || c == '<' || c == '"' || c == '\'' || c == '$' || c == '`' || c == ';' || c == '|' || c == '&')
        return 0;
      if (c == ' ' || c == '\t') blank = true;
      if (c != '>') continue;
      if (is_blank(s_[k - 1])) return 0;
      const char after = k + 1 < s_.size() ? s_[k + 1] : '\n';
      const bool ends = is_blank(after) || after == '\n' || after == '/' || after == '_' || after == '\\' ||
                        after == '"' || after == ';';
      return blank || ends ? k - i_ + 1 : 0;
    }
    return 0;
  }

  // Reads a balanced region opened by `open` (already consumed) up to `close`, quotes respected.
  void balanced(std::string& raw, char open, char close, const SourceLoc& at) {
    int depth = 1;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '\'' || c == '"') {
        quoted(raw, at);
        continue;
      }
      if (c == '\\' && i_ + 1 < s_.size()) {
        raw += c;
        next();
      } else if (c == open) {
        ++depth;
      } else if (c == close && --depth == 0) {
        raw += c;
        next();
        return;
      }
      raw += s_[i_];
      next();
    }
    fail(at, fmt::format("'{}' is not closed", open == '{' ? "${" : open == '(' ? "$(" : std::string(1, open)));
  }
  void quoted(std::string& raw, const SourceLoc& at) {
    const char q = s_[i_];
    const SourceLoc start = here();
    raw += q;
    next();
    while (i_ < s_.size() && s_[i_] != q) {
      if (q == '"' && s_[i_] == '\\' && i_ + 1 < s_.size()) {
        raw += s_[i_];
        next();
      } else if (q == '"' && s_[i_] == '$' && (peek(1) == '(' || peek(1) == '{')) {
        raw += s_[i_];
        next();
        const char open = s_[i_];
        raw += open;
        next();
        balanced(raw, open, open == '(' ? ')' : '}', at);
        continue;
      } else if (q == '"' && s_[i_] == '`') {
        // A command substitution inside double quotes: its own quotes do not end these
        // ("--min-lr `bc <<< "scale=3; $1/10"`", BigScience's tr14 script).
        raw += s_[i_];
        next();
        balanced(raw, '\x01', '`', at);
        continue;
      }
      raw += s_[i_];
      next();
    }
    if (i_ >= s_.size()) fail(start, "unterminated quote");
    raw += q;
    next();
  }
  Token word() {
    Token t;
    t.loc = here();
    std::string& raw = t.text;
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '<' && placeholder() > 0) {
        for (std::size_t n = placeholder(); n > 0; --n) {
          raw += s_[i_];
          next();
        }
        continue;
      }
      if (is_blank(c) || c == ';' || c == '&' || c == '|' || c == '<' || c == '>' || c == ')') break;
      if (c == '(') {
        if (array_start(raw)) return array(t);
        break;
      }
      if (c == '\'' || c == '"') {
        quoted(raw, t.loc);
      } else if (c == '\\' && i_ + 1 < s_.size()) {
        next();
        if (s_[i_] == '\n') {
          next();
          continue;
        }
        raw += '\\';
        raw += s_[i_];
        next();
      } else if (c == '$' && (peek(1) == '(' || peek(1) == '{')) {
        raw += c;
        next();
        const char open = s_[i_];
        raw += open;
        next();
        balanced(raw, open, open == '(' ? ')' : '}', t.loc);
      } else if (c == '`') {
        raw += c;
        next();
        balanced(raw, '\x01', '`', t.loc);
      } else {
        raw += c;
        next();
      }
    }
    if (raw.empty()) {
      raw += s_[i_];
      next();
    }
    return t;
  }
  static bool array_start(const std::string& raw) {
    if (raw.size() < 2 || raw.back() != '=' || !is_name_start(raw[0])) return false;
    std::size_t end = raw.size() - 1;
    if (raw[end - 1] == '+') --end;
    for (std::size_t k = 0; k < end; ++k)
      if (!is_name_char(raw[k])) return false;
    return true;
  }
  Token array(Token t) {
    t.kind = Tok::array;
    t.append = t.text.size() >= 2 && t.text[t.text.size() - 2] == '+';
    t.name = t.text.substr(0, t.text.size() - (t.append ? 2 : 1));
    next();  // '('
    while (true) {
      skip_blanks();
      if (i_ >= s_.size()) fail(t.loc, fmt::format("the array {}=( is not closed", t.name));
      const char c = s_[i_];
      if (c == ')') {
        next();
        return t;
      }
      if (c == '\n') {
        next();
      } else if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') next();
      } else {
        t.elems.push_back(word());
      }
    }
  }
  Token arith() {
    Token t;
    t.kind = Tok::arith;
    t.loc = here();
    next();
    next();
    int depth = 0;
    while (i_ < s_.size()) {
      if (s_[i_] == '(') ++depth;
      if (s_[i_] == ')') {
        if (depth == 0 && peek(1) == ')') {
          next();
          next();
          return t;
        }
        --depth;
      }
      t.text += s_[i_];
      next();
    }
    fail(t.loc, "'((' is not closed");
  }
  void heredoc_word(bool strip_tabs) {
    skip_blanks();
    std::string w;
    while (i_ < s_.size() && !is_blank(s_[i_]) && s_[i_] != ';' && s_[i_] != '|' && s_[i_] != '&' && s_[i_] != ')') {
      if (s_[i_] != '\'' && s_[i_] != '"' && s_[i_] != '\\') w += s_[i_];
      next();
    }
    pending_.push_back({w, strip_tabs});
  }
  void read_heredocs() {
    for (const auto& [delim, strip] : pending_) {
      while (i_ < s_.size()) {
        std::string line;
        while (i_ < s_.size() && s_[i_] != '\n') {
          line += s_[i_];
          next();
        }
        if (i_ < s_.size()) next();
        if (strip)
          line.erase(0, line.find_first_not_of('\t') == std::string::npos ? line.size() : line.find_first_not_of('\t'));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line == delim) break;
      }
    }
    pending_.clear();
  }

  const std::string& s_;
  std::string name_;
  std::size_t i_ = 0;
  int line_, col_;
  std::vector<std::pair<std::string, bool>> pending_;
};

// ---- values ---------------------------------------------------------------------------------

struct Var {
  std::vector<std::string> items;  // a scalar is one item
  bool array = false;
  std::string unknown;                      // why the value is not known; "" when known
  std::vector<std::string> item_unknown{};  // per item of an array (empty: all known)
  // Unknown only in parts: the value's text holds each unknown piece as the script wrote it ($X,
  // $(cmd)); its other words are known once split. False for a value an undecided branch chose.
  bool partial = false;
  bool exported = false;  // seen by the scripts it runs (`export X`)
  bool operator==(const Var& o) const {
    return items == o.items && array == o.array && unknown == o.unknown && item_unknown == o.item_unknown;
  }
  std::string why(std::size_t k) const { return k < item_unknown.size() ? item_unknown[k] : std::string(); }
  std::string scalar() const { return items.empty() ? std::string() : items[0]; }
};
using Vars = std::map<std::string, Var>;

enum class St { yes, no, unknown };
St st_not(St s) { return s == St::unknown ? s : s == St::yes ? St::no : St::yes; }

// An expansion's value: one string, or a list ("$@", "${A[@]}") whose items stay apart in quotes.
struct Val {
  std::vector<std::string> items;
  bool list = false;
  std::string unknown;
  std::vector<std::string> item_unknown{};  // per item (empty: all known)
  bool partial = false;                     // Var::partial
  std::string why(std::size_t k) const { return k < item_unknown.size() ? item_unknown[k] : std::string(); }
  std::string joined() const {
    std::string s;
    for (std::size_t k = 0; k < items.size(); ++k) s += (k ? " " : "") + items[k];
    return s;
  }
};
Val known(std::string s) { return Val{{std::move(s)}, false, {}}; }
Val unknown_val(std::string why, std::string text) { return Val{{std::move(text)}, false, std::move(why)}; }

// ---- integer arithmetic ($(( )), (( )), let) --------------------------------------------------

class Arith {
 public:
  using Get = std::function<std::optional<long long>(const std::string&)>;
  using Set = std::function<void(const std::string&, long long)>;
  Arith(const std::string& s, const Get& var, const Set& set) : s_(s), var_(var), set_(set) {}
  std::optional<long long> run() {
    try {
      const long long v = assignment();
      skip();
      if (i_ != s_.size()) return std::nullopt;
      return v;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

 private:
  struct Bad : std::exception {};
  void skip() {
    while (i_ < s_.size() && is_blank(s_[i_])) ++i_;
  }
  bool eat(const char* o) {
    skip();
    const std::size_t n = std::char_traits<char>::length(o);
    if (s_.compare(i_, n, o) != 0) return false;
    // "<" is not "<=", "*" is not "**", "&" is not "&&"
    if (n == 1 && i_ + 1 < s_.size() && (s_[i_ + 1] == '=' || (s_[i_ + 1] == s_[i_] && o[0] != '!')) &&
        std::string("<>=!*&|").find(o[0]) != std::string::npos)
      return false;
    i_ += n;
    return true;
  }
  // name (= += -= *= /=) value, else a conditional expression.
  long long assignment() {
    skip();
    const std::size_t start = i_;
    std::size_t j = i_;
    while (j < s_.size() && is_name_char(s_[j])) ++j;
    if (j > i_ && is_name_start(s_[i_])) {
      const std::string name = s_.substr(i_, j - i_);
      i_ = j;
      skip();
      for (const char* op : {"+=", "-=", "*=", "/=", "="}) {
        const std::size_t n = std::char_traits<char>::length(op);
        if (s_.compare(i_, n, op) == 0 && !(n == 1 && i_ + 1 < s_.size() && s_[i_ + 1] == '=')) {
          i_ += n;
          const long long r = assignment();
          long long v = r;
          if (n == 2) {
            const auto cur = var_(name);
            if (!cur) throw Bad();
            if (op[0] == '/' && r == 0) throw Bad();
            v = op[0] == '+' ? *cur + r : op[0] == '-' ? *cur - r : op[0] == '*' ? *cur * r : *cur / r;
          }
          set_(name, v);
          return v;
        }
      }
    }
    i_ = start;
    return ternary();
  }
  long long ternary() {
    const long long c = lor();
    if (!eat("?")) return c;
    const long long a = ternary();
    if (!eat(":")) throw Bad();
    const long long b = ternary();
    return c ? a : b;
  }
  long long lor() {
    long long v = land();
    while (eat("||")) v = (land() != 0) || v;
    return v;
  }
  long long land() {
    long long v = cmp();
    while (eat("&&")) v = (cmp() != 0) && v;
    return v;
  }
  long long cmp() {
    long long v = add();
    while (true) {
      if (eat("=="))
        v = v == add();
      else if (eat("!="))
        v = v != add();
      else if (eat("<="))
        v = v <= add();
      else if (eat(">="))
        v = v >= add();
      else if (eat("<"))
        v = v < add();
      else if (eat(">"))
        v = v > add();
      else
        return v;
    }
  }
  long long add() {
    long long v = mul();
    while (true) {
      if (eat("+"))
        v += mul();
      else if (eat("-"))
        v -= mul();
      else
        return v;
    }
  }
  long long mul() {
    long long v = power();
    while (true) {
      if (eat("*")) {
        v *= power();
      } else if (eat("/") || eat("%")) {
        const char o = s_[i_ - 1];
        const long long d = power();
        if (d == 0) throw Bad();
        v = o == '/' ? v / d : v % d;
      } else {
        return v;
      }
    }
  }
  long long power() {
    const long long b = unary();
    if (!eat("**")) return b;
    const long long e = power();
    long long r = 1;
    for (long long k = 0; k < e && k < 64; ++k) r *= b;
    return r;
  }
  long long unary() {
    skip();
    for (const char* op : {"++", "--"})
      if (s_.compare(i_, 2, op) == 0) {
        i_ += 2;
        skip();
        const std::string name = name_here();
        const auto v = var_(name);
        if (!v) throw Bad();
        set_(name, *v + (op[0] == '+' ? 1 : -1));
        return *v + (op[0] == '+' ? 1 : -1);
      }
    if (eat("-")) return -unary();
    if (eat("+")) return unary();
    if (eat("!")) return !unary();
    return atom();
  }
  long long atom() {
    skip();
    if (eat("(")) {
      const long long v = ternary();
      if (!eat(")")) throw Bad();
      return v;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      std::size_t used = 0;
      const long long v = std::stoll(s_.substr(i_), &used, 0);
      i_ += used;
      return v;
    }
    if (i_ < s_.size() && is_name_start(s_[i_])) {
      const std::string name = name_here();
      const auto v = var_(name);
      if (!v) throw Bad();
      skip();
      for (const char* op : {"++", "--"})
        if (s_.compare(i_, 2, op) == 0) {  // postfix: the old value
          i_ += 2;
          set_(name, *v + (op[0] == '+' ? 1 : -1));
        }
      return *v;
    }
    throw Bad();
  }
  std::string name_here() {
    std::size_t j = i_;
    while (j < s_.size() && is_name_char(s_[j])) ++j;
    if (j == i_ || !is_name_start(s_[i_])) throw Bad();
    std::string name = s_.substr(i_, j - i_);
    i_ = j;
    return name;
  }
  const std::string& s_;
  const Get& var_;
  const Set& set_;
  std::size_t i_ = 0;
};

std::optional<long long> to_int(const std::string& s) {
  std::size_t k = 0;
  while (k < s.size() && is_blank(s[k])) ++k;
  if (k == s.size()) return std::nullopt;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(s.substr(k), &used, 10);
    for (std::size_t j = k + used; j < s.size(); ++j)
      if (!is_blank(s[j])) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// Bash's pattern match ([[ x == pat ]], case): * ? and literal characters.
bool glob_match(const std::string& p, const std::string& s, std::size_t i = 0, std::size_t j = 0) {
  if (i == p.size()) return j == s.size();
  if (p[i] == '*') {
    for (std::size_t k = j; k <= s.size(); ++k)
      if (glob_match(p, s, i + 1, k)) return true;
    return false;
  }
  if (j == s.size()) return false;
  return (p[i] == '?' || p[i] == s[j]) && glob_match(p, s, i + 1, j + 1);
}

}  // namespace

// ---- the executor -----------------------------------------------------------------------------

namespace shell_detail {

// `#SBATCH` lines at the top of a batch script, as sbatch reads them: options, before its own.
std::vector<ShellWord> sbatch_directives(const std::string& text, const std::string& path) {
  std::vector<ShellWord> out;
  std::size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    const std::size_t eol = std::min(text.find('\n', pos), text.size());
    const std::string l = text.substr(pos, eol - pos);
    ++line;
    pos = eol + 1;
    const std::size_t first = l.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    if (l[first] != '#') break;  // the first command ends the directives
    if (l.compare(first, 7, "#SBATCH") != 0) continue;
    std::size_t k = first + 7;
    while (k < l.size()) {
      while (k < l.size() && is_blank(l[k])) ++k;
      if (k >= l.size() || l[k] == '#') break;
      const std::size_t e = std::min(l.find_first_of(" \t\r", k), l.size());
      out.push_back(ShellWord{l.substr(k, e - k), SourceLoc{path, line, static_cast<int>(k) + 1}, {}});
      k = e;
    }
  }
  return out;
}

std::string base_name(const std::string& w) {
  const std::size_t slash = w.rfind('/');
  return slash == std::string::npos ? w : w.substr(slash + 1);
}

struct ExitScript {};

struct Field {
  std::string text;
  bool started = false;
  std::string unknown;
};

class Executor {
 public:
  Executor(std::string name, std::string dir, const std::map<std::string, std::string>& env = {})
      : name_(std::move(name)), dir_(std::move(dir)) {
    vars_["0"] = Var{{name_}, false, {}};
    auto normal = [](const std::string& d) {  // absolute, normalised, no trailing '/'
      std::error_code ec;
      std::string out = std::filesystem::absolute(d, ec).lexically_normal().string();
      if (out.size() > 1 && out.back() == '/') out.pop_back();
      return out;
    };
    if (!dir_.empty()) dir_ = normal(dir_);
    vars_["PWD"] = Var{{dir_.empty() ? normal(".") : dir_}, false, {}};
    vars_["PWD"].exported = true;
    for (const auto& [k, v] : env) {
      vars_[k] = Var{{v}, false, {}};
      vars_[k].exported = true;
      pinned_.insert(k);
    }
  }
  std::string stop;  // ShellRead::stop, stop_at
  SourceLoc stop_at;
  const std::vector<std::string>& missing_sources() const { return missing_sources_; }
  // A script with #SBATCH lines is read as sbatch runs it: its commands under those options.
  void batch_script(const std::string& text) {
    std::vector<ShellWord> d = sbatch_directives(text, name_);
    if (d.empty()) return;
    launcher_.push_back(ShellWord{"sbatch", d.front().loc, {}});
    for (auto& w : d) launcher_.push_back(std::move(w));
    slurm_env();
  }
  // What Slurm sets in a batch script's environment from its allocation's options, where they
  // state it: SLURM_NNODES (SLURM_JOB_NUM_NODES), SLURM_NTASKS_PER_NODE, SLURM_NTASKS.
  void slurm_env() {
    const SlurmTasks t = slurm_tasks(launcher_);
    auto set = [&](const char* name, const std::string& value, const std::string& unknown) {
      if (pinned_.count(name)) return;
      vars_[name] = Var{{value}, false, unknown.empty() ? "" : fmt::format("from Slurm's options: {}", unknown)};
      vars_[name].exported = true;
    };
    const bool fixed = t.nodes.set && t.nodes.value.find_first_of("-,:") == std::string::npos;
    if (fixed) {
      set("SLURM_NNODES", t.nodes.value, t.nodes.unknown);
      set("SLURM_JOB_NUM_NODES", t.nodes.value, t.nodes.unknown);
    }
    if (t.per_node.set) set("SLURM_NTASKS_PER_NODE", t.per_node.value, t.per_node.unknown);
    if (t.ntasks.set) {
      set("SLURM_NTASKS", t.ntasks.value, t.ntasks.unknown);
    } else if (fixed && t.per_node.set && t.nodes.unknown.empty() && t.per_node.unknown.empty()) {
      const auto n = to_int(t.nodes.value), p = to_int(t.per_node.value);
      if (n && p) set("SLURM_NTASKS", std::to_string(*n * *p), {});
    }
  }
  void run_text(const std::string& text, const std::string& name, int line0, int col0) {
    if (++depth_ > kMaxDepth) throw InputError(SourceLoc{name, line0, col0}, "scripts nested too deep");
    const std::vector<Token> toks = Lexer(text, name, line0, col0).run();
    run_tokens(toks);
    --depth_;
  }
  std::vector<ShellCommand> commands;

 private:
  // Running state: `run` false while skipping a branch not taken; `taint` the undecided
  // condition around the commands being read.
  struct Mode {
    bool run = true;
    std::string taint;
  };
  struct Cursor {
    const std::vector<Token>& t;
    std::size_t i = 0;
    bool end() const { return i >= t.size(); }
    const Token& cur() const { return t[i]; }
    bool is_op(const char* o) const { return !end() && t[i].kind == Tok::op && t[i].text == o; }
    bool is_word(const char* w) const { return !end() && t[i].kind == Tok::word && t[i].text == w; }
  };

  void run_tokens(const std::vector<Token>& toks) {
    Cursor c{toks};
    list(c, Mode{true, base_taint_}, {});
    if (!c.end())
      throw InputError(c.cur().loc, fmt::format("cannot read the script here: unexpected '{}'", printable(c.cur())));
  }
  static std::string printable(const Token& t) { return t.text == "\n" ? "newline" : t.text; }

  // list: and_or ((; | & | newline) and_or)*, up to one of `stops` (a keyword word or an op).
  St list(Cursor& c, const Mode& m, const std::vector<std::string>& stops) {
    St last = St::yes;
    while (!c.end()) {
      if (c.is_op("\n") || c.is_op(";") || c.is_op("&")) {
        ++c.i;
        continue;
      }
      const Token& t = c.cur();
      for (const auto& s : stops)
        if (t.text == s && (t.kind == Tok::word || t.kind == Tok::op)) return last;
      if (t.kind == Tok::op && (t.text == ")" || t.text == ";;")) return last;
      last = and_or(c, m);
    }
    return last;
  }

  St and_or(Cursor& c, const Mode& m) {
    const std::size_t from = c.i;
    St st = pipeline(c, m);
    while (c.is_op("&&") || c.is_op("||")) {
      const bool both = c.cur().text == "&&";
      const std::string left = source_text(c, from, c.i);
      const SourceLoc at = c.cur().loc;
      ++c.i;
      while (c.is_op("\n")) ++c.i;
      Mode next = m;
      if (st != St::unknown && (st == St::yes) != both) next.run = false;
      if (st != St::unknown || !m.run) {
        const St rhs = pipeline(c, next);
        if (next.run) st = rhs;  // `a && b` with a false stays false
        continue;
      }
      const std::string why =
          fmt::format("the condition '{}' at line {}, which the script's own values do not decide", left, at.line);
      branch_unknown(c, m, why, [&](Cursor& cc, const Mode& mm) { pipeline(cc, mm); });
      st = St::unknown;
    }
    return st;
  }

  St pipeline(Cursor& c, const Mode& m) {
    bool negate = false;
    if (c.is_word("!")) {
      negate = true;
      ++c.i;
    }
    St st = command(c, m);
    while (c.is_op("|") || c.is_op("|&")) {
      ++c.i;
      while (c.is_op("\n")) ++c.i;
      st = command(c, m);
    }
    return negate ? st_not(st) : st;
  }

  St command(Cursor& c, const Mode& m) {
    if (c.end()) return St::yes;
    const Token& t = c.cur();
    if (t.kind == Tok::arith) {
      ++c.i;
      if (!m.run) return St::yes;
      const auto v = arith_value(t.text);
      skip_redirections(c);
      return !v ? St::unknown : *v != 0 ? St::yes : St::no;
    }
    if (t.kind == Tok::op && t.text == "(") {
      ++c.i;
      const St st = list(c, m, {")"});
      expect_op(c, ")", t.loc);
      skip_redirections(c);
      return st;
    }
    if (t.kind == Tok::word) {
      if (t.text == "if") return if_clause(c, m);
      if (t.text == "for") return for_clause(c, m);
      if (t.text == "while" || t.text == "until") return while_clause(c, m);
      if (t.text == "case") return case_clause(c, m);
      if (t.text == "{") {
        ++c.i;
        const St st = list(c, m, {"}"});
        expect_word(c, "}", t.loc);
        skip_redirections(c);
        return st;
      }
      if (t.text == "function" || (c.i + 2 < c.t.size() && c.t[c.i + 1].kind == Tok::op && c.t[c.i + 1].text == "(" &&
                                   c.t[c.i + 2].kind == Tok::op && c.t[c.i + 2].text == ")"))
        return function_def(c, m);
    }
    return simple(c, m);
  }

  void expect_op(Cursor& c, const char* o, const SourceLoc& opened) {
    if (!c.is_op(o))
      throw InputError(c.end() ? opened : c.cur().loc,
                       fmt::format("cannot read the script: expected '{}' for the one at line {}", o, opened.line));
    ++c.i;
  }
  void expect_word(Cursor& c, const char* w, const SourceLoc& opened) {
    while (c.is_op("\n") || c.is_op(";")) ++c.i;
    if (!c.is_word(w))
      throw InputError(c.end() ? opened : c.cur().loc,
                       fmt::format("cannot read the script: expected '{}' for the one at line {}", w, opened.line));
    ++c.i;
  }
  void skip_redirections(Cursor& c) {
    while (!c.end() && c.cur().kind == Tok::op && is_redirection(c.cur().text)) {
      ++c.i;
      if (!c.end() && c.cur().kind == Tok::word) ++c.i;
    }
  }
  static bool is_redirection(const std::string& o) {
    return !o.empty() && (o.find('>') != std::string::npos || o.find('<') != std::string::npos);
  }
  std::string taint_text(const Mode& m, const std::string& why) const { return m.taint.empty() ? why : m.taint; }

  // Condition text for messages: the words of the condition as written.
  static std::string source_text(const Cursor& c, std::size_t from, std::size_t to) {
    std::string s;
    for (std::size_t k = from; k < to && k < c.t.size(); ++k) {
      if (c.t[k].kind == Tok::op && (c.t[k].text == "\n" || c.t[k].text == ";")) continue;
      s += (s.empty() ? "" : " ") + (c.t[k].kind == Tok::arith ? "((" + c.t[k].text + "))" : c.t[k].text);
    }
    return s;
  }

  St if_clause(Cursor& c, const Mode& m);
  void if_rest(Cursor& c, const Mode& m, const SourceLoc& at);
  void else_part(Cursor& c, const Mode& m, const SourceLoc& at);
  St for_clause(Cursor& c, const Mode& m);
  void arith_for(Cursor& c, const Mode& m, const std::string& head, const SourceLoc& at);
  St while_clause(Cursor& c, const Mode& m);
  St case_clause(Cursor& c, const Mode& m);
  St function_def(Cursor& c, const Mode& m);
  St simple(Cursor& c, const Mode& m);
  St run_simple(std::vector<ShellWord> argv, const SourceLoc& at, const Mode& m);
  St builtin(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m, bool& handled);
  St output(const std::vector<ShellWord>& argv, const Mode& m, bool& handled);
  void assign(const std::string& raw, const SourceLoc& at, const Mode& m);
  void assign_array(const Token& t, const Mode& m);
  void set_var(const std::string& name, Var v, const Mode& m);
  Vars merge(const Vars& a, const Vars& b, const std::string& why) const;
  St branch_unknown(Cursor& c, const Mode& m, const std::string& why,
                    const std::function<void(Cursor&, const Mode&)>& rest);

 public:
  // Expansion (public for the condition evaluator below).
  std::vector<ShellWord> expand(const std::string& raw, const SourceLoc& at, bool split);
  std::string expand_string(const std::string& raw, const SourceLoc& at, std::string& unknown);
  Val parameter(const std::string& inside, const SourceLoc& at);
  Val variable(const std::string& name) const;
  std::string piece_reason(const std::string& word, const std::string& fallback) const;
  std::optional<long long> arith_value(const std::string& expr);
  Val command_substitution(const std::string& inside);
  St test(std::vector<ShellWord> args, bool double_bracket);

 private:
  void expand_into(const std::string& raw, std::size_t& i, const SourceLoc& at, bool in_quotes, bool split,
                   std::vector<Field>& out);
  Val dollar(const std::string& raw, std::size_t& i, const SourceLoc& at);
  void source_file(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m);
  std::string find_file(const std::string& word, const SourceLoc& at) const;
  void nested_text(const std::string& text, const SourceLoc& at, const Mode& m);
  bool launch(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m);
  void run_script(const std::vector<ShellWord>& argv, std::size_t k, std::size_t file, const std::string& path,
                  const Mode& m);
  void change_dir(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m);

  std::string name_, dir_;
  std::set<std::string> pinned_;     // the user's env: the scripts' assignments to them are not applied
  std::vector<ShellWord> launcher_;  // ShellCommand::launcher of the commands being read
  std::string base_taint_;           // the condition a nested script (source, sh -c, child) runs under
  std::string last_echo_;            // the last echo's text, for `stop`
  std::string last_condition_;       // the last if/elif condition decided, for `stop`
  Vars vars_;
  std::map<std::string, std::vector<Token>> functions_;
  std::vector<std::string> missing_sources_;
  int depth_ = 0;
  int loop_items_ = 0;
  std::string* capture_ = nullptr;  // inside $(...): what echo and printf write
  std::string capture_failed_;      // inside $(...): the first command that is not a builtin
};

// ---- control flow -------------------------------------------------------------------------------

// A branch the script does not decide: the rest read once per alternative on copies of the
// variables, then merged (a variable set differently is unknown, naming `why`).
St Executor::branch_unknown(Cursor& c, const Mode& m, const std::string& why,
                            const std::function<void(Cursor&, const Mode&)>& rest) {
  Mode tainted = m;
  tainted.taint = taint_text(m, why);
  const Vars before = vars_;
  rest(c, tainted);
  vars_ = merge(before, vars_, why);
  return St::unknown;
}

Vars Executor::merge(const Vars& a, const Vars& b, const std::string& why) const {
  Vars out;
  auto mark = [&](const std::string& k, const Var* v) {
    Var u = v ? *v : Var{};
    u.unknown = "set under " + why;
    u.partial = false;
    out[k] = u;
  };
  for (const auto& [k, v] : a) {
    auto it = b.find(k);
    if (it != b.end() && it->second == v)
      out[k] = v;
    else
      mark(k, it != b.end() ? &it->second : &v);
  }
  for (const auto& [k, v] : b)
    if (!a.count(k)) mark(k, &v);
  return out;
}

St Executor::if_clause(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  ++c.i;
  if_rest(c, m, at);
  skip_redirections(c);
  return St::yes;
}

// After `if` or `elif`: CONDITION then LIST, then elif/else/fi. A decided condition runs one
// branch; an undecided one reads both on copies of the variables and merges them.
void Executor::if_rest(Cursor& c, const Mode& m, const SourceLoc& at) {
  const std::size_t from = c.i;
  const St cond = list(c, m, {"then"});
  const std::string text = source_text(c, from, c.i);
  expect_word(c, "then", at);
  if (m.run && cond != St::unknown)
    last_condition_ = fmt::format("'{}' at line {}", text, c.t[from < c.t.size() ? from : 0].loc.line);
  if (!m.run || cond != St::unknown) {
    Mode take = m, other = m;
    take.run = m.run && cond == St::yes;
    other.run = m.run && cond == St::no;
    list(c, take, {"elif", "else", "fi"});
    else_part(c, other, at);
    return;
  }
  const std::string why = fmt::format("the condition '{}' at line {}, which the script's own values do not decide",
                                      text, c.t[from < c.t.size() ? from : 0].loc.line);
  Mode tainted = m;
  tainted.taint = taint_text(m, why);
  const Vars before = vars_;
  list(c, tainted, {"elif", "else", "fi"});
  const Vars after_then = vars_;
  vars_ = before;
  else_part(c, tainted, at);
  vars_ = merge(after_then, vars_, why);
}

void Executor::else_part(Cursor& c, const Mode& m, const SourceLoc& at) {
  if (c.is_word("elif")) {
    ++c.i;
    if_rest(c, m, at);
    return;
  }
  if (c.is_word("else")) {
    ++c.i;
    list(c, m, {"fi"});
  }
  expect_word(c, "fi", at);
}

St Executor::for_clause(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  ++c.i;
  std::vector<ShellWord> items;
  std::string var, unknown;
  if (!c.end() && c.cur().kind == Tok::arith) {
    const std::string head = c.cur().text;
    ++c.i;
    while (c.is_op("\n") || c.is_op(";")) ++c.i;
    expect_word(c, "do", at);
    arith_for(c, m, head, at);
    expect_word(c, "done", at);
    skip_redirections(c);
    return St::yes;
  } else {
    if (c.end() || c.cur().kind != Tok::word) throw InputError(at, "cannot read the script: 'for' needs a name");
    var = c.cur().text;
    ++c.i;
    while (c.is_op("\n")) ++c.i;
    if (c.is_word("in")) {
      ++c.i;
      while (!c.end() && c.cur().kind == Tok::word) {
        if (m.run)
          for (auto& w : expand(c.cur().text, c.cur().loc, true)) {
            if (!w.unknown.empty()) unknown = fmt::format("the loop at line {} over '{}'", at.line, w.text);
            items.push_back(w);
          }
        ++c.i;
      }
    } else {
      unknown = fmt::format("the loop at line {} over the script's arguments", at.line);
    }
  }
  while (c.is_op("\n") || c.is_op(";")) ++c.i;
  expect_word(c, "do", at);
  const std::size_t body = c.i;
  loop_items_ += static_cast<int>(items.size());
  if (!m.run || !unknown.empty() || loop_items_ > kMaxLoopItems) {
    if (unknown.empty()) unknown = fmt::format("the loop at line {} (too many iterations to follow)", at.line);
    if (m.run)
      branch_unknown(c, m, unknown, [&](Cursor& cc, const Mode& mm) { list(cc, mm, {"done"}); });
    else
      list(c, m, {"done"});
  } else if (items.empty()) {
    list(c, Mode{false, m.taint}, {"done"});
  } else {
    for (const auto& w : items) {
      c.i = body;
      set_var(var, Var{{w.text}, false, {}}, m);
      list(c, m, {"done"});
    }
  }
  expect_word(c, "done", at);
  skip_redirections(c);
  return St::yes;
}

// for ((init; condition; step)): followed while the script's values decide the condition, up to
// kMaxLoopItems passes in all; otherwise read once, what it sets marked with the loop.
void Executor::arith_for(Cursor& c, const Mode& m, const std::string& head, const SourceLoc& at) {
  std::vector<std::string> part(1);
  for (char ch : head) {
    if (ch == ';')
      part.emplace_back();
    else
      part.back() += ch;
  }
  const std::size_t body = c.i;
  const std::string why = fmt::format("the loop 'for (({}))' at line {}", head, at.line);
  auto once = [&](const Mode& mm) {
    c.i = body;
    list(c, mm, {"done"});
  };
  if (!m.run || part.size() != 3) {
    if (m.run)
      branch_unknown(c, m, why, [&](Cursor&, const Mode& mm) { once(mm); });
    else
      once(m);
    return;
  }
  const Vars before = vars_;
  const std::size_t recorded = commands.size();
  bool decided = part[0].find_first_not_of(" \t") == std::string::npos || arith_value(part[0]).has_value();
  while (decided) {
    std::optional<long long> go = part[1].find_first_not_of(" \t") == std::string::npos ? 1 : arith_value(part[1]);
    if (!go || ++loop_items_ > kMaxLoopItems) {
      decided = false;
      break;
    }
    if (*go == 0) break;
    once(m);
    if (part[2].find_first_not_of(" \t") != std::string::npos && !arith_value(part[2])) decided = false;
  }
  if (decided) {
    if (c.i == body) once(Mode{false, m.taint});  // never ran: skip the body
    return;
  }
  vars_ = before;
  commands.resize(recorded);
  branch_unknown(c, m, why, [&](Cursor&, const Mode& mm) { once(mm); });
}

St Executor::while_clause(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  const std::string kw = c.cur().text;
  ++c.i;
  const std::string why = fmt::format("the '{}' loop at line {}", kw, at.line);
  // The condition decides the first pass: a loop that never runs is skipped; one that may is read
  // once, what it sets marked with the loop.
  const std::size_t cond = c.i;
  const St first = list(c, m, {"do"});
  const bool never = m.run && first == (kw == "while" ? St::no : St::yes);
  c.i = cond;
  auto body = [&](Cursor& cc, const Mode& mm) {
    list(cc, mm, {"do"});
    expect_word(cc, "do", at);
    list(cc, mm, {"done"});
  };
  if (m.run && !never)
    branch_unknown(c, m, why, body);
  else
    body(c, Mode{false, m.taint});
  expect_word(c, "done", at);
  skip_redirections(c);
  return St::yes;
}

St Executor::case_clause(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  ++c.i;
  if (c.end() || c.cur().kind != Tok::word) throw InputError(at, "cannot read the script: 'case' needs a word");
  std::string unknown;
  const std::string subject = m.run ? expand_string(c.cur().text, c.cur().loc, unknown) : std::string();
  const std::string subject_text = c.cur().text;
  ++c.i;
  while (c.is_op("\n")) ++c.i;
  expect_word(c, "in", at);
  const std::string why =
      fmt::format("'case {}' at line {}, which the script's own values do not decide", subject_text, at.line);
  bool matched = false;
  const Vars before = vars_;
  Vars merged = vars_;
  while (true) {
    while (c.is_op("\n") || c.is_op(";")) ++c.i;
    if (c.end()) throw InputError(at, "cannot read the script: 'case' without 'esac'");
    if (c.is_word("esac")) break;
    if (c.is_op("(")) ++c.i;
    bool hit = false;
    while (!c.end() && !c.is_op(")")) {
      if (c.cur().kind == Tok::word && m.run && unknown.empty()) {
        std::string u;
        const std::string pat = expand_string(c.cur().text, c.cur().loc, u);
        hit = hit || (u.empty() && glob_match(pat, subject));
      }
      ++c.i;
      if (c.is_op("|")) ++c.i;
    }
    expect_op(c, ")", at);
    Mode branch = m;
    if (!m.run || matched)
      branch.run = false;
    else if (!unknown.empty())
      branch.taint = taint_text(m, why);
    else if (!hit)
      branch.run = false;
    if (branch.run && !unknown.empty()) vars_ = before;
    list(c, branch, {"esac"});
    if (branch.run && !unknown.empty()) merged = merge(merged, vars_, why);
    if (branch.run && unknown.empty()) matched = true;
    if (c.is_op(";;")) ++c.i;
  }
  ++c.i;
  if (m.run && !unknown.empty()) vars_ = merged;
  skip_redirections(c);
  return St::yes;
}

St Executor::function_def(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  if (c.is_word("function")) ++c.i;
  if (c.end() || c.cur().kind != Tok::word) throw InputError(at, "cannot read the script: 'function' needs a name");
  std::string name = c.cur().text;
  ++c.i;
  if (c.is_op("(")) {
    ++c.i;
    expect_op(c, ")", at);
  }
  while (c.is_op("\n")) ++c.i;
  const std::size_t from = c.i;
  command(c, Mode{false, m.taint});  // the body, read without running it
  if (m.run)
    functions_[name] = std::vector<Token>(c.t.begin() + static_cast<std::ptrdiff_t>(from),
                                          c.t.begin() + static_cast<std::ptrdiff_t>(c.i));
  return St::yes;
}

// ---- simple commands ----------------------------------------------------------------------------

bool is_assignment(const std::string& raw) {
  if (raw.empty() || !is_name_start(raw[0])) return false;
  std::size_t k = 0;
  while (k < raw.size() && is_name_char(raw[k])) ++k;
  if (k < raw.size() && raw[k] == '+') ++k;
  return k < raw.size() && raw[k] == '=';
}

St Executor::simple(Cursor& c, const Mode& m) {
  const SourceLoc at = c.cur().loc;
  std::vector<const Token*> words;
  bool in_test = false;  // [[ ... ]]: && || < > ( ) belong to the test
  while (!c.end()) {
    const Token& t = c.cur();
    if (t.kind == Tok::op && in_test && t.text != "\n") {
      words.push_back(&t);
      ++c.i;
      continue;
    }
    if (t.kind == Tok::op && is_redirection(t.text)) {
      ++c.i;
      if (t.text != "<<" && t.text != "<<-" && !c.end() && c.cur().kind == Tok::word) ++c.i;
      continue;
    }
    if (t.kind != Tok::word && t.kind != Tok::array) break;
    if (words.empty() && t.text == "[[")
      in_test = true;
    else if (in_test && t.text == "]]")
      in_test = false;
    words.push_back(&t);
    ++c.i;
  }
  if (words.empty())
    throw InputError(at, fmt::format("cannot read the script here: unexpected '{}'", printable(c.cur())));
  if (!m.run) return St::yes;
  std::size_t k = 0;
  for (; k < words.size(); ++k) {
    if (words[k]->kind == Tok::array)
      assign_array(*words[k], m);
    else if (is_assignment(words[k]->text))
      assign(words[k]->text, words[k]->loc, m);
    else
      break;
  }
  if (k == words.size()) return St::yes;
  std::vector<ShellWord> argv;
  for (; k < words.size(); ++k) {
    const Token& t = *words[k];
    if (t.kind == Tok::array) {
      assign_array(t, m);  // declare -a A=(...), local A=(...)
      continue;
    }
    if (t.kind == Tok::op) {
      argv.push_back(ShellWord{t.text, t.loc, {}});
      continue;
    }
    for (auto& w : expand(t.text, t.loc, true)) argv.push_back(std::move(w));
  }
  return run_simple(std::move(argv), at, m);
}

St Executor::run_simple(std::vector<ShellWord> argv, const SourceLoc& at, const Mode& m) {
  if (argv.empty()) return St::yes;
  bool handled = false;
  const St st = builtin(argv, at, m, handled);
  if (handled) return st;
  if (capture_ != nullptr && !functions_.count(argv[0].text)) {
    if (capture_failed_.empty()) capture_failed_ = argv[0].text;
    return St::unknown;
  }
  auto fn = functions_.find(argv[0].text);
  if (fn != functions_.end() && argv[0].unknown.empty()) {
    static const char* kPositional[] = {"1", "2", "3", "4", "5", "6", "7", "8", "9", "#", "@"};
    Vars saved;
    for (const char* p : kPositional)
      if (vars_.count(p)) saved[p] = vars_[p];
    Var all{{}, true, {}};
    for (std::size_t k = 1; k < argv.size(); ++k) {
      if (k <= 9) vars_[std::to_string(k)] = Var{{argv[k].text}, false, argv[k].unknown};
      all.items.push_back(argv[k].text);
    }
    vars_["#"] = Var{{std::to_string(argv.size() - 1)}, false, {}};
    vars_["@"] = all;
    if (++depth_ > kMaxDepth) throw InputError(at, "functions nested too deep");
    const std::vector<Token> body = fn->second;
    Cursor c{body};
    command(c, m);
    --depth_;
    for (const char* p : kPositional) vars_.erase(p);
    for (auto& [key, v] : saved) vars_[key] = v;
    return St::yes;
  }
  if (argv[0].text == "echo") {
    last_echo_.clear();
    for (std::size_t k = 1; k < argv.size(); ++k) last_echo_ += (k > 1 ? " " : "") + argv[k].text;
  }
  commands.push_back(ShellCommand{std::move(argv), at, m.taint, launcher_});
  return St::yes;
}

St Executor::builtin(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m, bool& handled) {
  const std::string& cmd = argv[0].text;
  handled = true;
  if (cmd == "export" || cmd == "declare" || cmd == "local" || cmd == "readonly" || cmd == "typeset") {
    const bool exporting = cmd == "export";
    for (std::size_t k = 1; k < argv.size(); ++k) {
      const std::string& a = argv[k].text;
      const std::size_t eq = a.find('=');
      if (exporting && eq == std::string::npos && vars_.count(a)) vars_[a].exported = true;  // export X
      if (a.empty() || a[0] == '-' || eq == std::string::npos || !is_assignment(a)) continue;
      const bool append = eq > 0 && a[eq - 1] == '+';
      const std::string name = a.substr(0, append ? eq - 1 : eq);
      Var v{{a.substr(eq + 1)}, false, argv[k].unknown};
      v.exported = exporting;
      v.partial = true;  // as an assignment: its unknown pieces are its text for them
      if (append && vars_.count(name)) v.items[0] = vars_[name].scalar() + v.items[0];
      set_var(name, v, m);
    }
    return St::yes;
  }
  if (cmd == "unset") {
    for (std::size_t k = 1; k < argv.size(); ++k)
      if (!pinned_.count(argv[k].text)) vars_.erase(argv[k].text);
    return St::yes;
  }
  if (cmd == "cd" || cmd == "pushd") {
    change_dir(argv, at, m);
    return St::yes;
  }
  if (cmd == "pwd" && capture_ != nullptr) {
    const Val v = variable("PWD");
    if (!v.unknown.empty() && capture_failed_.empty()) capture_failed_ = v.unknown;
    *capture_ += v.joined() + "\n";
    return St::yes;
  }
  if (cmd == "pwd") return St::yes;
  if (cmd == "read" || cmd == "mapfile" || cmd == "readarray") {  // their values come from input, not read here
    for (std::size_t k = 1; k < argv.size(); ++k) {
      const std::string& a = argv[k].text;
      if (a.size() > 1 && a[0] == '-') {
        if (a.find_first_of("padnutCc", 1) != std::string::npos && a.size() == 2) ++k;  // -p PROMPT, -a NAME, ...
        if (a == "-a" && k < argv.size())
          set_var(argv[k].text, Var{{}, true, fmt::format("set by '{}' at line {} from its input", cmd, at.line)}, m);
        continue;
      }
      set_var(a, Var{{"$" + a}, false, fmt::format("set by '{}' at line {} from its input", cmd, at.line)}, m);
    }
    return St::yes;
  }
  if (cmd == "[" || cmd == "test" || cmd == "[[") return test(argv, cmd == "[[");
  if (cmd == "true" || cmd == ":") return St::yes;
  if (cmd == "false") return St::no;
  if (cmd == "exit") {
    // `exit` / `exit 0` ends the script; a non-zero exit is an error check (a variable the user
    // must set, a file that must exist): the launch it guards is read on.
    const bool error = argv.size() > 1 && argv[1].text != "0";
    if (m.taint.empty() && !error && capture_ == nullptr) throw ExitScript{};
    if (m.taint.empty() && error && capture_ == nullptr && stop.empty()) {
      stop = fmt::format(
          "exit {}{}{}", argv[1].text, last_echo_.empty() ? "" : fmt::format(" after 'echo {}'", last_echo_),
          last_condition_.empty() ? "" : fmt::format("; the last condition decided: {}", last_condition_));
      stop_at = at;
    }
    return St::yes;
  }
  if (cmd == "echo" || cmd == "printf") return output(argv, m, handled);
  if (cmd == "source" || cmd == ".") {
    source_file(argv, at, m);
    return St::yes;
  }
  if (cmd == "let") {
    St st = St::yes;
    for (std::size_t k = 1; k < argv.size(); ++k) {
      const auto v = arith_value(argv[k].text);
      st = !v ? St::unknown : *v ? St::yes : St::no;
    }
    return st;
  }
  if (cmd == "eval") {
    // eval parses its words again (quotes, splitting). A word whose value is not known (an unset
    // variable, a command's output) keeps the text the script wrote for it (`${o}`, `$(nproc)`),
    // which the new parse expands to the same unknown: the known words around it lose their quotes
    // as in bash. Only an unknown word with unbalanced quotes cannot be read again.
    auto balanced = [](const std::string& t) {
      return std::count(t.begin(), t.end(), '"') % 2 == 0 && std::count(t.begin(), t.end(), '\'') % 2 == 0;
    };
    std::string text;
    for (std::size_t k = 1; k < argv.size(); ++k) {
      if (!argv[k].unknown.empty() && !balanced(argv[k].text)) {
        handled = false;  // quoting we cannot re-read: recorded as a command, refused where it matters
        return St::yes;
      }
      text += (text.empty() ? "" : " ") + argv[k].text;
    }
    if (argv.size() > 1) nested_text(text, argv[1].loc, m);
    return St::yes;
  }
  handled = launch(argv, at, m);
  return St::yes;
}

// printf FORMAT ARGS: %s %d %i %%, \n \t; the format again while arguments remain.
std::string printf_text(const std::vector<ShellWord>& a, std::size_t from) {
  if (from >= a.size()) return {};
  const std::string& f = a[from].text;
  std::string out;
  std::size_t arg = from + 1;
  do {
    for (std::size_t k = 0; k < f.size(); ++k) {
      if (f[k] == '\\' && k + 1 < f.size()) {
        const char e = f[++k];
        out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else if (f[k] == '%' && k + 1 < f.size()) {
        const char d = f[++k];
        if (d == '%')
          out += '%';
        else if (arg < a.size())
          out += a[arg++].text;
      } else {
        out += f[k];
      }
    }
  } while (arg < a.size() && f.find('%') != std::string::npos);
  return out;
}

// echo and printf: their text goes to the $(...) being read, or with printf -v VAR to VAR.
St Executor::output(const std::vector<ShellWord>& argv, const Mode& m, bool& handled) {
  std::string why;
  for (const auto& w : argv)
    if (!w.unknown.empty() && why.empty()) why = w.unknown;
  const bool to_var = argv[0].text == "printf" && argv.size() > 2 && argv[1].text == "-v";
  if (to_var) {
    const std::string text = printf_text(argv, 3);
    Var v{{text}, false, why};
    set_var(argv[2].text, v, m);
    return St::yes;
  }
  if (capture_ == nullptr) {
    handled = false;  // recorded as a command
    return St::yes;
  }
  if (!why.empty()) {
    if (capture_failed_.empty()) capture_failed_ = why;
    return St::yes;
  }
  if (argv[0].text == "printf") {
    *capture_ += printf_text(argv, 1);
  } else {
    std::size_t k = 1;
    bool newline = true;
    for (; k < argv.size() && (argv[k].text == "-n" || argv[k].text == "-e" || argv[k].text == "-E"); ++k)
      newline = newline && argv[k].text != "-n";
    for (std::size_t j = k; j < argv.size(); ++j) *capture_ += (j > k ? " " : "") + argv[j].text;
    if (newline) *capture_ += '\n';
  }
  return St::yes;
}

// The file a script names (`source F`, `bash F`, `sbatch F`): F itself when absolute, else
// under the working folder ($PWD), then beside the script naming it; "" when none is there.
std::string Executor::find_file(const std::string& word, const SourceLoc& at) const {
  namespace fs = std::filesystem;
  const fs::path p(word);
  std::vector<fs::path> tries;
  if (p.is_absolute()) {
    tries.push_back(p);
  } else {
    const Val pwd = variable("PWD");
    if (pwd.unknown.empty()) tries.push_back(fs::path(pwd.joined()) / p);
    tries.push_back(fs::path(at.file).parent_path() / p);
    if (!dir_.empty()) tries.push_back(fs::path(dir_) / p);
    tries.push_back(p);  // as ppsim's own working folder has it
  }
  std::error_code ec;
  for (const auto& t : tries)
    if (fs::is_regular_file(t, ec)) return t.lexically_normal().string();
  return {};
}

std::string read_script(const std::string& path, const SourceLoc& at) {
  std::ifstream in(path, std::ios::binary);
  std::string text;
  if (!read_capped(in, 4u << 20, text)) throw InputError(at, fmt::format("'{}' is over 4 MiB", path), {}, kExitLimit);
  return text;
}

// Text read as part of this script (source, eval, sh -c), under the condition `m` runs in.
void Executor::nested_text(const std::string& text, const SourceLoc& at, const Mode& m) {
  const std::string saved = base_taint_;
  base_taint_ = m.taint;
  run_text(text, at.file, at.line, at.col);
  base_taint_ = saved;
}

void Executor::source_file(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m) {
  if (argv.size() < 2) return;
  const ShellWord& w = argv[1];
  if (!w.unknown.empty()) {
    missing_sources_.push_back(
        fmt::format("{}, sourced at {}:{} and not read: {}", w.text, at.file, at.line, w.unknown));
    return;
  }
  const std::string path = find_file(w.text, at);
  if (path.empty()) {
    missing_sources_.push_back(fmt::format("{}, sourced at {}:{} and not found", w.text, at.file, at.line));
    return;
  }
  nested_text(read_script(path, at), SourceLoc{path, 1, 1}, m);
}

// cd / pushd DIR: $PWD moves; a folder not known makes it unknown.
void Executor::change_dir(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m) {
  std::size_t k = 1;
  while (k < argv.size() && argv[k].text.size() > 1 && argv[k].text[0] == '-') ++k;  // -P, -L
  Var v{{"$PWD"}, false, {}};
  const Val pwd = variable("PWD");
  if (k >= argv.size() || argv[k].text == "-") {
    v.unknown = fmt::format("moved by '{}' at {}:{} to a folder not known", argv[0].text, at.file, at.line);
  } else if (!argv[k].unknown.empty() || !pwd.unknown.empty()) {
    v.unknown = fmt::format("moved by '{} {}' at {}:{}: {}", argv[0].text, argv[k].text, at.file, at.line,
                            !argv[k].unknown.empty() ? argv[k].unknown : pwd.unknown);
  } else {
    const std::filesystem::path to(argv[k].text);
    v.items = {(to.is_absolute() ? to : std::filesystem::path(pwd.joined()) / to).lexically_normal().string()};
  }
  if (!m.taint.empty() && v.unknown.empty()) v.unknown = "moved by a cd under " + m.taint;
  v.exported = true;
  vars_["PWD"] = v;
}

// A command that runs a script or a command text: `bash [-x] F args`, `sh -c TEXT`, `./F.sh`,
// `sbatch [opts] F`, and any of these after a launcher's options (srun, mpirun, nohup, ...).
bool Executor::launch(const std::vector<ShellWord>& argv, const SourceLoc& at, const Mode& m) {
  static const std::set<std::string> kLaunchers = {"srun", "mpirun", "mpiexec", "nohup",  "exec",    "time",
                                                   "env",  "salloc", "numactl", "stdbuf", "timeout", "sbatch"};
  const std::string head = base_name(argv[0].text);
  const bool launcher = kLaunchers.count(head) != 0;
  for (std::size_t k = 0; k < argv.size(); ++k) {
    if (k > 0 && !launcher) return false;
    if (!argv[k].unknown.empty()) continue;
    const std::string b = base_name(argv[k].text);
    if (b == "bash" || b == "sh") {
      std::size_t j = k + 1;
      while (j < argv.size() && argv[j].text.size() > 1 && argv[j].text[0] == '-' && argv[j].text != "-c") ++j;
      if (j + 1 < argv.size() && argv[j].text == "-c") {
        // A text with unknown pieces is read too: each piece is the script's own text for it
        // ($TP), which names the same variable again.
        const std::vector<ShellWord> saved = launcher_;
        launcher_.insert(launcher_.end(), argv.begin(), argv.begin() + static_cast<std::ptrdiff_t>(k));
        nested_text(argv[j + 1].text, argv[j + 1].loc, m);
        launcher_ = saved;
        return true;
      }
      if (j < argv.size() && argv[j].unknown.empty()) {
        const std::string path = find_file(argv[j].text, at);
        if (!path.empty()) {
          run_script(argv, k, j, path, m);
          return true;
        }
      }
      return false;
    }
    // `./F.sh args`, or after a launcher's options a .sh file or sbatch's script.
    const bool sh_file = b.size() > 3 && b.compare(b.size() - 3, 3, ".sh") == 0;
    const bool runs_file = k == 0 ? sh_file : (sh_file || (head == "sbatch" && b.size() > 3)) && argv[k].text[0] != '-';
    if (!runs_file) continue;
    if (const std::string path = find_file(argv[k].text, at); !path.empty()) {
      run_script(argv, k, k, path, m);
      return true;
    }
    if (k == 0) return false;
  }
  return false;
}

// argv[file] (found at `path`) run as a program: a new shell with the exported variables
// (sbatch --export=NONE / A,B,C: those), the words after it as $1..., the launcher words before it.
void Executor::run_script(const std::vector<ShellWord>& argv, std::size_t k, std::size_t file, const std::string& path,
                          const Mode& m) {
  const std::string text = read_script(path, argv[file].loc);
  const bool sbatch = base_name(argv[0].text) == "sbatch";
  Executor child = *this;
  child.commands.clear();
  child.functions_.clear();
  child.missing_sources_.clear();
  child.name_ = path;
  child.dir_ = std::filesystem::path(path).parent_path().string();
  child.base_taint_ = m.taint;
  child.vars_.clear();
  std::optional<std::set<std::string>> only;  // sbatch --export=A,B
  for (std::size_t j = 1; sbatch && j < file; ++j)
    if (argv[j].text.rfind("--export=", 0) == 0) {
      const std::string list = argv[j].text.substr(9);
      if (list == "ALL" || list.rfind("ALL,", 0) == 0) continue;
      only.emplace();
      for (std::size_t a = 0; a <= list.size();) {
        const std::size_t e = std::min(list.find(',', a), list.size());
        const std::string item = list.substr(a, e - a);
        const std::size_t eq = item.find('=');
        if (eq != std::string::npos)
          child.vars_[item.substr(0, eq)] = Var{{item.substr(eq + 1)}, false, argv[j].unknown};
        else if (item != "NONE" && !item.empty())
          only->insert(item);
        a = e + 1;
      }
    }
  for (const auto& [name, v] : vars_)
    if ((v.exported && (!only || only->count(name) || name == "PWD")) || pinned_.count(name)) child.vars_[name] = v;
  child.vars_["0"] = Var{{path}, false, {}};
  Var all{{}, true, {}};
  for (std::size_t j = file + 1; j < argv.size(); ++j) {
    if (j - file <= 9) child.vars_[std::to_string(j - file)] = Var{{argv[j].text}, false, argv[j].unknown};
    all.items.push_back(argv[j].text);
  }
  child.vars_["#"] = Var{{std::to_string(all.items.size())}, false, {}};
  child.vars_["@"] = all;
  if (sbatch) {  // sbatch, then the script's #SBATCH words, then the command line's (which win)
    child.launcher_.push_back(argv[0]);
    for (auto& w : sbatch_directives(text, path)) child.launcher_.push_back(std::move(w));
    child.launcher_.insert(child.launcher_.end(), argv.begin() + 1, argv.begin() + static_cast<std::ptrdiff_t>(k));
    child.slurm_env();
  } else {
    child.launcher_.insert(child.launcher_.end(), argv.begin(), argv.begin() + static_cast<std::ptrdiff_t>(k));
  }
  try {
    child.run_text(text, path, 1, 1);
  } catch (const ExitScript&) {
  }
  for (auto& c : child.commands) commands.push_back(std::move(c));
  for (auto& f : child.missing_sources_) missing_sources_.push_back(std::move(f));
  if (stop.empty()) {
    stop = child.stop;
    stop_at = child.stop_at;
  }
}

void Executor::assign(const std::string& raw, const SourceLoc& at, const Mode& m) {
  const std::size_t eq = raw.find('=');
  const bool append = raw[eq - 1] == '+';
  const std::string name = raw.substr(0, append ? eq - 1 : eq);
  std::string unknown;
  std::string value = expand_string(raw.substr(eq + 1), at, unknown);
  Var v{{std::move(value)}, false, unknown};
  v.partial = true;
  if (append) {
    const auto it = vars_.find(name);
    if (it != vars_.end()) {
      if (!it->second.unknown.empty() && v.unknown.empty()) v.unknown = it->second.unknown;
      v.partial = v.partial && (it->second.unknown.empty() || it->second.partial);
      v.items[0] = it->second.scalar() + v.items[0];
    }
  }
  set_var(name, v, m);
}

void Executor::assign_array(const Token& t, const Mode& m) {
  Var v{{}, true, {}};
  if (t.append) {
    const auto it = vars_.find(t.name);
    if (it != vars_.end()) v = it->second;
    v.array = true;
  }
  v.item_unknown.resize(v.items.size());
  for (const Token& e : t.elems)
    for (auto& w : expand(e.text, e.loc, true)) {
      v.item_unknown.push_back(std::move(w.unknown));
      v.items.push_back(std::move(w.text));
    }
  set_var(t.name, v, m);
}

void Executor::set_var(const std::string& name, Var v, const Mode&) {
  if (pinned_.count(name)) return;  // the user's value
  if (const auto it = vars_.find(name); it != vars_.end()) v.exported = v.exported || it->second.exported;
  std::size_t size = 0;
  for (const auto& x : v.items) size += x.size();
  if (size > kMaxValue) throw InputError(SourceLoc{name_, 0, 0}, fmt::format("the variable {} grows over 1 MiB", name));
  vars_[name] = std::move(v);
}

// ---- expansion ----------------------------------------------------------------------------------

// The index of the `close` that ends the region opened just before `i`, quotes and nesting respected.
std::size_t match_close(const std::string& s, std::size_t i, char open, char close) {
  int depth = 1;
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\\') {
      ++i;
    } else if (c == '\'') {
      i = s.find('\'', i + 1);
      if (i == std::string::npos) return s.size();
    } else if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
    } else if (c == open && open != close) {
      ++depth;
    } else if (c == close && --depth == 0) {
      return i;
    }
  }
  return s.size();
}

// The end of the word of `v` that starts at `k`: the next blank, outside the unknown pieces an
// unknown value's text keeps as the script wrote them ($(cmd), $((...)), ${X}, `cmd`) when
// `pieces`: bash splits what they output, which is not known, not the words inside them (the
// flags of `$(nvidia-smi --query-gpu=name)` are not the training command's).
std::size_t word_end(const std::string& v, std::size_t k, bool pieces) {
  std::size_t e = k;
  while (e < v.size() && !is_blank(v[e])) {
    if (pieces && v[e] == '$' && e + 1 < v.size() && (v[e + 1] == '(' || v[e + 1] == '{'))
      e = match_close(v, e + 2, v[e + 1], v[e + 1] == '(' ? ')' : '}');
    else if (pieces && v[e] == '`')
      e = std::min(v.find('`', e + 1), v.size());
    if (e < v.size()) ++e;
  }
  return e;
}

void append_split(std::vector<Field>& out, const std::string& v, bool pieces = false) {
  if (!v.empty() && is_blank(v.front()) && out.back().started) out.emplace_back();
  std::size_t k = 0;
  bool first = true;
  while (k < v.size()) {
    while (k < v.size() && is_blank(v[k])) ++k;
    if (k >= v.size()) break;
    const std::size_t e = word_end(v, k, pieces);
    if (!first) out.emplace_back();
    out.back().text += v.substr(k, e - k);
    out.back().started = true;
    first = false;
    k = e;
  }
  if (!v.empty() && is_blank(v.back()) && out.back().started) out.emplace_back();
}

std::vector<ShellWord> Executor::expand(const std::string& raw, const SourceLoc& at, bool split) {
  std::vector<Field> fields(1);
  std::size_t i = 0;
  expand_into(raw, i, at, false, split, fields);
  std::vector<ShellWord> out;
  for (auto& f : fields)
    if (f.started) out.push_back(ShellWord{std::move(f.text), at, std::move(f.unknown)});
  return out;
}

std::string Executor::expand_string(const std::string& raw, const SourceLoc& at, std::string& unknown) {
  std::string s;
  for (const auto& w : expand(raw, at, false)) {
    s += (s.empty() ? "" : " ") + w.text;
    if (unknown.empty()) unknown = w.unknown;
  }
  return s;
}

void Executor::expand_into(const std::string& raw, std::size_t& i, const SourceLoc& at, bool in_quotes, bool split,
                           std::vector<Field>& out) {
  auto add = [&](const Val& v, bool quoted) {
    if (!v.unknown.empty() && v.partial && !quoted && split) {
      // Split the known text; the words holding an unknown piece ($X, `cmd`) carry the reason.
      const std::size_t first = out.size();
      append_split(out, v.joined(), true);
      for (std::size_t k = first > 0 ? first - 1 : 0; k < out.size(); ++k)
        if (out[k].text.find_first_of("$`") != std::string::npos && out[k].unknown.empty())
          out[k].unknown = piece_reason(out[k].text, v.unknown);
      return;
    }
    if (!v.unknown.empty()) {
      out.back().text += v.joined();
      out.back().started = true;
      if (out.back().unknown.empty()) out.back().unknown = v.unknown;
      return;
    }
    for (std::size_t k = 0; k < v.items.size(); ++k) {
      const std::string why = v.why(k);
      if (quoted && !v.list) {  // "${A[*]}", "$X": one word
        if (k > 0) out.back().text += ' ';
      } else if (k > 0 && out.back().started) {
        out.emplace_back();  // items apart
      }
      if (!why.empty() || (quoted || !split)) {
        if (!quoted && split && out.back().started && !why.empty()) out.emplace_back();
        out.back().text += v.items[k];
        if (!v.items[k].empty() || quoted || !why.empty()) out.back().started = true;
        if (!why.empty() && out.back().unknown.empty()) out.back().unknown = why;
      } else {
        append_split(out, v.items[k]);
      }
    }
  };
  while (i < raw.size()) {
    const char c = raw[i];
    if (in_quotes && c == '"') {
      ++i;
      return;
    }
    if (!in_quotes && c == '\'') {
      const std::size_t e = raw.find('\'', i + 1);
      out.back().text += raw.substr(i + 1, e - i - 1);
      out.back().started = true;
      i = e == std::string::npos ? raw.size() : e + 1;
    } else if (!in_quotes && c == '"') {
      ++i;
      out.back().started = true;
      expand_into(raw, i, at, true, split, out);
    } else if (c == '\\' && i + 1 < raw.size()) {
      const char d = raw[i + 1];
      if (in_quotes && std::string("$`\"\\\n").find(d) == std::string::npos) out.back().text += c;
      if (d != '\n') out.back().text += d;  // `\` then a newline: a continuation, both removed
      out.back().started = true;
      i += 2;
    } else if (c == '$') {
      add(dollar(raw, i, at), in_quotes);
    } else if (c == '`') {
      const std::size_t e = raw.find('`', i + 1);
      add(command_substitution(raw.substr(i + 1, e == std::string::npos ? std::string::npos : e - i - 1)), in_quotes);
      i = e == std::string::npos ? raw.size() : e + 1;
    } else {
      out.back().text += c;
      out.back().started = true;
      ++i;
    }
  }
}

Val Executor::dollar(const std::string& raw, std::size_t& i, const SourceLoc& at) {
  const std::size_t start = i;
  ++i;
  if (i >= raw.size()) return known("$");
  const char c = raw[i];
  if (c == '(' && i + 1 < raw.size() && raw[i + 1] == '(') {
    const std::size_t e = match_close(raw, i + 2, '(', ')');
    const std::string expr = raw.substr(i + 2, e - i - 2);
    i = std::min(raw.size(), e + 2);
    const auto v = arith_value(expr);
    if (!v) return unknown_val(fmt::format("$(({})): its operands are not known", expr), raw.substr(start, i - start));
    return known(std::to_string(*v));
  }
  if (c == '(') {
    const std::size_t e = match_close(raw, i + 1, '(', ')');
    const std::string inside = raw.substr(i + 1, e - i - 1);
    i = std::min(raw.size(), e + 1);
    return command_substitution(inside);
  }
  if (c == '{') {
    const std::size_t e = match_close(raw, i + 1, '{', '}');
    const std::string inside = raw.substr(i + 1, e - i - 1);
    i = std::min(raw.size(), e + 1);
    Val v = parameter(inside, at);
    if (!v.unknown.empty() && !v.partial) v.items = {raw.substr(start, i - start)};
    return v;
  }
  if (is_name_start(c)) {
    std::size_t e = i;
    while (e < raw.size() && is_name_char(raw[e])) ++e;
    const std::string name = raw.substr(i, e - i);
    i = e;
    Val v = variable(name);
    if (!v.unknown.empty() && !v.partial) v.items = {"$" + name};
    return v;
  }
  if (std::isdigit(static_cast<unsigned char>(c)) || c == '@' || c == '*' || c == '#') {
    ++i;
    Val v = variable(std::string(1, c == '*' ? '@' : c));
    if (c == '*') v.list = false;
    if (!v.unknown.empty()) v.items = {raw.substr(start, i - start)};
    return v;
  }
  if (c == '?' || c == '$' || c == '!' || c == '-') {
    ++i;
    return unknown_val(fmt::format("${} is known only when the script runs", c), raw.substr(start, 2));
  }
  return known("$");
}

// Why a word of a partly known value is unknown: its own first $NAME's reason where that
// variable is unknown, else the value's.
std::string Executor::piece_reason(const std::string& word, const std::string& fallback) const {
  const std::size_t d = word.find('$');
  if (d == std::string::npos) return fallback;
  std::size_t k = d + 1 + (d + 1 < word.size() && word[d + 1] == '{' ? 1 : 0);
  const std::size_t from = k;
  while (k < word.size() && is_name_char(word[k])) ++k;
  if (k == from) return fallback;
  const Val v = variable(word.substr(from, k - from));
  return v.unknown.empty() ? fallback : v.unknown;
}

Val Executor::variable(const std::string& name) const {
  const auto it = vars_.find(name);
  if (it == vars_.end()) {
    if (name == "@") return Val{{}, true, {}};
    if (name == "#") return known("0");
    if (std::isdigit(static_cast<unsigned char>(name[0])))
      return unknown_val(fmt::format("${} is the script's argument {}, not given", name, name), "$" + name);
    std::string where = " (from the environment?)";
    if (!missing_sources_.empty()) where = fmt::format(" (perhaps in {})", missing_sources_.back());
    return unknown_val(fmt::format("${} is not set in the script{}", name, where), "$" + name);
  }
  const Var& v = it->second;
  if (!v.unknown.empty()) {
    Val u = unknown_val(fmt::format("${} is {}", name, v.unknown), "$" + name);
    if (v.partial && !v.array) {
      u.items = v.items;
      u.partial = true;
    }
    return u;
  }
  if (v.array && name == "@") return Val{v.items, true, {}, v.item_unknown};
  if (!v.why(0).empty()) return unknown_val(v.why(0), "$" + name);
  return known(v.scalar());
}

Val Executor::parameter(const std::string& inside, const SourceLoc& at) {
  const Val not_read = unknown_val(fmt::format("${{{}}}: this expansion is not read", inside), "${" + inside + "}");
  std::size_t k = 0;
  const bool length = !inside.empty() && inside[0] == '#' && inside.size() > 1;
  if (length) k = 1;
  const std::size_t name_from = k;
  if (k < inside.size() &&
      (std::isdigit(static_cast<unsigned char>(inside[k])) || inside[k] == '@' || inside[k] == '*')) {
    ++k;
  } else {
    while (k < inside.size() && is_name_char(inside[k])) ++k;
  }
  const std::string name = inside.substr(name_from, k - name_from);
  if (name.empty()) return not_read;
  const auto it = vars_.find(name);
  std::string rest = inside.substr(k);
  Val v = variable(name == "*" ? "@" : name);
  if (!rest.empty() && rest[0] == '[') {
    const std::size_t e = rest.find(']');
    if (e == std::string::npos) return not_read;
    const std::string index = rest.substr(1, e - 1);
    rest = rest.substr(e + 1);
    if (!v.unknown.empty()) return v;
    const std::vector<std::string> items = it == vars_.end() ? std::vector<std::string>{} : it->second.items;
    if (index == "@" || index == "*") {
      v = Val{items, index == "@", {}, it == vars_.end() ? std::vector<std::string>{} : it->second.item_unknown};
      if (index == "*") {  // one string, joined by IFS's first character
        for (std::size_t j = 0; j < items.size() && v.unknown.empty(); ++j) v.unknown = v.why(j);
        const auto ifs = vars_.find("IFS");
        const std::string sep = ifs == vars_.end() ? " " : ifs->second.scalar().substr(0, 1);
        std::string joined;
        for (std::size_t j = 0; j < items.size(); ++j) joined += (j ? sep : "") + items[j];
        v.items = {joined};
        v.item_unknown.clear();
      }
    } else {
      const auto n = arith_value(index);
      if (!n) return not_read;
      v = known(*n >= 0 && static_cast<std::size_t>(*n) < items.size() ? items[static_cast<std::size_t>(*n)] : "");
    }
    if (length) return known(std::to_string(v.list || index == "*" ? items.size() : v.joined().size()));
  }
  if (length) return v.unknown.empty() && rest.empty() ? known(std::to_string(v.joined().size())) : not_read;
  if (rest.empty()) return v;
  const bool colon = rest[0] == ':';
  const std::string op = rest.substr(colon ? 1 : 0, 1);
  if (op.empty() || std::string("-=+?").find(op[0]) == std::string::npos) return not_read;
  const std::string word = rest.substr(colon ? 2 : 1);
  const bool unset = it == vars_.end();
  const bool empty = !unset && v.unknown.empty() && v.joined().empty();
  if (!unset && !v.unknown.empty() && op != "+") return v;  // unknown: the default may or may not apply
  const bool use_word = op == "+" ? !(unset || (colon && empty)) : (unset || (colon && empty));
  if (!use_word) return op == "+" ? known("") : v;
  if (op == "?") return unknown_val(fmt::format("${{{}}}: {} is not set", inside, name), "${" + inside + "}");
  std::string unknown;
  const std::string value = expand_string(word, at, unknown);
  if (op == "=" && !pinned_.count(name)) vars_[name] = Var{{value}, false, unknown};
  return unknown.empty() ? known(value) : unknown_val(unknown, value);
}

std::optional<long long> Executor::arith_value(const std::string& expr) {
  std::string unknown;
  const std::string text = expand_string(expr, SourceLoc{name_, 0, 0}, unknown);
  if (!unknown.empty()) return std::nullopt;
  const Arith::Get lookup = [&](const std::string& n) -> std::optional<long long> {
    const Val v = variable(n);
    if (!v.unknown.empty()) return std::nullopt;
    if (v.joined().empty()) return 0;
    return to_int(v.joined());
  };
  const Arith::Set store = [&](const std::string& n, long long v) {
    if (!pinned_.count(n)) vars_[n] = Var{{std::to_string(v)}, false, {}};
  };
  return Arith(text, lookup, store).run();
}

Val Executor::command_substitution(const std::string& inside) {
  const bool own_folder = inside.find("dirname") != std::string::npos &&
                          (inside.find("BASH_SOURCE") != std::string::npos || inside.find("$0") != std::string::npos ||
                           inside.find("${0}") != std::string::npos);
  if (own_folder) return known(dir_.empty() ? "." : dir_);
  // Only builtins (assignments, echo, printf, tests, arithmetic): read in a subshell, its output kept.
  if (depth_ < kMaxDepth) {
    Executor sub = *this;
    std::string out;
    sub.commands.clear();
    sub.capture_ = &out;
    sub.capture_failed_.clear();
    bool ok = true;
    try {
      sub.run_text(inside, name_, 0, 0);
    } catch (const InputError&) {
      ok = false;
    } catch (const ExitScript&) {
    }
    if (ok && sub.capture_failed_.empty() && sub.commands.empty()) {
      while (!out.empty() && out.back() == '\n') out.pop_back();
      return known(out);
    }
  }
  return unknown_val(fmt::format("$({}) is a command, not run", inside), "$(" + inside + ")");
}

// ---- test / [ ] / [[ ]] -------------------------------------------------------------------------

class TestEval {
 public:
  TestEval(std::vector<ShellWord> a, bool dbl) : a_(std::move(a)), dbl_(dbl) {}
  St run() {
    if (a_.empty()) return St::no;
    const St s = expr();
    return i_ == a_.size() ? s : St::unknown;
  }

 private:
  bool at(const char* w) const { return i_ < a_.size() && a_[i_].text == w && a_[i_].unknown.empty(); }
  static St both(St a, St b) {
    if (a == St::no || b == St::no) return St::no;
    return a == St::yes && b == St::yes ? St::yes : St::unknown;
  }
  St expr() {
    St s = conj();
    while (at("-o") || at("||")) {
      ++i_;
      s = st_not(both(st_not(s), st_not(conj())));
    }
    return s;
  }
  St conj() {
    St s = neg();
    while (at("-a") || at("&&")) {
      ++i_;
      s = both(s, neg());
    }
    return s;
  }
  St neg() {
    if (at("!")) {
      ++i_;
      return st_not(neg());
    }
    return primary();
  }
  St primary();
  St binary(const ShellWord& l, const std::string& op, const ShellWord& r) const;
  std::vector<ShellWord> a_;
  bool dbl_;
  std::size_t i_ = 0;
};

St TestEval::primary() {
  if (i_ >= a_.size()) return St::unknown;
  if (at("(")) {
    ++i_;
    const St s = expr();
    if (at(")")) ++i_;
    return s;
  }
  static const char* kBinary[] = {"=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge", "<", ">", "=~"};
  for (const char* op : kBinary)
    if (i_ + 2 < a_.size() && a_[i_ + 1].text == op) {
      const St s = binary(a_[i_], op, a_[i_ + 2]);
      i_ += 3;
      return s;
    }
  const std::string& w = a_[i_].text;
  if (w.size() == 2 && w[0] == '-' && i_ + 1 < a_.size()) {
    const ShellWord& arg = a_[i_ + 1];
    i_ += 2;
    if (w == "-z" || w == "-n") {
      if (!arg.unknown.empty()) return St::unknown;
      return (arg.text.empty() == (w == "-z")) ? St::yes : St::no;
    }
    return St::unknown;  // -f, -d, -e, ...: the file system when the script runs
  }
  ++i_;
  if (!a_[i_ - 1].unknown.empty()) return St::unknown;
  return w.empty() ? St::no : St::yes;
}

St TestEval::binary(const ShellWord& l, const std::string& op, const ShellWord& r) const {
  if (!l.unknown.empty() || !r.unknown.empty() || op == "=~") return St::unknown;
  auto yes = [](bool b) { return b ? St::yes : St::no; };
  if (op == "=" || op == "==") return yes(dbl_ ? glob_match(r.text, l.text) : l.text == r.text);
  if (op == "!=") return yes(dbl_ ? !glob_match(r.text, l.text) : l.text != r.text);
  if (op == "<") return yes(l.text < r.text);
  if (op == ">") return yes(l.text > r.text);
  const auto x = to_int(l.text), y = to_int(r.text);
  if (!x || !y) return St::unknown;
  if (op == "-eq") return yes(*x == *y);
  if (op == "-ne") return yes(*x != *y);
  if (op == "-lt") return yes(*x < *y);
  if (op == "-le") return yes(*x <= *y);
  if (op == "-gt") return yes(*x > *y);
  return yes(*x >= *y);
}

St Executor::test(std::vector<ShellWord> args, bool double_bracket) {
  const std::string open = args[0].text;
  args.erase(args.begin());
  if (open != "test" && !args.empty() && args.back().text == (double_bracket ? "]]" : "]")) args.pop_back();
  return TestEval(std::move(args), double_bracket).run();
}

}  // namespace shell_detail

ShellRead read_shell(const std::string& text, const std::string& name, const std::string& dir,
                     const std::map<std::string, std::string>& env) {
  shell_detail::Executor ex(name, dir, env);
  ex.batch_script(text);
  try {
    ex.run_text(text, name, 1, 1);
  } catch (const shell_detail::ExitScript&) {
  }
  return ShellRead{std::move(ex.commands), ex.stop, ex.stop_at, ex.missing_sources()};
}

std::vector<ShellCommand> shell_commands(const std::string& text, const std::string& name, const std::string& dir) {
  return read_shell(text, name, dir).commands;
}

SlurmTasks slurm_tasks(const std::vector<ShellWord>& w) {
  SlurmTasks t;
  struct Spelling {
    SlurmOption* o;
    const char* shrt;  // the long one is o->flag
  };
  const Spelling opts[] = {{&t.nodes, "-N"}, {&t.ntasks, "-n"}, {&t.per_node, nullptr}};
  for (std::size_t k = 0; k < w.size(); ++k) {
    const std::string& x = w[k].text;
    const std::string b = shell_detail::base_name(x);
    t.slurm = t.slurm || b == "sbatch" || b == "srun" || b == "salloc";
    for (const Spelling& s : opts) {
      const std::string eq = std::string(s.o->flag) + "=";
      const bool separate = (x == s.o->flag || (s.shrt != nullptr && x == s.shrt)) && k + 1 < w.size();
      const bool glued = s.shrt != nullptr && x.size() > 2 && x.rfind(s.shrt, 0) == 0 &&
                         std::isdigit(static_cast<unsigned char>(x[2]));
      SlurmOption& o = *s.o;
      if (x.rfind(eq, 0) == 0) {
        o.value = x.substr(eq.size());
        o.unknown = w[k].unknown;
      } else if (separate) {
        o.value = w[k + 1].text;
        o.unknown = w[k + 1].unknown;
      } else if (glued) {
        o.value = x.substr(2);
        o.unknown = w[k].unknown;
      } else {
        continue;
      }
      o.set = true;
    }
  }
  return t;
}

// ---- Python list expressions (--moe-layer-freq) -------------------------------------------------

namespace {

class PyList {
 public:
  PyList(const std::string& s, const SourceLoc& loc, const std::string& flag) : s_(s), loc_(loc), flag_(flag) {}
  std::vector<int> run() {
    const Value v = sum();
    skip();
    if (i_ != s_.size()) bad(fmt::format("unexpected '{}'", s_.substr(i_, 1)));
    if (!v.is_list) bad("an integer, not a list");
    return v.items;
  }

 private:
  struct Value {
    bool is_list = false;
    long long n = 0;
    std::vector<int> items;
  };
  [[noreturn]] void bad(const std::string& why) const {
    throw InputError(loc_, fmt::format("{} {}: {} (a Python list of 0 and 1: [..], + and * only)", flag_, s_, why));
  }
  void skip() {
    while (i_ < s_.size() && is_blank(s_[i_])) ++i_;
  }
  bool eat(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  Value sum() {
    Value v = product();
    while (eat('+')) {
      const Value r = product();
      if (v.is_list != r.is_list) bad("'+' of a list and an integer");
      if (v.is_list)
        v.items.insert(v.items.end(), r.items.begin(), r.items.end());
      else
        v.n += r.n;
      check(v);
    }
    return v;
  }
  Value product() {
    Value v = atom();
    while (eat('*')) {
      const Value r = atom();
      if (v.is_list && r.is_list) bad("'*' of two lists");
      if (!v.is_list && !r.is_list) {
        v.n *= r.n;
        continue;
      }
      const Value& list = v.is_list ? v : r;
      const long long times = v.is_list ? r.n : v.n;
      if (times < 0 || times * static_cast<long long>(list.items.size()) > (1 << 16)) bad("too long");
      Value out{true, 0, {}};
      for (long long k = 0; k < times; ++k) out.items.insert(out.items.end(), list.items.begin(), list.items.end());
      v = out;
    }
    return v;
  }
  Value atom() {
    skip();
    if (eat('(')) {
      Value v = sum();
      if (!eat(')')) bad("'(' not closed");
      return v;
    }
    if (eat('[')) {
      Value v{true, 0, {}};
      if (eat(']')) return v;
      do {
        const Value x = atom();
        if (x.is_list) bad("a list inside a list");
        v.items.push_back(static_cast<int>(x.n));
      } while (eat(','));
      if (!eat(']')) bad("'[' not closed");
      return v;
    }
    std::size_t e = i_;
    while (e < s_.size() && std::isdigit(static_cast<unsigned char>(s_[e]))) ++e;
    if (e == i_ || e - i_ > 9) bad(i_ < s_.size() ? fmt::format("unexpected '{}'", s_.substr(i_, 1)) : "it ends early");
    Value v{false, std::stoll(s_.substr(i_, e - i_)), {}};
    i_ = e;
    return v;
  }
  void check(const Value& v) const {
    if (v.items.size() > (1u << 16)) bad("too long");
  }
  const std::string& s_;
  SourceLoc loc_;
  std::string flag_;
  std::size_t i_ = 0;
};

}  // namespace

std::vector<int> python_int_list(const std::string& expr, const SourceLoc& loc, const std::string& flag) {
  return PyList(expr, loc, flag).run();
}

}  // namespace ppsim
