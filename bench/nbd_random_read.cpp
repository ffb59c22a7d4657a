// nbd_random_read: a peer for the cache-hit benchmark (bench/remote_concurrency.sh).
// Page reads from an NBD server (nbdkit's memory plugin in the benchmark)
// through libnbd's asynchronous API, keeping N reads in flight on one
// connection, as pf-replay keeps N Pagefile tickets in flight.
//
//   nbd_random_read --unix /tmp/nbd.sock --page-size 8192 --trace read.trace --concurrency 12
//   nbd_random_read --tcp 127.0.0.1:10809 --pages 6000 --ops 20000 --concurrency 4 --fill
//
// The pages come from the `read NAME PAGE` lines of a pf-replay trace (other
// lines are ignored), so both sides read the same pages in the same order;
// or, without --trace, --ops pages drawn uniformly from [0, --pages).
// --fill first writes every page of the disk, or the first --pages (untimed),
// so the server returns stored data rather than the zeros of a sparse disk.
// With --stamp NAME the pages written are pf-replay's stamps of file NAME
// (tools/pf_replay/page_stamp.h), and every page read is checked as
// pf-replay checks it (the stamp's checksum over the page, its file and its
// page number): both sides of the comparison then do the same work with
// the bytes they get.
//
// The loop: issue nbd_aio_pread until N are in flight, then poll(2) the
// handle's socket in the direction libnbd asks for and hand readiness back
// with nbd_aio_notify_read / nbd_aio_notify_write; each read's completion
// callback retires it and frees its buffer for the next one.
//
// Prints one line:
//   nbd_random_read: ops=20000 seconds=0.812345 ms_per_page=0.040617 pages_per_s=24620.1 concurrency=4 page_size=8192
// Exit status: 0 on success, 1 on an NBD error, 2 on a usage error.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <libnbd.h>

#include "tools/pf_replay/page_stamp.h"

namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int nbd_fail(const char* what) {
  fmt::print(stderr, "nbd_random_read: {}: {}\n", what, nbd_get_error());
  return kExitError;
}

// The pages of the trace's `read` lines, in order.
bool load_trace_reads(const std::string& path, std::vector<uint64_t>& pages) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string op, name;
    uint64_t page;
    if (words >> op && op == "read" && words >> name >> page) pages.push_back(page);
  }
  return true;
}

// One connection with up to `concurrency` commands in flight.
class Pipeline {
 public:
  // `stamp`: the file name whose pf-replay stamps the pages hold (written by
  // a write run, checked by a read run), or empty for bytes unchecked.
  Pipeline(nbd_handle* handle, uint32_t concurrency, uint32_t page_size, std::string stamp)
      : handle_(handle), stamp_(std::move(stamp)), buffers_(concurrency, std::vector<char>(page_size)),
        pages_(concurrency) {
    for (uint32_t i = 0; i < concurrency; ++i) free_.push_back(i);
    slots_.resize(concurrency);
    for (uint32_t i = 0; i < concurrency; ++i) slots_[i] = {this, i};
  }

  // Reads (or writes) page_size bytes at each of `pages` * page_size.
  // Returns false on an error (printed).
  bool run(const std::vector<uint64_t>& pages, bool write) {
    const size_t page_size = buffers_[0].size();
    checking_ = !write && !stamp_.empty();
    size_t next = 0;
    size_t done_before = done_;
    while (done_ - done_before < pages.size()) {
      while (next < pages.size() && !free_.empty()) {
        const uint32_t slot = free_.back();
        free_.pop_back();
        const uint64_t offset = pages[next] * page_size;
        pages_[slot] = pages[next];
        nbd_completion_callback completion = {.callback = &Pipeline::completed,
                                               .user_data = &slots_[slot],
                                               .free = nullptr};
        int64_t cookie;
        if (write) {
          if (!stamp_.empty()) {
            pf_replay::stamp_page(std::as_writable_bytes(std::span(buffers_[slot])), stamp_,
                                  static_cast<int64_t>(pages[next]), 1);
          } else {
            std::fill(buffers_[slot].begin(), buffers_[slot].end(), static_cast<char>(1 + pages[next] % 251));
          }
          cookie = nbd_aio_pwrite(handle_, buffers_[slot].data(), page_size, offset, completion, 0);
        } else {
          cookie = nbd_aio_pread(handle_, buffers_[slot].data(), page_size, offset, completion, 0);
        }
        if (cookie == -1) {
          nbd_fail(write ? "nbd_aio_pwrite" : "nbd_aio_pread");
          return false;
        }
        ++next;
      }
      if (!wait_once()) return false;
      if (failed_ != 0) {
        fmt::print(stderr, "nbd_random_read: a {} failed: {}\n", write ? "write" : "read",
                   std::strerror(failed_));
        return false;
      }
      if (!mismatch_.empty()) {
        fmt::print(stderr, "nbd_random_read: {}\n", mismatch_);
        return false;
      }
    }
    return true;
  }

