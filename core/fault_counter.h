// The counting of a fault seam (store/disk_faults.h, bus/bus_faults.h):
// armed for the Nth event from now on, and with `sticky` for every one
// after it too, it says at each event whether that one gets the fault.
// Unarmed it costs one relaxed atomic load per event.
//
// Thread-safety: thread-safe; arm() and disarm() are for a test's thread
// between workloads.
#pragma once

#include <atomic>
#include <cstdint>

namespace pagefile {

class FaultCounter {
 public:
  // Whatever the seam keeps beside the counter (which fault, for which
  // operation) is set before arm(), which publishes it.
  void arm(uint64_t nth, bool sticky) {
    armed_ = false;
    nth_ = nth;
    seen_ = 0;
    sticky_ = sticky;
    fired_ = false;
    armed_ = true;
  }
  void disarm() { armed_ = false; }
  bool armed() const { return armed_.load(std::memory_order_relaxed); }
  // Whether a fault was given since arm().
  bool fired() const { return fired_.load(); }
  // How many events were counted since arm().
  uint64_t seen() const { return seen_.load(); }

  // Counts one event: true when it gets the fault. REQUIRES: armed().
  bool strike() {
    uint64_t seen = seen_.fetch_add(1) + 1;
    uint64_t nth = nth_.load();
    if (seen < nth || (seen > nth && !sticky_.load())) return false;
    fired_ = true;
    return true;
  }

 private:
  std::atomic<bool> armed_{false};
  std::atomic<uint64_t> nth_{0};
  std::atomic<uint64_t> seen_{0};
  std::atomic<bool> sticky_{false};
  std::atomic<bool> fired_{false};
};

}  // namespace pagefile
