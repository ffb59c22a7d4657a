// PFLI: the pages of one Pagefile in one local file.
//
// The file holds a header (store/file_header.h) and then the pages in
// groups of kGroupPages, each group after a block of its pages' checksums
// (doc/page_format.md; files of format version 1 have no checksum blocks
// and are read and written unchecked). The size of the file in pages counts
// whole pages only: a page cut short by a crash or a full disk reads as
// beyond the end, never as half a page.
//
// Checksums: every read from disk checks the page against the checksum
// stored beside it and fails with kCorruption, naming the page, when they
// differ. A write records the new checksum before it writes the page and
// keeps the previous one beside it, so a write cut short by a crash (or
// failing on a full disk) leaves a page that matches one of the two. A
// file created with sector checksums and pages larger than a sector keeps
// one such pair per 4 KiB sector instead (format version 3 or 5): a write torn
// between sectors then leaves each sector old or new, and the page reads
// back so, as a disk's would.
//
// The client uses this class for local Pagefiles and every page server uses
// it for its share of a remote one, so the two differ only in the path
// between them.
//
// Thread-safety: every method may be called from many threads at once.
// Concurrent writes of the same page land in an unspecified order; callers
// that need order (the client, the server) keep it themselves.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <bitset>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/little_endian.h"
#include "core/mutex.h"
#include "core/page_checksum.h"
#include "store/file_header.h"
#include "store/kept_sums.h"
#include "store/read_mapping.h"
#include "pagefile/options.h"
#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pagefile {

class LocalPagefile {
 public:
  struct OpenSpec {
    uint32_t page_size = 0;  // 0: the recorded size, or on create create_page_size
    uint32_t create_page_size = 0;  // 0: the default
    bool create = false;
    bool exclusive = false;
    bool read_only = false;
    uint32_t mode = 0;    // OpenOptions::mode
    bool dsync = false;   // O_DSYNC: every write is durable when it returns
    BufferPolicy policy;  // recorded when the file is created
    // False: pages are written without their checksums and read unchecked.
    // For measuring what checksums cost (pagefiled --no-checksums,
    // checksums=off) and nothing else: a page written so fails its check
    // when it is read with checksums on.
    bool checksums = true;
    // No other process or object writes the file (a server's share, under
    // its directory's lock): the pages' checksums may be kept in memory,
    // so that a read does not read its checksum entry.
    bool sole_writer = false;
    // At creation: check pages larger than kChecksumSectorSize per sector
    // (OpenOptions::sector_checksums).
    bool sector_checksums = false;
    // The caller keeps pages at this object's page size (a client's pool):
    // a page size another descriptor gives the file while it holds no page
    // (set_empty_page_size) is an error here rather than taken.
    bool fixed_page_size = false;
    // No descriptor gives the file another page size (OpenOptions::
    // page_size_final).
    bool page_size_final = false;
    // Pages are copied out of a shared mapping of the file where they lie
    // within its length as last counted, rather than read with pread
    // (store/read_mapping.h; OpenOptions::mapped_reads). Only pages of at
    // least the system's page (a cut at a page's start then leaves no part
    // of a system page past it, which would read as zeros rather than
    // fault), on file systems whose mappings and reads share one page
    // cache (may_map).
    bool map_reads = false;
  };

  // Pages per group, after a block of their checksums (doc/page_format.md).
  static constexpr int64_t kGroupPages = 256;

  // The header bytes set_lock_level locks for each of SQLite's lock levels
  // (their order depends on the format version: local_pagefile.cpp).
  struct LevelBytes {
    off_t pending;
    off_t reserved;
    off_t shared;
  };

  // Opens or creates the Pagefile at `path`. A file is created empty and
  // given its header in place, under a lock that openers finding it short
  // wait for, so none reads half a header; an empty file (a creator killed
  // in between) is kNotFound to an opener that does not create, and one
  // that creates gives it its header. A file created (or an empty one
  // given its header) is durable, name and header, at this object's first
  // sync(), as os_unix.c makes a new journal durable. Errors as
  // Client::open.
  static Result<std::unique_ptr<LocalPagefile>> open(const std::filesystem::path& path,
                                                     const OpenSpec& spec);

