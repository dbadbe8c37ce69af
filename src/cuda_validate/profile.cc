// The profiler: times a chunk's op kinds with CUDA events (median of `reps` after `warmup`)
// and writes the cost-profile YAML that the simulator reads.
//   F  = forward;  I = backward_input;  W = backward_weight;  B = I then W as one timed region
//   FB = F of micro-batch 1 on one stream overlapped with B of micro-batch 0 on another, their
//        sub-ops enqueued interleaved layer by layer (DualPipe's F&B); the pair's wall time.
// Sub-ops are timed over all layers (each re-run is idempotent for the forward and input-grad:
// it recomputes the same outputs from the same saved inputs).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "cuda_validate/check.h"
#include "cuda_validate/chunk.h"
#include "cuda_validate/device_buffer.h"
#include "cuda_validate/ep_wiring.h"
#include "cuda_validate/gpu_api.h"
#include "cuda_validate/graph_launch.h"
#include "cuda_validate/green.h"
#include "cuda_validate/ops/elementwise.h"
#include "cuda_validate/peer.h"
#include "cuda_validate/replay/words.h"
#include "ep/ep_placement.h"
#include "launch/mpi.h"

namespace ppsim::gpu {
namespace {

double median(std::vector<float> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Times `fn` (which enqueues on `s`) `reps` times after `warmup` runs; median ms of GPU time.
// Each run waits behind a hold kernel (ops/elementwise.h) until the host has enqueued all of it,
// so a host that launches slowly, or stalls for a moment, cannot stretch what is timed: op costs
// are the GPU's. The hold follows the host's last enqueue time (twice it, at least 200 us); a run
// whose enqueueing outlasted its hold is repeated (up to 8 times) with a longer one.
class Hold {
 public:
  double us() const { return us_; }
  // After a run whose enqueueing took `host_us`: true when it must be repeated.
  bool outlasted(double host_us) {
    const bool over = host_us > 0.8 * us_ && retries_ < 8;
    if (over) ++retries_;
    us_ = std::max(200.0, 2 * host_us);
    return over;
  }

 private:
  double us_ = 200;
  int retries_ = 0;
};

// Enqueues `fn` on `s` as the replay launches an action: under validate --launch graphs
// (graph_launch()) captured once into `graphs` under `key` and relaunched (the same buffers each
// time: signature 0), else as it is.
void as_launched(GraphCache& graphs, std::uint64_t key, cudaStream_t s, const std::function<void()>& fn) {
  if (graph_launch())
    graphs.launch(key, s, fn, 0);
  else
    fn();
}

// `fn` as_launched(), or with capture = false run as it is (its ops launch their own graphs, as
// the co-run sides' do).
double time_ms(const std::function<void()>& fn, cudaStream_t s, int warmup, int reps, bool capture = true) {
  Event start, end;
  GraphCache graphs;
  Hold hold;
  std::vector<float> ms;
  for (int i = 0; i < warmup + reps;) {
    const auto t0 = std::chrono::steady_clock::now();
    hold_stream(s, hold.us());
    start.record(s);
    if (capture)
      as_launched(graphs, 0, s, fn);
    else
      fn();
    end.record(s);
    const double host_us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
    if (hold.outlasted(host_us)) continue;
    if (i >= warmup) ms.push_back(end.ms_since(start));
    ++i;
  }
  return median(std::move(ms));
}

// One host thread per feed (on its feed's GPU) runs fn(i); the first failure is rethrown.
struct Feed {
  Chunk* chunk;
  cudaStream_t stream;
  int device;
};
void in_feed_threads(const std::vector<Feed>& feeds, const std::function<void(std::size_t)>& fn) {
  std::vector<std::exception_ptr> errors(feeds.size());
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < feeds.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        PPSIM_CUDA_CHECK(cudaSetDevice(feeds[i].device));
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// Per-step time of `reps` steps of each chunk, every chunk fed back to back by its own host thread
// on its own stream (a replay's rank threads do the same): from one start event, which the other
// streams wait for, to the last chunk's last step, divided by reps; the median of five such runs
// after one of `warmup` steps. With one chunk: its back-to-back rate; with two: both at once, their
// launches contending in the driver as two ranks' do. Back to back, not held: the GPU under
// sustained load, as in a replay (at the larger shape on an H100, held runs gave 1.16x for two
// steps side by side, back-to-back runs 1.22x, and ops beside each other in the replays 1.22x).
// The feeds may be on several GPUs (an EP group's shards); the start and end are feed 0's.
double time_fed_ms(const std::vector<Feed>& feeds, int warmup, int reps,
                   const std::function<void(Chunk&, cudaStream_t)>& step) {
  auto run = [&](int steps) {
    std::vector<Event> done;
    done.reserve(feeds.size());
    for (const Feed& f : feeds) {
      PPSIM_CUDA_CHECK(cudaSetDevice(f.device));
      done.emplace_back(false);
    }
    PPSIM_CUDA_CHECK(cudaSetDevice(feeds.front().device));
    Event start, end;
    const cudaStream_t s0 = feeds.front().stream;
    start.record(s0);
    for (std::size_t i = 1; i < feeds.size(); ++i)
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(feeds[i].stream, start.get(), 0));
    in_feed_threads(feeds, [&](std::size_t i) {
      GraphCache graphs;
      const cudaStream_t st = feeds[i].stream;
      for (int k = 0; k < steps; ++k) as_launched(graphs, 0, st, [&] { step(*feeds[i].chunk, st); });
      done[i].record(st);
    });
    for (std::size_t i = 1; i < feeds.size(); ++i) PPSIM_CUDA_CHECK(cudaStreamWaitEvent(s0, done[i].get(), 0));
    end.record(s0);
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s0));
    return static_cast<float>(end.ms_since(start) / std::max(1, steps));
  };
  run(std::max(1, warmup));
  std::vector<float> ms;
  for (int i = 0; i < 5; ++i) ms.push_back(run(std::max(1, reps)));
  return median(std::move(ms));
}

std::string yaml_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp.profile";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError(SourceLoc{path, 0, 0}, "cannot write the profile", {}, kExitIo);
    f << content;
    if (!f.flush()) throw InputError(SourceLoc{path, 0, 0}, "cannot write the profile", {}, kExitIo);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw InputError(SourceLoc{path, 0, 0}, "cannot write the profile (rename failed)", {}, kExitIo);
  }
}

