// Frames on a byte stream (wire/frame.h): the length header, the gathered
// write of one frame, and the buffer that cuts arriving bytes back into
// frames. Shared by every stream connection, whichever thread reads it.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "wire/frame.h"

namespace pagefile::net {

using FrameHeader = std::array<uint8_t, kFrameHeaderBytes>;

FrameHeader encode_frame_length(uint32_t bytes);
uint32_t decode_frame_length(const FrameHeader& header);

// Writes what is left of `frame` (header and body) to the socket `fd` past
// its first `skip` bytes, in one sendmsg that does not wait and raises no
// SIGPIPE. The bytes written, or -1 with errno set (EAGAIN when the socket
// can take nothing now).
ssize_t send_frame_now(int fd, const Frame& frame, size_t skip);

// Bytes read from a stream, cut into frames. A read takes whatever has
// arrived into space(); next() then hands out every whole frame, so small
// frames cost no system call each.
class FrameBuffer {
 public:
  enum class Next {
    kFrame,      // `frame` holds the next frame
    kMore,       // the next frame has not fully arrived
    kMalformed,  // the next header is malformed; nothing after it can be trusted
  };

  // Where the next read goes: never empty. Moves a partial frame to the
  // front when the end is reached.
  std::span<uint8_t> space();
  // `n` bytes were read into space(). A read that filled all the space
  // doubles the buffer, up to kBusyBytes: a busy connection takes many
  // frames a read, an idle one holds little.
  void filled(size_t n);
  // Takes the next whole frame into `frame`; with kMalformed, `problem`
  // says why. A frame larger than the buffer grows it, once, to fit.
  Next next(Frame& frame, std::string& problem);
  // Back to at most kBusyBytes once a larger frame is gone.
  void shrink_when_empty();

  size_t capacity() const { return buffer_.size(); }

  // A new connection's buffer (a few requests), and the most a busy one
  // grows to; only a frame larger than that makes it larger, until the
  // frame is gone.
  static constexpr size_t kIdleBytes = 4 * 1024;
  static constexpr size_t kBusyBytes = 128 * 1024;

 private:
  void resize_keeping(size_t bytes);

  // Bytes [begin_, end_) arrived and are not yet handed out.
  std::vector<uint8_t> buffer_ = std::vector<uint8_t>(kIdleBytes);
  size_t begin_ = 0;
  size_t end_ = 0;
};

}  // namespace pagefile::net
