// Golden op orders: DualPipe as DeepSeek's dualpipe.py step() orders it (tests/golden/,
// produced by emulating that function's control flow), and ZB-V, DualPipeV and interleaved 1F1B
// as PyTorch 2.11's torch.distributed.pipelining produces them (../shared/reference/, idle
// steps dropped). PyTorch's Interleaved1F1B equals Megatron's only for M a multiple of P.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "catch.h"
#include "schedules/notation.h"
#include "test_util.h"

using namespace ppsim;
using namespace ppsim::test;

namespace {

std::vector<std::string> ops_of(const Schedule& s, int rank) {
  std::vector<std::string> out;
  for (const auto& a : s.ranks[rank]) out.push_back(format_action(a));
  return out;
}

nlohmann::json torch_orders() {
  const std::string path = std::string(PPSIM_SOURCE_DIR) + "/../shared/reference/torch_pipeline_orders.json";
  const std::string text = read_file(path);
  if (text.empty()) return nullptr;
  return nlohmann::json::parse(text)["orders"];
}

}  // namespace

TEST_CASE("dualpipe matches DeepSeek's reference order", "[schedules][golden]") {
  for (auto [p, m] : {std::pair{8, 20}, std::pair{4, 8}}) {
    const std::string golden = read_file(std::string(PPSIM_SOURCE_DIR) + fmt::format("/tests/golden/dualpipe_p{}_m{}.csv", p, m));
    REQUIRE(!golden.empty());
    const Schedule s = make_schedule("dualpipe", ScheduleParams{p, m, 0, 0});
    REQUIRE(schedule_to_csv(s) == golden);
  }
}

TEST_CASE("zbv, dualpipev and interleaved 1f1b match PyTorch's orders", "[schedules][golden]") {
  const nlohmann::json orders = torch_orders();
  if (orders.is_null()) PPSIM_SKIP("../shared/reference/torch_pipeline_orders.json not found beside the checkout");
  int compared = 0;
  for (auto it = orders.begin(); it != orders.end(); ++it) {
    const std::string key = it.key();  // Class|pp=P|m=M|vpp=2
    int p = 0, m = 0, v = 0;
    const std::string cls = key.substr(0, key.find('|'));
    std::sscanf(key.c_str() + cls.size(), "|pp=%d|m=%d|vpp=%d", &p, &m, &v);
    std::string family;
    if (cls == "ScheduleZBVZeroBubble") family = "zbv";
    else if (cls == "ScheduleDualPipeV") family = "dualpipev";
    else if (cls == "ScheduleInterleaved1F1B" && m % p == 0) family = "interleaved-1f1b";
    else continue;
    INFO(key);
    const Schedule s = make_schedule(family, ScheduleParams{p, m, v, 0});
    for (int r = 0; r < p; ++r) {
      std::vector<std::string> expected;
      for (const auto& a : it.value()[std::to_string(r)])
        if (!a.is_null()) expected.push_back(a.get<std::string>());
      INFO("rank " << r);
      REQUIRE(ops_of(s, r) == expected);
    }
    ++compared;
  }
  // 6 + 5 ... : every ZBV and DualPipeV key, and the interleaved keys with M a multiple of P.
  REQUIRE(compared >= 40);
}
