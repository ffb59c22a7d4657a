// A mutex, its scoped lock and a condition variable that Clang's thread
// safety analysis understands (-Wthread-safety, the CI's clang check), so
// that "this field is guarded by that mutex" and "call this with that mutex
// held" are checked by the compiler instead of written in comments.
//
//   class Table {
//     void add(int v) EXCLUDES(mu_) { MutexLock lock(mu_); rows_.push_back(v); }
//     void add_locked(int v) REQUIRES(mu_) { rows_.push_back(v); }
//     Mutex mu_;
//     std::vector<int> rows_ GUARDED_BY(mu_);
//   };
//
// A wait on a CondVar names its mutex and runs its predicate with it held;
// write a predicate that reads guarded fields as a loop (`while (!ready_)
// cv_.wait(mu_);`), which the analysis follows, rather than a lambda, which
// it checks as a function of its own.
//
// With GCC the annotations expand to nothing; the types work the same.
// Lock order across the tree is in doc/concurrency.md.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

#if defined(__clang__)
#define PAGEFILE_TSA(x) __attribute__((x))
#else
#define PAGEFILE_TSA(x)
#endif

#define CAPABILITY(x) PAGEFILE_TSA(capability(x))
#define SCOPED_CAPABILITY PAGEFILE_TSA(scoped_lockable)
#define GUARDED_BY(x) PAGEFILE_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) PAGEFILE_TSA(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) PAGEFILE_TSA(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) PAGEFILE_TSA(acquired_after(__VA_ARGS__))
#define REQUIRES(...) PAGEFILE_TSA(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) PAGEFILE_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) PAGEFILE_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) PAGEFILE_TSA(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) PAGEFILE_TSA(locks_excluded(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) PAGEFILE_TSA(assert_capability(x))
#define RETURN_CAPABILITY(x) PAGEFILE_TSA(lock_returned(x))
#define NO_THREAD_SAFETY_ANALYSIS PAGEFILE_TSA(no_thread_safety_analysis)

namespace pagefile {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ACQUIRE() { mu_.lock(); }
  void unlock() RELEASE() { mu_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return mu_.try_lock(); }
  // For the analysis: the caller knows it holds this mutex (a callback
  // documented to run under it).
  void assert_held() const ASSERT_CAPABILITY(this) {}

 private:
  friend class CondVar;
  std::mutex mu_;
};

// Holds a Mutex for its scope; unlock()/lock() let go and take it again
// within the scope (to do I/O in between).
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
  ~MutexLock() RELEASE() {
    if (held_) mu_.unlock();
  }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() RELEASE() {
    mu_.unlock();
    held_ = false;
  }
  void lock() ACQUIRE() {
    mu_.lock();
    held_ = true;
  }

 private:
  Mutex& mu_;
  bool held_ = true;
};

class CondVar {
 public:
  // Releases `mu` while it waits; holds it again on return. May wake
  // without a notify: wait in a loop over the condition.
  void wait(Mutex& mu) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    cv_.wait(lock);
    lock.release();
  }
  // As wait(); false when `timeout` passed first.
  template <class Rep, class Period>
  bool wait_for(Mutex& mu, std::chrono::duration<Rep, Period> timeout) REQUIRES(mu) {
    return wait_until(mu, std::chrono::steady_clock::now() + timeout);
  }
  template <class Clock, class Duration>
  bool wait_until(Mutex& mu, std::chrono::time_point<Clock, Duration> deadline) REQUIRES(mu) {
    std::unique_lock<std::mutex> lock(mu.mu_, std::adopt_lock);
    bool woken = cv_.wait_until(lock, deadline) == std::cv_status::no_timeout;
    lock.release();
    return woken;
  }
  void notify_one() { cv_.notify_one(); }
  void notify_all() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

// A value that other threads may replace at any time (a setting), read and
// replaced whole under its own mutex.
template <class T>
class Locked {
 public:
  T get() const {
    MutexLock lock(mu_);
    return value_;
  }
  void set(T value) {
    {
      MutexLock lock(mu_);
      std::swap(value_, value);
    }
    // (The old value goes here, outside the mutex: its destructor may wait.)
  }

 private:
  mutable Mutex mu_;
  T value_ GUARDED_BY(mu_){};
};

}  // namespace pagefile
