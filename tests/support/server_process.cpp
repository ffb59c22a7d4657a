#include "tests/support/server_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

#include <doctest/doctest.h>

namespace pagefile::test {

std::string pagefiled_path() {
  const char* path = std::getenv("PAGEFILED");
  REQUIRE_MESSAGE(path != nullptr, "PAGEFILED is not set (meson test sets it)");
  return path;
}

int free_tcp_port() {
  // The kernel may hand the same free port to two binds in a row once the
  // first socket is closed, and a cluster picks all its ports before any
  // server binds one: so never give a port twice in one process.
  static std::mutex mu;
  static std::set<int> given;
  std::lock_guard lock(mu);
  for (int attempt = 0; attempt < 100; ++attempt) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    socklen_t len = sizeof(addr);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    ::close(fd);
    int port = ntohs(addr.sin_port);
    if (given.insert(port).second) return port;
  }
  FAIL("no free TCP port unlike the ones given before");
  return 0;
}

ServerProcess::ServerProcess(const std::string& listen, const std::filesystem::path& dir,
                             std::vector<std::string> extra, const std::filesystem::path& stderr_to) {
  std::string binary = pagefiled_path();
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  std::vector<std::string> args = {binary, "--listen", listen, "--dir", dir.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  pid_ = ::fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    if (!stderr_to.empty()) {
      int err = ::open(stderr_to.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (err >= 0) ::dup2(err, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(binary.c_str(), argv.data());
    _exit(127);
  }
  ::close(out[1]);
  // Read until the "listening on" line, for at most 10 s.
  std::string text;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  const std::string marker = "listening on ";
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    ssize_t n = ::read(out[0], buf, sizeof(buf));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    auto at = text.find(marker);
    auto end = at == std::string::npos ? std::string::npos : text.find_first_of(" \n", at + marker.size());
    if (end != std::string::npos) {
      address_ = text.substr(at + marker.size(), end - at - marker.size());
      break;
    }
  }
  // Keep the pipe open: pagefiled prints again when it stops.
  out_fd_ = out[0];
  REQUIRE_MESSAGE(!address_.empty(), "pagefiled did not start: " << text);
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) stop();
}

int ServerProcess::stop() {
  if (pid_ <= 0) return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  ::close(out_fd_);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void ServerProcess::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  ::close(out_fd_);
}

}  // namespace pagefile::test
