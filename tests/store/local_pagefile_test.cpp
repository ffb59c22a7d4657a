// PFLI: one Pagefile in one local file, as the client and every server use it:
// pages, sizes, page sizes, opening and creating (checksums and locks in
// local_pagefile_checksums_test.cpp and local_pagefile_locks_test.cpp).
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
  NewFile new_file(4096);
  auto& [dir, path, f] = new_file;
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
  // A file that is not a Pagefile is left as it is, unless any file will
  // do (SQLite's xDelete, as unix's).
  { std::ofstream(dir / "notes.txt") << "keep me\n"; }
  auto refused = LocalPagefile::unlink(dir / "notes.txt");
  CHECK_CODE(refused, Code::kInvalidArgument);
  CHECK(refused.message().find("not a Pagefile") != std::string::npos);
  CHECK(std::filesystem::exists(dir / "notes.txt"));
  CHECK_OK(LocalPagefile::unlink(dir / "notes.txt", true, LocalPagefile::Unlinking::kAnyFile));
  CHECK_FALSE(std::filesystem::exists(dir / "notes.txt"));
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
  NewFile new_file(4096);
  auto& [dir, path, f] = new_file;
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
  NewFile new_file(512);
  auto& [dir, path, f] = new_file;
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
