// Connections and listeners over stream sockets: tcp:// and unix: share one
// implementation, templated on the Asio protocol.
//
// Each connection keeps its state on a strand of its io_context: reads,
// writes, pause/resume and the end all run there, so the io_context may be
// run by several threads. Pending operations hold the connection alive
// (shared_from_this); the CloseHandler releases both handlers, breaking the
// cycle a handler that captures its own connection would make.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <type_traits>
#include <variant>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "core/os_error.h"
#include "wire/frame_buffer.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

// Errors that mean the other end (or the path to it) is gone: the caller's
// remedy is to reconnect, so they all become kDisconnected.
bool is_disconnect(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::eof) return true;
  if (ec.category() != boost::system::system_category()) return false;
  switch (ec.value()) {
    case ECONNRESET:
    case ECONNREFUSED:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ESHUTDOWN:
    case ETIMEDOUT:
    case EHOSTUNREACH:
    case EHOSTDOWN:
    case ENETUNREACH:
    case ENETDOWN:
    case ENETRESET:
      return true;
    default:
      return false;
  }
}

// The Status for a failed socket operation on the connection to `peer`.
Status socket_status(const boost::system::error_code& ec, std::string_view peer, std::string_view operation) {
  if (ec == boost::asio::error::eof) return Status::disconnected(peer, "closed by the peer");
  if (is_disconnect(ec)) return Status::disconnected(peer, fmt::format("{}: {}", operation, ec.message()));
  if (ec.category() == boost::system::system_category()) return errno_status(ec.value(), peer, operation);
  return Status::io_error(peer, fmt::format("{}: {}", operation, ec.message()));
}

namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using Tcp = asio::ip::tcp;
using Unix = asio::local::stream_protocol;
using Strand = asio::strand<asio::io_context::executor_type>;

template <class Protocol>
inline constexpr bool kIsTcp = std::is_same_v<Protocol, Tcp>;

// The Status for a failed connect to `target`: nothing listening there is
// kDisconnected, whatever the way the OS says so.
Status connect_status(const error_code& ec, std::string_view target) {
  if (ec == asio::error::connection_refused) return Status::disconnected(target, "connection refused (nothing listens there)");
  if (ec == asio::error::not_found || ec.value() == ENOENT) return Status::disconnected(target, "no socket at that path");
  return socket_status(ec, target, "connect");
}

// The Status for a failed bind or listen on `address`.
Status bind_status(const error_code& ec, std::string_view address, std::string_view operation) {
  if (ec == asio::error::address_in_use) return Status::already_exists(address, "address in use");
  if (ec.value() == EADDRNOTAVAIL) return Status::invalid_argument(address, "not an address of this machine");
  if (ec.category() == boost::system::system_category()) return errno_status(ec.value(), address, operation);
  return Status::io_error(address, fmt::format("{}: {}", operation, ec.message()));
}

std::string endpoint_text(const Tcp::endpoint& endpoint) {
  Address address;
  address.kind = Address::Kind::kTcp;
  asio::ip::address ip = endpoint.address();
  // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d; show them as
  // the IPv4 address people know.
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
  address.host = ip.to_string();
  address.port = endpoint.port();
  return address.text();
}

template <class Protocol>
class StreamConnection final : public Connection, public std::enable_shared_from_this<StreamConnection<Protocol>> {
 public:
  using Socket = typename Protocol::socket;

  StreamConnection(asio::io_context& io, Socket socket, std::string peer)
      : strand_(asio::make_strand(io)), socket_(std::move(socket)), peer_(std::move(peer)) {}

  void start(FrameHandler on_frame, CloseHandler on_close) override {
    asio::post(strand_, [self = this->shared_from_this(), on_frame = std::move(on_frame),
                         on_close = std::move(on_close)]() mutable {
      if (self->started_) return;  // start() is called once; a second call has nothing to take over
      self->on_frame_ = std::move(on_frame);
      self->on_close_ = std::move(on_close);
      self->started_ = true;
      if (self->ended_) {
        self->report_close();
        return;
      }
      self->read_more();
    });
  }

