#include "server/catalog_store.h"

#include <sqlite3.h>

#include <chrono>
#include <fstream>
#include <limits>

#include <doctest/doctest.h>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using namespace pagefile::net;

namespace {

FileRecord sample(std::string name) {
  FileRecord r;
  r.name = std::move(name);
  r.page_size = 8192;
  r.size_pages = 12345;
  r.placement = Placement::kHash;
  r.stripe_pages = 16;
  r.servers = {"10.0.0.1:7000", "10.0.0.2:7000", "[::1]:7001"};
  r.policy = BufferPolicy{AccessType::kLooping, 4, 64};
  return r;
}

std::unique_ptr<CatalogStore> open_ok(const std::filesystem::path& path) {
  auto store = CatalogStore::open(path);
  INFO(store.status().to_string());
  REQUIRE(store.is_ok());
  return std::move(*store);
}

// Creates sample(name) for each name, in order; returns the records made.
std::vector<FileRecord> create_all(CatalogStore& store, std::initializer_list<const char*> names) {
  std::vector<FileRecord> made;
  for (const char* name : names) {
    auto r = store.create(sample(name));
    REQUIRE_OK(r);
    made.push_back(*r);
  }
  return made;
}

// The path of a catalog made in `dir` that holds sample(name), closed again.
std::filesystem::path catalog_holding(const test::TempDir& dir, const std::string& name) {
  auto path = dir / "catalog.db";
  auto store = open_ok(path);
  REQUIRE_OK(store->create(sample(name)));
  return path;
}

// Runs `sql` on a database with SQLite directly, as another program would.
void run_sql(const std::filesystem::path& path, const char* sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, &error);
  INFO((error != nullptr ? error : ""));
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("placement names") {
  CHECK(pagefile::placement_name(Placement::kStripe) == "stripe");
  CHECK(pagefile::placement_name(Placement::kHash) == "hash");
  CHECK(*pagefile::parse_placement("stripe") == Placement::kStripe);
  CHECK(*pagefile::parse_placement("hash") == Placement::kHash);
  for (const char* bad : {"", "Stripe", "hashed", "stripe "}) {
    CAPTURE(bad);
    CHECK_CODE(pagefile::parse_placement(bad), Code::kInvalidArgument);
  }
}

TEST_CASE("create assigns id and time; lookup returns every field") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto before = std::chrono::system_clock::now();
  auto created = store->create(sample("orders"));
  REQUIRE_OK(created);
  CHECK(created->id >= 1);
  CHECK(created->created_unix_ns >=
        std::chrono::duration_cast<std::chrono::nanoseconds>(before.time_since_epoch()).count());

  FileRecord expected = sample("orders");
  expected.id = created->id;
  expected.created_unix_ns = created->created_unix_ns;
  CHECK(*created == expected);

  auto by_name = store->lookup("orders");
  REQUIRE_OK(by_name);
  CHECK(*by_name == expected);
  auto by_id = store->lookup_id(created->id);
  REQUIRE_OK(by_id);
  CHECK(*by_id == expected);

  // The defaults round-trip as well, including a single server.
  FileRecord plain;
  plain.name = "plain";
  plain.servers = {"host:1"};
  auto second = store->create(plain);
  REQUIRE_OK(second);
  CHECK(second->id != created->id);
  auto back = store->lookup("plain");
  REQUIRE_OK(back);
  CHECK(back->page_size == kDefaultPageSize);
  CHECK(back->placement == Placement::kStripe);
  CHECK(back->stripe_pages == 1);
  CHECK(back->servers == std::vector<std::string>{"host:1"});
  CHECK(back->policy == BufferPolicy{});
  CHECK(*back == *second);
}

