// Client::set_lock_level and reserved_elsewhere: SQLite's five levels on
// local files (OFD byte locks) and remote files (the catalog's leases, on an
// embedded bus), with the same expectations for both.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include "pagefile/pagefile.h"
#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::test;

namespace {

void check_levels(Client& client, const std::string& name, Location location) {
  OpenOptions create{.location = location, .create = true};
  auto a = client.open(name, create);
  auto b = client.open(name, create);
  REQUIRE_OK(a);
  REQUIRE_OK(b);

  // Order rules: SHARED first, PENDING never asked for.
  CHECK_CODE(client.set_lock_level(*a, LockLevel::kReserved), Code::kInvalidArgument);
  CHECK_CODE(client.set_lock_level(*a, LockLevel::kPending), Code::kInvalidArgument);
  CHECK_CODE(client.set_lock_level(*a, static_cast<LockLevel>(9)), Code::kInvalidArgument);

  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kShared));
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kShared));
  CHECK(*client.reserved_elsewhere(*a) == false);

  // One writer: RESERVED beside readers, a second RESERVED refused.
  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kReserved));
  CHECK(*client.reserved_elsewhere(*b) == true);
  CHECK(*client.reserved_elsewhere(*a) == false);  // its own lock is not "elsewhere"
  CHECK_CODE(client.set_lock_level(*b, LockLevel::kReserved), Code::kBusy);
  CHECK_CODE(client.set_lock_level(*b, LockLevel::kExclusive), Code::kBusy);

  // EXCLUSIVE while b reads: refused, a is left at PENDING, which keeps new
  // readers out.
  CHECK_CODE(client.set_lock_level(*a, LockLevel::kExclusive), Code::kBusy);
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kNone));
  CHECK_CODE(client.set_lock_level(*b, LockLevel::kShared), Code::kBusy);
  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kExclusive));
  CHECK(*client.reserved_elsewhere(*b) == true);
  CHECK_CODE(client.set_lock_level(*b, LockLevel::kShared), Code::kBusy);

  // Lowering goes to SHARED or NONE only; asking for the held level is a no-op.
  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kExclusive));
  CHECK_CODE(client.set_lock_level(*a, LockLevel::kReserved), Code::kInvalidArgument);
  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kShared));
  CHECK(*client.reserved_elsewhere(*b) == false);
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kShared));

  // SHARED straight to EXCLUSIVE (hot-journal rollback) also counts as a
  // writer for reserved_elsewhere.
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kNone));
  REQUIRE_OK(client.set_lock_level(*a, LockLevel::kExclusive));
  CHECK(*client.reserved_elsewhere(*b) == true);

  // Closing a descriptor lets its lock go.
  REQUIRE_OK(client.close(*a));
  CHECK(*client.reserved_elsewhere(*b) == false);
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kShared));
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kExclusive));
  REQUIRE_OK(client.set_lock_level(*b, LockLevel::kNone));
  CHECK_CODE(client.set_lock_level(*a, LockLevel::kShared), Code::kInvalidArgument);  // closed
  CHECK_CODE(client.reserved_elsewhere(*a), Code::kInvalidArgument);
  REQUIRE_OK(client.close(*b));
}

}  // namespace

TEST_CASE("lock levels: local files, descriptors conflict like processes") {
  TempDir dir;
  auto client = Client::start({.local_dir = dir.path()});
  REQUIRE_OK(client);
  check_levels(**client, "locks.pf", Location::kLocal);
}

TEST_CASE("lock levels: remote files at the catalog") {
  TempDir dir;
  check_levels(*start_client(dir.path(), "inproc:2"), "locks", Location::kRemote);
}

TEST_CASE("lock levels: a read-only local descriptor cannot become a writer") {
  TempDir dir;
  auto client = Client::start({.local_dir = dir.path()});
  REQUIRE_OK(client);
  REQUIRE_OK((*client)->open("ro.pf", {.create = true}));
  auto ro = (*client)->open("ro.pf", {.read_only = true});
  REQUIRE_OK(ro);
  REQUIRE_OK((*client)->set_lock_level(*ro, LockLevel::kShared));
  CHECK_CODE((*client)->set_lock_level(*ro, LockLevel::kReserved), Code::kReadOnly);
  CHECK(*(*client)->reserved_elsewhere(*ro) == false);
}
