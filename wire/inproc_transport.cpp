// inproc: connections between a client and a server in the same process,
// with no sockets: a connection is a pair of in-memory ends, and a frame
// sent on one end is moved (not copied) into a handler posted on the other
// end's strand, on that end's io_context.
//
// Each end keeps its state on its own strand. The ends know each other by
// weak_ptr: a started end keeps itself alive until it ends (as a pending
// read keeps a socket connection alive), and an end dropped without being
// started tells its peer it went away, as a closed socket would.
#include <atomic>
#include <deque>
#include <map>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <fmt/format.h>

#include "core/mutex.h"
#include "wire/frame_delivery.h"
#include "wire/transport_internal.h"

namespace pagefile::net {

namespace asio = boost::asio;

// The names of inproc: listeners. Thread-safe.
class InprocHub::Impl {
 public:
  // A listener as connectors see it.
  struct Registration {
    Registration(asio::io_context& server_io, Listener::AcceptHandler accept)
        : io(server_io), accept_strand(asio::make_strand(server_io)), on_accept(std::move(accept)) {}
    asio::io_context& io;
    // AcceptHandler calls run one at a time, as for a socket listener.
    asio::strand<asio::io_context::executor_type> accept_strand;
    const Listener::AcceptHandler on_accept;
    std::atomic<bool> closed{false};
  };

  // kAlreadyExists when `name` is taken.
  Status add(const std::string& name, std::shared_ptr<Registration> registration) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    auto [it, inserted] = listeners_.try_emplace(name, std::move(registration));
    if (!inserted) return Status::already_exists(fmt::format("inproc:{}", name), "a server is listening there");
    return Status::ok();
  }

  // Removes `name` if it still names `registration`.
  void remove(const std::string& name, const Registration* registration) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    auto it = listeners_.find(name);
    if (it != listeners_.end() && it->second.get() == registration) listeners_.erase(it);
  }

  std::shared_ptr<Registration> find(const std::string& name) EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    auto it = listeners_.find(name);
    return it == listeners_.end() ? nullptr : it->second;
  }

 private:
  Mutex mutex_;
  std::map<std::string, std::shared_ptr<Registration>> listeners_ GUARDED_BY(mutex_);
};

InprocHub::InprocHub() : impl_(std::make_unique<Impl>()) {}
InprocHub::~InprocHub() = default;

namespace internal {

namespace {

using Strand = asio::strand<asio::io_context::executor_type>;

class InprocEnd final : public Connection, public std::enable_shared_from_this<InprocEnd> {
 public:
  InprocEnd(asio::io_context& io, std::string peer) : strand_(asio::make_strand(io)), peer_(std::move(peer)) {}

  ~InprocEnd() override {
    // Only an end that never started gets here without having ended; its
    // peer must still learn that nobody is on this side.
    if (auto other = other_.lock()) other->peer_gone();
  }

  // A connected pair: the first end runs on `client_io`, the second on
  // `server_io`.
  static std::pair<std::shared_ptr<InprocEnd>, std::shared_ptr<InprocEnd>> make_pair(asio::io_context& client_io,
                                                                                      asio::io_context& server_io,
                                                                                      const std::string& text) {
    auto client = std::make_shared<InprocEnd>(client_io, text);
    auto server = std::make_shared<InprocEnd>(server_io, text);
    // Written before either end is shared with another thread, read-only after.
    client->other_ = server;
    server->other_ = client;
    return {std::move(client), std::move(server)};
  }

  void start(FrameHandler on_frame, CloseHandler on_close) override {
    asio::post(strand_, [self = shared_from_this(), on_frame = std::move(on_frame),
                         on_close = std::move(on_close)]() mutable {
      if (!self->delivery_.begin(std::move(on_frame), std::move(on_close), self->ended_, self->close_status_)) return;
      self->keep_alive_ = self;
      self->deliver();
    });
  }

  void send(Frame frame) override {
    if (ended_flag_.load(std::memory_order_acquire)) return;
    std::string problem = frame_length_problem(static_cast<uint64_t>(frame.size()) * sizeof(capnp::word));
    if (!problem.empty()) {
      // The same rule as on a socket, so code tested in process behaves the
      // same over the network.
      asio::dispatch(strand_, [self = shared_from_this(), problem = std::move(problem)] {
        self->end(Status::invalid_argument(self->peer_, fmt::format("cannot send: {}", problem)));
      });
      return;
    }
    std::shared_ptr<InprocEnd> other = other_.lock();
    if (!other) return;
    // Posting from one thread keeps that thread's order on the receiver.
    asio::post(other->strand_, [other, frame = std::move(frame)]() mutable { other->receive(std::move(frame)); });
  }

