// `ppsim profile` and `ppsim validate` until their issues land.
#include "cli/commands.h"
#include "core/error.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::cli {

Runner setup_profile(CLI::App& sub) {
  auto config = std::make_shared<std::string>();
  sub.add_option("config", *config, "YAML config whose chunk to profile");
  return [config]() -> int {
    if (auto why = gpu::gpu_unavailable_reason(); !why.empty()) throw InputError("profile: " + why, {}, kExitGpu);
    throw InputError("profile is not implemented yet", {}, kExitUsage);
  };
}

Runner setup_validate(CLI::App& sub) {
  auto config = std::make_shared<std::string>();
  sub.add_option("config", *config, "YAML config to replay on the GPUs");
  return [config]() -> int {
    if (auto why = gpu::gpu_unavailable_reason(); !why.empty()) throw InputError("validate: " + why, {}, kExitGpu);
    throw InputError("validate is not implemented yet", {}, kExitUsage);
  };
}

}  // namespace ppsim::cli
