// vfs_methods: what each VFS method costs, the pagefile default beside the
// unix VFS, called directly on one open database of each (bench/README.md).
//
//   vfs_methods --extension build/vfs/pagefile.so [--dir /tmp/x] [--rounds 7] [--calls 100000]
//               [--only TEXT]   (the rows whose name holds TEXT: one method under a profiler)
//
// SQLite's workloads (bench/sqlite_default.sh) say how far apart the two
// VFSes are; this says where. It makes two databases of --rows rows of one
// ~3000-byte blob each (one 4 KiB page a row), fresh, one under each VFS,
// then for each method calls it --calls times on each database in turn,
// --rounds rounds (the first of the two alternating), and prints per
// method the median nanoseconds per call of each and their difference. The methods are those a SQLite transaction in
// rollback-journal mode calls on a warm database: the lock taken and
// dropped, the journal's xAccess, xFileSize, the header read (16 bytes at
// offset 24), a page read (cycling over the pages, all in the page cache,
// and in a scattered order), xCheckReservedLock. Then whole read transactions, a prepared query of
// one row whose page SQLite has cached, in rollback-journal and in WAL mode
// (two more databases): what a transaction costs with no page read but its
// header's. Last, a rollback journal's life in a commit under RESERVED
// (journal_life: made, written, closed, deleted; then with its two syncs),
// which DELETE mode repeats at every commit, called --calls/100 and
// --calls/1000 times. Calls in a loop are warmer than calls between a
// query's other work: the figures are a floor, the workloads the truth.
//
// Exit status: 0 on success, 1 on a SQLite error, 2 on a usage error.
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

struct Database {
  std::string label;
  sqlite3* db = nullptr;
  sqlite3_file* file = nullptr;
  sqlite3_vfs* vfs = nullptr;
  std::string journal;
  sqlite3_stmt* point = nullptr;  // one row, cached by SQLite after its first read
};

[[noreturn]] void fail(sqlite3* db, const std::string& what) {
  fmt::print(stderr, "vfs_methods: {}: {}\n", what, db ? sqlite3_errmsg(db) : "no connection");
  std::exit(1);
}

void exec(sqlite3* db, const std::string& sql) {
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(db, sql);
}

Database open(const std::string& label, const std::string& uri, const std::string& path, int rows,
              const char* journal_mode) {
  Database d;
  d.label = label;
  for (const char* suffix : {"", "-journal", "-wal", "-shm"}) std::filesystem::remove(path + suffix);  // (a fresh one)
  if (sqlite3_open_v2(uri.c_str(), &d.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr) !=
      SQLITE_OK) {
    fail(d.db, "open " + uri);
  }
  exec(d.db, "PRAGMA page_size=4096");
  exec(d.db, fmt::format("PRAGMA journal_mode={}", journal_mode));
  exec(d.db, "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, pad BLOB)");
  exec(d.db, fmt::format("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {}) "
                         "INSERT INTO t SELECT i, randomblob(3000) FROM n",
                         rows));
  exec(d.db, "SELECT count(*), sum(length(pad)) FROM t");  // the pages into the page cache
  if (sqlite3_file_control(d.db, "main", SQLITE_FCNTL_FILE_POINTER, &d.file) != SQLITE_OK ||
      sqlite3_file_control(d.db, "main", SQLITE_FCNTL_VFS_POINTER, &d.vfs) != SQLITE_OK) {
    fail(d.db, "file control");
  }
  d.journal = path + "-journal";
  if (sqlite3_prepare_v2(d.db, "SELECT length(pad) FROM t WHERE id = 1", -1, &d.point, nullptr) != SQLITE_OK) {
    fail(d.db, "prepare");
  }
  return d;
}

// One method, called on a database: false when a call failed.
using Method = std::function<bool(Database&, int64_t call)>;

struct Row {
  std::string name;
  Method method;
  int held = SQLITE_LOCK_SHARED;  // the lock held around the calls, as SQLite holds it
  bool wal = false;               // on the WAL-mode databases
  int64_t per_call = 1;           // --calls divided by this: a call that takes the disk's time
};

