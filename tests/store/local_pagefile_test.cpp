// PFLI: one Pagefile in one local file, as the client and every server use it.
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
#include "tests/support/eventually.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::page_pattern;
using pagefile::test::TempDir;

namespace {

LocalPagefile::OpenSpec create_spec(uint32_t page_size) {
  LocalPagefile::OpenSpec spec;
  spec.page_size = page_size;
  spec.create = true;
  return spec;
}

// A new file as the VFS makes a WAL: 16 KiB pages, a checksum per sector.
constexpr uint32_t kWalPage = 16384;
LocalPagefile::OpenSpec wal_spec() {
  LocalPagefile::OpenSpec spec = create_spec(kWalPage);
  spec.sector_checksums = true;
  return spec;
}

std::unique_ptr<LocalPagefile> must_open(const std::filesystem::path& path,
                                         const LocalPagefile::OpenSpec& spec) {
  auto f = LocalPagefile::open(path, spec);
  INFO(f.status().to_string());
  REQUIRE(f.is_ok());
  return std::move(*f);
}

// A file made as a WAL (wal_spec) and another descriptor of it.
struct WalFile {
  TempDir dir;
  std::filesystem::path path = dir / "wal";
  std::unique_ptr<LocalPagefile> file = must_open(path, wal_spec());
  std::unique_ptr<LocalPagefile> other = must_open(path, LocalPagefile::OpenSpec{});
};

}  // namespace

TEST_CASE("pages written are read back, at every page size") {
  TempDir dir;
  for (uint32_t ps = kMinPageSize; ps <= kMaxPageSize; ps *= 2) {
    INFO("page size " << ps);
    auto path = dir / ("f" + std::to_string(ps));
    auto f = must_open(path, create_spec(ps));
    CHECK(f->page_size() == ps);
    for (int64_t p : {0, 1, 5}) CHECK_OK(f->write_page(p, page_pattern(ps, p)));
    std::vector<std::byte> buf(ps);
    for (int64_t p : {0, 1, 5}) {
      auto r = f->read_page(p, buf);
      REQUIRE_OK(r);
      CHECK(*r == PageRead::kData);
      CHECK(buf == page_pattern(ps, p));
    }
    // Pages skipped over read as zeros, and exist.
    auto hole = f->read_page(3, buf);
    REQUIRE_OK(hole);
    CHECK(*hole == PageRead::kData);
    CHECK(buf == std::vector<std::byte>(ps));
    CHECK(*f->size_pages() == 6);
    // The file is the header, a block of checksums, then the pages.
    CHECK(f->page_offset(0) == 2 * 4096);
    CHECK(f->page_offset(5) == 2 * 4096 + 5 * static_cast<off_t>(ps));
    CHECK(std::filesystem::file_size(path) == static_cast<uintmax_t>(f->page_offset(5)) + ps);
  }
}

TEST_CASE("a read past the end zero-fills and says so") {
  TempDir dir;
  auto f = must_open(dir / "f", create_spec(1024));
  CHECK_OK(f->write_page(0, page_pattern(1024, 0)));
  std::vector<std::byte> buf(1024, std::byte{0x55});
  auto r = f->read_page(1, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(1024));
  std::fill(buf.begin(), buf.end(), std::byte{0x55});
  r = f->read_page(1'000'000, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(1024));
}

TEST_CASE("a page cut short (a crash mid-append) is beyond the end, not half a page") {
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(4096));
  CHECK_OK(f->write_page(0, page_pattern(4096, 0)));
  // Append half of page 1 behind the store's back.
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND);
  REQUIRE(fd >= 0);
  auto half = page_pattern(4096, 1);
  REQUIRE(::write(fd, half.data(), 2048) == 2048);
  ::close(fd);
  CHECK(*f->size_pages() == 1);
  std::vector<std::byte> buf(4096);
  auto r = f->read_page(1, buf);
  REQUIRE_OK(r);
  CHECK(*r == PageRead::kBeyondEnd);
  CHECK(buf == std::vector<std::byte>(4096));
  // Writing the page whole makes it exist.
  CHECK_OK(f->write_page(1, page_pattern(4096, 1)));
  CHECK(*f->size_pages() == 2);
}

