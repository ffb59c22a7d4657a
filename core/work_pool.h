// Threads for blocking work that start only when the work needs them.
//
// A client's local page I/O (client/files.cpp) reads on the caller's thread
// whatever is in the page cache and writes there too; only a read that must
// wait for the disk, or an O_DSYNC write, goes to a thread. A fixed pool sized
// for the most requests in flight (16) would sit idle in most processes, a
// SQLite one included. This pool starts no thread until its first task, and
// another when a task finds none idle, up to its maximum; it keeps the
// threads it started until join(). A process with one thread only pays less
// for every system call on a file (the kernel takes no reference to the
// file for the call) and for malloc: a SQLite process on local files whose
// pages are all in the page cache never starts one (a scan was about 9%
// faster so).
#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "core/mutex.h"

namespace pagefile {

class WorkPool {
 public:
  // Starts no thread: the first task does.
  explicit WorkPool(size_t max_threads);
  WorkPool(const WorkPool&) = delete;
  WorkPool& operator=(const WorkPool&) = delete;
  ~WorkPool();  // join()

  // Runs `task` on a thread of the pool: an idle one, else a new one while
  // there are fewer than the maximum, else the first to become idle. When
  // no thread can be started (std::system_error), the threads there are
  // take it in turn, and with none at all the caller's thread runs it
  // before post returns. Tasks start in the order they were posted.
  void post(std::function<void()> task) EXCLUDES(mu_);

  // Waits until no task is queued or running, tasks posted meanwhile (by
  // tasks or other threads) included, then stops the threads; a task posted
  // after that never runs. REQUIRES: not called from a task. Idempotent.
  void join() EXCLUDES(mu_);

  // Threads started so far (join() stops them; the count stays), and of
  // them those waiting for a task now.
  size_t threads() const EXCLUDES(mu_);
  size_t idle() const EXCLUDES(mu_);

 private:
  void start_thread() REQUIRES(mu_);
  void run() EXCLUDES(mu_);
  // Runs `task` without mu_, counted as running meanwhile.
  void run_task(std::function<void()> task) REQUIRES(mu_);

  const size_t max_threads_;
  mutable Mutex mu_;
  CondVar work_or_stop_;
  CondVar drained_;  // the queue is empty and no task runs
  std::deque<std::function<void()>> tasks_ GUARDED_BY(mu_);
  size_t idle_ GUARDED_BY(mu_) = 0;     // threads waiting for a task
  size_t running_ GUARDED_BY(mu_) = 0;  // tasks being run
  bool stopping_ GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_ GUARDED_BY(mu_);
  size_t started_ GUARDED_BY(mu_) = 0;
};

}  // namespace pagefile
