// The page server against bad and hostile input, spoken to in raw frames
// over real loopback connections: malformed messages, unknown requests,
// other protocol versions, bad page numbers, unknown files, clients that
// vanish with writes in flight, and flow control.
#include "server/page_server.h"

#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <capnp/serialize.h>
#include <fmt/format.h>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/page_checksum.h"
#include "store/local_pagefile.h"
#include "bus/bus_client.h"
#include "wire/pagefile.capnp.h"
#include "wire/transport.h"
#include "wire/wire_convert.h"
#include "pagefile/pagefile.h"
#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::net;
using namespace pagefile::test;

namespace {

// A client connection that sends frames and collects what comes back.
class RawClient {
 public:
  explicit RawClient(const Address& address) : guard_(boost::asio::make_work_guard(io_)) {
    thread_ = std::thread([this] { io_.run(); });
    auto c = connect(io_, address, 3000);
    REQUIRE_OK(c);
    connection_ = *c;
    connection_->start(
        [this](Frame f) {
          std::lock_guard lock(mu_);
          frames_.push_back(std::move(f));
          cv_.notify_all();
        },
        [this](Status why) {
          std::lock_guard lock(mu_);
          closed_ = true;
          close_status_ = why;
          cv_.notify_all();
        });
  }
  ~RawClient() {
    connection_->close();
    guard_.reset();
    io_.stop();
    thread_.join();
  }

  void send(Frame frame) { connection_->send(std::move(frame)); }
  void send(capnp::MallocMessageBuilder& message) { send(to_frame(message)); }

  // The next response, or nullptr when the connection closed (or 5 s passed).
  ReplyPtr next() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(5), [&] { return !frames_.empty() || closed_; });
    if (frames_.empty()) return nullptr;
    Frame f = std::move(frames_.front());
    frames_.pop_front();
    auto reply = Reply::parse(std::move(f));
    REQUIRE_OK(reply);
    return *reply;
  }

  bool wait_closed() {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return closed_; });
  }
  void close() { connection_->close(); }
  void close_after_sending() { connection_->close_after_sending(); }

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
  std::shared_ptr<Connection> connection_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Frame> frames_;
  bool closed_ = false;
  Status close_status_;
};

capnp::MallocMessageBuilder& request(capnp::MallocMessageBuilder& m, uint64_t id) {
  auto r = m.initRoot<wire::Request>();
  r.setId(id);
  r.setVersion(wire::PROTOCOL_VERSION);
  return m;
}

Status error_of(const ReplyPtr& reply) {
  REQUIRE(reply != nullptr);
  if (!reply->root().isError()) return Status::ok();
  return from_wire(reply->root().getError());
}

// Sends request `id`: a write of `data` to `page` of share `file`, whose
// pages are `page_size` bytes.
void send_write(RawClient& c, uint64_t id, uint64_t file, uint32_t page_size, int64_t page,
                const std::vector<std::byte>& data, const std::vector<uint64_t>& checksums = {}) {
  capnp::MallocMessageBuilder m;
  auto w = request(m, id).getRoot<wire::Request>().initWrite();
  w.getShare().setFileId(file);
  w.getShare().setPageSize(page_size);
  w.setPage(page);
  w.setData(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(data.data()), data.size()));
  if (!checksums.empty()) {
    auto list = w.initChecksums(static_cast<unsigned>(checksums.size()));
    for (unsigned i = 0; i < checksums.size(); ++i) list.set(i, checksums[i]);
  }
  c.send(m);
}

// Sends request `id`: a read of `count` pages from `page` of share `file`.
void send_read(RawClient& c, uint64_t id, uint64_t file, uint32_t page_size, int64_t page, uint32_t count) {
  capnp::MallocMessageBuilder m;
  auto r = request(m, id).getRoot<wire::Request>().initRead();
  r.getShare().setFileId(file);
  r.getShare().setPageSize(page_size);
  r.setPage(page);
  r.setCount(count);
  c.send(m);
}

void ping_ok(const Address& address) {
  RawClient c(address);
  capnp::MallocMessageBuilder m;
  request(m, 1).getRoot<wire::Request>().setPing();
  c.send(m);
  auto reply = c.next();
  REQUIRE(reply != nullptr);
  CHECK(reply->root().getId() == 1);
  CHECK(reply->root().isOk());
}