  void send(Frame frame) override {
    const size_t bytes = frame.size() * sizeof(capnp::word);
    std::string problem = frame_length_problem(bytes);
    if (!problem.empty()) {
      // The peer would close on it anyway; failing here names the sender.
      asio::dispatch(strand_, [self = this->shared_from_this(), why = Status::invalid_argument(
                                   peer_, fmt::format("cannot send: {}", problem))] { self->end(why); });
      return;
    }
    std::lock_guard lock(write_mu_);
    if (write_ended_) return;
    size_t written = 0;
    if (!writing_ && !delivering_ && write_queue_.empty()) {
      // Nothing ahead of it: write it from this thread at once, without
      // waking the io thread. Only what the socket cannot take now waits.
      ssize_t n = send_frame_now(socket_.native_handle(), frame, 0);
      if (n == static_cast<ssize_t>(kFrameHeaderBytes + bytes)) return;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        const error_code ec(errno, boost::system::system_category());
        asio::post(strand_, [self = this->shared_from_this(), why = socket_status(ec, peer_, "write")] {
          self->end(why);
        });
        return;
      }
      written = n < 0 ? 0 : static_cast<size_t>(n);
    }
    if (write_queue_.empty()) front_written_ = written;
    write_queue_.push_back(std::move(frame));
    if (!writing_ && !delivering_) {  // (a delivery batch flushes as it ends)
      writing_ = true;
      asio::post(strand_, [self = this->shared_from_this()] { self->write_front(); });
    }
  }

  void close() override {
    // dispatch: from inside a FrameHandler the end takes effect before the
    // handler returns, so no further frame is delivered.
    asio::dispatch(strand_, [self = this->shared_from_this()] { self->end(Status::ok()); });
  }

  void close_after_sending() override {
    // Posted like send(), so it lands after the frames this thread sent.
    asio::post(strand_, [self = this->shared_from_this()] { self->end_after_sending(Status::ok()); });
  }

  void pause_reading() override {
    asio::dispatch(strand_, [self = this->shared_from_this()] { self->paused_ = true; });
  }

  void resume_reading() override {
    asio::dispatch(strand_, [self = this->shared_from_this()] {
      if (!self->paused_) return;
      self->paused_ = false;
      // Posted, so a resume from inside a FrameHandler does not deliver the
      // next frame re-entrantly.
      asio::post(self->strand_, [self] { self->continue_reading(); });
    });
  }

  std::string peer() const override { return peer_; }

 private:
  // All below runs on strand_.

  // Stops reading and ends the connection with `why` once the queued frames
  // are written.
  void end_after_sending(Status why) {
    paused_ = true;
    {
      std::lock_guard lock(write_mu_);
      if (closing_after_write_) return;  // the first reason stands
      closing_after_write_ = true;
      end_status_ = std::move(why);
      if (writing_ || !write_queue_.empty()) return;  // on_written ends it
    }
    end(end_status_);
  }

  // Writes every queued frame in one gathered write: under load a dozen
  // responses leave in one system call instead of a dozen.
  void write_front() {
    std::lock_guard lock(write_mu_);
    if (write_ended_) {
      writing_ = false;
      return;
    }
    in_write_ = std::min(write_queue_.size(), kMaxFramesPerWrite);
    write_headers_.resize(in_write_);
    write_buffers_.clear();
    for (size_t i = 0; i < in_write_; ++i) {
      const Frame& frame = write_queue_[i];
      const size_t bytes = frame.size() * sizeof(capnp::word);
      write_headers_[i] = encode_frame_length(static_cast<uint32_t>(bytes));
      asio::const_buffer header = asio::buffer(write_headers_[i]);
      asio::const_buffer body = asio::buffer(frame.data(), bytes);  // the body is not copied
      if (i == 0) {
        // send() may have written the start of the first frame already.
        const size_t skip_header = std::min(front_written_, header.size());
        header += skip_header;
        body += front_written_ - skip_header;
      }
      if (header.size() > 0) write_buffers_.push_back(header);
      write_buffers_.push_back(body);
    }
    asio::async_write(socket_, write_buffers_,
                      asio::bind_executor(strand_, [self = this->shared_from_this()](const error_code& ec, size_t) {
                        self->on_written(ec);
                      }));
  }

  void on_written(const error_code& ec) {
    {
      std::lock_guard lock(write_mu_);
      if (write_ended_) {
        writing_ = false;
        write_queue_.clear();
        return;
      }
      if (!ec) {
        write_queue_.erase(write_queue_.begin(), write_queue_.begin() + static_cast<std::ptrdiff_t>(in_write_));
        in_write_ = 0;
        front_written_ = 0;
        if (!write_queue_.empty()) {
          asio::post(strand_, [self = this->shared_from_this()] { self->write_front(); });
          return;  // still writing_
        }
        writing_ = false;
        if (!closing_after_write_) return;
      }
    }
    end(ec ? socket_status(ec, peer_, "write") : end_status_);
  }

  // Reading goes through one buffer: a read takes whatever has arrived, and
  // every whole frame in it is delivered before the next read, so small
  // frames cost no system call each.
  void read_more() {
    if (!started_ || ended_ || paused_ || reading_) return;
    reading_ = true;
    std::span<uint8_t> space = read_buffer_.space();
    socket_.async_read_some(
        asio::buffer(space.data(), space.size()),
        asio::bind_executor(strand_, [self = this->shared_from_this()](const error_code& ec, size_t n) {
          self->on_read(ec, n);
        }));
  }

  void on_read(const error_code& ec, size_t n) {
    reading_ = false;
    if (ended_) return;
    if (ec) {
      end(socket_status(ec, peer_, "read"));
      return;
    }
    read_buffer_.filled(n);
    deliver_buffered();
  }

  // Delivers the whole frames in the buffer until a pause or the end, then
  // reads on.
  void deliver_buffered() {
    // While frames are delivered, what the handlers (and other threads)
    // send is queued and leaves in one write when the batch ends: a server
    // answering a burst of reads, or a client whose program sends its next
    // request as soon as an answer wakes it, then makes one system call,
    // not one per frame.
    {
      std::lock_guard lock(write_mu_);
      delivering_ = true;
    }
    deliver_frames();
    bool flush = false;
    {
      std::lock_guard lock(write_mu_);
      delivering_ = false;
      if (!writing_ && !write_ended_ && !write_queue_.empty()) flush = writing_ = true;
    }
    if (flush) write_front();
    if (ended_ || paused_) return;
    read_buffer_.shrink_when_empty();
    read_more();
  }

  void deliver_frames() {
    Frame frame;
    std::string problem;
    while (!ended_ && !paused_) {
      FrameBuffer::Next next = read_buffer_.next(frame, problem);
      if (next == FrameBuffer::Next::kMore) break;
      if (next == FrameBuffer::Next::kMalformed) {
        // Nothing after this header can be trusted. Answers to the frames
        // before it (sent from their handlers, so queued on the strand
        // ahead of this) still go out, then the connection ends.
        paused_ = true;
        asio::post(strand_, [self = this->shared_from_this(), why = Status::corruption(peer_, problem)] {
          self->end_after_sending(why);
        });
        return;
      }
      on_frame_(std::move(frame));
      frame = Frame();
    }
  }

  void continue_reading() {
    if (!started_ || ended_ || paused_) return;
    deliver_buffered();
  }

  void end(Status why) {
    if (ended_) return;
    ended_ = true;
    close_status_ = std::move(why);
    {
      // Under write_mu_, so no send() is writing to the descriptor while it
      // closes (and perhaps is reused by another open).
      std::lock_guard lock(write_mu_);
      write_ended_ = true;
      // The frames being written stay until the handler runs: Asio still
      // points at their bytes.
      write_queue_.erase(write_queue_.begin() + static_cast<std::ptrdiff_t>(in_write_), write_queue_.end());
      error_code ignored;
      socket_.close(ignored);  // cancels the pending read and write
    }
    if (started_) {
      // Posted, never run inside close() or a FrameHandler.
      asio::post(strand_, [self = this->shared_from_this()] { self->report_close(); });
    }
  }

  void report_close() {
    CloseHandler on_close = std::move(on_close_);
    on_close_ = nullptr;
    on_frame_ = nullptr;
    if (on_close) on_close(close_status_);
  }

  Strand strand_;
  Socket socket_;
  const std::string peer_;

  FrameHandler on_frame_;
  CloseHandler on_close_;
  bool started_ = false;
  bool ended_ = false;
  bool paused_ = false;
  bool reading_ = false;  // an async read into read_buffer_ is pending
  Status close_status_;

  static constexpr size_t kMaxFramesPerWrite = 64;

  // Frames that arrive while paused wait here, in order.
  FrameBuffer read_buffer_;

  // The write side is shared between the sending threads (which write
  // directly while nothing is queued) and the strand (which writes the
  // queue): it is guarded by write_mu_.
  std::mutex write_mu_;
  bool write_ended_ = false;          // the socket is closed: drop frames
  bool writing_ = false;              // the strand owns the queue's front (a write is posted or pending)
  bool delivering_ = false;           // the strand is delivering frames and flushes the queue after
  bool closing_after_write_ = false;  // end with end_status_ once write_queue_ drains
  Status end_status_;
  std::deque<Frame> write_queue_;
  size_t in_write_ = 0;       // frames at the front of write_queue_ being written
  size_t front_written_ = 0;  // bytes of the front frame send() already wrote
  std::vector<FrameHeader> write_headers_;
  std::vector<asio::const_buffer> write_buffers_;
};

