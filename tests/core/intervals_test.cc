// core/intervals.h: the union of time intervals and the part of a span it covers.
#include "core/intervals.h"

#include "catch.h"

using namespace ppsim;

TEST_CASE("merge_intervals: sorted, disjoint, touching joined, empty dropped", "[core]") {
  const Intervals m = merge_intervals({{5, 7}, {0, 2}, {1, 3}, {4, 4}, {3, 4}});
  // [0,2) and [1,3) overlap, [3,4) touches them: [0,4); [4,4) is empty; [5,7) stands alone.
  CHECK(m == Intervals{{0, 4}, {5, 7}});
}

TEST_CASE("covered: the time of a span inside the union", "[core]") {
  const Intervals m{{0, 4}, {5, 7}, {10, 12}};
  CHECK(covered(m, 2, 6) == 2 + 1);   // [2,4) and [5,6)
  CHECK(covered(m, 4, 5) == 0);       // the gap
  CHECK(covered(m, 0, 20) == 4 + 2 + 2);
  CHECK(covered(m, 11, 11) == 0);     // an empty span
  CHECK(covered(m, 6, 3) == 0);       // a reversed one
  CHECK(covered({}, 0, 9) == 0);
}
