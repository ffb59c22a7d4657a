// The page server's parts, private to server/: what PageServer's facade,
// its sessions (server/session.h) and its direct calls share.
//
//   PageServer (facade, page_server.h)
//     └─ Impl: lifetime (start/stop), the answer to any request (respond),
//        admission of requests (flow control, stop waits for them)
//          ├─ Session, one per connection (session.h): ordering per page
//          ├─ ShareStore (share_store.h): pages, pool, emulated disk
//          └─ CatalogService (catalog_service.h): records and locks
//
// The Impl is shared: sessions and handlers on the runtime hold it, so a
// late handler never touches a freed server.
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <capnp/message.h>

#include "core/mutex.h"
#include "core/io_runtime.h"
#include "server/catalog_service.h"
#include "server/request_metrics.h"
#include "server/dir_lock.h"
#include "server/page_server.h"
#include "server/server_counters.h"
#include "server/share_store.h"

namespace pagefile::net {

class Session;

// The answer to request `id` that carries `why`.
Frame error_frame(uint64_t id, const Status& why);

class PageServer::Impl : public std::enable_shared_from_this<PageServer::Impl> {
 public:
  // `runtime` outlives this Impl's use of it: the facade holds it and stops
  // the server before letting go.
  Impl(const ServerOptions& options, IoRuntime& runtime);

  Status start(const Address& address, InprocHub* hub);
  void stop();

  // Decodes `frame`, executes it and encodes the response (a malformed
  // request gets a kCorruption answer), counting errors and bytes out.
  // (`error`, when given: the answer's error code, 0 for none.)
  Frame respond(const Frame& frame, uint32_t* error = nullptr);
  // The answer to a read whose pages are all in the pool, made on the
  // calling (network) thread: a hit then costs no hand-off to the work
  // pool and back. Nothing when the read needs the work pool (a miss, or a
  // request it must judge).
  std::optional<Frame> answer_from_pool(wire::Request::Reader request);

  // Admission of a request from `session` carrying `write_bytes` of page
  // data: false once stopping. Past max_unconfirmed_write_bytes the
  // session stops reading until retire() brings the backlog under half.
  bool admit(const std::shared_ptr<Session>& session, uint64_t write_bytes);
  void retire(uint64_t write_bytes);
  // Brackets work done by direct call (catalog_direct, read_direct,
  // write_direct) so that stop() waits for it; false once stopping.
  bool enter_direct() { return admit(nullptr, 0); }
  void leave_direct() { retire(0); }
  void session_ended(const std::shared_ptr<Session>& session);

  // Runs `job` on the work pool.
  template <class Job>
  void post_work(Job&& job);

  ServerCounters snapshot() const;
  // PageServer::set_tls.
  Status set_tls(std::shared_ptr<TlsContext> tls) {
    if (!listener_) return Status::invalid_argument("server", "listens nowhere");
    return listener_->set_tls(std::move(tls));
  }

  const ServerOptions options_;
  IoRuntime& runtime_;
  Address address_;
  ServerTally tally_;
  RequestMetrics metrics_;
  ShareStore shares_;
  ClusterMembership cluster_;  // declared before catalog_, which sets it
  CatalogService catalog_;

 private:
  void execute(wire::Request::Reader request, capnp::MallocMessageBuilder& response_message);
  // A page request of another cluster than this directory's: kStale.
  Status check_cluster(wire::Request::Reader request);
  // A share's cluster and directory (ClusterMembership::check).
  Status check_share(wire::Share::Reader share);
  void fill_stats(wire::ServerStats::Builder out) const;
  // Verifies a run of a share's pages on disk (pagefile scrub).
  Status scrub(wire::ScrubShare::Reader request, wire::Response::Builder response);

  // Closes the connections idle for options_.idle_timeout, every quarter
  // of it (at most a second), until stopping.
  void sweep_idle();

  std::unique_ptr<Listener> listener_;
  std::unique_ptr<DirLock> dir_lock_;  // held from start to stop
  // sweep_idle's; touched only by start() and then its own handler, on the
  // network thread.
  std::unique_ptr<boost::asio::steady_timer> idle_timer_;

  Mutex sessions_mu_;
  CondVar idle_cv_;                 // jobs_in_flight_ fell, or a session ended
  std::vector<std::shared_ptr<Session>> sessions_ GUARDED_BY(sessions_mu_);
  uint64_t jobs_in_flight_ GUARDED_BY(sessions_mu_) = 0;
  bool stopping_ GUARDED_BY(sessions_mu_) = false;
  std::vector<std::shared_ptr<Session>> paused_ GUARDED_BY(sessions_mu_);
};

template <class Job>
void PageServer::Impl::post_work(Job&& job) {
  boost::asio::post(runtime_.work(), std::forward<Job>(job));
}

}  // namespace pagefile::net
