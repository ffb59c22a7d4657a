// TlsSocket's OpenSSL side (wire/tls_socket.h).
#include "wire/tls_socket.h"

#include <algorithm>
#include <climits>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <openssl/err.h>

#include "wire/tls_bio.h"

namespace pagefile::net::internal {

namespace {

using boost::system::error_code;

// The error_code for a failed SSL call whose SSL_get_error was `error`, as
// Asio's ssl::stream reports it (handshake_status and socket_status read
// these).
error_code ssl_error(int error) {
  if (error == SSL_ERROR_ZERO_RETURN) return boost::asio::error::eof;
  if (error == SSL_ERROR_SYSCALL) {
    unsigned long queued = ERR_get_error();
    if (queued != 0) return error_code(static_cast<int>(queued), boost::asio::error::get_ssl_category());
    // errno 0: the peer closed the connection without a TLS goodbye.
    if (errno == 0) return boost::asio::ssl::error::stream_truncated;
    return error_code(errno, boost::system::system_category());
  }
  unsigned long queued = ERR_get_error();
  if (queued == 0) return boost::asio::ssl::error::unexpected_result;
  // OpenSSL 3 says so of a peer gone without a TLS goodbye.
  if (ERR_GET_REASON(queued) == SSL_R_UNEXPECTED_EOF_WHILE_READING) return boost::asio::ssl::error::stream_truncated;
  return error_code(static_cast<int>(queued), boost::asio::error::get_ssl_category());
}

}  // namespace

TlsSocket::TlsSocket(boost::asio::ip::tcp::socket socket, SSL_CTX* ctx)
    : socket_(std::move(socket)), state_(std::make_unique<State>()) {
  error_code ignored;
  socket_.native_non_blocking(true, ignored);  // OpenSSL reads it: EAGAIN, never a wait
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return;
  BIO* in = BIO_new_socket(socket_.native_handle(), BIO_NOCLOSE);
  // Records wait in state_->out, sent by flush().
  BIO* out = new_buffer_bio(&state_->out);
  if (in == nullptr || out == nullptr) {
    BIO_free(in);
    BIO_free(out);
    SSL_free(ssl);
    return;
  }
  SSL_set_bio(ssl, in, out);
  SSL_set_accept_state(ssl);
  // A recv takes whatever has arrived (many small requests), not one record
  // header and then its body.
  SSL_set_read_ahead(ssl, 1);
  SSL_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  state_->ssl = ssl;
}

bool TlsSocket::closed(error_code& ec) {
  if (!ok()) {
    ec = boost::asio::error::no_memory;
    return true;
  }
  if (!socket_.is_open()) {
    ec = boost::asio::error::operation_aborted;
    return true;
  }
  return false;
}

TlsSocket::Step TlsSocket::handshake_step(error_code& ec) {
  if (closed(ec)) return Step::kFailed;
  if (!SSL_is_init_finished(state_->ssl)) {
    ERR_clear_error();
    errno = 0;
    int rc = SSL_do_handshake(state_->ssl);
    if (rc != 1) {
      int error = SSL_get_error(state_->ssl, rc);
      if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
        ec = ssl_error(error);
        error_code ignored;
        (void)flush(ignored);  // the alert saying why, if the socket takes it
        return Step::kFailed;
      }
      Step sent = flush(ec);
      if (sent != Step::kDone) return sent;
      return error == SSL_ERROR_WANT_READ ? Step::kWantRead : Step::kWantWrite;
    }
  }
  return flush(ec);  // done once its last flight is sent
}

TlsSocket::Step TlsSocket::read_step(void* data, size_t size, size_t& n, error_code& ec) {
  // (A burst of requests is read whole, so it is delivered, and answered
  // in one send, together, as over tcp://.)
  if (closed(ec)) return Step::kFailed;
  if (state_->read_error) {
    ec = state_->read_error;
    return Step::kFailed;
  }
  if (state_->out.size() - state_->out_sent > kMaxUnsentFromReads) {
    Step sent = flush(ec);
    if (sent != Step::kDone) return sent;
  }
  int error = SSL_ERROR_NONE;
  n = read_whole_records(state_->ssl, {static_cast<uint8_t*>(data), size}, error);
  const bool waits = error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE;
  if (n > 0 || error == SSL_ERROR_NONE) {
    // What came first, now; the end or the error at the next read.
    if (error != SSL_ERROR_NONE && !waits) state_->read_error = ssl_error(error);
  } else if (waits) {
    Step sent = flush(ec);
    if (sent == Step::kFailed) return sent;
    return error == SSL_ERROR_WANT_READ ? Step::kWantRead : Step::kWantWrite;
  } else {
    ec = ssl_error(error);
    return Step::kFailed;
  }
  ERR_clear_error();
  // A read may have made something to send (a key update's answer): it
  // goes now if the socket takes it, else with the next answer.
  error_code ignored;
  (void)flush(ignored);
  return Step::kDone;
}

bool TlsSocket::encrypt(const void* data, size_t size, error_code& ec) {
  if (closed(ec)) return false;
  if (size == 0) return true;
  ERR_clear_error();
  errno = 0;
  // The BIO never refuses: SSL_write takes it all, in records of 16 KiB.
  int rc = SSL_write(state_->ssl, data, static_cast<int>(std::min<size_t>(size, INT_MAX)));
  if (rc == static_cast<int>(size)) return true;
  ec = rc > 0 ? boost::asio::error::message_size : ssl_error(SSL_get_error(state_->ssl, rc));
  return false;
}

TlsSocket::Step TlsSocket::flush(error_code& ec) {
  std::vector<uint8_t>& out = state_->out;
  while (state_->out_sent < out.size()) {
    ssize_t n = ::send(socket_.native_handle(), out.data() + state_->out_sent, out.size() - state_->out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::kWantWrite;
      ec = error_code(errno, boost::system::system_category());
      return Step::kFailed;
    }
    state_->out_sent += static_cast<size_t>(n);
  }
  out.clear();  // (its capacity stays for the next batch)
  state_->out_sent = 0;
  return Step::kDone;
}

}  // namespace pagefile::net::internal
