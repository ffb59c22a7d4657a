// LocalPagefile's checksums (doc/page_format.md): damage found, writes torn
// or cut short, sector checksums, mapped blocks, old formats, and reads that
// meet another descriptor's write.
#include "store/local_pagefile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <fmt/format.h>

#include "core/page_checksum.h"
#include "store/disk_faults.h"
#include "tests/store/local_pagefile_util.h"
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using namespace pagefile::test;

TEST_CASE("a page damaged on disk is kCorruption naming it, never data; its neighbours still read") {
  TempDir dir;
  // Read with pread, and copied from a mapping (OpenSpec::map_reads).
  for (bool mapped : {false, true}) {
    INFO("mapped reads: " << mapped);
    auto path = dir / (mapped ? "mapped" : "f");
    auto spec = create_spec(4096);
    spec.map_reads = mapped;
    auto f = must_open(path, spec);
    for (int64_t p = 0; p < 4; ++p) CHECK_OK(f->write_page(p, page_pattern(4096, p)));
    CHECK_OK(f->size_pages());  // (the length a mapping's copies may reach)
    auto byte = raw_read(path, f->page_offset(2) + 17, 1);
    byte[0] ^= std::byte{0x01};  // one bit
    raw_write(path, f->page_offset(2) + 17, byte);
    std::vector<std::byte> buf(4096);
    auto bad = f->read_page(2, buf);
    CHECK_CODE(bad, Code::kCorruption);
    CHECK(bad.status().to_string().find("page 2 fails its checksum on disk") != std::string::npos);
    for (int64_t p : {0, 1, 3}) {
      REQUIRE_OK(f->read_page(p, buf));
      CHECK(buf == page_pattern(4096, p));
    }
    // Written again, it is whole again.
    CHECK_OK(f->write_page(2, page_pattern(4096, 22)));
    REQUIRE_OK(f->read_page(2, buf));
    CHECK(buf == page_pattern(4096, 22));
  }
}

TEST_CASE("read_pages: pages read together with one read, each checked; a run ends at its group, the end, or a damaged page") {
  TempDir dir;
  auto path = dir / "f";
  constexpr uint32_t size = 512;
  constexpr int64_t g = LocalPagefile::kGroupPages;
  auto f = must_open(path, create_spec(size));
  for (int64_t p = 0; p <= g + 20; ++p) {
    if (p != 5) CHECK_OK(f->write_page(p, page_pattern(size, p)));  // page 5: a hole
  }
  auto expected = [&](int64_t p) { return p == 5 ? std::vector<std::byte>(size) : page_pattern(size, p); };
  // Checks `got` pages of `buf`, read from `first`.
  auto check_run = [&](const std::vector<std::byte>& buf, int64_t first, int64_t got) {
    for (int64_t i = 0; i < got; ++i) {
      CAPTURE(first + i);
      CHECK(std::equal(buf.begin() + i * size, buf.begin() + (i + 1) * size, expected(first + i).begin()));
    }
  };
  std::vector<std::byte> buf(16 * size);
  auto run = f->read_pages(0, 8, buf);
  REQUIRE_OK(run);
  CHECK(*run == 8);
  check_run(buf, 0, 8);
  // Up to the end of the group: the checksum block lies between.
  run = f->read_pages(g - 3, 10, buf);
  REQUIRE_OK(run);
  CHECK(*run == 3);
  check_run(buf, g - 3, 3);
  run = f->read_pages(g, 10, buf);
  REQUIRE_OK(run);
  CHECK(*run == 10);
  check_run(buf, g, 10);
  // Up to the end of the file; none at it.
  run = f->read_pages(g + 15, 10, buf);
  REQUIRE_OK(run);
  CHECK(*run == 6);
  check_run(buf, g + 15, 6);
  run = f->read_pages(g + 21, 4, buf);
  REQUIRE_OK(run);
  CHECK(*run == 0);
  // A buffer too small is refused, whatever the count (no product wraps).
  CHECK_CODE(f->read_pages(0, 17, buf), Code::kInvalidArgument);
  CHECK_CODE(f->read_pages(0, (int64_t{1} << 55) + 1, buf), Code::kInvalidArgument);
  CHECK_CODE(f->read_pages(0, 0, buf), Code::kInvalidArgument);

  // Another descriptor reads the pages, then this one writes one: the other
  // reads it new, its checksum read again.
  auto other = must_open(path, {});
  REQUIRE_OK(other->read_pages(0, 8, buf));
  CHECK_OK(f->write_page(3, page_pattern(size, 333)));
  run = other->read_pages(0, 8, buf);
  REQUIRE_OK(run);
  CHECK(*run == 8);
  CHECK(std::equal(buf.begin() + 3 * size, buf.begin() + 4 * size, page_pattern(size, 333).begin()));
  CHECK_OK(f->write_page(3, page_pattern(size, 3)));

  // A damaged page ends a run before it; a run from it is its error.
  auto byte = raw_read(path, f->page_offset(10) + 17, 1);
  byte[0] ^= std::byte{0x01};
  raw_write(path, f->page_offset(10) + 17, byte);
  for (auto* reader : {f.get(), other.get()}) {
    run = reader->read_pages(6, 8, buf);
    REQUIRE_OK(run);
    CHECK(*run == 4);
    check_run(buf, 6, 4);
    auto bad = reader->read_pages(10, 8, buf);
    CHECK_CODE(bad, Code::kCorruption);
    CHECK(bad.status().to_string().find("page 10 fails its checksum on disk") != std::string::npos);
  }
  // A sole writer's (a server's share) reads each page under its stripe:
  // the same answers.
  f.reset();
  other.reset();
  LocalPagefile::OpenSpec sole;
  sole.sole_writer = true;
  auto share = must_open(path, sole);
  run = share->read_pages(6, 8, buf);
  REQUIRE_OK(run);
  CHECK(*run == 4);
  check_run(buf, 6, 4);
  CHECK_CODE(share->read_pages(10, 8, buf), Code::kCorruption);
  run = share->read_pages(g + 15, 10, buf);
  REQUIRE_OK(run);
  CHECK(*run == 6);
  check_run(buf, g + 15, 6);
}

