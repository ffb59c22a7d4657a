// Transports over tcp, unix and inproc: echo, order, frame sizes, malformed
// input, disconnects, failed and timed-out connects, flow control and
// concurrent senders. Real sockets on loopback and in a temp dir only; every
// wait is bounded in time, every loop in count.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "wire/transport.h"
#include "tests/support/temp_dir.h"
#include "tests/wire/transport_bench.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace pagefile::net::testing;

TEST_CASE("a frame is echoed over each transport; close ends both sides") {
  for_each_connected([&](Connected& c) {
    CHECK(c.client->peer() == c.bench.server.address().text());

    Frame sent = make_frame(1, 3);
    c.client->send(sent);
    REQUIRE(c.inbox.wait_frames(1));
    CHECK(same_frame(c.inbox.frames()[0], sent));

    c.close_client();
    CHECK_OK(c.inbox.closed());
    REQUIRE(c.bench.server.wait_closes(1));
    CHECK_CODE(c.bench.server.closes()[0], Code::kDisconnected);
  });
}

TEST_CASE("a tcp listener on port 0 reports the port it got; peers are named by address") {
  Bench bench(Address::Kind::kTcp);
  Address bound = bench.server.address();
  CHECK(bound.port != 0);
  CHECK(bound.host == "127.0.0.1");

  std::shared_ptr<Connection> server_side;
  std::mutex mutex;
  IoThreads io;
  Address other_address = *parse_address("tcp://127.0.0.1:0");
  auto listener = listen(io.io(), other_address, [&](std::shared_ptr<Connection> c) {
    std::lock_guard lock(mutex);
    server_side = std::move(c);
  });
  REQUIRE_OK(listener);
  auto client = connect_ok(bench.client_io.io(), (*listener)->address(), nullptr);
  Clock::time_point deadline = Clock::now() + kWait;
  std::string peer;
  for (int i = 0; i < 1000 && Clock::now() < deadline; ++i) {
    {
      std::lock_guard lock(mutex);
      if (server_side) {
        peer = server_side->peer();
        break;
      }
    }
    std::this_thread::sleep_for(5ms);
  }
  // The server names the client by its ephemeral port on loopback.
  CHECK(peer.starts_with("tcp://127.0.0.1:"));
  CHECK(peer != (*listener)->address().text());
  client->close();
  (*listener)->close();
  std::lock_guard lock(mutex);
  server_side.reset();
}

TEST_CASE("a host name is resolved when connecting") {
  Inbox inbox;
  Bench bench(Address::Kind::kTcp);
  Address by_name = bench.server.address();
  by_name.host = "localhost";
  auto client = connect(bench.client_io.io(), by_name, kConnectTimeoutMs, nullptr);
  REQUIRE_OK(client);
  (*client)->start(inbox.frame_handler(), inbox.close_handler());
  (*client)->send(make_frame(7, 1));
  REQUIRE(inbox.wait_frames(1));
  (*client)->close();
  REQUIRE(inbox.wait_closed());
}

TEST_CASE("1000 pipelined frames of varying sizes arrive in order and intact") {
  for_each_connected([&](Connected& c) {
    constexpr int kFrames = 1000;
    auto words_of = [](int i) { return static_cast<size_t>(1 + (i * 37) % 700); };
    for (int i = 0; i < kFrames; ++i) c.client->send(make_frame(i, words_of(i)));
    REQUIRE(c.inbox.wait_frames(kFrames));
    std::vector<Frame> frames = c.inbox.frames();
    REQUIRE(frames.size() == kFrames);
    int wrong = 0;
    for (int i = 0; i < kFrames; ++i) {
      if (!same_frame(frames[i], make_frame(i, words_of(i)))) ++wrong;
    }
    CHECK(wrong == 0);
    c.close_client();
  });
}

TEST_CASE("frames up to kMaxFrameBytes cross intact") {
  const size_t max_words = kMaxFrameBytes / sizeof(capnp::word);
  for_each_connected([&](Connected& c) {
    const size_t sizes[] = {max_words, 1, max_words - 1};
    for (size_t i = 0; i < std::size(sizes); ++i) c.client->send(make_frame(100 + i, sizes[i]));
    REQUIRE(c.inbox.wait_frames(std::size(sizes)));
    std::vector<Frame> frames = c.inbox.frames();
    for (size_t i = 0; i < std::size(sizes); ++i) {
      CAPTURE(i);
      CHECK(same_frame(frames[i], make_frame(100 + i, sizes[i])));
    }
    c.close_client();
    CHECK_OK(c.inbox.closed());
  });
}

