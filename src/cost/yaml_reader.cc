// Typed, located YAML reads (see yaml_reader.h). Scalars are parsed here with from_chars and
// strtod rather than yaml-cpp's as<T>(), so that "1.5" is not an integer, overflow is an error
// instead of a wrapped value, and every message names the key path and what was found.
#include "cost/yaml_reader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

namespace ppsim {

const SchemaNode* SchemaNode::find(const std::string& key) const {
  for (const auto& c : children)
    if (c.name == key) return &c;
  return nullptr;
}

std::vector<std::string> SchemaNode::names() const {
  std::vector<std::string> out;
  for (const auto& c : children) out.push_back(c.name);
  return out;
}

SourceLoc YamlContext::loc(const YAML::Node& node, const std::string& path) const {
  for (const auto& p : set_paths_)
    if (path == p || (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '.'))
      return SourceLoc{"--set", 0, 0};
  const YAML::Mark m = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  if (m.is_null()) {
    // Sections created by --set have no mark.
    if (!set_paths_.empty() && node.IsDefined()) return SourceLoc{"--set", 0, 0};
    return SourceLoc{file_, 0, 0};
  }
  return SourceLoc{file_, m.line + 1, m.column + 1};
}

void YamlContext::fail(const YAML::Node& node, const std::string& path, const std::string& message,
                       const std::string& suggestion) const {
  throw InputError(loc(node, path), message, suggestion);
}

std::string read_yaml_file(const std::string& path, const SourceLoc& referenced_from) {
  constexpr std::streamoff kMaxBytes = 16 << 20;
  const bool referenced = !referenced_from.file.empty();
  const SourceLoc where = referenced ? referenced_from : SourceLoc{path, 0, 0};
  const std::string cannot = referenced ? fmt::format("cannot read '{}'", path) : std::string("cannot read the file");
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(where, cannot + " (it is a directory)", {}, kExitIo);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(where, cannot, {}, kExitIo);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(where, cannot, {}, kExitIo);
  if (size > kMaxBytes)
    throw InputError(where, fmt::format("{} is {} bytes, over the limit of {} for a YAML file", referenced ? "'" + path + "'" : "the file",
                                        size, kMaxBytes), {}, kExitLimit);
  in.seekg(0, std::ios::beg);
  std::string text(static_cast<std::size_t>(size), '\0');
  in.read(text.data(), size);
  if (!in) throw InputError(where, cannot, {}, kExitIo);
  return text;
}

namespace {

// Where a document's first node is; no mark when the document is empty. Used on the document
// after the first: YAML::LoadAll is not, because yaml-cpp 0.7's LoadAll loops forever, allocating,
// on some invalid input (a lone ','; jbeder/yaml-cpp#1040, found by fuzz/fuzz_config.cc): the
// parser keeps reporting an empty document without consuming the token.
class FirstNodeMark : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { see(m); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { see(m); }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { see(m); }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { see(m); }
  void OnMapEnd() override {}

