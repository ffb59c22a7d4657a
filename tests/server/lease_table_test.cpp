#include "server/lease_table.h"

#include <doctest/doctest.h>

#include "tests/support/temp_dir.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace std::chrono_literals;

namespace {

// A clock that moves only when the test says so.
struct FakeClock {
  std::chrono::steady_clock::time_point now{std::chrono::hours(1)};
  LeaseTable::Clock fn() {
    return [this] { return now; };
  }
};

constexpr uint64_t kFile = 7;
constexpr LockLevel kNone = LockLevel::kNone;
constexpr LockLevel kShared = LockLevel::kShared;
constexpr LockLevel kReserved = LockLevel::kReserved;
constexpr LockLevel kPending = LockLevel::kPending;
constexpr LockLevel kExclusive = LockLevel::kExclusive;

// One owner's `level` on `file`.
struct Hold {
  uint64_t file;
  uint64_t owner;
  LockLevel level;
};

// A table whose leases last `lease` on a FakeClock.
struct Table {
  explicit Table(std::chrono::milliseconds lease = 1000ms) : t(lease, clock.fn()) {}
  FakeClock clock;
  LeaseTable t;

  // Asks for each hold in turn; each must be granted.
  void grant(std::initializer_list<Hold> holds) {
    for (const Hold& h : holds) {
      CAPTURE(h.file);
      CAPTURE(h.owner);
      REQUIRE_OK(t.set_level(h.file, h.owner, h.level));
    }
  }
  // CHECKs that each owner is at the level of its hold.
  void check_levels(std::initializer_list<Hold> holds) {
    for (const Hold& h : holds) {
      CAPTURE(h.file);
      CAPTURE(h.owner);
      CHECK(t.level(h.file, h.owner) == h.level);
    }
  }
};

struct ShortLeaseTable : Table {
  ShortLeaseTable() : Table(500ms) {}
};

}  // namespace

// Owner `owner` asks for `level` on kFile and is refused with kBusy and
// `message`, left at `left_at`.
void check_refused(LeaseTable& t, uint64_t owner, LockLevel level, std::string_view message, LockLevel left_at) {
  Status s = t.set_level(kFile, owner, level);
  CHECK_CODE(s, Code::kBusy);
  CHECK(s.message() == message);
  CHECK(t.level(kFile, owner) == left_at);
}

TEST_CASE("lock levels have SQLite's names") {
  CHECK(lock_level_name(kNone) == "NONE");
  CHECK(lock_level_name(kShared) == "SHARED");
  CHECK(lock_level_name(kReserved) == "RESERVED");
  CHECK(lock_level_name(kPending) == "PENDING");
  CHECK(lock_level_name(kExclusive) == "EXCLUSIVE");
}

TEST_CASE_FIXTURE(Table, "many owners share; a writer reserves beside them") {
  for (uint64_t owner = 1; owner <= 4; ++owner) CHECK_OK(t.set_level(kFile, owner, kShared));
  CHECK_OK(t.set_level(kFile, 1, kReserved));
  CHECK(t.level(kFile, 1) == kReserved);
  // RESERVED coexists with SHARED: new readers still come in.
  CHECK_OK(t.set_level(kFile, 5, kShared));
  // ...but a second writer does not.
  check_refused(t, 2, kReserved, "file 7: RESERVED for owner 2: owner 1 holds RESERVED", kShared);
  // Nor may another owner go for EXCLUSIVE past the writer; it keeps SHARED
  // rather than becoming a second writer at PENDING.
  CHECK_CODE(t.set_level(kFile, 3, kExclusive), Code::kBusy);
  CHECK(t.level(kFile, 3) == kShared);
}

