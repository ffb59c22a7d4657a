#include "tools/pf_replay/replay.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include "core/os_error.h"
#include "core/page_checksum.h"
#include "pagefile/options.h"
#include "pagefile/pagefile.h"
#include "tools/common/progress.h"
#include "tools/pf_replay/page_stamp.h"
#include "tools/pf_replay/read_check.h"

namespace pf_replay {

namespace {

using pagefile::Result;
using pagefile::Status;

struct ReplayFile {
  std::optional<pagefile::Fd> fd;
  uint32_t page_size = 0;
  // The line of the open that failed, while its operations are skipped.
  uint32_t failed_open_line = 0;
  PageHistory history;
};

// One ticket the driver has not confirmed yet.
struct Pending {
  pagefile::Ticket ticket;
  OpKind kind = OpKind::kRead;
  uint32_t file = 0;
  uint32_t line = 0;
  int64_t page = 0;
  Expectation expect;      // reads
  uint64_t version = 0;    // writes
  size_t buffer = 0;       // reads: index into Replayer::read_buffers_
  std::optional<uint32_t> server;  // Schedule::kBalanced: counted in server_load_
};

class Replayer {
 public:
  Replayer(const Trace& trace, const ReplayOptions& options, pagefile::Client& client,
           ReplayStats& stats)
      : trace_(trace),
        options_(options),
        client_(client),
        stats_(stats),
        files_(trace.files.size()),
        progress_(stderr, "pf-replay", options.show_progress && isatty(fileno(stderr)) == 1,
                  static_cast<int64_t>(trace.ops.size()), "ops") {}

  void run() {
    if (!trace_.data_path.empty()) {
      data_ = ::open(trace_.data_path.c_str(), O_RDONLY | O_CLOEXEC);
      if (data_ < 0) report_error(0, "the trace's data", pagefile::errno_status(errno, trace_.data_path, "open"));
    }
    // Paced from the first timestamp: the time before it is not the trace's.
    const auto began = std::chrono::steady_clock::now();
    int64_t first_micros = -1;
    for (size_t i = 0; i < trace_.ops.size(); ++i) {
      const TraceOp& op = trace_.ops[i];
      ReplayFile& file = files_[op.file];
      if (options_.pace_captured && op.micros >= 0) {
        if (first_micros < 0) first_micros = op.micros;
        std::this_thread::sleep_until(began + std::chrono::microseconds(op.micros - first_micros));
      }
      if (options_.schedule == Schedule::kBalanced && op.kind == OpKind::kRead && file.fd &&
          file.failed_open_line == 0) {
        i = issue_reads_balanced(i) - 1;
        continue;
      }
      ++stats_.ops;
      if (op.kind == OpKind::kOpen) {
        file.failed_open_line = 0;
        open(op, file);
      } else if (file.failed_open_line != 0) {
        skip(op, file);
      } else {
        switch (op.kind) {
          case OpKind::kRead: issue_read(op, file); break;
          case OpKind::kWrite: issue_write(op, file); break;
          case OpKind::kSync: sync(op, file); break;
          case OpKind::kTruncate: truncate(op, file); break;
          case OpKind::kClose: close(op, file); break;
          case OpKind::kUnlink: unlink(op, file); break;
          case OpKind::kOpen: break;
        }
      }
      check_confirmed();
      progress_.update(stats_.ops);
    }
    // The trace may leave files open; closing them is part of the run, since
    // it waits for their last requests.
    while (!pending_.empty()) confirm_front();
    check_confirmed();
    for (uint32_t i = 0; i < files_.size(); ++i) {
      if (!files_[i].fd) continue;
      count_pool(*files_[i].fd);
      Status s = client_.close(*files_[i].fd);
      files_[i].fd.reset();
      if (!s) report_error(0, fmt::format("close {} (at the end of the trace)", name(i)), s);
    }
    if (data_ >= 0) ::close(data_);
    progress_.clear();
    if (stats_.errors > options_.max_reports) {
      fmt::print(options_.report, "pf-replay: {} more errors not shown\n",
                 stats_.errors - options_.max_reports);
    }
    if (stats_.mismatches > options_.max_reports) {
      fmt::print(options_.report, "pf-replay: {} more mismatches not shown\n",
                 stats_.mismatches - options_.max_reports);
    }
  }

