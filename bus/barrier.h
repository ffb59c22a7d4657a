// Waits for a batch of calls, one or more per server, reading their
// answers on the waiting thread (BusClient::read_as_waiter): for the
// operations that go to every server of a file (sync, truncate, fence,
// drop) and for resync's batches.
//
//   Barrier barrier(bus);
//   for (const auto& server : servers) bus.call(server, build, barrier.arm(server));
//   Status first = barrier.wait();
//
// Thread-safety: arm() and wait() on one thread; the callbacks on any.
#pragma once

#include <atomic>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "bus/bus_client.h"
#include "core/mutex.h"

namespace pagefile::net {

class Barrier {
 public:
  explicit Barrier(BusClient& bus) : bus_(bus) {}
  // The callback of a call to `server`; `then`, when given, gets the answer
  // first (on whichever thread delivers it).
  BusClient::Callback arm(const std::string& server, BusClient::Callback then = nullptr) {
    Call& call = calls_.emplace_back(server);
    return [this, &call, then = std::move(then)](Result<ReplyPtr> r) {
      if (!r) {
        MutexLock lock(mu_);
        if (first_error_.is_ok()) first_error_ = r.status();
        failures_.emplace_back(call.server, r.status());
      }
      if (then) then(std::move(r));
      call.done.store(true, std::memory_order_release);  // the last touch: wait() may return now
    };
  }
  // Waits for every call armed; the first failure.
  Status wait() {
    for (Call& call : calls_) {
      while (!call.done.load(std::memory_order_acquire)) bus_.read_as_waiter(call.server);
    }
    MutexLock lock(mu_);
    return first_error_;
  }
  // After wait(): each call that failed, with its server.
  std::vector<std::pair<std::string, Status>> failures() {
    MutexLock lock(mu_);
    return failures_;
  }

 private:
  struct Call {
    explicit Call(std::string s) : server(std::move(s)) {}
    const std::string server;
    std::atomic<bool> done{false};
  };
  BusClient& bus_;
  std::deque<Call> calls_;  // a deque: a callback keeps its Call while more are armed
  Mutex mu_;
  Status first_error_ GUARDED_BY(mu_);
  std::vector<std::pair<std::string, Status>> failures_ GUARDED_BY(mu_);
};

}  // namespace pagefile::net
