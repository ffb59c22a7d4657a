#include "core/mutex.h"
#include "server/session.h"

#include <boost/asio/steady_timer.hpp>

#include <algorithm>

#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include "core/log.h"
#include "server/access.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

constexpr int64_t kWholeFile = INT64_MAX;

}  // namespace

void Session::start() {
  auto self = shared_from_this();
  logger().info("connection open peer={} role={}", connection_->peer(), role_name(role_));
  server_->metrics_.connection_opened(role_);
  connection_->bound_backlog();
  connection_->start([self](Frame frame) { self->on_frame(std::move(frame)); },
                     [self](Status why) { self->on_close(why); });
}

void Session::refuse(const Status& why, boost::asio::io_context& io) {
  // The error goes out at once; the hang-up waits a little, reading and
  // dropping what the client sends meanwhile, so that a client whose first
  // request crosses the refusal still reads why instead of a broken pipe.
  connection_->start([](Frame) {}, [](Status) {});
  connection_->send(error_frame(0, why));
  auto timer = std::make_shared<boost::asio::steady_timer>(io, kRefusalGrace);
  timer->async_wait([timer, connection = connection_](const boost::system::error_code&) { connection->close(); });
}

void Session::reply_error(uint64_t id, const Status& status, bool then_close) {
  server_->tally_.errors++;
  connection_->send(error_frame(id, status));
  if (then_close) connection_->close_after_sending();
}

Session::Span Session::span_of(wire::Request::Reader request, uint64_t& write_bytes) {
  write_bytes = 0;
  switch (request.which()) {
    case wire::Request::READ: {
      auto r = request.getRead();
      return {r.getShare().getFileId() + 1, r.getPage(), r.getPage() + std::max<int64_t>(1, r.getCount())};
    }
    case wire::Request::WRITE: {
      auto w = request.getWrite();
      uint32_t ps = std::max<uint32_t>(1, w.getShare().getPageSize());
      int64_t pages = std::max<int64_t>(1, static_cast<int64_t>(w.getData().size() / ps));
      write_bytes = w.getData().size();
      return {w.getShare().getFileId() + 1, w.getPage(), w.getPage() + pages};
    }
    case wire::Request::SCRUB: {
      auto r = request.getScrub();
      return {r.getShare().getFileId() + 1, r.getFirst(), r.getFirst() + std::max<int64_t>(1, r.getCount())};
    }
    case wire::Request::SYNC: return {request.getSync().getFileId() + 1, 0, kWholeFile};
    case wire::Request::FENCE: return {request.getFence().getFileId() + 1, 0, kWholeFile};
    case wire::Request::TRUNCATE: return {request.getTruncate().getShare().getFileId() + 1, 0, kWholeFile};
    case wire::Request::DROP_SHARE: return {request.getDropShare().getFileId() + 1, 0, kWholeFile};
    case wire::Request::PING:
    case wire::Request::DISK_READ_LOG:
    case wire::Request::STATS:
    case wire::Request::METRICS: return {};  // touches nothing
    default: return {0, 0, kWholeFile};    // the catalog, one at a time
  }
}

int64_t Session::answer_bytes(wire::Request::Reader request) {
  // Every answer counts a little, so a flood of small requests is bounded
  // too; a read, its pages (as far as one frame can hold them).
  constexpr int64_t kLeast = 256;
  if (!request.isRead()) return kLeast;
  auto read = request.getRead();
  int64_t pages = int64_t{read.getCount()} * read.getShare().getPageSize();
  return std::clamp<int64_t>(pages, kLeast, static_cast<int64_t>(kMaxFrameBytes));
}

bool Session::idle_since(std::chrono::steady_clock::time_point since) {
  MutexLock lock(mu_);
  return active_.empty() && last_frame_ < since;
}

