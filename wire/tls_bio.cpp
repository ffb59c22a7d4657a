// The BIOs of wire/tls_bio.h.
#include "wire/tls_bio.h"

#include <sys/socket.h>

#include <openssl/err.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>

namespace pagefile::net::internal {

namespace {

// What a BIO method needs besides its write: OpenSSL flushes after a
// handshake flight (nothing to do: the write already went, or waits with
// the caller), and may ask what is pending.
long plain_ctrl(BIO*, int command, long, void*) { return command == BIO_CTRL_FLUSH ? 1 : 0; }

int set_up(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

const BIO_METHOD* make_method(const char* name, int (*write)(BIO*, const char*, int),
                              long (*ctrl)(BIO*, int, long, void*)) {
  BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, name);
  if (m != nullptr) {
    BIO_meth_set_write(m, write);
    BIO_meth_set_ctrl(m, ctrl);
    BIO_meth_set_create(m, set_up);
  }
  return m;
}

int send_write(BIO* bio, const char* data, int size) {
  BIO_clear_retry_flags(bio);
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(bio)));
  ssize_t n = ::send(fd, data, static_cast<size_t>(size), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n >= 0) return static_cast<int>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(bio);
  return -1;
}

std::vector<uint8_t>& out_of(BIO* bio) { return *static_cast<std::vector<uint8_t>*>(BIO_get_data(bio)); }

int buffer_write(BIO* bio, const char* data, int size) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  out_of(bio).insert(out_of(bio).end(), bytes, bytes + size);
  return size;
}

long buffer_ctrl(BIO* bio, int command, long, void*) {
  switch (command) {
    case BIO_CTRL_FLUSH:
      return 1;  // (the caller sends it once the SSL call returns)
    case BIO_CTRL_WPENDING:
    case BIO_CTRL_PENDING:
      return static_cast<long>(out_of(bio).size());
    default:
      return 0;
  }
}

BIO* new_bio(const BIO_METHOD* method, void* data) {
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (bio != nullptr) BIO_set_data(bio, data);
  return bio;
}

}  // namespace

BIO* new_send_bio(int fd) {
  static const BIO_METHOD* method = make_method("pagefile tls send", send_write, plain_ctrl);
  return new_bio(method, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
}

BIO* new_buffer_bio(std::vector<uint8_t>* out) {
  static const BIO_METHOD* method = make_method("pagefile tls buffer", buffer_write, buffer_ctrl);
  return new_bio(method, out);
}

size_t read_whole_records(SSL* ssl, std::span<uint8_t> into, int& stop) {
  size_t got = 0;
  stop = SSL_ERROR_NONE;
  while (got < into.size()) {
    ERR_clear_error();
    errno = 0;
    int n = SSL_read(ssl, into.data() + got, static_cast<int>(std::min<size_t>(into.size() - got, INT_MAX)));
    if (n <= 0) {
      stop = SSL_get_error(ssl, n);
      break;
    }
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace pagefile::net::internal
