// A second (or third) SQLite client for the multi-process VFS tests.
//   vfs_worker URI insert TAG N   N transactions, each inserting (TAG, i)
//   vfs_worker URI log TAG N      N transactions, each inserting (TAG, i)
//                                 three times, and printing "committed i"
//                                 once its COMMIT returned (the crash matrix
//                                 counts them; tests/faults/run)
//   vfs_worker URI log-unsynced TAG N
//                                 the same with PRAGMA synchronous=OFF, each
//                                 transaction also rewriting up to 100 rows
//                                 before (a journal of many pages, then as
//                                 many database writes)
//   vfs_worker URI log-wal-unsynced TAG N
//                                 the same in WAL mode (checkpoints every
//                                 few transactions, SQLite's default)
//   vfs_worker URI hold           a big transaction that spills to the
//                                 database, then "spilled" and wait to be killed
//   vfs_worker URI stop-commit N  a transaction of 'late' rows whose COMMIT
//                                 stops the process (SIGSTOP, "stopping") at
//                                 its Nth write to the database, after the
//                                 journal is on disk; when continued, prints
//                                 "commit rc=RC" (SQLite's extended code)
//   vfs_worker URI increment N [JOURNAL_MODE [SYNCHRONOUS]]
//                                 N transactions (BEGIN IMMEDIATE), each adding
//                                 one to c.n (with PRAGMA journal_mode, and
//                                 PRAGMA synchronous, first)
//   vfs_worker URI try-write      BEGIN IMMEDIATE with no busy timeout: prints
//                                 "rc=RC" (SQLite's extended code)
//   vfs_worker URI hold-write MS [RELEASE]
//                                 BEGIN IMMEDIATE, adds one to c.n, prints
//                                 "holding", waits MS ms (or until the file
//                                 RELEASE exists, at most MS ms), COMMIT,
//                                 "committed"
//   vfs_worker URI update-row ID N
//                                 N transactions, the i-th setting t.tag of
//                                 row ID to "ID:i" and its pad to a new blob
//   vfs_worker URI commit-hold N MS
//                                 with PRAGMA synchronous=NORMAL (in WAL
//                                 mode a COMMIT then syncs nothing), N
//                                 transactions each adding one to c.n, then
//                                 "committed", and waits MS ms with the
//                                 connection open
//   vfs_worker URI read-loop N    N read transactions with no busy timeout,
//                                 each reading c.n (never less than the one
//                                 before) and count(*) of t; prints
//                                 "reads N busy B last L"
//   vfs_worker URI checkpoint M   PRAGMA wal_checkpoint(M): "checkpoint B|L|C"
//   vfs_worker URI mixed N        N transactions each adding one to c.n and a
//                                 500-byte row to t, with 5 point reads of t
//                                 after each (bench/sqlite_processes.py's worker)
//   vfs_worker URI crash-wal N    N committed transactions in WAL mode, each
//                                 adding one to c.n, then SIGKILL itself
//                                 (its -wal and -shm stay behind)
//   vfs_worker URI exclusive-wal-kill
//                                 with locking_mode=EXCLUSIVE (no -shm, no
//                                 barrier) and synchronous=NORMAL in WAL
//                                 mode: sets c.n to 2, then 3, a TRUNCATE
//                                 checkpoint before each (each commit frame
//                                 at the WAL's first frame), then SIGKILL
//                                 itself
//   vfs_worker URI exclusive-journal-kill MODE
//                                 with locking_mode=EXCLUSIVE and
//                                 synchronous=OFF in journal mode MODE:
//                                 sets c.n to 2, then 3, then SIGKILL
//                                 itself (the journal's header zeroed is
//                                 its commit: no unlock, no sync after it)
//   vfs_worker URI as-other-user  as user nobody when run as root (so that
//                                 permissions count): opens URI, reads c,
//                                 adds one to c.n, prints
//                                 "open=RC read=RC write=RC" (primary codes)
// Exits 0 on success, 1 with the error on stderr.
#include <signal.h>
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "pagefile/pagefile_vfs.h"

