// LocalPagefile's locks: SQLite's lock levels on the header's bytes, and
// what holding RESERVED (or exclude_other_writers) lets a writer skip.
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

namespace {

// The lock levels' bytes of `path` as another process sees them: each of
// 2048 to 2050 as "-" (free), "r" (read-locked) or "w" (write-locked).
std::string level_bytes(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  std::string seen;
  for (off_t at = 2048; at <= 2050; ++at) {
    struct flock fl {};
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = at;
    fl.l_len = 1;
    REQUIRE(::fcntl(fd, F_OFD_GETLK, &fl) == 0);
    seen += fl.l_type == F_UNLCK ? '-' : fl.l_type == F_RDLCK ? 'r' : 'w';
  }
  ::close(fd);
  return seen;
}

}  // namespace

TEST_CASE("SQLite's lock levels: os_unix.c's byte order in files of version 2 and 3 (as builds before version 4 lock them), SHARED beside PENDING from 4") {
  // A build that reads at most version 3 locks PENDING, RESERVED, SHARED at
  // 2048, 2049, 2050; it refuses a file of version 4, whose levels this
  // build locks at 2049, 2050, 2048. Each file is locked as every build
  // that opens it does.
  TempDir dir;
  struct Case {
    uint32_t version;
    uint32_t page_size;
    const char* shared;
    const char* reserved;
    const char* exclusive;
  };
  // (EXCLUSIVE holds all three.)
  for (const Case& c : {Case{2, 4096, "--r", "-wr", "www"}, Case{3, 8192, "--r", "-wr", "www"},
                        Case{4, 4096, "r--", "r-w", "www"}, Case{5, 8192, "r--", "r-w", "www"}}) {
    CAPTURE(c.version);
    auto path = dir / fmt::format("v{}", c.version);
    FileHeader header;
    header.version = c.version;
    header.page_size = c.page_size;
    auto bytes = encode_header(header);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    auto a = must_open(path, {});
    auto b = must_open(path, {});
    REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
    CHECK(level_bytes(path) == c.shared);
    REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
    CHECK(level_bytes(path) == c.reserved);
    REQUIRE_OK(b->set_lock_level(LockLevel::kShared));  // readers come during RESERVED
    CHECK_CODE(a->set_lock_level(LockLevel::kExclusive), Code::kBusy);  // left at PENDING
    CHECK_CODE(b->set_lock_level(LockLevel::kNone), Code::kOk);
    CHECK_CODE(b->set_lock_level(LockLevel::kShared), Code::kBusy);  // PENDING keeps new readers out
    REQUIRE_OK(a->set_lock_level(LockLevel::kExclusive));
    CHECK(level_bytes(path) == c.exclusive);
    REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
    CHECK(level_bytes(path) == c.shared);
    REQUIRE_OK(b->set_lock_level(LockLevel::kShared));
    REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
    REQUIRE_OK(b->set_lock_level(LockLevel::kNone));
    CHECK(level_bytes(path) == "---");
  }
  // A file this build makes is version 4 (5 with sector checksums), but
  // for those that never take lock levels, which builds before 4 still
  // read: a journal's or WAL's (a final page size) and a server's share.
  auto version_made = [&](const char* name, auto&& adjust) {
    auto spec = create_spec(8192);
    adjust(spec);
    must_open(dir / name, spec);
    return decode_header(raw_read(dir / name, 0, kHeaderSize), name)->version;
  };
  CHECK(version_made("db", [](auto&) {}) == kAdjacentLocksFormatVersion);
  CHECK(version_made("db-sectors", [](auto& s) { s.sector_checksums = true; }) == kAdjacentLocksSectorFormatVersion);
  CHECK(version_made("journal", [](auto& s) {
          s.page_size_final = true;
          s.sector_checksums = true;
        }) == kSectorChecksumFormatVersion);
  CHECK(version_made("wal", [](auto& s) { s.page_size_final = true; }) == kPageChecksumFormatVersion);
  CHECK(version_made("share", [](auto& s) { s.sole_writer = true; }) == kPageChecksumFormatVersion);
}

