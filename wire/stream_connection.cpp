// The connection over a stream socket, tcp://, tls:// or unix: (one
// implementation, templated on the Asio stream), whichever side made it.
//
// Each connection keeps its state on a strand of its io_context: reads,
// writes, pause/resume and the end all run there, so the io_context may be
// run by several threads. Pending operations hold the connection alive
// (shared_from_this); reporting the end lets go of both handlers
// (FrameDelivery), breaking the cycle a handler that captures its own
// connection would make.
#include <algorithm>
#include <cerrno>
#include <deque>
#include <type_traits>
#include <vector>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include "core/mutex.h"
#include "wire/frame_buffer.h"
#include "wire/frame_delivery.h"
#include "wire/stream_socket.h"
#include "wire/tls_context.h"
#include "wire/tls_socket.h"
#include "wire/transport_internal.h"

namespace pagefile::net::internal {

namespace {

template <class Socket>
class StreamConnection final : public Connection, public std::enable_shared_from_this<StreamConnection<Socket>> {
 public:
  // A TLS stream encrypts what it writes: nothing may be written to its
  // descriptor but through it.
  static constexpr bool kTls = std::is_same_v<Socket, TlsStream> || std::is_same_v<Socket, TlsSocket>;

  StreamConnection(asio::io_context& io, Socket socket, std::string peer, std::shared_ptr<TlsContext> tls = nullptr,
                   PeerRole role = PeerRole::kAdmin)
      : strand_(asio::make_strand(io)), socket_(std::move(socket)), peer_(std::move(peer)), tls_(std::move(tls)),
        role_(role) {}

  void start(FrameHandler on_frame, CloseHandler on_close) override {
    asio::post(strand_, [self = this->shared_from_this(), on_frame = std::move(on_frame),
                         on_close = std::move(on_close)]() mutable {
      if (self->delivery_.begin(std::move(on_frame), std::move(on_close), self->ended_, self->close_status_)) {
        self->read_more();
      }
    });
  }

  void send(Frame frame) EXCLUDES(write_mu_) override {
    const size_t bytes = frame.size() * sizeof(capnp::word);
    std::string problem = frame_length_problem(bytes);
    if (!problem.empty()) {
      // The peer would close on it anyway; failing here names the sender.
      asio::dispatch(strand_, [self = this->shared_from_this(), why = Status::invalid_argument(
                                   peer_, fmt::format("cannot send: {}", problem))] { self->end(why); });
      return;
    }
    MutexLock lock(write_mu_);
    if (write_ended_) return;
    size_t written = 0;
    if (!kTls && !writing_ && !delivering_ && write_queue_.empty()) {
      // Nothing ahead of it: write it from this thread at once, without
      // waking the io thread. Only what the socket cannot take now waits.
      ssize_t n = send_frame_now(socket_.lowest_layer().native_handle(), frame, 0);
      if (n == static_cast<ssize_t>(kFrameHeaderBytes + bytes)) return;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        const error_code ec(errno, boost::system::system_category());
        asio::post(strand_, [self = this->shared_from_this(), why = socket_status(ec, peer_, "write")] {
          self->end(why);
        });
        return;
      }
      written = n < 0 ? 0 : static_cast<size_t>(n);
    }
    if (write_queue_.empty()) front_written_ = written;
    unsent_bytes_ += static_cast<int64_t>(kFrameHeaderBytes + bytes);
    write_queue_.push_back(std::move(frame));
    if (!writing_ && !delivering_) {  // (a delivery batch flushes as it ends)
      writing_ = true;
      asio::post(strand_, [self = this->shared_from_this()] { self->write_front(); });
    }
  }

  void close() override {
    // dispatch: from inside a FrameHandler the end takes effect before the
    // handler returns, so no further frame is delivered.
    asio::dispatch(strand_, [self = this->shared_from_this()] { self->end(Status::ok()); });
  }

  void close_after_sending() override {
    // Posted like send(), so it lands after the frames this thread sent.
    asio::post(strand_, [self = this->shared_from_this()] { self->end_after_sending(Status::ok()); });
  }

  void pause_reading() override {
    asio::dispatch(strand_, [self = this->shared_from_this()] { self->paused_ = true; });
  }

