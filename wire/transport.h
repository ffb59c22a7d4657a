// Transports: connections that carry frames, over TCP, Unix sockets, or in
// memory between a client and servers running in its own process.
//
// Addresses: "tcp://HOST:PORT", "tls://HOST:PORT", "unix:/PATH", "inproc:NAME"
// (wire/address.h); tls:// needs a TlsContext (wire/tls.h) of the right side.
// Nothing above this header knows which transport a connection uses.
//
// Threading: each Connection and Listener runs its handlers on the
// io_context it was made with (never inline in send/start/close), one at a
// time per connection even when several threads run the io_context. send(),
// close(), pause_reading() and resume_reading() may be called from any
// thread, including from the connection's own handlers.
//
// The exception is a connection read by its waiters (Reading::kByWaiter,
// the client's end of a tcp: or unix: connection when asked for): nothing
// reads it until a thread calls read_frames(), and its handlers run on that
// thread. A client whose thread waits for an answer then reads the answer
// itself, with no io thread woken to hand it over: on a virtual machine a
// wake-up across CPUs costs tens of microseconds, more than the rest of a
// cached page read.
//
// Lifetime: a started connection stays alive until it has ended (its
// CloseHandler has run), whether or not the caller keeps a pointer; one
// never started goes away with its last pointer, which the peer sees as a
// disconnect. A connection or listener must not outlive its io_context.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "wire/address.h"
#include "wire/frame.h"
#include "wire/tls.h"
#include "pagefile/status.h"

namespace pagefile::net {

class Connection {
 public:
  // Called once per frame received, in order.
  using FrameHandler = std::function<void(Frame frame)>;
  // Called once when the connection ends: OK after close(), kDisconnected
  // when the peer went away, kCorruption for a malformed frame (bad length,
  // too large), the OS error otherwise. No FrameHandler call follows.
  using CloseHandler = std::function<void(Status why)>;

  virtual ~Connection() = default;

  // Begins delivering frames. Call once.
  virtual void start(FrameHandler on_frame, CloseHandler on_close) = 0;

  // Queues a frame; frames go out in the order sent (per sending thread).
  // Frames sent after the connection ended are dropped.
  // REQUIRES: 0 < frame.size() * 8 <= kMaxFrameBytes; a frame outside that
  // ends this connection with kInvalidArgument (the peer would close on it
  // as malformed anyway).
  virtual void send(Frame frame) = 0;

  // Stops reading, drops queued frames, ends the connection. Idempotent.
  // Called from this connection's FrameHandler, no further frame is
  // delivered; called from another thread, frames may still be delivered
  // until the close has taken effect on the io_context.
  virtual void close() = 0;

  // Stops reading and ends the connection once every frame sent before this
  // call (from this thread) has been written: a last word, such as an error,
  // before hanging up. The CloseHandler then sees OK. Idempotent.
  virtual void close_after_sending() = 0;

  // Pauses and resumes reading (flow control: a server that holds too many
  // unconfirmed writes stops reading until they are done). Once the pause
  // takes effect (at once inside this connection's handlers, shortly after
  // from another thread) no FrameHandler call starts until resume_reading();
  // frames that arrive meanwhile wait, in order.
  virtual void pause_reading() = 0;
  virtual void resume_reading() = 0;

  // Flow control toward a peer that sends but does not read: once
  // bound_backlog() was called, a stream connection stops delivering frames
  // (and reading) while the bytes of answers it owes the peer (owe()) plus
  // those it has queued unsent exceed kMaxBacklogBytes, and goes on once
  // that is under half of it. So a peer that reads nothing costs this side
  // about that much memory, however much it asks for. Servers bound their
  // connections; a client does not (its peer's answers are what drain its
  // queue, so it must always read them). Elsewhere (in-process and
  // waiter-read connections) both are no-ops.
  //
  // The bound is far above what a client keeps in flight to one server
  // (its concurrency levels times their page sizes: 32 MiB is 4096 reads
  // of 8 KiB), since a client that sends a request while it holds answers
  // unread would wait on a server that waits on it.
  static constexpr int64_t kMaxBacklogBytes = 32 << 20;
  // REQUIRES: before start().
  virtual void bound_backlog() {}
  // `bytes` (a signed change) of answers this side owes the peer for frames
  // already delivered: a server adds an answer's size when it takes a
  // request to its work pool, and takes it off once the answer is sent.
  virtual void owe(int64_t bytes) { (void)bytes; }

  // The peer, for messages: "tcp://127.0.0.1:40412", "unix:/x", "inproc:a".
  virtual std::string peer() const = 0;

