// Fault injection at the client's end of the bus (bus/bus_faults.h).
#include "bus/bus_faults.h"

#include <atomic>

namespace pagefile::net {

namespace {

std::atomic<bool> g_armed{false};
std::atomic<int> g_fault{0};
std::atomic<uint64_t> g_nth{0};
std::atomic<uint64_t> g_seen{0};
std::atomic<int64_t> g_delay_ms{0};
std::atomic<bool> g_fired{false};

}  // namespace

void BusFaults::arm(uint64_t nth, BusFault fault, std::chrono::milliseconds delay) {
  g_armed = false;
  g_fault = static_cast<int>(fault);
  g_nth = nth;
  g_seen = 0;
  g_delay_ms = delay.count();
  g_fired = false;
  g_armed = true;
}

void BusFaults::disarm() { g_armed = false; }

bool BusFaults::fired() { return g_fired.load(); }

std::chrono::milliseconds BusFaults::delay() { return std::chrono::milliseconds(g_delay_ms.load()); }

std::optional<BusFault> BusFaults::next() {
  if (!g_armed.load(std::memory_order_relaxed)) return std::nullopt;
  if (g_seen.fetch_add(1) + 1 != g_nth.load()) return std::nullopt;
  g_fired = true;
  return static_cast<BusFault>(g_fault.load());
}

}  // namespace pagefile::net
