// The io methods of store files: one function per method, one table (the
// shape of os_unix.c). Byte mapping, write-behind and read-ahead live
// in ByteFile; this file adds SQLite's codes and locks. The file controls
// are in file_control.cpp, the wal-index (xShm*) in wal_index.cpp.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "core/mutex.h"
#include "core/page_checksum.h"
#include "store/file_header.h"
#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

// The stripe unit that keeps a file whole on one server (2^30 pages: 4 TiB
// of 4 KiB pages).
constexpr uint32_t kWholeFileStripe = 1u << 30;

// A journal or WAL descriptor may have stayed open while its database was
// unlocked (exclusive mode, or a shim claiming UNDELETABLE_WHEN_OPEN, as
// SQLite's journal2.test does): another descriptor may have written it
// since, a hot journal among others. After a fresh SHARED lock on the
// database its size and pages are read again, as a unix descriptor would
// see them.
//
// In WAL mode with shared memory, SQLite holds its SHARED lock on the
// database for as long as it is open, and begins each transaction with a
// lock of the wal-index instead (x_shm_lock counts those as fresh locks
// too): then the database file is read afresh as well, since a checkpoint
// in another process may have written it. The database's and the WAL's
// sizes are read again only when needed (ByteFile::reload_lazily): SQLite
// knows both from the wal-index, and a stat at every read transaction
// would cost more than the rest of the VFS's work in it.
Status catch_up(StoreFile& st) REQUIRES(st.mu) {
  if (st.main_db && !st.shm) return Status::ok();
  uint64_t now = st.config->fresh_locks->load();
  if (now == st.fresh_locks_seen) return Status::ok();
  if (st.main_db || st.wal) {
    st.file->reload_lazily();
    st.fresh_locks_seen = now;
    return Status::ok();
  }
  Status s = st.file->reload();
  if (s) st.fresh_locks_seen = now;
  return s;
}

// Sends what the database's journals open in this process hold back to the
// store (DbConfig::journals). Only the holder of the database's RESERVED
// lock writes a journal, so each holds back only that writer's records.
// Before a database write (`all` false), not a journal synced under the
// current write lock (DbConfig::write_locks): then SQLite syncs, and only
// synchronous=OFF needs this.
Status drain_journals(DbConfig& config, bool all) {
  MutexLock journals(config.journals->mu);
  const uint64_t write_lock = config.write_locks->load();
  Status first;
  for (StoreFile* journal : config.journals->files) {
    MutexLock lock(journal->mu);
    if (!journal->file->pending() || (!all && journal->synced_in == write_lock)) continue;
    Status s = journal->file->drain();
    if (first.is_ok()) first = s;
  }
  return first;
}

// What a write or truncate of a file does first: catch up with other
// processes, send the journal's records held back (DbConfig::journals)
// before a database page changes, and count a WAL's change before it is
// made (OpenWals::written).
Status before_change(StoreFile& st) REQUIRES(st.mu) {
  if (Status c = catch_up(st); !c) return c;
  if (st.main_db) {
    if (Status j = drain_journals(*st.config, /*all=*/false); !j) return j;
  }
  if (st.wal) st.config->wals->written.fetch_add(1);
  return Status::ok();
}

// Tells a rollback journal whether no one else writes it (DbConfig::
// OpenJournals), through its own PageIo: another connection's may be
// another bus's.
void tell_journal(StoreFile& journal, bool excluded) {
  MutexLock lock(journal.mu);
  if (auto io = journal.file->io()) (*io)->exclude_other_writers(excluded);  // (a stopped client's journal: nothing to tell)
}

// Counts a write lock of a database descriptor taken (`taken`) or let go,
// and tells the database's journals open in this process when the first is
// taken or the last let go (DbConfig::OpenJournals).
void count_write_lock(StoreFile& db, bool taken) REQUIRES(db.mu) {
  if (db.write_locked == taken) return;
  db.write_locked = taken;
  DbConfig::OpenJournals& journals = *db.config->journals;
  MutexLock lock(journals.mu);
  journals.writers += taken ? 1 : -1;
  if (journals.writers != (taken ? 1 : 0)) return;
  for (StoreFile* journal : journals.files) tell_journal(*journal, taken);
}

