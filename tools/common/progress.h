// A one-line progress display for long-running tools on a terminal, shared by
// pf-replay (trace operations) and the pagefile admin CLI (import/export
// pages).
//
// It stays silent for the first two seconds, so a short run prints nothing
// but its result, then redraws one line ("LABEL: 42% 1260/3000 UNIT") at
// most five times a second, and erases it when the work ends. When the
// stream is not a terminal (a pipe, a file, CI) the caller passes
// enabled = false and it never prints at all: progress lines in a log are
// noise.
//
//   pagefile::tools::ProgressLine progress(stderr, "import",
//                                          isatty(fileno(stderr)) == 1, pages, "pages");
//   for (int64_t p = 0; p < pages; ++p) { copy(p); progress.update(p + 1); }
//   progress.clear();  // before printing the result
//
// Thread-safety: not thread-safe; the loop that does the work owns it.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace pagefile::tools {

class ProgressLine {
 public:
  using Clock = std::chrono::steady_clock;

  static constexpr std::chrono::milliseconds kQuietPeriod{2000};
  static constexpr std::chrono::milliseconds kRedrawInterval{200};

  // Draws on `out` when `enabled` (the caller decides, usually from
  // isatty(fileno(out))), as "label: P% done/total unit"; an empty `unit`
  // leaves the word out.
  ProgressLine(std::FILE* out, std::string_view label, bool enabled, int64_t total,
               std::string_view unit = {});

  // Erases the line if one is drawn.
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  ProgressLine(ProgressLine&&) = delete;
  ProgressLine& operator=(ProgressLine&&) = delete;

  // Reports `done` of the total; cheap enough to call for every operation
  // (it reads the clock once every few calls, and always when done reaches
  // the total).
  void update(int64_t done);

  // Erases the line if one is drawn; later updates draw again.
  void clear();

 private:
  void draw(int64_t done);

  std::FILE* const out_;
  const std::string label_;
  const std::string unit_;
  const bool enabled_;
  const int64_t total_;
  const Clock::time_point start_;
  Clock::time_point next_draw_;
  uint32_t calls_ = 0;
  bool drawn_ = false;
};

}  // namespace pagefile::tools
