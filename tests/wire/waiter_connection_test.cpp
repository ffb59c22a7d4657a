// Connections read by their waiters (Connection::Reading::kByWaiter): frames
// are delivered only inside read_frames(), on the reading thread, one
// reader at a time; the end, a malformed length and a server that never
// reads are met there too.
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "wire/transport.h"
#include "tests/support/temp_dir.h"
#include "tests/wire/transport_bench.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace pagefile::net::testing;

namespace {

std::shared_ptr<Connection> connect_by_waiter(Bench& bench, Inbox& inbox, int timeout_ms = kConnectTimeoutMs) {
  auto client = connect(bench.client_io.io(), bench.server.address(), timeout_ms, &bench.hub,
                        Connection::Reading::kByWaiter, 0, test_tls().client);
  REQUIRE_OK(client);
  (*client)->start(inbox.frame_handler(), inbox.close_handler());
  return *client;
}

// Reads until `count` frames have arrived in `inbox`, or kWait passed.
bool read_until(Connection& connection, Inbox& inbox, size_t count) {
  const auto deadline = Clock::now() + kWait;
  while (inbox.frame_count() < count && Clock::now() < deadline) {
    if (connection.read_frames(100ms) == Connection::ReadOutcome::kEnded) break;
  }
  return inbox.frame_count() >= count;
}

// A tcp listener on loopback used synchronously by the test: it accepts
// one connection and does only what the test tells it.
struct RawTcpServer {
  RawTcpServer() : acceptor(io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)) {}
  Address address() const {
    Result<Address> a = parse_address(fmt::format("tcp://127.0.0.1:{}", acceptor.local_endpoint().port()));
    REQUIRE_OK(a);
    return *a;
  }
  asio::io_context io;  // never run: the sockets are used synchronously
  asio::ip::tcp::acceptor acceptor;
};

}  // namespace

TEST_CASE("a connection read by its waiters delivers only inside read_frames, on the reading thread") {
  for_each_kind([&](Address::Kind kind) {
    Bench bench(kind);
    std::mutex mutex;
    std::vector<std::thread::id> delivered_on;
    Inbox inbox;
    auto client = connect(bench.client_io.io(), bench.server.address(), kConnectTimeoutMs, &bench.hub,
                          Connection::Reading::kByWaiter, 0, test_tls().client);
    REQUIRE_OK(client);
    Connection& c = **client;
    CHECK(c.reading() == Connection::Reading::kByWaiter);
    c.start(
        [&, deliver = inbox.frame_handler()](Frame frame) {
          {
            std::lock_guard lock(mutex);
            delivered_on.push_back(std::this_thread::get_id());
          }
          deliver(std::move(frame));
        },
        inbox.close_handler());
    c.send(make_frame(1, 3));
    c.send(make_frame(2, 700));
    REQUIRE(bench.server.wait_echoed(2));
    std::this_thread::sleep_for(50ms);
    CHECK(inbox.frame_count() == 0);  // answered, and left in the socket: nobody read

    REQUIRE(read_until(c, inbox, 2));
    CHECK(same_frame(inbox.frames()[0], make_frame(1, 3)));
    CHECK(same_frame(inbox.frames()[1], make_frame(2, 700)));
    {
      std::lock_guard lock(mutex);
      for (std::thread::id id : delivered_on) CHECK(id == std::this_thread::get_id());
    }
    CHECK(c.read_frames(20ms) == Connection::ReadOutcome::kNothing);
    CHECK(c.read_frames(0ms) == Connection::ReadOutcome::kNothing);

    c.close();  // no reader at work: the CloseHandler runs here, at once
    CHECK(inbox.close_count() == 1);
    CHECK_OK(inbox.closed());
    CHECK(c.read_frames(0ms) == Connection::ReadOutcome::kEnded);
    c.close();
    c.send(make_frame(3, 1));  // dropped
    CHECK(inbox.close_count() == 1);
  }, {Address::Kind::kTcp, Address::Kind::kUnix, Address::Kind::kTls});
}

TEST_CASE("an inproc connection asked to be read by its waiters reads on its io_context all the same") {
  Bench bench(Address::Kind::kInproc);
  Inbox inbox;
  auto client = connect_by_waiter(bench, inbox);
  CHECK(client->reading() == Connection::Reading::kOnIoThread);
  CHECK(client->read_frames(0ms) == Connection::ReadOutcome::kBusy);
  client->send(make_frame(4, 4));
  REQUIRE(inbox.wait_frames(1));
  client->close();
  REQUIRE(inbox.wait_closed());
}

