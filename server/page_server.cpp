#include "server/page_server.h"

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "store/local_pagefile.h"
#include "core/page_bounds.h"
#include "server/catalog_store.h"
#include "server/dir_lock.h"
#include "server/lease_table.h"
#include "wire/pagefile.capnp.h"
#include "server/server_pool.h"
#include "wire/io_thread.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

namespace asio = boost::asio;

constexpr int64_t kWholeFile = INT64_MAX;

// What a request touches, for ordering within one connection: pages
// [first, last) of a file; the catalog is file 0.
struct Span {
  uint64_t file = 0;
  int64_t first = 0;
  int64_t last = 0;
  bool overlaps(const Span& o) const { return file == o.file && first < o.last && o.first < last; }
};

struct Counters {
  std::atomic<uint64_t> requests{0}, pages_read{0}, pages_written{0}, cache_hits{0},
      cache_misses{0}, disk_reads{0}, disk_writes{0}, syncs{0}, bytes_in{0}, bytes_out{0},
      errors{0}, unconfirmed_write_bytes{0}, peak_unconfirmed_write_bytes{0};
  std::atomic<uint32_t> connections{0};
};

class Session;

// What page work needs of a request's share (it points into the request).
ShareRef share_ref(wire::Share::Reader share) {
  return {share.getFileId(), share.getPageSize(), std::string_view(share.getPolicy().cStr())};
}

// A read of `count` pages of `page_size` bytes from `first` on, as any
// server must refuse it (the pool's answer says why; the paths that answer
// without the pool leave a refused read to it).
Status check_read(uint32_t page_size, int64_t first, uint32_t count) {
  if (Status s = check_page_size(page_size); !s) return s;
  if (count == 0 || count > kMaxFrameBytes / 2 / page_size) {
    return Status::invalid_argument("read", fmt::format("run of {} pages", count));
  }
  if (Status s = check_page_number(first, "read"); !s) return s;
  return check_page_number(first + count - 1, "read");
}

// The answer to request `id` that carries `why`.
Frame error_frame(uint64_t id, const Status& why) {
  capnp::MallocMessageBuilder message;
  auto response = message.initRoot<wire::Response>();
  response.setId(id);
  response.setVersion(wire::PROTOCOL_VERSION);
  to_wire(why, response.initError());
  return to_frame(message);
}

}  // namespace

class PageServer::Impl {
 public:
  explicit Impl(const ServerOptions& options)
      : options_(options), pool_(options.threads), cache_(options.cache_pages, options.prefetch_pages) {}

  Status start(const Address& address, InprocHub* hub);
  void stop();

  // Runs one decoded request; fills `response`. Called on the page pool.
  void execute(wire::Request::Reader request, capnp::MallocMessageBuilder& response_message);
  // Decodes `frame`, executes it and encodes the response (a malformed
  // request gets a kCorruption answer), counting errors and bytes out.
  Frame respond(const Frame& frame);
  // The answer to a read whose pages are all in the cache, made on the
  // calling (network) thread: a cache hit then costs no hand-off to the pool
  // and back. Nothing when the read needs the pool (a miss, or a request the
  // pool must judge).
  std::optional<Frame> read_cached(wire::Request::Reader request);
  // Reads `count` pages from `first` on into `out`; `window` is the
  // request's share, which a global-sequential file's window needs (without
  // it such a file reads as any other).
  Status read_pages(const ShareRef& share, int64_t first, uint32_t count, std::span<std::byte> out,
                    std::optional<wire::Share::Reader> window);
  // Writes whole pages from `first` on, checking what a WRITE request's
  // sender could get wrong.
  Status write_run(const ShareRef& share, int64_t first, std::span<const std::byte> data);
  // Brackets work done by direct call (answer_catalog, read_now,
  // write_now) so that stop() waits for it; false once stopping.
  bool enter_direct();
  void leave_direct();
  ServerCounters snapshot() const;

  Address address_;
  const ServerOptions options_;
  asio::io_context io_;
  std::optional<IoThread> io_thread_;
  asio::thread_pool pool_;
  std::unique_ptr<Listener> listener_;

  Counters counters_;
  ServerPool cache_;

  // A global-sequential file's sliding window (TOPs 2.2): pages up to
  // read_through have been read from disk in ascending order. `fill` is held
  // while the window moves, so one window read finishes before the next
  // starts and the disk sees one ascending run.
  struct Window {
    std::mutex fill;
    int64_t read_through = -1;  // GUARDED_BY(fill)
  };
  std::mutex windows_mu_;
  std::map<uint64_t, std::shared_ptr<Window>> windows_;  // GUARDED_BY(windows_mu_)

  std::mutex disk_arm_;  // the emulated disk: one access at a time
  mutable std::mutex log_mu_;
  std::deque<std::pair<uint64_t, int64_t>> disk_read_log_;  // GUARDED_BY(log_mu_)

  std::mutex shares_mu_;
  std::map<uint64_t, std::shared_ptr<LocalPagefile>> shares_;  // GUARDED_BY(shares_mu_)

  std::unique_ptr<DirLock> dir_lock_;  // held from start to destruction

  std::mutex catalog_mu_;
  std::unique_ptr<CatalogStore> catalog_;  // GUARDED_BY(catalog_mu_), opened on first use
  std::unique_ptr<LeaseTable> leases_;     // GUARDED_BY(catalog_mu_)
  bool catalog_closed_ = false;            // GUARDED_BY(catalog_mu_): set by stop()