// A GPU, a valid shape and sensible repetition counts, or one line saying which is missing.
void check_profile_request(const ChunkShape& shape, int warmup, int reps) {
  if (auto why = gpu_unavailable_reason(); !why.empty()) throw InputError("profile: " + why, {}, kExitGpu);
  if (auto p = shape.problem(); !p.empty()) throw InputError("profile: chunk shape: " + p, {}, kExitInput);
  if (reps < 1 || warmup < 0) throw InputError("profile: reps must be >= 1 and warmup >= 0", {}, kExitUsage);
}

}  // namespace

// Two streams for a profile: ordinary ones, or (sm_groups > 0) on SM partitions `first` and `second`.
struct ProfileStreams {
  std::unique_ptr<SmPartitions> parts;
  std::unique_ptr<Stream> s1, s2;
  ProfileStreams(int device, int sm_groups, int first, int second) {
    if (sm_groups > 0) {
      parts = std::make_unique<SmPartitions>(device, sm_groups);
      s1 = Stream::adopt(parts->create_stream(first, 0));
      s2 = Stream::adopt(parts->create_stream(second, 0));
    } else {
      s1 = std::make_unique<Stream>();
      s2 = std::make_unique<Stream>();
    }
  }
  ~ProfileStreams() {
    s1.reset();
    s2.reset();  // before the partitions they run on
  }
};

namespace {

// What one chunk's profile times, on streams `a` and `b` of its rank, each region timed by
// `timed(fn, stream)` (ms). Shared by the one-chunk profile and the EP one, whose shards run it
// in lockstep.
using Timer = std::function<double(const std::function<void()>&, cudaStream_t)>;

void profile_body(Chunk& chunk, const ChunkShape& shape, cudaStream_t a, cudaStream_t b, const Timer& timed,
                  ProfileResult& r) {
  r.attention_backend = chunk.attention_backend();
  for (int mb : {0, 1}) {
    chunk.fill_input(mb, 100 + static_cast<std::uint64_t>(mb), a);
    chunk.fill_grad_output(mb, 200 + static_cast<std::uint64_t>(mb), a);
  }
  // Valid saved activations and grads for both micro-batches before anything is timed.
  for (int mb : {0, 1}) {
    chunk.forward(mb, a);
    chunk.backward_input(mb, a);
  }
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(a));
  if (shape.is_moe()) {
    const double assignments = static_cast<double>(shape.tokens()) * shape.top_k * shape.layers;
    r.dropped_token_fraction = static_cast<double>(chunk.dropped_assignments(0)) / assignments;
  }

  r.f_ms = timed([&] { chunk.forward(0, a); }, a);
  r.input_grad_ms = timed([&] { chunk.backward_input(0, a); }, a);
  r.w_ms = timed([&] { chunk.backward_weight(0, a); }, a);
  r.b_ms = timed([&] { chunk.backward(0, a); }, a);  // fused, as the replay runs a B

  // FB: F(1) on stream a, B(0) on stream b, interleaved by layer; timed on a after joining b.
  Event fork(false), join(false);
  const int L = shape.layers;
  r.fb_ms = timed(
      [&] {
        fork.record(a);
        PPSIM_CUDA_CHECK(cudaStreamWaitEvent(b, fork.get(), 0));
        chunk.begin_backward(0, true);  // a full backward, fused as the replay's pairs run it
        for (int i = 0; i < L; ++i) {
          const int lb = L - 1 - i;
          chunk.attn_forward(1, i, a);
          chunk.combine_backward(0, lb, b);
          chunk.mlp_backward_input(0, lb, b);
          chunk.dispatch_forward(1, i, a);
          chunk.mlp_forward(1, i, a);
          chunk.dispatch_backward(0, lb, b);
          chunk.attn_backward_input(0, lb, b);
          chunk.attn_backward_weight(0, lb, b);
          chunk.mlp_backward_weight(0, lb, b);
          chunk.combine_forward(1, i, a);
        }
        join.record(b);
        PPSIM_CUDA_CHECK(cudaStreamWaitEvent(a, join.get(), 0));
      },
      a);

  auto all_layers = [&](void (Chunk::*op)(int, int, cudaStream_t), bool reverse) {
    return [&chunk, op, reverse, L, a] {
      for (int i = 0; i < L; ++i) (chunk.*op)(0, reverse ? L - 1 - i : i, a);
    };
  };
  r.sub_ops_ms["attn_fwd"] = timed(all_layers(&Chunk::attn_forward, false), a);
  r.sub_ops_ms["mlp_fwd"] = timed(all_layers(&Chunk::mlp_forward, false), a);
  r.sub_ops_ms["mlp_bwd"] = timed(all_layers(&Chunk::mlp_backward_input, true), a);
  r.sub_ops_ms["attn_bwd"] = timed(all_layers(&Chunk::attn_backward_input, true), a);
  r.sub_ops_ms["attn_w"] = timed(all_layers(&Chunk::attn_backward_weight, false), a);
  r.sub_ops_ms["mlp_w"] = timed(all_layers(&Chunk::mlp_backward_weight, false), a);
  if (shape.is_moe()) {
    r.sub_ops_ms["dispatch_fwd"] = timed(all_layers(&Chunk::dispatch_forward, false), a);
    r.sub_ops_ms["combine_fwd"] = timed(all_layers(&Chunk::combine_forward, false), a);
    r.sub_ops_ms["combine_bwd"] = timed(all_layers(&Chunk::combine_backward, true), a);
    r.sub_ops_ms["dispatch_bwd"] = timed(all_layers(&Chunk::dispatch_backward, true), a);
  }
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(a));
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(b));
}

// A host barrier that can be called off: when one EP shard's thread fails, the others must not
// wait for it forever (std::barrier cannot be aborted).
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (aborted_) throw_gpu_failure("profile: another EP shard's thread failed", "");
    const unsigned long long gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      ++gen_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return gen_ != gen || aborted_; });
    if (gen_ == gen) throw_gpu_failure("profile: another EP shard's thread failed", "");
  }
  void abort() {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int count_ = 0;
  unsigned long long gen_ = 0;
  bool aborted_ = false;
};