  void resume_reading() override {
    asio::dispatch(strand_, [self = this->shared_from_this()] {
      if (!self->paused_) return;
      self->paused_ = false;
      // Posted, so a resume from inside a FrameHandler does not deliver the
      // next frame re-entrantly.
      asio::post(self->strand_, [self] { self->continue_reading(); });
    });
  }

  void bound_backlog() override { bounded_ = true; }

  void owe(int64_t bytes) EXCLUDES(write_mu_) override {
    MutexLock lock(write_mu_);
    owed_bytes_ += bytes;
    release_hold_if_drained();
  }

  std::string peer() const override { return peer_; }
  PeerRole role() const override { return role_; }

 private:
  // All below runs on strand_.

  // Stops reading and ends the connection with `why` once the queued frames
  // are written.
  void end_after_sending(Status why) EXCLUDES(write_mu_) {
    paused_ = true;
    MutexLock lock(write_mu_);
    if (closing_after_write_) return;  // the first reason stands
    closing_after_write_ = true;
    end_status_ = std::move(why);
    if (writing_ || !write_queue_.empty()) return;  // on_written ends it
    Status now = end_status_;
    lock.unlock();
    end(std::move(now));
  }

  // Writes every queued frame in one gathered write: under load a dozen
  // responses leave in one system call instead of a dozen. (Under write_mu_:
  // starting the write may try a sendmsg at once, one that never waits.)
  // A TLS stream encrypts one buffer per record, so its frames are first
  // copied into one: a header and a page then cost one record, not two.
  void write_front() EXCLUDES(write_mu_) {
    MutexLock lock(write_mu_);
    if (write_ended_) {
      writing_ = false;
      return;
    }
    in_write_ = std::min(write_queue_.size(), kMaxFramesPerWrite);
    write_headers_.resize(in_write_);
    write_buffers_.clear();
    for (size_t i = 0; i < in_write_; ++i) {
      const Frame& frame = write_queue_[i];
      const size_t bytes = frame.size() * sizeof(capnp::word);
      write_headers_[i] = encode_frame_length(static_cast<uint32_t>(bytes));
      asio::const_buffer header = asio::buffer(write_headers_[i]);
      asio::const_buffer body = asio::buffer(frame.data(), bytes);  // the body is not copied
      if (i == 0) {
        // send() may have written the start of the first frame already.
        const size_t skip_header = std::min(front_written_, header.size());
        header += skip_header;
        body += front_written_ - skip_header;
      }
      if (header.size() > 0) write_buffers_.push_back(header);
      write_buffers_.push_back(body);
    }
    if constexpr (kTls) {
      write_bytes_.resize(asio::buffer_size(write_buffers_));
      asio::buffer_copy(asio::buffer(write_bytes_), write_buffers_);
      write_buffers_.assign(1, asio::buffer(write_bytes_));
    }
    auto written = asio::bind_executor(strand_, [self = this->shared_from_this()](const error_code& ec, size_t) {
      self->on_written(ec);
    });
    if constexpr (std::is_same_v<Socket, TlsSocket>) {
      // It sends all or fails; asio::async_write would hand it 64 KiB at a
      // time, each piece waiting for the one before.
      socket_.async_write_some(write_buffers_, std::move(written));
    } else {
      asio::async_write(socket_, write_buffers_, std::move(written));
    }
  }

  void on_written(const error_code& ec) EXCLUDES(write_mu_) {
    Status why;
    {
      MutexLock lock(write_mu_);
      if (write_ended_) {
        writing_ = false;
        write_queue_.clear();
        return;
      }
      if (!ec) {
        for (size_t i = 0; i < in_write_; ++i) {
          unsent_bytes_ -= static_cast<int64_t>(kFrameHeaderBytes + write_queue_[i].size() * sizeof(capnp::word));
        }
        write_queue_.erase(write_queue_.begin(), write_queue_.begin() + static_cast<std::ptrdiff_t>(in_write_));
        release_hold_if_drained();
        in_write_ = 0;
        front_written_ = 0;
        if (!write_queue_.empty()) {
          asio::post(strand_, [self = this->shared_from_this()] { self->write_front(); });
          return;  // still writing_
        }
        writing_ = false;
        if (!closing_after_write_) return;
        why = end_status_;
      }
    }
    end(ec ? socket_status(ec, peer_, "write") : std::move(why));
  }