int x_close(sqlite3_file* f) {
  auto* pf = reinterpret_cast<PagefileFile*>(f);
  StoreFile* shared = pf->state;
  pf->state = nullptr;
  if (shared->wal) {
    MutexLock wals(shared->config->wals->mu);  // (taken before the file's own, as drain_wals does)
    auto open = shared->config->wals->files.find(shared);
    if (open != shared->config->wals->files.end() && --open->second.opens > 0) {
      return SQLITE_OK;  // another connection's still
    }
    if (open != shared->config->wals->files.end()) {
      shared->config->wals->files.erase(open);
      shared->config->wals->count = shared->config->wals->files.size();
    }
  }
  if (shared->journal) {
    MutexLock journals(shared->config->journals->mu);  // (taken before the file's own, as drain_journals does)
    shared->config->journals->files.erase(shared);
  }
  std::unique_ptr<StoreFile> st(shared);
  return guarded(SQLITE_IOERR_CLOSE, [&] {
    MutexLock lock(st->mu);
    end_wal_write_lock(*st);
    checkpointing(*st, false);
    if (st->shm) (void)st->shm->close(false);
    // (Before the lock goes with the descriptor: once it is gone another
    // may write the journals.)
    if (st->main_db) count_write_lock(*st, false);
    Status s = st->file->close();
    if (st->main_db && st->lock != SQLITE_LOCK_NONE) {
      // Closing the descriptor released the lock.
      st->lock = SQLITE_LOCK_NONE;
    }
    if (st->delete_on_close) {
      uint64_t token = database_of(st->name) != st->name ? st->config->lock_token->load() : 0;
      Status r = st->config->client->unlink(st->name, st->config->options.location, token);
      if (s.is_ok() && !r.is(Code::kNotFound)) s = r;
    }
    return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_CLOSE);
  });
}

int x_read(sqlite3_file* f, void* buffer, int amount, sqlite3_int64 offset) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_READ, [&] {
    MutexLock lock(st.mu);
    if (Status c = catch_up(st); !c) return sqlite_error(c, SQLITE_IOERR_READ);
    apply_concurrency(st);
    // Runs of a local file's pages read ahead (ByteFile) stay right only
    // while every read transaction begins with a lock this VFS sees:
    // SHARED in rollback mode, its wal-index's in WAL mode (catch_up). A
    // wal-index kept elsewhere (a shim's) is not seen: with a WAL of the
    // database open in this process and no wal-index of ours, none.
    if (st.main_db) {
      st.file->allow_runs(st.config->options.location == Location::kLocal &&
                          (st.shm != nullptr || st.config->wals->count.load() == 0));
    }
    std::span<std::byte> out(static_cast<std::byte*>(buffer), static_cast<size_t>(amount));
    auto got = st.file->read(out, offset);
    if (!got) return sqlite_error(got.status(), SQLITE_IOERR_READ);
    return *got == out.size() ? SQLITE_OK : SQLITE_IOERR_SHORT_READ;
  });
}

int x_write(sqlite3_file* f, const void* data, int amount, sqlite3_int64 offset) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_WRITE, [&] {
    MutexLock lock(st.mu);
    if (Status c = before_change(st); !c) return sqlite_error(c, SQLITE_IOERR_WRITE);
    apply_concurrency(st);
    std::span<const std::byte> in(static_cast<const std::byte*>(data), static_cast<size_t>(amount));
    Status s = st.file->write(in, offset);
    if (s && st.wal) s = send_commit_frame(st, in, offset);
    // A journal's header zeroed: the commit of PERSIST mode and of
    // exclusive locking mode (zeroJournalHdr), which no unlock follows in
    // the latter, nor any xSync at synchronous=OFF. Sent now, so that a
    // crash after COMMIT returned finds the journal finished, as unix's
    // pwrite leaves it, and its failure is the commit's.
    if (s && st.journal && offset == 0 && all_zero(in)) {
      s = st.file->drain();
    }
    return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_WRITE);
  });
}

