// A page server's running counts, bumped by every thread that serves it
// (sessions, page work, direct calls) without a lock, and read as one
// ServerCounters snapshot (server/page_server.h).
#pragma once

#include <atomic>
#include <cstdint>

#include "server/page_server.h"

namespace pagefile::net {

// Every count a server keeps, as (field of ServerCounters, its name in
// wire::ServerStats): one list, so the tally, its snapshot and the STATS
// answer cannot drift apart.
#define PAGEFILE_SERVER_TALLY(X)                                                               \
  X(requests, Requests) X(pages_read, PagesRead) X(pages_written, PagesWritten)              \
  X(cache_hits, CacheHits) X(cache_misses, CacheMisses) X(disk_reads, DiskReads)             \
  X(disk_writes, DiskWrites) X(syncs, Syncs) X(bytes_in, BytesIn) X(bytes_out, BytesOut)     \
  X(connections, Connections) X(errors, Errors) X(unconfirmed_write_bytes, UnconfirmedWriteBytes)     \
  X(repairs, Repairs)

struct ServerTally {
#define PAGEFILE_TALLY_FIELD(field, wire_name) std::atomic<decltype(ServerCounters::field)> field{0};
  PAGEFILE_SERVER_TALLY(PAGEFILE_TALLY_FIELD)
#undef PAGEFILE_TALLY_FIELD
  std::atomic<uint64_t> peak_unconfirmed_write_bytes{0};

  // Adds `bytes` to the unconfirmed writes and keeps the peak; returns the
  // new total.
  uint64_t hold_write_bytes(uint64_t bytes) {
    uint64_t held = unconfirmed_write_bytes += bytes;
    uint64_t peak = peak_unconfirmed_write_bytes;
    while (held > peak && !peak_unconfirmed_write_bytes.compare_exchange_weak(peak, held)) {
    }
    return held;
  }

  // Every count but the pool's size (the caller fills cache_pages).
  ServerCounters snapshot() const {
    ServerCounters out;
#define PAGEFILE_TALLY_READ(field, wire_name) out.field = field;
    PAGEFILE_SERVER_TALLY(PAGEFILE_TALLY_READ)
#undef PAGEFILE_TALLY_READ
    out.peak_unconfirmed_write_bytes = peak_unconfirmed_write_bytes;
    return out;
  }
};

}  // namespace pagefile::net
