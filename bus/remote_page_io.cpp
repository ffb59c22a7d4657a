#include "bus/remote_page_io.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "bus/barrier.h"
#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

// A setSize request of `record` to `pages`, under fencing token `fence`.
void set_size(wire::Request::Builder r, const FileRecord& record, int64_t pages, bool grow_only, uint64_t fence) {
  auto set = r.initSetSize();
  set.setFileId(record.id);
  set.setPages(pages);
  set.setGrowOnly(grow_only);
  r.setLockToken(fence);
  r.setCluster(record.cluster);
}

}  // namespace

Result<std::unique_ptr<RemotePageIo>> RemotePageIo::open(std::shared_ptr<BusClient> bus,
                                                         std::string_view name,
                                                         const OpenOptions& options) {
  if (options.stripe_pages == 0) return Status::invalid_argument(name, "stripe_pages must be at least 1");
  if (options.servers > bus->servers().size()) {
    return Status::invalid_argument(
        name, fmt::format("asks for {} servers; the bus has {}", options.servers, bus->servers().size()));
  }
  size_t server_count = options.servers == 0 ? bus->servers().size() : options.servers;
  if (options.replicas != 0) {
    if (Status s = check_replicas(options.replicas, server_count); !s) return s.with_context(name);
  }
  auto reply = bus->call_sync(bus->catalog(), [&](wire::Request::Builder r) {
    auto open = r.initOpen();
    open.setName(std::string(name));
    open.setCreate(options.create);
    open.setExclusive(options.exclusive);
    open.setPageSize(options.page_size);
    open.setPlacement(static_cast<uint8_t>(options.placement));
    open.setStripePages(options.stripe_pages);
    auto servers = open.initServers(static_cast<unsigned>(server_count));
    for (unsigned i = 0; i < server_count; ++i) servers.set(i, bus->servers()[i]);
    to_wire(options.policy.value_or(BufferPolicy{}), open.initPolicy());
    open.setReplicas(static_cast<uint8_t>(options.replicas));
    open.setCreateReplicas(static_cast<uint8_t>(bus->default_replicas()));
  });
  if (!reply) return reply.status();
  if (!(*reply)->root().isFile()) return Status::corruption(name, "catalog answered open without a record");
  auto checked = from_wire((*reply)->root().getFile());
  if (!checked) return checked.status();
  FileRecord record = std::move(*checked);
  // The servers' pools run the policy this descriptor runs: the one given at
  // open, else the one the file was created with.
  std::string policy(policy_name(options.policy.value_or(record.policy)));
  auto fence = options.lock_token ? options.lock_token : std::make_shared<std::atomic<uint64_t>>(0);
  auto io = std::unique_ptr<RemotePageIo>(new RemotePageIo(std::move(bus), std::move(record), std::move(policy),
                                                            options, std::move(fence)));
  io->learn_directories();
  return io;
}

Status RemotePageIo::unlink(BusClient& bus, std::string_view name, uint64_t lock_token) {
  auto reply = bus.call_sync(bus.catalog(), [&](wire::Request::Builder r) {
    r.setUnlink(std::string(name));
    r.setLockToken(lock_token);
  });
  if (!reply) return reply.status();
  // The name is gone; now free the pages. Only what that needs is taken
  // from the record, unchecked: a record the catalog let go of is not
  // refused here, or its pages would stay for ever.
  auto removed = (*reply)->root().getFile();
  FileRecord record;
  record.id = removed.getId();
  record.page_size = removed.getPageSize();
  record.cluster = removed.getCluster();
  for (auto address : removed.getServers()) record.servers.emplace_back(address);
  for (uint64_t directory : removed.getDirectories()) record.directories.push_back(directory);
  // A server that is down keeps its share until it is cleaned by hand: say
  // so, unless the file kept copies: then service goes on while servers are
  // down, and a share whose file id is gone is only space (ids are never
  // given again).
  Barrier barrier(bus);
  for (size_t i = 0; i < record.servers.size(); ++i) {
    const std::string& server = record.servers[i];
    bus.call(server, [&](wire::Request::Builder r) { share_to_wire(record, directory_of(record, i), 0, r.initDropShare()); }, barrier.arm(server));
  }
  Status s = barrier.wait();
  auto failures = barrier.failures();
  bool all_missed = std::all_of(failures.begin(), failures.end(), [](const auto& f) { return missed(f.second); });
  if (!s && !(removed.getReplicas() > 1 && all_missed)) {
    return s.with_context(fmt::format("{}: removed from the catalog, but a server kept its pages", name));
  }
  return Status::ok();
}

