// Ops and actions in PyTorch's notation: `{stage}{F|I|W|B}{microbatch}`, e.g. `3F7`.
// I = backward for input only, W = weight-grad, B = full backward (I + W in one op).
// An action is what a rank executes as one unit: a single op, or an overlapped pair
// `(aF m;bB n)OVERLAP_F_B` (DualPipe's F&B), whose first op is an F and second a backward.
#pragma once
#include <cstdint>
#include <string>

namespace ppsim {

enum class OpKind : std::uint8_t { F = 0, I = 1, W = 2, B = 3 };
inline constexpr int kNumOpKinds = 4;

char op_kind_char(OpKind k);

struct Op {
  OpKind kind = OpKind::F;
  std::int32_t stage = 0;
  std::int32_t microbatch = 0;
  friend bool operator==(const Op&, const Op&) = default;
};

struct Action {
  Op first;
  Op second;          // meaningful only when `overlapped`
  bool overlapped = false;

  static Action single(Op op) { return Action{op, Op{}, false}; }
  static Action pair(Op f, Op b) { return Action{f, b, true}; }
  int size() const { return overlapped ? 2 : 1; }
  const Op& op(int i) const { return i == 0 ? first : second; }
  friend bool operator==(const Action& a, const Action& b) {
    return a.overlapped == b.overlapped && a.first == b.first && (!a.overlapped || a.second == b.second);
  }
};

std::string format_op(const Op& op);
std::string format_action(const Action& a);

}  // namespace ppsim
