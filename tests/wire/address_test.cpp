// Addresses: each form parses and prints back to itself; each malformed form
// is refused with kInvalidArgument and a message naming what is wrong.
#include <string>

#include "wire/address.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using namespace pagefile::net;

TEST_CASE("addresses parse and print back to the same text") {
  struct Case {
    std::string text;
    Address::Kind kind;
    std::string host;
    uint16_t port;
    std::string path;
  };
  const Case cases[] = {
      {"tcp://localhost:80", Address::Kind::kTcp, "localhost", 80, ""},
      {"tcp://127.0.0.1:0", Address::Kind::kTcp, "127.0.0.1", 0, ""},
      {"tcp://db-3.example.org:65535", Address::Kind::kTcp, "db-3.example.org", 65535, ""},
      {"tcp://[::1]:4000", Address::Kind::kTcp, "::1", 4000, ""},
      {"tcp://[fe80::1:2]:1", Address::Kind::kTcp, "fe80::1:2", 1, ""},
      {"unix:/run/pagefile/s.sock", Address::Kind::kUnix, "", 0, "/run/pagefile/s.sock"},
      {"unix:relative/s.sock", Address::Kind::kUnix, "", 0, "relative/s.sock"},
      {"inproc:a", Address::Kind::kInproc, "", 0, "a"},
      {"inproc:Server_1.b-2", Address::Kind::kInproc, "", 0, "Server_1.b-2"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    Result<Address> address = parse_address(c.text);
    REQUIRE_OK(address);
    CHECK(address->kind == c.kind);
    CHECK(address->host == c.host);
    CHECK(address->port == c.port);
    CHECK(address->path == c.path);
    CHECK(address->text() == c.text);
    Result<Address> again = parse_address(address->text());
    REQUIRE_OK(again);
    CHECK(*again == *address);
  }
}

TEST_CASE("a port with leading zeros reads as its number") {
  Result<Address> address = parse_address("tcp://h:0080");
  REQUIRE_OK(address);
  CHECK(address->port == 80);
  CHECK(address->text() == "tcp://h:80");
  Result<Address> padded = parse_address("tcp://h:00000000000443");
  REQUIRE_OK(padded);
  CHECK(padded->port == 443);
  CHECK_CODE(parse_address("tcp://h:0000099999"), Code::kInvalidArgument);
}

TEST_CASE("an address built by hand prints in the form parse_address reads") {
  Address address;
  address.kind = Address::Kind::kTcp;
  address.host = "::1";
  address.port = 9;
  CHECK(address.text() == "tcp://[::1]:9");
  Result<Address> back = parse_address(address.text());
  REQUIRE_OK(back);
  CHECK(*back == address);
}

TEST_CASE("malformed addresses are refused, naming the text and the problem") {
  struct Bad {
    std::string text;
    std::string problem;
  };
  const Bad cases[] = {
      {"tcp://x", "tcp://x: missing port"},
      {"tcp://x:", "tcp://x:: missing port"},
      {"tcp://:80", "missing host"},
      {"tcp://", "missing port"},
      {"tcp://x:65536", "port '65536' is out of range 0-65535"},
      {"tcp://x:123456", "out of range"},
      {"tcp://x:8o", "port '8o' is not a decimal number"},
      {"tcp://x:-1", "not a decimal number"},
      {"tcp://x:80/path", "not a decimal number"},
      {"tcp://::1:80", "must be written in brackets"},
      {"tcp://[::1]", "missing port"},
      {"tcp://[::1:80", "missing ']'"},
      {"tcp://[::1]80", "expected ':'"},
      {"tcp://[zz]:80", "'zz' is not an IPv6 address"},
      {"tcp://[1.2.3.4]:80", "not an IPv6 address"},
      {"tcp://[]:80", "missing host"},
      {"tcp://a b:80", "host 'a b' may hold only"},
      {"unix:", "unix:: missing socket path"},
      {"unix:/" + std::string(200, 'p'), "longer than the 107 a Unix socket allows"},
      {"inproc:", "inproc:: missing name"},
      {"inproc:a/b", "may hold only letters, digits"},
      {"inproc:a b", "may hold only letters, digits"},
      {"http://x:80", "http://x:80: unknown scheme"},
      {"tcp:/x:80", "unknown scheme"},
      {"TCP://x:80", "unknown scheme"},
      {"", "empty"},
  };
  for (const Bad& bad : cases) {
    CAPTURE(bad.text);
    Result<Address> address = parse_address(bad.text);
    CHECK_CODE(address, Code::kInvalidArgument);
    const std::string& message = address.status().message();
    CAPTURE(message);
    CHECK(message.find(bad.problem) != std::string::npos);
    if (!bad.text.empty()) CHECK(message.starts_with(bad.text + ": "));
  }
}

TEST_CASE("a Unix path of the longest length a socket allows is accepted") {
  std::string path = "/" + std::string(106, 'p');  // 107 bytes, plus the NUL sockaddr_un keeps
  Result<Address> address = parse_address("unix:" + path);
  REQUIRE_OK(address);
  CHECK(address->path == path);
  CHECK_CODE(parse_address("unix:" + path + "p"), Code::kInvalidArgument);
}
