// The sqlite3_vfs "pagefile": which files go to the store, names, and the
// OS services it borrows from SQLite's "unix" VFS.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "core/log.h"
#include "store/file_header.h"
#include "store/local_pagefile.h"
#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

thread_local std::string t_last_error;

// What store_name() and DbRegistry::find() answer for a name xAccess is
// asked of. SQLite asks of a database's journal and WAL at every
// transaction, and the parse and the look-ups under two locks cost a fifth
// of the stat that follows: each thread keeps the answers for the last few
// absolute names, valid while names_generation() holds still. (A relative
// name's depends on the working directory: not kept.)
struct NameMemo {
  uint64_t generation = 0;  // 0: empty
  std::string name;
  std::string full;                  // store_name(name)
  std::shared_ptr<DbConfig> config;  // DbRegistry::find(full); null when none
};
thread_local std::array<NameMemo, 4> t_names;
thread_local size_t t_next_name = 0;

// The memo of `name`, made in `scratch` for a relative one; null when
// store_name() fails (the caller asks the store, which says why).
const NameMemo* memo_of(const char* name, NameMemo& scratch) {
  const bool absolute = name[0] == '/';
  const uint64_t now = names_generation();  // (before the look-ups: a change meanwhile outdates them)
  if (absolute) {
    for (const NameMemo& m : t_names) {
      if (m.generation == now && m.name == name) return &m;
    }
  }
  auto full = store_name(name);
  if (!full) return nullptr;
  NameMemo& m = absolute ? t_names[t_next_name++ % t_names.size()] : scratch;
  m.generation = now;
  m.name = name;
  m.config = DbRegistry::instance().find(*full);
  m.full = std::move(*full);
  return &m;
}

// Why the database this thread's sqlite3_open is opening failed, for its
// auto-extension to say (x_open, add_functions): the database's name and
// the message.
thread_local std::pair<std::string, std::string> t_deferred_open_error;

// The unix VFS's methods for the stand-in of a database whose trace cannot
// be written (x_open), but for the lock: an ATTACH, which runs no
// auto-extension, fails at its first lock rather than see an empty database.
int refuse_lock(sqlite3_file*, int) { return SQLITE_CANTOPEN; }
const sqlite3_io_methods* stand_in_methods(const sqlite3_io_methods* unix_methods) {
  static const sqlite3_io_methods methods = [unix_methods] {
    sqlite3_io_methods m = *unix_methods;
    m.xLock = refuse_lock;
    return m;
  }();
  return &methods;
}

// Files with no durability need stay local (sqlite-vfs.md, "Opening").
bool goes_to_store(const char* name, int flags) {
  if (name == nullptr) return false;
  int role = flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL);
  return role != 0;
}

// The full name of `name` when it is a file of a database opened local
// here (its own path on this machine), else nullopt.
std::optional<std::string> local_name(const char* name) {
  auto full = store_name(name);
  std::shared_ptr<DbConfig> config = full ? DbRegistry::instance().find(*full) : nullptr;
  if (!config || config->options.location != Location::kLocal) return std::nullopt;
  return *full;
}