RemotePageIo::RemotePageIo(std::shared_ptr<BusClient> bus, FileRecord record, std::string policy,
                           const OpenOptions& options, std::shared_ptr<std::atomic<uint64_t>> fence)
    : bus_(std::move(bus)),
      record_(std::move(record)),
      policy_(std::move(policy)),
      placement_(record_.placement, record_.id, record_.stripe_pages, placement_keys_of(record_), record_.replicas),
      read_only_(options.read_only),
      checksums_(options.checksums),
      sector_checksums_(options.sector_checksums),
      fence_(std::move(fence)),
      owner_(bus_->new_owner()),
      size_(record_.size_pages),
      catalog_size_(record_.size_pages),
      copy_states_(new std::atomic<uint8_t>[record_.servers.size()]),
      directories_(new std::atomic<uint64_t>[record_.servers.size()]) {
  for (size_t i = 0; i < record_.servers.size(); ++i) directories_[i] = directory_of(record_, i);
  (void)take_copy_states(record_);
}

bool RemotePageIo::directories_known(const ReplicaSet& set) const {
  return std::all_of(set.begin(), set.end(), [this](uint32_t server) { return directory_known(server); });
}

void RemotePageIo::learn_directory(uint32_t server, std::function<void()> then) {
  // (The answer may come after this descriptor is gone: it keeps the
  // directories alive.)
  bus_->learn_directory_async(record_.cluster, record_.servers[server],
                              [directories = directories_, server, then = std::move(then)](uint64_t found) {
                                if (found != 0) directories[server].store(found, std::memory_order_release);
                                if (then) then();
                              });
}

void RemotePageIo::learn_directories() {
  // Reads need not wait: a server whose directory the catalog does not know
  // answers them as the directory it has now, which is what would be
  // recorded.
  for (uint32_t server = 0; server < record_.servers.size(); ++server) {
    if (!directory_known(server)) learn_directory(server, nullptr);
  }
}

void RemotePageIo::know_directories(const ReplicaSet& set, std::function<void()> then) {
  ReplicaSet unknown;
  for (uint32_t server : set) {
    if (!directory_known(server)) unknown.index[unknown.count++] = server;
  }
  if (unknown.count == 0) return then();  // (learned by another write since the caller looked)
  // A server that could not be reached at open: asked now, before it takes
  // pages whose loss it could otherwise not tell; without waiting, since
  // this may run where answers are delivered. One that still cannot be
  // reached is written unchecked (and most likely misses the write).
  auto left = std::make_shared<std::atomic<uint32_t>>(unknown.count);
  auto go = std::make_shared<std::function<void()>>(std::move(then));
  for (uint32_t server : unknown) {
    learn_directory(server, [left, go] {
      if (left->fetch_sub(1) == 1) (*go)();
    });
  }
}

RemotePageIo::~RemotePageIo() { (void)close(); }

void RemotePageIo::set_page_share(wire::Share::Builder share, uint32_t server) const {
  share_to_wire(record_, directory(server), fence_->load(), share);
  share.setPolicy(policy_);
  share.setSectorChecksums(sector_checksums_);
  // A server reading ahead for global-sequential keeps to its own pages,
  // which it can tell only under placement stripe.
  if (record_.placement == Placement::kStripe) {
    share.setStripePages(record_.stripe_pages);
    share.setServerCount(static_cast<uint32_t>(record_.servers.size()));
    share.setServerIndex(server);
    share.setReplicas(static_cast<uint8_t>(record_.replicas));
  }
}

const std::string& RemotePageIo::server_of(int64_t page) const {
  return record_.servers[placement_.server_for(page)];
}