namespace {

// Two descriptors of one file: `a` made it and wrote pages 0 and 1.
struct TwoDescriptors {
  TempDir dir;
  std::filesystem::path path = dir / "f";
  std::unique_ptr<LocalPagefile> a = must_open(path, create_spec(4096));
  std::unique_ptr<LocalPagefile> b = must_open(path, LocalPagefile::OpenSpec{});
  TwoDescriptors() {
    CHECK_OK(a->write_page(0, page_pattern(4096, 0)));
    CHECK_OK(a->write_page(1, page_pattern(4096, 1)));
  }
};

// Takes RESERVED on `f` as SQLite does, by way of SHARED.
void take_reserved(LocalPagefile& f) {
  REQUIRE_OK(f.set_lock_level(LockLevel::kShared));
  REQUIRE_OK(f.set_lock_level(LockLevel::kReserved));
}

// `f`'s write of `page`, cut by a crash between its checksum entry and the
// page: the entry is the write's, the page's bytes are put back as they were.
Status write_entry_only(LocalPagefile& f, const std::filesystem::path& path, int64_t page,
                        const std::vector<std::byte>& data) {
  const auto before = raw_read(path, f.page_offset(page), data.size());
  Status s = f.write_page(page, data);
  raw_write(path, f.page_offset(page), before);
  return s;
}

// `f`'s write of `page` while every disk read fails (EIO): it fails when
// the write reads first (old checksums another writer may have changed),
// and succeeds when it reads nothing.
Status write_while_reads_fail(LocalPagefile& f, int64_t page, const std::vector<std::byte>& data) {
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  Status s = f.write_page(page, data);
  DiskFaults::disarm();
  return s;
}

// The page as `f` reads it checked against its entry on disk (verify_page),
// not against the checksums `f` keeps.
std::vector<std::byte> verified(LocalPagefile& f, int64_t page) {
  std::vector<std::byte> buf(f.page_size());
  REQUIRE_OK(f.verify_page(page, buf));
  return buf;
}

}  // namespace

TEST_CASE("holding RESERVED, a write reads no old checksum of a page past the end or read under the lock; a page another wrote before it is counted in") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  // The file grows by b's pages: a last saw 2.
  CHECK_OK(b->write_page(2, page_pattern(4096, 22)));
  CHECK_OK(b->write_page(3, page_pattern(4096, 33)));
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->read_page(2, buf));  // (read before RESERVED)
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
  // A page read before the lock may have been written since (in WAL mode
  // SHARED keeps no writer out): its old checksum is read (with its
  // group's, the first write of the group under the lock).
  CHECK_FALSE(write_while_reads_fail(*a, 2, page_pattern(4096, 222)).is_ok());
  // Page 3 is there: a counts the file, reads the page's old checksum and
  // keeps it beside the new one, so a crash between the entry and the
  // page (the old bytes put back) leaves b's page readable.
  CHECK_OK(write_entry_only(*a, path, 3, page_pattern(4096, 300)));
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(verified(*c, 3) == page_pattern(4096, 33));
  // A page read (and checked) under the lock: its bytes' checksum is known,
  // and kept beside the new one.
  REQUIRE_OK(a->read_page(1, buf));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_OK(write_entry_only(*a, path, 1, page_pattern(4096, 111)));
  // Past the end: nothing is read.
  CHECK_OK(a->write_page(4, page_pattern(4096, 44)));
  CHECK_OK(a->write_page(6, page_pattern(4096, 66)));
  DiskFaults::disarm();
  CHECK(verified(*c, 1) == page_pattern(4096, 1));
  // Below RESERVED another descriptor may write: a write past the end, or
  // of a page read under the lock, reads its entries again.
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  CHECK_FALSE(write_while_reads_fail(*a, 8, page_pattern(4096, 88)).is_ok());
  CHECK_FALSE(write_while_reads_fail(*a, 1, page_pattern(4096, 11)).is_ok());
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  for (int64_t page : {4, 6}) CHECK(verified(*c, page) == page_pattern(4096, static_cast<int>(page) * 11));
  CHECK(verified(*c, 5) == std::vector<std::byte>(4096));  // (a hole)
}

