// The traced step against the simulator's prediction from the imported profile.
//
// `pair`: one overlapped F&B pair (the F of one chunk with the full backward of another, each
// `layers` layers), costed by the overlap model (sim/overlap.h); compared with the trace's GPU
// span and its compute streams' busy time. A family name: that schedule (P, M, v) simulated
// with every chunk `layers` layers; ranks beyond `devices` share GPUs (rank r on GPU
// r % devices, time-sliced: k actions at once each run k times slower), as virtual stages on
// one GPU do; compared with the trace's longest device span.
#pragma once
#include <string>

#include "trace/import.h"

namespace ppsim::trace {

struct PredictRequest {
  std::string schedule;  // "pair" or a family name
  int pp = 1, microbatches = 1, vpp = 0;
  int devices = 1;               // GPUs the traced step ran on
  int layers_per_chunk = 0;      // 0: the trace's layers / (stages of the schedule); pair: all of them
  int comm_sms = 20, sms = 132;  // the linear rule, when the trace measured no slowdown
  // executed: the runtime the executed order is simulated with: "dataflow" (each transfer starts
  // when its producer ends) or "torch" (PyTorch's sends and receives, one stream per rank:
  // schedules/torch_p2p.h).
  std::string p2p_runtime = "dataflow";
};

struct Prediction {
  std::string what;  // e.g. "1f1b P=4 M=8 (2 layers per chunk, 1 GPU)"
  Time traced = 0, predicted = 0;
  bool has_busy = false;  // pair: compute busy time compared too
  Time traced_busy = 0, predicted_busy = 0;
  std::string sm_sharing;  // "profiled (...)" or "linear rule (...)"
  // Kernels outside the numbered layers (embedding, head, loss, optimizer): in the traced span,
  // not in the prediction, which is of the layers' work (and unmapped or unlinked kernels).
  Time outside_layers = 0, unmapped = 0;
  double error() const { return traced > 0 ? (static_cast<double>(predicted) - traced) / traced : 0; }
  double busy_error() const {
    return traced_busy > 0 ? (static_cast<double>(predicted_busy) - traced_busy) / traced_busy : 0;
  }
};

Prediction predict_traced(const ImportResult& r, const PredictRequest& req);
std::string render_prediction(const Prediction& p);
nlohmann::json prediction_json(const Prediction& p);

}  // namespace ppsim::trace
