// LocalPagefile's locks: Client::lock's byte and SQLite's lock levels, as
// open-file-description locks on bytes of the header, and what holding
// them says about other writers (exclusion).

#include "store/local_pagefile.h"

#include <fcntl.h>

#include <algorithm>
#include <cerrno>

#include <fmt/format.h>

#include "core/mutex.h"
#include "core/os_error.h"

namespace pagefile {

namespace {

// The byte of the header that Client::lock locks. It lies in the header, so
// locking it never conflicts with page I/O.
constexpr off_t kLockByte = 1024;

}  // namespace

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