TEST_CASE("truncate shrinks and grows") {
  TempDir dir;
  auto f = must_open(dir / "f", create_spec(512));
  for (int64_t p = 0; p < 10; ++p) CHECK_OK(f->write_page(p, page_pattern(512, p)));
  CHECK_OK(f->truncate(4));
  CHECK(*f->size_pages() == 4);
  std::vector<std::byte> buf(512);
  CHECK(*f->read_page(4, buf) == PageRead::kBeyondEnd);
  CHECK(*f->read_page(3, buf) == PageRead::kData);
  CHECK(buf == page_pattern(512, 3));
  CHECK_OK(f->truncate(8));
  CHECK(*f->size_pages() == 8);
  CHECK(*f->read_page(6, buf) == PageRead::kData);
  CHECK(buf == std::vector<std::byte>(512));
  CHECK_OK(f->truncate(0));
  CHECK(*f->size_pages() == 0);
  CHECK_CODE(f->truncate(-1), Code::kInvalidArgument);
  CHECK_CODE(f->truncate(kMaxPageNumber + 2), Code::kInvalidArgument);
}

TEST_CASE("the page size is recorded and a reopen with another is refused") {
  TempDir dir;
  auto path = dir / "f";
  LocalPagefile::OpenSpec spec = create_spec(8192);
  spec.policy = {AccessType::kSequential, 2, 64};
  must_open(path, spec)->write_page(0, page_pattern(8192, 0)).is_ok();

  LocalPagefile::OpenSpec reopen;  // page size 0: take the recorded one
  auto f = must_open(path, reopen);
  CHECK(f->page_size() == 8192);
  CHECK(f->recorded_policy() == BufferPolicy{AccessType::kSequential, 2, 64});

  reopen.page_size = 4096;
  auto wrong = LocalPagefile::open(path, reopen);
  CHECK_CODE(wrong, Code::kInvalidArgument);
  CHECK(wrong.status().message() == path.string() + ": has page size 8192, opened with page size 4096");
  // Creating over an existing file with another size is refused the same way.
  CHECK_CODE(LocalPagefile::open(path, create_spec(1024)), Code::kInvalidArgument);
}

TEST_CASE("a file that holds no page takes another page size; other descriptors take it as they count pages; one with pages keeps its own") {
  TempDir dir;
  auto path = dir / "f";
  auto writer = must_open(path, create_spec(4096));
  auto reader = must_open(path, LocalPagefile::OpenSpec{});  // opened while it held nothing
  LocalPagefile::OpenSpec fixed;
  fixed.fixed_page_size = true;  // as a client with a pool opens it
  auto pooled = must_open(path, fixed);
  CHECK_CODE(writer->set_empty_page_size(3000), Code::kInvalidArgument);
  CHECK(writer->page_size() == 4096);
  REQUIRE_OK(writer->set_empty_page_size(512));
  CHECK(writer->page_size() == 512);
  for (int64_t p = 0; p < 300; ++p) REQUIRE_OK(writer->write_page(p, page_pattern(512, p)));  // past one checksum group

  CHECK(reader->page_size() == 4096);
  auto pages = reader->size_pages();  // counted at the size the pages have
  REQUIRE_OK(pages);
  CHECK(*pages == 300);
  CHECK(reader->page_size() == 512);
  std::vector<std::byte> buf(512);
  for (int64_t p : {0, 255, 256, 299}) {
    REQUIRE_OK(reader->read_page(p, buf));
    CHECK(buf == page_pattern(512, p));
  }
  // One that must keep its size says so, rather than count 4 KiB pages.
  auto refused_count = pooled->size_pages();
  CHECK_CODE(refused_count, Code::kInvalidArgument);
  CHECK(pooled->page_size() == 4096);
  CHECK(must_open(path, LocalPagefile::OpenSpec{})->page_size() == 512);  // the header says so

  // Once it holds a page, its size is fixed, and nothing changes.
  auto refused = writer->set_empty_page_size(1024);
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(refused.message() == path.string() + ": holds 300 pages of 512 bytes: its page size is fixed");
  CHECK(writer->page_size() == 512);
  REQUIRE_OK(writer->read_page(299, buf));
  CHECK(buf == page_pattern(512, 299));
  // Emptied, it keeps its size too: a descriptor that counted its pages
  // no longer reads the header (it has held pages, and says so).
  REQUIRE_OK(writer->truncate(0));
  auto emptied = writer->set_empty_page_size(2048);
  CHECK_CODE(emptied, Code::kInvalidArgument);
  CHECK(emptied.message() == path.string() + ": has held pages: its page size is fixed");
  auto late = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(late->page_size() == 512);
  CHECK_CODE(late->set_empty_page_size(2048), Code::kInvalidArgument);

  // Sector checksums fix the page size (version 3).
  LocalPagefile::OpenSpec sectors = create_spec(16384);
  sectors.sector_checksums = true;
  CHECK_CODE(must_open(dir / "s", sectors)->set_empty_page_size(4096), Code::kInvalidArgument);
  // A read-only descriptor changes nothing.
  LocalPagefile::OpenSpec ro;
  ro.read_only = true;
  CHECK_CODE(must_open(dir / "s", ro)->set_empty_page_size(4096), Code::kReadOnly);
}

