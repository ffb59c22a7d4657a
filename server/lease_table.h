// Locks with leases, held at the catalog (TOPs file information server).
//
// Each file has SQLite's five lock levels (os_unix.c):
//   kNone < kShared < kReserved < kPending < kExclusive
// Compatibility, for owners of one file:
//   - any number of owners may hold kShared;
//   - at most one owner holds kReserved or kPending or kExclusive;
//   - kReserved coexists with other owners' kShared;
//   - while an owner holds kPending, no new kShared is granted (existing
//     ones stay), so a writer waiting for readers to finish is not starved;
//   - kExclusive coexists with nothing.
// A request that cannot be granted fails with kBusy at once; waiting is the
// caller's choice. Lowering a level (to kShared or kNone) always succeeds.
// kPending is granted as a step on the way to kExclusive: an owner asking for
// kExclusive while other owners hold kShared is left at kPending and told
// kBusy, exactly as SQLite expects. An owner asking for kExclusive while
// another holds kReserved is told kBusy and keeps its level (a second writer
// at kPending would break the one-writer rule above).
//
// Requests follow the order of SQLite's pager (the asserts in unixLock and
// unixUnlock); anything else is kInvalidArgument and changes nothing:
//   - kShared first: kReserved and kExclusive only from kShared or above;
//   - kReserved only from kShared;
//   - kPending is never asked for (it is only ever the step above);
//   - lowering goes to kShared or kNone only, never to kReserved/kPending.
// Asking for the level already held succeeds, changes nothing and renews the
// lease (a VFS whose xLock asks for less than it holds should answer that
// itself, as unixLock does, rather than send it here).
//
// Leases: an owner (one client) holds all its locks under one lease of
// `lease` length from its last renew() or successful set_level(). When the
// lease runs out (the clock reaches the end, not only passes it), the owner
// loses every lock it had, as if it had died. A refused request renews
// nothing. An owner holding no lock has no lease.
//
// Versions: each file has a version that moves whenever the file may have
// changed: when an owner's lock crosses kReserved (up, as a writer starts;
// down, as it ends, by release or by its lease running out) and on
// note_change() (the catalog calls it when a size is set). A client that
// sees the same version at its next lock as when it let go of its last one
// knows no writer came meanwhile, so what it kept of the file is still
// good. Versions start at a random value per table, so a client cannot
// mistake a restarted catalog's version for the one it saw before.
//
// Thread-safety: not thread-safe; the catalog serialises calls.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "pagefile/pagefile.h"
#include "pagefile/status.h"
#include "server/lock_rules.h"

namespace pagefile::net {

struct LockRecord {
  uint64_t file_id = 0;
  uint64_t owner = 0;
  LockLevel level = LockLevel::kNone;
  std::chrono::milliseconds expires_in{0};  // time left on the owner's lease
};

class LeaseTable {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  // `clock` defaults to steady_clock::now; tests pass their own.
  // REQUIRES: lease > 0.
  explicit LeaseTable(std::chrono::milliseconds lease, Clock clock = {});

  // Moves `owner`'s lock on `file_id` to `level`, renewing its lease.
  // kBusy (message naming the level and why, e.g. "file 7: EXCLUSIVE for
  // owner 2: owner 1 holds SHARED; owner 2 left at PENDING") when another
  // owner's lock is in the way; then the owner keeps what it had, except for
  // the kPending step described above. kInvalidArgument for a request out of
  // SQLite's order (above) or a value that is no LockLevel.
  Status set_level(uint64_t file_id, uint64_t owner, LockLevel level);

  // The level `owner` holds on `file_id` (kNone once its lease ran out).
  LockLevel level(uint64_t file_id, uint64_t owner);

  // True when an owner other than `owner` holds kReserved or higher on
  // `file_id` (SQLite's xCheckReservedLock).
  bool reserved_by_other(uint64_t file_id, uint64_t owner);

  // Extends `owner`'s lease. kNotFound when it holds no lock (never had one,
  // or its lease already ran out and its locks are gone: the owner must
  // assume it lost them).
  Status renew(uint64_t owner);

  // Drops every lock of `owner` (a client that says goodbye).
  void release_owner(uint64_t owner);
  // Drops every lock on `file_id` (the file was removed).
  void release_file(uint64_t file_id);

  // The version of `file_id` (see above).
  uint64_t version(uint64_t file_id);
  // Moves the version of `file_id`: it may have changed.
  void note_change(uint64_t file_id);

  // True, once, after an owner holding kReserved or above on `file_id`
  // lost it because its lease ran out (not by letting go): the owner may
  // still be writing, unaware, and the catalog fences it off.
  bool take_writer_lost(uint64_t file_id);

  // Every lock held now, ordered by file then owner.
  std::vector<LockRecord> list();

  std::chrono::milliseconds lease() const { return lease_; }

  // Leases that ran out so far (found out at the calls that look: a lease
  // counts when a call after its end sees it gone).
  uint64_t expiries() const { return expiries_; }

 private:
  // Forgets owners whose lease ran out. Every public call starts with it.
  void expire();
  // Drops `owner`'s lock on the file of `owners` (an entry of locks_),
  // moving the file's version when it held kReserved or above.
  void drop_lock(uint64_t file_id, std::map<uint64_t, LockLevel>& owners, uint64_t owner);

  std::chrono::milliseconds lease_;
  Clock clock_;
  // file -> owner -> level
  std::map<uint64_t, std::map<uint64_t, LockLevel>> locks_;
  // owner -> when its lease ends
  std::map<uint64_t, std::chrono::steady_clock::time_point> leases_;
  // files whose writer's lease ran out, until take_writer_lost()
  std::set<uint64_t> writers_lost_;
  // file -> version, for files whose version moved; others are at base_
  std::map<uint64_t, uint64_t> versions_;
  uint64_t base_;
  uint64_t expiries_ = 0;
};

}  // namespace pagefile::net
