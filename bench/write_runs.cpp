// What a page's write costs the kernel, alone or in a run (bench/README.md,
// "Runs of pages"): 4 KiB pages appended to a new file, or written over
// pages of an existing one, with one pwrite each or one pwritev per run.
// The two take turns in each round; medians of the rounds, in microseconds
// a page.
//
//   build/bench/write_runs --dir /tmp --rounds 40 --run 16
#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

namespace {

constexpr size_t kPage = 4096;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Microseconds a page: `pages` pages from page 0 (every `stride`th), one
// pwrite each (run 1) or one pwritev per `run` of them.
double write_pages(int fd, int pages, int stride, int run, const std::vector<char>& bytes) {
  std::vector<iovec> iov(static_cast<size_t>(run));
  for (auto& v : iov) {
    v.iov_base = const_cast<char*>(bytes.data());
    v.iov_len = kPage;
  }
  auto start = std::chrono::steady_clock::now();
  for (int p = 0; p < pages; p += run) {
    off_t at = static_cast<off_t>(p) * stride * static_cast<off_t>(kPage);
    ssize_t n = run == 1 ? ::pwrite(fd, bytes.data(), kPage, at) : ::pwritev(fd, iov.data(), run, at);
    if (n != static_cast<ssize_t>(kPage) * run) {
      std::perror("write");
      std::exit(1);
    }
  }
  std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
  return took.count() / pages;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"A page's write: alone or in a run, appended or written over"};
  std::string dir;
  int rounds = 40;
  int run = 16;
  int pages = 1024;
  app.add_option("--dir", dir, "a folder on the disk to measure")->required()->check(CLI::ExistingDirectory);
  app.add_option("--rounds", rounds)->check(CLI::Range(1, 10000));
  app.add_option("--run", run, "pages a pwritev writes")->check(CLI::Range(2, 1024));
  app.add_option("--pages", pages, "pages a round writes")->check(CLI::Range(16, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  pages -= pages % run;
  const std::vector<char> bytes(kPage, 7);
  const std::string path = dir + "/write_runs.tmp";
  std::vector<double> append_one, append_run, over_one, over_run;
  for (int r = 0; r < rounds; ++r) {
    for (int mode = 0; mode < 2; ++mode) {
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) {
        std::perror(path.c_str());
        return 1;
      }
      (mode == 0 ? append_one : append_run).push_back(write_pages(fd, pages, 1, mode == 0 ? 1 : run, bytes));
      ::fdatasync(fd);
      // Written over: the same pages again, in the page cache and on disk.
      (mode == 0 ? over_one : over_run).push_back(write_pages(fd, pages, 1, mode == 0 ? 1 : run, bytes));
      ::close(fd);
      ::unlink(path.c_str());
    }
  }
  fmt::print("{} rounds of {} pages of 4 KiB, medians in us a page\n", rounds, pages);
  fmt::print("appended:     one pwrite each {:.2f}, pwritev of {} {:.2f}\n", median(append_one), run, median(append_run));
  fmt::print("written over: one pwrite each {:.2f}, pwritev of {} {:.2f}\n", median(over_one), run, median(over_run));
  return 0;
}
