// Mapping rules: from a CPU range's name (a record_function annotation or an op) to the sub-op
// (attention / MLP / dispatch / combine / other), the pass (F, I = B-input, W) and the layer.
//
// A rule is `regex=subop:pass` (either part may be empty: `regex=attn`, `regex=:W`); the user's
// rules (--map) are tried before the defaults, the first match of each part wins, and a kernel
// takes each part from the innermost range on its launch stack that gives it (docs/TRACES.md).
// The layer is the first number after "layer"/"layers" (else "block"/"blocks", else a number
// between dots of a user range's module path: transformer.h.3.attn) in the innermost range that
// has one; attribution.cc also numbers layers by the order rule.
// Module scopes (with_stack's `nn.Module: Qwen2Attention_0`) take their sub-op from the class
// name's role, case-insensitively (module_role); Python frames (`file.py(12): forward`) are read
// by their function name only; on user ranges the default sub-op rules ignore case (ops keep it:
// DeepSeek's DropoutAddLayerNormFn is no norm of ours), the pass rules never do.
#pragma once
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "trace/kineto_reader.h"

namespace ppsim::trace {

enum class SubOp { attention = 0, mlp = 1, dispatch = 2, combine = 3, other = 4 };
inline constexpr int kSubOps = 5;
enum class Pass { F = 0, I = 1, W = 2 };
inline constexpr int kPasses = 3;
const char* subop_name(SubOp s);
const char* pass_name(Pass p);

struct Rule {
  std::string text;  // as given, for reports and errors
  std::regex re;
  std::optional<SubOp> subop;
  std::optional<Pass> pass;
  bool module_scopes = true;           // also tried on module scopes (the user's rules; the defaults are not)
  std::optional<std::regex> re_icase;  // the default sub-op rules on user ranges: case ignored
};

// The role of a module class by its name's ending, case-insensitively (a trailing _N, the
// profiler's instance number, ignored): attention (`*Attention`, `*SelfAttention`, `*Attn`), mlp
// (`*MLP`, `*FeedForward`, `*FFN`, MoE blocks `*SparseMoeBlock`, `*MoE`, `*MoeBlock`, `*Experts`,
// `*Expert`, routers `*Router`, `*Gate`), other (norms: `*RMSNorm`, `*LayerNorm`, `*Norm`); none
// for the rest (`*DecoderLayer`, `*Block`, `Linear`).
std::optional<SubOp> module_role(const std::string& class_name);

struct RangeMeaning {
  std::optional<SubOp> subop;
  std::optional<Pass> pass;
  int layer = -1;
  bool layer_strong = false;  // from "layer"/"layers" (else "block"/"blocks": taken only where no range says layer)
};

class Rules {
 public:
  // `user` rules first (each `regex=subop:pass`), then the defaults unless `no_defaults`.
  // A malformed rule is an InputError at `--map` (exit code 2).
  explicit Rules(const std::vector<std::string>& user, bool no_defaults = false);
  // `kind`: user annotations, ops and Python ranges (module scopes, frames) read differently.
  RangeMeaning classify(const std::string& range_name, RangeKind kind = RangeKind::user) const;
  // Whether a kernel name is communication (NCCL, DeepEP, NVSHMEM, symmetric memory, all-to-all...).
  static bool is_comm_kernel(const std::string& kernel_name);
  // The same, or matching the user's --comm-kernel regex (set_comm_kernel; an InputError, exit 2, if bad).
  bool comm(const std::string& kernel_name) const;
  void set_comm_kernel(const std::string& regex);
  const std::vector<Rule>& rules() const { return rules_; }
  static const std::vector<std::string>& default_rules();

 private:
  std::vector<Rule> rules_;
  std::optional<std::regex> comm_extra_;
};

}  // namespace ppsim::trace
