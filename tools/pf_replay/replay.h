// Replays a parsed trace against local or remote Pagefiles, times it, and
// checks every page it reads.
//
// Pipelining. The driver issues read_request / write_request in trace order
// and keeps up to `concurrency` tickets outstanding in a FIFO: when that many
// are outstanding it confirms the oldest before issuing the next. sync,
// truncate and close first confirm every outstanding ticket of their file.
// The same number is the client's concurrency level, so at concurrency 1 the
// replay is strictly one page at a time and at 12 up to twelve requests
// overlap, which is the experiment of the Pagefile paper's section 5.
//
// Verification. Every page written carries a stamp (page_stamp.h) with the
// file name, page number and a version: version_base + the write's number in
// the trace (1, 2, ...). Versions are assigned in trace order, so a replay is
// deterministic whatever the concurrency, and with the default base (the
// Unix time in nanoseconds at start) they are unique across runs: a run of W
// writes takes far longer than W nanoseconds. Each read is checked against
// what the trace implies when the read is issued:
//   - a page this run wrote: its stamp with the last version written before
//     the read was issued;
//   - a page this run truncated away (and has not written since): zeros,
//     or beyond the end;
//   - any other page: zeros (never written), beyond the end, or a stamp of
//     this file and page number of any version (an earlier run's write).
// A page that fails its check is a mismatch: reported with the file, page,
// trace line and what differs, and counted. (read_check.h holds the
// expectations and the check.)
//
// Errors. Any error of the Pagefile API is reported with the trace line and
// counted, and the replay goes on; a file whose open failed has its
// operations skipped (counted) until the trace opens it again.
//
// Thread-safety: replay_trace runs on the calling thread only (the client's
// I/O threads are the concurrency); distinct calls share nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "pagefile/options.h"
#include "pagefile/status.h"
#include "tools/pf_replay/trace.h"

