// A page server's buffer pool: the client's BufferPool (policies/buffer_pool.h)
// with one policy per file share, chosen by the policy name the file's
// clients send with their reads and writes (wire Share.policy), bounded by
// the server's --cache-pages.
//
// Which policy runs. A file takes the policy named by the first request
// that names one; a request naming another policy replaces it (the file's
// cached pages and counters start again), so clients of one file should
// agree, which they do when they open it with its recorded policy. The
// names are those of the built-in registry; "global-sequential" runs
// GlobalSequentialPolicy below; a name the server does not know (a client's
// custom policy) runs "random". Limits: a server does not apply a client's
// min_pages and max_pages, which count the client's pool; every file may
// use the whole server pool.
//
// global-sequential (TOPs section 2.2). Used pages are tossed at once (a
// global scan does not come back) and pages fetched ahead are pinned until
// read, so a reader that lags behind the window still finds its page.
// The server's read path decides what to fetch (PageServer, read_pages);
// this class only keeps the pages.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/mutex.h"
#include "policies/buffer_pool.h"
#include "pagefile/pagefile.h"
#include "pagefile/policy.h"

namespace pagefile::net {

// The policy name that gets the server's sliding prefetch window.
inline constexpr std::string_view kGlobalSequential = "global-sequential";

struct FilePoolStats {
  uint64_t file_id = 0;
  std::string policy;
  FileCounters counters;
};

class ServerPool {
 public:
  // capacity 0: no pool, every call a no-op and every lookup a miss.
  // `prefetch_pages` is the global-sequential window's k, handed to policies
  // as their read_ahead.
  ServerPool(uint64_t capacity, uint32_t prefetch_pages);

  bool enabled() const { return pool_ != nullptr; }
  uint64_t capacity() const { return capacity_; }

  // Makes sure the file is in the pool under `policy` (empty: keep the one
  // it has, "random" for a new file), with pages of `page_size`. Returns
  // the policy it runs. kInvalidArgument when the pool holds the file with
  // pages of another size, unless `sized` (the share on disk has this
  // size, checked first), which starts the file's pool again at this size.
  // (BufferPool checks the size again at every copy, under its own lock: a
  // read that passed here before such a start misses.) (A request naming another size than the
  // file's must never meet its pages in the pool: copied by the request's
  // size, they would overrun a reply or give part of a page.)
  Result<std::string> declare(uint64_t file, uint32_t page_size, std::string_view policy, bool sized = false);
  // The file's policy name; empty for a file not in the pool.
  std::string policy_of(uint64_t file) const;

  // The pages themselves: read, read_run, contains, fill, fill_prefetched
  // and write as policies/buffer_pool.h describes them, for files this
  // pool knows (declare()); null when the server has no pool.
  BufferPool* pages() { return pool_.get(); }

  // Forgets pages of `file` at and beyond `from` (0: the whole file, which
  // also leaves the pool).
  void drop(uint64_t file, int64_t from);

  // Pages held for `file` now.
  uint32_t pages_of(uint64_t file) const;
  uint64_t size() const;
  std::vector<FilePoolStats> stats() const;

 private:
  const uint64_t capacity_;
  const uint32_t prefetch_pages_;
  const std::shared_ptr<PolicyRegistry> policies_;
  std::unique_ptr<BufferPool> pool_;
  mutable Mutex mu_;
  struct PooledFile {
    std::string policy;
    uint32_t page_size = 0;
  };
  std::map<uint64_t, PooledFile> files_ GUARDED_BY(mu_);
};

}  // namespace pagefile::net
