// What clients can make a real pagefiled hold is bounded: a client that
// asks for pages and reads none of them costs the server a bounded amount
// of memory (wire/transport.h, owe(), kMaxBacklogBytes) and still gets every
// answer, in order, once it reads; connections beyond --max-connections are
// told so and closed.
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <capnp/message.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bus/bus_client.h"
#include "core/sanitizers.h"
#include "pagefile/pagefile.h"
#include "tests/support/server_process.h"
#include "tests/support/temp_dir.h"
#include "wire/frame.h"
#include "wire/frame_buffer.h"
#include "wire/pagefile.capnp.h"
#include "wire/tls.h"
#include "wire/wire_convert.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace pagefile::test;

namespace {

// Under AddressSanitizer pagefiled's resident memory holds the sanitizer's
// shadow and quarantine too, so there the bounds are not checked; what the
// server does (every answer, in order) is.
constexpr bool kMemoryMeasured = !pagefile::kAddressSanitizer;

// Checks that pagefiled (`pid`) holds less than 100 MiB resident, after
// `what`.
void check_resident_under_100_mib(pid_t pid, const std::string& what);

// The resident memory of process `pid`, in bytes (VmRSS).
int64_t resident_bytes(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  FAIL("no VmRSS for pid ", pid);
  return 0;
}

void check_resident_under_100_mib(pid_t pid, const std::string& what) {
  const int64_t resident = resident_bytes(pid);
  MESSAGE("pagefiled resident with ", what, ": ", resident / (1 << 20), " MiB",
          std::string(kMemoryMeasured ? "" : " (AddressSanitizer build: not checked)"));
  if (kMemoryMeasured) CHECK(resident < 100 * (int64_t{1} << 20));
}

// A plain socket: nothing reads it until the test does.
int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un where{};
  where.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof(where.sun_path));
  std::memcpy(where.sun_path, path.data(), path.size());
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&where), sizeof(where)) == 0);
  // Every send and receive below is bounded in time.
  timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  return fd;
}

void send_all(int fd, const void* data, size_t size) {
  const auto* at = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, at, size, MSG_NOSIGNAL);
    REQUIRE(n > 0);
    at += n;
    size -= static_cast<size_t>(n);
  }
}

// False when the peer closed or 10 s passed without a byte.
bool receive_all(int fd, void* data, size_t size) {
  auto* at = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = ::recv(fd, at, size, 0);
    if (n <= 0) return false;
    at += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The next answer, or null when the peer closed (or 10 s passed).
ReplyPtr receive_reply(int fd) {
  FrameHeader header{};
  if (!receive_all(fd, header.data(), header.size())) return nullptr;
  const uint32_t bytes = decode_frame_length(header);
  REQUIRE(bytes % sizeof(capnp::word) == 0);
  REQUIRE(bytes <= kMaxFrameBytes);
  Frame body(bytes / sizeof(capnp::word));
  if (!receive_all(fd, body.data(), bytes)) return nullptr;
  Result<ReplyPtr> reply = Reply::parse(std::move(body));
  REQUIRE_OK(reply);
  return *reply;
}

// Appends request `id` to `out` as it goes on the wire: a read of `count`
// pages of `page_size` bytes of file `file`.
void append_read(std::string& out, uint64_t id, uint64_t file, uint32_t page_size, uint32_t count) {
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<wire::Request>();
  request.setId(id);
  request.setVersion(wire::PROTOCOL_VERSION);
  auto read = request.initRead();
  read.getShare().setFileId(file);
  read.getShare().setPageSize(page_size);
  read.setPage(0);
  read.setCount(count);
  Frame frame = to_frame(message);
  const uint32_t bytes = static_cast<uint32_t>(frame.size() * sizeof(capnp::word));
  FrameHeader header = encode_frame_length(bytes);
  out.append(reinterpret_cast<const char*>(header.data()), header.size());
  out.append(reinterpret_cast<const char*>(frame.data()), bytes);
}

void send_read(int fd, uint64_t id, uint64_t file, uint32_t page_size, uint32_t count) {
  std::string request;
  append_read(request, id, file, page_size, count);
  send_all(fd, request.data(), request.size());
}

// A directory of its own, and the unix socket in it a pagefiled listens on.
struct UnixSocketDir {
  TempDir dir;
  const std::string socket_path = (dir / "pf.sock").string();

  // A pagefiled on socket_path, its data in dir/server, with `extra`
  // arguments.
  ServerProcess start_pagefiled(std::vector<std::string> extra = {}) const {
    return ServerProcess("unix:" + socket_path, dir / "server", std::move(extra));
  }
};

}  // namespace

