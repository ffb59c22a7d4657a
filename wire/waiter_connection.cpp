// The client's end of a stream connection read by its waiters
// (Connection::Reading::kByWaiter): no io_context touches it. send() writes
// on the calling thread; read_frames() reads on the calling thread, one
// thread at a time, and delivers what arrived there. The end is seen by
// whichever of them meets it, and reported by a reader.
//
// The descriptor is shut down, never closed, while the connection lives, so
// a thread still in poll() or sendmsg() on it never touches a descriptor
// number that another open has reused; the destructor closes it.
//
// Over tls:// the same, with OpenSSL on the descriptor itself: the sending
// thread encrypts (SSL_write) and the reading thread decrypts (SSL_read),
// one at a time under ssl_mu_, so neither hands its bytes to an io thread
// and back (a cross-CPU wake-up each way, which cost a TLS client most of
// its speed through Asio's SSL stream).
//
// A reader polls the socket for a while before it sleeps, when answers have
// lately come that soon: on a virtual machine a sleeping thread's CPU halts,
// and waking it again costs tens of microseconds (an exit to the host),
// more than a cached page read takes the server. The spin is skipped while
// answers take far longer than it (a server whose disk is slow), so it costs
// CPU mostly where it saves time.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/ip/address.hpp>

#include "core/mutex.h"
#include "wire/frame_buffer.h"
#include "wire/frame_delivery.h"
#include "wire/tls_bio.h"
#include "wire/tls_context.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

namespace {

using Clock = std::chrono::steady_clock;

Status errno_socket_status(int err, std::string_view peer, std::string_view operation) {
  return socket_status(boost::system::error_code(err, boost::system::system_category()), peer, operation);
}

// Milliseconds for poll() until `deadline`, rounded up so a wait never
// ends just short of it.
int poll_ms(Clock::time_point deadline) {
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

class WaiterReadConnection final : public Connection, public std::enable_shared_from_this<WaiterReadConnection> {
 public:
  // `tls`: over tls://, the client's credentials; the handshake is then
  // handshake()'s, before start().
  WaiterReadConnection(int fd, std::string peer, int send_timeout_ms, std::shared_ptr<TlsContext> tls = nullptr)
      : fd_(fd), peer_(std::move(peer)), send_timeout_(std::chrono::milliseconds(send_timeout_ms)),
        tls_(std::move(tls)) {}
  ~WaiterReadConnection() override {
    if (ssl_ != nullptr) SSL_free(ssl_);
    ::close(fd_);
  }

  // The client's side of the TLS handshake with `host`, on this thread,
  // until `deadline`. kPermissionDenied when either side refused the other,
  // kDisconnected when the server hung up or the time ran out.
  Status handshake(const std::string& host, Clock::time_point deadline) {
    ssl_ = SSL_new(tls_->ssl().native_handle());
    // OpenSSL's socket BIO writes with write(2), which raises SIGPIPE once
    // the peer has gone: in a program that did not ignore it (any SQLite
    // program) that would be its death. Ours sends with MSG_NOSIGNAL.
    BIO* in = ssl_ != nullptr ? BIO_new_socket(fd_, BIO_NOCLOSE) : nullptr;
    BIO* out = in != nullptr ? new_send_bio(fd_) : nullptr;
    if (out == nullptr) {
      BIO_free(in);
      return Status::io_error(peer_, fmt::format("TLS: {}", openssl_reason()));
    }
    SSL_set_bio(ssl_, in, out);
    // Pieces of a frame may go out as the socket takes them.
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // A server that hangs up without TLS's goodbye has closed all the same
    // (frames carry their length, so a cut cannot pass for a whole one).
    SSL_set_options(ssl_, SSL_OP_IGNORE_UNEXPECTED_EOF);
    // A recv takes whatever has arrived (a batch of answers), not a record's
    // header and then its body. (Whole records OpenSSL holds are read before
    // the socket is polled: a reader always tries recv_tls first.)
    SSL_set_read_ahead(ssl_, 1);
    // A server that shows a certificate must be the host dialled (a DNS or
    // IP subject alternative name); one that takes our key shows none.
    boost::system::error_code not_ip;
    boost::asio::ip::make_address(host, not_ip);
    const bool named = not_ip ? SSL_set1_host(ssl_, host.c_str()) == 1
                              : X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), host.c_str()) == 1;
    if (!named) {
      // Unchecked, any certificate the CA signed would pass for this host.
      return Status::invalid_argument(peer_, fmt::format("TLS: cannot check certificates against host '{}'", host));
    }
    if (not_ip) {
      // (SSL_set_tlsext_host_name, without its macro's C cast)
      SSL_ctrl(ssl_, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, const_cast<char*>(host.c_str()));
    }
    for (;;) {
      ERR_clear_error();
      errno = 0;
      int rc = SSL_connect(ssl_);
      if (rc == 1) return Status::ok();
      int error = SSL_get_error(ssl_, rc);
      short events = error == SSL_ERROR_WANT_READ ? POLLIN : error == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (events == 0) {
        if (long verified = SSL_get_verify_result(ssl_); verified != X509_V_OK) {
          return Status::permission_denied(peer_, fmt::format("TLS handshake refused: certificate verify failed ({})",
                                                              X509_verify_cert_error_string(verified)));
        }
        if (error == SSL_ERROR_SSL) {
          return Status::permission_denied(peer_, fmt::format("TLS handshake refused: {}", openssl_reason()));
        }
        return Status::disconnected(peer_, "TLS handshake: the peer hung up (it may have refused our credentials)");
      }
      pollfd want{fd_, events, 0};
      if (::poll(&want, 1, poll_ms(deadline)) == 0 && Clock::now() >= deadline) {
        return Status::disconnected(peer_, "TLS handshake: not done in time");
      }
    }
  }

