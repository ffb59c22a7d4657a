#include "core/os_error.h"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace pagefile {

namespace {

Code code_for_errno(int err) {
  switch (err) {
    case ENOENT: return Code::kNotFound;
    case EEXIST: return Code::kAlreadyExists;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return Code::kNoSpace;
    case EROFS: return Code::kReadOnly;
    case EACCES:
    case EPERM: return Code::kPermissionDenied;
    case EAGAIN: return Code::kBusy;
    case EINVAL: return Code::kInvalidArgument;
    default: return Code::kIOError;
  }
}

}  // namespace

Status errno_status(int err, std::string_view what, std::string_view operation) {
  return Status::from_code(code_for_errno(err), what,
                           fmt::format("{}: {}", operation, std::strerror(err)));
}

namespace {

struct flock byte_range(short type, off_t start, off_t len) {
  struct flock fl {};
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = start;
  fl.l_len = len;
  return fl;
}

}  // namespace

Result<bool> try_range_lock(int fd, short type, off_t start, off_t len, std::string_view what) {
  struct flock fl = byte_range(type, start, len);
  while (::fcntl(fd, F_OFD_SETLK, &fl) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EACCES) return false;
    return errno_status(errno, what, "lock");
  }
  return true;
}

Result<short> range_lock_conflict(int fd, short type, off_t start, off_t len, std::string_view what) {
  struct flock fl = byte_range(type, start, len);
  while (::fcntl(fd, F_OFD_GETLK, &fl) != 0) {
    if (errno != EINTR) return errno_status(errno, what, "check lock");
  }
  return fl.l_type;
}

}  // namespace pagefile
