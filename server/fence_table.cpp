// The page server's fencing tokens, kept on disk (server/fence_table.h).
#include "server/fence_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>

#include <fmt/format.h>
#include <xxhash.h>

#include "core/little_endian.h"
#include "core/os_error.h"

namespace pagefile::net {

namespace {

// The record: the token, then XXH64 of it (seed below), both little-endian;
// 16 bytes, in one sector, so a write of it is whole or not at all.
constexpr size_t kRecordBytes = 16;
constexpr uint64_t kSeed = 0x504666656e636521ULL;

uint64_t sum_of(const std::array<std::byte, kRecordBytes>& record) { return XXH64(record.data(), 8, kSeed); }

}  // namespace

FenceTable::FenceTable(std::filesystem::path shares, bool flush) : shares_(std::move(shares)), flush_(flush) {}

std::filesystem::path FenceTable::path(uint64_t file_id) const {
  return shares_ / fmt::format("{}.fence", file_id);
}

Result<uint64_t> FenceTable::load(uint64_t file_id) const {
  std::string name = path(file_id).string();
  int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return uint64_t{0};
    return errno_status(errno, name, "open");
  }
  std::array<std::byte, kRecordBytes> record{};
  ssize_t got = ::pread(fd, record.data(), record.size(), 0);
  int err = errno;
  ::close(fd);
  if (got < 0) return errno_status(err, name, "read");
  // Empty: made, but its first record never written (a crash, a full
  // disk), so the raise it was for was never answered.
  if (got == 0) return uint64_t{0};
  if (got != static_cast<ssize_t>(kRecordBytes) || get_le<uint64_t>(record, 8) != sum_of(record)) {
    return Status::corruption(name, "the file's highest fencing token is damaged; its writes are refused until "
                                    "the file is removed (once no writer whose lock ran out can still write)");
  }
  return get_le<uint64_t>(record, 0);
}

Status FenceTable::store(uint64_t file_id, uint64_t token) const {
  std::string name = path(file_id).string();
  int fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return errno_status(errno, name, "create");
  std::array<std::byte, kRecordBytes> record{};
  put_le<uint64_t>(record, 0, token);
  put_le<uint64_t>(record, 8, sum_of(record));
  Status s;
  ssize_t wrote = ::pwrite(fd, record.data(), record.size(), 0);
  if (wrote < 0) {
    s = errno_status(errno, name, "write");
  } else if (wrote != static_cast<ssize_t>(kRecordBytes)) {
    s = Status::no_space(name, fmt::format("write: {} of {} bytes", wrote, kRecordBytes));
  } else if (flush_ && ::fdatasync(fd) != 0) {
    s = errno_status(errno, name, "fdatasync");
  }
  ::close(fd);
  if (s && flush_) {
    // The name too, the first time (a later fsync of the directory is cheap).
    int dir = ::open(shares_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      (void)::fsync(dir);
      ::close(dir);
    }
  }
  return s;
}

std::shared_ptr<FenceTable::File> FenceTable::file(uint64_t file_id) {
  MutexLock lock(mu_);
  auto& file = files_[file_id];
  if (!file) file = std::make_shared<File>();
  return file;
}

Status FenceTable::check(uint64_t file_id, uint64_t token) {
  if (token == 0) return Status::ok();
  std::shared_ptr<File> f = file(file_id);
  MutexLock lock(f->mu);
  if (!f->loaded) {
    auto stored = load(file_id);
    if (!stored) return stored.status();
    f->highest = *stored;
    f->loaded = true;
  }
  if (token < f->highest) {
    return Status::stale(fmt::format("file {}", file_id),
                         fmt::format("write fenced off: lock token {} < {} held by another client (the lock's "
                                     "lease ran out and another client took the file)",
                                     token, f->highest));
  }
  if (token > f->highest) {
    if (Status s = store(file_id, token); !s) return s.with_context(fmt::format("file {}: record fencing token", file_id));
    f->highest = token;
  }
  return Status::ok();
}

void FenceTable::forget(uint64_t file_id) {
  std::shared_ptr<File> f = file(file_id);
  MutexLock lock(f->mu);
  (void)::unlink(path(file_id).c_str());
  // (Kept in memory: ids are never reused, and a stale writer's request
  // for the removed file is still refused until this server restarts.)
}

}  // namespace pagefile::net
