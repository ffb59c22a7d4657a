// A full disk and a read-only disk, for real: tmpfs mounts in a private
// mount namespace, so nothing leaks to the machine even if the test dies.
// Exits 77 (skipped) where this process may not create one.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstring>

#include "pagefile/pagefile.h"
#include "tests/support/cluster.h"

using namespace pagefile;
using namespace pagefile::test;

namespace {

// A tmpfs of `bytes` mounted over a fresh directory.
class SmallDisk {
 public:
  explicit SmallDisk(size_t bytes) {
    std::string opts = "size=" + std::to_string(bytes);
    if (::mount("pagefile-test", dir_.path().c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      FAIL("mount tmpfs: " << std::strerror(errno));
    }
  }
  ~SmallDisk() { ::umount2(dir_.path().c_str(), MNT_DETACH); }
  const std::filesystem::path& path() const { return dir_.path(); }
  void remount_read_only() {
    REQUIRE(::mount(nullptr, dir_.path().c_str(), nullptr, MS_REMOUNT | MS_RDONLY, nullptr) == 0);
  }

 private:
  TempDir dir_;
};

std::unique_ptr<Client> start(const std::filesystem::path& dir) {
  auto c = Client::start({.local_dir = dir, .concurrency = 8});
  REQUIRE_OK(c);
  return std::move(*c);
}

// A Client of the local files on `disk`, and a new file `name` there with
// pages of `page_size`.
struct ClientWithFile {
  std::unique_ptr<Client> client;
  Fd fd;
};
ClientWithFile client_with_file(const SmallDisk& disk, const std::string& name, uint32_t page_size) {
  auto client = start(disk.path());
  auto fd = client->open(name, {.page_size = page_size, .create = true});
  REQUIRE_OK(fd);
  return {std::move(client), *fd};
}

// REQUIREs that `page` of `fd` holds data, and CHECKs that it is the page
// written with page_pattern(page_size, page, seed).
void check_page(Client& client, Fd fd, uint32_t page_size, int64_t page, uint64_t seed = 1) {
  std::vector<std::byte> buf(page_size);
  REQUIRE(*client.read(fd, page, buf) == PageRead::kData);
  CHECK(buf == page_pattern(page_size, page, seed));
}

// Writes pages 0, 1, 2, ... of `page_size` until the disk is full (at most
// 1000), checks that the write that failed says kNoSpace and names its
// page, and returns how many were written.
int64_t fill_until_full(Client& client, Fd fd, uint32_t page_size = 4096) {
  int64_t written = 0;
  Status failure;
  for (int64_t p = 0; p < 1000; ++p) {
    failure = client.write(fd, p, page_pattern(page_size, p));
    if (!failure) break;
    ++written;
  }
  REQUIRE_FALSE(failure.is_ok());
  CHECK(failure.is(Code::kNoSpace));
  CHECK(failure.message().find("page " + std::to_string(written)) != std::string::npos);
  CHECK(written > 10);
  return written;
}

}  // namespace

TEST_CASE("a full disk: kNoSpace, earlier pages intact, sync honest, space reusable") {
  SmallDisk disk(256 * 1024);
  auto [client, fd] = client_with_file(disk, "f", 4096);
  int64_t written = fill_until_full(*client, fd);  // the disk holds at most ~60 pages

  // Nothing acknowledged was lost, and the failed page is not half there.
  CHECK(client->status(fd)->pages == written);
  for (int64_t p = 0; p < written; ++p) check_page(*client, fd, 4096, p);
  std::vector<std::byte> buf(4096);
  // The failed page reads as its failure, not as zeros or old bytes.
  CHECK_CODE(client->read(fd, written, buf).status(), Code::kNoSpace);

  // The failed write is not durable, so sync must not say it is; it says
  // so once.
  Status sync = client->sync(fd);
  CHECK(sync.is(Code::kNoSpace));
  CHECK(sync.message().find("sync") != std::string::npos);
  CHECK_OK(client->sync(fd));
  CHECK_CODE(client->read(fd, written, buf).status(), Code::kNoSpace);

  // Rewriting an existing page needs no new space.
  CHECK_OK(client->write(fd, 0, page_pattern(4096, 0, 9)));

  // Giving up the failed page (truncating below it) clears the failure;
  // freeing space lets writes succeed again.
  CHECK_OK(client->truncate(fd, written / 2));
  CHECK_OK(client->sync(fd));
  CHECK_OK(client->write(fd, written / 2, page_pattern(4096, written / 2, 5)));
  CHECK_OK(client->sync(fd));
  check_page(*client, fd, 4096, 0, 9);
}

TEST_CASE("a full disk: an unconfirmed failed write is reported by close") {
  SmallDisk disk(128 * 1024);
  auto [client, fd] = client_with_file(disk, "f", 8192);
  for (int64_t p = 0; p < 40; ++p) REQUIRE_OK(client->write_request(fd, p, page_pattern(8192, p)));
  Status closed = client->close(fd);
  CHECK(closed.is(Code::kNoSpace));
  CHECK(closed.message().find("unconfirmed write") != std::string::npos);
}

TEST_CASE("a full disk: creating a file fails cleanly and leaves nothing") {
  SmallDisk disk(64 * 1024);
  auto [client, fd] = client_with_file(disk, "big", 4096);
  for (int64_t p = 0; p < 100; ++p) {
    if (!client->write(fd, p, page_pattern(4096, p))) break;
  }
  auto second = client->open("second", {.page_size = 4096, .create = true});
  CHECK_CODE(second, Code::kNoSpace);
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(disk.path())) {
    names.push_back(e.path().filename().string());
  }
  CHECK(names == std::vector<std::string>{"big"});
}

