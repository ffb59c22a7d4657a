// ReadMapping (store/read_mapping.h): bytes copied out of a mapping are a
// pread's, and a fault of the mapping (the file cut under it) is a false
// return, never the end of the process; faults outside a copy still reach
// the handler installed before, or end the process as they would have.
#include "store/read_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string_view>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "store/local_pagefile.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::page_pattern;
using pagefile::test::TempDir;

namespace {

constexpr size_t kPage = 4096;

// A file of `pages` pages of page_pattern, open for reading and writing.
int make_file(const std::filesystem::path& path, int pages) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  for (int p = 0; p < pages; ++p) {
    auto bytes = page_pattern(kPage, p);
    REQUIRE(::pwrite(fd, bytes.data(), kPage, static_cast<off_t>(p) * kPage) == static_cast<ssize_t>(kPage));
  }
  return fd;
}

// Faults outside any copy: maps `path`, cuts it, and loads past its end.
[[noreturn]] void fault_outside_copy(const std::filesystem::path& path) {
  int fd = make_file(path, 2);
  auto* at = static_cast<volatile char*>(::mmap(nullptr, 2 * kPage, PROT_READ, MAP_SHARED, fd, 0));
  if (::ftruncate(fd, 0) != 0) ::_exit(3);
  (void)at[kPage];  // SIGBUS
  ::_exit(4);
}

void exit_42(int) { ::_exit(42); }

// A crash logger's way: note it, return, and let SA_RESETHAND's default
// action end the process at the fault's second time.
void log_and_return(int, siginfo_t*, void*) {}

}  // namespace

TEST_CASE("copies are the file's bytes, up to the length last seen; past it, none") {
  TempDir dir;
  int fd = make_file(dir / "f", 3);
  ReadMapping map(fd);
  std::vector<std::byte> out(kPage);
  CHECK_FALSE(map.copy(out, 0));  // no length seen yet
  map.saw_length(3 * kPage);
  for (int p = 0; p < 3; ++p) {
    REQUIRE(map.copy(out, static_cast<off_t>(p) * kPage));
    CHECK(out == page_pattern(kPage, p));
  }
  CHECK_FALSE(map.copy(out, 2 * kPage + 1));  // crosses the length
  CHECK_FALSE(map.copy(out, -1));
  // A write through the descriptor is seen by the next copy (one page cache).
  auto fresh = page_pattern(kPage, 77);
  REQUIRE(::pwrite(fd, fresh.data(), kPage, kPage) == static_cast<ssize_t>(kPage));
  REQUIRE(map.copy(out, kPage));
  CHECK(out == fresh);
  // Grown past the mapping's reserve: mapped again, the old bytes still there.
  const off_t far = 3 * ReadMapping::kMinReserve;
  REQUIRE(::ftruncate(fd, far + static_cast<off_t>(kPage)) == 0);
  map.saw_length(far + static_cast<off_t>(kPage));
  REQUIRE(map.copy(out, far));
  CHECK(out == std::vector<std::byte>(kPage));  // a hole
  REQUIRE(map.copy(out, 0));
  CHECK(out == page_pattern(kPage, 0));
  // A cut announced: nothing past it.
  map.will_cut(kPage);
  CHECK_FALSE(map.copy(out, kPage));
  CHECK(map.copy(out, 0));
  ::close(fd);
}

