#include "wire/frame_delivery.h"

namespace pagefile::net::internal {

bool FrameDelivery::take(Connection::FrameHandler on_frame, Connection::CloseHandler on_close) {
  if (started_) return false;
  on_frame_ = std::move(on_frame);
  on_close_ = std::move(on_close);
  started_ = true;
  return true;
}

bool FrameDelivery::begin(Connection::FrameHandler on_frame, Connection::CloseHandler on_close, bool ended,
                          const Status& why) {
  if (!take(std::move(on_frame), std::move(on_close))) return false;
  if (!ended) return true;
  report_close(why);
  return false;
}

void FrameDelivery::report_close(const Status& why) {
  if (reported_) return;
  reported_ = true;
  Connection::CloseHandler on_close = std::move(on_close_);
  on_close_ = nullptr;
  on_frame_ = nullptr;
  if (on_close) on_close(why);
}

}  // namespace pagefile::net::internal
