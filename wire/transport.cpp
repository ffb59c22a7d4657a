// listen() and connect(): pick the transport by the kind of address.
#include "wire/transport.h"

#include <fmt/format.h>

#include "wire/tls_context.h"
#include "wire/transport_internal.h"

namespace pagefile::net {

namespace internal {

std::string frame_length_problem(uint64_t bytes) {
  if (bytes == 0) return "malformed frame: length 0 (a frame holds at least one word)";
  if (bytes % sizeof(capnp::word) != 0) {
    return fmt::format("malformed frame: length {} is not a multiple of {}", bytes, sizeof(capnp::word));
  }
  if (bytes > kMaxFrameBytes) {
    return fmt::format("malformed frame: length {} is above the limit of {} bytes", bytes, kMaxFrameBytes);
  }
  return {};
}

// A tls:// address needs a context of `side`; kInvalidArgument otherwise.
Status tls_status(const Address& address, const TlsContext* tls, TlsSide side) {
  if (address.kind != Address::Kind::kTls) return Status::ok();
  if (tls == nullptr) {
    return Status::invalid_argument(address.text(),
                                    "a tls:// address needs TLS credentials (--psk-file, or --tls-cert/--tls-key/--tls-ca)");
  }
  if (tls->side() != side) return Status::invalid_argument(address.text(), "TLS credentials of the wrong side");
  return Status::ok();
}

}  // namespace internal

Result<std::unique_ptr<Listener>> listen(boost::asio::io_context& io, const Address& address,
                                         Listener::AcceptHandler on_accept, InprocHub* hub, uint32_t unix_mode,
                                         std::shared_ptr<TlsContext> tls) {
  if (Status s = internal::tls_status(address, tls.get(), TlsSide::kServer); !s) return s;
  switch (address.kind) {
    case Address::Kind::kTcp:
      return internal::listen_tcp(io, address, std::move(on_accept), nullptr);
    case Address::Kind::kTls:
      return internal::listen_tcp(io, address, std::move(on_accept), std::move(tls));
    case Address::Kind::kUnix:
      return internal::listen_unix(io, address, std::move(on_accept), unix_mode);
    case Address::Kind::kInproc:
      if (hub == nullptr) return Status::invalid_argument(address.text(), "listening on an inproc: address needs an InprocHub");
      return internal::listen_inproc(io, address, std::move(on_accept), *hub);
  }
  return Status::invalid_argument(address.text(), "unknown kind of address");
}

Result<std::shared_ptr<Connection>> connect(boost::asio::io_context& io, const Address& address, int timeout_ms,
                                            InprocHub* hub, Connection::Reading reading, int send_timeout_ms,
                                            std::shared_ptr<TlsContext> tls) {
  if (send_timeout_ms <= 0) send_timeout_ms = timeout_ms;
  if (Status s = internal::tls_status(address, tls.get(), TlsSide::kClient); !s) return s;
  switch (address.kind) {
    case Address::Kind::kTcp:
      return internal::connect_tcp(io, address, timeout_ms, reading, send_timeout_ms, nullptr);
    case Address::Kind::kTls:
      return internal::connect_tcp(io, address, timeout_ms, reading, send_timeout_ms, std::move(tls));
    case Address::Kind::kUnix:
      return internal::connect_unix(io, address, timeout_ms, reading, send_timeout_ms);
    case Address::Kind::kInproc:
      if (hub == nullptr) return Status::invalid_argument(address.text(), "connecting to an inproc: address needs an InprocHub");
      return internal::connect_inproc(io, address, *hub);
  }
  return Status::invalid_argument(address.text(), "unknown kind of address");
}

}  // namespace pagefile::net
