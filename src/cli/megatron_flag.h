// `--megatron-args FILE` on compare and plan: the same as the config key `megatron_args: FILE`
// (given as a --set, the path made absolute), with the arguments ppsim does not use listed on
// stderr as one note.
#pragma once
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cost/megatron_args.h"

namespace ppsim::cli {

inline void add_megatron_set(const std::string& path, std::vector<std::string>& sets) {
  if (path.empty()) return;
  const MegatronArgs args = read_megatron_args(path, SourceLoc{"--megatron-args", 0, 0});
  if (!args.ignored.empty()) {
    std::string list;
    for (const auto& f : args.ignored) list += (list.empty() ? "" : " ") + f;
    fmt::print(stderr, "ppsim: note: {}: Megatron-LM arguments not used: {}\n", path, list);
  }
  sets.push_back("megatron_args=" + std::filesystem::absolute(path).string());
}

}  // namespace ppsim::cli
