#include "server/local_catalog.h"

#include <fmt/format.h>

namespace pagefile::net {

Result<std::unique_ptr<LocalCatalog>> LocalCatalog::open(const std::filesystem::path& path,
                                                         std::chrono::milliseconds lease) {
  auto store = CatalogStore::open(path);
  if (!store) return store.status();
  std::unique_ptr<LocalCatalog> catalog(new LocalCatalog(std::move(*store), lease));
  // The first block now: every token below it was given before this start.
  auto first = catalog->next_token();
  if (!first) return first.status().with_context("catalog: fencing tokens");
  catalog->next_token_ = *first;
  catalog->restarted_ = *first > 1;  // (tokens were set aside by a run before)
  return catalog;
}

LocalCatalog::LocalCatalog(std::unique_ptr<CatalogStore> store, std::chrono::milliseconds lease)
    : store_(std::move(store)), leases_(lease) {}

Status LocalCatalog::set_size(uint64_t token, uint64_t id, int64_t size_pages, bool grow_only) {
  if (Status s = check_token(token); !s) return s;
  Status s = store_->set_size(id, size_pages, grow_only);
  if (s) leases_.note_change(id);
  return s;
}

Result<FileRecord> LocalCatalog::remove(uint64_t token, std::string_view name) {
  if (Status s = check_token(token); !s) return s;
  auto removed = store_->remove(name);
  if (!removed) return removed.status();
  leases_.release_file(removed->id);
  if (auto grant = grants_.find(removed->id); grant != grants_.end()) {
    live_tokens_.erase(grant->second.token);
    grants_.erase(grant);
  }
  return removed;
}

Result<FileRecord> LocalCatalog::set_copy_state(uint64_t token, uint64_t id, const std::string& server,
                                                CopyState state) {
  // (Resync's steps carry the token of its write lock: one whose lease ran
  // out changes nothing.)
  if (Status s = check_token(token); !s) return s;
  return store_->set_copy_state(id, server, state);
}

Status LocalCatalog::release_owner(uint64_t owner) {
  leases_.release_owner(owner);
  return Status::ok();
}

Result<uint64_t> LocalCatalog::next_token() {
  // A block a time, so a token costs no disk write; a restart skips what
  // was left of the block, and tokens still only grow.
  constexpr uint64_t kBlock = 1024;
  if (next_token_ == token_limit_) {
    auto first = store_->reserve_tokens(kBlock);
    if (!first) return first.status();
    next_token_ = *first;
    if (first_token_ == 0) first_token_ = *first;
    token_limit_ = *first + kBlock;
  }
  return next_token_++;
}

Status LocalCatalog::check_token(uint64_t token) const {
  // A token from before this catalog's start held a lock that went with
  // the restart: refused, as a superseded one (first_token_ was set aside
  // at the start, so every earlier token is below it).
  if (token == 0 || live_tokens_.count(token)) return Status::ok();
  if (token < first_token_) {
    return Status::stale("catalog", fmt::format("lock token {} is from before the catalog restarted: its lock went "
                                                "with the restart", token));
  }
  return Status::stale("catalog", fmt::format("lock token {} was superseded: the write lock passed to another "
                                              "client (its lease ran out)", token));
}

Result<LockGrant> LocalCatalog::lock(uint64_t id, uint64_t owner, LockLevel level) {
  auto record = store_->lookup_id(id);
  if (!record) return Status::not_found(fmt::format("file {}", id), "is not in the catalog");
  LockLevel before = leases_.level(id, owner);
  if (Status s = leases_.set_level(id, owner, level); !s) return s;
  LockLevel after = leases_.level(id, owner);
  LockGrant out;
  // A lock that lets its owner write carries the file's fencing token
  // (Chubby's sequencers, Kleppmann's fencing tokens), new and higher
  // whenever the write lock passes to another owner; the same owner taking
  // it again with no one between keeps its own. A writer that let go had
  // finished its writes; one whose lease ran out may still be writing,
  // unaware: then the next grant of any lock on the file brings a new token
  // and asks its owner to announce it to the file's servers before it reads
  // (remote_page_io.h), so they refuse the old one from then on.
  // (An owner letting go of its last lock is no one to tell: the news
  // waits for the next owner that will read.)
  // (The first grant of a file since this catalog started counts as a lost
  // writer's successor's: a writer of before the restart may be writing.)
  // The duty to announce stays with the owner it fell to, asked again at
  // each of its grants, until it lets go of a write lock (it can only have
  // taken one through such a grant, so it surely heard, and announced) or
  // the token passes to another owner: an answer may be lost, and an
  // announcement that fails leaves the old writer unfenced (as the catalog
  // on etcd keeps it in its state key).
  const bool first_since_start = restarted_ && after != LockLevel::kNone && !granted_.contains(id);
  const bool lost = after != LockLevel::kNone && (leases_.take_writer_lost(id) || first_since_start);
  if (lost) {
    announcers_[id] = owner;
  } else if (auto duty = announcers_.find(id); duty != announcers_.end() && duty->second == owner &&
                                                before >= LockLevel::kReserved && after < LockLevel::kReserved) {
    announcers_.erase(duty);
  }
  auto duty = announcers_.find(id);
  bool announce = after != LockLevel::kNone && duty != announcers_.end() && duty->second == owner;
  if (after >= LockLevel::kReserved || announce) {
    Grant& grant = grants_[id];
    if (lost || grant.token == 0 || grant.owner != owner) {
      auto token = next_token();
      if (!token) {
        (void)leases_.set_level(id, owner, before < LockLevel::kReserved ? before : LockLevel::kShared);
        return token.status().with_context("lock: no fencing token");
      }
      live_tokens_.erase(grant.token);
      grant = {*token, owner};
      live_tokens_[*token] = id;
      if (!lost && duty != announcers_.end()) {
        announcers_.erase(duty);  // (passed on with no one lost: nothing left to fence)
        announce = false;
      }
    }
    out.fence_token = grant.token;
    out.fence_announce = announce;
  }
  if (first_since_start) granted_.insert(id);
  out.size_pages = record->size_pages;
  out.replica_version = record->replica_version;
  // A release of a lock this owner no longer held here (its lease ran out,
  // or the catalog restarted): what happened since it last held one is
  // unknown, so no version (kNoVersion) for its next grant to match.
  out.version = level == LockLevel::kNone && before == LockLevel::kNone ? kNoVersion : leases_.version(id);
  out.level = after;
  out.reserved_by_other = leases_.reserved_by_other(id, owner);
  out.lease = leases_.lease();
  return out;
}

}  // namespace pagefile::net