  // Whether `path` is a file of something else: not empty, and not
  // beginning as a Pagefile's header does (a damaged Pagefile is not).
  static bool is_foreign(const std::filesystem::path& path);

  // Removes the Pagefile at `path`; kNotFound when there is none, and
  // kInvalidArgument, removing nothing, when the file there is something
  // else (is_foreign: a text file named as a share, or by a trace's unlink),
  // unless `Unlinking::kAnyFile` (SQLite's xDelete removes what SQLite
  // names, as the unix VFS does). With `sync_dir`, the removal is durable
  // when this returns (its directory synced); without, as durable as the
  // file system makes it (SQLite deletes a journal so unless told
  // otherwise: xDelete's syncDir).
  enum class Unlinking { kPagefileOnly, kAnyFile };
  static Status unlink(const std::filesystem::path& path, bool sync_dir = true,
                       Unlinking which = Unlinking::kPagefileOnly);

  ~LocalPagefile();
  LocalPagefile(const LocalPagefile&) = delete;
  LocalPagefile& operator=(const LocalPagefile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t page_size() const { return page_size_.load(std::memory_order_relaxed); }
  const BufferPolicy& recorded_policy() const { return header_.policy; }
  bool read_only() const { return read_only_; }
  // Opened O_DSYNC (OpenSpec::dsync): every write waits for the disk.
  bool dsync() const { return dsync_; }

  // Whether pages are checked (format version 2 or more, checksums on).
  bool checked() const { return checked_; }
  // Bytes covered by one checksum: the page, or a sector (version 3 or 5).
  uint32_t checksum_unit() const { return units_ == 1 ? page_size() : kChecksumSectorSize; }
  // Where page `page` lies in the file: for tools and tests that look at
  // the bytes themselves.
  off_t page_offset(int64_t page) const;

  // Reads page `page` into `out` (exactly one page). kBeyondEnd, with `out`
  // zeroed, for a page at or past the end; kCorruption when the page fails
  // its checksum. With `checksum`, stores there the page's checksum
  // (page_checksum of what was read, zeros included).
  Result<PageRead> read_page(int64_t page, std::span<std::byte> out, uint64_t* checksum = nullptr) const;

  // Reads up to `count` pages from page `first` into `out` with one read
  // of the disk, each checked as read_page checks it: pages that lie one
  // after another on the disk (in first's group). Returns how many it
  // read, from `first` on, fewer at the end of the file or before a page
  // that fails its check (which read_page then answers alone); 0 when
  // `first` is at or past the end; kCorruption when `first` fails its
  // check, as read_page says it. kInvalidArgument when `out` holds fewer
  // than `count` pages.
  Result<int64_t> read_pages(int64_t first, int64_t count, std::span<std::byte> out) const;

  // Reads out.size() bytes at `offset` in page `page`, unchecked (a part
  // has no checksum of its own): for a caller that checks them against the
  // whole page as it last read it checked (vfs/byte_file.h). Returns the
  // bytes read: fewer at the end of the file. kInvalidArgument when they
  // would cross the page's end.
  Result<size_t> read_part(int64_t page, size_t offset, std::span<std::byte> out) const;

  // read_page, done only when the page's bytes are in the operating
  // system's page cache (RWF_NOWAIT); nothing when reading them would wait
  // for the disk. (Where the file system cannot tell, it reads.)
  std::optional<Result<PageRead>> read_page_now(int64_t page, std::span<std::byte> out) const;

  // Reads page `page` into `buffer` and checks it against the checksum
  // entry on disk, even where a sole writer keeps it in memory (scrub).
  Status verify_page(int64_t page, std::span<std::byte> buffer) const;

  // The checksum blocks this object holds mapped now (for tests).
  size_t mapped_blocks();
  // Whether the file system of `fd` lets a writer map its blocks (ext4,
  // XFS, tmpfs: local_pagefile.cpp).
  static bool may_map(int fd);

  // Writes page `page` with its checksum, computed here when `checksum` is
  // kNoChecksum. On failure (kNoSpace, kIOError...) the earlier content of
  // every page is kept. REQUIRES: a checksum given is page_checksum(data,
  // page) (the server checked it on arrival).
  // `changed`: the bytes of `data` that differ from the page's as the
  // caller read them from this object; only the sectors holding them are
  // written where this object knows that each other sector on disk holds
  // the caller's bytes (below, write_page).
  Status write_page(int64_t page, std::span<const std::byte> data, uint64_t checksum = 0,
                    ChangedBytes changed = {});
  // Writes the pages from `first` that `data` holds, one after the other
  // (whole pages), each as write_page writes it, but the bytes of those
  // between two checksum blocks with one pwrite: appended one at a time,
  // each grows the file, which costs ext4 an update of its size (4.1 us a
  // page on this machine, 1.3 in runs of 16: bench/README.md). On failure,
  // each page holds its old bytes or its new ones.
  Status write_pages(int64_t first, std::span<const std::byte> data);

  // Makes every write that returned before this call durable (fdatasync).
  Status sync();

  // Sets the size to `pages` pages.
  Status truncate(int64_t pages);

  // The number of whole pages in the file. While it has not been seen to
  // hold a page, the page size is read again with it (another descriptor
  // may have changed it: set_empty_page_size) and page_size() follows.
  Result<int64_t> size_pages() const;

  // A file that holds no page yet may change its page size: SQLite learns
  // a new database's page size (PRAGMA page_size) only at its first write,
  // after the file was made. Records `page_size` in the header of a file
  // that holds no page; kInvalidArgument when it holds one, or checks its
  // pages by sectors (version 3 or 5), or is a sole writer's, and nothing
  // changes. REQUIRES: no page operation of this object in flight, and the
  // caller holds the lock that keeps other descriptors from reading or
  // writing pages meanwhile (SQLite's EXCLUSIVE). A file that ever held a
  // page keeps its size (it stays longer than its header: truncate). The header is durable
  // when this returns. Other descriptors take the new size at their next
  // size_pages().
  Status set_empty_page_size(uint32_t page_size);

  // Open-file-description locks on one byte of the header (see pagefile.h).
  Status lock(LockMode mode, LockWait wait);
  Status unlock();

  // SQLite's lock levels (Client::set_lock_level), emulated as os_unix.c
  // does with open-file-description locks on three header bytes: PENDING,
  // RESERVED and SHARED (read-locked by readers, write-locked by the
  // exclusive holder). A descriptor going to EXCLUSIVE also takes RESERVED,
  // so reserved_elsewhere() sees every writer.
  Status set_lock_level(LockLevel level);
  // True when another open file description holds RESERVED or above.
  Result<bool> reserved_elsewhere() const;
  // Client::exclude_other_writers: the caller's word that, until it says
  // otherwise, no other descriptor writes the file (as RESERVED or above
  // held here says by itself).
  void exclude_other_writers(bool excluded);

 private:
  LocalPagefile(int fd, std::string name, const FileHeader& header, bool read_only, bool reserve_first,
                bool checksums, bool sole_writer, bool map_entries, bool dsync, bool header_may_change,
                bool page_size_final);
  // size_pages() from the file's length (stored in `length` when given),
  // at page_size().
  Result<int64_t> counted_pages(off_t* length = nullptr) const;
  // Reads and writes pages of `page_size` from now on, the checksums kept
  // at the old size forgotten (size_pages, set_empty_page_size).
  void take_page_size(uint32_t page_size) const;
  Status check_writable(std::string_view operation) const;
  // fdatasync (or the disk fault armed for a sync); `what` names it in an
  // error.
  Status sync_data(std::string_view what) const;
  // At most this many checksums per page: 64 KiB pages of 4 KiB sectors.
  static constexpr uint32_t kMaxUnits = kMaxPageSize / kChecksumSectorSize;
  using UnitSums = std::array<uint64_t, kMaxUnits>;

  // A checksum entry: a unit's checksum, then the one it had before its
  // last write (doc/page_format.md).
  static constexpr size_t kEntryBytes = 16;
  // (A group's block, one entry a page: 4096 bytes, a file-system block.)
  static_assert(kGroupPages * kEntryBytes == 4096);
  // A page's entries (units_ of them, the first kEntryBytes * units_
  // bytes; the rest is not looked at), as read from or for the disk.
  // (Defined here: a group's block is read through them 256 entries at a
  // time, and a shared library's out-of-line members are called, never
  // inlined.)
  struct Entries {
    std::array<std::byte, kEntryBytes * kMaxUnits> bytes;
    uint64_t current(uint32_t u) const { return get_le<uint64_t>(bytes, kEntryBytes * u); }
    uint64_t previous(uint32_t u) const { return get_le<uint64_t>(bytes, kEntryBytes * u + 8); }
    void set(uint32_t u, uint64_t current, uint64_t previous) {
      put_le<uint64_t>(bytes, kEntryBytes * u, current);
      put_le<uint64_t>(bytes, kEntryBytes * u + 8, previous);
    }
    // Unit `u` cut by a truncate that failed (retire_entries): no current
    // checksum, the previous one kept. Its bytes say which holds.
    bool retired(uint32_t u) const { return is_retired(current(u), previous(u)); }
    static bool is_retired(uint64_t current, uint64_t previous) {
      return current == kNoChecksum && previous != kNoChecksum;
    }
    // The checksum of unit `u` that its bytes `unit`, hashing to `hash`,
    // match: the current one, else the previous one; nullopt when neither.
    // (kNoChecksum stands for a unit never written, which reads as zeros.)
    std::optional<uint64_t> matching(uint32_t u, uint64_t hash, std::span<const std::byte> unit) const;
  };
  // Makes each entry in `bytes` bytes from `at` that of a page cut by a
  // truncate under way (truncate).
  Status retire_entries(off_t at, size_t bytes);
  // Reads page `page`'s entries; zeros (none recorded) where the file ends
  // before them.
  Status read_entries(int64_t page, Entries& entries) const;

  // A group of pages and its checksum block, in bytes.
  off_t group_bytes() const;
  // Where page `page`'s checksum entries lie in the file (units_ of them).
  off_t entry_offset(int64_t page) const;
  // Where group `group`'s checksum block lies in the file.
  off_t block_offset(int64_t group) const;
  // Records the page's entries (before its write): a store into the mapped
  // checksum block where map_entries_ and a sole writer's, or the span of
  // exclusion has written kEntryWritesBeforeMapping entries; else a pwrite.
  Status write_entries(int64_t page, std::span<const std::byte> entries);
  // The group's checksum block, mapped (allocated and read in first, so
  // that a store meets neither a full disk nor a read, until another
  // descriptor cuts it and grows the file back over it as a hole: a
  // store's fault is then caught); nullptr where it cannot be (entries are
  // then written).
  Result<std::byte*> mapped_block(int64_t group) REQUIRES(maps_mu_);
  // Unmaps the blocks at and past `end` in the file (a truncate's).
  void unmap_from(off_t end) REQUIRES(maps_mu_);
  // The checksums of the page's units (units_ of `sums`).
  void unit_sums(int64_t page, std::span<const std::byte> bytes, UnitSums& sums) const;
  // Whether the page's bytes hash to the checksums kept for it (kept_sums:
  // a version once written, accepted with no read of its entries),
  // the hashes stored in `sums` (units_ of them). The common case of every
  // read, checked here before check_read is called, whose call took as long
  // again as the hash (bench/README.md, "A page's check"). REQUIRES: checked_.
  bool matches_kept(int64_t page, std::span<const std::byte> bytes, UnitSums& sums) const {
    if (units_ == 1) {
      sums[0] = page_checksum(bytes, page);
      return sums_.get(static_cast<size_t>(page)) == sums[0];
    }
    unit_sums(page, bytes, sums);
    const auto first = static_cast<size_t>(page) * units_;
    for (uint32_t u = 0; u < units_; ++u) {
      if (sums_.get(first + u) != sums[u]) return false;
    }
    return true;
  }
  // The page's checksums as last written or verified by this object, or
  // read from its checksum block: false when not all are known. A sole
  // writer's are the file's; another's are a version of the page once
  // written, which bytes that match may be taken to be, and which may have
  // been written over since by another descriptor (not for a write's
  // previous checksum: trusted_sums).
  bool kept_sums(int64_t page, UnitSums& sums) const;
  // kept_sums of a sole writer; false for any other.
  bool trusted_sums(int64_t page, UnitSums& sums) const;
  // Remembers them; nullptr forgets them.
  void keep_sums(int64_t page, const UnitSums* sums) const;
  // Pages whose last write by this object failed: each of their units
  // holds the bytes of that write or of the one before, so the next write
  // keeps as each unit's old checksum the one its bytes match, read from
  // disk (checksums_on_disk) rather than the last one recorded.
  bool is_suspect(int64_t page) const;
  void set_suspect(int64_t page, bool suspect);
  Status checksums_on_disk(int64_t page, UnitSums& sums) const;
  // A page's write between its entries and its bytes (write_page,
  // write_run): what end_write records once the bytes are written or not.
  struct PageWrite {
    int64_t page = 0;
    UnitSums sums{};
    uint64_t gen = 0;     // span_gen_ before the write (note_on_disk)
    uint32_t first = 0;   // the units whose bytes are written, [first, last)
    uint32_t last = 0;
  };
  // Computes the page's checksums and writes its entries, each old
  // checksum beside the new one; or, given `entries_out` (kEntryBytes *
  // units_ bytes), puts them there for the caller to write (write_run: a
  // run's entries lie side by side, and go in one write).
  // REQUIRES: checked_, the page's stripe held.
  Status begin_write(int64_t page, std::span<const std::byte> data, uint64_t checksum, ChangedBytes changed,
                     PageWrite& w, std::span<std::byte> entries_out = {});
  // Records whether the bytes were written.
  void end_write(const PageWrite& w, const Status& written);
  // write_pages' pages [from, to), which lie between two checksum blocks.
  Status write_run(int64_t from, int64_t to, std::span<const std::byte> data);
  // A read that fails its check is read again (another process may be
  // writing the page) until it fails the same way for kSettle, or for
  // kRereadFor in all.
  static constexpr std::chrono::milliseconds kSettle{100};
  static constexpr std::chrono::milliseconds kRereadFor{2000};
  // read_page and verify_page; with `would_block` as pread_full's (the
  // page's first read only).
  Result<PageRead> read_checked(int64_t page, std::span<std::byte> out, uint64_t* checksum, bool trust_kept,
                                bool* would_block) const;
  // One read of the page and its entries: what read_checked returns, or a
  // mismatch with what was read and its error.
  struct Attempt {
    PageRead read = PageRead::kData;
    bool mismatch = false;
    Status status;
    UnitSums hash;  // (units_ of them)
    Entries entries;
  };
  // `use_cache`: the first attempt, which may also copy from the read
  // mapping; a page that failed its check is read again with pread, which
  // sees the file's end as it is now (a mapping past a cut reads zeros up
  // to the end of the system's page, not a short read).
  Status read_attempt(int64_t page, std::span<std::byte> out, uint64_t* checksum, bool trust_kept,
                      bool* would_block, bool use_cache, Attempt& attempt) const;
  // The check of a whole page read into `out` whose hashes (attempt.hash,
  // computed by the caller) match no checksum kept for it, or that trusts
  // none (verify_page): against its entries on disk. `gen` is the
  // span_gen_ of before the read; nullptr for bytes read without the page's
  // stripe, which are then not noted as on disk (note_on_disk).
  // REQUIRES: checked_.
  Status check_read(int64_t page, std::span<std::byte> out, bool use_cache, const uint64_t* gen,
                    Attempt& attempt) const;

  // Reads the page's whole checksum block from disk, keeps the current
  // checksums of its pages (keep_sums: one read serves the group's 256
  // pages), and gives the page's entries.
  Status read_block(int64_t page, Entries& entries) const;
  // The checksum block of `page`'s group as the disk holds it (zeros past
  // the file's end), and the entries of the index-th page of such a block.
  Result<std::vector<std::byte>> read_group_block(int64_t page) const;
  Entries entries_in(std::span<const std::byte> block, int64_t index) const {
    const size_t entry_bytes = kEntryBytes * units_;
    Entries entries;
    std::memcpy(entries.bytes.data(), block.data() + static_cast<size_t>(index) * entry_bytes, entry_bytes);
    return entries;
  }
  // One value of unit `u` of the index-th page's entries in such a block:
  // its current checksum, or with `previous` the one before. (Read where
  // it lies: a loop over a block's 256 pages that made an Entries of each
  // copied 64 KiB, a tenth of a small commit's user time.)
  uint64_t entry_in(std::span<const std::byte> block, int64_t index, uint32_t u, bool previous = false) const {
    return get_le<uint64_t>(block, (static_cast<size_t>(index) * units_ + u) * kEntryBytes + (previous ? 8 : 0));
  }
  // The page's lock stripe: a page's read and its checksum entry's read,
  // and its write's entry update and page write, each run whole under it,
  // so a reader never pairs a page with another write's entry.
  std::mutex& stripe(int64_t page) const { return stripes_[static_cast<uint64_t>(page) % stripes_.size()]; }

  const int fd_;
  const bool sole_writer_;
  const bool dsync_;
  // This object created the file: sync() syncs its directory too, once.
  std::atomic<bool> dir_sync_due_{false};
  uint64_t dir_syncs_before_ = 0;  // of its directory, begun before it was created (fixed at open)
  // That directory's name (fixed at open: a journal made at each commit
  // took its path apart at each first sync, 3% of the commit's user time).
  std::string dir_;
  // A sole writer's size in pages, as it last made it (read at open); for
  // another, at least the size as last counted (appends). reserve's guess
  // of where the file ends.
  std::atomic<int64_t> end_pages_{0};
  const std::string name_;
  const FileHeader header_;  // as read at open, but for the page size:
  // A file that holds no page may change it (set_empty_page_size).
  mutable std::atomic<uint32_t> page_size_;
  const bool header_may_change_;  // !OpenSpec::fixed_page_size
  const bool page_size_final_;    // OpenSpec::page_size_final
  // Not yet seen longer than its header (to have held a page):
  // size_pages() reads the header again.
  mutable std::atomic<bool> unsettled_{false};
  const bool read_only_;
  const bool grouped_;  // format version 2 or more: checksum blocks between groups of pages
  const bool checked_;  // grouped_, and checksums are on
  const uint32_t units_;  // checksums per page: 1, or its sectors (version 3 or 5; checksum_unit() bytes each)
  const LevelBytes level_bytes_;  // by format version
  const off_t sum_block_bytes_;  // a group's checksum block
  // (std::mutex held by scope, chosen by page: the analysis cannot follow
  // the choice, and they guard no field.)
  mutable std::array<std::mutex, 64> stripes_;
  // The checksums kept by unit (page * units_ + unit: kept_sums): every
  // one of a sole writer's, a bounded cache of another's.
  mutable KeptSums sums_;
  // Pages whose last write failed (is_suspect), and how many, so that the
  // common case (none) takes no lock.
  mutable Mutex suspects_mu_;
  std::set<int64_t> suspects_ GUARDED_BY(suspects_mu_);
  std::atomic<size_t> suspect_count_{0};

  // OpenSpec::map_reads: what reads copy from; null without.
  std::unique_ptr<ReadMapping> read_map_;
  // read_map_, while pages are at least the system's page (the page size
  // of a file that holds none may change); else null.
  const ReadMapping* read_map() const;

  // Checksum blocks, mapped: an entry's write is then a store to memory
  // where it would be a system call, as many as pages written. A sole
  // writer's always; another file's only while writes_excluded_, when no
  // other descriptor writes or truncates it. Not with O_DSYNC (such a
  // store is not durable at once). Where another descriptor may have
  // truncated the file since the last store, a store into a block cut
  // under it faults, which is caught (run_guarded), but one into the
  // system page where the file now ends does not, and is lost when the
  // file grows again: so the first store of each span of exclusion
  // (maps_gen_) counts the file's length and lets go of every block not
  // wholly inside it (check_maps). The entries are read with pread (the
  // same page cache), so a disk error reading them is an error, not a
  // fault.
  const bool map_entries_;
  Mutex maps_mu_;
  std::map<int64_t, std::byte*> maps_ GUARDED_BY(maps_mu_);  // by group
  bool cannot_map_ GUARDED_BY(maps_mu_) = false;
  // Where the last reservation ahead of appends ended (mapped_block).
  off_t reserved_to_ GUARDED_BY(maps_mu_) = 0;
  // The span_gen_ and page size the maps were last checked at: a block
  // mapped at another page size lies elsewhere.
  uint64_t maps_gen_ GUARDED_BY(maps_mu_) = UINT64_MAX;
  uint32_t maps_page_size_ GUARDED_BY(maps_mu_) = 0;
  // For a file that is not a sole writer's, at the first store of a span:
  // lets go of the blocks not wholly inside the file, or of all of them
  // when the page size has changed. False when the length cannot be
  // counted (entries are then written).
  bool check_maps() REQUIRES(maps_mu_);

  Mutex level_mu_;
  LockLevel level_ GUARDED_BY(level_mu_) = LockLevel::kNone;
  // set_lock_level's work, level_mu_ held.
  Status change_lock_level(LockLevel level) REQUIRES(level_mu_);
  // exclude_other_writers' word, and the lock level's (see update_exclusion).
  bool excluded_by_caller_ GUARDED_BY(level_mu_) = false;
  bool excluded_by_lock_ GUARDED_BY(level_mu_) = false;
  // Sets writes_excluded_ from the level and the caller's word.
  void update_exclusion() REQUIRES(level_mu_);
  // While this descriptor holds RESERVED or above, SQLite's locking keeps
  // every other from writing the file (or its caller says so, for a
  // database's journal while the database is held so): a page past its end, counted once
  // in that time (end_counted_), then has no old content for a cut write
  // to leave, as a sole writer's appended page has not, and its write reads
  // no old checksum. (Appending a table's pages, that read is a third of
  // the system calls.)
  std::atomic<bool> writes_excluded_{false};
  std::atomic<bool> end_counted_{false};
  Mutex end_mu_;  // one count at a time
  // Whether a write of `page` appends it: past the end as a sole writer
  // made it, or as counted while writes_excluded_.
  bool appends(int64_t page);
  // While writes_excluded_, the checksum of each page's bytes on disk as
  // this descriptor last read (and checked) or wrote them, one per unit
  // (span_key): a write's old checksums then need no read (a cold
  // transaction's pages are read under RESERVED, then written; a WAL's
  // last page and its length page are read under the WAL's write lock,
  // then written). Exact, as the disk's bytes, since no one else writes
  // and this descriptor's reads and writes of a page hold its stripe.
  // Forgotten at each change of writes_excluded_ (span_gen_ counts them: a
  // read begun before one is not noted after it), and bounded (in units).
  // Where pages have one unit, the notes of a group's pages lie in an
  // array of the group's (span_notes_), while there are at most
  // kMaxSpanBlocks of them; else in span_sums_, an entry per unit (a node
  // allocated and freed for each page a transaction read or wrote: with a
  // cold cache, a fifth of what checksums cost it).
  static constexpr size_t kMaxSpanSums = size_t{1} << 14;
  mutable Mutex span_mu_;
  mutable std::unordered_map<int64_t, uint64_t> span_sums_ GUARDED_BY(span_mu_);
  // A group's checksums, by page within it: `known` is false for a page
  // with none (not noted, or retired by a truncate, or forgotten by
  // forget_on_disk).
  struct SpanBlock {
    std::array<uint64_t, kGroupPages> sums;  // (read only where known)
    std::bitset<kGroupPages> known;
  };
  static constexpr size_t kMaxSpanBlocks = kMaxSpanSums / 2 / kGroupPages;  // (32: 65 KiB)
  mutable std::unordered_map<int64_t, std::unique_ptr<SpanBlock>> span_notes_ GUARDED_BY(span_mu_);
  // The groups whose block note_block_on_disk read in the span (units_ ==
  // 1 only), by group: one copy of the block's current checksums where
  // notes would take 256 (a commit's first write to a group made them a
  // twentieth of a small commit's CPU). A page's latest note is its own
  // (span_notes_, else span_sums_) if it has one, else its group's block
  // here (note_on_disk, on_disk_sum); past the arrays' bound, a page with
  // no note in span_sums_ is noted in its group's block where one is held,
  // so that the block never holds an older checksum than the page's note.
  mutable std::unordered_map<int64_t, std::unique_ptr<SpanBlock>> span_blocks_ GUARDED_BY(span_mu_);
  std::atomic<uint64_t> span_gen_{0};
  // Entries written since the span began (kEntryWritesBeforeMapping).
  std::atomic<uint32_t> span_entry_writes_{0};
  // span_sums_'s key of unit `unit` of `page`: the units of a page follow
  // each other, pages in order (a range of pages is a range of keys).
  int64_t span_key(int64_t page, uint32_t unit) const;
  void note_on_disk(int64_t page, const UnitSums& sums, uint64_t gen) const;
  // Notes, for every page of `page`'s group but those a truncate retired,
  // the current checksum its entry records: one read of the block for the
  // old checksums of all the group's writes in the span (a transaction's
  // pages, cached by SQLite since an earlier one, are written unread),
  // where each would read its own entry, which says the same. Nothing when
  // the group's block is held already (a page forgotten since, after a
  // failed write, reads its own entry).
  Status note_block_on_disk(int64_t page, uint64_t gen) const;
  // Entry writes begun and done (write_page): a block is noted only if it
  // was read while none was under way and none began since.
  std::atomic<uint64_t> entry_writes_begun_{0};
  std::atomic<uint64_t> entry_writes_done_{0};
  bool on_disk_sum(int64_t page, UnitSums& sums) const;
  void forget_on_disk(int64_t from_page, int64_t to_page = INT64_MAX) const;
  void new_span();
  // Reserves the blocks of page `page` (and some after it) before its
  // first write here, where reserve_first_; kNoSpace when the file system
  // has no room for the page.
  Status reserve(int64_t page);
  // Bytes of pages reserved at most in one call (reserve, and mapped_block
  // with an appended group's block).
  static constexpr off_t kMaxReservationBytes = off_t{1} << 20;
  // Raises end_pages_ to `pages` (never lowers it).
  void raise_end(int64_t pages);

  // Whether a page's blocks are reserved before it is written: not when a
  // page fits in one block of the file system (the write allocates it whole
  // or fails before changing a byte).
  const bool reserve_first_;
  // Pages whose blocks this object has reserved (reserve), so an
  // overwrite skips the call: on a file system that overwrites in
  // place it cannot run out of space (one that copies on write may need new
  // blocks, which fallocate never promised). Forgotten past this object's
  // truncate; a truncate through another descriptor leaves pages marked
  // whose blocks are gone, but such a page has no old content for a failed
  // write to tear. A page written before open is reserved once more.
  Mutex reserved_mu_;
  std::vector<bool> reserved_ GUARDED_BY(reserved_mu_);  // by page
};

}  // namespace pagefile