int x_truncate(sqlite3_file* f, sqlite3_int64 size) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_TRUNCATE, [&] {
    MutexLock lock(st.mu);
    if (Status c = before_change(st); !c) return sqlite_error(c, SQLITE_IOERR_TRUNCATE);
    if (st.wal) st.commit = CommitFrame{};  // (the WAL begins again)
    Status s = st.file->truncate(size);
    return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_TRUNCATE);
  });
}

std::atomic<int*> g_sync_count{nullptr};
std::atomic<int*> g_full_sync_count{nullptr};

int x_sync(sqlite3_file* f, int flags) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_FSYNC, [&] {
    MutexLock lock(st.mu);
    // (Read before the sync: a write lock taken meanwhile is a later one.)
    const uint64_t write_lock = st.config->write_locks->load();
    Status s = st.file->sync();
    if (!s) return sqlite_error(s, SQLITE_IOERR_FSYNC);
    st.synced_in = write_lock;
    count_sync((flags & 0x0F) == SQLITE_SYNC_FULL);
    if (std::exchange(st.dir_sync_due, false)) count_sync(false);
    return SQLITE_OK;
  });
}

int x_file_size(sqlite3_file* f, sqlite3_int64* size) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_FSTAT, [&] {
    MutexLock lock(st.mu);
    if (Status c = catch_up(st); !c) return sqlite_error(c, SQLITE_IOERR_FSTAT);
    auto known = st.file->current_size();
    if (!known) return sqlite_error(known.status(), SQLITE_IOERR_FSTAT);
    *size = *known;
    return SQLITE_OK;
  });
}

int x_lock(sqlite3_file* f, int level) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_LOCK, [&] {
    MutexLock lock(st.mu);
    if (!st.main_db || level <= st.lock) return SQLITE_OK;
    auto direct = st.file->io();
    if (!direct) return sqlite_error(direct.status(), SQLITE_IOERR_LOCK);
    PageIo& io = **direct;
    Status s = io.set_lock_level(static_cast<LockLevel>(level));
    if (!s) {
      // Refused EXCLUSIVE may have left us at PENDING (as unixLock does);
      // remembering it makes the next xUnlock let it go.
      if (s.is(Code::kBusy) && level == SQLITE_LOCK_EXCLUSIVE) st.lock = SQLITE_LOCK_PENDING;
      return sqlite_error(s, SQLITE_IOERR_LOCK);
    }
    int before = st.lock;
    st.lock = level;
    if (level >= SQLITE_LOCK_RESERVED && before < SQLITE_LOCK_RESERVED) st.config->write_locks->fetch_add(1);
    if (level >= SQLITE_LOCK_RESERVED) count_write_lock(st, true);
    if (before != SQLITE_LOCK_NONE) return SQLITE_OK;
    st.fresh_locks_seen = st.config->fresh_locks->fetch_add(1) + 1;  // read afresh below
    // With no writer since our last lock, what we kept, and the size, hold.
    // (A local file cannot tell: not asked.)
    if (st.config->options.location != Location::kLocal && io.unchanged_since_unlock()) {
      return SQLITE_OK;
    }
    st.config->changes->fetch_add(1);
    // Another client may have written since we last held a lock: what we
    // read ahead or kept, and the size, may be stale.
    st.file->drop_cache();
    if (Status r = st.file->refresh_size(); !r) {
      (void)io.set_lock_level(LockLevel::kNone);
      st.lock = SQLITE_LOCK_NONE;
      return sqlite_error(r, SQLITE_IOERR_LOCK);
    }
    return SQLITE_OK;
  });
}

