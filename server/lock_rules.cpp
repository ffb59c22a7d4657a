#include "server/lock_rules.h"

#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pagefile::net {

std::string_view lock_level_name(LockLevel level) {
  switch (level) {
    case LockLevel::kNone: return "NONE";
    case LockLevel::kShared: return "SHARED";
    case LockLevel::kReserved: return "RESERVED";
    case LockLevel::kPending: return "PENDING";
    case LockLevel::kExclusive: return "EXCLUSIVE";
  }
  return "UNKNOWN";
}

LockDecision decide_lock(uint64_t file_id, const std::map<uint64_t, LockLevel>& owners, uint64_t owner,
                         LockLevel level) {
  std::string what = fmt::format("file {}", file_id);
  auto mine = owners.find(owner);
  const LockLevel held = mine == owners.end() ? LockLevel::kNone : mine->second;
  if (static_cast<uint8_t>(level) > static_cast<uint8_t>(LockLevel::kExclusive)) {
    return {Status::invalid_argument(what, fmt::format("lock level {} for owner {} is not a level",
                                                       static_cast<unsigned>(level), owner)),
            held, false};
  }
  auto keep = [&](Status s) { return LockDecision{std::move(s), held, false}; };
  // "EXCLUSIVE for owner 2: owner 1 holds SHARED"
  auto blocked = [&](std::string_view why) {
    return Status::busy(what, fmt::format("{} for owner {}: {}", lock_level_name(level), owner, why));
  };
  auto invalid = [&](std::string_view why) {
    return Status::invalid_argument(what, fmt::format("{} for owner {} holding {}: {}", lock_level_name(level),
                                                      owner, lock_level_name(held), why));
  };

  // Asking for what is held changes nothing, as in SQLite's unixLock.
  if (level == held) return {Status::ok(), held, false};
  if (level < held) {
    // SQLite's xUnlock only ever goes to SHARED or NONE; stepping down to
    // RESERVED or PENDING would be a state SQLite never reaches.
    if (level != LockLevel::kShared && level != LockLevel::kNone) {
      return keep(invalid("lowering goes to SHARED or NONE only"));
    }
    return {Status::ok(), level, held >= LockLevel::kReserved && level < LockLevel::kReserved};
  }
  // The order SQLite's pager follows (asserts in unixLock).
  if (level == LockLevel::kPending) {
    return keep(invalid("PENDING is never asked for; it is a step on the way to EXCLUSIVE"));
  }
  if (held == LockLevel::kNone && level != LockLevel::kShared) return keep(invalid("SHARED must be held first"));
  if (level == LockLevel::kReserved && held != LockLevel::kShared) return keep(invalid("SHARED must be held first"));

  // What the other owners hold decides. `writer` is the one owner that may
  // hold RESERVED or above; `readers` those at SHARED.
  const std::pair<const uint64_t, LockLevel>* writer = nullptr;
  std::vector<uint64_t> readers;
  for (const auto& entry : owners) {
    if (entry.first == owner || entry.second == LockLevel::kNone) continue;
    if (entry.second >= LockLevel::kReserved) {
      writer = &entry;
    } else {
      readers.push_back(entry.first);
    }
  }
  auto held_by_writer = [&] {
    return fmt::format("owner {} holds {}", writer->first, lock_level_name(writer->second));
  };
  switch (level) {
    case LockLevel::kShared:
      // A PENDING writer is waiting for the readers to leave; letting new
      // ones in would starve it.
      if (writer && writer->second >= LockLevel::kPending) return keep(blocked(held_by_writer()));
      break;
    case LockLevel::kReserved:
      if (writer) return keep(blocked(held_by_writer()));
      break;
    case LockLevel::kExclusive:
      // Another writer (at most one, at RESERVED) wins: taking PENDING
      // beside it would give the file two writers, so the asker keeps what
      // it had.
      if (writer) return keep(blocked(held_by_writer()));
      if (!readers.empty()) {
        // SQLite's pending step: stop new readers and tell the asker to come
        // back once the current ones are gone.
        std::string who = readers.size() == 1 ? fmt::format("owner {} holds SHARED", readers.front())
                                              : fmt::format("owners {} hold SHARED", fmt::join(readers, ", "));
        return {blocked(fmt::format("{}; owner {} left at PENDING", who, owner)), LockLevel::kPending,
                held < LockLevel::kReserved};  // a writer has begun
      }
      break;
    case LockLevel::kNone:
    case LockLevel::kPending:
      break;  // handled above
  }
  return {Status::ok(), level, held < LockLevel::kReserved && level >= LockLevel::kReserved};
}

}  // namespace pagefile::net