// Whether a read-only open failed because a local database's path holds an
// empty file: it is then opened through the unix VFS, where it reads as an
// empty database and refuses writes (SQLITE_READONLY), as on unix; a
// Pagefile needs its header written, which a read-only open cannot do.
bool opens_empty(const char* name, int role, int flags, const Status& status) {
  if (role != SQLITE_OPEN_MAIN_DB || (flags & SQLITE_OPEN_READWRITE) != 0 || !status.is(Code::kNotFound)) {
    return false;
  }
  auto full = local_name(name);
  struct stat st {};
  return full && ::stat(full->c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 0;
}

// Whether the open failed because a local database's path holds a file
// that is not a Pagefile: it is then opened read-only through the unix VFS
// (x_open), so an ordinary SQLite database reads as it is and anything else
// is "file is not a database" (SQLITE_NOTADB) at its first read, as on
// unix; it is never written.
// Likewise the journal or WAL of such a database, when it is no Pagefile
// either: an ordinary database's -wal, or its hot -journal, which SQLite
// then reads as unix would (the database stays unwritten).
bool opens_foreign(const char* name, int role, const Status& status) {
  if (!status.is(Code::kCorruption)) return false;
  auto full = local_name(name);
  if (!full || !LocalPagefile::is_foreign(*full)) return false;
  if (role == SQLITE_OPEN_MAIN_DB) return true;
  if (role != SQLITE_OPEN_MAIN_JOURNAL && role != SQLITE_OPEN_WAL) return false;
  auto database = local_name(database_of(*full).c_str());
  return database && LocalPagefile::is_foreign(*database);
}

// The code of a failed open: a local file the system will not open is
// SQLITE_CANTOPEN, as the unix VFS answers it.
int open_failure(const char* name, const Status& status) {
  if (status.is(Code::kPermissionDenied) && local_name(name)) {
    return sqlite_error(status, SQLITE_CANTOPEN, SQLITE_CANTOPEN);
  }
  return sqlite_error(status, SQLITE_CANTOPEN);
}

int x_open(sqlite3_vfs*, sqlite3_filename name, sqlite3_file* file, int flags, int* out_flags) {
  file->pMethods = nullptr;  // SQLite calls no xClose after a failed open
  t_deferred_open_error = {};  // (an ATTACH's: no auto-extension ran after it)
  if (!goes_to_store(name, flags)) {
    sqlite3_vfs* os = unix_vfs();
    return os->xOpen(os, name, file, flags, out_flags);
  }
  return guarded(SQLITE_CANTOPEN, [&] {
    int role = flags & (SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_WAL | SQLITE_OPEN_SUPER_JOURNAL);
    auto* pf = reinterpret_cast<PagefileFile*>(file);
    if (role == SQLITE_OPEN_WAL) {
      if (StoreFile* shared = share_open_wal(name, flags)) {
        pf->state = shared;
        pf->base.pMethods = &kStoreFileMethods;
        if (out_flags) *out_flags = flags;
        return SQLITE_OK;
      }
    }
    auto st = open_store_file(name, role, flags);
    if (!st && st.status().is(Code::kPermissionDenied) && (flags & SQLITE_OPEN_READWRITE) != 0) {
      // A local file this user may read but not write opens read-only, as
      // unixOpen retries it, and so does a remote one for a client whose
      // key makes it a reader (server/access.h), as nbdkit serves a
      // read-only export: SQLite then reads it and refuses writes with
      // SQLITE_READONLY.
      flags = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
      st = open_store_file(name, role, flags);
    }
    if (!st && opens_empty(name, role, flags, st.status())) {
      sqlite3_vfs* os = unix_vfs();
      return os->xOpen(os, name, file, flags, out_flags);
    }
    if (!st && opens_foreign(name, role, st.status())) {
      sqlite3_vfs* os = unix_vfs();
      int read_only = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_EXCLUSIVE)) |
                      SQLITE_OPEN_READONLY;
      int rc = os->xOpen(os, name, file, read_only, out_flags);
      // (Recorded for PRAGMA pagefile_last_error and SQLite's log: why
      // writes are refused.)
      (void)sqlite_error(st.status().with_context("opened read-only through the unix VFS"), SQLITE_NOTADB,
                         SQLITE_NOTICE);
      return rc;
    }
    if (!st && role == SQLITE_OPEN_MAIN_DB && st.status().message().find(kTraceUnwritable) != std::string::npos) {
      // SQLite reports any failed xOpen as "unable to open database file";
      // the user must learn which trace path failed. So the database opens
      // as an empty read-only /dev/null through the unix VFS (nothing is
      // made or written at its path), and the auto-extension that SQLite
      // runs next on this connection fails the open with the message.
      sqlite3_vfs* os = unix_vfs();
      if (os->xOpen(os, "/dev/null", file, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB, out_flags) == SQLITE_OK) {
        file->pMethods = stand_in_methods(file->pMethods);
        (void)sqlite_error(st.status(), SQLITE_CANTOPEN);
        t_deferred_open_error = {name, st.status().to_string()};
        return SQLITE_OK;
      }
    }
    if (!st) return open_failure(name, st.status());
    pf->state = st->release();
    register_open(*pf->state);
    pf->base.pMethods = &kStoreFileMethods;
    if (out_flags) *out_flags = flags;
    return SQLITE_OK;
  });
}

