// The VFS as a drop-in default (issue 19), in WAL mode: a real -shm shared
// by processes, readers never blocked by the writer, checkpoints from any of
// them, a crashed process's -wal and -shm, and WAL under a shim that keeps
// the wal-index itself.
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "store/disk_faults.h"
#include "tests/support/temp_dir.h"
#include "tests/vfs/embedded_store.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/sqlite_db.h"
#include "tests/vfs/worker.h"
#include "tests/vfs/default_test_util.h"
#include "pagefile/pagefile_vfs.h"

using namespace pagefile::test;
namespace fs = std::filesystem;

// The VFS registered without a bus, and a new database holding the
// counter's tables in WAL mode (db_uri) in a directory of its own.
struct WalCounterDb {
  WalCounterDb() {
    register_without_bus();
    db_uri = new_counter_db(dir / "counter.db", "wal");
  }
  TempDir dir;
  std::string db_uri;
};

TEST_CASE_FIXTURE(WalCounterDb, "WAL: reader processes are never blocked by the writer; a reader checkpoints") {
  {
    SqliteDb db(db_uri, nullptr);
    db.run("UPDATE c SET n = 5");
  }
  // A writer in the middle of its transaction: three readers, no busy
  // timeout, each read the committed 5 two hundred times, while it holds.
  pid_t writer = start_worker(dir / "writer.txt", {db_uri, "hold-write", "60000"});
  REQUIRE(wait_for_text(dir / "writer.txt", "holding"));
  std::vector<pid_t> readers;
  for (int r = 0; r < 3; ++r) readers.push_back(start_worker(dir / fmt::format("r{}.txt", r), {db_uri, "read-loop", "200"}));
  for (int r = 0; r < 3; ++r) {
    CHECK(wait_worker(readers[r]) == 0);
    CHECK(read_file(dir / fmt::format("r{}.txt", r)) == "reads 200 busy 0 last 5\n");
  }
  Outcome checkpoint = run_program(binary_from_env("VFS_WORKER"), dir.path(), {db_uri, "checkpoint", "PASSIVE"});
  CHECK(checkpoint.out.rfind("checkpoint 0|", 0) == 0);
  CHECK(read_file(dir / "writer.txt") == "holding\n");  // all of that while it held its transaction
  ::kill(writer, SIGKILL);  // its transaction never commits
  CHECK(wait_worker(writer) == 128 + SIGKILL);
  CHECK(counter(db_uri) == "5");

  // Now a writer at work while readers read and one checkpoints. (A
  // connection kept open keeps the wal-index initialised: the first
  // connection to open a -shm resets it, and one opening it meanwhile gets
  // SQLITE_BUSY from that, with no busy timeout, on unix too.)
  SqliteDb keeper(db_uri, nullptr);
  REQUIRE(keeper.query("SELECT n FROM c") == "5");
  pid_t busy_writer = start_worker(dir / "writer2.txt", {db_uri, "increment", "300"});
  readers.clear();
  for (int r = 0; r < 3; ++r) readers.push_back(start_worker(dir / fmt::format("r{}.txt", r), {db_uri, "read-loop", "500"}));
  Outcome during = run_program(binary_from_env("VFS_WORKER"), dir.path(), {db_uri, "checkpoint", "PASSIVE"});
  CHECK(during.exit_status == 0);
  CHECK(during.out.rfind("checkpoint 0|", 0) == 0);
  for (int r = 0; r < 3; ++r) {
    CHECK(wait_worker(readers[r]) == 0);  // it checks that c.n never goes back
    CHECK(read_file(dir / fmt::format("r{}.txt", r)).find("busy 0") != std::string::npos);
  }
  CHECK(wait_worker(busy_writer) == 0);
  Outcome last = run_program(binary_from_env("VFS_WORKER"), dir.path(), {db_uri, "checkpoint", "TRUNCATE"});
  CHECK(last.out == "checkpoint 0|0|0\n");
  CHECK(counter(db_uri) == "305");
}

