// What the VFS remembers for the whole process: one Pagefile client per bus
// (started on first use, stopped at exit), and for each database name the
// options it was opened with, so its journal, WAL and super-journal (and
// xDelete, xAccess and the SQL functions, which get only a name) go to the
// same place.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "pagefile/pagefile.h"
#include "vfs/db_options.h"
#include "vfs/byte_file.h"
#include "vfs/trace_writer.h"

namespace pagefile::vfs {

struct StoreFile;

// A database as this process opened it last.
struct DbConfig {
  DbOptions options;  // as its URI said; the policy is policy() below
  Client* client = nullptr;
  uint32_t pool_pages = 0;  // the client's buffer pool (0: none)
  // Every server of the client's bus runs in this process (the embedded
  // default): they share one disk, so a file gains nothing from striping
  // over them and would pay every create, sync and delete once per server.
  bool bus_in_process = false;
  std::atomic<uint32_t> concurrency{8};  // PRAGMA pagefile_concurrency changes it
  // Copies the database keeps of each page, as recorded (0 until its file
  // is opened here): its journal and WAL are created with as many, so a
  // commit survives what its database survives.
  std::atomic<uint32_t> replicas{0};
  std::shared_ptr<IoStats> stats = std::make_shared<IoStats>();
  // The trace its files are captured to (trace=, $PAGEFILE_TRACE, PRAGMA
  // pagefile_trace), shared like `stats`.
  std::shared_ptr<TraceSlot> trace = std::make_shared<TraceSlot>();
  // Times a connection of this database in this process took SHARED from no
  // lock. A journal or WAL descriptor kept open across transactions (SQLite
  // keeps one in exclusive mode, or when a shim claims
  // UNDELETABLE_WHEN_OPEN) re-reads its size and pages when this moved:
  // another descriptor may have written the file meanwhile.
  std::shared_ptr<std::atomic<uint64_t>> fresh_locks = std::make_shared<std::atomic<uint64_t>>(0);
  // Of those, the times the database may have changed since the connection's
  // last lock (Client::unchanged_since_unlock said no).
  std::shared_ptr<std::atomic<uint64_t>> changes = std::make_shared<std::atomic<uint64_t>>(0);
  // The fencing token of the database's write lock, which its journal and
  // WAL carry too (OpenOptions::lock_token): a journal written, or deleted
  // to commit, by a writer whose lease ran out is refused like its pages.
  // (Shared by this process's connections; they renew their leases together.)
  std::shared_ptr<std::atomic<uint64_t>> lock_token = std::make_shared<std::atomic<uint64_t>>(0);

  // The database's journal and WAL names that xAccess found absent, each
  // with the `changes` count of then. SQLite asks at the start of every
  // transaction whether they exist; the answer "absent" holds until
  // `changes` moves, because only a writer creates them, and a writer
  // (kReserved) moves the file's version, which our next lock then sees.
  // (A live writer's journal, which we may miss meanwhile, is one SQLite
  // would pass over anyway: its owner holds kReserved.) Opening a file of
  // that name here forgets the answer.
  bool known_absent(const std::string& name) const {
    MutexLock lock(absent->mu);
    auto it = absent->at.find(name);
    return it != absent->at.end() && it->second == changes->load();
  }
  void note_absent(const std::string& name, uint64_t changes_then) {
    MutexLock lock(absent->mu);
    absent->at[name] = changes_then;
  }
  void forget_absent(const std::string& name) {
    MutexLock lock(absent->mu);
    absent->at.erase(name);
  }
  struct AbsentNames {
    Mutex mu;
    std::map<std::string, uint64_t> at GUARDED_BY(mu);
  };
  std::shared_ptr<AbsentNames> absent = std::make_shared<AbsentNames>();  // shared like changes

  // The database's WAL files open in this process (StoreFile, vfs_internal.h),
  // so that the WAL frames a connection holds can be sent to the file
  // before the wal-index in shared memory says they exist (xShmBarrier).
  // Connections of one process share one open WAL (as unix descriptors
  // share the kernel's copy of a file): `files` counts the xOpens each
  // StoreFile stands for. One whose name was removed since is shared no
  // more (a new file at the name is another file).
  struct OpenWal {
    int opens = 1;
    bool removed = false;
  };
  struct OpenWals {
    Mutex mu;  // taken before any of the files' own
    std::map<StoreFile*, OpenWal> files GUARDED_BY(mu);
    // files.size(), read with no lock (a database descriptor's read, which
    // holds its own file's mutex: x_read's runs).
    std::atomic<size_t> count{0};
    // Writes and truncates begun on the files (counted before each), and
    // how many of those a drain that finished had sent (drain_wals, under
    // mu). While the two are equal there is nothing to send, and
    // xShmBarrier, which SQLite calls at every read transaction, takes no
    // lock. (Not a flag cleared as a drain begins: a barrier that found it
    // clear would return while another thread's drain was still sending.)
    std::atomic<uint64_t> written{0};
    std::atomic<uint64_t> sent{0};
  };
  std::shared_ptr<OpenWals> wals = std::make_shared<OpenWals>();  // shared like changes

