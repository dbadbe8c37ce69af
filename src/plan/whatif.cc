// Building what-if variants (whatif.h).
#include "plan/whatif.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/split.h"

namespace ppsim {

namespace {

// The entry `key` of map `node`, found by iteration (operator[] on a non-const node would insert).
bool find_entry(const YAML::Node& node, const std::string& key, YAML::Node& out) {
  if (!node.IsMap()) return false;
  for (auto it = node.begin(); it != node.end(); ++it)
    if (it->first.IsScalar() && it->first.Scalar() == key) {
      out.reset(it->second);
      return true;
    }
  return false;
}

}  // namespace

std::string config_dir(const ModelConfigData& c) { return std::filesystem::path(c.file).parent_path().string(); }

std::string flow_text(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "~";
  if (n.IsScalar()) return n.Scalar();
  std::string s;
  if (n.IsSequence()) {
    for (std::size_t i = 0; i < n.size(); ++i) s += (i ? ", " : "") + flow_text(n[i]);
    return "[" + s + "]";
  }
  for (auto it = n.begin(); it != n.end(); ++it) s += (s.empty() ? "" : ", ") + flow_text(it->first) + ": " + flow_text(it->second);
  return "{" + s + "}";
}

std::vector<std::string> whatif_sets(const WhatIf& w) {
  std::vector<std::string> out;
  for (const auto& o : w.overrides) out.push_back(o.key + "=" + flow_text(o.value));
  return out;
}

ModelConfigData build_variant(const ModelConfigData& base, const WhatIf& w, const std::vector<std::string>& set_paths) {
  YAML::Node tree = YAML::Clone(base.tree);
  const std::string prefix = fmt::format("what-if '{}': ", w.name);
  for (const auto& o : w.overrides) {
    // The schema walk of --set: unknown keys get a suggestion; a placeholder creates the sections.
    try {
      apply_set(tree, o.key + "=~");
    } catch (const InputError& e) {
      std::string msg = e.message();
      if (msg.rfind("unknown key", 0) == 0) msg = fmt::format("unknown key '{}'", o.key);
      throw InputError(w.loc.file == "--set" ? w.loc : o.key_loc, prefix + msg, e.suggestion());
    }
    // Then bind the file's own value node in place of the placeholder.
    YAML::Node at = tree;
    const std::vector<std::string> parts = split(o.key, '.');
    for (std::size_t i = 0; i < parts.size(); ++i) {
      YAML::Node next;
      const bool found = find_entry(at, parts[i], next);
      PPSIM_CHECK(found, "apply_set did not create '{}' of '{}'", parts[i], o.key);
      if (i + 1 == parts.size()) next = o.value;  // yaml-cpp assignment rebinds the entry in the tree
      else at.reset(next);
    }
  }
  try {
    return validate_config_tree(tree, base.file, config_dir(base), set_paths);
  } catch (const InputError& e) {
    // The base validated, so the error is about an override; one written with --set has marks
    // inside the flag's text, not in the file. An error about a key the what-if left alone
    // (a layer_split against its new layer count) carries no mark from the cloned tree: there,
    // the what-if's own entry.
    const bool unmarked = e.loc().line <= 1 && e.loc().col <= 1;
    const SourceLoc at = w.loc.file == "--set" || unmarked ? w.loc : e.loc();
    throw InputError(at, prefix + e.message(), e.suggestion(), e.exit_code());
  }
}

}  // namespace ppsim
