// Addresses of servers on the bus.
//   tcp://HOST:PORT   HOST a name or IPv4/IPv6 literal ([::1] in brackets)
//   tls://HOST:PORT   the same over TLS 1.3 (wire/tls.h)
//   unix:/PATH        a Unix-domain socket
//   inproc:NAME       a server inside this process
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pagefile/status.h"

namespace pagefile::net {

struct Address {
  enum class Kind : uint8_t { kTcp, kUnix, kInproc, kTls };
  Kind kind = Kind::kTcp;
  std::string host;    // tcp, tls
  uint16_t port = 0;   // tcp, tls
  std::string path;    // unix: the socket path; inproc: the name

  // The canonical text form, which parse_address reads back.
  std::string text() const;
  // Whether it is reached over TCP (tcp:// or tls://): host and port hold.
  bool is_tcp() const { return kind == Kind::kTcp || kind == Kind::kTls; }
  friend bool operator==(const Address&, const Address&) = default;
};

// kInvalidArgument, naming the text and what is wrong, for anything else.
Result<Address> parse_address(std::string_view text);

// True when `host` (an Address's, tcp or tls) reaches this machine only: a
// loopback literal (127.0.0.0/8, ::1), or a name every address of which is
// one. A wildcard (0.0.0.0, ::) or a name that does not resolve is not.
bool is_loopback_host(std::string_view host);

}  // namespace pagefile::net