TEST_CASE("names are exact, whatever they contain") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  for (const char* name : {"a", "A", "a ", "dir/sub/file.db", "ünïcode", "quote'\"; DROP TABLE files"}) {
    CAPTURE(name);
    REQUIRE_OK(store->create(sample(name)));
  }
  for (const char* name : {"a", "A", "a ", "dir/sub/file.db", "ünïcode", "quote'\"; DROP TABLE files"}) {
    CAPTURE(name);
    auto found = store->lookup(name);
    REQUIRE_OK(found);
    CHECK(found->name == name);
  }
  CHECK_CODE(store->lookup("b"), Code::kNotFound);
}

TEST_CASE("a taken name is refused") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto first = store->create(sample("orders"));
  REQUIRE_OK(first);
  auto again = store->create(sample("orders"));
  CHECK_CODE(again, Code::kAlreadyExists);
  CHECK(again.status().message() == "orders: is already in the catalog");
  // The refused create used no id and changed nothing.
  auto next = store->create(sample("other"));
  REQUIRE_OK(next);
  CHECK(next->id == first->id + 1);
  CHECK(*store->lookup("orders") == *first);
}

TEST_CASE("bad records are refused before anything is stored") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto refused = [&](auto change) {
    FileRecord r = sample("x");
    change(r);
    return store->create(r);
  };
  CHECK_CODE(refused([](FileRecord& r) { r.name.clear(); }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.name = std::string("a\0b", 3); }), Code::kInvalidArgument);
  for (uint32_t size : {0u, 256u, 1000u, 4097u, 128u * 1024u}) {
    CAPTURE(size);
    CHECK_CODE(refused([&](FileRecord& r) { r.page_size = size; }), Code::kInvalidArgument);
  }
  CHECK_CODE(refused([](FileRecord& r) { r.servers.clear(); }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.servers.push_back(""); }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.servers.push_back("a\nb"); }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.stripe_pages = 0; }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.size_pages = -1; }), Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.policy = {AccessType::kRandom, 10, 5}; }),
             Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.placement = static_cast<Placement>(7); }),
             Code::kInvalidArgument);
  CHECK_CODE(refused([](FileRecord& r) { r.policy.access = static_cast<AccessType>(9); }),
             Code::kInvalidArgument);

  auto all = store->list();
  REQUIRE_OK(all);
  CHECK(all->empty());
  // The edges that are allowed.
  CHECK_OK(refused([](FileRecord& r) {
    r.page_size = kMinPageSize;
    r.size_pages = 0;
    r.policy = {AccessType::kSequential, 10, 0};  // 0: the pool decides
  }));
}

TEST_CASE("set_size") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto r = store->create(sample("orders"));
  REQUIRE_OK(r);
  CHECK_OK(store->set_size(r->id, 0));
  CHECK(store->lookup("orders")->size_pages == 0);
  CHECK_OK(store->set_size(r->id, int64_t{1} << 40));
  CHECK(store->lookup("orders")->size_pages == int64_t{1} << 40);
  CHECK_CODE(store->set_size(r->id, -5), Code::kInvalidArgument);
  CHECK(store->lookup("orders")->size_pages == int64_t{1} << 40);
  // The largest size is the one whose every page number is valid; beyond
  // it a size times a page size could overflow.
  CHECK_OK(store->set_size(r->id, kMaxPageNumber + 1));
  CHECK_CODE(store->set_size(r->id, kMaxPageNumber + 2), Code::kInvalidArgument);
  Status huge = store->set_size(r->id, std::numeric_limits<int64_t>::max(), /*grow_only=*/true);
  CHECK_CODE(huge, Code::kInvalidArgument);
  CHECK(huge.message().find("beyond the largest size") != std::string::npos);
  CHECK(store->lookup("orders")->size_pages == kMaxPageNumber + 1);
  {  // a record that enters with such a size
    FileRecord big = sample("too-large");
    big.size_pages = kMaxPageNumber + 2;
    CHECK_CODE(store->create(big), Code::kInvalidArgument);
    CHECK_CODE(store->lookup("too-large"), Code::kNotFound);
  }
  Status missing = store->set_size(r->id + 100, 1);
  CHECK_CODE(missing, Code::kNotFound);
  CHECK(missing.message() == "file id " + std::to_string(r->id + 100) + ": is not in the catalog");
}