// A rollback journal's life in a commit, as SQLite's pager lives it under
// RESERVED: made, its 512-byte header and three page records written
// (page number, page, checksum: 4104 bytes each), then with `syncs` its
// two syncs (the records; the header rewritten with their count), closed
// and deleted. In DELETE mode every commit makes and deletes one.
bool journal_life(Database& d, bool syncs) {
  std::vector<std::byte> slot(static_cast<size_t>(d.vfs->szOsFile));
  auto* file = reinterpret_cast<sqlite3_file*>(slot.data());
  std::array<std::byte, 4096> bytes{};
  // (Its header begins with SQLite's journal magic: a zeroed one is the
  // commit of PERSIST mode, which the VFS writes through at once.)
  const unsigned char magic[] = {0xd9, 0xd5, 0x05, 0xf9, 0x20, 0xa1, 0x63, 0xd7};
  std::array<std::byte, 512> header{};
  std::memcpy(header.data(), magic, sizeof magic);
  const int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_MAIN_JOURNAL;
  int out = 0;
  if (d.vfs->xOpen(d.vfs, d.journal.c_str(), file, flags, &out) != SQLITE_OK) return false;
  const sqlite3_io_methods* io = file->pMethods;
  bool ok = io->xWrite(file, header.data(), 512, 0) == SQLITE_OK;
  for (int64_t record = 0; ok && record < 3; ++record) {
    const int64_t at = 512 + record * 4104;
    ok = io->xWrite(file, bytes.data(), 4, at) == SQLITE_OK && io->xWrite(file, bytes.data(), 4096, at + 4) == SQLITE_OK &&
         io->xWrite(file, bytes.data(), 4, at + 4100) == SQLITE_OK;
  }
  if (ok && syncs) {
    ok = io->xSync(file, SQLITE_SYNC_NORMAL) == SQLITE_OK && io->xWrite(file, header.data(), 12, 0) == SQLITE_OK &&
         io->xSync(file, SQLITE_SYNC_NORMAL) == SQLITE_OK;
  }
  ok = io->xClose(file) == SQLITE_OK && ok;
  return d.vfs->xDelete(d.vfs, d.journal.c_str(), 0) == SQLITE_OK && ok;
}

