// What the tls:// transport (stream_listener.cpp, stream_connect.cpp) needs
// of a loaded TlsContext (wire/tls.h): the OpenSSL context its streams are
// made from, and who the peer turned out to be once a handshake is done.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/stream.hpp>

#include "wire/tls.h"

namespace pagefile::net {

// OpenSSL's reason for the last failure on this thread, for messages; clears
// the thread's error queue.
std::string openssl_reason();

class TlsContext {
 public:
  explicit TlsContext(TlsSide side);
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  TlsSide side() const { return side_; }
  boost::asio::ssl::context& ssl() { return ssl_; }

  // Loads `options` (make_tls_context).
  Status load(const TlsOptions& options);

  // A server's verdict on the peer of a finished handshake on `ssl`: its
  // role, or kPermissionDenied saying why it is refused.
  Result<PeerRole> peer_role(SSL* ssl) const;

 private:
  static unsigned int server_psk(SSL* ssl, const char* identity, unsigned char* psk, unsigned int max_psk_len);
  static unsigned int client_psk(SSL* ssl, const char* hint, char* identity, unsigned int max_identity_len,
                                 unsigned char* psk, unsigned int max_psk_len);
  static const TlsContext* of(SSL* ssl);

  const TlsSide side_;
  boost::asio::ssl::context ssl_;
  std::map<std::string, PresharedKey> keys_;  // a server's, by identity
  std::optional<PresharedKey> own_key_;       // a client's
  std::map<std::string, PeerRole> subject_roles_;
};

namespace internal {

using TlsStream = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

// How long either side waits for a TLS handshake to finish: a peer that
// connects and says nothing is dropped after this.
inline constexpr int kTlsHandshakeTimeoutMs = 10'000;

// The Status of a failed handshake with `peer`: kDisconnected when the
// connection went away, kPermissionDenied (with OpenSSL's reason) when the
// peer or its credentials were refused. `ssl`: a server's, to say that the
// peer's key was unknown when it was.
Status handshake_status(const boost::system::error_code& ec, std::string_view peer, SSL* ssl = nullptr);

}  // namespace internal

}  // namespace pagefile::net
