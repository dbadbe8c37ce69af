// Loading and writing a measured cost profile (schema in profile.h and docs/CONFIG.md).
#include "cost/profile.h"

#include <fmt/format.h>

#include <cmath>

#include "cost/yaml_reader.h"

namespace ppsim {

namespace {

SchemaNode leaf(const char* name) { return SchemaNode{name, {}, false}; }

const SchemaNode& times_schema(bool with_fb) {
  static const SchemaNode with{"", {leaf("F"), leaf("B"), leaf("W"), leaf("FB")}, false};
  static const SchemaNode without{"", {leaf("F"), leaf("B"), leaf("W")}, false};
  return with_fb ? with : without;
}

const SchemaNode& compute_schema() {
  static const SchemaNode s{"", {leaf("F"), leaf("I"), leaf("W")}, false};
  return s;
}
const SchemaNode& comm_schema() {
  static const SchemaNode s{"", {leaf("F"), leaf("B")}, false};
  return s;
}

const SchemaNode& profile_schema() {
  static const SchemaNode root{
      "",
      {leaf("version"), leaf("device"), leaf("source"), leaf("per_layer"), leaf("op_ms"), leaf("dense_op_ms"),
       leaf("embedding_ms"), leaf("head_ms"), SchemaNode{"link", {leaf("gbps"), leaf("latency_us")}, false},
       SchemaNode{"sub_ops_ms", {leaf("attention"), leaf("mlp"), leaf("dispatch"), leaf("combine")}, false},
       SchemaNode{"comm_slowdown", {leaf("attention"), leaf("mlp")}, false}, leaf("comm_sm_fraction"),
       leaf("applies_to"), leaf("recompute")},
      false};
  return root;
}

Time ms_ticks(double v) { return static_cast<Time>(std::llround(v * 1e6)); }

MoeSliceCosts read_sub_ops(const MapReader& r) {
  MoeSliceCosts m;
  auto num = [](const MapReader& x, const char* k) { return ms_ticks(x.number(k, 0, 0, kMaxOpMs, false)); };
  const MapReader attn = r.child("attention", compute_schema()), mlp = r.child("mlp", compute_schema());
  const MapReader disp = r.child("dispatch", comm_schema()), comb = r.child("combine", comm_schema());
  m.attn_f = num(attn, "F");
  m.attn_b = num(attn, "I");
  m.attn_w = num(attn, "W");
  m.mlp_f = num(mlp, "F");
  m.mlp_b = num(mlp, "I");
  m.mlp_w = num(mlp, "W");
  m.dispatch = num(disp, "F");
  m.dispatch_b = num(disp, "B");
  m.combine = num(comb, "F");
  m.combine_b = num(comb, "B");
  return m;
}

}  // namespace

OpTimes read_op_times(const MapReader& r, bool with_fb) {
  OpTimes t;
  t.f = ms_ticks(r.required_number("F", 0, kMaxOpMs, false));
  t.b = ms_ticks(r.required_number("B", 0, kMaxOpMs, false));
  t.w = ms_ticks(r.number("W", 0, 0, kMaxOpMs, false));
  if (t.w > t.b)
    r.fail("W", fmt::format("{} is part of the full backward {}, so W <= B is needed", r.path("W"), r.path("B")));
  if (with_fb) t.fb = ms_ticks(r.number("FB", 0, 0, kMaxOpMs, true));
  return t;
}

OpTimes sub_op_totals(const MoeSliceCosts& s) {
  OpTimes t;
  t.f = s.attn_f + s.mlp_f + s.dispatch + s.combine;
  t.w = s.attn_w + s.mlp_w;
  t.b = s.attn_b + s.mlp_b + s.dispatch_b + s.combine_b + t.w;
  return t;
}

CostProfile parse_profile(const std::string& text, const std::string& name) {
  const YAML::Node root_node = parse_yaml(text, name);
  const YamlContext ctx(name, {});
  const MapReader root(ctx, root_node, "", profile_schema());
  CostProfile p;
  p.present = true;
  p.path = name;
  if (!root.has("version")) root.fail_here("version is required (1 or 2)");
  const int version = static_cast<int>(root.integer("version", 2, 1, 2));
  p.device = root.string("device", "");
  (void)root.string("source", "");
  p.per_layer = root.boolean("per_layer", true);
  if (version == 1)
    for (const char* key : {"sub_ops_ms", "comm_slowdown", "comm_sm_fraction"})
      if (root.has(key)) root.fail(key, fmt::format("{} needs version: 2", key));
  if (root.has("sub_ops_ms")) {
    if (!p.per_layer) root.fail("sub_ops_ms", "sub_ops_ms needs per_layer: true (they are one layer's times)");
    p.sub_ops = read_sub_ops(root.child("sub_ops_ms", *profile_schema().find("sub_ops_ms")));
    const OpTimes t = sub_op_totals(*p.sub_ops);
    if (t.f + t.b == 0) root.fail("sub_ops_ms", "sub_ops_ms sum to 0 ms: at least one sub-op must take time");
  }
  if (root.has("op_ms")) {
    p.op = read_op_times(root.child("op_ms", times_schema(true)), true);
    if (p.op.f + p.op.b == 0) root.fail("op_ms", "op_ms.F + op_ms.B must be > 0");
  } else if (p.sub_ops) {
    p.op = sub_op_totals(*p.sub_ops);
  } else {
    root.fail_here(version == 1 ? "op_ms is required ({F, B, W} in ms)" : "op_ms or sub_ops_ms is required");
  }
  if (root.has("comm_slowdown")) {
    const MapReader sd = root.child("comm_slowdown", *profile_schema().find("comm_slowdown"));
    // Below 1 would make compute faster beside communication; 10x is surely a measuring error.
    p.attn_comm_slowdown = sd.number("attention", 0, 1, 10, false);
    p.mlp_comm_slowdown = sd.number("mlp", 0, 1, 10, false);
  }
  p.comm_sm_fraction = root.number("comm_sm_fraction", 0, 0, 1, false);
  p.moe_layers_only = root.choice("applies_to", "all", {"all", "moe_layers"}) == "moe_layers";
  if (p.moe_layers_only) {
    if (!p.sub_ops) root.fail("applies_to", "applies_to: moe_layers needs sub_ops_ms (one MoE layer's sub-op times)");
    for (const char* key : {"dense_op_ms", "embedding_ms", "head_ms", "link"})
      if (root.has(key))
        root.fail(key, fmt::format("{} with applies_to: moe_layers: only the MoE layers take the profile's times", key));
  }
  p.recompute_included = root.choice("recompute", "derived", {"derived", "included"}) == "included";
  if (root.has("dense_op_ms")) {
    if (!p.per_layer) root.fail("dense_op_ms", "dense_op_ms needs per_layer: true");
    p.dense_op = read_op_times(root.child("dense_op_ms", times_schema(false)), false);
  }
  for (const char* key : {"embedding_ms", "head_ms"}) {
    if (!root.has(key)) continue;
    if (!p.per_layer) root.fail(key, fmt::format("{} needs per_layer: true (a rank's share already includes it)", key));
    (std::string(key) == "embedding_ms" ? p.embedding : p.head) =
        read_op_times(root.child(key, times_schema(false)), false);
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

std::string render_profile(const CostProfile& p, const std::string& header) {
  auto ms = [](Time t) { return fmt::format("{:.6f}", static_cast<double>(t) / 1e6); };
  std::string y = header;
  if (!y.empty() && y.back() != '\n') y += '\n';
  const bool v2 =
      p.sub_ops.has_value() || p.attn_comm_slowdown > 0 || p.mlp_comm_slowdown > 0 || p.comm_sm_fraction > 0;
  y += fmt::format("version: {}\n", v2 ? 2 : 1);
  if (!p.device.empty()) y += fmt::format("device: \"{}\"\n", p.device);
  y += fmt::format("per_layer: {}\n", p.per_layer ? "true" : "false");
  if (p.moe_layers_only) y += "applies_to: moe_layers\n";
  if (p.recompute_included) y += "recompute: included\n";
  y += fmt::format("op_ms: {{F: {}, B: {}, W: {}", ms(p.op.f), ms(p.op.b), ms(p.op.w));
  if (p.op.fb > 0) y += fmt::format(", FB: {}", ms(p.op.fb));
  y += "}\n";
  if (p.dense_op)
    y += fmt::format("dense_op_ms: {{F: {}, B: {}, W: {}}}\n", ms(p.dense_op->f), ms(p.dense_op->b), ms(p.dense_op->w));
  if (p.per_layer) {
    if (p.embedding.f + p.embedding.b > 0)
      y += fmt::format("embedding_ms: {{F: {}, B: {}, W: {}}}\n", ms(p.embedding.f), ms(p.embedding.b),
                       ms(p.embedding.w));
    if (p.head.f + p.head.b > 0)
      y += fmt::format("head_ms: {{F: {}, B: {}, W: {}}}\n", ms(p.head.f), ms(p.head.b), ms(p.head.w));
  }
  if (p.sub_ops) {
    const MoeSliceCosts& s = *p.sub_ops;
    y += "sub_ops_ms:\n";
    y += fmt::format("  attention: {{F: {}, I: {}, W: {}}}\n", ms(s.attn_f), ms(s.attn_b), ms(s.attn_w));
    y += fmt::format("  mlp: {{F: {}, I: {}, W: {}}}\n", ms(s.mlp_f), ms(s.mlp_b), ms(s.mlp_w));
    y += fmt::format("  dispatch: {{F: {}, B: {}}}\n", ms(s.dispatch), ms(s.dispatch_b));
    y += fmt::format("  combine: {{F: {}, B: {}}}\n", ms(s.combine), ms(s.combine_b));
  }
  if (p.attn_comm_slowdown > 0 || p.mlp_comm_slowdown > 0) {
    y += "comm_slowdown: {";
    if (p.attn_comm_slowdown > 0) y += fmt::format("attention: {:.4f}", p.attn_comm_slowdown);
    if (p.mlp_comm_slowdown > 0)
      y += fmt::format("{}mlp: {:.4f}", p.attn_comm_slowdown > 0 ? ", " : "", p.mlp_comm_slowdown);
    y += "}\n";
  }
  if (p.comm_sm_fraction > 0) y += fmt::format("comm_sm_fraction: {:.4f}\n", p.comm_sm_fraction);
  if (p.link_gbps || p.link_latency_us) {
    y += "link: {";
    if (p.link_gbps) y += fmt::format("gbps: {}", *p.link_gbps);
    if (p.link_latency_us) y += fmt::format("{}latency_us: {}", p.link_gbps ? ", " : "", *p.link_latency_us);
    y += "}\n";
  }
  return y;
}

}  // namespace ppsim
