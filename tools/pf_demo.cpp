// pf-demo: a short tour of the Pagefile API on a local Pagefile.
//
// Creates a file, writes pages with split request/confirm keeping up to
// --concurrency requests in flight, syncs, reads them back and checks them,
// shows a read past the end and the errors of a few bad calls, and prints
// what it did. Exit status 0 when every check held.
#include <chrono>
#include <cstdio>
#include <deque>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "pagefile/pagefile.h"

namespace {

using pagefile::Client;
using pagefile::Fd;
using pagefile::PageRead;
using pagefile::Status;
using pagefile::Ticket;

std::vector<std::byte> page_content(uint32_t page_size, int64_t page) {
  std::vector<std::byte> out(page_size);
  std::string label = fmt::format("pf-demo page {:08d} ", page);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::byte>(label[i % label.size()]);
  return out;
}

int fail(const Status& s) {
  fmt::print(stderr, "pf-demo: {}\n", s.to_string());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pf-demo: write, sync and read back a local Pagefile with split requests"};
  std::string dir = "pagefile-home/demo";
  uint32_t page_size = 8192;
  int64_t pages = 256;
  uint32_t concurrency = 8;
  app.add_option("--dir", dir, "directory of the local Pagefile")->capture_default_str();
  app.add_option("--page-size", page_size, "bytes per page")->capture_default_str();
  app.add_option("--pages", pages, "pages to write")->capture_default_str()->check(CLI::Range(1, 1 << 20));
  app.add_option("--concurrency", concurrency, "requests in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  CLI11_PARSE(app, argc, argv);

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail(Status::io_error(dir, ec.message()));

  auto client = Client::start({.local_dir = dir, .concurrency = concurrency});
  if (!client) return fail(client.status());
  (void)(*client)->unlink("demo.pf");  // start from nothing; absent is fine
  auto fd = (*client)->open("demo.pf", {.page_size = page_size, .create = true});
  if (!fd) return fail(fd.status());
  fmt::print("created {}/demo.pf: page size {} B, concurrency {}\n", dir, page_size, concurrency);

  // Writes: request ahead, confirm the oldest when the window is full.
  auto started = std::chrono::steady_clock::now();
  std::deque<Ticket> in_flight;
  for (int64_t p = 0; p < pages; ++p) {
    if (in_flight.size() == concurrency) {
      if (Status s = (*client)->write_confirm(in_flight.front()); !s) return fail(s);
      in_flight.pop_front();
    }
    auto t = (*client)->write_request(*fd, p, page_content(page_size, p));
    if (!t) return fail(t.status());
    in_flight.push_back(*t);
  }
  for (Ticket t : in_flight) {
    if (Status s = (*client)->write_confirm(t); !s) return fail(s);
  }
  if (Status s = (*client)->sync(*fd); !s) return fail(s);
  double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("wrote {} pages and synced them in {:.3f} s\n", pages, write_s);

  // Reads: the same pipeline, each buffer kept until its confirm.
  started = std::chrono::steady_clock::now();
  std::vector<std::vector<std::byte>> buffers(concurrency, std::vector<std::byte>(page_size));
  std::deque<std::pair<Ticket, int64_t>> reads;
  int64_t mismatches = 0;
  auto confirm_oldest = [&]() -> Status {
    auto [ticket, page] = reads.front();
    reads.pop_front();
    auto r = (*client)->read_confirm(ticket);
    if (!r) return r.status();
    if (*r != PageRead::kData || buffers[page % concurrency] != page_content(page_size, page)) {
      ++mismatches;
    }
    return Status::ok();
  };
  for (int64_t p = 0; p < pages; ++p) {
    if (reads.size() == concurrency) {
      if (Status s = confirm_oldest(); !s) return fail(s);
    }
    auto t = (*client)->read_request(*fd, p, buffers[p % concurrency]);
    if (!t) return fail(t.status());
    reads.emplace_back(*t, p);
  }
  while (!reads.empty()) {
    if (Status s = confirm_oldest(); !s) return fail(s);
  }
  double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  fmt::print("read {} pages back in {:.3f} s: {} mismatches\n", pages, read_s, mismatches);

  std::vector<std::byte> buffer(page_size);
  auto past = (*client)->read(*fd, pages, buffer);
  if (!past) return fail(past.status());
  fmt::print("read of page {} (past the end): {}\n", pages,
             *past == PageRead::kBeyondEnd ? "beyond end, zero-filled" : "data (unexpected)");

  auto st = (*client)->status(*fd);
  if (!st) return fail(st.status());
  fmt::print("status: {} pages of {} B, policy {}, concurrency {}\n", st->pages, st->page_size,
             pagefile::access_type_name(st->policy.access), st->concurrency);

  fmt::print("bad calls get clear errors:\n");
  std::vector<std::byte> short_buffer(page_size / 2);
  fmt::print("  {}\n", (*client)->read(*fd, 0, short_buffer).status().to_string());
  fmt::print("  {}\n", (*client)->read(*fd, -1, buffer).status().to_string());
  fmt::print("  {}\n", (*client)->open("demo.pf", {.page_size = page_size * 2}).status().to_string());
  fmt::print("  {}\n", (*client)->open("missing.pf").status().to_string());
  fmt::print("  {}\n", (*client)->write_confirm(Ticket{1}).to_string());

  if (Status s = (*client)->close(*fd); !s) return fail(s);
  if (Status s = (*client)->stop(); !s) return fail(s);
  bool ok = mismatches == 0 && *past == PageRead::kBeyondEnd && st->pages == pages;
  fmt::print("{}\n", ok ? "pf-demo: all checks held" : "pf-demo: CHECKS FAILED");
  return ok ? 0 : 1;
}