  std::mutex sessions_mu_;
  std::condition_variable idle_cv_;
  std::vector<std::shared_ptr<Session>> sessions_;  // GUARDED_BY(sessions_mu_)
  uint64_t jobs_in_flight_ = 0;                     // GUARDED_BY(sessions_mu_)
  bool stopping_ = false;                           // GUARDED_BY(sessions_mu_)
  std::vector<std::shared_ptr<Session>> paused_;    // GUARDED_BY(sessions_mu_)

 private:
  Result<std::shared_ptr<LocalPagefile>> share(uint64_t file_id, uint32_t page_size, bool create);

  Status sync_share(wire::Share::Reader req);
  Status truncate_share(wire::TruncateShare::Reader req);
  Status drop_share(wire::Share::Reader req);
  Status catalog_request(wire::Request::Reader request, wire::Response::Builder response);
  Status open_catalog();
  void fill_stats(wire::ServerStats::Builder out) const;
  void hold_disk_arm();
  std::shared_ptr<Window> window(uint64_t file_id);
  // The file's pages at and beyond `pages` are gone: a window past them
  // moves back so that they are read again when they come back.
  void reset_window(uint64_t file_id, int64_t pages);
  // Reads `page` (a miss) from disk, logs it, and hands it to the pool.
  // REQUIRES: disk_arm_ held.
  Status read_from_disk(LocalPagefile& file, uint64_t file_id, int64_t page, std::span<std::byte> out);
  // A miss of a global-sequential file: moves the window past `page` when
  // it is beyond it, reading ahead in ascending order, else reads the page.
  Status read_global_sequential(LocalPagefile& file, wire::Share::Reader share, int64_t page,
                                std::span<std::byte> out);
};

namespace {

// One connection's requests: decoded on the network thread, run on the
// pool, ordered where they touch the same pages.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(PageServer::Impl& server, std::shared_ptr<Connection> connection)
      : server_(server), connection_(std::move(connection)) {}

  void start() {
    auto self = shared_from_this();
    connection_->start([self](Frame frame) { self->on_frame(std::move(frame)); },
                       [self](Status why) { self->on_close(why); });
  }

  void close() { connection_->close(); }
  void close_after_sending() { connection_->close_after_sending(); }
  void pause() { connection_->pause_reading(); }
  void resume() { connection_->resume_reading(); }

 private:
  struct Job {
    uint64_t seq = 0;
    Span span;
    std::shared_ptr<Frame> frame;
    uint64_t write_bytes = 0;
  };

  void on_frame(Frame frame);
  void on_close(const Status& why);
  // Whether a request touching `span` must wait for an earlier one.
  bool overtakes_earlier(const Span& span);
  void run(Job job);
  void finish(const Job& job);
  void reply_error(uint64_t id, const Status& status, bool then_close);

  PageServer::Impl& server_;
  std::shared_ptr<Connection> connection_;
  std::mutex mu_;
  uint64_t next_seq_ = 0;          // GUARDED_BY(mu_)
  std::map<uint64_t, Job> active_;  // GUARDED_BY(mu_): running or waiting, by arrival
  std::set<uint64_t> running_;     // GUARDED_BY(mu_): jobs handed to the pool
  std::atomic<bool> closed_{false};
};

}  // namespace

// ---- Session ---------------------------------------------------------------

void Session::reply_error(uint64_t id, const Status& status, bool then_close) {
  server_.counters_.errors++;
  connection_->send(error_frame(id, status));
  if (then_close) connection_->close_after_sending();
}

