#include "wire/address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <algorithm>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/address_v6.hpp>
#include <fmt/format.h>

namespace pagefile::net {

namespace {

constexpr std::string_view kTcpPrefix = "tcp://";
constexpr std::string_view kTlsPrefix = "tls://";  // the same length as kTcpPrefix
constexpr std::string_view kUnixPrefix = "unix:";
constexpr std::string_view kInprocPrefix = "inproc:";

// sockaddr_un holds the path and its terminating NUL; a longer path cannot
// be bound or connected to, so it is refused here with a clear message
// rather than later by the OS with ENAMETOOLONG.
constexpr size_t kMaxUnixPathBytes = sizeof(sockaddr_un{}.sun_path) - 1;

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Host names (RFC 1123 letters, digits, '-', '.') and IPv4 literals. '_'
// is accepted because some container and test setups use it in names.
bool is_host_char(char c) { return is_alnum(c) || c == '-' || c == '.' || c == '_'; }

bool is_inproc_char(char c) { return is_alnum(c) || c == '_' || c == '.' || c == '-'; }

Result<uint16_t> parse_port(std::string_view text, std::string_view port) {
  if (port.empty()) return Status::invalid_argument(text, "missing port");
  for (char c : port) {
    if (c < '0' || c > '9') {
      return Status::invalid_argument(text, fmt::format("port '{}' is not a decimal number", port));
    }
  }
  // Leading zeros are harmless; counting only significant digits keeps
  // `value` from overflowing.
  std::string_view digits = port.substr(std::min(port.find_first_not_of('0'), port.size()));
  if (digits.size() > 5) return Status::invalid_argument(text, fmt::format("port '{}' is out of range 0-65535", port));
  uint32_t value = 0;
  for (char c : digits) value = value * 10 + static_cast<uint32_t>(c - '0');
  if (value > 65535) return Status::invalid_argument(text, fmt::format("port '{}' is out of range 0-65535", port));
  return static_cast<uint16_t>(value);
}

// tcp://HOST:PORT, or tls://HOST:PORT as `kind` kTls.
Result<Address> parse_tcp(std::string_view text, Address::Kind kind) {
  std::string_view rest = text.substr(kTcpPrefix.size());
  Address address;
  address.kind = kind;
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return Status::invalid_argument(text, "missing ']' after IPv6 host");
    std::string_view host = rest.substr(1, close - 1);
    if (host.empty()) return Status::invalid_argument(text, "missing host");
    boost::system::error_code ec;
    boost::asio::ip::make_address_v6(std::string(host), ec);
    if (ec) return Status::invalid_argument(text, fmt::format("'{}' is not an IPv6 address", host));
    std::string_view after = rest.substr(close + 1);
    if (after.empty()) return Status::invalid_argument(text, "missing port");
    if (after.front() != ':') return Status::invalid_argument(text, "expected ':' and a port after ']'");
    address.host = std::string(host);
    port = after.substr(1);
  } else {
    size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos) return Status::invalid_argument(text, "missing port");
    std::string_view host = rest.substr(0, colon);
    if (host.empty()) return Status::invalid_argument(text, "missing host");
    if (host.find(':') != std::string_view::npos) {
      return Status::invalid_argument(text, "an IPv6 host must be written in brackets, as in tcp://[::1]:PORT");
    }
    for (char c : host) {
      if (!is_host_char(c)) {
        return Status::invalid_argument(text, fmt::format("host '{}' may hold only letters, digits, '-', '.' and '_'", host));
      }
    }
    address.host = std::string(host);
    port = rest.substr(colon + 1);
  }
  Result<uint16_t> port_value = parse_port(text, port);
  if (!port_value) return port_value.status();
  address.port = *port_value;
  return address;
}

Result<Address> parse_unix(std::string_view text) {
  std::string_view path = text.substr(kUnixPrefix.size());
  if (path.empty()) return Status::invalid_argument(text, "missing socket path");
  if (path.find('\0') != std::string_view::npos) return Status::invalid_argument(text, "socket path holds a NUL byte");
  if (path.size() > kMaxUnixPathBytes) {
    return Status::invalid_argument(
        text, fmt::format("socket path is {} bytes, longer than the {} a Unix socket allows", path.size(), kMaxUnixPathBytes));
  }
  Address address;
  address.kind = Address::Kind::kUnix;
  address.path = std::string(path);
  return address;
}

Result<Address> parse_inproc(std::string_view text) {
  std::string_view name = text.substr(kInprocPrefix.size());
  if (name.empty()) return Status::invalid_argument(text, "missing name");
  for (char c : name) {
    if (!is_inproc_char(c)) {
      return Status::invalid_argument(text, "name may hold only letters, digits, '_', '.' and '-'");
    }
  }
  Address address;
  address.kind = Address::Kind::kInproc;
  address.path = std::string(name);
  return address;
}

}  // namespace

std::string Address::text() const {
  switch (kind) {
    case Kind::kTcp:
    case Kind::kTls: {
      // An IPv6 literal holds ':' and goes in brackets so the port stays
      // unambiguous; names and IPv4 literals never hold ':'.
      const std::string_view scheme = kind == Kind::kTls ? kTlsPrefix : kTcpPrefix;
      if (host.find(':') != std::string::npos) return fmt::format("{}[{}]:{}", scheme, host, port);
      return fmt::format("{}{}:{}", scheme, host, port);
    }
    case Kind::kUnix:
      return fmt::format("unix:{}", path);
    case Kind::kInproc:
      return fmt::format("inproc:{}", path);
  }
  return "?";
}

Result<Address> parse_address(std::string_view text) {
  if (text.starts_with(kTcpPrefix)) return parse_tcp(text, Address::Kind::kTcp);
  if (text.starts_with(kTlsPrefix)) return parse_tcp(text, Address::Kind::kTls);
  if (text.starts_with(kUnixPrefix)) return parse_unix(text);
  if (text.starts_with(kInprocPrefix)) return parse_inproc(text);
  if (text.empty()) return Status::invalid_argument("address", "empty (expected tcp://HOST:PORT, tls://HOST:PORT, unix:/PATH or inproc:NAME)");
  return Status::invalid_argument(text, "unknown scheme (expected tcp://HOST:PORT, tls://HOST:PORT, unix:/PATH or inproc:NAME)");
}

bool is_loopback_host(std::string_view host) {
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(std::string(host), ec);
  if (!ec) return ip.is_loopback();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(std::string(host).c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return false;
  bool all = true;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      all = all && (ntohl(reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
    } else if (a->ai_family == AF_INET6) {
      all = all && IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr);
    } else {
      all = false;
    }
  }
  ::freeaddrinfo(found);
  return all;
}

}  // namespace pagefile::net
