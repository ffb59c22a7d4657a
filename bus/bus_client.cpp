#include "bus/bus_client.h"

#include <future>
#include <thread>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <kj/exception.h>

#include "bus/bus_client_impl.h"
#include "bus/bus_faults.h"
#include "core/random_id.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

// ---- Reply -----------------------------------------------------------------

Reply::Reply(Frame frame)
    : frame_(std::move(frame)),
      reader_(kj::ArrayPtr<const capnp::word>(frame_.data(), frame_.size()), frame_reader_options()),
      root_(reader_.getRoot<wire::Response>()) {}

Result<std::shared_ptr<Reply>> Reply::parse(Frame frame) {
  try {
    std::shared_ptr<Reply> reply(new Reply(std::move(frame)));
    // Touch the fields every caller reads, so a malformed frame fails here.
    (void)reply->root_.getId();
    (void)reply->root_.which();
    return reply;
  } catch (const kj::Exception& e) {
    return Status::corruption("response", fmt::format("malformed message: {}", e.getDescription().cStr()));
  }
}

// ---- BusClient::Impl ---------------------------------------------------------

BusClient::Impl::Impl(const BusConfig& config, const BusOptions& options, uint64_t owner)
    : config_(config),
      options_(options),
      request_timeout_ms_(options.request_timeout_ms),
      owner_(owner),
      runtime_(options.runtime ? options.runtime : IoRuntime::shared()) {
  for (const Address& a : config_.servers) loads_.emplace(a.text(), std::make_unique<PeerLoad>());
}

namespace {
// The first segment of a request's frame: room for any request that
// carries no pages (a read's is about 20 words).
constexpr size_t kRequestWords = 64;

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}
}  // namespace

BusClient::Load BusClient::Impl::load(const std::string& server) const {
  auto it = loads_.find(server);
  if (it == loads_.end()) return {};
  const PeerLoad& l = *it->second;
  // Gone servers go after every other current copy (stale copies, at the
  // most, after them).
  if (l.gone.load(std::memory_order_relaxed)) return {std::numeric_limits<uint32_t>::max() - 1, 0};
  return {l.in_flight.load(std::memory_order_relaxed),
          std::max(l.busy_since_ns.load(std::memory_order_relaxed), l.last_answer_ns.load(std::memory_order_relaxed))};
}

Status BusClient::Impl::start() {
  if (!config_.tls.empty()) {
    auto tls = make_tls_context(config_.tls, TlsSide::kClient);
    if (!tls) return tls.status().with_context("bus");
    tls_ = std::move(*tls);
  }
  for (const Address& address : config_.embedded) {
    ServerOptions server_options = options_.embedded;
    server_options.dir = config_.home / address.path;
    server_options.checksums = server_options.checksums && config_.checksums;
    auto server = PageServer::start(server_options, address, &hub_, runtime_);
    if (!server) return server.status().with_context(fmt::format("embedded server {}", address.text()));
    if (address.text() == config_.servers[config_.catalog].text()) embedded_catalog_ = server->get();
    auto& direct = embedded_by_name_[address.text()] = std::make_unique<Direct>();
    direct->server = server->get();
    embedded_.push_back(std::move(*server));
  }
  catalog_name_ = config_.catalog_name();
  if (!config_.etcd.empty()) {
    etcd_catalog_ = std::make_unique<CatalogService>(std::filesystem::path(), options_.embedded.lease, nullptr,
                                                     config_.etcd);
    // Leases every third of their length; the live servers twice a second.
    renewer_ = std::thread([this] {
      auto last_renew = Clock::now();
      MutexLock lock(mu_);
      while (!stopping_) {
        auto now = Clock::now();
        bool renew = now >= last_renew + renew_every();
        if (renew) last_renew = now;
        lock.unlock();
        if (renew) renew_leases();
        watch_servers();
        lock.lock();
        if (stopping_) return;
        cv_.wait_for(mu_, std::min<Clock::duration>(std::chrono::milliseconds(500),
                                                     last_renew + renew_every() - Clock::now()));
      }
    });
  }
  service_ = std::thread([this] { service_loop(); });
  return Status::ok();
}

