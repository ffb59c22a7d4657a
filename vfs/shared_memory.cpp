#include "vfs/shared_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "core/os_error.h"

namespace pagefile::vfs {

Result<std::unique_ptr<SharedMemory>> SharedMemory::open(const std::string& path, mode_t mode) {
  bool read_only = false;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd < 0 && (errno == EACCES || errno == EROFS)) {
    read_only = true;
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  }
  if (fd < 0) return errno_status(errno, path, "open");
  // (open() applies the umask; the database's own mode is what counts.)
  if (!read_only) (void)::fchmod(fd, mode);
  std::unique_ptr<SharedMemory> shm(new SharedMemory(path, fd, read_only));
  if (Status s = shm->attach(); !s) return s;
  return shm;
}

Status SharedMemory::attach() {
  if (read_only_) {
    // A read lock needs no write access, a reset does: join a writer's.
    auto held = range_lock_conflict(fd_, F_WRLCK, kDeadManSwitch, 1, path_);
    if (!held) return held.status();
    if (*held == F_UNLCK) return Status::ok();  // no writer yet: not attached
    if (*held == F_WRLCK) return Status::busy(path_, "another connection is initialising the wal-index");
  } else {
    // The first to open it (no one holds the switch) resets it, under a
    // write lock that keeps the others out meanwhile.
    auto first = try_range_lock(fd_, F_WRLCK, kDeadManSwitch, 1, path_);
    if (!first) return first.status();
    // To 3 bytes, as os_unix.c does, not to none: a file cut to no bytes
    // and written again is written out by ext4 when it is closed (its
    // auto_da_alloc), a disk write and a wait at every last close. (What
    // the 3 bytes hold, SQLite's header check takes as garbage.)
    if (*first && ::ftruncate(fd_, 3) != 0) return errno_status(errno, path_, "truncate");
  }
  // Everyone attached holds a read lock.
  auto held = try_range_lock(fd_, F_RDLCK, kDeadManSwitch, 1, path_);
  if (!held) return held.status();
  // Not first, and no read lock: another connection is resetting it now.
  if (!*held) return Status::busy(path_, "another connection is initialising the wal-index");
  attached_ = true;
  return Status::ok();
}

SharedMemory::~SharedMemory() { (void)close(false); }

Result<void*> SharedMemory::map(int region, int size, bool extend) {
  if (fd_ < 0) return Status::invalid_argument(path_, "is closed");
  if (region < 0 || size <= 0 || size % ::getpagesize() != 0 || (region_size_ != 0 && size != region_size_)) {
    return Status::invalid_argument(path_, fmt::format("region {} of {} bytes", region, size));
  }
  region_size_ = size;
  if (static_cast<size_t>(region) < regions_.size() && regions_[region] != nullptr) return regions_[region];
  if (!attached_) {
    if (Status s = attach(); !s) return s;
    if (!attached_) return Status::read_only(path_, "no connection that may write it has initialised the wal-index");
  }
  off_t end = static_cast<off_t>(region + 1) * size;
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return errno_status(errno, path_, "stat");
  if (st.st_size < end) {
    if (!extend || read_only_) return nullptr;
    const off_t page = ::getpagesize();
    for (off_t at = st.st_size / page * page; at < end; at += page) {
      if (::pwrite(fd_, "", 1, at + page - 1) != 1) return errno_status(errno, path_, "extend");
    }
  }
  void* at = ::mmap(nullptr, static_cast<size_t>(size), read_only_ ? PROT_READ : PROT_READ | PROT_WRITE, MAP_SHARED, fd_,
                    static_cast<off_t>(region) * size);
  if (at == MAP_FAILED) return errno_status(errno, path_, fmt::format("map region {}", region));
  if (regions_.size() <= static_cast<size_t>(region)) regions_.resize(static_cast<size_t>(region) + 1, nullptr);
  regions_[region] = at;
  return at;
}

Status SharedMemory::lock(int offset, int n, LockKind kind) {
  if (fd_ < 0) return Status::invalid_argument(path_, "is closed");
  if (offset < 0 || n < 1 || offset + n > kLocks) {
    return Status::invalid_argument(path_, fmt::format("locks {} to {}", offset, offset + n - 1));
  }
  short type = kind == LockKind::kUnlock ? F_UNLCK : kind == LockKind::kShared ? F_RDLCK : F_WRLCK;
  auto set = try_range_lock(fd_, type, kLockBase + offset, n, path_);
  if (!set) return set.status();
  if (!*set) return Status::busy(path_, fmt::format("WAL lock {} is held by another connection", offset));
  return Status::ok();
}

Status SharedMemory::close(bool remove) {
  if (fd_ < 0) return Status::ok();
  Status first;
  if (remove && ::unlink(path_.c_str()) != 0 && errno != ENOENT) first = errno_status(errno, path_, "remove");
  for (void* region : regions_) {
    if (region != nullptr) ::munmap(region, static_cast<size_t>(region_size_));
  }
  regions_.clear();
  ::close(fd_);
  fd_ = -1;
  return first;
}

}  // namespace pagefile::vfs
