// PFEI: descriptors, tickets, the concurrency window and per-page order.
//
// Locking: one mutex (mu_) guards every table and every OpenFile and Request
// field; one condition variable (done_cv_) is notified whenever a request
// finishes or a file's state changes. Page I/O never runs under mu_:
// requests are handed to PageIo after the lock is dropped, and completions
// take it only to record their result. A write that an in-process server
// does at once (PageIo::write_now) is registered first, at the front of its
// page's queue, so that it keeps its place while mu_ is free.
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
#include <boost/asio/thread_pool.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "policies/buffer_pool.h"
#include "store/local_page_io.h"
#include "store/local_pagefile.h"
#include "core/page_bounds.h"
#include "core/page_io.h"
#include "bus/bus_client.h"
#include "bus/remote_page_io.h"
#include "pagefile/pagefile.h"
#include "pagefile/policy.h"

namespace pagefile {

namespace {

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

  // Pages whose latest write failed: not on disk, so sync must not say
  // they are. A later successful write or a truncate below them clears it.
  std::map<int64_t, Status> failed_pages;

  // Counts what changes pages under the pool (writes requested, truncates,
  // drops), so a read_now that ran outside mu_ can tell whether its page
  // may have changed meanwhile, and then leaves the pool alone.
  uint64_t pool_changes = 0;
};
using OpenFilePtr = std::shared_ptr<OpenFile>;

}  // namespace

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
  Status sync(Fd fd);
  Status truncate(Fd fd, int64_t pages);
  Result<FileStatus> status(Fd fd);
  Status set_concurrency(Fd fd, uint32_t concurrency);
  Status unlink(std::string_view name, Location location);
  Status lock(Fd fd, LockMode mode, LockWait wait);
  Status unlock(Fd fd);
  // The file's PageIo, kept alive for a call made outside mu_.
  Result<std::shared_ptr<PageIo>> io_of(Fd fd);
  Status pin(Fd fd, int64_t page);
  Status unpin(Fd fd, int64_t page);
  Status drop_cached(Fd fd);
  Result<FileCounters> counters(Fd fd);

 private:
  // REQUIRES: mu_ held. The open file of `fd`, or kInvalidArgument.
  Result<OpenFilePtr> find_file(Fd fd) const;
  Status check_running() const;
  std::filesystem::path local_path(std::string_view name) const;
  // The bus, started on first use.
  Result<std::shared_ptr<net::BusClient>> bus();
  // Hands a request to its file's PageIo. Called without mu_.
  void dispatch(const RequestPtr& request);
  void complete(const RequestPtr& request, Status status, PageRead read_result);
  // REQUIRES: mu_ held. Records that `request` finished and takes it off its
  // page's queue; returns the request now at the front, if any.
  RequestPtr finish_locked(const RequestPtr& request, Status status, PageRead read_result);
  // REQUIRES: mu_ held; `request` (may be null) is at the front of its page
  // queue. Serves it, and the reads behind it, from the pool while it can;
  // returns the request whose I/O must be dispatched, or null.
  RequestPtr start_locked(RequestPtr request);
  // REQUIRES: mu_ held. Queues read-ahead requests after a read of `page`
  // while the window has room; appends those to dispatch to `out`.
  void read_ahead_locked(const OpenFilePtr& file, int64_t page, std::vector<RequestPtr>& out);
  // REQUIRES: `lock` holds mu_. Waits until no truncate runs on `file` and
  // its window has room; kInvalidArgument when it was closed meanwhile.
  Status wait_for_room_locked(std::unique_lock<std::mutex>& lock, const OpenFilePtr& file, Fd fd);
  // REQUIRES: mu_ held. A request of `page` with the next ticket.
  RequestPtr new_request_locked(const OpenFilePtr& file, int64_t page, bool is_write);
  // REQUIRES: mu_ held; nothing queued on `page`. Registers a write of
  // `page` about to be done by plain call (PageIo::write_now) outside mu_:
  // ticket, page queue and incomplete writes, outside the window.
  RequestPtr begin_direct_write_locked(const OpenFilePtr& file, int64_t page, std::span<const std::byte> data);
  // REQUIRES: `lock` holds mu_. Waits until `ready()`. While the request
  // it waits for (`awaited`, else the oldest of `file` still in flight) is
  // unfinished, a remote file's answers are read on this thread meanwhile
  // (PageIo::wait_for_progress), which saves handing each one over from
  // another thread; otherwise it waits on done_cv_.
  template <class Ready>
  void wait_locked(std::unique_lock<std::mutex>& lock, const OpenFilePtr& file, RequestPtr awaited, Ready ready);
  // Wakes every waiter to look again: those on done_cv_ and those reading
  // a bus's answers meanwhile (wait_locked).
  void notify_waiters();
  // A request of `page` that finished as it was asked for (a pool hit, a
  // read_now or write_now): its ticket, done and outside the window.
  RequestPtr done_locked(const OpenFilePtr& file, int64_t page, bool is_write);
  // done_locked for a read, with its result; with a pool, the read-ahead it
  // calls for goes to `out`.
  RequestPtr read_done_locked(const OpenFilePtr& file, int64_t page, std::span<std::byte> buffer,
                              PageRead result, std::vector<RequestPtr>& out);

  const ClientOptions options_;
  // The threads of local Pagefiles' page I/O, started at the first local
  // open: a client of remote files only (the VFS on a bus) runs none.
  boost::asio::thread_pool& local_pool();
  std::once_flag pool_started_;
  std::optional<boost::asio::thread_pool> pool_;
  const std::shared_ptr<const PolicyRegistry> policies_;
  const std::unique_ptr<BufferPool> cache_;  // null: no pool

  mutable std::mutex mu_;
  std::condition_variable done_cv_;
  bool stopped_ = false;                                // GUARDED_BY(mu_)
  uint64_t next_fd_ = 1;                                // GUARDED_BY(mu_)
  uint64_t next_ticket_ = 1;                            // GUARDED_BY(mu_)
  std::map<uint64_t, OpenFilePtr> files_;               // GUARDED_BY(mu_)
  std::unordered_map<uint64_t, RequestPtr> tickets_;    // GUARDED_BY(mu_)

  std::mutex bus_mu_;  // held while the bus starts, which may take a while
  std::shared_ptr<net::BusClient> bus_;  // GUARDED_BY(bus_mu_)
  // bus_, for notify_waiters() to reach its waiters without bus_mu_; null
  // again before the bus stops.
  std::atomic<net::BusClient*> waking_bus_{nullptr};
};

