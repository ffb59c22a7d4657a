#include "bus/bus_client.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <fmt/format.h>
#include <kj/exception.h>

#include "wire/transport.h"
#include "wire/io_thread.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {
// Set while this thread reads a connection for pump() or the sweeper,
// which say once per batch what they delivered (note_progress).
thread_local bool reading_here_ = false;
}  // namespace

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

namespace {

struct Peer {
  std::string name;
  Address address;
  std::shared_ptr<Connection> connection;
  bool connecting = false;
  std::vector<std::pair<uint64_t, Frame>> queued;  // waiting for the connection
};

struct Pending {
  BusClient::Callback done;
  std::string server;
  Clock::time_point deadline;
};

}  // namespace

class BusClient::Impl {
 public:
  Impl(const BusConfig& config, const BusOptions& options, uint64_t owner)
      : config_(config), options_(options), owner_(owner) {}

  Status start();
  void stop();
  void call(const std::string& server, const Build& build, Callback done);
  void set_holds_locks(uint64_t owner, bool holds) {
    std::lock_guard lock(owners_mu_);
    if (holds) {
      lock_owners_.insert(owner);
      lost_owners_.erase(owner);
    } else {
      lock_owners_.erase(owner);
    }
  }
  bool lease_lost(uint64_t owner) {
    std::lock_guard lock(owners_mu_);
    return lost_owners_.count(owner) != 0;
  }
  uint64_t new_owner() { return owner_ + (next_owner_++ << 1); }
  void note_lease(int64_t ms) { lease_ms_ = ms; }

 private:
  void connector_loop();
  void housekeeping_loop();
  // Reads, every millisecond or so while requests are outstanding, the
  // answers on connections read by their waiters that nobody waits for.
  void sweep_loop();
  void on_frame(const std::string& server, Frame frame);
  // What a caller gets for `reply` from `server`: the reply, or the error
  // it carries (or a protocol mismatch).
  static Result<ReplyPtr> checked(const std::string& server, ReplyPtr reply);
  // Likewise for an answer got by direct call, not yet parsed.
  static Result<ReplyPtr> checked(const std::string& server, Frame answer);
  void on_close(const std::string& server, const std::shared_ptr<Connection>& connection,
                const Status& why);
  // Fails every pending request of `server` (all when empty) with `why`.
  void fail_server(const std::string& server, const Status& why);
  // `server` when it runs in this process and page work may go to it by
  // direct call now: nothing that changes its pages is in flight, and the
  // bus is not stopping. Null otherwise.
  PageServer* direct_server(const std::string& server);

  const BusConfig config_;
  const BusOptions options_;
  const uint64_t owner_;

  InprocHub hub_;
  std::vector<std::unique_ptr<PageServer>> embedded_;
  // The catalog when it is one of embedded_: catalog requests go to it by
  // a direct call (PageServer::answer_catalog). Null otherwise.
  PageServer* embedded_catalog_ = nullptr;
  std::string catalog_name_;
  // embedded_ by address text, for page work done by direct call, with
  // the requests that change its pages (write, truncate, drop) sent and not
  // yet answered: direct page work must not overtake them. The map is
  // filled by start() and fixed from then on.
  struct Direct {
    PageServer* server = nullptr;
    std::atomic<uint64_t> changing{0};
  };
  std::map<std::string, std::unique_ptr<Direct>> embedded_by_name_;
  std::atomic<bool> stopping_now_{false};  // stopping_, for direct work to read without mu_

 public:
  void pump(const std::string& server, std::chrono::milliseconds timeout);
  // Something a waiter may wait for happened: wakes the threads in pump()
  // that follow another's reading.
  void note_progress();
  std::optional<Status> read_direct(const std::string& server, const ShareRef& share, int64_t page,
                                    std::span<std::byte> out);
  std::optional<Status> write_direct(const std::string& server, const ShareRef& share, int64_t page,
                                     std::span<const std::byte> data);
  bool has_embedded() const { return !embedded_by_name_.empty(); }
  bool all_at_once() const {
    // (A pool would give global-sequential files a window, read on the pool.)
    return embedded_.size() == config_.servers.size() && options_.embedded.disk_latency.count() == 0 &&
           options_.embedded.cache_pages == 0;
  }

