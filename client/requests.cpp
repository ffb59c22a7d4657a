// The request path: tickets, the concurrency window, per-page order, the
// client's pool on the way, dispatch to the file's PageIo and completion.
#include <algorithm>

#include <fmt/format.h>

#include "core/mutex.h"
#include "client/client_impl.h"

namespace pagefile {

Result<Ticket> Client::Impl::request(Fd fd, int64_t page, std::span<std::byte> read_buffer,
                                     std::span<const std::byte> write_data, bool is_write) {
  RequestPtr request;
  std::vector<RequestPtr> to_dispatch;
  {
    MutexLock lock(mu_);
    auto found = find_file(fd);
    if (!found) return found.status();
    OpenFilePtr file = *found;
    if (is_write && !file->writing_at_once.empty()) {
      // Behind a write at once of the page on another thread, as behind a
      // request of it (its outcome, a failure among them, is then the one
      // this write replaces).
      await_writes_at_once_locked(file, page);
      found = find_file(fd);
      if (!found) return found.status();
    }
    size_t size = is_write ? write_data.size() : read_buffer.size();
    if (Status s = check_page_access(page, size, file->io->page_size(), file->name); !s) return s;
    if (is_write && file->io->read_only()) {
      return Status::read_only(file->name, "write: file was opened read-only");
    }
    if (auto failed = file->failed_pages.find(page); !is_write && failed != file->failed_pages.end()) {
      return failed->second.error.with_context(
          fmt::format("{}: read page {}: its last write failed; write it again", file->name, page));
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

    // Page work that a server in this process can do directly (PageIo::
    // read_direct, write_direct) is done on this thread: no hand-over to the bus's
    // threads and back, no room in the window. Not past a request of ours
    // on the page (page_queues), nor past writes to that server in flight
    // (the bus checks). Anything else, an error among them, goes the usual
    // way below.
    if (file->io->may_be_direct() && !file->exclusive && !file->page_queues.contains(page)) {
      if (is_write) {
        // Done outside mu_ as a request like any other (ticket, page
        // queue, incomplete writes), so a later request of the page queues
        // behind it and sync waits for it; it needs no room in the window
        // unless the server declines it.
        request = begin_direct_write_locked(file, page, write_data);
        std::shared_ptr<PageIo> io = file->io;
        lock.unlock();
        std::optional<Status> done = io->write_direct(page, write_data, ChangedBytes{});
        lock.lock();
        if (done) {
          RequestPtr next = start_locked(finish_locked(request, *done, PageRead::kData));
          lock.unlock();
          notify_waiters();
          if (next) dispatch(next);
          return Ticket{request->ticket};
        }
        // Declined: it goes the usual way, from the front of
        // its page's queue, once the window has room.
        if (Status s = wait_for_room_locked(file, fd); !s) {
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
        std::optional<Result<PageRead>> now = io->read_direct(page, read_buffer);
        lock.lock();
        if (file->closing || stopped_) {
          return Status::invalid_argument(fd_text(fd), "was closed while the request waited");
        }
        if (now && !now->is_ok()) {
          request = done_locked(file, page, /*is_write=*/false);
          request->status = now->status();
          return Ticket{request->ticket};
        }
        if (now) {
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

    if (Status s = wait_for_room_locked(file, fd); !s) return s;

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

Status Client::Impl::wait_for_room_locked(const OpenFilePtr& file, Fd fd) {
  // When the window is full, the oldest ticket leaves it as soon as its I/O
  // is done; its result waits for its own confirm.
  for (;;) {
    while (file->exclusive && !file->closing && !stopped_) done_cv_.wait(mu_);
    if (file->closing || stopped_) {
      return Status::invalid_argument(fd_text(fd), "was closed while the request waited");
    }
    prune_window(*file);
    if (file->in_window < file->concurrency) return Status::ok();
    RequestPtr oldest = file->window.front();
    wait_locked(file, oldest, [&]() REQUIRES(mu_) {
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
  request->pool_drops = file->pool_drops;
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
  file->end_seen_by_read(page, result);
  if (cache_) read_ahead_locked(file, page, out);
  return request;
}

void Client::Impl::read_ahead_locked(const OpenFilePtr& file, int64_t page,
                                     std::vector<RequestPtr>& out) {
  if (file->closing || file->exclusive) return;
  for (int64_t ahead : cache_->read_ahead(file->fd.value, page)) {
    if (ahead >= file->read_ahead_end) continue;
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
    MutexLock lock(mu_);
    if (cache_) {
      uint64_t id = request->file->fd.value;
      bool write_behind = write_queued_behind(*request);
      if (request->is_write && !status.is_ok()) {
        cache_->drop(id, request->page);  // the store may hold the old page
      } else if (!request->is_write && status.is_ok() && read_result == PageRead::kData && !write_behind &&
                 request->pool_drops == request->file->pool_drops) {
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
      file.write_done(request->page, status);
      if (status.is_ok()) file.end_seen_by_write(request->page);
    } else if (status.is_ok()) {
      file.end_seen_by_read(request->page, read_result);
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

std::optional<Result<std::shared_ptr<PageIo>>> Client::Impl::reader_at_once(Fd fd, int64_t first,
                                                                            std::optional<int64_t> count,
                                                                            size_t buffer_size) {
  MutexLock lock(mu_);
  // With a pool the usual path keeps it right; with a request of ours
  // for a page outstanding, this read must not overtake it.
  if (cache_ || stopped_) return std::nullopt;
  // (Looked up without a copy of its pointer, whose count is two atomic
  // operations a page: the PageIo returned keeps what the read needs.)
  auto found = files_.find(fd.value);
  if (found == files_.end()) return std::nullopt;  // the usual path says what is wrong
  const OpenFile* file = found->second.get();
  if (!file->io->may_be_direct() || file->exclusive || file->closing) return std::nullopt;
  // (A page whose last write failed reads as that error: the usual path.)
  // (Empty, as they most often are, the maps are not searched: a search
  // of an unordered one divides by its bucket count. Pages read together
  // are not searched for at all.)
  if (!file->page_queues.empty() || !file->failed_pages.empty()) {
    if (count.value_or(1) > 1 || file->page_queues.contains(first) || file->failed_pages.contains(first)) {
      return std::nullopt;
    }
  }
  const uint32_t page_size = file->io->page_size();
  if (count && static_cast<uint64_t>(*count) > buffer_size / page_size) {
    return Status::invalid_argument(file->name, fmt::format("read of {} pages into {} bytes", *count, buffer_size));
  }
  // (A run's buffer holds at least its pages; a page's, exactly the page.)
  if (Status s = check_page_access(first, count ? page_size : buffer_size, page_size, file->name); !s) return s;
  return file->io;
}

std::optional<Result<PageRead>> Client::Impl::read_at_once(Fd fd, int64_t page, std::span<std::byte> buffer,
                                                            bool may_wait) {
  auto io = reader_at_once(fd, page, std::nullopt, buffer.size());
  if (!io) return std::nullopt;
  if (!*io) return io->status();
  // (A close meanwhile leaves the PageIo to this call; a request of the
  // page made meanwhile by another thread is unordered with this one, as
  // two calls of two threads are.)
  return may_wait ? (**io)->read_here(page, buffer) : (**io)->read_direct(page, buffer);
}

std::optional<Result<int64_t>> Client::Impl::read_pages_at_once(Fd fd, int64_t first, int64_t count,
                                                                 std::span<std::byte> buffer) {
  if (count < 1) return Status::invalid_argument("read_pages_at_once", fmt::format("{} pages", count));
  auto io = reader_at_once(fd, first, count, buffer.size());
  if (!io) return std::nullopt;
  if (!*io) return io->status();
  return (**io)->read_pages_here(first, count, buffer);
}

std::optional<Status> Client::Impl::write_at_once(Fd fd, int64_t first, int64_t count,
                                                  std::span<const std::byte> data, ChangedBytes changed) {
  OpenFilePtr file;
  std::shared_ptr<PageIo> io;
  auto under_way = [&](int64_t page) {
    return file->page_queues.contains(page) ||
           std::ranges::find(file->writing_at_once, page) != file->writing_at_once.end();
  };
  {
    MutexLock lock(mu_);
    // With a pool, a write updates it in request order (the usual path).
    if (cache_ || !check_running()) return std::nullopt;
    auto found = find_file(fd);
    if (!found) return std::nullopt;  // the usual path says what is wrong
    file = *found;
    if (!file->io->may_be_direct() || file->exclusive || file->closing || file->awaiting_at_once > 0) {
      return std::nullopt;
    }
    const uint32_t page_size = file->io->page_size();
    if (Status s = check_page_number(first, "write"); !s) return s.with_context(file->name);
    if (count < 0) {
      if (data.empty() || data.size() % page_size != 0) {
        return Status::invalid_argument(file->name, fmt::format("write of {} bytes: not whole pages of {}",
                                                                data.size(), page_size));
      }
      count = static_cast<int64_t>(data.size() / page_size);
    }
    for (int64_t page = first; page < first + count; ++page) {
      if (under_way(page)) return std::nullopt;
    }
    // (The pages between two that pass are in range too.)
    if (Status s = check_page_access(first, count == 1 ? data.size() : page_size, page_size, file->name); !s) return s;
    if (count > 1) {
      if (Status s = check_page_access(first + (count - 1), page_size, page_size, file->name); !s) return s;
    }
    if (file->io->read_only()) return Status::read_only(file->name, "write: file was opened read-only");
    io = file->io;
    for (int64_t page = first; page < first + count; ++page) file->writing_at_once.push_back(page);
  }
  std::optional<Status> done = count == 1 ? io->write_direct(first, data, changed) : io->write_pages_here(first, data);
  {
    MutexLock lock(mu_);
    for (int64_t page = first; page < first + count; ++page) {
      file->writing_at_once.erase(std::ranges::find(file->writing_at_once, page));
      if (done) file->write_done(page, *done);
    }
    ++file->pool_changes;
    if (file->awaiting_at_once > 0) done_cv_.notify_all();
  }
  return done;
}

void Client::Impl::await_writes_at_once_locked(const OpenFilePtr& file, std::optional<int64_t> page) {
  auto under_way = [&] {
    return page ? std::ranges::find(file->writing_at_once, *page) != file->writing_at_once.end()
                : !file->writing_at_once.empty();
  };
  if (!under_way()) return;
  ++file->awaiting_at_once;
  while (under_way()) done_cv_.wait(mu_);
  --file->awaiting_at_once;
}

Result<RequestPtr> Client::Impl::confirm(Ticket ticket, bool is_write) {
  MutexLock lock(mu_);
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
  wait_locked(request->file, request, [&] { return request->done; });
  tickets_.erase(request->ticket);
  leave_window(*request->file, *request);
  notify_waiters();  // room in the window
  return request;
}

}  // namespace pagefile
