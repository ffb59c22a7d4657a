// pagefile::Client (include/pagefile/pagefile.h): the checks of arguments
// that need no state, and forwarding to Client::Impl (client/client_impl.h).
#include <fmt/format.h>

#include "client/client_access.h"
#include "client/client_impl.h"

namespace pagefile {

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

std::optional<Result<PageRead>> Client::read_at_once(Fd fd, int64_t page, std::span<std::byte> buffer,
                                                      bool may_wait) {
  return impl_->read_at_once(fd, page, buffer, may_wait);
}

std::optional<Result<int64_t>> Client::read_pages_at_once(Fd fd, int64_t first, int64_t count,
                                                          std::span<std::byte> buffer) {
  return impl_->read_pages_at_once(fd, first, count, buffer);
}

std::optional<Status> Client::write_at_once(Fd fd, int64_t page, std::span<const std::byte> data,
                                            ChangedBytes changed) {
  return impl_->write_at_once(fd, page, 1, data, changed);
}

std::optional<Status> Client::write_pages_at_once(Fd fd, int64_t first, std::span<const std::byte> data) {
  return impl_->write_at_once(fd, first, -1, data, ChangedBytes{});
}

Status Client::write(Fd fd, int64_t page, std::span<const std::byte> data) {
  auto ticket = write_request(fd, page, data);
  if (!ticket) return ticket.status();
  return write_confirm(*ticket);
}

Status Client::sync(Fd fd) { return impl_->sync(fd); }
Status Client::truncate(Fd fd, int64_t pages) { return impl_->truncate(fd, pages); }
Result<FileStatus> Client::status(Fd fd) { return impl_->status(fd); }
Result<Client::Size> Client::size(Fd fd) { return impl_->size(fd); }
Status Client::set_page_size(Fd fd, uint32_t page_size) { return impl_->set_page_size(fd, page_size); }
Result<uint32_t> Client::server_of(Fd fd, int64_t page) {
  if (Status s = check_page_number(page, "server_of"); !s) return s;
  auto io = impl_->io_of(fd);
  if (!io) return io.status();
  return (*io)->server_index(page);
}

Status Client::set_concurrency(Fd fd, uint32_t concurrency) {
  return impl_->set_concurrency(fd, concurrency);
}

Status Client::set_request_timeout(int ms) { return impl_->set_request_timeout(ms); }
int Client::request_timeout_ms() const { return impl_->request_timeout_ms(); }

Status Client::unlink(std::string_view name, Location location, uint64_t lock_token) {
  return impl_->unlink(name, location, lock_token);
}

Status Client::lock(Fd fd, LockMode mode, LockWait wait) { return impl_->lock(fd, mode, wait); }
Status Client::unlock(Fd fd) { return impl_->unlock(fd); }

Result<std::shared_ptr<PageIo>> ClientAccess::page_io(Client& client, Fd fd) { return client.impl_->io_of(fd); }
bool ClientAccess::stopped(const Client& client) { return client.impl_->stopping(); }

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

Status Client::exclude_other_writers(Fd fd, bool excluded) {
  auto io = impl_->io_of(fd);
  if (!io) return io.status();
  (*io)->exclude_other_writers(excluded);
  return Status::ok();
}

bool Client::unchanged_since_unlock(Fd fd) {
  auto io = impl_->io_of(fd);
  return io && (*io)->unchanged_since_unlock();
}
Status Client::pin(Fd fd, int64_t page) { return impl_->pin(fd, page); }
Status Client::unpin(Fd fd, int64_t page) { return impl_->unpin(fd, page); }
Status Client::drop_cached(Fd fd) { return impl_->drop_cached(fd); }
Status Client::abandon_failed_writes(Fd fd) { return impl_->abandon_failed_writes(fd); }
Result<FileCounters> Client::counters(Fd fd) { return impl_->counters(fd); }

}  // namespace pagefile