TEST_CASE("what lookups return follows every change, by name and by id") {
  // Records are kept in memory after the first lookup; each change must
  // reach that copy as it reaches the database.
  test::TempDir dir;
  auto path = dir / "catalog.db";
  auto store = open_ok(path);
  auto r = store->create(sample("orders"));
  REQUIRE_OK(r);
  REQUIRE_OK(store->lookup("orders"));
  REQUIRE_OK(store->lookup_id(r->id));
  REQUIRE_OK(store->set_size(r->id, 40));
  REQUIRE_OK(store->set_size(r->id, 10, /*grow_only=*/true));  // smaller: no change
  CHECK(store->lookup("orders")->size_pages == 40);
  CHECK(store->lookup_id(r->id)->size_pages == 40);
  REQUIRE_OK(store->set_size(r->id, 50, /*grow_only=*/true));
  CHECK(store->lookup_id(r->id)->size_pages == 50);
  REQUIRE_OK(store->set_size(r->id, 5));
  CHECK(store->lookup("orders")->size_pages == 5);

  // Removed and created again under the same name: the new record, by
  // name; the old id is gone.
  REQUIRE_OK(store->remove("orders"));
  CHECK_CODE(store->lookup("orders"), Code::kNotFound);
  CHECK_CODE(store->lookup_id(r->id), Code::kNotFound);
  auto again = store->create(sample("orders"));
  REQUIRE_OK(again);
  CHECK(store->lookup("orders")->id == again->id);
  CHECK_CODE(store->lookup_id(r->id), Code::kNotFound);

  // What memory says is what the database says.
  store.reset();
  auto reopened = open_ok(path);
  CHECK(*reopened->lookup("orders") == *again);
}

TEST_CASE("remove returns the record, which is then gone") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto r = store->create(sample("orders"));
  REQUIRE_OK(r);
  auto removed = store->remove("orders");
  REQUIRE_OK(removed);
  CHECK(*removed == *r);
  Status gone = store->lookup("orders").status();
  CHECK_CODE(gone, Code::kNotFound);
  CHECK(gone.message() == "orders: is not in the catalog");
  CHECK_CODE(store->lookup_id(r->id), Code::kNotFound);
  CHECK_CODE(store->set_size(r->id, 1), Code::kNotFound);
  CHECK_CODE(store->remove("orders"), Code::kNotFound);
  CHECK_CODE(store->remove("never"), Code::kNotFound);
}

TEST_CASE("ids are never reused, across remove and reopen") {
  test::TempDir dir;
  std::vector<uint64_t> seen;
  {
    auto store = open_ok(dir / "catalog.db");
    for (const FileRecord& r : create_all(*store, {"a", "b", "c"})) seen.push_back(r.id);
    // Removing the newest is the case an ordinary max(id) + 1 would reuse.
    REQUIRE_OK(store->remove("c"));
    auto again = store->create(sample("c"));
    REQUIRE_OK(again);
    seen.push_back(again->id);
    REQUIRE_OK(store->remove("c"));
    REQUIRE_OK(store->remove("b"));
  }
  {
    auto store = open_ok(dir / "catalog.db");
    auto r = store->create(sample("b"));
    REQUIRE_OK(r);
    seen.push_back(r->id);
  }
  for (size_t i = 1; i < seen.size(); ++i) CHECK(seen[i] > seen[i - 1]);
}

TEST_CASE("records survive close and reopen") {
  test::TempDir dir;
  std::vector<FileRecord> written;
  {
    auto store = open_ok(dir / "catalog.db");
    written = create_all(*store, {"zeta", "alpha", "mid"});
    REQUIRE_OK(store->set_size(written[0].id, 77));
    written[0].size_pages = 77;
  }
  auto store = open_ok(dir / "catalog.db");
  for (const auto& r : written) {
    auto back = store->lookup(r.name);
    REQUIRE_OK(back);
    CHECK(*back == r);
  }
}