int x_delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return guarded(SQLITE_IOERR_DELETE, [&] {
    Status s = remove_stored(name, /*fenced=*/true, sync_dir != 0);
    if (s.is(Code::kNotFound)) return SQLITE_IOERR_DELETE_NOENT;
    if (!s) return sqlite_error(s, SQLITE_IOERR_DELETE);
    if (sync_dir != 0 && local_name(name)) count_sync(false);  // (its directory, synced)
    return SQLITE_OK;
  });
}

int x_access(sqlite3_vfs*, const char* name, int flags, int* result) {
  return guarded(SQLITE_IOERR_ACCESS, [&] {
    *result = 0;
    // A journal or WAL of a database opened here: SQLite asks at the start
    // of every transaction, and "absent" stays true until the database's
    // version moves (DbConfig::known_absent).
    NameMemo scratch;
    const NameMemo* known = memo_of(name, scratch);
    DbConfig* database = known ? known->config.get() : nullptr;
    // (known_absent is for a remote database's journal or WAL, not the
    // database; a local file's answer is one stat, as on unix, and every
    // fresh lock of a local database counts as a change.)
    DbConfig* config = database && database->options.location != Location::kLocal &&
                               database_of(known->full) != known->full
                           ? database
                           : nullptr;
    if (config && flags == SQLITE_ACCESS_EXISTS && config->known_absent(known->full)) return SQLITE_OK;
    uint64_t changes = config ? config->changes->load() : 0;  // before asking: see known_absent
    // (A local file: one stat.)
    int64_t pages = known ? local_pages_of(known->full, database) : -1;
    bool present = pages != kLocalAbsent;
    if (pages < 0 && present) {
      auto size = stored_size(name);
      if (!size && !size.status().is(Code::kNotFound)) return sqlite_error(size.status(), SQLITE_IOERR_ACCESS);
      present = size.is_ok();
      pages = present ? *size : 0;
    }
    bool exists = present && pages > 0;
    if (config && !exists) config->note_absent(known->full, changes);
    // As unixAccess: an empty file does not "exist" (a journal truncated to
    // nothing is no journal); READ and READWRITE ask only for presence.
    *result = flags == SQLITE_ACCESS_EXISTS ? exists : present;
    return SQLITE_OK;
  });
}

int x_full_pathname(sqlite3_vfs*, const char* name, int n_out, char* out) {
  return guarded(SQLITE_CANTOPEN, [&] {
    bool followed = false;
    auto full = full_pathname(name, &followed);
    if (!full) return sqlite_error(full.status(), SQLITE_CANTOPEN);
    if (full->size() + 1 > static_cast<size_t>(n_out)) {
      return sqlite_error(Status::invalid_argument(name, "path too long"), SQLITE_CANTOPEN);
    }
    std::memcpy(out, full->c_str(), full->size() + 1);
    // (As unix says it: SQLite refuses it under SQLITE_OPEN_NOFOLLOW.)
    return followed ? SQLITE_OK_SYMLINK : SQLITE_OK;
  });
}

void* x_dl_open(sqlite3_vfs*, const char* path) { return unix_vfs()->xDlOpen(unix_vfs(), path); }
void x_dl_error(sqlite3_vfs*, int n, char* out) { unix_vfs()->xDlError(unix_vfs(), n, out); }
void (*x_dl_sym(sqlite3_vfs*, void* handle, const char* symbol))(void) {
  return unix_vfs()->xDlSym(unix_vfs(), handle, symbol);
}
void x_dl_close(sqlite3_vfs*, void* handle) { unix_vfs()->xDlClose(unix_vfs(), handle); }
int x_randomness(sqlite3_vfs*, int n, char* out) { return unix_vfs()->xRandomness(unix_vfs(), n, out); }
int x_sleep(sqlite3_vfs*, int us) { return unix_vfs()->xSleep(unix_vfs(), us); }
int x_current_time(sqlite3_vfs*, double* now) { return unix_vfs()->xCurrentTime(unix_vfs(), now); }
int x_current_time_int64(sqlite3_vfs*, sqlite3_int64* now) {
  return unix_vfs()->xCurrentTimeInt64(unix_vfs(), now);
}
int x_get_last_error(sqlite3_vfs*, int n, char* out) {
  if (n > 0) {
    size_t len = std::min(t_last_error.size(), static_cast<size_t>(n - 1));
    std::memcpy(out, t_last_error.data(), len);
    out[len] = '\0';
  }
  return 0;
}

