// Which cluster a server's directory belongs to (doc/architecture.md,
// "Incarnations").
//
// A cluster is named by its catalog's id, a random 64-bit number made when
// the catalog database is created. Every file record carries it, and every
// page request carries its file's. A server's directory records the
// cluster it serves in the file `cluster`: the catalog's, on a server that
// holds the catalog; else the first one a page request brought. A request
// of another cluster is refused with kStale, so a client that opened a file
// before every server started again on empty directories cannot write its
// pages into a different file that received the same id.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>

#include "core/mutex.h"
#include "pagefile/status.h"

namespace pagefile::net {

class ClusterMembership {
 public:
  explicit ClusterMembership(std::filesystem::path dir);

  // Reads the recorded cluster, if any. kCorruption for a damaged file.
  Status load();

  // A request's cluster: 0 passes (a client that does not know it);
  // the first one recorded when none is; another is kStale.
  Status check(uint64_t cluster);

  // The catalog in this directory names the cluster: records it, over
  // whatever a request brought before.
  Status set(uint64_t cluster);

  uint64_t cluster() const { return cluster_.load(std::memory_order_relaxed); }

 private:
  Status record(uint64_t cluster) REQUIRES(mu_);

  const std::filesystem::path path_;
  std::atomic<uint64_t> cluster_{0};
  Mutex mu_;  // recording
};

}  // namespace pagefile::net
