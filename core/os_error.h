// Turning the operating system's errno into a Status.
#pragma once

#include <string_view>

#include "pagefile/status.h"

namespace pagefile {

// The Status for `err` (an errno value) met while doing `operation` on
// `what`: "what: operation: strerror". ENOENT is kNotFound, EEXIST
// kAlreadyExists, ENOSPC/EDQUOT/EFBIG kNoSpace, EROFS kReadOnly,
// EACCES/EPERM kPermissionDenied, EWOULDBLOCK/EAGAIN kBusy, EINVAL
// kInvalidArgument, and every other value kIOError.
Status errno_status(int err, std::string_view what, std::string_view operation);

}  // namespace pagefile
