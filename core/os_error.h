// Turning the operating system's errno into a Status.
#pragma once

#include <sys/types.h>

#include <string_view>

#include "pagefile/status.h"

namespace pagefile {

// The Status for `err` (an errno value) met while doing `operation` on
// `what`: "what: operation: strerror". ENOENT is kNotFound, EEXIST
// kAlreadyExists, ENOSPC/EDQUOT/EFBIG kNoSpace, EROFS kReadOnly,
// EACCES/EPERM kPermissionDenied, EWOULDBLOCK/EAGAIN kBusy, EINVAL
// kInvalidArgument, and every other value kIOError.
Status errno_status(int err, std::string_view what, std::string_view operation);

// One non-blocking open-file-description lock call (F_OFD_SETLK) of `type`
// (F_RDLCK, F_WRLCK, F_UNLCK) on `len` bytes at `start`: true when set,
// false when another description's lock is in the way, an error (on
// `what`) otherwise. Such locks belong to the open file, not the process:
// two descriptors of one process conflict as two processes would, and
// closing another descriptor of the file lets none of them go.
Result<bool> try_range_lock(int fd, short type, off_t start, off_t len, std::string_view what);
// The type of another description's lock that a lock of `type` on those
// bytes would meet (F_OFD_GETLK): F_RDLCK or F_WRLCK, F_UNLCK when none.
// Needs no write access, even for F_WRLCK.
Result<short> range_lock_conflict(int fd, short type, off_t start, off_t len, std::string_view what);

}  // namespace pagefile
