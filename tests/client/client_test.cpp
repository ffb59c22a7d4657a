// PFEI over local Pagefiles: every operation and every bad input.
#include <atomic>
#include <fstream>
#include <thread>

#include "pagefile/pagefile.h"
#include "store/disk_faults.h"
#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::test;

namespace {

struct Fixture {
  TempDir dir;
  std::unique_ptr<Client> client;

  explicit Fixture(uint32_t concurrency = 8)
      : client(start_client(dir.path(), "inproc:1", {.concurrency = concurrency, .io_threads = 8})) {}

  Fd create(const std::string& name, uint32_t page_size = 4096) {
    auto fd = client->open(name, {.page_size = page_size, .create = true});
    REQUIRE_OK(fd);
    return *fd;
  }
};

}  // namespace

TEST_CASE("start refuses a zero concurrency level or thread count") {
  CHECK_CODE(Client::start({.concurrency = 0}), Code::kInvalidArgument);
  CHECK_CODE(Client::start({.io_threads = 0}), Code::kInvalidArgument);
}

TEST_CASE("request and confirm: split reads and writes") {
  Fixture fx;
  Fd fd = fx.create("orders", 8192);
  std::vector<Ticket> writes;
  for (int64_t p = 0; p < 32; ++p) {
    auto t = fx.client->write_request(fd, p, page_pattern(8192, p));
    REQUIRE_OK(t);
    writes.push_back(*t);
  }
  for (Ticket t : writes) CHECK_OK(fx.client->write_confirm(t));

  std::vector<std::vector<std::byte>> buffers(32, std::vector<std::byte>(8192));
  std::vector<Ticket> reads;
  for (int64_t p = 0; p < 32; ++p) {
    auto t = fx.client->read_request(fd, p, buffers[p]);
    REQUIRE_OK(t);
    reads.push_back(*t);
  }
  // Confirm in reverse: order of confirms is the caller's choice.
  for (int64_t p = 31; p >= 0; --p) {
    auto r = fx.client->read_confirm(reads[p]);
    REQUIRE_OK(r);
    CHECK(*r == PageRead::kData);
    CHECK(buffers[p] == page_pattern(8192, p));
  }
  CHECK_OK(fx.client->sync(fd));
  auto st = fx.client->status(fd);
  REQUIRE_OK(st);
  CHECK(st->pages == 32);
  CHECK(st->in_flight == 0);
  CHECK_OK(fx.client->close(fd));
}

TEST_CASE("one-step read and write; past the end reads zeros and says so") {
  Fixture fx;
  Fd fd = fx.create("f", 1024);
  CHECK_OK(fx.client->write(fd, 2, page_pattern(1024, 2)));
  std::vector<std::byte> buf(1024, std::byte{1});
  auto r = fx.client->read(fd, 2, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kData);
  CHECK(buf == page_pattern(1024, 2));
  r = fx.client->read(fd, 0, buf);
  CHECK(*r == PageRead::kData);
  CHECK(buf == std::vector<std::byte>(1024));
  std::fill(buf.begin(), buf.end(), std::byte{1});
  r = fx.client->read(fd, 3, buf);
  CHECK(*r == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(1024));
}

TEST_CASE("the caller may reuse a write's buffer at once") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  std::vector<std::byte> buf = page_pattern(512, 0);
  auto t = fx.client->write_request(fd, 0, buf);
  REQUIRE_OK(t);
  std::fill(buf.begin(), buf.end(), std::byte{0xEE});
  CHECK_OK(fx.client->write_confirm(*t));
  REQUIRE_OK(fx.client->read(fd, 0, buf));
  CHECK(buf == page_pattern(512, 0));
}

