#include "bus/placement.h"

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
