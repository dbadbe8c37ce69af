// Expert parallelism: the all-to-all's name, where a replay's EP shards run, and NCCL's one rule
// about them (see ep_placement.h).
#include "ep/ep_placement.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "ep/ep_plan.h"

namespace ppsim::ep {

A2aBackend parse_a2a_backend(const std::string& name) {
  if (name == "ours") return A2aBackend::ours;
  if (name == "nccl") return A2aBackend::nccl;
  throw InputError(fmt::format("unknown all-to-all '{}': choose ours or nccl", printable(name)),
                   closest_match(name, {"ours", "nccl"}), kExitUsage);
}

const char* a2a_backend_name(A2aBackend b) { return b == A2aBackend::ours ? "ours" : "nccl"; }

EpPlacement place_in_process(int pp, int ep, int gpus) {
  EpPlacement p;
  p.pp = pp;
  p.ep = ep;
  if (ep == 1) {  // no EP groups: rank r on GPU r % GPUs, evenly or not (the dense replay's rule)
    const int g = std::max(1, std::min(gpus, pp));
    for (int r = 0; r < pp; ++r) {
      p.process.push_back(0);
      p.gpu.push_back(r % g);
    }
    return p;
  }
  const EpLayout layout = make_ep_layout(pp, ep, std::min(gpus, pp * ep));
  for (int q = 0; q < pp * ep; ++q) {
    p.process.push_back(0);
    p.gpu.push_back(layout.device_of(q));
  }
  return p;
}

EpPlacement place_across_processes(int pp, int ep, const std::vector<int>& process_gpu) {
  if (pp < 1 || ep < 1 || process_gpu.empty())
    throw InputError(fmt::format("expert-parallel placement: pp {} x ep {} over {} processes", pp, ep,
                                 process_gpu.size()),
                     {}, kExitInput);
  EpPlacement p;
  p.pp = pp;
  p.ep = ep;
  p.across_processes = true;
  const int n = static_cast<int>(process_gpu.size());
  for (int q = 0; q < pp * ep; ++q) {
    p.process.push_back(q % n);
    p.gpu.push_back(process_gpu[static_cast<std::size_t>(q % n)]);
  }
  return p;
}

std::string nccl_a2a_problem(const EpPlacement& p) {
  for (int r = 0; r < p.pp; ++r)
    for (int a = 0; a < p.ep; ++a)
      for (int b = a + 1; b < p.ep; ++b)
        if (p.gpu_of(r, a) == p.gpu_of(r, b))
          return fmt::format(
              "--a2a nccl: EP shards {} and {} of pipeline rank {} would share GPU {}{}, and NCCL cannot put two ranks "
              "of one communicator on one GPU: use --a2a ours, or at least ep ({}) GPUs{}",
              a, b, r, p.gpu_of(r, a),
              p.across_processes ? fmt::format(" (processes {} and {})", p.process_of(r, a), p.process_of(r, b)) : "",
              p.ep, p.across_processes ? ", one process each" : "");
  return {};
}

}  // namespace ppsim::ep
