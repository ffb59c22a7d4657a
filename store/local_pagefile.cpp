// LocalPagefile (store/local_pagefile.h): opening and creating a file, its
// header, its size and its page size. Its reads, writes, checksum blocks
// and locks are in the local_pagefile_*.cpp beside this one.

#include "store/local_pagefile.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/mutex.h"
#include "core/os_error.h"
#include "core/page_bounds.h"
#include "store/file_io.h"

namespace pagefile {

namespace {

// The bytes of the header that set_lock_level locks (LevelBytes, in
// local_pagefile.h), after os_unix.c's PENDING_BYTE, RESERVED_BYTE and
// SHARED range (one byte is enough for open-file-description locks).
// Format versions up to 3 have them in os_unix.c's order; from 4, SHARED
// comes first and PENDING beside it, so that a reader read-locks both in
// one call (the writer's PENDING keeps it out) and unlocks PENDING: two
// calls where three were (file_header.h).
constexpr LocalPagefile::LevelBytes kSplitLevelBytes{.pending = 2048, .reserved = 2049, .shared = 2050};
constexpr LocalPagefile::LevelBytes kAdjacentLevelBytes{.pending = 2049, .reserved = 2050, .shared = 2048};

// Write-locked while an empty file gets its header in place (open), and
// read-locked by an opener that finds the header short, to wait for it.
constexpr off_t kInitByte = 3072;

// The header a new file gets from `spec`. SQLite takes lock levels on its
// databases only: a journal or WAL (whose page size is final) and a
// server's share stay at the versions before 4, which lock levels the old
// way, so that a build before version 4 still reads them (a hot journal a
// newer process left beside a database of version 2, say).
FileHeader new_header(const LocalPagefile::OpenSpec& spec) {
  FileHeader header;
  header.page_size = spec.page_size != 0          ? spec.page_size
                     : spec.create_page_size != 0 ? spec.create_page_size
                                                  : kDefaultPageSize;
  const bool sectors = spec.sector_checksums && header.page_size > kChecksumSectorSize;
  if (spec.page_size_final || spec.sole_writer) {
    header.version = sectors ? kSectorChecksumFormatVersion : kPageChecksumFormatVersion;
  } else {
    header.version = sectors ? kAdjacentLocksSectorFormatVersion : kAdjacentLocksFormatVersion;
  }
  header.policy = spec.policy;
  header.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  return header;
}

// Holds kInitByte (write or read) for its life: header writes in place
// (a new file's, a page size change's, a torn header's repair) and the
// readers that must not meet them half done.
class InitByteLock {
 public:
  InitByteLock(int fd, bool write) : fd_(fd) {
    struct flock fl {};
    fl.l_type = write ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = kInitByte;
    fl.l_len = 1;
    while (::fcntl(fd_, F_OFD_SETLKW, &fl) != 0) {
      if (errno != EINTR) {
        error_ = errno;
        return;
      }
    }
    held_ = true;
  }
  ~InitByteLock() {
    if (!held_) return;
    struct flock fl {};
    fl.l_type = F_UNLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = kInitByte;
    fl.l_len = 1;
    (void)::fcntl(fd_, F_OFD_SETLK, &fl);
  }
  InitByteLock(const InitByteLock&) = delete;
  InitByteLock& operator=(const InitByteLock&) = delete;
  Status status(const std::string& name) const { return held_ ? Status::ok() : errno_status(error_, name, "lock"); }

