#include "wire/frame_buffer.h"

#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include "wire/transport_internal.h"

namespace pagefile::net {

FrameHeader encode_frame_length(uint32_t bytes) {
  return {static_cast<uint8_t>(bytes), static_cast<uint8_t>(bytes >> 8), static_cast<uint8_t>(bytes >> 16),
          static_cast<uint8_t>(bytes >> 24)};
}

uint32_t decode_frame_length(const FrameHeader& header) {
  return static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
         static_cast<uint32_t>(header[2]) << 16 | static_cast<uint32_t>(header[3]) << 24;
}

ssize_t send_frame_now(int fd, const Frame& frame, size_t skip) {
  const size_t bytes = frame.size() * sizeof(capnp::word);
  FrameHeader header = encode_frame_length(static_cast<uint32_t>(bytes));
  iovec parts[2];
  size_t count = 0;
  if (skip < header.size()) parts[count++] = {header.data() + skip, header.size() - skip};
  const size_t body_skip = skip < header.size() ? 0 : skip - header.size();
  parts[count++] = {reinterpret_cast<uint8_t*>(const_cast<capnp::word*>(frame.data())) + body_skip, bytes - body_skip};
  msghdr message{};
  message.msg_iov = parts;
  message.msg_iovlen = count;
  ssize_t n;
  do {
    n = ::sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n;
}

std::span<uint8_t> FrameBuffer::space() {
  if (begin_ == end_) begin_ = end_ = 0;
  if (end_ == buffer_.size()) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  return {buffer_.data() + end_, buffer_.size() - end_};
}

void FrameBuffer::filled(size_t n) {
  end_ += n;
  if (end_ == buffer_.size() && buffer_.size() < kBusyBytes) resize_keeping(std::min(2 * buffer_.size(), kBusyBytes));
}

void FrameBuffer::resize_keeping(size_t bytes) {
  std::vector<uint8_t> other(bytes);
  std::memcpy(other.data(), buffer_.data() + begin_, end_ - begin_);
  buffer_ = std::move(other);
  end_ -= begin_;
  begin_ = 0;
}

FrameBuffer::Next FrameBuffer::next(Frame& frame, std::string& problem) {
  const size_t have = end_ - begin_;
  if (have < kFrameHeaderBytes) return Next::kMore;
  FrameHeader header;
  std::memcpy(header.data(), buffer_.data() + begin_, kFrameHeaderBytes);
  const uint32_t bytes = decode_frame_length(header);
  problem = internal::frame_length_problem(bytes);
  if (!problem.empty()) return Next::kMalformed;
  const size_t whole = kFrameHeaderBytes + bytes;
  if (have < whole) {
    if (whole > buffer_.size()) {
      resize_keeping(whole);
    } else if (begin_ + whole > buffer_.size()) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, have);
      begin_ = 0;
      end_ = have;
    }
    return Next::kMore;
  }
  frame.resize(bytes / sizeof(capnp::word));
  std::memcpy(frame.data(), buffer_.data() + begin_ + kFrameHeaderBytes, bytes);
  begin_ += whole;
  return Next::kFrame;
}

void FrameBuffer::shrink_when_empty() {
  if (buffer_.size() > kBusyBytes && begin_ == end_) {
    buffer_ = std::vector<uint8_t>(kBusyBytes);
    begin_ = end_ = 0;
  }
}

}  // namespace pagefile::net