TEST_CASE("a damaged checksum, or data where none was written, is kCorruption too") {
  NewFile new_file(1024);
  auto& [dir, path, f] = new_file;
  CHECK_OK(f->write_page(0, page_pattern(1024, 0)));
  CHECK_OK(f->write_page(5, page_pattern(1024, 5)));
  // The checksum block of the first group follows the header.
  raw_write(path, 4096, std::vector<std::byte>(8, std::byte{0x33}));
  std::vector<std::byte> buf(1024);
  // The descriptor that wrote the page keeps its checksum, which the bytes
  // still match: they are the page as written. A check against the disk
  // (scrub's) and any other descriptor find the damage.
  REQUIRE_OK(f->read_page(0, buf));
  CHECK(buf == page_pattern(1024, 0));
  CHECK_CODE(f->verify_page(0, buf), Code::kCorruption);
  CHECK_CODE(must_open(path, LocalPagefile::OpenSpec{})->read_page(0, buf), Code::kCorruption);
  // Page 3 is a hole (no checksum recorded): bytes there are not a page.
  raw_write(path, f->page_offset(3), page_pattern(1024, 3));
  CHECK_CODE(f->read_page(3, buf), Code::kCorruption);
  REQUIRE_OK(f->read_page(4, buf));
  CHECK(buf == std::vector<std::byte>(1024));
}

TEST_CASE("a write cut short between its checksum and its page leaves the old page readable") {
  NewFile new_file(4096);
  auto& [dir, path, f] = new_file;
  CHECK_OK(f->write_page(1, page_pattern(4096, 100)));
  const auto first = raw_read(path, f->page_offset(1), 4096);
  CHECK_OK(f->write_page(1, page_pattern(4096, 200)));
  // The crash: the new checksum is recorded, the page still holds the old
  // bytes. The old page is what reads.
  raw_write(path, f->page_offset(1), first);
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(f->read_page(1, buf));
  CHECK(buf == page_pattern(4096, 100));
  // Only the one write before: two writes back is not a page any more.
  CHECK_OK(f->write_page(1, page_pattern(4096, 300)));
  raw_write(path, f->page_offset(1), first);
  CHECK_CODE(f->read_page(1, buf), Code::kCorruption);
  // A first write cut short leaves the hole it was.
  CHECK_OK(f->write_page(7, page_pattern(4096, 7)));
  raw_write(path, f->page_offset(7), std::vector<std::byte>(4096));
  REQUIRE_OK(f->read_page(7, buf));
  CHECK(buf == std::vector<std::byte>(4096));
}

