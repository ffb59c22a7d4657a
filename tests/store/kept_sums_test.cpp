// KeptSums (store/kept_sums.h): every unit of a sole writer's, a bounded
// cache of a reader's.
#include "store/kept_sums.h"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

using pagefile::KeptSums;

TEST_CASE("every unit: kept, forgotten by 0, forgotten from a unit on") {
  KeptSums sums;
  CHECK(sums.get(5) == 0);
  sums.set(5, 55);
  sums.set(70000, 77);  // another chunk
  CHECK(sums.get(5) == 55);
  CHECK(sums.get(70000) == 77);
  CHECK(sums.get(70000 + KeptSums::kBoundedSlots) == 0);
  sums.set(5, 0);
  CHECK(sums.get(5) == 0);
  sums.set(6, 66);
  sums.forget_from(7);
  CHECK(sums.get(6) == 66);
  CHECK(sums.get(70000) == 0);
  sums.set(KeptSums::kMaxUnits, 1);  // past the end: nothing
  CHECK(sums.get(KeptSums::kMaxUnits) == 0);
}

TEST_CASE("chunks that double: every unit at their edges is kept apart, and forget_from crosses them") {
  // Chunks of 512, 512, 1024, 2048, ... slots: the units on each side of
  // every edge, up to the last unit kept.
  std::vector<size_t> units;
  for (size_t edge = 512; edge < KeptSums::kMaxUnits; edge *= 2) {
    units.push_back(edge - 1);
    units.push_back(edge);
  }
  units.push_back(KeptSums::kMaxUnits - 1);
  KeptSums sums;
  for (size_t u : units) sums.set(u, u + 1);
  for (size_t u : units) CHECK(sums.get(u) == u + 1);
  CHECK(sums.get(1536) == 0);  // inside a chunk allocated, never set
  CHECK(sums.get(3000) == 0);  // inside a chunk never allocated
  sums.forget_from(1024);
  for (size_t u : units) CHECK(sums.get(u) == (u < 1024 ? u + 1 : 0));
  sums.set(KeptSums::kMaxUnits - 1, 9);  // the last chunk, allocated again
  CHECK(sums.get(KeptSums::kMaxUnits - 1) == 9);

  KeptSums bounded(/*bounded=*/true);
  for (size_t u : {size_t{511}, size_t{512}, KeptSums::kBoundedSlots - 1, KeptSums::kBoundedSlots,
                   KeptSums::kBoundedSlots + 512}) {
    bounded.set(u, u + 1);
    CHECK(bounded.get(u) == u + 1);
  }
  CHECK(bounded.get(511) == 511 + 1);
  CHECK(bounded.get(0) == 0);  // its slot taken by kBoundedSlots
  CHECK(bounded.get(512) == 0);  // likewise, by kBoundedSlots + 512
  bounded.forget_from(KeptSums::kBoundedSlots);
  CHECK(bounded.get(KeptSums::kBoundedSlots - 1) == KeptSums::kBoundedSlots);
  CHECK(bounded.get(KeptSums::kBoundedSlots) == 0);
  CHECK(bounded.get(KeptSums::kBoundedSlots + 512) == 0);
}

TEST_CASE("bounded: a unit takes the slot of the one kBoundedSlots away, which is then not kept") {
  KeptSums sums(/*bounded=*/true);
  const size_t far = 3 + KeptSums::kBoundedSlots;
  sums.set(3, 33);
  CHECK(sums.get(3) == 33);
  CHECK(sums.get(far) == 0);
  sums.set(far, 44);
  CHECK(sums.get(far) == 44);
  CHECK(sums.get(3) == 0);
  sums.set(3, 0);  // forgetting a unit not in its slot leaves the slot's own
  CHECK(sums.get(far) == 44);
  sums.set(4, 1);
  sums.forget_from(far);
  CHECK(sums.get(far) == 0);
  CHECK(sums.get(4) == 1);
  sums.forget_from(0);
  CHECK(sums.get(4) == 0);
}

TEST_CASE("bounded: units that share a slot, set from two threads, never read as each other's") {
  KeptSums sums(/*bounded=*/true);
  const size_t a = 10;
  const size_t b = 10 + KeptSums::kBoundedSlots;
  // Each unit's value names it: a torn read of the slot may give a unit
  // nothing, or (as the header says) the other unit's value, never a
  // value of a unit that is not in the slot at all.
  std::thread one([&] {
    for (int i = 0; i < 100000; ++i) sums.set(a, 1000 + a);
  });
  std::thread two([&] {
    for (int i = 0; i < 100000; ++i) sums.set(b, 1000 + b);
  });
  for (int i = 0; i < 100000; ++i) {
    uint64_t v = sums.get(a);
    CHECK((v == 0 || v == 1000 + a || v == 1000 + b));
  }
  one.join();
  two.join();
  uint64_t last_a = sums.get(a), last_b = sums.get(b);
  CHECK(((last_a == 1000 + a && last_b == 0) || (last_b == 1000 + b && last_a == 0) ||
         (last_a == 1000 + b) || (last_b == 1000 + a)));
}
