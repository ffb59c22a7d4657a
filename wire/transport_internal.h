// The transports behind listen() and connect() (wire/transport.h), one pair
// of functions per kind of address; transport.cpp picks one by Address::kind.
// Each REQUIRES an address of its own kind.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include "wire/address.h"
#include "wire/frame.h"
#include "wire/transport.h"
#include "pagefile/status.h"

namespace pagefile::net::internal {

// Stream sockets, tcp://, tls:// and unix: (stream_listener.cpp,
// stream_connect.cpp). `tls` for tls:// (a TlsContext of the right side),
// null for tcp://.
Result<std::unique_ptr<Listener>> listen_tcp(boost::asio::io_context& io, const Address& address,
                                             Listener::AcceptHandler on_accept, std::shared_ptr<TlsContext> tls);
Result<std::unique_ptr<Listener>> listen_unix(boost::asio::io_context& io, const Address& address,
                                              Listener::AcceptHandler on_accept, uint32_t mode);
// (`send_timeout_ms` is for Reading::kByWaiter, wire/transport.h.)
Result<std::shared_ptr<Connection>> connect_tcp(boost::asio::io_context& io, const Address& address, int timeout_ms,
                                                Connection::Reading reading, int send_timeout_ms,
                                                std::shared_ptr<TlsContext> tls);
Result<std::shared_ptr<Connection>> connect_unix(boost::asio::io_context& io, const Address& address, int timeout_ms,
                                                 Connection::Reading reading, int send_timeout_ms);

// In memory (inproc_transport.cpp): inproc:.
Result<std::unique_ptr<Listener>> listen_inproc(boost::asio::io_context& io, const Address& address,
                                                Listener::AcceptHandler on_accept, InprocHub& hub);
Result<std::shared_ptr<Connection>> connect_inproc(boost::asio::io_context& io, const Address& address,
                                                   InprocHub& hub);

// The client's end of a connected stream socket `fd` (made non-blocking or
// not), read by its waiters (waiter_connection.cpp, Connection::Reading::
// kByWaiter); it owns `fd`. A send waits at most `send_timeout_ms` for room.
std::shared_ptr<Connection> make_waiter_read_connection(int fd, std::string peer, int send_timeout_ms);
// The same over tls://: shakes hands with `host` (a client, with `tls`) on
// the calling thread until `deadline` first. kPermissionDenied when either
// side refuses the other, kDisconnected when the server hangs up or the time
// runs out; `fd` is closed then.
Result<std::shared_ptr<Connection>> make_waiter_read_tls_connection(int fd, std::string peer, int send_timeout_ms,
                                                                    std::shared_ptr<TlsContext> tls,
                                                                    const std::string& host,
                                                                    std::chrono::steady_clock::time_point deadline);

// Whether a socket error means the other end (or the path to it) is gone.
bool is_disconnect(const boost::system::error_code& ec);
// The Status for a failed socket `operation` on the connection to `peer`:
// kDisconnected when the peer is gone, the OS error otherwise.
Status socket_status(const boost::system::error_code& ec, std::string_view peer, std::string_view operation);

// Why a frame of `bytes` may not cross a connection, or empty when it may:
// a length of 0, not a multiple of 8 or above kMaxFrameBytes is malformed.
std::string frame_length_problem(uint64_t bytes);

}  // namespace pagefile::net::internal
