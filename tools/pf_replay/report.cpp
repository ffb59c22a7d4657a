// pf-replay's reports: the summary a person reads and the CSV rows a script
// reads (doc/trace_format.md), made from a run's ReplayStats.
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "tools/pf_replay/replay.h"

namespace pf_replay {

using pagefile::Result;
using pagefile::Status;

namespace {

std::string utc_time(int64_t unix_ns) {
  const std::time_t seconds = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// RFC 4180: a field with a comma, quote or line break is quoted, its quotes
// doubled.
std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

// Figures that need a divisor are left empty rather than made up when the
// divisor is zero.
std::string ratio(double numerator, double denominator, int decimals) {
  if (denominator <= 0.0) return {};
  return fmt::format("{:.{}f}", numerator / denominator, decimals);
}

// The CSV's `bus`: the --bus value with its addresses separated by spaces
// (still a valid bus, bus_config.h), so the field needs no quoting and the
// columns split on commas.
std::string bus_text(const ReplayStats& stats) {
  std::string text = stats.bus;
  std::replace(text.begin(), text.end(), ',', ' ');
  return text;
}

// "stripe" or "hash", with ":N" when the placement unit is N > 1 pages and
// "+rR" when --replicas asked for R copies; empty for local files.
std::string placement_text(const ReplayStats& stats) {
  if (stats.location != pagefile::Location::kRemote) return {};
  const RemoteLayout& layout = stats.layout;
  std::string text(pagefile::placement_name(layout.placement));
  if (layout.stripe_pages != 1) text += fmt::format(":{}", layout.stripe_pages);
  if (layout.replicas != 0) text += fmt::format("+r{}", layout.replicas);
  return text;
}

// The columns of older pf-replays, and what they lacked.
constexpr std::string_view kColumnsBeforeBus =
    "ops,pages,seconds,ms_per_page,pages_per_s,mb_per_s,concurrency,page_size,"
    "reads,writes,syncs,truncates,errors,mismatches,skipped,location,trace,started_utc,"
    "version_base";
constexpr std::string_view kColumnsBeforePolicy =
    "ops,pages,seconds,ms_per_page,pages_per_s,mb_per_s,concurrency,page_size,"
    "reads,writes,syncs,truncates,errors,mismatches,skipped,location,trace,started_utc,"
    "version_base,bus,placement";

}  // namespace

std::string format_summary(const Trace& trace, const ReplayStats& stats) {
  const double pages = static_cast<double>(stats.pages());
  std::string page_size = stats.mixed_page_sizes ? "mixed" : fmt::format("{}", stats.page_size);
  std::string where;
  if (stats.location == pagefile::Location::kRemote) {
    where = fmt::format(", remote (bus {}, {})", stats.bus.empty() ? "default" : stats.bus,
                        placement_text(stats));
  }
  std::string out = fmt::format(
      "{}: {} ops in {:.3f} s at concurrency {}{}, page size {}{}\n", trace.source, stats.ops, stats.seconds,
      stats.concurrency, stats.window != 0 ? fmt::format(" (window {})", stats.window) : "", page_size, where);
  out += fmt::format("  {} pages ({} reads, {} writes), {} syncs, {} truncates{}\n", stats.pages(), stats.reads,
                     stats.writes, stats.syncs, stats.truncates,
                     stats.unlinks > 0 ? fmt::format(", {} unlinks", stats.unlinks) : "");
  if (stats.pages() > 0 && stats.seconds > 0.0) {
    out += fmt::format("  {:.4f} ms/page, {:.0f} pages/s, {:.2f} MB/s\n",
                       stats.seconds * 1000.0 / pages, pages / stats.seconds,
                       static_cast<double>(stats.bytes) / 1e6 / stats.seconds);
  }
  if (stats.reads > 0) {
    out += fmt::format("  reads found {} stamped pages, {} zero pages, {} beyond the end\n",
                       stats.reads_stamped, stats.reads_zero, stats.reads_beyond_end);
  }
  if (stats.reads_written + stats.reads_unchecked > 0) {
    out += fmt::format("  reads of the trace's data: {} pages as this run wrote them, {} not written by it (unchecked)\n",
                       stats.reads_written, stats.reads_unchecked);
  }
  out += fmt::format("  {} mismatches, {} errors, {} skipped", stats.mismatches, stats.errors,
                     stats.skipped);
  if (stats.writes > 0) out += fmt::format("; versions after {}", stats.version_base);
  out += "\n";
  return out;
}

std::string csv_header() {
  return "ops,pages,seconds,ms_per_page,pages_per_s,mb_per_s,concurrency,page_size,"
         "reads,writes,syncs,truncates,errors,mismatches,skipped,location,trace,started_utc,"
         "version_base,bus,placement,policy,hits,misses,prefetch_used,prefetch_wasted";
}

std::string csv_row(const ReplayStats& stats, std::string_view trace_path) {
  const double pages = static_cast<double>(stats.pages());
  return fmt::format(
      "{},{},{:.6f},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}", stats.ops,
      stats.pages(), stats.seconds, ratio(stats.seconds * 1000.0, pages, 6),
      ratio(pages, stats.seconds, 1),
      ratio(static_cast<double>(stats.bytes) / 1e6, stats.seconds, 3), stats.concurrency,
      stats.mixed_page_sizes ? std::string("mixed") : fmt::format("{}", stats.page_size),
      stats.reads, stats.writes, stats.syncs, stats.truncates, stats.errors, stats.mismatches,
      stats.skipped, pagefile::location_name(stats.location), csv_field(trace_path),
      utc_time(stats.started_unix_ns), stats.version_base, csv_field(bus_text(stats)),
      placement_text(stats), csv_field(stats.policy), stats.hits, stats.misses, stats.prefetch_used,
      stats.prefetch_wasted);
}

Result<bool> check_csv(const std::filesystem::path& path) {
  std::FILE* existing = std::fopen(path.c_str(), "rb");
  if (existing == nullptr) {
    if (errno == ENOENT) return true;
    return Status::io_error(path.string(), std::strerror(errno));
  }
  std::string first_line;
  int c;
  while ((c = std::fgetc(existing)) != EOF && c != '\n') first_line += static_cast<char>(c);
  std::fclose(existing);
  if (first_line.empty() && c == EOF) return true;
  if (!first_line.empty() && first_line.back() == '\r') first_line.pop_back();
  for (auto [old, lacking] : {std::pair{kColumnsBeforeBus, "bus,placement"},
                              std::pair{kColumnsBeforePolicy, "policy,hits,misses,..."}}) {
    if (first_line == old) {
      return Status::invalid_argument(
          path.string(), fmt::format("has the columns of an older pf-replay (without {}); give "
                                     "another --csv file", lacking));
    }
  }
  if (first_line != csv_header()) {
    return Status::invalid_argument(
        path.string(), "has other columns than pf-replay writes; give another --csv file");
  }
  return false;
}

Status append_csv(const std::filesystem::path& path, const ReplayStats& stats,
                  std::string_view trace_path) {
  Result<bool> need_header = check_csv(path);
  if (!need_header) return need_header.status();
  std::string text = *need_header ? csv_header() + "\n" : std::string();
  text += csv_row(stats, trace_path) + "\n";
  std::FILE* out = std::fopen(path.c_str(), "ab");
  if (out == nullptr) return Status::io_error(path.string(), std::strerror(errno));
  const bool wrote = std::fwrite(text.data(), 1, text.size(), out) == text.size();
  const bool closed = std::fclose(out) == 0;
  if (!wrote || !closed) return Status::io_error(path.string(), "cannot append the CSV row");
  return Status::ok();
}

}  // namespace pf_replay
