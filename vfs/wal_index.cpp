// The wal-index of a local database in WAL mode (its -shm file,
// vfs/shared_memory.h: xShmMap, xShmLock, xShmBarrier, xShmUnmap), and what
// its locks tell the database's WAL files and the database itself open in
// this process: who may write them, and when to send what they hold back.
// Also the WAL files this process shares between its connections
// (share_open_wal) and what other handles tell them (settle_open_wals).
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <span>
#include <string>
#include <utility>

#include "core/mutex.h"
#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

// Calls `f` with each of the database's WAL files open in this process, under
// OpenWals::mu and the file's own mutex.
template <class F>
void each_open_wal(DbConfig& config, F&& f) {
  MutexLock wals(config.wals->mu);
  for (auto& [wal, open] : config.wals->files) {
    MutexLock lock(wal->mu);
    f(*wal->file);
  }
}

// Tells the database's WAL files open in this process whether no one else
// writes them (Client::exclude_other_writers), so that a page's write reads
// no old checksum that this descriptor read or wrote in that time: only the
// holder of the WAL's write lock (SQLite's WAL_WRITE_LOCK, the first of its
// shared-memory locks) writes, truncates or restarts a WAL, recovery
// included, and in this process only the connection holding it.
void tell_wals(DbConfig& config, bool excluded) {
  each_open_wal(config, [&](ByteFile& wal) {
    if (auto io = wal.io()) (*io)->exclude_other_writers(excluded);
  });
}

// WAL's shared memory: a local database's -shm file (vfs/shared_memory.h).
// A remote database has none (no memory shared between the store's
// clients): there WAL needs locking_mode=EXCLUSIVE, where SQLite keeps the
// wal-index in its own heap and never calls these.
int shm_open(StoreFile& st) REQUIRES(st.mu) {
  if (st.shm) return SQLITE_OK;
  if (st.config->options.location != Location::kLocal) {
    // As SQLite answers a WAL database on a VFS without shared memory.
    return sqlite_error(Status::not_supported(st.name, kWalRefused), SQLITE_CANTOPEN);
  }
  struct stat db {};
  mode_t mode = ::stat(st.name.c_str(), &db) == 0 ? (db.st_mode & 0777) : 0644;
  auto shm = SharedMemory::open(st.name + "-shm", mode);
  if (!shm) {
    if (shm.status().is(Code::kBusy)) return SQLITE_BUSY;  // SQLite tries again
    // Not even readable: as unixOpenSharedMemory answers.
    if (shm.status().is(Code::kPermissionDenied)) return sqlite_error(shm.status(), SQLITE_CANTOPEN, SQLITE_CANTOPEN);
    return sqlite_error(shm.status(), SQLITE_IOERR_SHMOPEN);
  }
  st.shm = std::move(*shm);
  // Whatever this descriptor read before WAL mode began is stale now.
  st.fresh_locks_seen = 0;
  return SQLITE_OK;
}

// SQLite's WAL_WRITE_LOCK and WAL_CKPT_LOCK (wal.c): the first two of the
// wal-index's locks.
constexpr int kWalWriteLock = 0;

constexpr int kWalCkptLock = 1;

// Whether the wal-index locks [offset, offset + n) include `lock`.
constexpr bool covers(int offset, int n, int lock) { return offset <= lock && lock < offset + n; }

}  // namespace

// Sends every write that the database's WAL files in this process hold to
// the store, so that another process reading the WAL finds what the
// wal-index in shared memory says is there.
Status drain_wals(DbConfig& config) {
  DbConfig::OpenWals& open_wals = *config.wals;
  if (open_wals.sent.load() == open_wals.written.load()) return Status::ok();
  MutexLock wals(open_wals.mu);
  // (Every write counted by now is sent below or was sent by a drain
  // that finished; one counted later is the next drain's.)
  const uint64_t written = open_wals.written.load();
  Status first;
  for (auto& [wal, open] : open_wals.files) {
    MutexLock lock(wal->mu);
    if (!wal->file->pending()) continue;
    Status s = wal->file->drain();
    if (first.is_ok()) first = s;
  }
  if (first && written > open_wals.sent.load()) open_wals.sent = written;  // (a failure leaves it for the next)
  return first;
}