namespace {

// Whether each 4 KiB sector of `page` is that sector of `a` or of `b`.
bool sectors_of(const std::vector<std::byte>& page, const std::vector<std::byte>& a,
                const std::vector<std::byte>& b) {
  for (size_t at = 0; at < page.size(); at += kChecksumSectorSize) {
    auto sector = [&](const std::vector<std::byte>& v) { return std::memcmp(page.data() + at, v.data() + at, kChecksumSectorSize) == 0; };
    if (!sector(a) && !sector(b)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("sector checksums: a write torn between sectors leaves each sector old or new, and reads") {
  constexpr uint32_t kPage = 16384;
  for (bool sole_writer : {false, true}) {
    CAPTURE(sole_writer);
    TempDir dir;
    auto spec = create_spec(kPage);
    spec.sector_checksums = true;
    spec.sole_writer = sole_writer;
    auto f = must_open(dir / "f", spec);
    CHECK(f->checksum_unit() == kChecksumSectorSize);
    const auto a = page_pattern(kPage, 1), b = page_pattern(kPage, 2), c = page_pattern(kPage, 3);
    for (int64_t p = 0; p < 3; ++p) REQUIRE_OK(f->write_page(p, a));
    std::vector<std::byte> buf(kPage);

    // One torn write (the entries are written whole, the page's first half).
    DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kTornWrite);
    CHECK_CODE(f->write_page(0, b), Code::kIOError);
    DiskFaults::disarm();
    REQUIRE_OK(f->read_page(0, buf));
    CHECK(sectors_of(buf, a, b));
    CHECK(buf != a);
    CHECK(buf != b);

    // A disk that tears every write from here on: the entries' writes too.
    // Each sector keeps the bytes of one of the writes it was given.
    DiskFaults::arm(DiskOp::kWrite, 1, DiskFault::kTornWrite, /*sticky=*/true);
    CHECK_CODE(f->write_page(0, c), Code::kIOError);
    CHECK_CODE(f->write_page(0, a), Code::kIOError);
    CHECK_CODE(f->write_page(1, b), Code::kIOError);
    DiskFaults::disarm();
    REQUIRE_OK(f->read_page(0, buf));
    CHECK(sectors_of(buf, a, b));
    REQUIRE_OK(f->read_page(1, buf));
    CHECK(sectors_of(buf, a, b));
    // Scrub's check agrees, and a write that gets through makes it whole.
    CHECK_OK(f->verify_page(0, buf));
    REQUIRE_OK(f->write_page(0, c));
    REQUIRE_OK(f->read_page(0, buf));
    CHECK(buf == c);

    // A damaged byte in one sector is still kCorruption, naming the sector.
    auto byte = raw_read(dir / "f", f->page_offset(2) + 2 * kChecksumSectorSize + 5, 1);
    byte[0] ^= std::byte{0x40};
    raw_write(dir / "f", f->page_offset(2) + 2 * kChecksumSectorSize + 5, byte);
    auto bad = f->verify_page(2, buf);
    CHECK_CODE(bad, Code::kCorruption);
    CHECK(bad.to_string().find("sector 2 of 4") != std::string::npos);
  }
}

TEST_CASE("without sector checksums a torn page is kCorruption, never half old, half new") {
  constexpr uint32_t kPage = 16384;
  TempDir dir;
  auto f = must_open(dir / "f", create_spec(kPage));
  CHECK(f->checksum_unit() == kPage);
  REQUIRE_OK(f->write_page(0, page_pattern(kPage, 1)));
  DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kTornWrite);
  CHECK_CODE(f->write_page(0, page_pattern(kPage, 2)), Code::kIOError);
  DiskFaults::disarm();
  std::vector<std::byte> buf(kPage);
  CHECK_CODE(f->read_page(0, buf), Code::kCorruption);
}

TEST_CASE("sector checksums are format version 5, only for pages larger than a sector") {
  TempDir dir;
  for (uint32_t page_size : {1024u, 4096u, 8192u, 65536u}) {
    CAPTURE(page_size);
    auto spec = create_spec(page_size);
    spec.sector_checksums = true;
    auto path = dir / fmt::format("f{}", page_size);
    auto f = must_open(path, spec);
    auto header = decode_header(raw_read(path, 0, kHeaderSize), "f");
    REQUIRE_OK(header);
    CHECK(header->version == (page_size > kChecksumSectorSize ? 5u : 4u));
    CHECK(f->checksum_unit() == std::min(page_size, kChecksumSectorSize));
    // Pages across groups (256 pages each) are where the layout says.
    for (int64_t p : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{600}}) {
      REQUIRE_OK(f->write_page(p, page_pattern(page_size, p)));
    }
    f.reset();
    f = must_open(path, spec);
    CHECK(*f->size_pages() == 601);
    std::vector<std::byte> buf(page_size);
    for (int64_t p : {int64_t{0}, int64_t{255}, int64_t{256}, int64_t{600}}) {
      REQUIRE_OK(f->read_page(p, buf));
      CHECK(buf == page_pattern(page_size, p));
      CHECK(raw_read(path, f->page_offset(p), page_size) == page_pattern(page_size, p));
    }
    REQUIRE_OK(f->read_page(300, buf));
    CHECK(buf == std::vector<std::byte>(page_size));
    REQUIRE_OK(f->truncate(257));
    CHECK(*f->size_pages() == 257);
  }
}

TEST_CASE("pages across checksum groups; truncate clears the checksums of pages it cuts") {
  NewFile new_file(512);
  auto& [dir, path, f] = new_file;
  constexpr int64_t g = LocalPagefile::kGroupPages;
  const std::vector<int64_t> pages = {0, g - 1, g, 2 * g - 1, 2 * g, 2 * g + 190};
  for (int64_t p : pages) CHECK_OK(f->write_page(p, page_pattern(512, p)));
  CHECK(*f->size_pages() == 2 * g + 191);
  CHECK(f->page_offset(g) == f->page_offset(g - 1) + 512 + 4096);  // a checksum block between
  std::vector<std::byte> buf(512);
  for (int64_t p : pages) {
    REQUIRE_OK(f->read_page(p, buf));
    CHECK(buf == page_pattern(512, p));
  }
  CHECK_OK(f->truncate(g + 10));
  CHECK(*f->size_pages() == g + 10);
  REQUIRE_OK(f->read_page(g, buf));
  CHECK(buf == page_pattern(512, g));
  // Grown again past them, the cut pages are holes, not old checksums.
  CHECK_OK(f->write_page(2 * g + 5, page_pattern(512, 1)));
  for (int64_t p : {g + 10, 2 * g - 1, 2 * g, 2 * g + 4}) {
    auto r = f->read_page(p, buf);
    INFO("page " << p << ": " << r.status().to_string());
    REQUIRE_OK(r);
    CHECK(buf == std::vector<std::byte>(512));
  }
  // And a file whose size ends inside a checksum block has no page there.
  CHECK_OK(f->truncate(2 * g));
  CHECK_OK(f->sync());
  ::truncate(path.c_str(), f->page_offset(2 * g) - 100);
  CHECK(*f->size_pages() == 2 * g);
}

TEST_CASE("a truncate that fails leaves every page it would have cut readable; once it succeeds they are holes") {
  TempDir dir;
  constexpr int64_t g = LocalPagefile::kGroupPages;
  for (bool sole_writer : {false, true}) {
    for (int64_t to : {int64_t{0}, int64_t{5}, g + 3}) {
      CAPTURE(sole_writer);
      CAPTURE(to);
      auto path = dir / fmt::format("f-{}-{}", sole_writer, to);
      auto spec = create_spec(512);
      spec.sole_writer = sole_writer;
      auto f = must_open(path, spec);
      const int64_t pages = g + 20;
      for (int64_t p = 0; p < pages; ++p) REQUIRE_OK(f->write_page(p, page_pattern(512, p)));
      DiskFaults::arm(DiskOp::kTruncate, 1, DiskFault::kEio);
      CHECK(f->truncate(to).is(Code::kIOError));
      DiskFaults::disarm();
      std::vector<std::byte> buf(512);
      // Read by this descriptor, and by another that kept nothing.
      auto other = must_open(path, LocalPagefile::OpenSpec{});
      for (LocalPagefile* reader : {f.get(), other.get()}) {
        for (int64_t p = 0; p < pages; ++p) {
          auto r = reader->read_page(p, buf);
          INFO("page " << p << ": " << r.status().to_string());
          REQUIRE_OK(r);
          CHECK(buf == page_pattern(512, p));
        }
      }
      other.reset();
      if (!sole_writer) {
        // A write of a page the failed truncate left, failing after its
        // entries (the second disk write), leaves the page as it was.
        DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kEio);
        CHECK(f->write_page(to + 1, page_pattern(512, 77)).is(Code::kIOError));
        DiskFaults::disarm();
        auto r = f->read_page(to + 1, buf);
        INFO(r.status().to_string());
        REQUIRE_OK(r);
        CHECK(buf == page_pattern(512, to + 1));
        REQUIRE_OK(f->write_page(to + 1, page_pattern(512, to + 1)));
      }
      // Written again after the failure, a page is its new self.
      REQUIRE_OK(f->write_page(to, page_pattern(512, 7)));
      REQUIRE_OK(f->read_page(to, buf));
      CHECK(buf == page_pattern(512, 7));
      REQUIRE_OK(f->truncate(to));
      CHECK(*f->size_pages() == to);
      // Grown again past them, the cut pages are holes.
      REQUIRE_OK(f->write_page(pages, page_pattern(512, pages)));
      for (int64_t p = to; p < pages; ++p) {
        auto r = f->read_page(p, buf);
        INFO("page " << p << ": " << r.status().to_string());
        REQUIRE_OK(r);
        CHECK(buf == std::vector<std::byte>(512));
      }
    }
  }
}