TEST_CASE("descriptors are unique and never reused") {
  Fixture fx;
  Fd a = fx.create("a");
  Fd b = fx.create("b");
  auto a2 = fx.client->open("a");  // a second descriptor on the same file
  REQUIRE_OK(a2);
  CHECK(a.value != b.value);
  CHECK(a.value != a2->value);
  CHECK_OK(fx.client->close(a));
  Fd c = fx.create("c");
  CHECK(c.value != a.value);
  std::vector<std::byte> buf(4096);
  auto closed = fx.client->read(a, 0, buf);
  CHECK_CODE(closed, Code::kInvalidArgument);
  CHECK(closed.status().message().find("is closed") != std::string::npos);
  auto never = fx.client->read(Fd{999}, 0, buf);
  CHECK_CODE(never, Code::kInvalidArgument);
  CHECK(never.status().message().find("never opened") != std::string::npos);
  CHECK_CODE(fx.client->read(Fd{0}, 0, buf), Code::kInvalidArgument);
}

TEST_CASE("every operation refuses an unknown or closed descriptor") {
  Fixture fx;
  Fd fd = fx.create("f");
  CHECK_OK(fx.client->close(fd));
  std::vector<std::byte> buf(4096);
  for (Fd bad : {fd, Fd{12345}}) {
    CHECK_CODE(fx.client->read_request(bad, 0, buf), Code::kInvalidArgument);
    CHECK_CODE(fx.client->write_request(bad, 0, buf), Code::kInvalidArgument);
    CHECK_CODE(fx.client->read(bad, 0, buf), Code::kInvalidArgument);
    CHECK_CODE(fx.client->write(bad, 0, buf), Code::kInvalidArgument);
    CHECK_CODE(fx.client->sync(bad), Code::kInvalidArgument);
    CHECK_CODE(fx.client->truncate(bad, 0), Code::kInvalidArgument);
    CHECK_CODE(fx.client->status(bad), Code::kInvalidArgument);
    CHECK_CODE(fx.client->size(bad), Code::kInvalidArgument);
    CHECK_CODE(fx.client->set_concurrency(bad, 4), Code::kInvalidArgument);
    CHECK_CODE(fx.client->lock(bad, LockMode::kShared), Code::kInvalidArgument);
    CHECK_CODE(fx.client->unlock(bad), Code::kInvalidArgument);
    CHECK_CODE(fx.client->close(bad), Code::kInvalidArgument);
  }
}

TEST_CASE("tickets: confirmed twice, never issued, wrong kind, of a closed file") {
  Fixture fx;
  Fd fd = fx.create("f");
  std::vector<std::byte> buf(4096);
  auto w = fx.client->write_request(fd, 0, page_pattern(4096, 0));
  REQUIRE_OK(w);
  auto wrong_kind = fx.client->read_confirm(*w);
  CHECK_CODE(wrong_kind, Code::kInvalidArgument);
  CHECK(wrong_kind.status().message().find("write_confirm") != std::string::npos);
  CHECK_OK(fx.client->write_confirm(*w));  // still confirmable after the mistake
  auto twice = fx.client->write_confirm(*w);
  CHECK_CODE(twice, Code::kInvalidArgument);
  CHECK(twice.message().find("already confirmed") != std::string::npos);

  auto never = fx.client->read_confirm(Ticket{w->value + 1000});
  CHECK_CODE(never, Code::kInvalidArgument);
  CHECK(never.status().message().find("never issued") != std::string::npos);
  CHECK_CODE(fx.client->write_confirm(Ticket{0}), Code::kInvalidArgument);

  auto r = fx.client->read_request(fd, 0, buf);
  REQUIRE_OK(r);
  CHECK_OK(fx.client->close(fd));
  CHECK_CODE(fx.client->read_confirm(*r), Code::kInvalidArgument);
}