// A page server of its own, its data in a temporary directory, and a raw
// connection `c` to it.
struct ServerFixture {
  TempDir dir;
  std::unique_ptr<PageServer> server = start_page_server(dir / "server");
  RawClient c{server->address()};
};

}  // namespace

TEST_CASE("global-sequential: a damaged page the window reads ahead fails its own reads only") {
  // The window failed the read of a sound page with the error of a page it
  // read ahead (or behind), and did not move, so every later read past it
  // failed the same way (found by an independent review).
  TempDir dir;
  constexpr uint32_t ps = 4096;
  {
    auto server = start_page_server(dir / "server");
    RawClient c(server->address());
    for (int64_t p = 0; p < 10; ++p) {
      auto data = page_pattern(ps, p);
      send_write(c, 100 + static_cast<uint64_t>(p), 8, ps, p, data, {page_checksum(data, p)});
      REQUIRE(error_of(c.next()).is_ok());
    }
  }
  {  // one byte of page 5 damaged on the disk
    LocalPagefile::OpenSpec spec;
    spec.read_only = true;
    auto f = LocalPagefile::open(dir / "server" / "shares" / "8.pf", spec);
    REQUIRE_OK(f);
    off_t at = (*f)->page_offset(5);
    f->reset();
    std::fstream io(dir / "server" / "shares" / "8.pf", std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(at + 100);
    io.put('\x5a');
  }
  auto server = start_page_server(dir / "server");
  RawClient c(server->address());
  uint64_t id = 1;
  auto read = [&](int64_t page) {
    capnp::MallocMessageBuilder m;
    auto r = request(m, id++).getRoot<wire::Request>().initRead();
    r.getShare().setFileId(8);
    r.getShare().setPageSize(ps);
    r.getShare().setPolicy("global-sequential");
    r.getShare().setStripePages(1);
    r.getShare().setServerCount(1);
    r.getShare().setServerIndex(0);
    r.setPage(page);
    r.setCount(1);
    c.send(m);
    return c.next();
  };
  for (int64_t p : {2, 0, 1, 7, 5, 9, 2, 5}) {
    CAPTURE(p);
    auto reply = read(p);
    REQUIRE(reply != nullptr);
    if (p == 5) {
      CHECK(error_of(reply).is(Code::kCorruption));
      continue;
    }
    REQUIRE(error_of(reply).is_ok());
    REQUIRE(reply->root().isPages());
    CHECK(std::memcmp(reply->root().getPages().begin(), page_pattern(ps, p).data(), ps) == 0);
  }
}

TEST_CASE_FIXTURE(ServerFixture, "a read naming another page size than its file's is refused, before or after the pool has its pages") {
  // The pool kept a file's pages at the size it was first declared with,
  // and answered a read from it at the read's size: a smaller size copied
  // a whole page into the reply (an assertion, or a heap overrun without
  // one); a read of a share not yet on disk fixed the size the writer's
  // pages then went into (found by an independent review).
  auto good = page_pattern(4096, 1);
  send_write(c, 1, 5, 4096, 0, good, {page_checksum(good, 0)});
  REQUIRE(error_of(c.next()).is_ok());
  send_read(c, 2, 5, 1024, 0, 1);
  CHECK(error_of(c.next()).is(Code::kInvalidArgument));
  send_read(c, 3, 5, 4096, 0, 1);
  auto page = c.next();
  REQUIRE(page != nullptr);
  REQUIRE(page->root().isPages());
  CHECK(std::memcmp(page->root().getPages().begin(), good.data(), 4096) == 0);

  send_read(c, 4, 6, 1024, 0, 1);  // zeros: no share yet
  REQUIRE(error_of(c.next()).is_ok());
  auto other = page_pattern(4096, 7);
  send_write(c, 5, 6, 4096, 0, other, {page_checksum(other, 0)});
  REQUIRE(error_of(c.next()).is_ok());
  send_read(c, 6, 6, 4096, 0, 1);
  page = c.next();
  REQUIRE(page != nullptr);
  REQUIRE(page->root().isPages());
  CHECK(std::memcmp(page->root().getPages().begin(), other.data(), 4096) == 0);
  send_read(c, 7, 6, 1024, 0, 1);
  CHECK(error_of(c.next()).is(Code::kInvalidArgument));

  // Started again (an empty pool), a wrong size read first: refused, and
  // the right size read after it is not (the share on disk says which).
  TempDir again;
  {
    auto first = start_page_server(again / "server");
    RawClient w(first->address());
    send_write(w, 1, 9, 4096, 0, good, {page_checksum(good, 0)});
    REQUIRE(error_of(w.next()).is_ok());
  }
  auto restarted = start_page_server(again / "server");
  RawClient r(restarted->address());
  send_read(r, 1, 9, 1024, 0, 1);
  CHECK(error_of(r.next()).is(Code::kInvalidArgument));
  send_read(r, 2, 9, 4096, 0, 1);
  page = r.next();
  REQUIRE(page != nullptr);
  INFO(error_of(page).to_string());
  REQUIRE(page->root().isPages());
  CHECK(std::memcmp(page->root().getPages().begin(), good.data(), 4096) == 0);
}

TEST_CASE("a frame that is not a message: an error, the connection closed, other clients served") {
  TempDir dir;
  auto server = start_page_server(dir / "server");
  RawClient bad(server->address());
  Frame garbage(16);
  auto* bytes = reinterpret_cast<unsigned char*>(garbage.data());
  for (size_t i = 0; i < garbage.size() * sizeof(capnp::word); ++i) bytes[i] = static_cast<unsigned char>(0xA5 + i);
  bad.send(std::move(garbage));
  auto reply = bad.next();
  Status s = error_of(reply);
  CHECK(s.is(Code::kCorruption));
  CHECK(s.message().find("malformed") != std::string::npos);
  CHECK(bad.wait_closed());
  ping_ok(server->address());
  CHECK(server->counters().errors >= 1);
}

TEST_CASE_FIXTURE(ServerFixture, "another protocol version and an unknown request are refused by name") {
  {
    capnp::MallocMessageBuilder m;
    auto r = m.initRoot<wire::Request>();
    r.setId(7);
    r.setVersion(wire::PROTOCOL_VERSION + 1);
    r.setPing();
    c.send(m);
    auto reply = c.next();
    CHECK(reply->root().getId() == 7);
    Status s = error_of(reply);
    CHECK(s.is(Code::kNotSupported));
    CHECK(s.message().find(fmt::format("version {}", wire::PROTOCOL_VERSION + 1)) != std::string::npos);
  }
  {
    // A request kind from the future: a union tag this build does not know.
    capnp::MallocMessageBuilder m;
    request(m, 8).getRoot<wire::Request>().setPing();
    Frame f = to_frame(m);
    // The union discriminant is the 16-bit field after id (8 bytes) and
    // version (2 bytes) in the root struct's data section: root pointer at
    // word 1 (after the segment table), data at word 2.
    auto* data = reinterpret_cast<uint16_t*>(&f[2]);
    data[5] = 999;
    c.send(std::move(f));
    auto reply = c.next();
    REQUIRE(reply != nullptr);
    CHECK(reply->root().getId() == 8);
    Status s = error_of(reply);
    CHECK(s.is(Code::kNotSupported));
    CHECK(s.message().find("unknown request type 999") != std::string::npos);
  }
  ping_ok(server->address());
}

TEST_CASE_FIXTURE(ServerFixture, "bad page numbers, page sizes and runs are refused; unknown files read as zeros") {
  auto read = [&](uint64_t id, int64_t page, uint32_t count, uint32_t page_size) {
    send_read(c, id, 99, page_size, page, count);
    auto reply = c.next();
    REQUIRE(reply != nullptr);
    CHECK(reply->root().getId() == id);
    return reply;
  };
  CHECK(error_of(read(1, -1, 1, 4096)).is(Code::kInvalidArgument));
  CHECK(error_of(read(2, kMaxPageNumber + 1, 1, 4096)).is(Code::kInvalidArgument));
  CHECK(error_of(read(3, 0, 1, 1000)).is(Code::kInvalidArgument));
  CHECK(error_of(read(4, 0, 0, 4096)).is(Code::kInvalidArgument));
  CHECK(error_of(read(5, 0, 1u << 20, 4096)).is(Code::kInvalidArgument));
  auto zeros = read(6, 5, 2, 4096);
  REQUIRE(zeros->root().isPages());
  CHECK(zeros->root().getPages().size() == 8192);
  for (auto b : zeros->root().getPages()) REQUIRE(b == 0);

  // A write of a partial page, and one with the wrong page size for a share.
  send_write(c, 10, 5, 4096, 0, std::vector<std::byte>(100));
  CHECK(error_of(c.next()).is(Code::kInvalidArgument));
  send_write(c, 11, 5, 4096, 0, std::vector<std::byte>(4096));
  CHECK(error_of(c.next()).is_ok());
  send_write(c, 12, 5, 8192, 1, std::vector<std::byte>(8192));
  Status s = error_of(c.next());
  CHECK(s.is(Code::kInvalidArgument));
  CHECK(s.message().find("page size 4096") != std::string::npos);
}

TEST_CASE("a page that does not match its checksum on arrival is refused; reads carry checksums") {
  TempDir dir;
  for (uint64_t cache_pages : {0, 64}) {
    net::ServerOptions options;
    options.cache_pages = cache_pages;
    auto server = start_page_server(dir / fmt::format("server{}", cache_pages), options);
    RawClient c(server->address());
    auto good = page_pattern(4096, 1);
    auto other = page_pattern(4096, 2);
    send_write(c, 1, 5, 4096, 3, good, {page_checksum(good, 3)});
    CHECK(error_of(c.next()).is_ok());
    // Damaged on the way: the bytes are not those the checksum was made of.
    // Refused, and the page keeps what it had.
    send_write(c, 2, 5, 4096, 3, other, {page_checksum(good, 3)});
    Status damaged = error_of(c.next());
    CHECK(damaged.is(Code::kCorruption));
    CHECK(damaged.message().find("page 3 fails its checksum on arrival") != std::string::npos);
    // The checksum of another page (a write sent to the wrong place) too.
    send_write(c, 3, 5, 4096, 4, good, {page_checksum(good, 3)});
    CHECK(error_of(c.next()).is(Code::kCorruption));
    send_write(c, 4, 5, 4096, 3, good, {1, 2});
    CHECK(error_of(c.next()).is(Code::kInvalidArgument));
    // Each page read comes with its checksum, holes included.
    send_read(c, 5, 5, 4096, 3, 2);
    auto reply = c.next();
    REQUIRE(reply != nullptr);
    REQUIRE(reply->root().isPages());
    auto pages = reply->root().getPages();
    REQUIRE(pages.size() == 8192);
    CHECK(std::memcmp(pages.begin(), good.data(), 4096) == 0);
    auto sums = reply->root().getChecksums();
    REQUIRE(sums.size() == 2);
    CHECK(sums[0] == page_checksum(good, 3));
    CHECK(sums[1] == page_checksum(std::vector<std::byte>(4096), 4));
  }
}

TEST_CASE_FIXTURE(ServerFixture, "catalog: unknown files and locks on them") {
  capnp::MallocMessageBuilder m;
  request(m, 1).getRoot<wire::Request>().setStat("nope");
  c.send(m);
  CHECK(error_of(c.next()).is(Code::kNotFound));
  capnp::MallocMessageBuilder m2;
  auto l = request(m2, 2).getRoot<wire::Request>().initLock();
  l.setFileId(12345);
  l.setOwner(1);
  l.setLevel(1);
  c.send(m2);
  CHECK(error_of(c.next()).is(Code::kNotFound));
  capnp::MallocMessageBuilder m3;
  request(m3, 3).getRoot<wire::Request>().setUnlink("nope");
  c.send(m3);
  CHECK(error_of(c.next()).is(Code::kNotFound));
}

TEST_CASE("a client that vanishes with writes in flight: the server carries on") {
  TempDir dir;
  ServerOptions options;
  options.disk_latency = std::chrono::milliseconds(2);
  auto server = start_page_server(dir / "server", options);
  {
    RawClient c(server->address());
    for (uint64_t id = 1; id <= 50; ++id) {
      const auto page = static_cast<int64_t>(id);
      send_write(c, id, 1, 4096, page, page_pattern(4096, page));
    }
    c.close_after_sending();  // gone, with its writes in flight at the server
    REQUIRE(c.wait_closed());
  }
  ping_ok(server->address());
  // Whatever the server took in was written whole: each page there is
  // exactly what was sent, or absent.
  server->stop();
  LocalPagefile::OpenSpec spec;
  spec.read_only = true;
  auto share = LocalPagefile::open(dir / "server" / "shares" / "1.pf", spec);
  // It may have hung up before the server ran any of them: then no share.
  if (share.status().is(Code::kNotFound)) return;
  REQUIRE_OK(share);
  std::vector<std::byte> buf(4096);
  for (int64_t p = 1; p <= 50; ++p) {
    auto r = (*share)->read_page(p, buf);
    REQUIRE_OK(r);
    if (*r == PageRead::kData && buf != std::vector<std::byte>(4096)) CHECK(buf == page_pattern(4096, p));
  }
}

TEST_CASE("flow control: unconfirmed write bytes stay bounded; every write lands") {
  TempDir dir;
  ServerOptions options;
  options.max_unconfirmed_write_bytes = 64 * 1024;
  options.disk_latency = std::chrono::microseconds(500);
  options.threads = 4;
  auto server = start_page_server(dir / "server", options);
  auto client = start_client(dir.path(), server->address().text(), {.concurrency = 64});
  auto fd = client->open("f", {.location = Location::kRemote, .page_size = 8192, .create = true});
  REQUIRE_OK(fd);
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 300; ++p) tickets.push_back(*client->write_request(*fd, p, page_pattern(8192, p)));
  for (Ticket t : tickets) CHECK_OK(client->write_confirm(t));
  CHECK_OK(client->sync(*fd));
  auto c = server->counters();
  INFO("peak unconfirmed write bytes " << c.peak_unconfirmed_write_bytes);
  CHECK(c.peak_unconfirmed_write_bytes > 0);
  // Reading stops once the bound is passed; a frame already read may add one more page.
  CHECK(c.peak_unconfirmed_write_bytes <= options.max_unconfirmed_write_bytes + 2 * 8192);
  CHECK(c.pages_written == 300);
  std::vector<std::byte> buf(8192);
  for (int64_t p = 0; p < 300; p += 37) {
    REQUIRE(*client->read(*fd, p, buf) == PageRead::kData);
    CHECK(buf == page_pattern(8192, p));
  }
}

