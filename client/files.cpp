// Calls on whole files: open, close, sync, truncate, status, locks, pins,
// and the client's start and stop.
#include <fmt/format.h>

#include "core/mutex.h"
#include "client/client_impl.h"

namespace pagefile {

namespace {

// A remote open's first request. The catalog creates a file at the page
// size the request asks, or at its default: a size for a new file alone
// (create_page_size) is asked only once the file is known not to exist,
// so a first request opens an existing one (exclusive: creates at once).
OpenOptions remote_first_try(const OpenOptions& options) {
  OpenOptions first = options;
  if (options.page_size != 0 || options.create_page_size == 0 || !options.create) return first;
  if (options.exclusive) {
    first.page_size = options.create_page_size;
  } else {
    first.create = false;
  }
  return first;
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
  // (An absolute name is itself, as `/` would make it: taken so, it is
  // parsed once, not twice. A journal opened at each commit spent a fifth
  // of its open in the join.)
  if (!name.empty() && name.front() == '/') return std::filesystem::path(name);
  return options_.local_dir / std::filesystem::path(name);
}

Result<Fd> Client::Impl::open(std::string_view name, const OpenOptions& options) {
  {
    MutexLock lock(mu_);
    if (Status s = check_running(); !s) return s;
  }
  if (name.empty()) return Status::invalid_argument("file name", "is empty");
  if (name.find('\0') != std::string_view::npos) {
    return Status::invalid_argument("file name", "contains a NUL byte");
  }
  for (uint32_t size : {options.page_size, options.create_page_size}) {
    if (size == 0) continue;
    if (Status s = check_page_size(size); !s) return s.with_context(name);
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
    const OpenOptions first = remote_first_try(options);
    auto remote = net::RemotePageIo::open(*bus_client, name, first);
    if (!remote && remote.status().is(Code::kNotFound) && first.create != options.create) {
      OpenOptions created = options;
      created.page_size = options.create_page_size;
      remote = net::RemotePageIo::open(*bus_client, name, created);
    }
    if (!remote) return remote.status();
    io = std::move(*remote);
  } else {
    LocalPagefile::OpenSpec spec;
    spec.page_size = options.page_size;
    spec.create_page_size = options.create_page_size;
    spec.create = options.create;
    spec.exclusive = options.exclusive;
    spec.read_only = options.read_only;
    spec.mode = options.mode;
    spec.checksums = options.checksums;
    spec.sector_checksums = options.sector_checksums;
    spec.fixed_page_size = cache_ != nullptr;  // the pool keeps its pages at one size
    spec.page_size_final = options.page_size_final;
    spec.map_reads = options.mapped_reads;
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

  MutexLock lock(mu_);
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
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    file->closing = true;
    notify_waiters();  // requests waiting for window room give up
    wait_locked(file, nullptr, [&] { return file->incomplete.empty() && !file->exclusive; });
    await_writes_at_once_locked(file);
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

WorkPool& Client::Impl::local_pool() {
  std::call_once(pool_started_, [this] { pool_.emplace(options_.io_threads); });
  return *pool_;
}

Status Client::Impl::stop() {
  stopping_ = true;
  std::vector<Fd> open_fds;
  {
    MutexLock lock(mu_);
    if (stopped_) return Status::ok();
    for (const auto& [value, file] : files_) open_fds.push_back(file->fd);
  }
  Status first_error;
  for (Fd fd : open_fds) {
    Status s = close(fd);
    if (first_error.is_ok() && !s.is_ok() && !s.is(Code::kInvalidArgument)) first_error = s;
  }
  {
    MutexLock lock(mu_);
    stopped_ = true;
  }
  std::call_once(pool_started_, [] {});  // no pool starts after this
  if (pool_) pool_->join();
  MutexLock lock(bus_mu_);
  waking_bus_ = nullptr;
  bus_.reset();
  return first_error;
}

Status Client::Impl::set_request_timeout(int ms) {
  if (ms <= 0) return Status::invalid_argument("request timeout", fmt::format("{} ms is not positive", ms));
  MutexLock lock(bus_mu_);
  request_timeout_ms_ = ms;
  if (bus_) bus_->set_request_timeout(ms);
  return Status::ok();
}

Result<std::shared_ptr<net::BusClient>> Client::Impl::bus() {
  MutexLock lock(bus_mu_);
  if (bus_) return bus_;
  auto config = net::resolve_bus(options_.bus, options_.home);
  if (!config) return config.status();
  net::BusOptions bus_options;
  bus_options.request_timeout_ms = request_timeout_ms_;
  auto started = net::BusClient::start(*config, bus_options);
  if (!started) return started.status();
  bus_ = std::move(*started);
  waking_bus_ = bus_.get();
  return bus_;
}

Status Client::Impl::sync(Fd fd) {
  OpenFilePtr file;
  std::shared_ptr<PageIo> io;
  {
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    uint64_t sync_point = next_ticket_;
    wait_locked(file, nullptr, [&] {
      return file->incomplete_writes.empty() || *file->incomplete_writes.begin() >= sync_point;
    });
    await_writes_at_once_locked(file);
    if (file->closing) return Status::invalid_argument(fd_text(fd), "was closed during sync");
    size_t unreported = 0;
    const std::pair<const int64_t, OpenFile::FailedWrite>* first = nullptr;
    for (auto& entry : file->failed_pages) {
      if (entry.second.reported) continue;
      if (!first) first = &entry;
      entry.second.reported = true;
      ++unreported;
    }
    if (first) {
      return first->second.error.with_context(fmt::format("{}: sync: {} page(s) failed to write, first page {}",
                                                          file->name, unreported, first->first));
    }
    io = file->io;
  }
  return io->sync();
}

Status Client::Impl::exclusively(Fd fd, std::string_view what, const std::function<Status(OpenFile&)>& op) {
  OpenFilePtr file;
  {
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    file = *found;
    while (file->exclusive && !file->closing) done_cv_.wait(mu_);
    if (file->closing) return Status::invalid_argument(fd_text(fd), fmt::format("was closed during {}", what));
    file->exclusive = true;
    ++file->pool_changes;  // a read_direct already under way may return a page now changed
    ++file->pool_drops;
    wait_locked(file, nullptr, [&] { return file->incomplete.empty(); });
    await_writes_at_once_locked(file);
  }
  Status s = op(*file);
  {
    MutexLock lock(mu_);
    file->exclusive = false;
  }
  notify_waiters();
  return s;
}

Status Client::Impl::truncate(Fd fd, int64_t pages) {
  return exclusively(fd, "truncate", [&](OpenFile& file) {
    if (pages < 0) return Status::invalid_argument(file.name, fmt::format("truncate to {} pages", pages));
    if (pages > 0) {
      if (Status s = check_page_number(pages - 1, file.name); !s) return s;
    }
    Status s = file.io->truncate(pages);
    MutexLock lock(mu_);
    if (s) file.failed_pages.erase(file.failed_pages.lower_bound(pages), file.failed_pages.end());
    // After a failed truncate the size is unknown: keep nothing.
    if (cache_) cache_->truncate(file.fd.value, s ? pages : 0);
    file.read_ahead_end = s ? pages : OpenFile::kEndUnknown;
    return s;
  });
}

Status Client::Impl::set_page_size(Fd fd, uint32_t page_size) {
  return exclusively(fd, "page size change", [&](OpenFile& file) {
    // The pool keeps each file's pages at the size it had when added.
    if (cache_) return Status::invalid_argument(file.name, "its page size is fixed while the client keeps a pool");
    return file.io->set_empty_page_size(page_size);
  });
}

Result<FileStatus> Client::Impl::status(Fd fd) {
  FileStatus st;
  std::shared_ptr<PageIo> io;
  {
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    const OpenFile* file = found->get();
    io = file->io;
    st.name = file->name;
    st.location = file->location;
    st.policy = file->policy;
    st.concurrency = file->concurrency;
    st.in_flight = static_cast<uint32_t>(file->incomplete.size());
    st.read_only = file->io->read_only();
    st.replicas = file->io->replicas();
    st.always_direct = file->io->always_direct();
    if (cache_) st.cache = cache_->counters(fd.value);
  }
  auto size = size_of(*io);
  if (!size) return size.status();
  st.pages = size->pages;
  st.page_size = size->page_size;
  return st;
}

Result<Client::Size> Client::Impl::size(Fd fd) {
  std::shared_ptr<PageIo> io;
  {
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    io = (*found)->io;
  }
  return size_of(*io);
}

Result<Client::Size> Client::Impl::size_of(PageIo& io) {
  auto pages = io.size_pages();
  if (!pages) return pages.status();
  // After the count: a local file that held no page may have taken
  // another page size with it (LocalPagefile::size_pages).
  return Client::Size{*pages, io.page_size()};
}

Status Client::Impl::set_concurrency(Fd fd, uint32_t concurrency) {
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  if (concurrency == 0) {
    return Status::invalid_argument((*found)->name, "concurrency level must be at least 1");
  }
  (*found)->concurrency = concurrency;
  notify_waiters();
  return Status::ok();
}

Status Client::Impl::unlink(std::string_view name, Location location, uint64_t lock_token) {
  {
    MutexLock lock(mu_);
    if (Status s = check_running(); !s) return s;
  }
  if (name.empty()) return Status::invalid_argument("file name", "is empty");
  if (location == Location::kRemote) {
    auto bus_client = bus();
    if (!bus_client) return bus_client.status();
    return net::RemotePageIo::unlink(**bus_client, name, lock_token);
  }
  Status s = LocalPagefile::unlink(local_path(name));
  if (s.is(Code::kNotFound)) return Status::not_found(name, "does not exist");
  return s;
}

Status Client::Impl::lock(Fd fd, LockMode mode, LockWait wait) {
  std::shared_ptr<PageIo> io;
  {
    MutexLock lock(mu_);
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
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    io = (*found)->io;
  }
  return io->unlock();
}

Result<std::shared_ptr<PageIo>> Client::Impl::io_of(Fd fd) {
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  return (*found)->io;
}

Status Client::Impl::pin(Fd fd, int64_t page) {
  uint32_t page_size = 0;
  {
    MutexLock lock(mu_);
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
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  if (!cache_) return Status::not_supported((*found)->name, "unpin: the client has no buffer pool");
  return cache_->unpin(fd.value, page).with_context((*found)->name);
}

Status Client::Impl::drop_cached(Fd fd) {
  if (!cache_) return Status::ok();  // (no pool: nothing kept; SQLite asks at every fresh lock)
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  ++(*found)->pool_changes;
  ++(*found)->pool_drops;
  (*found)->read_ahead_end = OpenFile::kEndUnknown;
  if (cache_) cache_->drop_all(fd.value);
  return Status::ok();
}

Status Client::Impl::abandon_failed_writes(Fd fd) {
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  (*found)->failed_pages.clear();
  return Status::ok();
}

Result<FileCounters> Client::Impl::counters(Fd fd) {
  MutexLock lock(mu_);
  auto found = find_file(fd);
  if (!found) return found.status();
  return cache_ ? cache_->counters(fd.value) : FileCounters{};
}

}  // namespace pagefile
