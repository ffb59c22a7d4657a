#include "core/io_runtime.h"

#include <algorithm>
#include <mutex>

namespace pagefile {

IoRuntime::IoRuntime(uint32_t work_threads, std::chrono::microseconds poll_before_sleep)
    : work_threads_(std::max<uint32_t>(1, work_threads)),
      keep_running_(boost::asio::make_work_guard(io_)),
      io_thread_([this, poll_before_sleep] { run_network(poll_before_sleep); }),
      work_(work_threads_) {}

std::shared_ptr<IoRuntime> IoRuntime::start(uint32_t work_threads,
                                            std::chrono::microseconds poll_before_sleep) {
  return std::shared_ptr<IoRuntime>(new IoRuntime(work_threads, poll_before_sleep));
}

void IoRuntime::run_network(std::chrono::microseconds poll_before_sleep) {
  if (poll_before_sleep.count() <= 0) {
    io_.run();
    return;
  }
  using Clock = std::chrono::steady_clock;
  auto last_event = Clock::now();
  for (;;) {
    // poll() runs what is ready without sleeping; run_one() sleeps until
    // something is. Either returns 0 once the context has stopped (no work
    // left: the destructor let go of it).
    if (io_.poll() > 0) {
      last_event = Clock::now();
      continue;
    }
    if (io_.stopped()) break;
    if (Clock::now() - last_event < poll_before_sleep) continue;
    if (io_.run_one() == 0) break;
    last_event = Clock::now();
  }
}

std::shared_ptr<IoRuntime> IoRuntime::shared() {
  // A weak reference: the process's runtime lives exactly while someone
  // uses it, so a process that stops its last client has no threads left
  // (and a library unloaded after that leaves none behind).
  static std::mutex mu;
  static std::weak_ptr<IoRuntime> current;
  std::lock_guard lock(mu);
  if (auto runtime = current.lock()) return runtime;
  auto runtime = start(kSharedWorkThreads, std::chrono::microseconds(0));
  current = runtime;
  return runtime;
}

IoRuntime::~IoRuntime() {
  // Work already queued finishes: connections ending, their last handlers,
  // so nothing a handler holds is left behind. Past the grace the network
  // thread stops outright and what is still queued is destroyed unrun.
  work_.join();
  keep_running_.reset();
  auto deadline = std::chrono::steady_clock::now() + kFinishGrace;
  while (!io_.stopped() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  io_.stop();
  io_thread_.join();
}

}  // namespace pagefile