TEST_CASE("buffers of the wrong size and bad page numbers are refused at request") {
  Fixture fx;
  Fd fd = fx.create("f", 4096);
  std::vector<std::byte> small(4000), big(8192), right(4096);
  CHECK_CODE(fx.client->read_request(fd, 0, small), Code::kInvalidArgument);
  CHECK_CODE(fx.client->write_request(fd, 0, big), Code::kInvalidArgument);
  CHECK_CODE(fx.client->write_request(fd, 0, {}), Code::kInvalidArgument);
  CHECK_CODE(fx.client->read_request(fd, -1, right), Code::kInvalidArgument);
  CHECK_CODE(fx.client->write_request(fd, INT64_MIN, right), Code::kInvalidArgument);
  CHECK_CODE(fx.client->write_request(fd, kMaxPageNumber + 1, right), Code::kInvalidArgument);
  CHECK_CODE(fx.client->read_request(fd, INT64_MAX, right), Code::kInvalidArgument);
  CHECK_CODE(fx.client->truncate(fd, -5), Code::kInvalidArgument);
  CHECK_CODE(fx.client->truncate(fd, INT64_MAX), Code::kInvalidArgument);
  // The largest page is accepted (as a request; the disk decides the rest).
  auto st = fx.client->status(fd);
  CHECK(st->pages == 0);
  CHECK(st->in_flight == 0);
}

TEST_CASE("open: missing file, exclusive create, page sizes, bad names, remote") {
  Fixture fx;
  auto missing = fx.client->open("nope");
  CHECK_CODE(missing, Code::kNotFound);
  CHECK(missing.status().message().find("create is false") != std::string::npos);
  fx.create("f", 8192);
  CHECK_CODE(fx.client->open("f", {.create = true, .exclusive = true}), Code::kAlreadyExists);
  CHECK_CODE(fx.client->open("f", {.page_size = 4096}), Code::kInvalidArgument);
  CHECK_OK(fx.client->open("f", {.page_size = 8192}));
  CHECK_OK(fx.client->open("f"));
  for (uint32_t bad : {100u, 1000u, 256u, 131072u}) {
    CHECK_CODE(fx.client->open("g", {.page_size = bad, .create = true}), Code::kInvalidArgument);
  }
  CHECK_CODE(fx.client->open("", {.create = true}), Code::kInvalidArgument);
  CHECK_CODE(fx.client->open(std::string("a\0b", 3), {.create = true}), Code::kInvalidArgument);
  CHECK_CODE(fx.client->open("h", {.create = true, .policy = BufferPolicy{AccessType::kRandom, 9, 3}}),
             Code::kInvalidArgument);
  // Remote files exist apart from local ones (tests/bus covers them).
  CHECK_CODE(fx.client->open("f", {.location = Location::kRemote}), Code::kNotFound);
  auto bad_bus = Client::start({.local_dir = fx.dir.path(), .bus = "tcp://nowhere"});
  REQUIRE_OK(bad_bus);
  auto remote = (*bad_bus)->open("r", {.location = Location::kRemote, .create = true});
  CHECK_CODE(remote, Code::kInvalidArgument);
  CHECK(remote.status().message().find("bus") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(fx.dir / "g"));
}

TEST_CASE("create_page_size: a new file gets it, one that exists keeps its own, a bad one is refused") {
  Fixture fx;
  auto page_size = [&](const Result<Fd>& fd) {
    REQUIRE_OK(fd);
    return fx.client->status(*fd)->page_size;
  };
  CHECK(page_size(fx.client->open("new", {.create_page_size = 16384, .create = true})) == 16384);
  CHECK(page_size(fx.client->open("new", {.create_page_size = 8192, .create = true})) == 16384);
  CHECK(page_size(fx.client->open("new", {.create_page_size = 8192})) == 16384);
  CHECK(page_size(fx.client->open("excl", {.create_page_size = 8192, .create = true, .exclusive = true})) == 8192);
  // page_size, when given, is the size asked of a new file and of one that exists.
  CHECK(page_size(fx.client->open("both", {.page_size = 4096, .create_page_size = 8192, .create = true})) == 4096);
  CHECK_CODE(fx.client->open("missing", {.create_page_size = 8192}), Code::kNotFound);
  CHECK_CODE(fx.client->open("bad", {.create_page_size = 3000, .create = true}), Code::kInvalidArgument);
  CHECK_FALSE(std::filesystem::exists(fx.dir / "bad"));
  CHECK_FALSE(std::filesystem::exists(fx.dir / "missing"));
}

