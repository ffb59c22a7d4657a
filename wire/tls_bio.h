// The two BIOs (OpenSSL's byte channels) that tls:// puts under an SSL
// object in place of OpenSSL's socket BIO, whose writes may raise SIGPIPE in
// a program that did not ask for it.
#pragma once

#include <openssl/bio.h>

#include <cstdint>
#include <vector>

namespace pagefile::net::internal {

// Writes to socket `fd` with send(MSG_NOSIGNAL | MSG_DONTWAIT): a peer gone
// is an EPIPE, never a signal; a full socket is a retry (SSL_ERROR_WANT_WRITE).
// Null when OpenSSL could not make it.
BIO* new_send_bio(int fd);

// Appends what is written to `out`, which the caller sends (and empties) as
// it can: records made by several SSL calls then leave in one send.
BIO* new_buffer_bio(std::vector<uint8_t>* out);

}  // namespace pagefile::net::internal
