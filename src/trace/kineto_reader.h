// Streaming reader for PyTorch profiler (Kineto) Chrome traces, plain or gzip-compressed.
//
// The file is read once through zlib (gzread passes plain files through) by a JSON scanner
// written for GB traces (memchr over strings, numbers kept as text) that drives a handler with
// nlohmann-json's SAX interface; only the fields attribution needs are kept, in compact records, so memory grows
// with the number of events (~40 bytes each), not with the file's text. A file that is not
// valid JSON (a truncated trace) is one InputError at its line and column.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/time.h"

namespace ppsim::trace {

// Every Time below is int64 ns relative to the trace's earliest event (KinetoTrace::origin_ns):
// Kineto writes microseconds, since the epoch (older traces, ~1.7e15 us) or since
// baseTimeNanoseconds (newer ones), with up to 3 decimals (ns resolution), as numbers or strings.

enum class RangeKind : std::uint8_t { user = 0, op = 1, python = 2 };  // user_annotation, cpu_op, python_function

// A CPU-side range (record_function user_annotation, cpu_op, python_function): [ts, ts + dur).
struct CpuRange {
  Time ts = 0, dur = 0;  // ns
  int thread = 0;        // index into KinetoTrace::threads
  int name = 0;          // index into KinetoTrace::names
  int seq = -1;          // args "Sequence number" (autograd's link from a backward op to its forward op), -1: none
  RangeKind kind = RangeKind::user;
  bool backward = false;  // args "Fwd thread id" > 0 (forward ops have none, or 0): an op autograd's engine ran
  Time end() const { return ts + dur; }
};

// A runtime call that launched GPU work (cudaLaunchKernel, cudaMemcpyAsync, ...).
struct Launch {
  Time ts = 0;
  int thread = 0;
  std::int64_t correlation = -1;
};

// GPU work: a kernel, memcpy or memset.
struct GpuEvent {
  Time ts = 0, dur = 0;
  std::int64_t correlation = -1;  // -1: none in the trace
  int device = 0;
  std::int64_t stream = 0;
  int thread = 0;  // the (pid, tid) the event was written under, for ac2g flow ends
  int name = 0;
  int blocks = 0;  // grid size (args.grid), 0 when not given: what an NCCL kernel's SM share rests on
  Time end() const { return ts + dur; }
};

// One end of a flow: `ac2g` (CPU launch -> GPU kernel: `s` at the launch, `f` at the kernel) or
// `fwdbwd` (forward op -> the backward op autograd ran for it: `s` at the forward op's start, `f`
// at the backward op's start).
struct FlowPoint {
  std::int64_t id = 0;
  Time ts = 0;
  int thread = 0;
  bool start = false;
};

struct KinetoTrace {
  std::vector<std::string> names;    // interned event names
  std::vector<std::string> threads;  // "pid/tid" of each thread index, for reports
  std::vector<CpuRange> ranges;
  std::vector<Launch> launches;
  std::vector<GpuEvent> gpu;
  std::vector<FlowPoint> flows;   // ac2g
  std::vector<FlowPoint> fwdbwd;  // fwdbwd
  std::vector<int> thread_pid;    // the pid of each thread index (numeric pids; else a hash), for threads of one process
  int sms = 0;               // deviceProperties[0].numSms, 0 when absent
  std::uint64_t events = 0;  // every trace event seen
  std::uint64_t bytes = 0;   // uncompressed JSON bytes read
  Time origin_ns = 0;        // the earliest event's ts as written (ns, in the trace's own clock): every Time is relative to it
  std::int64_t base_time_ns = 0;  // baseTimeNanoseconds (epoch ns that ts counts from), 0 when absent
  int rank = -1, world_size = -1;  // distributedInfo, -1 when absent
  // Epoch ns of the origin where the trace says (base time given, or ts since the epoch): for aligning ranks.
  Time origin_epoch_ns() const { return base_time_ns + origin_ns; }
};

// Reads `path` (.json or .json.gz, detected from the content). Throws InputError
// (path:line:col) for unreadable, invalid or truncated files and for a file with no events.
KinetoTrace read_kineto(const std::string& path);
// The same from JSON text in memory (tests); `name` appears in errors.
KinetoTrace read_kineto_text(const std::string& text, const std::string& name);

}  // namespace ppsim::trace