TEST_CASE("a file with a damaged header is refused") {
  Fixture fx;
  Fd fd = fx.create("f");
  CHECK_OK(fx.client->write(fd, 0, page_pattern(4096, 0)));
  CHECK_OK(fx.client->close(fd));
  {
    std::FILE* f = std::fopen((fx.dir / "f").c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, 3, SEEK_SET);
    std::fputc('X', f);
    std::fclose(f);
  }
  auto r = fx.client->open("f");
  CHECK_CODE(r, Code::kCorruption);
}

TEST_CASE("status reports page size, size, policy and concurrency") {
  Fixture fx(6);
  auto fd = fx.client->open(
      "f", {.page_size = 2048, .create = true, .policy = BufferPolicy{AccessType::kLooping, 4, 40}});
  REQUIRE_OK(fd);
  CHECK_OK(fx.client->write(*fd, 9, page_pattern(2048, 9)));
  auto st = fx.client->status(*fd);
  REQUIRE_OK(st);
  CHECK(st->name == "f");
  CHECK(st->location == Location::kLocal);
  CHECK(st->page_size == 2048);
  CHECK(st->pages == 10);
  CHECK(st->policy == BufferPolicy{AccessType::kLooping, 4, 40});
  CHECK(st->concurrency == 6);
  CHECK_FALSE(st->read_only);
  // size() counts as status() does, and sees what another descriptor wrote.
  auto size = fx.client->size(*fd);
  REQUIRE_OK(size);
  CHECK(size->pages == 10);
  CHECK(size->page_size == 2048);
  auto other = fx.client->open("f");
  REQUIRE_OK(other);
  CHECK_OK(fx.client->write(*other, 19, page_pattern(2048, 19)));
  CHECK(fx.client->size(*fd)->pages == 20);
  CHECK(fx.client->status(*fd)->pages == 20);
  CHECK_OK(fx.client->close(*other));

  // Reopened without a policy: the one recorded at creation.
  auto again = fx.client->open("f", {.concurrency = 3});
  CHECK(fx.client->status(*again)->policy == BufferPolicy{AccessType::kLooping, 4, 40});
  CHECK(fx.client->status(*again)->concurrency == 3);
  // Reopened with a policy: that one, for this descriptor.
  auto seq = fx.client->open("f", {.policy = BufferPolicy{AccessType::kSequential, 0, 8}});
  CHECK(fx.client->status(*seq)->policy.access == AccessType::kSequential);

  CHECK_OK(fx.client->set_concurrency(*fd, 12));
  CHECK(fx.client->status(*fd)->concurrency == 12);
  CHECK_CODE(fx.client->set_concurrency(*fd, 0), Code::kInvalidArgument);
}

TEST_CASE("truncate through the client orders after earlier writes") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < 50; ++p) tickets.push_back(*fx.client->write_request(fd, p, page_pattern(512, p)));
  CHECK_OK(fx.client->truncate(fd, 10));  // waits for the 50 writes first
  for (Ticket t : tickets) CHECK_OK(fx.client->write_confirm(t));
  CHECK(fx.client->status(fd)->pages == 10);
  std::vector<std::byte> buf(512);
  CHECK(*fx.client->read(fd, 10, buf) == PageRead::kBeyondEnd);
  CHECK(*fx.client->read(fd, 9, buf) == PageRead::kData);
  CHECK(buf == page_pattern(512, 9));
}