TEST_CASE("a sole writer's checksums (its blocks mapped) are on disk for every other reader") {
  constexpr int64_t g = LocalPagefile::kGroupPages;
  for (uint32_t page_size : {512u, 4096u, 16384u}) {
    CAPTURE(page_size);
    TempDir dir;
    auto path = dir / "f";
    auto spec = create_spec(page_size);
    spec.sole_writer = true;
    spec.sector_checksums = true;
    auto f = must_open(path, spec);
    const std::vector<int64_t> pages = {0, 1, g - 1, g, 3 * g + 7};
    for (int64_t p : pages) REQUIRE_OK(f->write_page(p, page_pattern(page_size, p)));
    REQUIRE_OK(f->write_page(1, page_pattern(page_size, 1001)));  // an overwrite
    // Cut back into group 1 (its block stays), then past group 3 again.
    REQUIRE_OK(f->truncate(g + 1));
    REQUIRE_OK(f->write_page(4 * g + 1, page_pattern(page_size, 4 * g + 1)));
    REQUIRE_OK(f->sync());
    // Another object of the file (a server started again) reads the
    // entries from disk: every page verifies, holes included.
    LocalPagefile::OpenSpec reader;
    reader.read_only = true;
    auto other = must_open(path, reader);
    std::vector<std::byte> buf(page_size);
    for (int64_t p : {int64_t{0}, g - 1, g, 4 * g + 1}) {
      REQUIRE_OK(other->verify_page(p, buf));
      CHECK(buf == page_pattern(page_size, p));
    }
    REQUIRE_OK(other->verify_page(1, buf));
    CHECK(buf == page_pattern(page_size, 1001));
    for (int64_t p : {int64_t{2}, g + 1, 3 * g + 7, 4 * g}) {
      REQUIRE_OK(other->verify_page(p, buf));
      CHECK(buf == std::vector<std::byte>(page_size));
    }
    // And a damaged page is found by it.
    auto byte = raw_read(path, other->page_offset(g) + 3, 1);
    byte[0] ^= std::byte{0x10};
    raw_write(path, other->page_offset(g) + 3, byte);
    CHECK_CODE(other->verify_page(g, buf), Code::kCorruption);
    // A full truncate unmaps every block; writing starts again.
    REQUIRE_OK(f->truncate(0));
    REQUIRE_OK(f->write_page(2 * g, page_pattern(page_size, 5)));
    REQUIRE_OK(other->verify_page(2 * g, buf));
    CHECK(buf == page_pattern(page_size, 5));
  }
}