TEST_CASE_FIXTURE(UnixSocketDir, "a client that asks for 800 MiB and reads nothing: pagefiled stays under 100 MB; then every answer comes") {
  ServerProcess server = start_pagefiled();
  const int fd = connect_unix(socket_path);

  // 200 reads of 4 MiB each (512 pages of 8 KiB) of a file never written:
  // zeros, so the server's disk plays no part.
  constexpr int kReads = 200;
  constexpr uint32_t kPageSize = 8192;
  constexpr uint32_t kCount = 512;
  // (In one send: a few dozen KiB, which the socket takes whether or not
  // the server reads.)
  std::string requests;
  for (int i = 0; i < kReads; ++i) append_read(requests, static_cast<uint64_t>(i + 1), 7, kPageSize, kCount);
  send_all(fd, requests.data(), requests.size());

  // Time for a server without the bound to take it all in (it answers
  // about a GiB a second here); then its memory.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  check_resident_under_100_mib(server.pid(), "800 MiB asked and unread");

  // Every answer, in order, whole.
  int answered = 0;
  for (; answered < kReads; ++answered) {
    ReplyPtr reply = receive_reply(fd);
    if (!reply) break;
    auto response = reply->root();
    CHECK(response.getId() == static_cast<uint64_t>(answered + 1));
    REQUIRE(response.isPages());
    CHECK(response.getPages().size() == size_t{kCount} * kPageSize);
  }
  CHECK(answered == kReads);
  ::close(fd);
  CHECK(server.stop() == 0);
}

