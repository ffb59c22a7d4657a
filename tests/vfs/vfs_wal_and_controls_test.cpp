// The VFS in one process (as vfs_test.cpp): locks, characteristics and
// controls, WAL, errors, local files at their paths, and names on a bus.
// Each case names the line of shared/notes/sqlite-vfs.md it checks.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/page_io.h"
#include "vfs/byte_file.h"
#include "vfs/db_options.h"

#include "tests/support/temp_dir.h"
#include "tests/vfs/embedded_store.h"
#include "tests/vfs/vfs_test_util.h"
#include "tests/vfs/sqlite_db.h"
#include "pagefile/pagefile_vfs.h"

using namespace pagefile::test;

TEST_CASE("locking: two connections, SQLITE_BUSY promptly, exact xCheckReservedLock, change counter") {
  std::string db = fresh("twoconn");
  SqliteDb a(pagefile_uri(db));
  SqliteDb b(pagefile_uri(db));
  a.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
  CHECK(b.query("SELECT count(*) FROM t") == "1");  // b caches page 1 and more
  a.run("BEGIN IMMEDIATE; INSERT INTO t VALUES(2)");
  // RESERVED held by a: b may read, not write; and its check sees it.
  CHECK(b.query("SELECT count(*) FROM t") == "1");
  auto started = std::chrono::steady_clock::now();
  CHECK(b.exec("INSERT INTO t VALUES(3)") == SQLITE_BUSY);
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));  // promptly, not a hang
  sqlite3_file* file = nullptr;
  REQUIRE(sqlite3_file_control(b.get(), "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK);
  int reserved = -1;
  REQUIRE(file->pMethods->xCheckReservedLock(file, &reserved) == SQLITE_OK);
  CHECK(reserved == 1);
  a.run("COMMIT");
  REQUIRE(file->pMethods->xCheckReservedLock(file, &reserved) == SQLITE_OK);
  CHECK(reserved == 0);
  // b took SHARED again after a wrote: it must see the new row and size.
  CHECK(b.query("SELECT group_concat(x) FROM t") == "1,2");
  a.run("INSERT INTO t SELECT randomblob(4000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 50) SELECT value FROM s)");
  CHECK(b.query("SELECT count(*) FROM t") == "52");
  CHECK(b.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("WAL on a remote database: refused with a clear error unless locking_mode=EXCLUSIVE, which works") {
  std::string db = fresh("wal");
  {
    SqliteDb conn(pagefile_uri(db));
    conn.run("CREATE TABLE t(x)");
    CHECK(conn.exec("PRAGMA journal_mode=WAL") == SQLITE_ERROR);
    CHECK(conn.last_error().find("locking_mode=EXCLUSIVE") != std::string::npos);
    CHECK(conn.query("PRAGMA journal_mode") == "delete");
  }
  {
    SqliteDb conn(pagefile_uri(db));
    conn.run("PRAGMA locking_mode=EXCLUSIVE");
    CHECK(conn.query("PRAGMA journal_mode=WAL") == "wal");
    conn.run("INSERT INTO t SELECT randomblob(2000) FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value FROM s)");
    conn.run("PRAGMA wal_checkpoint; INSERT INTO t VALUES(1)");
    CHECK(conn.query("SELECT count(*) FROM t") == "301");
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
  }
  {
    // The database is in WAL mode now: without exclusive mode it cannot be
    // read (no shared memory for its wal-index), as SQLite answers on a VFS
    // without xShmMap, and the error says why.
    SqliteDb conn(pagefile_uri(db));
    CHECK(conn.exec("SELECT count(*) FROM t") == SQLITE_CANTOPEN);
    CHECK(conn.query("PRAGMA pagefile_last_error").find("locking_mode=EXCLUSIVE") != std::string::npos);
  }
  SqliteDb conn(pagefile_uri(db));
  conn.run("PRAGMA locking_mode=EXCLUSIVE");
  CHECK(conn.query("SELECT count(*) FROM t") == "301");
}

TEST_CASE("characteristics and controls: claims, NOTFOUND, handled ops, version 3 with xFetch") {
  RawFile f(fresh("controls"), SQLITE_OPEN_MAIN_DB);
  REQUIRE(f.rc == SQLITE_OK);
  // Pages of one sector or less: a crash changes no byte a write did not cover.
  CHECK(f.m().xDeviceCharacteristics(f.file) == SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  CHECK(f.m().xSectorSize(f.file) == 4096);
  {
    // Larger pages may be left part old, part new: nothing is claimed.
    const char* params[] = {"page_size", "16384", nullptr};
    RawFile big(fresh("controls-big"), SQLITE_OPEN_MAIN_DB, params, 1);
    REQUIRE(big.rc == SQLITE_OK);
    CHECK(big.m().xDeviceCharacteristics(big.file) == 0);
    CHECK(big.m().xSectorSize(big.file) == 16384);
  }
  CHECK(f.m().iVersion == 3);
  CHECK((f.m().xFetch != nullptr));
  CHECK((f.m().xUnfetch != nullptr));
  CHECK((f.m().xShmMap != nullptr));  // a local database's -shm (default_wal_test.cpp)
  void* p = &f;
  CHECK(f.m().xFetch(f.file, 0, 4096, &p) == SQLITE_OK);
  CHECK(p == nullptr);
  sqlite3_int64 hint = 1 << 20;
  int chunk = 65536;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_SIZE_HINT, &hint) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_CHUNK_SIZE, &chunk) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_SYNC, nullptr) == SQLITE_OK);
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_COMMIT_PHASETWO, nullptr) == SQLITE_OK);
  char* name = nullptr;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_VFSNAME, &name) == SQLITE_OK);
  CHECK(std::string(name) == "pagefile");
  sqlite3_free(name);
  int unused = 0;
  int level = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_LOCKSTATE, &level) == SQLITE_OK);
  CHECK(level == SQLITE_LOCK_NONE);
  int err = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_LAST_ERRNO, &err) == SQLITE_OK);
  CHECK(err == 0);
  char* temp_name = nullptr;  // the unix VFS's kind of temp name, where temp files go
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_TEMPFILENAME, &temp_name) == SQLITE_OK);
  REQUIRE(temp_name != nullptr);
  CHECK(std::string(temp_name).find("/etilqs_") != std::string::npos);
  sqlite3_free(temp_name);
  // The claim asked (-1), turned off, on again, as on unix.
  int psow = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(psow == 1);
  psow = 0;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(f.m().xDeviceCharacteristics(f.file) == 0);
  psow = 1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_POWERSAFE_OVERWRITE, &psow) == SQLITE_OK);
  CHECK(f.m().xDeviceCharacteristics(f.file) == SQLITE_IOCAP_POWERSAFE_OVERWRITE);
  // An mmap limit is kept and answered, though nothing is mapped.
  sqlite3_int64 limit = 1 << 20;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_MMAP_SIZE, &limit) == SQLITE_OK);
  CHECK(limit == 0);
  limit = -1;
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_MMAP_SIZE, &limit) == SQLITE_OK);
  CHECK(limit == 1 << 20);
  for (int op : {SQLITE_FCNTL_PERSIST_WAL, SQLITE_FCNTL_HAS_MOVED, 9999}) {
    CAPTURE(op);
    CHECK(f.m().xFileControl(f.file, op, &unused) == SQLITE_NOTFOUND);
  }
  char* pragma[3] = {nullptr, const_cast<char*>("cache_size"), nullptr};
  CHECK(f.m().xFileControl(f.file, SQLITE_FCNTL_PRAGMA, pragma) == SQLITE_NOTFOUND);
  // mmap asked for: SQLite falls back to xRead.
  SqliteDb conn(pagefile_uri(fresh("mmap")));
  CHECK(conn.query("PRAGMA mmap_size=1000000") == "1000000");
  conn.run("CREATE TABLE t(x); INSERT INTO t VALUES(42)");
  CHECK(conn.query("SELECT x FROM t") == "42");
}