TEST_CASE_FIXTURE(Table, "EXCLUSIVE with readers present stops at PENDING, and a retry succeeds once they leave") {
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}, {kFile, 2, kReserved}});

  check_refused(t, 2, kExclusive, "file 7: EXCLUSIVE for owner 2: owner 1 holds SHARED; owner 2 left at PENDING", kPending);
  CHECK(t.reserved_by_other(kFile, 1));

  // PENDING lets the existing reader stay and keeps new ones out.
  CHECK(t.level(kFile, 1) == kShared);
  check_refused(t, 3, kShared, "file 7: SHARED for owner 3: owner 2 holds PENDING", kNone);

  // Still busy while the reader stays; the asker stays at PENDING.
  CHECK_CODE(t.set_level(kFile, 2, kExclusive), Code::kBusy);
  CHECK(t.level(kFile, 2) == kPending);

  CHECK_OK(t.set_level(kFile, 1, kNone));
  CHECK_OK(t.set_level(kFile, 2, kExclusive));
  CHECK(t.level(kFile, 2) == kExclusive);
}

TEST_CASE_FIXTURE(Table, "EXCLUSIVE straight from SHARED (SQLite's hot-journal path)") {
  REQUIRE_OK(t.set_level(kFile, 1, kShared));
  CHECK_OK(t.set_level(kFile, 1, kExclusive));  // alone: granted at once
  CHECK_OK(t.set_level(kFile, 1, kNone));

  grant({{kFile, 1, kShared}, {kFile, 2, kShared}, {kFile, 3, kShared}});
  check_refused(t, 1, kExclusive, "file 7: EXCLUSIVE for owner 1: owners 2, 3 hold SHARED; owner 1 left at PENDING", kPending);
}

TEST_CASE_FIXTURE(Table, "EXCLUSIVE coexists with nothing") {
  grant({{kFile, 1, kShared}, {kFile, 1, kReserved}, {kFile, 1, kExclusive}});

  check_refused(t, 2, kShared, "file 7: SHARED for owner 2: owner 1 holds EXCLUSIVE", kNone);
  CHECK(t.list().size() == 1);  // the refused asker left no entry behind

  // Other files are independent.
  CHECK_OK(t.set_level(kFile + 1, 2, kShared));
  CHECK_OK(t.set_level(kFile + 1, 2, kExclusive));
}

TEST_CASE_FIXTURE(Table, "nonsense transitions are refused and change nothing") {
  // Nothing above SHARED without SHARED first.
  CHECK_CODE(t.set_level(kFile, 1, kReserved), Code::kInvalidArgument);
  CHECK_CODE(t.set_level(kFile, 1, kExclusive), Code::kInvalidArgument);
  CHECK(t.level(kFile, 1) == kNone);
  CHECK(t.list().empty());
  CHECK_CODE(t.renew(1), Code::kNotFound);  // no lease was started

  // PENDING is never asked for.
  Status s = t.set_level(kFile, 1, kPending);
  CHECK_CODE(s, Code::kInvalidArgument);
  CHECK(s.message().find("PENDING is never asked for") != std::string::npos);
  REQUIRE_OK(t.set_level(kFile, 1, kShared));
  CHECK_CODE(t.set_level(kFile, 1, kPending), Code::kInvalidArgument);
  CHECK(t.level(kFile, 1) == kShared);

  // RESERVED is asked for from SHARED only.
  REQUIRE_OK(t.set_level(kFile, 1, kExclusive));
  CHECK_CODE(t.set_level(kFile, 1, kReserved), Code::kInvalidArgument);
  CHECK_CODE(t.set_level(kFile, 1, kPending), Code::kInvalidArgument);
  CHECK(t.level(kFile, 1) == kExclusive);

  // A level that does not exist (off the wire).
  CHECK_CODE(t.set_level(kFile, 1, static_cast<LockLevel>(9)), Code::kInvalidArgument);
  CHECK(t.level(kFile, 1) == kExclusive);
}

TEST_CASE_FIXTURE(Table, "asking for the level held changes nothing and succeeds") {
  CHECK_OK(t.set_level(kFile, 1, kNone));
  CHECK(t.list().empty());
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}, {kFile, 2, kReserved}});
  CHECK_CODE(t.set_level(kFile, 2, kExclusive), Code::kBusy);
  // Re-asking SHARED while a PENDING writer waits is not a new reader.
  CHECK_OK(t.set_level(kFile, 1, kShared));
  CHECK_OK(t.set_level(kFile, 2, kPending));  // already there
  CHECK(t.level(kFile, 2) == kPending);
}