int x_unlock(sqlite3_file* f, int level) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_UNLOCK, [&] {
    MutexLock lock(st.mu);
    if (!st.main_db || level >= st.lock) return SQLITE_OK;
    Status first;
    auto io = st.file->io();
    if (st.lock >= SQLITE_LOCK_RESERVED) {
      // Other clients must see every write (and the size) once the lock is
      // gone; a remote file's are published by a sync, so one left unsynced
      // (synchronous=OFF) is synced here. A local file's writes are in the
      // page cache, which every process reads: drained, they are seen, and
      // synchronous=OFF syncs nothing, as on unix.
      // The journal's too: a finished one (a PERSIST journal's zeroed
      // header) must not be written after another writer's.
      first = drain_journals(*st.config, /*all=*/true);
      const bool publish_by_sync = st.file->unsynced() && !(io && (*io)->shared_without_sync());
      Status own = publish_by_sync ? st.file->sync() : st.file->drain();
      if (first.is_ok()) first = own;
    }
    // The journals are told first: once the lock is gone another may write
    // them. (Should the unlock fail, they only read what they need not.)
    if (level < SQLITE_LOCK_RESERVED) count_write_lock(st, false);
    Status s = io ? (*io)->set_lock_level(static_cast<LockLevel>(level)) : io.status();
    // Lowered even when that failed: SQLite takes the level it asked for as
    // held whatever xUnlock says (pagerUnlockDb), so its next xLock must
    // take a lock here and read afresh. Left higher, that xLock returned at
    // once: a transaction with no lock at all, over pages kept from before,
    // after a remote lock lost to its lease ("lock lost").
    st.lock = level;
    if (first.is_ok()) first = s;
    return first ? SQLITE_OK : sqlite_error(first, SQLITE_IOERR_UNLOCK);
  });
}

int x_check_reserved_lock(sqlite3_file* f, int* result) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_CHECKRESERVEDLOCK, [&] {
    MutexLock lock(st.mu);
    *result = 0;
    if (!st.main_db) return SQLITE_OK;
    auto io = st.file->io();
    if (!io) return sqlite_error(io.status(), SQLITE_IOERR_CHECKRESERVEDLOCK);
    auto reserved = (*io)->reserved_elsewhere();
    if (!reserved) return sqlite_error(reserved.status(), SQLITE_IOERR_CHECKRESERVEDLOCK);
    *result = *reserved ? 1 : 0;
    return SQLITE_OK;
  });
}

// Journals are padded to this; it is the smallest unit the store writes.
int x_sector_size(sqlite3_file* f) {
  StoreFile& st = state_of(f);
  MutexLock lock(st.mu);
  return static_cast<int>(std::min<uint32_t>(st.file->page_size(), 65536));
}

// SQLite asks this of the database file. POWERSAFE_OVERWRITE (a crash never
// changes bytes a write did not cover) holds when a page is one disk sector
// or less: a write of part of a page rewrites the page whole, which the
// disk writes whole or not at all (the promise SQLite's unix VFS takes
// from it too), and the page's checksum accepts the old bytes or the new
// (doc/page_format.md). With it SQLite journals pages rather than sectors
// and does not pad each WAL commit to a sector. A larger page may be left
// part old and part new by a crash: then nothing is claimed, and SQLite
// journals and pads whole pages (x_sector_size). Appends are not ordered
// against other pages' writes.
// As on unix, the URI's psow=0 or SQLITE_FCNTL_POWERSAFE_OVERWRITE turn the
// claim off (or on).
int x_device_characteristics(sqlite3_file* f) {
  StoreFile& st = state_of(f);
  MutexLock lock(st.mu);
  return st.powersafe ? SQLITE_IOCAP_POWERSAFE_OVERWRITE : 0;
}

// No memory mapping of remote pages: SQLite then reads with xRead.
int x_fetch(sqlite3_file*, sqlite3_int64, int, void** pp) {
  *pp = nullptr;
  return SQLITE_OK;
}
int x_unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

}  // namespace

void apply_concurrency(StoreFile& st) REQUIRES(st.mu) {
  uint32_t wanted = st.config->concurrency.load();
  if (wanted != st.file->concurrency()) (void)st.file->set_concurrency(wanted);
}

const sqlite3_io_methods kStoreFileMethods = {
    3,  // xFetch/xUnfetch are provided (returning no mapping)
    x_close,
    x_read,
    x_write,
    x_truncate,
    x_sync,
    x_file_size,
    x_lock,
    x_unlock,
    x_check_reserved_lock,
    x_file_control,
    x_sector_size,
    x_device_characteristics,
    x_shm_map,
    x_shm_lock,
    x_shm_barrier,
    x_shm_unmap,
    x_fetch,
    x_unfetch,
};

