// Typed, located reads from a parsed YAML tree, for config and profile files.
//
// Every failed read is one InputError at the offending node's file:line:col (yaml-cpp's marks
// are 0-based; SourceLoc is 1-based). Nodes that came from `--set key=value` point at
// SourceLoc{"--set"} instead, since their marks are positions inside the flag's value.
// Maps are read through their iterator only: yaml-cpp's non-const operator[] inserts keys and
// turns a null node into a map, which would silently change the tree being validated.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "core/error.h"

namespace ppsim {

// The keys a section may hold. `open` sections (plan:) accept any keys below them.
struct SchemaNode {
  std::string name;
  std::vector<SchemaNode> children;
  bool open = false;
  bool is_section() const { return open || !children.empty(); }
  const SchemaNode* find(const std::string& key) const;
  std::vector<std::string> names() const;
};

class YamlContext {
 public:
  YamlContext(std::string file, std::vector<std::string> set_paths)
      : file_(std::move(file)), set_paths_(std::move(set_paths)) {}
  const std::string& file() const { return file_; }
  // Where `node` (at key path `path`) came from.
  SourceLoc loc(const YAML::Node& node, const std::string& path) const;
  [[noreturn]] void fail(const YAML::Node& node, const std::string& path, const std::string& message,
                         const std::string& suggestion = {}) const;

 private:
  std::string file_;
  std::vector<std::string> set_paths_;
};

// Reads a whole YAML file (at most 16 MiB); `referenced_from` locates the error when it cannot
// be read (a profile named in a config), else the error names `path` itself.
std::string read_yaml_file(const std::string& path, const SourceLoc& referenced_from = {});
// Parses one YAML document; syntax errors (YAML::Exception) become InputError at their mark.
YAML::Node parse_yaml(const std::string& text, const std::string& name);

// A known key that differs from `key` only in case ("w" for "W"), else closest_match's pick.
std::string suggest_key(const std::string& key, const std::vector<std::string>& names);

// "a map", "a list", "nothing", or the scalar quoted (shortened), for "got ..." messages.
std::string describe_node(const YAML::Node& node);

inline constexpr std::int64_t kNoMax = std::numeric_limits<std::int64_t>::max();

class MapReader {
 public:
  // `node` may be undefined or null: an absent or empty section, whose reads give defaults.
  // Checks that every key is a plain name, known to `schema`, and not repeated.
  MapReader(const YamlContext& ctx, const YAML::Node& node, std::string path, const SchemaNode& schema);

  bool has(const std::string& key) const { return entries_.count(key) != 0; }
  YAML::Node value(const std::string& key) const;  // undefined when absent
  std::string path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& path() const { return path_; }
  // The section's node; for an absent section, the parent's (where its errors point).
  const YAML::Node& node() const { return node_; }
  const YamlContext& ctx() const { return *ctx_; }

  // Errors at the value of `key` (or at this map when the key is absent).
  [[noreturn]] void fail(const std::string& key, const std::string& message, const std::string& suggestion = {}) const;
  [[noreturn]] void fail_here(const std::string& message) const;
  SourceLoc loc(const std::string& key) const;

  std::int64_t integer(const std::string& key, std::int64_t def, std::int64_t min, std::int64_t max = kNoMax) const;
  std::int64_t required_integer(const std::string& key, std::int64_t min, std::int64_t max = kNoMax) const;
  // Numbers in [min, max], or (min, max] when `min_exclusive`.
  double number(const std::string& key, double def, double min, double max, bool min_exclusive) const;
  double required_number(const std::string& key, double min, double max, bool min_exclusive) const;
  bool boolean(const std::string& key, bool def) const;
  std::string string(const std::string& key, const std::string& def) const;
  std::string choice(const std::string& key, const std::string& def, const std::vector<std::string>& allowed) const;
  // A sub-section; absent keys give an empty reader located at this map.
  MapReader child(const std::string& key, const SchemaNode& schema) const;

  // Converters for a node that is not a direct key (list items).
  // `at` locates the errors (default: `n` itself).
  std::int64_t to_integer(const YAML::Node& n, const std::string& path, std::int64_t min, std::int64_t max,
                          const YAML::Node* at = nullptr) const;
  double to_number(const YAML::Node& n, const std::string& path, double min, double max, bool min_exclusive,
                   const YAML::Node* at = nullptr) const;

 private:
  // Where errors about `key` point: its value, or the key itself when the value is empty
  // (yaml-cpp marks an empty value at the start of the next line).
  const YAML::Node& at(const std::string& key) const;
  void require(const std::string& key, const char* what) const;

  const YamlContext* ctx_;
  YAML::Node node_;
  std::string path_;
  std::map<std::string, std::pair<YAML::Node, YAML::Node>> entries_;  // key -> (key node, value node)
};

}  // namespace ppsim