TEST_CASE("list is sorted by name") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  auto empty = store->list();
  REQUIRE_OK(empty);
  CHECK(empty->empty());
  for (const char* name : {"m", "b", "z", "a", "B"}) REQUIRE_OK(store->create(sample(name)));
  REQUIRE_OK(store->remove("z"));
  auto all = store->list();
  REQUIRE_OK(all);
  std::vector<std::string> names;
  for (const auto& r : *all) names.push_back(r.name);
  CHECK(names == std::vector<std::string>{"B", "a", "b", "m"});
  CHECK((*all)[1] == *store->lookup("a"));
}

TEST_CASE("a database that is not a catalog is refused untouched") {
  test::TempDir dir;
  auto path = dir / "other.db";
  run_sql(path, "CREATE TABLE t(x); INSERT INTO t VALUES (1); PRAGMA user_version = 1;");
  auto store = CatalogStore::open(path);
  CHECK_CODE(store, Code::kCorruption);
  CHECK(store.status().message().find("not a Pagefile catalog") != std::string::npos);
  // Still the other program's database, not made into a catalog.
  run_sql(path, "SELECT x FROM t");
  CHECK_CODE(CatalogStore::open(path), Code::kCorruption);

  // Another program's empty-looking database with only its mark set.
  auto marked = dir / "marked.db";
  run_sql(marked, "PRAGMA application_id = 42;");
  CHECK_CODE(CatalogStore::open(marked), Code::kCorruption);
}

TEST_CASE("a catalog from a newer build is not opened") {
  test::TempDir dir;
  auto path = dir / "catalog.db";
  { open_ok(path); }
  run_sql(path, "PRAGMA user_version = 5;");
  auto store = CatalogStore::open(path);
  CHECK_CODE(store, Code::kNotSupported);
}

// What version 4 added.
constexpr const char* kDropVersion4 = "DROP TABLE servers; ";
// What versions 3 and 4 added.
constexpr const char* kDropVersion3 =
    "DROP TABLE servers; "
    "ALTER TABLE files DROP COLUMN replicas; ALTER TABLE files DROP COLUMN stale; "
    "ALTER TABLE files DROP COLUMN resyncing; ALTER TABLE files DROP COLUMN replica_version; "
    "ALTER TABLE files DROP COLUMN placement_keys; ";

TEST_CASE("server directories: the first recorded at an address stays; a version 3 catalog gains the table") {
  test::TempDir dir;
  auto path = catalog_holding(dir, "old");
  run_sql(path, (std::string(kDropVersion4) + "PRAGMA user_version = 3;").c_str());
  {
    auto store = open_ok(path);
    CHECK(store->lookup("old").is_ok());
    auto none = store->directory_at("tcp://127.0.0.1:1");
    REQUIRE_OK(none);
    CHECK(*none == 0);
    auto first = store->record_directory("tcp://127.0.0.1:1", 0x1234);
    REQUIRE_OK(first);
    CHECK(*first == 0x1234);
    // A second client that reached another directory there is told the
    // first: its requests then meet the directory's refusal.
    auto second = store->record_directory("tcp://127.0.0.1:1", 0x5678);
    REQUIRE_OK(second);
    CHECK(*second == 0x1234);
    CHECK_CODE(store->record_directory("tcp://127.0.0.1:2", 0), Code::kInvalidArgument);
    // The high bit set: an id is any 64-bit number.
    auto high = store->record_directory("unix:/run/pf.sock", 0xfedcba9876543210ull);
    REQUIRE_OK(high);
    CHECK(*high == 0xfedcba9876543210ull);
  }
  auto again = open_ok(path);  // read back from disk
  CHECK(*again->directory_at("tcp://127.0.0.1:1") == 0x1234);
  CHECK(*again->directory_at("unix:/run/pf.sock") == 0xfedcba9876543210ull);
  CHECK(*again->directory_at("tcp://127.0.0.1:2") == 0);
}

