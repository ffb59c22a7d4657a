// Connecting over stream sockets, tcp://, tls:// and unix:: the caller's
// thread waits, no longer than its timeout, while the io_context resolves,
// connects and (tls://) shakes hands; the socket then becomes a connection
// read on the io_context or one read by its waiters (waiter_connection.cpp).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <functional>
#include <optional>
#include <type_traits>
#include <variant>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>

#include "core/mutex.h"
#include "wire/stream_socket.h"
#include "wire/tls_context.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

namespace {

template <class Protocol>
inline constexpr bool kIsTcp = std::is_same_v<Protocol, Tcp>;

// The Status for a failed connect to `target`: nothing listening there is
// kDisconnected, whatever the way the OS says so.
Status connect_status(const error_code& ec, std::string_view target) {
  if (ec == asio::error::connection_refused) return Status::disconnected(target, "connection refused (nothing listens there)");
  if (ec == asio::error::not_found || ec.value() == ENOENT) return Status::disconnected(target, "no socket at that path");
  return socket_status(ec, target, "connect");
}

// What a connect on the io_context gives its caller: a connection, or (a
// tls:// connection its waiters will read) the connected descriptor, for the
// caller to shake hands on.
struct Connected {
  std::shared_ptr<Connection> connection;
  int fd = -1;
};

// The caller's side of a connect running on the io_context: the io thread
// hands over the outcome, the caller waits for it no longer than its
// timeout and then walks away.
class ConnectOutcome {
 public:
  // From the io thread, once: the connection (or descriptor), or why there
  // is none (then `connected` is empty). False when the caller has given
  // up; the connection is then dropped, closing its socket.
  bool deliver(Connected connected, Status failure) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (abandoned_) {
      if (connected.fd >= 0) ::close(connected.fd);
      return false;
    }
    connected_ = std::move(connected);
    failure_ = std::move(failure);
    ready_ = true;
    changed_.notify_all();
    return true;
  }

  // The outcome, or kDisconnected naming the timeout when `deadline`
  // passed first.
  Result<Connected> wait(std::chrono::steady_clock::time_point deadline, int timeout_ms, const std::string& target)
      EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    while (!ready_) {
      if (!changed_.wait_until(mutex_, deadline) && !ready_) {
        abandoned_ = true;
        return Status::disconnected(target, fmt::format("no connection within {} ms", timeout_ms));
      }
    }
    if (connected_.connection || connected_.fd >= 0) return std::move(connected_);
    return failure_;
  }

 private:
  Mutex mutex_;
  CondVar changed_;  // ready_ was set
  bool ready_ GUARDED_BY(mutex_) = false;
  bool abandoned_ GUARDED_BY(mutex_) = false;
  Connected connected_ GUARDED_BY(mutex_);
  Status failure_ GUARDED_BY(mutex_);
};

// One connect on the io_context: resolve (tcp) then connect, all on a strand
// so the caller's cancel() is ordered with the steps.
template <class Protocol>
class ConnectAttempt : public std::enable_shared_from_this<ConnectAttempt<Protocol>> {
 public:
  using Resolver = std::conditional_t<kIsTcp<Protocol>, Tcp::resolver, std::monostate>;

  ConnectAttempt(asio::io_context& io, Address address, Connection::Reading reading, int send_timeout_ms,
                 std::shared_ptr<TlsContext> tls)
      : io_(io), strand_(asio::make_strand(io)), socket_(io), resolver_(make_resolver(io)),
        address_(std::move(address)), text_(address_.text()), reading_(reading), send_timeout_ms_(send_timeout_ms),
        tls_(std::move(tls)) {}

  ConnectOutcome& outcome() { return outcome_; }