TEST_CASE("holding RESERVED, the writes of one group's pages read its checksum block once; each keeps the old checksum its entry had") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  for (int64_t page = 2; page < 300; ++page) CHECK_OK(b->write_page(page, page_pattern(4096, static_cast<int>(page))));
  take_reserved(*a);
  // The first write of group 0 reads the block (and counts the file's
  // end); the others read nothing.
  CHECK_OK(a->write_page(5, page_pattern(4096, 500)));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  for (int64_t page : {3, 4, 9, 200, 255}) {
    CAPTURE(page);
    CHECK_OK(write_entry_only(*a, path, page, page_pattern(4096, static_cast<int>(page) * 100)));
  }
  // Group 1 has a block of its own.
  CHECK_FALSE(a->write_page(256, page_pattern(4096, 25600)).is_ok());
  DiskFaults::disarm();
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  // Cut between entry and page, each still matches the old checksum its
  // entry keeps (the block's).
  for (int64_t page : {3, 4, 9, 200, 255}) {
    CAPTURE(page);
    CHECK(verified(*c, page) == page_pattern(4096, static_cast<int>(page)));
  }
  CHECK(verified(*c, 5) == page_pattern(4096, 500));
  // Below RESERVED another descriptor may write: each write reads its own.
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  CHECK_FALSE(write_while_reads_fail(*a, 6, page_pattern(4096, 600)).is_ok());
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
}

TEST_CASE("holding RESERVED, pages read in more groups than have arrays of notes are each written reading no old checksum") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  // A page in each of 40 groups: the notes of the first 32 lie in arrays of
  // their groups', the others' one by one (LocalPagefile::span_notes_).
  std::vector<int64_t> pages;
  for (int64_t group = 0; group < 40; ++group) pages.push_back(group * 256 + 7);
  for (int64_t page : pages) CHECK_OK(b->write_page(page, page_pattern(4096, static_cast<int>(page))));
  std::vector<std::byte> buf(4096);
  take_reserved(*a);
  for (int64_t page : pages) REQUIRE_OK(a->read_page(page, buf));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  for (int64_t page : pages) {
    CAPTURE(page);
    CHECK_OK(write_entry_only(*a, path, page, page_pattern(4096, static_cast<int>(page) + 1)));
  }
  // A page of a group with notes that was not read under the lock reads its group's block.
  CHECK_FALSE(a->write_page(8, page_pattern(4096, 80)).is_ok());
  DiskFaults::disarm();
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  for (int64_t page : pages) {
    CAPTURE(page);
    CHECK(verified(*c, page) == page_pattern(4096, static_cast<int>(page)));
  }
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
}

TEST_CASE("holding RESERVED, a page of a group past the arrays of notes, written twice, keeps its first write's checksum as the old one") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  // Pages read in 32 groups take every array of notes: group 32's are kept
  // one by one, beside its block once a write reads that.
  std::vector<int64_t> pages;
  for (int64_t group = 0; group <= 32; ++group) pages.push_back(group * 256 + 7);
  for (int64_t page : pages) CHECK_OK(b->write_page(page, page_pattern(4096, static_cast<int>(page))));
  std::vector<std::byte> buf(4096);
  take_reserved(*a);
  for (size_t i = 0; i + 1 < pages.size(); ++i) REQUIRE_OK(a->read_page(pages[i], buf));
  const int64_t last = pages.back();
  CHECK_OK(a->write_page(last, page_pattern(4096, 1)));  // (reads its group's block)
  // The second write, cut between entry and page: the bytes of the first
  // still match the old checksum its entry keeps, not the block's older one.
  CHECK_OK(write_entry_only(*a, path, last, page_pattern(4096, 2)));
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(verified(*c, last) == page_pattern(4096, 1));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
}

