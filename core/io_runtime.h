// The threads of a process: one io_context run by one network thread, and a
// small fixed pool for work that blocks (disk I/O, connecting, an emulated
// disk's wait). Every bus, embedded page server and client of a process
// shares one (IoRuntime::shared()), so a SQLite process on the embedded
// default runs its own threads plus 1 + kSharedWorkThreads, however many
// servers and databases it has; pagefiled starts one of its own whose pool
// is its --threads (doc/concurrency.md lists every thread).
//
// Why one network thread: handlers of the transports, the servers' sessions
// and the bus run one at a time without strands of their own, and what they
// do is short (decode, look up, hand over); whatever may block goes to the
// work pool.
//
// Lifetime: whoever posts work that refers to an object must keep the
// object alive until the work has run (a shared_ptr in the handler), since
// the runtime outlives any one user. The destructor lets queued work finish
// (at most `kFinishGrace` for the network thread), then joins both.
//
// Thread-safety: thread-safe. The destructor must not run on one of the
// runtime's own threads (a shared_ptr released there would join itself):
// holders release theirs on their own threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

namespace pagefile {

class IoRuntime {
 public:
  // The work pool of the process's shared runtime: enough to overlap a
  // few blocking calls (a connect, an fsync, a page read that missed), few
  // enough that a process stays small.
  static constexpr uint32_t kSharedWorkThreads = 4;
  static constexpr std::chrono::milliseconds kFinishGrace{2000};

  // A runtime of one's own, with `work_threads` (at least 1) in its pool.
  // With a `poll_before_sleep` above zero the network thread, once it runs
  // out of events, keeps polling for that long before it sleeps in the
  // kernel: a server answering a client that keeps a few requests in flight
  // then takes the next request without a sleep and a wake-up in between
  // (about a third of a cached read's time at one or two in flight), at
  // the price of that much CPU after each burst. The shared runtime never
  // polls: it lives in applications.
  static std::shared_ptr<IoRuntime> start(uint32_t work_threads,
                                          std::chrono::microseconds poll_before_sleep = {});
  // The process's runtime: started by the first caller, shared by every
  // later one while any holds it, stopped when the last lets go.
  static std::shared_ptr<IoRuntime> shared();

  ~IoRuntime();
  IoRuntime(const IoRuntime&) = delete;
  IoRuntime& operator=(const IoRuntime&) = delete;

  // For the transports, timers and short handlers.
  boost::asio::io_context& io() { return io_; }
  // For work that blocks.
  boost::asio::thread_pool& work() { return work_; }
  uint32_t work_threads() const { return work_threads_; }
  // Whether the caller is the network thread.
  bool on_io_thread() const { return std::this_thread::get_id() == io_thread_.get_id(); }

 private:
  IoRuntime(uint32_t work_threads, std::chrono::microseconds poll_before_sleep);
  // The network thread's loop.
  void run_network(std::chrono::microseconds poll_before_sleep);

  const uint32_t work_threads_;
  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keep_running_;
  std::thread io_thread_;
  boost::asio::thread_pool work_;
};

}  // namespace pagefile