sqlite3_vfs make_vfs() {
  sqlite3_vfs v{};
  v.iVersion = 2;  // up to xCurrentTimeInt64; no system-call overrides
  v.szOsFile = std::max(static_cast<int>(sizeof(PagefileFile)), unix_vfs()->szOsFile);
  v.mxPathname = 1024;
  v.zName = kVfsName;
  v.xOpen = x_open;
  v.xDelete = x_delete;
  v.xAccess = x_access;
  v.xFullPathname = x_full_pathname;
  v.xDlOpen = x_dl_open;
  v.xDlError = x_dl_error;
  v.xDlSym = x_dl_sym;
  v.xDlClose = x_dl_close;
  v.xRandomness = x_randomness;
  v.xSleep = x_sleep;
  v.xCurrentTime = x_current_time;
  v.xGetLastError = x_get_last_error;
  v.xCurrentTimeInt64 = x_current_time_int64;
  return v;
}

int add_functions(sqlite3* db, char** message, const void*) {
  auto [name, why] = std::exchange(t_deferred_open_error, {});
  const char* main_name = sqlite3_db_filename(db, "main");
  if (!why.empty() && main_name != nullptr && name == main_name) {
    if (message != nullptr) *message = sqlite3_mprintf("%s", why.c_str());
    return SQLITE_CANTOPEN;
  }
  return register_sql_functions(db);
}

}  // namespace

sqlite3_vfs* unix_vfs() {
  static sqlite3_vfs* os = sqlite3_vfs_find("unix");
  return os;
}

std::string last_error() { return t_last_error; }

int sqlite_code(const Status& status, int io_code) {
  switch (status.code()) {
    case Code::kOk: return SQLITE_OK;
    case Code::kBusy: return SQLITE_BUSY;
    case Code::kNoSpace: return SQLITE_FULL;
    case Code::kCorruption: return SQLITE_CORRUPT;
    case Code::kReadOnly: return SQLITE_READONLY;
    case Code::kPermissionDenied: return SQLITE_PERM;
    default: return io_code;
  }
}

int sqlite_error(const Status& status, int io_code, int code) {
  t_last_error = status.to_string();
  if (code == 0) code = sqlite_code(status, io_code);
  // Into SQLite's error log as os_unix.c reports its failures, and into
  // PAGEFILE_LOG, so the store's words (which page, which server) reach
  // whoever reads either; a busy lock is routine and SQLite retries it.
  if (code != SQLITE_BUSY) {
    sqlite3_log(code, "pagefile: %s", t_last_error.c_str());
    logger().warn("sqlite code {}: {}", code, t_last_error);
  }
  return code;
}

int register_vfs(int make_default) {
  if (unix_vfs() == nullptr) return SQLITE_ERROR;
  // The VFS logs nothing unless PAGEFILE_LOG names a file (level from
  // PAGEFILE_LOG_LEVEL, default info): it runs inside someone else's
  // program, whose output is its own.
  static const bool logging = [make_default] {
    const char* path = std::getenv("PAGEFILE_LOG");
    if (path == nullptr || *path == '\0') return false;
    const char* level = std::getenv("PAGEFILE_LOG_LEVEL");
    Status s = log_to_file(path, level != nullptr && *level != '\0' ? level : "info");
    if (!s) sqlite3_log(SQLITE_WARNING, "pagefile: PAGEFILE_LOG: %s", s.to_string().c_str());
    if (s) logger().info("vfs registered pid={} default={}", ::getpid(), make_default != 0);
    return static_cast<bool>(s);
  }();
  (void)logging;
  static sqlite3_vfs vfs = make_vfs();
  int rc = sqlite3_vfs_register(&vfs, make_default);
  if (rc != SQLITE_OK) return rc;
  return sqlite3_auto_extension(reinterpret_cast<void (*)(void)>(add_functions));
}

// ---- the store by path: xAccess, xDelete and the SQL functions ----------

Result<std::unique_ptr<ByteFile>> open_stored(const std::string& path, OpenOptions open) {
  auto name = store_name(path);
  if (!name) return name.status();
  if (Status s = settle_open_wals(*name, WalAccess::kWillRead); !s) return s;
  auto config = DbRegistry::instance().lookup(*name);
  if (!config) return config.status();
  open.location = (*config)->options.location;
  auto layout = database_of(*name) == *name ? ByteFile::Layout::kPages : ByteFile::Layout::kBytes;
  if (!open.read_only) (*config)->forget_absent(*name);  // it may be written now
  return ByteFile::open(*(*config)->client, *name, open, layout, nullptr, (*config)->trace);
}