Status check_store_path(const std::string& name) {
  if (name.find('/') == std::string::npos) return Status::ok();  // a plain store name
  struct stat st {};
  if (::stat(name.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return Status::invalid_argument(name, "is a directory on this machine");
  }
  size_t slash = name.rfind('/');
  std::string dir = slash == 0 ? std::string("/") : name.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Status::not_found(name, fmt::format("its directory {} does not exist on this machine (a name with a '/' "
                                               "is a path, as for the unix VFS; a plain store name has none)",
                                               dir));
  }
  return Status::ok();
}

Result<std::unique_ptr<StoreFile>> open_store_file(const char* sqlite_name, int role, int flags) {
  auto name = store_name(sqlite_name);
  if (!name) return name.status();
  std::optional<DbOptions> db_options;
  if (role == SQLITE_OPEN_MAIN_DB) {
    auto options = parse_db_options([&](const char* key) { return sqlite3_uri_parameter(sqlite_name, key); });
    if (!options) return options.status().with_context(*name);
    db_options = std::move(*options);
    name = database_store_name(sqlite_name, *name, db_options->location != Location::kLocal);
    if (!name) return name.status();
  }
  auto st = std::make_unique<StoreFile>();
  // No other thread knows it yet; held so the analysis sees the writes
  // below as guarded like every later one.
  MutexLock lock(st->mu);
  st->name = *name;
  st->main_db = role == SQLITE_OPEN_MAIN_DB;
  st->wal = role == SQLITE_OPEN_WAL;
  st->journal = role == SQLITE_OPEN_MAIN_JOURNAL;
  st->read_only = (flags & SQLITE_OPEN_READONLY) != 0;
  st->delete_on_close = (flags & SQLITE_OPEN_DELETEONCLOSE) != 0;
  DbRegistry& registry = DbRegistry::instance();
  Result<std::shared_ptr<DbConfig>> config = Status::not_found(*name);
  if (st->main_db) {
    config = registry.remember(*name, *db_options);
  } else {
    config = registry.lookup(*name);
  }
  if (!config) return config.status();
  if (st->main_db && (*config)->options.location != Location::kLocal) {
    if (Status s = check_store_path(*name); !s) return s;
  }
  st->config = *config;
  if ((flags & SQLITE_OPEN_READONLY) == 0) st->config->forget_absent(*name);  // it may be written now
  st->fresh_locks_seen = st->config->fresh_locks->load();  // opened now: nothing to catch up on
  const DbOptions& o = st->config->options;
  OpenOptions open;
  open.location = o.location;
  open.create = (flags & SQLITE_OPEN_CREATE) != 0;
  open.exclusive = (flags & SQLITE_OPEN_EXCLUSIVE) != 0;
  open.read_only = (flags & SQLITE_OPEN_READONLY) != 0;
  if (o.location == Location::kLocal && !st->main_db) {
    // As findCreateFileMode: a journal or WAL gets its database's
    // permissions (whoever may write the database may roll it back), a
    // file deleted on close only its owner's.
    struct stat db {};
    if (st->delete_on_close) {
      open.mode = 0600;
    } else if (::stat(database_of(*name).c_str(), &db) == 0) {
      open.mode = db.st_mode & 0777;
    }
  }
  open.page_size = st->main_db ? o.page_size : 0;
  open.concurrency = st->config->concurrency.load();
  open.checksums = o.checksums;
  open.lock_token = st->config->lock_token;
  open.placement = o.placement;
  open.stripe_pages = o.stripe_pages;
  open.servers = o.servers;
  open.replicas = o.replicas != 0 || st->main_db ? o.replicas : st->config->replicas.load();
  if (!o.placement_given && st->config->bus_in_process) {
    // Each file whole on one server, chosen by hashing its id, so a
    // database and its journal usually sit on different servers.
    open.placement = Placement::kHash;
    open.stripe_pages = kWholeFileStripe;
  }
  open.policy = st->config->policy();
  if (!open.policy && role == SQLITE_OPEN_MAIN_JOURNAL) {
    // A rollback journal is written front to back and read back the same
    // way (a hot journal's rollback): under the sequential policy a
    // server's pool lets each page go once passed, rather than filling
    // with pages that are read again only after a crash.
    open.policy = BufferPolicy{AccessType::kSequential};
  }
  if (o.location == Location::kLocal && open.create && !st->main_db && g_sync_count.load() != nullptr) {
    // (A journal or WAL created here is durable, name too, at its first
    // sync; x_sync counts that directory sync when syncs are counted, so
    // the stat is made only then. A new database's name is made durable
    // by its journal's, as on unix, unless no journal's comes first: that
    // sync is not counted.)
    st->dir_sync_due = ::access(st->name.c_str(), F_OK) != 0;
  }
  auto layout = st->main_db ? ByteFile::Layout::kPages : ByteFile::Layout::kBytes;
  // A local database's pages are copied from a mapping (one system call
  // less a page read, as SQLite's mmap_size reads, but checked and with a
  // fault reported as an error): a point read that misses SQLite's cache
  // then costs less than unix's pread. Journals and WAL files are read a
  // few times each, front to back.
  open.mapped_reads = st->main_db;
  bool sized_here = st->main_db && open.page_size == 0 && open.create;
  if (sized_here) open.page_size = sqlite_default_page_size();
  const uint32_t new_page_size = o.location == Location::kLocal && role == SQLITE_OPEN_MAIN_JOURNAL
                                     ? ByteFile::kLocalJournalPageSize
                                     : ByteFile::kBytesPageSize;
  auto file = ByteFile::open(*st->config->client, st->name, open, layout, st->config->stats, st->config->trace,
                             new_page_size);
  if (!file && sized_here && file.status().is(Code::kInvalidArgument)) {
    // It exists with pages of another size: those.
    open.page_size = 0;
    file = ByteFile::open(*st->config->client, st->name, open, layout, st->config->stats, st->config->trace,
                          new_page_size);
  }
  if (!file) return file.status();
  st->file = std::move(*file);
  if (st->main_db && o.page_size == 0) st->file->follow_sqlite_page_size();
  if (st->main_db) st->config->replicas = st->file->replicas();
  st->powersafe = st->file->page_size() <= kChecksumSectorSize &&
                  sqlite3_uri_boolean(sqlite_name, "psow", 1) != 0;
  return st;
}