TEST_CASE("requests of one connection on the same page keep their order") {
  TempDir dir;
  ServerOptions options;
  options.threads = 8;
  options.cache_pages = 0;  // every access goes to the (emulated) disk
  options.disk_latency = std::chrono::microseconds(300);
  auto server = start_page_server(dir / "server", options);
  RawClient c(server->address());
  // Pipelined without waiting: write v, read, for versions 1..20 of pages 0..3.
  uint64_t id = 0;
  std::map<uint64_t, std::pair<int64_t, int>> reads;  // id -> (page, version it must see)
  for (int v = 1; v <= 20; ++v) {
    for (int64_t page = 0; page < 4; ++page) {
      send_write(c, ++id, 3, 1024, page, page_pattern(1024, page, static_cast<uint64_t>(v)));
      send_read(c, ++id, 3, 1024, page, 1);
      reads[id] = {page, v};
    }
  }
  int checked = 0;
  for (uint64_t n = 0; n < id; ++n) {
    auto reply = c.next();
    REQUIRE(reply != nullptr);
    auto it = reads.find(reply->root().getId());
    if (it == reads.end()) {
      CHECK(reply->root().isOk());
      continue;
    }
    REQUIRE(reply->root().isPages());
    auto data = reply->root().getPages();
    auto want = page_pattern(1024, it->second.first, static_cast<uint64_t>(it->second.second));
    CHECK(std::memcmp(data.begin(), want.data(), want.size()) == 0);
    ++checked;
  }
  CHECK(checked == 80);
}

