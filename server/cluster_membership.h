// Which cluster a server's directory belongs to, and which directory it is
// (doc/architecture.md, "Incarnations" and "Server directories").
//
// A cluster is named by its catalog's id, a random 64-bit number made when
// the catalog database is created. Every file record carries it, and every
// page request carries its file's. A server's directory records the
// cluster it serves in the file `cluster`: the catalog's, on a server that
// holds the catalog; else the first one a page request (or a join) brought.
// A request of another cluster is refused with kStale, so a client that
// opened a file before every server started again on empty directories
// cannot write its pages into a different file that received the same id.
//
// The same file names the directory itself: a random 64-bit id made when
// the directory joins a cluster. The catalog learns it once per address
// (the first client to reach the server registers it), records carry it,
// and page requests carry the one the catalog knows. A directory that was
// emptied (or replaced, or is a mount point whose disk did not mount) has
// another id, or none: it refuses those requests with kIOError instead of
// answering zeros for the pages it no longer holds.
//
// The file: the cluster id and the directory id in hexadecimal, a line
// each (a file from before directory ids has the first line only, and is
// given a directory id when loaded). Written aside, synced and renamed.
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

  // Reads the recorded cluster and directory, if any. kCorruption for a
  // damaged file.
  Status load();

  // A request's cluster and the directory its sender expects here (the
  // catalog's for this address). Cluster 0 passes (a client that does not
  // know it). A directory that joined no cluster joins this one, unless
  // the request expects a directory: then the pages it held are gone
  // (kIOError). Another cluster: kStale. Another directory: kIOError.
  Status check(uint64_t cluster, uint64_t directory);
  // Whether check(cluster, directory) passes without recording anything:
  // for the paths that answer without the full one, which says why not.
  bool serves(uint64_t cluster, uint64_t directory) const {
    return cluster != 0 && cluster == cluster_.load(std::memory_order_acquire) &&
           (directory == 0 || directory == directory_.load(std::memory_order_acquire));
  }

  // Joins `cluster` as check(cluster, 0) does, and returns this
  // directory's id.
  Result<uint64_t> join(uint64_t cluster);

  // The catalog in this directory names the cluster: records it, over
  // whatever a request brought before.
  Status set(uint64_t cluster);

  uint64_t cluster() const { return cluster_.load(std::memory_order_acquire); }
  // 0 until the directory joins a cluster.
  uint64_t directory() const { return directory_.load(std::memory_order_acquire); }

 private:
  // Records `cluster`, with this directory's id (made now when it has none).
  Status record(uint64_t cluster) REQUIRES(mu_);
  Status lost(uint64_t directory) const;

  const std::filesystem::path path_;
  std::atomic<uint64_t> cluster_{0};
  std::atomic<uint64_t> directory_{0};
  Mutex mu_;  // recording
};

}  // namespace pagefile::net