TEST_CASE("a version 1 catalog is upgraded, its files keep their access type and gain a policy name") {
  test::TempDir dir;
  auto path = catalog_holding(dir, "old");
  // Make it what a version 1 build wrote: no policy_name column.
  run_sql(path, (std::string("ALTER TABLE files DROP COLUMN policy_name; ") + kDropVersion3 + "PRAGMA user_version = 1;").c_str());
  auto store = open_ok(path);
  auto old = store->lookup("old");
  REQUIRE_OK(old);
  CHECK(old->policy.name.empty());
  CHECK(old->replicas == 1);
  FileRecord named = sample("named");
  named.policy.name = "global-sequential";
  REQUIRE_OK(store->create(named));
  CHECK(store->lookup("named")->policy.name == "global-sequential");
}

TEST_CASE("a version 2 catalog is upgraded: its files keep one copy, new ones record theirs") {
  test::TempDir dir;
  auto path = catalog_holding(dir, "old");
  run_sql(path, (std::string(kDropVersion3) + "PRAGMA user_version = 2;").c_str());
  {
    auto store = open_ok(path);
    CHECK(store->lookup("old")->replicas == 1);
    FileRecord copied = sample("copied");
    copied.servers = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:2", "tcp://127.0.0.1:3"};
    copied.replicas = 3;
    REQUIRE_OK(store->create(copied));
  }
  auto again = open_ok(path);  // and read back from disk
  CHECK(again->lookup("copied")->replicas == 3);
  // More copies than servers is no record the catalog keeps.
  FileRecord too_many = sample("too-many");
  too_many.replicas = static_cast<uint32_t>(too_many.servers.size()) + 1;
  CHECK_CODE(again->create(too_many), Code::kInvalidArgument);
  // Nor is a count damaged on disk read as data.
  run_sql(path, "UPDATE files SET replicas = 9 WHERE name = 'copied';");
  CHECK_CODE(open_ok(path)->lookup("copied"), Code::kCorruption);
}

TEST_CASE("a file that is not SQLite is corruption") {
  test::TempDir dir;
  auto path = dir / "garbage.db";
  {
    std::ofstream out(path, std::ios::binary);
    std::string junk(8192, '\0');
    for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 131 + 7) % 251);
    out << junk;
  }
  auto store = CatalogStore::open(path);
  CHECK_CODE(store, Code::kCorruption);
  CHECK(store.status().message().find("not a Pagefile catalog") != std::string::npos);
}

TEST_CASE("a damaged record is corruption, not a bad value") {
  test::TempDir dir;
  auto path = catalog_holding(dir, "orders");
  run_sql(path, "UPDATE files SET placement = 'ring' WHERE name = 'orders';");
  auto store = open_ok(path);
  CHECK_CODE(store->lookup("orders"), Code::kCorruption);
  CHECK_CODE(store->list(), Code::kCorruption);
}

TEST_CASE("a missing directory is reported") {
  test::TempDir dir;
  auto store = CatalogStore::open(dir / "no" / "such" / "catalog.db");
  CHECK_FALSE(store.is_ok());
  CHECK_CODE(store, Code::kNotFound);
}

TEST_CASE("fencing tokens set aside only grow, across close and reopen") {
  test::TempDir dir;
  uint64_t last = 0;
  for (int round = 0; round < 3; ++round) {
    auto store = open_ok(dir / "catalog.db");
    for (uint64_t count : {1u, 1024u, 5u}) {
      auto first = store->reserve_tokens(count);
      REQUIRE_OK(first);
      CHECK(*first > last);
      last = *first + count - 1;  // the block's last
    }
  }
}

