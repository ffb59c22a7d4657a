// Waiting in tests for something another thread or process brings about.
#pragma once

#include <chrono>
#include <thread>

namespace pagefile::test {

// Looks at `done()` every `every` until it holds (true) or `limit` has
// passed (false, after one last look). A deadline, not a count of looks: on
// a loaded machine (the plain and sanitized suites side by side) a look may
// take many times as long as on an idle one.
template <class Done>
bool eventually(Done&& done, std::chrono::milliseconds limit = std::chrono::seconds(30),
                std::chrono::milliseconds every = std::chrono::milliseconds(5)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

}  // namespace pagefile::test