// Expert parallelism: the EP group's shards of the chunk (shape.ep of them) exchange tokens by
// our all-to-all, each shard driven by its own thread as the replay drives them, every timed
// region run by all shards at once. time_ms's hold can make one shard repeat a run; here a run is
// repeated by every shard or by none, so that their exchanges stay paired. Shard e runs on GPU
// (device + e) % GPUs when there are shape.ep GPUs, on partition 0 of its GPU's `sm_groups` when
// sm_groups > 1 (where the replay puts stage 0's shard when each GPU holds sm_groups ranks: before,
// the shards ran on whole GPUs and the prediction's ops on 132 SMs where the replay's ran on 64);
// else on `device`, on SM partition e of `sm_groups` (>= shape.ep), or on plain streams. The
// result is shard 0's.
ProfileResult profile_chunk_ep(const ChunkShape& shape, int warmup, int reps, int device, int sm_groups) {
  const int E = shape.ep;
  const int ndev = device_count();
  std::vector<int> dev(static_cast<std::size_t>(E));
  for (int e = 0; e < E; ++e) dev[static_cast<std::size_t>(e)] = ndev >= E ? (device + e) % ndev : device;
  const bool one_gpu = ndev < E;
  if (shape.a2a == A2aBackend::nccl) {  // the replay's rule, on the profile's own placement (stage 0's shards)
    const ep::EpPlacement placement{1, E, false, std::vector<int>(static_cast<std::size_t>(E), 0), dev};
    if (const std::string why = ep::nccl_a2a_problem(placement); !why.empty())
      throw InputError("profile " + why, {}, kExitUsage);
  }
  for (int x = 0; x < E; ++x)
    for (int y = 0; y < E; ++y)
      if (!enable_peer_access(dev[static_cast<std::size_t>(x)], dev[static_cast<std::size_t>(y)]))
        throw InputError(fmt::format("profile: expert parallelism needs peer access between GPUs {} and {}",
                                     dev[static_cast<std::size_t>(x)], dev[static_cast<std::size_t>(y)]),
                         {}, kExitGpu);
  // Shard e's partitions and its group in them (one GPU: partition e; a GPU each: partition 0).
  std::vector<std::unique_ptr<SmPartitions>> parts(static_cast<std::size_t>(E));
  if (one_gpu && sm_groups >= E) parts[0] = std::make_unique<SmPartitions>(device, sm_groups);
  if (!one_gpu && sm_groups > 1)
    for (int e = 0; e < E; ++e)
      parts[static_cast<std::size_t>(e)] = std::make_unique<SmPartitions>(dev[static_cast<std::size_t>(e)], sm_groups);
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::vector<std::unique_ptr<Stream>> s1, s2;
  for (int e = 0; e < E; ++e) {
    PPSIM_CUDA_CHECK(cudaSetDevice(dev[static_cast<std::size_t>(e)]));
    ChunkShape sh = shape;
    sh.ep_rank = e;
    chunks.push_back(std::make_unique<Chunk>(sh, 7));
    const SmPartitions* p = one_gpu ? parts[0].get() : parts[static_cast<std::size_t>(e)].get();
    if (p) {
      const int group = one_gpu ? e : 0;
      s1.push_back(Stream::adopt(p->create_stream(group, 0)));
      s2.push_back(Stream::adopt(p->create_stream(group, 0)));
    } else {
      s1.push_back(std::make_unique<Stream>());
      s2.push_back(std::make_unique<Stream>());
    }
  }
  // One group (stage 0), every shard here: peer pointers, the host handshake, NCCL's communicator.
  std::vector<EpWiring::Member> members;
  for (int e = 0; e < E; ++e)
    members.push_back(EpWiring::Member{0, e, dev[static_cast<std::size_t>(e)], chunks[static_cast<std::size_t>(e)].get()});
  EpWiring wiring(1, E, std::vector<int>(static_cast<std::size_t>(E), 0), std::move(members), {shape},
                  /*across_processes=*/false, /*local_ok=*/true, /*handshake=*/true, shape.a2a);

  HostBarrier bar(E);
  std::vector<char> again(static_cast<std::size_t>(E), 0);
  std::vector<ProfileResult> results(static_cast<std::size_t>(E));
  std::mutex error_mu;
  std::exception_ptr first_error;  // the failure itself, not another shard's "aborted"
  auto shard = [&](int e) {
    try {
      PPSIM_CUDA_CHECK(cudaSetDevice(dev[static_cast<std::size_t>(e)]));
      const Timer timed = [&, e](const std::function<void()>& fn, cudaStream_t s) {
        Event start, end;
        Hold hold;
        std::vector<float> ms;
        for (int i = 0; i < warmup + reps;) {
          bar.wait();
          const auto t0 = std::chrono::steady_clock::now();
          hold_stream(s, hold.us());
          start.record(s);
          fn();
          end.record(s);
          const double host_us =
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
          PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
          again[static_cast<std::size_t>(e)] = hold.outlasted(host_us) ? 1 : 0;
          bar.wait();
          const bool repeat = std::find(again.begin(), again.end(), 1) != again.end();
          bar.wait();  // every shard has read `again` before the next run writes it
          if (repeat) continue;
          if (i >= warmup) ms.push_back(end.ms_since(start));
          ++i;
        }
        return median(std::move(ms));
      };
      Chunk& c = *chunks[static_cast<std::size_t>(e)];
      profile_body(c, c.shape(), s1[static_cast<std::size_t>(e)]->get(), s2[static_cast<std::size_t>(e)]->get(), timed,
                   results[static_cast<std::size_t>(e)]);
      if (const unsigned st = c.ep_status(); st != 0)
        throw_gpu_failure(fmt::format("profile: EP shard {}'s all-to-all wait for EP rank {} gave up", e, st - 1000),
                          "");
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!first_error) first_error = std::current_exception();
      }
      bar.abort();
      wiring.abort();
    }
  };
  std::vector<std::thread> threads;
  for (int e = 1; e < E; ++e) threads.emplace_back(shard, e);
  shard(0);
  for (auto& t : threads) t.join();
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  if (first_error) std::rethrow_exception(first_error);
  s1.clear();
  s2.clear();  // before the partitions they run on
  return results[0];
}

// The figures of a profile as text, for the other processes of an MPI job.
std::string encode_profile(const ProfileResult& r) {
  return nlohmann::json{{"f", r.f_ms},   {"i", r.input_grad_ms},          {"w", r.w_ms},
                        {"b", r.b_ms},   {"fb", r.fb_ms},                 {"sub_ops", r.sub_ops_ms},
                        {"dropped", r.dropped_token_fraction}, {"attention", r.attention_backend}}
      .dump();
}

