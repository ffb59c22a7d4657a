#include "server/catalog_service.h"

#include <fmt/format.h>

#include "wire/wire_convert.h"

namespace pagefile::net {

bool is_catalog_request(wire::Request::Reader request) {
  switch (request.which()) {
    case wire::Request::OPEN:
    case wire::Request::STAT:
    case wire::Request::SET_SIZE:
    case wire::Request::UNLINK:
    case wire::Request::LIST:
    case wire::Request::LOCK:
    case wire::Request::RENEW_LEASE:
    case wire::Request::RELEASE_OWNER:
    case wire::Request::LOCKS:
    case wire::Request::SET_COPY_STATE:
    case wire::Request::REPLACE_SERVER:
      return true;
    default:
      return false;
  }
}

CatalogService::CatalogService(std::filesystem::path dir, std::chrono::milliseconds lease,
                               ClusterMembership& membership)
    : dir_(std::move(dir)), lease_(lease), membership_(membership) {}

void CatalogService::record_to_wire(FileRecord record, wire::FileRecord::Builder out) {
  record.cluster = store_->cluster_id();
  to_wire(record, out);
}

Status CatalogService::open() {
  if (store_) return Status::ok();
  if (closed_) return Status::disconnected("server", "is shutting down");
  auto store = CatalogStore::open(dir_ / "catalog.db");
  if (!store) return store.status();
  if (Status s = membership_.set((*store)->cluster_id()); !s) return s;
  store_ = std::move(*store);
  leases_ = std::make_unique<LeaseTable>(lease_);
  return Status::ok();
}

Status CatalogService::open_existing() {
  const std::filesystem::path path = dir_ / "catalog.db";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::ok();
  MutexLock lock(mu_);
  Status s = open();
  if (s) return s;
  return Status::from_code(
      s.code(), s.message(),
      fmt::format("pagefiled will not serve it: restore {} from a backup, or move it (with any -wal file "
                  "beside it) out of the directory to start with an empty catalog, which forgets every file "
                  "it listed",
                  path.string()));
}

void CatalogService::close() {
  MutexLock lock(mu_);
  store_.reset();
  leases_.reset();
  closed_ = true;
}

Status CatalogService::answer(wire::Request::Reader request, wire::Response::Builder response) {
  MutexLock lock(mu_);
  if (Status s = open(); !s) return s;
  // A file id means a file only in the cluster that gave it.
  if (uint64_t cluster = request.getCluster(); cluster != 0 && cluster != store_->cluster_id()) {
    return Status::stale("catalog", fmt::format("is cluster {:016x}, not {:016x}: the file was opened before the "
                                                "catalog was created again; open it again",
                                                store_->cluster_id(), cluster));
  }
  switch (request.which()) {
    case wire::Request::OPEN: return open_file(request.getOpen(), response);
    case wire::Request::STAT: {
      auto found = store_->lookup(std::string(request.getStat()));
      if (!found) return found.status();
      record_to_wire(*found, response.initFile());
      return Status::ok();
    }
    case wire::Request::SET_SIZE: {
      if (Status s = check_token(request.getLockToken()); !s) return s;
      auto req = request.getSetSize();
      Status s = store_->set_size(req.getFileId(), req.getPages(), req.getGrowOnly());
      if (s) leases_->note_change(req.getFileId());
      return s;
    }
    case wire::Request::UNLINK: {
      if (Status s = check_token(request.getLockToken()); !s) return s;
      auto removed = store_->remove(std::string(request.getUnlink()));
      if (!removed) return removed.status();
      leases_->release_file(removed->id);
      if (auto grant = grants_.find(removed->id); grant != grants_.end()) {
        live_tokens_.erase(grant->second.token);
        grants_.erase(grant);
      }
      record_to_wire(*removed, response.initFile());
      return Status::ok();
    }
    case wire::Request::LIST: {
      auto all = store_->list();
      if (!all) return all.status();
      auto files = response.initFiles(static_cast<unsigned>(all->size()));
      for (unsigned i = 0; i < all->size(); ++i) record_to_wire((*all)[i], files[i]);
      return Status::ok();
    }
    case wire::Request::SET_COPY_STATE: {
      // (Resync's steps carry the token of its write lock: one whose lease
      // ran out changes nothing.)
      if (Status s = check_token(request.getLockToken()); !s) return s;
      auto req = request.getSetCopyState();
      if (req.getState() > static_cast<uint8_t>(CopyState::kResyncing)) {
        return Status::invalid_argument("copy state", fmt::format("unknown state {}", req.getState()));
      }
      auto record = store_->set_copy_state(req.getFileId(), req.getServer(), static_cast<CopyState>(req.getState()));
      if (!record) return record.status();
      record_to_wire(*record, response.initFile());
      return Status::ok();
    }
    case wire::Request::REPLACE_SERVER: {
      auto req = request.getReplaceServer();
      auto changed = store_->replace_server(req.getOld(), req.getNew());
      if (!changed) return changed.status();
      auto files = response.initFiles(static_cast<unsigned>(changed->size()));
      for (unsigned i = 0; i < changed->size(); ++i) record_to_wire((*changed)[i], files[i]);
      return Status::ok();
    }
    case wire::Request::LOCK: return set_lock(request.getLock(), response);
    case wire::Request::RENEW_LEASE: return leases_->renew(request.getRenewLease());
    case wire::Request::RELEASE_OWNER:
      leases_->release_owner(request.getReleaseOwner());
      return Status::ok();
    case wire::Request::LOCKS: {
      auto all = leases_->list();
      auto locks = response.initLocks(static_cast<unsigned>(all.size()));
      for (unsigned i = 0; i < all.size(); ++i) {
        locks[i].setFileId(all[i].file_id);
        locks[i].setOwner(all[i].owner);
        locks[i].setLevel(static_cast<uint8_t>(all[i].level));
        locks[i].setExpiresInMs(all[i].expires_in.count());
      }
      return Status::ok();
    }
    default:
      return Status::not_supported("request", fmt::format("unknown request type {}",
                                                          static_cast<int>(request.which())));
  }
}

Status CatalogService::open_file(wire::OpenFile::Reader req, wire::Response::Builder response) {
  std::string name = req.getName();
  auto found = store_->lookup(name);
  if (found) {
    if (req.getCreate() && req.getExclusive()) {
      return Status::already_exists(name, "exists (create is exclusive)");
    }
    if (req.getPageSize() != 0 && req.getPageSize() != found->page_size) {
      return Status::invalid_argument(
          name, fmt::format("has page size {}, opened with page size {}", found->page_size,
                            req.getPageSize()));
    }
    if (req.getReplicas() != 0 && req.getReplicas() != found->replicas) {
      return Status::invalid_argument(
          name, fmt::format("keeps {} copies of each page, opened with replicas={}", found->replicas,
                            req.getReplicas()));
    }
    record_to_wire(*found, response.initFile());
    return Status::ok();
  }
  if (!found.status().is(Code::kNotFound)) return found.status();
  if (!req.getCreate()) return Status::not_found(name, "does not exist (create is false)");
  FileRecord proto;
  proto.name = name;
  proto.page_size = req.getPageSize() != 0 ? req.getPageSize() : kDefaultPageSize;
  if (Status s = check_page_size(proto.page_size); !s) return s.with_context(name);
  proto.placement = req.getPlacement() == 1 ? Placement::kHash : Placement::kStripe;
  proto.stripe_pages = req.getStripePages();
  for (auto s : req.getServers()) proto.servers.emplace_back(s);
  proto.policy = from_wire(req.getPolicy());
  proto.replicas = req.getReplicas() != 0 ? req.getReplicas() : req.getCreateReplicas() != 0 ? req.getCreateReplicas() : 1;
  auto created = store_->create(proto);
  if (!created) return created.status();
  record_to_wire(*created, response.initFile());
  return Status::ok();
}

Result<uint64_t> CatalogService::next_token() {
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

Status CatalogService::check_token(uint64_t token) const {
  // Tokens from before this catalog's start are not known here; their
  // locks went with the restart, and the page servers still check them.
  if (token == 0 || first_token_ == 0 || token < first_token_ || live_tokens_.count(token)) return Status::ok();
  return Status::stale("catalog", fmt::format("lock token {} was superseded: the write lock passed to another "
                                              "client (its lease ran out)", token));
}

Status CatalogService::set_lock(wire::Lock::Reader req, wire::Response::Builder response) {
  if (req.getLevel() > static_cast<uint8_t>(LockLevel::kExclusive)) {
    return Status::invalid_argument("lock", fmt::format("unknown level {}", req.getLevel()));
  }
  auto record = store_->lookup_id(req.getFileId());
  if (!record) {
    return Status::not_found(fmt::format("file {}", req.getFileId()), "is not in the catalog");
  }
  LockLevel before = leases_->level(req.getFileId(), req.getOwner());
  Status s = leases_->set_level(req.getFileId(), req.getOwner(), static_cast<LockLevel>(req.getLevel()));
  if (!s) return s;
  LockLevel after = leases_->level(req.getFileId(), req.getOwner());
  auto state = response.initLockState();
  // A lock that lets its owner write carries the file's fencing token
  // (Chubby's sequencers, Kleppmann's fencing tokens), new and higher
  // whenever the write lock passes to another owner; the same owner taking
  // it again with no one between keeps its own. A writer that let go had
  // finished its writes; one whose lease ran out may still be writing,
  // unaware: then the next grant of any lock on the file brings a new token
  // and asks its owner to announce it to the file's servers before it reads
  // (remote_page_io.h), so they refuse the old one from then on.
  bool lost = leases_->take_writer_lost(req.getFileId());
  if (after >= LockLevel::kReserved || lost) {
    Grant& grant = grants_[req.getFileId()];
    if (lost || grant.token == 0 || grant.owner != req.getOwner()) {
      auto token = next_token();
      if (!token) {
        (void)leases_->set_level(req.getFileId(), req.getOwner(),
                                 before < LockLevel::kReserved ? before : LockLevel::kShared);
        return token.status().with_context("lock: no fencing token");
      }
      live_tokens_.erase(grant.token);
      grant = {*token, req.getOwner()};
      live_tokens_[*token] = req.getFileId();
    }
    state.setFenceToken(grant.token);
    state.setFenceAnnounce(lost);
  }
  state.setSizePages(record->size_pages);
  state.setReplicaVersion(record->replica_version);
  state.setVersion(leases_->version(req.getFileId()));
  state.setLevel(static_cast<uint8_t>(leases_->level(req.getFileId(), req.getOwner())));
  state.setReservedByOther(leases_->reserved_by_other(req.getFileId(), req.getOwner()));
  state.setLeaseMs(static_cast<uint32_t>(leases_->lease().count()));
  return Status::ok();
}

}  // namespace pagefile::net