TEST_CASE("sending an empty or oversized frame ends the sender's connection with kInvalidArgument") {
  const size_t max_words = kMaxFrameBytes / sizeof(capnp::word);
  for (size_t words : {size_t{0}, max_words + 1}) {
    CAPTURE(words);
    for_each_connected([&](Connected& c) {
      c.client->send(Frame(words));
      REQUIRE(c.inbox.wait_closed());
      CHECK_CODE(c.inbox.closed(), Code::kInvalidArgument);
      CHECK(message_has(c.inbox.closed(), "cannot send: malformed frame"));
      REQUIRE(c.bench.server.wait_closes(1));
      CHECK_CODE(c.bench.server.closes()[0], Code::kDisconnected);
    });
  }
}

TEST_CASE("a malformed length closes that connection with kCorruption; the server keeps serving") {
  Bench bench(Address::Kind::kTcp);
  const Address address = bench.server.address();
  const asio::ip::tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), address.port);
  struct Bogus {
    uint32_t length;
    std::string problem;
  };
  const Bogus cases[] = {
      {0xFFFFFFFFu, "length 4294967295 is not a multiple of 8"},
      {5, "length 5 is not a multiple of 8"},
      {0, "length 0"},
      {static_cast<uint32_t>(kMaxFrameBytes + 8), "above the limit of 8388608 bytes"},
  };
  asio::io_context raw_io;  // never run: the raw sockets are used synchronously
  size_t closes = 0;
  for (const Bogus& bogus : cases) {
    CAPTURE(bogus.length);
    asio::ip::tcp::socket raw(raw_io);
    raw.connect(endpoint);
    // One good frame first: it is echoed before the bad header ends things.
    uint8_t bytes[4 + 8 + 4] = {8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 4; ++i) bytes[12 + i] = static_cast<uint8_t>(bogus.length >> (8 * i));
    asio::write(raw, asio::buffer(bytes));
    REQUIRE(bench.server.wait_closes(++closes));
    Status why = bench.server.closes().back();
    CHECK_CODE(why, Code::kCorruption);
    CHECK(message_has(why, bogus.problem));
    CHECK(message_has(why, "tcp://127.0.0.1:"));  // names the peer

    uint8_t echoed[12] = {};
    boost::system::error_code ec;
    asio::read(raw, asio::buffer(echoed), ec);
    CHECK(!ec);
    CHECK(std::memcmp(echoed, bytes, sizeof(echoed)) == 0);
    // Then the server has closed: end of stream (or a reset, as the server
    // closed with our bytes unread).
    uint8_t more[1];
    raw.read_some(asio::buffer(more), ec);
    CHECK((ec == asio::error::eof || ec == asio::error::connection_reset));
  }

  Inbox inbox;
  auto client = bench.connect_client(inbox);
  client->send(make_frame(5, 5));
  REQUIRE(inbox.wait_frames(1));
  CHECK(same_frame(inbox.frames()[0], make_frame(5, 5)));
  client->close();
  REQUIRE(inbox.wait_closed());
}

TEST_CASE("a malformed length on a unix socket closes with kCorruption too") {
  Bench bench(Address::Kind::kUnix);
  asio::io_context raw_io;
  asio::local::stream_protocol::socket raw(raw_io);
  raw.connect(asio::local::stream_protocol::endpoint(bench.server.address().path));
  const uint8_t header[4] = {12, 0, 0, 0};
  asio::write(raw, asio::buffer(header));
  REQUIRE(bench.server.wait_closes(1));
  CHECK_CODE(bench.server.closes()[0], Code::kCorruption);
  CHECK(message_has(bench.server.closes()[0], "length 12 is not a multiple of 8"));
}

