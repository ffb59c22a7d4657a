// pf-replay stats: what a trace asks of the store, and what each built-in
// buffer policy would make of its reads: a simulation over the trace, run
// through the client's own BufferPool and policies (policies/), that opens
// no file and reads nothing. This is how a user picks a file's policy.
//
//   operations       by kind, and the read/write mix
//   pages touched    distinct (file, page) pairs read or written
//   sequential       reads of the page right after the file's previous read
//   reuse distance   for each use of a page after its first, the number of
//                    distinct pages used since its previous use (the LRU
//                    stack distance: a pool of more pages than that hits it
//                    under LRU), in power-of-four buckets
//   hit ratio        for each policy and pool size, hits / (hits + misses)
//                    of the reads, with the policy's read-ahead (at most
//                    `read_ahead` pages, never past the highest page the
//                    trace uses in the file)
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "pagefile/status.h"
#include "tools/pf_replay/trace.h"

namespace pf_replay {

struct PolicyHits {
  std::string policy;
  uint32_t pool_pages = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  // hits / (hits + misses); 0 for a trace without reads.
  double hit_ratio() const;
};

struct TraceStats {
  uint64_t ops[kOpKinds] = {};  // by OpKind
  uint64_t pages_touched = 0;
  uint64_t sequential_reads = 0;
  // Reuse distances: reuse[i] counts uses at a distance in
  // [kReuseBounds[i], kReuseBounds[i + 1]); the last bucket is unbounded.
  static constexpr uint64_t kReuseBounds[] = {0, 1, 4, 16, 64, 256, 1024, 4096};
  uint64_t reuse[std::size(kReuseBounds)] = {};
  uint64_t first_uses = 0;  // uses with no earlier one (pages_touched of them)
  std::vector<PolicyHits> policies;  // by policy name, then pool size

  uint64_t count(OpKind kind) const { return ops[static_cast<int>(kind)]; }
};

// Pool sizes to simulate when none are given: 10%, 25%, 50% and 90% of the
// pages touched (at least 1 page each, no size twice).
std::vector<uint32_t> default_pool_sizes(uint64_t pages_touched);

// The statistics of `trace`, simulating every built-in policy at each of
// `pool_pages` (empty: default_pool_sizes) with `read_ahead` pages of
// read-ahead at most (the file's concurrency level in a replay).
// kInvalidArgument for a pool size of 0.
pagefile::Result<TraceStats> trace_stats(const Trace& trace, std::span<const uint32_t> pool_pages,
                                         uint32_t read_ahead);

// The report pf-replay stats prints.
std::string format_stats(const Trace& trace, const TraceStats& stats, uint32_t read_ahead);

// Writes the hit ratios as CSV, header "policy,pool_pages,hit_ratio", one row
// per policy and pool size (replacing the file).
pagefile::Status write_stats_csv(const std::string& path, const TraceStats& stats);

}  // namespace pf_replay