// The accept loop behind a StreamListener. It outlives the Listener while
// an accept is pending (the handler holds it). The acceptor is touched
// only under mutex_, so close() may run on any thread while the io_context
// runs the loop.
template <class Protocol>
class AcceptLoop : public std::enable_shared_from_this<AcceptLoop<Protocol>> {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Socket = typename Protocol::socket;

  AcceptLoop(asio::io_context& io, Acceptor acceptor, Listener::AcceptHandler on_accept, std::string unix_peer)
      : io_(io),
        acceptor_(std::move(acceptor)),
        retry_timer_(io),
        on_accept_(std::move(on_accept)),
        unix_peer_(std::move(unix_peer)) {}

  void start() {
    std::lock_guard lock(mutex_);
    accept_next();
  }

  // Returns true for the call that closed it, false when already closed.
  bool close() {
    std::lock_guard lock(mutex_);
    if (closed_) return false;
    closed_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    return true;
  }

 private:
  // REQUIRES: mutex_ held, !closed_.
  void accept_next() {
    acceptor_.async_accept([self = this->shared_from_this()](const error_code& ec, Socket socket) {
      self->on_accepted(ec, std::move(socket));
    });
  }

  void on_accepted(const error_code& ec, Socket socket) {
    if (ec == asio::error::operation_aborted) return;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;
    }
    if (!ec) {
      if (auto connection = make_connection(std::move(socket))) on_accept_(std::move(connection));
    }
    std::lock_guard lock(mutex_);
    if (closed_) return;
    if (ec && ec != asio::error::connection_aborted) {
      // Out of descriptors or memory: accepting again at once would spin;
      // wait for some to be released.
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([self = this->shared_from_this()](const error_code& timer_ec) {
        if (timer_ec) return;
        std::lock_guard relock(self->mutex_);
        if (!self->closed_) self->accept_next();
      });
      return;
    }
    accept_next();
  }

  std::shared_ptr<Connection> make_connection(Socket socket) {
    std::string peer;
    if constexpr (kIsTcp<Protocol>) {
      error_code ec;
      Tcp::endpoint remote = socket.remote_endpoint(ec);
      if (ec) return nullptr;  // reset before we got to it; nothing to serve
      socket.set_option(Tcp::no_delay(true), ec);
      peer = endpoint_text(remote);
    } else {
      // A connecting Unix socket is normally unnamed; name the connection
      // after the path it reached.
      peer = unix_peer_;
    }
    return std::make_shared<StreamConnection<Protocol>>(io_, std::move(socket), std::move(peer));
  }

  asio::io_context& io_;
  std::mutex mutex_;
  Acceptor acceptor_;              // GUARDED_BY(mutex_)
  asio::steady_timer retry_timer_;  // GUARDED_BY(mutex_)
  bool closed_ = false;            // GUARDED_BY(mutex_)
  const Listener::AcceptHandler on_accept_;
  const std::string unix_peer_;
};