void BusClient::Impl::stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
  }
  // Say goodbye to the catalog so our locks go now, not when the lease ends.
  // The callbacks may outlive this wait (a stuck catalog), so they share
  // ownership of what they touch.
  std::set<uint64_t> owners;
  {
    MutexLock lock(owners_mu_);
    owners.swap(lock_owners_);
  }
  for (uint64_t owner : owners) {
    auto said = std::make_shared<std::promise<void>>();
    call(catalog_name_, [owner](wire::Request::Builder r) { r.setReleaseOwner(owner); },
         [said](Result<ReplyPtr>) { said->set_value(); });
    said->get_future().wait_for(std::chrono::milliseconds(options_.connect_timeout_ms));
  }
  std::vector<std::shared_ptr<Connection>> connections;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    stopping_now_ = true;
    for (auto& [name, peer] : peers_) {
      if (peer.connection) connections.push_back(peer.connection);
      peer.queued.clear();  // fail_server below fails their requests
    }
  }
  cv_.notify_all();
  if (service_.joinable()) service_.join();
  if (renewer_.joinable()) renewer_.join();
  {
    // A connect in flight ends within its timeout; it then sees stopping_.
    MutexLock lock(mu_);
    while (connects_in_flight_ != 0) cv_.wait(mu_);
    for (auto& [name, peer] : peers_) {
      if (peer.connection) connections.push_back(peer.connection);
    }
  }
  for (auto& c : connections) c->close();
  fail_server("", Status::disconnected("bus", "client is stopping"));
  {
    MutexLock lock(mu_);
    peers_.clear();
  }
  for (auto& server : embedded_) server->stop();
  embedded_.clear();
}

void BusClient::Impl::call(const std::string& server, const Build& build, Callback done) {
  // Built in the frame that goes out (no copy), whose first segment holds
  // a request that carries no pages; a page spills to a second one.
  // (capnp's MallocMessageBuilder would zero 8 KiB for every request, and
  // the frame be a copy.)
  FrameBuilder message(kRequestWords);
  auto request = message.initRoot<wire::Request>();
  request.setVersion(wire::PROTOCOL_VERSION);
  build(request);
  if (embedded_catalog_ != nullptr && server == catalog_name_ && is_catalog_request(request)) {
    // In this process: answered here, on this thread, with no hand-over.
    // (Still encoded and decoded, so it is the same request and answer as
    // on the wire.)
    if (stopping_now_) {
      done(Status::disconnected("bus", "client is stopping"));
      return;
    }
    done(checked(server, embedded_catalog_->catalog_direct(message.finish())));
    return;
  }
  if (etcd_catalog_ != nullptr && server == catalog_name_) {
    // This client's own front of the catalog on etcd: answered here.
    if (stopping_now_) {
      done(Status::disconnected("bus", "client is stopping"));
      return;
    }
    if (!is_catalog_request(request)) {
      done(Status::invalid_argument(server, "is the catalog on etcd; it serves no pages"));
      return;
    }
    done(checked(server, etcd_catalog_->respond(request.asReader())));
    return;
  }
  // Counted until answered (however: reply, error, timeout, stop).
  PeerLoad* waiting = nullptr;
  if (auto it = loads_.find(server); it != loads_.end()) waiting = it->second.get();
  Direct* direct = nullptr;
  if (auto it = embedded_by_name_.find(server);
      it != embedded_by_name_.end() && (request.isWrite() || request.isTruncate() || request.isDropShare())) {
    direct = it->second.get();
  }
  // A connection idle for a while may have been closed by its server
  // (pagefiled --idle-timeout-s) without this side reading it yet: a look,
  // which does not wait, lets its end be seen now, so that this request
  // goes on a new connection instead of failing on the old one.
  if (waiting != nullptr && waiting->in_flight.load() == 0 &&
      steady_ns() - waiting->last_answer_ns.load() > kIdleLookNs) {
    see_if_closed(server);
  }
  if (waiting != nullptr || direct != nullptr) {
    if (waiting != nullptr && waiting->in_flight.fetch_add(1) == 0) waiting->busy_since_ns = steady_ns();
    if (direct != nullptr) ++direct->changing;
    done = [waiting, direct, done = std::move(done)](Result<ReplyPtr> r) {
      if (waiting != nullptr) {
        waiting->last_answer_ns = steady_ns();
        --waiting->in_flight;
      }
      if (direct != nullptr) --direct->changing;
      done(std::move(r));
    };
  }
  std::shared_ptr<Connection> connection;
  Frame frame;
  uint64_t id = 0;
  bool silent = false;
  {
    MutexLock lock(mu_);
    if (stopping_) {
      // Not under our lock: the callback may call back into the bus.
      id = 0;
    } else {
      Peer& peer = peers_[server];
      auto now = Clock::now();
      // A silent server's request fails below, outside the lock.
      silent = peer.silent_until > now && !request.isPing();
      if (!silent) {
        id = next_id_++;
        request.setId(id);
        frame = message.finish();
        pending_.emplace(id, Pending{std::move(done), server, now + std::chrono::milliseconds(request_timeout_ms_)});
        if (peer.connection) {
          connection = peer.connection;
        } else {
          peer.name = server;
          peer.queued.emplace_back(id, std::move(frame));
          if (!peer.connecting) {
            // Connecting may take up to connect_timeout_ms: on the work pool.
            peer.connecting = true;
            ++connects_in_flight_;
            boost::asio::post(runtime_->work(), [self = shared_from_this(), server] { self->connect_peer(server); });
          }
        }
      }
    }
  }
  if (silent) {
    done(Status::disconnected(server, fmt::format("did not answer a request within {} ms; failing at once until "
                                                  "it answers again",
                                                  request_timeout_ms_.load())));
    return;
  }
  if (id == 0) {
    done(Status::disconnected("bus", "client is stopping"));
    return;
  }
  if (connection) send_frame(connection, std::move(frame));
}

