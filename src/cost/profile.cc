// Loading a measured cost profile (schema in profile.h and docs/CONFIG.md).
#include "cost/profile.h"

#include <cmath>

#include <fmt/format.h>

#include "cost/yaml_reader.h"

namespace ppsim {

namespace {

SchemaNode leaf(const char* name) { return SchemaNode{name, {}, false}; }

const SchemaNode& times_schema(bool with_fb) {
  static const SchemaNode with{"", {leaf("F"), leaf("B"), leaf("W"), leaf("FB")}, false};
  static const SchemaNode without{"", {leaf("F"), leaf("B"), leaf("W")}, false};
  return with_fb ? with : without;
}

const SchemaNode& profile_schema() {
  static const SchemaNode root{"",
                               {leaf("version"), leaf("device"), leaf("source"), leaf("per_layer"), leaf("op_ms"),
                                leaf("dense_op_ms"), leaf("embedding_ms"), leaf("head_ms"),
                                SchemaNode{"link", {leaf("gbps"), leaf("latency_us")}, false}},
                               false};
  return root;
}

Time ms_ticks(double v) { return static_cast<Time>(std::llround(v * 1e6)); }

OpTimes read_times(const MapReader& r, bool with_fb) {
  OpTimes t;
  t.f = ms_ticks(r.required_number("F", 0, kMaxOpMs, false));
  t.b = ms_ticks(r.required_number("B", 0, kMaxOpMs, false));
  t.w = ms_ticks(r.number("W", 0, 0, kMaxOpMs, false));
  if (t.w > t.b) r.fail("W", fmt::format("{} is part of the full backward {}, so W <= B is needed", r.path("W"), r.path("B")));
  if (with_fb) t.fb = ms_ticks(r.number("FB", 0, 0, kMaxOpMs, true));
  return t;
}

}  // namespace

CostProfile parse_profile(const std::string& text, const std::string& name) {
  const YAML::Node root_node = parse_yaml(text, name);
  const YamlContext ctx(name, {});
  const MapReader root(ctx, root_node, "", profile_schema());
  CostProfile p;
  p.present = true;
  p.path = name;
  if (!root.has("version")) root.fail_here("version is required (1)");
  root.integer("version", 1, 1, 1);
  p.device = root.string("device", "");
  (void)root.string("source", "");
  p.per_layer = root.boolean("per_layer", true);
  if (!root.has("op_ms")) root.fail_here("op_ms is required ({F, B, W} in ms)");
  p.op = read_times(root.child("op_ms", times_schema(true)), true);
  if (p.op.f + p.op.b == 0) root.fail("op_ms", "op_ms.F + op_ms.B must be > 0");
  if (root.has("dense_op_ms")) {
    if (!p.per_layer) root.fail("dense_op_ms", "dense_op_ms needs per_layer: true");
    p.dense_op = read_times(root.child("dense_op_ms", times_schema(false)), false);
  }
  for (const char* key : {"embedding_ms", "head_ms"}) {
    if (!root.has(key)) continue;
    if (!p.per_layer) root.fail(key, fmt::format("{} needs per_layer: true (a rank's share already includes it)", key));
    (std::string(key) == "embedding_ms" ? p.embedding : p.head) = read_times(root.child(key, times_schema(false)), false);
  }
  if (root.has("link")) {
    const MapReader link = root.child("link", *profile_schema().find("link"));
    if (link.has("gbps")) p.link_gbps = link.number("gbps", 0, 1e-3, 1e9, false);
    if (link.has("latency_us")) p.link_latency_us = link.number("latency_us", 0, 0, 1e6, false);
  }
  return p;
}

CostProfile load_profile(const std::string& path, const SourceLoc& referenced_from) {
  return parse_profile(read_yaml_file(path, referenced_from), path);
}

}  // namespace ppsim
