// The page server: serves its share of every remote Pagefile, and (when the
// bus names it so) the catalog. pagefiled runs one; the embedded default
// runs several inside the client's process. Same code either way.
//
// Concurrency (TOPs section 3): the runtime's network thread decodes
// requests; page work runs on its work pool (core/io_runtime.h), so one
// slow request never blocks the others. Requests of one connection that touch the same page of the same
// file run in the order they arrived; sync and truncate of a file wait for
// that connection's earlier requests on the file. Catalog requests run one
// at a time.
//
// Flow control: the bytes of writes received but not yet done are bounded by
// `max_unconfirmed_write_bytes`; past it the server stops reading from the
// connection that pushed it over until the backlog halves.
//
// Emulated disk: with disk_latency > 0, every page access that misses the
// server's cache holds the one "disk arm" for that long before it runs, so a
// server does at most 1/disk_latency uncached accesses per second, however
// many threads it has (server/share_store.h). A global-sequential window
// read (server/server_pool.h) is one access: a seek, then an ascending run
// taken as free. Off by default; reports that use it say so. Without it
// there is no arm: page accesses run in parallel.
//
// Buffer pool: `cache_pages` pages under each file's policy, named by the
// clients in their requests (server/server_pool.h); per-file counters in
// file_counters() and the STATS answer.
//
// Thread-safety: start/stop from one thread; stats() from any.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/io_runtime.h"
#include "wire/address.h"
#include "wire/pagefile.capnp.h"
#include "wire/transport.h"
#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pagefile::net {

enum class SyncMode : uint8_t {
  kFdatasync,  // sync flushes with fdatasync (the default)
  kDsync,      // every write is O_DSYNC; sync has nothing left to do
  kNone,       // never flush: fast and NOT durable (experiments only)
};

// The file a page request is for, as a share's server sees it: the
// wire::Share fields page work needs.
struct ShareRef {
  uint64_t file_id = 0;
  uint32_t page_size = 0;
  std::string_view policy;  // empty: the server keeps what it has
  uint64_t fence = 0;       // the writer's fencing token (wire Share.fence)
  uint64_t cluster = 0;     // the file's cluster (wire Share.cluster)
  bool sector_checksums = false;  // for a share made by a write (wire Share.sectorChecksums)
  uint64_t directory = 0;   // the directory the catalog knows here (wire Share.directory)
};

struct ServerOptions {
  std::filesystem::path dir;           // shares under dir/shares, catalog at dir/catalog.db
  uint32_t threads = 8;                // page-work threads
  uint64_t cache_pages = 1024;         // server buffer pool, in pages (0: no pool)
  // The k of a global-sequential file's prefetch window: a miss beyond the
  // window reads ahead to the page asked for plus this many (TOPs 2.2).
  uint32_t prefetch_pages = 32;
  std::chrono::microseconds disk_latency{0};
  SyncMode sync = SyncMode::kFdatasync;
  std::chrono::milliseconds lease{10'000};  // catalog lock lease
  uint64_t max_unconfirmed_write_bytes = 64ull << 20;
  // A server with a runtime of its own (pagefiled): how long its network
  // thread keeps polling after its last event before it sleeps
  // (core/io_runtime.h). 0: it sleeps at once.
  std::chrono::microseconds poll_before_sleep{50};
  // Connections served at once; one more is told so (kBusy, as an answer
  // to no request: id 0) and closed, so that a flood of clients costs a
  // bounded amount of memory.
  uint32_t max_connections = 1024;
  // Page checksums (core/page_checksum.h): checked on arrival, stored,
  // checked on every read from disk, sent with every page. Off
  // (--no-checksums) only to measure what they cost.
  bool checksums = true;
  // The catalog on etcd (HOST:PORT of each member; pagefiled --catalog
  // etcd://...) rather than the built-in one in dir/catalog.db.
  std::vector<std::string> etcd;
  // The mode of a unix: socket it listens on (pagefiled --socket-mode):
  // owner only by default, since whoever connects may read, overwrite and
  // delete every file.
  uint32_t unix_socket_mode = 0600;
  // Requests that take longer (arrival to answer) are logged
  // (pagefiled --slow-ms); 0: none.
  std::chrono::milliseconds slow_request{0};
  // Credentials for a tls:// address (TlsSide::kServer); null otherwise.
  std::shared_ptr<TlsContext> tls;
  // Limits per connection, so one client cannot take what others need.
  // A request larger than max_frame_bytes (pagefiled --max-frame-bytes; at
  // most the transport's kMaxFrameBytes, beyond which a frame is malformed
  // and ends its connection) is refused with kInvalidArgument; one more than
  // max_inflight requests in flight (--max-inflight) with kIOError (kBusy
  // would be lock contention to a client); the
  // connection is kept either way. A connection with nothing in flight that
  // sent nothing for idle_timeout (--idle-timeout-s; 0: never) is closed,
  // and a client connects again when it next needs the server.
  size_t max_frame_bytes = kMaxFrameBytes;
  uint32_t max_inflight = 4096;
  std::chrono::seconds idle_timeout{0};
};

struct ServerCounters {
  uint64_t requests = 0;
  uint64_t pages_read = 0;
  uint64_t pages_written = 0;
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t disk_reads = 0;
  uint64_t disk_writes = 0;
  uint64_t syncs = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint32_t connections = 0;
  uint64_t errors = 0;
  uint64_t cache_pages = 0;
  uint64_t unconfirmed_write_bytes = 0;
  uint64_t peak_unconfirmed_write_bytes = 0;  // the most ever held at once
  uint64_t repairs = 0;  // pages rewritten from another copy (WritePages.repair)
  uint64_t lease_expiries = 0;  // clients' leases that ran out at this server's catalog
};

// The server pool's counters for one file's share, since the file took its
// current policy (see server/server_pool.h).
struct ServerFileCounters {
  uint64_t file_id = 0;
  std::string policy;
  FileCounters cache;
};

// Whether `request` is for the catalog (open, stat, sizes, unlink, list,
// locks and leases) rather than for a server's pages.
bool is_catalog_request(wire::Request::Reader request);

class PageServer {
 public:
  // Creates `options.dir` if needed and listens on `address` (inproc:
  // addresses register with `hub`), on `runtime`'s threads: a process's
  // shared runtime for an embedded server (its work pool then serves, and
  // options.threads is not used), or null for a runtime of the server's own
  // with options.threads work threads (pagefiled). Fails with the
  // listener's error, or kInvalidArgument for bad options.
  static Result<std::unique_ptr<PageServer>> start(const ServerOptions& options,
                                                   const Address& address,
                                                   InprocHub* hub = nullptr,
                                                   std::shared_ptr<IoRuntime> runtime = nullptr);
  ~PageServer();  // stop()
  PageServer(const PageServer&) = delete;
  PageServer& operator=(const PageServer&) = delete;

