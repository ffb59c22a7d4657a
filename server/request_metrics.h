// A page server's requests by operation (the wire's request kinds): how
// many, their bytes in and out, the errors by code, and a histogram of
// their latency from arrival to answer (queueing included), kept without a
// lock; and the Prometheus text exposition of those and of the server's
// counters (server/server_counters.h), which `pagefiled --metrics` serves
// at GET /metrics.
//
// Thread-safety: thread-safe (atomics); record() is wait-free.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

#include "pagefile/status.h"
#include "server/page_server.h"
#include "wire/tls.h"

namespace pagefile::net {

class RequestMetrics {
 public:
  // Request kinds by their wire discriminant (wire::Request::Which).
  static constexpr size_t kKinds = 32;
  // Upper bounds of the latency buckets, in microseconds (then +Inf).
  static constexpr std::array<int64_t, 12> kBucketsUs = {50,    100,   250,    500,    1000,    2500,
                                                        5000,  10000, 25000,  100000, 1000000, 10000000};

  // One request of kind `kind` answered after `latency`, with the error
  // code `error` (its number; 0: none).
  void record(unsigned kind, std::chrono::nanoseconds latency, uint64_t bytes_in, uint64_t bytes_out,
              uint32_t error);

  // The exposition: these metrics, then `counters`' (each with its HELP
  // and TYPE lines).
  std::string prometheus(const ServerCounters& counters) const;

  // The wire's name of request kind `kind` ("read", "setSize").
  static std::string kind_name(unsigned kind);

  // A connection of a peer in `role` began or ended (the gauge of
  // connections by role).
  void connection_opened(PeerRole role) { by_role_[static_cast<size_t>(role)]++; }
  void connection_closed(PeerRole role) { by_role_[static_cast<size_t>(role)]--; }

 private:
  struct Kind {
    std::atomic<uint64_t> count{0};
    std::atomic<uint64_t> bytes_in{0};
    std::atomic<uint64_t> bytes_out{0};
    std::atomic<uint64_t> latency_ns{0};
    std::array<std::atomic<uint64_t>, kBucketsUs.size() + 1> buckets{};  // not cumulative; last: +Inf
    std::array<std::atomic<uint64_t>, 16> errors{};                      // by Status code
  };
  std::array<Kind, kKinds> kinds_;
  std::array<std::atomic<int64_t>, 4> by_role_{};  // by PeerRole's number
};

}  // namespace pagefile::net
