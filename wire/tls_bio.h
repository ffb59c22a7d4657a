// The two BIOs (OpenSSL's byte channels) that tls:// puts under an SSL
// object in place of OpenSSL's socket BIO, whose writes may raise SIGPIPE in
// a program that did not ask for it; and the read both sides of tls:// do.
#pragma once

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace pagefile::net::internal {

// Writes to socket `fd` with send(MSG_NOSIGNAL | MSG_DONTWAIT): a peer gone
// is an EPIPE, never a signal; a full socket is a retry (SSL_ERROR_WANT_WRITE).
// Null when OpenSSL could not make it.
BIO* new_send_bio(int fd);

// Appends what is written to `out`, which the caller sends (and empties) as
// it can: records made by several SSL calls then leave in one send.
BIO* new_buffer_bio(std::vector<uint8_t>* out);

// SSL_read into `into` while whole records are there (SSL_read gives one
// record a call), so that a batch of frames is delivered at once: the bytes
// read, and in `stop` the SSL_get_error of the call that stopped
// (SSL_ERROR_NONE when `into` filled). OpenSSL's error queue and errno hold
// that call's.
size_t read_whole_records(SSL* ssl, std::span<uint8_t> into, int& stop);

}  // namespace pagefile::net::internal
