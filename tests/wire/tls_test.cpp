// tls:// (wire/tls.h): key files, loading credentials, and who gets in.
// Peers that present a wrong key, no key, an unknown or expired
// certificate, plain tcp or garbage are refused before any frame is read,
// while the same listener goes on serving a peer that proves itself.
// (The transport's behaviour over TLS is transport_test's, which runs over
// every kind of address.)
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <doctest/doctest.h>

#include "tests/support/temp_dir.h"
#include "tests/wire/transport_bench.h"
#include "wire/tls.h"

namespace pagefile::net::testing {
namespace {

using pagefile::Code;

std::string write_text(const std::filesystem::path& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  return path.string();
}

Result<std::shared_ptr<TlsContext>> psk_context(const std::string& file, TlsSide side) {
  TlsOptions options;
  options.psk_files = {file};
  return make_tls_context(options, side);
}

std::shared_ptr<TlsContext> context_ok(const TlsOptions& options, TlsSide side) {
  auto context = make_tls_context(options, side);
  REQUIRE_OK(context);
  return *context;
}

Address tls_loopback() { return *parse_address("tls://127.0.0.1:0"); }

// A tls:// echo server with `server` credentials, and connecting to it.
struct TlsBench {
  explicit TlsBench(std::shared_ptr<TlsContext> server)
      : server_io(), echo(server_io.io(), tls_loopback(), nullptr, std::move(server)) {}

  // Read on an io thread (Asio's SSL stream), or by its waiters (OpenSSL
  // on the socket, the handshake on this thread): the bus's way.
  Result<std::shared_ptr<Connection>> connect_with(std::shared_ptr<TlsContext> client,
                                                   Connection::Reading reading = Connection::Reading::kOnIoThread) {
    return connect(client_io.io(), echo.address(), kConnectTimeoutMs, nullptr, reading, 0, std::move(client));
  }
  // Connects with `client`, sends a frame and checks that it comes back.
  void round_trip(std::shared_ptr<TlsContext> client) {
    auto connection = connect_with(std::move(client));
    REQUIRE_OK(connection);
    Inbox inbox;
    (*connection)->start(inbox.frame_handler(), inbox.close_handler());
    Frame frame = make_frame(7, 1000);
    (*connection)->send(make_frame(7, 1000));
    REQUIRE(inbox.wait_frames(1));
    CHECK(same_frame(inbox.frames()[0], frame));
    (*connection)->close();
    REQUIRE(inbox.wait_closed());
  }

