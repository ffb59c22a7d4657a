// The client's private parts (client/): the descriptor and ticket tables,
// each open file's window and page queues, and the rules that keep them.
// requests.cpp holds the request path (window, page order, completion),
// files.cpp the calls on whole files, client.cpp the public facade.
//
// PFEI: descriptors, tickets, the concurrency window and per-page order.
//
// Locking: one mutex (mu_) guards every table and every OpenFile and Request
// field; one condition variable (done_cv_) is notified whenever a request
// finishes or a file's state changes. Page I/O never runs under mu_:
// requests are handed to PageIo after the lock is dropped, and completions
// take it only to record their result. A write that an in-process server
// does directly (PageIo::write_direct) is registered first, at the front of its
// page's queue, so that it keeps its place while mu_ is free. A write at
// once (write_at_once: no ticket, nothing queued on its page) is counted
// instead (OpenFile::writing_at_once, by page), and sync, close and
// truncate wait for none to be under way, a write request of the page for
// the one of its page.
//
// Waiting: a thread that waits for a remote request (a confirm, room in the
// window, sync, close) drops mu_ and reads the answers of that request's
// server itself (PageIo::wait_for_progress, wait_locked), so completions
// may run on any waiting thread; they take mu_ like any other.
//
// Lifetimes: a Request is shared by the ticket table, its file's window and
// page queue, and the I/O callback; an OpenFile by the descriptor table and
// any thread waiting on it. close() waits until no request of the file is
// incomplete, so no callback touches a file after it is gone.
//
// The buffer pool (cache_, policies/buffer_pool.h) is off when cache_pages is
// 0, and then nothing below touches it. With it, lock order is mu_ then the
// pool's own lock. A read is looked up in the pool when it reaches the front
// of its page's queue (so it sees every earlier request of that page); a
// write updates the pool when it is requested; a read's data is kept only
// when no write of the page is queued behind it, so the pool never holds a
// page older than the last write requested. Read-ahead requests are
// requests like the others (window, page queue, incomplete set) without a
// ticket: they leave the window when their I/O is done.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "core/mutex.h"
#include "policies/buffer_pool.h"
#include "store/local_page_io.h"
#include "store/local_pagefile.h"
#include "core/page_bounds.h"
#include "core/page_io.h"
#include "core/work_pool.h"
#include "bus/bus_client.h"
#include "bus/remote_page_io.h"
#include "pagefile/pagefile.h"
#include "pagefile/policy.h"

namespace pagefile {

namespace client_detail {

struct OpenFile;

struct Request {
  uint64_t ticket = 0;
  std::shared_ptr<OpenFile> file;
  bool is_write = false;
  int64_t page = 0;
  std::span<std::byte> read_buffer;   // reads: the caller's buffer
  std::vector<std::byte> write_data;  // writes: our copy of the page
  // A read-ahead: no ticket, reads into its own buffer for the pool.
  bool prefetch = false;
  std::vector<std::byte> prefetch_buffer;
  bool miss_counted = false;  // the pool was asked and its miss counted
  uint64_t pool_drops = 0;     // reads: OpenFile::pool_drops when issued

  bool done = false;       // the I/O has finished
  bool in_window = true;   // counts against its file's concurrency window
  bool confirming = false;  // a thread is confirming it
  Status status;           // the I/O's error, if any
  PageRead read_result = PageRead::kData;
};
using RequestPtr = std::shared_ptr<Request>;

struct OpenFile {
  Fd fd;
  std::string name;
  Location location = Location::kLocal;
  // Shared so that a call running outside mu_ (sync, a blocking lock) keeps
  // the file open even when another thread closes the descriptor meanwhile.
  std::shared_ptr<PageIo> io;
  BufferPolicy policy;
  uint32_t concurrency = 1;

  bool closing = false;   // close() has begun: no new requests
  bool exclusive = false;  // truncate is running: new requests wait

  // The pages of the Client::write_at_once calls under way (outside mu_;
  // as many as threads writing so at once), and the threads waiting for
  // them to end (sync, close, truncate, a write request of such a page):
  // while any waits, no new one starts, so the wait is bounded.
  std::vector<int64_t> writing_at_once;
  uint32_t awaiting_at_once = 0;

  // Tickets in issue order that count against the window (lazily pruned:
  // entries whose in_window is false are skipped).
  std::deque<RequestPtr> window;
  uint32_t in_window = 0;