TEST_CASE("a sole writer's mapped block cut behind its back: the store's fault is caught, the entry written") {
  constexpr int64_t g = LocalPagefile::kGroupPages;
  TempDir dir;
  auto path = dir / "f";
  auto spec = create_spec(4096);
  spec.sole_writer = true;  // (maps a block at its first write)
  auto f = must_open(path, spec);
  for (int64_t p : {int64_t{0}, g, g + 1}) REQUIRE_OK(f->write_page(p, page_pattern(4096, p)));
  // Another descriptor cuts the file before group 1's block, which a sole
  // writer's contract forbids: its mapping of the block is not told.
  LocalPagefile::OpenSpec plain;
  auto other = must_open(path, plain);
  REQUIRE_OK(other->truncate(10));
  // The store into the block faults (past the end): caught, the block let
  // go, the entries written with pwrite.
  REQUIRE_OK(f->write_page(g + 2, page_pattern(4096, 7)));
  REQUIRE_OK(f->write_page(g + 3, page_pattern(4096, 8)));  // (mapped again, whole)
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(other->verify_page(g + 2, buf));
  CHECK(buf == page_pattern(4096, 7));
  REQUIRE_OK(other->verify_page(g + 3, buf));
  CHECK(buf == page_pattern(4096, 8));
  REQUIRE_OK(other->verify_page(0, buf));
  CHECK(buf == page_pattern(4096, 0));
}

