// The catalog's durable records: one per Pagefile (TOPs file information
// server). Kept in an SQLite database (the "unix" VFS, named explicitly so a
// Pagefile VFS registered as default is never used) in the catalog server's
// directory, so they survive restarts and crashes: WAL journal with
// synchronous=FULL, so a record is on disk when create/set_size/remove
// return.
//
// The database is marked as a catalog by PRAGMA application_id and its schema
// version by PRAGMA user_version; the table layout is in catalog_store.cpp.
// Ids come from a counter kept in the database, so an id is never given out
// twice, even after its file is removed and the catalog reopened.
//
// SQLite's errors become: SQLITE_FULL kNoSpace, SQLITE_READONLY kReadOnly,
// SQLITE_CORRUPT/NOTADB kCorruption, SQLITE_BUSY/LOCKED kBusy (after a short
// busy timeout), SQLITE_PERM/AUTH kPermissionDenied, SQLITE_CANTOPEN the code
// of its errno (a missing directory is kNotFound), anything else kIOError;
// the message carries sqlite3_errmsg.
//
// Records read or written are also kept in memory, so a lookup (every lock
// request names its file) costs a hash probe rather than an SQLite query.
// That is exact only while this object is the database's one writer: the
// page server that owns it holds its directory (server/dir_lock.h). Another
// program may read the database meanwhile; a change it made would be seen
// only once the server restarts.
//
// Thread-safety: not thread-safe; the catalog serialises calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/file_record.h"
#include "pagefile/options.h"
#include "pagefile/status.h"

struct sqlite3;

namespace pagefile::net {

using ::pagefile::FileRecord;

class CatalogStore {
 public:
  // Opens or creates the database at `path` (its directory must exist).
  // kCorruption when the file is not a catalog database (not SQLite, or
  // another program's SQLite database, which is left untouched);
  // kNotSupported when it was written by a newer schema version.
  static Result<std::unique_ptr<CatalogStore>> open(const std::filesystem::path& path);
  ~CatalogStore();
  CatalogStore(const CatalogStore&) = delete;
  CatalogStore& operator=(const CatalogStore&) = delete;

  // Creates the record `proto.name` (its id and created time are assigned;
  // returned filled in). kAlreadyExists when the name is taken.
  // kInvalidArgument for an empty name or one with a NUL byte, a bad page
  // size (check_page_size), a negative size, an unknown placement or access
  // type, stripe_pages 0, an empty server list, an empty server address or
  // one with a newline, or a bad buffer policy (check_buffer_policy).
  Result<FileRecord> create(const FileRecord& proto);

  // kNotFound when there is no record of that name / id. kCorruption when
  // the stored row holds a value create() could not have written.
  Result<FileRecord> lookup(std::string_view name);
  Result<FileRecord> lookup_id(uint64_t id);

  // Sets the size of file `id`. kNotFound for an unknown id;
  // kInvalidArgument for a negative size.
  // With `grow_only`, only when larger than the recorded size, so a client
  // with an older view never shrinks the file by reporting its writes.
  Status set_size(uint64_t id, int64_t size_pages, bool grow_only = false);
  // Puts `server`'s copies of file `id` in `state`, moving its
  // replica_version when that changes anything, and returns the record.
  // kNotFound for an unknown id, kInvalidArgument for a server not among
  // the file's, kIOError when that would leave some page with no current
  // copy (replicas - 1 servers not current at most), kStale for kCurrent
  // from anything but kResyncing (left behind again during a resync).
  Result<FileRecord> set_copy_state(uint64_t id, const std::string& server, CopyState state);
  // Server directories (server/catalog.h): the directory recorded at
  // `address` (0: none), and recording one where none is.
  Result<uint64_t> directory_at(const std::string& address);
  Result<uint64_t> record_directory(const std::string& address, uint64_t directory);
  // Puts `new_server` in `old_server`'s place in every file that has it:
  // its copies there stale (to be resynced), its placement keys kept (no
  // page moves). All files or none: kInvalidArgument naming the first file
  // that cannot (one copy only: its pages would be lost; the new server
  // among its servers already), kIOError for one that would be left
  // with no current copy of some pages. Returns the records changed.
  Result<std::vector<FileRecord>> replace_server(const std::string& old_server, const std::string& new_server);

  // Removes the record and returns it. kNotFound when absent.
  Result<FileRecord> remove(std::string_view name);

  // Every record, by name.
  Result<std::vector<FileRecord>> list();

  // Sets aside `count` fencing tokens, durably: returns the first, and the
  // next call's first is at least `count` beyond it, whatever restarts come
  // between. (The catalog gives tokens out of blocks set aside this way, so
  // they only grow without a disk write per token.)
  Result<uint64_t> reserve_tokens(uint64_t count);

  // The cluster's id: random, never 0, made when the catalog was created
  // (or first opened by a build that knows it) and never changed
  // (server/cluster_membership.h).
  uint64_t cluster_id() const { return cluster_id_; }

 private:
  explicit CatalogStore(sqlite3* db);
  // Writes `r`'s servers, copy states, replica_version and placement keys
  // to its row (inside the caller's transaction); `operation` names it in
  // an error.
  Status write_copies(const FileRecord& r, std::string_view operation);
  // Keeps `record` (as stored) in memory and returns it.
  const FileRecord& remember(FileRecord record);
  void forget(uint64_t id);

  // Reads the cluster id, making it first when there is none.
  Status load_cluster_id();
  // The catalog's counters (table meta): a key's value, nullopt when it has
  // no row; set_meta writes one. Callers hold a transaction.
  Result<std::optional<int64_t>> meta_value(std::string_view key);
  Status set_meta(std::string_view key, int64_t value);

  sqlite3* db_;
  uint64_t cluster_id_ = 0;
  std::unordered_map<uint64_t, FileRecord> by_id_;     // records as stored
  std::unordered_map<std::string, uint64_t> by_name_;  // name -> id, for by_id_
};

}  // namespace pagefile::net
