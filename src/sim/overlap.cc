#include "sim/overlap.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace ppsim {

namespace {

// A tiny two-stream list scheduler with rate-shared compute.
struct SubOp {
  int stream;              // 0 compute, 1 communication
  double work;             // ns at full speed (communication: its duration)
  std::vector<int> deps;   // indices of sub-ops that must finish first
  double slowdown;         // compute: time beside communication / alone (0: the linear rule)
};

struct StreamSim {
  std::vector<SubOp> ops;
  int add(int stream, Time work, std::vector<int> deps, double slowdown = 0) {
    ops.push_back(SubOp{stream, static_cast<double>(work), std::move(deps), slowdown});
    return static_cast<int>(ops.size()) - 1;
  }

  ActionCost run(double sigma) const {
    const int n = static_cast<int>(ops.size());
    std::vector<int> order[2];
    for (int i = 0; i < n; ++i) order[ops[i].stream].push_back(i);
    std::vector<double> end(n, -1);
    std::size_t next[2] = {0, 0};
    int running[2] = {-1, -1};
    double remaining[2] = {0, 0};
    double t = 0, exposed = 0, busy = 0;
    int done = 0;
    auto ready = [&](int i) {
      for (int d : ops[i].deps)
        if (end[d] < 0) return false;
      return true;
    };
    while (done < n) {
      // Start what can start; zero-work ops finish at once (they never hold a stream), which
      // may free the other stream's head, so repeat until nothing changes.
      for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < 2; ++s) {
          while (running[s] < 0 && next[s] < order[s].size() && ready(order[s][next[s]])) {
            const int i = order[s][next[s]++];
            progress = true;
            if (ops[i].work <= 0) {
              end[i] = t;
              ++done;
              continue;
            }
            running[s] = i;
            remaining[s] = ops[i].work;
          }
        }
      }
      if (running[0] < 0 && running[1] < 0) {
        PPSIM_CHECK(done == n, "overlap sub-ops stuck: {} of {} done", done, n);
        break;
      }
      // Beside communication a compute sub-op runs at 1 / (its profiled slowdown), or at the
      // linear rule's 1 - sigma when none was measured.
      double speed = 1.0;
      if (running[1] >= 0 && running[0] >= 0) {
        const double sd = ops[running[0]].slowdown;
        speed = sd > 0 ? 1.0 / sd : 1.0 - sigma;
      }
      double dt = 1e300;
      if (running[0] >= 0) dt = std::min(dt, remaining[0] / speed);
      if (running[1] >= 0) dt = std::min(dt, remaining[1]);
      if (running[0] < 0 && running[1] >= 0) {
        // Compute idles while communication runs: exposed only if compute still has work.
        if (next[0] < order[0].size()) exposed += dt;
      }
      if (running[0] >= 0) busy += dt;
      t += dt;
      for (int s = 0; s < 2; ++s) {
        if (running[s] < 0) continue;
        remaining[s] -= s == 0 ? dt * speed : dt;
        if (remaining[s] <= 1e-6) {
          end[running[s]] = t;
          running[s] = -1;
          ++done;
        }
      }
    }
    // Communication left after the last compute is exposed too (the action ends with it).
    double last_compute = 0;
    for (int i = 0; i < n; ++i)
      if (ops[i].stream == 0) last_compute = std::max(last_compute, end[i]);
    if (t > last_compute) exposed += t - last_compute;
    return ActionCost{static_cast<Time>(std::llround(t)), static_cast<Time>(std::llround(exposed)),
                      static_cast<Time>(std::llround(busy))};
  }
};

// Sub-op ids of one chunk's layer, for wiring dependencies.
struct FwdLayer {
  int attn = -1, disp = -1, mlp = -1, comb = -1;
};
struct BwdLayer {
  int comb = -1, mlp = -1, mlp_w = -1, disp = -1, attn = -1, attn_w = -1;
};

}  // namespace

