// RemotePageIo's locks (bus/remote_page_io.h): SQLite's lock levels and
// Client::lock, held at the catalog under the bus's lease, and the fencing
// token a write lock brings, taken here and announced to the servers by
// announce_fence (remote_page_io.cpp; doc/architecture.md, "Fencing").
#include "bus/remote_page_io.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/page_bounds.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

LockLevel RemotePageIo::level_held() const {
  MutexLock lock(meta_mu_);
  return level_;
}

Status RemotePageIo::set_lock_level(LockLevel level) {
  MutexLock lock(meta_mu_);
  return set_lock_level_locked(level);
}

Status RemotePageIo::set_lock_level_locked(LockLevel level) {
  if (level_ != LockLevel::kNone && bus_->lease_lost(owner_)) {
    // The catalog let our locks go while we thought we held them: say so
    // rather than carry on as if protected.
    level_ = LockLevel::kNone;
    version_at_unlock_ = 0;  // a writer may have come and gone
    bus_->set_holds_locks(owner_, false);
    return Status::busy(record_.name, "lock lost: its lease ran out before it was renewed");
  }
  auto reply = bus_->call_sync(bus_->catalog(), [&](wire::Request::Builder r) {
    r.setCluster(record_.cluster);
    auto lock = r.initLock();
    lock.setFileId(record_.id);
    lock.setOwner(owner_);
    lock.setLevel(static_cast<uint8_t>(level));
  });
  LockLevel before = level_;
  bool refresh = false;
  if (reply && (*reply)->root().isLockState()) {
    auto state = (*reply)->root().getLockState();
    if (state.getLevel() > static_cast<uint8_t>(LockLevel::kExclusive)) {
      return Status::corruption(record_.name, fmt::format("lock: the catalog granted unknown level {}", state.getLevel()));
    }
    level_ = static_cast<LockLevel>(state.getLevel());
    reserved_by_other_ = state.getReservedByOther();
    bus_->note_lease(std::chrono::milliseconds(state.getLeaseMs()));
    if (uint64_t token = state.getFenceToken(); token != 0) {
      // The newest grant's: the write lock has one holder at a time, so
      // it is the only valid token of the file (the cell may be shared with
      // other descriptors of the database; their grants came before).
      fence_->store(token);
      if (state.getFenceAnnounce()) {
        if (Status s = announce_fence(token); !s) {
          return s.with_context(fmt::format("{}: lock: fencing off the writer whose lease ran out", record_.name));
        }
      }
    }
    refresh = record_.replicas > 1 && state.getReplicaVersion() != replica_version_.load();
    if (before == LockLevel::kNone && level_ != LockLevel::kNone) {
      unchanged_ = version_at_unlock_ != 0 && state.getVersion() == version_at_unlock_;
      // (An older catalog sends neither version nor size: 0. A size no
      // file can have is not taken: size_pages() asks, and says so.)
      size_from_grant_ = state.getVersion() != 0 && check_size_pages(state.getSizePages(), record_.name).is_ok();
      if (size_from_grant_) adopt_catalog_size(state.getSizePages());
    } else if (before != LockLevel::kNone && level_ == LockLevel::kNone) {
      version_at_unlock_ = state.getVersion();
    }
  } else if (!reply && before != LockLevel::kNone && level == LockLevel::kNone) {
    // Whether the catalog let go is unknown: nothing kept is trusted at the
    // next lock, which may find this descriptor's level still held here
    // (and so not compute unchanged_ again).
    version_at_unlock_ = 0;
    unchanged_ = false;
  }
  if (!reply && reply.status().is(Code::kBusy) && level == LockLevel::kExclusive &&
      before >= LockLevel::kShared) {
    level_ = LockLevel::kPending;  // the catalog keeps the pending step (lease_table.h)
  }
  if ((before == LockLevel::kNone) != (level_ == LockLevel::kNone)) {
    bus_->set_holds_locks(owner_, level_ != LockLevel::kNone);
  }
  if (!reply) return reply.status();
  if (refresh) {
    // Copies changed state since this descriptor last heard: what to read
    // and write under this lock is the catalog's record now.
    if (Status s = refresh_copy_states(); !s) return s.with_context(fmt::format("{}: lock", record_.name));
  }
  return Status::ok();
}

Result<bool> RemotePageIo::reserved_elsewhere() {
  MutexLock lock(meta_mu_);
  // Asking for the level held changes nothing at the catalog and answers
  // with what the other owners hold.
  if (Status s = set_lock_level_locked(level_); !s) return s;
  return reserved_by_other_;
}

Status RemotePageIo::lock(LockMode mode, LockWait wait) {
  if (mode == LockMode::kExclusive && read_only_) {
    return Status::read_only(record_.name, "exclusive lock: file was opened read-only");
  }
  // Bounded only by the caller's choice of kBlock; each try is prompt.
  for (;;) {
    Status s;
    {
      MutexLock lock(meta_mu_);
      LockLevel start = level_;
      if (mode == LockMode::kShared) {
        s = set_lock_level_locked(LockLevel::kShared);
      } else {
        if (level_ < LockLevel::kShared) s = set_lock_level_locked(LockLevel::kShared);
        if (s) s = set_lock_level_locked(LockLevel::kExclusive);
      }
      if (s || !s.is(Code::kBusy) || wait == LockWait::kTry) {
        if (!s && level_ != start && start != LockLevel::kPending) {
          (void)set_lock_level_locked(start);  // leave as we found it
        }
        return s;
      }
      if (level_ != start) (void)set_lock_level_locked(start);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status RemotePageIo::unlock() {
  MutexLock lock(meta_mu_);
  if (level_ == LockLevel::kNone) return Status::ok();
  return set_lock_level_locked(LockLevel::kNone);
}

}  // namespace pagefile::net
