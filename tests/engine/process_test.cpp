// Several processes on one local Pagefile: data written and synced by one
// process is read by another, and OS file locks keep processes apart.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::page_pattern;
using pagefile::test::TempDir;

namespace {

// Runs `body` in a child process (which starts a client of its own, after
// fork, so no thread crosses the fork) and returns the child's pid.
template <class F>
pid_t spawn(F body) {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) _exit(body());
  return pid;
}

int wait_exit(pid_t pid) {
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("pages written and synced by one process are read by another") {
  TempDir dir;
  pid_t writer = spawn([&] {
    auto client = Client::start({.local_dir = dir.path(), .concurrency = 12});
    if (!client) return 10;
    auto fd = (*client)->open("shared.pf", {.page_size = 8192, .create = true});
    if (!fd) return 11;
    std::vector<Ticket> tickets;
    for (int64_t p = 0; p < 300; ++p) {
      auto t = (*client)->write_request(*fd, p, page_pattern(8192, p, 42));
      if (!t) return 12;
      tickets.push_back(*t);
    }
    for (Ticket t : tickets) if (!(*client)->write_confirm(t)) return 13;
    if (!(*client)->sync(*fd)) return 14;
    return 0;  // no close, no stop: the process just ends after sync
  });
  REQUIRE(wait_exit(writer) == 0);

  auto client = *Client::start({.local_dir = dir.path()});
  auto fd = client->open("shared.pf");
  REQUIRE_OK(fd);
  CHECK(client->status(*fd)->pages == 300);
  std::vector<std::byte> buf(8192);
  for (int64_t p = 0; p < 300; ++p) {
    REQUIRE(*client->read(*fd, p, buf) == PageRead::kData);
    CHECK(buf == page_pattern(8192, p, 42));
  }
}

TEST_CASE("a lock held by another process is busy, and free once it dies") {
  TempDir dir;
  {
    auto client = *Client::start({.local_dir = dir.path()});
    REQUIRE_OK(client->open("locked.pf", {.create = true}));
  }
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  pid_t holder = spawn([&] {
    ::close(ready[0]);
    auto client = Client::start({.local_dir = dir.path()});
    if (!client) return 10;
    auto fd = (*client)->open("locked.pf");
    if (!fd || !(*client)->lock(*fd, LockMode::kExclusive)) return 11;
    char c = 'x';
    if (::write(ready[1], &c, 1) != 1) return 12;
    ::pause();  // hold the lock until killed
    return 0;
  });
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);

  auto client = *Client::start({.local_dir = dir.path()});
  Fd fd = *client->open("locked.pf");
  CHECK_CODE(client->lock(fd, LockMode::kShared, LockWait::kTry), Code::kBusy);
  CHECK_CODE(client->lock(fd, LockMode::kExclusive, LockWait::kTry), Code::kBusy);
  ::kill(holder, SIGKILL);
  CHECK(wait_exit(holder) == 128 + SIGKILL);
  CHECK_OK(client->lock(fd, LockMode::kExclusive, LockWait::kTry));
}