TEST_CASE("a file whose page size is final keeps nothing of its pages after a truncate to none, and takes no other size") {
  LocalPagefile::OpenSpec journal = create_spec(4096);
  journal.page_size_final = true;  // as the VFS opens its journals
  TempDir dir;
  const auto path = dir / "journal";
  auto f = must_open(path, journal);
  for (int64_t p = 0; p < 3; ++p) REQUIRE_OK(f->write_page(p, page_pattern(4096, p)));
  REQUIRE_OK(f->truncate(0));
  CHECK(std::filesystem::file_size(path) == 4096);  // the header alone
  CHECK(*f->size_pages() == 0);
  CHECK_CODE(f->set_empty_page_size(512), Code::kInvalidArgument);
  REQUIRE_OK(f->write_page(0, page_pattern(4096, 9)));
  std::vector<std::byte> buf(4096);
  REQUIRE_OK(f->read_page(0, buf));
  CHECK(buf == page_pattern(4096, 9));
}

TEST_CASE("descriptors opened empty, counting while another gives the file a page size and writes: every page is read at the size it has") {
  TempDir dir;
  for (int round = 0; round < 60; ++round) {
    CAPTURE(round);
    auto path = dir / fmt::format("f{}", round);
    auto writer = must_open(path, create_spec(4096));
    std::vector<std::unique_ptr<LocalPagefile>> readers;
    for (int r = 0; r < 3; ++r) readers.push_back(must_open(path, LocalPagefile::OpenSpec{}));
    std::atomic<bool> done{false};
    Status written;
    std::thread reformat([&] {
      written = writer->set_empty_page_size(512);
      for (int64_t p = 0; p < 24 && written; ++p) written = writer->write_page(p, page_pattern(512, p));
      done = true;
    });
    // They count (as at a lock) while that happens, and once after. (The
    // looks are bounded: on a loaded machine the writer may not finish
    // within them, hence the count after the join.)
    auto look = [&] {
      for (auto& reader : readers) {
        auto pages = reader->size_pages();
        REQUIRE_OK(pages);
        if (*pages == 0) continue;
        REQUIRE(reader->page_size() == 512);
        std::vector<std::byte> buf(512);
        REQUIRE_OK(reader->read_page(0, buf));
        CHECK(buf == page_pattern(512, 0));
      }
    };
    for (int looks = 0; looks < 1000 && !done.load(); ++looks) look();
    reformat.join();
    REQUIRE_OK(written);
    look();
    for (auto& reader : readers) CHECK(reader->page_size() == 512);
  }
}

