#include "core/op.h"

#include <fmt/format.h>

namespace ppsim {

char op_kind_char(OpKind k) {
  switch (k) {
    case OpKind::F: return 'F';
    case OpKind::I: return 'I';
    case OpKind::W: return 'W';
    case OpKind::B: return 'B';
  }
  return '?';
}

std::string format_op(const Op& op) {
  return fmt::format("{}{}{}", op.stage, op_kind_char(op.kind), op.microbatch);
}

std::string format_action(const Action& a) {
  if (!a.overlapped) return format_op(a.first);
  return fmt::format("({};{})OVERLAP_F_B", format_op(a.first), format_op(a.second));
}

}  // namespace ppsim