namespace pf_replay {

// The order in which the driver issues the trace's operations.
enum class Schedule : uint8_t {
  kTrace,     // exactly the trace's order (the paper's experiment)
  kBalanced,  // a run of reads of one file in the order that keeps the file's
              // servers evenly busy (Client::server_of); all else in trace order
};

// How the remote files the replay creates are laid out: OpenOptions's
// placement, stripe_pages and replicas (an existing file keeps its own).
struct RemoteLayout {
  pagefile::Placement placement = pagefile::Placement::kStripe;
  uint32_t stripe_pages = 1;
  uint32_t replicas = 0;  // 0: the bus's
};

struct ReplayOptions {
  // ClientOptions::local_dir: where the trace's file names are resolved
  // (local files only).
  std::filesystem::path dir = ".";
  bool dir_given = false;  // --dir was given (a captured trace needs one)
  // Where every file of the trace is opened. kRemote: on the page servers of
  // `bus` (ClientOptions::bus; empty means $PAGEFILE_BUS, else the embedded
  // default), with the trace's names as catalog names.
  pagefile::Location location = pagefile::Location::kLocal;
  std::string bus;
  RemoteLayout layout;  // remote files only
  // OpenOptions::checksums (--checksums off: to measure their cost).
  bool checksums = true;
  // Tickets the driver keeps outstanding, and the client's concurrency level.
  uint32_t concurrency = 1;
  // When non-zero, the client's concurrency level instead (requests in
  // flight per file, the pool's read-ahead included): an application that
  // waits for each read, as SQLite does, and lets the client read ahead is
  // --concurrency 1 --window N.
  uint32_t window = 0;
  Schedule schedule = Schedule::kTrace;
  // Issue each operation that carries a timestamp (@MICROS) no earlier
  // than that long after the replay began, as it was captured; false: as
  // fast as the window allows (the timestamps are ignored).
  bool pace_captured = false;
  // When non-zero, the page size of every open instead of the trace's.
  uint32_t page_size = 0;
  // When set, the buffer policy (a registered name: random, sequential,
  // looping, global-sequential) of every open instead of the trace's.
  std::string policy;
  // ClientOptions::cache_pages: the client's buffer pool, 0 for none.
  uint32_t cache_pages = 0;
  // The version of the trace's first write is version_base + 1. 0 means the
  // Unix time in nanoseconds when the replay starts; set it to make two
  // replays write the same bytes.
  uint64_t version_base = 0;
  // Show a progress line on standard error when it is a terminal.
  bool show_progress = true;
  // Where errors and mismatches are reported, one a line.
  std::FILE* report = stderr;
  // Errors and mismatches beyond this many (each) are counted, not printed.
  int64_t max_reports = 20;
};

struct ReplayStats {
  int64_t ops = 0;  // trace operations replayed, skipped ones included
  int64_t reads = 0;
  int64_t writes = 0;
  int64_t syncs = 0;
  int64_t truncates = 0;
  int64_t bytes = 0;     // bytes of the pages read and written
  int64_t errors = 0;    // Pagefile API errors
  int64_t mismatches = 0;
  int64_t skipped = 0;   // operations of a file whose open failed
  // What the reads that passed their check found: a stamped page, a page of
  // zeros, or the end of the file. A replay that reads back an earlier run's
  // pages expects stamps; zeros there mean the pages were lost.
  int64_t reads_stamped = 0;
  int64_t reads_zero = 0;
  int64_t reads_beyond_end = 0;
  // A captured trace's reads (trace data): of pages this run wrote, found
  // as written; of pages it did not write, not checkable (the application's).
  int64_t reads_written = 0;
  int64_t reads_unchecked = 0;
  int64_t unlinks = 0;
  double seconds = 0.0;  // the whole replay, steady_clock
  uint32_t concurrency = 0;
  uint32_t window = 0;  // ReplayOptions::window, when given
  // The page size of the files opened; 0 when none was opened, and
  // `mixed_page_sizes` when they differed.
  uint32_t page_size = 0;
  bool mixed_page_sizes = false;
  uint64_t version_base = 0;
  int64_t started_unix_ns = 0;  // wall-clock start, for the CSV
  // From the options, for the summary and the CSV.
  pagefile::Location location = pagefile::Location::kLocal;
  std::string bus;
  RemoteLayout layout;
  // The policy the files ran ("mixed" when they differed, empty when none
  // was opened) and what the client's pool did for them, summed over every
  // descriptor at its close (Client::counters).
  std::string policy;
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t prefetch_used = 0;
  uint64_t prefetch_wasted = 0;

  int64_t pages() const { return reads + writes; }
};

// Replays `trace` (see the header comment). Returns the statistics, with
// errors and mismatches counted in them; fails only when the replay cannot
// begin: kInvalidArgument for a concurrency or stripe_pages of 0, or the
// error of starting the client. (A remote bus is started by the first open,
// so a bus that cannot be reached shows as errors of the opens.)
pagefile::Result<ReplayStats> replay_trace(const Trace& trace, const ReplayOptions& options);

// A few lines for a person: what ran, how fast, what went wrong.
std::string format_summary(const Trace& trace, const ReplayStats& stats);

// The CSV header line (no newline); the first eight columns are
// ops,pages,seconds,ms_per_page,pages_per_s,mb_per_s,concurrency,page_size;
// the columns are defined in doc/trace_format.md.
std::string csv_header();
// One CSV row (no newline) for a replay of the trace at `trace_path`.
std::string csv_row(const ReplayStats& stats, std::string_view trace_path);

// Whether the file at `path` needs the header written: true when it is
// missing or empty, false when it starts with csv_header(). kInvalidArgument
// when it starts with another header (its rows would not line up; the
// message says so when it is the header of an older pf-replay), else the
// error of the file system. Lets a caller refuse a bad --csv before a run.
pagefile::Result<bool> check_csv(const std::filesystem::path& path);

// Appends csv_row to the file at `path`, writing csv_header first when the
// file is new or empty. kInvalidArgument when the file already starts with
// another header (its rows would not line up), else the error of the file
// system.
pagefile::Status append_csv(const std::filesystem::path& path, const ReplayStats& stats,
                            std::string_view trace_path);

}  // namespace pf_replay