void RemotePageIo::build_read(wire::Request::Builder r, int64_t page, uint32_t server) const {
  auto read = r.initRead();
  set_page_share(read.initShare(), server);
  read.setPage(page);
  read.setCount(1);
}

Result<PageRead> RemotePageIo::take_read(int64_t page, Result<ReplyPtr> reply, std::span<std::byte> out,
                                         uint32_t server_index) const {
  if (Status s = take_bytes(page, std::move(reply), out, server_index); !s) return s;
  return finish_read(page, out);
}

Status RemotePageIo::take_bytes(int64_t page, Result<ReplyPtr> reply, std::span<std::byte> out,
                                uint32_t server_index) const {
  uint32_t page_size = record_.page_size;
  const std::string& server = record_.servers[server_index];
  if (!reply) return reply.status().with_context(fmt::format("{}: read page {} from server {}", record_.name, page, server));
  auto root = (*reply)->root();
  if (!root.isPages() || root.getPages().size() != page_size) {
    return Status::corruption(record_.name, fmt::format("read page {}: server {} sent a wrong answer (kind {}, {} "
                                                        "bytes of pages, id {})",
                                                        page, server, static_cast<int>(root.which()),
                                                        root.isPages() ? root.getPages().size() : 0, root.getId()));
  }
  std::memcpy(out.data(), root.getPages().begin(), page_size);
  auto sums = root.getChecksums();
  if (checksums_ && sums.size() != 1) {
    return Status::corruption(record_.name, fmt::format("read page {}: server {} sent no checksum with it "
                                                        "(does it run --no-checksums?)", page, server));
  }
  return check_received(page, out, checksums_ ? sums[0] : kNoChecksum, server);
}

Status RemotePageIo::check_received(int64_t page, std::span<const std::byte> bytes, uint64_t checksum,
                                    const std::string& server) const {
  if (!checksums_ || page_checksum(bytes, page) == checksum) return Status::ok();
  return checksum_mismatch(record_.name, page, fmt::format("as received from server {}", server));
}

PageRead RemotePageIo::finish_read(int64_t page, std::span<std::byte> out) const {
  if (page < size_.load()) return PageRead::kData;
  // Past the end as this client knows it: zeros, whatever a server still
  // holds there.
  std::memset(out.data(), 0, out.size());
  return PageRead::kBeyondEnd;
}

void RemotePageIo::read_async(int64_t page, std::span<std::byte> out, ReadDone done) {
  if (replicas() > 1) return read_copy(page, out, std::move(done), read_order(page), 0, Status::ok(), 0);
  uint32_t server = static_cast<uint32_t>(placement_.server_for(page));
  bus_->call(
      record_.servers[server], [&](wire::Request::Builder r) { build_read(r, page, server); },
      [this, page, out, server, done = std::move(done)](Result<ReplyPtr> reply) {
        done(take_read(page, std::move(reply), out, server));
      });
}

ReplicaSet RemotePageIo::read_order(int64_t page) const {
  ReplicaSet set = placement_.replicas_for(page);
  // Equally busy copies: the one the page picks (a multiplicative hash),
  // so each page is read from, and cached on, one server while load is even.
  uint32_t start = static_cast<uint32_t>(((static_cast<uint64_t>(page) * 0x9E3779B97F4A7C15ull) >> 32) % set.count);
  std::rotate(set.index.begin(), set.index.begin() + start, set.index.begin() + set.count);
  std::array<BusClient::Load, kMaxReplicas> busy{};
  for (uint32_t k = 0; k < set.count; ++k) busy[k] = bus_->load(record_.servers[set.index[k]]);
  // Copies not current go last, tried only when no current one answers
  // (which the catalog's rule makes impossible, unless the states here are
  // old): a stale copy's bytes may be old, never taken while another is there.
  for (uint32_t k = 0; k < set.count; ++k) {
    if (state_of(set.index[k]) != CopyState::kCurrent) busy[k].in_flight = std::numeric_limits<uint32_t>::max();
  }
  // Insertion sort by how busy, stable (R is at most 7).
  for (uint32_t k = 1; k < set.count; ++k) {
    for (uint32_t j = k; j > 0 && busy[j] < busy[j - 1]; --j) {
      std::swap(busy[j], busy[j - 1]);
      std::swap(set.index[j], set.index[j - 1]);
    }
  }
  return set;
}