namespace {

int fail(sqlite3* db, const char* what) {
  std::fprintf(stderr, "vfs_worker: %s: %s (%d)\n", what, sqlite3_errmsg(db), sqlite3_extended_errcode(db));
  return 1;
}

bool exec(sqlite3* db, const std::string& sql) { return sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK; }

// Says "killing", then dies as a crash would: nothing closed, nothing flushed.
[[noreturn]] void kill_self() {
  std::printf("killing\n");
  std::fflush(stdout);
  ::raise(SIGKILL);
  ::_exit(137);
}

// Runs `sql`, then dies as a crash would (kill_self); fails as `what` when
// `sql` does.
int exec_then_kill(sqlite3* db, const std::string& sql, const char* what) {
  if (!exec(db, sql)) return fail(db, what);
  kill_self();
}

// "stopper": a shim over the pagefile VFS (SQLite's test_vfs method) that
// stops this process at the Nth write to a main database once armed.
sqlite3_vfs* g_below = nullptr;
int g_stop_at = 0;  // 0: not armed
int g_writes = 0;

struct StopperFile {
  sqlite3_file base;
  sqlite3_file* real;  // the pagefile VFS's file, allocated after this
  bool main_db;
};

sqlite3_file* real_of(sqlite3_file* f) { return reinterpret_cast<StopperFile*>(f)->real; }

int st_close(sqlite3_file* f) { return real_of(f)->pMethods->xClose(real_of(f)); }
int st_read(sqlite3_file* f, void* b, int n, sqlite3_int64 o) { return real_of(f)->pMethods->xRead(real_of(f), b, n, o); }
int st_write(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  if (reinterpret_cast<StopperFile*>(f)->main_db && g_stop_at > 0 && ++g_writes == g_stop_at) {
    std::printf("stopping\n");
    std::fflush(stdout);
    ::raise(SIGSTOP);
  }
  return real_of(f)->pMethods->xWrite(real_of(f), b, n, o);
}
int st_truncate(sqlite3_file* f, sqlite3_int64 s) { return real_of(f)->pMethods->xTruncate(real_of(f), s); }
int st_sync(sqlite3_file* f, int flags) { return real_of(f)->pMethods->xSync(real_of(f), flags); }
int st_size(sqlite3_file* f, sqlite3_int64* s) { return real_of(f)->pMethods->xFileSize(real_of(f), s); }
int st_lock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xLock(real_of(f), l); }
int st_unlock(sqlite3_file* f, int l) { return real_of(f)->pMethods->xUnlock(real_of(f), l); }
int st_reserved(sqlite3_file* f, int* r) { return real_of(f)->pMethods->xCheckReservedLock(real_of(f), r); }
int st_control(sqlite3_file* f, int op, void* a) { return real_of(f)->pMethods->xFileControl(real_of(f), op, a); }
int st_sector(sqlite3_file* f) { return real_of(f)->pMethods->xSectorSize(real_of(f)); }
int st_device(sqlite3_file* f) { return real_of(f)->pMethods->xDeviceCharacteristics(real_of(f)); }

const sqlite3_io_methods kStopperMethods = {1, st_close, st_read, st_write, st_truncate, st_sync, st_size,
                                            st_lock, st_unlock, st_reserved, st_control, st_sector, st_device,
                                            nullptr, nullptr, nullptr, nullptr, nullptr, nullptr};

int st_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* f, int flags, int* out) {
  auto* sf = reinterpret_cast<StopperFile*>(f);
  sf->real = reinterpret_cast<sqlite3_file*>(sf + 1);
  sf->main_db = (flags & SQLITE_OPEN_MAIN_DB) != 0;
  f->pMethods = nullptr;
  int rc = g_below->xOpen(g_below, name, sf->real, flags, out);
  if (rc == SQLITE_OK) f->pMethods = &kStopperMethods;
  return rc;
}