TEST_CASE("read_pages_at_once: a local file's pages read together, each checked; bad counts and buffers refused") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  for (int64_t p = 0; p < 20; ++p) REQUIRE_OK(*fx.client->write_at_once(fd, p, page_pattern(512, p)));
  std::vector<std::byte> buf(8 * 512);
  auto pages_match = [&](int64_t first, int64_t count) {
    for (int64_t i = 0; i < count; ++i) {
      CAPTURE(first + i);
      CHECK(std::equal(buf.begin() + i * 512, buf.begin() + (i + 1) * 512, page_pattern(512, first + i).begin()));
    }
  };
  auto run = fx.client->read_pages_at_once(fd, 0, 8, buf);
  REQUIRE(run.has_value());
  REQUIRE_OK(*run);
  CHECK(**run == 8);
  pages_match(0, 8);
  // One page into a buffer of more, as the store takes it; the end.
  run = fx.client->read_pages_at_once(fd, 5, 1, buf);
  REQUIRE(run.has_value());
  REQUIRE_OK(*run);
  CHECK(**run == 1);
  pages_match(5, 1);
  run = fx.client->read_pages_at_once(fd, 16, 8, buf);
  REQUIRE(run.has_value());
  REQUIRE_OK(*run);
  CHECK(**run == 4);
  pages_match(16, 4);
  // Bad input is refused; a descriptor not open is the usual path's to say.
  CHECK(fx.client->read_pages_at_once(fd, 0, 9, buf)->status().is(Code::kInvalidArgument));
  CHECK(fx.client->read_pages_at_once(fd, 0, 0, buf)->status().is(Code::kInvalidArgument));
  CHECK(fx.client->read_pages_at_once(fd, -1, 2, buf)->status().is(Code::kInvalidArgument));
  CHECK(!fx.client->read_pages_at_once(Fd{999}, 0, 2, buf).has_value());
  // A page whose last write failed: no run (the usual path reads its error).
  DiskFaults::arm(DiskOp::kWrite, 1, DiskFault::kEio);
  auto failed = fx.client->write_at_once(fd, 3, page_pattern(512, 99));
  DiskFaults::disarm();
  REQUIRE(failed.has_value());
  CHECK(failed->is(Code::kIOError));
  CHECK(!fx.client->read_pages_at_once(fd, 0, 8, buf).has_value());
  CHECK(fx.client->sync(fd).is(Code::kIOError));
  CHECK_OK(fx.client->close(fd));
}