TEST_CASE("holding RESERVED, a group's block read before a truncate says nothing of the pages it cut, grown back as holes") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  for (int64_t page = 2; page < 20; ++page) CHECK_OK(b->write_page(page, page_pattern(4096, static_cast<int>(page))));
  take_reserved(*a);
  CHECK_OK(a->write_page(2, page_pattern(4096, 200)));  // (reads group 0's block)
  REQUIRE_OK(a->truncate(5));
  CHECK_OK(a->write_page(19, page_pattern(4096, 1900)));  // (grows the file back: 5 to 18 are holes)
  // Page 10's old checksum is its hole's, not the one the block had: cut
  // between entry and page, it still reads, as zeros.
  CHECK_OK(write_entry_only(*a, path, 10, page_pattern(4096, 1000)));
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(verified(*c, 10) == std::vector<std::byte>(4096));
  CHECK(verified(*c, 2) == page_pattern(4096, 200));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
}

TEST_CASE("a refused EXCLUSIVE (left at PENDING, as in WAL mode with locking_mode=EXCLUSIVE) keeps no one out until granted") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  REQUIRE_OK(b->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  CHECK_CODE(a->set_lock_level(LockLevel::kExclusive), Code::kBusy);
  // b, at SHARED, may write (a WAL checkpoint): a notes nothing, counts nothing.
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(a->read_page(1, buf));
  CHECK_OK(b->write_page(1, page_pattern(4096, 10)));
  CHECK_OK(b->write_page(2, page_pattern(4096, 20)));
  CHECK_FALSE(write_while_reads_fail(*a, 1, page_pattern(4096, 100)).is_ok());
  CHECK_FALSE(write_while_reads_fail(*a, 2, page_pattern(4096, 200)).is_ok());
  REQUIRE_OK(b->set_lock_level(LockLevel::kNone));
  REQUIRE_OK(a->set_lock_level(LockLevel::kExclusive));
  // Granted: the end is counted (b's page 2 is in), and a page past it reads nothing.
  CHECK_OK(write_entry_only(*a, path, 2, page_pattern(4096, 201)));
  CHECK(verified(*b, 2) == page_pattern(4096, 20));
  CHECK_OK(write_while_reads_fail(*a, 3, page_pattern(4096, 3)));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
}

TEST_CASE("exclude_other_writers with sector checksums (a WAL's pages): a page read or written under the word is written reading no entry, its old sectors' checksums exact") {
  TempDir dir;
  const auto path = dir / "wal";
  LocalPagefile::OpenSpec sectors = create_spec(16384);
  sectors.sector_checksums = true;
  auto a = must_open(path, sectors);
  auto b = must_open(path, LocalPagefile::OpenSpec{});
  CHECK_OK(a->write_page(0, page_pattern(16384, 0)));
  CHECK_OK(a->write_page(1, page_pattern(16384, 1)));
  CHECK_OK(b->write_page(2, page_pattern(16384, 2)));
  a->exclude_other_writers(true);
  std::vector<std::byte> buf(16384);
  REQUIRE_OK(a->read_page(1, buf));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  // Read under the word, then written: its entries are written, the page
  // is not (a crash between them): each sector still matches its old checksum.
  CHECK_OK(write_entry_only(*a, path, 1, page_pattern(16384, 11)));
  // Written under the word, then written again, and past the end.
  CHECK_OK(a->write_page(3, page_pattern(16384, 3)));
  CHECK_OK(write_entry_only(*a, path, 3, page_pattern(16384, 33)));
  DiskFaults::disarm();
  // b's page 2, neither read nor written here under the word: its entries are read.
  CHECK_FALSE(write_while_reads_fail(*a, 2, page_pattern(16384, 22)).is_ok());
  a->exclude_other_writers(false);
  CHECK(verified(*b, 1) == page_pattern(16384, 1));
  CHECK(verified(*b, 3) == page_pattern(16384, 3));
  // The word taken back: what a read or wrote is no longer taken as the disk's.
  CHECK_FALSE(write_while_reads_fail(*a, 1, page_pattern(16384, 111)).is_ok());
  CHECK(verified(*b, 1) == page_pattern(16384, 1));
  // The word said twice with none taken back between (a caller that missed
  // one): the second starts afresh, so b's write meanwhile is looked for.
  a->exclude_other_writers(true);
  REQUIRE_OK(a->read_page(1, buf));
  CHECK_OK(b->write_page(1, page_pattern(16384, 12)));
  CHECK_OK(b->write_page(4, page_pattern(16384, 4)));
  a->exclude_other_writers(true);
  CHECK_FALSE(write_while_reads_fail(*a, 1, page_pattern(16384, 13)).is_ok());
  CHECK_FALSE(write_while_reads_fail(*a, 4, page_pattern(16384, 44)).is_ok());
  a->exclude_other_writers(false);
  CHECK(verified(*b, 1) == page_pattern(16384, 12));
  CHECK(verified(*b, 4) == page_pattern(16384, 4));
}