TEST_CASE("one server per directory, in this process too; the directory is free again after stop") {
  TempDir dir;
  auto first = start_page_server(dir / "server");
  ServerOptions options;
  options.dir = dir / "server";
  auto address = parse_address("tcp://127.0.0.1:0");
  REQUIRE_OK(address);
  auto second = PageServer::start(options, *address);
  CHECK_CODE(second, Code::kBusy);
  CHECK(second.status().message().find("in use by another page server in this process") != std::string::npos);
  ping_ok(first->address());  // the refusal left the first untouched

  first->stop();
  auto third = PageServer::start(options, *address);
  REQUIRE_OK(third);
  ping_ok((*third)->address());
}

namespace {

// Sends request `id` of `kind` ("write" of page 0, "truncate" to 0 pages,
// "sync" or "fence") on share `file` under fencing token `fence`; returns
// the answer's status.
Status fenced(RawClient& c, uint64_t id, const std::string& kind, uint64_t file, uint64_t fence) {
  capnp::MallocMessageBuilder m;
  auto r = request(m, id).getRoot<wire::Request>();
  std::vector<std::byte> page(4096, std::byte{static_cast<unsigned char>(fence)});
  auto fill = [&](wire::Share::Builder share) {
    share.setFileId(file);
    share.setPageSize(4096);
    share.setFence(fence);
  };
  if (kind == "write") {
    auto w = r.initWrite();
    fill(w.getShare());
    w.setData(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(page.data()), page.size()));
  } else if (kind == "truncate") {
    fill(r.initTruncate().initShare());
  } else if (kind == "sync") {
    fill(r.initSync());
  } else {
    fill(r.initFence());
  }
  c.send(m);
  return error_of(c.next());
}