  // What the peer may do: the role its key or certificate proved in the
  // TLS handshake (wire/tls.h); an admin's over tcp://, unix: and inproc:,
  // which prove nothing and are trusted as a whole (they are refused off
  // loopback, and a unix: socket's mode says who may connect).
  virtual PeerRole role() const { return PeerRole::kAdmin; }

  enum class Reading {
    kOnIoThread,  // frames are delivered on the io_context as they arrive
    kByWaiter,    // frames are delivered only inside read_frames()
  };
  virtual Reading reading() const { return Reading::kOnIoThread; }

  enum class ReadOutcome {
    kDelivered,  // at least one frame was delivered
    kNothing,    // no whole frame arrived in the time given
    kBusy,       // another thread is reading (nothing was done)
    kEnded,      // the connection has ended (its CloseHandler has run)
  };
  // For Reading::kByWaiter: waits at most `timeout` for data, then delivers
  // every whole frame that has arrived, on this thread, one thread at a
  // time; when the connection ends, its CloseHandler runs here. A started
  // connection that no thread reads holds its frames in the socket.
  // Elsewhere: kBusy.
  virtual ReadOutcome read_frames(std::chrono::milliseconds timeout) {
    (void)timeout;
    return ReadOutcome::kBusy;
  }
};

class InprocHub;

class Listener {
 public:
  using AcceptHandler = std::function<void(std::shared_ptr<Connection>)>;
  virtual ~Listener() = default;
  // The address actually bound (a tcp port 0 becomes the real port).
  virtual Address address() const = 0;
  // Stops accepting; existing connections are unaffected. Idempotent; a
  // unix: listener removes its socket file. An AcceptHandler already running
  // on another thread may still finish.
  virtual void close() = 0;
  // A tls:// listener's credentials from now on (a reload: rotated
  // certificates, keys added or withdrawn); connections already made keep
  // theirs. kInvalidArgument for another kind of listener or the wrong side.
  virtual Status set_tls(std::shared_ptr<TlsContext> tls) {
    (void)tls;
    return Status::invalid_argument(address().text(), "is not a tls:// listener");
  }
};

// Starts listening on `address`; `on_accept` runs for each new connection
// (not yet started). inproc: addresses register with `hub`, which must then
// be non-null and outlive the listener. A unix: path that exists as a stale
// socket is replaced, and the new one gets `unix_mode` (owner only unless
// told otherwise: whoever can connect can read and write every file) before
// it accepts anything. Fails with the OS error (kAlreadyExists when the
// address is in use) or kInvalidArgument.
// A tls:// listener needs `tls` of TlsSide::kServer (kInvalidArgument
// otherwise): each peer's handshake is done, and its role known, before
// on_accept sees it; a peer refused is logged and never seen.
Result<std::unique_ptr<Listener>> listen(boost::asio::io_context& io, const Address& address,
                                         Listener::AcceptHandler on_accept, InprocHub* hub = nullptr,
                                         uint32_t unix_mode = 0600, std::shared_ptr<TlsContext> tls = nullptr);

// Connects to `address`, waiting at most `timeout_ms`. kDisconnected when
// nothing listens there (refused, no such socket, unknown inproc name, a
// host name that does not resolve) or the time ran out; kInvalidArgument
// for an inproc: address without a hub. With Reading::kByWaiter, a tcp: or
// unix: connection is read by its waiters (read_frames) and its send()
// writes on the calling thread, waiting up to `send_timeout_ms` (0: as
// long as the connect may) when the socket is full before it ends the
// connection; an inproc: one reads on its io_context all the same.
// tcp: and unix: block the calling thread while `io` does the work: call
// from a thread that is not running `io` (from io's only thread the connect
// cannot progress and fails when the timeout runs out). inproc: never blocks.
// tls:// needs `tls` of TlsSide::kClient and fails with kPermissionDenied
// (OpenSSL's reason) when either side refuses the other's credentials; with
// Reading::kByWaiter its handshake runs on the calling thread and then its
// waiters encrypt and decrypt on theirs, as they write and read a tcp://
// one, else it is Asio's SSL stream read on `io`.
Result<std::shared_ptr<Connection>> connect(boost::asio::io_context& io, const Address& address,
                                            int timeout_ms, InprocHub* hub = nullptr,
                                            Connection::Reading reading = Connection::Reading::kOnIoThread,
                                            int send_timeout_ms = 0, std::shared_ptr<TlsContext> tls = nullptr);

// The in-process "network": names of inproc: listeners in one process. Owned
// by whoever builds the bus (no global state), shared by its servers and
// clients.
class InprocHub {
 public:
  InprocHub();
  ~InprocHub();

  class Impl;
  Impl& impl() { return *impl_; }

  // Listeners and connectors hold on to the hub they were given.
  InprocHub(const InprocHub&) = delete;
  InprocHub& operator=(const InprocHub&) = delete;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagefile::net