 private:
  asio::io_context io_;
  std::optional<IoThread> io_thread_;
  std::thread connector_;
  std::thread housekeeping_;
  std::thread sweeper_;
  std::atomic<uint64_t> next_owner_{1};
  // Lock owners (one per descriptor that holds a lock) whose leases we renew,
  // and those whose renewal the catalog refused: their locks are gone.
  std::mutex owners_mu_;
  std::set<uint64_t> lock_owners_;  // GUARDED_BY(owners_mu_)
  std::set<uint64_t> lost_owners_;  // GUARDED_BY(owners_mu_)
  std::atomic<int64_t> lease_ms_{1000};  // the catalog's lease, as it last told us

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                           // GUARDED_BY(mu_)
  uint64_t next_id_ = 1;                            // GUARDED_BY(mu_)
  std::map<std::string, Peer> peers_;               // GUARDED_BY(mu_)
  std::deque<std::string> to_connect_;              // GUARDED_BY(mu_)
  std::unordered_map<uint64_t, Pending> pending_;   // GUARDED_BY(mu_)

  // Progress for pump(): a count of deliveries (and of anything else a
  // waiter may wait for), and the threads waiting for it to move.
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> followers_{0};
  std::mutex progress_mu_;
  std::condition_variable progress_cv_;
};

Status BusClient::Impl::start() {
  for (const Address& address : config_.embedded) {
    ServerOptions server_options = options_.embedded;
    server_options.dir = config_.home / address.path;
    auto server = PageServer::start(server_options, address, &hub_);
    if (!server) return server.status().with_context(fmt::format("embedded server {}", address.text()));
    if (address.text() == config_.servers[config_.catalog].text()) embedded_catalog_ = server->get();
    auto& direct = embedded_by_name_[address.text()] = std::make_unique<Direct>();
    direct->server = server->get();
    embedded_.push_back(std::move(*server));
  }
  catalog_name_ = config_.servers[config_.catalog].text();
  io_thread_.emplace(io_);
  connector_ = std::thread([this] { connector_loop(); });
  housekeeping_ = std::thread([this] { housekeeping_loop(); });
  sweeper_ = std::thread([this] { sweep_loop(); });
  return Status::ok();
}

void BusClient::Impl::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
  }
  // Say goodbye to the catalog so our locks go now, not when the lease ends.
  // The callbacks may outlive this wait (a stuck catalog), so they share
  // ownership of what they touch.
  std::set<uint64_t> owners;
  {
    std::lock_guard lock(owners_mu_);
    owners.swap(lock_owners_);
  }
  for (uint64_t owner : owners) {
    auto said = std::make_shared<std::promise<void>>();
    call(config_.servers[config_.catalog].text(),
         [owner](wire::Request::Builder r) { r.setReleaseOwner(owner); },
         [said](Result<ReplyPtr>) { said->set_value(); });
    said->get_future().wait_for(std::chrono::milliseconds(options_.connect_timeout_ms));
  }
  std::vector<std::shared_ptr<Connection>> connections;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    stopping_now_ = true;
    for (auto& [name, peer] : peers_) {
      if (peer.connection) connections.push_back(peer.connection);
      peer.queued.clear();  // fail_server below fails their requests
    }
  }
  cv_.notify_all();
  if (connector_.joinable()) connector_.join();
  if (housekeeping_.joinable()) housekeeping_.join();
  if (sweeper_.joinable()) sweeper_.join();
  for (auto& c : connections) c->close();
  fail_server("", Status::disconnected("bus", "client is stopping"));
  if (io_thread_) io_thread_->finish();
  {
    std::lock_guard lock(mu_);
    peers_.clear();
  }
  for (auto& server : embedded_) server->stop();
  embedded_.clear();
}