void BusClient::Impl::send_frame(const std::shared_ptr<Connection>& connection, Frame frame) {
  if (auto fault = BusFaults::next()) {  // bus/bus_faults.h
    if (*fault == BusFault::kDrop) return;
    if (*fault == BusFault::kClose) return connection->close();
    std::this_thread::sleep_for(BusFaults::delay());
  }
  connection->send(std::move(frame));
}

PageServer* BusClient::Impl::direct_server(const std::string& server) {
  auto it = embedded_by_name_.find(server);
  if (it == embedded_by_name_.end() || it->second->changing > 0 || stopping_now_) return nullptr;
  return it->second->server;
}

std::optional<Status> BusClient::Impl::read_direct(const std::string& server, const ShareRef& share,
                                                   int64_t page, std::span<std::byte> out) {
  PageServer* direct = direct_server(server);
  if (direct == nullptr) return std::nullopt;
  return direct->read_direct(share, page, out);
}

std::optional<Status> BusClient::Impl::write_direct(const std::string& server, const ShareRef& share,
                                                    int64_t page, std::span<const std::byte> data, uint64_t checksum) {
  PageServer* direct = direct_server(server);
  if (direct == nullptr) return std::nullopt;
  return direct->write_direct(share, page, data, checksum);
}

void BusClient::Impl::watch_servers() {
  if (!watcher_) {
    EtcdCatalog::Options options;
    options.endpoints = config_.etcd;
    auto opened = EtcdCatalog::open(options);
    if (!opened) return;  // tried again at the next renewal
    watcher_ = std::move(*opened);
  }
  auto live = watcher_->live_servers();
  if (!live) return;  // etcd unreachable: what is known stays
  for (auto& [name, l] : loads_) {
    bool registered = std::find(live->begin(), live->end(), name) != live->end();
    // A server that never registered (not started with --catalog) is
    // never taken for gone.
    l->seen_live = l->seen_live || registered;
    l->gone.store(l->seen_live && !registered, std::memory_order_relaxed);
  }
}

void BusClient::Impl::service_loop() {
  auto next_expiry = Clock::now();
  auto last_renew = Clock::now();
  MutexLock lock(mu_);
  while (!stopping_) {
    // Often while answers may be waiting for the sweep; seldom else.
    cv_.wait_for(mu_, pending_.empty() ? std::chrono::milliseconds(20) : std::chrono::milliseconds(1));
    if (stopping_) return;
    sweep();
    auto now = Clock::now();
    if (now >= next_expiry) {
      next_expiry = now + std::chrono::milliseconds(50);
      expire();
    }
    if (now >= last_renew + renew_every() && !etcd_catalog_) {
      last_renew = now;
      lock.unlock();
      renew_leases();
      lock.lock();
    }
  }
}

void BusClient::Impl::expire() {
  // Requests past their deadline fail; a late answer is then ignored.
  auto now = Clock::now();
  std::vector<std::pair<Callback, std::string>> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.deadline <= now) {
      // Given up on, a request may still reach a server in this process
      // and run late: direct page work there must not pass it until its
      // late answer comes (forget_late).
      if (auto e = embedded_by_name_.find(it->second.server); e != embedded_by_name_.end()) {
        ++e->second->changing;
        late_.emplace(it->first, it->second.server);
      }
      peers_[it->second.server].silent_until = now + std::chrono::milliseconds(request_timeout_ms_);
      expired.emplace_back(std::move(it->second.done), it->second.server);
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  if (expired.empty()) return;
  mu_.unlock();
  for (auto& [done, server] : expired) {
    done(Status::disconnected(server, fmt::format("no answer within {} ms", request_timeout_ms_.load())));
  }
  note_progress();
  mu_.lock();
}

void BusClient::Impl::forget_late(uint64_t id) {
  auto it = late_.find(id);
  if (it == late_.end()) return;
  if (auto e = embedded_by_name_.find(it->second); e != embedded_by_name_.end()) --e->second->changing;
  late_.erase(it);
}

