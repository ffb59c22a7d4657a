// A server's tls:// socket: OpenSSL on the TCP socket itself, in the shape
// of an Asio stream (async_handshake, async_read_some, async_write_some) so
// that StreamConnection carries frames over it as over a tcp:// socket.
//
// Why not Asio's ssl::stream: it puts a 17 KiB memory BIO pair between
// OpenSSL and the socket, so an answer of many pages leaves as one send per
// TLS record (16 KiB), each a round through its state machine and two more
// copies. Here OpenSSL reads the socket directly (with read-ahead: a burst
// of small requests is one recv), and writes its records into this socket's
// own buffer (a BIO of ours), which then goes out in one send: a batch of
// answers costs one system call, as it does over tcp://.
//
// Every operation must run where the connection's other operations run
// (its strand): an SSL object takes one call at a time. A completion is
// posted to the handler's executor, never run inside the call that started
// it.
#pragma once

#include <sys/socket.h>

#include <cerrno>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/system/error_code.hpp>
#include <openssl/ssl.h>

namespace pagefile::net::internal {

class TlsSocket {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;
  using error_code = boost::system::error_code;

  // The server's side of a TLS connection on the connected `socket`, with
  // the settings of `ctx` (TlsContext::ssl()). ok() is false when OpenSSL
  // could not make one (out of memory).
  TlsSocket(boost::asio::ip::tcp::socket socket, SSL_CTX* ctx);
  TlsSocket(TlsSocket&&) noexcept = default;
  TlsSocket& operator=(TlsSocket&&) noexcept = default;

  bool ok() const { return state_ != nullptr && state_->ssl != nullptr; }
  boost::asio::ip::tcp::socket& lowest_layer() { return socket_; }
  executor_type get_executor() { return socket_.get_executor(); }
  SSL* native_handle() { return state_ != nullptr ? state_->ssl : nullptr; }

  // The handshake, as the server: handler(error_code) once it is done and
  // everything it made is sent. Errors are Asio's ssl category (OpenSSL's
  // reason), stream_truncated (the peer hung up), or the socket's.
  template <class Handler>
  void async_handshake(Handler&& handler) {
    error_code ec;
    Step step = handshake_step(ec);
    if (step == Step::kDone || step == Step::kFailed) {
      complete(std::forward<Handler>(handler), ec);
      return;
    }
    wait(step, std::forward<Handler>(handler),
         [this](auto&& h) { this->async_handshake(std::forward<decltype(h)>(h)); }, [](auto&& h, const error_code& e) {
           h(e);
         });
  }

  // Decrypted bytes into the first buffer of `buffers`: handler(ec, n).
  template <class Buffers, class Handler>
  void async_read_some(const Buffers& buffers, Handler&& handler) {
    boost::asio::mutable_buffer into = *boost::asio::buffer_sequence_begin(buffers);
    error_code ec;
    size_t n = 0;
    Step step = read_step(into.data(), into.size(), n, ec);
    if (step == Step::kDone || step == Step::kFailed) {
      complete(std::forward<Handler>(handler), ec, n);
      return;
    }
    wait(step, std::forward<Handler>(handler),
         [this, into](auto&& h) { this->async_read_some(boost::asio::buffer(into), std::forward<decltype(h)>(h)); },
         [](auto&& h, const error_code& e) { h(e, size_t{0}); });
  }

  // Encrypts the first buffer of `buffers` whole (one record per 16 KiB)
  // and sends it: handler(ec, bytes) once every byte of it is on the socket.
  template <class Buffers, class Handler>
  void async_write_some(const Buffers& buffers, Handler&& handler) {
    boost::asio::const_buffer from = *boost::asio::buffer_sequence_begin(buffers);
    error_code ec;
    if (!encrypt(from.data(), from.size(), ec)) {
      complete(std::forward<Handler>(handler), ec, size_t{0});
      return;
    }
    send_encrypted(std::forward<Handler>(handler), from.size());
  }

 private:
  enum class Step { kDone, kWantRead, kWantWrite, kFailed };

  // The OpenSSL side; on the heap, so the BIO's pointer to `out` survives a
  // move of the socket.
  struct State {
    State() = default;
    State(const State&) = delete;
    State& operator=(const State&) = delete;
    ~State() {
      if (ssl != nullptr) SSL_free(ssl);  // (and its BIOs)
    }
    SSL* ssl = nullptr;
    std::vector<uint8_t> out;  // records made and not yet sent, from out_sent
    size_t out_sent = 0;
    // A fatal error met after a read had bytes to give: given by the next.
    error_code read_error;
  };
  // Records a read made (a key update's answer) wait at most this much
  // before reading waits for the socket to take them: a peer that asks and
  // never reads cannot grow `out` without bound.
  static constexpr size_t kMaxUnsentFromReads = 64 * 1024;

  // One turn of each operation; each ends by sending what it made. Each
  // first checks that the socket is still open: OpenSSL's read BIO holds the
  // descriptor's number, which a close (on this strand) may have handed to
  // another file since a wait completed.
  bool closed(error_code& ec);
  Step handshake_step(error_code& ec);
  Step read_step(void* data, size_t size, size_t& n, error_code& ec);
  bool encrypt(const void* data, size_t size, error_code& ec);
  // Sends what waits in state_->out: kDone when it is all gone, kWantWrite
  // when the socket took what it could, kFailed with `ec`.
  Step flush(error_code& ec);

  template <class Handler>
  void send_encrypted(Handler&& handler, size_t bytes) {
    error_code ec;
    Step step = flush(ec);
    if (step == Step::kDone || step == Step::kFailed) {
      complete(std::forward<Handler>(handler), ec, step == Step::kDone ? bytes : size_t{0});
      return;
    }
    wait(step, std::forward<Handler>(handler),
         [this, bytes](auto&& h) { this->send_encrypted(std::forward<decltype(h)>(h), bytes); },
         [](auto&& h, const error_code& e) { h(e, size_t{0}); });
  }

  // Waits until the socket is ready for `step`, on the handler's executor,
  // then `retry(handler)`; a failed wait (the socket closed) goes to
  // `fail(handler, ec)`.
  template <class Handler, class Retry, class Fail>
  void wait(Step step, Handler&& handler, Retry retry, Fail fail) {
    auto executor = boost::asio::get_associated_executor(handler, socket_.get_executor());
    socket_.async_wait(
        step == Step::kWantRead ? boost::asio::ip::tcp::socket::wait_read : boost::asio::ip::tcp::socket::wait_write,
        boost::asio::bind_executor(executor, [h = std::move(handler), retry = std::move(retry),
                                              fail = std::move(fail)](const error_code& ec) mutable {
          if (ec) {
            fail(h, ec);
          } else {
            retry(std::move(h));
          }
        }));
  }

  template <class Handler, class... Args>
  void complete(Handler&& handler, Args... args) {
    auto executor = boost::asio::get_associated_executor(handler, socket_.get_executor());
    boost::asio::post(boost::asio::bind_executor(
        executor, [h = std::move(handler), args...]() mutable { h(args...); }));
  }

  boost::asio::ip::tcp::socket socket_;
  std::unique_ptr<State> state_;
};

}  // namespace pagefile::net::internal