 private:
  const std::string& name(uint32_t file) const { return trace_.files[file]; }

  std::string where(uint32_t line) const {
    if (line == 0) return trace_.source;
    return fmt::format("{}:{}", trace_.source, line);
  }

  void report_error(uint32_t line, std::string_view what, const Status& status) {
    ++stats_.errors;
    if (stats_.errors > options_.max_reports) return;
    progress_.clear();  // the report gets a line of its own
    fmt::print(options_.report, "pf-replay: error: {}: {}: {}\n", where(line), what,
               status.to_string());
  }

  void report_mismatch(const Pending& read, std::string_view what) {
    ++stats_.mismatches;
    if (stats_.mismatches > options_.max_reports) return;
    progress_.clear();
    fmt::print(options_.report, "pf-replay: mismatch: {}: file {} page {}: {}\n", where(read.line),
               name(read.file), read.page, what);
  }

  void note_page_size(uint32_t page_size) {
    if (stats_.page_size == 0) {
      stats_.page_size = page_size;
    } else if (stats_.page_size != page_size) {
      stats_.mixed_page_sizes = true;
    }
  }

  void open(const TraceOp& op, ReplayFile& file) {
    pagefile::OpenOptions open_options;
    open_options.create = true;
    open_options.page_size = options_.page_size != 0 ? options_.page_size : op.page_size;
    open_options.location = options_.location;
    open_options.checksums = options_.checksums;
    if (options_.location == pagefile::Location::kRemote) {
      open_options.placement = options_.layout.placement;
      open_options.stripe_pages = options_.layout.stripe_pages;
      open_options.replicas = options_.layout.replicas;
    }
    if (op.policy) open_options.policy = pagefile::BufferPolicy{.access = *op.policy};
    if (!options_.policy.empty()) {
      // A built-in's access type goes with it, so the catalog's record says
      // it to a client that does not know the name.
      auto access = pagefile::parse_access_type(options_.policy);
      open_options.policy = pagefile::BufferPolicy{
          .access = access ? *access : pagefile::AccessType::kRandom, .name = options_.policy};
    }
    Result<pagefile::Fd> fd = client_.open(name(op.file), open_options);
    if (!fd && fd.status().is(pagefile::Code::kInvalidArgument) && open_options.page_size != 0) {
      // Opened again at another size: a file that held nothing when the
      // application gave it SQLite's page size (a captured new database's
      // first write). So here, when it holds nothing either.
      pagefile::OpenOptions as_it_is = open_options;
      as_it_is.page_size = 0;
      if (auto again = client_.open(name(op.file), as_it_is)) {
        if (client_.set_page_size(*again, open_options.page_size)) {
          fd = *again;
        } else {
          (void)client_.close(*again);
        }
      }
    }
    if (!fd) {
      file.failed_open_line = op.line;
      report_error(op.line, fmt::format("open {}", name(op.file)), fd.status());
      return;
    }
    Result<pagefile::FileStatus> status = client_.status(*fd);
    if (!status) {
      file.failed_open_line = op.line;
      report_error(op.line, fmt::format("status {}", name(op.file)), status.status());
      (void)client_.close(*fd);
      return;
    }
    file.fd = *fd;
    file.page_size = status->page_size;
    // A captured trace's files hold the application's pages: one this run
    // did not write may hold anything.
    if (!trace_.data_path.empty()) file.history.set_application_pages();
    note_page_size(file.page_size);
    note_policy(pagefile::policy_name(status->policy));
    if (write_buffer_.size() < file.page_size) write_buffer_.resize(file.page_size);
  }

  void skip(const TraceOp& op, ReplayFile& file) {
    ++stats_.skipped;
    // Its close ends the skipping: the parser guarantees that the file's
    // next operation, if any, is an open, which tries again.
    if (op.kind == OpKind::kClose) file.failed_open_line = 0;
  }

