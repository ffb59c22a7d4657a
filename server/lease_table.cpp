#include "server/lease_table.h"

#include <cassert>
#include <iterator>

#include <fmt/format.h>

#include "core/log.h"
#include "core/random_id.h"

namespace pagefile::net {

LeaseTable::LeaseTable(std::chrono::milliseconds lease, Clock clock)
    : lease_(lease), clock_(std::move(clock)) {
  assert(lease_.count() > 0);
  if (!clock_) clock_ = [] { return std::chrono::steady_clock::now(); };
  base_ = random_id();  // never 0: clients use 0 for "unknown"
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
    ++expiries_;
    logger().info("lease expired owner={}", owner);
    for (auto file = locks_.begin(); file != locks_.end();) {
      if (auto held = file->second.find(owner); held != file->second.end() && held->second >= LockLevel::kReserved) {
        writers_lost_.insert(file->first);
        logger().warn("writer lost its lock file={} owner={} level={}: its next successor announces a new fencing token",
                      file->first, owner, lock_level_name(held->second));
      }
      drop_lock(file->first, file->second, owner);
      file = file->second.empty() ? locks_.erase(file) : std::next(file);
    }
  }
}

Status LeaseTable::set_level(uint64_t file_id, uint64_t owner, LockLevel level) {
  expire();
  auto& owners = locks_[file_id];  // erased again below when left empty
  LockDecision d = decide_lock(file_id, owners, owner, level);
  if (d.version_moves) note_change(file_id);
  if (d.level == LockLevel::kNone) {
    owners.erase(owner);
    if (owners.empty()) locks_.erase(file_id);
  } else {
    owners[owner] = d.level;
  }
  if (!d.status) return d.status;  // (a refused request renews nothing)

  // An owner's lease lives as long as it holds something anywhere.
  bool holds_any = d.level != LockLevel::kNone;
  for (auto file = locks_.begin(); !holds_any && file != locks_.end(); ++file) {
    holds_any = file->second.contains(owner);
  }
  if (holds_any) {
    leases_[owner] = clock_() + lease_;
  } else {
    leases_.erase(owner);
  }
  return d.status;
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
