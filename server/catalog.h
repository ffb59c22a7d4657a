// What a catalog keeps and decides (TOPs file information server): the file
// records and the locks with their leases, one operation per catalog request
// of the wire protocol. CatalogService (server/catalog_service.h) speaks the
// wire and leaves the rest to one of two catalogs:
//   - LocalCatalog (server/local_catalog.h): the built-in one, records in an
//     SQLite database in one server's directory and locks in its memory;
//     the default, for one machine and for the embedded default.
//   - EtcdCatalog (server/etcd_catalog.h): everything in an etcd cluster,
//     so no one machine can lose or block it; any number of servers and
//     clients use it at once.
// Both pass the same tests (tests/server/catalog_backends_test.cpp).
//
// Tokens: `token` is a request's lockToken, 0 when it carries none. A token
// superseded by a later write lock of the file is refused with kStale.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/file_record.h"
#include "pagefile/status.h"
#include "server/lease_table.h"

namespace pagefile::net {

// No version: what a release answers when the owner held nothing (its
// lease ran out, or the catalog restarted), since what happened meanwhile
// is unknown; a client's next grant never matches it.
inline constexpr uint64_t kNoVersion = 0;

// What a lock request answers (wire LockState).
struct LockGrant {
  LockLevel level = LockLevel::kNone;  // what the owner holds now
  bool reserved_by_other = false;
  // Moves whenever the file may have changed (lease_table.h, "Versions");
  // kNoVersion for a release of a lock the owner no longer held.
  uint64_t version = 0;
  // For a lock that lets its owner write: its fencing token, and whether
  // its owner must announce it to the file's servers before it reads (the
  // last writer lost its lease and may still be writing).
  uint64_t fence_token = 0;
  bool fence_announce = false;
  int64_t size_pages = 0;
  uint64_t replica_version = 0;
  std::chrono::milliseconds lease{0};
};

class Catalog {
 public:
  virtual ~Catalog() = default;

  // The cluster's id (server/cluster_membership.h).
  virtual uint64_t cluster_id() const = 0;

  // As CatalogStore's (server/catalog_store.h).
  virtual Result<FileRecord> lookup(std::string_view name) = 0;
  virtual Result<FileRecord> create(const FileRecord& proto) = 0;
  virtual Result<std::vector<FileRecord>> list() = 0;
  virtual Status set_size(uint64_t token, uint64_t id, int64_t size_pages, bool grow_only) = 0;
  // Removes the record and drops every lock on the file.
  virtual Result<FileRecord> remove(uint64_t token, std::string_view name) = 0;
  virtual Result<FileRecord> set_copy_state(uint64_t token, uint64_t id, const std::string& server,
                                            CopyState state) = 0;
  // With old_server == new_server (a new directory at the same address),
  // also forgets the directory recorded there, once every file's copies
  // on it are stale: the next client to reach it records the new one.
  virtual Result<std::vector<FileRecord>> replace_server(const std::string& old_server,
                                                         const std::string& new_server) = 0;

  // Server directories (doc/architecture.md, "Server directories"): the
  // directory id recorded at `address`, 0 when none is.
  virtual Result<uint64_t> directory_at(const std::string& address) = 0;
  // Records `directory` at `address` when none is recorded there (the
  // first to record one wins, for good), and returns the one recorded.
  virtual Result<uint64_t> record_directory(const std::string& address, uint64_t directory) = 0;

  // Moves `owner`'s lock on file `id` to `level` (server/lock_rules.h),
  // renewing its lease. kNotFound for a file not in the catalog.
  virtual Result<LockGrant> lock(uint64_t id, uint64_t owner, LockLevel level) = 0;
  // kNotFound when the owner holds no lock (its lease ran out).
  virtual Status renew(uint64_t owner) = 0;
  virtual Status release_owner(uint64_t owner) = 0;
  virtual Result<std::vector<LockRecord>> locks() = 0;
  // Clients' leases that ran out here so far (their locks dropped); 0 for a
  // catalog whose leases another system keeps (etcd's expire there).
  virtual uint64_t lease_expiries() const { return 0; }
};

}  // namespace pagefile::net
