// The catalog as the wire asks for it (TOPs file information server): the
// catalog requests of the wire protocol (open, stat, set size, unlink,
// list, lock, renew, release, locks, copy states, replace server), answered
// by a catalog (server/catalog.h): the built-in one of a page server's
// directory, or one on etcd. A page server answers them from its
// connections; a client whose catalog is on etcd answers its own, in its
// process (bus/bus_client.cpp).
//
// The built-in catalog's database is made by the first request that creates
// a file, so a server that is not the catalog never makes one: a question
// put to it (a bus that names its servers in another order, `pagefile status
// --bus` of one server) gets the answer of an empty catalog, or kNotFound
// saying it holds none, and leaves it as it was (no catalog, no cluster).
//
// Thread-safety: thread-safe; requests run one at a time (mu_), so the
// catalog, which is not thread-safe, sees one caller.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "server/catalog.h"
#include "server/cluster_membership.h"
#include "server/page_server.h"
#include "wire/pagefile.capnp.h"

namespace pagefile::net {

class CatalogService {
 public:
  // With `etcd` empty, the built-in catalog: records in dir/catalog.db
  // (server/local_catalog.h); else the catalog on the etcd cluster of
  // those members (HOST:PORT each; server/etcd_catalog.h). Locks last
  // `lease` past their owner's last renewal. The catalog's cluster id goes
  // to `membership` (this server's directory's) when the catalog opens;
  // null for none (a client's own front of the catalog on etcd).
  CatalogService(std::filesystem::path dir, std::chrono::milliseconds lease, ClusterMembership* membership,
                 std::vector<std::string> etcd = {});

  // Answers a catalog request into `response`: its answer, or the error
  // to send. kNotSupported for a request that is not the catalog's;
  // kDisconnected after close().
  Status answer(wire::Request::Reader request, wire::Response::Builder response);
  // The same as a whole answer frame: the answer, ok, or the error.
  Frame respond(wire::Request::Reader request);

  // Closes the catalog: later requests get kDisconnected, and the
  // directory may go to another server of this process.
  void close();

  // When there is a catalog to open now (a built-in one in the directory,
  // or one elsewhere), opens and checks it, so that a damaged or
  // unreachable one stops the server at its start (with what to do about
  // it) rather than failing every catalog request later. A directory
  // without one gets it with its first catalog request.
  Status open_existing();

  // Catalog::lease_expiries of the catalog, 0 while none is open.
  uint64_t lease_expiries() const;

 private:
  Status open() REQUIRES(mu_);
  // A built-in catalog is in the directory (or the catalog is elsewhere).
  bool present() const REQUIRES(mu_);
  // Whether a catalog may be made in the directory: not where it holds
  // pages already (kInvalidArgument).
  Status may_create() const REQUIRES(mu_);
  // What a server that holds no catalog answers to `request`, making none.
  Status answer_without_catalog(wire::Request::Reader request, wire::Response::Builder response) REQUIRES(mu_);
  Status open_file(wire::OpenFile::Reader req, wire::Response::Builder response) REQUIRES(mu_);
  Status set_lock(wire::Lock::Reader req, wire::Response::Builder response) REQUIRES(mu_);
  // A record as the catalog sends it: with the cluster id and its servers'
  // directories. An error when the catalog cannot say which directories
  // it recorded: a record sent without them would have its requests go
  // unchecked (`out` is filled all the same, with 0 for those).
  Status record_to_wire(FileRecord record, wire::FileRecord::Builder out) REQUIRES(mu_);
  // The directory recorded at `address`; 0 when none is.
  Result<uint64_t> directory_at(const std::string& address) REQUIRES(mu_);
  Status records_to_wire(const Result<std::vector<FileRecord>>& records, wire::Response::Builder response)
      REQUIRES(mu_);

  // Makes the catalog, at the first request (or open_existing).
  using Opener = std::function<Result<std::unique_ptr<Catalog>>()>;

  const std::filesystem::path dir_;  // the built-in catalog's; empty for one on etcd
  Opener opener_;
  ClusterMembership* const membership_;
  mutable Mutex mu_;
  std::unique_ptr<Catalog> catalog_ GUARDED_BY(mu_);  // opened on first use
  bool closed_ GUARDED_BY(mu_) = false;
  // The directories recorded, by address, and when each was read.
  struct KnownDirectory {
    uint64_t directory = 0;
    std::chrono::steady_clock::time_point read_at;
  };
  static constexpr std::chrono::seconds kDirectoriesKept{2};
  std::map<std::string, KnownDirectory> directories_ GUARDED_BY(mu_);
};

}  // namespace pagefile::net