ActionCost overlap_action_cost(const Action& a, const MoeSliceCosts& first, const MoeSliceCosts& second, double sigma) {
  StreamSim sim;
  const Op& op = a.first;
  if (!a.overlapped) {
    const MoeSliceCosts& c = first;
    int prev = -1;
    auto dep = [&]() { return prev < 0 ? std::vector<int>{} : std::vector<int>{prev}; };
    for (int l = 0; l < c.layers; ++l) {
      switch (op.kind) {
        case OpKind::F:
          prev = sim.add(0, c.attn_f, dep(), c.attn_comm_slowdown);
          prev = sim.add(1, c.dispatch, dep());
          prev = sim.add(0, c.mlp_f, dep(), c.mlp_comm_slowdown);
          prev = sim.add(1, c.combine, dep());
          break;
        case OpKind::B:
        case OpKind::I: {
          const bool full = op.kind == OpKind::B;
          prev = sim.add(1, c.combine_b, dep());
          prev = sim.add(0, c.mlp_b, dep(), c.mlp_comm_slowdown);
          if (full) prev = sim.add(0, c.mlp_w, dep(), c.mlp_comm_slowdown);
          prev = sim.add(1, c.dispatch_b, dep());
          prev = sim.add(0, c.attn_b, dep(), c.attn_comm_slowdown);
          if (full) prev = sim.add(0, c.attn_w, dep(), c.attn_comm_slowdown);
          break;
        }
        case OpKind::W:
          prev = sim.add(0, c.mlp_w, dep(), c.mlp_comm_slowdown);
          prev = sim.add(0, c.attn_w, dep(), c.attn_comm_slowdown);
          break;
      }
    }
    return sim.run(sigma);
  }
  // An overlapped pair: F chunk (first) with a backward chunk (second), layer by layer.
  const MoeSliceCosts& fc = first;
  const MoeSliceCosts& bc = second;
  const bool full = a.second.kind == OpKind::B;
  const int layers = std::max(fc.layers, bc.layers);
  int f_prev = -1, b_prev = -1;
  auto after = [](std::initializer_list<int> ids) {
    std::vector<int> v;
    for (int i : ids)
      if (i >= 0) v.push_back(i);
    return v;
  };
  for (int l = 0; l < layers; ++l) {
    const bool has_f = l < fc.layers, has_b = l < bc.layers;
    FwdLayer f;
    BwdLayer b;
    // DeepSeek's order: combine(B), attention(F), MLP(B), dispatch(F), dispatch(B), MLP(W),
    // MLP(F), attention(B), attention(W), combine(F).
    if (has_b) b.comb = sim.add(1, bc.combine_b, after({b_prev}));
    if (has_f) f.attn = sim.add(0, fc.attn_f, after({f_prev}), fc.attn_comm_slowdown);
    if (has_b) b.mlp = sim.add(0, bc.mlp_b, after({b.comb}), bc.mlp_comm_slowdown);
    if (has_f) f.disp = sim.add(1, fc.dispatch, after({f.attn}));
    if (has_b) b.disp = sim.add(1, bc.dispatch_b, after({b.mlp}));
    if (has_b && full) b.mlp_w = sim.add(0, bc.mlp_w, after({b.mlp}), bc.mlp_comm_slowdown);
    if (has_f) f.mlp = sim.add(0, fc.mlp_f, after({f.disp}), fc.mlp_comm_slowdown);
    if (has_b) b.attn = sim.add(0, bc.attn_b, after({b.disp}), bc.attn_comm_slowdown);
    if (has_b && full) b.attn_w = sim.add(0, bc.attn_w, after({b.attn}), bc.attn_comm_slowdown);
    if (has_f) f.comb = sim.add(1, fc.combine, after({f.mlp}));
    if (has_f) f_prev = f.comb;
    if (has_b) b_prev = b.attn;
  }
  return sim.run(sigma);
}

}  // namespace ppsim
