#include "core/work_pool.h"

#include <system_error>
#include <utility>

namespace pagefile {

WorkPool::WorkPool(size_t max_threads) : max_threads_(max_threads == 0 ? 1 : max_threads) {}

WorkPool::~WorkPool() { join(); }

void WorkPool::start_thread() {
  threads_.emplace_back([this] { run(); });
  ++started_;
}

void WorkPool::post(std::function<void()> task) {
  MutexLock lock(mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
  // Every waiting task has an idle thread to take it, or gets a new one.
  if (tasks_.size() > idle_ && started_ < max_threads_) {
    try {
      start_thread();
      return;
    } catch (const std::system_error&) {
      // No thread to be had now: those there are take the task in turn.
      if (threads_.empty()) {
        // None at all: this one, rather than a task that never runs.
        std::function<void()> mine = std::move(tasks_.back());
        tasks_.pop_back();
        run_task(std::move(mine));
        return;
      }
    }
  }
  work_or_stop_.notify_one();
}

void WorkPool::join() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    while (!stopping_ && (!tasks_.empty() || running_ > 0)) drained_.wait(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  work_or_stop_.notify_all();
  drained_.notify_all();  // (another join() waiting returns)
  for (std::thread& t : threads) t.join();
}

size_t WorkPool::threads() const {
  MutexLock lock(mu_);
  return started_;
}

size_t WorkPool::idle() const {
  MutexLock lock(mu_);
  return idle_;
}

void WorkPool::run_task(std::function<void()> task) {
  ++running_;
  mu_.unlock();
  task();
  task = nullptr;  // (what it holds goes before the lock is taken again)
  mu_.lock();
  --running_;
  if (tasks_.empty() && running_ == 0) drained_.notify_all();
}

void WorkPool::run() {
  MutexLock lock(mu_);
  for (;;) {
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      run_task(std::move(task));
      continue;
    }
    if (stopping_) return;
    ++idle_;
    work_or_stop_.wait(mu_);
    --idle_;
  }
}

}  // namespace pagefile