TEST_CASE("a file cut by another descriptor under the mapping: the copy fails, the process goes on") {
  TempDir dir;
  int fd = make_file(dir / "f", 4);
  ReadMapping map(fd);
  map.saw_length(4 * kPage);
  std::vector<std::byte> out(kPage);
  REQUIRE(map.copy(out, 3 * kPage));
  // Another process's truncate: this mapping is not told.
  int other = ::open((dir / "f").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(other >= 0);
  REQUIRE(::ftruncate(other, kPage) == 0);
  for (int i = 0; i < 3; ++i) CHECK_FALSE(map.copy(out, 3 * kPage));  // a SIGBUS each, caught
  REQUIRE(map.copy(out, 0));
  CHECK(out == page_pattern(kPage, 0));
  ::close(other);
  ::close(fd);
}

TEST_CASE("a Pagefile read through a mapping, cut by another descriptor: the pages past the cut read as beyond the end") {
  TempDir dir;
  auto path = dir / "f";
  LocalPagefile::OpenSpec spec;
  spec.page_size = 4096;
  spec.create = true;
  spec.map_reads = true;
  auto f = LocalPagefile::open(path, spec);
  REQUIRE(f.is_ok());
  for (int64_t p = 0; p < 6; ++p) REQUIRE((*f)->write_page(p, page_pattern(4096, p)).is_ok());
  REQUIRE((*f)->size_pages().is_ok());
  std::vector<std::byte> out(4096);
  auto got = (*f)->read_page(5, out);
  REQUIRE(got.is_ok());
  CHECK(*got == PageRead::kData);
  CHECK(out == page_pattern(4096, 5));
  // Cut inside its page 4 by a plain truncate, as a buggy or foreign
  // process might: no lock, nothing told. Page 4's system page is there,
  // zeros past the cut (no fault), page 5's is not (a fault).
  REQUIRE(::truncate(path.c_str(), (*f)->page_offset(4) + 100) == 0);
  for (int64_t p : {4, 5}) {
    CAPTURE(p);
    got = (*f)->read_page(p, out);
    REQUIRE(got.is_ok());
    CHECK(*got == PageRead::kBeyondEnd);
    CHECK(out == std::vector<std::byte>(4096));
  }
  got = (*f)->read_page(3, out);
  REQUIRE(got.is_ok());
  CHECK(*got == PageRead::kData);
  CHECK(out == page_pattern(4096, 3));
}

TEST_CASE("a copy in a thread that blocks SIGBUS is not made (the fault would end the process)") {
  TempDir dir;
  int fd = make_file(dir / "f", 4);
  ReadMapping map(fd);
  map.saw_length(4 * kPage);
  REQUIRE(::ftruncate(fd, kPage) == 0);  // (not told: a copy of page 3 would fault)
  bool copied_past = true;
  bool copied_first = false;
  std::thread blocking([&] {
    sigset_t bus;
    sigemptyset(&bus);
    sigaddset(&bus, SIGBUS);
    ::pthread_sigmask(SIG_BLOCK, &bus, nullptr);
    std::vector<std::byte> out(kPage);
    copied_past = map.copy(out, 3 * kPage);
    copied_first = map.copy(out, 0);  // (nor this one: pread's)
  });
  blocking.join();
  CHECK_FALSE(copied_past);
  CHECK_FALSE(copied_first);
  ::close(fd);
}

// Runs the case "sigbus child" in a fresh process (this test program again:
// this one has installed our handler already), with the action `previous`
// for SIGBUS before its first mapping ("default" or "handler"): how it
// ended.
int run_child(const std::filesystem::path& where, const char* previous) {
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::setenv("PAGEFILE_SIGBUS_CHILD", where.c_str(), 1);
    ::setenv("PAGEFILE_SIGBUS_PREVIOUS", previous, 1);
    ::execl("/proc/self/exe", "read_mapping_test", "-tc=sigbus child*", static_cast<char*>(nullptr));
    ::_exit(5);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  return status;
}

TEST_CASE("a fault outside a copy goes to the handler installed before, or ends the process") {
  TempDir dir;
  int status = run_child(dir / "a", "default");
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGBUS);

  status = run_child(dir / "b", "handler");
  CHECK(WIFEXITED(status));
  if (WIFEXITED(status)) CHECK(WEXITSTATUS(status) == 42);

  // A handler that returns, with SA_RESETHAND: once, then the default.
  status = run_child(dir / "c", "resethand");
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGBUS);

  // A SIGBUS sent (kill), not a fault, with the default action: the end.
  status = run_child(dir / "d", "sent");
  CHECK(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) CHECK(WTERMSIG(status) == SIGBUS);
}

TEST_CASE("sigbus child: a fault outside a copy, in a process that mapped a file (run by the case above)") {
  const char* where = ::getenv("PAGEFILE_SIGBUS_CHILD");
  const char* previous = ::getenv("PAGEFILE_SIGBUS_PREVIOUS");
  if (where == nullptr || previous == nullptr) return;  // only as the child of the case above
  const std::string_view mode = previous;
  // (SIG_DFL set here too: a sanitizer's runtime installs its own.)
  ::signal(SIGBUS, mode == "handler" ? exit_42 : SIG_DFL);
  if (mode == "resethand") {
    struct sigaction logger {};
    logger.sa_sigaction = log_and_return;
    sigemptyset(&logger.sa_mask);
    logger.sa_flags = SA_SIGINFO | SA_RESETHAND;
    ::sigaction(SIGBUS, &logger, nullptr);
  }
  int fd = make_file(std::string(where) + ".map", 1);
  ReadMapping map(fd);
  map.saw_length(kPage);
  std::vector<std::byte> out(kPage);
  REQUIRE(map.copy(out, 0));  // installs ours, over the one before
  if (mode == "sent") {
    ::kill(::getpid(), SIGBUS);
    ::_exit(6);
  }
  fault_outside_copy(where);  // ends by SIGBUS, or exits 42 from exit_42, through ours
}