TEST_CASE("a sole writer's truncates and writes at once (its blocks mapped): no fault") {
  constexpr int64_t g = LocalPagefile::kGroupPages;
  TempDir dir;
  auto spec = create_spec(4096);
  spec.sole_writer = true;
  auto f = must_open(dir / "f", spec);
  std::atomic<bool> done{false};
  std::thread cutter([&] {
    for (int i = 0; i < 300; ++i) CHECK_OK(f->truncate(i % 2 == 0 ? 0 : g + 1));
    done = true;
  });
  for (int64_t p = 0; !done; p = (p + 97) % (4 * g)) CHECK_OK(f->write_page(p, page_pattern(4096, p)));
  cutter.join();
  // (Which pages a write racing a truncate leaves is the callers' to
  // order; the file must only go on working.)
  REQUIRE_OK(f->truncate(0));
  std::vector<std::byte> buf(4096);
  for (int64_t p : {int64_t{0}, g + 3, 3 * g}) {
    REQUIRE_OK(f->write_page(p, page_pattern(4096, p)));
    REQUIRE_OK(f->read_page(p, buf));
    CHECK(buf == page_pattern(4096, p));
  }
}

TEST_CASE("a sole writer's read racing its truncate keeps no checksum of a page the truncate cut") {
  // A read of page 5 that had read its entry before the cut, and kept its
  // checksum after it, left a sole writer taking that checksum as page 5's
  // previous one once the page came back as a hole: a write of it that
  // failed then left a hole matching neither entry (kCorruption where zeros
  // were due; before the fix within the first rounds, most often the first).
  for (int round = 0; round < 100; ++round) {
    CAPTURE(round);
    TempDir dir;
    auto spec = create_spec(4096);
    spec.sole_writer = true;
    auto f = must_open(dir / "f", spec);
    for (int64_t p = 0; p < 10; ++p) REQUIRE_OK(f->write_page(p, page_pattern(4096, p)));
    std::atomic<bool> stop{false};
    std::thread reader([&] {
      std::vector<std::byte> buf(4096);
      for (int i = 0; i < 100000 && !stop.load(); ++i) (void)f->read_page(5, buf);
    });
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    REQUIRE_OK(f->truncate(3));
    stop = true;
    reader.join();
    REQUIRE_OK(f->write_page(7, page_pattern(4096, 77)));  // pages 3 to 6 holes
    DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kEio);   // page 5's bytes, after its entry
    CHECK_FALSE(f->write_page(5, page_pattern(4096, 55)).is_ok());
    DiskFaults::disarm();
    std::vector<std::byte> buf(4096);
    REQUIRE_OK(f->verify_page(5, buf));
    CHECK(buf == std::vector<std::byte>(4096));
  }
}

