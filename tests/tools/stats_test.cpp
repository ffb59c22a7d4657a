// pf-replay stats: counts, sequential reads and reuse distances worked out by
// hand on small traces, and the policy simulation ranking the policy made
// for a pattern first on it (TOPs: the policy matches the access pattern).
#include "tools/pf_replay/stats.h"

#include <string>

#include <doctest/doctest.h>
#include <fmt/format.h>

namespace pf_replay {
namespace {

Trace parse(const std::string& text) {
  pagefile::Result<Trace> trace = parse_trace(text, "t.trace");
  REQUIRE(trace);
  return std::move(*trace);
}

// `passes` passes over pages [0, pages) of file f.
std::string loop_trace(int pages, int passes) {
  std::string text = "open f\n";
  for (int pass = 0; pass < passes; ++pass) {
    for (int p = 0; p < pages; ++p) text += fmt::format("read f {}\n", p);
  }
  return text + "close f\n";
}

double hit_ratio(const TraceStats& stats, const std::string& policy, uint32_t pool) {
  for (const PolicyHits& p : stats.policies) {
    if (p.policy == policy && p.pool_pages == pool) return p.hit_ratio();
  }
  FAIL("no row for ", policy, " at ", pool);
  return -1;
}

TEST_CASE("counts, pages touched, sequential reads and reuse distances of a small trace") {
  // Uses: a0 a1 a0 b0 a1 a2 (a: file a; b: file b).
  Trace trace = parse(
      "open a\nopen b 8192\n"
      "read a 0\nread a 1\nwrite a 0\nread b 0\nsync a\nread a 1\nread a 2\ntruncate a 1\nclose a\n");
  pagefile::Result<TraceStats> stats = trace_stats(trace, {}, 4);
  REQUIRE(stats);
  CHECK(stats->count(OpKind::kOpen) == 2);
  CHECK(stats->count(OpKind::kRead) == 5);
  CHECK(stats->count(OpKind::kWrite) == 1);
  CHECK(stats->count(OpKind::kSync) == 1);
  CHECK(stats->count(OpKind::kTruncate) == 1);
  CHECK(stats->count(OpKind::kClose) == 1);
  CHECK(stats->pages_touched == 4);  // a0 a1 a2 b0
  // a1 after a0, a2 after a1: the write of a0 is no read, the read of b0 another file's.
  CHECK(stats->sequential_reads == 2);
  CHECK(stats->first_uses == 4);
  // a0 again after a1 (1 distinct page between); a1 again after a0, b0 (2).
  CHECK(stats->reuse[1] == 2);  // bucket 1-3
  uint64_t reused = 0;
  for (uint64_t n : stats->reuse) reused += n;
  CHECK(reused == 2);
  std::string text = format_stats(trace, *stats, 4);
  CHECK(text.find("11 operations on 2 files") != std::string::npos);
  CHECK(text.find("pages touched      4") != std::string::npos);
}

TEST_CASE("default pool sizes: 10, 25, 50 and 90 percent of the pages touched, at least 1, none twice") {
  CHECK(default_pool_sizes(1000) == std::vector<uint32_t>{100, 250, 500, 900});
  CHECK(default_pool_sizes(4) == std::vector<uint32_t>{1, 2, 3});
  CHECK(default_pool_sizes(0) == std::vector<uint32_t>{1});
}

TEST_CASE("a loop larger than the pool: looping (MRU) hits where random (LRU) never does") {
  // 11 pages through 10 frames, 20 passes, no read-ahead: LRU evicts each
  // page just before it comes round; MRU keeps 9 or 10 of the 11 hitting.
  Trace trace = parse(loop_trace(11, 20));
  const uint32_t pools[] = {10};
  pagefile::Result<TraceStats> stats = trace_stats(trace, pools, 0);
  REQUIRE(stats);
  CHECK(hit_ratio(*stats, "random", 10) == 0.0);
  CHECK(hit_ratio(*stats, "looping", 10) > 0.75);
  // A pool holding the whole loop: everyone hits after the first pass.
  const uint32_t whole[] = {11};
  stats = trace_stats(trace, whole, 0);
  REQUIRE(stats);
  CHECK(hit_ratio(*stats, "random", 11) == doctest::Approx(19.0 / 20.0));
}

TEST_CASE("one sequential scan: only read-ahead hits, and the sequential policy reads ahead") {
  Trace trace = parse(loop_trace(400, 1));
  const uint32_t pools[] = {16};
  pagefile::Result<TraceStats> stats = trace_stats(trace, pools, 8);
  REQUIRE(stats);
  CHECK(hit_ratio(*stats, "sequential", 16) > 0.9);
  CHECK(hit_ratio(*stats, "random", 16) == 0.0);
  CHECK(stats->sequential_reads == 399);
  CHECK(stats->first_uses == 400);
}

TEST_CASE("a pool size of 0 is refused") {
  Trace trace = parse(loop_trace(3, 1));
  const uint32_t pools[] = {0};
  pagefile::Result<TraceStats> stats = trace_stats(trace, pools, 0);
  CHECK(!stats);
  CHECK(stats.status().code() == pagefile::Code::kInvalidArgument);
}

}  // namespace
}  // namespace pf_replay