uint32_t sqlite_default_page_size() {
  static const uint32_t size = [] {
    uint32_t found = kDefaultPageSize;
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_MEMORY, nullptr) == SQLITE_OK) {
      sqlite3_stmt* stmt = nullptr;
      if (sqlite3_prepare_v2(db, "PRAGMA page_size", -1, &stmt, nullptr) == SQLITE_OK && sqlite3_step(stmt) == SQLITE_ROW) {
        auto n = static_cast<uint32_t>(sqlite3_column_int(stmt, 0));
        if (check_page_size(n)) found = n;
      }
      sqlite3_finalize(stmt);
    }
    sqlite3_close(db);
    return found;
  }();
  return size;
}

void count_sync(bool full) {
  if (int* syncs = g_sync_count.load()) ++*syncs;
  if (int* fulls = g_full_sync_count.load(); fulls && full) ++*fulls;
}

void set_sync_counters(int* syncs, int* full_syncs) {
  g_sync_count = syncs;
  g_full_sync_count = full_syncs;
}

void register_open(StoreFile& st) {
  if (st.journal) {
    MutexLock journals(st.config->journals->mu);
    st.config->journals->files.insert(&st);
    // (Opened under the database's write lock: a rollback journal's first
    // open in DELETE mode.)
    if (st.config->journals->writers > 0) tell_journal(st, true);
  }
  if (!st.wal) return;
  MutexLock wals(st.config->wals->mu);
  st.config->wals->files.emplace(&st, DbConfig::OpenWal{});
  st.config->wals->count = st.config->wals->files.size();
}

}  // namespace pagefile::vfs