ProfileResult decode_profile(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text);
  ProfileResult r;
  r.f_ms = j.at("f").get<double>();
  r.input_grad_ms = j.at("i").get<double>();
  r.w_ms = j.at("w").get<double>();
  r.b_ms = j.at("b").get<double>();
  r.fb_ms = j.at("fb").get<double>();
  r.sub_ops_ms = j.at("sub_ops").get<std::map<std::string, double>>();
  r.dropped_token_fraction = j.at("dropped").get<double>();
  r.attention_backend = j.at("attention").get<std::string>();
  return r;
}

// Under mpirun (several processes) an EP profile is collective: process 0 profiles the EP group
// in-process (a thread per shard, on the GPUs it sees, as one process does), the others wait and
// then take its figures. Each process profiling on its own GPU at once would time the shards'
// exchanges against each other's profiles, and a process cannot drive another's chunks.
ProfileResult profile_chunk_ep_collective(const ChunkShape& shape, int warmup, int reps, int device, int sm_groups) {
  const mpi::World& w = mpi::world();
  ProfileResult r;
  std::string mine;
  std::exception_ptr failed;
  if (w.rank == 0) {
    try {
      r = profile_chunk_ep(shape, warmup, reps, device, sm_groups);
      mine = "ok" + encode_profile(r);
    } catch (const InputError& e) {
      failed = std::current_exception();
      mine = "no" + e.one_line();
    } catch (...) {
      failed = std::current_exception();
      mine = "no(see process 0's message)";
    }
  }
  const std::vector<std::string> all = mpi::allgather(mine);
  if (failed) std::rethrow_exception(failed);
  if (w.rank == 0) return r;
  const std::string& theirs = all.at(0);
  if (theirs.rfind("ok", 0) != 0)
    throw InputError("profile: the EP profile failed in process 0: " + theirs.substr(std::min<std::size_t>(2, theirs.size())),
                     {}, kExitGpu);
  return decode_profile(theirs.substr(2));
}

}  // namespace

