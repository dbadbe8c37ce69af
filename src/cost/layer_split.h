// Which layers each model slice computes. A schedule asks for Schedule::stages_per_pipe slices
// (linear: v*P, V-shape: 2P, two pipes: P); the config gives layers per stage for pp*vpp stages
// (uniform, or parallel.layer_split). A list made for a different number of stages is adapted:
// n entries for S slices with n = kS merge k consecutive entries; with S = kn each entry splits
// into k parts as evenly as possible (the remainder going to the later parts). The first slice
// carries the embedding and the last the head, when the config says so.
#pragma once
#include <vector>

#include "cost/config.h"

namespace ppsim {

struct SliceLayout {
  int first_layer = 0;
  int layers = 0;
  bool embedding = false;
  bool head = false;
};

// Throws InputError (no location: it is about a schedule, not a line) when the layers cannot
// be split into `slices` as the config asks.
std::vector<SliceLayout> slice_layouts(const ModelConfigData& c, int slices);

}  // namespace ppsim
