// The asynchronous page operations that local (PFLI) and remote (PFRI)
// Pagefiles share. The client's request/confirm machinery (client/client.cpp)
// sits on this interface and never learns where a page lives.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "pagefile/options.h"
#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pagefile {

class PageIo {
 public:
  using ReadDone = std::function<void(Result<PageRead>)>;
  using WriteDone = std::function<void(Status)>;

  virtual ~PageIo() = default;

  virtual const std::string& name() const = 0;
  virtual uint32_t page_size() const = 0;
  virtual BufferPolicy recorded_policy() const = 0;
  virtual bool read_only() const = 0;

  // Start one page read or write. `done` runs exactly once, on another
  // thread, never inside the call. REQUIRES: `out` / `data` stay valid until
  // `done` has run.
  virtual void read_async(int64_t page, std::span<std::byte> out, ReadDone done) = 0;
  virtual void write_async(int64_t page, std::span<const std::byte> data, WriteDone done) = 0;
  // A read done on the calling thread when that is cheap (a local page in
  // the page cache, a remote one of a server in this process); nothing when
  // it is not, and the caller then uses read_async. An answer, an error
  // too, is the read's outcome. The caller keeps it from overtaking its own
  // requests on the page.
  virtual std::optional<Result<PageRead>> read_direct(int64_t page, std::span<std::byte> out) {
    (void)page;
    (void)out;
    return std::nullopt;
  }
  // read_direct for a caller that waits for the read anyway: a page that
  // must come from a local disk is read here too, waiting for it as
  // read(2) does, which costs less than a hand-over to an I/O thread.
  virtual std::optional<Result<PageRead>> read_here(int64_t page, std::span<std::byte> out) {
    return read_direct(page, out);
  }
  // read_here of up to `count` pages from `first` in one read
  // (Client::read_pages_at_once): how many it read; nothing where pages
  // are not read so.
  virtual std::optional<Result<int64_t>> read_pages_here(int64_t first, int64_t count, std::span<std::byte> out) {
    (void)first;
    (void)count;
    (void)out;
    return std::nullopt;
  }
  // Reads out.size() bytes at `offset` in `page` on the calling thread,
  // unchecked, for a caller that compares them with the page as it last
  // read it whole (checked): how many it read (fewer at the end of the
  // file); nothing where pages are not read so (a remote file's).
  virtual std::optional<Result<size_t>> read_part_here(int64_t page, size_t offset, std::span<std::byte> out) {
    (void)page;
    (void)offset;
    (void)out;
    return std::nullopt;
  }
  // Likewise a write done on the calling thread when that is cheap (a
  // local file not opened O_DSYNC, a server in this process that emulates
  // no disk): its outcome when done; nothing when not, and the caller then
  // uses write_async. The caller keeps it from overtaking its own requests
  // on the page. `changed`: Client::write_at_once's.
  virtual std::optional<Status> write_direct(int64_t page, std::span<const std::byte> data, ChangedBytes changed) {
    (void)page;
    (void)data;
    (void)changed;
    return std::nullopt;
  }
  // Likewise the pages from `first` that `data` holds (whole pages, one
  // after the other), each as write_direct writes it but with fewer system
  // calls: nothing when not so (then write them one by one).
  virtual std::optional<Status> write_pages_here(int64_t first, std::span<const std::byte> data) {
    (void)first;
    (void)data;
    return std::nullopt;
  }
  // Whether read_direct or write_direct can ever answer, so callers skip them
  // (and what they do around them) for files where they never do.
  virtual bool may_be_direct() const { return false; }
  // Whether they always answer, errors aside (FileStatus::always_direct).
  virtual bool always_direct() const { return false; }
  // Whether a write, once done, is what every other client of the file
  // reads, its size included, with no sync: a local file's pages are the
  // system's page cache. A remote file's writes and size are published to
  // others by a sync.
  virtual bool shared_without_sync() const { return false; }

  // Waits at most `timeout` for this file's I/O to move on, doing on this
  // thread the work that delivers answers where it can (a remote page's
  // answer is read by the thread that waits for it, wire/transport.h), with
  // `page` the one waited for. Completions may then run on this thread: the
  // caller holds none of its own locks. Returns after some progress or the
  // timeout; the caller looks again at what it waits for. False, at once,
  // when completions come on other threads only: wait for them.
  virtual bool wait_for_progress(int64_t page, std::chrono::milliseconds timeout) {
    (void)page;
    (void)timeout;
    return false;
  }

  // Copies kept of each page (OpenOptions::replicas).
  virtual uint32_t replicas() const { return 1; }

  // The index, among the file's servers, of the one holding `page`.
  virtual uint32_t server_index(int64_t page) const {
    (void)page;
    return 0;  // a local file has one home
  }

  // Client::set_page_size: only a local file that holds no page changes
  // its page size.
  virtual Status set_empty_page_size(uint32_t) {
    return Status::invalid_argument(name(), "a remote file's page size is fixed at its creation");
  }

  // Blocking operations; the caller orders them against the page requests.
  virtual Status sync() = 0;
  virtual Status truncate(int64_t pages) = 0;
  virtual Result<int64_t> size_pages() = 0;
  virtual Status lock(LockMode mode, LockWait wait) = 0;
  virtual Status unlock() = 0;
  // SQLite's lock levels (Client::set_lock_level, reserved_elsewhere).
  virtual Status set_lock_level(LockLevel level) = 0;
  virtual Result<bool> reserved_elsewhere() = 0;
  // Client::unchanged_since_unlock. False when the file cannot tell.
  virtual bool unchanged_since_unlock() const { return false; }
  // Client::exclude_other_writers. Nothing where it buys nothing.
  virtual void exclude_other_writers(bool) {}

  // Called once by the client when the descriptor closes, after its
  // requests finished: record what must outlive it (a remote file's size)
  // and let go of locks.
  virtual Status close() { return Status::ok(); }
};

}  // namespace pagefile