ProfileResult profile_chunk(const ChunkShape& requested, int warmup, int reps, int device, int sm_groups) {
  ChunkShape shape = requested;
  if (shape.ep > 1) shape.ep_microbatches = std::max(2, shape.ep_microbatches);  // micro-batches 0 and 1
  check_profile_request(shape, warmup, reps);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  ProfileResult r;
  if (shape.ep > 1) {
    r = mpi::world().size > 1 ? profile_chunk_ep_collective(shape, warmup, reps, device, sm_groups)
                              : profile_chunk_ep(shape, warmup, reps, device, sm_groups);
  } else {
    Chunk chunk(shape, 7);
    ProfileStreams streams(device, sm_groups, 0, 0);  // a pair's two chunks share one rank's SMs
    profile_body(chunk, shape, streams.s1->get(), streams.s2->get(),
                 [&](const std::function<void()>& fn, cudaStream_t s) { return time_ms(fn, s, warmup, reps); }, r);
    PPSIM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  r.gpu = device_name(device);
  r.shape = shape;
  r.warmup = warmup;
  r.reps = reps;
  return r;
}

namespace {

// Expert parallelism with a GPU per shard and sm_groups ranks on each GPU (PP 2 x EP 2 on two GPUs:
// stage s's shards on partition s of every GPU): the step of sm_groups EP groups at once, each
// shard on its partition, every group exchanging tokens by its all-to-all, against group 0 alone
// (what the EP profile's op costs were timed in). Beside the SMs' shared memory it carries the
// groups' exchanges sharing the GPUs' links and their waits for each other's shards. Also group 0's
// step alone (ms; fed back to back as the replay feeds it: the host's pace and the shards' waits
// for each other are in it). {0, 0} where it does not apply (fewer GPUs than shards, one partition,
// several processes, no peer access).
struct EpSteps {
  double step = 0, alone_ms = 0;
};
EpSteps ep_sharing_step(const ChunkShape& shape, int warmup, int reps, int device, int sm_groups) {
  const int E = shape.ep, ndev = device_count(), G = sm_groups;
  if (E < 2 || ndev < E || G < 2 || mpi::world().size > 1) return {};
  std::vector<int> dev;
  for (int e = 0; e < E; ++e) dev.push_back((device + e) % ndev);
  for (int a : dev)
    for (int b : dev)
      if (!enable_peer_access(a, b)) return {};
  std::vector<std::unique_ptr<SmPartitions>> parts;  // outlive the streams and chunks
  for (int d : dev) parts.push_back(std::make_unique<SmPartitions>(d, G));
  std::vector<std::unique_ptr<Chunk>> chunks;
  std::vector<std::unique_ptr<Stream>> streams;
  std::vector<Feed> feeds;  // group g's shards at [g E, (g + 1) E)
  std::vector<EpWiring::Member> members;
  for (int g = 0; g < G; ++g)
    for (int e = 0; e < E; ++e) {
      const int d = dev[static_cast<std::size_t>(e)];
      PPSIM_CUDA_CHECK(cudaSetDevice(d));
      ChunkShape sh = shape;
      sh.ep_rank = e;
      chunks.push_back(std::make_unique<Chunk>(sh, static_cast<std::uint64_t>(7 + g)));
      streams.push_back(Stream::adopt(parts[static_cast<std::size_t>(e)]->create_stream(g, 0)));
      feeds.push_back(Feed{chunks.back().get(), streams.back()->get(), d});
      members.push_back(EpWiring::Member{g, e, d, chunks.back().get()});
    }
  double alone = 0, both = 0;
  {
    EpWiring wiring(G, E, std::vector<int>(static_cast<std::size_t>(G * E), 0), std::move(members),
                    std::vector<ChunkShape>(static_cast<std::size_t>(G), shape), /*across_processes=*/false,
                    /*local_ok=*/true, /*handshake=*/true, shape.a2a);
    try {
      in_feed_threads(feeds, [&](std::size_t i) {  // valid saved activations, every shard at once
        Chunk& c = *feeds[i].chunk;
        const cudaStream_t st = feeds[i].stream;
        c.fill_input(0, 100, st);
        c.fill_grad_output(0, 200, st);
        c.forward(0, st);
        c.backward_input(0, st);
        PPSIM_CUDA_CHECK(cudaStreamSynchronize(st));
      });
      auto step = [](Chunk& c, cudaStream_t st) {
        c.forward(0, st);
        c.backward_input(0, st);
        c.backward_weight(0, st);
      };
      alone = time_fed_ms(std::vector<Feed>(feeds.begin(), feeds.begin() + E), warmup, reps, step);
      both = time_fed_ms(feeds, warmup, reps, step);
      for (const auto& c : chunks)
        if (const unsigned st = c->ep_status(); st != 0)
          throw_gpu_failure(fmt::format("profile: an EP shard's all-to-all wait for EP rank {} gave up", st - 1000),
                            "");
    } catch (...) {
      wiring.abort();
      throw;
    }
  }
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  streams.clear();  // before the partitions they run on
  return alone > 0 ? EpSteps{both / alone, alone} : EpSteps{};
}

}  // namespace

SharingProfile profile_sharing(const ChunkShape& requested, int warmup, int reps, int device, int sm_groups) {
  ChunkShape shape = requested;
  EpSteps ep;
  if (shape.ep > 1) {  // the step at EP where it can be measured; the tables by kind on the chunk without it
    shape.ep_microbatches = std::max(1, shape.ep_microbatches);
    check_profile_request(shape, warmup, reps);
    ep = ep_sharing_step(shape, warmup, reps, device, sm_groups);
    shape.ep = 1;
    shape.ep_rank = 0;
    shape.a2a = A2aBackend::ours;
  }
  check_profile_request(shape, warmup, reps);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  Chunk one(shape, 7), two(shape, 8);
  ProfileStreams streams(device, sm_groups, 0, sm_groups > 1 ? 1 : 0);  // each chunk its own partition
  const cudaStream_t a = streams.s1->get(), b = streams.s2->get();
  for (Chunk* c : {&one, &two}) {
    c->fill_input(0, 100, a);
    c->fill_grad_output(0, 200, a);
    c->forward(0, a);
    c->backward_input(0, a);
  }
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(a));
  SharingProfile out;
  auto step = [](Chunk& c, cudaStream_t st) {
    c.forward(0, st);
    c.backward_input(0, st);
    c.backward_weight(0, st);
  };
  // Each chunk fed by its own host thread, as the replay's rank threads feed theirs: with one
  // thread enqueueing both chunks (before 2026-11-25), a host slower than two small chunks' GPU
  // time measured its own launches (1.65x for 2-layer chunks on one H100 host where the kernels
  // beside each other took 1.15-1.37x, and DualPipeV predicted +25%).
  const double alone = time_fed_ms({{&one, a, device}}, warmup, reps, step);
  const double both = time_fed_ms({{&one, a, device}, {&two, b, device}}, warmup, reps, step);
  Event fork(false), join(false);
  out.step = ep.step > 0 ? ep.step : alone > 0 ? both / alone : 0;
  out.ep_step = ep.step;
  out.ep_alone_step_ms = ep.alone_ms;
  out.local_step = alone > 0 ? both / alone : 0;

  // By kind, two ways. Both time kOps ops of kind x on stream a while ops of kind y run on b.
  using OpFn = void (Chunk::*)(int, cudaStream_t);
  const OpFn ops[3] = {&Chunk::forward, &Chunk::backward_input, &Chunk::backward_weight};
  constexpr int kOps = 3;
  Event start, stop;
  // (1) The GPU alone: both streams start behind one hold, so everything is enqueued before
  // either starts (what the kernels do to each other: SMs when time-sliced, memory).
  auto gated_ms = [&](int x, int y, int y_count) {
    Hold hold;
    std::vector<float> ms;
    for (int i = 0; i < warmup + reps;) {
      const auto t0 = std::chrono::steady_clock::now();
      hold_stream(a, hold.us());
      fork.record(a);
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(b, fork.get(), 0));
      for (int k = 0; k < y_count; ++k) (two.*ops[y])(0, b);
      start.record(a);
      for (int k = 0; k < kOps; ++k) (one.*ops[x])(0, a);
      stop.record(a);
      join.record(b);
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(a, join.get(), 0));
      const double host_us =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      PPSIM_CUDA_CHECK(cudaStreamSynchronize(a));
      if (hold.outlasted(host_us)) continue;  // the hold ran out while enqueueing: again, held longer
      if (i >= warmup) ms.push_back(stop.ms_since(start) / kOps);
      ++i;
    }
    return median(std::move(ms));
  };
  // (2) As a replay runs: another host thread keeps launching ops of kind y on b (at most two
  // queued ahead of the GPU) while this one launches and times x on a, so the two threads'
  // launches contend in the driver as two ranks' threads do.
  auto threaded_ms = [&](int x, int y) {
    std::vector<float> ms;
    for (int i = 0; i < warmup + reps; ++i) {
      std::atomic<int> launched{0};
      std::atomic<bool> done{false}, other_failed{false};
      std::exception_ptr failed;  // read only after the join
      std::thread other([&] {
        try {
          PPSIM_CUDA_CHECK(cudaSetDevice(device));
          Event marks[2] = {Event(false), Event(false)};
          for (int k = 0; !done.load(); ++k) {
            (two.*ops[y])(0, b);
            marks[k % 2].record(b);
            launched.store(k + 1);
            marks[(k + 1) % 2].sync();  // the op before this one has finished
          }
        } catch (...) {
          failed = std::current_exception();
          other_failed.store(true);
          launched.store(1 << 30);
        }
      });
      try {
        while (launched.load() < 2) std::this_thread::yield();  // y is running on the GPU
        if (!other_failed.load()) {
          start.record(a);
          for (int k = 0; k < kOps; ++k) (one.*ops[x])(0, a);
          stop.record(a);
          stop.sync();
        }
      } catch (...) {
        done.store(true);
        other.join();
        throw;
      }
      done.store(true);
      other.join();
      if (failed) std::rethrow_exception(failed);
      PPSIM_CUDA_CHECK(cudaStreamSynchronize(b));
      if (i >= warmup) ms.push_back(stop.ms_since(start) / kOps);
    }
    return median(std::move(ms));
  };
  // Alone: held until enqueued (the GPU's time, timed as profile_chunk times op costs).
  for (int x = 0; x < 3; ++x)
    out.alone_ms[static_cast<std::size_t>(x)] =
        time_ms([&] { for (int k = 0; k < kOps; ++k) (one.*ops[x])(0, a); }, a, warmup, reps) / kOps;
  for (int x = 0; x < 3; ++x)
    for (int y = 0; y < 3; ++y) {
      const std::size_t i = static_cast<std::size_t>(3 * x + y);
      const double tx = out.alone_ms[static_cast<std::size_t>(x)], ty = out.alone_ms[static_cast<std::size_t>(y)];
      // y outlasts x even if x runs 3x slower than alone and y not at all
      const int y_count = ty > 0 ? static_cast<int>(std::ceil(3.0 * kOps * tx / ty)) + 1 : kOps;
      out.by_kind_gpu[i] = tx > 0 ? gated_ms(x, y, y_count) / tx : 0;
      out.by_kind[i] = tx > 0 ? threaded_ms(x, y) / tx : 0;
    }
  return out;
}