namespace {

std::string fd_text(Fd fd) { return fmt::format("descriptor {}", fd.value); }

// REQUIRES: mu_ held; `request` is at the front of its page's queue.
// Whether a write of the page was requested after it.
bool write_queued_behind(const Request& request) {
  const auto& queue = request.file->page_queues.at(request.page);
  return std::any_of(queue.begin() + 1, queue.end(), [](const RequestPtr& r) { return r->is_write; });
}

// Drops window entries that no longer count.
void prune_window(OpenFile& file) {
  while (!file.window.empty() && !file.window.front()->in_window) file.window.pop_front();
}

void leave_window(OpenFile& file, Request& request) {
  if (request.in_window) {
    request.in_window = false;
    --file.in_window;
  }
  prune_window(file);
}

}  // namespace

Status Client::Impl::check_running() const {
  if (stopped_) return Status::invalid_argument("client", "is stopped");
  return Status::ok();
}

Result<OpenFilePtr> Client::Impl::find_file(Fd fd) const {
  if (Status s = check_running(); !s) return s;
  auto it = files_.find(fd.value);
  if (it == files_.end() || it->second->closing) {
    bool issued = fd.value != 0 && fd.value < next_fd_;
    return Status::invalid_argument(fd_text(fd), issued ? "is closed" : "was never opened");
  }
  return it->second;
}

std::filesystem::path Client::Impl::local_path(std::string_view name) const {
  return options_.local_dir / std::filesystem::path(name);
}

