#include "server/lease_table.h"

#include <cassert>
#include <iterator>
#include <random>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace pagefile::net {

namespace {

bool is_known_level(LockLevel level) {
  return static_cast<uint8_t>(level) <= static_cast<uint8_t>(LockLevel::kExclusive);
}

std::string file_label(uint64_t file_id) { return fmt::format("file {}", file_id); }

}  // namespace

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

LeaseTable::LeaseTable(std::chrono::milliseconds lease, Clock clock)
    : lease_(lease), clock_(std::move(clock)) {
  assert(lease_.count() > 0);
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  std::random_device random;
  base_ = (static_cast<uint64_t>(random()) << 32 | random()) | 1;  // never 0: clients use 0 for "unknown"
}

uint64_t LeaseTable::version(uint64_t file_id) {
  auto it = versions_.find(file_id);
  return it == versions_.end() ? base_ : it->second;
}

void LeaseTable::note_change(uint64_t file_id) {
  uint64_t next = version(file_id) + 1;
  versions_[file_id] = next == 0 ? 1 : next;
}

void LeaseTable::drop_lock(uint64_t file_id, std::map<uint64_t, LockLevel>& owners, uint64_t owner) {
  auto it = owners.find(owner);
  if (it == owners.end()) return;
  if (it->second >= LockLevel::kReserved) note_change(file_id);
  owners.erase(it);
}

void LeaseTable::expire() {
  auto now = clock_();
  for (auto it = leases_.begin(); it != leases_.end();) {
    if (it->second > now) {
      ++it;
      continue;
    }
    uint64_t owner = it->first;
    it = leases_.erase(it);
    for (auto file = locks_.begin(); file != locks_.end();) {
      if (auto held = file->second.find(owner); held != file->second.end() && held->second >= LockLevel::kReserved) {
        writers_lost_.insert(file->first);
      }
      drop_lock(file->first, file->second, owner);
      file = file->second.empty() ? locks_.erase(file) : std::next(file);
    }
  }
}

Status LeaseTable::set_level(uint64_t file_id, uint64_t owner, LockLevel level) {
  expire();
  std::string what = file_label(file_id);
  if (!is_known_level(level)) {
    return Status::invalid_argument(
        what, fmt::format("lock level {} for owner {} is not a level",
                          static_cast<unsigned>(level), owner));
  }

  auto& owners = locks_[file_id];  // erased again below when left empty
  auto mine = owners.find(owner);
  LockLevel held = mine == owners.end() ? LockLevel::kNone : mine->second;

  // Refuses before anything changes; `owners` may have just been created
  // empty, so forget it again.
  auto refuse = [&](Status s) {
    if (owners.empty()) locks_.erase(file_id);
    return s;
  };
  // "EXCLUSIVE for owner 2: owner 1 holds SHARED"
  auto blocked = [&](std::string_view why) {
    return Status::busy(what, fmt::format("{} for owner {}: {}", lock_level_name(level), owner, why));
  };
  auto invalid = [&](std::string_view why) {
    return Status::invalid_argument(
        what, fmt::format("{} for owner {} holding {}: {}", lock_level_name(level), owner,
                          lock_level_name(held), why));
  };

  // Asking for what is held changes nothing, as in SQLite's unixLock.
  if (level != held) {
    if (level < held) {
      // SQLite's xUnlock only ever goes to SHARED or NONE; stepping down to
      // RESERVED or PENDING would be a state SQLite never reaches.
      if (level != LockLevel::kShared && level != LockLevel::kNone) {
        return refuse(invalid("lowering goes to SHARED or NONE only"));
      }
    } else {
      // The order SQLite's pager follows (asserts in unixLock).
      if (level == LockLevel::kPending) {
        return refuse(invalid("PENDING is never asked for; it is a step on the way to EXCLUSIVE"));
      }
      if (held == LockLevel::kNone && level != LockLevel::kShared) {
        return refuse(invalid("SHARED must be held first"));
      }
      if (level == LockLevel::kReserved && held != LockLevel::kShared) {
        return refuse(invalid("SHARED must be held first"));
      }

      // What the other owners hold decides. `writer` is the one owner that
      // may hold RESERVED or above; `readers` those at SHARED.
      const std::pair<const uint64_t, LockLevel>* writer = nullptr;
      std::vector<uint64_t> readers;
      for (const auto& entry : owners) {
        if (entry.first == owner) continue;
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
          // A PENDING writer is waiting for the readers to leave; letting
          // new ones in would starve it.
          if (writer && writer->second >= LockLevel::kPending) {
            return refuse(blocked(held_by_writer()));
          }
          break;
        case LockLevel::kReserved:
          if (writer) return refuse(blocked(held_by_writer()));
          break;
        case LockLevel::kExclusive:
          // Another writer (at most one, at RESERVED) wins: taking PENDING
          // beside it would give the file two writers, so the asker keeps
          // what it had.
          if (writer) return refuse(blocked(held_by_writer()));
          if (!readers.empty()) {
            // SQLite's pending step: stop new readers and tell the asker to
            // come back once the current ones are gone.
            std::string who = readers.size() == 1
                                  ? fmt::format("owner {} holds SHARED", readers.front())
                                  : fmt::format("owners {} hold SHARED", fmt::join(readers, ", "));
            owners[owner] = LockLevel::kPending;
            if (held < LockLevel::kReserved) note_change(file_id);  // a writer has begun
            return blocked(fmt::format("{}; owner {} left at PENDING", who, owner));
          }
          break;
        case LockLevel::kNone:
        case LockLevel::kPending:
          assert(false && "handled above");
          break;
      }
    }
  }

  // A writer begins or ends: readers must not trust what they kept.
  if ((held >= LockLevel::kReserved) != (level >= LockLevel::kReserved)) note_change(file_id);
  if (level == LockLevel::kNone) {
    owners.erase(owner);
    if (owners.empty()) locks_.erase(file_id);
  } else {
    owners[owner] = level;
  }

  // An owner's lease lives as long as it holds something anywhere.
  bool holds_any = level != LockLevel::kNone;
  for (auto file = locks_.begin(); !holds_any && file != locks_.end(); ++file) {
    holds_any = file->second.contains(owner);
  }
  if (holds_any) {
    leases_[owner] = clock_() + lease_;
  } else {
    leases_.erase(owner);
  }
  return Status::ok();
}

