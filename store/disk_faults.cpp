// Fault injection at the disk (store/disk_faults.h).
#include "store/disk_faults.h"

#include <atomic>

namespace pagefile {

namespace {

std::atomic<bool> g_armed{false};
std::atomic<int> g_op{0};
std::atomic<int> g_fault{0};
std::atomic<uint64_t> g_nth{0};
std::atomic<uint64_t> g_seen{0};
std::atomic<bool> g_sticky{false};
std::atomic<bool> g_fired{false};

}  // namespace

void DiskFaults::arm(DiskOp op, uint64_t nth, DiskFault fault, bool sticky) {
  g_armed = false;
  g_op = static_cast<int>(op);
  g_fault = static_cast<int>(fault);
  g_nth = nth;
  g_seen = 0;
  g_sticky = sticky;
  g_fired = false;
  g_armed = true;
}

void DiskFaults::disarm() { g_armed = false; }

bool DiskFaults::fired() { return g_fired.load(); }

std::optional<DiskFault> DiskFaults::next(DiskOp op) {
  if (!g_armed.load(std::memory_order_relaxed) || g_op.load() != static_cast<int>(op)) return std::nullopt;
  uint64_t seen = g_seen.fetch_add(1) + 1;
  uint64_t nth = g_nth.load();
  if (seen < nth || (seen > nth && !g_sticky.load())) return std::nullopt;
  g_fired = true;
  return static_cast<DiskFault>(g_fault.load());
}

}  // namespace pagefile