  // Reading goes through one buffer: a read takes whatever has arrived, and
  // every whole frame in it is delivered before the next read, so small
  // frames cost no system call each.
  void read_more() EXCLUDES(write_mu_) {
    if (!delivery_.started() || ended_ || paused_ || reading_ || held()) return;
    reading_ = true;
    std::span<uint8_t> space = read_buffer_.space();
    socket_.async_read_some(
        asio::buffer(space.data(), space.size()),
        asio::bind_executor(strand_, [self = this->shared_from_this()](const error_code& ec, size_t n) {
          self->on_read(ec, n);
        }));
  }

  void on_read(const error_code& ec, size_t n) {
    reading_ = false;
    if (ended_) return;
    if (ec) {
      end(socket_status(ec, peer_, "read"));
      return;
    }
    read_buffer_.filled(n);
    deliver_buffered();
  }

  // Delivers the whole frames in the buffer until a pause or the end, then
  // reads on.
  void deliver_buffered() EXCLUDES(write_mu_) {
    // While frames are delivered, what the handlers (and other threads)
    // send is queued and leaves in one write when the batch ends: a server
    // answering a burst of reads, or a client whose program sends its next
    // request as soon as an answer wakes it, then makes one system call,
    // not one per frame.
    {
      MutexLock lock(write_mu_);
      delivering_ = true;
    }
    deliver_frames();
    bool flush = false;
    {
      MutexLock lock(write_mu_);
      delivering_ = false;
      if (!writing_ && !write_ended_ && !write_queue_.empty()) flush = writing_ = true;
    }
    if (flush) write_front();
    if (ended_ || paused_) return;
    if (stopped_for_backlog_) {
      // Whole frames may wait in the buffer: no read may start under them
      // (it would write where they are moved). The release of the hold
      // posts continue_reading(), which delivers them and then reads.
      stopped_for_backlog_ = false;
      return;
    }
    read_buffer_.shrink_when_empty();
    read_more();
  }

  void deliver_frames() {
    FrameDelivery::Delivered delivered =
        delivery_.deliver(read_buffer_, [this] {
          if (ended_ || paused_) return false;
          if (hold_if_backlogged()) stopped_for_backlog_ = true;
          return !stopped_for_backlog_;
        });
    if (delivered.malformed.empty()) return;
    // Nothing after this header can be trusted. Answers to the frames before
    // it (sent from their handlers, so queued on the strand ahead of this)
    // still go out, then the connection ends.
    paused_ = true;
    asio::post(strand_, [self = this->shared_from_this(), why = Status::corruption(peer_, delivered.malformed)] {
      self->end_after_sending(why);
    });
  }

  void continue_reading() EXCLUDES(write_mu_) {
    if (!delivery_.started() || ended_ || paused_ || held()) return;
    deliver_buffered();
  }

  // The backlog (owe()): whether delivery is held, and holding it once the
  // answers owed and queued exceed the bound.
  // (An unbounded connection, a client's, never takes the lock for it.)
  bool held() EXCLUDES(write_mu_) {
    if (!bounded_) return false;
    MutexLock lock(write_mu_);
    return held_;
  }
  bool hold_if_backlogged() EXCLUDES(write_mu_) {
    if (!bounded_) return false;
    MutexLock lock(write_mu_);
    if (!held_ && unsent_bytes_ + owed_bytes_ > kMaxBacklogBytes) held_ = true;
    return held_;
  }
  // Lets delivery go on once the backlog is under half the bound.
  void release_hold_if_drained() REQUIRES(write_mu_) {
    if (!held_ || unsent_bytes_ + owed_bytes_ > kMaxBacklogBytes / 2) return;
    held_ = false;
    asio::post(strand_, [self = this->shared_from_this()] { self->continue_reading(); });
  }