  // The address it listens on (the real port for tcp port 0).
  Address address() const;

  // A tls:// server's credentials for the connections to come (pagefiled
  // reloads them on SIGHUP); kInvalidArgument for another server.
  Status set_tls(std::shared_ptr<TlsContext> tls);

  // Stops accepting, answers requests already received (new ones on open
  // connections are refused with kDisconnected), finishes page work in
  // flight, and closes every connection. Idempotent.
  void stop();

  // Answers `request`, a catalog request (is_catalog_request), on the
  // calling thread, as the same request from a connection is answered but
  // with no connection: for a client in this server's own process (the
  // embedded default), whose lock and size questions would otherwise cost
  // two thread hand-overs each way for a few microseconds of work. Catalog
  // requests run one at a time whichever way they come. After stop() the
  // answer is kDisconnected.
  Frame catalog_direct(const Frame& request);
  // Page work that needs no waiting, done on the calling thread by plain
  // call, with the effects of a READ or WRITE request of one page (a page
  // would otherwise be copied into a message and out again for nothing).
  // A read needs no waiting when the page is in this server's cache, or
  // when the server emulates no disk latency, a miss then being one pread,
  // as the unix VFS would do; a write, when the server emulates no disk
  // latency. The outcome, or nothing: send the request (an emulated disk,
  // whose arm's queue lives on the pool; a global-sequential window; a
  // request the usual way must refuse; stopping). The caller keeps it from
  // overtaking its own requests on the page still in flight.
  // Checksums: a page read so is checked by the server (as it comes from
  // disk into `out`, or as it entered the pool), and never leaves this
  // process, so the caller has nothing to check. A write's checksum, made
  // by the caller from these very bytes in this process, is stored as it
  // is (kNoChecksum: the server computes it).
  std::optional<Status> read_direct(const ShareRef& share, int64_t page, std::span<std::byte> out);
  std::optional<Status> write_direct(const ShareRef& share, int64_t page, std::span<const std::byte> data,
                                     uint64_t checksum);

  ServerCounters counters() const;
  // Its requests by operation and its counters in Prometheus's text format
  // (server/request_metrics.h): what pagefiled --metrics serves.
  std::string metrics_text() const;
  std::vector<ServerFileCounters> file_counters() const;

  // For tests: the pages this server read from its disk, in order, as
  // (file id, page). Bounded to the last 1 << 20 accesses.
  std::vector<std::pair<uint64_t, int64_t>> disk_read_log() const;

  class Impl;

 private:
  PageServer(std::shared_ptr<Impl> impl, std::shared_ptr<IoRuntime> runtime);
  std::shared_ptr<IoRuntime> runtime_;
  std::shared_ptr<Impl> impl_;
};

}  // namespace pagefile::net
