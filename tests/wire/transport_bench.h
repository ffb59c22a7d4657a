// What the transport tests share: io threads, frames that show damage, an
// inbox to wait on, an echo server, and a client connected to it over each
// kind of transport in turn. Every wait is bounded in time.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "wire/transport.h"
#include "tests/support/temp_dir.h"

namespace pagefile::net::testing {

using namespace std::chrono_literals;
using pagefile::test::TempDir;
using Clock = std::chrono::steady_clock;
namespace asio = boost::asio;

// How long a test waits for something that should happen at once; only a
// broken transport makes a test wait this long.
inline constexpr auto kWait = 5s;
inline constexpr int kConnectTimeoutMs = 2000;

// An io_context run by background threads for the length of a test.
class IoThreads {
 public:
  explicit IoThreads(int count = 1) : work_(asio::make_work_guard(io_)) {
    for (int i = 0; i < count; ++i) threads_.emplace_back([this] { io_.run(); });
  }
  ~IoThreads() {
    work_.reset();
    io_.stop();
    for (std::thread& t : threads_) t.join();
  }
  asio::io_context& io() { return io_; }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

// A frame of `words` words, each a function of (tag, position), so a frame
// that arrives truncated, reordered or mixed with another is seen.
inline Frame make_frame(uint64_t tag, size_t words) {
  Frame frame(words);
  for (size_t i = 0; i < words; ++i) {
    uint64_t value = tag * 0x9E3779B97F4A7C15ull + i;
    std::memcpy(reinterpret_cast<std::byte*>(frame.data()) + i * sizeof(value), &value, sizeof(value));
  }
  return frame;
}

inline uint64_t word_at(const Frame& frame, size_t i) {
  uint64_t value;
  std::memcpy(&value, reinterpret_cast<const std::byte*>(frame.data()) + i * sizeof(value), sizeof(value));
  return value;
}

inline bool same_frame(const Frame& a, const Frame& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(capnp::word)) == 0;
}

// Collects what a connection delivers, for the test thread to wait on.
class Inbox {
 public:
  Connection::FrameHandler frame_handler() {
    return [this](Frame frame) {
      std::lock_guard lock(mutex_);
      frames_.push_back(std::move(frame));
      changed_.notify_all();
    };
  }
  Connection::CloseHandler close_handler() {
    return [this](Status why) {
      std::lock_guard lock(mutex_);
      ++close_count_;
      closed_ = why;
      changed_.notify_all();
    };
  }

  bool wait_frames(size_t count, Clock::duration limit = kWait) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return frames_.size() >= count; });
  }
  bool wait_closed(Clock::duration limit = kWait) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return closed_.has_value(); });
  }

  std::vector<Frame> frames() {
    std::lock_guard lock(mutex_);
    return frames_;
  }
  size_t frame_count() {
    std::lock_guard lock(mutex_);
    return frames_.size();
  }
  Status closed() {
    std::lock_guard lock(mutex_);
    return closed_.value_or(Status::io_error("test", "not closed"));
  }
  int close_count() {
    std::lock_guard lock(mutex_);
    return close_count_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Frame> frames_;
  std::optional<Status> closed_;
  int close_count_ = 0;
};

// Both sides of tls:// test links: one pre-shared key, made once per
// process (wire/tls.h). Passed to every listen and connect; the other
// transports ignore it.
struct TestTls {
  std::shared_ptr<TlsContext> server;
  std::shared_ptr<TlsContext> client;
};
inline const TestTls& test_tls() {
  static TempDir dir;
  static const TestTls tls = [] {
    const std::string key_file = (dir / "key").string();
    REQUIRE_OK(write_new_psk_file(key_file, PeerRole::kAdmin));
    TlsOptions options;
    options.psk_files = {key_file};
    auto server = make_tls_context(options, TlsSide::kServer);
    auto client = make_tls_context(options, TlsSide::kClient);
    REQUIRE_OK(server);
    REQUIRE_OK(client);
    return TestTls{*server, *client};
  }();
  return tls;
}

// Listens on an address and sends every frame back on the connection it
// came on. The handlers share `state_`, so one that runs late (a listener's
// on_accept may still be running while close() returns) finds it alive.
class EchoServer {
 public:
  // `tls`: a tls:// server's credentials, test_tls()'s when null.
  EchoServer(asio::io_context& io, const Address& address, InprocHub* hub, std::shared_ptr<TlsContext> tls = nullptr)
      : state_(std::make_shared<State>()) {
    auto listener = listen(
        io, address, [state = state_](std::shared_ptr<Connection> connection) { state->accept(std::move(connection)); },
        hub, 0600, tls ? tls : test_tls().server);
    REQUIRE_OK(listener);
    listener_ = std::move(*listener);
  }

  ~EchoServer() {
    listener_->close();
    close_all();
    std::unique_lock lock(state_->mutex);
    bool all_closed = state_->changed.wait_for(lock, kWait, [&] { return state_->closes.size() >= state_->started; });
    CHECK(all_closed);
    state_->connections.clear();
  }

  Address address() const { return listener_->address(); }
  Listener& listener() { return *listener_; }

  // Ends every connection from the server's side.
  void close_all() {
    std::vector<std::shared_ptr<Connection>> connections;
    {
      std::lock_guard lock(state_->mutex);
      connections = state_->connections;
    }
    for (auto& connection : connections) connection->close();
  }