TEST_CASE("write_at_once: a local page written on the caller's thread; a failed one reads as its error until written again") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  for (int64_t p = 0; p < 20; ++p) {
    auto done = fx.client->write_at_once(fd, p, page_pattern(512, p));
    REQUIRE(done.has_value());
    REQUIRE_OK(*done);
  }
  CHECK(fx.client->status(fd)->pages == 20);
  std::vector<std::byte> buf(512);
  for (int64_t p = 0; p < 20; ++p) {
    auto at_once = fx.client->read_at_once(fd, p, buf, /*may_wait=*/true);
    REQUIRE(at_once.has_value());
    CHECK(**at_once == PageRead::kData);
    CHECK(buf == page_pattern(512, p));
  }
  CHECK_OK(fx.client->sync(fd));

  // Bad input is refused as a request would be.
  CHECK(fx.client->write_at_once(fd, -1, page_pattern(512, 0))->is(Code::kInvalidArgument));
  CHECK(fx.client->write_at_once(fd, 0, page_pattern(1024, 0))->is(Code::kInvalidArgument));
  CHECK(!fx.client->write_at_once(Fd{999}, 0, page_pattern(512, 0)).has_value());  // the usual path says it
  CHECK(fx.client->write(Fd{999}, 0, page_pattern(512, 0)).is(Code::kInvalidArgument));

  // A write that fails: its error now, the page reads as that error (on
  // every path), the next sync says so once.
  DiskFaults::arm(DiskOp::kWrite, 1, DiskFault::kEio);
  auto failed = fx.client->write_at_once(fd, 3, page_pattern(512, 99));
  DiskFaults::disarm();
  REQUIRE(failed.has_value());
  CHECK(failed->is(Code::kIOError));
  CHECK(!fx.client->read_at_once(fd, 3, buf, /*may_wait=*/true).has_value());
  CHECK(fx.client->read(fd, 3, buf).status().is(Code::kIOError));
  CHECK(fx.client->sync(fd).is(Code::kIOError));
  CHECK_OK(fx.client->sync(fd));
  REQUIRE_OK(*fx.client->write_at_once(fd, 3, page_pattern(512, 33)));
  REQUIRE(fx.client->read(fd, 3, buf).is_ok());
  CHECK(buf == page_pattern(512, 33));
  // A failed write its caller gives up (abandon_failed_writes): the page
  // reads as it was before it, and no sync reports it.
  DiskFaults::arm(DiskOp::kWrite, 1, DiskFault::kEio);
  failed = fx.client->write_at_once(fd, 3, page_pattern(512, 98));
  DiskFaults::disarm();
  REQUIRE(failed.has_value());
  CHECK(failed->is(Code::kIOError));
  CHECK_OK(fx.client->abandon_failed_writes(fd));
  REQUIRE(fx.client->read(fd, 3, buf).is_ok());
  CHECK(buf == page_pattern(512, 33));
  CHECK_OK(fx.client->sync(fd));
  CHECK(fx.client->abandon_failed_writes(Fd{999}).is(Code::kInvalidArgument));
  CHECK_OK(fx.client->close(fd));
  CHECK(!fx.client->write_at_once(fd, 0, page_pattern(512, 0)).has_value());
}

TEST_CASE("write_pages_at_once: a local file's pages written with one call; a failed run reads as its error until written again") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  auto run = [](int64_t first, int64_t count, uint64_t seed) {
    std::vector<std::byte> out;
    for (int64_t p = first; p < first + count; ++p) {
      auto one = page_pattern(512, p, seed);
      out.insert(out.end(), one.begin(), one.end());
    }
    return out;
  };
  auto done = fx.client->write_pages_at_once(fd, 0, run(0, 8, 1));
  REQUIRE(done.has_value());
  REQUIRE_OK(*done);
  CHECK(fx.client->status(fd)->pages == 8);
  std::vector<std::byte> buf(512);
  for (int64_t p = 0; p < 8; ++p) {
    REQUIRE(fx.client->read(fd, p, buf).is_ok());
    CHECK(buf == page_pattern(512, p, 1));
  }
  // Bad input is refused as a request would be.
  CHECK(fx.client->write_pages_at_once(fd, 0, std::vector<std::byte>(700))->is(Code::kInvalidArgument));
  CHECK(fx.client->write_pages_at_once(fd, -1, run(0, 2, 1))->is(Code::kInvalidArgument));
  CHECK(!fx.client->write_pages_at_once(Fd{999}, 0, run(0, 2, 1)).has_value());

  // A run whose bytes fail: every page of it reads as the error, the next
  // sync says so once, and written again they read.
  DiskFaults::arm(DiskOp::kWrite, 1, DiskFault::kEio);
  auto failed = fx.client->write_pages_at_once(fd, 2, run(2, 3, 3));
  DiskFaults::disarm();
  REQUIRE(failed.has_value());
  CHECK(failed->is(Code::kIOError));
  for (int64_t p = 2; p < 5; ++p) CHECK(fx.client->read(fd, p, buf).status().is(Code::kIOError));
  REQUIRE(fx.client->read(fd, 5, buf).is_ok());
  CHECK(fx.client->sync(fd).is(Code::kIOError));
  CHECK_OK(fx.client->sync(fd));
  REQUIRE_OK(*fx.client->write_pages_at_once(fd, 2, run(2, 3, 4)));
  for (int64_t p = 2; p < 5; ++p) {
    REQUIRE(fx.client->read(fd, p, buf).is_ok());
    CHECK(buf == page_pattern(512, p, 4));
  }
  CHECK_OK(fx.client->close(fd));
}