void register_stopper() {
  g_below = sqlite3_vfs_find("pagefile");
  static sqlite3_vfs v = *g_below;
  v.zName = "stopper";
  v.szOsFile = static_cast<int>(sizeof(StopperFile)) + g_below->szOsFile;
  v.xOpen = st_open;
  sqlite3_vfs_register(&v, 0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: vfs_worker URI MODE ARGS... (the modes are listed at the top of vfs_worker.cpp)\n");
    return 2;
  }
  sqlite3_config(SQLITE_CONFIG_LOG, +[](void*, int code, const char* message) {
    if ((code & 0xff) == SQLITE_CORRUPT || (code & 0xff) == SQLITE_IOERR) std::fprintf(stderr, "vfs_worker: sqlite log %d: %s\n", code, message);
  }, nullptr);
  if (sqlite3_pagefile_register(0) != SQLITE_OK) return 1;
  register_stopper();
  std::string uri = argv[1];
  std::string mode = argv[2];
  if (mode == "as-other-user") {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) {
      std::perror("vfs_worker: setuid nobody");
      return 1;
    }
    sqlite3* db = nullptr;
    int open = sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, nullptr);
    int read = open == SQLITE_OK ? sqlite3_exec(db, "SELECT n FROM c", nullptr, nullptr, nullptr) & 0xff : -1;
    int write = open == SQLITE_OK ? sqlite3_exec(db, "UPDATE c SET n = n + 1", nullptr, nullptr, nullptr) & 0xff : -1;
    std::printf("open=%d read=%d write=%d\n", open, read, write);
    sqlite3_close(db);
    return 0;
  }
  if (mode == "stop-commit") {
    auto at = uri.find("vfs=pagefile");
    if (at != std::string::npos) uri.replace(at, std::strlen("vfs=pagefile"), "vfs=stopper");
  }
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(uri.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI, "pagefile") !=
      SQLITE_OK) {
    return fail(db, "open");
  }
  sqlite3_busy_timeout(db, 30000);
  if (mode == "insert" && argc == 5) {
    int n = std::atoi(argv[4]);
    for (int i = 1; i <= n; ++i) {
      std::string sql = "BEGIN IMMEDIATE; INSERT INTO t(tag, i, pad) VALUES('" + std::string(argv[3]) + "', " +
                        std::to_string(i) + ", randomblob(700)); COMMIT;";
      if (!exec(db, sql)) {
        exec(db, "ROLLBACK");
        return fail(db, "insert");
      }
    }
  } else if ((mode == "log" || mode == "log-unsynced" || mode == "log-wal-unsynced") && argc == 5) {
    int n = std::atoi(argv[4]);
    const bool unsynced = mode != "log";
    if (mode == "log-wal-unsynced" && !exec(db, "PRAGMA journal_mode=WAL")) return fail(db, "journal_mode=WAL");
    if (unsynced && !exec(db, "PRAGMA synchronous=OFF")) return fail(db, "synchronous=OFF");
    const std::string rewrite =
        unsynced ? "UPDATE t SET pad = randomblob(900) WHERE id IN (SELECT id FROM t ORDER BY random() LIMIT 100); " : "";
    for (int i = 1; i <= n; ++i) {
      std::string row = "('" + std::string(argv[3]) + "', " + std::to_string(i) + ", randomblob(900))";
      if (!exec(db, "BEGIN IMMEDIATE; " + rewrite + "INSERT INTO t(tag, i, pad) VALUES " + row + ", " + row + ", " + row +
                        "; COMMIT;")) {
        exec(db, "ROLLBACK");
        return fail(db, "log");
      }
      std::printf("committed %d\n", i);
      std::fflush(stdout);
    }
  } else if (mode == "stop-commit" && argc == 4) {
    if (!exec(db, "BEGIN; INSERT INTO t(tag, i, pad) SELECT 'late', value, randomblob(1500) FROM "
                  "(WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 200) "
                  "SELECT value FROM s); UPDATE t SET pad = randomblob(500) WHERE tag = 'kept';")) {
      return fail(db, "stop-commit");
    }
    g_stop_at = std::atoi(argv[3]);
    int rc = sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    g_stop_at = 0;
    std::printf("commit rc=%d %s\n", rc == SQLITE_OK ? 0 : sqlite3_extended_errcode(db), sqlite3_errmsg(db));
    std::fflush(stdout);
    if (rc != SQLITE_OK) exec(db, "ROLLBACK");
  } else if (mode == "increment" && argc >= 4 && argc <= 6) {
    if (argc >= 5 && !exec(db, std::string("PRAGMA journal_mode=") + argv[4])) return fail(db, "journal_mode");
    if (argc == 6 && !exec(db, std::string("PRAGMA synchronous=") + argv[5])) return fail(db, "synchronous");
    int n = std::atoi(argv[3]);
    for (int i = 1; i <= n; ++i) {
      if (!exec(db, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1; COMMIT;")) {
        exec(db, "ROLLBACK");
        return fail(db, "increment");
      }
    }
  } else if (mode == "mixed" && argc == 4) {
    // bench/sqlite_processes.py's worker: a counter, a log, point reads.
    int n = std::atoi(argv[3]);
    for (int i = 1; i <= n; ++i) {
      if (!exec(db, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1; INSERT INTO t(tag, i, pad) VALUES('m', 0, randomblob(500)); COMMIT;")) {
        exec(db, "ROLLBACK");
        return fail(db, "mixed write");
      }
      for (int r = 0; r < 5; ++r) {
        sqlite3_stmt* st = nullptr;
        if (sqlite3_prepare_v2(db, "SELECT length(pad) FROM t WHERE id = abs(random()) % (SELECT max(id) FROM t) + 1", -1, &st,
                               nullptr) != SQLITE_OK) {
          return fail(db, "mixed prepare");
        }
        int rc = sqlite3_step(st);
        sqlite3_finalize(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE) return fail(db, "mixed read");
      }
    }
  } else if (mode == "try-write") {
    sqlite3_busy_timeout(db, 0);
    int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr);
    std::printf("rc=%d\n", rc == SQLITE_OK ? 0 : sqlite3_extended_errcode(db));
    exec(db, "ROLLBACK");
  } else if (mode == "hold-write" && (argc == 4 || argc == 5)) {
    if (!exec(db, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1;")) return fail(db, "hold-write");
    std::printf("holding\n");
    std::fflush(stdout);
    // Told when to let go, not guessing how long the others take: on a
    // loaded machine a fixed hold may end before they have tried.
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoi(argv[3]));
    while (std::chrono::steady_clock::now() < until && (argc == 4 || ::access(argv[4], F_OK) != 0)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (!exec(db, "COMMIT")) return fail(db, "hold-write commit");
    std::printf("committed\n");
  } else if (mode == "update-row" && argc == 5) {
    const std::string id = argv[3];
    for (int i = 1, n = std::atoi(argv[4]); i <= n; ++i) {
      std::string sql = "UPDATE t SET tag = '" + id + ":" + std::to_string(i) + "', pad = randomblob(3000) WHERE id = " + id;
      if (!exec(db, sql.c_str())) return fail(db, "update-row");
    }
  } else if (mode == "commit-hold" && argc == 5) {
    if (!exec(db, "PRAGMA synchronous=NORMAL")) return fail(db, "synchronous=NORMAL");
    for (int i = std::atoi(argv[3]); i > 0; --i) {
      if (!exec(db, "UPDATE c SET n = n + 1")) return fail(db, "commit-hold");
    }
    std::printf("committed\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(argv[4])));
  } else if (mode == "read-loop" && argc == 4) {
    // First the schema, with the busy timeout. A connection's first read
    // takes SHARED on the database, and a WAL connection that closes (a
    // reader done before another has started, a checkpoint's process)
    // tries EXCLUSIVE to checkpoint and remove the WAL (sqlite3WalClose):
    // refused by the others' SHARED, it holds PENDING for a moment, and a
    // SHARED asked for meanwhile is SQLITE_BUSY, on unix as here (one CI
    // run's reader met it). What the loop measures is whether the writer's
    // transaction blocks a reader, so the loop has no timeout.
    if (!exec(db, "SELECT count(*) FROM sqlite_schema")) return fail(db, "read-loop schema");
    sqlite3_busy_timeout(db, 0);
    int n = std::atoi(argv[3]);
    long long last = -1;
    int busy = 0;
    for (int i = 0; i < n; ++i) {
      sqlite3_stmt* st = nullptr;
      if (sqlite3_prepare_v2(db, "SELECT (SELECT n FROM c), (SELECT count(*) FROM t)", -1, &st, nullptr) != SQLITE_OK) {
        return fail(db, "read-loop prepare");
      }
      int rc = sqlite3_step(st);
      if (rc == SQLITE_ROW) {
        long long now = sqlite3_column_int64(st, 0);
        if (now < last) {
          std::fprintf(stderr, "vfs_worker: c.n went back from %lld to %lld\n", last, now);
          return 1;
        }
        last = now;
      } else if ((rc & 0xff) == SQLITE_BUSY) {
        ++busy;
      } else {
        sqlite3_finalize(st);
        return fail(db, "read-loop");
      }
      sqlite3_finalize(st);
    }
    std::printf("reads %d busy %d last %lld\n", n, busy, last);
  } else if (mode == "checkpoint" && argc == 4) {
    sqlite3_stmt* st = nullptr;
    std::string sql = std::string("PRAGMA wal_checkpoint(") + argv[3] + ")";
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW) {
      return fail(db, "checkpoint");
    }
    std::printf("checkpoint %d|%d|%d\n", sqlite3_column_int(st, 0), sqlite3_column_int(st, 1), sqlite3_column_int(st, 2));
    sqlite3_finalize(st);
  } else if (mode == "crash-wal" && argc == 4) {
    if (!exec(db, "PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0")) return fail(db, "crash-wal");
    int n = std::atoi(argv[3]);
    for (int i = 1; i <= n; ++i) {
      if (!exec(db, "BEGIN IMMEDIATE; UPDATE c SET n = n + 1; INSERT INTO t(tag, i, pad) VALUES('wal', " +
                        std::to_string(i) + ", randomblob(2000)); COMMIT;")) {
        return fail(db, "crash-wal");
      }
    }
    kill_self();
  } else if (mode == "exclusive-wal-kill") {
    return exec_then_kill(db,
                          "PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                          "PRAGMA wal_checkpoint(TRUNCATE); UPDATE c SET n = 2;"
                          "PRAGMA wal_checkpoint(TRUNCATE); UPDATE c SET n = 3;",
                          "exclusive-wal-kill");
  } else if (mode == "exclusive-journal-kill" && argc > 3) {
    return exec_then_kill(db,
                          std::string("PRAGMA locking_mode=EXCLUSIVE; PRAGMA journal_mode=") + argv[3] +
                              "; PRAGMA synchronous=OFF; UPDATE c SET n = 2; UPDATE c SET n = 3;",
                          "exclusive-journal-kill");
  } else if (mode == "hold") {
    if (!exec(db, "PRAGMA cache_size=5; BEGIN; INSERT INTO t(tag, i, pad) SELECT 'lost', value, randomblob(3000) "
                  "FROM (WITH RECURSIVE s(value) AS (SELECT 1 UNION ALL SELECT value + 1 FROM s WHERE value < 2000) "
                  "SELECT value FROM s); UPDATE t SET pad = randomblob(800) WHERE tag = 'kept';")) {
      return fail(db, "hold");
    }
    std::printf("spilled\n");
    std::fflush(stdout);
    for (;;) ::pause();
  } else {
    std::fprintf(stderr, "vfs_worker: unknown mode %s\n", mode.c_str());
    return 2;
  }
  sqlite3_close(db);
  return 0;
}
