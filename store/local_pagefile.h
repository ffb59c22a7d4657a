// PFLI: the pages of one Pagefile in one local file.
//
// The file holds a header (store/file_header.h) and then page N at byte
// kHeaderSize + N * page_size. The size of the file in pages counts whole
// pages only: a page cut short by a crash or a full disk reads as beyond the
// end, never as half a page.
//
// The client uses this class for local Pagefiles and every page server uses
// it for its share of a remote one, so the two differ only in the path
// between them.
//
// Thread-safety: every method may be called from many threads at once.
// Concurrent writes of the same page land in an unspecified order; callers
// that need order (the client, the server) keep it themselves.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/mutex.h"
#include "store/file_header.h"
#include "pagefile/options.h"
#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pagefile {

class LocalPagefile {
 public:
  struct OpenSpec {
    uint32_t page_size = 0;  // 0: the recorded size, or the default on create
    bool create = false;
    bool exclusive = false;
    bool read_only = false;
    bool dsync = false;   // O_DSYNC: every write is durable when it returns
    BufferPolicy policy;  // recorded when the file is created
  };

  // Opens or creates the Pagefile at `path`. Creation is atomic: the header
  // is written and flushed in a temporary file that is then linked into
  // place, so no reader ever sees a file without a whole header. Errors as
  // Client::open.
  static Result<std::unique_ptr<LocalPagefile>> open(const std::filesystem::path& path,
                                                     const OpenSpec& spec);

  // Removes the Pagefile at `path`; kNotFound when there is none.
  static Status unlink(const std::filesystem::path& path);

  ~LocalPagefile();
  LocalPagefile(const LocalPagefile&) = delete;
  LocalPagefile& operator=(const LocalPagefile&) = delete;

  const std::string& name() const { return name_; }
  uint32_t page_size() const { return header_.page_size; }
  const BufferPolicy& recorded_policy() const { return header_.policy; }
  bool read_only() const { return read_only_; }

  // Reads page `page` into `out` (exactly one page). kBeyondEnd, with `out`
  // zeroed, for a page at or past the end.
  Result<PageRead> read_page(int64_t page, std::span<std::byte> out) const;

  // Writes page `page`. On failure (kNoSpace, kIOError...) the earlier
  // content of every page is kept.
  Status write_page(int64_t page, std::span<const std::byte> data);

  // Makes every write that returned before this call durable (fdatasync).
  Status sync();

  // Sets the size to `pages` pages.
  Status truncate(int64_t pages);

  // The number of whole pages in the file.
  Result<int64_t> size_pages() const;

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

 private:
  LocalPagefile(int fd, std::string name, const FileHeader& header, bool read_only, bool reserve_first);
  Status check_writable(std::string_view operation) const;

  const int fd_;
  const std::string name_;
  const FileHeader header_;
  const bool read_only_;

  Mutex level_mu_;
  LockLevel level_ GUARDED_BY(level_mu_) = LockLevel::kNone;

  // Whether a page's blocks are reserved before it is written: not when a
  // page fits in one block of the file system (the write allocates it whole
  // or fails before changing a byte).
  const bool reserve_first_;
  // Pages whose blocks this object has reserved (write_page's fallocate),
  // so an overwrite skips the call: on a file system that overwrites in
  // place it cannot run out of space (one that copies on write may need new
  // blocks, which fallocate never promised). Forgotten past this object's
  // truncate; a truncate through another descriptor leaves pages marked
  // whose blocks are gone, but such a page has no old content for a failed
  // write to tear. A page written before open is reserved once more.
  Mutex reserved_mu_;
  std::vector<bool> reserved_ GUARDED_BY(reserved_mu_);  // by page
};

}  // namespace pagefile