// Sends a catalog request built by `build`; returns the answer.
ReplyPtr catalog_call(RawClient& c, uint64_t id, const std::function<void(wire::Request::Builder)>& build) {
  capnp::MallocMessageBuilder m;
  build(request(m, id).getRoot<wire::Request>());
  c.send(m);
  auto reply = c.next();
  REQUIRE(reply != nullptr);
  return reply;
}

}  // namespace

TEST_CASE_FIXTURE(ServerFixture, "fencing: a write, truncate or sync under an older token than the file has seen is refused and changes nothing") {
  CHECK_OK(fenced(c, 1, "write", 7, 5));
  CHECK_OK(fenced(c, 2, "write", 7, 9));  // a newer lock's holder: 9 is now the one to beat
  for (const std::string kind : {"write", "truncate", "sync", "fence"}) {
    CAPTURE(kind);
    Status s = fenced(c, 3, kind, 7, 5);
    CHECK_CODE(s, Code::kStale);
    CHECK(s.message() == "file 7: write fenced off: lock token 5 < 9 held by another client (the lock's lease ran "
                         "out and another client took the file)");
  }
  CHECK_OK(fenced(c, 4, "write", 7, 0));  // no lock at all: nothing to check (pagefile's own tools)
  // The stale writes changed nothing: page 0 holds what token 0 wrote.
  send_read(c, 5, 7, 4096, 0, 1);
  auto reply = c.next();
  REQUIRE(reply != nullptr);
  REQUIRE(reply->root().isPages());
  CHECK(reply->root().getPages()[0] == 0);
  // A fence request raises the bar on a file never written here; other files are untouched.
  CHECK_OK(fenced(c, 6, "fence", 8, 20));
  CHECK_CODE(fenced(c, 7, "write", 8, 19), Code::kStale);
  CHECK_OK(fenced(c, 8, "write", 9, 1));
}