TEST_CASE_FIXTURE(UnixSocketDir, "connections beyond --max-connections are told so and closed; others are served") {
  ServerProcess server = start_pagefiled({"--max-connections", "2"});
  const int first = connect_unix(socket_path);
  const int second = connect_unix(socket_path);
  // (Each connection counts once the server has accepted it: a read
  // answered on each shows both are in.)
  for (int fd : {first, second}) {
    send_read(fd, 1, 7, 4096, 1);
    REQUIRE(receive_reply(fd) != nullptr);
  }
  const int third = connect_unix(socket_path);
  ReplyPtr refusal = receive_reply(third);
  REQUIRE(refusal != nullptr);
  {
    auto response = refusal->root();
    CHECK(response.getId() == 0);
    REQUIRE(response.isError());
    Status why = from_wire(response.getError());
    CHECK(why.code() == Code::kBusy);
    CHECK(why.message() == "server: has 2 connections, the most it takes (--max-connections)");
  }
  CHECK(receive_reply(third) == nullptr);  // closed
  ::close(third);
  // One leaves; a new one is served.
  ::close(first);
  bool served = false;
  for (int attempt = 0; attempt < 50 && !served; ++attempt) {
    const int next = connect_unix(socket_path);
    send_read(next, 9, 7, 4096, 1);
    ReplyPtr reply = receive_reply(next);
    served = reply != nullptr && reply->root().getId() == 9;
    ::close(next);
    if (!served) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(served);
  ::close(second);
  CHECK(server.stop() == 0);
}

TEST_CASE_FIXTURE(UnixSocketDir, "1000 connections that each sent one request: pagefiled stays under 100 MB, and answers them all") {
  constexpr int kConnections = 1000;
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_cur < kConnections + 100) {
    files.rlim_cur = std::min<rlim_t>(files.rlim_max, kConnections + 100);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  REQUIRE(files.rlim_cur >= kConnections + 100);  // (pagefiled inherits it)
  ServerProcess server = start_pagefiled();
  std::vector<int> fds;
  for (int i = 0; i < kConnections; ++i) {
    fds.push_back(connect_unix(socket_path));
    send_read(fds.back(), static_cast<uint64_t>(i + 1), 7, 8192, 1);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  check_resident_under_100_mib(server.pid(), std::to_string(kConnections) + " connections");
  int answered = 0;
  for (int i = 0; i < kConnections; ++i) {
    if (ReplyPtr reply = receive_reply(fds[i])) {
      answered += reply->root().getId() == static_cast<uint64_t>(i + 1) && reply->root().isPages();
    }
    ::close(fds[i]);
  }
  CHECK(answered == kConnections);
  CHECK(server.stop() == 0);
}

namespace {

// Sends a stat request for `name` (a catalog request whose size is the
// name's): the simplest way to send a frame of a chosen size.
void send_stat(int fd, uint64_t id, const std::string& name) {
  capnp::MallocMessageBuilder message;
  auto request = message.initRoot<wire::Request>();
  request.setId(id);
  request.setVersion(wire::PROTOCOL_VERSION);
  request.setStat(name);
  Frame frame = to_frame(message);
  const uint32_t bytes = static_cast<uint32_t>(frame.size() * sizeof(capnp::word));
  FrameHeader header = encode_frame_length(bytes);
  send_all(fd, header.data(), header.size());
  send_all(fd, frame.data(), bytes);
}

// The error an answer carries, or OK.
Status error_of(const ReplyPtr& reply) {
  REQUIRE(reply != nullptr);
  auto response = reply->root();
  return response.isError() ? from_wire(response.getError()) : Status::ok();
}

}  // namespace

TEST_CASE_FIXTURE(UnixSocketDir, "--max-frame-bytes and --max-inflight: past them a request gets a clear error, the connection goes on") {
  // A page on the server's disk (a page never written is zeros at once,
  // with no disk access): file m's page 0, in its share shares/ID.pf.
  // Written through a server without the limits, then stopped: a client's
  // own requests around an open (learning the server's directory) may still
  // be in flight at its first write, and more than two in flight on one
  // connection is what the limited server refuses.
  {
    ServerProcess setup = start_pagefiled();
    ClientOptions options;
    options.bus = "unix:" + socket_path;
    auto client = Client::start(options);
    REQUIRE(client);
    OpenOptions open;
    open.location = Location::kRemote;
    open.create = true;
    open.page_size = 1024;  // as the reads below ask for
    auto m = (*client)->open("m", open);
    REQUIRE_MESSAGE(m, m.status().to_string());
    std::vector<std::byte> page(1024, std::byte{7});
    Status written = (*client)->write(*m, 0, page);
    REQUIRE_MESSAGE(written, written.to_string());
    REQUIRE((*client)->close(*m));
    REQUIRE((*client)->stop());
    REQUIRE(setup.stop() == 0);
  }
  ServerProcess server = start_pagefiled({"--max-frame-bytes", "4096", "--max-inflight", "2", "--disk-latency", "1000",
                                            "--cache-pages", "0"});
  uint64_t share_id = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir / "server" / "shares")) {
    if (entry.path().extension() == ".pf") share_id = std::stoull(entry.path().stem().string());
  }
  REQUIRE(share_id != 0);
  const int fd = connect_unix(socket_path);

  send_stat(fd, 1, std::string(8000, 'x'));
  Status too_big = error_of(receive_reply(fd));
  CHECK(too_big.code() == Code::kInvalidArgument);
  CHECK(too_big.message().find("above this server's limit of 4096 (--max-frame-bytes)") != std::string::npos);
  send_stat(fd, 2, "no-such-file");  // the same connection, served
  CHECK(error_of(receive_reply(fd)).code() == Code::kNotFound);

  // Six reads at once of that page, with no pool: each waits 1 s for the
  // emulated disk and the next for it, so at most two are ever in flight
  // and the rest are refused. (The stat answered before may still count
  // for a moment: its answer leaves before its end is counted.)
  std::string reads;
  for (uint64_t id = 10; id < 16; ++id) append_read(reads, id, share_id, 1024, 1);
  send_all(fd, reads.data(), reads.size());
  int busy = 0, served = 0;
  for (int i = 0; i < 6; ++i) {
    ReplyPtr reply = receive_reply(fd);
    REQUIRE(reply != nullptr);
    Status why = error_of(reply);
    if (why.is_ok()) {
      ++served;
    } else {
      CHECK(why.code() == Code::kIOError);  // (not Busy: that is lock contention to a client)
      CHECK(why.message().find("(--max-inflight)") != std::string::npos);
      ++busy;
    }
  }
  CHECK(served + busy == 6);
  CHECK(served >= 1);
  CHECK(served <= 2);
  CHECK(busy >= 4);
  // Another connection meanwhile is its own: served.
  const int other = connect_unix(socket_path);
  send_read(other, 20, share_id, 1024, 1);
  CHECK(error_of(receive_reply(other)).is_ok());
  ::close(other);
  ::close(fd);
  CHECK(server.stop() == 0);
}