TEST_CASE_FIXTURE(Table, "lowering always succeeds") {
  for (LockLevel from : {kShared, kReserved, kPending, kExclusive}) {
    for (LockLevel to : {kShared, kNone}) {
      if (to >= from) continue;
      CAPTURE(lock_level_name(from));
      CAPTURE(lock_level_name(to));
      grant({{kFile, 1, kShared}, {kFile, 2, kShared}});
      if (from >= kReserved) REQUIRE_OK(t.set_level(kFile, 1, kReserved));
      if (from == kPending) REQUIRE(t.set_level(kFile, 1, kExclusive).is(Code::kBusy));
      if (from == kExclusive) {
        grant({{kFile, 2, kNone}, {kFile, 1, kExclusive}});
      }
      REQUIRE(t.level(kFile, 1) == from);
      CHECK_OK(t.set_level(kFile, 1, to));
      CHECK(t.level(kFile, 1) == to);
      // Lowering lets the others move again.
      CHECK_OK(t.set_level(kFile, 3, kShared));
      CHECK_OK(t.set_level(kFile, 3, kReserved));
      t.release_file(kFile);
    }
  }
}

TEST_CASE_FIXTURE(Table, "going to NONE removes the entry") {
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}});
  CHECK_OK(t.set_level(kFile, 1, kNone));
  auto all = t.list();
  REQUIRE(all.size() == 1);
  CHECK(all[0].owner == 2);
  // Its last lock gone, owner 1 has no lease left to renew.
  CHECK_CODE(t.renew(1), Code::kNotFound);
  CHECK_OK(t.renew(2));
}

TEST_CASE_FIXTURE(Table, "a lease holds until it runs out, then every lock of the owner goes") {
  CHECK(t.lease() == 1000ms);
  grant({{kFile, 1, kShared}, {kFile, 1, kReserved}, {kFile + 1, 1, kShared}, {kFile, 2, kShared}});

  clock.now += 999ms;
  CHECK(t.level(kFile, 1) == kReserved);
  CHECK(t.reserved_by_other(kFile, 2));
  CHECK_CODE(t.set_level(kFile, 2, kReserved), Code::kBusy);  // failure renews nothing

  CHECK(t.expiries() == 0);
  clock.now += 1ms;
  check_levels({{kFile, 1, kNone}, {kFile + 1, 1, kNone}});
  CHECK(t.expiries() == 2);  // owners 1 and 2
  CHECK_FALSE(t.reserved_by_other(kFile, 2));
  // Owner 2's lease started at the same time, so it is gone too.
  CHECK(t.level(kFile, 2) == kNone);
  CHECK(t.list().empty());
  Status s = t.renew(1);
  CHECK_CODE(s, Code::kNotFound);
  CHECK(s.message() == "owner 1: holds no lock (never took one, or its lease ran out)");
}

TEST_CASE_FIXTURE(Table, "renew and every successful set_level extend the lease") {
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}});

  clock.now += 800ms;
  CHECK_OK(t.renew(1));
  CHECK_OK(t.set_level(kFile, 2, kShared));  // re-asking renews too
  clock.now += 800ms;
  check_levels({{kFile, 1, kShared}, {kFile, 2, kShared}});

  CHECK_OK(t.set_level(kFile, 2, kReserved));
  clock.now += 300ms;  // 1100 ms after owner 1's renew
  check_levels({{kFile, 1, kNone}, {kFile, 2, kReserved}});
  // The lease of an owner covers all its files: a lock taken on one file
  // keeps the others too.
  CHECK_OK(t.set_level(kFile + 1, 2, kShared));
  clock.now += 900ms;
  CHECK(t.level(kFile, 2) == kReserved);
  clock.now += 100ms;
  CHECK(t.level(kFile, 2) == kNone);
  CHECK_CODE(t.renew(2), Code::kNotFound);
}

