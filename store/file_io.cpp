#include "store/file_io.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "core/os_error.h"
#include "store/read_mapping.h"

namespace pagefile {

int fault_errno(DiskFault fault) { return fault == DiskFault::kEnospc ? ENOSPC : EIO; }

Result<size_t> pread_full(int fd, std::span<std::byte> out, off_t offset, std::string_view what,
                          bool* would_block, const ReadMapping* map) {
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

std::string dir_name(const std::filesystem::path& dir) { return dir.empty() ? std::string(".") : dir.string(); }

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

}  // namespace pagefile
