// The profiler on a small chunk: every op kind timed (positive, finite) and the cost-profile
// YAML carries the keys the simulator reads (gpu, shape, op_ms {F, B, W, FB}, sub_ops_ms).
#include <cmath>

#include <yaml-cpp/yaml.h>

#include "core/error.h"
#include "gpu_test_util.h"

using namespace ppsim::gpu;

TEST_CASE("profile_chunk times F, B, W, FB and sub-ops and writes the cost-profile YAML", "[gpu][profile]") {
  PPSIM_REQUIRE_GPU();
  for (int experts : {0, 8}) {
    ChunkShape s;
    s.hidden = 256;
    s.heads = 4;
    s.kv_heads = 2;
    s.head_dim = 64;
    s.ffn_hidden = 512;
    s.seq_len = 128;
    s.micro_batch = 2;
    s.layers = 2;
    if (experts) {
      s.experts = experts;
      s.top_k = 2;
      s.expert_ffn_hidden = 128;
    }
    INFO("experts " << experts);
    const ProfileResult r = profile_chunk(s, 1, 3);
    for (double v : {r.f_ms, r.input_grad_ms, r.w_ms, r.b_ms, r.fb_ms}) {
      CHECK(std::isfinite(v));
      CHECK(v > 0);
    }
    CHECK(r.sub_ops_ms.size() == (experts ? 10u : 6u));
    const YAML::Node y = YAML::Load(profile_yaml(r));
    CHECK(y["gpu"].as<std::string>() == r.gpu);
    CHECK(y["shape"]["hidden"].as<int>() == 256);
    CHECK(y["shape"]["experts"].as<int>() == experts);
    for (const char* k : {"F", "B", "W", "FB"}) CHECK(y["op_ms"][k].as<double>() > 0);
    CHECK(y["sub_ops_ms"]["attn_fwd"].as<double>() > 0);
    CHECK(y["sub_ops_ms"]["mlp_w"].as<double>() > 0);
    if (experts) CHECK(y["sub_ops_ms"]["dispatch_bwd"].as<double>() > 0);
  }
}

// Expert parallelism: two EP shards of the chunk, each driven by its own thread, exchange tokens
// by our all-to-all in every timed region (a run repeated by one shard is repeated by both, or
// their exchanges would no longer pair up and a wait would give up). Each sub-op is a part of the
// forward, so the forward's time is their sum, up to the launches and holds between them.
TEST_CASE("profile_chunk with ep 2: the shards time their ops in lockstep through the all-to-all",
          "[gpu][profile][ep]") {
  PPSIM_REQUIRE_GPU();
  ChunkShape s = test::small_moe_shape();
  s.ep = 2;
  s.comm_sms = 4;
  for (int groups : {0, 2}) {
    INFO("SM partitions " << groups);
    const ProfileResult r = profile_chunk(s, 1, 3, 0, groups);
    for (double v : {r.f_ms, r.input_grad_ms, r.w_ms, r.b_ms, r.fb_ms}) {
      CHECK(std::isfinite(v));
      CHECK(v > 0);
    }
    REQUIRE(r.sub_ops_ms.size() == 10u);
    const double parts = r.sub_ops_ms.at("attn_fwd") + r.sub_ops_ms.at("dispatch_fwd") + r.sub_ops_ms.at("mlp_fwd") +
                         r.sub_ops_ms.at("combine_fwd");
    CHECK(r.f_ms > 0.75 * parts);
    CHECK(r.f_ms < 1.33 * parts);
    CHECK(r.shape.ep == 2);
  }
  s.experts = 6;
  s.ep = 4;  // does not divide the experts: refused before anything runs
  CHECK_THROWS_AS(profile_chunk(s, 1, 3), ppsim::InputError);
}