TEST_CASE("sector checksums under exclude_other_writers: a write whose changes lie in some sectors writes only those, where the disk's checksums show the others unchanged") {
  constexpr size_t kSector = kChecksumSectorSize;
  WalFile wal;
  const auto& path = wal.path;
  auto& a = wal.file;
  auto& b = wal.other;
  const auto old_page = page_pattern(kWalPage, 1);
  REQUIRE_OK(a->write_page(0, old_page));
  REQUIRE_OK(a->write_page(1, old_page));
  std::vector<std::byte> buf(kWalPage);
  // Damages sector `s` of page `page` behind the descriptors' backs.
  auto damage = [&](int64_t page, size_t s) {
    auto byte = raw_read(path, a->page_offset(page) + static_cast<off_t>(s * kSector + 9), 1);
    byte[0] ^= std::byte{0x20};
    raw_write(path, a->page_offset(page) + static_cast<off_t>(s * kSector + 9), byte);
  };

  a->exclude_other_writers(true);
  REQUIRE_OK(a->read_page(0, buf));
  // Bytes changed in sector 1 only: sectors 0, 2 and 3 are not written, so
  // sector 2, damaged since the read, stays damaged (and says so), where a
  // write of the whole page would have covered it.
  auto changed = old_page;
  for (size_t i = kSector + 100; i < kSector + 200; ++i) changed[i] = std::byte{0x5a};
  damage(0, 2);
  REQUIRE_OK(a->write_page(0, changed, kNoChecksum, ChangedBytes{kSector + 100, 100}));
  auto bad = b->read_page(0, buf);
  CHECK_CODE(bad, Code::kCorruption);
  CHECK(bad.status().to_string().find("sector 2 of 4") != std::string::npos);

  // A caller whose other bytes are not the disk's (here sector 3) gets the
  // whole page written: its bytes, all of them, are read back.
  REQUIRE_OK(a->write_page(1, old_page));
  auto wrong = changed;
  wrong[3 * kSector + 7] = std::byte{0x77};
  REQUIRE_OK(a->write_page(1, wrong, kNoChecksum, ChangedBytes{kSector + 100, 100}));
  REQUIRE_OK(b->read_page(1, buf));
  CHECK(buf == wrong);
  // Changes that span sectors 1 and 2, and a page never read nor written
  // under the word (its sums unknown: written whole).
  auto two = wrong;
  for (size_t i = 2 * kSector - 10; i < 2 * kSector + 10; ++i) two[i] = std::byte{0x11};
  REQUIRE_OK(a->write_page(1, two, kNoChecksum, ChangedBytes{2 * kSector - 10, 20}));
  REQUIRE_OK(b->read_page(1, buf));
  CHECK(buf == two);
  a->exclude_other_writers(false);
  REQUIRE_OK(b->write_page(2, old_page));
  a->exclude_other_writers(true);
  damage(2, 0);
  REQUIRE_OK(a->write_page(2, changed, kNoChecksum, ChangedBytes{kSector + 100, 100}));
  REQUIRE_OK(b->read_page(2, buf));
  CHECK(buf == changed);
  a->exclude_other_writers(false);

  // Without the word, the page is written whole whatever the caller says.
  REQUIRE_OK(a->read_page(1, buf));
  damage(1, 3);
  REQUIRE_OK(a->write_page(1, two, kNoChecksum, ChangedBytes{kSector + 100, 100}));
  REQUIRE_OK(b->read_page(1, buf));
  CHECK(buf == two);
}

