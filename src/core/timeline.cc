#include "core/timeline.h"

namespace ppsim {

const char* part_name(Part p) {
  switch (p) {
    case Part::Whole: return "whole";
    case Part::Attn: return "attn";
    case Part::Mlp: return "mlp";
    case Part::AttnW: return "attn_w";
    case Part::MlpW: return "mlp_w";
    case Part::Dispatch: return "dispatch";
    case Part::Combine: return "combine";
  }
  return "?";
}

}  // namespace ppsim
