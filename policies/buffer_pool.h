// The client's buffer pool: one per client, shared by its open files, each
// file holding pages by its own policy (pagefile/policy.h) within its
// min_pages and max_pages.
//
// The pool is a cache and does no I/O: the client asks it first, goes to the
// store on a miss and hands it what the store returned. It is write-through:
// a write updates (or brings in) the pooled copy at once and still goes to
// the store through the client's window, so write-behind, sync and the
// concurrency window behave as without a pool. Nothing in it is ever dirty,
// so dropping a page never loses data.
//
// Room. The pool holds at most `capacity` pages whatever their size. A file
// first gives up its own pages once it holds what its policy wants (clamped
// to its min and max); when the pool is full, the file holding most pages
// above its minimum gives one up. No file is pushed below its minimum by
// another, and a pinned page is never evicted or tossed: when no page can
// go, the new page is simply not kept.
//
// Counting. read() counts a hit or a miss; a hit on a page fetched ahead and
// not yet read counts as prefetch_used, and such a page leaving unread as
// prefetch_wasted.
//
// Checksums. A page may be kept with its checksum (core/page_checksum.h),
// which comes back with every copy of it: the server's pool keeps the one
// that arrived with the page, to send with it. The client's pool keeps none
// (0): it holds pages already checked.
//
// Memory. The pages lie in a PageArena (policies/page_arena.h): side by
// side in chunks the kernel may back with huge pages, so that a hit on a
// large pool costs no walk of the page tables.
//
// Thread-safety: thread-safe (one internal mutex). Policies are called under
// it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "pagefile/pagefile.h"
#include "pagefile/policy.h"
#include "policies/page_arena.h"

namespace pagefile {

class BufferPool {
 public:
  // REQUIRES: capacity_pages > 0.
  explicit BufferPool(uint32_t capacity_pages);

  uint32_t capacity() const { return capacity_; }
  // Pages held for all files.
  uint32_t size() const;
  // Bytes of memory mapped for pages now: the chunks (PageArena) that hold
  // its pages, and at most one empty chunk for each page size held since.
  size_t mapped_bytes() const;

  // Adds file `file` (an id unique in this pool) with its policy. A
  // max_pages of 0, or one above the capacity, becomes the capacity.
  // REQUIRES: `file` is not in the pool; page_size > 0.
  void add_file(uint64_t file, uint32_t page_size, PolicyLimits limits,
                std::unique_ptr<PagePolicy> policy);
  // Drops the file's pages and forgets it. No-op for an unknown file.
  void remove_file(uint64_t file);

  // A read by the program. On a hit copies the page into `out` (which must
  // be page-sized) and returns true; on a miss returns false. Counts either
  // unless `count` is false (a read whose miss was counted already).
  // With `checksum`, the page's checksum goes there.
  bool read(uint64_t file, int64_t page, std::span<std::byte> out, bool count = true,
            uint64_t* checksum = nullptr);
  // Pages [first, first + count), each `page_size` bytes of `out` (and
  // their checksums in `checksums` unless it is empty): all copied and
  // counted as hits, or (when one is missing) none copied and nothing
  // counted, so that the caller's slower path counts the miss.
  bool read_run(uint64_t file, int64_t first, uint32_t count, std::span<std::byte> out,
                std::span<uint64_t> checksums = {});
  bool contains(uint64_t file, int64_t page) const;

  // The store returned `data` for a read that missed: keep it.
  void fill(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum = 0);
  // The store returned `data` for a page fetched ahead: keep it, unread.
  // Returns whether the page is now held (admitted, or held already): a
  // reader may take it (and a toss-immediately policy let it go) as soon as
  // the pool's lock is released, so only this answer says it was kept.
  bool fill_prefetched(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum = 0);
  // The program wrote `data` to the page: the pooled copy becomes it.
  void write(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum = 0);

  // Drops one page, every page, or the pages at and beyond `pages`.
  void drop(uint64_t file, int64_t page);
  void drop_all(uint64_t file);
  void truncate(uint64_t file, int64_t pages);

  // Pins the page: while pinned it is never evicted or tossed. A page not
  // yet in the pool is pinned from the moment it comes in. Pins nest.
  void pin(uint64_t file, int64_t page);
  // Undoes one pin. kInvalidArgument when the page is not pinned.
  Status unpin(uint64_t file, int64_t page);

  // The pages the file's policy wants fetched after the program used
  // `page`, without those the pool holds, at most the file's read_ahead.
  std::vector<int64_t> read_ahead(uint64_t file, int64_t page);

  // The file's counters; all zero for an unknown file.
  FileCounters counters(uint64_t file) const;

 private:
  struct Frame {
    PageArena::Buffer data;
    uint64_t checksum = 0;
    bool prefetched_unread = false;
  };
  struct PoolFile {
    uint32_t page_size = 0;
    PolicyLimits limits;
    std::unique_ptr<PagePolicy> policy;
    std::unordered_map<int64_t, Frame> frames;
    std::map<int64_t, uint32_t> pins;  // page -> pin count
    FileCounters counters;
  };
  enum class Why { kEvicted, kTossed, kDropped };

  PoolFile* find(uint64_t file) REQUIRES(mu_);
  const PoolFile* find(uint64_t file) const REQUIRES(mu_);
  uint32_t allowance(const PoolFile& f) const REQUIRES(mu_);
  bool pinned(const PoolFile& f, int64_t page) const REQUIRES(mu_);
  // read() and read_run() under the lock: false, touching nothing, when a
  // page of the run is missing.
  bool copy_run(PoolFile& f, int64_t first, uint32_t count, std::span<std::byte> out,
                std::span<uint64_t> checksums, bool count_hits) REQUIRES(mu_);
  // Puts `data` in a frame of `f`, making room first; false when no room
  // could be made (every candidate page pinned).
  bool admit(PoolFile& f, int64_t page, std::span<const std::byte> data, uint64_t checksum, bool prefetched)
      REQUIRES(mu_);
  // Evicts one page of `f` chosen by its policy; false when none can go.
  bool evict_from(PoolFile& f) REQUIRES(mu_);
  // Evicts one page of the file holding most pages above its minimum,
  // `asking` last; false when no file can give one up.
  bool evict_for(PoolFile& asking) REQUIRES(mu_);
  void remove_frame(PoolFile& f, int64_t page, Why why) REQUIRES(mu_);
  // Whether the policy lets go of `page` as soon as it is used (and it is
  // not pinned): such a page is not worth a frame.
  bool passed_at_once(PoolFile& f, int64_t page) REQUIRES(mu_);
  // The program used `page`: tell the policy, then toss what it has passed.
  void use(PoolFile& f, int64_t page) REQUIRES(mu_);

  const uint32_t capacity_;
  mutable Mutex mu_;
  uint32_t size_ GUARDED_BY(mu_) = 0;
  // The frames' buffers. Declared before files_, so that it outlives the
  // frames, which give their buffers back when they go. A full pool admits
  // one page for each it evicts, into the buffer just given back.
  PageArena arena_ GUARDED_BY(mu_);
  std::map<uint64_t, PoolFile> files_ GUARDED_BY(mu_);
};

}  // namespace pagefile