// A database made by `sql` as a local Pagefile at dir/name; its path.
std::string make_local_db(const TempDir& dir, const std::string& name, const std::string& sql) {
  std::string path = (dir / name).string();
  SqliteDb conn(pagefile_uri(path, "&location=local"));
  REQUIRE(conn.open_rc() == SQLITE_OK);
  conn.run(sql);
  return path;
}

TEST_CASE("errors keep their meaning: a damaged Pagefile is SQLITE_CORRUPT, opened or read by a function") {
  TempDir dir;
  std::string path = make_local_db(dir, "damaged.db", "CREATE TABLE t(x); INSERT INTO t VALUES('kept')");
  {
    // A byte of its header past the magic, overwritten. (Without the magic
    // it would be a file of something else: SQLITE_NOTADB.)
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f.is_open());
    f.seekp(12);
    f.put('\x7f');
  }
  SqliteDb conn(pagefile_uri(path, "&location=local"));
  if (conn.open_rc() == SQLITE_OK) {
    // (SQLite may open lazily: the first read then meets the damage.)
    CHECK(conn.exec("SELECT * FROM t") == SQLITE_CORRUPT);
  } else {
    CHECK(conn.open_rc() == SQLITE_CORRUPT);
  }
  SqliteDb other(fresh("corrupt-fn"));
  REQUIRE(other.open_rc() == SQLITE_OK);
  int rc = other.exec(fmt::format("SELECT pagefile_read('{}')", path));
  CHECK(rc == SQLITE_CORRUPT);
  CHECK(other.last_error().find("Corruption") != std::string::npos);
}