TEST_CASE("a header torn while a file that holds no page took another page size opens, either size, and is made whole") {
  TempDir dir;
  auto path = dir / "f";
  std::array<std::byte, kHeaderSize> old_header{}, new_header{};
  {
    auto f = must_open(path, create_spec(4096));
    REQUIRE(::pread(::open(path.c_str(), O_RDONLY | O_CLOEXEC), old_header.data(), kHeaderSize, 0) == kHeaderSize);
    REQUIRE_OK(f->set_empty_page_size(1024));
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(::pread(fd, new_header.data(), kHeaderSize, 0) == kHeaderSize);
    ::close(fd);
  }
  // A disk writes 512-byte sectors: the page size is in the first, the
  // header's checksum in the last.
  auto torn = [&](const std::array<std::byte, kHeaderSize>& first, const std::array<std::byte, kHeaderSize>& rest) {
    std::array<std::byte, kHeaderSize> mixed = rest;
    std::memcpy(mixed.data(), first.data(), 512);
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(::pwrite(fd, mixed.data(), kHeaderSize, 0) == kHeaderSize);
    ::close(fd);
  };
  torn(new_header, old_header);
  CHECK(must_open(path, LocalPagefile::OpenSpec{})->page_size() == 1024);
  CHECK(must_open(path, LocalPagefile::OpenSpec{})->page_size() == 1024);  // made whole at the first open
  torn(old_header, new_header);
  LocalPagefile::OpenSpec ro;
  ro.read_only = true;
  CHECK(must_open(path, ro)->page_size() == 4096);  // read as it is, left as it is
  auto f = must_open(path, LocalPagefile::OpenSpec{});
  CHECK(f->page_size() == 4096);
  REQUIRE_OK(f->write_page(0, page_pattern(4096, 0)));
  // A file that holds pages is not mended so: its header is damaged.
  torn(new_header, old_header);
  CHECK_CODE(LocalPagefile::open(path, LocalPagefile::OpenSpec{}), Code::kCorruption);
}

TEST_CASE("bad page sizes, buffers and page numbers are refused") {
  TempDir dir;
  CHECK_CODE(LocalPagefile::open(dir / "a", create_spec(1000)), Code::kInvalidArgument);
  CHECK_CODE(LocalPagefile::open(dir / "b", create_spec(256)), Code::kInvalidArgument);
  CHECK_CODE(LocalPagefile::open(dir / "c", create_spec(131072)), Code::kInvalidArgument);
  CHECK_FALSE(std::filesystem::exists(dir / "a"));

  auto f = must_open(dir / "f", create_spec(4096));
  std::vector<std::byte> small(4095), big(4097), right(4096);
  CHECK_CODE(f->read_page(0, small), Code::kInvalidArgument);
  CHECK_CODE(f->write_page(0, big), Code::kInvalidArgument);
  CHECK_CODE(f->read_page(-1, right), Code::kInvalidArgument);
  CHECK_CODE(f->write_page(-1, right), Code::kInvalidArgument);
  CHECK_CODE(f->write_page(kMaxPageNumber + 1, right), Code::kInvalidArgument);
  CHECK_CODE(f->read_page(INT64_MAX, right), Code::kInvalidArgument);
  CHECK(*f->size_pages() == 0);  // nothing was written by the refused calls
}

TEST_CASE("open without create, exclusive create, unlink") {
  TempDir dir;
  auto missing = LocalPagefile::open(dir / "missing", {});
  CHECK_CODE(missing, Code::kNotFound);
  CHECK(missing.status().message().find("create is false") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "missing"));

  auto spec = create_spec(4096);
  spec.exclusive = true;
  must_open(dir / "f", spec);
  CHECK_CODE(LocalPagefile::open(dir / "f", spec), Code::kAlreadyExists);

  CHECK_OK(LocalPagefile::unlink(dir / "f"));
  CHECK_FALSE(std::filesystem::exists(dir / "f"));
  CHECK_CODE(LocalPagefile::unlink(dir / "f"), Code::kNotFound);
  // No temporary files are left behind by creation.
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("a file being created is never seen without its header: openers that do not create wait for it") {
  // A new file is made empty at its path and its header written after
  // (under kInitByte): an opener coming between the two must not take it
  // for a file with no header. Two threads, each with its own descriptors
  // (open-file-description locks are per descriptor, as between
  // processes): one creates and removes the file, the other opens it
  // without create and must find it absent or whole.
  TempDir dir;
  const auto path = dir / "f";
  std::atomic<bool> done{false};
  std::atomic<bool> started{false};
  int opened = 0, absent = 0;
  std::vector<std::string> errors;
  std::thread opener([&] {
    while (!done.load()) {
      started = true;
      auto f = LocalPagefile::open(path, {.read_only = true});
      if (f) {
        ++opened;
        if ((*f)->page_size() != 1024) errors.push_back(fmt::format("page size {}", (*f)->page_size()));
      } else if (f.status().is(Code::kNotFound)) {
        ++absent;
      } else {
        errors.push_back(f.status().to_string());
      }
    }
  });
  // (The rounds take milliseconds: on a loaded machine the opener might
  // otherwise first run after them.)
  while (!started.load()) std::this_thread::yield();
  for (int round = 0; round < 300; ++round) {
    auto spec = create_spec(1024);
    spec.exclusive = true;
    auto f = LocalPagefile::open(path, spec);
    REQUIRE_OK(f);
    f->reset();
    REQUIRE_OK(LocalPagefile::unlink(path));
  }
  done = true;
  opener.join();
  CHECK(errors.empty());
  if (!errors.empty()) MESSAGE(errors.front());
  CHECK(opened + absent > 0);
}