bool step_point(Database& d) {
  bool ok = sqlite3_step(d.point) == SQLITE_ROW;
  return sqlite3_reset(d.point) == SQLITE_OK && ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string extension = "build/vfs/pagefile.so";
  std::string dir;
  int rounds = 7;
  int64_t calls = 100000;
  int rows = 2000;
  std::string only;
  CLI::App app{"vfs_methods: each VFS method's cost, pagefile's default beside unix"};
  app.add_option("--extension", extension, "pagefile.so")->capture_default_str();
  app.add_option("--dir", dir, "where the two databases go (default: a new directory under /tmp)");
  app.add_option("--rounds", rounds, "rounds; each method's median is shown")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--calls", calls, "calls of a method per round and database")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rows", rows, "rows (pages) of each database")->capture_default_str()->check(CLI::Range(10, 1000000));
  app.add_option("--only", only, "only the methods whose name holds this text");
  CLI11_PARSE(app, argc, argv);

  sqlite3* loader = nullptr;
  if (sqlite3_open(":memory:", &loader) != SQLITE_OK) fail(loader, "open :memory:");
  sqlite3_enable_load_extension(loader, 1);
  char* error = nullptr;
  if (sqlite3_load_extension(loader, extension.c_str(), nullptr, &error) != SQLITE_OK) {
    fmt::print(stderr, "vfs_methods: load {}: {}\n", extension, error ? error : "?");
    sqlite3_free(error);
    return 2;
  }
  const bool own_dir = dir.empty();
  if (own_dir) {
    char pattern[] = "/tmp/vfs_methods.XXXXXX";
    if (::mkdtemp(pattern) == nullptr) return 2;
    dir = pattern;
  }
  std::filesystem::create_directories(dir);
  // Unix's and pagefile's, in rollback-journal mode; then in WAL mode.
  std::vector<Database> dbs;
  std::vector<Database> wal_dbs;
  for (const char* vfs : {"unix", "pagefile"}) {
    std::string path = fmt::format("{}/{}.db", dir, vfs);
    dbs.push_back(open(vfs, fmt::format("file:{}?vfs={}", path, vfs), path, rows, "delete"));
    std::string wal = fmt::format("{}/{}-wal-mode.db", dir, vfs);
    wal_dbs.push_back(open(vfs, fmt::format("file:{}?vfs={}", wal, vfs), wal, rows, "wal"));
  }

  std::vector<std::byte> buffer(4096);
  auto lock = [](Database& d, int level) { return d.file->pMethods->xLock(d.file, level) == SQLITE_OK; };
  auto unlock = [](Database& d, int level) { return d.file->pMethods->xUnlock(d.file, level) == SQLITE_OK; };
  auto read_page = [&](Database& d, int64_t page) {
    return d.file->pMethods->xRead(d.file, buffer.data(), 4096, page * 4096) == SQLITE_OK;
  };
  const std::vector<Row> rows_shown = {
      {"xLock SHARED + xUnlock NONE",
       [&](Database& d, int64_t) { return lock(d, SQLITE_LOCK_SHARED) && unlock(d, SQLITE_LOCK_NONE); },
       SQLITE_LOCK_NONE},
      {"xAccess journal", [&](Database& d, int64_t) {
         int out = 0;
         return d.vfs->xAccess(d.vfs, d.journal.c_str(), SQLITE_ACCESS_EXISTS, &out) == SQLITE_OK;
       }},
      {"xFileSize", [&](Database& d, int64_t) {
         sqlite3_int64 size = 0;
         return d.file->pMethods->xFileSize(d.file, &size) == SQLITE_OK;
       }},
      {"xRead 16 bytes at 24", [&](Database& d, int64_t) {
         return d.file->pMethods->xRead(d.file, buffer.data(), 16, 24) == SQLITE_OK;
       }},
      {"xRead a page", [&](Database& d, int64_t call) { return read_page(d, 1 + call % (rows - 1)); }},
      {"xRead a page at random", [&](Database& d, int64_t call) {
         // (A fixed scatter, the same for both: no run of pages a read-ahead could use.)
         return read_page(d, 1 + static_cast<int64_t>((static_cast<uint64_t>(call) * 0x9E3779B97F4A7C15u) >> 40) % (rows - 1));
       }},
      {"xCheckReservedLock", [&](Database& d, int64_t) {
         int out = 0;
         return d.file->pMethods->xCheckReservedLock(d.file, &out) == SQLITE_OK;
       }},
      {"transaction (rollback journal)", [](Database& d, int64_t) { return step_point(d); }, SQLITE_LOCK_NONE},
      {"transaction (WAL)", [](Database& d, int64_t) { return step_point(d); }, SQLITE_LOCK_NONE, true},
      {"journal made and deleted", [](Database& d, int64_t) { return journal_life(d, false); }, SQLITE_LOCK_RESERVED,
       false, 100},
      {"journal with its two syncs", [](Database& d, int64_t) { return journal_life(d, true); },
       SQLITE_LOCK_RESERVED, false, 1000},
  };

  fmt::print("vfs_methods: {} rounds of {} calls a method, databases of {} pages in {}\n", rounds, calls, rows, dir);
  fmt::print("{:30} {:>10} {:>10} {:>10} {:>7}\n", "method", "unix ns", "pagefile", "diff", "ratio");
  for (const Row& row : rows_shown) {
    if (row.name.find(only) == std::string::npos) continue;
    std::vector<Database>& pair = row.wal ? wal_dbs : dbs;
    std::vector<std::vector<double>> ns(pair.size());
    for (int round = 0; round < rounds; ++round) {
      for (size_t i = 0; i < pair.size(); ++i) {
        // (Each goes first in every other round.)
        size_t k = round % 2 == 0 ? i : pair.size() - 1 - i;
        Database& d = pair[k];
        for (int level : {SQLITE_LOCK_SHARED, SQLITE_LOCK_RESERVED}) {
          if (row.held >= level && !lock(d, level)) fail(d.db, d.label + ": xLock");
        }
        const int64_t n = std::max<int64_t>(1, calls / row.per_call);
        auto start = std::chrono::steady_clock::now();
        for (int64_t call = 0; call < n; ++call) {
          if (!row.method(d, call)) fail(d.db, d.label + ": " + row.name);
        }
        std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
        if (row.held != SQLITE_LOCK_NONE && !unlock(d, SQLITE_LOCK_NONE)) fail(d.db, d.label + ": xUnlock");
        ns[k].push_back(took.count() / static_cast<double>(n));
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    double u = median(ns[0]);
    double p = median(ns[1]);
    fmt::print("{:30} {:>10.0f} {:>10.0f} {:>+10.0f} {:>7.2f}\n", row.name, u, p, p - u, p / u);
  }
  for (auto* all : {&dbs, &wal_dbs}) {
    for (auto& d : *all) {
      sqlite3_finalize(d.point);
      sqlite3_close(d.db);
    }
  }
  sqlite3_close(loader);
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}