TEST_CASE_FIXTURE(ShortLeaseTable, "an expired writer no longer blocks others") {
  grant({{kFile, 1, kShared}, {kFile, 1, kExclusive}});
  clock.now += 400ms;
  REQUIRE_OK(t.set_level(kFile + 1, 2, kShared));  // owner 2 starts its lease later
  CHECK_CODE(t.set_level(kFile, 2, kShared), Code::kBusy);
  clock.now += 100ms;
  CHECK_OK(t.set_level(kFile, 2, kShared));
  CHECK_OK(t.set_level(kFile, 2, kExclusive));
}

TEST_CASE_FIXTURE(Table, "reserved_by_other looks at other owners at RESERVED or above") {
  CHECK_FALSE(t.reserved_by_other(kFile, 1));
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}});
  CHECK_FALSE(t.reserved_by_other(kFile, 1));
  REQUIRE_OK(t.set_level(kFile, 2, kReserved));
  CHECK(t.reserved_by_other(kFile, 1));
  CHECK_FALSE(t.reserved_by_other(kFile, 2));  // its own lock does not count
  CHECK(t.reserved_by_other(kFile, 99));
  CHECK_FALSE(t.reserved_by_other(kFile + 1, 1));
  REQUIRE(t.set_level(kFile, 2, kExclusive).is(Code::kBusy));  // PENDING
  CHECK(t.reserved_by_other(kFile, 1));
  grant({{kFile, 1, kNone}, {kFile, 2, kExclusive}});
  CHECK(t.reserved_by_other(kFile, 1));
}

TEST_CASE_FIXTURE(Table, "release_owner drops every lock of one owner") {
  grant({{1, 1, kShared}, {2, 1, kShared}, {2, 1, kReserved}, {2, 2, kShared}});
  t.release_owner(1);
  check_levels({{1, 1, kNone}, {2, 1, kNone}, {2, 2, kShared}});
  CHECK_CODE(t.renew(1), Code::kNotFound);
  CHECK_OK(t.set_level(2, 2, kReserved));  // the reservation went with it
  t.release_owner(42);                     // unknown owner: nothing happens
  CHECK(t.list().size() == 1);
}

TEST_CASE_FIXTURE(Table, "release_file drops every lock on one file") {
  grant({{1, 1, kShared}, {1, 1, kExclusive}, {2, 1, kShared}, {2, 2, kShared}, {1, 3, kNone}});
  t.release_file(2);
  check_levels({{2, 1, kNone}, {2, 2, kNone}, {1, 1, kExclusive}});
  CHECK_OK(t.renew(1));                     // still holds file 1
  CHECK_CODE(t.renew(2), Code::kNotFound);  // held nothing else
  t.release_file(99);
  CHECK(t.list().size() == 1);
}

TEST_CASE_FIXTURE(Table, "list orders by file then owner and shows the lease left") {
  grant({{9, 3, kShared}, {2, 5, kShared}});
  clock.now += 250ms;
  grant({{9, 1, kShared}, {9, 1, kReserved}, {2, 4, kShared}});
  clock.now += 100ms;

  struct Row {
    uint64_t file_id;
    uint64_t owner;
    LockLevel level;
    std::chrono::milliseconds expires_in;
  };
  const std::vector<Row> expected = {
      {2, 4, kShared, 900ms}, {2, 5, kShared, 650ms}, {9, 1, kReserved, 900ms}, {9, 3, kShared, 650ms}};
  auto all = t.list();
  REQUIRE(all.size() == expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    CHECK(all[i].file_id == expected[i].file_id);
    CHECK(all[i].owner == expected[i].owner);
    CHECK(all[i].level == expected[i].level);
    CHECK(all[i].expires_in == expected[i].expires_in);
  }
}

TEST_CASE("the default clock is the steady clock") {
  LeaseTable t(60s);
  REQUIRE_OK(t.set_level(kFile, 1, kShared));
  auto all = t.list();
  REQUIRE(all.size() == 1);
  CHECK(all[0].expires_in > 59s);
  CHECK(all[0].expires_in <= 60s);
}

