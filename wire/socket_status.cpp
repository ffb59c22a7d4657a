// The Status a failed socket operation becomes, for every stream transport.
#include <sys/un.h>

#include <cerrno>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <fmt/format.h>

#include "core/os_error.h"
#include "wire/stream_socket.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

// Errors that mean the other end (or the path to it) is gone: the caller's
// remedy is to reconnect, so they all become kDisconnected.
bool is_disconnect(const boost::system::error_code& ec) {
  if (ec == boost::asio::error::eof) return true;
  // A TLS peer that closed without saying goodbye (close_notify): gone all
  // the same.
  if (ec == boost::asio::ssl::error::stream_truncated) return true;
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

Status socket_status(const boost::system::error_code& ec, std::string_view peer, std::string_view operation) {
  if (ec == boost::asio::error::eof) return Status::disconnected(peer, "closed by the peer");
  if (is_disconnect(ec)) return Status::disconnected(peer, fmt::format("{}: {}", operation, ec.message()));
  if (ec.category() == boost::system::system_category()) return errno_status(ec.value(), peer, operation);
  return Status::io_error(peer, fmt::format("{}: {}", operation, ec.message()));
}

Status unix_path_status(const Address& address) {
  if (address.path.empty() || address.path.size() >= sizeof(sockaddr_un{}.sun_path)) {
    return Status::invalid_argument(address.text(), "socket path is empty or too long");
  }
  return Status::ok();
}

}  // namespace pagefile::net::internal