  // Until `count` server-side connections have ended.
  bool wait_closes(size_t count) {
    std::unique_lock lock(state_->mutex);
    return state_->changed.wait_for(lock, kWait, [&] { return state_->closes.size() >= count; });
  }
  std::vector<Status> closes() {
    std::lock_guard lock(state_->mutex);
    return state_->closes;
  }
  // The roles of the connections accepted so far, in order.
  std::vector<PeerRole> roles() {
    std::lock_guard lock(state_->mutex);
    std::vector<PeerRole> out;
    for (const auto& connection : state_->connections) out.push_back(connection->role());
    return out;
  }
  size_t accepted() {
    std::lock_guard lock(state_->mutex);
    return state_->started;
  }
  bool wait_echoed(size_t count) {
    std::unique_lock lock(state_->mutex);
    return state_->changed.wait_for(lock, kWait, [&] { return state_->echoed >= count; });
  }

 private:
  struct State {
    void accept(std::shared_ptr<Connection> connection) {
      std::weak_ptr<Connection> weak = connection;
      {
        std::lock_guard lock(mutex);
        connections.push_back(connection);
        ++started;
      }
      connection->start(
          [this, weak](Frame frame) {
            if (auto self = weak.lock()) self->send(std::move(frame));
            std::lock_guard lock(mutex);
            ++echoed;
            changed.notify_all();
          },
          [this](Status why) {
            std::lock_guard lock(mutex);
            closes.push_back(std::move(why));
            changed.notify_all();
          });
    }

    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::shared_ptr<Connection>> connections;
    std::vector<Status> closes;
    size_t started = 0;
    size_t echoed = 0;
  };

  std::shared_ptr<State> state_;
  std::unique_ptr<Listener> listener_;
};

inline constexpr Address::Kind kKinds[] = {Address::Kind::kTcp, Address::Kind::kUnix, Address::Kind::kInproc,
                                           Address::Kind::kTls};

inline std::string kind_name(Address::Kind kind) {
  switch (kind) {
    case Address::Kind::kTcp: return "tcp";
    case Address::Kind::kTls: return "tls";
    case Address::Kind::kUnix: return "unix";
    case Address::Kind::kInproc: return "inproc";
  }
  return "?";
}

// Where a test server of `kind` listens: an ephemeral loopback port, a
// socket in `dir`, or a name.
inline Address listen_address(Address::Kind kind, const TempDir& dir, const std::string& name) {
  std::string text;
  switch (kind) {
    case Address::Kind::kTcp: text = "tcp://127.0.0.1:0"; break;
    case Address::Kind::kTls: text = "tls://127.0.0.1:0"; break;
    case Address::Kind::kUnix: text = "unix:" + (dir / (name + ".sock")).string(); break;
    case Address::Kind::kInproc: text = "inproc:" + name; break;
  }
  Result<Address> address = parse_address(text);
  REQUIRE_OK(address);
  return *address;
}

inline std::shared_ptr<Connection> connect_ok(asio::io_context& io, const Address& address, InprocHub* hub) {
  auto connection = connect(io, address, kConnectTimeoutMs, hub, Connection::Reading::kOnIoThread, 0, test_tls().client);
  REQUIRE_OK(connection);
  return *connection;
}

inline bool message_has(const Status& status, const std::string& part) {
  return status.message().find(part) != std::string::npos;
}

// Client and server on io_contexts of their own, so inproc hand-over between
// two io_contexts is exercised as well.
struct Bench {
  explicit Bench(Address::Kind kind, int server_threads = 1)
      : server_io(server_threads), server(server_io.io(), listen_address(kind, dir, "echo"), &hub) {}

  std::shared_ptr<Connection> connect_client(Inbox& inbox) {
    auto client = connect_ok(client_io.io(), server.address(), &hub);
    client->start(inbox.frame_handler(), inbox.close_handler());
    return client;
  }

  TempDir dir;
  InprocHub hub;
  IoThreads client_io;
  IoThreads server_io;
  EchoServer server;
};

// A client connected to a fresh echo server, delivering into `inbox`.
struct Connected {
  explicit Connected(Address::Kind kind, int server_threads = 1)
      : bench(kind, server_threads), client(bench.connect_client(inbox)) {}

  // Closes the client and waits until it has ended.
  void close_client() {
    client->close();
    REQUIRE(inbox.wait_closed());
  }

  Inbox inbox;
  Bench bench;
  std::shared_ptr<Connection> client;
};

// Runs `test(kind)` for each kind of transport in `kinds`, naming the kind
// in failures.
template <class Test>
void for_each_kind(Test test, const std::vector<Address::Kind>& kinds = {std::begin(kKinds), std::end(kKinds)}) {
  for (Address::Kind kind : kinds) {
    CAPTURE(kind_name(kind));
    test(kind);
  }
}

// Runs `test(connected)` over each transport, each with a client of its own
// connected to a fresh echo server.
template <class Test>
void for_each_connected(Test test, int server_threads = 1) {
  for_each_kind([&](Address::Kind kind) {
    Connected connected(kind, server_threads);
    test(connected);
  });
}

}  // namespace pagefile::net::testing