TEST_CASE("location=local: a local Pagefile at the path, same behaviour") {
  TempDir dir;
  std::string path = make_local_db(dir, "local.db",
                                   "CREATE TABLE t(x); INSERT INTO t SELECT value FROM (WITH RECURSIVE s(value) AS "
                                   "(SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 1000) SELECT value FROM s)");
  {
    SqliteDb conn(pagefile_uri(path, "&location=local"));
    CHECK(conn.query("PRAGMA integrity_check") == "ok");
    CHECK(conn.query(fmt::format("SELECT pagefile_exists('{}')", path)) == "1");
  }
  CHECK(std::filesystem::exists(path));
  CHECK(!std::filesystem::exists(path + "-journal"));
  SqliteDb a(pagefile_uri(path, "&location=local"));
  SqliteDb b(pagefile_uri(path, "&location=local"));
  a.run("BEGIN IMMEDIATE");
  CHECK(b.exec("BEGIN IMMEDIATE") == SQLITE_BUSY);
  a.run("DELETE FROM t WHERE x > 10; COMMIT");
  CHECK(b.query("SELECT count(*) FROM t") == "10");
}

TEST_CASE("location=local where databases are remote by default: a relative name is the file at its absolute path, after a chdir too") {
  vfs();  // PAGEFILE_BUS names the embedded bus
  REQUIRE(std::getenv("PAGEFILE_BUS") != nullptr);
  TempDir dir;
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(dir / "a");
  {
    SqliteDb db("file:here.db?vfs=pagefile&location=local", "pagefile", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI);
    REQUIRE(db.open_rc() == SQLITE_OK);
    db.run("CREATE TABLE t(x); INSERT INTO t VALUES(1)");
    std::filesystem::current_path(dir / "b");
    db.run("BEGIN; INSERT INTO t VALUES(2)");
    CHECK(std::filesystem::exists(dir / "a" / "here.db-journal"));  // its journal beside it, in a
    CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db-journal"));
    db.run("COMMIT");
    CHECK(db.query(fmt::format("SELECT pagefile_exists('{}')", (dir / "a" / "here.db").string())) == "1");
  }
  std::filesystem::current_path(before);
  CHECK(std::filesystem::exists(dir / "a" / "here.db"));
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db-journal"));
  CHECK_FALSE(std::filesystem::exists(dir / "b" / "here.db"));
  SqliteDb again(pagefile_uri((dir / "a" / "here.db").string(), "&location=local"));
  CHECK(again.query("SELECT group_concat(x) FROM t") == "1,2");
  // One path is one database of a process: opened local here, it is not
  // opened remote too (its journal's name could not say whose it is).
  SqliteDb remote(pagefile_uri((dir / "a" / "here.db").string()));
  CHECK(remote.open_rc() == SQLITE_CANTOPEN);
  char why[512] = {};
  vfs()->xGetLastError(vfs(), sizeof why, why);
  CHECK(std::string(why).find("this process opened it local already") != std::string::npos);
}

