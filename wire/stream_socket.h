// What the stream transports (tcp://, tls:// and unix:) share between listening
// (stream_listener.cpp), connecting (stream_connect.cpp) and the connection
// that carries frames once either is done (stream_connection.cpp).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/error_code.hpp>

#include "wire/address.h"
#include "wire/tls.h"
#include "wire/transport.h"
#include "pagefile/status.h"

namespace pagefile::net::internal {

namespace asio = boost::asio;
using boost::system::error_code;
using Tcp = asio::ip::tcp;
using Unix = asio::local::stream_protocol;
using Strand = asio::strand<asio::io_context::executor_type>;

// Readies a connected socket to carry frames, on either side: a tcp socket
// sends small frames at once (no Nagle delay); a unix socket needs nothing.
inline void prepare_socket(Tcp::socket& socket) {
  error_code ignored;
  socket.set_option(Tcp::no_delay(true), ignored);
}
inline void prepare_socket(Unix::socket&) {}

// The connection over a connected (and prepared) socket, read on `io`.
std::shared_ptr<Connection> make_stream_connection(boost::asio::io_context& io, Tcp::socket socket, std::string peer);
std::shared_ptr<Connection> make_stream_connection(boost::asio::io_context& io, Unix::socket socket, std::string peer);
// The connection over a TLS stream whose handshake is done, for a peer in
// `role`; it holds on to `tls`, which its stream was made from. (A client's
// Asio SSL stream; a server's is a TlsSocket, below.)
std::shared_ptr<Connection> make_stream_connection(boost::asio::io_context& io,
                                                   boost::asio::ssl::stream<Tcp::socket> stream, std::string peer,
                                                   std::shared_ptr<TlsContext> tls, PeerRole role);
// The same over a server's TlsSocket (wire/tls_socket.h) whose handshake is
// done.
class TlsSocket;
std::shared_ptr<Connection> make_stream_connection(boost::asio::io_context& io, TlsSocket socket,
                                                   std::string peer, std::shared_ptr<TlsContext> tls, PeerRole role);

// kInvalidArgument when a unix: address's path cannot be a socket's
// address (empty, or too long for sockaddr_un), else OK.
Status unix_path_status(const Address& address);

}  // namespace pagefile::net::internal
