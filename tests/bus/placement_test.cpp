#include "bus/placement.h"

#include <algorithm>

#include <doctest/doctest.h>

#include <fmt/format.h>

using namespace pagefile;
using namespace pagefile::net;

namespace {
std::vector<std::string> servers(int n) {
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(fmt::format("tcp://10.0.0.{}:7001", i + 1));
  return out;
}
}  // namespace

TEST_CASE("stripe: the worked example of the header") {
  PagePlacement p(Placement::kStripe, 42, 2, servers(3));
  std::vector<size_t> want = {0, 0, 1, 1, 2, 2, 0, 0};
  for (int64_t page = 0; page < 8; ++page) CHECK(p.server_for(page) == want[static_cast<size_t>(page)]);
  PagePlacement one(Placement::kStripe, 42, 1, servers(4));
  for (int64_t page = 0; page < 100; ++page) CHECK(one.server_for(page) == static_cast<size_t>(page % 4));
}

TEST_CASE("hash: spreads pages evenly and keeps units together") {
  PagePlacement p(Placement::kHash, 7, 4, servers(6));
  std::vector<int> counts(6);
  for (int64_t page = 0; page < 60000; ++page) {
    ++counts[p.server_for(page)];
    CHECK(p.server_for(page) == p.server_for(page - page % 4));  // one unit, one server
  }
  for (int c : counts) CHECK(c > 10000 * 0.8);
  for (int c : counts) CHECK(c < 10000 * 1.2);
  // Another file places the same page numbers differently.
  PagePlacement other(Placement::kHash, 8, 4, servers(6));
  int same = 0;
  for (int64_t page = 0; page < 6000; page += 4) same += p.server_for(page) == other.server_for(page);
  CHECK(same < 1500 * 0.3);
}

TEST_CASE("hash: adding a server moves only about 1/(n+1) of the pages, all to it") {
  PagePlacement five(Placement::kHash, 3, 1, servers(5));
  PagePlacement six(Placement::kHash, 3, 1, servers(6));
  int moved = 0;
  const int kPages = 30000;
  for (int64_t page = 0; page < kPages; ++page) {
    size_t before = five.server_for(page);
    size_t after = six.server_for(page);
    if (before != after) {
      ++moved;
      CHECK(after == 5);  // a page only ever moves to the new server
    }
  }
  CHECK(moved > kPages / 6 * 0.8);
  CHECK(moved < kPages / 6 * 1.2);
  // Striping, by contrast, moves most pages.
  PagePlacement s5(Placement::kStripe, 3, 1, servers(5));
  PagePlacement s6(Placement::kStripe, 3, 1, servers(6));
  int stripe_moved = 0;
  for (int64_t page = 0; page < kPages; ++page) stripe_moved += s5.server_for(page) != s6.server_for(page);
  CHECK(stripe_moved > kPages / 2);
}

TEST_CASE("replicas: distinct servers, the first copy where server_for puts it") {
  for (Placement kind : {Placement::kStripe, Placement::kHash}) {
    for (uint32_t r = 1; r <= 6; ++r) {
      CAPTURE(placement_name(kind));
      CAPTURE(r);
      PagePlacement p(kind, 11, 2, servers(6), r);
      CHECK(p.replicas() == r);
      for (int64_t page = 0; page < 2000; ++page) {
        ReplicaSet set = p.replicas_for(page);
        REQUIRE(set.count == r);
        CHECK(set.index[0] == p.server_for(page));
        std::vector<uint32_t> seen(set.begin(), set.end());
        std::sort(seen.begin(), seen.end());
        CHECK(std::adjacent_find(seen.begin(), seen.end()) == seen.end());
        CHECK(seen.back() < 6);
        // One unit, one set.
        ReplicaSet first = p.replicas_for(page - page % 2);
        CHECK(std::equal(set.begin(), set.end(), first.begin()));
      }
    }
  }
}

TEST_CASE("replicas: stripe takes the unit's server and the ones after it") {
  PagePlacement p(Placement::kStripe, 5, 1, servers(4), 3);
  std::vector<std::vector<uint32_t>> want = {{0, 1, 2}, {1, 2, 3}, {2, 3, 0}, {3, 0, 1}, {0, 1, 2}};
  for (int64_t page = 0; page < 5; ++page) {
    ReplicaSet set = p.replicas_for(page);
    CHECK(std::vector<uint32_t>(set.begin(), set.end()) == want[static_cast<size_t>(page)]);
  }
}

TEST_CASE("replicas: hash copies go where the file would go without the servers ranked above") {
  // Rendezvous order: the second copy is the server that would hold the
  // unit if the first were gone, so a dead server's units fall to the
  // servers already holding their next copy.
  auto all = servers(6);
  PagePlacement p(Placement::kHash, 3, 1, all, 3);
  std::vector<int> second_of_0(6);
  for (int64_t page = 0; page < 3000; ++page) {
    ReplicaSet set = p.replicas_for(page);
    auto without = all;
    without.erase(without.begin() + set.index[0]);
    PagePlacement rest(Placement::kHash, 3, 1, without, 2);
    ReplicaSet next = rest.replicas_for(page);
    for (uint32_t k = 0; k < 2; ++k) {
      uint32_t back = next.index[k] >= set.index[0] ? next.index[k] + 1 : next.index[k];  // index in `all`
      CHECK(back == set.index[k + 1]);
    }
    if (set.index[0] == 0) ++second_of_0[set.index[1]];
  }
  // Server 0's units keep their second copies on every other server, about
  // evenly: its load, were it to die, is spread.
  CHECK(second_of_0[0] == 0);
  for (size_t s = 1; s < 6; ++s) {
    CAPTURE(s);
    CHECK(second_of_0[s] > 500 / 5 * 0.6);
  }
}
