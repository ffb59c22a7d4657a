// The bus's private parts (bus/), one job per file:
//   bus_client.cpp   calls: request ids, matching answers, deadlines, the
//                    embedded servers and direct calls to them, start/stop
//   connections.cpp  connecting to servers (on the runtime's work pool),
//                    losing them, failing their requests
//   leases.cpp       lock owners and the renewal of their leases
//   waiter_reading.cpp  answers read by the threads that wait for them, and
//                    the sweep of answers nobody waits for
//
// Threads: the bus adds one of its own, the service thread (sweep, expiry,
// renewal: service_loop); connections are read by waiters, or by the
// runtime's network thread for inproc:, and made on its work pool.
//
// Lifetime: the Impl is shared. Connection callbacks and connect jobs hold
// it weakly or strongly, so none touches a freed bus; stop() ends the
// service thread, waits for connects in flight, and fails what is pending.
#pragma once

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "bus/bus_client.h"
#include "core/io_runtime.h"
#include "core/mutex.h"
#include "server/catalog_service.h"
#include "server/etcd_catalog.h"
#include "wire/transport.h"

namespace pagefile::net {

using Clock = std::chrono::steady_clock;

class BusClient::Impl : public std::enable_shared_from_this<BusClient::Impl> {
 public:
  Impl(const BusConfig& config, const BusOptions& options, uint64_t owner);

  Status start();
  void stop();
  void call(const std::string& server, const Build& build, Callback done);

  // Leases (leases.cpp).
  void set_holds_locks(uint64_t owner, bool holds) EXCLUDES(owners_mu_);
  bool lease_lost(uint64_t owner) EXCLUDES(owners_mu_);
  uint64_t new_owner() { return owner_ + (next_owner_++ << 1); }
  void note_lease(int64_t ms) { lease_ms_ = ms; }
  // Leases are renewed every third of their length (at least 20 ms apart),
  // from the last renewal: a lease the catalog says is shorter than the one
  // assumed (1 s) makes the next renewal due sooner at once, not after a
  // renewal at the old pace, which came too late for a lease under 333 ms.
  std::chrono::milliseconds renew_every() const {
    return std::chrono::milliseconds(std::max<int64_t>(20, lease_ms_.load() / 3));
  }
  void set_request_timeout(int ms) { request_timeout_ms_ = ms; }

  // Waiter reading (waiter_reading.cpp).
  void read_as_waiter(const std::string& server, std::chrono::milliseconds timeout);
  // Something a waiter may wait for happened: wakes the threads in read_as_waiter()
  // that follow another's reading.
  void note_progress();

  // Direct calls to embedded servers (bus_client.cpp).
  std::optional<Status> read_direct(const std::string& server, const ShareRef& share, int64_t page,
                                    std::span<std::byte> out);
  std::optional<Status> write_direct(const std::string& server, const ShareRef& share, int64_t page,
                                     std::span<const std::byte> data, uint64_t checksum);
  bool has_embedded() const { return !embedded_by_name_.empty(); }
  BusClient::Load load(const std::string& server) const;
  bool all_direct() const {
    // (A pool would give global-sequential files a window, read on the pool.)
    return embedded_.size() == config_.servers.size() && options_.embedded.disk_latency.count() == 0 &&
           options_.embedded.cache_pages == 0;
  }

 private:
  struct Peer {
    std::string name;
    Address address;
    std::shared_ptr<Connection> connection;
    bool connecting = false;
    std::vector<std::pair<uint64_t, Frame>> queued;  // waiting for the connection
    // A request of it went unanswered past its deadline: until then,
    // requests fail at once (bus_client.h). Cleared by any answer and by
    // the end of the connection.
    Clock::time_point silent_until{};
  };
  struct Pending {
    Callback done;
    std::string server;
    Clock::time_point deadline;
  };
  // An embedded server, with the requests that change its pages (write,
  // truncate, drop) sent and not yet answered: direct page work must not
  // overtake them. A request given up on after its deadline still counts
  // until its late answer comes (or its connection ends), since it may still
  // run there.
  struct Direct {
    PageServer* server = nullptr;
    std::atomic<uint64_t> changing{0};
  };

  // The bus's own thread: every millisecond while requests are outstanding
  // it reads the answers nobody waits for (sweep); every 50 ms it fails
  // requests past their deadline; every third of the lease it renews.
  void service_loop();
  // Both let go of mu_ while they deliver, and take it again.
  void sweep() REQUIRES(mu_);
  void expire() REQUIRES(mu_);
  void renew_leases() EXCLUDES(owners_mu_);

  // Connecting (connections.cpp): runs on the runtime's work pool.
  void connect_peer(const std::string& server);
  void on_frame(const std::string& server, Frame frame);
  void on_close(const std::string& server, const std::shared_ptr<Connection>& connection, const Status& why);
  // Fails every pending request of `server` (all when empty) with `why`.
  void fail_server(const std::string& server, const Status& why);
  // Sends what queued for `server` on its new connection, in order, until
  // nothing more queues, then makes it the peer's connection. Not under
  // mu_: a send may wait for room in the socket.
  void send_queued(const std::string& server, const std::shared_ptr<Connection>& connection);

