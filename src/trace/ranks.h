// Several ranks' traces of one run (one Kineto trace per process): merged by their
// `distributedInfo.rank`, their clocks aligned on the ends of collectives, and each rank's
// communication split into transfer and waiting.
//
// Clocks: every process writes its own host clock. The kernels of one NCCL collective (or of one
// send and its receive) end together on the ranks taking part: none can finish before the last
// has joined and the data has moved. Rank r's offset is the one that pairs the most ends of
// same-named communication kernels with a rank already aligned (one to one, in time order,
// within 100 us; the closest fit on ties), so that a pipeline's ranks align through their
// neighbours. A rank with too few ends agreeing keeps its clock and is reported.
// Waiting: once aligned, kernels of one name whose ends agree (one per rank) are one collective;
// a kernel that started before the last rank joined waited for that long, the rest is transfer
// (docs/TRACES.md, "Several ranks").
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/time.h"
#include "trace/kineto_reader.h"

namespace ppsim::trace {

struct RankTrace {
  std::string path;
  int rank = 0;                  // distributedInfo.rank, else the file's position among the inputs
  bool rank_from_trace = false;  // distributedInfo.rank was there
  KinetoTrace trace;
  Time offset = 0;  // ns added to this trace's clock (timestamps as written) to put it on the reference's
  Time shift = 0;   // ns added to this trace's Times (relative to its first event) to put them on the
                    // reference's: offset + this origin - the reference's origin (origin_epoch_ns)
  // Per GPU event of `trace`: whether it is communication, and its transfer time (the rest of
  // its duration was waiting for peers; a kernel matched with no peer counts all as transfer).
  std::vector<bool> comm;
  std::vector<Time> transfer;
  // The figures
  int comm_kernels = 0, matched_kernels = 0;
  Time comm_total = 0, comm_transfer = 0, comm_wait = 0;
  Time residual = 0;    // largest spread of aligned ends in a collective this rank was matched in
  int aligned_to = -1;  // the rank whose clock this one was fitted against (-1: reference, or not aligned)
  int support = 0;      // kernel ends that agreed with the offset
};

struct MultiRank {
  std::vector<RankTrace> ranks;  // ascending rank
  int matched_groups = 0;        // collectives matched (kernels of two ranks or more ending together)
  std::vector<std::string> kinds_matched, kinds_skipped;  // kernel names: in a matched collective or never
  std::string note;                                       // how the clocks were aligned
};

// Point-to-point kernels (NCCL Send/Recv): which peer they served is not in the kernel.
bool is_p2p_kernel(const std::string& kernel_name);

// Trace paths from the command line: files as given; a folder gives its *.json and *.json.gz
// files (sorted by name). Throws InputError (exit 3) for a folder with none.
std::vector<std::string> expand_trace_paths(const std::vector<std::string>& args);

// Ranks from traces already read (tests): sorted by rank, aligned, communication split.
// Two traces with one rank, or a mix of traces with and without it, is an InputError.
// `comm_kernel`: a regex of more communication kernel names (--comm-kernel), beside the defaults.
MultiRank merge_ranks(std::vector<RankTrace> ranks, const std::string& comm_kernel = {});
// Reads each path (read_kineto) and merges.
MultiRank read_ranks(const std::vector<std::string>& paths, const std::string& comm_kernel = {});

std::string render_ranks_report(const MultiRank& m);
nlohmann::json ranks_json(const MultiRank& m);

}  // namespace ppsim::trace