  // Requests of each page in issue order; only the front one is running.
  std::unordered_map<int64_t, std::deque<RequestPtr>> page_queues;

  // Tickets whose I/O has not finished; ordered, so "everything before
  // ticket T" is a look at the smallest.
  std::set<uint64_t> incomplete;
  std::set<uint64_t> incomplete_writes;

  // Pages whose latest write failed: not on disk, so the next sync says so
  // (once, as fsync reports a failed write back once: the failure is that
  // sync's, not the file's for ever), and a read of one fails with the
  // error rather than give bytes that were never written. A later
  // successful write or a truncate below them clears it.
  struct FailedWrite {
    Status error;
    bool reported = false;  // a sync has said so
  };
  std::map<int64_t, FailedWrite> failed_pages;
  // Records the outcome of a write of `page` (a request's or one at once).
  void write_done(int64_t page, const Status& status) {
    if (status.is_ok()) {
      failed_pages.erase(page);
    } else {
      failed_pages.insert_or_assign(page, FailedWrite{status});
    }
  }

  // Counts what changes pages under the pool (writes requested, truncates,
  // drops), so a read_direct that ran outside mu_ can tell whether its page
  // may have changed meanwhile, and then leaves the pool alone.
  uint64_t pool_changes = 0;
  // Counts what empties the file's pool at once (drop_cached, an exclusive
  // operation such as truncate): a read issued before one fills nothing
  // when it ends after it, since what it read may be what the drop was
  // for (another client's commit since).
  uint64_t pool_drops = 0;

  // Read-ahead asks for no page at or past this one: a read found it past
  // the end of the file. Requests past the end bring nothing but fill the
  // window, and the reads behind them find no room to read ahead and miss
  // (a scan that starts again at page 0 meets a whole window of them). A
  // hint, following what this client sees: a write past it moves it; data
  // found past it (another client grew the file), dropped pages and a
  // failed truncate forget it.
  static constexpr int64_t kEndUnknown = std::numeric_limits<int64_t>::max();
  int64_t read_ahead_end = kEndUnknown;
  void end_seen_by_read(int64_t page, PageRead result) {
    if (result == PageRead::kBeyondEnd) {
      read_ahead_end = std::min(read_ahead_end, page);
    } else if (page >= read_ahead_end) {
      read_ahead_end = kEndUnknown;
    }
  }
  void end_seen_by_write(int64_t page) {
    if (page >= read_ahead_end) read_ahead_end = page + 1;
  }
};
using OpenFilePtr = std::shared_ptr<OpenFile>;

}  // namespace client_detail

using client_detail::OpenFile;
using client_detail::OpenFilePtr;
using client_detail::Request;
using client_detail::RequestPtr;

class Client::Impl {
 public:
  explicit Impl(const ClientOptions& options)
      : options_(options),
        policies_(options.policies ? options.policies : PolicyRegistry::with_builtins()),
        cache_(options.cache_pages > 0 ? std::make_unique<BufferPool>(options.cache_pages) : nullptr) {}

  ~Impl() { (void)stop(); }

