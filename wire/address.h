// Addresses of servers on the bus.
//   tcp://HOST:PORT   HOST a name or IPv4/IPv6 literal ([::1] in brackets)
//   unix:/PATH        a Unix-domain socket
//   inproc:NAME       a server inside this process
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pagefile/status.h"

namespace pagefile::net {

struct Address {
  enum class Kind : uint8_t { kTcp, kUnix, kInproc };
  Kind kind = Kind::kTcp;
  std::string host;    // tcp
  uint16_t port = 0;   // tcp
  std::string path;    // unix: the socket path; inproc: the name

  // The canonical text form, which parse_address reads back.
  std::string text() const;
  friend bool operator==(const Address&, const Address&) = default;
};

// kInvalidArgument, naming the text and what is wrong, for anything else.
Result<Address> parse_address(std::string_view text);

}  // namespace pagefile::net
