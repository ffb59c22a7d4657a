// Fault injection at the disk (store/disk_faults.h).
#include "store/disk_faults.h"

#include <atomic>

#include "core/fault_counter.h"

namespace pagefile {

namespace {

FaultCounter g_counter;
std::atomic<int> g_op{0};
std::atomic<int> g_fault{0};

}  // namespace

void DiskFaults::arm(DiskOp op, uint64_t nth, DiskFault fault, bool sticky) {
  g_counter.disarm();
  g_op = static_cast<int>(op);
  g_fault = static_cast<int>(fault);
  g_counter.arm(nth, sticky);
}

void DiskFaults::disarm() { g_counter.disarm(); }

bool DiskFaults::fired() { return g_counter.fired(); }

uint64_t DiskFaults::seen() { return g_counter.seen(); }

std::optional<DiskFault> DiskFaults::next(DiskOp op) {
  if (!g_counter.armed() || g_op.load() != static_cast<int>(op) || !g_counter.strike()) return std::nullopt;
  return static_cast<DiskFault>(g_fault.load());
}

}  // namespace pagefile