  // REQUIRES: before the first read_frames().
  void start(FrameHandler on_frame, CloseHandler on_close) override {
    delivery_.take(std::move(on_frame), std::move(on_close));
  }

  // Holds write_mu_ while it waits for room in the socket: write_mu_ orders
  // the writes of whole frames and guards nothing else, and close() does not
  // need it (the shutdown wakes the wait).
  void send(Frame frame) EXCLUDES(write_mu_) override {
    const size_t bytes = frame.size() * sizeof(capnp::word);
    std::string problem = frame_length_problem(bytes);
    if (!problem.empty()) {
      fail(Status::invalid_argument(peer_, fmt::format("cannot send: {}", problem)));
      return;
    }
    // One frame at a time, whole: frames from several threads never mix.
    MutexLock lock(write_mu_);
    const size_t whole = kFrameHeaderBytes + bytes;
    size_t written = 0;
    const auto deadline = Clock::now() + send_timeout_;
    while (!ending_) {
      ssize_t n = ssl_ != nullptr ? send_tls(frame, written) : send_frame_now(fd_, frame, written);
      if (n > 0) {
        written += static_cast<size_t>(n);
        if (written == whole) return;
        continue;
      }
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        fail(errno_socket_status(errno, peer_, "write"));
        return;
      }
      // The socket is full: the server reads slowly. Wait for room, a while.
      pollfd want{fd_, POLLOUT, 0};
      if (Clock::now() >= deadline || (::poll(&want, 1, poll_ms(deadline)) == 0 && Clock::now() >= deadline)) {
        fail(Status::disconnected(peer_, fmt::format("could not send for {} ms (the server does not read)",
                                                     send_timeout_.count())));
        return;
      }
    }
  }

  void close() override {
    auto self = shared_from_this();
    fail(Status::ok());
    // Reported here unless a reader is at work (then it reports, having
    // delivered nothing more: it checks for the end before each frame).
    if (reading_.exchange(true, std::memory_order_acquire)) return;
    if (!delivery_.reported()) report(Status::ok());
    reading_.store(false, std::memory_order_release);
  }

  // Every frame sent has been written when send() returned.
  void close_after_sending() override { close(); }

  // Only the threads that read pace this connection; a pause holds them off.
  void pause_reading() override { paused_ = true; }
  void resume_reading() override { paused_ = false; }

  std::string peer() const override { return peer_; }

  Reading reading() const override { return Reading::kByWaiter; }

  ReadOutcome read_frames(std::chrono::milliseconds timeout) override {
    if (paused_ || reading_.exchange(true, std::memory_order_acquire)) return ReadOutcome::kBusy;
    auto self = shared_from_this();  // a CloseHandler may drop the last other pointer
    ReadOutcome outcome = read_locked(Clock::now() + timeout);
    reading_.store(false, std::memory_order_release);
    return outcome;
  }

 private:
  // REQUIRES: reading_ is ours.
  ReadOutcome read_locked(Clock::time_point deadline) {
    if (delivery_.reported()) return ReadOutcome::kEnded;
    if (!delivery_.started()) return ReadOutcome::kNothing;
    // When this call first found nothing to read (a plain time point and a
    // flag: GCC takes an optional's value for uninitialized here).
    bool waiting = false;
    Clock::time_point waiting_since{};
    bool spun = false;
    Clock::time_point spin_until{};  // until then this call looks again without sleeping
    for (;;) {
      std::span<uint8_t> space = buffer_.space();
      ssize_t n = ssl_ != nullptr ? recv_tls(space) : ::recv(fd_, space.data(), space.size(), MSG_DONTWAIT);
      if (n > 0) {
        if (waiting) {
          // The wait an answer takes, smoothed over the last few.
          typical_wait_ += ((Clock::now() - waiting_since) - typical_wait_) / 8;
          waiting = false;
        }
        buffer_.filled(static_cast<size_t>(n));
        bool delivered = deliver();
        if (delivery_.reported()) return ReadOutcome::kEnded;
        if (delivered) return ReadOutcome::kDelivered;
        continue;  // the start of a frame: wait for the rest
      }
      if (n == 0) {
        report(Status::disconnected(peer_, "closed by the peer"));
        return ReadOutcome::kEnded;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        report(errno_socket_status(errno, peer_, "read"));
        return ReadOutcome::kEnded;
      }
      const Clock::time_point now = Clock::now();
      if (now >= deadline) return ReadOutcome::kNothing;
      if (!waiting) {
        waiting = true;
        waiting_since = now;
      }
      if (!spun && typical_wait_ < kSpinWhileWaitsUnder) {
        // Spinning on recv() itself: what arrives is read by the call that
        // sees it, one system call per look, none extra when it comes.
        spun = true;
        spin_until = std::min(now + kSpin, deadline);
        continue;
      }
      if (now < spin_until) continue;
      pollfd want{fd_, POLLIN, 0};
      int ready = ::poll(&want, 1, poll_ms(deadline));
      if (ready < 0 && errno != EINTR) {
        report(errno_socket_status(errno, peer_, "poll"));
        return ReadOutcome::kEnded;
      }
      if (ready == 0) return ReadOutcome::kNothing;
    }
  }

  // As send_frame_now (wire/frame_buffer.h), through TLS: what is left of
  // `frame` past its first `skip` bytes, encrypted; the bytes taken, or -1
  // with errno (EAGAIN when the socket can take nothing now).
  // REQUIRES: write_mu_ (the frame's bytes are staged in tls_out_).
  ssize_t send_tls(const Frame& frame, size_t skip) REQUIRES(write_mu_) EXCLUDES(ssl_mu_) {
    if (skip == 0) {
      // One record for header and body, not two.
      const size_t bytes = frame.size() * sizeof(capnp::word);
      FrameHeader header = encode_frame_length(static_cast<uint32_t>(bytes));
      tls_out_.assign(header.begin(), header.end());
      const auto* body = reinterpret_cast<const uint8_t*>(frame.data());
      tls_out_.insert(tls_out_.end(), body, body + bytes);
    }
    MutexLock lock(ssl_mu_);
    ERR_clear_error();
    errno = 0;
    int n = SSL_write(ssl_, tls_out_.data() + skip, static_cast<int>(tls_out_.size() - skip));
    if (n > 0) return n;
    return tls_failure(SSL_get_error(ssl_, n), "write");
  }

  // As recv(MSG_DONTWAIT) through TLS: plaintext into `space`; 0 when the
  // peer closed; -1 with errno (EAGAIN when nothing whole has arrived).
  // (A batch of answers is read whole: wire/tls_bio.h.)
  ssize_t recv_tls(std::span<uint8_t> space) EXCLUDES(ssl_mu_) {
    MutexLock lock(ssl_mu_);
    int error = SSL_ERROR_NONE;
    size_t got = read_whole_records(ssl_, space, error);
    if (got > 0) {  // the end or the error again at the next read
      ERR_clear_error();
      return static_cast<ssize_t>(got);
    }
    if (error == SSL_ERROR_ZERO_RETURN) return 0;
    return tls_failure(error, "read");
  }

  // -1 with errno for a failed SSL_read or SSL_write: EAGAIN when it waits
  // for the socket, the socket's error, else EPROTO (said in the log).
  ssize_t tls_failure(int error, const char* operation) REQUIRES(ssl_mu_) {
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      errno = EAGAIN;
    } else if (error == SSL_ERROR_SYSCALL && errno != 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
               errno != EINTR) {
      // errno is the socket's (cleared before the call)
    } else if (error == SSL_ERROR_SYSCALL) {
      errno = ECONNRESET;  // the peer went away mid-record
    } else {
      (void)operation;
      errno = EPROTO;
    }
    ERR_clear_error();
    return -1;
  }

  // Delivers the whole frames buffered; whether it delivered any. Stops at
  // the end (close() from a handler) or a pause.
  bool deliver() {
    FrameDelivery::Delivered delivered = delivery_.deliver(buffer_, [this] { return !ending_ && !paused_; });
    const bool any = delivered.frames > 0;
    if (!delivered.malformed.empty()) {
      report(Status::corruption(peer_, delivered.malformed));
      return any;
    }
    buffer_.shrink_when_empty();
    if (ending_) report(Status::ok());
    return any;
  }

  // Records the first reason the connection ends and shuts the socket, so
  // that the reader, now or next, meets the end and reports it.
  void fail(Status why) EXCLUDES(end_mu_) {
    {
      MutexLock lock(end_mu_);
      if (ending_) return;
      end_status_ = std::move(why);
      ending_ = true;
    }
    ::shutdown(fd_, SHUT_RDWR);
  }

  // REQUIRES: reading_ is ours. Ends the connection (with the first reason
  // given, else `seen`) and runs the CloseHandler, once.
  void report(Status seen) EXCLUDES(end_mu_) {
    if (delivery_.reported()) return;
    fail(std::move(seen));
    Status why;
    {
      MutexLock lock(end_mu_);
      why = end_status_;
    }
    delivery_.report_close(why);
  }

  const int fd_;
  const std::string peer_;
  const std::chrono::milliseconds send_timeout_;
  const std::shared_ptr<TlsContext> tls_;  // tls://: what ssl_ was made from
  SSL* ssl_ = nullptr;                      // tls://: set by handshake(), before start()
  // SSL_read and SSL_write take turns on ssl_; taken inside write_mu_.
  Mutex ssl_mu_;

  std::atomic<bool> reading_{false};  // a thread is in read_frames() (or close() reports)
  std::atomic<bool> paused_{false};
  std::atomic<bool> ending_{false};  // set once, under end_mu_; read without it
  // Taken inside write_mu_ by a send() that fails, never the other way.
  Mutex end_mu_;
  Status end_status_ GUARDED_BY(end_mu_);

  // How long a reader polls before it sleeps (see the top of this file):
  // about what a cached page read over loopback takes, end to end.
  // It spins while answers typically come within a few spins' time (a wait
  // that ended in sleep counts the wake-up too, so the bound is loose
  // enough to come back to spinning after a slow spell).
  static constexpr std::chrono::microseconds kSpin{50};
  static constexpr std::chrono::microseconds kSpinWhileWaitsUnder{4 * kSpin};

  // Owned by whoever holds reading_.
  Clock::duration typical_wait_{0};  // for an answer, once a reader found none waiting
  FrameDelivery delivery_;
  FrameBuffer buffer_;

  Mutex write_mu_;  // one send() at a time: a frame goes out whole
  std::vector<uint8_t> tls_out_ GUARDED_BY(write_mu_);  // tls://: the frame being sent
};

}  // namespace

std::shared_ptr<Connection> make_waiter_read_connection(int fd, std::string peer, int send_timeout_ms) {
  return std::make_shared<WaiterReadConnection>(fd, std::move(peer), send_timeout_ms);
}

Result<std::shared_ptr<Connection>> make_waiter_read_tls_connection(int fd, std::string peer, int send_timeout_ms,
                                                                    std::shared_ptr<TlsContext> tls,
                                                                    const std::string& host,
                                                                    std::chrono::steady_clock::time_point deadline) {
  auto connection = std::make_shared<WaiterReadConnection>(fd, std::move(peer), send_timeout_ms, std::move(tls));
  if (Status s = connection->handshake(host, deadline); !s) return s;
  return std::shared_ptr<Connection>(std::move(connection));
}

}  // namespace pagefile::net::internal
