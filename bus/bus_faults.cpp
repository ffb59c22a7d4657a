// Fault injection at the client's end of the bus (bus/bus_faults.h).
#include "bus/bus_faults.h"

#include <atomic>

#include "core/fault_counter.h"

namespace pagefile::net {

namespace {

FaultCounter g_counter;
std::atomic<int> g_fault{0};
std::atomic<int64_t> g_delay_ms{0};

}  // namespace

void BusFaults::arm(uint64_t nth, BusFault fault, std::chrono::milliseconds delay) {
  g_counter.disarm();
  g_fault = static_cast<int>(fault);
  g_delay_ms = delay.count();
  g_counter.arm(nth, /*sticky=*/false);
}

void BusFaults::disarm() { g_counter.disarm(); }

bool BusFaults::fired() { return g_counter.fired(); }

std::chrono::milliseconds BusFaults::delay() { return std::chrono::milliseconds(g_delay_ms.load()); }

std::optional<BusFault> BusFaults::next() {
  if (!g_counter.armed() || !g_counter.strike()) return std::nullopt;
  return static_cast<BusFault>(g_fault.load());
}

}  // namespace pagefile::net