LockLevel LeaseTable::level(uint64_t file_id, uint64_t owner) {
  expire();
  auto file = locks_.find(file_id);
  if (file == locks_.end()) return LockLevel::kNone;
  auto it = file->second.find(owner);
  return it == file->second.end() ? LockLevel::kNone : it->second;
}

bool LeaseTable::reserved_by_other(uint64_t file_id, uint64_t owner) {
  expire();
  auto file = locks_.find(file_id);
  if (file == locks_.end()) return false;
  for (const auto& [other, held] : file->second) {
    if (other != owner && held >= LockLevel::kReserved) return true;
  }
  return false;
}

Status LeaseTable::renew(uint64_t owner) {
  expire();
  auto it = leases_.find(owner);
  if (it == leases_.end()) {
    return Status::not_found(fmt::format("owner {}", owner),
                             "holds no lock (never took one, or its lease ran out)");
  }
  it->second = clock_() + lease_;
  return Status::ok();
}

void LeaseTable::release_owner(uint64_t owner) {
  expire();
  leases_.erase(owner);
  for (auto file = locks_.begin(); file != locks_.end();) {
    drop_lock(file->first, file->second, owner);
    file = file->second.empty() ? locks_.erase(file) : std::next(file);
  }
}

bool LeaseTable::take_writer_lost(uint64_t file_id) {
  expire();
  return writers_lost_.erase(file_id) != 0;
}

void LeaseTable::release_file(uint64_t file_id) {
  expire();
  writers_lost_.erase(file_id);
  auto file = locks_.find(file_id);
  if (file == locks_.end()) return;
  std::vector<uint64_t> owners;
  for (const auto& entry : file->second) owners.push_back(entry.first);
  locks_.erase(file);
  // Owners left with no lock anywhere lose their lease too, so renew()
  // tells them their locks are gone.
  for (uint64_t owner : owners) {
    bool holds_any = false;
    for (const auto& [id, held] : locks_) {
      if (held.contains(owner)) {
        holds_any = true;
        break;
      }
    }
    if (!holds_any) leases_.erase(owner);
  }
}

std::vector<LockRecord> LeaseTable::list() {
  expire();
  auto now = clock_();
  std::vector<LockRecord> out;
  for (const auto& [file_id, owners] : locks_) {
    for (const auto& [owner, held] : owners) {
      auto deadline = leases_.find(owner);
      assert(deadline != leases_.end());
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline->second - now);
      out.push_back(LockRecord{file_id, owner, held, left});
    }
  }
  return out;
}

}  // namespace pagefile::net