Result<Fd> Client::Impl::open(std::string_view name, const OpenOptions& options) {
  {
    std::lock_guard lock(mu_);
    if (Status s = check_running(); !s) return s;
  }
  if (name.empty()) return Status::invalid_argument("file name", "is empty");
  if (name.find('\0') != std::string_view::npos) {
    return Status::invalid_argument("file name", "contains a NUL byte");
  }
  if (options.page_size != 0) {
    if (Status s = check_page_size(options.page_size); !s) return s.with_context(name);
  }
  if (options.policy) {
    if (Status s = check_buffer_policy(*options.policy); !s) return s.with_context(name);
    if (!policies_->contains(policy_name(*options.policy))) {
      return Status::invalid_argument(
          name, fmt::format("policy '{}' is not registered", policy_name(*options.policy)));
    }
  }
  std::shared_ptr<PageIo> io;
  if (options.location == Location::kRemote) {
    auto bus_client = bus();
    if (!bus_client) return bus_client.status();
    auto remote = net::RemotePageIo::open(*bus_client, name, options);
    if (!remote) return remote.status();
    io = std::move(*remote);
  } else {
    LocalPagefile::OpenSpec spec;
    spec.page_size = options.page_size;
    spec.create = options.create;
    spec.exclusive = options.exclusive;
    spec.read_only = options.read_only;
    spec.policy = options.policy.value_or(BufferPolicy{});
    auto local = LocalPagefile::open(local_path(name), spec);
    if (!local) return local.status();
    io = std::make_shared<LocalPageIo>(std::move(*local), local_pool());
  }

  auto file = std::make_shared<OpenFile>();
  file->name = std::string(name);
  file->location = options.location;
  file->policy = options.policy.value_or(io->recorded_policy());
  // A file created with a custom policy this client does not know runs the
  // built-in recorded beside it.
  if (!policies_->contains(policy_name(file->policy))) file->policy.name.clear();
  file->concurrency = options.concurrency != 0 ? options.concurrency : options_.concurrency;
  uint32_t page_size = io->page_size();
  file->io = std::move(io);

  PolicyLimits limits{.min_pages = file->policy.min_pages,
                      .max_pages = file->policy.max_pages,
                      .read_ahead = file->concurrency};
  std::unique_ptr<PagePolicy> policy;
  if (cache_) {
    auto made = policies_->make(policy_name(file->policy), limits);
    if (!made) {
      (void)file->io->close();
      return made.status().with_context(name);
    }
    policy = std::move(*made);
  }

  std::lock_guard lock(mu_);
  if (Status s = check_running(); !s) return s;
  file->fd = Fd{next_fd_++};
  files_.emplace(file->fd.value, file);
  if (cache_) cache_->add_file(file->fd.value, page_size, limits, std::move(policy));
  return file->fd;
}

Status Client::Impl::close(Fd fd) {
  OpenFilePtr file;
  std::shared_ptr<PageIo> io;
  Status first_error;
  {
    std::unique_lock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    file->closing = true;
    notify_waiters();  // requests waiting for window room give up
    wait_locked(lock, file, nullptr, [&] { return file->incomplete.empty() && !file->exclusive; });
    // Unconfirmed tickets die with the file; their errors must not.
    for (auto it = tickets_.begin(); it != tickets_.end();) {
      if (it->second->file == file) {
        if (first_error.is_ok() && !it->second->status.is_ok()) {
          first_error = it->second->status.with_context(
              fmt::format("unconfirmed {} of page {}", it->second->is_write ? "write" : "read",
                          it->second->page));
        }
        it = tickets_.erase(it);
      } else {
        ++it;
      }
    }
    file->window.clear();
    files_.erase(fd.value);
    if (cache_) cache_->remove_file(fd.value);
    io = std::move(file->io);
  }
  Status closed = io->close();
  if (first_error.is_ok()) first_error = closed;
  // Dropping `io` closes the local file and releases its lock, unless a sync
  // or blocking lock call of another thread still holds it; then the last of
  // them closes it.
  io.reset();
  return first_error;
}

boost::asio::thread_pool& Client::Impl::local_pool() {
  std::call_once(pool_started_, [this] { pool_.emplace(options_.io_threads); });
  return *pool_;
}

Status Client::Impl::stop() {
  std::vector<Fd> open_fds;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return Status::ok();
    for (const auto& [value, file] : files_) open_fds.push_back(file->fd);
  }
  Status first_error;
  for (Fd fd : open_fds) {
    Status s = close(fd);
    if (first_error.is_ok() && !s.is_ok() && !s.is(Code::kInvalidArgument)) first_error = s;
  }
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  std::call_once(pool_started_, [] {});  // no pool starts after this
  if (pool_) pool_->join();
  std::lock_guard lock(bus_mu_);
  waking_bus_ = nullptr;
  bus_.reset();
  return first_error;
}

Result<std::shared_ptr<net::BusClient>> Client::Impl::bus() {
  std::lock_guard lock(bus_mu_);
  if (bus_) return bus_;
  auto config = net::resolve_bus(options_.bus, options_.home);
  if (!config) return config.status();
  net::BusOptions bus_options;
  bus_options.request_timeout_ms = options_.request_timeout_ms;
  auto started = net::BusClient::start(*config, bus_options);
  if (!started) return started.status();
  bus_ = std::move(*started);
  waking_bus_ = bus_.get();
  return bus_;
}

