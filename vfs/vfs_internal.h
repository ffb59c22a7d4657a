// Pieces of the VFS that its files share (not installed).
#pragma once

#include <memory>
#include <string>

#include "core/mutex.h"
#include "pagefile/status.h"
#include "vfs/db_registry.h"
#include "vfs/byte_file.h"
#include "vfs/shared_memory.h"
#include "vfs/sqlite_api.h"

namespace pagefile::vfs {

inline constexpr const char* kVfsName = "pagefile";

// A WAL's last commit frame, as its writes show it (send_commit_frame).
struct CommitFrame {
  int64_t header = -1;  // where its header lies; -1: none since the WAL began
  bool sent = false;    // its page followed, and what the WAL held was sent
  bool after = false;   // and no frame of another transaction came since
};

// One open store file (main database, journal, WAL, super-journal).
struct StoreFile {
  // SQLite serialises a file's calls; this makes sure of it.
  Mutex mu;
  // Fixed at open.
  std::string name;
  std::shared_ptr<DbConfig> config;
  bool main_db = false;
  bool wal = false;      // a WAL file (in DbConfig::wals while open)
  bool journal = false;  // a rollback journal (in DbConfig::journals while open)
  bool read_only = false;
  bool delete_on_close = false;

  std::unique_ptr<ByteFile> file GUARDED_BY(mu);  // set at open, reset at close
  int lock GUARDED_BY(mu) = 0;                  // SQLITE_LOCK_* as SQLite sees it
  bool write_locked GUARDED_BY(mu) = false;     // a database: RESERVED or EXCLUSIVE granted, not let go (OpenJournals::writers)
  bool dir_sync_due GUARDED_BY(mu) = false;     // a local file this open created: its first sync syncs its directory
  bool powersafe GUARDED_BY(mu) = false;        // SQLITE_IOCAP_POWERSAFE_OVERWRITE claimed (x_device_characteristics)
  int64_t mmap_limit GUARDED_BY(mu) = 0;        // SQLITE_FCNTL_MMAP_SIZE, as set (nothing is mapped)
  bool exclusive_mode GUARDED_BY(mu) = false;   // PRAGMA locking_mode=EXCLUSIVE was seen
  uint64_t fresh_locks_seen GUARDED_BY(mu) = 0;  // config->fresh_locks when last read afresh
  uint64_t synced_in GUARDED_BY(mu) = 0;         // a journal: config->write_locks at its last sync
  // A local database's wal-index, from its first xShmMap to xShmUnmap.
  std::unique_ptr<SharedMemory> shm GUARDED_BY(mu);
  bool wal_write_locked GUARDED_BY(mu) = false;  // a database: its WAL's write lock held in shm (tell_wals)
  bool wal_ckpt_locked GUARDED_BY(mu) = false;   // a database: its WAL's checkpoint lock held in shm (checkpointing)
  // A WAL: its last commit frame (send_commit_frame).
  CommitFrame commit GUARDED_BY(mu);
};

// What SQLite allocates (szOsFile) for a store file. Files the VFS hands to
// the "unix" VFS (temp files) use the same memory as unix's own struct.
struct PagefileFile {
  sqlite3_file base;  // first, as SQLite requires
  StoreFile* state;
};

// The io methods of store files (vfs_file.cpp).
extern const sqlite3_io_methods kStoreFileMethods;

// The store file of an sqlite3_file of kStoreFileMethods.
inline StoreFile& state_of(sqlite3_file* f) { return *reinterpret_cast<PagefileFile*>(f)->state; }

// Gives the file the concurrency its database's connection last set
// (PRAGMA pagefile_concurrency) when it has another.
void apply_concurrency(StoreFile& st) REQUIRES(st.mu);

// The pragma's value says WAL on a remote database: refused unless the
// connection is in exclusive locking mode (no shared memory between the
// store's clients; a local database has its -shm file).
inline constexpr const char* kWalRefused =
    "pagefile: journal_mode=WAL on a remote database needs PRAGMA locking_mode=EXCLUSIVE first "
    "(the store has no shared memory between clients)";

// xFileControl (file_control.cpp).
int x_file_control(sqlite3_file* f, int op, void* arg);

// The wal-index (wal_index.cpp): xShmMap, xShmLock, xShmBarrier, xShmUnmap.
int x_shm_map(sqlite3_file* f, int region, int size, int extend, void volatile** out);
int x_shm_lock(sqlite3_file* f, int offset, int n, int flags);
void x_shm_barrier(sqlite3_file* f);
int x_shm_unmap(sqlite3_file* f, int remove);
// Sends every write that the database's WAL files in this process hold to
// the store (before another connection may look: the end of a write
// transaction, a barrier, a close).
Status drain_wals(DbConfig& config);
// Lets go of what the database's WAL files in this process hold unsent
// (ByteFile::forget_unsent), after a drain that failed.
void forget_unsent_wals(DbConfig& config);
// After `in` was written at `offset` of the WAL `wal`: once SQLite's commit
// frame is whole, what the WAL holds back is sent, and its error is this
// xWrite's (wal_index.cpp).
Status send_commit_frame(StoreFile& wal, std::span<const std::byte> in, int64_t offset) REQUIRES(wal.mu);
// The database descriptor `db` lets its WAL's write lock go, or loses it
// with its wal-index (closed while holding it): the WAL files are told.
void end_wal_write_lock(StoreFile& db) REQUIRES(db.mu);
// Tells the database descriptor `db` whether its connection holds the WAL's
// checkpoint lock, and so whether no one else writes the database.
void checkpointing(StoreFile& db, bool held) REQUIRES(db.mu);

// SQLite's "unix" VFS, to which temp files and the OS services go.
sqlite3_vfs* unix_vfs();

// The SQLite code a SQLite user expects for `status`, as os_unix.c chooses
// them: `io_code` is the failing operation's own code (SQLITE_CANTOPEN for
// an open, SQLITE_IOERR_READ for a read, ...), used for every failure that
// has no code of its own. The table is in doc/sqlite_vfs.md.
//   kOk                SQLITE_OK
//   kBusy              SQLITE_BUSY
//   kNoSpace           SQLITE_FULL
//   kCorruption        SQLITE_CORRUPT
//   kReadOnly          SQLITE_READONLY
//   kPermissionDenied  SQLITE_PERM
//   anything else      io_code
int sqlite_code(const Status& status, int io_code);

// Records `status` for xGetLastError and returns `code`, or when that is 0
// sqlite_code(status, io_code).
int sqlite_error(const Status& status, int io_code, int code = 0);
// The last error recorded on this thread.
std::string last_error();

// Opens a store file for xOpen. `role` is the SQLITE_OPEN_* role flag.
Result<std::unique_ptr<StoreFile>> open_store_file(const char* sqlite_name, int role, int flags);

// Lists a WAL file among its database's open WALs (DbConfig::wals), or a
// rollback journal among its open journals (DbConfig::journals), once it
// is open and no lock of ours is held.
void register_open(StoreFile& st);
// The WAL `sqlite_name` that another connection of this process has open
// with the same `flags`' access, counted once more (x_close counts down);
// nullptr when there is none.
StoreFile* share_open_wal(const char* sqlite_name, int flags);
// What a handle other than the connections' is about to do, or did, to the
// WAL `path` that connections of this process have open (the SQL
// functions, xDelete): before a read, their writes go to the file; after a
// write, they read it afresh; once removed, it is shared no more.
enum class WalAccess { kWillRead, kWrote, kRemoved };
Status settle_open_wals(const std::string& path, WalAccess access);

// The rule for a remote database's name (doc/sqlite_vfs.md, "Names"): a
// name holding a '/' is a path, and is refused as the unix VFS would refuse
// it when its directory does not exist on this machine (kNotFound) or it
// names a directory (kInvalidArgument); a plain store name (no '/') is
// the store's alone.
Status check_store_path(const std::string& name);

// For a local file (of a database opened local here), as one stat sees
// it: kNotFound when absent, 0 when it holds no page, 1 when it holds one
// or more; -1 when it is not a local file or the stat cannot tell.
Result<int64_t> local_pages(const std::string& path);
// The same for a name store_name already wrote and its database's config
// (DbRegistry::find; null when none), with no second parse or lookup, and
// kLocalAbsent for an absent file: xAccess asks at every transaction of a
// database, and an error's message costs more than the stat.
inline constexpr int64_t kLocalAbsent = -2;
int64_t local_pages_of(const std::string& name, const DbConfig* config);

// The store as the SQL functions, xAccess and xDelete see it, by path.
// stored_size: kNotFound when absent.
Result<int64_t> stored_size(const std::string& path);
// `fenced` (xDelete): a journal or WAL is removed under the database's
// lock token (DbConfig::lock_token), refused once that lock has passed on.
// A local file's removal is durable when this returns with `sync_dir`
// (xDelete's flag), else as the file system makes it, as on unix.
Status remove_stored(const std::string& path, bool fenced = false, bool sync_dir = true);

// Opens the store file `path` names as a ByteFile of the layout its name
// calls for (a journal/WAL/super-journal name: kBytes), with the location
// and client of its database.
Result<std::unique_ptr<ByteFile>> open_stored(const std::string& path, OpenOptions open);
// Replaces `to` with a byte-for-byte copy of `from`, in a Pagefile of the
// same page size. Returns the bytes copied; kNotFound when `from` is absent.
Result<int64_t> copy_stored(const std::string& from, const std::string& to);

// The page size SQLite gives a new database unless told otherwise
// (SQLITE_DEFAULT_PAGE_SIZE: 4096, unless SQLite was built with another),
// asked of SQLite once. A new database's Pagefile gets pages of that size,
// so each SQLite page is one Pagefile page.
uint32_t sqlite_default_page_size();

// Where SQLite's test build counts the fsyncs os_unix.c makes (its
// sqlite3_sync_count and sqlite3_fullsync_count): a harness that hands
// them over (pagefile_test_sync_counters) has this VFS's syncs counted
// there too, a directory's among them. Unset: not counted.
void set_sync_counters(int* syncs, int* full_syncs);
// Counts one sync (a file's, `full` for SQLITE_SYNC_FULL, or a directory's)
// as os_unix.c's full_fsync does in SQLite's test build.
void count_sync(bool full);

// SQL functions pagefile_unlink/exists/size/read/write/copy/names on `db`.
int register_sql_functions(sqlite3* db);

// Registers the VFS (idempotent) and the auto-extension that adds the SQL
// functions to every new connection.
int register_vfs(int make_default);

// Runs `body` (returning an SQLite code), turning any C++ exception into
// `io_code`: none may cross into SQLite.
template <class F>
int guarded(int io_code, F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return sqlite_error(Status::io_error("pagefile vfs", e.what()), io_code);
  } catch (...) {
    return sqlite_error(Status::io_error("pagefile vfs", "unknown exception"), io_code);
  }
}

}  // namespace pagefile::vfs