TEST_CASE("a file of format version 1 (no checksums) is read and written unchecked") {
  TempDir dir;
  auto path = dir / "v1";
  FileHeader header;
  header.version = kUncheckedFormatVersion;
  header.page_size = 1024;
  auto bytes = encode_header(header);
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    for (int64_t p = 0; p < 3; ++p) {
      auto page = page_pattern(1024, p);
      out.write(reinterpret_cast<const char*>(page.data()), page.size());
    }
  }
  auto f = must_open(path, {});
  CHECK(!f->checked());
  CHECK(*f->size_pages() == 3);
  std::vector<std::byte> buf(1024);
  for (int64_t p = 0; p < 3; ++p) {
    REQUIRE_OK(f->read_page(p, buf));
    CHECK(buf == page_pattern(1024, p));
  }
  CHECK_OK(f->write_page(3, page_pattern(1024, 3)));
  CHECK(std::filesystem::file_size(path) == 4096 + 4 * 1024);
}

TEST_CASE("checksums off (for measuring) writes none: such a page fails once read with them on") {
  TempDir dir;
  auto path = dir / "f";
  auto spec = create_spec(4096);
  spec.checksums = false;
  {
    auto off = must_open(path, spec);
    CHECK(!off->checked());
    CHECK_OK(off->write_page(0, page_pattern(4096, 0)));
    std::vector<std::byte> buf(4096);
    REQUIRE_OK(off->read_page(0, buf));
  }
  auto on = must_open(path, {});
  std::vector<std::byte> buf(4096);
  CHECK_CODE(on->read_page(0, buf), Code::kCorruption);
}