void Session::on_frame(Frame frame) {
  {
    MutexLock lock(mu_);
    last_frame_ = std::chrono::steady_clock::now();
  }
  server_->tally_.requests++;
  server_->tally_.bytes_in += frame.size() * sizeof(capnp::word) + kFrameHeaderBytes;
  Job job;
  job.arrived = std::chrono::steady_clock::now();
  job.bytes_in = frame.size() * sizeof(capnp::word) + kFrameHeaderBytes;
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
    job.kind = static_cast<unsigned>(request.which());
    if (Status within = within_limits(job.bytes_in - kFrameHeaderBytes); !within) {
      answered(job, 0, static_cast<uint32_t>(within.code()));
      reply_error(id, within, false);
      return;
    }
    if (Status allowed = check_access(role_, request); !allowed) {
      logger().warn("request refused peer={} role={} op={} why=\"{}\"", connection_->peer(), role_name(role_),
                    RequestMetrics::kind_name(job.kind), allowed.to_string());
      answered(job, 0, static_cast<uint32_t>(allowed.code()));
      reply_error(id, allowed, false);
      return;
    }
    job.span = span_of(request, job.write_bytes);
    job.owed = answer_bytes(request);
    if (request.isRead() && !overtakes_earlier(job.span)) {
      if (std::optional<Frame> out = server_->answer_from_pool(request)) {
        answered(job, out->size() * sizeof(capnp::word) + kFrameHeaderBytes, 0);
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

  if (!server_->admit(shared_from_this(), job.write_bytes)) {
    reply_error(id, Status::disconnected("server", "is shutting down"), false);
    return;
  }
  connection_->owe(job.owed);
  bool start_now = true;
  {
    MutexLock lock(mu_);
    job.seq = next_seq_++;
    for (const auto& [seq, earlier] : active_) {
      if (earlier.span.overlaps(job.span)) {
        start_now = false;
        break;
      }
    }
    active_.emplace(job.seq, job);
    if (start_now) running_.insert(job.seq);
  }
  if (start_now) server_->post_work([self = shared_from_this(), job] { self->run(job); });
}

Status Session::within_limits(uint64_t frame_bytes) {
  const ServerOptions& options = server_->options_;
  if (frame_bytes > options.max_frame_bytes) {
    return Status::invalid_argument(
        "request", fmt::format("of {} bytes is above this server's limit of {} (--max-frame-bytes)", frame_bytes,
                               options.max_frame_bytes));
  }
  MutexLock lock(mu_);
  if (active_.size() >= options.max_inflight) {
    // (Not kBusy: that is lock contention to a client, which would wait
    // and retry a lock the catalog never saw.)
    return Status::io_error("connection", fmt::format("has {} requests in flight, the most this server takes from "
                                                      "one connection (--max-inflight)",
                                                      active_.size()));
  }
  return Status::ok();
}

bool Session::overtakes_earlier(const Span& span) {
  MutexLock lock(mu_);
  for (const auto& [seq, earlier] : active_) {
    if (earlier.span.overlaps(span)) return true;
  }
  return false;
}

void Session::run(const Job& job) {
  // Once closed, the client is gone and was told its requests failed; a
  // write it may already have sent again on a new connection must not be
  // overtaken by this stale one.
  if (!closed_) {
    uint32_t error = 0;
    Frame answer = server_->respond(*job.frame, &error);
    answered(job, answer.size() * sizeof(capnp::word) + kFrameHeaderBytes, error);
    connection_->send(std::move(answer));
  }
  finish(job);
}

void Session::finish(const Job& job) {
  std::vector<Job> ready;
  {
    MutexLock lock(mu_);
    last_frame_ = std::chrono::steady_clock::now();  // an answer is activity too (the idle timeout)
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
  for (Job& next : ready) server_->post_work([self = shared_from_this(), next] { self->run(next); });
  connection_->owe(-job.owed);
  server_->retire(job.write_bytes);
}

void Session::answered(const Job& job, uint64_t bytes_out, uint32_t error) {
  auto took = std::chrono::steady_clock::now() - job.arrived;
  server_->metrics_.record(job.kind, took, job.bytes_in, bytes_out, error);
  if (server_->options_.slow_request.count() > 0 && took >= server_->options_.slow_request) {
    logger().warn("slow request op={} ms={:.1f} peer={}", RequestMetrics::kind_name(job.kind),
               std::chrono::duration<double, std::milli>(took).count(), connection_->peer());
  }
}

void Session::on_close(const Status& why) {
  // (A client going away is routine: info, with why.)
  logger().info("connection closed peer={}{}", connection_->peer(), why ? "" : " why=\"" + why.to_string() + "\"");
  if (!closed_.exchange(true)) server_->metrics_.connection_closed(role_);
  // (closed_: requests not yet started are dropped; running ones finish)
  server_->session_ended(shared_from_this());
}

}  // namespace pagefile::net