TEST_CASE("copy states: a server marked stale, resyncing, current again; never the last current copy; kept on disk") {
  test::TempDir dir;
  auto path = dir / "catalog.db";
  FileRecord proto = sample("copied");  // three servers
  proto.replicas = 2;
  uint64_t id = 0;
  {
    auto store = open_ok(path);
    auto made = store->create(proto);
    REQUIRE_OK(made);
    id = made->id;
    CHECK(made->replica_version == 0);
    auto stale = store->set_copy_state(id, proto.servers[2], CopyState::kStale);
    REQUIRE_OK(stale);
    CHECK(stale->stale == std::vector<std::string>{proto.servers[2]});
    CHECK(stale->replica_version == 1);
    // Only resync makes a copy current, from resyncing.
    CHECK_CODE(store->set_copy_state(id, proto.servers[2], CopyState::kCurrent), Code::kStale);
    // Again: nothing changes, not even the version.
    CHECK(store->set_copy_state(id, proto.servers[2], CopyState::kStale)->replica_version == 1);
    // A second server behind would leave pages with no current copy (R = 2).
    auto refused = store->set_copy_state(id, proto.servers[0], CopyState::kStale);
    CHECK_CODE(refused, Code::kIOError);
    CHECK(refused.status().message().find("cannot be left behind") != std::string::npos);
    CHECK_CODE(store->set_copy_state(id, "tcp://10.9.9.9:1", CopyState::kStale), Code::kInvalidArgument);
    CHECK_CODE(store->set_copy_state(id + 100, proto.servers[0], CopyState::kStale), Code::kNotFound);
    auto resyncing = store->set_copy_state(id, proto.servers[2], CopyState::kResyncing);
    REQUIRE_OK(resyncing);
    CHECK(resyncing->stale.empty());
    CHECK(resyncing->resyncing == std::vector<std::string>{proto.servers[2]});
    CHECK(resyncing->replica_version == 2);
  }
  auto again = open_ok(path);  // from disk
  auto record = again->lookup("copied");
  REQUIRE_OK(record);
  CHECK(record->resyncing == std::vector<std::string>{proto.servers[2]});
  CHECK(record->replica_version == 2);
  auto current = again->set_copy_state(id, proto.servers[2], CopyState::kCurrent);
  REQUIRE_OK(current);
  CHECK(current->resyncing.empty());
  CHECK(current->replica_version == 3);
  // One copy only: no server can be left behind.
  FileRecord single = sample("single");
  auto made = again->create(single);
  REQUIRE_OK(made);
  CHECK_CODE(again->set_copy_state(made->id, single.servers[0], CopyState::kStale), Code::kIOError);
}

TEST_CASE("replace_server: every file or none; placement keys keep the old address") {
  test::TempDir dir;
  auto store = open_ok(dir / "catalog.db");
  FileRecord copied = sample("copied");
  copied.replicas = 2;
  REQUIRE_OK(store->create(copied));
  FileRecord single = sample("single");  // one copy: cannot move
  REQUIRE_OK(store->create(single));
  const std::string old_server = copied.servers[1];
  auto refused = store->replace_server(old_server, "tcp://10.0.0.9:7000");
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(refused.status().message().find("would lose its pages") != std::string::npos);
  CHECK(store->lookup("copied")->servers == copied.servers);  // untouched
  REQUIRE_OK(store->remove("single"));
  auto changed = store->replace_server(old_server, "tcp://10.0.0.9:7000");
  REQUIRE_OK(changed);
  REQUIRE(changed->size() == 1);
  auto record = store->lookup("copied");
  REQUIRE_OK(record);
  CHECK(record->servers[1] == "tcp://10.0.0.9:7000");
  CHECK(record->placement_keys == copied.servers);
  CHECK(record->stale == std::vector<std::string>{"tcp://10.0.0.9:7000"});
  CHECK(record->replica_version == 1);
}