TEST_CASE("a file its creator removed as it failed to make it is not made by an opener waiting for it") {
  // The creator's part played by hand: the file made empty, byte 3072 (the
  // lock under which a header is written) held, then the file removed and
  // the lock let go, as a creator whose header write fails does. An opener
  // that came in between and waited must not give a header to a file no
  // one else can see.
  TempDir dir;
  const auto path = dir / "f";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  struct flock fl {};
  fl.l_type = F_WRLCK;
  fl.l_whence = SEEK_SET;
  fl.l_start = 3072;
  fl.l_len = 1;
  REQUIRE(::fcntl(fd, F_OFD_SETLK, &fl) == 0);
  Status opened;
  std::thread opener([&] { opened = LocalPagefile::open(path, create_spec(4096)).status(); });
  // Until it waits for the lock: /proc/locks lists a waiter after "->",
  // with the file's inode after its device. (Not a fixed sleep: on a loaded
  // machine the opener may not have got there.)
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  const std::string inode = fmt::format(":{} ", st.st_ino);
  CHECK(pagefile::test::eventually([&] {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);) {
      if (line.find("->") != std::string::npos && line.find(inode) != std::string::npos) return true;
    }
    return false;
  }));
  REQUIRE(::unlink(path.c_str()) == 0);
  fl.l_type = F_UNLCK;
  REQUIRE(::fcntl(fd, F_OFD_SETLK, &fl) == 0);
  opener.join();
  ::close(fd);
  CHECK_CODE(opened, Code::kIOError);
  CHECK(opened.message().find("was removed as it was being made") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));
}

TEST_CASE("a new file has exactly the mode asked for, whatever the umask") {
  TempDir dir;
  mode_t old = ::umask(077);
  auto spec = create_spec(4096);
  spec.mode = 0664;
  auto f = LocalPagefile::open(dir / "f", spec);
  ::umask(old);
  REQUIRE_OK(f);
  struct stat st {};
  REQUIRE(::stat((dir / "f").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0664);
}

TEST_CASE("a damaged or foreign file is refused and left as it was; an empty one is not found unless created") {
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(4096));
  CHECK_OK(f->write_page(0, page_pattern(4096, 0)));
  f.reset();

  // One flipped byte in the header.
  {
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(12);
    io.put('\x7f');
  }
  auto size_before = std::filesystem::file_size(path);
  auto damaged = LocalPagefile::open(path, {});
  CHECK_CODE(damaged, Code::kCorruption);
  CHECK(std::filesystem::file_size(path) == size_before);
  CHECK_CODE(LocalPagefile::open(path, create_spec(4096)), Code::kCorruption);

  // An empty file is no Pagefile yet (what a process killed as it made one
  // leaves): not found, unless created.
  std::ofstream(dir / "empty").close();
  CHECK_CODE(LocalPagefile::open(dir / "empty", {}), Code::kNotFound);
  CHECK(std::filesystem::file_size(dir / "empty") == 0);
  std::ofstream(dir / "text") << "hello, not a pagefile\n";
  CHECK_CODE(LocalPagefile::open(dir / "text", {}), Code::kCorruption);
  CHECK_CODE(LocalPagefile::open(dir / "text", create_spec(4096)), Code::kCorruption);
  // An empty file opened to create (as the unix VFS takes an empty file
  // for an empty database) becomes a new Pagefile in place: same inode.
  auto inode = [](const std::filesystem::path& p) {
    struct stat st {};
    REQUIRE(::stat(p.c_str(), &st) == 0);
    return st.st_ino;
  };
  auto before = inode(dir / "empty");
  auto made = must_open(dir / "empty", create_spec(8192));
  CHECK(made->page_size() == 8192);
  CHECK(*made->size_pages() == 0);
  CHECK_OK(made->write_page(1, page_pattern(8192, 1)));
  CHECK(inode(dir / "empty") == before);
  auto again = must_open(dir / "empty", LocalPagefile::OpenSpec{});
  std::vector<std::byte> buf(8192);
  REQUIRE_OK(again->read_page(1, buf));
  CHECK(buf == page_pattern(8192, 1));
  std::filesystem::create_directory(dir / "subdir");
  CHECK_FALSE(LocalPagefile::open(dir / "subdir", {}).is_ok());
}