Result<Ticket> Client::Impl::request(Fd fd, int64_t page, std::span<std::byte> read_buffer,
                                     std::span<const std::byte> write_data, bool is_write) {
  RequestPtr request;
  std::vector<RequestPtr> to_dispatch;
  {
    std::unique_lock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    OpenFilePtr file = *found;
    size_t size = is_write ? write_data.size() : read_buffer.size();
    if (Status s = check_page_access(page, size, file->io->page_size(), file->name); !s) return s;
    if (is_write && file->io->read_only()) {
      return Status::read_only(file->name, "write: file was opened read-only");
    }

    // A hit on a page with nothing queued is complete at once and needs no
    // room in the window.
    bool looked_up = false;
    if (cache_ && !is_write && !file->exclusive && !file->page_queues.contains(page)) {
      looked_up = true;
      if (cache_->read(fd.value, page, read_buffer)) {
        request = read_done_locked(file, page, read_buffer, PageRead::kData, to_dispatch);
      }
    }
    if (request) {
      lock.unlock();
      for (const RequestPtr& r : to_dispatch) dispatch(r);
      return Ticket{request->ticket};
    }

    // Page work that a server in this process can do at once (PageIo::
    // read_now, write_now) is done on this thread: no hand-over to the bus's
    // threads and back, no room in the window. Not past a request of ours
    // on the page (page_queues), nor past writes to that server in flight
    // (the bus checks). Anything else, an error among them, goes the usual
    // way below.
    if (file->io->may_act_now() && !file->exclusive && !file->page_queues.contains(page)) {
      if (is_write) {
        // Done outside mu_ as a request like any other (ticket, page
        // queue, incomplete writes), so a later request of the page queues
        // behind it and sync waits for it; it needs no room in the window
        // unless the server declines it.
        request = begin_direct_write_locked(file, page, write_data);
        std::shared_ptr<PageIo> io = file->io;
        lock.unlock();
        bool done = io->write_now(page, write_data);
        lock.lock();
        if (done) {
          RequestPtr next = start_locked(finish_locked(request, Status::ok(), PageRead::kData));
          lock.unlock();
          notify_waiters();
          if (next) dispatch(next);
          return Ticket{request->ticket};
        }
        // Declined (or failed): it goes the usual way, from the front of
        // its page's queue, once the window has room.
        if (Status s = wait_for_room_locked(lock, file, fd); !s) {
          (void)start_locked(finish_locked(request, s, PageRead::kData));
          lock.unlock();
          notify_waiters();
          return s;
        }
        request->write_data.assign(write_data.begin(), write_data.end());
        request->in_window = true;
        file->window.push_back(request);
        ++file->in_window;
        lock.unlock();
        dispatch(request);
        return Ticket{request->ticket};
      } else {
        std::shared_ptr<PageIo> io = file->io;
        uint64_t changes_before = file->pool_changes;
        lock.unlock();
        std::optional<Result<PageRead>> now = io->read_now(page, read_buffer);
        lock.lock();
        if (file->closing || stopped_) {
          return Status::invalid_argument(fd_text(fd), "was closed while the request waited");
        }
        if (now && now->is_ok()) {
          // Unless the page may have changed meanwhile (pool_changes).
          if (cache_ && **now == PageRead::kData && file->pool_changes == changes_before) {
            cache_->fill(fd.value, page, read_buffer);
          }
          request = read_done_locked(file, page, read_buffer, **now, to_dispatch);
          lock.unlock();
          for (const RequestPtr& r : to_dispatch) dispatch(r);
          return Ticket{request->ticket};
        }
      }
    }

    if (Status s = wait_for_room_locked(lock, file, fd); !s) return s;

    request = new_request_locked(file, page, is_write);
    if (is_write) {
      ++file->pool_changes;
      request->write_data.assign(write_data.begin(), write_data.end());
      if (cache_) cache_->write(fd.value, page, write_data);
    } else {
      request->read_buffer = read_buffer;
      request->miss_counted = looked_up;
    }
    tickets_.emplace(request->ticket, request);
    file->window.push_back(request);
    ++file->in_window;
    file->incomplete.insert(request->ticket);
    if (is_write) file->incomplete_writes.insert(request->ticket);
    auto& queue = file->page_queues[page];
    queue.push_back(request);
    if (queue.size() == 1) {
      if (RequestPtr first = start_locked(request)) to_dispatch.push_back(first);
    }
    if (!is_write && cache_) read_ahead_locked(file, page, to_dispatch);
  }
  if (!to_dispatch.empty()) notify_waiters();  // a hit may have freed the window
  for (const RequestPtr& r : to_dispatch) dispatch(r);
  return Ticket{request->ticket};
}