TEST_CASE("when the server ends a connection the client sees kDisconnected") {
  for_each_connected([&](Connected& c) {
    c.client->send(make_frame(1, 1));
    REQUIRE(c.inbox.wait_frames(1));
    c.bench.server.close_all();
    REQUIRE(c.inbox.wait_closed());
    CHECK_CODE(c.inbox.closed(), Code::kDisconnected);
    REQUIRE(c.bench.server.wait_closes(1));
    CHECK_OK(c.bench.server.closes()[0]);
    // Sending on an ended connection is quietly dropped.
    c.client->send(make_frame(2, 1));
    c.client->close();
    std::this_thread::sleep_for(20ms);
    CHECK(c.inbox.close_count() == 1);
  });
}

TEST_CASE("a server that drops a new connection unstarted disconnects the client") {
  for_each_kind([&](Address::Kind kind) {
    TempDir dir;
    InprocHub hub;
    IoThreads server_io;
    IoThreads client_io;
    std::atomic<int> accepted{0};
    auto listener = listen(server_io.io(), listen_address(kind, dir, "dropper"),
                           [&](std::shared_ptr<Connection>) { ++accepted; }, &hub, 0600, test_tls().server);
    REQUIRE_OK(listener);
    Inbox inbox;
    auto client = connect_ok(client_io.io(), (*listener)->address(), &hub);
    client->start(inbox.frame_handler(), inbox.close_handler());
    REQUIRE(inbox.wait_closed());
    CHECK_CODE(inbox.closed(), Code::kDisconnected);
    CHECK(accepted.load() == 1);
    (*listener)->close();
  });
}

TEST_CASE("close is idempotent and from any thread; the CloseHandler runs once") {
  for_each_connected([&](Connected& c) {
    std::vector<std::thread> closers;
    for (int i = 0; i < 4; ++i) closers.emplace_back([&] { c.client->close(); });
    c.client->close();
    for (std::thread& t : closers) t.join();
    REQUIRE(c.inbox.wait_closed());
    CHECK_OK(c.inbox.closed());
    c.client->close();
    std::this_thread::sleep_for(20ms);
    CHECK(c.inbox.close_count() == 1);
  });
}

