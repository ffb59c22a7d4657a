#include "core/work_pool.h"

#include <utility>

namespace pagefile {

WorkPool::WorkPool(size_t max_threads) : max_threads_(max_threads == 0 ? 1 : max_threads) {}

WorkPool::~WorkPool() { join(); }

void WorkPool::post(std::function<void()> task) {
  MutexLock lock(mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(task));
  // Every waiting task has an idle thread to take it, or gets a new one.
  if (tasks_.size() > idle_ && started_ < max_threads_) {
    threads_.emplace_back([this] { run(); });
    ++started_;
  } else {
    work_or_stop_.notify_one();
  }
}

void WorkPool::join() {
  std::vector<std::thread> threads;
  {
    MutexLock lock(mu_);
    stopping_ = true;
    threads.swap(threads_);
  }
  work_or_stop_.notify_all();
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

void WorkPool::run() {
  MutexLock lock(mu_);
  for (;;) {
    if (!tasks_.empty()) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // (what it holds goes before the lock is taken again)
      lock.lock();
      continue;
    }
    if (stopping_) return;
    ++idle_;
    work_or_stop_.wait(mu_);
    --idle_;
  }
}

}  // namespace pagefile
