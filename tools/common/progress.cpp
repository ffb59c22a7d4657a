#include "tools/common/progress.h"

#include <fmt/format.h>

namespace pagefile::tools {

namespace {

// Reading the clock costs tens of nanoseconds; a page operation costs
// microseconds, so checking every 16th call keeps the display's share small
// while still noticing a 200 ms interval on slow runs.
constexpr uint32_t kCallsPerClockRead = 16;

}  // namespace

ProgressLine::ProgressLine(std::FILE* out, std::string_view label, bool enabled, int64_t total,
                           std::string_view unit)
    : out_(out),
      label_(label),
      unit_(unit),
      enabled_(enabled && out != nullptr),
      total_(total),
      start_(Clock::now()),
      next_draw_(start_ + kQuietPeriod) {}

ProgressLine::~ProgressLine() { clear(); }

void ProgressLine::update(int64_t done) {
  if (!enabled_) return;
  if (++calls_ % kCallsPerClockRead != 0 && done != total_) return;
  const Clock::time_point now = Clock::now();
  if (now < next_draw_) return;
  next_draw_ = now + kRedrawInterval;
  draw(done);
}

void ProgressLine::clear() {
  if (!drawn_) return;
  // Carriage return, then erase to the end of the line.
  std::fputs("\r\x1b[K", out_);
  std::fflush(out_);
  drawn_ = false;
}

void ProgressLine::draw(int64_t done) {
  const int64_t percent = total_ > 0 ? done * 100 / total_ : 100;
  fmt::print(out_, "\r\x1b[K{}: {:3}% {}/{}{}{}", label_, percent, done, total_,
             unit_.empty() ? "" : " ", unit_);
  std::fflush(out_);
  drawn_ = true;
}

}  // namespace pagefile::tools
