// The shared progress line (tools/common/progress.h): silent when disabled
// and during its quiet period, then one redrawn line that clear() erases.
#include "tools/common/progress.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/stream_capture.h"

namespace pagefile::tools {
namespace {

using Capture = pagefile::test::StreamCapture;

TEST_CASE("a disabled progress line never prints") {
  Capture out;
  {
    ProgressLine progress(out.file(), "import", false, 10, "pages");
    std::this_thread::sleep_for(ProgressLine::kQuietPeriod + std::chrono::milliseconds(50));
    for (int64_t i = 1; i <= 10; ++i) progress.update(i);
    progress.clear();
  }
  CHECK(out.text() == "");
}

TEST_CASE("an enabled progress line is quiet at first, then draws its label and erases itself") {
  Capture out;
  {
    ProgressLine progress(out.file(), "export", true, 4, "pages");
    progress.update(4);  // reads the clock (done == total), but within the quiet period
    CHECK(out.text() == "");
    std::this_thread::sleep_for(ProgressLine::kQuietPeriod + std::chrono::milliseconds(50));
    progress.update(4);
    CHECK(out.text() == "\r\x1b[Kexport: 100% 4/4 pages");
    progress.clear();
    CHECK(out.text() == "\r\x1b[Kexport: 100% 4/4 pages\r\x1b[K");
    progress.clear();  // nothing drawn: nothing to erase
  }
  CHECK(out.text() == "\r\x1b[Kexport: 100% 4/4 pages\r\x1b[K");

  Capture bare;
  ProgressLine no_unit(bare.file(), "pf-replay", true, 0);
  std::this_thread::sleep_for(ProgressLine::kQuietPeriod + std::chrono::milliseconds(50));
  no_unit.update(0);
  CHECK(bare.text() == "\r\x1b[Kpf-replay: 100% 0/0");
}

}  // namespace
}  // namespace pagefile::tools