TEST_CASE("a write in part under exclude_other_writers still mends every sector's entry: a sector matching only its previous checksum, torn later, still reads") {
  // Another descriptor's write cut after its entries leaves sectors that
  // match their previous checksum only. A write in part (its sector 1) must
  // still write every entry, each sector's pair then naming the bytes it
  // holds; else a later torn write of sector 2 leaves bytes that match
  // neither of its pair, and the whole page fails its check.
  WalFile wal;
  auto c = must_open(wal.path, LocalPagefile::OpenSpec{});  // the writer that goes away
  auto& a = wal.file;
  auto& b = wal.other;
  const auto& path = wal.path;
  constexpr size_t kSector = kChecksumSectorSize;
  const auto v0 = page_pattern(kWalPage, 1);
  REQUIRE_OK(c->write_page(0, v0));
  auto v1 = v0;  // sectors 2 and 3 changed; the write fails after its entries
  for (size_t i = 2 * kSector; i < 4 * kSector; ++i) v1[i] ^= std::byte{0x11};
  DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kEio);
  CHECK_FALSE(c->write_page(0, v1).is_ok());
  DiskFaults::disarm();
  c.reset();  // (its memory of the failure goes with it, as in a crash)
  a->exclude_other_writers(true);
  std::vector<std::byte> buf(kWalPage);
  REQUIRE_OK(a->read_page(0, buf));
  CHECK(buf == v0);
  auto v2 = v0;
  for (size_t i = kSector + 100; i < kSector + 200; ++i) v2[i] = std::byte{0x5a};
  REQUIRE_OK(a->write_page(0, v2, kNoChecksum, ChangedBytes{kSector + 100, 100}));
  a->exclude_other_writers(false);
  auto v3 = v2;  // sector 2 changed, by a write torn after its first half
  for (size_t i = 2 * kSector; i < 2 * kSector + 50; ++i) v3[i] = std::byte{0x33};
  DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kTornWrite);
  CHECK_FALSE(b->write_page(0, v3).is_ok());
  DiskFaults::disarm();
  b.reset();
  auto d = must_open(path, LocalPagefile::OpenSpec{});
  auto got = d->read_page(0, buf);
  INFO(got.status().to_string());
  CHECK(got.is_ok());
  CHECK(buf == v2);
}