TEST_CASE("write_at_once beside sync, truncate and requests of other threads: every call ends, the last writes read back") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  constexpr int64_t kPages = 64;
  std::atomic<int> errors{0};
  // Two writers of the same pages: one's write at once of a page is
  // refused while the other's is under way, and its write request waits.
  auto writer_of = [&](uint64_t seed) {
    return std::thread([&, seed] {
      for (int round = 0; round < 100; ++round) {
        for (int64_t p = 0; p < kPages; ++p) {
          auto data = page_pattern(512, p, seed + static_cast<uint64_t>(round));
          auto done = fx.client->write_at_once(fd, p, data);
          Status s = done ? *done : fx.client->write(fd, p, data);
          if (!s) ++errors;
        }
      }
    });
  };
  std::thread writer = writer_of(0);
  std::thread other = writer_of(500);
  for (int i = 0; i < 100; ++i) {
    CHECK_OK(fx.client->sync(fd));
    CHECK_OK(fx.client->truncate(fd, kPages / 2));
    auto t = fx.client->write_request(fd, kPages, page_pattern(512, kPages));
    REQUIRE_OK(t);
    CHECK_OK(fx.client->write_confirm(*t));
  }
  writer.join();
  other.join();
  CHECK(errors == 0);
  for (int64_t p = 0; p < kPages; ++p) REQUIRE_OK(*fx.client->write_at_once(fd, p, page_pattern(512, p, 1000)));
  CHECK_OK(fx.client->sync(fd));
  std::vector<std::byte> buf(512);
  for (int64_t p = 0; p < kPages; ++p) {
    REQUIRE(fx.client->read(fd, p, buf).is_ok());
    CHECK(buf == page_pattern(512, p, 1000));
  }
}

TEST_CASE("read-only open: reads work, writes and truncate are refused") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  CHECK_OK(fx.client->write(fd, 0, page_pattern(512, 0)));
  auto ro = fx.client->open("f", {.read_only = true});
  REQUIRE_OK(ro);
  std::vector<std::byte> buf(512);
  CHECK(*fx.client->read(*ro, 0, buf) == PageRead::kData);
  CHECK_CODE(fx.client->write_request(*ro, 0, buf), Code::kReadOnly);
  CHECK_CODE(fx.client->truncate(*ro, 0), Code::kReadOnly);
  CHECK(fx.client->status(*ro)->read_only);
  CHECK_CODE(fx.client->open("g", {.create = true, .read_only = true}), Code::kInvalidArgument);
}

TEST_CASE("data survives close and reopen, and a new client") {
  TempDir dir;
  {
    auto client = *Client::start({.local_dir = dir.path()});
    auto fd = *client->open("keep", {.page_size = 16384, .create = true});
    for (int64_t p = 0; p < 20; ++p) CHECK_OK(client->write(fd, p, page_pattern(16384, p, 7)));
    CHECK_OK(client->sync(fd));
    CHECK_OK(client->close(fd));
    auto again = *client->open("keep");
    std::vector<std::byte> buf(16384);
    CHECK(*client->read(again, 19, buf) == PageRead::kData);
    CHECK(buf == page_pattern(16384, 19, 7));
    CHECK_OK(client->stop());
  }
  auto client = *Client::start({.local_dir = dir.path()});
  auto fd = *client->open("keep");
  std::vector<std::byte> buf(16384);
  for (int64_t p = 0; p < 20; ++p) {
    CHECK(*client->read(fd, p, buf) == PageRead::kData);
    CHECK(buf == page_pattern(16384, p, 7));
  }
}