// Identifies the socket file a unix listener made, so close() removes that
// file and not one another listener has since put at the same path.
struct FileId {
  dev_t device = 0;
  ino_t inode = 0;
};

template <class Protocol>
class StreamListener final : public Listener {
 public:
  StreamListener(std::shared_ptr<AcceptLoop<Protocol>> loop, Address address, std::optional<FileId> socket_file)
      : loop_(std::move(loop)), address_(std::move(address)), socket_file_(socket_file) {}
  ~StreamListener() override { close(); }

  Address address() const override { return address_; }

  void close() override {
    if (!loop_->close()) return;
    if (socket_file_) {
      struct stat st {};
      if (::lstat(address_.path.c_str(), &st) == 0 && st.st_dev == socket_file_->device &&
          st.st_ino == socket_file_->inode) {
        ::unlink(address_.path.c_str());
      }
    }
  }

 private:
  const std::shared_ptr<AcceptLoop<Protocol>> loop_;
  const Address address_;
  const std::optional<FileId> socket_file_;
};

// Makes room for a unix listener at `path`: nothing to do when the path is
// free, removes a socket file nobody listens on (left by a crashed server),
// and refuses when a server listens there or the path is something else.
Status clear_unix_path(const Address& address) {
  const std::string text = address.text();
  const char* path = address.path.c_str();
  struct stat st {};
  if (::lstat(path, &st) != 0) {
    if (errno == ENOENT) return Status::ok();
    return errno_status(errno, text, "stat");
  }
  if (!S_ISSOCK(st.st_mode)) return Status::already_exists(text, "the path exists and is not a socket");

  // A non-blocking probe, so a listener with a full backlog answers EAGAIN
  // instead of holding us.
  int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (probe < 0) return errno_status(errno, text, "socket");
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, address.path.data(), std::min(address.path.size(), sizeof(sun.sun_path) - 1));
  int rc = ::connect(probe, reinterpret_cast<const sockaddr*>(&sun), sizeof(sun));
  int err = rc == 0 ? 0 : errno;
  ::close(probe);
  if (err == 0 || err == EAGAIN || err == EINPROGRESS) {
    return Status::already_exists(text, "a server is listening there");
  }
  if (err == ECONNREFUSED) {
    if (::unlink(path) != 0 && errno != ENOENT) return errno_status(errno, text, "remove stale socket");
    return Status::ok();
  }
  if (err == ENOENT) return Status::ok();  // removed meanwhile
  return errno_status(err, text, "probe existing socket");
}