Status Client::Impl::wait_for_room_locked(std::unique_lock<std::mutex>& lock, const OpenFilePtr& file, Fd fd) {
  // When the window is full, the oldest ticket leaves it as soon as its I/O
  // is done; its result waits for its own confirm.
  for (;;) {
    done_cv_.wait(lock, [&] { return !file->exclusive || file->closing || stopped_; });
    if (file->closing || stopped_) {
      return Status::invalid_argument(fd_text(fd), "was closed while the request waited");
    }
    prune_window(*file);
    if (file->in_window < file->concurrency) return Status::ok();
    RequestPtr oldest = file->window.front();
    wait_locked(lock, file, oldest, [&] {
      return oldest->done || !oldest->in_window || file->closing || stopped_ ||
             file->in_window < file->concurrency;
    });
    if (oldest->done) leave_window(*file, *oldest);
  }
}

RequestPtr Client::Impl::new_request_locked(const OpenFilePtr& file, int64_t page, bool is_write) {
  auto request = std::make_shared<Request>();
  request->ticket = next_ticket_++;
  request->file = file;
  request->is_write = is_write;
  request->page = page;
  return request;
}

RequestPtr Client::Impl::begin_direct_write_locked(const OpenFilePtr& file, int64_t page,
                                                   std::span<const std::byte> data) {
  RequestPtr request = new_request_locked(file, page, /*is_write=*/true);
  request->in_window = false;
  ++file->pool_changes;
  if (cache_) cache_->write(file->fd.value, page, data);
  tickets_.emplace(request->ticket, request);
  file->incomplete.insert(request->ticket);
  file->incomplete_writes.insert(request->ticket);
  file->page_queues[page].push_back(request);
  return request;
}

template <class Ready>
void Client::Impl::wait_locked(std::unique_lock<std::mutex>& lock, const OpenFilePtr& file, RequestPtr awaited,
                               Ready ready) {
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
      lock.unlock();
      const bool waited = io->wait_for_progress(page, net::BusClient::kPumpSlice);
      lock.lock();
      if (waited) continue;
      if (ready()) return;  // (it may have come while mu_ was free)
    }
    done_cv_.wait(lock);
  }
}

void Client::Impl::notify_waiters() {
  done_cv_.notify_all();
  if (net::BusClient* bus = waking_bus_.load()) bus->wake_waiters();
}

RequestPtr Client::Impl::done_locked(const OpenFilePtr& file, int64_t page, bool is_write) {
  RequestPtr request = new_request_locked(file, page, is_write);
  request->done = true;
  request->in_window = false;
  tickets_.emplace(request->ticket, request);
  return request;
}

RequestPtr Client::Impl::read_done_locked(const OpenFilePtr& file, int64_t page, std::span<std::byte> buffer,
                                          PageRead result, std::vector<RequestPtr>& out) {
  RequestPtr request = done_locked(file, page, /*is_write=*/false);
  request->read_buffer = buffer;
  request->read_result = result;
  if (cache_) read_ahead_locked(file, page, out);
  return request;
}

void Client::Impl::read_ahead_locked(const OpenFilePtr& file, int64_t page,
                                     std::vector<RequestPtr>& out) {
  if (file->closing || file->exclusive) return;
  for (int64_t ahead : cache_->read_ahead(file->fd.value, page)) {
    prune_window(*file);
    if (file->in_window >= file->concurrency) break;
    if (file->page_queues.contains(ahead)) continue;  // already being read or written
    RequestPtr request = new_request_locked(file, ahead, /*is_write=*/false);
    request->prefetch = true;
    request->prefetch_buffer.resize(file->io->page_size());
    request->read_buffer = request->prefetch_buffer;
    file->window.push_back(request);
    ++file->in_window;
    file->incomplete.insert(request->ticket);
    file->page_queues[ahead].push_back(request);
    if (RequestPtr first = start_locked(request)) out.push_back(first);
  }
}

RequestPtr Client::Impl::start_locked(RequestPtr request) {
  // Each read is looked up once here: it either completes or is dispatched.
  // The pool holds the page as of the last write requested, so a read with
  // a write queued behind it must go to the store for the older page.
  while (request && cache_ && !request->is_write && !write_queued_behind(*request)) {
    uint64_t id = request->file->fd.value;
    bool hit = request->prefetch
                   ? cache_->contains(id, request->page)
                   : cache_->read(id, request->page, request->read_buffer, !request->miss_counted);
    if (!hit) break;
    request = finish_locked(request, Status::ok(), PageRead::kData);
  }
  return request;
}