  void start() {
    asio::post(strand_, [self = this->shared_from_this()] {
      if constexpr (kIsTcp<Protocol>) {
        self->resolve();
      } else {
        self->socket_.async_connect(Unix::endpoint(self->address_.path),
                                    self->on_strand(&ConnectAttempt::on_connected));
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
      if (self->tls_stream_) self->tls_stream_->lowest_layer().close(ignored);
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

  // A completion handler that goes on with `step` on the strand, keeping
  // the attempt alive until then.
  template <class... Args>
  auto on_strand(void (ConnectAttempt::*step)(Args...)) {
    return asio::bind_executor(strand_, [self = this->shared_from_this(), step](Args... args) {
      std::invoke(step, *self, std::forward<Args>(args)...);
    });
  }

  void resolve() {
    if constexpr (kIsTcp<Protocol>) {
      resolver_.async_resolve(address_.host, std::to_string(address_.port), Tcp::resolver::numeric_service,
                              on_strand(&ConnectAttempt::on_resolved));
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
      // A connect to a local port nobody listens on can be given that very
      // port as its source and connect to itself (TCP's simultaneous open):
      // it would then read its own requests as answers, and keep the port
      // from the server that comes back there.
      error_code local_ec, remote_ec;
      auto local = socket_.local_endpoint(local_ec);
      auto remote = socket_.remote_endpoint(remote_ec);
      if (!local_ec && !remote_ec && local == remote) {
        error_code ignored;
        socket_.close(ignored);
        fail(Status::disconnected(text_, "connection refused (nothing listens there; the connect met itself)"));
        return;
      }
    }
    prepare_socket(socket_);
    if constexpr (kIsTcp<Protocol>) {
      if (tls_ && reading_ != Connection::Reading::kByWaiter) {
        handshake();
        return;
      }
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
      // tls://: the caller shakes hands on it (connect_stream), not this
      // io thread, which other connections need.
      if (tls_) {
        outcome_.deliver(Connected{nullptr, fd}, Status::ok());
        return;
      }
      outcome_.deliver(Connected{make_waiter_read_connection(fd, text_, send_timeout_ms_)}, Status::ok());
      return;
    }
    outcome_.deliver(Connected{make_stream_connection(io_, std::move(socket_), text_)}, Status::ok());
  }

  // tls:// read on the io_context: the client's side of the handshake, by
  // Asio's SSL stream. (One read by its waiters shakes hands on the
  // caller's thread instead: connect_stream.)
  void handshake() {
    tls_stream_.emplace(std::move(socket_), tls_->ssl());
    // A server that shows a certificate must be the host dialled; one that
    // takes our pre-shared key shows none.
    tls_stream_->set_verify_callback(asio::ssl::host_name_verification(address_.host));
    tls_stream_->async_handshake(TlsStream::client, on_strand(&ConnectAttempt::on_handshake));
  }

  void on_handshake(const error_code& ec) {
    if (cancelled_) return;
    if (ec) {
      fail(handshake_status(ec, text_));
      return;
    }
    outcome_.deliver(Connected{make_stream_connection(io_, std::move(*tls_stream_), text_, tls_, PeerRole::kAdmin)},
                     Status::ok());
  }

  void fail(Status why) { outcome_.deliver(Connected{}, std::move(why)); }

  asio::io_context& io_;
  Strand strand_;
  typename Protocol::socket socket_;
  Resolver resolver_;
  const Address address_;
  const std::string text_;
  const Connection::Reading reading_;
  const int send_timeout_ms_;
  const std::shared_ptr<TlsContext> tls_;  // tls://
  std::optional<TlsStream> tls_stream_;    // tls://, once connected
  bool cancelled_ = false;  // on strand_
  ConnectOutcome outcome_;
};

template <class Protocol>
Result<std::shared_ptr<Connection>> connect_stream(asio::io_context& io, const Address& address, int timeout_ms,
                                                   Connection::Reading reading, int send_timeout_ms,
                                                   std::shared_ptr<TlsContext> tls = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  auto attempt = std::make_shared<ConnectAttempt<Protocol>>(io, address, reading, send_timeout_ms, tls);
  attempt->start();
  Result<Connected> result = attempt->outcome().wait(deadline, timeout_ms, address.text());
  if (!result) {
    attempt->cancel();  // a no-op unless the wait timed out with a step under way
    return result.status();
  }
  if (result->connection) return std::move(result->connection);
  return make_waiter_read_tls_connection(result->fd, address.text(), send_timeout_ms, std::move(tls), address.host,
                                         deadline);
}

}  // namespace

Result<std::shared_ptr<Connection>> connect_tcp(asio::io_context& io, const Address& address, int timeout_ms,
                                                Connection::Reading reading, int send_timeout_ms,
                                                std::shared_ptr<TlsContext> tls) {
  return connect_stream<Tcp>(io, address, timeout_ms, reading, send_timeout_ms, std::move(tls));
}

Result<std::shared_ptr<Connection>> connect_unix(asio::io_context& io, const Address& address, int timeout_ms,
                                                 Connection::Reading reading, int send_timeout_ms) {
  Status usable = unix_path_status(address);
  if (!usable) return usable;
  return connect_stream<Unix>(io, address, timeout_ms, reading, send_timeout_ms);
}

}  // namespace pagefile::net::internal