void BusClient::Impl::call(const std::string& server, const Build& build, Callback done) {
  capnp::MallocMessageBuilder message;
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
    done(checked(server, embedded_catalog_->answer_catalog(to_frame(message))));
    return;
  }
  if (auto it = embedded_by_name_.find(server);
      it != embedded_by_name_.end() && (request.isWrite() || request.isTruncate() || request.isDropShare())) {
    // Counted until answered (however: reply, error, timeout, stop).
    Direct* direct = it->second.get();
    ++direct->changing;
    done = [direct, done = std::move(done)](Result<ReplyPtr> r) {
      --direct->changing;
      done(std::move(r));
    };
  }
  std::shared_ptr<Connection> connection;
  Frame frame;
  uint64_t id = 0;
  {
    std::lock_guard lock(mu_);
    if (stopping_) {
      // Not under our lock: the callback may call back into the bus.
      id = 0;
    } else {
      id = next_id_++;
      request.setId(id);
      frame = to_frame(message);
      pending_.emplace(id, Pending{std::move(done), server,
                                   Clock::now() + std::chrono::milliseconds(options_.request_timeout_ms)});
      Peer& peer = peers_[server];
      if (peer.connection) {
        connection = peer.connection;
      } else {
        peer.name = server;
        peer.queued.emplace_back(id, std::move(frame));
        if (!peer.connecting) {
          peer.connecting = true;
          to_connect_.push_back(server);
          cv_.notify_all();
        }
      }
    }
  }
  if (id == 0) {
    done(Status::disconnected("bus", "client is stopping"));
    return;
  }
  if (connection) connection->send(std::move(frame));
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
  return direct->read_now(share, page, out);
}

std::optional<Status> BusClient::Impl::write_direct(const std::string& server, const ShareRef& share,
                                                    int64_t page, std::span<const std::byte> data) {
  PageServer* direct = direct_server(server);
  if (direct == nullptr) return std::nullopt;
  return direct->write_now(share, page, data);
}

void BusClient::Impl::connector_loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !to_connect_.empty(); });
    if (stopping_) return;
    std::string server = to_connect_.front();
    to_connect_.pop_front();
    lock.unlock();

    Result<std::shared_ptr<Connection>> connection = Status::invalid_argument(server, "bad address");
    auto address = parse_address(server);
    if (address) {
      // Answers are read by the threads that wait for them; a send may wait
      // for room as long as a request may wait for its answer.
      connection = connect(io_, *address, options_.connect_timeout_ms, &hub_, Connection::Reading::kByWaiter,
                           options_.request_timeout_ms);
    } else {
      connection = address.status();
    }
    if (connection) {
      auto conn = *connection;
      conn->start([this, server](Frame frame) { on_frame(server, std::move(frame)); },
                  [this, server, weak = std::weak_ptr<Connection>(conn)](Status why) {
                    on_close(server, weak.lock(), why);
                  });
    }

    lock.lock();
    Peer& peer = peers_[server];
    peer.connecting = false;
    std::vector<std::pair<uint64_t, Frame>> queued;
    queued.swap(peer.queued);
    if (connection) {
      peer.connection = *connection;
      for (auto& [id, frame] : queued) peer.connection->send(std::move(frame));
      lock.unlock();
      note_progress();  // its waiters may read it now
      lock.lock();
      continue;
    }
    // Could not connect: everything queued for it fails now.
    std::vector<Callback> failed;
    for (auto& [id, frame] : queued) {
      auto it = pending_.find(id);
      if (it != pending_.end()) {
        failed.push_back(std::move(it->second.done));
        pending_.erase(it);
      }
    }
    lock.unlock();
    Status why = connection.status().is(Code::kDisconnected)
                     ? connection.status()
                     : Status::disconnected(server, connection.status().to_string());
    for (auto& done : failed) done(why);
    note_progress();
    lock.lock();
  }
}

