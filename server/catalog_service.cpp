#include "server/catalog_service.h"

#include <fmt/format.h>

#include "server/etcd_catalog.h"
#include "server/local_catalog.h"
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
    case wire::Request::RECORD_DIRECTORY:
      return true;
    default:
      return false;
  }
}

CatalogService::CatalogService(std::filesystem::path dir, std::chrono::milliseconds lease,
                               ClusterMembership* membership, std::vector<std::string> etcd)
    : dir_(etcd.empty() ? std::move(dir) : std::filesystem::path()), membership_(membership) {
  if (etcd.empty()) {
    opener_ = [path = dir_ / "catalog.db", lease]() -> Result<std::unique_ptr<Catalog>> {
      auto catalog = LocalCatalog::open(path, lease);
      if (!catalog) return catalog.status();
      return std::unique_ptr<Catalog>(std::move(*catalog));
    };
  } else {
    EtcdCatalog::Options options;
    options.endpoints = std::move(etcd);
    options.lease = lease;
    opener_ = [options]() -> Result<std::unique_ptr<Catalog>> {
      auto catalog = EtcdCatalog::open(options);
      if (!catalog) return catalog.status().with_context("catalog on etcd");
      return std::unique_ptr<Catalog>(std::move(*catalog));
    };
  }
}

Frame CatalogService::respond(wire::Request::Reader request) {
  capnp::MallocMessageBuilder message;
  auto response = message.initRoot<wire::Response>();
  response.setId(request.getId());
  response.setVersion(wire::PROTOCOL_VERSION);
  Status s = answer(request, response);
  if (!s) {
    to_wire(s, response.initError());
  } else if (!response.isFile() && !response.isFiles() && !response.isLockState() && !response.isLocks() &&
             !response.isDirectory()) {
    response.setOk();
  }
  return to_frame(message);
}

Status CatalogService::record_to_wire(FileRecord record, wire::FileRecord::Builder out) {
  record.cluster = catalog_->cluster_id();
  record.directories.clear();
  Status first;
  for (const std::string& server : record.servers) {
    auto known = directory_at(server);
    if (!known && first.is_ok()) first = known.status().with_context(fmt::format("directory of server {}", server));
    record.directories.push_back(known ? *known : 0);
  }
  to_wire(record, out);
  return first;
}

Result<uint64_t> CatalogService::directory_at(const std::string& address) {
  // Kept a while: a directory changes only at a replace-server of its
  // address (to itself), which this front forgets at once and another
  // front of a shared catalog within kDirectoriesKept; a record sent
  // meanwhile names the old directory, which the new one refuses (an
  // error, never other bytes). One not recorded yet is kept as unknown as
  // long: another front may record it meanwhile, and a list of many files
  // asks once, not once a file.
  const auto now = std::chrono::steady_clock::now();
  if (auto it = directories_.find(address); it != directories_.end() && now - it->second.read_at < kDirectoriesKept) {
    return it->second.directory;
  }
  auto known = catalog_->directory_at(address);
  if (!known) return known.status();
  directories_[address] = {*known, now};
  return *known;
}

Status CatalogService::records_to_wire(const Result<std::vector<FileRecord>>& records,
                                       wire::Response::Builder response) {
  if (!records) return records.status();
  auto files = response.initFiles(static_cast<unsigned>(records->size()));
  Status first;
  for (unsigned i = 0; i < records->size(); ++i) {
    if (Status s = record_to_wire((*records)[i], files[i]); !s && first.is_ok()) first = s;
  }
  return first;
}

Status CatalogService::open() {
  if (catalog_) return Status::ok();
  if (closed_) return Status::disconnected("server", "is shutting down");
  auto catalog = opener_();
  if (!catalog) return catalog.status();
  if (membership_ != nullptr) {
    if (Status s = membership_->set((*catalog)->cluster_id()); !s) return s;
  }
  catalog_ = std::move(*catalog);
  return Status::ok();
}

namespace {

Status not_a_catalog_request(wire::Request::Reader request) {
  return Status::not_supported("request", fmt::format("unknown request type {}", static_cast<int>(request.which())));
}

}  // namespace

uint64_t CatalogService::lease_expiries() const {
  MutexLock lock(mu_);
  return catalog_ ? catalog_->lease_expiries() : 0;
}

bool CatalogService::present() const {
  std::error_code ec;
  return dir_.empty() || std::filesystem::exists(dir_ / "catalog.db", ec);
}