TEST_CASE("connecting where nothing listens fails promptly with kDisconnected") {
  TempDir dir;
  InprocHub hub;
  IoThreads io;

  SUBCASE("a closed tcp port") {
    asio::io_context raw_io;
    asio::ip::tcp::acceptor probe(raw_io, asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    uint16_t port = probe.local_endpoint().port();
    probe.close();
    Clock::time_point start = Clock::now();
    auto c = connect(io.io(), *parse_address("tcp://127.0.0.1:" + std::to_string(port)), kConnectTimeoutMs);
    CHECK(Clock::now() - start < 1s);
    CHECK_CODE(c, Code::kDisconnected);
    CHECK(message_has(c.status(), "refused"));
  }
  SUBCASE("a missing unix socket") {
    Clock::time_point start = Clock::now();
    auto c = connect(io.io(), *parse_address("unix:" + (dir / "none.sock").string()), kConnectTimeoutMs);
    CHECK(Clock::now() - start < 1s);
    CHECK_CODE(c, Code::kDisconnected);
    CHECK(message_has(c.status(), "no socket at that path"));
  }
  SUBCASE("a unix path that is a plain file") {
    std::ofstream(dir / "plain") << "x";
    auto c = connect(io.io(), *parse_address("unix:" + (dir / "plain").string()), kConnectTimeoutMs);
    CHECK_CODE(c, Code::kDisconnected);
  }
  SUBCASE("an unknown inproc name") {
    auto c = connect(io.io(), *parse_address("inproc:nobody"), kConnectTimeoutMs, &hub);
    CHECK_CODE(c, Code::kDisconnected);
    CHECK(message_has(c.status(), "inproc:nobody"));
  }
  SUBCASE("an inproc address without a hub") {
    CHECK_CODE(connect(io.io(), *parse_address("inproc:x"), kConnectTimeoutMs), Code::kInvalidArgument);
    CHECK_CODE(listen(io.io(), *parse_address("inproc:x"), [](std::shared_ptr<Connection>) {}),
               Code::kInvalidArgument);
  }
  SUBCASE("a host name that does not resolve") {
    Clock::time_point start = Clock::now();
    auto c = connect(io.io(), *parse_address("tcp://no-such-host.invalid:80"), 1000);
    CHECK(Clock::now() - start < 1500ms);
    CHECK_CODE(c, Code::kDisconnected);
  }
}

TEST_CASE("a connect that gets no answer gives up after its timeout") {
  // A listener with backlog 0 that never accepts: once its queue is full the
  // kernel drops further SYNs, so the next connect hangs until it times out.
  asio::io_context raw_io;
  asio::ip::tcp::acceptor silent(raw_io);
  silent.open(asio::ip::tcp::v4());
  silent.bind(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  silent.listen(0);
  Address address = *parse_address("tcp://127.0.0.1:" + std::to_string(silent.local_endpoint().port()));

  IoThreads io;
  constexpr int kTimeoutMs = 200;
  std::vector<std::shared_ptr<Connection>> queued;
  bool timed_out = false;
  for (int attempt = 0; attempt < 16 && !timed_out; ++attempt) {
    Clock::time_point start = Clock::now();
    auto c = connect(io.io(), address, kTimeoutMs);
    auto elapsed = Clock::now() - start;
    CHECK(elapsed < std::chrono::milliseconds(kTimeoutMs) + 1s);
    if (c) {
      queued.push_back(*c);
      continue;
    }
    CHECK_CODE(c, Code::kDisconnected);
    CHECK(message_has(c.status(), "no connection within 200 ms"));
    CHECK(elapsed >= std::chrono::milliseconds(kTimeoutMs));
    timed_out = true;
  }
  CHECK(timed_out);
  for (auto& connection : queued) connection->close();
}

TEST_CASE("pause_reading holds frames back until resume_reading") {
  for_each_connected([&](Connected& c) {
    c.client->pause_reading();
    constexpr int kFrames = 10;
    for (int i = 0; i < kFrames; ++i) c.client->send(make_frame(i, 4));
    REQUIRE(c.bench.server.wait_echoed(kFrames));
    std::this_thread::sleep_for(50ms);
    CHECK(c.inbox.frame_count() == 0);

    c.client->resume_reading();
    REQUIRE(c.inbox.wait_frames(kFrames));
    std::vector<Frame> frames = c.inbox.frames();
    for (int i = 0; i < kFrames; ++i) CHECK(same_frame(frames[i], make_frame(i, 4)));

    // Paused a second time: the next frame waits too.
    c.client->pause_reading();
    c.client->send(make_frame(50, 2));
    REQUIRE(c.bench.server.wait_echoed(kFrames + 1));
    std::this_thread::sleep_for(30ms);
    CHECK(c.inbox.frame_count() == kFrames);
    c.client->resume_reading();
    REQUIRE(c.inbox.wait_frames(kFrames + 1));
    CHECK(same_frame(c.inbox.frames().back(), make_frame(50, 2)));

    c.close_client();
  });
}

TEST_CASE("a FrameHandler may pause, resume and close its own connection") {
  for_each_kind([&](Address::Kind kind) {
    Bench bench(kind);
    auto client = connect_ok(bench.client_io.io(), bench.server.address(), &bench.hub);
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<uint64_t> seen;
    std::optional<Status> closed;
    Connection* raw = client.get();
    client->start(
        [&](Frame frame) {
          // Every frame pauses and resumes reading before returning; the
          // fifth closes the connection, after which nothing is delivered.
          raw->pause_reading();
          raw->resume_reading();
          std::lock_guard lock(mutex);
          seen.push_back(word_at(frame, 0));
          if (seen.size() == 5) raw->close();
          changed.notify_all();
        },
        [&](Status why) {
          std::lock_guard lock(mutex);
          closed = why;
          changed.notify_all();
        });
    for (int i = 0; i < 20; ++i) client->send(make_frame(i, 1));
    std::unique_lock lock(mutex);
    REQUIRE(changed.wait_for(lock, kWait, [&] { return closed.has_value(); }));
    CHECK_OK(*closed);
    CHECK(seen.size() == 5);
    for (size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == word_at(make_frame(i, 1), 0));
  });
}

TEST_CASE("a stale unix socket file is replaced; a live one is not") {
  TempDir dir;
  const std::filesystem::path path = dir / "stale.sock";
  {
    // A server that went away without removing its socket file.
    asio::io_context raw_io;
    asio::local::stream_protocol::acceptor crashed(raw_io, asio::local::stream_protocol::endpoint(path.string()));
  }
  REQUIRE(std::filesystem::is_socket(path));
  const Address address = *parse_address("unix:" + path.string());

  IoThreads server_io;
  IoThreads client_io;
  {
    EchoServer server(server_io.io(), address, nullptr);
    Inbox inbox;
    auto client = connect_ok(client_io.io(), address, nullptr);
    client->start(inbox.frame_handler(), inbox.close_handler());
    client->send(make_frame(3, 3));
    REQUIRE(inbox.wait_frames(1));

    // A second server at the same path is refused and leaves the first alone.
    auto second = listen(server_io.io(), address, [](std::shared_ptr<Connection>) {});
    CHECK_CODE(second, Code::kAlreadyExists);
    CHECK(message_has(second.status(), "a server is listening there"));
    client->send(make_frame(4, 3));
    REQUIRE(inbox.wait_frames(2));

    client->close();
    REQUIRE(inbox.wait_closed());
    server.listener().close();
    CHECK(!std::filesystem::exists(path));  // close() removes the socket file
    CHECK_CODE(connect(client_io.io(), address, kConnectTimeoutMs), Code::kDisconnected);
  }

  // A path holding something other than a socket is not touched.
  const std::filesystem::path plain = dir / "plain";
  std::ofstream(plain) << "data";
  auto refused = listen(server_io.io(), *parse_address("unix:" + plain.string()), [](std::shared_ptr<Connection>) {});
  CHECK_CODE(refused, Code::kAlreadyExists);
  CHECK(std::filesystem::is_regular_file(plain));
}

TEST_CASE("listeners: a taken address is kAlreadyExists; close stops accepting") {
  TempDir dir;
  InprocHub hub;
  IoThreads io;
  for_each_kind([&](Address::Kind kind) {
    auto first = listen(io.io(), listen_address(kind, dir, "taken"), [](std::shared_ptr<Connection>) {}, &hub, 0600,
                        test_tls().server);
    REQUIRE_OK(first);
    const Address bound = (*first)->address();
    auto second = listen(io.io(), bound, [](std::shared_ptr<Connection>) {}, &hub, 0600, test_tls().server);
    CHECK_CODE(second, Code::kAlreadyExists);

    (*first)->close();
    (*first)->close();  // idempotent
    CHECK_CODE(connect(io.io(), bound, kConnectTimeoutMs, &hub, Connection::Reading::kOnIoThread, 0,
                       test_tls().client),
               Code::kDisconnected);

    // The address is free again.
    auto again = listen(io.io(), bound, [](std::shared_ptr<Connection>) {}, &hub, 0600, test_tls().server);
    CHECK_OK(again);
  });
}

TEST_CASE("sends from several threads all arrive, each thread's in order") {
  for_each_connected([&](Connected& c) {
    constexpr int kThreads = 4;
    constexpr int kEach = 250;
    std::vector<std::thread> senders;
    for (int t = 0; t < kThreads; ++t) {
      senders.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          Frame frame = make_frame(static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i), 1 + i % 40);
          c.client->send(std::move(frame));
        }
      });
    }
    for (std::thread& t : senders) t.join();
    REQUIRE(c.inbox.wait_frames(kThreads * kEach));
    std::vector<Frame> frames = c.inbox.frames();
    std::vector<int> next(kThreads, 0);
    int wrong = 0;
    for (const Frame& frame : frames) {
      // Find which (thread, seq) this is: the next one expected of some thread.
      bool matched = false;
      for (int t = 0; t < kThreads && !matched; ++t) {
        int i = next[t];
        if (i < kEach && same_frame(frame, make_frame(static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i), 1 + i % 40))) {
          ++next[t];
          matched = true;
        }
      }
      if (!matched) ++wrong;
    }
    CHECK(wrong == 0);
    for (int t = 0; t < kThreads; ++t) CHECK(next[t] == kEach);
    c.close_client();
  }, 2);
}

TEST_CASE("an IPv6 loopback listener works where IPv6 is available") {
  IoThreads io;
  auto listener = listen(io.io(), *parse_address("tcp://[::1]:0"), [](std::shared_ptr<Connection>) {});
  if (!listener) {
    MESSAGE("IPv6 loopback unavailable here: " << listener.status().to_string());
    return;
  }
  CHECK((*listener)->address().text().starts_with("tcp://[::1]:"));
  auto client = connect(io.io(), (*listener)->address(), kConnectTimeoutMs);
  CHECK_OK(client);
  if (client) (*client)->close();
}