void BusClient::Impl::housekeeping_loop() {
  auto next_renew = Clock::now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(50));
    if (stopping_) return;
    // Requests past their deadline fail; a late answer is then ignored.
    auto now = Clock::now();
    std::vector<std::pair<Callback, std::string>> expired;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.deadline <= now) {
        expired.emplace_back(std::move(it->second.done), it->second.server);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    for (auto& [done, server] : expired) {
      // Given up on, the request may still reach a server in this process
      // and run late: direct page work there must never pass it, so from
      // now on that server's work goes the usual way, behind it.
      if (auto it = embedded_by_name_.find(server); it != embedded_by_name_.end()) ++it->second->changing;
      done(Status::disconnected(server, fmt::format("no answer within {} ms", options_.request_timeout_ms)));
    }
    if (!expired.empty()) note_progress();
    if (now >= next_renew) {
      next_renew = now + std::max<int64_t>(20, lease_ms_ / 3) * std::chrono::milliseconds(1);
      std::set<uint64_t> owners;
      {
        std::lock_guard owners_lock(owners_mu_);
        owners = lock_owners_;
      }
      for (uint64_t owner : owners) {
        call(config_.servers[config_.catalog].text(),
             [owner](wire::Request::Builder r) { r.setRenewLease(owner); },
             [this, owner](Result<ReplyPtr> r) {
               // kNotFound: the lease ran out before this renewal and the
               // locks are gone; the owner hears it at its next lock call.
               // (A dead or slow catalog is not proof of loss; retry.)
               if (!r && r.status().is(Code::kNotFound)) {
                 std::lock_guard owners_lock(owners_mu_);
                 if (lock_owners_.erase(owner)) lost_owners_.insert(owner);
               }
             });
      }
    }
    lock.lock();
  }
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
    std::lock_guard lock(mu_);
    auto it = pending_.find((*reply)->root().getId());
    if (it == pending_.end()) return;  // answered after its deadline
    done = std::move(it->second.done);
    pending_.erase(it);
  }
  done(checked(server, std::move(*reply)));
  // (On a connection read by its waiters, pump() says so once per batch.)
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

void BusClient::Impl::on_close(const std::string& server, const std::shared_ptr<Connection>& connection,
                               const Status& why) {
  {
    std::lock_guard lock(mu_);
    auto it = peers_.find(server);
    if (it != peers_.end() && it->second.connection == connection) it->second.connection.reset();
  }
  fail_server(server, Status::disconnected(server, fmt::format("connection lost ({})", why.to_string())));
}

void BusClient::Impl::fail_server(const std::string& server, const Status& why) {
  std::vector<Callback> failed;
  {
    std::lock_guard lock(mu_);
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool queued = false;
      if (auto p = peers_.find(it->second.server); p != peers_.end()) {
        for (auto& [id, frame] : p->second.queued) queued |= id == it->first;
      }
      if ((server.empty() || it->second.server == server) && !queued) {
        failed.push_back(std::move(it->second.done));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& done : failed) done(why);
  note_progress();
}

void BusClient::Impl::pump(const std::string& server, std::chrono::milliseconds timeout) {
  const uint64_t seen = progress_.load();
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mu_);
    if (auto it = peers_.find(server); it != peers_.end()) connection = it->second.connection;
  }
  if (connection && connection->reading() == Connection::Reading::kByWaiter) {
    reading_here_ = true;
    Connection::ReadOutcome outcome = connection->read_frames(timeout);
    reading_here_ = false;
    if (outcome != Connection::ReadOutcome::kBusy) {
      note_progress();  // what was delivered, or that the reading is free
      return;
    }
  }
  // Another thread reads it (or the io thread, or it is being connected):
  // wait for what that delivers.
  std::unique_lock lock(progress_mu_);
  ++followers_;
  progress_cv_.wait_for(lock, timeout, [&] { return progress_.load() != seen; });
  --followers_;
}

