// SharedFlags: two mappings of one segment see each other's stores; the name can go away while
// the mappings stay; a second creator of a live name is refused with one line.
#include <sys/wait.h>
#include <unistd.h>

#include "catch.h"
#include "core/error.h"
#include "launch/shared_flags.h"

using namespace ppsim;
using namespace ppsim::launch;

TEST_CASE("SharedFlags: a store through one mapping is loaded through another, also in a child process",
          "[launch]") {
  const std::string name = SharedFlags::unique_name();
  SharedFlags a(name, 3, true);
  SharedFlags b(name, 3, false);
  CHECK(a.size() == 3);
  CHECK(b.load(2) == 0);  // created zeroed
  a.store(2, 7);
  CHECK(b.load(2) == 7);
  CHECK(b.load(a.abort_word()) == 0);
  // Another process (fork) sees the same words and its store comes back.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    SharedFlags c(name, 3, false);
    const bool saw = c.load(2) == 7;
    c.store(0, saw ? 41 : 13);
    ::_exit(0);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(a.load(0) == 41);
  // A second creator of the same live name is refused.
  CHECK_THROWS_AS(SharedFlags(name, 3, true), InputError);
  // Unlinked, the name is gone for new openers; the mappings still work.
  a.unlink();
  CHECK_THROWS_AS(SharedFlags(name, 3, false), InputError);
  b.store(1, 5);
  CHECK(a.load(1) == 5);
  CHECK_THROWS_AS(a.load(4), InputError);  // past the abort word
}
