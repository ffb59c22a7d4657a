#include "core/os_error.h"

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

}  // namespace pagefile
