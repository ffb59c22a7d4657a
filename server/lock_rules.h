// SQLite's five lock levels between the owners of one file, as a rule with
// no state: which level an owner's request leaves it at, given what every
// owner of the file holds now. Both catalogs decide by it: the built-in one
// over its lease table (server/lease_table.h), the one on etcd over the lock
// keys it read (server/etcd_catalog.h). The rules themselves are written
// down in lease_table.h.
#pragma once

#include <cstdint>
#include <map>
#include <string_view>

#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pagefile::net {

using LockLevel = pagefile::LockLevel;

std::string_view lock_level_name(LockLevel level);

struct LockDecision {
  // OK: the owner is now at `level`. kBusy: another owner is in the way;
  // the owner is at `level` all the same (what it held, or kPending on the
  // way to kExclusive). kInvalidArgument: out of SQLite's order, nothing
  // changes (`level` is what it held).
  Status status;
  LockLevel level = LockLevel::kNone;
  // A writer begins or ends (the owner crosses kReserved either way), so
  // the file's version moves: readers must not trust what they kept.
  bool version_moves = false;
};

// `owners`: every owner of file `file_id` and its level (none at kNone).
LockDecision decide_lock(uint64_t file_id, const std::map<uint64_t, LockLevel>& owners, uint64_t owner,
                         LockLevel level);

}  // namespace pagefile::net