void Client::Impl::dispatch(const RequestPtr& request) {
  PageIo& io = *request->file->io;
  if (request->is_write) {
    io.write_async(request->page, request->write_data,
                   [this, request](Status s) { complete(request, std::move(s), PageRead::kData); });
  } else {
    io.read_async(request->page, request->read_buffer, [this, request](Result<PageRead> r) {
      if (r) {
        complete(request, Status::ok(), *r);
      } else {
        complete(request, r.status(), PageRead::kData);
      }
    });
  }
}

void Client::Impl::complete(const RequestPtr& request, Status status, PageRead read_result) {
  RequestPtr next;
  {
    std::lock_guard lock(mu_);
    if (cache_) {
      uint64_t id = request->file->fd.value;
      bool write_behind = write_queued_behind(*request);
      if (request->is_write && !status.is_ok()) {
        cache_->drop(id, request->page);  // the store may hold the old page
      } else if (!request->is_write && status.is_ok() && read_result == PageRead::kData && !write_behind) {
        if (request->prefetch) {
          cache_->fill_prefetched(id, request->page, request->read_buffer);
        } else {
          cache_->fill(id, request->page, request->read_buffer);
        }
      }
    }
    next = start_locked(finish_locked(request, std::move(status), read_result));
  }
  done_cv_.notify_all();
  if (next) dispatch(next);
}

RequestPtr Client::Impl::finish_locked(const RequestPtr& request, Status status, PageRead read_result) {
  RequestPtr next;
  {
    OpenFile& file = *request->file;
    request->done = true;
    request->status = status;
    request->read_result = read_result;
    file.incomplete.erase(request->ticket);
    if (request->is_write) {
      // The page is written (or failed); its copy need not wait for the
      // confirm, which may come much later (write-behind).
      std::vector<std::byte>().swap(request->write_data);
      file.incomplete_writes.erase(request->ticket);
      if (status.is_ok()) {
        file.failed_pages.erase(request->page);
      } else {
        file.failed_pages.insert_or_assign(request->page, status);
      }
    }
    if (request->prefetch) {
      leave_window(file, *request);
      request->read_buffer = {};
      std::vector<std::byte>().swap(request->prefetch_buffer);
    }
    auto queue = file.page_queues.find(request->page);
    queue->second.pop_front();
    if (queue->second.empty()) {
      file.page_queues.erase(queue);
    } else {
      next = queue->second.front();
    }
  }
  return next;
}

Result<RequestPtr> Client::Impl::confirm(Ticket ticket, bool is_write) {
  std::unique_lock lock(mu_);
  if (Status s = check_running(); !s) return s;
  // (Named only when there is something to say: this runs once per page.)
  auto what = [&] { return fmt::format("ticket {}", ticket.value); };
  auto it = tickets_.find(ticket.value);
  if (it == tickets_.end()) {
    if (ticket.value == 0 || ticket.value >= next_ticket_) {
      return Status::invalid_argument(what(), "was never issued");
    }
    return Status::invalid_argument(what(), "is not outstanding (already confirmed, or its file was closed)");
  }
  RequestPtr request = it->second;
  if (request->is_write != is_write) {
    return Status::invalid_argument(
        what(), fmt::format("is a {0}; confirm it with {0}_confirm", request->is_write ? "write" : "read"));
  }
  if (request->confirming) return Status::invalid_argument(what(), "is already being confirmed");
  request->confirming = true;
  wait_locked(lock, request->file, request, [&] { return request->done; });
  tickets_.erase(request->ticket);
  leave_window(*request->file, *request);
  notify_waiters();  // room in the window
  return request;
}

Status Client::Impl::sync(Fd fd) {
  OpenFilePtr file;
  std::shared_ptr<PageIo> io;
  {
    std::unique_lock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    uint64_t sync_point = next_ticket_;
    wait_locked(lock, file, nullptr, [&] {
      return file->incomplete_writes.empty() || *file->incomplete_writes.begin() >= sync_point;
    });
    if (file->closing) return Status::invalid_argument(fd_text(fd), "was closed during sync");
    if (!file->failed_pages.empty()) {
      const auto& [page, error] = *file->failed_pages.begin();
      return error.with_context(
          fmt::format("{}: sync: {} page(s) failed to write, first page {}", file->name,
                      file->failed_pages.size(), page));
    }
    io = file->io;
  }
  return io->sync();
}

