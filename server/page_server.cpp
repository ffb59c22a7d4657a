#include "core/mutex.h"
#include "server/page_server.h"

#include <algorithm>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "core/log.h"
#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "server/page_server_impl.h"
#include "server/session.h"
#include "wire/pagefile.capnp.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

// What page work needs of a request's share (it points into the request).
ShareRef share_ref(wire::Share::Reader share) {
  return {share.getFileId(), share.getPageSize(), std::string_view(share.getPolicy().cStr()), share.getFence(),
          share.getCluster(), share.getSectorChecksums(), share.getDirectory()};
}

ShareLayout layout_of(wire::Share::Reader share) {
  return {share.getStripePages(), share.getServerCount(), share.getServerIndex(),
          std::max<uint32_t>(share.getReplicas(), 1)};
}

// A read of `count` pages of `page_size` bytes from `first` on, as any
// server must refuse it (the full path's answer says why; the paths that
// answer without it leave a refused read to it).
// The pages one scrub request verifies at most, so that each answer comes
// soon and `pagefile scrub` can show its progress.
constexpr uint32_t kMaxScrubPages = 4096;

// The checksums of a read's pages, on their way to the answer.
class PageSums {
 public:
  explicit PageSums(uint32_t count) : sums_(count) {}
  std::span<uint64_t> span() { return sums_; }
  void to_wire(wire::Response::Builder response) const {
    if (sums_.empty()) return;
    auto list = response.initChecksums(static_cast<unsigned>(sums_.size()));
    for (unsigned i = 0; i < sums_.size(); ++i) list.set(i, sums_[i]);
  }

 private:
  std::vector<uint64_t> sums_;
};

Status check_read(uint32_t page_size, int64_t first, uint32_t count) {
  if (Status s = check_page_size(page_size); !s) return s;
  if (count == 0 || count > kMaxFrameBytes / 2 / page_size) {
    return Status::invalid_argument("read", fmt::format("run of {} pages", count));
  }
  if (Status s = check_page_number(first, "read"); !s) return s;
  return check_page_number(first + count - 1, "read");
}

}  // namespace

Frame error_frame(uint64_t id, const Status& why) {
  capnp::MallocMessageBuilder message;
  auto response = message.initRoot<wire::Response>();
  response.setId(id);
  response.setVersion(wire::PROTOCOL_VERSION);
  to_wire(why, response.initError());
  return to_frame(message);
}

// ---- PageServer::Impl: lifetime --------------------------------------------

PageServer::Impl::Impl(const ServerOptions& options, IoRuntime& runtime)
    : options_(options), runtime_(runtime), shares_(options, tally_),
      cluster_(options.dir),
      catalog_(options.dir, options.lease, &cluster_, options.etcd) {}

Status PageServer::Impl::start(const Address& address, InprocHub* hub) {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir / "shares", ec);
  if (ec) return Status::io_error(options_.dir.string(), fmt::format("create: {}", ec.message()));
  auto dir_lock = DirLock::acquire(options_.dir);
  if (!dir_lock) return dir_lock.status();
  dir_lock_ = std::move(*dir_lock);
  if (Status s = cluster_.load(); !s) return s;
  if (Status s = catalog_.open_existing(); !s) return s;
  // The accept handler may run after this server is gone (the listener's
  // loop outlives it while an accept is pending): it holds it weakly.
  std::weak_ptr<Impl> weak = shared_from_this();
  auto listener = listen(
      runtime_.io(), address,
      [weak](std::shared_ptr<Connection> connection) {
        auto self = weak.lock();
        if (!self) {
          connection->close();
          return;
        }
        auto session = std::make_shared<Session>(self, std::move(connection));
        {
          MutexLock lock(self->sessions_mu_);
          if (self->stopping_) {
            session->close();
            return;
          }
          if (self->sessions_.size() >= self->options_.max_connections) {
            self->tally_.errors++;
            logger().warn("connection refused peer={} why=\"max-connections {} reached\"", session->peer(),
                       self->options_.max_connections);
            session->refuse(Status::busy(
                "server", fmt::format("has {} connections, the most it takes (--max-connections)",
                                      self->options_.max_connections)),
                           self->runtime_.io());
            return;
          }
          self->sessions_.push_back(session);
          self->tally_.connections++;
        }
        session->start();
      },
      hub, options_.unix_socket_mode, options_.tls);
  if (!listener) return listener.status();
  listener_ = std::move(*listener);
  address_ = listener_->address();
  if (options_.idle_timeout.count() > 0) {
    idle_timer_ = std::make_unique<boost::asio::steady_timer>(runtime_.io());
    sweep_idle();
  }
  return Status::ok();
}

