// PFLI: one Pagefile in one local file, as the client and every server use it.
#include "store/local_pagefile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

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

std::unique_ptr<LocalPagefile> must_open(const std::filesystem::path& path,
                                         const LocalPagefile::OpenSpec& spec) {
  auto f = LocalPagefile::open(path, spec);
  INFO(f.status().to_string());
  REQUIRE(f.is_ok());
  return std::move(*f);
}

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
    // The file is the header then the pages, nothing else.
    CHECK(std::filesystem::file_size(path) == kHeaderSize + 6ull * ps);
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

TEST_CASE("a damaged, empty or foreign file is refused and left as it was") {
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

  std::ofstream(dir / "empty").close();
  CHECK_CODE(LocalPagefile::open(dir / "empty", {}), Code::kCorruption);
  std::ofstream(dir / "text") << "hello, not a pagefile\n";
  CHECK_CODE(LocalPagefile::open(dir / "text", {}), Code::kCorruption);
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
  in.seekg(static_cast<std::streamoff>(kHeaderSize + 9 * 512));
  std::vector<std::byte> raw(512);
  in.read(reinterpret_cast<char*>(raw.data()), 512);
  CHECK(raw == page);
}