void RemotePageIo::read_copy(int64_t page, std::span<std::byte> out, ReadDone done, ReplicaSet order, uint32_t k,
                             Status first, uint32_t damaged) {
  uint32_t server = order.index[k];
  track(page, server, +1);
  bus_->call(
      record_.servers[server], [&](wire::Request::Builder r) { build_read(r, page, server); },
      [this, page, out, done = std::move(done), order, k, first = std::move(first), damaged,
       server](Result<ReplyPtr> reply) mutable {
        track(page, server, -1);
        auto got = take_read(page, std::move(reply), out, server);
        if (got) {
          // (Not from zeros put in for a page past this client's end.)
          if (damaged != 0 && *got == PageRead::kData) repair(page, out, order, damaged);
          return done(std::move(got));
        }
        if (got.status().is(Code::kCorruption)) damaged |= 1u << k;
        if (first.is_ok()) first = got.status();
        bool next_current = k + 1 < order.count && state_of(order.index[k + 1]) == CopyState::kCurrent;
        if (!next_current) {
          return done(first.with_context(fmt::format("no copy of {} could be read (of {})", page, order.count)));
        }
        read_copy(page, out, std::move(done), order, k + 1, std::move(first), damaged);
      });
}

void RemotePageIo::repair(int64_t page, std::span<const std::byte> good, const ReplicaSet& order, uint32_t damaged) {
  for (uint32_t k = 0; k < order.count; ++k) {
    if ((damaged & (1u << k)) == 0) continue;
    uint32_t server = order.index[k];
    // Nobody waits for it: a repair that fails leaves the copy as it was,
    // failing its checksum, so the next read repairs it again.
    bus_->call(
        record_.servers[server], [&](wire::Request::Builder r) { build_write(r, page, good, server, /*repair=*/true); },
        [](Result<ReplyPtr>) {});
  }
}

void RemotePageIo::track(int64_t page, uint32_t server, int delta) {
  if (replicas() == 1) return;
  MutexLock lock(flights_mu_);
  auto& waiting = flights_[page];
  if (delta > 0) {
    ++waiting[server];
  } else if (auto it = waiting.find(server); it != waiting.end() && --it->second == 0) {
    waiting.erase(it);
  }
  if (waiting.empty()) flights_.erase(page);
}

const std::string& RemotePageIo::awaited_server(int64_t page) const {
  if (replicas() > 1) {
    MutexLock lock(flights_mu_);
    if (auto it = flights_.find(page); it != flights_.end()) return record_.servers[it->second.begin()->first];
  }
  return server_of(page);
}

bool RemotePageIo::wait_for_progress(int64_t page, std::chrono::milliseconds timeout) {
  bus_->read_as_waiter(awaited_server(page), timeout);
  return true;
}

std::optional<Result<PageRead>> RemotePageIo::read_direct(int64_t page, std::span<std::byte> out) {
  // (Nothing to check: the server in this process checked these very
  // bytes, PageServer::read_direct.)
  uint32_t server = replicas() > 1 ? read_order(page).index[0] : static_cast<uint32_t>(placement_.server_for(page));
  std::optional<Status> done = bus_->read_direct(record_.servers[server], share_ref(server), page, out);
  // A failure goes the usual way, which reports it (and may try again).
  if (!done || !*done) return std::nullopt;
  return finish_read(page, out);
}