  // What a caller gets for `reply` from `server`: the reply, or the error
  // it carries (or a protocol mismatch).
  static Result<ReplyPtr> checked(const std::string& server, ReplyPtr reply);
  // Likewise for an answer got by direct call, not yet parsed.
  static Result<ReplyPtr> checked(const std::string& server, Frame answer);
  // `server` when it runs in this process and page work may go to it by
  // direct call now: nothing that changes its pages is in flight, and the
  // bus is not stopping. Null otherwise.
  PageServer* direct_server(const std::string& server);
  // A late answer to request `id` came, or can no longer come: a request to
  // an embedded server given up on no longer holds its direct calls back.
  void forget_late(uint64_t id) REQUIRES(mu_);
  // Sends a request frame on `connection`, through the fault seam
  // (bus/bus_faults.h). Not under mu_.
  void send_frame(const std::shared_ptr<Connection>& connection, Frame frame) EXCLUDES(mu_);
  // Reads what has arrived on `server`'s connection without waiting, so
  // that a close by the server (its idle timeout) is seen (on_close) before
  // a request is sent on it.
  void see_if_closed(const std::string& server) EXCLUDES(mu_);
  // How long a server's connection must have been idle before a request
  // looks at it first (see_if_closed): one system call per idle spell, not
  // per request.
  static constexpr int64_t kIdleLookNs = 100'000'000;

  const BusConfig config_;
  const BusOptions options_;
  std::atomic<int> request_timeout_ms_;  // options_'s, or set_request_timeout's
  const uint64_t owner_;
  std::shared_ptr<IoRuntime> runtime_;

  InprocHub hub_;
  // How this client proves itself to tls:// servers (BusConfig::tls); null
  // when the bus names no TLS options.
  std::shared_ptr<TlsContext> tls_;
  std::vector<std::unique_ptr<PageServer>> embedded_;
  // The catalog when it is one of embedded_: catalog requests go to it by
  // a direct call (PageServer::catalog_direct). Null otherwise.
  PageServer* embedded_catalog_ = nullptr;
  // The catalog when it is on etcd (BusConfig::etcd): this client's own
  // front of it, answering catalog requests in this process, on the
  // calling thread. Null otherwise.
  std::unique_ptr<CatalogService> etcd_catalog_;
  std::string catalog_name_;
  // embedded_ by address text; filled by start() and fixed from then on.
  std::map<std::string, std::unique_ptr<Direct>> embedded_by_name_;
  // Each server's load (BusClient::load): requests sent and not yet
  // answered, when it last went from none to some, and its last answer.
  struct PeerLoad {
    // Registered live at the catalog on etcd once, and not now: its
    // registration ran out (dead, frozen, cut off). Reads go elsewhere.
    std::atomic<bool> gone{false};
    bool seen_live = false;  // the renewer's alone
    std::atomic<uint32_t> in_flight{0};
    std::atomic<int64_t> busy_since_ns{0};
    std::atomic<int64_t> last_answer_ns{0};
  };
  // Fixed keys, so read without a lock.
  std::map<std::string, std::unique_ptr<PeerLoad>> loads_;
  std::atomic<bool> stopping_now_{false};  // stopping_, for direct work to read without mu_

  std::thread service_;
  // Renews leases at a catalog on etcd: each renewal is a call to etcd
  // that may take up to its deadline, which the service thread must not
  // wait for (its sweep and expiry keep time for every other request).
  std::thread renewer_;
  // For the renewer: which servers are registered live at the catalog on
  // etcd, asked every third of a lease (PeerLoad::gone).
  void watch_servers();
  std::unique_ptr<EtcdCatalog> watcher_;
  std::atomic<uint64_t> next_owner_{1};
  // Lock owners (one per descriptor that holds a lock) whose leases we renew,
  // and those whose renewal the catalog refused: their locks are gone.
  Mutex owners_mu_;
  std::set<uint64_t> lock_owners_ GUARDED_BY(owners_mu_);
  std::set<uint64_t> lost_owners_ GUARDED_BY(owners_mu_);
  std::atomic<int64_t> lease_ms_{1000};  // the catalog's lease, as it last told us

  // Taken after owners_mu_ is let go of, never with it; never held over a
  // send, a connect or a callback.
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  std::map<std::string, Peer> peers_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, Pending> pending_ GUARDED_BY(mu_);
  // Requests to embedded servers given up on, by id: their server.
  std::unordered_map<uint64_t, std::string> late_ GUARDED_BY(mu_);
  uint32_t connects_in_flight_ GUARDED_BY(mu_) = 0;

  // Set while this thread reads a connection for read_as_waiter() or the sweep,
  // which say once per batch what they delivered (note_progress).
  static thread_local bool reading_here_;

  // Progress for read_as_waiter(): a count of deliveries (and of anything else a
  // waiter may wait for), and the threads waiting for it to move.
  std::atomic<uint64_t> progress_{0};
  std::atomic<int> followers_{0};
  // Only the waits for progress_ to move; the count itself is atomic.
  Mutex progress_mu_;
  CondVar progress_cv_;
};

}  // namespace pagefile::net
