// `ppsim search` end to end: the schedule file it writes replays with `simulate --schedule-file`
// to the makespan it printed, and bad flags are one line with the documented exit code and no
// output file.
#include <catch.h>

#include <filesystem>

#include "robustness/run_ppsim.h"

using ppsim::robust::run_ppsim;
using ppsim::robust::Scratch;

TEST_CASE("ppsim search: the written CSV simulates to the printed makespan", "[search][cli]") {
  Scratch s("search_cli");
  // P=4, M=8, W-heavy: ZB-H1's bubble formula fails (W > b); cap 4 = 1F1B's rank 0 peak.
  const auto r = run_ppsim(s, "search -p 4 -m 8 --times F=1,B=3,W=2 --memory-cap 4 -j 2 -q --out s.csv --svg s.svg");
  INFO(r.err);
  REQUIRE(r.code == 0);
  REQUIRE(std::filesystem::exists(s.path("s.csv")));
  REQUIRE(std::filesystem::exists(s.path("s.svg")));
  // The "searched" row's makespan, then the replay's.
  const auto row = r.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  std::string mk;
  {
    std::size_t i = r.out.find_first_not_of(' ', row + 9);
    mk = r.out.substr(i, r.out.find(' ', i) - i);
  }
  const auto sim = run_ppsim(s, "simulate --schedule-file s.csv --times F=1,B=3,W=2 --format csv");
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  REQUIRE(sim.out.find("," + mk + ",") != std::string::npos);
}

TEST_CASE("ppsim search with the overlap model: the written CSV simulates to the printed makespan", "[search][cli]") {
  // The unit overlap flags, as compare takes them: each F and backward carries 4 layers'
  // dispatch and combine (0.3 each), exposed unless a pair hides them.
  Scratch s("search_cli_overlap");
  const char* flags = "--times F=1,B=2,W=1 --a2a 0.3 --layers 4";
  const auto r = run_ppsim(s, std::string("search -p 4 -m 8 ") + flags + " -j 2 -q --out s.csv");
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto row = r.out.find("\nsearched");
  REQUIRE(row != std::string::npos);
  const std::size_t i = r.out.find_first_not_of(' ', row + 9);
  const std::string mk = r.out.substr(i, r.out.find(' ', i) - i);
  const auto sim = run_ppsim(s, std::string("simulate --schedule-file s.csv --format csv ") + flags);
  INFO(sim.out);
  REQUIRE(sim.code == 0);
  REQUIRE(sim.out.find("," + mk + ",") != std::string::npos);
  // Without the overlap flags the same file is faster: the all-to-alls were in the makespan.
  const auto plain = run_ppsim(s, "simulate --schedule-file s.csv --format csv --times F=1,B=2,W=1");
  REQUIRE(plain.code == 0);
  REQUIRE(plain.out.find("," + mk + ",") == std::string::npos);
}

TEST_CASE("ppsim search: bad flags are one line, exit 2, no file", "[search][cli]") {
  Scratch s("search_cli_bad");
  for (const char* args :
       {"search -p 4 -m 8 --placement diagonal --out s.csv", "search -p 4 -m 8 --memory-cap -1 --out s.csv",
        "search -p 4 -m 8 --time-limit 0 --out s.csv", "search -p 4 -m 8 --format yaml --out s.csv",
        // 3 layers do not split into a V's or two pipes' 2 chunks per rank; --a2a with a config
        "search -p 4 -m 8 --a2a 0.3 --layers 3 --out s.csv",
        "search " PPSIM_SOURCE_DIR "/configs/small-2gpu.yaml --a2a 0.3 --out s.csv"}) {
    const auto r = run_ppsim(s, args);
    INFO(args << "\n" << r.err);
    REQUIRE(r.code == 2);
    REQUIRE(r.one_error_line());
    REQUIRE_FALSE(std::filesystem::exists(s.path("s.csv")));
  }
  // A cap below one micro-batch: no schedule fits: bad input (3), no file.
  const auto r = run_ppsim(s, "search -p 4 -m 8 --memory-cap 0.5 -q --out s.csv");
  INFO(r.err);
  REQUIRE(r.code == 3);
  REQUIRE(r.one_error_line());
  REQUIRE_FALSE(std::filesystem::exists(s.path("s.csv")));
}