TEST_CASE("fencing: the highest token a server has seen outlives the server") {
  TempDir dir;
  {
    auto server = start_page_server(dir / "server");
    RawClient c(server->address());
    CHECK_OK(fenced(c, 1, "write", 7, 5));
    CHECK_OK(fenced(c, 2, "fence", 7, 9));   // the lock passed to another client
    CHECK_OK(fenced(c, 3, "fence", 8, 4));
  }
  // Started again (a crash, an upgrade): the writer whose lock ran out
  // is still refused, every way it may try.
  auto path = dir / "server" / "shares" / "7.fence";
  REQUIRE(std::filesystem::exists(path));
  {
    auto server = start_page_server(dir / "server");
    RawClient c(server->address());
    for (const std::string kind : {"write", "truncate", "sync", "fence"}) {
      CAPTURE(kind);
      CHECK_CODE(fenced(c, 4, kind, 7, 5), Code::kStale);
    }
    CHECK_OK(fenced(c, 5, "write", 7, 9));
    CHECK_CODE(fenced(c, 6, "write", 8, 3), Code::kStale);
    CHECK_OK(fenced(c, 7, "write", 8, 4));
  }
  // A damaged record refuses the file's writes rather than guess the bar,
  // and says which file to look at; other files go on.
  std::vector<std::byte> junk(16, std::byte{0x5a});
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(junk.data()), static_cast<std::streamsize>(junk.size()));
  }
  // An empty record (made, then a crash or a full disk before its first
  // write: the raise was never answered) is no record.
  { std::ofstream empty(dir / "server" / "shares" / "9.fence", std::ios::trunc); }
  auto server = start_page_server(dir / "server");
  RawClient c(server->address());
  Status s = fenced(c, 8, "write", 7, 10);
  CHECK_CODE(s, Code::kCorruption);
  CHECK(s.message().find("7.fence") != std::string::npos);
  CHECK_OK(fenced(c, 9, "write", 8, 4));
  CHECK_OK(fenced(c, 10, "write", 9, 2));
  CHECK_CODE(fenced(c, 11, "write", 9, 1), Code::kStale);
}

