// A real pagefiled process for integration tests: started on loopback (or a
// Unix socket), stopped with SIGTERM (or killed) when the test is done.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

namespace pagefile::test {

// The pagefiled binary: $PAGEFILED, which meson sets for the tests.
std::string pagefiled_path();

// A free TCP port on 127.0.0.1 (bound, read, released).
int free_tcp_port();

class ServerProcess {
 public:
  // Starts `pagefiled --listen listen --dir dir` plus `extra` arguments and
  // waits (at most 10 s) for its "listening on" line. REQUIREs success.
  // `stderr_to`: a file its standard error goes to (else the test's).
  ServerProcess(const std::string& listen, const std::filesystem::path& dir,
                std::vector<std::string> extra = {}, const std::filesystem::path& stderr_to = {});
  ~ServerProcess();  // stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // The address it listens on, as it printed it.
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

  // SIGTERM and wait; returns the exit status (0 for a clean stop).
  int stop();
  // SIGKILL and wait.
  void kill();

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;  // its stdout
  std::string address_;
};

}  // namespace pagefile::test
