// vfs_worker processes ($VFS_WORKER, tests/vfs/vfs_worker.cpp) for the
// multi-process VFS tests: started, watched and reaped, every wait bounded.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"

namespace pagefile::test {

// Starts vfs_worker with `args`, its standard output to `out`; returns its
// pid. It inherits this process's environment (PAGEFILE_BUS among it).
inline pid_t start_worker(const std::filesystem::path& out, const std::vector<std::string>& args) {
  std::string w = binary_from_env("VFS_WORKER");
  std::vector<std::string> copy = args;
  std::vector<char*> argv{w.data()};
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    FILE* f = std::freopen(out.c_str(), "w", stdout);
    (void)f;
    ::execv(w.c_str(), argv.data());
    ::_exit(127);
  }
  return pid;
}

// The same, its output to wd/out.txt.
inline pid_t start_worker(const TempDir& wd, const std::vector<std::string>& args) {
  return start_worker(wd / "out.txt", args);
}

// Waits for worker `pid` to exit, killing it after `limit`: its exit
// status, 128 + the signal when a signal ended it.
inline int wait_worker(pid_t pid, std::chrono::milliseconds limit = std::chrono::seconds(120)) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Runs vfs_worker with `args` to its end (start_worker, then wait_worker):
// its exit status.
inline int run_worker(const std::filesystem::path& out, const std::vector<std::string>& args) {
  return wait_worker(start_worker(out, args));
}

}  // namespace pagefile::test