TEST_CASE("xAccess of a journal follows its database: the remote store's answer until it is opened local, the file's after") {
  vfs();  // PAGEFILE_BUS names the embedded bus
  REQUIRE(std::getenv("PAGEFILE_BUS") != nullptr);
  TempDir dir;
  const std::string path = (dir / "late.db").string();
  const std::string journal = path + "-journal";
  {
    // A file at the journal's path with more than a header in it: what a
    // stat of a local journal takes for one.
    std::ofstream out(journal, std::ios::binary);
    out << std::string(2 * 4096, 'j');
  }
  // Asked twice (the second answer as the first), while the database is
  // the remote store's, as every name is here by default.
  CHECK(access(journal) == 0);
  CHECK(access(journal) == 0);
  SqliteDb db(pagefile_uri(path, "&location=local"));
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(access(journal) == 1);
  CHECK(access(journal) == 1);
  std::filesystem::remove(journal);
  CHECK(access(journal) == 0);
}

namespace {

// A local file made at its open, as the VFS's default opens one.
pagefile::OpenOptions new_local_file() {
  pagefile::OpenOptions open;
  open.create = true;
  open.location = pagefile::Location::kLocal;
  return open;
}

}  // namespace

TEST_CASE("a file's direct calls (lock levels, size) fail once its client stops, as its calls by descriptor do") {
  // The VFS asks a descriptor's PageIo itself at every transaction
  // (client/client_access.h); Client::stop closes every descriptor, and
  // nothing may reach a file the client has let go.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  auto file = pagefile::vfs::ByteFile::open(**client, (dir / "direct.db").string(), open,
                                            pagefile::vfs::ByteFile::Layout::kPages, nullptr);
  REQUIRE(file);
  auto io = (*file)->io();
  REQUIRE(io);
  CHECK((*io)->set_lock_level(pagefile::LockLevel::kShared));
  CHECK((*file)->refresh_size());
  const pagefile::Fd fd = (*file)->fd();
  REQUIRE((*client)->stop());
  CHECK((*client)->set_lock_level(fd, pagefile::LockLevel::kNone).is(pagefile::Code::kInvalidArgument));
  auto after = (*file)->io();
  REQUIRE_FALSE(after);
  CHECK(after.status().is(pagefile::Code::kInvalidArgument));
  CHECK(after.status().to_string().find("is stopped") != std::string::npos);
  CHECK((*file)->refresh_size().is(pagefile::Code::kInvalidArgument));
}

