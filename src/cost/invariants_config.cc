// The invariants of an answer computed from a model config (cost/invariants.h): apart from
// invariants.cc because they read the config (yaml-cpp), which the page's engine (web/) has not.
#include <fmt/format.h>

#include "cost/config.h"
#include "cost/invariants.h"

namespace ppsim {

void check_physical(const ModelConfig& cfg, const Schedule& s, const SimResult& r, const PhysicalResult& p,
                    const AnswerSource& src) {
  const ModelConfigData& c = *cfg.data;
  const std::string who = s.family.empty() ? std::string("the schedule") : s.family;
  if (p.mfu > 1.0 + 1e-9) {
    const double peak = c.hardware.peak_tflops(c.precision.gemm);
    const std::string cause =
        !src.profile.empty()
            ? fmt::format(
                  "the op times of profile '{}' are shorter than the model's FLOPs allow (a forward-only or "
                  "partial trace?)",
                  src.profile)
            : "the config's efficiency figures or explicit times are above what the GPU can do";
    broken(src,
           fmt::format("{} achieves {:.0f} TFLOP/s per GPU, above the GPU's peak of {:.0f} (MFU {:.0f}%)", who,
                       p.mfu * peak, peak, 100.0 * p.mfu),
           cause);
  }
  const double longest = static_cast<double>(r.longest_span()) / 1e9;
  if (p.step_time_s + 1e-12 < longest * (1.0 - 1e-9))
    broken(src,
           fmt::format("{}: the step ({:.6f} s) is shorter than its longest rank's own span ({:.6f} s)", who,
                       p.step_time_s, longest),
           "");
  for (std::size_t q = 0; q < p.memory.size(); ++q) {
    const MemoryBreakdown& b = p.memory[q];
    check_parts_add_up(fmt::format("{}: rank {}'s peak memory", who, q), b.total,
                       {{"weights", b.weights},
                        {"gradients", b.gradients},
                        {"optimizer", b.optimizer},
                        {"ema", b.ema},
                        {"activations", b.activations},
                        {"comm buffers", b.comm_buffers},
                        {"workspace", b.workspace}},
                       src);
  }
}

void check_config_answer(const ModelConfig& cfg, const Schedule& s, const SimResult& r, const PhysicalResult& p,
                         const AnswerSource& src) {
  const ModelConfigData& c = *cfg.data;
  check_global_batch(s.microbatches, c.model.micro_batch_size, c.parallel.dp, c.parallel.global_batch, src);
  check_physical(cfg, s, r, p, src);
}

AnswerSource source_of(const ModelConfig& cfg) {
  const ModelConfigData& c = *cfg.data;
  AnswerSource src;
  src.input = !c.file.empty() ? c.file : c.name;
  src.physical = true;
  if (c.profile.present) src.profile = c.profile.path;
  return src;
}

}  // namespace ppsim
