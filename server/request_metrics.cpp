#include "server/request_metrics.h"

#include <capnp/schema.h>
#include <fmt/format.h>

#include "wire/pagefile.capnp.h"

namespace pagefile::net {

std::string RequestMetrics::kind_name(unsigned kind) {
  static const std::array<std::string, RequestMetrics::kKinds> names = [] {
    std::array<std::string, RequestMetrics::kKinds> out;
    for (auto field : capnp::Schema::from<wire::Request>().getUnionFields()) {
      unsigned which = field.getProto().getDiscriminantValue();
      if (which < out.size()) out[which] = field.getProto().getName().cStr();
    }
    return out;
  }();
  return kind < names.size() ? names[kind] : std::string();
}

void RequestMetrics::record(unsigned kind, std::chrono::nanoseconds latency, uint64_t bytes_in, uint64_t bytes_out,
                            uint32_t error) {
  if (kind >= kKinds) return;
  Kind& k = kinds_[kind];
  k.count.fetch_add(1, std::memory_order_relaxed);
  k.bytes_in.fetch_add(bytes_in, std::memory_order_relaxed);
  k.bytes_out.fetch_add(bytes_out, std::memory_order_relaxed);
  const int64_t ns = std::max<int64_t>(0, latency.count());
  k.latency_ns.fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  size_t bucket = 0;
  while (bucket < kBucketsUs.size() && ns > kBucketsUs[bucket] * 1000) ++bucket;
  k.buckets[bucket].fetch_add(1, std::memory_order_relaxed);
  if (error != 0 && error < k.errors.size()) k.errors[error].fetch_add(1, std::memory_order_relaxed);
}

std::string RequestMetrics::prometheus(const ServerCounters& c) const {
  std::string out;
  auto header = [&](std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  auto per_kind = [&](std::string_view name, std::string_view help, auto value) {
    header(name, "counter", help);
    for (unsigned kind = 0; kind < kKinds; ++kind) {
      if (kinds_[kind].count.load() == 0) continue;
      out += fmt::format("{}{{op=\"{}\"}} {}\n", name, kind_name(kind), value(kinds_[kind]));
    }
  };
  per_kind("pagefile_requests_total", "Requests answered, by operation.", [](const Kind& k) { return k.count.load(); });
  per_kind("pagefile_request_bytes_in_total", "Bytes of requests, by operation.",
           [](const Kind& k) { return k.bytes_in.load(); });
  per_kind("pagefile_request_bytes_out_total", "Bytes of answers, by operation.",
           [](const Kind& k) { return k.bytes_out.load(); });

  header("pagefile_request_errors_total", "counter",
         "Requests answered with an error, by operation and code (Stale: fencing or incarnation refusals; "
         "Corruption: checksum failures; IOError, NoSpace: the disk).");
  for (unsigned kind = 0; kind < kKinds; ++kind) {
    for (size_t code = 0; code < kinds_[kind].errors.size(); ++code) {
      uint64_t n = kinds_[kind].errors[code].load();
      if (n == 0) continue;
      auto known = error_code_from_number(static_cast<uint32_t>(code));
      out += fmt::format("pagefile_request_errors_total{{op=\"{}\",code=\"{}\"}} {}\n", kind_name(kind),
                         known ? code_name(*known) : std::string_view("Unknown"), n);
    }
  }

  header("pagefile_request_seconds", "histogram", "Time from a request's arrival to its answer, by operation.");
  for (unsigned kind = 0; kind < kKinds; ++kind) {
    const Kind& k = kinds_[kind];
    if (k.count.load() == 0) continue;
    const std::string op = kind_name(kind);
    uint64_t cumulative = 0;
    for (size_t b = 0; b < kBucketsUs.size(); ++b) {
      cumulative += k.buckets[b].load();
      out += fmt::format("pagefile_request_seconds_bucket{{op=\"{}\",le=\"{}\"}} {}\n", op,
                         static_cast<double>(kBucketsUs[b]) / 1e6, cumulative);
    }
    cumulative += k.buckets[kBucketsUs.size()].load();
    out += fmt::format("pagefile_request_seconds_bucket{{op=\"{}\",le=\"+Inf\"}} {}\n", op, cumulative);
    out += fmt::format("pagefile_request_seconds_sum{{op=\"{}\"}} {}\n", op, static_cast<double>(k.latency_ns.load()) / 1e9);
    out += fmt::format("pagefile_request_seconds_count{{op=\"{}\"}} {}\n", op, cumulative);
  }

  auto one = [&](std::string_view name, std::string_view type, std::string_view help, uint64_t value) {
    header(name, type, help);
    out += fmt::format("{} {}\n", name, value);
  };
  one("pagefile_pages_read_total", "counter", "Pages read for clients.", c.pages_read);
  one("pagefile_pages_written_total", "counter", "Pages written for clients.", c.pages_written);
  one("pagefile_cache_hits_total", "counter", "Page reads answered from the server's pool.", c.cache_hits);
  one("pagefile_cache_misses_total", "counter", "Page reads that went to the disk.", c.cache_misses);
  one("pagefile_disk_reads_total", "counter", "Reads of the disk.", c.disk_reads);
  one("pagefile_disk_writes_total", "counter", "Writes to the disk.", c.disk_writes);
  one("pagefile_syncs_total", "counter", "Syncs made durable.", c.syncs);
  one("pagefile_repairs_total", "counter", "Damaged copies rewritten from a good one.", c.repairs);
  one("pagefile_lease_expiries_total", "counter",
      "Clients' leases that ran out at this server's catalog (their locks dropped, a writer's fenced).",
      c.lease_expiries);
  one("pagefile_bytes_in_total", "counter", "Bytes received.", c.bytes_in);
  one("pagefile_bytes_out_total", "counter", "Bytes sent.", c.bytes_out);
  one("pagefile_errors_total", "counter", "Requests answered with an error, all operations.", c.errors);
  one("pagefile_connections", "gauge", "Connections open now.", c.connections);
  header("pagefile_connections_by_role", "gauge",
         "Connections open now, by the role their peer proved (tcp://, unix: and inproc: peers are admins).");
  for (PeerRole role : {PeerRole::kReader, PeerRole::kWriter, PeerRole::kAdmin}) {
    out += fmt::format("pagefile_connections_by_role{{role=\"{}\"}} {}\n", role_name(role),
                       by_role_[static_cast<size_t>(role)].load());
  }
  one("pagefile_cache_pages", "gauge", "Pages in the server's pool now.", c.cache_pages);
  one("pagefile_unconfirmed_write_bytes", "gauge",
      "Bytes of writes received and not yet answered (the write queue's depth).", c.unconfirmed_write_bytes);
  return out;
}

}  // namespace pagefile::net