  // Schedule::kBalanced. Issues the run of consecutive reads of one file
  // that starts at trace_.ops[first], not in trace order but each time the
  // read, among the next 8 x concurrency of the run, whose server has the
  // fewest of this driver's requests in flight (and of those, the server
  // given a request longest ago, which frees up first), so no server idles
  // while another has a queue. Reads change nothing, so their order within
  // the run is free; the run ends at any other operation. Returns the index
  // after the run.
  size_t issue_reads_balanced(size_t first) {
    const uint32_t file_index = trace_.ops[first].file;
    ReplayFile& file = files_[file_index];
    size_t end = first;
    while (end < trace_.ops.size() && trace_.ops[end].kind == OpKind::kRead &&
           trace_.ops[end].file == file_index) {
      ++end;
    }
    const size_t lookahead = std::max<size_t>(8, 8 * size_t{options_.concurrency});
    struct Waiting {
      size_t op;
      uint32_t server;
    };
    std::vector<Waiting> waiting;  // reads of the run not yet issued, in trace order
    size_t next = first;
    while (next < end || !waiting.empty()) {
      while (waiting.size() < lookahead && next < end) {
        // A page the client cannot place goes first; its read reports why.
        Result<uint32_t> server = client_.server_of(*file.fd, trace_.ops[next].page);
        waiting.push_back({next++, server ? *server : 0});
      }
      make_room();
      size_t best = 0;
      std::pair<uint32_t, uint64_t> best_key{UINT32_MAX, UINT64_MAX};
      for (size_t k = 0; k < waiting.size(); ++k) {
        const ServerLoad& load = server_load_[waiting[k].server];
        std::pair<uint32_t, uint64_t> key{load.in_flight, load.last_issue};
        if (key < best_key) {
          best = k;
          best_key = key;
        }
      }
      const TraceOp& op = trace_.ops[waiting[best].op];
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(best));
      ++stats_.ops;
      issue_read(op, file);
      check_confirmed();
      progress_.update(stats_.ops);
    }
    return end;
  }

  // Frees a slot of the window: confirms the oldest outstanding ticket when
  // `concurrency` of them are outstanding.
  void make_room() {
    while (pending_.size() >= options_.concurrency) confirm_front();
  }

  size_t take_read_buffer(uint32_t page_size) {
    size_t index;
    if (free_buffers_.empty()) {
      index = read_buffers_.size();
      read_buffers_.emplace_back();
    } else {
      index = free_buffers_.back();
      free_buffers_.pop_back();
    }
    // Only a free buffer is resized, so no request's span moves.
    if (read_buffers_[index].size() < page_size) read_buffers_[index].resize(page_size);
    return index;
  }

  // The entry of `op`, made once the window has room for it.
  Pending pending_for(OpKind kind, const TraceOp& op) {
    make_room();
    Pending entry;
    entry.kind = kind;
    entry.file = op.file;
    entry.line = op.line;
    entry.page = op.page;
    return entry;
  }

  void issue_read(const TraceOp& op, ReplayFile& file) {
    Pending read = pending_for(OpKind::kRead, op);
    read.expect = file.history.expect(op.page);
    read.buffer = take_read_buffer(file.page_size);
    std::span<std::byte> buffer(read_buffers_[read.buffer].data(), file.page_size);
    Result<pagefile::Ticket> ticket = client_.read_request(*file.fd, op.page, buffer);
    if (!ticket) {
      free_buffers_.push_back(read.buffer);
      report_error(op.line, fmt::format("read {} {}", name(op.file), op.page), ticket.status());
      return;
    }
    ++stats_.reads;
    stats_.bytes += file.page_size;
    read.ticket = *ticket;
    if (options_.schedule == Schedule::kBalanced) {
      if (auto server = client_.server_of(*file.fd, op.page)) {
        read.server = *server;
        ServerLoad& load = server_load_[*server];
        ++load.in_flight;
        load.last_issue = ++reads_issued_;
      }
    }
    pending_.push_back(read);
  }