TEST_CASE("WAL: a checkpoint reads each page of the WAL once and no old checksum of the database's; one cut by a torn write loses nothing") {
  // Only a checkpoint writes a database in WAL mode, and it holds the WAL's
  // checkpoint lock: meanwhile no one else writes the database, and its
  // page writes read one checksum block per group instead of each page's
  // entry (as a rollback transaction's do under RESERVED). And the WAL
  // keeps the pages it reads meanwhile: the checkpoint reads the frames in
  // the database's page order, which is not the WAL's.
  register_without_bus();
  TempDir dir;
  SqliteDb db(uri(dir / "c.db", "pagefile"));
  REQUIRE(db.open_rc() == SQLITE_OK);
  CHECK(db.query("PRAGMA journal_mode=wal") == "wal");
  db.run("PRAGMA wal_autocheckpoint=0; PRAGMA synchronous=OFF;"
         "CREATE TABLE t(id INTEGER PRIMARY KEY, pad BLOB);"
         "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)"
         " INSERT INTO t SELECT i, zeroblob(3000) FROM n;");
  CHECK(db.query("PRAGMA wal_checkpoint(TRUNCATE)") == "0|0|0");

  // Counted: every disk read of a checkpoint (a fault armed for a read
  // never reached): at most each 16 KiB page of the WAL once, and the
  // database's checksum blocks. An entry read per page written, or a WAL
  // page read for each of its frames, would be several times that.
  auto checkpoint_reads = [&](int at_least) {
    pagefile::DiskFaults::arm(pagefile::DiskOp::kRead, UINT64_MAX, pagefile::DiskFault::kEio);
    const std::string counts = db.query("PRAGMA wal_checkpoint");
    const uint64_t reads = pagefile::DiskFaults::seen();
    pagefile::DiskFaults::disarm();
    INFO("checkpoint ", counts, ", reads ", reads);
    REQUIRE(counts.rfind("0|", 0) == 0);
    const int64_t frames = std::stoll(counts.substr(counts.rfind('|') + 1));
    CHECK(frames >= at_least);
    const int64_t wal_pages = (32 + frames * (4096 + 24) + 16383) / 16384 + 1;  // (and its length page)
    CHECK(reads <= static_cast<uint64_t>(wal_pages) + 8);
    CHECK(db.query("PRAGMA wal_checkpoint(TRUNCATE)") == "0|0|0");
  };
  SUBCASE("frames in page order") {
    db.run("UPDATE t SET pad = randomblob(3001)");
    checkpoint_reads(1000);
    CHECK(db.query("SELECT count(*) FROM t WHERE length(pad) = 3001") == "1000");
  }
  SUBCASE("frames in no order: a transaction for each of 400 rows") {
    for (int i = 0; i < 400; ++i) db.run(fmt::format("UPDATE t SET pad = randomblob(3001) WHERE id = {}", (i * 389) % 1000 + 1));
    checkpoint_reads(400);
    CHECK(db.query("SELECT count(*) FROM t WHERE length(pad) = 3001") == "400");
  }

  // A torn write of the Nth write of a checkpoint (an entry or a page, one
  // each way): the checkpoint fails, every row still reads its new bytes
  // (from the WAL, where the wal-index still sends readers), and the next
  // checkpoint completes.
  for (uint64_t nth : {40, 41}) {
    CAPTURE(nth);
    const int pad = static_cast<int>(3000 + nth);
    db.run(fmt::format("UPDATE t SET pad = randomblob({})", pad));
    pagefile::DiskFaults::arm(pagefile::DiskOp::kWrite, nth, pagefile::DiskFault::kTornWrite);
    int rc = db.exec("PRAGMA wal_checkpoint");
    const bool fired = pagefile::DiskFaults::fired();
    pagefile::DiskFaults::disarm();
    CHECK(fired);
    CHECK(rc != SQLITE_OK);
    CHECK(db.query(fmt::format("SELECT count(*) FROM t WHERE length(pad) = {}", pad)) == "1000");
    CHECK(db.query("PRAGMA integrity_check") == "ok");
    CHECK(db.query("PRAGMA wal_checkpoint(TRUNCATE)") == "0|0|0");
    CHECK(db.query(fmt::format("SELECT count(*) FROM t WHERE length(pad) = {}", pad)) == "1000");
  }
  SqliteDb again(uri(dir / "c.db", "pagefile"));
  CHECK(again.query("SELECT count(*) FROM t WHERE length(pad) = 3041") == "1000");
  CHECK(again.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE_FIXTURE(WalCounterDb, "WAL with synchronous=NORMAL: commits another process has not synced are read here at once") {
  // Such a COMMIT syncs nothing: what its process holds of the WAL must
  // reach the file when its write lock goes (drain_wals), before this
  // process follows the wal-index to frames the file would not have yet.
  SqliteDb keeper(db_uri, nullptr);  // (keeps the wal-index: no checkpoint at the worker's close)
  REQUIRE(keeper.query("SELECT n FROM c") == "0");
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    std::string out = (dir / fmt::format("w{}.txt", round)).string();
    pid_t writer = start_worker(out, {db_uri, "commit-hold", std::to_string(round), "60000"});
    REQUIRE(wait_for_text(out, "committed"));
    CHECK(keeper.query("SELECT n FROM c") == std::to_string(round * (round + 1) / 2));
    CHECK(keeper.query("PRAGMA integrity_check") == "ok");
    ::kill(writer, SIGKILL);
    CHECK(wait_worker(writer) == 128 + SIGKILL);
  }
}

TEST_CASE("WAL: a commit whose frames cannot be written fails at its COMMIT; no connection ever reads it") {
  register_without_bus();
  // synchronous=NORMAL: SQLite syncs nothing at the commit, so the parts of
  // 16 KiB pages the WAL holds back were sent at the xShmBarrier before the
  // frames are published, whose error SQLite never sees: the COMMIT said
  // SQLITE_OK, and the other connection read the page the WAL held before
  // (found by an independent review). And rollback too, as on unix.
  for (std::string sync : {"NORMAL", "FULL"}) {
    CAPTURE(sync);
    TempDir dir;
    const std::string db_uri = uri(dir / "w.db", "pagefile");
    SqliteDb writer(db_uri, nullptr);
    REQUIRE(writer.open_rc() == SQLITE_OK);
    CHECK(writer.query("PRAGMA journal_mode=wal") == "wal");
    writer.run("PRAGMA synchronous=" + sync + "; CREATE TABLE t(v); INSERT INTO t VALUES(1)");
    SqliteDb reader(db_uri, nullptr);
    REQUIRE(reader.query("SELECT max(v) FROM t") == "1");
    pagefile::DiskFaults::arm(pagefile::DiskOp::kWrite, 1, pagefile::DiskFault::kEio, /*sticky=*/true);
    const int rc = writer.exec("INSERT INTO t VALUES(2)");
    pagefile::DiskFaults::disarm();
    INFO(writer.error());
    CHECK((rc & 0xff) == SQLITE_IOERR);
    CHECK(reader.query("SELECT count(*), max(v) FROM t") == "1|1");
    CHECK(writer.query("SELECT count(*), max(v) FROM t") == "1|1");
    // The write lock was let go: the other connection writes at once.
    CHECK(reader.exec("INSERT INTO t VALUES(3)") == SQLITE_OK);
    writer.run("INSERT INTO t VALUES(4)");
    CHECK(reader.query("SELECT group_concat(v) FROM t") == "1,3,4");
    CHECK(reader.query("PRAGMA integrity_check") == "ok");
  }
}

TEST_CASE_FIXTURE(WalCounterDb, "WAL: a commit whose frame lies where the last one did is sent at its COMMIT (a process killed then keeps it)") {
  // After a TRUNCATE checkpoint the next commit frame is the WAL's first
  // again, where the last one was: taken for that frame's header written
  // again (walRewriteChecksums), its page stayed held back, and with no
  // -shm (locking_mode=EXCLUSIVE) nothing sent it before the process died
  // (found by an independent review, on a bus).
  REQUIRE(run_worker(dir / "w.txt", {db_uri, "exclusive-wal-kill"}) == 128 + SIGKILL);
  CHECK(counter(db_uri) == "3");
}

TEST_CASE("exclusive locking, synchronous=OFF: a commit that zeroes the journal's header is in the file when COMMIT returns") {
  register_without_bus();
  // Its commit is the header's 28 zero bytes (zeroJournalHdr), followed by
  // no unlock and no sync: kept back in memory, a process killed after its
  // COMMIT left the journal hot, and its rollback undid the commit (found
  // by an independent review; unix keeps it).
  for (const char* mode : {"delete", "persist"}) {
    CAPTURE(mode);
    TempDir dir;
    std::string db_uri = new_counter_db(dir / "x.db", "delete");
    REQUIRE(run_worker(dir / "w.txt", {db_uri, "exclusive-journal-kill", mode}) == 128 + SIGKILL);
    CHECK(counter(db_uri) == "3");  // (counter checks the database's integrity)
  }
}

TEST_CASE_FIXTURE(WalCounterDb, "WAL: a connection that appends to the WAL after another process grew it, having read none of its frames, keeps them") {
  // This connection's transactions learn of the WAL's length only when
  // they need it (ByteFile::reload_lazily): its next frame goes after the
  // other process's, into a WAL page this connection never read, which
  // must be read before it is written in part, not taken for zeros.
  SqliteDb a(db_uri, nullptr);
  // Two rows, each on a leaf page of its own: a transaction on one reads
  // nothing of the other's.
  a.run("INSERT INTO t(id, tag, pad) VALUES (1, '1:0', randomblob(3000)), (2, '2:0', randomblob(3000))");
  a.run("UPDATE t SET tag = '1:1' WHERE id = 1");
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    Outcome other = run_program(binary_from_env("VFS_WORKER"), dir.path(), {db_uri, "update-row", "2", "8"});
    REQUIRE(other.exit_status == 0);
    a.run(fmt::format("UPDATE t SET tag = '1:{}' WHERE id = 1", round + 1));
    SqliteDb fresh(db_uri, nullptr);
    CHECK(fresh.query("PRAGMA integrity_check") == "ok");
    CHECK(fresh.query("SELECT group_concat(tag, ' ') FROM t ORDER BY id") == fmt::format("1:{} 2:8", round + 1));
  }
  CHECK(a.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE_FIXTURE(WalCounterDb, "WAL: four processes write, checkpoint and read a growing database; every read sees every page") {
  // Each process's checkpoints grow the database file; every other process
  // must read the new pages from it, not the size it saw before (a stale
  // size reads them as zeros: "database disk image is malformed").
  {
    SqliteDb db(db_uri, nullptr);
    db.run("INSERT INTO t(tag, i, pad) SELECT 'first', value, randomblob(500) FROM "
           "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 20) SELECT value FROM s)");
  }
  for (int round = 1; round <= 2; ++round) {
    CAPTURE(round);
    run_together(dir, 4, {db_uri, "mixed", "200"});
    CHECK(counter(db_uri) == std::to_string(800 * round));
  }
}

TEST_CASE("WAL: the -wal and -shm of a process killed after its commits; a -shm full of garbage") {
  register_without_bus();
  TempDir dir;
  fs::path path = dir / "crash.db";
  std::string db_uri = uri(path, "pagefile");
  create_counter(db_uri, "delete");
  CHECK(run_worker(dir / "crash.txt", {db_uri, "crash-wal", "20"}) == 128 + SIGKILL);
  CHECK(fs::exists(dir / "crash.db-wal"));
  CHECK(fs::exists(dir / "crash.db-shm"));
  CHECK(counter(db_uri) == "20");  // the committed transactions, from the WAL
  // A -shm nobody holds is not trusted: rebuilt from the WAL.
  CHECK(run_worker(dir / "crash.txt", {db_uri, "crash-wal", "7"}) == 128 + SIGKILL);
  {
    std::ofstream garbage(dir / "crash.db-shm", std::ios::binary | std::ios::trunc);
    garbage << std::string(65536, '\xa5');
  }
  CHECK(counter(db_uri) == "27");
  SqliteDb db(db_uri, nullptr);
  CHECK(db.query("SELECT count(*), sum(length(pad)) FROM t") == "27|54000");
}

TEST_CASE("a user who may not write the -wal, the -shm or the database reads it, and gets SQLITE_READONLY: the unix VFS's answers") {
  // wal2.test's 13.* on both VFSes, as another user than the files' owner
  // (root ignores permissions): each file of a WAL database left by a
  // killed process readable and writable (0666), read-only (0444) or
  // neither (0000).
  register_without_bus();
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  struct Case {
    int db, wal, shm;
    const char* want;
  };
  const Case cases[] = {
      {0666, 0666, 0666, "open=0 read=0 write=0\n"},   {0666, 0444, 0666, "open=0 read=0 write=8\n"},
      {0666, 0666, 0444, "open=0 read=0 write=8\n"},   {0444, 0666, 0666, "open=0 read=0 write=8\n"},
      {0666, 0000, 0666, "open=0 read=14 write=14\n"}, {0666, 0666, 0000, "open=0 read=14 write=14\n"},
      {0000, 0666, 0666, "open=14 read=-1 write=-1\n"},
  };
  for (const char* vfs : {"unix", "pagefile"}) {
    fs::path base = dir / vfs;
    fs::create_directories(base);
    ::chmod(base.c_str(), 0777);
    std::string saved = uri(base / "saved.db", vfs);
    create_counter(saved, "delete");
    ::chmod((base / "saved.db").c_str(), 0640);
    REQUIRE(run_worker(dir / "crash.txt", {saved, "crash-wal", "3"}) == 128 + SIGKILL);
    // The -wal and -shm get the database's permissions, whatever the umask.
    struct stat wal {}, shm {};
    REQUIRE(::stat((base / "saved.db-wal").c_str(), &wal) == 0);
    REQUIRE(::stat((base / "saved.db-shm").c_str(), &shm) == 0);
    CHECK((wal.st_mode & 0777) == 0640);
    CHECK((shm.st_mode & 0777) == 0640);
  }
  int n = 0;
  for (const Case& c : cases) {
    CAPTURE(c.db);
    CAPTURE(c.wal);
    CAPTURE(c.shm);
    std::string got[2];
    int k = 0;
    ++n;
    for (const char* vfs : {"unix", "pagefile"}) {
      fs::path base = dir / vfs;
      fs::path db = base / fmt::format("case{}.db", n);
      for (const auto& [suffix, mode] : {std::pair<std::string, int>{"", c.db}, {"-wal", c.wal}, {"-shm", c.shm}}) {
        fs::copy_file(base / ("saved.db" + suffix), db.string() + suffix);
        ::chmod((db.string() + suffix).c_str(), static_cast<mode_t>(mode));
      }
      got[k++] = run_program(binary_from_env("VFS_WORKER"), dir.path(), {uri(db, vfs), "as-other-user"}).out;
    }
    CHECK(got[0] == c.want);
    CHECK(got[1] == got[0]);
  }
}

namespace {

// "heapshm": a VFS over pagefile that keeps the wal-index itself, in this
// process's memory, as SQLite's test VFS (testvfs) does: the pagefile VFS
// never hears of the WAL's locks and barriers. For one thread using its
// connections in turn (its locks are always granted).
sqlite3_vfs* g_heap_below = nullptr;
std::map<std::string, std::vector<std::vector<char>>> g_heap_regions;

struct HeapShmFile {
  sqlite3_file base;
  std::string* name;
  sqlite3_file* real() { return reinterpret_cast<sqlite3_file*>(this + 1); }
};
HeapShmFile* heap(sqlite3_file* f) { return reinterpret_cast<HeapShmFile*>(f); }

sqlite3_io_methods heap_methods() {
  sqlite3_io_methods m{};
  m.iVersion = 2;
  m.xClose = [](sqlite3_file* f) {
    int rc = heap(f)->real()->pMethods->xClose(heap(f)->real());
    delete heap(f)->name;
    return rc;
  };
  m.xRead = [](sqlite3_file* f, void* b, int n, sqlite3_int64 o) { return heap(f)->real()->pMethods->xRead(heap(f)->real(), b, n, o); };
  m.xWrite = [](sqlite3_file* f, const void* b, int n, sqlite3_int64 o) { return heap(f)->real()->pMethods->xWrite(heap(f)->real(), b, n, o); };
  m.xTruncate = [](sqlite3_file* f, sqlite3_int64 s) { return heap(f)->real()->pMethods->xTruncate(heap(f)->real(), s); };
  m.xSync = [](sqlite3_file* f, int flags) { return heap(f)->real()->pMethods->xSync(heap(f)->real(), flags); };
  m.xFileSize = [](sqlite3_file* f, sqlite3_int64* s) { return heap(f)->real()->pMethods->xFileSize(heap(f)->real(), s); };
  m.xLock = [](sqlite3_file* f, int l) { return heap(f)->real()->pMethods->xLock(heap(f)->real(), l); };
  m.xUnlock = [](sqlite3_file* f, int l) { return heap(f)->real()->pMethods->xUnlock(heap(f)->real(), l); };
  m.xCheckReservedLock = [](sqlite3_file* f, int* r) { return heap(f)->real()->pMethods->xCheckReservedLock(heap(f)->real(), r); };
  m.xFileControl = [](sqlite3_file* f, int op, void* a) { return heap(f)->real()->pMethods->xFileControl(heap(f)->real(), op, a); };
  m.xSectorSize = [](sqlite3_file* f) { return heap(f)->real()->pMethods->xSectorSize(heap(f)->real()); };
  m.xDeviceCharacteristics = [](sqlite3_file* f) { return heap(f)->real()->pMethods->xDeviceCharacteristics(heap(f)->real()); };
  m.xShmMap = [](sqlite3_file* f, int region, int size, int extend, void volatile** out) {
    auto& regions = g_heap_regions[*heap(f)->name];
    *out = nullptr;
    if (static_cast<int>(regions.size()) <= region) {
      if (!extend) return SQLITE_OK;
      regions.resize(static_cast<size_t>(region) + 1);
    }
    if (regions[static_cast<size_t>(region)].empty()) regions[static_cast<size_t>(region)].assign(static_cast<size_t>(size), 0);
    *out = regions[static_cast<size_t>(region)].data();
    return SQLITE_OK;
  };
  m.xShmLock = [](sqlite3_file*, int, int, int) { return SQLITE_OK; };
  m.xShmBarrier = [](sqlite3_file*) {};
  m.xShmUnmap = [](sqlite3_file* f, int remove) {
    if (remove) g_heap_regions.erase(*heap(f)->name);
    return SQLITE_OK;
  };
  return m;
}
const sqlite3_io_methods kHeapMethods = heap_methods();

void register_heap_shm() {
  static sqlite3_vfs v = [] {
    g_heap_below = sqlite3_vfs_find("pagefile");
    sqlite3_vfs vfs = *g_heap_below;
    vfs.zName = "heapshm";
    vfs.szOsFile = static_cast<int>(sizeof(HeapShmFile)) + g_heap_below->szOsFile;
    vfs.xOpen = [](sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
      auto* h = heap(f);
      h->base.pMethods = nullptr;
      int rc = g_heap_below->xOpen(g_heap_below, name, h->real(), flags, out);
      if (rc != SQLITE_OK) return rc;
      h->name = new std::string(name ? name : "");
      h->base.pMethods = &kHeapMethods;
      return SQLITE_OK;
    };
    return vfs;
  }();
  static bool registered = sqlite3_vfs_register(&v, 0) == SQLITE_OK;
  REQUIRE(registered);
}

// The VFSes, registered (the default with no bus, and heapshm over it).
bool registered() {
  register_without_bus();
  register_heap_shm();
  return true;
}

// Two connections of this process to one database, both open.
struct TwoConnections {
  bool vfs = registered();
  SqliteDb a;
  SqliteDb b;
  explicit TwoConnections(const std::string& db_uri) : a(db_uri, nullptr), b(db_uri, nullptr) {
    REQUIRE(a.open_rc() == SQLITE_OK);
    REQUIRE(b.open_rc() == SQLITE_OK);
  }
};

// Through `db`: a table t of 300 rows of a page each, v = 0, after a table
// `first`, so that t's root is not page 2 (read right after page 1, in
// order, it would begin a new run).
void make_page_rows(SqliteDb& db) {
  db.run("CREATE TABLE first(x); CREATE TABLE t(id INTEGER PRIMARY KEY, v INTEGER, pad BLOB);"
         "INSERT INTO t SELECT value, 0, randomblob(3000) FROM "
         "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 300) SELECT value FROM s)");
}

// What `db` reads of the last rows, each added 1 `round` times: straight to
// rows of the last pages (the last run of a scan's, were it kept).
void check_last_rows(SqliteDb& db, int round) {
  CHECK(db.query("SELECT v FROM t WHERE id = 300") == std::to_string(round));
  CHECK(db.query("SELECT v FROM t WHERE id = 290") == std::to_string(round));
}

}  // namespace

TEST_CASE("WAL under a VFS that keeps the wal-index itself (as SQLite's testvfs): connections of one process read each other's commits") {
  // The pagefile VFS is not told when a connection commits or begins to
  // read; its connections share one open WAL, and a read past the end it
  // last saw asks the file again, so each sees the others' frames and
  // checkpoints as on unix.
  TempDir dir;
  TwoConnections both(uri(dir / "heap.db", "heapshm"));
  auto& [vfs, a, b] = both;
  CHECK(b.query("PRAGMA journal_mode=WAL") == "wal");
  b.run("PRAGMA wal_autocheckpoint=0; CREATE TABLE t(a, pad)");
  for (int round = 1; round <= 4; ++round) {
    CAPTURE(round);
    SqliteDb& writer = round % 2 ? a : b;
    SqliteDb& reader = round % 2 ? b : a;
    writer.run("INSERT INTO t SELECT value, randomblob(700) FROM "
               "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 50) SELECT value FROM s)");
    CHECK(reader.query("SELECT count(*) FROM t") == std::to_string(50 * round));
    if (round == 2) CHECK(reader.query("PRAGMA wal_checkpoint(RESTART)").rfind("0|", 0) == 0);
  }
  CHECK(a.query("PRAGMA integrity_check") == "ok");
  CHECK(b.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("pages read ahead in runs are read again after another connection's commit: rollback, WAL, WAL under a shim") {
  // A local database read in order is read several pages at a time, kept
  // for the reads that follow (ByteFile's runs). Another connection's
  // commit, and its checkpoint into the database in WAL mode, must be seen
  // at the next transaction whichever pages the run held: the rows here
  // are a page each, and the ones updated are the table's last, the pages
  // of the last run of the scan before.
  for (std::string setting : {"delete", "wal", "wal-heapshm"}) {
    CAPTURE(setting);
    TempDir dir;
    const bool heap = setting == "wal-heapshm";
    const bool wal = heap || setting == "wal";
    TwoConnections both(uri(dir / "runs.db", heap ? "heapshm" : "pagefile"));
    auto& [vfs, a, b] = both;
    if (wal) CHECK(b.query("PRAGMA journal_mode=WAL") == "wal");
    make_page_rows(b);
    if (wal) b.query("PRAGMA wal_checkpoint(TRUNCATE)");
    a.run("PRAGMA cache_size=5");
    for (int round = 1; round <= 3; ++round) {
      CAPTURE(round);
      CHECK(a.query("SELECT count(*), sum(v) FROM t") == fmt::format("300|{}", 50 * (round - 1)));
      b.run("UPDATE t SET v = v + 1 WHERE id > 250");
      if (wal) CHECK(b.query("PRAGMA wal_checkpoint(TRUNCATE)").rfind("0|", 0) == 0);
      check_last_rows(a, round);
      CHECK(a.query("SELECT sum(v) FROM t WHERE id > 250") == std::to_string(50 * round));
    }
    CHECK(a.query("PRAGMA integrity_check") == "ok");
  }
}

TEST_CASE("runs under a shim that keeps the wal-index: a connection that scanned in rollback mode reads no stale page once the database is in WAL") {
  // The connection that scans is told of the switch to WAL by no write or
  // read of the database's header of its own (page 1 comes from the WAL):
  // the WAL open in the process is what stops its runs.
  TempDir dir;
  TwoConnections both(uri(dir / "switch.db", "heapshm"));
  auto& [vfs, a, b] = both;
  make_page_rows(b);
  a.run("PRAGMA cache_size=5");
  CHECK(a.query("SELECT count(*), sum(v) FROM t") == "300|0");
  CHECK(b.query("PRAGMA journal_mode=WAL") == "wal");
  b.run("CREATE TABLE x(y)");  // page 1 in the WAL
  for (int round = 1; round <= 3; ++round) {
    CAPTURE(round);
    CHECK(a.query("SELECT count(*), sum(v) FROM t") == fmt::format("300|{}", 50 * (round - 1)));
    b.run("UPDATE t SET v = v + 1 WHERE id > 250");
    b.query("PRAGMA wal_checkpoint(PASSIVE)");
    b.run(fmt::format("CREATE TABLE z{}(y)", round));  // the WAL restarts, page 1 in it again
    check_last_rows(a, round);
  }
  CHECK(a.query("PRAGMA integrity_check") == "ok");
}