  Status stop();
  Result<Fd> open(std::string_view name, const OpenOptions& options);
  Status close(Fd fd);
  Result<Ticket> request(Fd fd, int64_t page, std::span<std::byte> read_buffer,
                         std::span<const std::byte> write_data, bool is_write);
  Result<RequestPtr> confirm(Ticket ticket, bool is_write);
  // The file's PageIo when pages [first, first + count) may be read on
  // this thread now (read_at_once's conditions), into a buffer of
  // `buffer_size` bytes: at least `count` pages, or with no count exactly
  // page `first`; nothing when not; an error for a bad page or buffer.
  std::optional<Result<std::shared_ptr<PageIo>>> reader_at_once(Fd fd, int64_t first, std::optional<int64_t> count,
                                                                size_t buffer_size) EXCLUDES(mu_);
  // Client::read_at_once.
  std::optional<Result<PageRead>> read_at_once(Fd fd, int64_t page, std::span<std::byte> buffer, bool may_wait)
      EXCLUDES(mu_);
  // Client::read_pages_at_once.
  std::optional<Result<int64_t>> read_pages_at_once(Fd fd, int64_t first, int64_t count,
                                                    std::span<std::byte> buffer) EXCLUDES(mu_);
  // Client::write_at_once (`count` 1) and write_pages_at_once (`count` -1:
  // as many pages as `data` holds).
  std::optional<Status> write_at_once(Fd fd, int64_t first, int64_t count, std::span<const std::byte> data,
                                      ChangedBytes changed) EXCLUDES(mu_);
  Status sync(Fd fd);
  Status truncate(Fd fd, int64_t pages);
  Status set_page_size(Fd fd, uint32_t page_size);
  Result<FileStatus> status(Fd fd);
  Result<Client::Size> size(Fd fd);
  Status set_concurrency(Fd fd, uint32_t concurrency);
  Status unlink(std::string_view name, Location location, uint64_t lock_token);
  Status set_request_timeout(int ms) EXCLUDES(bus_mu_);
  int request_timeout_ms() const { return request_timeout_ms_; }
  Status lock(Fd fd, LockMode mode, LockWait wait);
  Status unlock(Fd fd);
  // The file's PageIo, kept alive for a call made outside mu_.
  Result<std::shared_ptr<PageIo>> io_of(Fd fd);
  // stop() has begun (ClientAccess::stopped).
  bool stopping() const { return stopping_.load(); }
  Status pin(Fd fd, int64_t page);
  Status unpin(Fd fd, int64_t page);
  Status drop_cached(Fd fd);
  Status abandon_failed_writes(Fd fd);
  Result<FileCounters> counters(Fd fd);

 private:
  // The open file of `fd`, or kInvalidArgument.
  Result<OpenFilePtr> find_file(Fd fd) const REQUIRES(mu_);
  // The file's size as status() and size() give it, counted with no lock
  // held (a count may read the disk).
  static Result<Client::Size> size_of(PageIo& io);
  // Waits until no write_at_once of `file` (of `page` only, when given) is
  // under way.
  void await_writes_at_once_locked(const OpenFilePtr& file, std::optional<int64_t> page = std::nullopt)
      REQUIRES(mu_);
  // Runs `op` on the file's PageIo once its earlier requests are done, with
  // new ones waiting (OpenFile::exclusive) until it returns: truncate and
  // the page size changes. `op` runs without mu_.
  Status exclusively(Fd fd, std::string_view what, const std::function<Status(OpenFile&)>& op) EXCLUDES(mu_);
  Status check_running() const REQUIRES(mu_);
  std::filesystem::path local_path(std::string_view name) const;
  // The bus, started on first use.
  Result<std::shared_ptr<net::BusClient>> bus() EXCLUDES(bus_mu_);
  // Hands a request to its file's PageIo. Called without mu_.
  void dispatch(const RequestPtr& request) EXCLUDES(mu_);
  void complete(const RequestPtr& request, Status status, PageRead read_result) EXCLUDES(mu_);
  // Records that `request` finished and takes it off its
  // page's queue; returns the request now at the front, if any.
  RequestPtr finish_locked(const RequestPtr& request, Status status, PageRead read_result) REQUIRES(mu_);
  // `request` (may be null) is at the front of its page
  // queue. Serves it, and the reads behind it, from the pool while it can;
  // returns the request whose I/O must be dispatched, or null.
  RequestPtr start_locked(RequestPtr request) REQUIRES(mu_);
  // Queues read-ahead requests after a read of `page`
  // while the window has room; appends those to dispatch to `out`.
  void read_ahead_locked(const OpenFilePtr& file, int64_t page, std::vector<RequestPtr>& out) REQUIRES(mu_);
  // Waits until no truncate runs on `file` and
  // its window has room; kInvalidArgument when it was closed meanwhile.
  Status wait_for_room_locked(const OpenFilePtr& file, Fd fd) REQUIRES(mu_);
  // A request of `page` with the next ticket.
  RequestPtr new_request_locked(const OpenFilePtr& file, int64_t page, bool is_write) REQUIRES(mu_);
  // Nothing is queued on `page`. Registers a write of
  // `page` about to be done by plain call (PageIo::write_direct) outside mu_:
  // ticket, page queue and incomplete writes, outside the window.
  RequestPtr begin_direct_write_locked(const OpenFilePtr& file, int64_t page, std::span<const std::byte> data)
      REQUIRES(mu_);
  // Waits until `ready()` (called with mu_ held), letting go of mu_ meanwhile. While the request
  // it waits for (`awaited`, else the oldest of `file` still in flight) is
  // unfinished, a remote file's answers are read on this thread meanwhile
  // (PageIo::wait_for_progress), which saves handing each one over from
  // another thread; otherwise it waits on done_cv_.
  template <class Ready>
  void wait_locked(const OpenFilePtr& file, RequestPtr awaited, Ready ready) REQUIRES(mu_);
  // Wakes every waiter to look again: those on done_cv_ and those reading
  // a bus's answers meanwhile (wait_locked).
  void notify_waiters();
  // A request of `page` that finished as it was asked for (a pool hit, a
  // read_direct or write_direct): its ticket, done and outside the window.
  RequestPtr done_locked(const OpenFilePtr& file, int64_t page, bool is_write) REQUIRES(mu_);
  // done_locked for a read, with its result; with a pool, the read-ahead it
  // calls for goes to `out`.
  RequestPtr read_done_locked(const OpenFilePtr& file, int64_t page, std::span<std::byte> buffer,
                              PageRead result, std::vector<RequestPtr>& out) REQUIRES(mu_);