void BusClient::Impl::on_frame(const std::string& server, Frame frame) {
  auto reply = Reply::parse(std::move(frame));
  if (!reply) {
    // Without an id it belongs to no request; the stream cannot be trusted.
    fail_server(server, reply.status().with_context(server));
    return;
  }
  Callback done;
  {
    MutexLock lock(mu_);
    if (auto p = peers_.find(server); p != peers_.end()) p->second.silent_until = {};  // it answers
    auto it = pending_.find((*reply)->root().getId());
    if (it == pending_.end() && (*reply)->root().getId() == 0 && (*reply)->root().isError()) {
      // Id 0 answers no request: the server refuses this connection
      // (too many connections, say) and says why before it hangs up.
      lock.unlock();
      fail_server(server, from_wire((*reply)->root().getError()).with_context(server));
      return;
    }
    if (it == pending_.end()) {  // answered after its deadline
      forget_late((*reply)->root().getId());
      return;
    }
    done = std::move(it->second.done);
    pending_.erase(it);
  }
  done(checked(server, std::move(*reply)));
  // (On a connection read by its waiters, read_as_waiter() says so once per batch.)
  if (!reading_here_) note_progress();
}

Result<ReplyPtr> BusClient::Impl::checked(const std::string& server, ReplyPtr reply) {
  auto root = reply->root();
  if (root.getVersion() != wire::PROTOCOL_VERSION) {
    return Status::not_supported(server, fmt::format("server speaks protocol version {}, this client {}",
                                                     root.getVersion(), wire::PROTOCOL_VERSION));
  }
  if (root.isError()) return from_wire(root.getError());
  return reply;
}

Result<ReplyPtr> BusClient::Impl::checked(const std::string& server, Frame answer) {
  auto reply = Reply::parse(std::move(answer));
  if (!reply) return reply.status().with_context(server);
  return checked(server, std::move(*reply));
}

// ---- BusClient ---------------------------------------------------------------

Result<std::unique_ptr<BusClient>> BusClient::start(const BusConfig& config, const BusOptions& options) {
  if (config.servers.empty()) return Status::invalid_argument("bus", "names no servers");
  uint64_t owner = random_id() ^ static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  if (owner == 0) owner = 1;
  auto impl = std::make_shared<Impl>(config, options, owner);
  if (Status s = impl->start(); !s) {
    impl->stop();
    return s;
  }
  std::vector<std::string> servers;
  for (const auto& a : config.servers) servers.push_back(a.text());
  std::string catalog = config.catalog_name();
  return std::unique_ptr<BusClient>(
      new BusClient(std::move(impl), std::move(catalog), std::move(servers), owner, config.replicas));
}

BusClient::BusClient(std::shared_ptr<Impl> impl, std::string catalog, std::vector<std::string> servers,
                     uint64_t owner, uint32_t default_replicas)
    : impl_(std::move(impl)),
      catalog_(std::move(catalog)),
      servers_(std::move(servers)),
      default_replicas_(default_replicas),
      owner_(owner) {}

BusClient::Load BusClient::load(const std::string& server) const { return impl_->load(server); }

BusClient::~BusClient() { impl_->stop(); }

void BusClient::call(const std::string& server, const Build& build, Callback done) {
  impl_->call(server, build, std::move(done));
}

Result<ReplyPtr> BusClient::call_sync(const std::string& server, const Build& build) {
  // Shared with the callback, which may still be returning when the wait
  // below sees it done.
  struct Outcome {
    std::optional<Result<ReplyPtr>> result;
    std::atomic<bool> done{false};
  };
  auto outcome = std::make_shared<Outcome>();
  impl_->call(server, build, [outcome](Result<ReplyPtr> r) {
    outcome->result = std::move(r);
    outcome->done.store(true, std::memory_order_release);
  });
  while (!outcome->done.load(std::memory_order_acquire)) impl_->read_as_waiter(server, kWaiterSlice);
  return std::move(*outcome->result);
}

void BusClient::read_as_waiter(const std::string& server, std::chrono::milliseconds timeout) { impl_->read_as_waiter(server, timeout); }

void BusClient::wake_waiters() { impl_->note_progress(); }

std::optional<Status> BusClient::read_direct(const std::string& server, const ShareRef& share, int64_t page,
                                             std::span<std::byte> out) {
  return impl_->read_direct(server, share, page, out);
}

std::optional<Status> BusClient::write_direct(const std::string& server, const ShareRef& share, int64_t page,
                                              std::span<const std::byte> data, uint64_t checksum) {
  return impl_->write_direct(server, share, page, data, checksum);
}

bool BusClient::has_embedded() const { return impl_->has_embedded(); }

bool BusClient::all_direct() const { return impl_->all_direct(); }

void BusClient::set_holds_locks(uint64_t owner, bool holds) { impl_->set_holds_locks(owner, holds); }
bool BusClient::lease_lost(uint64_t owner) { return impl_->lease_lost(owner); }
uint64_t BusClient::new_owner() { return impl_->new_owner(); }
void BusClient::note_lease(std::chrono::milliseconds lease) { impl_->note_lease(lease.count()); }

void BusClient::set_request_timeout(int ms) { impl_->set_request_timeout(ms); }

}  // namespace pagefile::net