TEST_CASE("catalog: write locks carry fencing tokens; a new owner gets a higher one; a superseded token cannot unlink") {
  TempDir dir;
  ServerOptions options;
  // Long enough that owners hold their locks across the calls below on a
  // loaded machine; owner 2 is then left silent past it.
  options.lease = std::chrono::milliseconds(2000);
  auto server = start_page_server(dir / "server", options);
  RawClient c(server->address());
  auto opened = catalog_call(c, 1, [](wire::Request::Builder r) {
    auto o = r.initOpen();
    o.setName("db");
    o.setCreate(true);
    o.setStripePages(1);
    o.initServers(1).set(0, "tcp://127.0.0.1:1");
  });
  INFO(error_of(opened).to_string());
  REQUIRE(opened->root().isFile());
  uint64_t file = opened->root().getFile().getId();
  uint64_t next_id = 10;
  // Owner `owner` to `level`: the grant's (token, announce).
  auto lock = [&](uint64_t owner, uint8_t level) {
    auto reply = catalog_call(c, next_id++, [&](wire::Request::Builder r) {
      auto l = r.initLock();
      l.setFileId(file);
      l.setOwner(owner);
      l.setLevel(level);
    });
    REQUIRE(reply->root().isLockState());
    auto state = reply->root().getLockState();
    return std::make_pair(state.getFenceToken(), state.getFenceAnnounce());
  };
  constexpr uint8_t kNone = 0, kShared = 1, kReserved = 2, kExclusive = 4;
  CHECK(lock(1, kShared).first == 0);  // a reader carries none
  auto [t1, a1] = lock(1, kReserved);
  CHECK(t1 != 0);
  CHECK_FALSE(a1);
  CHECK(lock(1, kExclusive).first == t1);
  lock(1, kNone);
  lock(1, kShared);
  CHECK(lock(1, kReserved).first == t1);  // the same owner again, no one between: its token
  lock(1, kNone);
  lock(2, kShared);
  auto [t2, a2] = lock(2, kReserved);
  CHECK(t2 > t1);  // the lock passed on: a higher token
  CHECK_FALSE(a2);  // owner 1 let go, so it sends nothing more
  lock(2, kNone);

  auto unlink = [&](uint64_t token) {
    return error_of(catalog_call(c, next_id++, [&](wire::Request::Builder r) {
      r.setUnlink("db-journal");
      r.setLockToken(token);
    }));
  };
  catalog_call(c, next_id++, [](wire::Request::Builder r) {
    auto o = r.initOpen();
    o.setName("db-journal");
    o.setCreate(true);
    o.setStripePages(1);
    o.initServers(1).set(0, "tcp://127.0.0.1:1");
  });
  CHECK_CODE(unlink(t1), Code::kStale);
  auto set_size = error_of(catalog_call(c, next_id++, [&, stale = t1](wire::Request::Builder r) {
    auto s = r.initSetSize();
    s.setFileId(file);
    s.setPages(3);
    r.setLockToken(stale);
  }));
  CHECK_CODE(set_size, Code::kStale);
  CHECK_OK(unlink(t2));

  // Owner 2 holds the write lock and goes silent past its lease: the next
  // grant, even a reader's, brings a new token to announce.
  lock(2, kShared);
  lock(2, kReserved);
  std::this_thread::sleep_for(std::chrono::milliseconds(2100));
  auto [t3, a3] = lock(3, kShared);
  CHECK(t3 > t2);
  CHECK(a3);
  auto [t4, a4] = lock(3, kReserved);
  CHECK(t4 == t3);  // it was owner 3's already
  CHECK(a4);        // asked again until it has held a write lock and let go
  lock(3, kShared);
  auto [t5, a5] = lock(3, kReserved);
  CHECK(t5 == t3);
  CHECK_FALSE(a5);
}