std::vector<std::array<double, 3>> profile_partitions(const ChunkShape& shape, int warmup, int reps, int device,
                                                      int sm_groups) {
  check_profile_request(shape, warmup, reps);
  if (sm_groups < 1) throw InputError("profile_partitions: sm_groups must be >= 1", {}, kExitUsage);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  Chunk chunk(shape, 7);
  SmPartitions parts(device, sm_groups);
  std::vector<std::array<double, 3>> out;
  for (int g = 0; g < sm_groups; ++g) {
    auto st = Stream::adopt(parts.create_stream(g, 0));  // destroyed before the partitions
    const cudaStream_t s = st->get();
    chunk.fill_input(0, 100, s);
    chunk.fill_grad_output(0, 200, s);
    chunk.forward(0, s);
    chunk.backward_input(0, s);
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
    out.push_back({time_ms([&] { chunk.forward(0, s); }, s, warmup, reps),
                   time_ms([&] { chunk.backward_input(0, s); }, s, warmup, reps),
                   time_ms([&] { chunk.backward_weight(0, s); }, s, warmup, reps)});
  }
  return out;
}

namespace {

// One GPU's side of the co-run profile: its chunk, a compute stream, a copy stream, and the
// buffers its messages leave from and arrive into (one micro-batch's activations each).
struct CorunSide {
  int device = 0;
  std::size_t bytes = 0;
  std::unique_ptr<Chunk> chunk;
  std::unique_ptr<Stream> compute, copy;
  DeviceBuffer<char> send, recv;
  DeviceBuffer<unsigned long long> clock;  // clock_probe's cycles and ns
  std::unique_ptr<Event> produced;         // made on this GPU (an event records on its own GPU's streams)

  // The SM clock the last clock_probe read (MHz; 0 if it read no time).
  double clock_mhz() const {
    const std::vector<unsigned long long> c = clock.to_host();
    return c[1] > 0 ? 1e3 * static_cast<double>(c[0]) / static_cast<double>(c[1]) : 0.0;
  }