// The GPU's sharing at EP (PP 2 x EP 2 on two GPUs: stage s's shards on partition s of both GPUs):
// the step of both stages' EP groups at once against one alone, and group 0's step fed back to back
// (the pace: at least its ops' GPU time held until enqueued, less noise; a step 20x that, or a
// sharing step outside 0.5..20, measured something else). Fewer than two GPUs: not measured (0),
// and the step is the one without EP.
TEST_CASE("profile_sharing with ep 2: the EP groups' step and the group's fed pace", "[gpu][profile][ep]") {
  PPSIM_REQUIRE_GPU();
  if (!sm_partition_check(0, 2).empty()) PPSIM_SKIP("the GPU cannot be split into two SM partitions");
  ChunkShape s = test::small_moe_shape();
  s.ep = 2;
  s.comm_sms = 4;
  const SharingProfile sp = profile_sharing(s, 1, 3, 0, 2);
  CHECK(sp.local_step > 0.5);
  CHECK(sp.local_step < 20);
  if (device_count() < 2) {
    CHECK(sp.ep_step == 0);
    CHECK(sp.ep_alone_step_ms == 0);
    CHECK(sp.step == sp.local_step);
    return;
  }
  CHECK(sp.step == sp.ep_step);
  CHECK(sp.ep_step > 0.5);
  CHECK(sp.ep_step < 20);
  const ProfileResult r = profile_chunk(s, 1, 3, 0, 2);
  const double held = r.f_ms + r.input_grad_ms + r.w_ms;
  CHECK(sp.ep_alone_step_ms > 0.7 * held);
  CHECK(sp.ep_alone_step_ms < 20 * held);
}

// The co-run profile on two GPUs (issue 47): each kind alone, beside an idle peer and beside a
// busy one; factors are times against alone (positive and finite; a GPU that ran an op in less
// than half its alone time, or more than 20x, measured something else), and the spin kernel read
// an SM clock an H100/H200 can run at; no duty level ran busier than asked. A peer equal to the
// device is refused with exit 2.
TEST_CASE("profile_corun times F, I, W beside an idle and a busy peer GPU and reads the SM clock",
          "[gpu][profile][corun]") {
  PPSIM_REQUIRE_GPU();
  if (device_count() < 2) PPSIM_SKIP("needs two GPUs (" << device_count() << " visible)");
  const ChunkShape s = test::small_moe_shape();
  const CorunProfile p = profile_corun(s, 1, 3, 0, 1);
  CHECK(p.message_bytes == static_cast<std::size_t>(s.tokens() * s.hidden * 2));
  for (std::size_t k = 0; k < 3; ++k) {
    INFO("kind " << k);
    CHECK(p.alone_ms[k] > 0);
    for (double f : {p.idle[k], p.busy[k]}) {
      CHECK(std::isfinite(f));
      CHECK(f > 0.5);
      CHECK(f < 20);
    }
  }
  for (double mhz : {p.clock_idle_mhz, p.clock_busy_mhz}) {
    CHECK(mhz > 300);
    CHECK(mhz < 3500);
  }
  // The duty levels: the host's gaps leave the GPU idle for at least about the share asked (each
  // gap follows its op's time; at this test's ops of tens of us the host's lag in seeing an op end
  // and releasing the next can outlast the gap, so a level may run below its duty: at ops of
  // 0.2-4 ms validate's levels ran within 0.005 of theirs on two H200s), at factors and
  // clocks as above.
  CHECK(p.duty_ms > 0);
  for (std::size_t l = 0; l < kCorunDuties.size(); ++l) {
    INFO("duty level " << kCorunDuties[l]);
    const CorunDutyLevel& d = p.duty[l];
    for (double measured : {d.duty_idle, d.duty_busy}) {
      CHECK(measured > 0.05);
      CHECK(measured < kCorunDuties[l] + 0.05);
    }
    for (std::size_t k = 0; k < 3; ++k)
      for (double f : {d.idle[k], d.busy[k]}) {
        CHECK(f > 0.5);
        CHECK(f < 20);
      }
    for (double mhz : {d.clock_idle_mhz, d.clock_busy_mhz}) {
      CHECK(mhz > 300);
      CHECK(mhz < 3500);
    }
  }
  try {
    (void)profile_corun(s, 1, 3, 0, 0);
    FAIL("a peer equal to the device was accepted");
  } catch (const ppsim::InputError& e) {
    CHECK(e.exit_code() == ppsim::kExitUsage);
  }
}
