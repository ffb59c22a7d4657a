// Listening on stream sockets, tcp://, tls:// and unix: (one accept loop,
// templated on the Asio protocol): binding, accepting, the server's side of
// a TLS handshake, and making room for a unix socket at a path a crashed
// server left behind.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <type_traits>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include "core/log.h"
#include "core/mutex.h"
#include "core/os_error.h"
#include "wire/stream_socket.h"
#include "wire/tls_context.h"
#include "wire/tls_socket.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

namespace {

// The Status for a failed bind or listen on `address`.
Status bind_status(const error_code& ec, std::string_view address, std::string_view operation) {
  if (ec == asio::error::address_in_use) return Status::already_exists(address, "address in use");
  if (ec.value() == EADDRNOTAVAIL) return Status::invalid_argument(address, "not an address of this machine");
  if (ec.category() == boost::system::system_category()) return errno_status(ec.value(), address, operation);
  return Status::io_error(address, fmt::format("{}: {}", operation, ec.message()));
}

std::string endpoint_text(const Tcp::endpoint& endpoint, Address::Kind kind) {
  Address address;
  address.kind = kind;
  asio::ip::address ip = endpoint.address();
  // A dual-stack socket reports IPv4 peers as ::ffff:a.b.c.d; show them as
  // the IPv4 address people know.
  if (ip.is_v6() && ip.to_v6().is_v4_mapped()) ip = asio::ip::make_address_v4(asio::ip::v4_mapped, ip.to_v6());
  address.host = ip.to_string();
  address.port = endpoint.port();
  return address.text();
}

// The accept loop behind a StreamListener. It outlives the Listener while
// an accept is pending (the handler holds it). The acceptor is touched
// only under mutex_, so close() may run on any thread while the io_context
// runs the loop.
template <class Protocol>
class AcceptLoop : public std::enable_shared_from_this<AcceptLoop<Protocol>> {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Socket = typename Protocol::socket;

  // `tls`: tcp only, for a tls:// listener.
  AcceptLoop(asio::io_context& io, Acceptor acceptor, Listener::AcceptHandler on_accept, std::string unix_peer,
             std::shared_ptr<TlsContext> tls = nullptr)
      : io_(io),
        acceptor_(std::move(acceptor)),
        retry_timer_(io),
        on_accept_(std::move(on_accept)),
        unix_peer_(std::move(unix_peer)),
        tls_(std::move(tls)) {}

  void start() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    accept_next();
  }