// SQLite commits a WAL transaction with its commit frame: a header of 24
// bytes whose bytes 4 to 7 (the database's size after the commit) are not
// zero, then the page after it, each one xWrite. The parts of 16 KiB pages
// the WAL's file holds back are sent as soon as that page is written, and
// a failure is that xWrite's, which fails the commit, as unix's pwrite
// would. Held until the xShmBarrier before SQLite publishes the frames,
// its error could reach no one (xShmBarrier returns nothing): the COMMIT
// returned SQLITE_OK, and other connections, led to the frames by the
// wal-index, read what the WAL held before, a page of an earlier
// generation whose checksum matches. What a failed send leaves is let go,
// never sent later: frames of a commit SQLite was told failed would pass a
// recovery's checks.
//
// What SQLite writes after that page, before the next transaction's first
// frame, is the commit's too, and is sent at once: its frames' headers
// written again with new checksums (walRewriteChecksums, after a
// transaction that wrote a page twice: headers below the commit frame's,
// the commit frame's last), and padding frames to a sector's end (psow=0),
// the last cut in two at the sync between them. The next transaction
// begins with a frame header past the commit frame's, or with the WAL's
// own header at offset 0 when it starts the WAL again (then a commit frame
// may come again where the last one was: a new one, not a header
// rewritten).
Status send_commit_frame(StoreFile& wal, std::span<const std::byte> in, int64_t offset) {
  constexpr size_t kFrameHeader = 24;
  constexpr int64_t kWalHeader = 32;
  CommitFrame& c = wal.commit;
  bool send = false;
  if (offset < kWalHeader) {
    c = CommitFrame{};
  } else if (in.size() == kFrameHeader) {
    const bool commit = std::any_of(in.begin() + 4, in.begin() + 8, [](std::byte b) { return b != std::byte{0}; });
    const bool rewritten = c.sent && (commit ? offset == c.header : offset < c.header);
    if (rewritten) {
      send = commit;  // (the others go with the commit frame's, the last)
    } else if (commit) {
      c = CommitFrame{.header = offset};
    } else {
      c.after = false;  // the next transaction's
    }
  } else if (!c.sent && c.header >= 0 && offset == c.header + static_cast<int64_t>(kFrameHeader)) {
    c.sent = true;
    c.after = true;
    send = true;
  } else {
    send = c.after;
  }
  if (!send) return Status::ok();
  Status s = wal.file->drain();
  if (!s) wal.file->forget_unsent();
  return s;
}

void forget_unsent_wals(DbConfig& config) {
  DbConfig::OpenWals& open_wals = *config.wals;
  MutexLock wals(open_wals.mu);
  for (auto& [wal, open] : open_wals.files) {
    MutexLock lock(wal->mu);
    wal->file->forget_unsent();
  }
}

// The database descriptor `db` lets its WAL's write lock go, or loses it
// with its wal-index (closed while holding it): the WAL's files are told.
void end_wal_write_lock(StoreFile& db) REQUIRES(db.mu) {
  if (!std::exchange(db.wal_write_locked, false)) return;
  tell_wals(*db.config, false);
}

// Tells the database descriptor `db` whether its connection holds the WAL's
// checkpoint lock (SQLite's WAL_CKPT_LOCK), and so whether no one else
// writes the database (Client::exclude_other_writers). In WAL mode only a
// checkpoint writes or truncates a database, and it holds that lock
// exclusively (recovery too, which writes nothing); with
// locking_mode=EXCLUSIVE, where SQLite takes no wal-index lock, it holds
// the database's EXCLUSIVE lock, which says so by itself. A checkpoint's
// page writes then read no old checksum: one read of each group's
// checksum block instead of an entry read per page, and the entries
// stored into the mapped block past the first few. And the database's WAL
// files in this process keep the pages they read meanwhile
// (ByteFile::keep_read_pages): each is read and checked once for its four
// frames. (Only meanwhile: 4 MiB each.)
void checkpointing(StoreFile& db, bool held) REQUIRES(db.mu) {
  if (std::exchange(db.wal_ckpt_locked, held) == held) return;
  if (auto io = db.file->io()) (*io)->exclude_other_writers(held);  // (a stopped client's: nothing to tell)
  each_open_wal(*db.config, [&](ByteFile& wal) {
    wal.keep_read_pages(held ? ByteFile::kCheckpointPages : ByteFile::kMaxCachedPages);
  });
}

int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out) {
  StoreFile& st = state_of(f);
  *out = nullptr;
  return guarded(SQLITE_IOERR_SHMMAP, [&] {
    MutexLock lock(st.mu);
    if (int rc = shm_open(st); rc != SQLITE_OK) return rc;
    auto at = st.shm->map(region, size, extend != 0);
    // Read-only: SQLite reads the WAL itself until a writer initialises
    // the wal-index, then reads that without writing it.
    if (!at && at.status().is(Code::kReadOnly)) return sqlite_error(at.status(), SQLITE_IOERR_SHMMAP, SQLITE_READONLY_CANTINIT);
    if (!at) return sqlite_error(at.status(), SQLITE_IOERR_SHMMAP);
    *out = *at;
    return st.shm->read_only() ? SQLITE_READONLY : SQLITE_OK;
  });
}