TEST_CASE("a WAL keeps the pages it reads while a checkpoint runs, and 16 after; changed pages beyond 16 are written meanwhile") {
  // ByteFile::keep_read_pages, as the VFS calls it while a connection of
  // the process holds the WAL's checkpoint lock: up to kCheckpointPages
  // pages read are kept, and lowered, the highest 16 stay.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  open.sector_checksums = true;  // as the VFS makes WAL files
  using pagefile::vfs::ByteFile;
  auto stats = std::make_shared<pagefile::vfs::IoStats>();
  auto file = ByteFile::open(**client, (dir / "k.db-wal").string(), open, ByteFile::Layout::kBytes, stats);
  REQUIRE(file);
  ByteFile& wal = **file;
  const auto page = static_cast<int64_t>(wal.page_size());
  constexpr int kPages = 40;
  static_assert(kPages > ByteFile::kMaxCachedPages && kPages < ByteFile::kCheckpointPages);
  // Every byte of page p of the data holds p.
  for (int p = 0; p < kPages; ++p) {
    REQUIRE(wal.write(std::vector<std::byte>(static_cast<size_t>(page), static_cast<std::byte>(p)), p * page));
  }
  REQUIRE(wal.sync());
  wal.drop_cache();
  // Reads 100 bytes of each page in [from, to): the pages read to do it.
  auto read_parts = [&](int from, int to) {
    const uint64_t before = stats->pages_read.load();
    for (int p = from; p < to; ++p) {
      std::vector<std::byte> got(100);
      REQUIRE(wal.read(got, p * page + 1000));
      CHECK(got[0] == static_cast<std::byte>(p));
      CHECK(got[99] == static_cast<std::byte>(p));
    }
    return stats->pages_read.load() - before;
  };
  CHECK(read_parts(0, kPages) == kPages);
  CHECK(read_parts(0, kPages) >= kPages - ByteFile::kMaxCachedPages);  // 16 kept
  wal.drop_cache();
  wal.keep_read_pages(ByteFile::kCheckpointPages);
  CHECK(read_parts(0, kPages) == kPages);
  CHECK(read_parts(0, kPages) == 0);  // all kept
  wal.keep_read_pages(ByteFile::kMaxCachedPages);
  CHECK(read_parts(kPages - 16, kPages) == 0);  // the highest 16 stayed
  CHECK(read_parts(0, kPages - 16) == kPages - 16);

  // Changed in part while pages are kept: beyond 16 changed, the lowest
  // are written at once, as ever, and nothing is lost.
  wal.drop_cache();
  wal.keep_read_pages(ByteFile::kCheckpointPages);
  const uint64_t writes_before = stats->write_requests.load();
  for (int p = 0; p < kPages; ++p) REQUIRE(wal.write(std::vector<std::byte>(10, std::byte{0xee}), p * page + 500));
  CHECK(stats->write_requests.load() - writes_before == kPages - ByteFile::kMaxCachedPages);
  REQUIRE(wal.sync());
  wal.keep_read_pages(ByteFile::kMaxCachedPages);
  auto again = ByteFile::open(**client, (dir / "k.db-wal").string(), open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(again);
  for (int p = 0; p < kPages; ++p) {
    std::vector<std::byte> got(static_cast<size_t>(page));
    REQUIRE((*again)->read(got, p * page));
    CHECK(got[499] == static_cast<std::byte>(p));
    CHECK(got[500] == std::byte{0xee});
    CHECK(got[509] == std::byte{0xee});
    CHECK(got[510] == static_cast<std::byte>(p));
  }
}

TEST_CASE("a journal's length: read whole and checked at each refresh; under the word, written as one sector") {
  // ByteFile::refresh_size reads the length page whole and checks it (the
  // lengths another descriptor wrote, an emptied file, damage anywhere in
  // it). Its write says that only its first 16 bytes changed: where the
  // page was read whole while no other descriptor may write (the VFS's
  // word: a WAL's write lock), a file with sector checksums writes its
  // first sector alone, and without the word the page whole.
  TempDir dir;
  auto client = pagefile::Client::start();
  REQUIRE(client);
  pagefile::OpenOptions open = new_local_file();
  open.sector_checksums = true;  // as the VFS makes journals and WAL files
  const std::string path = (dir / "log-wal").string();
  using pagefile::vfs::ByteFile;
  auto a = ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(a);
  auto b = ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr);
  REQUIRE(b);
  auto bytes = [](size_t n, char c) { return std::vector<std::byte>(n, static_cast<std::byte>(c)); };
  auto reload = [](ByteFile& f) {
    REQUIRE(f.reload());
    return f.size();
  };
  // Runs `f` under the word of `file` (b writes only while it is not said).
  auto alone = [](ByteFile& file, auto&& f) {
    auto io = file.io();
    REQUIRE(io);
    (*io)->exclude_other_writers(true);
    f();
    (*io)->exclude_other_writers(false);
  };
  auto reload_alone = [&](ByteFile& f) {
    alone(f, [&] { REQUIRE(f.reload()); });
    return f.size();
  };
  // Damages byte `at` of page 0 (doc/page_format.md: it follows the
  // header, 4096 bytes, and its group's block of sector checksums, 16
  // bytes a sector).
  const uint32_t page_size = (*a)->page_size();
  REQUIRE(page_size >= 3 * 4096);
  auto damage = [&](size_t at) {
    std::fstream disk(path, std::ios::in | std::ios::out | std::ios::binary);
    disk.seekg(static_cast<std::streamoff>(4096 + page_size / 4096 * 4096 + at));
    char c = 0;
    disk.get(c);
    disk.seekp(static_cast<std::streamoff>(4096 + page_size / 4096 * 4096 + at));
    disk.put(static_cast<char>(c ^ 0x04));
  };
  REQUIRE((*a)->write(bytes(100, 'a'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 100);
  CHECK(reload_alone(**a) == 100);
  // Longer, by the other descriptor.
  REQUIRE((*b)->write(bytes(30000, 'b'), 100));
  REQUIRE((*b)->drain());
  CHECK(reload_alone(**a) == 30100);
  std::vector<std::byte> got(30100);
  auto n = (*a)->read(got, 0);
  REQUIRE(n);
  CHECK(*n == 30100);
  CHECK(got[99] == std::byte{'a'});
  CHECK(got[30099] == std::byte{'b'});
  // Emptied (no length page left), then emptied and grown again.
  REQUIRE((*b)->truncate(0));
  CHECK(reload_alone(**a) == 0);
  CHECK(reload(**b) == 0);
  REQUIRE((*a)->write(bytes(5000, 'c'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 5000);
  REQUIRE((*b)->truncate(200));
  CHECK(reload_alone(**a) == 200);
  // Damage past the length's 16 bytes, in the same sector or another: the
  // page fails its check, with the word or without, as for a new opener.
  for (size_t at : {size_t{100}, size_t{2 * 4096 + 7}}) {
    damage(at);
    alone(**a, [&] { CHECK((*a)->reload().is(pagefile::Code::kCorruption)); });
    CHECK((*a)->reload().is(pagefile::Code::kCorruption));
    CHECK_FALSE(ByteFile::open(**client, path, open, ByteFile::Layout::kBytes, nullptr));
    damage(at);  // (mended)
    CHECK(reload(**a) == 200);
  }
  // Its length damaged: read whole, it fails its check.
  damage(8);
  alone(**a, [&] { CHECK((*a)->reload().is(pagefile::Code::kCorruption)); });
  CHECK((*a)->size() == 200);  // (as last known: nothing else was taken)
  damage(8);
  // Written under the word after a read there: only its first sector. A
  // sector damaged behind the writer's back in between stays damaged (what
  // shows that it was not written), and is found by the next reader.
  alone(**a, [&] {
    REQUIRE((*a)->reload());
    damage(2 * 4096 + 7);
    REQUIRE((*a)->write(bytes(10, 'd'), 200));
    REQUIRE((*a)->drain());
  });
  CHECK((*b)->reload().is(pagefile::Code::kCorruption));
  damage(2 * 4096 + 7);
  CHECK(reload(**b) == 210);
  // Without the word, the page whole: damage there is written over.
  REQUIRE((*a)->reload());
  damage(2 * 4096 + 7);
  REQUIRE((*a)->write(bytes(10, 'e'), 210));
  REQUIRE((*a)->drain());
  CHECK(reload(**b) == 220);
  // The pages are not counted before the length page is read: a page 0
  // cut short (a crash during the file's first write) and one of zeros
  // each say length 0, with the word or without, as when counted.
  REQUIRE((*b)->close());
  std::filesystem::resize_file(path, 4096 + page_size / 4096 * 4096 + 100);
  CHECK(reload(**a) == 0);
  CHECK(reload_alone(**a) == 0);
  auto io = (*a)->io();
  REQUIRE(io);
  auto zeros = (*io)->write_direct(0, std::vector<std::byte>(page_size), {});
  REQUIRE(zeros);
  REQUIRE(*zeros);
  CHECK(reload(**a) == 0);
  CHECK(reload_alone(**a) == 0);
  REQUIRE((*a)->write(bytes(3, 'f'), 0));
  REQUIRE((*a)->drain());
  CHECK(reload_alone(**a) == 3);
  REQUIRE((*a)->close());
}

TEST_CASE("names on a bus: a path's directory must exist here, as for unix; a plain store name is the store's") {
  vfs();  // registered, on the embedded bus
  TempDir dir;
  std::string missing_dir = (dir.path() / "no-such-dir" / "app.db").string();
  std::string a_dir = (dir.path() / "sub").string();
  std::filesystem::create_directories(a_dir);
  struct Case {
    std::string name;
    int flags;
    const char* why;
  };
  const int create = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI;
  const Case cases[] = {
      {missing_dir, create, "directory"},
      {a_dir, create, "is a directory"},
      {"relative-no-such-dir/" + fresh("app"), create, "directory"},
      {fresh("plain-ro"), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "does not exist"},
      {(dir.path() / "ro-missing.db").string(), SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, "does not exist"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    // The unix VFS's answer, and ours.
    sqlite3* unix_db = nullptr;
    int unix_rc = sqlite3_open_v2(c.name.c_str(), &unix_db, c.flags & ~SQLITE_OPEN_URI, "unix");
    if (unix_rc == SQLITE_OK) unix_rc = sqlite3_exec(unix_db, "PRAGMA schema_version", nullptr, nullptr, nullptr);
    sqlite3_close_v2(unix_db);
    CHECK(unix_rc == SQLITE_CANTOPEN);
    SqliteDb db(pagefile_uri(c.name), "pagefile", c.flags);
    int rc = db.open_rc() == SQLITE_OK ? db.exec("PRAGMA schema_version") : db.open_rc();
    INFO(db.error(), " / ", db.last_error());
    CHECK((rc & 0xff) == SQLITE_CANTOPEN);
    char why[512] = {};
    vfs()->xGetLastError(vfs(), sizeof why, why);
    CHECK(std::string(why).find(c.why) != std::string::npos);
  }
  // Where the directory exists, a path opens; and xAccess, xDelete and
  // xFullPathname agree on it, and on a plain name.
  // (A name holding "-mj", as a super-journal's, is a database's all the same.)
  for (std::string name : {(std::filesystem::path(a_dir) / fresh("here")).string(), fresh("plain"), fresh("x-mj")}) {
    CAPTURE(name);
    char full[1100];
    REQUIRE(vfs()->xFullPathname(vfs(), name.c_str(), sizeof full, full) == SQLITE_OK);
    // (A plain name is made absolute as unix makes it, and names the same
    // store file: the one from every directory.)
    CHECK(std::string(full) == (name.front() == '/' ? name : std::filesystem::current_path().string() + "/" + name));
    {
      SqliteDb db(pagefile_uri(name));
      REQUIRE(db.open_rc() == SQLITE_OK);
      db.run("CREATE TABLE t(x); INSERT INTO t VALUES (1)");
      CHECK(std::string(sqlite3_db_filename(db.get(), "main")) == full);
    }
    CHECK(access(name) == 1);
    CHECK(access(full) == 1);
    CHECK(vfs()->xDelete(vfs(), full, 1) == SQLITE_OK);
    CHECK(access(name) == 0);
    CHECK(access(full) == 0);
    CHECK(vfs()->xDelete(vfs(), name.c_str(), 1) == SQLITE_IOERR_DELETE_NOENT);
  }
}

TEST_CASE("location=local: an ordinary SQLite database at the path is read as it is, never written, and the log says how to convert it") {
  vfs();
  TempDir dir;
  std::string path = (dir.path() / "plain.db").string();
  {
    SqliteDb plain(path, "unix");
    REQUIRE(plain.open_rc() == SQLITE_OK);
    plain.run("CREATE TABLE t(x); INSERT INTO t VALUES (1), (2)");
  }
  auto bytes = [&] {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  const std::string before = bytes();
  {
    SqliteDb db(pagefile_uri(path, "&location=local"));
    REQUIRE(db.open_rc() == SQLITE_OK);
    char why[512] = {};
    vfs()->xGetLastError(vfs(), sizeof why, why);
    CHECK(std::string(why).find("is an ordinary SQLite database, not a Pagefile") != std::string::npos);
    CHECK(std::string(why).find("pagefile import") != std::string::npos);
    CHECK(std::string(why).find("read-only") != std::string::npos);
    CHECK(db.query("SELECT count(*) FROM t") == "2");  // read through the unix VFS
    CHECK(db.exec("INSERT INTO t VALUES (3)") == SQLITE_READONLY);
  }
  CHECK(bytes() == before);
  SqliteDb again(path, "unix");
  CHECK(again.query("SELECT count(*) FROM t") == "2");
}