TEST_CASE("read_page_now: a page in the page cache is read and checked at once, others are left to wait") {
  NewFile new_file(4096);
  auto& [dir, path, f] = new_file;
  for (int64_t p = 0; p < 4; ++p) CHECK_OK(f->write_page(p, page_pattern(4096, p)));
  CHECK_OK(f->sync());
  // Out of the page cache (where the file system lets clean pages go), the
  // read is declined, or done right where it cannot tell.
  {
    int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
  std::vector<std::byte> buf(4096);
  if (auto now = f->read_page_now(1, buf)) {
    REQUIRE_OK(*now);
    CHECK(buf == page_pattern(4096, 1));
  }
  REQUIRE_OK(f->read_page(1, buf));
  auto now = f->read_page_now(1, buf);
  REQUIRE(now.has_value());
  REQUIRE_OK(*now);
  CHECK(**now == PageRead::kData);
  CHECK(buf == page_pattern(4096, 1));
  auto past = f->read_page_now(9, buf);
  REQUIRE(past.has_value());
  REQUIRE_OK(*past);
  CHECK(**past == PageRead::kBeyondEnd);
  // A damaged page is its error at once, as read_page says it.
  auto byte = raw_read(path, f->page_offset(2) + 5, 1);
  byte[0] ^= std::byte{0x10};
  raw_write(path, f->page_offset(2) + 5, byte);
  auto bad = f->read_page_now(2, buf);
  REQUIRE(bad.has_value());
  CHECK_CODE(*bad, Code::kCorruption);
}

TEST_CASE("a page read while another descriptor writes it is read again until page and checksum agree") {
  // Another process writing the page (two objects here: no stripe is
  // shared, as between processes) writes the checksum entry, then the
  // page; a reader can meet one write's entry with another's bytes, or
  // bytes half copied. Each read must still be one whole version.
  TempDir dir;
  auto path = dir / "f";
  auto writer = must_open(path, create_spec(4096));
  CHECK_OK(writer->write_page(0, page_pattern(4096, 0)));
  auto reader = must_open(path, LocalPagefile::OpenSpec{});
  std::atomic<bool> stop{false};
  std::atomic<int> write_errors{0};
  std::thread writes([&] {
    for (int i = 1; i <= 200000 && !stop.load(); ++i) {
      if (!writer->write_page(0, page_pattern(4096, i % 4))) ++write_errors;
    }
  });
  std::vector<std::byte> buf(4096);
  int reads = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(700);
  while (std::chrono::steady_clock::now() < deadline && reads < 200000) {
    auto r = reader->read_page(0, buf);
    REQUIRE_OK(r);
    bool whole = false;
    for (int v = 0; v < 4 && !whole; ++v) whole = buf == page_pattern(4096, v);
    REQUIRE(whole);
    ++reads;
  }
  stop = true;
  writes.join();
  CHECK(write_errors.load() == 0);
  CHECK(reads > 100);
}

TEST_CASE("write_pages: pages written together, each checked; a run crosses a checksum block; a failed one leaves each page old or new") {
  constexpr uint32_t kPage = 4096;
  constexpr int64_t g = LocalPagefile::kGroupPages;
  for (bool checksums : {true, false}) {
    CAPTURE(checksums);
    TempDir dir;
    auto path = dir / "f";
    auto spec = create_spec(kPage);
    spec.checksums = checksums;
    auto f = must_open(path, spec);
    auto pages_of = [&](int64_t first, int64_t count, uint64_t seed) {
      std::vector<std::byte> out;
      for (int64_t p = first; p < first + count; ++p) {
        auto one = page_pattern(kPage, p, seed);
        out.insert(out.end(), one.begin(), one.end());
      }
      return out;
    };
    // Across a group's end: the checksum block between is left as it is.
    REQUIRE_OK(f->write_pages(g - 2, pages_of(g - 2, 4, 1)));
    CHECK(*f->size_pages() == g + 2);
    auto other = must_open(path, LocalPagefile::OpenSpec{});  // nothing kept
    std::vector<std::byte> buf(kPage);
    for (int64_t p = g - 2; p < g + 2; ++p) {
      CAPTURE(p);
      REQUIRE_OK(f->read_page(p, buf));
      CHECK(buf == page_pattern(kPage, p, 1));
      if (!checksums) continue;
      REQUIRE_OK(other->read_page(p, buf));
      CHECK(buf == page_pattern(kPage, p, 1));
    }
    CHECK_CODE(f->write_pages(0, std::vector<std::byte>(kPage + 512)), Code::kInvalidArgument);
    if (!checksums) continue;

    // Written over, the disk tearing the pages' write in its middle: the
    // first two pages new, the last two old, each reads.
    REQUIRE_OK(f->write_pages(10, pages_of(10, 4, 1)));
    DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kTornWrite);  // after the four entries, one write
    CHECK_CODE(f->write_pages(10, pages_of(10, 4, 2)), Code::kIOError);
    CHECK(DiskFaults::fired());
    DiskFaults::disarm();
    // Pages 10 to 13 read, through both descriptors, as written with seed_of(page).
    auto reads_as = [&](auto seed_of) {
      for (auto* d : {f.get(), other.get()}) {
        for (int64_t p = 10; p < 14; ++p) {
          CAPTURE(p);
          REQUIRE_OK(d->read_page(p, buf));
          CHECK(buf == page_pattern(kPage, p, seed_of(p)));
        }
      }
    };
    reads_as([](int64_t p) { return p < 12 ? 2 : 1; });
    // Entries that cannot be written (the run's entries are one write): no
    // page's bytes are, each reads old. Written in two calls (a short
    // write): the run is written whole.
    for (DiskFault fault : {DiskFault::kEio, DiskFault::kShortWrite}) {
      DiskFaults::arm(DiskOp::kWrite, 1, fault);
      if (fault == DiskFault::kEio) {
        CHECK_CODE(f->write_pages(10, pages_of(10, 4, 3)), Code::kIOError);
      } else {
        // (A short write is carried on by the caller: the run is written.)
        REQUIRE_OK(f->write_pages(10, pages_of(10, 4, 2)));
      }
      CHECK(DiskFaults::fired());
      DiskFaults::disarm();
      reads_as([&](int64_t p) { return p < 12 || fault == DiskFault::kShortWrite ? 2 : 1; });
    }
    // And once the disk is well, the same pages are written again.
    REQUIRE_OK(f->write_pages(10, pages_of(10, 4, 4)));
    for (int64_t p = 10; p < 14; ++p) {
      REQUIRE_OK(other->read_page(p, buf));
      CHECK(buf == page_pattern(kPage, p, 4));
    }
  }
}
