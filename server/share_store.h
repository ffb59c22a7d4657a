// A page server's pages: its share of every file (one LocalPagefile each,
// dir/shares/<id>.pf, opened on first use and kept open), the server's
// buffer pool over them (server/server_pool.h), the emulated disk, and the
// sliding windows of global-sequential files (TOPs 2.2).
//
// Coherence of pool and disk: a page read from disk and put in the pool,
// and a write of that page to disk and pool, must not interleave (the pool
// would keep what the disk no longer holds). Each pair runs under the
// page's lock, one of kPageLockStripes mutexes chosen by (file, page); a
// truncate or a drop takes them all. They guard the pool's agreement with
// the disk, nothing else: reads and writes of different pages run in
// parallel on as many threads as the server has.
//
// Emulated disk: with disk_latency > 0, every access that misses the pool
// holds the one disk arm for that long before it runs, so a server does at
// most 1/disk_latency uncached accesses per second however many threads it
// has; a window read is one access (a seek, then a run taken as free).
// Without an emulated disk there is no arm.
//
// Lock order: a window's fill, then the arm, then page locks (ascending).
//
// Thread-safety: thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <span>
#include <utility>
#include <vector>

#include "core/mutex.h"
#include "server/fence_table.h"
#include "server/page_server.h"
#include "server/server_counters.h"
#include "server/server_pool.h"
#include "store/local_pagefile.h"

namespace pagefile::net {

// Where a share lies in its file, for a global-sequential window to read
// ahead only this server's pages: with placement stripe, unit s over n
// servers, page p's first copy is on server (p / s) % n and its R copies
// on that one and the R - 1 after it. All zero: unknown (hash placement),
// so no read-ahead.
struct ShareLayout {
  uint32_t stripe_pages = 0;
  uint32_t server_count = 0;
  uint32_t server_index = 0;
  uint32_t replicas = 1;
};

class ShareStore {
 public:
  static constexpr size_t kPageLockStripes = 64;

  ShareStore(const ServerOptions& options, ServerTally& tally);

  // Reads `count` pages from `first` on into `out`, and with checksums on
  // their checksums into `checksums` (one per page; empty with checksums
  // off). With `layout`, a global-sequential file reads through its
  // window; without, it reads as any other. Pages never written read as
  // zeros. A page that fails its checksum on disk is kCorruption.
  // `in_place`: `out` is the caller's own buffer in this process (a direct
  // read), so a page checked here as it came from disk into it, or zeroed
  // here, gets kNoChecksum: nothing is left for the caller to check.
  Status read(const ShareRef& share, int64_t first, uint32_t count, std::span<std::byte> out,
              std::span<uint64_t> checksums, std::optional<ShareLayout> layout, bool in_place = false);
  // Reads from the pool alone: true when it held every page (counted as
  // hits), false otherwise (nothing counted).
  bool read_pooled(const ShareRef& share, int64_t first, uint32_t count, std::span<std::byte> out,
                   std::span<uint64_t> checksums);
  // Writes whole pages from `first` on, refusing what a WRITE request's
  // sender could get wrong (page size, partial pages, page numbers, a page
  // that does not match the checksum it came with: kCorruption). Empty
  // `checksums`: the sender computed none, the server computes them.
  // `in_place`: `data` is the caller's own buffer in this process (a
  // direct write), whose checksums it computed from these very bytes:
  // nothing travelled, so they are taken as they are.
  // `repair`: write only the pages whose copy on disk fails its checksum
  // (WritePages.repair); a page that verifies may be newer than `data`.
  Status write(const ShareRef& share, int64_t first, std::span<const std::byte> data,
               std::span<const uint64_t> checksums, bool in_place = false, bool repair = false);
  // Verifies pages [first, first + count) of the share on disk, bypassing
  // the pool; each bad page goes to `bad` with why. Stops at the share's
  // end, which `share_pages` reports (0 when nothing was ever written).
  struct ScrubResult {
    uint32_t checked = 0;
    int64_t share_pages = 0;
    std::vector<std::pair<int64_t, Status>> bad;
  };
  Result<ScrubResult> scrub(const ShareRef& share, int64_t first, uint32_t count);
  bool checksums() const { return options_.checksums; }
  // Makes every write to the share durable (per the server's SyncMode).
  Status sync(const ShareRef& share);
  // Fencing: raises the file's highest token seen to `token` (0: a writer
  // without a lock, nothing to check), kept on disk (server/fence_table.h).
  // kStale, changing nothing, when a higher one was seen: the sender's
  // write lock has passed to another client. Writes (page by page, under
  // the page's lock), truncates and syncs check their share's token here
  // first.
  Status check_fence(uint64_t file_id, uint64_t token);
  // Cuts the share to `pages` (pages of the file, not of the share).
  Status truncate(const ShareRef& share, int64_t pages);
  // Removes the share and everything held of it.
  Status drop(uint64_t file_id);