TEST_CASE("blocks mapped while others were kept out, cut and grown back into the middle of one by another descriptor: the next store in it is on disk") {
  constexpr int64_t g = LocalPagefile::kGroupPages;
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const bool may_map = LocalPagefile::may_map(fd);
    ::close(fd);
    if (!may_map) {
      MESSAGE("skipped: the temporary directory's file system maps no checksum blocks");
      return;
    }
  }
  // a maps the checksum blocks of groups 0 and 1 while it keeps others out
  // (past its first few writes of the span: kEntryWritesBeforeMapping).
  const int64_t few = 40;
  a->exclude_other_writers(true);
  for (int64_t p = 2; p < few; ++p) REQUIRE_OK(a->write_page(p, page_pattern(4096, p)));
  REQUIRE_OK(a->write_page(g, page_pattern(4096, g)));
  CHECK(a->mapped_blocks() == 2);
  a->exclude_other_writers(false);
  // b cuts group 1 off, block and all, and appends its first page again,
  // cut after its entry (here the page's write fails; a crash does the
  // same): the file now ends inside group 1's block, 16 bytes into it.
  REQUIRE_OK(b->truncate(g));
  DiskFaults::arm(DiskOp::kWrite, 2, DiskFault::kEio);
  CHECK_FALSE(b->write_page(g, page_pattern(4096, 70)).is_ok());
  DiskFaults::disarm();
  const auto block_1 = static_cast<uintmax_t>(b->page_offset(g)) - 4096;
  REQUIRE(std::filesystem::file_size(path) == block_1 + 16);
  // a keeps others out again and appends the group's next page. A store
  // into its old mapping of the block would land past the file's end,
  // fault-free, and be zeroed when the page's write grows the file (on
  // ext4 since Linux 6.12, and XFS: a file system that keeps those bytes
  // would lose nothing either way).
  a->exclude_other_writers(true);
  for (int64_t p = 2; p < few; ++p) REQUIRE_OK(a->write_page(p, page_pattern(4096, p + 1)));
  REQUIRE_OK(a->write_page(g + 1, page_pattern(4096, g + 1)));
  CHECK(a->mapped_blocks() == 2);  // (group 1's mapped again)
  a->exclude_other_writers(false);
  auto c = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(verified(*c, g + 1) == page_pattern(4096, g + 1));
  for (int64_t p = 2; p < few; ++p) CHECK(verified(*c, p) == page_pattern(4096, p + 1));
  CHECK(verified(*c, g) == std::vector<std::byte>(4096));  // (b's cut write: a hole, as before it)
}

TEST_CASE("exclude_other_writers: the caller's word keeps others out as RESERVED does, from its start to its end") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  // b grows the file before the word: a counts it in at its first append.
  CHECK_OK(b->write_page(2, page_pattern(4096, 22)));
  a->exclude_other_writers(true);
  CHECK_OK(write_entry_only(*a, path, 2, page_pattern(4096, 200)));
  CHECK(verified(*b, 2) == page_pattern(4096, 22));
  // Past the end, or read under the word: nothing is read before a write.
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(a->read_page(1, buf));
  CHECK_OK(write_while_reads_fail(*a, 3, page_pattern(4096, 3)));
  CHECK_OK(write_while_reads_fail(*a, 1, page_pattern(4096, 11)));
  // The word taken back: others may write again, and are looked for.
  a->exclude_other_writers(false);
  CHECK_FALSE(write_while_reads_fail(*a, 4, page_pattern(4096, 4)).is_ok());
  CHECK_FALSE(write_while_reads_fail(*a, 1, page_pattern(4096, 111)).is_ok());
  // A lock level let go does not end the word; the word let go does not
  // end a lock's exclusion.
  a->exclude_other_writers(true);
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  CHECK_OK(write_while_reads_fail(*a, 5, page_pattern(4096, 5)));
  a->exclude_other_writers(false);
  take_reserved(*a);
  a->exclude_other_writers(true);
  a->exclude_other_writers(false);  // (RESERVED still held)
  CHECK_OK(write_while_reads_fail(*a, 6, page_pattern(4096, 6)));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  // A refused EXCLUSIVE from SHARED (PENDING) keeps no one out, whatever
  // the word was before.
  REQUIRE_OK(b->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  a->exclude_other_writers(true);
  CHECK_CODE(a->set_lock_level(LockLevel::kExclusive), Code::kBusy);
  a->exclude_other_writers(false);
  CHECK_FALSE(write_while_reads_fail(*a, 7, page_pattern(4096, 7)).is_ok());
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  REQUIRE_OK(b->set_lock_level(LockLevel::kNone));
  for (int64_t page : {3, 5, 6}) CHECK(verified(*b, page) == page_pattern(4096, static_cast<int>(page)));
  CHECK(verified(*b, 1) == page_pattern(4096, 11));
}