  // The bytes a captured write carries: the file's page size from
  // `offset` in the data file.
  Status read_data(int64_t offset, std::span<std::byte> out) {
    if (data_ < 0) return Status::io_error(trace_.data_path, "the data file could not be opened");
    size_t got = 0;
    while (got < out.size()) {
      ssize_t n = ::pread(data_, out.data() + got, out.size() - got, static_cast<off_t>(offset) + static_cast<off_t>(got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return pagefile::errno_status(errno, trace_.data_path, "read");
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    if (got != out.size()) {
      return Status::io_error(trace_.data_path, fmt::format("ends before the {} bytes at offset {}", out.size(), offset));
    }
    return Status::ok();
  }

  void issue_write(const TraceOp& op, ReplayFile& file) {
    Pending write = pending_for(OpKind::kWrite, op);
    write.version = options_.version_base + static_cast<uint64_t>(++writes_issued_);
    std::span<std::byte> data(write_buffer_.data(), file.page_size);
    if (op.data_offset >= 0) {
      if (Status s = read_data(op.data_offset, data); !s) {
        file.history.write_failed(op.page);
        report_error(op.line, fmt::format("write {} {}", name(op.file), op.page), s);
        return;
      }
    } else {
      stamp_page(data, name(op.file), op.page, write.version);
    }
    // The client copies the data, so the one write buffer is free again as
    // soon as the request returns.
    Result<pagefile::Ticket> ticket = client_.write_request(*file.fd, op.page, data);
    if (!ticket) {
      file.history.write_failed(op.page);
      report_error(op.line, fmt::format("write {} {}", name(op.file), op.page), ticket.status());
      return;
    }
    ++stats_.writes;
    stats_.bytes += file.page_size;
    if (op.data_offset >= 0) {
      file.history.wrote_bytes(op.page, write.version, pagefile::xxh3(data, 0));
    } else {
      file.history.wrote(op.page, write.version);
    }
    write.ticket = *ticket;
    pending_.push_back(write);
  }

  void confirm_front() {
    Pending entry = pending_.front();
    pending_.pop_front();
    confirm(entry);
  }

  // Confirms every outstanding ticket of `file`, oldest first.
  void confirm_file(uint32_t file) {
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->file != file) {
        ++it;
        continue;
      }
      Pending entry = *it;
      it = pending_.erase(it);
      confirm(entry);
    }
    check_confirmed();
  }

  void confirm(const Pending& entry) {
    ReplayFile& file = files_[entry.file];
    if (entry.server) --server_load_[*entry.server].in_flight;
    if (entry.kind == OpKind::kWrite) {
      Status s = client_.write_confirm(entry.ticket);
      if (!s) {
        file.history.write_unconfirmed(entry.page, entry.version);
        report_error(entry.line, fmt::format("write {} {}", name(entry.file), entry.page), s);
      }
      return;
    }
    // The page is checked once the next request is on its way
    // (check_confirmed), so that the check overlaps the servers' work
    // instead of standing between two requests.
    unchecked_.emplace_back(entry, client_.read_confirm(entry.ticket));
  }

  // Checks the reads confirmed since the last call, and frees their buffers.
  void check_confirmed() {
    for (auto& [entry, outcome] : unchecked_) {
      std::span<const std::byte> page(read_buffers_[entry.buffer].data(), files_[entry.file].page_size);
      if (!outcome) {
        report_error(entry.line, fmt::format("read {} {}", name(entry.file), entry.page),
                     outcome.status());
      } else {
        check(entry, *outcome, page);
      }
      free_buffers_.push_back(entry.buffer);
    }
    unchecked_.clear();
  }

  void check(const Pending& read, pagefile::PageRead outcome, std::span<const std::byte> page) {
    Result<ReadFinding> finding =
        check_read(read.expect, name(read.file), read.page, outcome, page);
    if (!finding) {
      report_mismatch(read, finding.status().message());
      return;
    }
    switch (*finding) {
      case ReadFinding::kStamped: ++stats_.reads_stamped; break;
      case ReadFinding::kZeros: ++stats_.reads_zero; break;
      case ReadFinding::kBeyondEnd: ++stats_.reads_beyond_end; break;
      case ReadFinding::kWritten: ++stats_.reads_written; break;
      case ReadFinding::kUnchecked: ++stats_.reads_unchecked; break;
    }
  }

  void sync(const TraceOp& op, ReplayFile& file) {
    confirm_file(op.file);
    ++stats_.syncs;
    if (Status s = client_.sync(*file.fd); !s) {
      report_error(op.line, fmt::format("sync {}", name(op.file)), s);
    }
  }

  void truncate(const TraceOp& op, ReplayFile& file) {
    confirm_file(op.file);
    ++stats_.truncates;
    Status s = client_.truncate(*file.fd, op.page);
    file.history.truncated(op.page, s.is_ok());
    if (!s) report_error(op.line, fmt::format("truncate {} {}", name(op.file), op.page), s);
  }

  // Adds what the client's pool did for the descriptor, just before it
  // closes.
  void count_pool(pagefile::Fd fd) {
    Result<pagefile::FileCounters> c = client_.counters(fd);
    if (!c) return;
    stats_.hits += c->hits;
    stats_.misses += c->misses;
    stats_.prefetch_used += c->prefetch_used;
    stats_.prefetch_wasted += c->prefetch_wasted;
  }

  void note_policy(std::string_view policy) {
    if (stats_.policy.empty()) {
      stats_.policy = policy;
    } else if (stats_.policy != policy) {
      stats_.policy = "mixed";
    }
  }

  void close(const TraceOp& op, ReplayFile& file) {
    confirm_file(op.file);
    count_pool(*file.fd);
    Status s = client_.close(*file.fd);
    file.fd.reset();
    if (!s) report_error(op.line, fmt::format("close {}", name(op.file)), s);
  }

  // A removed file's pages are gone: a later open creates it empty.
  void unlink(const TraceOp& op, ReplayFile& file) {
    ++stats_.unlinks;
    Status s = client_.unlink(name(op.file), options_.location);
    if (s.is(pagefile::Code::kNotFound)) s = Status::ok();  // as a replay over a fresh store finds it
    file.history.truncated(0, s.is_ok());
    if (!s) report_error(op.line, fmt::format("unlink {}", name(op.file)), s);
  }

  const Trace& trace_;
  const ReplayOptions& options_;
  pagefile::Client& client_;
  ReplayStats& stats_;
  std::vector<ReplayFile> files_;
  pagefile::tools::ProgressLine progress_;
  std::deque<Pending> pending_;
  // Reads confirmed but not yet checked (confirm, check_confirmed).
  std::vector<std::pair<Pending, Result<pagefile::PageRead>>> unchecked_;
  // Schedule::kBalanced: per server, this driver's reads in flight and the
  // number of the last read issued to it.
  struct ServerLoad {
    uint32_t in_flight = 0;
    uint64_t last_issue = 0;
  };
  std::map<uint32_t, ServerLoad> server_load_;
  uint64_t reads_issued_ = 0;
  std::vector<std::vector<std::byte>> read_buffers_;
  std::vector<size_t> free_buffers_;
  std::vector<std::byte> write_buffer_;
  int64_t writes_issued_ = 0;
  int data_ = -1;  // the trace's data file, when it has one
};

int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<ReplayStats> replay_trace(const Trace& trace, const ReplayOptions& options) {
  if (options.concurrency == 0) {
    return Status::invalid_argument("concurrency 0", "must be at least 1");
  }
  if (options.layout.stripe_pages == 0) {
    return Status::invalid_argument("stripe pages 0", "must be at least 1");
  }
  pagefile::ClientOptions client_options;
  client_options.local_dir = options.dir;
  client_options.concurrency = options.window != 0 ? options.window : options.concurrency;
  client_options.bus = options.bus;
  client_options.cache_pages = options.cache_pages;
  // Local requests beyond the I/O threads only queue, which would cap the
  // level being measured.
  client_options.io_threads = std::max(client_options.io_threads, client_options.concurrency);
  Result<std::unique_ptr<pagefile::Client>> client = pagefile::Client::start(client_options);
  if (!client) return client.status().with_context("starting the Pagefile client");

  ReplayStats stats;
  stats.concurrency = options.concurrency;
  stats.window = options.window;
  stats.location = options.location;
  if (options.location == pagefile::Location::kRemote) {
    stats.bus = options.bus;
    stats.layout = options.layout;
  }
  stats.started_unix_ns = unix_now_ns();
  stats.version_base = options.version_base != 0 ? options.version_base
                                                 : static_cast<uint64_t>(stats.started_unix_ns);
  ReplayOptions effective = options;
  effective.version_base = stats.version_base;

  Replayer replayer(trace, effective, **client, stats);
  const auto start = std::chrono::steady_clock::now();
  replayer.run();
  stats.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (Status s = (*client)->stop(); !s) {
    ++stats.errors;
    fmt::print(options.report, "pf-replay: error: stopping the client: {}\n", s.to_string());
  }
  return stats;
}

}  // namespace pf_replay