 private:
  int fd_;
  bool held_ = false;
  int error_ = 0;
};

// Reads the header of the open file `fd` into `bytes`; returns the bytes
// read. An empty file (one made by touch, or by a program that makes the
// file before SQLite opens it, as the unix VFS allows) gets the header of a
// new file in place when `spec` creates, under a write lock of kInitByte
// that an opener finding the header short waits for, so no opener reads
// half a header. Every new file is made so (LocalPagefile::open creates it
// empty): an opener that does not create and finds it empty may have come
// between its creation and its creator's lock, and looks again a few times
// before it takes the file for one that has no header. `made_here` is the
// path of a file this open created: one whose header cannot be written (a
// full disk) is removed, so that a failed create leaves nothing.
Result<size_t> read_or_make_header(int fd, const std::string& name, const LocalPagefile::OpenSpec& spec,
                                   std::span<std::byte, kHeaderSize> bytes, bool& made,
                                   const std::filesystem::path* made_here) {
  // (A file this open created is empty, or being made by another opener
  // that found it so: what the read under the lock below says.)
  Result<size_t> got = made ? Result<size_t>(0) : pread_full(fd, bytes, 0, name);
  if (!got || *got == kHeaderSize) return got;
  const bool make = *got == 0 && spec.create && !spec.read_only;
  // (50 ms: a creator descheduled in between. A sole writer has no other
  // creator to wait for: a server's share left empty by a crash.)
  const int tries = spec.sole_writer ? 1 : 50;
  for (int attempt = 1;; ++attempt) {
    {
      InitByteLock lock(fd, make);
      if (Status s = lock.status(name); !s) return s;
      got = pread_full(fd, bytes, 0, name);
      if (got && *got == 0 && make) {
        // A creator whose header write failed removes the file (below): one
        // found so is not made here, where no one else would see it.
        struct stat st {};
        if (::fstat(fd, &st) != 0) return errno_status(errno, name, "stat");
        if (st.st_nlink == 0) {
          return Status::io_error(name, "was removed as it was being made (its creator could not write its header); "
                                        "open it again");
        }
        auto header = encode_header(new_header(spec));
        Status s = pwrite_full(fd, header, 0, name);
        if (!s) {
          (void)::ftruncate(fd, 0);  // empty as it was, not half a header
          if (made_here) (void)::unlink(made_here->c_str());
          return s;
        }
        made = true;  // durable at the first sync, as a new file
        std::copy(header.begin(), header.end(), bytes.begin());  // (what the file now holds)
        return kHeaderSize;
      }
    }
    if (!got || *got != 0 || make || attempt == tries) return got;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Decodes the whole header in `bytes` (of `got` bytes). A header being
// rewritten by another descriptor (set_empty_page_size) may be read half
// old, half new, and fail its checksum: it is read again for a while before
// it is called damaged. One a crash tore in that rewrite stays so: in a
// file that holds no page (a header and nothing more) each of its fields
// is old or new, and no page depends on which; it is taken (and `*torn`
// set, for the caller to make it whole).
Result<FileHeader> read_header_settled(int fd, const std::string& name, std::span<std::byte, kHeaderSize> bytes,
                                       size_t got = kHeaderSize, bool read_first = true, bool* torn = nullptr) {
  constexpr int kTries = 20;
  for (int attempt = 0;; ++attempt) {
    if (read_first || attempt > 0) {
      auto read = pread_full(fd, bytes, 0, name);
      if (!read) return read.status();
      got = *read;
    }
    Result<FileHeader> header = decode_header(std::span<const std::byte>(bytes).first(got), name);
    if (header || got < kHeaderSize) return header;
    if (attempt + 1 == kTries) {
      struct stat st {};
      if (!header.status().is(Code::kCorruption) || ::fstat(fd, &st) != 0 ||
          st.st_size != static_cast<off_t>(kHeaderSize)) {
        return header;
      }
      auto fields = decode_header_fields(bytes, name);
      if (!fields) return header;
      if (torn) *torn = true;
      return fields;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// File systems that overwrite a mapped page in place, so that a store into
// an allocated, populated block needs neither space nor a read. (On one
// that copies on write, a store after writeback needs new blocks, and a
// full disk would be a fault.)
bool mappable(const struct statfs& fs) {
  switch (static_cast<unsigned long>(fs.f_type)) {
    case EXT4_SUPER_MAGIC:  // ext2, ext3 and ext4 share it
    case XFS_SUPER_MAGIC:
    case TMPFS_MAGIC:
      return true;
    default:
      return false;
  }
}

}  // namespace

LocalPagefile::LocalPagefile(int fd, std::string name, const FileHeader& header, bool read_only,
                             bool reserve_first, bool checksums, bool sole_writer, bool map_entries, bool dsync,
                             bool header_may_change, bool page_size_final)
    : fd_(fd),
      sole_writer_(sole_writer),
      dsync_(dsync),
      name_(std::move(name)),
      header_(header),
      page_size_(header.page_size),
      header_may_change_(header_may_change),
      page_size_final_(page_size_final),
      read_only_(read_only),
      grouped_(has_checksum_blocks(header.version)),
      checked_(grouped_ && checksums),
      units_(has_sector_checksums(header.version) ? header.page_size / kChecksumSectorSize : 1),
      level_bytes_(has_adjacent_locks(header.version) ? kAdjacentLevelBytes : kSplitLevelBytes),
      sum_block_bytes_(static_cast<off_t>(kGroupPages * kEntryBytes * units_)),
      sums_(/*bounded=*/!sole_writer),
      map_entries_(map_entries && checked_ && !read_only),
      reserve_first_(reserve_first) {}

LocalPagefile::~LocalPagefile() {
  {
    MutexLock lock(maps_mu_);
    unmap_from(0);
  }
  ::close(fd_);
}

bool LocalPagefile::may_map(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && mappable(fs);
}

Result<std::unique_ptr<LocalPagefile>> LocalPagefile::open(const std::filesystem::path& path,
                                                           const OpenSpec& spec) {
  std::string name = path.string();
  if (spec.page_size != 0) {
    if (Status s = check_page_size(spec.page_size); !s) return s;
  }
  if (Status s = check_buffer_policy(spec.policy); !s) return s;
  if (spec.create && spec.read_only) {
    return Status::invalid_argument(name, "create and read_only together");
  }
  int flags = (spec.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC | (spec.dsync ? O_DSYNC : 0);

  int fd = -1;
  bool created = false;  // by this open: durable at its first sync
  // Two rounds at most: when create finds the file appeared meanwhile, open it.
  for (int round = 0; fd < 0 && round < 2; ++round) {
    if (!(spec.create && spec.exclusive)) {
      fd = ::open(path.c_str(), flags);
      if (fd >= 0) break;
      if (errno == ENOENT && !spec.create) {
        // (Said at once: asked before every new journal, which does not
        // exist, an errno_status formatted and dropped cost its commit 2%
        // of its user time.)
        return Status::not_found(name, "does not exist (create is false)");
      }
      if (errno != ENOENT) return errno_status(errno, name, "open");
    }
    // Made in place, empty: its header is written below (read_or_make_header)
    // under kInitByte, which an opener that finds the file short waits for.
    // (Made elsewhere and linked into place, the header would never be seen
    // short; but a link and an unlink more to a journal made at every
    // transaction cost its commit's directory sync a tenth of its time.)
    fd = ::open(path.c_str(), flags | O_CREAT | O_EXCL, spec.mode != 0 ? static_cast<mode_t>(spec.mode) : 0644);
    if (fd < 0 && errno == EEXIST && !spec.exclusive) continue;
    if (fd < 0 && errno == EEXIST) return Status::already_exists(name, "exists (create is exclusive)");
    if (fd < 0) return errno_status(errno, name, "create");
    created = true;
    // Exactly `mode`, whatever the umask (as robust_open sets a journal's).
    if (spec.mode != 0 && ::fchmod(fd, static_cast<mode_t>(spec.mode)) != 0) {
      Status s = errno_status(errno, name, "chmod");
      ::close(fd);
      (void)::unlink(path.c_str());
      return s;
    }
  }
  if (fd < 0) return Status::io_error(name, "open: file kept appearing and vanishing");

  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    Status s = errno_status(errno, name, "stat");
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(name, "is not a regular file");
  }
  std::array<std::byte, kHeaderSize> bytes{};
  Result<size_t> got = read_or_make_header(fd, name, spec, bytes, created, created ? &path : nullptr);
  if (!got) {
    ::close(fd);
    return got.status();
  }
  if (*got == 0) {
    // Empty, and not to be made here: no Pagefile yet. (A process killed
    // between the file's creation and its header's leaves such a file; an
    // opener that creates makes it whole.)
    ::close(fd);
    return Status::not_found(name, "is empty: no Pagefile header (create it to make one)");
  }
  bool torn = false;
  Result<FileHeader> header = read_header_settled(fd, name, bytes, *got, /*read_first=*/false, &torn);
  if (header && torn && !spec.read_only) {
    // Made whole, its checksum written again: under kInitByte, which a
    // page size change holds too, and only if it is still the torn header
    // of a file that holds no page (not a newer one).
    InitByteLock lock(fd, /*write=*/true);
    std::array<std::byte, kHeaderSize> now{};
    struct stat again {};
    auto reread = pread_full(fd, now, 0, name);
    if (lock.status(name) && reread && *reread == kHeaderSize && now == bytes && ::fstat(fd, &again) == 0 &&
        again.st_size == static_cast<off_t>(kHeaderSize)) {
      if (Status s = pwrite_full(fd, encode_header(*header), 0, name); !s) header = s;
    } else if (reread && now != bytes) {
      header = decode_header(now, name);  // rewritten meanwhile: that one
    }
  }
  if (!header) {
    ::close(fd);
    return header.status();
  }
  if (spec.page_size != 0 && spec.page_size != header->page_size) {
    ::close(fd);
    return Status::invalid_argument(
        name, fmt::format("has page size {}, opened with page size {}", header->page_size,
                          spec.page_size));
  }
  // A page of at most 4 KiB starts at a multiple of its size (after the
  // 4 KiB header), so if the file system's block is no smaller, the page
  // lies inside one block. (A larger page may straddle two.)
  struct statfs fs {};
  const bool fs_known = ::fstatfs(fd, &fs) == 0;
  bool reserve_first = header->page_size > kHeaderSize || !fs_known || fs.f_frsize < header->page_size;
  const bool may_map_blocks = fs_known && mappable(fs);
  auto file = std::unique_ptr<LocalPagefile>(
      new LocalPagefile(fd, name, *header, spec.read_only, reserve_first, spec.checksums, spec.sole_writer,
                        !spec.dsync && !spec.read_only && may_map_blocks, spec.dsync, !spec.fixed_page_size,
                        spec.page_size_final));
  if (spec.map_reads && may_map_blocks) file->read_map_ = std::make_unique<ReadMapping>(fd);
  // Until it is seen to hold a page, another descriptor may change its page size.
  file->unsettled_ = !spec.sole_writer && !spec.page_size_final && file->units_ == 1 && file->grouped_;
  // (A file whose header this open made held nothing before it: no page.
  // Its count is needed where it maps reads or may change its page size.)
  auto pages = created && !file->read_map_ && !file->unsettled_ ? Result<int64_t>(0) : file->size_pages();
  if (!pages) return pages.status();
  file->end_pages_ = *pages;
  file->dir_sync_due_ = created;
  if (created) {
    file->dir_ = dir_name(path.parent_path());
    file->dir_syncs_before_ = DirSyncs::instance().started(file->dir_);
  }
  return file;
}

bool LocalPagefile::is_foreign(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::array<std::byte, kHeaderSize> bytes{};
  Result<size_t> got = pread_full(fd, bytes, 0, path.string());
  ::close(fd);
  return got && *got > 0 && !has_header_magic(std::span(bytes).first(*got));
}

Status LocalPagefile::unlink(const std::filesystem::path& path, bool sync_dir, Unlinking which) {
  if (which == Unlinking::kPagefileOnly && is_foreign(path)) {
    return Status::invalid_argument(path.string(), "not a Pagefile: left as it is");
  }
  if (::unlink(path.c_str()) != 0) return errno_status(errno, path.string(), "unlink");
  return sync_dir ? fsync_dir(dir_name(path.parent_path())) : Status::ok();
}

Status LocalPagefile::check_writable(std::string_view operation) const {
  if (read_only_) return Status::read_only(name_, fmt::format("{}: file was opened read-only", operation));
  return Status::ok();
}

Result<int64_t> LocalPagefile::size_pages() const {
  if (!unsettled_.load(std::memory_order_acquire)) return counted_pages();
  // Another descriptor may give the file another page size while it holds
  // no page (set_empty_page_size) and write pages at once: the header and
  // the count are read again until the header is the same before and
  // after the count, so the pages are counted at the size they have.
  for (int round = 0; round < 1000; ++round) {
    std::array<std::byte, kHeaderSize> before{};
    std::array<std::byte, kHeaderSize> after{};
    auto header = read_header_settled(fd_, name_, before);
    if (!header) return header.status();
    if (header->page_size != page_size()) {
      if (!header_may_change_ || units_ != 1 || header->version != header_.version) {
        return Status::invalid_argument(
            name_, fmt::format("another descriptor gave it pages of {} bytes while it held none; this one reads "
                               "pages of {} (a client with a pool): open it again",
                               header->page_size, page_size()));
      }
      take_page_size(header->page_size);
    }
    off_t length = 0;
    auto pages = counted_pages(&length);
    if (!pages) return pages;
    auto again = pread_full(fd_, after, 0, name_);
    if (!again) return again.status();
    if (before == after) {
      // Longer than its header, it has held a page: its size is final.
      if (length > static_cast<off_t>(kHeaderSize)) unsettled_ = false;
      return pages;
    }
  }
  return Status::io_error(name_, "its header kept changing while its pages were counted");
}

Result<int64_t> LocalPagefile::counted_pages(off_t* length) const {
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return errno_status(errno, name_, "stat");
  if (length) *length = st.st_size;
  if (read_map_) read_map_->saw_length(st.st_size);
  if (st.st_size <= static_cast<off_t>(kHeaderSize)) return int64_t{0};
  off_t body = st.st_size - static_cast<off_t>(kHeaderSize);
  if (!grouped_) return static_cast<int64_t>(body / page_size());
  off_t last = body % group_bytes();  // the last group's checksum block and whole pages
  int64_t tail = last > sum_block_bytes_ ? static_cast<int64_t>((last - sum_block_bytes_) / page_size()) : 0;
  return static_cast<int64_t>(body / group_bytes()) * kGroupPages + tail;
}

Status LocalPagefile::set_empty_page_size(uint32_t page_size) {
  if (Status s = check_writable("page size change"); !s) return s;
  if (Status s = check_page_size(page_size); !s) return s.with_context(name_);
  if (page_size == this->page_size()) return Status::ok();
  if (units_ != 1 || sole_writer_ || page_size_final_) {
    return Status::invalid_argument(name_, "its page size is fixed (sector checksums, a server's share, or opened so)");
  }
  if (page_size > this->page_size() && page_size > kHeaderSize) {
    // (Whether a page's blocks are reserved before its write was chosen at
    // open for the page size then: SQLite only ever asks for a smaller one.)
    return Status::invalid_argument(name_, fmt::format("pages larger than {} bytes are chosen at creation", kHeaderSize));
  }
  off_t length = 0;
  auto pages = counted_pages(&length);
  if (!pages) return pages.status();
  if (*pages != 0) {
    return Status::invalid_argument(
        name_, fmt::format("holds {} pages of {} bytes: its page size is fixed", *pages, this->page_size()));
  }
  // Only a file that never held a page, which is a header and nothing
  // more: a page's write first writes its group's checksum block, and a
  // truncate keeps the first block (truncate), so a file longer than its
  // header has held one, and descriptors that counted it no longer read
  // the header.
  if (!grouped_ || length != static_cast<off_t>(kHeaderSize)) {
    return Status::invalid_argument(name_, "has held pages: its page size is fixed");
  }
  // (Under kInitByte: a torn header's repair at another open waits.)
  InitByteLock header_lock(fd_, /*write=*/true);
  if (Status s = header_lock.status(name_); !s) return s;
  std::array<std::byte, kHeaderSize> now{};
  auto recorded = read_header_settled(fd_, name_, now);
  if (!recorded) return recorded.status();
  FileHeader header = *recorded;
  header.page_size = page_size;
  if (Status s = pwrite_full(fd_, encode_header(header), 0, name_); !s) return s.with_context("page size change");
  // Durable before any page of the new size is written: after a power
  // failure the disk must not hold pages of one size under a header of
  // the other (a WAL's first checkpoint writes pages SQLite no longer
  // journals).
  if (Status s = sync_data("fdatasync of its new page size"); !s) return s;
  take_page_size(page_size);
  return Status::ok();
}

void LocalPagefile::take_page_size(uint32_t page_size) const {
  sums_.forget_from(0);  // (kept at the old geometry)
  page_size_ = page_size;
}

}  // namespace pagefile