void PageServer::Impl::sweep_idle() {
  const auto every = std::clamp<std::chrono::steady_clock::duration>(options_.idle_timeout / 4,
                                                                    std::chrono::milliseconds(100), std::chrono::seconds(1));
  idle_timer_->expires_after(every);
  idle_timer_->async_wait([weak = std::weak_ptr<Impl>(shared_from_this())](const boost::system::error_code& ec) {
    auto self = weak.lock();
    if (ec || !self) return;
    std::vector<std::shared_ptr<Session>> idle;
    const auto since = std::chrono::steady_clock::now() - self->options_.idle_timeout;
    {
      MutexLock lock(self->sessions_mu_);
      if (self->stopping_) return;
      for (const auto& session : self->sessions_) {
        if (session->idle_since(since)) idle.push_back(session);
      }
    }
    for (const auto& session : idle) {
      logger().info("connection idle peer={} idle_timeout_s={}: closing it", session->peer(),
                    self->options_.idle_timeout.count());
      session->close_after_sending();  // an answer still queued goes out first
    }
    self->sweep_idle();
  });
}

void PageServer::Impl::stop() {
  {
    MutexLock lock(sessions_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (listener_) listener_->close();
  std::vector<std::shared_ptr<Session>> sessions;
  {
    MutexLock lock(sessions_mu_);
    while (jobs_in_flight_ != 0) idle_cv_.wait(sessions_mu_);
    sessions = sessions_;
  }
  // Hang up once the last responses are written, and wait (a while) for
  // every connection to end, as a client waiting for an answer learns
  // then that none is coming.
  for (auto& s : sessions) s->close_after_sending();
  sessions.clear();
  {
    MutexLock lock(sessions_mu_);
    auto deadline = std::chrono::steady_clock::now() + IoRuntime::kFinishGrace;
    while (!sessions_.empty() && idle_cv_.wait_until(sessions_mu_, deadline)) {
    }
    sessions = sessions_;
  }
  for (auto& s : sessions) s->close();  // a peer that would not read its last answers
  {
    MutexLock lock(sessions_mu_);
    sessions_.clear();
    paused_.clear();
  }
  // Nothing reaches the catalog after stopping_ (direct calls are refused),
  // so the directory can go to a successor in this process.
  catalog_.close();
  dir_lock_.reset();
}

bool PageServer::Impl::admit(const std::shared_ptr<Session>& session, uint64_t write_bytes) {
  MutexLock lock(sessions_mu_);
  if (stopping_) return false;
  ++jobs_in_flight_;  // stop() waits for it
  if (write_bytes > 0 && tally_.hold_write_bytes(write_bytes) > options_.max_unconfirmed_write_bytes) {
    session->pause();
    paused_.push_back(session);
  }
  return true;
}

void PageServer::Impl::retire(uint64_t write_bytes) {
  std::vector<std::shared_ptr<Session>> resume;
  {
    MutexLock lock(sessions_mu_);
    if (write_bytes > 0) {
      uint64_t held = tally_.unconfirmed_write_bytes -= write_bytes;
      if (held <= options_.max_unconfirmed_write_bytes / 2) resume.swap(paused_);
    }
    --jobs_in_flight_;
  }
  idle_cv_.notify_all();
  for (auto& s : resume) s->resume();
}

void PageServer::Impl::session_ended(const std::shared_ptr<Session>& session) {
  {
    MutexLock lock(sessions_mu_);
    tally_.connections--;
    std::erase(sessions_, session);
    std::erase(paused_, session);
  }
  idle_cv_.notify_all();
}

// ---- PageServer::Impl: answers -----------------------------------------------

std::optional<Frame> PageServer::Impl::answer_from_pool(wire::Request::Reader request) {
  try {
    auto req = request.getRead();
    uint32_t page_size = req.getShare().getPageSize();
    uint32_t count = req.getCount();
    // Anything unusual goes to the work pool, which answers it with the error.
    if (!shares_.pool_enabled() || !check_read(page_size, req.getPage(), count) ||
        !cluster_.serves(req.getShare().getCluster(), req.getShare().getDirectory())) {
      return std::nullopt;
    }
    {
      MutexLock lock(sessions_mu_);
      if (stopping_) return std::nullopt;
    }
    FrameBuilder message(static_cast<size_t>(count) * (page_size / sizeof(capnp::word) + 1) + 16);
    auto response = message.initRoot<wire::Response>();
    response.setId(request.getId());
    response.setVersion(wire::PROTOCOL_VERSION);
    auto data = response.initPages(count * page_size);
    PageSums sums(shares_.checksums() ? count : 0);
    if (!shares_.read_pooled(share_ref(req.getShare()), req.getPage(), count,
                             std::span(reinterpret_cast<std::byte*>(data.begin()), data.size()), sums.span())) {
      return std::nullopt;
    }
    sums.to_wire(response);
    Frame out = message.finish();
    tally_.bytes_out += out.size() * sizeof(capnp::word) + kFrameHeaderBytes;
    return out;
  } catch (const kj::Exception&) {
    return std::nullopt;  // the work pool's answer reports the malformed request
  }
}

Frame PageServer::Impl::respond(const Frame& frame, uint32_t* error) {
  capnp::MallocMessageBuilder response_message;
  uint64_t id = 0;
  Frame out;
  try {
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(frame.data(), frame.size()),
                                         frame_reader_options());
    auto request = reader.getRoot<wire::Request>();
    id = request.getId();
    execute(request, response_message);
    if (auto response = response_message.getRoot<wire::Response>(); response.isError()) {
      tally_.errors++;
      if (error != nullptr) *error = response.getError().getCode();
      // What an operator must hear of: refusals of stale writers and
      // clients of another incarnation, damaged pages, a failing disk.
      auto code = error_code_from_number(response.getError().getCode());
      if (code == Code::kStale || code == Code::kCorruption || code == Code::kIOError || code == Code::kNoSpace) {
        logger().log(code == Code::kStale ? spdlog::level::warn : spdlog::level::err, "request refused op={} code={} message=\"{}\"",
                  RequestMetrics::kind_name(static_cast<unsigned>(request.which())), code_name(*code),
                  response.getError().getMessage().cStr());
      }
    }
    out = to_frame(response_message);
  } catch (const kj::Exception& e) {
    tally_.errors++;
    out = error_frame(id, Status::corruption("request", fmt::format("malformed message: {}",
                                                                    e.getDescription().cStr())));
    if (error != nullptr) *error = static_cast<uint32_t>(Code::kCorruption);
  }
  tally_.bytes_out += out.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  return out;
}

Status PageServer::Impl::check_cluster(wire::Request::Reader request) {
  switch (request.which()) {
    case wire::Request::READ: return check_share(request.getRead().getShare());
    case wire::Request::WRITE: return check_share(request.getWrite().getShare());
    case wire::Request::SYNC: return check_share(request.getSync());
    case wire::Request::FENCE: return check_share(request.getFence());
    case wire::Request::TRUNCATE: return check_share(request.getTruncate().getShare());
    case wire::Request::SCRUB: return check_share(request.getScrub().getShare());
    case wire::Request::DROP_SHARE: {
      // Removing what is not here anyway is done: a directory that lost
      // its pages must not keep the file's removal from finishing.
      auto share = request.getDropShare();
      Status s = check_share(share);
      return s.is(Code::kIOError) && cluster_.directory() != share.getDirectory() ? Status::ok() : s;
    }
    default: return Status::ok();  // the catalog checks its own (catalog_service.cpp)
  }
}

Status PageServer::Impl::check_share(wire::Share::Reader share) {
  return cluster_.check(share.getCluster(), share.getDirectory());
}

void PageServer::Impl::execute(wire::Request::Reader request,
                               capnp::MallocMessageBuilder& response_message) {
  auto response = response_message.initRoot<wire::Response>();
  response.setId(request.getId());
  response.setVersion(wire::PROTOCOL_VERSION);
  Status s = check_cluster(request);
  if (s) switch (request.which()) {
    case wire::Request::PING: break;
    case wire::Request::READ: {
      auto req = request.getRead();
      uint32_t page_size = req.getShare().getPageSize();
      if (s = check_read(page_size, req.getPage(), req.getCount()); !s) break;
      auto data = response.initPages(req.getCount() * page_size);
      PageSums sums(shares_.checksums() ? req.getCount() : 0);
      s = shares_.read(share_ref(req.getShare()), req.getPage(), req.getCount(),
                       std::span(reinterpret_cast<std::byte*>(data.begin()), data.size()), sums.span(),
                       layout_of(req.getShare()));
      if (s) sums.to_wire(response);
      break;
    }
    case wire::Request::WRITE: {
      auto req = request.getWrite();
      auto data = req.getData();
      auto wire_sums = req.getChecksums();
      std::vector<uint64_t> sums;
      sums.reserve(wire_sums.size());
      for (uint64_t sum : wire_sums) sums.push_back(sum);
      s = shares_.write(share_ref(req.getShare()), req.getPage(),
                        std::span(reinterpret_cast<const std::byte*>(data.begin()), data.size()), sums,
                        /*in_place=*/false, req.getRepair());
      break;
    }
    case wire::Request::SCRUB: s = scrub(request.getScrub(), response); break;
    case wire::Request::SYNC: s = shares_.sync(share_ref(request.getSync())); break;
    case wire::Request::FENCE: s = shares_.check_fence(request.getFence().getFileId(), request.getFence().getFence()); break;
    case wire::Request::TRUNCATE:
      if (request.getTruncate().getPages() < 0) {
        s = Status::invalid_argument("truncate", "negative size");
        break;
      }
      s = shares_.truncate(share_ref(request.getTruncate().getShare()), request.getTruncate().getPages());
      break;
    case wire::Request::DROP_SHARE: s = shares_.drop(request.getDropShare().getFileId()); break;
    case wire::Request::STATS: fill_stats(response.initStats()); break;
    case wire::Request::METRICS: response.setMetrics(metrics_.prometheus(snapshot())); break;
    case wire::Request::JOIN: {
      auto joined = cluster_.join(request.getJoin());
      if (joined) response.setDirectory(*joined);
      s = joined.status();
      break;
    }
    case wire::Request::DISK_READ_LOG: {
      // The newest entries that fit a frame (16 bytes each and a word of
      // list overhead).
      constexpr size_t kMost = kMaxFrameBytes / 2 / 24;
      auto entries = shares_.disk_read_log_tail(kMost);
      auto log = response.initDiskReadLog(static_cast<unsigned>(entries.size()));
      for (unsigned i = 0; i < entries.size(); ++i) {
        log[i].setFileId(entries[i].first);
        log[i].setPage(entries[i].second);
      }
      break;
    }
    default: s = catalog_.answer(request, response); break;
  }
  if (!s) {
    to_wire(s, response.initError());
  } else if (response.isPages() || response.isFile() || response.isFiles() || response.isStats() ||
             response.isLockState() || response.isLocks() || response.isDiskReadLog() || response.isScrub() ||
             response.isDirectory()) {
    // the handler filled in its answer
  } else {
    response.setOk();
  }
}

Status PageServer::Impl::scrub(wire::ScrubShare::Reader request, wire::Response::Builder response) {
  auto ref = share_ref(request.getShare());
  uint32_t count = std::min<uint32_t>(request.getCount(), kMaxScrubPages);
  auto result = shares_.scrub(ref, request.getFirst(), count);
  if (!result) return result.status();
  auto report = response.initScrub();
  report.setChecked(result->checked);
  report.setSharePages(result->share_pages);
  auto bad = report.initBad(static_cast<unsigned>(result->bad.size()));
  for (unsigned i = 0; i < result->bad.size(); ++i) {
    bad[i].setPage(result->bad[i].first);
    bad[i].setMessage(result->bad[i].second.to_string());
  }
  return Status::ok();
}

ServerCounters PageServer::Impl::snapshot() const {
  ServerCounters out = tally_.snapshot();
  out.cache_pages = shares_.pool().size();
  out.lease_expiries = catalog_.lease_expiries();
  return out;
}

void PageServer::Impl::fill_stats(wire::ServerStats::Builder out) const {
  ServerCounters c = snapshot();
#define PAGEFILE_TALLY_WIRE(field, wire_name) out.set##wire_name(c.field);
  PAGEFILE_SERVER_TALLY(PAGEFILE_TALLY_WIRE)
#undef PAGEFILE_TALLY_WIRE
  out.setCachePages(c.cache_pages);
  out.setLeaseExpiries(c.lease_expiries);
  out.setDiskLatencyUs(static_cast<uint32_t>(options_.disk_latency.count()));
  out.setCacheCapacity(shares_.pool().capacity());
  out.setPrefetchPages(options_.prefetch_pages);
  auto all = shares_.pool().stats();
  auto files = out.initFiles(static_cast<unsigned>(all.size()));
  for (unsigned i = 0; i < all.size(); ++i) {
    files[i].setFileId(all[i].file_id);
    files[i].setPolicy(all[i].policy);
    files[i].setHits(all[i].counters.hits);
    files[i].setMisses(all[i].counters.misses);
    files[i].setPrefetchUsed(all[i].counters.prefetch_used);
    files[i].setPrefetchWasted(all[i].counters.prefetch_wasted);
    files[i].setEvictions(all[i].counters.evictions);
    files[i].setPages(all[i].counters.pages);
  }
}

// ---- PageServer ------------------------------------------------------------

Result<std::unique_ptr<PageServer>> PageServer::start(const ServerOptions& options, const Address& address,
                                                      InprocHub* hub, std::shared_ptr<IoRuntime> runtime) {
  if (options.dir.empty()) return Status::invalid_argument("server", "no directory given");
  if (options.threads == 0) return Status::invalid_argument("server", "threads must be at least 1");
  if (!runtime) runtime = IoRuntime::start(options.threads, options.poll_before_sleep);
  auto impl = std::make_shared<Impl>(options, *runtime);
  if (Status s = impl->start(address, hub); !s) {
    impl->stop();
    return s;
  }
  return std::unique_ptr<PageServer>(new PageServer(std::move(impl), std::move(runtime)));
}

PageServer::PageServer(std::shared_ptr<Impl> impl, std::shared_ptr<IoRuntime> runtime)
    : runtime_(std::move(runtime)), impl_(std::move(impl)) {}

PageServer::~PageServer() {
  stop();
  // impl_ goes before runtime_ (members are destroyed in reverse order):
  // a runtime of the server's own then joins its threads last.
}

Frame PageServer::catalog_direct(const Frame& request) {
  // (Direct requests carry no id: the caller waits for this answer alone.)
  if (!impl_->enter_direct()) return error_frame(0, Status::disconnected("server", "is shutting down"));
  impl_->tally_.requests++;
  impl_->tally_.bytes_in += request.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  Frame out = impl_->respond(request);
  impl_->leave_direct();
  return out;
}

std::optional<Status> PageServer::read_direct(const ShareRef& share, int64_t page, std::span<std::byte> out) {
  if (out.size() != share.page_size || !check_read(share.page_size, page, 1)) {
    return std::nullopt;  // sent the usual way, it gets the usual error
  }
  if (!impl_->cluster_.serves(share.cluster, share.directory)) return std::nullopt;  // the usual way judges it
  if (!impl_->enter_direct()) return std::nullopt;
  std::optional<Status> done;
  if (impl_->shares_.read_pooled(share, page, 1, out, {})) {
    done = Status::ok();
  } else if (impl_->shares_.reads_at_once(share)) {
    done = impl_->shares_.read(share, page, 1, out, {}, std::nullopt, /*in_place=*/true);
  }
  if (done) {
    impl_->tally_.requests++;
    impl_->tally_.bytes_out += out.size();
    if (!*done) impl_->tally_.errors++;
  }
  impl_->leave_direct();
  return done;
}

std::optional<Status> PageServer::write_direct(const ShareRef& share, int64_t page, std::span<const std::byte> data,
                                               uint64_t checksum) {
  if (!impl_->cluster_.serves(share.cluster, share.directory) || !impl_->shares_.writes_at_once() ||
      !impl_->enter_direct()) {
    return std::nullopt;
  }
  impl_->tally_.requests++;
  impl_->tally_.bytes_in += data.size();
  Status s = checksum == kNoChecksum ? impl_->shares_.write(share, page, data, {})
                                     : impl_->shares_.write(share, page, data, std::span(&checksum, 1), /*in_place=*/true);
  if (!s) impl_->tally_.errors++;
  impl_->leave_direct();
  return s;
}

Address PageServer::address() const { return impl_->address_; }
Status PageServer::set_tls(std::shared_ptr<TlsContext> tls) { return impl_->set_tls(std::move(tls)); }
void PageServer::stop() { impl_->stop(); }

ServerCounters PageServer::counters() const { return impl_->snapshot(); }

std::string PageServer::metrics_text() const { return impl_->metrics_.prometheus(impl_->snapshot()); }

std::vector<ServerFileCounters> PageServer::file_counters() const {
  std::vector<ServerFileCounters> out;
  for (auto& f : impl_->shares_.pool().stats()) out.push_back({f.file_id, f.policy, f.counters});
  return out;
}

std::vector<std::pair<uint64_t, int64_t>> PageServer::disk_read_log() const {
  return impl_->shares_.disk_read_log();
}

}  // namespace pagefile::net
