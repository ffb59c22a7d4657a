// Several processes on one local Pagefile: data written and synced by one
// process is read by another, and OS file locks keep processes apart.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

using namespace pagefile;
using pagefile::test::page_pattern;
using pagefile::test::TempDir;

namespace {

// The children's work. Each child is this test program started afresh
// (fork, then exec of /proc/self/exe), so it begins single-threaded: a
// child that went on running after fork would inherit the parent's threads'
// locks (the test watchdog's, the sanitizers'), and under ASan one such
// child deadlocked in the allocator now and then.
int writer(const std::filesystem::path& dir) {
  auto client = Client::start({.local_dir = dir, .concurrency = 12});
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
  _exit(0);  // no close, no stop: the process just ends after sync
}

int holder(const std::filesystem::path& dir, int ready) {
  auto client = Client::start({.local_dir = dir});
  if (!client) return 10;
  auto fd = (*client)->open("locked.pf");
  if (!fd || !(*client)->lock(*fd, LockMode::kExclusive)) return 11;
  char c = 'x';
  if (::write(ready, &c, 1) != 1) return 12;
  ::pause();  // hold the lock until killed
  return 0;
}

// In a child, runs its role before main and exits.
const int kChild = [] {
  const char* role = std::getenv("PF_PROCESS_TEST_ROLE");
  if (role == nullptr) return 0;
  std::filesystem::path dir = std::getenv("PF_PROCESS_TEST_DIR");
  if (std::string(role) == "writer") _exit(writer(dir));
  if (std::string(role) == "holder") _exit(holder(dir, std::atoi(std::getenv("PF_PROCESS_TEST_FD"))));
  _exit(99);
}();

// Starts this program again as a child in `role` and returns its pid.
pid_t spawn(const std::string& role, const std::filesystem::path& dir, int fd = -1) {
  // Everything exec needs is made before fork: after it, only exec.
  std::vector<std::string> vars = {"PF_PROCESS_TEST_ROLE=" + role, "PF_PROCESS_TEST_DIR=" + dir.string(),
                                   "PF_PROCESS_TEST_FD=" + std::to_string(fd)};
  std::vector<char*> env;
  for (auto& v : vars) env.push_back(v.data());
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(nullptr);
  char self[] = "/proc/self/exe";
  char* argv[] = {self, nullptr};
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::execve(self, argv, env.data());
    _exit(98);
  }
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
  pid_t child = spawn("writer", dir.path());
  REQUIRE(wait_exit(child) == 0);

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
  pid_t child = spawn("holder", dir.path(), ready[1]);
  ::close(ready[1]);
  char c = 0;
  REQUIRE(::read(ready[0], &c, 1) == 1);
  ::close(ready[0]);

  auto client = *Client::start({.local_dir = dir.path()});
  Fd fd = *client->open("locked.pf");
  CHECK_CODE(client->lock(fd, LockMode::kShared, LockWait::kTry), Code::kBusy);
  CHECK_CODE(client->lock(fd, LockMode::kExclusive, LockWait::kTry), Code::kBusy);
  ::kill(child, SIGKILL);
  CHECK(wait_exit(child) == 128 + SIGKILL);
  CHECK_OK(client->lock(fd, LockMode::kExclusive, LockWait::kTry));
}