void RemotePageIo::build_write(wire::Request::Builder r, int64_t page, std::span<const std::byte> data,
                               uint32_t server, bool repair) const {
  auto write = r.initWrite();
  set_page_share(write.initShare(), server);
  write.setPage(page);
  write.setRepair(repair);
  write.setData(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
  if (checksums_) write.initChecksums(1).set(0, page_checksum(data, page));
}

void RemotePageIo::note_written(int64_t page, size_t server) {
  int64_t size = size_.load();
  while (page >= size && !size_.compare_exchange_weak(size, page + 1)) {
  }
  // Once written, not before: a sync that swapped the set while the write
  // was on its way would otherwise take it as synced and the next sync
  // would skip that server. (Client::sync waits for the writes before it,
  // so each has been noted by the time sync looks.)
  MutexLock lock(dirty_mu_);
  dirty_servers_.insert(server);
}

Status RemotePageIo::announce_fence(uint64_t token) {
  Barrier barrier(*bus_);
  for (size_t i = 0; i < record_.servers.size(); ++i) {
    const std::string& server = record_.servers[i];
    bus_->call(server, [&](wire::Request::Builder r) { share_to_wire(record_, directory(i), token, r.initFence()); },
               barrier.arm(server));
  }
  (void)barrier.wait();
  return settle(barrier.failures());
}

Status RemotePageIo::tell_fence(uint32_t server, uint64_t token) {
  const std::string& address = record_.servers[server];
  Barrier barrier(*bus_);
  bus_->call(address, [&](wire::Request::Builder r) { share_to_wire(record_, directory(server), token, r.initFence()); },
             barrier.arm(address));
  return barrier.wait();
}

void RemotePageIo::write_async(int64_t page, std::span<const std::byte> data, WriteDone done) {
  // Every copy that is not stale at once; done when the last answers: OK
  // when all took it, or when those that missed it could be left behind.
  ReplicaSet all = placement_.replicas_for(page);
  ReplicaSet set;
  for (uint32_t server : all) {
    if (state_of(server) != CopyState::kStale) set.index[set.count++] = server;
  }
  if (set.count == 0) {
    return done(Status::io_error(record_.name, fmt::format("write page {}: every copy of it is stale here; open the "
                                                           "file again", page)));
  }
  if (directories_known(set)) return send_write(page, data, set, std::move(done));
  know_directories(set, [this, page, data, set, done = std::move(done)]() mutable {
    send_write(page, data, set, std::move(done));
  });
}

void RemotePageIo::send_write(int64_t page, std::span<const std::byte> data, const ReplicaSet& set, WriteDone done) {
  struct Join {
    std::atomic<uint32_t> left{0};
    Mutex mu;
    Status first GUARDED_BY(mu);         // the first failure
    bool fatal GUARDED_BY(mu) = false;   // a failure that is not a missed write
    uint32_t took GUARDED_BY(mu) = 0;
    std::vector<uint32_t> missed GUARDED_BY(mu);
    WriteDone done;
  };
  auto join = std::make_shared<Join>();
  join->left = set.count;
  join->done = std::move(done);
  for (uint32_t server : set) {
    track(page, server, +1);
    bus_->call(
        record_.servers[server], [&](wire::Request::Builder r) { build_write(r, page, data, server); },
        [this, page, server, join](Result<ReplyPtr> reply) {
          track(page, server, -1);
          if (reply) note_written(page, server);
          {
            MutexLock lock(join->mu);
            if (reply) {
              ++join->took;
            } else {
              if (join->first.is_ok()) {
                join->first = reply.status().with_context(
                    replicas() == 1 ? fmt::format("{}: write page {}", record_.name, page)
                                    : fmt::format("{}: write page {} to {}", record_.name, page, record_.servers[server]));
              }
              join->fatal = join->fatal || !missed(reply.status());
              join->missed.push_back(server);
            }
          }
          if (join->left.fetch_sub(1) != 1) return;
          Status first;
          std::vector<uint32_t> behind;
          {
            MutexLock lock(join->mu);
            first = join->first;
            if (!join->fatal && join->took > 0) behind = join->missed;
          }
          if (first.is_ok() || behind.empty()) return join->done(std::move(first));
          leave_behind_async(std::move(behind), std::move(first), join->done);
        });
  }
}

std::optional<Status> RemotePageIo::write_direct(int64_t page, std::span<const std::byte> data, ChangedBytes) {
  uint64_t checksum = checksums_ ? page_checksum(data, page) : kNoChecksum;
  for (uint32_t server : placement_.replicas_for(page)) {
    if (state_of(server) == CopyState::kStale) continue;
    if (!directory_known(server)) return std::nullopt;  // the usual way learns it first
    std::optional<Status> done = bus_->write_direct(record_.servers[server], share_ref(server), page, data, checksum);
    // A failure goes the usual way, which reports it (writing a page twice,
    // or a copy of it again, is harmless).
    if (!done || !*done) return std::nullopt;
    note_written(page, server);
  }
  return Status::ok();
}

Status RemotePageIo::record_size() {
  int64_t size = size_.load();
  if (size <= catalog_size_) return Status::ok();
  auto reply = bus_->call_sync(bus_->catalog(), [&](wire::Request::Builder r) {
    set_size(r, record_, size, /*grow_only=*/true, fence_->load());
  });
  if (!reply) return reply.status().with_context(fmt::format("{}: record size", record_.name));
  catalog_size_ = size;
  return Status::ok();
}

int64_t RemotePageIo::adopt_catalog_size(int64_t recorded) {
  int64_t local = size_.load();
  int64_t size = local > catalog_size_ ? std::max(local, recorded) : recorded;
  catalog_size_ = recorded;
  size_ = size;
  return size;
}

Result<int64_t> RemotePageIo::size_pages() {
  MutexLock lock(meta_mu_);
  // A lock's grant carried the size, and no other owner changes it while
  // the lock is held (writers need kReserved and more, which a lock held
  // here keeps them from, or they ended before the grant).
  if (level_ != LockLevel::kNone && size_from_grant_) return size_.load();
  auto reply = stat_again("size");
  if (!reply) return reply.status();
  auto record = (*reply)->root().getFile();
  if (Status s = check_size_pages(record.getSizePages(), record_.name); !s) {
    return Status::corruption(record_.name, fmt::format("the catalog's size: {}", s.message()));
  }
  return adopt_catalog_size(record.getSizePages());
}

bool RemotePageIo::unchanged_since_unlock() const {
  MutexLock lock(meta_mu_);
  return level_ != LockLevel::kNone && unchanged_;
}

Status RemotePageIo::sync() {
  MutexLock meta(meta_mu_);
  std::set<size_t> dirty;
  {
    MutexLock lock(dirty_mu_);
    dirty.swap(dirty_servers_);
  }
  Barrier barrier(*bus_);
  for (size_t server : dirty) {
    bus_->call(record_.servers[server],
               [&](wire::Request::Builder r) { share_to_wire(record_, directory(server), fence_->load(), r.initSync()); },
               barrier.arm(record_.servers[server]));
  }
  (void)barrier.wait();
  // A copy whose server cannot sync is left behind when the others can
  // stand for it: each page written since the last sync went to all of them.
  if (Status s = settle(barrier.failures()); !s) {
    MutexLock lock(dirty_mu_);
    dirty_servers_.insert(dirty.begin(), dirty.end());  // not durable: the next sync tries again
    return s.with_context(fmt::format("{}: sync", record_.name));
  }
  return record_size();
}

Status RemotePageIo::truncate(int64_t pages) {
  if (read_only_) return Status::read_only(record_.name, "truncate: file was opened read-only");
  MutexLock lock(meta_mu_);
  Barrier barrier(*bus_);
  for (size_t i = 0; i < record_.servers.size(); ++i) {
    const std::string& server = record_.servers[i];
    bus_->call(server,
               [&](wire::Request::Builder r) {
                 auto t = r.initTruncate();
                 share_to_wire(record_, directory(i), fence_->load(), t.initShare());
                 t.setPages(pages);
               },
               barrier.arm(server));
  }
  (void)barrier.wait();
  if (Status s = settle(barrier.failures()); !s) return s.with_context(fmt::format("{}: truncate", record_.name));
  auto reply = bus_->call_sync(bus_->catalog(), [&](wire::Request::Builder r) {
    set_size(r, record_, pages, /*grow_only=*/false, fence_->load());
  });
  if (!reply) return reply.status().with_context(fmt::format("{}: truncate", record_.name));
  size_ = pages;
  catalog_size_ = pages;
  return Status::ok();
}

Status RemotePageIo::close() {
  MutexLock lock(meta_mu_);
  Status first = read_only_ ? Status::ok() : record_size();
  if (level_ != LockLevel::kNone) {
    Status s = set_lock_level_locked(LockLevel::kNone);
    if (first.is_ok()) first = s;
  }
  return first;
}

}  // namespace pagefile::net
