#include "tools/pf_replay/stats.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "pagefile/policy.h"
#include "policies/buffer_pool.h"

namespace pf_replay {

using pagefile::Result;
using pagefile::Status;

namespace {

// Counts of marks at positions [0, n), summed over prefixes (a Fenwick
// tree): the reuse distance of a use is the number of pages whose latest use
// lies between its previous use and it.
class PrefixCounts {
 public:
  explicit PrefixCounts(size_t n) : tree_(n + 1, 0) {}
  void add(size_t at, int64_t delta) {
    for (size_t i = at + 1; i < tree_.size(); i += i & (~i + 1)) tree_[i] += delta;
  }
  // Marks at positions [0, end).
  int64_t before(size_t end) const {
    int64_t sum = 0;
    for (size_t i = end; i > 0; i -= i & (~i + 1)) sum += tree_[i];
    return sum;
  }

 private:
  std::vector<int64_t> tree_;
};

uint64_t page_key(uint32_t file, int64_t page) { return (static_cast<uint64_t>(file) << 46) | static_cast<uint64_t>(page); }

void count_uses(const Trace& trace, TraceStats& stats) {
  size_t uses = 0;
  for (const TraceOp& op : trace.ops) uses += op.kind == OpKind::kRead || op.kind == OpKind::kWrite;
  PrefixCounts latest(uses);
  std::unordered_map<uint64_t, size_t> last_use;
  std::unordered_map<uint32_t, int64_t> last_read;  // by file
  size_t t = 0;
  for (const TraceOp& op : trace.ops) {
    ++stats.ops[static_cast<int>(op.kind)];
    if (op.kind != OpKind::kRead && op.kind != OpKind::kWrite) continue;
    if (op.kind == OpKind::kRead) {
      auto previous = last_read.find(op.file);
      if (previous != last_read.end() && previous->second + 1 == op.page) ++stats.sequential_reads;
      last_read[op.file] = op.page;
    }
    auto [at, first] = last_use.try_emplace(page_key(op.file, op.page), t);
    if (first) {
      ++stats.first_uses;
    } else {
      auto distance = static_cast<uint64_t>(latest.before(t) - latest.before(at->second + 1));
      size_t bucket = std::size(TraceStats::kReuseBounds) - 1;
      while (distance < TraceStats::kReuseBounds[bucket]) --bucket;
      ++stats.reuse[bucket];
      latest.add(at->second, -1);
      at->second = t;
    }
    latest.add(t, 1);
    ++t;
  }
  stats.pages_touched = last_use.size();
}

// One policy's pool over the whole trace. Pages are 1 byte here: a policy
// sees page numbers only, so the simulation needs no page's bytes.
Result<PolicyHits> simulate(const Trace& trace, const pagefile::PolicyRegistry& policies, const std::string& name,
                            uint32_t pool_pages, uint32_t read_ahead, const std::vector<int64_t>& extent) {
  pagefile::BufferPool pool(pool_pages);
  PolicyHits result{name, pool_pages, 0, 0};
  std::byte byte{};
  std::span<std::byte> page(&byte, 1);
  // A file reopened is a new file of the pool (the client's pool drops a
  // closed file's pages).
  std::vector<uint64_t> pool_id(trace.files.size(), 0);
  uint64_t next_id = 1;
  auto take_counts = [&](uint64_t id) {
    pagefile::FileCounters c = pool.counters(id);
    result.hits += c.hits;
    result.misses += c.misses;
  };
  for (const TraceOp& op : trace.ops) {
    uint64_t id = pool_id[op.file];
    switch (op.kind) {
      case OpKind::kOpen: {
        pagefile::PolicyLimits limits;
        limits.max_pages = pool_pages;
        limits.read_ahead = read_ahead;
        auto policy = policies.make(name, limits);
        if (!policy) return policy.status();
        id = pool_id[op.file] = next_id++;
        pool.add_file(id, 1, limits, std::move(*policy));
        break;
      }
      case OpKind::kRead:
        if (!pool.read(id, op.page, page)) pool.fill(id, op.page, page);
        for (int64_t ahead : pool.read_ahead(id, op.page)) {
          if (ahead >= 0 && ahead <= extent[op.file]) pool.fill_prefetched(id, ahead, page);
        }
        break;
      case OpKind::kWrite:
        pool.write(id, op.page, page);
        break;
      case OpKind::kTruncate:
        pool.truncate(id, op.page);
        break;
      case OpKind::kClose:
        take_counts(id);
        pool.remove_file(id);
        pool_id[op.file] = 0;
        break;
      case OpKind::kSync:
      case OpKind::kUnlink:  // of a file not open: nothing of it is in the pool
        break;
    }
  }
  for (uint64_t id : pool_id) {
    if (id != 0) take_counts(id);
  }
  return result;
}

std::string percent(uint64_t part, uint64_t whole) {
  return whole == 0 ? std::string("-") : fmt::format("{:.1f}%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
}

}  // namespace

double PolicyHits::hit_ratio() const {
  uint64_t reads = hits + misses;
  return reads == 0 ? 0.0 : static_cast<double>(hits) / static_cast<double>(reads);
}

std::vector<uint32_t> default_pool_sizes(uint64_t pages_touched) {
  std::vector<uint32_t> sizes;
  for (uint64_t percent : {10, 25, 50, 90}) {
    uint64_t pages = std::max<uint64_t>(1, pages_touched * percent / 100);
    auto size = static_cast<uint32_t>(std::min<uint64_t>(pages, UINT32_MAX));
    if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
  }
  return sizes;
}

Result<TraceStats> trace_stats(const Trace& trace, std::span<const uint32_t> pool_pages, uint32_t read_ahead) {
  TraceStats stats;
  count_uses(trace, stats);
  std::vector<uint32_t> sizes(pool_pages.begin(), pool_pages.end());
  if (sizes.empty()) sizes = default_pool_sizes(stats.pages_touched);
  for (uint32_t size : sizes) {
    if (size == 0) return Status::invalid_argument("pool size", "must be at least 1 page");
  }
  // The highest page the trace uses in each file: read-ahead stops there,
  // as a store answers nothing past a file's end.
  std::vector<int64_t> extent(trace.files.size(), -1);
  for (const TraceOp& op : trace.ops) {
    if (op.kind == OpKind::kRead || op.kind == OpKind::kWrite) extent[op.file] = std::max(extent[op.file], op.page);
  }
  auto policies = pagefile::PolicyRegistry::with_builtins();
  for (const std::string& name : policies->names()) {
    for (uint32_t size : sizes) {
      auto hits = simulate(trace, *policies, name, size, read_ahead, extent);
      if (!hits) return hits.status();
      stats.policies.push_back(std::move(*hits));
    }
  }
  return stats;
}

std::string format_stats(const Trace& trace, const TraceStats& stats, uint32_t read_ahead) {
  uint64_t reads = stats.count(OpKind::kRead);
  uint64_t writes = stats.count(OpKind::kWrite);
  std::string out = fmt::format("trace {}: {} operations on {} file{}\n", trace.source, trace.ops.size(),
                                trace.files.size(), trace.files.size() == 1 ? "" : "s");
  out += fmt::format("  open {}  read {}  write {}  sync {}  truncate {}  close {}  unlink {}\n",
                     stats.count(OpKind::kOpen), reads, writes, stats.count(OpKind::kSync),
                     stats.count(OpKind::kTruncate), stats.count(OpKind::kClose), stats.count(OpKind::kUnlink));
  out += fmt::format("  reads / writes     {} / {}\n", percent(reads, reads + writes), percent(writes, reads + writes));
  out += fmt::format("  pages touched      {}\n", stats.pages_touched);
  out += fmt::format("  sequential reads   {} ({} of {} read the page after the file's previous read)\n",
                     percent(stats.sequential_reads, reads), stats.sequential_reads, reads);
  out += "reuse distance (distinct pages used between two uses of a page)\n";
  out += fmt::format("  {:<12} {}\n", "first use", stats.first_uses);
  constexpr size_t kBuckets = std::size(TraceStats::kReuseBounds);
  for (size_t i = 0; i < kBuckets; ++i) {
    uint64_t low = TraceStats::kReuseBounds[i];
    std::string range = i + 1 == kBuckets ? fmt::format("{}+", low)
                        : TraceStats::kReuseBounds[i + 1] == low + 1
                            ? fmt::format("{}", low)
                            : fmt::format("{}-{}", low, TraceStats::kReuseBounds[i + 1] - 1);
    out += fmt::format("  {:<12} {}\n", range, stats.reuse[i]);
  }
  // One row per policy, one column per pool size.
  std::vector<uint32_t> sizes;
  std::map<std::string, std::map<uint32_t, double>> table;
  for (const PolicyHits& p : stats.policies) {
    if (std::find(sizes.begin(), sizes.end(), p.pool_pages) == sizes.end()) sizes.push_back(p.pool_pages);
    table[p.policy][p.pool_pages] = p.hit_ratio();
  }
  out += fmt::format("read hit ratio by pool size in pages (simulated; read-ahead {} pages)\n", read_ahead);
  out += fmt::format("  {:<18}", "policy");
  for (uint32_t size : sizes) out += fmt::format(" {:>8}", size);
  out += "\n";
  for (const auto& [policy, by_size] : table) {
    out += fmt::format("  {:<18}", policy);
    for (uint32_t size : sizes) out += fmt::format(" {:>8.3f}", by_size.at(size));
    out += "\n";
  }
  return out;
}

Status write_stats_csv(const std::string& path, const TraceStats& stats) {
  std::string text = "policy,pool_pages,hit_ratio\n";
  for (const PolicyHits& p : stats.policies) text += fmt::format("{},{},{:.6f}\n", p.policy, p.pool_pages, p.hit_ratio());
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (out == nullptr) return Status::io_error(path, std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  const bool closed = std::fclose(out) == 0;
  if (!wrote || !closed) return Status::io_error(path, "cannot write the CSV");
  return Status::ok();
}

}  // namespace pf_replay