// The caller's side of a connect running on the io_context: the io thread
// hands over the outcome, the caller waits for it no longer than its
// timeout and then walks away.
class ConnectOutcome {
 public:
  // From the io thread, once: the connection, or why there is none (then
  // `connection` is null). False when the caller has given up; the
  // connection is then dropped, closing its socket.
  bool deliver(std::shared_ptr<Connection> connection, Status failure) {
    std::lock_guard lock(mutex_);
    if (abandoned_) return false;
    connection_ = std::move(connection);
    failure_ = std::move(failure);
    ready_ = true;
    changed_.notify_all();
    return true;
  }

  // The outcome, or kDisconnected naming the timeout when `timeout_ms`
  // passed first.
  Result<std::shared_ptr<Connection>> wait(int timeout_ms, const std::string& target) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, std::chrono::milliseconds(std::max(timeout_ms, 0)), [&] { return ready_; })) {
      abandoned_ = true;
      return Status::disconnected(target, fmt::format("no connection within {} ms", timeout_ms));
    }
    if (connection_) return std::move(connection_);
    return failure_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool ready_ = false;                       // GUARDED_BY(mutex_)
  bool abandoned_ = false;                   // GUARDED_BY(mutex_)
  std::shared_ptr<Connection> connection_;   // GUARDED_BY(mutex_)
  Status failure_;                           // GUARDED_BY(mutex_)
};

// One connect on the io_context: resolve (tcp) then connect, all on a strand
// so the caller's cancel() is ordered with the steps.
template <class Protocol>
class ConnectAttempt : public std::enable_shared_from_this<ConnectAttempt<Protocol>> {
 public:
  using Resolver = std::conditional_t<kIsTcp<Protocol>, Tcp::resolver, std::monostate>;

  ConnectAttempt(asio::io_context& io, Address address, Connection::Reading reading, int send_timeout_ms)
      : io_(io), strand_(asio::make_strand(io)), socket_(io), resolver_(make_resolver(io)),
        address_(std::move(address)), text_(address_.text()), reading_(reading), send_timeout_ms_(send_timeout_ms) {}

  ConnectOutcome& outcome() { return outcome_; }

