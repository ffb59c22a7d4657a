// Transports: connections that carry frames, over TCP, Unix sockets, or in
// memory between a client and servers running in its own process.
//
// Addresses: "tcp://HOST:PORT", "unix:/PATH", "inproc:NAME" (net/address.h).
// Nothing above this header knows which transport a connection uses.
//
// Threading: each Connection and Listener runs its handlers on the
// io_context it was made with (never inline in send/start). send() and
// close() may be called from any thread.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <boost/asio/io_context.hpp>

#include "net/address.h"
#include "net/frame.h"
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

  // Queues a frame; frames go out in the order sent. Frames sent after the
  // connection ended are dropped. REQUIRES: frame.size() * 8 <= kMaxFrameBytes.
  virtual void send(Frame frame) = 0;

  // Stops reading, drops queued frames, ends the connection. Idempotent.
  virtual void close() = 0;

  // Pauses and resumes reading (flow control: a server that holds too many
  // unconfirmed writes stops reading until they are done).
  virtual void pause_reading() = 0;
  virtual void resume_reading() = 0;

  // The peer, for messages: "tcp://127.0.0.1:40412", "unix:/x", "inproc:a".
  virtual std::string peer() const = 0;
};

class InprocHub;

class Listener {
 public:
  using AcceptHandler = std::function<void(std::shared_ptr<Connection>)>;
  virtual ~Listener() = default;
  // The address actually bound (a tcp port 0 becomes the real port).
  virtual Address address() const = 0;
  // Stops accepting; existing connections are unaffected. Idempotent.
  virtual void close() = 0;
};

// Starts listening on `address`; `on_accept` runs for each new connection
// (not yet started). inproc: addresses register with `hub`, which must then
// be non-null and outlive the listener. A unix: path that exists as a stale
// socket is replaced. Fails with the OS error (kAlreadyExists when the
// address is in use) or kInvalidArgument.
Result<std::unique_ptr<Listener>> listen(boost::asio::io_context& io, const Address& address,
                                         Listener::AcceptHandler on_accept, InprocHub* hub = nullptr);

// Connects to `address`, waiting at most `timeout_ms`. kDisconnected when
// nothing listens there (refused, no such socket, unknown inproc name) or
// the time ran out; kInvalidArgument for an inproc: address without a hub.
Result<std::shared_ptr<Connection>> connect(boost::asio::io_context& io, const Address& address,
                                            int timeout_ms, InprocHub* hub = nullptr);

// The in-process "network": names of inproc: listeners in one process. Owned
// by whoever builds the bus (no global state), shared by its servers and
// clients.
class InprocHub {
 public:
  InprocHub();
  ~InprocHub();
  InprocHub(const InprocHub&) = delete;
  InprocHub& operator=(const InprocHub&) = delete;

  class Impl;
  Impl& impl() { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagefile::net