TEST_CASE_FIXTURE(UnixSocketDir, "--idle-timeout-s: an idle connection is closed; a client connects again when it next asks") {
  ServerProcess server = start_pagefiled({"--idle-timeout-s", "1"});
  const int fd = connect_unix(socket_path);
  send_read(fd, 1, 7, 4096, 1);
  CHECK(error_of(receive_reply(fd)).is_ok());
  const auto idle_from = std::chrono::steady_clock::now();
  CHECK(receive_reply(fd) == nullptr);  // closed by the server (or 10 s passed)
  const auto waited = std::chrono::steady_clock::now() - idle_from;
  CHECK(waited >= std::chrono::milliseconds(900));
  CHECK(waited < std::chrono::seconds(5));
  ::close(fd);

  // A bus client whose connection the server closed while it was idle.
  auto config = parse_bus("unix:" + socket_path, dir / "home");
  REQUIRE_OK(config);
  auto client = BusClient::start(*config, {});
  REQUIRE_OK(client);
  auto ping = [&] {
    return (*client)->call_sync((*client)->catalog(), [](wire::Request::Builder r) { r.setPing(); });
  };
  CHECK_OK(ping());
  // Well past the close (1 to 1.25 s idle), so that the ping does not meet
  // it on the way even if the server is paused on a loaded machine.
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  CHECK_OK(ping());
  CHECK(server.stop() == 0);
}

TEST_CASE("--idle-timeout-s over tls://: the client sees the close and connects again, and lives") {
  // (A TLS client that wrote to a connection the server had closed would get
  // SIGPIPE but for its sends with MSG_NOSIGNAL, wire/tls_bio.h; this process
  // does not ignore it.)
  TempDir dir;
  const std::string key = (dir / "key").string();
  REQUIRE_OK(write_new_psk_file(key, PeerRole::kAdmin));
  ServerProcess server("tls://127.0.0.1:0", dir / "server", {"--idle-timeout-s", "1", "--psk-file", key});
  auto config = parse_bus(server.address() + ",psk_file=" + key, dir / "home");
  REQUIRE_OK(config);
  auto client = BusClient::start(*config, {});
  REQUIRE_OK(client);
  auto ping = [&] {
    return (*client)->call_sync((*client)->catalog(), [](wire::Request::Builder r) { r.setPing(); });
  };
  for (int round = 0; round < 3; ++round) {
    CHECK_OK(ping());
    std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // (well past the close, as above)
  }
  CHECK_OK(ping());
  CHECK(server.stop() == 0);
}