 private:
  void see(const YAML::Mark& m) {
    if (!mark) mark = m;
  }
};

}  // namespace

YAML::Node parse_yaml(const std::string& text, const std::string& name) {
  try {
    // The first document (YAML::Load parses one and stops), then whether a second one holds
    // anything: the event parser runs at most two documents, so it cannot loop.
    YAML::Node root = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    FirstNodeMark first, second;
    if (parser.HandleNextDocument(first) && parser.HandleNextDocument(second) && second.mark) {
      const YAML::Mark m = *second.mark;
      throw InputError(m.is_null() ? SourceLoc{name, 0, 0} : SourceLoc{name, m.line + 1, m.column + 1},
                       "expected one YAML document, found a second one");
    }
    return root;
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp stops runaway nesting but calls it "bad file"; say what it is.
    SourceLoc loc{name, 0, 0};
    if (!e.mark.is_null()) loc = SourceLoc{name, e.mark.line + 1, e.mark.column + 1};
    throw InputError(loc, fmt::format("invalid YAML: nested more than {} levels deep", e.depth() - 1));
  } catch (const YAML::Exception& e) {
    SourceLoc loc{name, 0, 0};
    if (!e.mark.is_null()) loc = SourceLoc{name, e.mark.line + 1, e.mark.column + 1};
    std::string msg = e.msg.empty() ? std::string("cannot parse") : e.msg;
    throw InputError(loc, "invalid YAML: " + msg);
  }
}

// A key that differs only in case ("w" for "W") first, else the closest by edit distance.
std::string suggest_key(const std::string& key, const std::vector<std::string>& names) {
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const auto& n : names)
    if (lower(n) == lower(key)) return n;
  return closest_match(key, names);
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  std::string s = node.Scalar();
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  for (auto& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return "'" + s + "'";
}

namespace {

std::string trim(const std::string& s) {
  std::size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

bool parse_int(const std::string& text, std::int64_t& out, bool& overflow) {
  std::string s = trim(text);
  overflow = false;
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  if (s.empty()) return false;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) {
    // All digits but too large: report it as out of range, not as "not an integer".
    overflow = std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    return false;
  }
  return ec == std::errc() && ptr == last;
}

bool parse_double(const std::string& text, double& out) {
  const std::string s = trim(text);
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

std::string range_text(double min, double max, bool min_exclusive, bool integral) {
  auto num = [&](double v) { return integral ? fmt::format("{}", static_cast<long long>(v)) : fmt::format("{}", v); };
  const bool unbounded = integral ? max >= static_cast<double>(kNoMax) : std::isinf(max);
  if (unbounded) return fmt::format("{} {}", min_exclusive ? ">" : ">=", num(min));
  return fmt::format("in {}{}, {}]", min_exclusive ? "(" : "[", num(min), num(max));
}

}  // namespace

MapReader::MapReader(const YamlContext& ctx, const YAML::Node& node, std::string path, const SchemaNode& schema)
    : ctx_(&ctx), node_(node), path_(std::move(path)) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap())
    ctx.fail(node, path_, fmt::format("{} must be a map, got {}", path_.empty() ? "the config" : path_, describe_node(node)));
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key_node = it->first;
    if (!key_node.IsScalar())
      ctx.fail(key_node, path_, fmt::format("keys must be plain names, got {} as a key{}", describe_node(key_node),
                                            path_.empty() ? "" : " in '" + path_ + "'"));
    const std::string key = key_node.Scalar();
    const std::string key_path = path_.empty() ? key : path_ + "." + key;
    if (entries_.count(key))
      ctx.fail(key_node, key_path, fmt::format("duplicate key '{}'{}", key, path_.empty() ? "" : " in '" + path_ + "'"));
    if (!schema.open && schema.find(key) == nullptr) {
      const std::string where = path_.empty() ? "unknown top-level key" : "unknown key";
      ctx.fail(key_node, key_path,
               fmt::format("{} '{}'{}", where, key, path_.empty() ? "" : " in '" + path_ + "'"),
               suggest_key(key, schema.names()));
    }
    entries_.emplace(key, std::make_pair(key_node, YAML::Node(it->second)));
  }
}

YAML::Node MapReader::value(const std::string& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? YAML::Node(YAML::NodeType::Undefined) : it->second.second;
}

SourceLoc MapReader::loc(const std::string& key) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) return ctx_->loc(node_, path_);
  return ctx_->loc(at(key), path(key));
}

void MapReader::fail(const std::string& key, const std::string& message, const std::string& suggestion) const {
  throw InputError(loc(key), message, suggestion);
}

void MapReader::fail_here(const std::string& message) const { ctx_->fail(node_, path_, message); }

void MapReader::require(const std::string& key, const char* what) const {
  if (!has(key)) fail_here(fmt::format("{} is required ({})", path(key), what));
}

const YAML::Node& MapReader::at(const std::string& key) const {
  const auto& e = entries_.at(key);
  return e.second.IsNull() ? e.first : e.second;
}