void Session::on_frame(Frame frame) {
  server_.counters_.requests++;
  server_.counters_.bytes_in += frame.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  Job job;
  job.frame = std::make_shared<Frame>(std::move(frame));
  uint64_t id = 0;
  try {
    capnp::FlatArrayMessageReader reader(
        kj::ArrayPtr<const capnp::word>(job.frame->data(), job.frame->size()),
        frame_reader_options());
    auto request = reader.getRoot<wire::Request>();
    id = request.getId();
    if (request.getVersion() != wire::PROTOCOL_VERSION) {
      reply_error(id,
                  Status::not_supported(
                      "protocol", fmt::format("client speaks version {}, this server speaks {}",
                                              request.getVersion(), wire::PROTOCOL_VERSION)),
                  false);
      return;
    }
    switch (request.which()) {
      case wire::Request::READ: {
        auto r = request.getRead();
        job.span = {r.getShare().getFileId() + 1, r.getPage(),
                    r.getPage() + std::max<int64_t>(1, r.getCount())};
        break;
      }
      case wire::Request::WRITE: {
        auto w = request.getWrite();
        uint32_t ps = std::max<uint32_t>(1, w.getShare().getPageSize());
        int64_t pages = std::max<int64_t>(1, static_cast<int64_t>(w.getData().size() / ps));
        job.span = {w.getShare().getFileId() + 1, w.getPage(), w.getPage() + pages};
        job.write_bytes = w.getData().size();
        break;
      }
      case wire::Request::SYNC: job.span = {request.getSync().getFileId() + 1, 0, kWholeFile}; break;
      case wire::Request::TRUNCATE:
        job.span = {request.getTruncate().getShare().getFileId() + 1, 0, kWholeFile};
        break;
      case wire::Request::DROP_SHARE:
        job.span = {request.getDropShare().getFileId() + 1, 0, kWholeFile};
        break;
      case wire::Request::PING:
      case wire::Request::DISK_READ_LOG:
      case wire::Request::STATS: job.span = {}; break;  // touches nothing
      default: job.span = {0, 0, kWholeFile}; break;    // the catalog, one at a time
    }
    // A read is answered here, without the pool, when the cache holds all
    // its pages and no earlier request of this connection touches them.
    if (request.isRead() && !overtakes_earlier(job.span)) {
      if (std::optional<Frame> out = server_.read_cached(request)) {
        connection_->send(std::move(*out));
        return;
      }
    }
  } catch (const kj::Exception& e) {
    // A frame that is not a Request: answer and hang up, since nothing
    // after it on this stream can be trusted.
    reply_error(id, Status::corruption("request", fmt::format("malformed message: {}", e.getDescription().cStr())),
                true);
    return;
  }

  bool start_now = false;
  {
    std::lock_guard lock(server_.sessions_mu_);
    if (server_.stopping_) {
      reply_error(id, Status::disconnected("server", "is shutting down"), false);
      return;
    }
    ++server_.jobs_in_flight_;
    if (job.write_bytes > 0) {
      uint64_t held = server_.counters_.unconfirmed_write_bytes += job.write_bytes;
      uint64_t peak = server_.counters_.peak_unconfirmed_write_bytes;
      while (held > peak && !server_.counters_.peak_unconfirmed_write_bytes.compare_exchange_weak(peak, held)) {
      }
      if (held > server_.options_.max_unconfirmed_write_bytes) {
        connection_->pause_reading();
        server_.paused_.push_back(shared_from_this());
      }
    }
  }
  {
    std::lock_guard lock(mu_);
    job.seq = next_seq_++;
    start_now = true;
    for (const auto& [seq, earlier] : active_) {
      if (earlier.span.overlaps(job.span)) {
        start_now = false;
        break;
      }
    }
    active_.emplace(job.seq, job);
    if (start_now) running_.insert(job.seq);
  }
  if (start_now) {
    asio::post(server_.pool_, [self = shared_from_this(), job] { self->run(job); });
  }
}

bool Session::overtakes_earlier(const Span& span) {
  std::lock_guard lock(mu_);
  for (const auto& [seq, earlier] : active_) {
    if (earlier.span.overlaps(span)) return true;
  }
  return false;
}

void Session::run(Job job) {
  if (closed_) {
    // The client is gone and was told its requests failed; a write it may
    // already have sent again on a new connection must not be overtaken by
    // this stale one.
    finish(job);
    return;
  }
  connection_->send(server_.respond(*job.frame));
  finish(job);
}

void Session::finish(const Job& job) {
  std::vector<Job> ready;
  {
    std::lock_guard lock(mu_);
    active_.erase(job.seq);
    running_.erase(job.seq);
    // Start every waiting job that no earlier job overlaps any more.
    for (auto it = active_.begin(); it != active_.end(); ++it) {
      if (running_.count(it->first)) continue;
      bool blocked = false;
      for (auto earlier = active_.begin(); earlier != it; ++earlier) {
        if (earlier->second.span.overlaps(it->second.span)) {
          blocked = true;
          break;
        }
      }
      if (!blocked) {
        running_.insert(it->first);
        ready.push_back(it->second);
      }
    }
  }
  for (Job& next : ready) {
    asio::post(server_.pool_, [self = shared_from_this(), next] { self->run(next); });
  }
  std::vector<std::shared_ptr<Session>> resume;
  {
    std::lock_guard lock(server_.sessions_mu_);
    if (job.write_bytes > 0) {
      uint64_t held = server_.counters_.unconfirmed_write_bytes -= job.write_bytes;
      if (held <= server_.options_.max_unconfirmed_write_bytes / 2) resume.swap(server_.paused_);
    }
    --server_.jobs_in_flight_;
  }
  server_.idle_cv_.notify_all();
  for (auto& s : resume) s->resume();
}

void Session::on_close(const Status& why) {
  (void)why;  // a client going away is routine
  closed_ = true;  // requests not yet started are dropped; running ones finish
  std::lock_guard lock(server_.sessions_mu_);
  server_.counters_.connections--;
  std::erase(server_.sessions_, shared_from_this());
  std::erase(server_.paused_, shared_from_this());
}

// ---- PageServer::Impl ------------------------------------------------------

std::optional<Frame> PageServer::Impl::read_cached(wire::Request::Reader request) {
  try {
    auto req = request.getRead();
    uint32_t page_size = req.getShare().getPageSize();
    uint32_t count = req.getCount();
    // Anything unusual goes to the pool, which answers it with the error.
    if (options_.cache_pages == 0 || !check_read(page_size, req.getPage(), count)) return std::nullopt;
    {
      std::lock_guard lock(sessions_mu_);
      if (stopping_) return std::nullopt;
    }
    FrameBuilder message(static_cast<size_t>(count) * page_size / sizeof(capnp::word) + 16);
    auto response = message.initRoot<wire::Response>();
    response.setId(request.getId());
    response.setVersion(wire::PROTOCOL_VERSION);
    auto data = response.initPages(count * page_size);
    uint64_t file_id = req.getShare().getFileId();
    cache_.declare(file_id, page_size, std::string_view(req.getShare().getPolicy().cStr()));
    if (!cache_.read_run(file_id, req.getPage(), count, page_size,
                         std::span(reinterpret_cast<std::byte*>(data.begin()), data.size()))) {
      return std::nullopt;
    }
    counters_.pages_read += count;
    counters_.cache_hits += count;
    Frame out = message.finish();
    counters_.bytes_out += out.size() * sizeof(capnp::word) + kFrameHeaderBytes;
    return out;
  } catch (const kj::Exception&) {
    return std::nullopt;  // the pool's run() reports the malformed request
  }
}