  // The database's rollback journals open in this process. What one holds
  // back (a page written in part, its length) is sent to the store before
  // the database is written and before its write lock is let go
  // (drain_journals): a crash of the process must find the journal's
  // records in the file before any page they undo is changed, and a
  // finished journal finished, as unix's are once in the kernel's page
  // cache (what synchronous=OFF counts on).
  //
  // While a descriptor of the database in this process holds its write
  // lock (`writers`), no other process writes the journal, and in this
  // process only that descriptor's connection does: each journal is told
  // so (Client::exclude_other_writers), and its appended pages' writes
  // read no old checksum.
  struct OpenJournals {
    Mutex mu;  // taken after the database file's own, before the journals'
    std::set<StoreFile*> files GUARDED_BY(mu);
    int writers GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<OpenJournals> journals = std::make_shared<OpenJournals>();  // shared like wals
  // Write locks (RESERVED or EXCLUSIVE from below) taken on the database in
  // this process. A journal synced since the current one was taken needs no
  // draining before a database write: with synchronous NORMAL or FULL,
  // SQLite syncs a journal before it writes a page the journal's unsynced
  // records undo, so what it holds back undoes no page being written.
  std::shared_ptr<std::atomic<uint64_t>> write_locks = std::make_shared<std::atomic<uint64_t>>(1);

  // The buffer policy the database's files opened from now on get: its URI's
  // policy= and cache_pages=, or PRAGMA pagefile_policy=NAME since. Unset:
  // the one each file recorded at creation.
  std::optional<BufferPolicy> policy() const { return policy_.get(); }
  void set_policy(std::optional<BufferPolicy> policy) { policy_.set(std::move(policy)); }

 private:
  Locked<std::optional<BufferPolicy>> policy_;
};

class DbRegistry {
 public:
  // The one registry of the process.
  static DbRegistry& instance();

  // The configuration for a database opened with `options` (its client
  // started when needed), remembered under `db_name`. Without policy= or
  // cache_pages= in `options` it keeps the policy the database had here.
  // With trace=PATH its files are captured to the trace at PATH from now on;
  // without, the first open of a database here captures to
  // $PAGEFILE_TRACE when that is set. A trace that cannot be written fails
  // the open (kIOError naming the path) before any file is touched.
  //
  // One client per bus, shared by every database on it, so it has one
  // buffer pool: sized when the client starts, by the cache_pages= of the
  // database whose open starts it, else by $PAGEFILE_CACHE_PAGES, else none.
  // A later cache_pages= only limits that database's share of the pool
  // (BufferPolicy::max_pages); DbConfig::pool_pages says what there is.
  Result<std::shared_ptr<DbConfig>> remember(const std::string& db_name, const DbOptions& options);

  // The configuration remembered for the database `name` belongs to
  // (database_of); for a name never opened here, the defaults (remote, the
  // default bus).
  Result<std::shared_ptr<DbConfig>> lookup(const std::string& name);

  // Sets the policy of the database `db_name` for the files opened from now
  // on (DbConfig::set_policy on the configuration remembered for it).
  void set_policy(const std::string& db_name, const BufferPolicy& policy);

  // The configuration remembered for the database `name` belongs to, or
  // null when none was (nothing is remembered by asking).
  std::shared_ptr<DbConfig> find(const std::string& name);
  // Every store name this process opened, looked up or remembered (the
  // store has no listing; this is what pagefile_names() offers instead).
  std::vector<std::string> names();

  // Writes out every trace and stops every client (at exit).
  void stop_all();

 private:
  DbRegistry() = default;
  // The one Client of a bus, shared by every database on it.
  struct SharedClient {
    std::unique_ptr<Client> client;
    uint32_t pool_pages = 0;
    bool in_process = false;  // DbConfig::bus_in_process
  };
  Result<SharedClient*> client_for(const std::string& bus, uint32_t cache_pages) REQUIRES(mu_);

  Mutex mu_;
  std::map<std::string, SharedClient> clients_ GUARDED_BY(mu_);  // by bus
  std::map<std::string, std::shared_ptr<DbConfig>> databases_ GUARDED_BY(mu_);
  std::set<std::string> known_ GUARDED_BY(mu_);
};

}  // namespace pagefile::vfs