  void start() {
    asio::post(strand_, [self = this->shared_from_this()] {
      if constexpr (kIsTcp<Protocol>) {
        self->resolve();
      } else {
        self->socket_.async_connect(Unix::endpoint(self->address_.path),
                                    asio::bind_executor(self->strand_, [self](const error_code& ec) {
                                      self->on_connected(ec);
                                    }));
      }
    });
  }

  // After the caller gave up: stop whatever step is under way.
  void cancel() {
    asio::post(strand_, [self = this->shared_from_this()] {
      self->cancelled_ = true;
      if constexpr (kIsTcp<Protocol>) self->resolver_.cancel();
      error_code ignored;
      self->socket_.close(ignored);
    });
  }

 private:
  static Resolver make_resolver(asio::io_context& io) {
    if constexpr (kIsTcp<Protocol>) {
      return Tcp::resolver(io);
    } else {
      return {};
    }
  }

  void resolve() {
    if constexpr (kIsTcp<Protocol>) {
      resolver_.async_resolve(address_.host, std::to_string(address_.port), Tcp::resolver::numeric_service,
                              asio::bind_executor(strand_, [self = this->shared_from_this()](
                                                               const error_code& ec, Tcp::resolver::results_type results) {
                                self->on_resolved(ec, std::move(results));
                              }));
    }
  }

  void on_resolved(const error_code& ec, Tcp::resolver::results_type results) {
    if constexpr (kIsTcp<Protocol>) {
      if (cancelled_) return;
      if (ec) {
        fail(Status::disconnected(text_, fmt::format("cannot resolve host '{}': {}", address_.host, ec.message())));
        return;
      }
      // Tries each address the name resolved to (say ::1, then 127.0.0.1).
      asio::async_connect(socket_, results,
                          asio::bind_executor(strand_, [self = this->shared_from_this()](const error_code& ec2,
                                                                                         const Tcp::endpoint&) {
                            self->on_connected(ec2);
                          }));
    }
  }

  void on_connected(const error_code& ec) {
    if (cancelled_) return;
    if (ec) {
      fail(connect_status(ec, text_));
      return;
    }
    if constexpr (kIsTcp<Protocol>) {
      error_code ignored;
      socket_.set_option(Tcp::no_delay(true), ignored);
    }
    if (reading_ == Connection::Reading::kByWaiter) {
      // Taken out of Asio's hands (and its reactor's), so no io thread is
      // woken when an answer arrives.
      error_code released;
      int fd = socket_.release(released);
      if (released) {
        fail(socket_status(released, text_, "connect"));
        return;
      }
      outcome_.deliver(make_waiter_read_connection(fd, text_, send_timeout_ms_), Status::ok());
      return;
    }
    outcome_.deliver(std::make_shared<StreamConnection<Protocol>>(io_, std::move(socket_), text_), Status::ok());
  }

  void fail(Status why) { outcome_.deliver(nullptr, std::move(why)); }

  asio::io_context& io_;
  Strand strand_;
  typename Protocol::socket socket_;
  Resolver resolver_;
  const Address address_;
  const std::string text_;
  const Connection::Reading reading_;
  const int send_timeout_ms_;
  bool cancelled_ = false;  // on strand_
  ConnectOutcome outcome_;
};

template <class Protocol>
Result<std::shared_ptr<Connection>> connect_stream(asio::io_context& io, const Address& address, int timeout_ms,
                                                   Connection::Reading reading, int send_timeout_ms) {
  auto attempt = std::make_shared<ConnectAttempt<Protocol>>(io, address, reading, send_timeout_ms);
  attempt->start();
  Result<std::shared_ptr<Connection>> result = attempt->outcome().wait(timeout_ms, address.text());
  if (!result) attempt->cancel();  // a no-op unless the wait timed out with a step under way
  return result;
}

// The addresses a tcp listener may bind: the literal, or what the name
// resolves to.
Result<std::vector<Tcp::endpoint>> listen_endpoints(asio::io_context& io, const Address& address) {
  error_code ec;
  asio::ip::address ip = asio::ip::make_address(address.host, ec);
  if (!ec) return std::vector<Tcp::endpoint>{Tcp::endpoint(ip, address.port)};
  Tcp::resolver resolver(io);
  auto results = resolver.resolve(address.host, std::to_string(address.port),
                                  Tcp::resolver::passive | Tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return Status::invalid_argument(address.text(),
                                    fmt::format("cannot resolve host '{}': {}", address.host,
                                                ec ? ec.message() : std::string("no addresses")));
  }
  std::vector<Tcp::endpoint> endpoints;
  for (const auto& entry : results) endpoints.push_back(entry.endpoint());
  return endpoints;
}