  const ClientOptions options_;
  std::atomic<int> request_timeout_ms_{options_.request_timeout_ms};  // set_request_timeout
  // The threads of local Pagefiles' page I/O, started at the first local
  // open: a client of remote files only (the VFS on a bus) runs none.
  WorkPool& local_pool();
  std::once_flag pool_started_;
  std::optional<WorkPool> pool_;
  const std::shared_ptr<const PolicyRegistry> policies_;
  const std::unique_ptr<BufferPool> cache_;  // null: no pool

  mutable Mutex mu_;
  CondVar done_cv_;
  bool stopped_ GUARDED_BY(mu_) = false;
  // Set as stop() begins, before it closes the descriptors: read without
  // mu_ by callers that hold a descriptor's PageIo (client/client_access.h).
  std::atomic<bool> stopping_{false};
  uint64_t next_fd_ GUARDED_BY(mu_) = 1;
  uint64_t next_ticket_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, OpenFilePtr> files_ GUARDED_BY(mu_);
  std::unordered_map<uint64_t, RequestPtr> tickets_ GUARDED_BY(mu_);

  Mutex bus_mu_;  // held while the bus starts, which may take a while
  std::shared_ptr<net::BusClient> bus_ GUARDED_BY(bus_mu_);
  // bus_, for notify_waiters() to reach its waiters without bus_mu_; null
  // again before the bus stops.
  std::atomic<net::BusClient*> waking_bus_{nullptr};
};

namespace client_detail {

inline std::string fd_text(Fd fd) { return fmt::format("descriptor {}", fd.value); }

// REQUIRES: mu_ held; `request` is at the front of its page's queue.
// Whether a write of the page was requested after it.
inline bool write_queued_behind(const Request& request) {
  const auto& queue = request.file->page_queues.at(request.page);
  return std::any_of(queue.begin() + 1, queue.end(), [](const RequestPtr& r) { return r->is_write; });
}

// Drops window entries that no longer count.
inline void prune_window(OpenFile& file) {
  while (!file.window.empty() && !file.window.front()->in_window) file.window.pop_front();
}

inline void leave_window(OpenFile& file, Request& request) {
  if (request.in_window) {
    request.in_window = false;
    --file.in_window;
  }
  prune_window(file);
}

}  // namespace client_detail

using client_detail::fd_text;
using client_detail::leave_window;
using client_detail::prune_window;
using client_detail::write_queued_behind;

template <class Ready>
void Client::Impl::wait_locked(const OpenFilePtr& file, RequestPtr awaited, Ready ready) {
  while (!ready()) {
    if (!awaited || awaited->done) {
      awaited = nullptr;
      for (const RequestPtr& r : file->window) {
        if (!r->done) {
          awaited = r;
          break;
        }
      }
    }
    if (awaited) {
      std::shared_ptr<PageIo> io = file->io;
      const int64_t page = awaited->page;
      mu_.unlock();
      const bool waited = io->wait_for_progress(page, net::BusClient::kWaiterSlice);
      mu_.lock();
      if (waited) continue;
      if (ready()) return;  // (it may have come while mu_ was free)
    }
    done_cv_.wait(mu_);
  }
}

}  // namespace pagefile