Status PageServer::Impl::start(const Address& address, InprocHub* hub) {
  std::error_code ec;
  std::filesystem::create_directories(options_.dir / "shares", ec);
  if (ec) return Status::io_error(options_.dir.string(), fmt::format("create: {}", ec.message()));
  auto dir_lock = DirLock::acquire(options_.dir);
  if (!dir_lock) return dir_lock.status();
  dir_lock_ = std::move(*dir_lock);
  auto listener = listen(
      io_, address,
      [this](std::shared_ptr<Connection> connection) {
        auto session = std::make_shared<Session>(*this, std::move(connection));
        {
          std::lock_guard lock(sessions_mu_);
          if (stopping_) {
            session->close();
            return;
          }
          sessions_.push_back(session);
          counters_.connections++;
        }
        session->start();
      },
      hub);
  if (!listener) return listener.status();
  listener_ = std::move(*listener);
  address_ = listener_->address();
  io_thread_.emplace(io_);
  return Status::ok();
}

void PageServer::Impl::stop() {
  {
    std::unique_lock lock(sessions_mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  if (listener_) listener_->close();
  {
    std::unique_lock lock(sessions_mu_);
    idle_cv_.wait(lock, [&] { return jobs_in_flight_ == 0; });
  }
  pool_.join();
  // Hang up once the last responses are written; the network thread runs
  // until every connection has ended.
  std::vector<std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(sessions_mu_);
    sessions = sessions_;
  }
  for (auto& s : sessions) s->close_after_sending();
  if (io_thread_) io_thread_->finish();
  {
    std::lock_guard lock(sessions_mu_);
    sessions_.clear();
    paused_.clear();
  }
  // Nothing reaches the catalog after stopping_ (answer_catalog refuses),
  // so the directory can go to a successor in this process.
  {
    std::lock_guard lock(catalog_mu_);
    catalog_.reset();
    catalog_closed_ = true;
  }
  dir_lock_.reset();
}

void PageServer::Impl::hold_disk_arm() {
  if (options_.disk_latency.count() > 0) std::this_thread::sleep_for(options_.disk_latency);
}

Result<std::shared_ptr<LocalPagefile>> PageServer::Impl::share(uint64_t file_id, uint32_t page_size,
                                                              bool create) {
  std::lock_guard lock(shares_mu_);
  auto it = shares_.find(file_id);
  if (it != shares_.end()) {
    if (it->second->page_size() != page_size) {
      return Status::invalid_argument(
          fmt::format("file {}", file_id),
          fmt::format("has page size {}, request says {}", it->second->page_size(), page_size));
    }
    return it->second;
  }
  LocalPagefile::OpenSpec spec;
  spec.page_size = page_size;
  spec.create = create;
  spec.dsync = options_.sync == SyncMode::kDsync;
  auto file = LocalPagefile::open(options_.dir / "shares" / fmt::format("{}.pf", file_id), spec);
  if (!file) return file.status();
  std::shared_ptr<LocalPagefile> shared = std::move(*file);
  shares_.emplace(file_id, shared);
  return shared;
}

Status PageServer::Impl::read_pages(const ShareRef& ref, int64_t first, uint32_t count, std::span<std::byte> out,
                                    std::optional<wire::Share::Reader> window) {
  uint64_t file_id = ref.file_id;
  uint32_t page_size = ref.page_size;
  auto file = share(file_id, page_size, /*create=*/false);
  if (!file && !file.status().is(Code::kNotFound)) return file.status();
  bool global_sequential = cache_.declare(file_id, page_size, ref.policy) == kGlobalSequential;
  for (uint32_t i = 0; i < count; ++i) {
    int64_t page = first + i;
    auto buffer = out.subspan(static_cast<size_t>(i) * page_size, page_size);
    counters_.pages_read++;
    if (cache_.read(file_id, page, buffer)) {
      counters_.cache_hits++;
      continue;
    }
    counters_.cache_misses++;
    if (!file) {  // nothing was ever written here: zeros, and no disk access
      std::memset(buffer.data(), 0, buffer.size());
      continue;
    }
    if (global_sequential && cache_.enabled() && window) {
      if (Status s = read_global_sequential(**file, *window, page, buffer); !s) return s;
      continue;
    }
    // The disk access and the cache update happen under the arm, so a write
    // or truncate of the page cannot slip between them and leave the cache
    // holding what the disk no longer does.
    std::lock_guard arm(disk_arm_);
    hold_disk_arm();
    if (Status s = read_from_disk(**file, file_id, page, buffer); !s) return s;
    cache_.fill(file_id, page, buffer);
  }
  return Status::ok();
}

Status PageServer::Impl::read_from_disk(LocalPagefile& file, uint64_t file_id, int64_t page,
                                        std::span<std::byte> out) {
  auto r = file.read_page(page, out);
  if (!r) return r.status();
  counters_.disk_reads++;
  std::lock_guard log(log_mu_);
  disk_read_log_.emplace_back(file_id, page);
  if (disk_read_log_.size() > (1u << 20)) disk_read_log_.pop_front();
  return Status::ok();
}

void PageServer::Impl::reset_window(uint64_t file_id, int64_t pages) {
  std::shared_ptr<Window> w;
  {
    std::lock_guard lock(windows_mu_);
    auto it = windows_.find(file_id);
    if (it == windows_.end()) return;
    w = it->second;
  }
  std::lock_guard fill(w->fill);
  w->read_through = std::min(w->read_through, pages - 1);
}

std::shared_ptr<PageServer::Impl::Window> PageServer::Impl::window(uint64_t file_id) {
  std::lock_guard lock(windows_mu_);
  auto& w = windows_[file_id];
  if (!w) w = std::make_shared<Window>();
  return w;
}

// The window of TOPs 2.2. A miss at `page` beyond the window reads every
// page of this server's share from the window's end up to page + k in
// ascending order, as one disk access (one seek, then a run the emulated
// disk takes as free), keeps the pages other readers will ask for (pinned
// until read), and moves the window. Readers of pages inside a window being
// read wait for it and then hit. A miss behind the window (its page was
// evicted, or written and tossed) is an ordinary read.
//
// Worked example, k = 4, one server, clients A (0,3,6..), B (1,4,7..) and
// C (2,5,8..): B's miss at 1 reads 0..5; A and C find 0 and 2 in the pool;
// A's miss at... never comes: 3, 4 and 5 are there too; C's read of 8
// (beyond 5) reads 6..12. The disk sees 0,1,..,12 in order, each once.
Status PageServer::Impl::read_global_sequential(LocalPagefile& file, wire::Share::Reader share, int64_t page,
                                                std::span<std::byte> out) {
  uint64_t file_id = share.getFileId();
  auto w = window(file_id);
  std::lock_guard fill(w->fill);
  // It may have come in while this reader waited for the window.
  if (cache_.read(file_id, page, out, /*count=*/false)) return Status::ok();
  std::lock_guard arm(disk_arm_);
  hold_disk_arm();
  if (page <= w->read_through) {
    if (Status s = read_from_disk(file, file_id, page, out); !s) return s;
    cache_.fill(file_id, page, out);
    return Status::ok();
  }
  // Which pages are this server's: with placement stripe, unit s over n
  // servers, page p is on server (p / s) % n. Unknown (hash placement, or an
  // older client): the pages asked for only, no read-ahead.
  uint32_t unit = share.getStripePages();
  uint32_t servers = share.getServerCount();
  uint32_t index = share.getServerIndex();
  bool known = unit > 0 && servers > 0 && index < servers;
  auto mine = [&](int64_t p) {
    return known && static_cast<uint64_t>(p / unit) % servers == index;
  };
  auto size = file.size_pages();
  if (!size) return size.status();
  int64_t last = known ? std::min(page + options_.prefetch_pages, *size - 1) : page;
  // Pages fetched ahead that no reader has had yet stay pinned; a file may
  // hold at most half the pool that way, so a reader that never comes
  // cannot starve the other files.
  uint64_t room = cache_.capacity() / 2;
  std::vector<std::byte> buffer(out.size());
  int64_t through = page;
  for (int64_t p = std::max(w->read_through + 1, int64_t{0}); p <= last; ++p) {
    if (p != page && !mine(p)) continue;
    if (p > page && cache_.pages_of(file_id) >= room) break;
    if (p == page) {
      if (Status s = read_from_disk(file, file_id, p, out); !s) return s;
      through = p;
      continue;
    }
    if (cache_.contains(file_id, p)) {
      through = p;
      continue;  // written since, and still held
    }
    if (Status s = read_from_disk(file, file_id, p, buffer); !s) return s;
    // The disk has passed p, kept or not (a page not kept is read again by
    // its reader, behind the window). Behind `page`: its reader is coming;
    // ahead: stop once the pool will not keep more.
    through = p;
    if (!cache_.fill_prefetched(file_id, p, buffer) && p > page) break;
  }
  w->read_through = std::max(w->read_through, through);
  return Status::ok();
}

Status PageServer::Impl::write_run(const ShareRef& ref, int64_t first, std::span<const std::byte> data) {
  uint32_t page_size = ref.page_size;
  if (Status s = check_page_size(page_size); !s) return s;
  if (data.empty() || data.size() % page_size != 0) {
    return Status::invalid_argument(
        fmt::format("file {}", ref.file_id),
        fmt::format("write of {} bytes is not a whole number of {}-byte pages", data.size(), page_size));
  }
  size_t pages = data.size() / page_size;
  if (Status s = check_page_number(first, "write"); !s) return s;
  if (Status s = check_page_number(first + static_cast<int64_t>(pages) - 1, "write"); !s) return s;
  auto file = share(ref.file_id, page_size, /*create=*/true);
  if (!file) return file.status();
  cache_.declare(ref.file_id, page_size, ref.policy);
  for (size_t i = 0; i < pages; ++i) {
    int64_t page = first + static_cast<int64_t>(i);
    auto bytes = data.subspan(i * page_size, page_size);
    {
      std::lock_guard arm(disk_arm_);
      hold_disk_arm();
      if (Status s = (*file)->write_page(page, bytes); !s) return s;
      counters_.disk_writes++;
      cache_.write(ref.file_id, page, bytes);
    }
    counters_.pages_written++;
  }
  return Status::ok();
}

Status PageServer::Impl::sync_share(wire::Share::Reader req) {
  counters_.syncs++;
  auto file = share(req.getFileId(), req.getPageSize(), /*create=*/false);
  if (file.status().is(Code::kNotFound)) return Status::ok();  // nothing written here
  if (!file) return file.status();
  if (options_.sync != SyncMode::kFdatasync) return Status::ok();
  return (*file)->sync();
}

Status PageServer::Impl::truncate_share(wire::TruncateShare::Reader req) {
  uint64_t file_id = req.getShare().getFileId();
  auto file = share(file_id, req.getShare().getPageSize(), /*create=*/false);
  if (file.status().is(Code::kNotFound)) return Status::ok();
  if (!file) return file.status();
  {
    std::lock_guard arm(disk_arm_);
    cache_.drop(file_id, req.getPages());
    if (Status s = (*file)->truncate(req.getPages()); !s) return s;
  }
  reset_window(file_id, req.getPages());  // after the arm: a window read takes the two the other way
  return options_.sync == SyncMode::kFdatasync ? (*file)->sync() : Status::ok();
}

Status PageServer::Impl::drop_share(wire::Share::Reader req) {
  uint64_t file_id = req.getFileId();
  {
    std::lock_guard lock(shares_mu_);
    shares_.erase(file_id);
  }
  cache_.drop(file_id, 0);
  reset_window(file_id, 0);
  Status s = LocalPagefile::unlink(options_.dir / "shares" / fmt::format("{}.pf", file_id));
  return s.is(Code::kNotFound) ? Status::ok() : s;
}

Status PageServer::Impl::open_catalog() {
  if (catalog_) return Status::ok();
  if (catalog_closed_) return Status::disconnected("server", "is shutting down");
  auto store = CatalogStore::open(options_.dir / "catalog.db");
  if (!store) return store.status();
  catalog_ = std::move(*store);
  leases_ = std::make_unique<LeaseTable>(options_.lease);
  return Status::ok();
}

Status PageServer::Impl::catalog_request(wire::Request::Reader request,
                                         wire::Response::Builder response) {
  std::lock_guard lock(catalog_mu_);
  if (Status s = open_catalog(); !s) return s;
  switch (request.which()) {
    case wire::Request::OPEN: {
      auto req = request.getOpen();
      std::string name = req.getName();
      auto found = catalog_->lookup(name);
      if (found) {
        if (req.getCreate() && req.getExclusive()) {
          return Status::already_exists(name, "exists (create is exclusive)");
        }
        if (req.getPageSize() != 0 && req.getPageSize() != found->page_size) {
          return Status::invalid_argument(
              name, fmt::format("has page size {}, opened with page size {}", found->page_size,
                                req.getPageSize()));
        }
        to_wire(*found, response.initFile());
        return Status::ok();
      }
      if (!found.status().is(Code::kNotFound)) return found.status();
      if (!req.getCreate()) return Status::not_found(name, "does not exist (create is false)");
      FileRecord proto;
      proto.name = name;
      proto.page_size = req.getPageSize() != 0 ? req.getPageSize() : kDefaultPageSize;
      if (Status s = check_page_size(proto.page_size); !s) return s.with_context(name);
      proto.placement = req.getPlacement() == 1 ? Placement::kHash : Placement::kStripe;
      proto.stripe_pages = req.getStripePages();
      for (auto s : req.getServers()) proto.servers.emplace_back(s);
      proto.policy = from_wire(req.getPolicy());
      auto created = catalog_->create(proto);
      if (!created) return created.status();
      to_wire(*created, response.initFile());
      return Status::ok();
    }
    case wire::Request::STAT: {
      auto found = catalog_->lookup(std::string(request.getStat()));
      if (!found) return found.status();
      to_wire(*found, response.initFile());
      return Status::ok();
    }
    case wire::Request::SET_SIZE: {
      auto req = request.getSetSize();
      Status s = catalog_->set_size(req.getFileId(), req.getPages(), req.getGrowOnly());
      if (s) leases_->note_change(req.getFileId());
      return s;
    }
    case wire::Request::UNLINK: {
      auto removed = catalog_->remove(std::string(request.getUnlink()));
      if (!removed) return removed.status();
      leases_->release_file(removed->id);
      to_wire(*removed, response.initFile());
      return Status::ok();
    }
    case wire::Request::LIST: {
      auto all = catalog_->list();
      if (!all) return all.status();
      auto files = response.initFiles(static_cast<unsigned>(all->size()));
      for (unsigned i = 0; i < all->size(); ++i) to_wire((*all)[i], files[i]);
      return Status::ok();
    }
    case wire::Request::LOCK: {
      auto req = request.getLock();
      if (req.getLevel() > static_cast<uint8_t>(LockLevel::kExclusive)) {
        return Status::invalid_argument("lock", fmt::format("unknown level {}", req.getLevel()));
      }
      auto record = catalog_->lookup_id(req.getFileId());
      if (!record) {
        return Status::not_found(fmt::format("file {}", req.getFileId()), "is not in the catalog");
      }
      Status s = leases_->set_level(req.getFileId(), req.getOwner(), static_cast<LockLevel>(req.getLevel()));
      if (!s) return s;
      auto state = response.initLockState();
      state.setSizePages(record->size_pages);
      state.setVersion(leases_->version(req.getFileId()));
      state.setLevel(static_cast<uint8_t>(leases_->level(req.getFileId(), req.getOwner())));
      state.setReservedByOther(leases_->reserved_by_other(req.getFileId(), req.getOwner()));
      state.setLeaseMs(static_cast<uint32_t>(leases_->lease().count()));
      return Status::ok();
    }
    case wire::Request::RENEW_LEASE: return leases_->renew(request.getRenewLease());
    case wire::Request::RELEASE_OWNER:
      leases_->release_owner(request.getReleaseOwner());
      return Status::ok();
    case wire::Request::LOCKS: {
      auto all = leases_->list();
      auto locks = response.initLocks(static_cast<unsigned>(all.size()));
      for (unsigned i = 0; i < all.size(); ++i) {
        locks[i].setFileId(all[i].file_id);
        locks[i].setOwner(all[i].owner);
        locks[i].setLevel(static_cast<uint8_t>(all[i].level));
        locks[i].setExpiresInMs(all[i].expires_in.count());
      }
      return Status::ok();
    }
    default:
      return Status::not_supported("request", fmt::format("unknown request type {}",
                                                          static_cast<int>(request.which())));
  }
}

ServerCounters PageServer::Impl::snapshot() const {
  ServerCounters out;
  out.requests = counters_.requests;
  out.pages_read = counters_.pages_read;
  out.pages_written = counters_.pages_written;
  out.cache_hits = counters_.cache_hits;
  out.cache_misses = counters_.cache_misses;
  out.disk_reads = counters_.disk_reads;
  out.disk_writes = counters_.disk_writes;
  out.syncs = counters_.syncs;
  out.bytes_in = counters_.bytes_in;
  out.bytes_out = counters_.bytes_out;
  out.connections = counters_.connections;
  out.errors = counters_.errors;
  out.cache_pages = cache_.size();
  out.unconfirmed_write_bytes = counters_.unconfirmed_write_bytes;
  out.peak_unconfirmed_write_bytes = counters_.peak_unconfirmed_write_bytes;
  return out;
}

void PageServer::Impl::fill_stats(wire::ServerStats::Builder out) const {
  ServerCounters c = snapshot();
  out.setRequests(c.requests);
  out.setPagesRead(c.pages_read);
  out.setPagesWritten(c.pages_written);
  out.setCacheHits(c.cache_hits);
  out.setCacheMisses(c.cache_misses);
  out.setDiskReads(c.disk_reads);
  out.setDiskWrites(c.disk_writes);
  out.setSyncs(c.syncs);
  out.setBytesIn(c.bytes_in);
  out.setBytesOut(c.bytes_out);
  out.setConnections(c.connections);
  out.setErrors(c.errors);
  out.setCachePages(c.cache_pages);
  out.setDiskLatencyUs(static_cast<uint32_t>(options_.disk_latency.count()));
  out.setUnconfirmedWriteBytes(c.unconfirmed_write_bytes);
  out.setCacheCapacity(cache_.capacity());
  out.setPrefetchPages(options_.prefetch_pages);
  auto all = cache_.stats();
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

void PageServer::Impl::execute(wire::Request::Reader request,
                               capnp::MallocMessageBuilder& response_message) {
  auto response = response_message.initRoot<wire::Response>();
  response.setId(request.getId());
  response.setVersion(wire::PROTOCOL_VERSION);
  Status s;
  switch (request.which()) {
    case wire::Request::PING: break;
    case wire::Request::READ: {
      auto req = request.getRead();
      uint32_t page_size = req.getShare().getPageSize();
      if (s = check_read(page_size, req.getPage(), req.getCount()); !s) break;
      auto data = response.initPages(req.getCount() * page_size);
      s = read_pages(share_ref(req.getShare()), req.getPage(), req.getCount(),
                     std::span(reinterpret_cast<std::byte*>(data.begin()), data.size()), req.getShare());
      break;
    }
    case wire::Request::WRITE: {
      auto req = request.getWrite();
      auto data = req.getData();
      s = write_run(share_ref(req.getShare()), req.getPage(),
                    std::span(reinterpret_cast<const std::byte*>(data.begin()), data.size()));
      break;
    }
    case wire::Request::SYNC: s = sync_share(request.getSync()); break;
    case wire::Request::TRUNCATE:
      if (request.getTruncate().getPages() < 0) {
        s = Status::invalid_argument("truncate", "negative size");
        break;
      }
      s = truncate_share(request.getTruncate());
      break;
    case wire::Request::DROP_SHARE: s = drop_share(request.getDropShare()); break;
    case wire::Request::STATS: fill_stats(response.initStats()); break;
    case wire::Request::DISK_READ_LOG: {
      // The newest entries that fit a frame (16 bytes each and a word of
      // list overhead).
      constexpr size_t kMost = kMaxFrameBytes / 2 / 24;
      std::lock_guard lock(log_mu_);
      size_t skip = disk_read_log_.size() > kMost ? disk_read_log_.size() - kMost : 0;
      auto log = response.initDiskReadLog(static_cast<unsigned>(disk_read_log_.size() - skip));
      for (size_t i = skip; i < disk_read_log_.size(); ++i) {
        log[static_cast<unsigned>(i - skip)].setFileId(disk_read_log_[i].first);
        log[static_cast<unsigned>(i - skip)].setPage(disk_read_log_[i].second);
      }
      break;
    }
    default: s = catalog_request(request, response); break;
  }
  if (!s) {
    to_wire(s, response.initError());
  } else if (response.isPages() || response.isFile() || response.isFiles() || response.isStats() ||
             response.isLockState() || response.isLocks() || response.isDiskReadLog()) {
    // the handler filled in its answer
  } else {
    response.setOk();
  }
}

// ---- PageServer ------------------------------------------------------------

Result<std::unique_ptr<PageServer>> PageServer::start(const ServerOptions& options,
                                                      const Address& address, InprocHub* hub) {
  if (options.dir.empty()) return Status::invalid_argument("server", "no directory given");
  if (options.threads == 0) return Status::invalid_argument("server", "threads must be at least 1");
  auto impl = std::make_unique<Impl>(options);
  if (Status s = impl->start(address, hub); !s) return s;
  return std::unique_ptr<PageServer>(new PageServer(std::move(impl)));
}

PageServer::PageServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PageServer::~PageServer() { stop(); }
Frame PageServer::Impl::respond(const Frame& frame) {
  capnp::MallocMessageBuilder response_message;
  uint64_t id = 0;
  Frame out;
  try {
    capnp::FlatArrayMessageReader reader(kj::ArrayPtr<const capnp::word>(frame.data(), frame.size()),
                                         frame_reader_options());
    auto request = reader.getRoot<wire::Request>();
    id = request.getId();
    execute(request, response_message);
    if (response_message.getRoot<wire::Response>().isError()) counters_.errors++;
    out = to_frame(response_message);
  } catch (const kj::Exception& e) {
    counters_.errors++;
    out = error_frame(id, Status::corruption("request", fmt::format("malformed message: {}",
                                                                    e.getDescription().cStr())));
  }
  counters_.bytes_out += out.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  return out;
}

bool is_catalog_request(wire::Request::Reader request) {
  switch (request.which()) {
    case wire::Request::OPEN:
    case wire::Request::STAT:
    case wire::Request::SET_SIZE:
    case wire::Request::UNLINK:
    case wire::Request::LIST:
    case wire::Request::LOCK:
    case wire::Request::RENEW_LEASE:
    case wire::Request::RELEASE_OWNER:
    case wire::Request::LOCKS:
      return true;
    default:
      return false;
  }
}

bool PageServer::Impl::enter_direct() {
  std::lock_guard lock(sessions_mu_);
  if (stopping_) return false;
  ++jobs_in_flight_;  // stop() waits for it, as for a connection's request
  return true;
}

void PageServer::Impl::leave_direct() {
  {
    std::lock_guard lock(sessions_mu_);
    --jobs_in_flight_;
  }
  idle_cv_.notify_all();
}

Frame PageServer::answer_catalog(const Frame& request) {
  // (Direct requests carry no id: the caller waits for this answer alone.)
  if (!impl_->enter_direct()) return error_frame(0, Status::disconnected("server", "is shutting down"));
  impl_->counters_.requests++;
  impl_->counters_.bytes_in += request.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  Frame out = impl_->respond(request);
  impl_->leave_direct();
  return out;
}

std::optional<Status> PageServer::read_now(const ShareRef& share, int64_t page, std::span<std::byte> out) {
  if (out.size() != share.page_size || !check_read(share.page_size, page, 1)) {
    return std::nullopt;  // sent the usual way, it gets the usual error
  }
  if (!impl_->enter_direct()) return std::nullopt;
  std::optional<Status> done;
  // (Without a pool there is no window: such a file reads as any other.)
  bool window = impl_->cache_.declare(share.file_id, share.page_size, share.policy) == kGlobalSequential &&
                impl_->cache_.enabled();
  if (impl_->cache_.read_run(share.file_id, page, 1, share.page_size, out)) {
    impl_->counters_.pages_read++;
    impl_->counters_.cache_hits++;
    done = Status::ok();
  } else if (!window && impl_->options_.disk_latency.count() == 0) {
    // (The window, and the emulated arm's queue, live on the pool.)
    done = impl_->read_pages(share, page, 1, out, std::nullopt);
  }
  if (done) {
    impl_->counters_.requests++;
    impl_->counters_.bytes_out += out.size();
    if (!*done) impl_->counters_.errors++;
  }
  impl_->leave_direct();
  return done;
}

std::optional<Status> PageServer::write_now(const ShareRef& share, int64_t page, std::span<const std::byte> data) {
  if (impl_->options_.disk_latency.count() != 0 || !impl_->enter_direct()) return std::nullopt;
  impl_->counters_.requests++;
  impl_->counters_.bytes_in += data.size();
  Status s = impl_->write_run(share, page, data);
  if (!s) impl_->counters_.errors++;
  impl_->leave_direct();
  return s;
}

Address PageServer::address() const { return impl_->address_; }
void PageServer::stop() { impl_->stop(); }

ServerCounters PageServer::counters() const { return impl_->snapshot(); }

std::vector<ServerFileCounters> PageServer::file_counters() const {
  std::vector<ServerFileCounters> out;
  for (auto& f : impl_->cache_.stats()) out.push_back({f.file_id, f.policy, f.counters});
  return out;
}

std::vector<std::pair<uint64_t, int64_t>> PageServer::disk_read_log() const {
  std::lock_guard lock(impl_->log_mu_);
  return {impl_->disk_read_log_.begin(), impl_->disk_read_log_.end()};
}

}  // namespace pagefile::net