  IoThreads client_io;
  IoThreads server_io;
  EchoServer echo;
};

// The certificates of tests/support/make_test_certs.sh, made once.
const std::filesystem::path& certs() {
  static TempDir dir;
  static const bool made = [] {
    const char* script = std::getenv("MAKE_TEST_CERTS");
    REQUIRE_MESSAGE(script != nullptr, "MAKE_TEST_CERTS is not set (tests/wire/meson.build sets it)");
    const std::string command = std::string("bash '") + script + "' '" + dir.path().string() + "'";
    REQUIRE(std::system(command.c_str()) == 0);
    return true;
  }();
  (void)made;
  return dir.path();
}
std::string cert(const std::string& name) { return (certs() / name).string(); }

TlsOptions server_certs(const std::string& pem = "server.pem") {
  TlsOptions options;
  options.cert = cert(pem);
  options.key = cert("server.key");
  options.ca = cert("ca.pem");
  return options;
}
TlsOptions client_certs(const std::string& name, const std::string& ca = "ca.pem") {
  TlsOptions options;
  options.cert = cert(name + ".pem");
  options.key = cert(name + ".key");
  options.ca = cert(ca);
  return options;
}

TEST_CASE("key files: made 0600, read back with their role, never overwritten") {
  TempDir dir;
  const std::string path = (dir / "reader.key").string();
  auto made = write_new_psk_file(path, PeerRole::kReader);
  REQUIRE_OK(made);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  auto keys = read_psk_file(path);
  REQUIRE_OK(keys);
  REQUIRE(keys->size() == 1);
  CHECK((*keys)[0].identity == made->identity);
  CHECK((*keys)[0].role == PeerRole::kReader);
  CHECK((*keys)[0].secret == made->secret);
  CHECK((*keys)[0].secret.size() == 32);
  CHECK_CODE(write_new_psk_file(path, PeerRole::kAdmin), Code::kAlreadyExists);
  CHECK(read_psk_file(path)->at(0).role == PeerRole::kReader);  // untouched

  auto other = write_new_psk_file((dir / "other.key").string(), PeerRole::kAdmin);
  REQUIRE_OK(other);
  CHECK(other->identity != made->identity);
  CHECK(other->secret != made->secret);
}

TEST_CASE("key files: one others may read is refused, as ssh refuses; a malformed one names its line") {
  TempDir dir;
  const std::string path = (dir / "k").string();
  REQUIRE_OK(write_new_psk_file(path, PeerRole::kAdmin));
  for (mode_t mode : {0640, 0604, 0660, 0644}) {
    ::chmod(path.c_str(), mode);
    auto keys = read_psk_file(path);
    CHECK_CODE(keys, Code::kPermissionDenied);
    CHECK(message_has(keys.status(), "chmod 600"));
    CHECK_CODE(psk_context(path, TlsSide::kServer), Code::kPermissionDenied);
  }
  ::chmod(path.c_str(), 0400);
  CHECK_OK(read_psk_file(path));

  const std::string hex(64, 'a');
  struct Case {
    std::string text;
    std::string says;
  } cases[] = {
      {"", "holds no key"},
      {"# only a comment\n", "holds no key"},
      {"id:admin\n", ":1"},
      {"id:root:" + hex + "\n", "reader, writer or admin"},
      {":admin:" + hex + "\n", "identity"},
      {"id:admin:abc\n", "hex"},
      {"id:admin:" + std::string(64, 'g') + "\n", "hex"},
      {"# fine\nid:admin:" + hex + "\nbroken\n", ":3"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.text);
    auto keys = read_psk_file(write_text(dir / "bad", c.text, 0600));
    CHECK_CODE(keys, Code::kInvalidArgument);
    CHECK(message_has(keys.status(), c.says));
  }
  CHECK_CODE(read_psk_file((dir / "missing").string()), Code::kNotFound);
}

TEST_CASE("credentials that cannot work are refused when loaded, naming what is wrong") {
  TempDir dir;
  TlsOptions none;
  CHECK_CODE(make_tls_context(none, TlsSide::kServer), Code::kInvalidArgument);
  CHECK_CODE(make_tls_context(none, TlsSide::kClient), Code::kInvalidArgument);

  TlsOptions missing = server_certs();
  missing.cert = (dir / "no-such.pem").string();
  auto refused = make_tls_context(missing, TlsSide::kServer);
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(message_has(refused.status(), "--tls-cert"));
  CHECK(message_has(refused.status(), "no-such.pem"));

  TlsOptions not_pem = server_certs();
  not_pem.cert = write_text(dir / "junk.pem", "not a certificate\n", 0644);
  CHECK_CODE(make_tls_context(not_pem, TlsSide::kServer), Code::kInvalidArgument);

  TlsOptions mismatched = server_certs();
  mismatched.key = cert("alice.key");
  refused = make_tls_context(mismatched, TlsSide::kServer);
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(message_has(refused.status(), "--tls-key"));
  CHECK(message_has(refused.status(), "matches the certificate"));

  TlsOptions no_key = server_certs();
  no_key.key.clear();
  CHECK_CODE(make_tls_context(no_key, TlsSide::kServer), Code::kInvalidArgument);

  TlsOptions no_ca = server_certs();  // a certificate, and no way to check a client's
  no_ca.ca.clear();
  refused = make_tls_context(no_ca, TlsSide::kServer);
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(message_has(refused.status(), "--tls-ca"));
  CHECK(message_has(refused.status(), "--psk-file"));

  TlsOptions ca_only;
  ca_only.ca = cert("ca.pem");
  CHECK_CODE(make_tls_context(ca_only, TlsSide::kServer), Code::kInvalidArgument);  // nothing to show clients
  CHECK_OK(make_tls_context(ca_only, TlsSide::kClient));                            // trusts servers by it

  // A tls:// address without credentials, or with the other side's.
  IoThreads io;
  CHECK_CODE(listen(io.io(), tls_loopback(), [](std::shared_ptr<Connection>) {}), Code::kInvalidArgument);
  CHECK_CODE(listen(io.io(), tls_loopback(), [](std::shared_ptr<Connection>) {}, nullptr, 0600, test_tls().client),
             Code::kInvalidArgument);
  CHECK_CODE(connect(io.io(), *parse_address("tls://127.0.0.1:1"), kConnectTimeoutMs), Code::kInvalidArgument);
}

TEST_CASE("pre-shared keys: the right key gets in with its role; a wrong one is refused and others go on") {
  TempDir dir;
  const std::string admin = (dir / "admin").string(), reader = (dir / "reader").string();
  const std::string stranger = (dir / "stranger").string();
  REQUIRE_OK(write_new_psk_file(admin, PeerRole::kAdmin));
  REQUIRE_OK(write_new_psk_file(reader, PeerRole::kReader));
  REQUIRE_OK(write_new_psk_file(stranger, PeerRole::kAdmin));
  TlsOptions server_options;
  server_options.psk_files = {admin, reader};
  TlsBench bench(context_ok(server_options, TlsSide::kServer));

  bench.round_trip(*psk_context(admin, TlsSide::kClient));
  bench.round_trip(*psk_context(reader, TlsSide::kClient));
  CHECK(bench.echo.roles() == std::vector<PeerRole>{PeerRole::kAdmin, PeerRole::kReader});

  // A key the server does not hold.
  auto refused = bench.connect_with(*psk_context(stranger, TlsSide::kClient));
  CHECK_CODE(refused, Code::kPermissionDenied);
  CHECK_CODE(bench.connect_with(*psk_context(stranger, TlsSide::kClient), Connection::Reading::kByWaiter),
             Code::kPermissionDenied);

  // The right identity with the wrong secret: the key file edited.
  auto keys = read_psk_file(admin);
  REQUIRE_OK(keys);
  std::string forged = (*keys)[0].identity + ":admin:" + std::string(64, '0') + "\n";
  refused = bench.connect_with(*psk_context(write_text(dir / "forged", forged, 0600), TlsSide::kClient));
  CHECK_CODE(refused, Code::kPermissionDenied);

  // A client that trusts servers by a CA but shows no key: this server has
  // no certificate to show it.
  TlsOptions ca_only;
  ca_only.ca = cert("ca.pem");
  CHECK_CODE(bench.connect_with(context_ok(ca_only, TlsSide::kClient)), Code::kPermissionDenied);

  CHECK(bench.echo.accepted() == 2);  // none of the refused reached the server
  bench.round_trip(*psk_context(admin, TlsSide::kClient));
  CHECK(bench.echo.accepted() == 3);
}

TEST_CASE("plain tcp, garbage, or a hello that stops short never reach a tls:// server, which goes on serving") {
  TempDir dir;
  TlsBench bench(test_tls().server);
  const Address tls_address = bench.echo.address();
  Address as_tcp = tls_address;
  as_tcp.kind = Address::Kind::kTcp;

  // A tcp:// client: it connects (TCP does), its first frame gets the
  // connection closed.
  auto plain = connect(bench.client_io.io(), as_tcp, kConnectTimeoutMs);
  REQUIRE_OK(plain);
  Inbox inbox;
  (*plain)->start(inbox.frame_handler(), inbox.close_handler());
  (*plain)->send(make_frame(1, 4));
  REQUIRE(inbox.wait_closed());
  CHECK_CODE(inbox.closed(), Code::kDisconnected);
  CHECK(inbox.frame_count() == 0);

  // Garbage, and the first bytes of a hello and then silence cut short by
  // a close.
  for (const std::string& bytes : {std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), std::string("\x16\x03\x01", 3)}) {
    asio::io_context io;
    asio::ip::tcp::socket raw(io);
    raw.connect(asio::ip::tcp::endpoint(asio::ip::make_address(tls_address.host), tls_address.port));
    asio::write(raw, asio::buffer(bytes));
    if (bytes.size() == 3) {
      raw.close();
      continue;
    }
    char reply[256];
    boost::system::error_code ec;
    raw.read_some(asio::buffer(reply), ec);  // an alert, then the close
    raw.read_some(asio::buffer(reply), ec);
    CHECK(ec);
  }
  CHECK(bench.echo.accepted() == 0);
  bench.round_trip(test_tls().client);
  CHECK(bench.echo.accepted() == 1);
}

TEST_CASE("a tls:// client that reaches a plain server fails at once with a clear error") {
  IoThreads server_io, client_io;
  EchoServer plain(server_io.io(), *parse_address("tcp://127.0.0.1:0"), nullptr);
  Address as_tls = plain.address();
  as_tls.kind = Address::Kind::kTls;
  const auto started = Clock::now();
  auto connection = connect(client_io.io(), as_tls, kConnectTimeoutMs, nullptr, Connection::Reading::kOnIoThread, 0,
                            test_tls().client);
  CHECK_FALSE(connection);
  CHECK((connection.status().code() == Code::kDisconnected || connection.status().code() == Code::kPermissionDenied));
  CHECK(message_has(connection.status(), "TLS handshake"));
  auto by_waiter = connect(client_io.io(), as_tls, kConnectTimeoutMs, nullptr, Connection::Reading::kByWaiter, 0,
                           test_tls().client);
  CHECK_FALSE(by_waiter);
  CHECK(message_has(by_waiter.status(), "TLS handshake"));
  CHECK(Clock::now() - started < std::chrono::milliseconds(2 * kConnectTimeoutMs));
}

TEST_CASE("certificates: mutual TLS with roles by common name; wrong CA, expired, wrong host or none refused") {
  TlsOptions roles = server_certs();
  roles.subject_roles = {{"alice", PeerRole::kReader}};
  TlsBench bench(context_ok(roles, TlsSide::kServer));

  bench.round_trip(context_ok(client_certs("alice"), TlsSide::kClient));
  CHECK(bench.echo.roles() == std::vector<PeerRole>{PeerRole::kReader});
  {
    auto by_waiter = bench.connect_with(context_ok(client_certs("alice"), TlsSide::kClient),
                                        Connection::Reading::kByWaiter);
    REQUIRE_OK(by_waiter);
    CHECK((*by_waiter)->reading() == Connection::Reading::kByWaiter);
    (*by_waiter)->close();
  }

  // bob's certificate is good, but the server gives his name no role.
  auto refused = bench.connect_with(context_ok(client_certs("bob"), TlsSide::kClient));
  if (refused) {
    // TLS 1.3 finishes the client's side before the server has judged its
    // certificate: the refusal is then the server hanging up.
    Inbox inbox;
    (*refused)->start(inbox.frame_handler(), inbox.close_handler());
    REQUIRE(inbox.wait_closed());
    CHECK_CODE(inbox.closed(), Code::kDisconnected);
  }
  // A certificate by another CA (with alice's name), or none at all.
  for (TlsOptions client : {client_certs("rogue"), [] {
         TlsOptions ca_only;
         ca_only.ca = cert("ca.pem");
         return ca_only;
       }()}) {
    auto connection = bench.connect_with(context_ok(client, TlsSide::kClient));
    if (connection) {
      Inbox inbox;
      (*connection)->start(inbox.frame_handler(), inbox.close_handler());
      (*connection)->send(make_frame(3, 4));
      REQUIRE(inbox.wait_closed());
      CHECK(inbox.frame_count() == 0);
    } else {
      CHECK((connection.status().code() == Code::kPermissionDenied ||
             connection.status().code() == Code::kDisconnected));
    }
  }
  // A client that trusts another CA refuses the server.
  for (auto reading : {Connection::Reading::kOnIoThread, Connection::Reading::kByWaiter}) {
    CHECK_CODE(bench.connect_with(context_ok(client_certs("alice", "rogue-ca.pem"), TlsSide::kClient), reading),
               Code::kPermissionDenied);
  }
  // (alice's round trip and her connection read by its waiters)
  for (int i = 0; i < 100 && bench.echo.accepted() < 2; ++i) std::this_thread::sleep_for(10ms);
  CHECK(bench.echo.accepted() == 2);

  // The server's certificate expired, or names another host.
  for (const char* pem : {"expired.pem", "elsewhere.pem"}) {
    CAPTURE(pem);
    TlsBench other(context_ok(server_certs(pem), TlsSide::kServer));
    for (auto reading : {Connection::Reading::kOnIoThread, Connection::Reading::kByWaiter}) {
      auto connection = other.connect_with(context_ok(client_certs("alice"), TlsSide::kClient), reading);
      CHECK_CODE(connection, Code::kPermissionDenied);
      CHECK(message_has(connection.status(), "certificate verify failed"));
    }
    CHECK(other.echo.accepted() == 0);
  }
}

}  // namespace
}  // namespace pagefile::net::testing