  // Whether it shakes hands (tls://).
  bool is_tls() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    return tls_ != nullptr;
  }
  void set_tls(std::shared_ptr<TlsContext> tls) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    tls_ = std::move(tls);
  }

  // Returns true for the call that closed it, false when already closed.
  bool close() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    if (closed_) return false;
    closed_ = true;
    error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    return true;
  }

 private:
  // REQUIRES: !closed_. (Starting the accept may try an accept() at once,
  // one that never waits.)
  void accept_next() REQUIRES(mutex_) {
    acceptor_.async_accept([self = this->shared_from_this()](const error_code& ec, Socket socket) {
      self->on_accepted(ec, std::move(socket));
    });
  }

  void on_accepted(const error_code& ec, Socket socket) EXCLUDES(mutex_) {
    if (ec == asio::error::operation_aborted) return;
    std::shared_ptr<TlsContext> tls;  // as set when the peer came (set_tls affects the peers to come)
    {
      MutexLock lock(mutex_);
      if (closed_) return;
      tls = tls_;
    }
    if (!ec) {
      if constexpr (std::is_same_v<Protocol, Tcp>) {
        if (tls) {
          handshake(std::move(socket), std::move(tls));
        } else if (auto connection = make_connection(std::move(socket))) {
          on_accept_(std::move(connection));
        }
      } else if (auto connection = make_connection(std::move(socket))) {
        on_accept_(std::move(connection));
      }
    }
    MutexLock lock(mutex_);
    if (closed_) return;
    if (ec && ec != asio::error::connection_aborted) {
      // Out of descriptors or memory: accepting again at once would spin;
      // wait for some to be released.
      retry_timer_.expires_after(std::chrono::milliseconds(100));
      retry_timer_.async_wait([self = this->shared_from_this()](const error_code& timer_ec) {
        if (timer_ec) return;
        MutexLock relock(self->mutex_);
        if (!self->closed_) self->accept_next();
      });
      return;
    }
    accept_next();
  }

  // A tls:// peer becomes a connection once its handshake is done and it
  // proved a role; one that does not within kTlsHandshakeTimeoutMs, or
  // fails, is dropped and logged, and never reaches on_accept_.
  void handshake(Tcp::socket socket, std::shared_ptr<TlsContext> tls) {
    error_code ec;
    Tcp::endpoint remote = socket.remote_endpoint(ec);
    if (ec) return;
    prepare_socket(socket);
    auto strand = asio::make_strand(io_);
    auto stream = std::make_shared<TlsSocket>(std::move(socket), tls->ssl().native_handle());
    auto timer = std::make_shared<asio::steady_timer>(strand);
    auto peer = std::make_shared<const std::string>(endpoint_text(remote, Address::Kind::kTls));
    timer->expires_after(std::chrono::milliseconds(kTlsHandshakeTimeoutMs));
    timer->async_wait([stream](const error_code& timer_ec) {
      if (timer_ec) return;
      error_code ignored;
      stream->lowest_layer().close(ignored);
    });
    // Begun on the strand, not here: the accept loop goes on while this
    // handshake's key exchange runs.
    asio::post(strand, [self = this->shared_from_this(), tls, stream, timer, peer, strand]() mutable {
      self->shake_hands(std::move(tls), std::move(stream), std::move(timer), std::move(peer), strand);
    });
  }

  void shake_hands(std::shared_ptr<TlsContext> tls, std::shared_ptr<TlsSocket> stream,
                   std::shared_ptr<asio::steady_timer> timer, std::shared_ptr<const std::string> peer, Strand strand) {
    stream->async_handshake(
        asio::bind_executor(strand, [self = this->shared_from_this(), tls, stream, timer, peer](error_code hs_ec) {
          timer->cancel();
          // (Done, but the time ran out just before: closed by the timer.)
          if (!hs_ec && !stream->lowest_layer().is_open()) hs_ec = asio::error::operation_aborted;
          Result<PeerRole> role = hs_ec ? Result<PeerRole>(internal::handshake_status(hs_ec, *peer, stream->native_handle()))
                                        : tls->peer_role(stream->native_handle());
          if (!role) {
            logger().warn("peer refused peer={} why=\"{}\"", *peer, role.status().message());
            error_code ignored;
            stream->lowest_layer().close(ignored);
            return;
          }
          {
            MutexLock lock(self->mutex_);
            if (self->closed_) return;
          }
          self->on_accept_(make_stream_connection(self->io_, std::move(*stream), *peer, tls, *role));
        }));
  }

  std::shared_ptr<Connection> make_connection(Socket socket) {
    std::string peer;
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      error_code ec;
      Tcp::endpoint remote = socket.remote_endpoint(ec);
      if (ec) return nullptr;  // reset before we got to it; nothing to serve
      peer = endpoint_text(remote, Address::Kind::kTcp);
    } else {
      // A connecting Unix socket is normally unnamed; name the connection
      // after the path it reached.
      peer = unix_peer_;
    }
    prepare_socket(socket);
    return make_stream_connection(io_, std::move(socket), std::move(peer));
  }

  asio::io_context& io_;
  Mutex mutex_;
  Acceptor acceptor_ GUARDED_BY(mutex_);
  asio::steady_timer retry_timer_ GUARDED_BY(mutex_);
  bool closed_ GUARDED_BY(mutex_) = false;
  const Listener::AcceptHandler on_accept_;
  const std::string unix_peer_;
  std::shared_ptr<TlsContext> tls_ GUARDED_BY(mutex_);  // for the handshakes to come
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

  Status set_tls(std::shared_ptr<TlsContext> tls) override {
    if constexpr (std::is_same_v<Protocol, Tcp>) {
      if (loop_->is_tls() && tls && tls->side() == TlsSide::kServer) {
        loop_->set_tls(std::move(tls));
        return Status::ok();
      }
    }
    return Listener::set_tls(std::move(tls));
  }

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
                                             Listener::AcceptHandler on_accept, std::shared_ptr<TlsContext> tls) {
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

  auto loop = std::make_shared<AcceptLoop<Tcp>>(io, std::move(*acceptor), std::move(on_accept), std::string(),
                                                std::move(tls));
  loop->start();
  return std::unique_ptr<Listener>(std::make_unique<StreamListener<Tcp>>(std::move(loop), std::move(actual), std::nullopt));
}

Result<std::unique_ptr<Listener>> listen_unix(asio::io_context& io, const Address& address,
                                              Listener::AcceptHandler on_accept, uint32_t mode) {
  const std::string text = address.text();
  Status usable = unix_path_status(address);
  if (!usable) return usable;
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
  // Before listen(): until then a connect is refused, so no one connects
  // under the mode the umask gave.
  if (::chmod(address.path.c_str(), static_cast<mode_t>(mode)) != 0) {
    Status failed = errno_status(errno, text, "chmod");
    ::unlink(address.path.c_str());
    return failed;
  }
  if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
    ::unlink(address.path.c_str());
    return bind_status(ec, text, "listen");
  }

  auto loop = std::make_shared<AcceptLoop<Unix>>(io, std::move(acceptor), std::move(on_accept), text);
  loop->start();
  return std::unique_ptr<Listener>(std::make_unique<StreamListener<Unix>>(std::move(loop), address, socket_file));
}

}  // namespace pagefile::net::internal
