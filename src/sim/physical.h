// Physical quantities of a simulated step, known when costs come from a model config: step time,
// throughput, MFU and device memory per rank. Plain data: cost/ fills them (cost_model.h,
// memory.h), report/ prints them (results.h, trace.h, svg.h).
#pragma once
#include <string>
#include <vector>

#include "core/time.h"

namespace ppsim {

// Device memory on one rank from this instant on (cost/memory.h memory_curve).
struct MemorySample {
  Time t = 0;
  double bytes = 0;
};

// One rank's predicted peak device memory, in bytes, by part (cost/memory.h lists the tensors).
struct MemoryBreakdown {
  double weights = 0, gradients = 0, optimizer = 0, ema = 0, activations = 0, comm_buffers = 0, workspace = 0;
  double host_optimizer = 0, host_ema = 0;  // kept on the host: not in total
  double total = 0;
  std::string peak_op;  // the action running at the peak
  Time peak_time = -1;  // its start (ticks), -1 when no timeline was recorded
  int chunks = 0;       // micro-batch chunks alive at the peak
};

// Physical quantities known when costs come from a model config (cost model / profile).
struct PhysicalResult {
  bool available = false;
  double step_time_s = 0;
  double tokens_per_second = 0;
  double mfu = 0;
  std::vector<double> peak_memory_bytes;  // per rank
  double memory_capacity_bytes = 0;       // the GPU's memory (hardware.hbm_gb); 0 = not known
  std::vector<int> over_capacity_ranks;   // ranks whose peak is over it (flagged in every output)
  std::vector<MemoryBreakdown> memory;    // per rank, the parts of peak_memory_bytes
  std::vector<std::vector<MemorySample>> memory_curve;  // per rank, when the timeline was recorded
  std::string schedule_note;  // how the config's run changed the family's order ("" when it did not)
};

}  // namespace ppsim