 private:
  struct Slot {
    Pipeline* pipeline;
    uint32_t index;
  };

  static int completed(void* user_data, int* error) {
    auto* slot = static_cast<Slot*>(user_data);
    Pipeline* self = slot->pipeline;
    if (*error != 0 && self->failed_ == 0) self->failed_ = *error;
    if (*error == 0 && self->checking_ && self->mismatch_.empty()) {
      const std::vector<char>& buffer = self->buffers_[slot->index];
      const int64_t page = static_cast<int64_t>(self->pages_[slot->index]);
      pagefile::Status s = pf_replay::verify_stamp(std::as_bytes(std::span(buffer)), self->stamp_, page, std::nullopt);
      if (!s) self->mismatch_ = fmt::format("page {} read back wrong: {}", page, s.message());
    }
    self->free_.push_back(slot->index);
    ++self->done_;
    return 1;  // retire the command: no nbd_aio_command_completed needed
  }

  // Waits until the socket is ready the way libnbd wants, and tells it.
  bool wait_once() {
    const unsigned direction = nbd_aio_get_direction(handle_);
    pollfd p{};
    p.fd = nbd_aio_get_fd(handle_);
    if (p.fd == -1) return nbd_fail("nbd_aio_get_fd") == 0;
    if ((direction & LIBNBD_AIO_DIRECTION_READ) != 0) p.events |= POLLIN;
    if ((direction & LIBNBD_AIO_DIRECTION_WRITE) != 0) p.events |= POLLOUT;
    if (::poll(&p, 1, -1) == -1) {
      if (errno == EINTR) return true;
      fmt::print(stderr, "nbd_random_read: poll: {}\n", std::strerror(errno));
      return false;
    }
    if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
        (direction & LIBNBD_AIO_DIRECTION_READ) != 0) {
      if (nbd_aio_notify_read(handle_) == -1) return nbd_fail("nbd_aio_notify_read") == 0;
    } else if ((p.revents & POLLOUT) != 0) {
      if (nbd_aio_notify_write(handle_) == -1) return nbd_fail("nbd_aio_notify_write") == 0;
    }
    return true;
  }

  nbd_handle* handle_;
  const std::string stamp_;
  std::vector<std::vector<char>> buffers_;
  std::vector<uint64_t> pages_;  // the page each slot's command is for
  std::vector<uint32_t> free_;
  std::vector<Slot> slots_;
  size_t done_ = 0;
  int failed_ = 0;
  bool checking_ = false;  // a read run with stamps: completions check them
  std::string mismatch_;   // the first page read back wrong
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nbd_random_read: page reads from an NBD server with N in flight (libnbd aio)"};
  std::string unix_socket, tcp, trace;
  uint32_t page_size = 8192;
  uint32_t concurrency = 1;
  uint64_t pages_in_disk = 0;
  uint64_t ops = 0;
  uint64_t seed = 1;
  bool fill = false;
  std::string stamp;
  auto* unix_option = app.add_option("--unix", unix_socket, "the server's Unix socket");
  app.add_option("--tcp", tcp, "the server's HOST:PORT")->excludes(unix_option);
  app.add_option("--page-size", page_size, "bytes per read")->capture_default_str()
      ->check(CLI::Range(512u, 1u << 20));
  app.add_option("--concurrency", concurrency, "reads in flight")->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  auto* trace_option =
      app.add_option("--trace", trace, "read the pages of this pf-replay trace's read lines");
  app.add_option("--pages", pages_in_disk, "without --trace: pages to draw from (default: "
                                           "the disk's size / page size)");
  app.add_option("--ops", ops, "without --trace: reads to do")->excludes(trace_option);
  app.add_option("--seed", seed, "without --trace: seed of the page draw")->capture_default_str();
  app.add_flag("--fill", fill, "first write the disk's pages, or the first --pages (untimed)");
  app.add_option("--stamp", stamp, "pages hold pf-replay's stamps of this file name: --fill writes them, "
                                   "and every page read is checked as pf-replay checks it");
  CLI11_PARSE(app, argc, argv);
  if (unix_socket.empty() == tcp.empty()) {
    fmt::print(stderr, "nbd_random_read: give --unix PATH or --tcp HOST:PORT\n");
    return kExitUsage;
  }

  nbd_handle* handle = nbd_create();
  if (handle == nullptr) return nbd_fail("nbd_create");
  int connected;
  if (!unix_socket.empty()) {
    connected = nbd_connect_unix(handle, unix_socket.c_str());
  } else {
    const auto colon = tcp.rfind(':');
    if (colon == std::string::npos) {
      fmt::print(stderr, "nbd_random_read: --tcp {}: expected HOST:PORT\n", tcp);
      return kExitUsage;
    }
    connected = nbd_connect_tcp(handle, tcp.substr(0, colon).c_str(), tcp.substr(colon + 1).c_str());
  }
  if (connected == -1) return nbd_fail("connect");
  const int64_t disk_bytes = nbd_get_size(handle);
  if (disk_bytes < 0) return nbd_fail("nbd_get_size");
  const uint64_t disk_pages = static_cast<uint64_t>(disk_bytes) / page_size;
  if (pages_in_disk == 0) pages_in_disk = disk_pages;
  if (pages_in_disk > disk_pages || (pages_in_disk == 0 && ops > 0)) {
    fmt::print(stderr, "nbd_random_read: --pages {} does not fit the disk ({} pages of {} B)\n",
               pages_in_disk, disk_pages, page_size);
    return kExitUsage;
  }

  std::vector<uint64_t> pages;
  if (!trace.empty()) {
    if (!load_trace_reads(trace, pages)) {
      fmt::print(stderr, "nbd_random_read: cannot read {}\n", trace);
      return kExitUsage;
    }
  } else {
    std::mt19937_64 random(seed);
    std::uniform_int_distribution<uint64_t> draw(0, pages_in_disk - 1);
    for (uint64_t i = 0; i < ops; ++i) pages.push_back(draw(random));
  }
  const uint64_t highest = pages.empty() ? 0 : *std::max_element(pages.begin(), pages.end());
  if (!pages.empty() && highest >= disk_pages) {
    fmt::print(stderr, "nbd_random_read: page {} is beyond the disk ({} pages of {} B)\n",
               highest, disk_pages, page_size);
    return kExitUsage;
  }

  if (!stamp.empty() && page_size < pf_replay::kStampHeaderSize) {
    fmt::print(stderr, "nbd_random_read: --stamp needs pages of at least {} B\n", pf_replay::kStampHeaderSize);
    return kExitUsage;
  }
  Pipeline pipeline(handle, concurrency, page_size, stamp);
  if (fill) {
    std::vector<uint64_t> all(pages_in_disk);
    for (uint64_t p = 0; p < pages_in_disk; ++p) all[p] = p;
    if (!pipeline.run(all, /*write=*/true)) return kExitError;
  }
  const auto start = std::chrono::steady_clock::now();
  if (!pipeline.run(pages, /*write=*/false)) return kExitError;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  nbd_shutdown(handle, 0);
  nbd_close(handle);

  const double n = static_cast<double>(pages.size());
  fmt::print("nbd_random_read: ops={} seconds={:.6f} ms_per_page={:.6f} pages_per_s={:.1f} "
             "concurrency={} page_size={}\n",
             pages.size(), seconds, n > 0 ? seconds * 1000.0 / n : 0.0,
             seconds > 0 ? n / seconds : 0.0, concurrency, page_size);
  return 0;
}