namespace {

// Sends request `id`: a read of page 0 of share 7 of cluster `cluster`, as
// a client that expects directory `directory` at the server.
ReplyPtr read_as(RawClient& c, uint64_t id, uint64_t cluster, uint64_t directory) {
  capnp::MallocMessageBuilder m;
  auto r = request(m, id).getRoot<wire::Request>().initRead();
  r.getShare().setFileId(7);
  r.getShare().setPageSize(4096);
  r.getShare().setCluster(cluster);
  r.getShare().setDirectory(directory);
  r.setCount(1);
  c.send(m);
  return c.next();
}

Result<uint64_t> join(RawClient& c, uint64_t id, uint64_t cluster) {
  capnp::MallocMessageBuilder m;
  request(m, id).getRoot<wire::Request>().setJoin(cluster);
  c.send(m);
  auto reply = c.next();
  if (Status s = error_of(reply); !s) return s;
  REQUIRE(reply->root().isDirectory());
  return reply->root().getDirectory();
}

}  // namespace

TEST_CASE("server directories: a join says which directory it is; requests that expect another are refused") {
  TempDir dir;
  // A directory from before directory ids: its cluster alone.
  const auto old_dir = dir / "old";
  std::filesystem::create_directories(old_dir);
  { std::ofstream(old_dir / "cluster") << "00000000000000aa\n"; }
  auto server = start_page_server(old_dir);
  std::string text;
  {
    std::ifstream in(old_dir / "cluster");
    std::stringstream all;
    all << in.rdbuf();
    text = all.str();
  }
  REQUIRE(text.size() == 34);  // given an id of its own, kept with the cluster
  CHECK(text.substr(0, 17) == "00000000000000aa\n");
  const uint64_t mine = std::stoull(text.substr(17, 16), nullptr, 16);
  CHECK(mine != 0);

  RawClient c(server->address());
  auto joined = join(c, 1, 0xaa);
  REQUIRE_OK(joined);
  CHECK(*joined == mine);
  CHECK_CODE(join(c, 2, 0xbb), Code::kStale);  // another cluster's
  CHECK_CODE(join(c, 3, 0), Code::kInvalidArgument);
  CHECK(error_of(read_as(c, 4, 0xaa, mine)).is_ok());
  CHECK(error_of(read_as(c, 5, 0xaa, 0)).is_ok());  // a client that does not know it: unchecked
  Status other = error_of(read_as(c, 6, 0xaa, mine + 1));
  CHECK_CODE(other, Code::kIOError);
  CHECK(other.message().find("replaced") != std::string::npos);

  // An empty directory where the catalog knows one: refused, and it joins
  // nothing (a later client's join is what makes it a member again).
  auto empty = start_page_server(dir / "empty");
  RawClient e(empty->address());
  Status lost = error_of(read_as(e, 1, 0xaa, mine));
  CHECK_CODE(lost, Code::kIOError);
  CHECK(lost.message().find("emptied") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "empty" / "cluster"));
  {
    capnp::MallocMessageBuilder m;
    auto drop = request(m, 2).getRoot<wire::Request>().initDropShare();
    drop.setFileId(7);
    drop.setCluster(0xaa);
    drop.setDirectory(mine);
    e.send(m);
    CHECK(error_of(e.next()).is_ok());  // nothing here to remove: done
  }
  CHECK_FALSE(std::filesystem::exists(dir / "empty" / "cluster"));
  auto fresh = join(e, 3, 0xaa);
  REQUIRE_OK(fresh);
  CHECK(*fresh != mine);
  CHECK(error_of(read_as(e, 4, 0xaa, *fresh)).is_ok());
}
