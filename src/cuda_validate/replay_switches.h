// The replay's switches from the environment (ReplayConfig::clock_gate, value_waits,
// verify_messages), so that a run can show what the replay's own mechanics cost without a flag
// for each: PPSIM_REPLAY_CLOCK=gate|barrier, PPSIM_REPLAY_WAITS=event|value, PPSIM_REPLAY_VERIFY=0|1.
// Unset: the config's values stand. A value outside the list: InputError (kExitUsage).
#pragma once
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "cuda_validate/gpu_api.h"

namespace ppsim::gpu {

inline bool replay_switch(const char* name, const char* off, const char* on, bool current) {
  const char* v = std::getenv(name);
  if (!v || !*v) return current;
  const std::string s(v);
  if (s == on) return true;
  if (s == off) return false;
  throw InputError(std::string(name) + "=" + s + ": not a value it takes",
                   std::string(name) + "=" + off + " or " + name + "=" + on, kExitUsage);
}

inline void apply_replay_switches(ReplayConfig& rc) {
  rc.clock_gate = replay_switch("PPSIM_REPLAY_CLOCK", "barrier", "gate", rc.clock_gate);
  rc.value_waits = replay_switch("PPSIM_REPLAY_WAITS", "event", "value", rc.value_waits);
  rc.verify_messages = replay_switch("PPSIM_REPLAY_VERIFY", "0", "1", rc.verify_messages);
}

}  // namespace ppsim::gpu