Result<Tcp::acceptor> bind_tcp(asio::io_context& io, const Tcp::endpoint& endpoint, const std::string& text) {
  Tcp::acceptor acceptor(io);
  error_code ec;
  if (acceptor.open(endpoint.protocol(), ec); ec) return bind_status(ec, text, "socket");
  // A restarted server binds its port again while old connections linger
  // in TIME_WAIT.
  if (acceptor.set_option(Tcp::acceptor::reuse_address(true), ec); ec) return bind_status(ec, text, "setsockopt");
  if (acceptor.bind(endpoint, ec); ec) return bind_status(ec, text, "bind");
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) return bind_status(ec, text, "listen");
  return acceptor;
}

}  // namespace

Result<std::unique_ptr<Listener>> listen_tcp(asio::io_context& io, const Address& address,
                                             Listener::AcceptHandler on_accept) {
  const std::string text = address.text();
  auto endpoints = listen_endpoints(io, address);
  if (!endpoints) return endpoints.status();
  // A name may resolve to several addresses (::1 and 127.0.0.1 for
  // localhost) of which some cannot be bound here; the first that can wins.
  std::optional<Tcp::acceptor> acceptor;
  Status first_failure;
  for (const Tcp::endpoint& endpoint : *endpoints) {
    Result<Tcp::acceptor> bound = bind_tcp(io, endpoint, text);
    if (bound) {
      acceptor.emplace(std::move(*bound));
      break;
    }
    if (first_failure.is_ok()) first_failure = bound.status();
  }
  if (!acceptor) return first_failure;

  error_code ec;
  Tcp::endpoint local = acceptor->local_endpoint(ec);
  if (ec) return bind_status(ec, text, "getsockname");
  Address actual = address;
  actual.port = local.port();

  auto loop = std::make_shared<AcceptLoop<Tcp>>(io, std::move(*acceptor), std::move(on_accept), std::string());
  loop->start();
  return std::unique_ptr<Listener>(std::make_unique<StreamListener<Tcp>>(std::move(loop), std::move(actual), std::nullopt));
}

Result<std::unique_ptr<Listener>> listen_unix(asio::io_context& io, const Address& address,
                                              Listener::AcceptHandler on_accept) {
  const std::string text = address.text();
  if (address.path.empty() || address.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::invalid_argument(text, "socket path is empty or too long");
  }
  Status cleared = clear_unix_path(address);
  if (!cleared) return cleared;

  Unix::acceptor acceptor(io);
  error_code ec;
  if (acceptor.open(Unix(), ec); ec) return bind_status(ec, text, "socket");
  if (acceptor.bind(Unix::endpoint(address.path), ec); ec) return bind_status(ec, text, "bind");
  struct stat st {};
  if (::lstat(address.path.c_str(), &st) != 0) {
    Status failed = errno_status(errno, text, "stat after bind");
    ::unlink(address.path.c_str());
    return failed;
  }
  FileId socket_file{st.st_dev, st.st_ino};
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    ::unlink(address.path.c_str());
    return bind_status(ec, text, "listen");
  }

  auto loop = std::make_shared<AcceptLoop<Unix>>(io, std::move(acceptor), std::move(on_accept), text);
  loop->start();
  return std::unique_ptr<Listener>(std::make_unique<StreamListener<Unix>>(std::move(loop), address, socket_file));
}

Result<std::shared_ptr<Connection>> connect_tcp(asio::io_context& io, const Address& address, int timeout_ms,
                                                Connection::Reading reading, int send_timeout_ms) {
  return connect_stream<Tcp>(io, address, timeout_ms, reading, send_timeout_ms);
}

Result<std::shared_ptr<Connection>> connect_unix(asio::io_context& io, const Address& address, int timeout_ms,
                                                 Connection::Reading reading, int send_timeout_ms) {
  if (address.path.empty() || address.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::invalid_argument(address.text(), "socket path is empty or too long");
  }
  return connect_stream<Unix>(io, address, timeout_ms, reading, send_timeout_ms);
}

}  // namespace pagefile::net::internal