TEST_CASE("a file opened read-only reads but refuses writes") {
  TempDir dir;
  auto path = dir / "f";
  CHECK_OK(must_open(path, create_spec(2048))->write_page(2, page_pattern(2048, 2)));
  LocalPagefile::OpenSpec ro;
  ro.read_only = true;
  auto f = must_open(path, ro);
  std::vector<std::byte> buf(2048);
  CHECK(*f->read_page(2, buf) == PageRead::kData);
  CHECK(buf == page_pattern(2048, 2));
  CHECK_CODE(f->write_page(0, buf), Code::kReadOnly);
  CHECK_CODE(f->truncate(0), Code::kReadOnly);
  CHECK_CODE(f->lock(LockMode::kExclusive, LockWait::kTry), Code::kReadOnly);
  CHECK_OK(f->lock(LockMode::kShared, LockWait::kTry));
  CHECK(*f->size_pages() == 3);
  CHECK_OK(f->sync());
}

TEST_CASE("sync succeeds and data is in the file afterwards") {
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(512));
  auto page = page_pattern(512, 9);
  CHECK_OK(f->write_page(9, page));
  CHECK_OK(f->sync());
  // Read the bytes with plain file I/O at the documented offset.
  std::ifstream in(path, std::ios::binary);
  in.seekg(static_cast<std::streamoff>(f->page_offset(9)));
  std::vector<std::byte> raw(512);
  in.read(reinterpret_cast<char*>(raw.data()), 512);
  CHECK(raw == page);
}

// ---- checksums (doc/page_format.md) ------------------------------------------

namespace {

// The bytes of `len` at `offset` of the file, read or written behind the
// store's back.
std::vector<std::byte> raw_read(const std::filesystem::path& path, off_t offset, size_t len) {
  std::vector<std::byte> out(len);
  int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, out.data(), len, offset) == static_cast<ssize_t>(len));
  ::close(fd);
  return out;
}

void raw_write(const std::filesystem::path& path, off_t offset, const std::vector<std::byte>& bytes) {
  int fd = ::open(path.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), offset) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

}  // namespace

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
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(1024));
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
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(4096));
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
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(512));
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
  TempDir dir;
  auto path = dir / "f";
  auto f = must_open(path, create_spec(4096));
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

// `f`'s write of `page`, cut by a crash between its checksum entry and the
// page: the entry is the write's, the page's bytes are put back as they were.
Status write_entry_only(LocalPagefile& f, const std::filesystem::path& path, int64_t page,
                        const std::vector<std::byte>& data) {
  const auto before = raw_read(path, f.page_offset(page), data.size());
  Status s = f.write_page(page, data);
  raw_write(path, f.page_offset(page), before);
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(2, page_pattern(4096, 222)).is_ok());
  DiskFaults::disarm();
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(8, page_pattern(4096, 88)).is_ok());
  CHECK_FALSE(a->write_page(1, page_pattern(4096, 11)).is_ok());
  DiskFaults::disarm();
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  for (int64_t page : {4, 6}) CHECK(verified(*c, page) == page_pattern(4096, static_cast<int>(page) * 11));
  CHECK(verified(*c, 5) == std::vector<std::byte>(4096));  // (a hole)
}