int x_shm_lock(sqlite3_file* f, int offset, int n, int flags) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_SHMLOCK, [&] {
    MutexLock lock(st.mu);
    if (int rc = shm_open(st); rc != SQLITE_OK) return rc;
    using Kind = SharedMemory::LockKind;
    bool unlock = (flags & SQLITE_SHM_UNLOCK) != 0;
    bool exclusive = (flags & SQLITE_SHM_EXCLUSIVE) != 0;
    if (unlock && exclusive) {
      // The end of a write transaction, a checkpoint or a recovery: what
      // it wrote goes to the files before another connection may look.
      Status s = drain_wals(*st.config);
      if (Status d = st.file->drain(); s.is_ok()) s = d;
      // (This connection the WAL's writer, or the database's: a checkpoint.)
      const bool wrote = offset == kWalWriteLock && st.wal_write_locked;
      const bool checkpointed = covers(offset, n, kWalCkptLock) && st.wal_ckpt_locked;
      // (Before the lock goes: a writer in another process may follow.)
      if (offset == kWalWriteLock) end_wal_write_lock(st);
      if (covers(offset, n, kWalCkptLock)) checkpointing(st, false);
      if (!s) {
        // The lock goes all the same (SQLite takes an unlock for done, and
        // kept, it would refuse every other connection until this one
        // closed). Where it is the WAL's write lock this connection held,
        // what the WAL was not sent is let go (and a checkpoint's database
        // pages where it is the checkpoint lock): the next writer may write
        // the same pages, which a later send would overwrite with these
        // older bytes (a commit's frames were sent at its commit frame,
        // send_commit_frame: what is left is no commit's). Any other lock's
        // drain (a read mark, a checkpoint) may meet another connection's
        // frames, held by it as the writer: left to be sent again.
        if (wrote) forget_unsent_wals(*st.config);
        if (checkpointed) st.file->forget_unsent();  // (likewise: the next checkpoint's pages)
        (void)st.shm->lock(offset, n, Kind::kUnlock);
        return sqlite_error(s, SQLITE_IOERR_SHMLOCK);
      }
    }
    Status s = st.shm->lock(offset, n, unlock ? Kind::kUnlock : exclusive ? Kind::kExclusive : Kind::kShared);
    if (!s) return s.is(Code::kBusy) ? SQLITE_BUSY : sqlite_error(s, SQLITE_IOERR_SHMLOCK);
    if (!unlock && exclusive && offset == kWalWriteLock) {
      st.wal_write_locked = true;
      tell_wals(*st.config, true);
    }
    if (!unlock && exclusive && covers(offset, n, kWalCkptLock)) checkpointing(st, true);
    // A transaction, a checkpoint or a recovery begins: another process may
    // have written the WAL and the database since (catch_up).
    if (!unlock) st.config->fresh_locks->fetch_add(1);
    return SQLITE_OK;
  });
}

// SQLite calls it between writing the wal-index and publishing it (and
// when reading it): the WAL frames it describes must be in the file first.
void x_shm_barrier(sqlite3_file* f) {
  StoreFile& st = state_of(f);
  (void)guarded(SQLITE_IOERR_WRITE, [&] {
    Status s = drain_wals(*st.config);
    return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_WRITE);
  });
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

int x_shm_unmap(sqlite3_file* f, int remove) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR_DELETE, [&] {
    MutexLock lock(st.mu);
    if (!st.shm) return SQLITE_OK;
    end_wal_write_lock(st);
    checkpointing(st, false);
    Status s = st.shm->close(remove != 0);
    st.shm.reset();
    return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_DELETE);
  });
}

// One StoreFile serves every connection of the process, so each reads what
// another wrote at once, the size included, as unix descriptors of one
// file do. SQLite needs that where it does not tell the VFS about its
// shared memory (a VFS layered over this one with a wal-index of its own,
// as SQLite's test VFS keeps): across processes the wal-index's locks and
// barriers say when to look again (x_shm_lock, x_shm_barrier).
StoreFile* share_open_wal(const char* sqlite_name, int flags) {
  auto name = store_name(sqlite_name);
  if (!name) return nullptr;
  auto config = DbRegistry::instance().lookup(*name);
  if (!config) return nullptr;
  bool read_only = (flags & SQLITE_OPEN_READONLY) != 0;
  MutexLock wals((*config)->wals->mu);
  for (auto& [wal, open] : (*config)->wals->files) {
    if (wal->name == *name && wal->read_only == read_only && !wal->delete_on_close && !open.removed) {
      ++open.opens;
      return wal;
    }
  }
  return nullptr;
}

Status settle_open_wals(const std::string& path, WalAccess access) {
  auto name = store_name(path);
  if (!name) return Status::ok();
  std::shared_ptr<DbConfig> config = DbRegistry::instance().find(*name);
  if (!config) return Status::ok();
  MutexLock wals(config->wals->mu);
  for (auto& [wal, open] : config->wals->files) {
    if (wal->name != *name) continue;
    if (access == WalAccess::kRemoved) {
      open.removed = true;
      continue;
    }
    MutexLock lock(wal->mu);
    Status s = access == WalAccess::kWillRead ? wal->file->drain() : wal->file->reload();
    if (!s) return s;
    // Written by another descriptor whatever lock this process holds: what
    // this one read or wrote of it is not the disk's any more.
    if (auto io = wal->file->io(); access == WalAccess::kWrote && io) (*io)->exclude_other_writers(false);
  }
  return Status::ok();
}

}  // namespace pagefile::vfs