  CorunSide(const ChunkShape& shape, int dev, std::uint64_t seed, std::size_t message_bytes)
      : device(dev), bytes(message_bytes) {
    PPSIM_CUDA_CHECK(cudaSetDevice(dev));
    chunk = std::make_unique<Chunk>(shape, seed);
    compute = std::make_unique<Stream>();
    copy = std::make_unique<Stream>();
    produced = std::make_unique<Event>(false);
    send.resize(bytes);
    recv.resize(bytes);
    clock.resize(2);
    const cudaStream_t s = compute->get();
    send.zero(s);
    chunk->fill_input(0, 100 + seed, s);
    chunk->fill_grad_output(0, 200 + seed, s);
    chunk->forward(0, s);
    chunk->backward_input(0, s);
    PPSIM_CUDA_CHECK(cudaStreamSynchronize(s));
  }
  GraphCache graphs;  // validate --launch graphs: each op one graph launch, as the replay's actions
  void op(int kind) {
    const cudaStream_t s = compute->get();
    auto enqueue = [&] {
      if (kind == 0)
        chunk->forward(0, s);
      else if (kind == 1)
        chunk->backward_input(0, s);
      else
        chunk->backward_weight(0, s);
    };
    as_launched(graphs, static_cast<std::uint64_t>(kind), s, enqueue);  // micro-batch 0's buffers throughout
  }
  // Op `kind`, then its message into `to`'s receive buffer on this GPU's copy stream once the op
  // has ended (the peer transport's order: an event wait, a peer copy).
  void op_and_send(int kind, const CorunSide& to) {
    op(kind);
    produced->record(compute->get());
    PPSIM_CUDA_CHECK(cudaStreamWaitEvent(copy->get(), produced->get(), 0));
    PPSIM_CUDA_CHECK(cudaMemcpyPeerAsync(to.recv.get(), to.device, send.get(), device, bytes, copy->get()));
  }
};

constexpr int kCorunOps = 3;  // ops of one kind per timed region

// ms per op of kind x on `me`, each followed by its message to `peer`, each region held until
// this thread has enqueued all of it (the GPU's time, as profile_chunk times op costs): the
// median of `reps` regions after `warmup`.
double held_ms(CorunSide& me, const CorunSide& peer, int x, int warmup, int reps) {
  PPSIM_CUDA_CHECK(cudaSetDevice(me.device));
  return time_ms(
             [&] {
               for (int k = 0; k < kCorunOps; ++k) me.op_and_send(x, peer);
             },
             me.compute->get(), warmup, reps, false) /
         kCorunOps;
}

// A sustained run on `me`, as a replay's rank runs: F, I, W in turn `rounds` times, each op
// followed by its message to `peer` and bracketed by events, fed back to back by this thread
// (never waiting for the GPU), so that the GPU settles at the clock it sustains under the load.
// The median ms per kind over the last two thirds of the ops goes into `ms`. With `probe`, a
// spin kernel on a side stream over those reads the SM clock (MHz, returned; else 0): resident
// beside the ops it can hold a CTA of a one-wave kernel off its SM, so a probed run is not timed.
double sustained_ms(CorunSide& me, const CorunSide& peer, int rounds, const CorunProfile& p, bool probe,
                    std::array<double, 3>& ms) {
  PPSIM_CUDA_CHECK(cudaSetDevice(me.device));
  const int n = 3 * rounds, first = n / 3;
  std::vector<Event> marks(static_cast<std::size_t>(n + 1));
  Stream side;
  const cudaStream_t s = me.compute->get();
  double probe_us = 0;  // most of the kept ops' time alone
  for (int k = first; k < n; ++k) probe_us += 0.8e3 * p.alone_ms[static_cast<std::size_t>(k % 3)];
  for (int k = 0; k < n; ++k) {
    marks[static_cast<std::size_t>(k)].record(s);
    if (probe && k == first) {
      PPSIM_CUDA_CHECK(cudaStreamWaitEvent(side.get(), marks[static_cast<std::size_t>(k)].get(), 0));
      clock_probe(side.get(), probe_us, me.clock.get());
    }
    me.op_and_send(k % 3, peer);
  }
  marks.back().record(s);
  marks.back().sync();
  PPSIM_CUDA_CHECK(cudaStreamSynchronize(me.copy->get()));
  side.sync();
  std::array<std::vector<float>, 3> by_kind;
  for (int k = first; k < n; ++k)
    by_kind[static_cast<std::size_t>(k % 3)].push_back(
        marks[static_cast<std::size_t>(k + 1)].ms_since(marks[static_cast<std::size_t>(k)]));
  for (std::size_t x = 0; x < 3; ++x) ms[x] = median(std::move(by_kind[x]));
  return probe ? me.clock_mhz() : 0.0;
}

// The sustained run at duty `duty` (< 1) on `me`: F, I, W in turn `rounds` times, each op followed
// by its message to `peer` and bracketed by events, and each released by the host (a wait on a
// word in host memory, enqueued one op ahead, so no launch lands in what is timed) once the op
// before it has ended and a gap of its time * (1 - duty) / duty has passed on the host's clock
// (less how much the GPU's gaps have outlasted the host's waits: seeing the end, the release).
// Nothing runs on the GPU in the gaps. The median ms per kind over the last two thirds into `ms`,
// the SM clock (MHz) a 30 us one-thread probe read right after the last op into `mhz`; returns the
// duty measured over the kept ops (their time over the wall time from the first's start to the
// last's end).
double duty_ms(CorunSide& me, const CorunSide& peer, int rounds, double duty, std::array<double, 3>& ms, double& mhz) {
  PPSIM_CUDA_CHECK(cudaSetDevice(me.device));
  const int n = 3 * rounds, first = n / 3;
  const cudaStream_t s = me.compute->get();
  replay::Words gate(1);
  std::vector<Event> start(static_cast<std::size_t>(n)), end(static_cast<std::size_t>(n));
  auto enqueue = [&](int k) {
    gate.wait(s, 0, static_cast<std::uint32_t>(k + 1));
    start[static_cast<std::size_t>(k)].record(s);
    me.op_and_send(k % 3, peer);
    end[static_cast<std::size_t>(k)].record(s);
    if (k == n - 1) clock_probe(s, 30, me.clock.get());
  };
  double late_ms = 0;  // how much longer the GPU's gaps ran than the host waited (seeing the end, the release)
  double waited_ms = 0;
  try {
    enqueue(0);
    gate.store(0, 1);
    for (int k = 0; k < n; ++k) {
      if (k + 1 < n) enqueue(k + 1);
      const std::size_t i = static_cast<std::size_t>(k);
      end[i].sync();
      const auto ended = std::chrono::steady_clock::now();
      if (k > 0) late_ms = 0.5 * late_ms + 0.5 * (start[i].ms_since(end[i - 1]) - waited_ms);
      waited_ms = std::max(0.0, end[i].ms_since(start[i]) * (1 - duty) / duty - late_ms);
      while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ended).count() < waited_ms) {
      }
      if (k + 1 < n) gate.store(0, static_cast<std::uint32_t>(k + 2));
    }
  } catch (...) {
    gate.store_all(~0u);             // release what waits, so the word outlives every wait on it
    (void)cudaStreamSynchronize(s);  // best effort: the error above is the one to report
    throw;
  }
  me.compute->sync();
  me.copy->sync();
  std::array<std::vector<float>, 3> by_kind;
  double busy = 0;
  for (int k = first; k < n; ++k) {
    const float t = end[static_cast<std::size_t>(k)].ms_since(start[static_cast<std::size_t>(k)]);
    by_kind[static_cast<std::size_t>(k % 3)].push_back(t);
    busy += t;
  }
  for (std::size_t x = 0; x < 3; ++x) ms[x] = median(std::move(by_kind[x]));
  mhz = me.clock_mhz();
  const double wall = end.back().ms_since(start[static_cast<std::size_t>(first)]);
  return wall > 0 ? busy / wall : 0.0;
}

// Each kind's held and sustained times on `me` against alone (into `held`, `sustained`), and the
// sustained run at each of kCorunDuties (into levels' `idle` or `busy` side: `beside_busy`); returns
// the sustained run's SM clock (MHz).
double corun_kinds(CorunSide& me, const CorunSide& peer, CorunProfile& p, int warmup, int reps,
                   std::array<double, 3>& held, std::array<double, 3>& sustained, bool beside_busy) {
  for (std::size_t x = 0; x < 3; ++x) held[x] = held_ms(me, peer, static_cast<int>(x), warmup, reps) / p.alone_ms[x];
  std::array<double, 3> ms{}, probed{};
  const int rounds = std::max(12, reps + warmup);
  sustained_ms(me, peer, rounds, p, false, ms);
  for (std::size_t x = 0; x < 3; ++x) sustained[x] = ms[x] / p.alone_ms[x];
  const double mhz = sustained_ms(me, peer, rounds, p, true, probed);  // the same run again, for the clock
  if (!replay::value_waits_unavailable().empty()) return mhz;
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t l = 0; l < kCorunDuties.size(); ++l) {
    CorunDutyLevel& level = p.duty[l];
    // Twice the sustained run's ops: the clock settles to the level from the one before it.
    const double measured =
        duty_ms(me, peer, 2 * rounds, kCorunDuties[l], ms, beside_busy ? level.clock_busy_mhz : level.clock_idle_mhz);
    (beside_busy ? level.duty_busy : level.duty_idle) = measured;
    for (std::size_t x = 0; x < 3; ++x) (beside_busy ? level.busy : level.idle)[x] = ms[x] / p.alone_ms[x];
  }
  p.duty_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return mhz;
}

// Tells a thread to stop and joins it when leaving a scope.
struct StopAndJoin {
  std::atomic<bool>& done;
  std::thread& thread;
  ~StopAndJoin() {
    done.store(true);
    if (thread.joinable()) thread.join();
  }
};