TEST_CASE("holding RESERVED, the writes of one group's pages read its checksum block once; each keeps the old checksum its entry had") {
  TwoDescriptors files;
  auto& [dir, path, a, b] = files;
  for (int64_t page = 2; page < 300; ++page) CHECK_OK(b->write_page(page, page_pattern(4096, static_cast<int>(page))));
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(6, page_pattern(4096, 600)).is_ok());
  DiskFaults::disarm();
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
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
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
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
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
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(1, page_pattern(4096, 100)).is_ok());
  CHECK_FALSE(a->write_page(2, page_pattern(4096, 200)).is_ok());
  DiskFaults::disarm();
  REQUIRE_OK(b->set_lock_level(LockLevel::kNone));
  REQUIRE_OK(a->set_lock_level(LockLevel::kExclusive));
  // Granted: the end is counted (b's page 2 is in), and a page past it reads nothing.
  CHECK_OK(write_entry_only(*a, path, 2, page_pattern(4096, 201)));
  CHECK(verified(*b, 2) == page_pattern(4096, 20));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_OK(a->write_page(3, page_pattern(4096, 3)));
  DiskFaults::disarm();
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(2, page_pattern(16384, 22)).is_ok());
  DiskFaults::disarm();
  a->exclude_other_writers(false);
  CHECK(verified(*b, 1) == page_pattern(16384, 1));
  CHECK(verified(*b, 3) == page_pattern(16384, 3));
  // The word taken back: what a read or wrote is no longer taken as the disk's.
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(1, page_pattern(16384, 111)).is_ok());
  DiskFaults::disarm();
  CHECK(verified(*b, 1) == page_pattern(16384, 1));
  // The word said twice with none taken back between (a caller that missed
  // one): the second starts afresh, so b's write meanwhile is looked for.
  a->exclude_other_writers(true);
  REQUIRE_OK(a->read_page(1, buf));
  CHECK_OK(b->write_page(1, page_pattern(16384, 12)));
  CHECK_OK(b->write_page(4, page_pattern(16384, 4)));
  a->exclude_other_writers(true);
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(1, page_pattern(16384, 13)).is_ok());
  CHECK_FALSE(a->write_page(4, page_pattern(16384, 44)).is_ok());
  DiskFaults::disarm();
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
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_OK(a->write_page(3, page_pattern(4096, 3)));
  CHECK_OK(a->write_page(1, page_pattern(4096, 11)));
  DiskFaults::disarm();
  // The word taken back: others may write again, and are looked for.
  a->exclude_other_writers(false);
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(4, page_pattern(4096, 4)).is_ok());
  CHECK_FALSE(a->write_page(1, page_pattern(4096, 111)).is_ok());
  DiskFaults::disarm();
  // A lock level let go does not end the word; the word let go does not
  // end a lock's exclusion.
  a->exclude_other_writers(true);
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_OK(a->write_page(5, page_pattern(4096, 5)));
  DiskFaults::disarm();
  a->exclude_other_writers(false);
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kReserved));
  a->exclude_other_writers(true);
  a->exclude_other_writers(false);  // (RESERVED still held)
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_OK(a->write_page(6, page_pattern(4096, 6)));
  DiskFaults::disarm();
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  // A refused EXCLUSIVE from SHARED (PENDING) keeps no one out, whatever
  // the word was before.
  REQUIRE_OK(b->set_lock_level(LockLevel::kShared));
  REQUIRE_OK(a->set_lock_level(LockLevel::kShared));
  a->exclude_other_writers(true);
  CHECK_CODE(a->set_lock_level(LockLevel::kExclusive), Code::kBusy);
  a->exclude_other_writers(false);
  DiskFaults::arm(DiskOp::kRead, 1, DiskFault::kEio, /*sticky=*/true);
  CHECK_FALSE(a->write_page(7, page_pattern(4096, 7)).is_ok());
  DiskFaults::disarm();
  REQUIRE_OK(a->set_lock_level(LockLevel::kNone));
  REQUIRE_OK(b->set_lock_level(LockLevel::kNone));
  for (int64_t page : {3, 5, 6}) CHECK(verified(*b, page) == page_pattern(4096, static_cast<int>(page)));
  CHECK(verified(*b, 1) == page_pattern(4096, 11));
}