Status Client::Impl::truncate(Fd fd, int64_t pages) {
  OpenFilePtr file;
  {
    std::unique_lock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    if (pages < 0) {
      return Status::invalid_argument(file->name, fmt::format("truncate to {} pages", pages));
    }
    if (pages > 0) {
      if (Status s = check_page_number(pages - 1, file->name); !s) return s;
    }
    done_cv_.wait(lock, [&] { return !file->exclusive || file->closing; });
    if (file->closing) return Status::invalid_argument(fd_text(fd), "was closed during truncate");
    file->exclusive = true;
    ++file->pool_changes;  // a read_now already under way may return a page now cut off
    wait_locked(lock, file, nullptr, [&] { return file->incomplete.empty(); });
  }
  Status s = file->io->truncate(pages);
  {
    std::lock_guard lock(mu_);
    if (s) file->failed_pages.erase(file->failed_pages.lower_bound(pages), file->failed_pages.end());
    // After a failed truncate the size is unknown: keep nothing.
    if (cache_) cache_->truncate(file->fd.value, s ? pages : 0);
    file->exclusive = false;
  }
  notify_waiters();
  return s;
}

Result<FileStatus> Client::Impl::status(Fd fd) {
  FileStatus st;
  std::shared_ptr<PageIo> io;
  {
    std::lock_guard lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    const OpenFile* file = found->get();
    io = file->io;
    st.name = file->name;
    st.location = file->location;
    st.page_size = file->io->page_size();
    st.policy = file->policy;
    st.concurrency = file->concurrency;
    st.in_flight = static_cast<uint32_t>(file->incomplete.size());
    st.read_only = file->io->read_only();
    st.done_at_once = file->io->done_at_once();
    if (cache_) st.cache = cache_->counters(fd.value);
  }
  auto pages = io->size_pages();
  if (!pages) return pages.status();
  st.pages = *pages;
  return st;
}

Status Client::Impl::set_concurrency(Fd fd, uint32_t concurrency) {
  std::lock_guard lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  if (concurrency == 0) {
    return Status::invalid_argument((*found)->name, "concurrency level must be at least 1");
  }
  (*found)->concurrency = concurrency;
  notify_waiters();
  return Status::ok();
}

Status Client::Impl::unlink(std::string_view name, Location location) {
  {
    std::lock_guard lock(mu_);
    if (Status s = check_running(); !s) return s;
  }
  if (name.empty()) return Status::invalid_argument("file name", "is empty");
  if (location == Location::kRemote) {
    auto bus_client = bus();
    if (!bus_client) return bus_client.status();
    return net::RemotePageIo::unlink(**bus_client, name);
  }
  Status s = LocalPagefile::unlink(local_path(name));
  if (s.is(Code::kNotFound)) return Status::not_found(name, "does not exist");
  return s;
}

Status Client::Impl::lock(Fd fd, LockMode mode, LockWait wait) {
  std::shared_ptr<PageIo> io;
  {
    std::lock_guard lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    io = (*found)->io;
  }
  // May block in the kernel: never under mu_. A close meanwhile drops the
  // descriptor; the file itself (and any lock this call then gets) lasts
  // until the call returns and lets go of `io`.
  return io->lock(mode, wait);
}

Status Client::Impl::unlock(Fd fd) {
  std::shared_ptr<PageIo> io;
  {
    std::lock_guard lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    io = (*found)->io;
  }
  return io->unlock();
}

Result<std::shared_ptr<PageIo>> Client::Impl::io_of(Fd fd) {
  std::lock_guard lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  return (*found)->io;
}

Status Client::Impl::pin(Fd fd, int64_t page) {
  uint32_t page_size = 0;
  {
    std::lock_guard lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    if (!cache_) return Status::not_supported((*found)->name, "pin: the client has no buffer pool");
    if (Status s = check_page_number(page, (*found)->name); !s) return s;
    cache_->pin(fd.value, page);
    if (cache_->contains(fd.value, page)) return Status::ok();
    page_size = (*found)->io->page_size();
  }
  // Read it in through the ordinary path, which keeps it: it is pinned.
  std::vector<std::byte> buffer(page_size);
  auto ticket = request(fd, page, buffer, {}, /*is_write=*/false);
  Status read = ticket.status();
  if (ticket) {
    auto done = confirm(*ticket, /*is_write=*/false);
    read = done ? (*done)->status : done.status();
  }
  if (!read) (void)cache_->unpin(fd.value, page);
  return read;
}

Status Client::Impl::unpin(Fd fd, int64_t page) {
  std::lock_guard lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  if (!cache_) return Status::not_supported((*found)->name, "unpin: the client has no buffer pool");
  return cache_->unpin(fd.value, page).with_context((*found)->name);
}

