#include "core/mutex.h"
#include "store/local_pagefile.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/little_endian.h"
#include "core/os_error.h"
#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "store/disk_faults.h"

namespace pagefile {

namespace {

// The byte of the header that Client::lock locks. It lies in the header, so
// locking it never conflicts with page I/O.
constexpr off_t kLockByte = 1024;

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

// Checksum blocks a file maps at most (the first 256 Ki pages, written in
// any order), and in all in this process (each is a mapping, of which a
// process may have some 65 000, shared with its host's own); past them
// entries are written.
constexpr size_t kMaxMappedGroups = 1024;
constexpr size_t kMaxMappedBlocksPerProcess = 16384;
// Entries a file that is not a sole writer's writes in a span of exclusion
// before it maps their blocks: a small transaction's few pages (and a
// rollback journal made and deleted by each) cost more to map than to
// write, since a block's mapping is an fallocate, an mmap, an madvise and
// later an munmap, and each span an fstat (check_maps). Four processes
// committing small transactions in rollback mode took 13% longer in one
// run when every entry was stored (bench/README.md, checksums.sh).
constexpr uint32_t kEntryWritesBeforeMapping = 32;
std::atomic<size_t> g_mapped_blocks{0};

// Pages below this have their reservation remembered (a bit each, at most
// 2 MiB); a page beyond it is reserved before every write.
constexpr size_t kMaxRememberedReservations = size_t{1} << 24;

// Bytes reserved at most in one call (LocalPagefile::reserve).
constexpr off_t kMaxReservationBytes = off_t{1} << 20;

// Whether `bytes` may be page `page` whose stored checksum is `sum` and
// whose bytes hash to `hash`: kNoChecksum stands for a page never written.
bool matches(uint64_t sum, uint64_t hash, std::span<const std::byte> bytes) {
  return sum == kNoChecksum ? all_zero(bytes) : sum == hash;
}

// The recorded checksum that `bytes` (hashing to `hash`) match: the
// current one, else the previous one; nullopt when neither.
std::optional<uint64_t> matched_sum(uint64_t current, uint64_t previous, uint64_t hash,
                                    std::span<const std::byte> bytes) {
  if (matches(current, hash, bytes)) return current;
  if (matches(previous, hash, bytes)) return previous;
  return std::nullopt;
}

// The errno a fault stands for (store/disk_faults.h).
int fault_errno(DiskFault fault) { return fault == DiskFault::kEnospc ? ENOSPC : EIO; }

// Entries stored into a mapped checksum block (LocalPagefile::write_entries).
struct EntryStore {
  std::byte* at;
  std::span<const std::byte> entries;
};

void store_entries(void* arg) {
  auto* store = static_cast<EntryStore*>(arg);
  // Each entry's old checksum before its new one, each in one aligned
  // store: a crash between them leaves (old, old), which the page on disk
  // still matches, never (new, older).
  // (An entry: the two values, LocalPagefile::kEntryBytes.)
  for (size_t e = 0; e < store->entries.size(); e += 2 * sizeof(uint64_t)) {
    auto word = [&](size_t offset) {
      return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(store->at + e + offset));
    };
    word(8).store(get_le<uint64_t>(store->entries, e + 8), std::memory_order_release);
    word(0).store(get_le<uint64_t>(store->entries, e), std::memory_order_release);
  }
}

// pread until `out` is full or the file ends; returns the bytes read.
// With `would_block`, the first call reads only what the page cache holds
// (RWF_NOWAIT) and sets *would_block, reading nothing, when the rest would
// wait for the disk.
// With `map`, bytes it has are copied out of it (ReadMapping::copy), but
// for a read that must not wait (a copy may wait on the disk).
Result<size_t> pread_full(int fd, std::span<std::byte> out, off_t offset, std::string_view what,
                          bool* would_block = nullptr, const ReadMapping* map = nullptr) {
  if (auto fault = DiskFaults::next(DiskOp::kRead)) {
    return errno_status(fault_errno(*fault), what, fmt::format("read at byte {}", offset));
  }
  if (map != nullptr && would_block == nullptr && map->copy(out, offset)) return out.size();
  size_t done = 0;
  if (would_block) {
    iovec io{out.data(), out.size()};
    ssize_t n = ::preadv2(fd, &io, 1, offset, RWF_NOWAIT);
    if (n < 0 && errno == EAGAIN) {
      *would_block = true;
      return size_t{0};
    }
    // The end of the file: nothing to read, with or without waiting (a
    // journal with no page yet, asked its length).
    if (n == 0) return size_t{0};
    // A short read or an error (a file system without RWF_NOWAIT among
    // them) goes on the ordinary way below.
    if (n > 0) done = static_cast<size_t>(n);
  }
  while (done < out.size()) {
    ssize_t n = ::pread(fd, out.data() + done, out.size() - done, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, what, fmt::format("read at byte {}", offset));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

Status pwrite_full(int fd, std::span<const std::byte> data, off_t offset, std::string_view what) {
  size_t done = 0;
  size_t first_call = data.size();  // what the first pwrite is given
  if (auto fault = DiskFaults::next(DiskOp::kWrite)) {
    if (*fault == DiskFault::kEio || *fault == DiskFault::kEnospc) {
      return errno_status(fault_errno(*fault), what, fmt::format("write at byte {}", offset));
    }
    first_call = data.size() / 2;
    if (*fault == DiskFault::kTornWrite) {
      // A disk writes whole sectors: what reaches it is whole sectors.
      first_call -= first_call % kTornWriteSector;
      if (first_call > 0) (void)::pwrite(fd, data.data(), first_call, offset);
      return errno_status(EIO, what, fmt::format("write at byte {}", offset));
    }
  }
  while (done < data.size()) {
    size_t want = done == 0 ? first_call : data.size() - done;
    ssize_t n = ::pwrite(fd, data.data() + done, want, offset + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status(errno, what, fmt::format("write at byte {}", offset));
    }
    done += static_cast<size_t>(n);
  }
  return Status::ok();
}

// The directory syncs of this process, by directory: each is numbered when
// it starts, and the highest number of one that completed is kept. A file
// linked into a directory before a sync started is durable, name and all,
// once that sync completes: its own directory sync may be skipped (as a
// new database's is by its journal's, in the same directory: what the unix
// VFS relies on, never syncing a database's directory itself).
class DirSyncs {
 public:
  static DirSyncs& instance() {
    static DirSyncs syncs;
    return syncs;
  }
  uint64_t start(const std::string& dir) {
    MutexLock lock(mu_);
    return ++by_dir_[dir].started;
  }
  void completed(const std::string& dir, uint64_t number) {
    MutexLock lock(mu_);
    auto& d = by_dir_[dir];
    d.completed = std::max(d.completed, number);
  }
  uint64_t started(const std::string& dir) {
    MutexLock lock(mu_);
    return by_dir_[dir].started;
  }
  // Whether a sync that started after `started` has completed.
  bool done_since(const std::string& dir, uint64_t started) {
    MutexLock lock(mu_);
    return by_dir_[dir].completed > started;
  }

 private:
  struct Dir {
    uint64_t started = 0;
    uint64_t completed = 0;
  };
  Mutex mu_;
  std::map<std::string, Dir> by_dir_ GUARDED_BY(mu_);
};

std::string dir_name(const std::filesystem::path& dir) { return dir.empty() ? std::string(".") : dir.string(); }

// `name`: dir_name's.
Status fsync_dir(const std::string& name) {
  uint64_t number = DirSyncs::instance().start(name);
  int fd = ::open(name.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_status(errno, name, "open directory");
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory; the link is then as durable
  // as they make it.
  if (rc != 0 && err != EINVAL) return errno_status(err, name, "fsync directory");
  DirSyncs::instance().completed(name, number);
  return Status::ok();
}

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

off_t LocalPagefile::page_offset(int64_t page) const {
  off_t at = static_cast<off_t>(kHeaderSize) + static_cast<off_t>(page) * page_size();
  return grouped_ ? at + (page / kGroupPages + 1) * sum_block_bytes_ : at;
}

off_t LocalPagefile::group_bytes() const {
  return sum_block_bytes_ + static_cast<off_t>(kGroupPages) * page_size();
}

off_t LocalPagefile::block_offset(int64_t group) const {
  return static_cast<off_t>(kHeaderSize) + group * group_bytes();
}

off_t LocalPagefile::entry_offset(int64_t page) const {
  return block_offset(page / kGroupPages) +
         static_cast<off_t>(page % kGroupPages) * static_cast<off_t>(kEntryBytes * units_);
}

Result<std::vector<std::byte>> LocalPagefile::read_group_block(int64_t page) const {
  std::vector<std::byte> block(static_cast<size_t>(sum_block_bytes_));
  // (Past the end of the file: zeros, no entries recorded.)
  auto got = pread_full(fd_, block, block_offset(page / kGroupPages), name_);
  if (!got) return got.status();
  return block;
}

Status LocalPagefile::read_block(int64_t page, Entries& entries) const {
  auto block = read_group_block(page);
  if (!block) return block.status();
  entries = entries_in(*block, page % kGroupPages);
  const int64_t first = page - page % kGroupPages;
  for (int64_t p = 0; p < kGroupPages; ++p) {
    UnitSums current;
    for (uint32_t u = 0; u < units_; ++u) current[u] = entry_in(*block, p, u);
    keep_sums(first + p, &current);
  }
  return Status::ok();
}

Status LocalPagefile::read_entries(int64_t page, Entries& entries) const {
  auto mine = std::span(entries.bytes).first(kEntryBytes * units_);
  std::fill(mine.begin(), mine.end(), std::byte{0});  // (what the file does not reach)
  auto read = pread_full(fd_, mine, entry_offset(page), name_);
  return read.status();
}

const ReadMapping* LocalPagefile::read_map() const {
  static const auto system_page = static_cast<uint32_t>(::getpagesize());
  return read_map_ && page_size() >= system_page ? read_map_.get() : nullptr;
}

void LocalPagefile::unit_sums(int64_t page, std::span<const std::byte> bytes, UnitSums& sums) const {
  // A sector's checksum is seeded with its number in the file, as a page's
  // is with the page's: one per page makes it the page's checksum.
  const size_t unit = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    sums[u] = page_checksum(bytes.subspan(size_t{u} * unit, unit), page * units_ + u);
  }
}

LocalPagefile::~LocalPagefile() {
  {
    MutexLock lock(maps_mu_);
    unmap_from(0);
  }
  ::close(fd_);
}

namespace {

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

bool LocalPagefile::may_map(int fd) {
  struct statfs fs {};
  return ::fstatfs(fd, &fs) == 0 && mappable(fs);
}

Result<std::byte*> LocalPagefile::mapped_block(int64_t group) {
  if (auto it = maps_.find(group); it != maps_.end()) return it->second;
  if (cannot_map_ || maps_.size() >= kMaxMappedGroups) return nullptr;
  // Every block is a mapping of its own, and a process may have some 65 000.
  if (g_mapped_blocks.fetch_add(1) >= kMaxMappedBlocksPerProcess) {
    g_mapped_blocks.fetch_sub(1);
    return nullptr;
  }
  auto give_back = [] { g_mapped_blocks.fetch_sub(1); };
  off_t at = block_offset(group);
  auto size = static_cast<size_t>(sum_block_bytes_);
  // Allocated first: a store into a hole of a full disk would fault. (This
  // extends the file over the block, as a pwrite of an entry in it would.)
  if (::fallocate(fd_, 0, at, sum_block_bytes_) != 0) {
    if (errno != EOPNOTSUPP && errno != ENOSYS) {
      Status s = errno_status(errno, name_, fmt::format("reserve space for the checksums of group {}", group));
      give_back();
      return s;
    }
    cannot_map_ = true;
    give_back();
    return nullptr;
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, at);
  if (map == MAP_FAILED) {
    // (EINVAL, as where the system's page is larger than a block: never.)
    if (errno == EINVAL) cannot_map_ = true;
    give_back();
    return nullptr;
  }
  // Read in now, so that a disk error reading the block is an error here
  // rather than a fault at a store. A kernel without MADV_POPULATE_WRITE
  // (before 5.14) cannot say: entries are then written, not stored.
  if (::madvise(map, size, MADV_POPULATE_WRITE) != 0) {
    int err = errno;
    ::munmap(map, size);
    give_back();
    if (err == EINVAL) {
      cannot_map_ = true;
      return nullptr;
    }
    return errno_status(err, name_, fmt::format("read the checksums of group {}", group));
  }
  return maps_[group] = static_cast<std::byte*>(map);
}

void LocalPagefile::unmap_from(off_t end) {
  for (auto it = maps_.begin(); it != maps_.end();) {
    if (block_offset(it->first) + sum_block_bytes_ > end) {
      ::munmap(it->second, static_cast<size_t>(sum_block_bytes_));
      g_mapped_blocks.fetch_sub(1);
      it = maps_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t LocalPagefile::mapped_blocks() {
  MutexLock lock(maps_mu_);
  return maps_.size();
}

bool LocalPagefile::check_maps() {
  const uint64_t gen = span_gen_.load();
  const uint32_t size = page_size();
  if (maps_gen_ == gen && maps_page_size_ == size) return true;
  if (maps_page_size_ != size) {
    unmap_from(0);
  } else if (!maps_.empty()) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return false;
    unmap_from(st.st_size);
  }
  maps_gen_ = gen;
  maps_page_size_ = size;
  return true;
}

Status LocalPagefile::write_entries(int64_t page, std::span<const std::byte> entries) {
  // (can_guard last: it asks the thread's signal mask, a system call.)
  if (map_entries_ &&
      (sole_writer_ || (writes_excluded_.load() && span_entry_writes_.fetch_add(1) >= kEntryWritesBeforeMapping)) &&
      can_guard()) {
    // Held across the store: a truncate unmaps under it.
    MutexLock lock(maps_mu_);
    if (!sole_writer_ && !check_maps()) return pwrite_full(fd_, entries, entry_offset(page), name_);
    auto block = mapped_block(page / kGroupPages);
    if (!block) return block.status();
    if (*block != nullptr) {
      // The seam, as for a pwrite (pwrite_full's own, where no block is
      // mapped): an entry is smaller than a sector, so a torn write of it
      // leaves nothing, and a short one all of it.
      if (auto fault = DiskFaults::next(DiskOp::kWrite); fault && *fault != DiskFault::kShortWrite) {
        return errno_status(fault_errno(*fault), name_, fmt::format("write at byte {}", entry_offset(page)));
      }
      EntryStore store{*block + static_cast<size_t>(page % kGroupPages) * kEntryBytes * units_, entries};
      if (run_guarded(store_entries, &store)) return Status::ok();
      // A fault (the block evicted and read back from a failing disk, or
      // cut behind this descriptor's back): the block is let go, and the
      // entries written, which says what is wrong.
      ::munmap(*block, static_cast<size_t>(sum_block_bytes_));
      g_mapped_blocks.fetch_sub(1);
      maps_.erase(page / kGroupPages);
    }
  }
  return pwrite_full(fd_, entries, entry_offset(page), name_);
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

Status LocalPagefile::unlink(const std::filesystem::path& path, bool sync_dir) {
  if (::unlink(path.c_str()) != 0) return errno_status(errno, path.string(), "unlink");
  return sync_dir ? fsync_dir(dir_name(path.parent_path())) : Status::ok();
}

Status LocalPagefile::check_writable(std::string_view operation) const {
  if (read_only_) return Status::read_only(name_, fmt::format("{}: file was opened read-only", operation));
  return Status::ok();
}

Result<PageRead> LocalPagefile::read_page(int64_t page, std::span<std::byte> out, uint64_t* checksum) const {
  return read_checked(page, out, checksum, /*trust_kept=*/true, nullptr);
}

std::optional<Result<PageRead>> LocalPagefile::read_page_now(int64_t page, std::span<std::byte> out) const {
  bool would_block = false;
  auto got = read_checked(page, out, nullptr, /*trust_kept=*/true, &would_block);
  if (would_block) return std::nullopt;
  return got;
}

Result<int64_t> LocalPagefile::read_pages(int64_t first, int64_t count, std::span<std::byte> out) const {
  const size_t size = page_size();
  if (count < 1 || static_cast<uint64_t>(count) > out.size() / size) {
    return Status::invalid_argument(name_, fmt::format("read of {} pages into {} bytes", count, out.size()));
  }
  if (Status s = check_page_access(first, size, page_size(), name_); !s) return s;
  // Only pages of one group lie one after another on the disk.
  if (grouped_) count = std::min(count, kGroupPages - first % kGroupPages);
  if (sole_writer_) {
    // Its kept checksums are the file's (trusted_sums): each is checked
    // under its page's stripe, as read_page does, so a write of the page
    // meanwhile never leaves one behind.
    for (int64_t i = 0; i < count; ++i) {
      auto got = read_page(first + i, out.subspan(static_cast<size_t>(i) * size, size));
      if (!got) return i > 0 ? Result<int64_t>(i) : Result<int64_t>(got.status());
      if (*got != PageRead::kData) return i;
    }
    return count;
  }
  Result<size_t> got =
      pread_full(fd_, out.first(static_cast<size_t>(count) * size), page_offset(first), name_, nullptr, read_map());
  if (!got) return got.status();
  const auto whole = static_cast<int64_t>(*got / size);  // (a tail cut short is no page)
  for (int64_t i = 0; i < whole; ++i) {
    // As read_attempt checks a page, but read without the page's stripe: a
    // write of this descriptor's meanwhile leaves bytes that match no
    // checksum, or a version once written, as a read just before the write
    // would; and what was read is not recorded as the page's checksum on
    // disk (note_on_disk), which the write may have changed since.
    Attempt a;
    auto bytes = out.subspan(static_cast<size_t>(i) * size, size);
    if (Status s = check_read(first + i, bytes, nullptr, /*trust_kept=*/true, /*use_cache=*/true, nullptr, a); !s) {
      return s;
    }
    if (!a.mismatch) continue;
    if (i > 0) return i;  // the pages before it; the caller asks for it alone
    // The first: read again alone, as any failing read is (read_checked).
    auto again = read_page(first, bytes);
    if (!again) return again.status();
    return *again == PageRead::kData ? 1 : 0;
  }
  return whole;
}

Status LocalPagefile::verify_page(int64_t page, std::span<std::byte> buffer) const {
  return read_checked(page, buffer, nullptr, /*trust_kept=*/false, nullptr).status();
}

Result<PageRead> LocalPagefile::read_checked(int64_t page, std::span<std::byte> out, uint64_t* checksum,
                                             bool trust_kept, bool* would_block) const {
  if (Status s = check_page_access(page, out.size(), page_size(), name_); !s) return s;
  std::unique_lock<std::mutex> whole;
  if (checked_) whole = std::unique_lock(stripe(page));
  // Another process may be writing the page (its entries first, then its
  // bytes): a reader can pair bytes and entries of different writes, or
  // meet bytes half copied, and a writer descheduled in the middle of its
  // copy leaves them so for a while. A damaged page fails the same way
  // for longer than kSettle; a write in progress changes or ends sooner.
  // (A writer in this process holds the page's stripe, held here.)
  using Clock = std::chrono::steady_clock;
  // The failing read since `since`; on the heap, made at a first mismatch
  // (an optional here costs every read the zeroing of its 400 bytes).
  std::unique_ptr<std::pair<UnitSums, Entries>> seen;
  Clock::time_point since;
  Clock::time_point start;  // of the first mismatch (the clock is read only then)
  // (Not zeroed: 400 bytes a read, for a rare mismatch, which copies only
  // the units_ entries read into `seen`.)
  Attempt outcome;
  for (int attempt = 0;; ++attempt) {
    Status s = read_attempt(page, out, checksum, trust_kept, attempt == 0 ? would_block : nullptr,
                            /*use_cache=*/attempt == 0 && trust_kept, outcome);
    if (!s) return s;
    if (!outcome.mismatch) return outcome.read;
    if (sole_writer_) return outcome.status;
    const size_t entry_bytes = kEntryBytes * units_;
    bool same = seen && std::equal(outcome.hash.begin(), outcome.hash.begin() + units_, seen->first.begin()) &&
                std::memcmp(outcome.entries.bytes.data(), seen->second.bytes.data(), entry_bytes) == 0;
    Clock::time_point t = Clock::now();
    if (attempt == 0) start = t;
    if (!same) {
      if (!seen) seen = std::make_unique<std::pair<UnitSums, Entries>>();
      std::copy_n(outcome.hash.begin(), units_, seen->first.begin());
      std::memcpy(seen->second.bytes.data(), outcome.entries.bytes.data(), entry_bytes);
      since = t;
    } else if (t - since >= kSettle) {
      return outcome.status;
    }
    if (t - start >= kRereadFor) return outcome.status;
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status LocalPagefile::read_attempt(int64_t page, std::span<std::byte> out, uint64_t* checksum, bool trust_kept,
                                   bool* would_block, bool use_cache, Attempt& a) const {
  a.read = PageRead::kData;
  a.mismatch = false;
  const uint64_t gen = span_gen_.load();  // (before the read: see span_sums_)
  if (checked_ && trust_kept) sums_.prefetch(static_cast<size_t>(page) * units_);
  Result<size_t> got = pread_full(fd_, out, page_offset(page), name_, would_block, use_cache ? read_map() : nullptr);
  if (!got) return got.status();
  if (would_block && *would_block) return Status::ok();
  if (*got < out.size()) {
    // Only whole pages exist: a tail cut short by a crash is not a page.
    std::memset(out.data(), 0, out.size());
    if (checksum) *checksum = page_checksum(out, page);
    a.read = PageRead::kBeyondEnd;
    return Status::ok();
  }
  return check_read(page, out, checksum, trust_kept, use_cache, &gen, a);
}

Status LocalPagefile::check_read(int64_t page, std::span<std::byte> out, uint64_t* checksum, bool trust_kept,
                                 bool use_cache, const uint64_t* gen, Attempt& a) const {
  if (!checked_) {
    if (checksum) *checksum = page_checksum(out, page);
    return Status::ok();
  }
  unit_sums(page, out, a.hash);
  if (checksum) *checksum = units_ == 1 ? a.hash[0] : page_checksum(out, page);
  UnitSums kept;
  if (trust_kept && kept_sums(page, kept) && std::equal(a.hash.begin(), a.hash.begin() + units_, kept.begin())) {
    if (gen) note_on_disk(page, a.hash, *gen);
    return Status::ok();
  }
  // A reader that is not the sole writer keeps the checksums of each block
  // it reads (read_block, kept_sums above): one read of a block serves its
  // 256 pages, with no lock. The file may have changed since, through
  // another descriptor; a page that matches no kept checksum is checked
  // against the block read again, then against its entries on disk
  // (read_checked's next attempt), so a stale checksum costs a read, never
  // a false error, and a page is accepted only in a version once written.
  Status s = use_cache && !sole_writer_ ? read_block(page, a.entries) : read_entries(page, a.entries);
  if (!s) return s;
  bool all_current = true;
  const size_t unit = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    auto bytes = out.subspan(size_t{u} * unit, unit);
    if (!matched_sum(a.entries.current(u), a.entries.previous(u), a.hash[u], bytes)) {
      a.mismatch = true;
      a.status = checksum_mismatch(name_, page, units_ == 1 ? "on disk" : fmt::format("on disk, in its sector {} of {}", u, units_));
      return Status::ok();
    }
    all_current = all_current && a.hash[u] == a.entries.current(u);
  }
  if (all_current) keep_sums(page, &a.hash);
  if (gen) note_on_disk(page, a.hash, *gen);
  return Status::ok();
}

int64_t LocalPagefile::span_key(int64_t page, uint32_t unit) const {
  // (Pages past the last one any file can hold key nothing: forget_on_disk's end.)
  return page > kMaxPageNumber ? INT64_MAX : page * units_ + unit;
}

void LocalPagefile::note_on_disk(int64_t page, const UnitSums& sums, uint64_t gen) const {
  if (!writes_excluded_.load()) return;
  MutexLock lock(span_mu_);
  if (gen != span_gen_.load()) return;
  const bool in_sums = span_sums_.contains(span_key(page, 0));
  if (units_ == 1 && !in_sums) {
    // (A group's notes, once it has some, stay in its array until the span
    // ends: the page has no note in span_sums_ to be looked up before it.)
    const int64_t group = page / kGroupPages;
    const auto at = static_cast<size_t>(page % kGroupPages);
    SpanBlock* held = nullptr;
    if (auto notes = span_notes_.find(group); notes != span_notes_.end()) {
      held = notes->second.get();
    } else if (span_notes_.size() < kMaxSpanBlocks) {
      held = span_notes_.emplace(group, std::unique_ptr<SpanBlock>(new SpanBlock)).first->second.get();
    } else if (auto block = span_blocks_.find(group); block != span_blocks_.end()) {
      // Past the arrays' bound, where its group's block is held, the note
      // goes there: the block is looked up for the page, and must not keep
      // an older checksum than the page's last note (the write that read it).
      held = block->second.get();
    }
    if (held != nullptr) {
      held->sums[at] = sums[0];
      held->known.set(at);
      return;
    }
  }
  if (!in_sums && span_sums_.size() + units_ > kMaxSpanSums) return;
  for (uint32_t u = 0; u < units_; ++u) span_sums_[span_key(page, u)] = sums[u];
}

Status LocalPagefile::note_block_on_disk(int64_t page, uint64_t gen) const {
  {
    // (Past the bound, each write reads its own entry, as without blocks.)
    MutexLock lock(span_mu_);
    if (span_blocks_.size() >= kMaxSpanBlocks || span_blocks_.contains(page / kGroupPages)) return Status::ok();
  }
  // Entry writes of other pages (other threads on this descriptor) in
  // flight, or begun before the block is noted: it may hold entries they
  // replace, and their own notes may be refused (the bound, a new span).
  const uint64_t begun = entry_writes_begun_.load();
  if (begun != entry_writes_done_.load()) return Status::ok();
  auto block = read_group_block(page);
  if (!block) return block.status();
  auto noted = std::make_unique<SpanBlock>();
  for (int64_t p = 0; p < kGroupPages; ++p) {
    const uint64_t current = entry_in(*block, p, 0);
    noted->sums[static_cast<size_t>(p)] = current;
    // (Retired by a truncate that failed: its bytes say.)
    noted->known[static_cast<size_t>(p)] = !Entries::is_retired(current, entry_in(*block, p, 0, true));
  }
  MutexLock lock(span_mu_);
  if (gen != span_gen_.load() || begun != entry_writes_begun_.load()) return Status::ok();
  // (A page noted keeps its note: it is looked up first.)
  span_blocks_.try_emplace(page / kGroupPages, std::move(noted));
  return Status::ok();
}

bool LocalPagefile::on_disk_sum(int64_t page, UnitSums& sums) const {
  if (!writes_excluded_.load()) return false;
  MutexLock lock(span_mu_);
  // Its own note (in its group's array, else in span_sums_), else its
  // group's block.
  const auto at = static_cast<size_t>(page % kGroupPages);
  auto known = [&](const std::unordered_map<int64_t, std::unique_ptr<SpanBlock>>& held) {
    auto found = held.find(page / kGroupPages);
    if (found == held.end() || !found->second->known[at]) return false;
    sums[0] = found->second->sums[at];
    return true;
  };
  if (units_ == 1 && known(span_notes_)) return true;
  for (uint32_t u = 0; u < units_; ++u) {
    auto found = span_sums_.find(span_key(page, u));
    if (found == span_sums_.end()) return units_ == 1 && known(span_blocks_);
    sums[u] = found->second;
  }
  return true;
}

void LocalPagefile::forget_on_disk(int64_t from_page, int64_t to_page) const {
  MutexLock lock(span_mu_);
  for (auto* held : {&span_notes_, &span_blocks_}) {
    for (auto& [group, block] : *held) {
      const int64_t first = group * kGroupPages;
      for (int64_t p = std::max(from_page, first); p < std::min(to_page, first + kGroupPages); ++p) {
        block->known.reset(static_cast<size_t>(p - first));
      }
    }
  }
  if (span_sums_.empty()) return;
  const int64_t from = span_key(from_page, 0);
  const int64_t to = span_key(to_page, 0);
  std::erase_if(span_sums_, [&](const auto& kv) { return kv.first >= from && kv.first < to; });
}

void LocalPagefile::new_span() {
  MutexLock lock(span_mu_);
  ++span_gen_;
  span_entry_writes_ = 0;
  span_sums_.clear();
  span_notes_.clear();
  span_blocks_.clear();
}

bool LocalPagefile::is_suspect(int64_t page) const {
  if (suspect_count_.load(std::memory_order_relaxed) == 0) return false;
  MutexLock lock(suspects_mu_);
  return suspects_.contains(page);
}

void LocalPagefile::set_suspect(int64_t page, bool suspect) {
  if (!suspect && suspect_count_.load(std::memory_order_relaxed) == 0) return;
  MutexLock lock(suspects_mu_);
  if (suspect) {
    suspects_.insert(page);
  } else {
    suspects_.erase(page);
  }
  suspect_count_ = suspects_.size();
}

Status LocalPagefile::checksums_on_disk(int64_t page, UnitSums& sums) const {
  std::vector<std::byte> bytes(page_size());
  // (Bytes past the end of the file stay zeros, as a hole reads.)
  if (auto got = pread_full(fd_, bytes, page_offset(page), name_); !got) return got.status();
  Entries entries;
  if (Status s = read_entries(page, entries); !s) return s;
  UnitSums hash;
  unit_sums(page, bytes, hash);
  const size_t unit_bytes = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    // The slot this unit's bytes match; else (a unit damaged already) the
    // current one, as any write takes.
    auto unit = std::span(bytes).subspan(size_t{u} * unit_bytes, unit_bytes);
    sums[u] = matched_sum(entries.current(u), entries.previous(u), hash[u], unit).value_or(entries.current(u));
  }
  return Status::ok();
}

bool LocalPagefile::trusted_sums(int64_t page, UnitSums& sums) const {
  return sole_writer_ && kept_sums(page, sums);
}

bool LocalPagefile::kept_sums(int64_t page, UnitSums& sums) const {
  auto first = static_cast<size_t>(page) * units_;
  for (uint32_t u = 0; u < units_; ++u) {
    sums[u] = sums_.get(first + u);
    if (sums[u] == kNoChecksum) return false;
  }
  return true;
}

void LocalPagefile::keep_sums(int64_t page, const UnitSums* sums) const {
  auto first = static_cast<size_t>(page) * units_;
  for (uint32_t u = 0; u < units_; ++u) sums_.set(first + u, sums ? (*sums)[u] : kNoChecksum);
}

Status LocalPagefile::write_page(int64_t page, std::span<const std::byte> data, uint64_t checksum,
                                 ChangedBytes changed) {
  if (Status s = check_writable("write"); !s) return s;
  if (Status s = check_page_access(page, data.size(), page_size(), name_); !s) return s;
  off_t offset = page_offset(page);
  // Reserve the blocks first: when the disk is full this fails before a
  // byte of the page is written, so no page is left half old, half new.
  if (Status s = reserve(page); !s) return s;
  // (The context is formatted only for an error: this runs once per page.)
  auto page_context = [page](Status s) { return s ? s : s.with_context(fmt::format("page {}", page)); };
  if (!checked_) {
    Status s = page_context(pwrite_full(fd_, data, offset, name_));
    if (s) raise_end(page + 1);
    return s;
  }
  sums_.prefetch(static_cast<size_t>(page) * units_);  // (kept below, after the hash)
  UnitSums sums;
  if (units_ == 1 && checksum != kNoChecksum) {
    sums[0] = checksum;
  } else {
    unit_sums(page, data, sums);
  }
  // The entries first, each old checksum kept beside the new one: until
  // the page itself is written (or if its write fails, or tears between
  // sectors), the old page, or each old sector, still matches.
  std::lock_guard whole(stripe(page));
  const uint64_t gen = span_gen_.load();  // (before the write: see span_sums_)
  Entries entries;
  UnitSums before{};
  // before[] are the checksums of the page's bytes on disk, exactly (read
  // or written here while no one else writes: on_disk_sum).
  bool exact_before = false;
  // A page past the end has no old content for a cut write to leave, so
  // no old checksum is worth reading.
  bool appended = appends(page);
  if (is_suspect(page)) {
    if (Status s = checksums_on_disk(page, before); !s) return page_context(s);
  } else if (trusted_sums(page, before) || appended) {
    // Nothing to read: before[] holds the kept checksums, which are the
    // file's, or the page is new and has no old bytes to keep.
  } else if (on_disk_sum(page, before)) {
    exact_before = true;
  } else if (!(units_ == 1 && writes_excluded_.load() && note_block_on_disk(page, gen) && on_disk_sum(page, before))) {
    if (Status s = read_entries(page, entries); !s) return page_context(s);
    bool retired = false;
    for (uint32_t u = 0; u < units_; ++u) {
      before[u] = entries.current(u);
      retired = retired || entries.retired(u);
    }
    // Cut by a truncate that failed (retire_entries), the page may still
    // hold the bytes its previous checksum matches, or be a hole since: the
    // bytes say which (rare: this reads the page).
    if (retired) {
      if (Status s = checksums_on_disk(page, before); !s) return page_context(s);
    }
  }
  // The units whose bytes are written, [first, last): all, but where the
  // caller says which bytes changed and the disk's checksums say that every
  // other unit holds the bytes the caller passed (it read them, and no one
  // else wrote since), only those that hold changed bytes. A WAL commit
  // changes one or two sectors of its last 16 KiB page: the others are not
  // written again, and a sync has a quarter to a half of the blocks to
  // write. (Only then: the disk keeps what it has in the others, so bytes
  // that differ from it would be lost, and a unit cut short by a file's
  // end would make the page not exist: the exact sums exist only for a
  // page read or written whole under exclusion, which no one truncates.)
  // Every unit's entry is written all the same (one write, in one block):
  // a unit whose bytes match only its previous checksum (another's write
  // cut after its entries) gets the pair (its checksum, its checksum), so
  // that a later write of it, torn, still leaves bytes that match.
  const size_t unit_bytes = data.size() / units_;
  uint32_t first = 0;
  uint32_t last = units_;
  if (exact_before && units_ > 1 && changed.size > 0 && changed.offset + changed.size <= data.size()) {
    const auto from = static_cast<uint32_t>(changed.offset / unit_bytes);
    const auto to = static_cast<uint32_t>((changed.offset + changed.size + unit_bytes - 1) / unit_bytes);
    bool others_as_on_disk = true;
    for (uint32_t u = 0; u < units_; ++u) {
      if ((u < from || u >= to) && sums[u] != before[u]) others_as_on_disk = false;
    }
    if (others_as_on_disk) {
      first = from;
      last = to;
    }
  }
  for (uint32_t u = 0; u < units_; ++u) entries.set(u, sums[u], before[u]);
  keep_sums(page, nullptr);  // (until the page is written: a failure leaves the old one)
  entry_writes_begun_.fetch_add(1);
  Status entry_written = write_entries(page, std::span(entries.bytes).first(kEntryBytes * units_));
  entry_writes_done_.fetch_add(1);
  if (!entry_written) {
    set_suspect(page, true);
    forget_on_disk(page, page + 1);
    return entry_written.with_context(fmt::format("checksum of page {}", page));
  }
  Status s = page_context(pwrite_full(fd_, data.subspan(first * unit_bytes, (last - first) * unit_bytes),
                                      offset + static_cast<off_t>(first * unit_bytes), name_));
  set_suspect(page, !s);
  if (!s) {
    forget_on_disk(page, page + 1);
    return s;
  }
  keep_sums(page, &sums);
  note_on_disk(page, sums, gen);
  raise_end(page + 1);
  return s;
}

void LocalPagefile::raise_end(int64_t pages) {
  int64_t end = end_pages_.load();
  while (pages > end && !end_pages_.compare_exchange_weak(end, pages)) {
  }
}

Status LocalPagefile::reserve(int64_t page) {
  if (!reserve_first_) return Status::ok();
  auto index = static_cast<size_t>(page);
  {
    MutexLock lock(reserved_mu_);
    if (index < reserved_.size() && reserved_[index]) return Status::ok();
  }
  // A page appended at the end: the pages after it too, as many as come
  // before it up to 1 MiB and no further than its group (a checksum block
  // follows). Reserved one by one, a file growing a page at a time (a WAL)
  // gets its pages in blocks scattered over the disk, and each sync writes
  // each page with a request of its own. (Blocks reserved past the end
  // stay the file's until a truncate; doubling keeps them under the
  // file's size. "At the end" is within a run of the end this object
  // knows, which lags behind other descriptors' appends. A page written
  // anywhere else, a sparse file's, is reserved alone.)
  int64_t end = page + 1;  // (pages [page, end))
  const int64_t most = std::max<int64_t>(1, kMaxReservationBytes / page_size());
  if (const int64_t known = end_pages_.load(); page >= known && page - known < most) {
    const int64_t group_end = grouped_ ? (page / kGroupPages + 1) * kGroupPages : INT64_MAX;
    end = std::min(page + std::clamp<int64_t>(page, 1, most), group_end);
  }
  const off_t offset = page_offset(page);
  int rc = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, offset, page_offset(end - 1) + page_size() - offset);
  if (rc != 0 && end > page + 1) {
    // Room for this page alone, perhaps (a full disk, a quota): the page's
    // own reservation says.
    end = page + 1;
    rc = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, offset, page_size());
  }
  if (rc != 0) {
    if (errno == EOPNOTSUPP || errno == ENOSYS) return Status::ok();
    return errno_status(errno, name_, fmt::format("reserve space for page {}", page));
  }
  MutexLock lock(reserved_mu_);
  // (Beyond kMaxRememberedReservations a bit per page costs too much.)
  auto last = std::min(static_cast<size_t>(end), kMaxRememberedReservations);
  if (last > reserved_.size()) reserved_.resize(last);
  for (size_t i = index; i < last; ++i) reserved_[i] = true;
  return Status::ok();
}

Status LocalPagefile::sync_data(std::string_view what) const {
  if (auto fault = DiskFaults::next(DiskOp::kSync)) return errno_status(fault_errno(*fault), name_, what);
  if (::fdatasync(fd_) != 0) return errno_status(errno, name_, what);
  return Status::ok();
}

Status LocalPagefile::sync() {
  if (Status s = sync_data("fdatasync"); !s) return s;
  // A file this object created: its name too, once, unless a sync of its
  // directory made since did it.
  if (!dir_sync_due_.exchange(false)) return Status::ok();
  if (!DirSyncs::instance().done_since(dir_, dir_syncs_before_)) {
    if (Status s = fsync_dir(dir_); !s) {
      dir_sync_due_ = true;
      return s;
    }
  }
  return Status::ok();
}

Status LocalPagefile::retire_entries(off_t at, size_t bytes) {
  // Each entry's checksum becomes its previous one, and "never written"
  // its current: a page still there (the cut fails, or a crash comes
  // first) matches its previous checksum, and one that comes back as a
  // hole matches "never written". Zeros alone would fail the first.
  std::vector<std::byte> entries(bytes);
  if (auto got = pread_full(fd_, entries, at, name_); !got) return got.status();
  for (size_t e = 0; e + kEntryBytes <= bytes; e += kEntryBytes) {
    auto current = get_le<uint64_t>(entries, e);
    if (current == kNoChecksum) continue;  // never written, or retired already
    put_le<uint64_t>(entries, e, kNoChecksum);
    put_le<uint64_t>(entries, e + 8, current);
  }
  return pwrite_full(fd_, entries, at, name_);
}

Status LocalPagefile::truncate(int64_t pages) {
  if (Status s = check_writable("truncate"); !s) return s;
  if (pages != 0) {
    if (Status s = check_page_number(pages - 1, name_); !s) return s;
  }
  {
    // (Callers order a truncate against writes of the same object: the
    // client and the server both do.)
    MutexLock lock(reserved_mu_);
    if (static_cast<size_t>(pages) < reserved_.size()) reserved_.resize(static_cast<size_t>(pages));
  }
  sums_.forget_from(static_cast<size_t>(pages) * units_);
  forget_on_disk(pages);  // (cut, or kept with retired entries by a cut that fails)
  off_t end = pages == 0 ? static_cast<off_t>(kHeaderSize) : page_offset(pages - 1) + page_size();
  // A file whose page size may still change (set_empty_page_size) keeps its
  // first checksum block, its entries retired below, once it has held a page: its
  // length then says so to every descriptor.
  bool keep_block = pages == 0 && grouped_ && units_ == 1 && !sole_writer_ && !page_size_final_;
  if (keep_block) {
    // (Counted for the file's length: at most the header and that block.)
    if (auto counted = counted_pages(&end); !counted) return counted.status().with_context("truncate to 0 pages");
    end = std::min<off_t>(end, static_cast<off_t>(kHeaderSize) + sum_block_bytes_);
  }
  // Held until the file is cut: a store past the end would fault, and a
  // write meanwhile must not map a block again before it is gone.
  MutexLock maps(maps_mu_);
  unmap_from(end);
  if (keep_block && end > static_cast<off_t>(kHeaderSize)) {
    if (Status s = retire_entries(static_cast<off_t>(kHeaderSize), static_cast<size_t>(end) - kHeaderSize); !s) {
      return s.with_context("truncate to 0 pages");
    }
  } else if (grouped_ && pages % kGroupPages != 0) {
    // The entries of the pages cut from the last group go first: pages
    // that come back later as holes must not meet their old checksums.
    size_t bytes = static_cast<size_t>(kGroupPages - pages % kGroupPages) * kEntryBytes * units_;
    if (Status s = retire_entries(entry_offset(pages), bytes); !s) {
      return s.with_context(fmt::format("truncate to {} pages", pages));
    }
  }
  if (read_map_) read_map_->will_cut(end);
  auto fault = DiskFaults::next(DiskOp::kTruncate);
  if (fault || ::ftruncate(fd_, end) != 0) {
    return errno_status(fault ? fault_errno(*fault) : errno, name_, fmt::format("truncate to {} pages", pages));
  }
  end_pages_ = pages;
  // (Again: a read meanwhile may have noted a page now cut. One that has not
  // noted yet reads another span_gen_ when it does, and notes nothing.)
  span_gen_.fetch_add(1);
  forget_on_disk(pages);
  {
    // Only now: a page kept by a failed truncate keeps its mark.
    MutexLock lock(suspects_mu_);
    suspects_.erase(suspects_.lower_bound(pages), suspects_.end());
    suspect_count_ = suspects_.size();
  }
  return Status::ok();
}

Result<size_t> LocalPagefile::read_part(int64_t page, size_t offset, std::span<std::byte> out) const {
  if (page < 0 || offset + out.size() > page_size()) {
    return Status::invalid_argument(name_, fmt::format("part of page {}: {} bytes at {} cross its end", page,
                                                       out.size(), offset));
  }
  return pread_full(fd_, out, page_offset(page) + static_cast<off_t>(offset), name_, nullptr, read_map());
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

Status LocalPagefile::lock(LockMode mode, LockWait wait) {
  if (mode == LockMode::kExclusive) {
    if (Status s = check_writable("exclusive lock"); !s) return s;
  }
  struct flock fl {};
  fl.l_type = mode == LockMode::kShared ? F_RDLCK : F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = kLockByte;
  fl.l_len = 1;
  int cmd = wait == LockWait::kBlock ? F_OFD_SETLKW : F_OFD_SETLK;
  while (::fcntl(fd_, cmd, &fl) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) {
      return Status::busy(name_, fmt::format("{} lock is held by another descriptor or process",
                                             mode == LockMode::kShared ? "a conflicting" : "a"));
    }
    return errno_status(errno, name_, "lock");
  }
  return Status::ok();
}

Status LocalPagefile::unlock() {
  struct flock fl {};
  fl.l_type = F_UNLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = kLockByte;
  fl.l_len = 1;
  if (::fcntl(fd_, F_OFD_SETLK, &fl) != 0) return errno_status(errno, name_, "unlock");
  return Status::ok();
}

bool LocalPagefile::appends(int64_t page) {
  if (sole_writer_) return page >= end_pages_.load();
  if (!writes_excluded_.load() || page < end_pages_.load()) return false;
  if (!end_counted_.load()) {
    // Another descriptor may have grown the file before this one's lock:
    // counted once for the lock's time, and raised (never lowered) to it.
    // (Higher than the file's end, as after another's truncate, only
    // costs reads: lower would take a page that is there for one that is
    // not.)
    MutexLock lock(end_mu_);
    if (!end_counted_.load()) {
      auto pages = size_pages();
      if (!pages) return false;  // (its entries are read instead)
      raise_end(*pages);
      end_counted_ = true;
    }
  }
  return page >= end_pages_.load();
}

Status LocalPagefile::set_lock_level(LockLevel level) {
  MutexLock guard(level_mu_);
  Status s = change_lock_level(level);
  update_exclusion();
  return s;
}

void LocalPagefile::exclude_other_writers(bool excluded) {
  MutexLock guard(level_mu_);
  if (excluded && writes_excluded_.load()) {
    // Said again with no word between (one missed): what was noted, and
    // the end counted, before it may be another's since.
    end_counted_ = false;
    new_span();
  }
  excluded_by_caller_ = excluded;
  update_exclusion();
}

void LocalPagefile::update_exclusion() {
  const bool excluded = writes_excluded_.load();
  // Others' writes are kept out from a RESERVED lock granted as asked (only
  // SQLite's rollback mode asks for it: there every writer takes RESERVED)
  // or an EXCLUSIVE one granted (no one else holds even SHARED), until the
  // level falls below RESERVED. Not by the RESERVED byte alone: in WAL mode
  // with locking_mode=EXCLUSIVE a refused EXCLUSIVE leaves it held (PENDING)
  // while others, at SHARED, checkpoint into the file.
  excluded_by_lock_ = level_ == LockLevel::kExclusive || level_ == LockLevel::kReserved ||
                      (level_ == LockLevel::kPending && excluded_by_lock_);
  bool now = excluded_by_caller_ || excluded_by_lock_;
  if (now != excluded) {
    if (now) end_counted_ = false;
    new_span();
    writes_excluded_ = now;
  }
}

Status LocalPagefile::change_lock_level(LockLevel level) {
  const LockLevel held = level_;
  if (level == held) return Status::ok();
  auto invalid = [&](std::string_view why) {
    return Status::invalid_argument(
        name_, fmt::format("lock level {} from {}: {}", static_cast<int>(level), static_cast<int>(held), why));
  };
  auto busy = [&](std::string_view why) { return Status::busy(name_, why); };
  auto set = [&](short type, off_t start, off_t len) { return try_range_lock(fd_, type, start, len, name_); };
  const LevelBytes& at = level_bytes_;
  // (PENDING and RESERVED are side by side in both layouts, all three too.)
  const off_t pending_and_reserved = std::min(at.pending, at.reserved);
  const off_t all = std::min({at.pending, at.reserved, at.shared});

  if (level < held) {
    if (level == LockLevel::kShared) {
      // Turning the write lock on SHARED into a read lock is atomic.
      auto got = set(F_RDLCK, at.shared, 1);
      if (!got) return got.status();
      if (!*got) return Status::io_error(name_, "lock: downgrade to SHARED refused");
      auto freed = set(F_UNLCK, pending_and_reserved, 2);
      if (!freed) return freed.status();
    } else if (level == LockLevel::kNone) {
      auto freed = set(F_UNLCK, all, 3);
      if (!freed) return freed.status();
    } else {
      return invalid("lowering goes to SHARED or NONE only");
    }
    level_ = level;
    return Status::ok();
  }

  if (level == LockLevel::kPending) return invalid("PENDING is never asked for");
  if (held == LockLevel::kNone && level != LockLevel::kShared) return invalid("SHARED must be held first");
  if (level == LockLevel::kReserved && held != LockLevel::kShared) return invalid("SHARED must be held first");
  if (level > LockLevel::kShared && read_only_) return Status::read_only(name_, "lock: file was opened read-only");

  if (level == LockLevel::kShared) {
    // A writer at PENDING holds its byte: no new readers until it is done.
    // Side by side, PENDING and SHARED are read-locked in one call, which
    // takes both or neither.
    if (at.shared + 1 == at.pending) {
      auto both = set(F_RDLCK, at.shared, 2);
      if (!both) return both.status();
      if (!*both) return busy("SHARED: a writer holds EXCLUSIVE or waits for readers to leave (PENDING)");
      auto freed = set(F_UNLCK, at.pending, 1);
      if (!freed) return freed.status();
      level_ = LockLevel::kShared;
      return Status::ok();
    }
    auto pending = set(F_RDLCK, at.pending, 1);
    if (!pending) return pending.status();
    if (!*pending) return busy("SHARED: a writer is waiting for readers to leave (PENDING)");
    auto shared = set(F_RDLCK, at.shared, 1);
    auto freed = set(F_UNLCK, at.pending, 1);
    if (!shared) return shared.status();
    if (!freed) return freed.status();
    if (!*shared) return busy("SHARED: another descriptor holds EXCLUSIVE");
    level_ = LockLevel::kShared;
    return Status::ok();
  }

  // RESERVED, or EXCLUSIVE (which takes RESERVED on its way).
  bool took_reserved = false;
  if (held < LockLevel::kReserved) {
    auto reserved = set(F_WRLCK, at.reserved, 1);
    if (!reserved) return reserved.status();
    if (!*reserved) return busy("another descriptor holds RESERVED or above");
    took_reserved = true;
  }
  if (level == LockLevel::kReserved) {
    level_ = LockLevel::kReserved;
    return Status::ok();
  }
  if (held < LockLevel::kPending) {
    auto pending = set(F_WRLCK, at.pending, 1);
    if (!pending || !*pending) {
      if (took_reserved) (void)set(F_UNLCK, at.reserved, 1);
      if (!pending) return pending.status();
      return busy("EXCLUSIVE: a reader is taking SHARED");
    }
    level_ = LockLevel::kPending;
  }
  auto exclusive = set(F_WRLCK, at.shared, 1);
  if (!exclusive) return exclusive.status();
  if (!*exclusive) return busy("EXCLUSIVE: other descriptors hold SHARED; left at PENDING");
  level_ = LockLevel::kExclusive;
  return Status::ok();
}

Result<bool> LocalPagefile::reserved_elsewhere() const {
  auto held = range_lock_conflict(fd_, F_WRLCK, level_bytes_.reserved, 1, name_);
  if (!held) return held.status();
  return *held != F_UNLCK;
}

}  // namespace pagefile