TEST_CASE("a full disk under the embedded bus: writes done on the caller's thread fail as the others do") {
  // The in-process servers emulate no disk, so each write is done on the
  // writer's thread (PageIo::write_direct); when it fails there it must still
  // be reported, and sync must still refuse.
  SmallDisk disk(1024 * 1024);
  auto client = start_client(disk.path(), "inproc:2", {.concurrency = 8});
  auto opened = client->open("f", {.location = Location::kRemote, .page_size = 4096, .create = true});
  REQUIRE_OK(opened);
  Fd fd = *opened;
  int64_t written = fill_until_full(*client, fd);  // the disk holds at most ~250 pages
  for (int64_t p = 0; p < written; ++p) check_page(*client, fd, 4096, p);
  CHECK(client->sync(fd).is(Code::kNoSpace));
  // An overwrite needs no new space, on either server.
  CHECK_OK(client->write(fd, 0, page_pattern(4096, 0, 9)));
  CHECK_OK(client->write(fd, 1, page_pattern(4096, 1, 9)));
  check_page(*client, fd, 4096, 1, 9);
}

TEST_CASE("pages larger than a block are reserved in runs ahead of a growing file; a truncate gives them back; a nearly full disk still takes a page that fits") {
  // 16 KiB pages: each needs its blocks reserved before its first write
  // (store/local_pagefile_writes.cpp, reserve). One at a time, a file growing a
  // page at a time would get them scattered over the disk.
  constexpr uint32_t kPage = 16384;
  constexpr off_t kFirstPage = 4096 + 4096;  // the header, then the first group's checksum block
  auto allocated = [](const std::filesystem::path& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return static_cast<off_t>(st.st_blocks) * 512;
  };
  {
    SmallDisk disk(2 * 1024 * 1024);
    auto [client, fd] = client_with_file(disk, "f", kPage);
    for (int64_t p = 0; p <= 8; ++p) REQUIRE_OK(client->write(fd, p, page_pattern(kPage, p)));
    // Page 8's write reserved pages 8 to 15 (as many ahead as the file had).
    CHECK(allocated(disk.path() / "f") >= kFirstPage + 16 * kPage);
    CHECK(std::filesystem::file_size(disk.path() / "f") == static_cast<uintmax_t>(kFirstPage + 9 * kPage));
    CHECK(client->status(fd)->pages == 9);
    REQUIRE_OK(client->truncate(fd, 4));
    CHECK(allocated(disk.path() / "f") <= kFirstPage + 4 * kPage);
    for (int64_t p = 0; p < 4; ++p) check_page(*client, fd, kPage, p);
    // Written again past the cut, the pages are reserved again.
    for (int64_t p = 4; p <= 8; ++p) REQUIRE_OK(client->write(fd, p, page_pattern(kPage, p, 2)));
    for (int64_t p = 4; p <= 8; ++p) check_page(*client, fd, kPage, p, 2);
    // A page far past the end (a sparse file) is reserved alone: its
    // blocks and its group's checksum block, no run after it.
    const off_t before = allocated(disk.path() / "f");
    REQUIRE_OK(client->write(fd, 600, page_pattern(kPage, 600)));
    CHECK(allocated(disk.path() / "f") <= before + kPage + 4096);
    check_page(*client, fd, kPage, 600);
  }
  {
    // 512 KiB: room for about 31 pages. At page 16 a run of 16 (256 KiB)
    // no longer fits, but each page alone does, until the disk is full.
    SmallDisk disk(512 * 1024);
    auto [client, fd] = client_with_file(disk, "f", kPage);
    int64_t written = fill_until_full(*client, fd, kPage);
    CHECK(written >= 28);
    CHECK(client->status(fd)->pages == written);
    for (int64_t p = 0; p < written; ++p) check_page(*client, fd, kPage, p);
  }
}

TEST_CASE("a read-only disk: reads work, everything that writes says kReadOnly") {
  SmallDisk disk(1024 * 1024);
  {
    auto [client, fd] = client_with_file(disk, "f", 2048);
    for (int64_t p = 0; p < 8; ++p) CHECK_OK(client->write(fd, p, page_pattern(2048, p)));
    CHECK_OK(client->sync(fd));
  }
  disk.remount_read_only();
  auto client = start(disk.path());
  CHECK_CODE(client->open("f"), Code::kReadOnly);
  CHECK_CODE(client->open("f", {.create = true}), Code::kReadOnly);
  CHECK_CODE(client->open("new", {.create = true}), Code::kReadOnly);
  CHECK_CODE(client->unlink("f"), Code::kReadOnly);
  auto ro = client->open("f", {.read_only = true});
  REQUIRE_OK(ro);
  for (int64_t p = 0; p < 8; ++p) check_page(*client, *ro, 2048, p);
  CHECK_CODE(client->write(*ro, 0, page_pattern(2048, 0)), Code::kReadOnly);
}

int main(int argc, char** argv) {
  // A private mount namespace: our mounts vanish with this process.
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
    std::printf("skipped: cannot create a private mount namespace (%s); run as root\n",
                std::strerror(errno));
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}
