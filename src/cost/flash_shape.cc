// The flash attention core's speed by shape (see flash_shape.h).
#include "cost/flash_shape.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

namespace ppsim {

namespace {

// One kernel: `rows` queries; query i (from 0) sees min(offset + i + 1, window) keys (causal) or
// min(seq, window) (bidirectional).
struct Kernel {
  double rows = 0;
  double offset = 0;
};

// Beyond this many CTAs a kernel's earlier heads are taken as spread evenly over the SMs and only
// its last heads are list-scheduled (the tail is theirs): bounds the work on long sequences (at
// 2048 the factors of Llama 3's, DeepSeek-V3's and 64 x 32K shapes move under 0.001 from 16384's).
constexpr double kSimulatedCtas = 2048;

struct Rate {
  double useful = 0;  // key steps the rows need
  double time = 0;    // the kernel's span, in key steps of one SM
};

Rate kernel_rate(const FlashShape& s, const Kernel& k, int sms) {
  const double window = s.window > 0 ? s.window : s.seq;
  const auto blocks = static_cast<long long>(std::ceil(k.rows / kFlashBlockRows));
  std::vector<double> work(static_cast<std::size_t>(blocks));
  double per_head_useful = 0, per_head_work = 0;
  for (long long i = 0; i < blocks; ++i) {
    const double first = static_cast<double>(i) * kFlashBlockRows;
    const double rows = std::min(kFlashBlockRows, k.rows - first);
    // keys a row of the block sees, on average (causal: row j sees offset + j + 1)
    const double keys = s.causal ? std::min(k.offset + first + 0.5 * (rows + 1), window) : std::min(s.seq, window);
    work[static_cast<std::size_t>(i)] = kFlashBlockKeys + keys;  // a partial block costs a whole tile's steps
    per_head_useful += rows / kFlashBlockRows * keys;
    per_head_work += work[static_cast<std::size_t>(i)];
  }
  const double heads = std::max(1.0, std::round(s.heads));
  const double tail_heads = std::min(heads, std::max(1.0, std::ceil(kSimulatedCtas / static_cast<double>(blocks))));
  const double start = (heads - tail_heads) * per_head_work / sms;
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int i = 0; i < sms; ++i) free_at.push(start);
  double end = start;
  for (double h = 0; h < tail_heads; ++h)
    for (const double w : work) {
      const double t = free_at.top() + w;
      free_at.pop();
      free_at.push(t);
      end = std::max(end, t);
    }
  return {heads * per_head_useful, end};
}

// Keys per SM per step at `shape`: the rank's kernels run one after another.
double rate(const FlashShape& s, int sms) {
  std::vector<Kernel> kernels;
  if (s.cp > 1) {  // Llama 3's scheme: chunks i and 2cp-1-i of 2cp; every rank holds as much work (rank 0's)
    const double chunk = s.seq / (2.0 * s.cp);
    kernels = {{chunk, 0}, {chunk, (2.0 * s.cp - 1) * chunk}};
  } else {
    kernels = {{s.seq, 0}};
  }
  double useful = 0, time = 0;
  for (const Kernel& k : kernels) {
    const Rate r = kernel_rate(s, k, sms);
    useful += r.useful;
    time += r.time;
  }
  return time > 0 ? useful / (time * sms) : 0;
}

// rate(), remembered per thread: a plan or a sweep asks for the same few shapes many times.
double cached_rate(const FlashShape& s, int sms) {
  using Key = std::tuple<double, double, int, bool, double, int>;
  thread_local std::map<Key, double> seen;
  const Key key{s.heads, s.seq, s.cp, s.causal, s.window, sms};
  if (const auto it = seen.find(key); it != seen.end()) return it->second;
  if (seen.size() >= 4096) seen.clear();
  return seen[key] = rate(s, sms);
}

}  // namespace

double flash_shape_factor(const FlashShape& shape, int sms) {
  if (shape.heads <= 0 || shape.seq <= 0 || sms <= 0) return 1;
  const double ref = cached_rate(FlashShape{16, 16384, 1, true, 0}, sms);
  const double r = cached_rate(shape, sms);
  return r > 0 && ref > 0 ? r / ref : 1;
}

}  // namespace ppsim
