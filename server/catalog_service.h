// The catalog as a page server serves it (TOPs file information server):
// the file records (server/catalog_store.h) and the leased locks
// (server/lease_table.h) behind the catalog requests of the wire protocol
// (open, stat, set size, unlink, list, lock, renew, release, locks).
//
// The records' database opens on the first catalog request, so a server
// that is not the catalog never creates one.
//
// Thread-safety: thread-safe; requests run one at a time (mu_), so the
// store and the lease table, which are not thread-safe, see one caller.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>

#include "core/mutex.h"
#include "server/catalog_store.h"
#include "server/cluster_membership.h"
#include "server/lease_table.h"
#include "server/page_server.h"
#include "wire/pagefile.capnp.h"

namespace pagefile::net {

class CatalogService {
 public:
  // The records live in dir/catalog.db; locks last `lease` past their
  // owner's last renewal.
  // The catalog's cluster id goes to `membership` (this server's
  // directory's) when the catalog opens.
  CatalogService(std::filesystem::path dir, std::chrono::milliseconds lease, ClusterMembership& membership);

  // Answers a catalog request into `response`: its answer, or the error
  // to send. kNotSupported for a request that is not the catalog's;
  // kDisconnected after close().
  Status answer(wire::Request::Reader request, wire::Response::Builder response);

  // Closes the database: later requests get kDisconnected, and the
  // directory may go to another server of this process.
  void close();

  // When the directory holds a catalog, opens and checks it now, so that a
  // damaged one stops the server at its start (with what to do about it)
  // rather than failing every catalog request later. A directory without
  // one gets it with its first catalog request.
  Status open_existing();

 private:
  Status open() REQUIRES(mu_);
  Status open_file(wire::OpenFile::Reader req, wire::Response::Builder response) REQUIRES(mu_);
  Status set_lock(wire::Lock::Reader req, wire::Response::Builder response) REQUIRES(mu_);
  // A record as the catalog sends it: with the cluster id.
  void record_to_wire(FileRecord record, wire::FileRecord::Builder out) REQUIRES(mu_);
  // The next fencing token, from a block set aside in the store.
  Result<uint64_t> next_token() REQUIRES(mu_);
  // kStale when `token` (a request's lockToken) was given by this catalog
  // and has since been superseded by another owner's; 0 checks nothing.
  Status check_token(uint64_t token) const REQUIRES(mu_);

  // The last write lock granted on a file: its token and owner.
  struct Grant {
    uint64_t token = 0;
    uint64_t owner = 0;
  };

  const std::filesystem::path dir_;
  const std::chrono::milliseconds lease_;
  ClusterMembership& membership_;
  Mutex mu_;
  std::unique_ptr<CatalogStore> store_ GUARDED_BY(mu_);  // opened on first use
  std::unique_ptr<LeaseTable> leases_ GUARDED_BY(mu_);
  // Tokens [next_token_, token_limit_) are set aside and not yet given.
  uint64_t next_token_ GUARDED_BY(mu_) = 0;
  uint64_t token_limit_ GUARDED_BY(mu_) = 0;
  uint64_t first_token_ GUARDED_BY(mu_) = 0;  // the first this run gave
  std::map<uint64_t, Grant> grants_ GUARDED_BY(mu_);           // by file
  std::map<uint64_t, uint64_t> live_tokens_ GUARDED_BY(mu_);   // grants_' tokens -> file
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace pagefile::net
