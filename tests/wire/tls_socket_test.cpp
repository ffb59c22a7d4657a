// A server's TlsSocket (wire/tls_socket.h) against a client that drives
// OpenSSL by hand: what the transport tests cannot make happen on purpose
// (a key update, a batch far beyond one send's 64 KiB to a reader that
// takes it slowly, a close while a read's wait has already completed).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <doctest/doctest.h>
#include <openssl/ssl.h>

#include <future>
#include <thread>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include "tests/wire/transport_bench.h"
#include "wire/frame_buffer.h"
#include "wire/tls_context.h"
#include "wire/tls_socket.h"

namespace pagefile::net::testing {
namespace {

using internal::TlsSocket;

// A TCP connection to 127.0.0.1:`port` (blocking, reads time out after 5 s),
// with a receive buffer of `receive_buffer` bytes when not 0.
int connect_loopback(int port, int receive_buffer = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  if (receive_buffer != 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  timeval timeout{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0);
  return fd;
}

// A client with the test key, one thread, blocking.
class HandClient {
 public:
  explicit HandClient(int port, int receive_buffer = 0) : fd_(connect_loopback(port, receive_buffer)) {
    ssl_ = SSL_new(test_tls().client->ssl().native_handle());
    REQUIRE(ssl_ != nullptr);
    SSL_set_fd(ssl_, fd_);
    REQUIRE(SSL_connect(ssl_) == 1);
  }
  ~HandClient() {
    SSL_free(ssl_);
    ::close(fd_);
  }
  SSL* ssl() { return ssl_; }

  void send(const Frame& frame) {
    const size_t bytes = frame.size() * sizeof(capnp::word);
    FrameHeader header = encode_frame_length(static_cast<uint32_t>(bytes));
    std::vector<uint8_t> out(header.begin(), header.end());
    const auto* body = reinterpret_cast<const uint8_t*>(frame.data());
    out.insert(out.end(), body, body + bytes);
    REQUIRE(SSL_write(ssl_, out.data(), static_cast<int>(out.size())) == static_cast<int>(out.size()));
  }
  Frame receive() {
    uint8_t header[kFrameHeaderBytes];
    if (!read_exact(header, sizeof header)) return Frame();
    const uint32_t bytes = header[0] | header[1] << 8 | header[2] << 16 | uint32_t{header[3]} << 24;
    Frame frame(bytes / sizeof(capnp::word));
    if (!read_exact(frame.data(), bytes)) return Frame();
    return frame;
  }

 private:
  bool read_exact(void* into, size_t size) {
    size_t got = 0;
    while (got < size) {
      int n = SSL_read(ssl_, static_cast<uint8_t*>(into) + got, static_cast<int>(size - got));
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  }

  int fd_;
  SSL* ssl_ = nullptr;
};

TEST_CASE("tls:// server: key updates the client asks for are answered, and frames go on both ways") {
  IoThreads io;
  EchoServer echo(io.io(), *parse_address("tls://127.0.0.1:0"), nullptr);
  HandClient client(echo.address().port);
  client.send(make_frame(1, 10));
  CHECK(same_frame(client.receive(), make_frame(1, 10)));
  for (uint64_t i = 0; i < 5; ++i) {
    REQUIRE(SSL_key_update(client.ssl(), SSL_KEY_UPDATE_REQUESTED) == 1);
    client.send(make_frame(2 + i, 2000));
    CHECK(same_frame(client.receive(), make_frame(2 + i, 2000)));
  }
}

TEST_CASE("tls:// server: batches far over 64 KiB reach a reader with a small buffer that reads slowly") {
  IoThreads io(2);
  EchoServer echo(io.io(), *parse_address("tls://127.0.0.1:0"), nullptr);
  HandClient client(echo.address().port, 4096);
  int matched = 0;
  for (uint64_t round = 0; round < 4; ++round) {
    // Sent before any is read back: the echoes queue into one write.
    for (uint64_t i = 0; i < 5; ++i) client.send(make_frame(round * 10 + i, i % 2 == 0 ? 20000 : 7));
    for (uint64_t i = 0; i < 5; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (same_frame(client.receive(), make_frame(round * 10 + i, i % 2 == 0 ? 20000 : 7))) ++matched;
    }
  }
  CHECK(matched == 20);
}

TEST_CASE("tls:// server: a read whose wait completed before a close never reads the descriptor's next owner") {
  IoThreads io(2);
  boost::asio::ip::tcp::acceptor acceptor(io.io(), {boost::asio::ip::make_address("127.0.0.1"), 0});
  int fd = connect_loopback(acceptor.local_endpoint().port());
  TlsSocket server(acceptor.accept(), test_tls().server->ssl().native_handle());
  auto strand = boost::asio::make_strand(io.io());
  std::promise<boost::system::error_code> shaken;
  boost::asio::post(strand, [&] {
    server.async_handshake(
        boost::asio::bind_executor(strand, [&](const boost::system::error_code& ec) { shaken.set_value(ec); }));
  });
  SSL* client = SSL_new(test_tls().client->ssl().native_handle());
  SSL_set_fd(client, fd);
  REQUIRE(SSL_connect(client) == 1);
  REQUIRE(!shaken.get_future().get());

  std::vector<uint8_t> buffer(4096);
  std::promise<boost::system::error_code> read;
  int next_owner[2] = {-1, -1};
  boost::asio::post(strand, [&] {
    server.async_read_some(boost::asio::buffer(buffer),
                           boost::asio::bind_executor(strand, [&](const boost::system::error_code& ec, size_t) {
                             read.set_value(ec);
                           }));
  });
  // The strand is held while the client's bytes arrive (the read's wait
  // completes and queues behind this), then the socket closes and its
  // number goes to a new pair of sockets with bytes of their own.
  boost::asio::post(strand, [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    boost::system::error_code ignored;
    server.lowest_layer().close(ignored);
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, next_owner) == 0);
    REQUIRE(::write(next_owner[0], "not yours", 9) == 9);
    REQUIRE(::write(next_owner[1], "not yours", 9) == 9);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(SSL_write(client, "hello", 5) == 5);
  CHECK(read.get_future().get() == boost::asio::error::operation_aborted);
  char left[16];
  CHECK(::recv(next_owner[0], left, sizeof left, MSG_DONTWAIT) == 9);
  CHECK(::recv(next_owner[1], left, sizeof left, MSG_DONTWAIT) == 9);
  SSL_free(client);
  ::close(fd);
  ::close(next_owner[0]);
  ::close(next_owner[1]);
}

}  // namespace
}  // namespace pagefile::net::testing