Result<int64_t> local_pages(const std::string& path) {
  NameMemo scratch;
  const NameMemo* known = memo_of(path.c_str(), scratch);
  if (!known) return int64_t{-1};
  int64_t pages = local_pages_of(known->full, known->config.get());
  if (pages == kLocalAbsent) return Status::not_found(known->full);
  return pages;
}

int64_t local_pages_of(const std::string& name, const DbConfig* config) {
  if (!config || config->options.location != Location::kLocal) return -1;
  struct stat st {};
  if (::stat(name.c_str(), &st) != 0) return errno == ENOENT ? kLocalAbsent : -1;
  if (!S_ISREG(st.st_mode)) return -1;
  // Only a header (or nothing): no pages. Else at least one page beyond it:
  // a journal or WAL with a byte in it (ByteFile::truncate(0) leaves none),
  // or one being written, whose writer SQLite then finds holding RESERVED.
  return st.st_size <= static_cast<off_t>(kHeaderSize) ? 0 : 1;
}

Result<int64_t> stored_size(const std::string& path) {
  if (Status s = settle_open_wals(path, WalAccess::kWillRead); !s) return s;
  // A local file that is absent, or empty: one stat says so. (One of a
  // header or less is read: a file of text is no Pagefile.)
  auto pages = local_pages(path);
  if (!pages) return pages;
  if (struct stat st {}; *pages == 0 && ::stat(path.c_str(), &st) == 0 && st.st_size == 0) return pages;
  OpenOptions open;
  open.read_only = true;
  auto file = open_stored(path, open);
  if (!file && file.status().is(Code::kCorruption) && local_name(path.c_str()) && LocalPagefile::is_foreign(path)) {
    // A local file that is not a Pagefile (a -shm, a file of text) is not
    // the store's.
    return Status::not_found(path, "not a Pagefile");
  }
  if (!file) return file.status();
  int64_t size = (*file)->size();
  (void)(*file)->close();
  return size;
}

Result<int64_t> copy_stored(const std::string& from, const std::string& to) {
  OpenOptions read;
  read.read_only = true;
  auto source = open_stored(from, read);
  if (!source) return source.status();
  std::vector<std::byte> bytes(static_cast<size_t>((*source)->size()));
  auto got = (*source)->read(bytes, 0);
  if (!got) return got.status();
  OpenOptions write;
  write.create = true;
  write.page_size = (*source)->page_size();  // sizes stay what they were
  if (Status s = (*source)->close(); !s) return s;
  if (Status s = remove_stored(to); !s && !s.is(Code::kNotFound)) return s;
  auto target = open_stored(to, write);
  if (!target) return target.status();
  if (Status s = (*target)->write(bytes, 0); !s) return s;
  if (Status s = (*target)->sync(); !s) return s;
  if (Status s = settle_open_wals(to, WalAccess::kWrote); !s) return s;
  if (Status s = (*target)->close(); !s) return s;
  return static_cast<int64_t>(bytes.size());
}

Status remove_stored(const std::string& path, bool fenced, bool sync_dir) {
  auto name = store_name(path);
  if (!name) return name.status();
  auto config = DbRegistry::instance().lookup(*name);
  if (!config) return config.status();
  if (Status s = settle_open_wals(*name, WalAccess::kRemoved); !s) return s;
  Status s;
  if ((*config)->options.location == Location::kLocal) {
    s = LocalPagefile::unlink(*name, sync_dir, LocalPagefile::Unlinking::kAnyFile);
    if (s.is(Code::kNotFound)) s = Status::not_found(*name, "does not exist");
  } else {
    // A journal or WAL goes under the database's write lock (deleting the
    // journal commits): its token says so. Anything else is the user's.
    uint64_t token = fenced && database_of(*name) != *name ? (*config)->lock_token->load() : 0;
    s = (*config)->client->unlink(*name, (*config)->options.location, token);
  }
  if (s) {
    if (auto writer = (*config)->trace->get()) writer->unlinked(*name);
  }
  return s;
}

}  // namespace pagefile::vfs