TEST_CASE_FIXTURE(Table, "a file's version moves when a writer begins and ends, and on note_change; readers move nothing") {
  const uint64_t v0 = t.version(kFile);
  CHECK(v0 != 0);  // 0 is what clients use for "unknown"
  CHECK(t.version(kFile + 1) == v0);  // every file starts at the table's base

  // Readers come and go: nothing they kept can be stale.
  grant({{kFile, 1, kShared}, {kFile, 2, kShared}, {kFile, 2, kNone}});
  CHECK(t.version(kFile) == v0);

  // A writer: RESERVED moves it, EXCLUSIVE does not again, the end does.
  REQUIRE_OK(t.set_level(kFile, 1, kReserved));
  const uint64_t v1 = t.version(kFile);
  CHECK(v1 != v0);
  REQUIRE_OK(t.set_level(kFile, 1, kExclusive));
  CHECK(t.version(kFile) == v1);
  REQUIRE_OK(t.set_level(kFile, 1, kShared));
  const uint64_t v2 = t.version(kFile);
  CHECK(v2 != v1);
  CHECK(v2 != v0);
  CHECK(t.version(kFile + 1) == v0);  // other files keep theirs

  // The pending step is a writer beginning too.
  REQUIRE_OK(t.set_level(kFile, 2, kShared));
  CHECK_CODE(t.set_level(kFile, 1, kExclusive), Code::kBusy);
  CHECK(t.level(kFile, 1) == kPending);
  const uint64_t v3 = t.version(kFile);
  CHECK(v3 != v2);
  CHECK_CODE(t.set_level(kFile, 1, kExclusive), Code::kBusy);  // still pending: no new move
  CHECK(t.version(kFile) == v3);
  REQUIRE_OK(t.set_level(kFile, 1, kNone));
  CHECK(t.version(kFile) != v3);

  const uint64_t v4 = t.version(kFile);
  t.note_change(kFile);
  CHECK(t.version(kFile) != v4);
}

TEST_CASE_FIXTURE(ShortLeaseTable, "a writer that dies (lease out) or says goodbye moves the version; a reader does not") {
  grant({{kFile, 1, kShared}, {kFile, 1, kReserved}, {kFile + 1, 2, kShared}});
  const uint64_t writer_file = t.version(kFile);
  const uint64_t reader_file = t.version(kFile + 1);
  clock.now += 500ms;
  CHECK(t.level(kFile, 1) == kNone);
  CHECK(t.version(kFile) != writer_file);  // its journal may be hot now
  CHECK(t.version(kFile + 1) == reader_file);

  grant({{kFile, 3, kShared}, {kFile, 3, kExclusive}});
  const uint64_t before = t.version(kFile);
  t.release_owner(3);
  CHECK(t.version(kFile) != before);
}

TEST_CASE("two tables start at different versions, so a restarted catalog is not mistaken for the old one") {
  LeaseTable a(1000ms), b(1000ms);
  CHECK(a.version(kFile) != b.version(kFile));
}

TEST_CASE_FIXTURE(ShortLeaseTable, "a writer whose lease runs out is reported once; one that lets go, or a reader, is not") {
  grant({{kFile, 1, kShared}, {kFile, 1, kReserved}, {kFile + 1, 1, kShared}, {kFile + 2, 2, kShared},
         {kFile + 2, 2, kExclusive}});
  CHECK_OK(t.set_level(kFile + 2, 2, kNone));  // let go
  CHECK_FALSE(t.take_writer_lost(kFile));
  clock.now += 500ms;
  CHECK(t.take_writer_lost(kFile));
  CHECK_FALSE(t.take_writer_lost(kFile));       // once
  CHECK_FALSE(t.take_writer_lost(kFile + 1));   // a reader's lease ran out: nothing to fence
  CHECK_FALSE(t.take_writer_lost(kFile + 2));
}
