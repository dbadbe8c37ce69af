// Hand-built Kineto traces of one process each, for the tests of several ranks' traces
// (tests/trace/ranks_test.cc) and of calibrating from them (tests/api/calibrate_test.cc).
#pragma once
#include <fmt/format.h>

#include <string>
#include <vector>

#include "trace/kineto_reader.h"
#include "trace/ranks.h"

namespace ppsim::test {

// One process's trace: CPU threads under pid, GPU events under pid = device, tid = stream.
// `shift` (us) is added to every timestamp: this process's clock against the true one.
struct RankBuilder {
  int pid = 100, device = 0;
  double shift = 0;
  int rank = -1;
  int sms = 0;  // > 0: deviceProperties gives the device this many SMs
  std::vector<std::string> ev;
  long corr = 1;
  void range(const std::string& name, double ts, double dur, int tid = 1) {
    ev.push_back(fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"{}","pid":{},"tid":{},"ts":{},"dur":{}}})",
                             name, pid, tid, ts + shift, dur));
  }
  // A launch at `launch` (us, CPU) on thread tid, and its kernel [ts, ts + dur) on `stream`, of
  // `blocks` blocks (0: no grid in the trace).
  void launched(const std::string& kernel, double launch, double ts, double dur, int stream = 7, int tid = 1,
                int blocks = 0) {
    const long c = corr++;
    ev.push_back(fmt::format(
        R"({{"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":{},"tid":{},"ts":{},"dur":0.5,"args":{{"correlation":{}}}}})",
        pid, tid, launch + shift, c));
    const std::string grid = blocks > 0 ? fmt::format(R"(,"grid":[{},1,1])", blocks) : std::string();
    ev.push_back(fmt::format(
        R"({{"ph":"X","cat":"kernel","name":"{}","pid":{},"tid":{},"ts":{},"dur":{},"args":{{"correlation":{},"stream":{},"device":{}{}}}}})",
        kernel, device, stream, ts + shift, dur, c, stream, device, grid));
  }
  std::string json() const {
    std::string s = "{";
    if (rank >= 0) s += fmt::format(R"("distributedInfo":{{"backend":"nccl","rank":{},"world_size":2}},)", rank);
    if (sms > 0) s += fmt::format(R"("deviceProperties":[{{"id":{},"name":"GPU","numSms":{}}}],)", device, sms);
    s += R"("traceEvents":[)";
    for (std::size_t i = 0; i < ev.size(); ++i) s += (i ? ",\n" : "\n") + ev[i];
    return s + "\n]}\n";
  }
  trace::RankTrace read(const std::string& name) const {
    trace::RankTrace r;
    r.path = name;
    r.trace = trace::read_kineto_text(json(), name);
    return r;
  }
};

}  // namespace ppsim::test
