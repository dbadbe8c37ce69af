// Input files read whole (src/core/text_file.cc): a file of exactly the limit is read, one byte
// over is refused without reading it all, and each refusal is one line with its exit code.
#include "core/text_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "catch.h"
#include "test_util.h"

using namespace ppsim;

namespace {

// A scratch folder of this process, removed at the end.
struct Dir {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("ppsim_text_file_" + std::to_string(::getpid()));
  Dir() { std::filesystem::create_directories(path); }
  ~Dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = (path / name).string();
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
};

constexpr std::size_t kMiB = 1u << 20;

}  // namespace

TEST_CASE("read_capped: at most the limit is whole, one byte over is not", "[core][text_file]") {
  // 3 bytes against limits 3 (whole) and 2 (over: the text holds more than 2 bytes).
  std::istringstream a("abc");
  std::string t;
  REQUIRE(read_capped(a, 3, t));
  REQUIRE(t == "abc");
  std::istringstream b("abc");
  std::string u;
  REQUIRE_FALSE(read_capped(b, 2, u));
  REQUIRE(u.size() > 2);
  // A stream far over the limit is read to one buffer past it, not to its end: 64 KiB per read,
  // so 2 MiB against a 1-byte limit stops after the first read.
  std::istringstream big(std::string(2 * kMiB, 'x'));
  std::string v;
  REQUIRE_FALSE(read_capped(big, 1, v));
  REQUIRE(v.size() <= 64u * 1024u);
}

TEST_CASE("read_text_file: the text, or one line naming the file and what it is", "[core][text_file]") {
  const Dir d;
  const std::string one = d.write("one.txt", std::string(kMiB, 'a'));  // exactly 1 MiB
  REQUIRE(read_text_file(one, {}, "thing file", kMiB).size() == kMiB);
  const std::string over = d.write("over.txt", std::string(kMiB + 1, 'a'));
  auto [code, line] = test::error_of([&] { read_text_file(over, {}, "thing file", kMiB, ": not a thing"); });
  REQUIRE(code == kExitLimit);
  REQUIRE(line == over + ": '" + over + "' is over 1 MiB: not a thing");
  // Missing: exit 4 at the location given (the config's key), naming the path.
  const std::string missing = (d.path / "none.txt").string();
  std::tie(code, line) =
      test::error_of([&] { read_text_file(missing, SourceLoc{"c.yaml", 3, 7}, "thing file", kMiB); });
  REQUIRE(code == kExitIo);
  REQUIRE(line == "c.yaml:3:7: cannot open the thing file '" + missing + "'");
  // A folder opens but cannot be read: exit 4 too.
  const std::string folder = d.path.string();
  std::tie(code, line) = test::error_of([&] { read_text_file(folder, {}, "thing file", kMiB); });
  REQUIRE(code == kExitIo);
  REQUIRE_THAT(line, PPSIM_CONTAINS("cannot read the thing file '" + folder + "'"));
}