Status CatalogService::answer_without_catalog(wire::Request::Reader request, wire::Response::Builder response) {
  switch (request.which()) {
    case wire::Request::LIST: response.initFiles(0); return Status::ok();
    case wire::Request::LOCKS: response.initLocks(0); return Status::ok();
    case wire::Request::RELEASE_OWNER: return Status::ok();  // holds nothing here
    case wire::Request::OPEN:
    case wire::Request::STAT:
    case wire::Request::SET_SIZE:
    case wire::Request::UNLINK:
    case wire::Request::SET_COPY_STATE:
    case wire::Request::REPLACE_SERVER:
    case wire::Request::RECORD_DIRECTORY:
    case wire::Request::LOCK:
    case wire::Request::RENEW_LEASE:
      return Status::not_found("catalog", "this server holds none (no file was ever created through it): the "
                                          "bus's catalog is its first server, or the one catalog= names");
    default: return not_a_catalog_request(request);
  }
}

Status CatalogService::may_create() const {
  // A directory that holds a file's pages serves a cluster whose catalog is
  // elsewhere (a client whose bus lists its servers in another order names
  // this one first): a catalog made here would be another cluster's, and
  // give again the ids that name the pages held here, whose writes would
  // then land in them.
  std::error_code ec;
  const std::filesystem::path shares = dir_ / "shares";
  std::filesystem::directory_iterator entries(shares, ec);
  if (ec || entries == std::filesystem::directory_iterator()) return Status::ok();
  uint64_t cluster = membership_ != nullptr ? membership_->cluster() : 0;
  return Status::invalid_argument(
      fmt::format("server {}", dir_.string()),
      fmt::format("holds pages of cluster {:016x} and no catalog, so none is made here: either that cluster's "
                  "catalog is on another server, which the bus must list first (or catalog= name), or this "
                  "server's catalog was lost or moved away; to start a new cluster here, move {} away too (the "
                  "pages of the files the lost catalog listed)",
                  cluster, shares.string()));
}

Status CatalogService::open_existing() {
  MutexLock lock(mu_);
  if (dir_.empty()) return open();  // elsewhere: reachable and answering, or no start
  if (!present()) return Status::ok();
  const std::filesystem::path path = dir_ / "catalog.db";
  Status s = open();
  if (s) return s;
  return Status::from_code(
      s.code(), s.message(),
      fmt::format("pagefiled will not serve it: restore {} from a backup, or move it (with any -wal file "
                  "beside it) and the shares folder beside it (the pages of the files it listed) out of the "
                  "directory to start with an empty catalog, which forgets every file it listed",
                  path.string()));
}

void CatalogService::close() {
  MutexLock lock(mu_);
  catalog_.reset();
  directories_.clear();
  closed_ = true;
}

Status CatalogService::answer(wire::Request::Reader request, wire::Response::Builder response) {
  MutexLock lock(mu_);
  const bool creates = request.which() == wire::Request::OPEN && request.getOpen().getCreate();
  if (!catalog_ && !closed_ && !creates && !present()) return answer_without_catalog(request, response);
  if (!catalog_ && !closed_ && creates && !present()) {
    if (Status s = may_create(); !s) return s;
  }
  if (Status s = open(); !s) return s;
  // A file id means a file only in the cluster that gave it.
  if (uint64_t cluster = request.getCluster(); cluster != 0 && cluster != catalog_->cluster_id()) {
    return Status::stale("catalog", fmt::format("is cluster {:016x}, not {:016x}: the file was opened before the "
                                                "catalog was created again; open it again",
                                                catalog_->cluster_id(), cluster));
  }
  const uint64_t token = request.getLockToken();
  switch (request.which()) {
    case wire::Request::OPEN: return open_file(request.getOpen(), response);
    case wire::Request::STAT: {
      auto found = catalog_->lookup(std::string(request.getStat()));
      if (!found) return found.status();
      return record_to_wire(*found, response.initFile());
    }
    case wire::Request::SET_SIZE: {
      auto req = request.getSetSize();
      return catalog_->set_size(token, req.getFileId(), req.getPages(), req.getGrowOnly());
    }
    case wire::Request::UNLINK: {
      auto removed = catalog_->remove(token, std::string(request.getUnlink()));
      if (!removed) return removed.status();
      // (Removed now: its pages are dropped with what can be said of their
      // directories, unchecked where nothing can.)
      (void)record_to_wire(*removed, response.initFile());
      return Status::ok();
    }
    case wire::Request::LIST: return records_to_wire(catalog_->list(), response);
    case wire::Request::SET_COPY_STATE: {
      auto req = request.getSetCopyState();
      if (req.getState() > static_cast<uint8_t>(CopyState::kResyncing)) {
        return Status::invalid_argument("copy state", fmt::format("unknown state {}", req.getState()));
      }
      auto record = catalog_->set_copy_state(token, req.getFileId(), req.getServer(),
                                             static_cast<CopyState>(req.getState()));
      if (!record) return record.status();
      return record_to_wire(*record, response.initFile());
    }
    case wire::Request::REPLACE_SERVER: {
      auto req = request.getReplaceServer();
      directories_.clear();
      return records_to_wire(catalog_->replace_server(req.getOld(), req.getNew()), response);
    }
    case wire::Request::RECORD_DIRECTORY: {
      auto req = request.getRecordDirectory();
      if (req.getDirectory() == 0 || req.getAddress().size() == 0) {
        return Status::invalid_argument("recordDirectory", "needs an address and a directory id other than 0");
      }
      auto recorded = catalog_->record_directory(req.getAddress(), req.getDirectory());
      if (!recorded) return recorded.status();
      directories_[std::string(req.getAddress())] = {*recorded, std::chrono::steady_clock::now()};
      response.setDirectory(*recorded);
      return Status::ok();
    }
    case wire::Request::LOCK: return set_lock(request.getLock(), response);
    case wire::Request::RENEW_LEASE: return catalog_->renew(request.getRenewLease());
    case wire::Request::RELEASE_OWNER: return catalog_->release_owner(request.getReleaseOwner());
    case wire::Request::LOCKS: {
      auto all = catalog_->locks();
      if (!all) return all.status();
      auto locks = response.initLocks(static_cast<unsigned>(all->size()));
      for (unsigned i = 0; i < all->size(); ++i) {
        locks[i].setFileId((*all)[i].file_id);
        locks[i].setOwner((*all)[i].owner);
        locks[i].setLevel(static_cast<uint8_t>((*all)[i].level));
        locks[i].setExpiresInMs((*all)[i].expires_in.count());
      }
      return Status::ok();
    }
    default: return not_a_catalog_request(request);
  }
}