TEST_CASE("one thread reads a waiter-read connection at a time; the others are told kBusy") {
  Bench bench(Address::Kind::kTcp);
  Inbox inbox;
  auto client = connect_by_waiter(bench, inbox);
  std::atomic<bool> reader_done{false};
  Connection::ReadOutcome reader_outcome = Connection::ReadOutcome::kBusy;
  std::thread reader([&] {
    // Until it is the reader (the test thread may hold the reading a moment).
    const auto deadline = Clock::now() + kWait;
    do {
      reader_outcome = client->read_frames(kWait);
    } while (reader_outcome == Connection::ReadOutcome::kBusy && Clock::now() < deadline);
    reader_done = true;
  });
  bool saw_busy = false;
  for (int i = 0; i < 2000 && !saw_busy; ++i) {
    saw_busy = client->read_frames(0ms) == Connection::ReadOutcome::kBusy;
    if (!saw_busy) std::this_thread::sleep_for(1ms);
  }
  CHECK(saw_busy);
  CHECK(!reader_done);
  client->send(make_frame(5, 9));  // echoed: the reader delivers it
  reader.join();
  CHECK(reader_outcome == Connection::ReadOutcome::kDelivered);
  REQUIRE(inbox.frame_count() == 1);
  CHECK(same_frame(inbox.frames()[0], make_frame(5, 9)));
  client->close();
}

TEST_CASE("a waiter-read connection: a frame larger than its buffer, then the server's end") {
  for_each_kind([&](Address::Kind kind) {
    Bench bench(kind);
    Inbox inbox;
    auto client = connect_by_waiter(bench, inbox);
    const Frame large = make_frame(6, kMaxFrameBytes / sizeof(capnp::word));
    client->send(large);
    client->send(make_frame(7, 2));
    REQUIRE(read_until(*client, inbox, 2));
    CHECK(same_frame(inbox.frames()[0], large));
    CHECK(same_frame(inbox.frames()[1], make_frame(7, 2)));

    bench.server.close_all();
    Connection::ReadOutcome outcome = Connection::ReadOutcome::kNothing;
    for (int i = 0; i < 50 && outcome != Connection::ReadOutcome::kEnded; ++i) outcome = client->read_frames(100ms);
    CHECK(outcome == Connection::ReadOutcome::kEnded);
    CHECK(inbox.close_count() == 1);
    CHECK_CODE(inbox.closed(), Code::kDisconnected);
  }, {Address::Kind::kTcp, Address::Kind::kUnix, Address::Kind::kTls});
}

TEST_CASE("a waiter-read connection ends with kCorruption on a malformed length from the server") {
  RawTcpServer server;
  IoThreads client_io;
  Inbox inbox;
  auto client = connect(client_io.io(), server.address(), kConnectTimeoutMs, nullptr, Connection::Reading::kByWaiter);
  REQUIRE_OK(client);
  (*client)->start(inbox.frame_handler(), inbox.close_handler());
  asio::ip::tcp::socket raw = server.acceptor.accept();
  // One good frame, then a length that is not a multiple of 8.
  const uint8_t bytes[4 + 8 + 4] = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 13, 0, 0, 0};
  asio::write(raw, asio::buffer(bytes));
  Connection::ReadOutcome outcome = Connection::ReadOutcome::kNothing;
  for (int i = 0; i < 50 && outcome != Connection::ReadOutcome::kEnded; ++i) outcome = (*client)->read_frames(100ms);
  CHECK(outcome == Connection::ReadOutcome::kEnded);
  CHECK(inbox.frame_count() == 1);
  CHECK_CODE(inbox.closed(), Code::kCorruption);
  CHECK(message_has(inbox.closed(), "length 13 is not a multiple of 8"));
}

TEST_CASE("a send to a server that never reads gives up after the timeout with kDisconnected") {
  RawTcpServer server;
  IoThreads client_io;
  Inbox inbox;
  constexpr int kSendTimeoutMs = 300;
  auto client = connect(client_io.io(), server.address(), kConnectTimeoutMs, nullptr, Connection::Reading::kByWaiter,
                        kSendTimeoutMs);
  REQUIRE_OK(client);
  (*client)->start(inbox.frame_handler(), inbox.close_handler());
  asio::ip::tcp::socket raw = server.acceptor.accept();  // accepted, never read
  const Frame frame = make_frame(8, (1 << 20) / sizeof(capnp::word));
  const auto started = Clock::now();
  Connection::ReadOutcome outcome = Connection::ReadOutcome::kNothing;
  // The socket buffers hold a few MiB at most; 64 sends overflow them.
  for (int i = 0; i < 64 && outcome != Connection::ReadOutcome::kEnded; ++i) {
    (*client)->send(frame);
    outcome = (*client)->read_frames(0ms);
  }
  CHECK(outcome == Connection::ReadOutcome::kEnded);
  CHECK(Clock::now() - started >= std::chrono::milliseconds(kSendTimeoutMs));
  CHECK_CODE(inbox.closed(), Code::kDisconnected);
  CHECK(message_has(inbox.closed(), "could not send for 300 ms"));
}