  void end(Status why) EXCLUDES(write_mu_) {
    if (ended_) return;
    ended_ = true;
    close_status_ = std::move(why);
    {
      // Under write_mu_, so no send() is writing to the descriptor while it
      // closes (and perhaps is reused by another open).
      MutexLock lock(write_mu_);
      write_ended_ = true;
      // The frames being written stay until the handler runs: Asio still
      // points at their bytes.
      write_queue_.erase(write_queue_.begin() + static_cast<std::ptrdiff_t>(in_write_), write_queue_.end());
      error_code ignored;
      socket_.lowest_layer().close(ignored);  // cancels the pending read and write
    }
    if (delivery_.started()) {
      // Posted, never run inside close() or a FrameHandler.
      asio::post(strand_, [self = this->shared_from_this()] { self->delivery_.report_close(self->close_status_); });
    }
  }

  Strand strand_;
  // Read and closed on strand_; written by send() from any thread, and
  // closed, under write_mu_.
  Socket socket_;
  const std::string peer_;
  const std::shared_ptr<TlsContext> tls_;  // a TLS stream's, which it must not outlive
  const PeerRole role_;

  FrameDelivery delivery_;
  bool ended_ = false;
  bool paused_ = false;
  bool reading_ = false;  // an async read into read_buffer_ is pending
  bool stopped_for_backlog_ = false;  // the last delivery stopped at the backlog's hold
  // bound_backlog(), called before start(): start()'s post orders it before
  // every read of it on the strand.
  bool bounded_ = false;
  Status close_status_;

  static constexpr size_t kMaxFramesPerWrite = 64;

  // Frames that arrive while paused wait here, in order.
  FrameBuffer read_buffer_;

  // The write side is shared between the sending threads (which write
  // directly while nothing is queued) and the strand (which writes the
  // queue).
  Mutex write_mu_;
  bool write_ended_ GUARDED_BY(write_mu_) = false;          // the socket is closed: drop frames
  bool writing_ GUARDED_BY(write_mu_) = false;              // the strand owns the queue's front (a write is posted or pending)
  bool delivering_ GUARDED_BY(write_mu_) = false;           // the strand is delivering frames and flushes the queue after
  bool closing_after_write_ GUARDED_BY(write_mu_) = false;  // end with end_status_ once write_queue_ drains
  Status end_status_ GUARDED_BY(write_mu_);
  std::deque<Frame> write_queue_ GUARDED_BY(write_mu_);
  int64_t unsent_bytes_ GUARDED_BY(write_mu_) = 0;  // of the frames in write_queue_
  int64_t owed_bytes_ GUARDED_BY(write_mu_) = 0;    // owe()
  bool held_ GUARDED_BY(write_mu_) = false;         // delivery stopped for the backlog
  size_t in_write_ GUARDED_BY(write_mu_) = 0;       // frames at the front of write_queue_ being written
  size_t front_written_ GUARDED_BY(write_mu_) = 0;  // bytes of the front frame send() already wrote
  std::vector<FrameHeader> write_headers_ GUARDED_BY(write_mu_);
  std::vector<asio::const_buffer> write_buffers_ GUARDED_BY(write_mu_);
  std::vector<uint8_t> write_bytes_ GUARDED_BY(write_mu_);  // kTls: what write_buffers_ held, in one piece
};

}  // namespace

std::shared_ptr<Connection> make_stream_connection(asio::io_context& io, Tcp::socket socket, std::string peer) {
  return std::make_shared<StreamConnection<Tcp::socket>>(io, std::move(socket), std::move(peer));
}

std::shared_ptr<Connection> make_stream_connection(asio::io_context& io, Unix::socket socket, std::string peer) {
  return std::make_shared<StreamConnection<Unix::socket>>(io, std::move(socket), std::move(peer));
}

std::shared_ptr<Connection> make_stream_connection(asio::io_context& io, TlsStream stream, std::string peer,
                                                   std::shared_ptr<TlsContext> tls, PeerRole role) {
  return std::make_shared<StreamConnection<TlsStream>>(io, std::move(stream), std::move(peer), std::move(tls), role);
}

std::shared_ptr<Connection> make_stream_connection(asio::io_context& io, TlsSocket socket, std::string peer,
                                                   std::shared_ptr<TlsContext> tls, PeerRole role) {
  return std::make_shared<StreamConnection<TlsSocket>>(io, std::move(socket), std::move(peer), std::move(tls), role);
}

}  // namespace pagefile::net::internal