  void close() override {
    ended_flag_.store(true, std::memory_order_release);
    asio::dispatch(strand_, [self = shared_from_this()] { self->end(Status::ok()); });
  }

  // Frames sent are already handed to the peer's queue, ahead of the news
  // that this end closed; so this is close().
  void close_after_sending() override { close(); }

  void pause_reading() override {
    asio::dispatch(strand_, [self = shared_from_this()] { self->paused_ = true; });
  }

  void resume_reading() override {
    asio::dispatch(strand_, [self = shared_from_this()] {
      if (!self->paused_) return;
      self->paused_ = false;
      // Posted, so a resume from inside a FrameHandler does not deliver
      // re-entrantly.
      asio::post(self->strand_, [self] { self->deliver(); });
    });
  }

  std::string peer() const override { return peer_; }

 private:
  // From the other end (or its destructor), on any thread.
  void peer_gone() {
    asio::post(strand_, [self = shared_from_this()] {
      self->peer_gone_ = true;
      self->deliver();
    });
  }

  // All below runs on strand_.

  void receive(Frame frame) {
    if (ended_) return;
    inbox_.push_back(std::move(frame));
    deliver();
  }

  // Hands over what has arrived, unless paused; then, once everything sent
  // before the peer went away has been delivered, ends the connection.
  void deliver() {
    if (!delivery_.started()) return;
    delivery_.deliver(
        [this](Frame& frame, std::string&) {
          if (inbox_.empty()) return FrameBuffer::Next::kMore;
          frame = std::move(inbox_.front());
          inbox_.pop_front();
          return FrameBuffer::Next::kFrame;
        },
        [this] { return !ended_ && !paused_; });
    if (!ended_ && peer_gone_ && inbox_.empty()) end(Status::disconnected(peer_, "closed by the peer"));
  }

  void end(Status why) {
    if (ended_) return;
    ended_ = true;
    ended_flag_.store(true, std::memory_order_release);
    close_status_ = std::move(why);
    inbox_.clear();
    if (auto other = other_.lock()) other->peer_gone();
    if (delivery_.started()) {
      // Posted, never run inside close() or a FrameHandler.
      asio::post(strand_, [self = shared_from_this()] {
        self->delivery_.report_close(self->close_status_);
        self->keep_alive_.reset();
      });
    }
  }

  Strand strand_;
  const std::string peer_;
  std::weak_ptr<InprocEnd> other_;
  std::atomic<bool> ended_flag_{false};  // lets send() drop frames once ended, from any thread

  FrameDelivery delivery_;
  std::shared_ptr<InprocEnd> keep_alive_;  // self, from start() until the end is reported
  bool ended_ = false;
  bool paused_ = false;
  bool peer_gone_ = false;
  Status close_status_;
  std::deque<Frame> inbox_;  // arrived, not yet delivered (paused or not started)
};

class InprocListener final : public Listener {
 public:
  InprocListener(InprocHub& hub, std::shared_ptr<InprocHub::Impl::Registration> registration, Address address)
      : hub_(hub), registration_(std::move(registration)), address_(std::move(address)) {}
  ~InprocListener() override { close(); }

  Address address() const override { return address_; }

  void close() override {
    if (registration_->closed.exchange(true)) return;
    hub_.impl().remove(address_.path, registration_.get());
  }

 private:
  InprocHub& hub_;
  const std::shared_ptr<InprocHub::Impl::Registration> registration_;
  const Address address_;
};

}  // namespace

Result<std::unique_ptr<Listener>> listen_inproc(asio::io_context& io, const Address& address,
                                                Listener::AcceptHandler on_accept, InprocHub& hub) {
  auto registration = std::make_shared<InprocHub::Impl::Registration>(io, std::move(on_accept));
  Status added = hub.impl().add(address.path, registration);
  if (!added) return added;
  return std::unique_ptr<Listener>(std::make_unique<InprocListener>(hub, std::move(registration), address));
}

Result<std::shared_ptr<Connection>> connect_inproc(asio::io_context& io, const Address& address, InprocHub& hub) {
  const std::string text = address.text();
  std::shared_ptr<InprocHub::Impl::Registration> registration = hub.impl().find(address.path);
  if (!registration) return Status::disconnected(text, "no server listens on that name");
  auto [client, server] = InprocEnd::make_pair(io, registration->io, text);
  asio::post(registration->accept_strand, [registration, server = std::move(server)]() mutable {
    // Closed meanwhile: dropping the server end tells the client.
    if (registration->closed.load()) return;
    registration->on_accept(std::move(server));
  });
  return std::shared_ptr<Connection>(std::move(client));
}

}  // namespace internal

}  // namespace pagefile::net