void BusClient::Impl::note_progress() {
  // Sequentially consistent with pump()'s follower, which counts itself
  // before it looks at progress_: either it sees this step, or this sees it
  // and wakes it.
  ++progress_;
  if (followers_.load() == 0) return;
  { std::lock_guard lock(progress_mu_); }
  progress_cv_.notify_all();
}

void BusClient::Impl::sweep_loop() {
  std::unique_lock lock(mu_);
  std::vector<std::shared_ptr<Connection>> connections;
  while (!stopping_) {
    // Often while answers may be waiting on those connections; seldom else.
    const bool may_wait = !pending_.empty() && !connections.empty();
    cv_.wait_for(lock, may_wait ? std::chrono::milliseconds(1) : std::chrono::milliseconds(20));
    if (stopping_) return;
    connections.clear();
    for (auto& [name, peer] : peers_) {
      if (peer.connection && peer.connection->reading() == Connection::Reading::kByWaiter) {
        connections.push_back(peer.connection);
      }
    }
    if (pending_.empty()) continue;
    lock.unlock();
    bool delivered = false;
    reading_here_ = true;
    for (auto& connection : connections) {
      // Without waiting: a waiter that reads it is busy with it already.
      Connection::ReadOutcome outcome = connection->read_frames(std::chrono::milliseconds(0));
      delivered |= outcome == Connection::ReadOutcome::kDelivered || outcome == Connection::ReadOutcome::kEnded;
    }
    reading_here_ = false;
    if (delivered) note_progress();
    lock.lock();
  }
}

// ---- BusClient ---------------------------------------------------------------

Result<std::unique_ptr<BusClient>> BusClient::start(const BusConfig& config, const BusOptions& options) {
  if (config.servers.empty()) return Status::invalid_argument("bus", "names no servers");
  std::random_device random;
  uint64_t owner = (static_cast<uint64_t>(random()) << 32) ^ random() ^
                   static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  if (owner == 0) owner = 1;
  auto impl = std::make_unique<Impl>(config, options, owner);
  if (Status s = impl->start(); !s) {
    impl->stop();
    return s;
  }
  std::vector<std::string> servers;
  for (const auto& a : config.servers) servers.push_back(a.text());
  std::string catalog = servers[config.catalog];
  return std::unique_ptr<BusClient>(new BusClient(std::move(impl), std::move(catalog), std::move(servers), owner));
}

BusClient::BusClient(std::unique_ptr<Impl> impl, std::string catalog, std::vector<std::string> servers,
                     uint64_t owner)
    : impl_(std::move(impl)), catalog_(std::move(catalog)), servers_(std::move(servers)), owner_(owner) {}

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
  while (!outcome->done.load(std::memory_order_acquire)) impl_->pump(server, kPumpSlice);
  return std::move(*outcome->result);
}

void BusClient::pump(const std::string& server, std::chrono::milliseconds timeout) { impl_->pump(server, timeout); }

void BusClient::wake_waiters() { impl_->note_progress(); }

std::optional<Status> BusClient::read_direct(const std::string& server, const ShareRef& share, int64_t page,
                                             std::span<std::byte> out) {
  return impl_->read_direct(server, share, page, out);
}

std::optional<Status> BusClient::write_direct(const std::string& server, const ShareRef& share, int64_t page,
                                              std::span<const std::byte> data) {
  return impl_->write_direct(server, share, page, data);
}

bool BusClient::has_embedded() const { return impl_->has_embedded(); }

bool BusClient::all_at_once() const { return impl_->all_at_once(); }

void BusClient::set_holds_locks(uint64_t owner, bool holds) { impl_->set_holds_locks(owner, holds); }
bool BusClient::lease_lost(uint64_t owner) { return impl_->lease_lost(owner); }
uint64_t BusClient::new_owner() { return impl_->new_owner(); }
void BusClient::note_lease(std::chrono::milliseconds lease) { impl_->note_lease(lease.count()); }

}  // namespace pagefile::net