  bool pool_enabled() const { return pool_.enabled(); }
  // Whether a read of `share` may be done on the caller's thread (no window
  // to move, no emulated arm to queue on).
  bool reads_at_once(const ShareRef& share);
  bool writes_at_once() const { return !emulated_disk(); }

  ServerPool& pool() { return pool_; }
  const ServerPool& pool() const { return pool_; }
  std::vector<std::pair<uint64_t, int64_t>> disk_read_log() const;
  // The newest `most` entries of the log.
  std::vector<std::pair<uint64_t, int64_t>> disk_read_log_tail(size_t most) const;

 private:
  // A global-sequential file's window: pages up to read_through have been
  // read from disk in ascending order. `fill` is held while the window
  // moves, so one window read finishes before the next starts and the disk
  // sees one ascending run.
  struct Window {
    Mutex fill;
    int64_t read_through GUARDED_BY(fill) = -1;
  };

  bool emulated_disk() const { return options_.disk_latency.count() > 0; }
  // The arm, held for one access's latency; an empty lock without an
  // emulated disk.
  std::unique_lock<std::mutex> hold_arm();
  std::mutex& page_lock(uint64_t file_id, int64_t page);
  // Every page lock, in order (truncate, drop).
  std::vector<std::unique_lock<std::mutex>> lock_all_pages();

  // The share of `file_id`, opened on first use; `create` makes it (with
  // sector checksums when `sector_checksums`) when it does not exist.
  Result<std::shared_ptr<LocalPagefile>> share(uint64_t file_id, uint32_t page_size, bool create,
                                               bool sector_checksums = false);
  std::shared_ptr<Window> window(uint64_t file_id);
  // The file's pages at and beyond `pages` are gone: a window past them
  // moves back so that they are read again when they come back.
  void reset_window(uint64_t file_id, int64_t pages);
  // One page of read(): from the pool, else from `file` (through the
  // window when `window` is given), else zeros when there is no file.
  Status read_page(const Result<std::shared_ptr<LocalPagefile>>& file, const ShareRef& ref, int64_t page,
                   std::span<std::byte> out, std::optional<ShareLayout> window, uint64_t& checksum,
                   bool in_place);
  // Reads `page` (a miss) from disk, checked, and logs it; its checksum
  // goes to `checksum`.
  Status read_from_disk(LocalPagefile& file, uint64_t file_id, int64_t page, std::span<std::byte> out,
                        uint64_t& checksum);
  // A miss read from disk and kept in the pool, under the page's lock.
  Status read_miss(LocalPagefile& file, uint64_t file_id, int64_t page, std::span<std::byte> out,
                   uint64_t& checksum);
  Status read_window(LocalPagefile& file, uint64_t file_id, const ShareLayout& layout, int64_t page,
                     std::span<std::byte> out, uint64_t& checksum);

  const ServerOptions options_;
  ServerTally& tally_;
  ServerPool pool_;

  // The emulated disk: one access at a time. (A std::mutex held by the
  // scope of a std::unique_lock, like the page locks, whose count and
  // choice by page the analysis cannot follow; they guard no field.)
  std::mutex arm_;
  std::array<std::mutex, kPageLockStripes> page_locks_;

  Mutex shares_mu_;
  std::map<uint64_t, std::shared_ptr<LocalPagefile>> shares_ GUARDED_BY(shares_mu_);

  Mutex windows_mu_;
  std::map<uint64_t, std::shared_ptr<Window>> windows_ GUARDED_BY(windows_mu_);

  FenceTable fences_;

  mutable Mutex log_mu_;
  std::deque<std::pair<uint64_t, int64_t>> disk_read_log_ GUARDED_BY(log_mu_);
};

}  // namespace pagefile::net