// The peer GPU kept busy by its own host thread until `done`: F, I, W in turn, each followed by
// its message into `to` (at most two ops queued ahead of the GPU, as a replay's thread runs).
void keep_busy(CorunSide& me, const CorunSide& to, const std::atomic<bool>& done, std::atomic<int>& launched) {
  PPSIM_CUDA_CHECK(cudaSetDevice(me.device));
  Event marks[2] = {Event(false), Event(false)};
  for (int k = 0; !done.load(); ++k) {
    me.op_and_send(k % 3, to);
    marks[k % 2].record(me.compute->get());
    launched.store(k + 1);
    marks[(k + 1) % 2].sync();
  }
  me.compute->sync();
  me.copy->sync();
}

}  // namespace

CorunProfile profile_corun(const ChunkShape& shape, int warmup, int reps, int device, int peer) {
  check_profile_request(shape, warmup, reps);
  const int n = device_count();
  if (peer == device || peer < 0 || peer >= n || device < 0 || device >= n)
    throw InputError(
        fmt::format("profile: the co-run profile needs two GPUs (device {}, peer {}; {} visible)", device, peer, n), {},
        kExitUsage);
  enable_peer_access(device, peer);  // without P2P the copies still run, staged by the driver
  enable_peer_access(peer, device);
  CorunProfile out;
  out.device = device;
  out.peer = peer;
  out.message_bytes = static_cast<std::size_t>(shape.tokens()) * static_cast<std::size_t>(shape.hidden) * 2;
  CorunSide me(shape, device, 7, out.message_bytes), other(shape, peer, 8, out.message_bytes);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  for (int x = 0; x < 3; ++x)
    out.alone_ms[static_cast<std::size_t>(x)] = time_ms(
                                                    [&] {
                                                      for (int k = 0; k < kCorunOps; ++k) me.op(x);
                                                    },
                                                    me.compute->get(), warmup, reps, false) /
                                                kCorunOps;
  out.clock_idle_mhz = corun_kinds(me, other, out, warmup, reps, out.idle_held, out.idle, false);
  std::atomic<bool> done{false};
  std::atomic<int> launched{0};
  std::exception_ptr failed;
  std::thread busy([&] {
    try {
      keep_busy(other, me, done, launched);
    } catch (...) {
      failed = std::current_exception();
      launched.store(1 << 30);
    }
  });
  {
    const StopAndJoin stop{done, busy};                     // also when the timing throws
    while (launched.load() < 2) std::this_thread::yield();  // the peer is running its mix
    out.clock_busy_mhz = corun_kinds(me, other, out, warmup, reps, out.busy_held, out.busy, true);
  }
  if (failed) std::rethrow_exception(failed);
  PPSIM_CUDA_CHECK(cudaSetDevice(device));
  return out;
}

std::string profile_yaml(const ProfileResult& r) {
  const ChunkShape& s = r.shape;
  std::string y;
  y += "# ppsim cost profile, measured on the GPU by profile_chunk (src/cuda_validate/profile.cc).\n";
  y += fmt::format("# median of {} repetitions after {} warm-up runs; attention: {}.\n", r.reps, r.warmup,
                   r.attention_backend);
  y += "# B = full backward (input-grad + weight-grad), W = weight-grad, FB = overlapped F and B pair.\n";
  y += fmt::format("# input-grad alone (I): {:.4f} ms", r.input_grad_ms);
  if (s.is_moe()) y += fmt::format("; dropped token assignments: {:.4f}", r.dropped_token_fraction);
  y += "\n";
  y += fmt::format("gpu: {}\n", yaml_quote(r.gpu));
  y += "shape:\n";
  y += fmt::format("  hidden: {}\n  heads: {}\n  kv_heads: {}\n  head_dim: {}\n  ffn_hidden: {}\n", s.hidden, s.heads,
                   s.kv_heads, s.head_dim, s.ffn_hidden);
  y += fmt::format("  seq_len: {}\n  micro_batch: {}\n  layers: {}\n  experts: {}\n  top_k: {}\n", s.seq_len,
                   s.micro_batch, s.layers, s.experts, s.top_k);
  y += fmt::format("  expert_ffn_hidden: {}\n", s.expert_ffn_hidden);
  if (s.is_moe()) y += fmt::format("  capacity_factor: {}\n", s.capacity_factor);
  y += "op_ms:\n";
  y += fmt::format("  F: {:.4f}\n  B: {:.4f}\n  W: {:.4f}\n  FB: {:.4f}\n", r.f_ms, r.b_ms, r.w_ms, r.fb_ms);
  y += "sub_ops_ms:\n";
  static const char* kOrder[] = {"attn_fwd", "dispatch_fwd", "mlp_fwd", "combine_fwd", "combine_bwd", "mlp_bwd",
                                 "dispatch_bwd", "attn_bwd", "attn_w", "mlp_w"};
  for (const char* k : kOrder)
    if (auto it = r.sub_ops_ms.find(k); it != r.sub_ops_ms.end()) y += fmt::format("  {}: {:.4f}\n", k, it->second);
  return y;
}

int run_profile(const ProfileRequest& req) {
  ProfileResult r = profile_chunk(req.shape, req.warmup, req.reps, req.device);
  const std::string yaml = profile_yaml(r);
  if (req.output_path.empty() || req.output_path == "-") {
    std::fputs(yaml.c_str(), stdout);
  } else {
    write_file_atomically(req.output_path, yaml);
  }
  const double tflops = r.shape.forward_flops() / (r.f_ms * 1e-3) / 1e12;
  std::fprintf(stderr, "profile on %s (attention: %s): F %.3f ms (%.0f TFLOP/s), I %.3f ms, W %.3f ms, B %.3f ms, "
               "FB %.3f ms (F+B %.3f ms)\n",
               r.gpu.c_str(), r.attention_backend.c_str(), r.f_ms, tflops, r.input_grad_ms, r.w_ms, r.b_ms, r.fb_ms,
               r.f_ms + r.b_ms);
  for (const auto& [k, v] : r.sub_ops_ms) std::fprintf(stderr, "  %-13s %8.3f ms\n", k.c_str(), v);
  if (!req.output_path.empty() && req.output_path != "-")
    std::fprintf(stderr, "wrote %s\n", req.output_path.c_str());
  return kExitOk;
}

}  // namespace ppsim::gpu