std::int64_t MapReader::to_integer(const YAML::Node& n, const std::string& p, std::int64_t min, std::int64_t max,
                                   const YAML::Node* at) const {
  const YAML::Node& where = at != nullptr ? *at : n;
  std::int64_t v = 0;
  bool overflow = false;
  if (!n.IsScalar() || !parse_int(n.Scalar(), v, overflow)) {
    if (overflow)
      ctx_->fail(where, p, fmt::format("{} must be {}, got {}", p, range_text(static_cast<double>(min), static_cast<double>(max), false, true),
                                       trim(n.Scalar())));
    ctx_->fail(where, p, fmt::format("{} must be an integer, got {}", p, describe_node(n)));
  }
  if (v < min || v > max)
    ctx_->fail(where, p, fmt::format("{} must be {}, got {}", p, range_text(static_cast<double>(min), static_cast<double>(max), false, true), v));
  return v;
}

double MapReader::to_number(const YAML::Node& n, const std::string& p, double min, double max, bool min_exclusive,
                            const YAML::Node* at) const {
  const YAML::Node& where = at != nullptr ? *at : n;
  double v = 0;
  if (!n.IsScalar() || !parse_double(n.Scalar(), v)) ctx_->fail(where, p, fmt::format("{} must be a number, got {}", p, describe_node(n)));
  if (!std::isfinite(v)) ctx_->fail(where, p, fmt::format("{} must be a finite number, got {}", p, describe_node(n)));
  if (v < min || v > max || (min_exclusive && v == min))
    ctx_->fail(where, p, fmt::format("{} must be {}, got {}", p, range_text(min, max, min_exclusive, false), trim(n.Scalar())));
  return v;
}

std::int64_t MapReader::integer(const std::string& key, std::int64_t def, std::int64_t min, std::int64_t max) const {
  if (!has(key)) return def;
  return to_integer(value(key), path(key), min, max, &at(key));
}

std::int64_t MapReader::required_integer(const std::string& key, std::int64_t min, std::int64_t max) const {
  require(key, "an integer");
  return integer(key, 0, min, max);
}

double MapReader::number(const std::string& key, double def, double min, double max, bool min_exclusive) const {
  if (!has(key)) return def;
  return to_number(value(key), path(key), min, max, min_exclusive, &at(key));
}

double MapReader::required_number(const std::string& key, double min, double max, bool min_exclusive) const {
  require(key, "a number");
  return number(key, 0, min, max, min_exclusive);
}

bool MapReader::boolean(const std::string& key, bool def) const {
  if (!has(key)) return def;
  const YAML::Node n = value(key);
  if (n.IsScalar()) {
    std::string s = trim(n.Scalar());
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
  }
  fail(key, fmt::format("{} must be true or false, got {}", path(key), describe_node(n)));
}

std::string MapReader::string(const std::string& key, const std::string& def) const {
  if (!has(key)) return def;
  const YAML::Node n = value(key);
  if (!n.IsScalar()) fail(key, fmt::format("{} must be a string, got {}", path(key), describe_node(n)));
  return n.Scalar();
}

std::string MapReader::choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed) const {
  if (!has(key)) return def;
  const YAML::Node n = value(key);
  std::string s = n.IsScalar() ? trim(n.Scalar()) : std::string{};
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (n.IsScalar() && std::find(allowed.begin(), allowed.end(), s) != allowed.end()) return s;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : "|") + a;
  fail(key, fmt::format("{} must be one of {}, got {}", path(key), list, describe_node(n)),
       n.IsScalar() ? closest_match(s, allowed) : std::string{});
}

MapReader MapReader::child(const std::string& key, const SchemaNode& schema) const {
  if (!has(key)) {
    // An absent section reads as empty; its errors ("x is required") point at the parent.
    MapReader r(*ctx_, YAML::Node(YAML::NodeType::Undefined), path(key), schema);
    r.node_ = node_;
    return r;
  }
  MapReader r(*ctx_, value(key), path(key), schema);
  if (value(key).IsNull()) r.node_ = at(key);  // an empty section: its errors point at its key
  return r;
}

}  // namespace ppsim