Status Client::Impl::drop_cached(Fd fd) {
  std::lock_guard lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  ++(*found)->pool_changes;
  if (cache_) cache_->drop_all(fd.value);
  return Status::ok();
}

Result<FileCounters> Client::Impl::counters(Fd fd) {
  std::lock_guard lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  return cache_ ? cache_->counters(fd.value) : FileCounters{};
}

// ---- Client: argument checks and forwarding -------------------------------

Result<std::unique_ptr<Client>> Client::start(const ClientOptions& options) {
  if (options.concurrency == 0) {
    return Status::invalid_argument("client options", "concurrency level must be at least 1");
  }
  if (options.io_threads == 0) {
    return Status::invalid_argument("client options", "io_threads must be at least 1");
  }
  return std::unique_ptr<Client>(new Client(std::make_unique<Impl>(options)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Status Client::stop() { return impl_->stop(); }

Result<Fd> Client::open(std::string_view name, const OpenOptions& options) {
  return impl_->open(name, options);
}

Status Client::close(Fd fd) { return impl_->close(fd); }

Result<Ticket> Client::read_request(Fd fd, int64_t page, std::span<std::byte> buffer) {
  return impl_->request(fd, page, buffer, {}, /*is_write=*/false);
}

Result<PageRead> Client::read_confirm(Ticket ticket) {
  auto request = impl_->confirm(ticket, /*is_write=*/false);
  if (!request) return request.status();
  if (!(*request)->status.is_ok()) return (*request)->status;
  return (*request)->read_result;
}

Result<Ticket> Client::write_request(Fd fd, int64_t page, std::span<const std::byte> data) {
  return impl_->request(fd, page, {}, data, /*is_write=*/true);
}

Status Client::write_confirm(Ticket ticket) {
  auto request = impl_->confirm(ticket, /*is_write=*/true);
  if (!request) return request.status();
  return (*request)->status;
}

Result<PageRead> Client::read(Fd fd, int64_t page, std::span<std::byte> buffer) {
  auto ticket = read_request(fd, page, buffer);
  if (!ticket) return ticket.status();
  return read_confirm(*ticket);
}

Status Client::write(Fd fd, int64_t page, std::span<const std::byte> data) {
  auto ticket = write_request(fd, page, data);
  if (!ticket) return ticket.status();
  return write_confirm(*ticket);
}

Status Client::sync(Fd fd) { return impl_->sync(fd); }
Status Client::truncate(Fd fd, int64_t pages) { return impl_->truncate(fd, pages); }
Result<FileStatus> Client::status(Fd fd) { return impl_->status(fd); }
Result<uint32_t> Client::server_of(Fd fd, int64_t page) {
  if (Status s = check_page_number(page, "server_of"); !s) return s;
  auto io = impl_->io_of(fd);
  if (!io) return io.status();
  return (*io)->server_index(page);
}

Status Client::set_concurrency(Fd fd, uint32_t concurrency) {
  return impl_->set_concurrency(fd, concurrency);
}
Status Client::unlink(std::string_view name, Location location) {
  return impl_->unlink(name, location);
}
Status Client::lock(Fd fd, LockMode mode, LockWait wait) { return impl_->lock(fd, mode, wait); }
Status Client::unlock(Fd fd) { return impl_->unlock(fd); }

// Lock calls never wait (kBusy at once), but may ask the catalog: outside mu_.
Status Client::set_lock_level(Fd fd, LockLevel level) {
  auto io = impl_->io_of(fd);
  if (!io) return io.status();
  if (static_cast<uint8_t>(level) > static_cast<uint8_t>(LockLevel::kExclusive)) {
    return Status::invalid_argument((*io)->name(), fmt::format("lock level {} is not a level",
                                                               static_cast<unsigned>(level)));
  }
  return (*io)->set_lock_level(level);
}

Result<bool> Client::reserved_elsewhere(Fd fd) {
  auto io = impl_->io_of(fd);
  if (!io) return io.status();
  return (*io)->reserved_elsewhere();
}

bool Client::unchanged_since_unlock(Fd fd) {
  auto io = impl_->io_of(fd);
  return io && (*io)->unchanged_since_unlock();
}

Status Client::pin(Fd fd, int64_t page) { return impl_->pin(fd, page); }
Status Client::unpin(Fd fd, int64_t page) { return impl_->unpin(fd, page); }
Status Client::drop_cached(Fd fd) { return impl_->drop_cached(fd); }
Result<FileCounters> Client::counters(Fd fd) { return impl_->counters(fd); }

}  // namespace pagefile
