// What every connection does with the handlers its start() is given
// (wire/transport.h), whichever transport it is and whichever thread
// delivers: take them once, hand frames over in order, stop as soon as a
// handler pauses or closes its own connection, and report the end once.
//
// Not thread-safe: a connection calls it only from where its frames are
// delivered (its strand, or the waiter that holds its reading).
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "wire/frame.h"
#include "wire/frame_buffer.h"
#include "wire/transport.h"
#include "pagefile/status.h"

namespace pagefile::net::internal {

class FrameDelivery {
 public:
  // Takes the handlers; false when they were taken before (start() is
  // called once: a second call has nothing to take over).
  bool take(Connection::FrameHandler on_frame, Connection::CloseHandler on_close);

  // start() on the connection's strand: takes the handlers and, when the
  // connection `ended` before it started, reports `why` at once. True when
  // the connection should begin delivering.
  bool begin(Connection::FrameHandler on_frame, Connection::CloseHandler on_close, bool ended, const Status& why);

  bool started() const { return started_; }
  bool reported() const { return reported_; }

  struct Delivered {
    size_t frames = 0;
    std::string malformed;  // why the next header is malformed; empty when it is not
  };

  // Hands over each frame `next(frame, problem)` gives (FrameBuffer::next's
  // contract) while `go_on()` holds. go_on() is asked before every frame,
  // since a FrameHandler may pause or close its own connection; delivery
  // stops there, at the first kMore, or at a malformed header.
  template <class Next, class GoOn>
  Delivered deliver(Next next, GoOn go_on) {
    Delivered delivered;
    Frame frame;
    while (go_on()) {
      FrameBuffer::Next got = next(frame, delivered.malformed);
      if (got != FrameBuffer::Next::kFrame) break;
      ++delivered.frames;
      on_frame_(std::move(frame));
      frame = Frame();
    }
    return delivered;
  }

  // The whole frames read into `buffer`.
  template <class GoOn>
  Delivered deliver(FrameBuffer& buffer, GoOn go_on) {
    return deliver([&buffer](Frame& frame, std::string& problem) { return buffer.next(frame, problem); },
                   std::move(go_on));
  }

  // Runs the CloseHandler with `why`, once, and lets go of both handlers,
  // breaking the cycle a handler that captures its own connection makes.
  void report_close(const Status& why);

 private:
  Connection::FrameHandler on_frame_;
  Connection::CloseHandler on_close_;
  bool started_ = false;
  bool reported_ = false;
};

}  // namespace pagefile::net::internal
