// One connection's requests at a page server: decoded on the network
// thread, run on the work pool, in arrival order wherever two touch the
// same pages of a file (sync, truncate and drop touch the whole file; the
// catalog is one "file", so its requests run one at a time per
// connection). A read whose pages are all in the pool is answered on the
// network thread when no earlier request of the connection touches them.
//
// Thread-safety: on_frame/on_close run on the network thread; run/finish on
// the work pool; the bookkeeping is under mu_.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include <boost/asio/io_context.hpp>

#include "core/mutex.h"
#include "server/page_server_impl.h"
#include "wire/transport.h"

namespace pagefile::net {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<PageServer::Impl> server, std::shared_ptr<Connection> connection)
      : server_(std::move(server)), connection_(std::move(connection)), role_(connection_->role()) {}

  void start();
  void close() { connection_->close(); }
  std::string peer() const { return connection_->peer(); }
  void close_after_sending() { connection_->close_after_sending(); }
  // Tells the client `why` (an error answering no request: id 0) and hangs
  // up kRefusalGrace later, running nothing it sent.
  static constexpr std::chrono::milliseconds kRefusalGrace{1000};
  void refuse(const Status& why, boost::asio::io_context& io);
  void pause() { connection_->pause_reading(); }
  void resume() { connection_->resume_reading(); }
  // Nothing in flight, and nothing received since `since` (the idle
  // timeout, ServerOptions::idle_timeout).
  bool idle_since(std::chrono::steady_clock::time_point since) EXCLUDES(mu_);

 private:
  // What a request touches: pages [first, last) of a file (file id + 1; 0
  // is the catalog; an empty span touches nothing).
  struct Span {
    uint64_t file = 0;
    int64_t first = 0;
    int64_t last = 0;
    bool overlaps(const Span& o) const { return file == o.file && first < o.last && o.first < last; }
  };
  struct Job {
    uint64_t seq = 0;
    Span span;
    std::shared_ptr<Frame> frame;
    uint64_t write_bytes = 0;
    int64_t owed = 0;  // the answer's bytes, as told to Connection::owe()
    // For the server's metrics: the request's kind, size and arrival.
    unsigned kind = 0;
    uint64_t bytes_in = 0;
    std::chrono::steady_clock::time_point arrived;
  };

  void on_frame(Frame frame);
  void on_close(const Status& why);
  // What `request` touches, and how many bytes of pages it carries.
  static Span span_of(wire::Request::Reader request, uint64_t& write_bytes);
  // The bytes the answer to `request` will take, about (Connection::owe()).
  static int64_t answer_bytes(wire::Request::Reader request);
  // OK when a request of `frame_bytes` may be taken now: kInvalidArgument
  // above ServerOptions::max_frame_bytes, kBusy at max_inflight.
  Status within_limits(uint64_t frame_bytes) EXCLUDES(mu_);
  // Whether a request touching `span` must wait for an earlier one.
  bool overtakes_earlier(const Span& span);
  void run(const Job& job);
  // Counts an answered request in the server's metrics, and logs it when
  // it took longer than --slow-ms.
  void answered(const Job& job, uint64_t bytes_out, uint32_t error);
  void finish(const Job& job);
  void reply_error(uint64_t id, const Status& status, bool then_close);

  const std::shared_ptr<PageServer::Impl> server_;
  const std::shared_ptr<Connection> connection_;
  // What the peer may ask (server/access.h), as its connection proved it.
  const PeerRole role_;
  Mutex mu_;
  uint64_t next_seq_ GUARDED_BY(mu_) = 0;
  std::map<uint64_t, Job> active_ GUARDED_BY(mu_);  // running or waiting, by arrival
  std::set<uint64_t> running_ GUARDED_BY(mu_);  // jobs handed to the pool
  std::chrono::steady_clock::time_point last_frame_ GUARDED_BY(mu_) = std::chrono::steady_clock::now();
  std::atomic<bool> closed_{false};
};

}  // namespace pagefile::net