TEST_CASE("unlink removes the file; open descriptors keep working") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  CHECK_OK(fx.client->write(fd, 0, page_pattern(512, 0)));
  CHECK_OK(fx.client->unlink("f"));
  CHECK_FALSE(std::filesystem::exists(fx.dir / "f"));
  std::vector<std::byte> buf(512);
  CHECK(*fx.client->read(fd, 0, buf) == PageRead::kData);
  CHECK_CODE(fx.client->unlink("f"), Code::kNotFound);
  CHECK_CODE(fx.client->open("f"), Code::kNotFound);
  CHECK_CODE(fx.client->unlink(""), Code::kInvalidArgument);
  CHECK_CODE(fx.client->unlink("f", Location::kRemote), Code::kNotFound);
  // A file that is not a Pagefile is not the client's to remove.
  { std::ofstream(fx.dir / "keepme.txt") << "not pages\n"; }
  CHECK_CODE(fx.client->unlink("keepme.txt"), Code::kInvalidArgument);
  CHECK(std::filesystem::exists(fx.dir / "keepme.txt"));
}

TEST_CASE("locks: shared with shared, exclusive with nothing, per descriptor") {
  Fixture fx;
  Fd a = fx.create("f");
  Fd b = *fx.client->open("f");
  CHECK_OK(fx.client->lock(a, LockMode::kShared));
  CHECK_OK(fx.client->lock(b, LockMode::kShared));
  auto busy = fx.client->lock(b, LockMode::kExclusive, LockWait::kTry);
  CHECK_CODE(busy, Code::kBusy);
  CHECK_OK(fx.client->unlock(a));
  CHECK_OK(fx.client->lock(b, LockMode::kExclusive));  // upgrade
  CHECK_CODE(fx.client->lock(a, LockMode::kShared), Code::kBusy);
  CHECK_OK(fx.client->lock(b, LockMode::kShared));  // downgrade
  CHECK_OK(fx.client->lock(a, LockMode::kShared));
  CHECK_OK(fx.client->unlock(a));
  CHECK_OK(fx.client->unlock(a));  // unlocking twice is harmless
  CHECK_OK(fx.client->unlock(b));
}

TEST_CASE("a blocking lock waits until the holder lets go; close releases") {
  Fixture fx;
  Fd a = fx.create("f");
  Fd b = *fx.client->open("f");
  CHECK_OK(fx.client->lock(a, LockMode::kExclusive));
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    CHECK_OK(fx.client->lock(b, LockMode::kExclusive, LockWait::kBlock));
    got = true;
  });
  // Give the waiter time to be granted the lock wrongly, were it not held.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK_FALSE(got.load());
  CHECK_OK(fx.client->close(a));  // releases a's lock
  waiter.join();
  CHECK(got.load());
  Fd c = *fx.client->open("f");
  CHECK_CODE(fx.client->lock(c, LockMode::kShared), Code::kBusy);
}

TEST_CASE("stop closes everything; every call after it fails cleanly") {
  Fixture fx;
  Fd fd = fx.create("f", 512);
  auto t = fx.client->write_request(fd, 0, page_pattern(512, 0));
  REQUIRE_OK(t);
  CHECK_OK(fx.client->stop());
  CHECK_OK(fx.client->stop());
  std::vector<std::byte> buf(512);
  CHECK_CODE(fx.client->read(fd, 0, buf), Code::kInvalidArgument);
  CHECK_CODE(fx.client->write_confirm(*t), Code::kInvalidArgument);
  CHECK_CODE(fx.client->open("f"), Code::kInvalidArgument);
  CHECK_CODE(fx.client->unlink("f"), Code::kInvalidArgument);
  // The write was carried out before stop closed the file.
  auto again = *Client::start({.local_dir = fx.dir.path()});
  auto fd2 = *again->open("f");
  CHECK(*again->read(fd2, 0, buf) == PageRead::kData);
  CHECK(buf == page_pattern(512, 0));
}