Status CatalogService::open_file(wire::OpenFile::Reader req, wire::Response::Builder response) {
  std::string name = req.getName();
  auto found = catalog_->lookup(name);
  if (!found && found.status().is(Code::kNotFound) && req.getCreate()) {
    FileRecord proto;
    proto.name = name;
    proto.page_size = req.getPageSize() != 0 ? req.getPageSize() : kDefaultPageSize;
    if (Status s = check_page_size(proto.page_size); !s) return s.with_context(name);
    proto.placement = req.getPlacement() == 1 ? Placement::kHash : Placement::kStripe;
    proto.stripe_pages = req.getStripePages();
    for (auto s : req.getServers()) proto.servers.emplace_back(s);
    proto.policy = from_wire(req.getPolicy());
    proto.replicas = req.getReplicas() != 0       ? req.getReplicas()
                     : req.getCreateReplicas() != 0 ? req.getCreateReplicas()
                                                    : 1;
    auto created = catalog_->create(proto);
    if (created) return record_to_wire(*created, response.initFile());
    // Another client (of a shared catalog) made it first: open that one.
    if (!created.status().is(Code::kAlreadyExists) || req.getExclusive()) return created.status();
    found = catalog_->lookup(name);
  } else if (found && req.getCreate() && req.getExclusive()) {
    return Status::already_exists(name, "exists (create is exclusive)");
  }
  if (!found) {
    if (found.status().is(Code::kNotFound) && !req.getCreate()) {
      return Status::not_found(name, "does not exist (create is false)");
    }
    return found.status();
  }
  if (req.getPageSize() != 0 && req.getPageSize() != found->page_size) {
    return Status::invalid_argument(
        name, fmt::format("has page size {}, opened with page size {}", found->page_size, req.getPageSize()));
  }
  if (req.getReplicas() != 0 && req.getReplicas() != found->replicas) {
    return Status::invalid_argument(name, fmt::format("keeps {} copies of each page, opened with replicas={}",
                                                      found->replicas, req.getReplicas()));
  }
  return record_to_wire(*found, response.initFile());
}

Status CatalogService::set_lock(wire::Lock::Reader req, wire::Response::Builder response) {
  if (req.getLevel() > static_cast<uint8_t>(LockLevel::kExclusive)) {
    return Status::invalid_argument("lock", fmt::format("unknown level {}", req.getLevel()));
  }
  auto grant = catalog_->lock(req.getFileId(), req.getOwner(), static_cast<LockLevel>(req.getLevel()));
  if (!grant) return grant.status();
  auto state = response.initLockState();
  if (grant->fence_token != 0) {
    state.setFenceToken(grant->fence_token);
    state.setFenceAnnounce(grant->fence_announce);
  }
  state.setSizePages(grant->size_pages);
  state.setReplicaVersion(grant->replica_version);
  state.setVersion(grant->version);
  state.setLevel(static_cast<uint8_t>(grant->level));
  state.setReservedByOther(grant->reserved_by_other);
  state.setLeaseMs(static_cast<uint32_t>(grant->lease.count()));
  return Status::ok();
}

}  // namespace pagefile::net
