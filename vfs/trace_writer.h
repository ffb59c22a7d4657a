// The VFS's trace capture: every page operation the VFS sends to the store
// (open, read, write, sync, truncate, close, unlink), written as a
// pf-replay trace (doc/trace_format.md) that `pf-replay run` replays
// unchanged, at any concurrency, locally or on a cluster.
//
// A trace at PATH is two files: PATH, the text, one operation a line with
// its time (@MICROS since the capture began), and PATH.data, the bytes of
// every page written, in order; each `write` line gives its page's offset
// there, so a replay writes the application's own bytes and a store it
// fills is byte for byte the one the application made.
//
// Files are named in the trace by their last path component (`app.db`,
// `app.db-journal`), made unique with `~2`, `~3`... when two store names
// share one; a comment line gives each one's store name. So a replay with
// --dir writes under its own directory, not over the captured database
// (pf-replay requires --dir or --bus for a captured trace).
//
// The calling thread only formats a line and copies a written page into a
// buffer; one thread of the writer's own writes them out. When more than
// kMaxBuffered bytes wait, callers wait for it (memory stays bounded; no
// operation is ever dropped while the trace can be written). The first
// error writing the trace stops the capture, and status() reports it; the
// files are cut back to the last whole batch, so what they hold replays.
// One process writes a trace at a time: another one's open of the same path
// is refused while it does (an advisory lock on PATH).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>

#include <sys/types.h>

#include "core/mutex.h"
#include "core/trace_op.h"
#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pagefile::vfs {

// Begins the message of a trace that cannot be written (x_open tells it
// apart by this).
inline constexpr std::string_view kTraceUnwritable = "cannot write the trace";

class TraceWriter {
 public:
  // Bytes of lines and pages kept before callers wait for the writer.
  static constexpr size_t kMaxBuffered = 32u << 20;
  // The writer wakes when this many wait, or every kWriteEvery.
  static constexpr size_t kWakeBytes = 1u << 20;
  static constexpr std::chrono::milliseconds kWriteEvery{50};

  // The writer of the trace at `path`: the one this process has open there,
  // or a new one that creates (or empties) PATH and PATH.data. An error
  // naming the path (its message holds kTraceUnwritable) when either cannot
  // be written, another process writes it, or its file name has blanks or
  // starts with '#' (the trace names its data file by it).
  static Result<std::shared_ptr<TraceWriter>> open(const std::string& path);
  // Writes out what waits, then closes the files.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  // A store file as the trace sees it.
  struct File {
    const std::string& name;  // the store name
    uint32_t page_size = 0;
    std::optional<AccessType> policy;
  };
  // Descriptors are counted per store name: the trace opens a file at its
  // first descriptor and closes it at its last. An operation on a file the
  // trace has not open (a descriptor older than the capture) opens it first.
  void opened(const File& file);
  void closed(const File& file);
  void read(const File& file, int64_t page);
  void write(const File& file, int64_t page, std::span<const std::byte> data);
  void sync(const File& file);
  void truncate(const File& file, int64_t pages);
  void unlinked(const std::string& name);
  // A file that held nothing took another page size (a new database's
  // first write, ByteFile): the trace closes it and opens it again at
  // that size, once for all its descriptors.
  void resized(const File& file);

  // Returns once everything recorded so far is written (not synced).
  void flush();
  const std::string& path() const { return path_; }
  // OK, or the first error writing the trace (the capture stopped there).
  Status status() const;

 private:
  struct Named {
    std::string trace_name;
    int descriptors = 0;  // open in the trace while > 0
    uint32_t page_size = 0;  // as the trace last opened it
  };

  TraceWriter(std::string path, std::string key, int text_fd, int data_fd);
  // The trace's name of `store_name`, chosen (and announced) on first use.
  Named& named(const std::string& store_name) REQUIRES(mu_);
  // Appends `op` on `named` (its time set now); `page` holds a write's bytes.
  void record(trace::TraceOp op, const Named& named, std::span<const std::byte> page = {}) REQUIRES(mu_);
  // Opens `file` in the trace when it is not open there.
  Named& ensure_open(const File& file) REQUIRES(mu_);
  void emit_open(const File& file, Named& named) REQUIRES(mu_);
  void run();

  const std::string path_;
  const std::string key_;  // in the process's table of open writers
  const pid_t owner_;      // a forked child has no writer thread: it writes nothing
  const int text_fd_;
  const int data_fd_;
  const std::chrono::steady_clock::time_point began_ = std::chrono::steady_clock::now();

  mutable Mutex mu_;
  CondVar changed_;  // something to write, written, or stopping
  std::string text_ GUARDED_BY(mu_);            // lines waiting to be written
  std::string data_ GUARDED_BY(mu_);            // pages waiting to be written
  uint64_t recorded_ GUARDED_BY(mu_) = 0;       // batches handed to the writer (text_ or data_ grew)
  uint64_t written_ GUARDED_BY(mu_) = 0;        // of those, written out
  int64_t data_offset_ GUARDED_BY(mu_) = 0;     // where the next page goes in PATH.data
  int64_t text_end_ = 0;  // the writer thread's: the files' lengths after the last whole batch
  int64_t data_end_ = 0;
  int open_files_ GUARDED_BY(mu_) = 0;  // names with descriptors
  Status error_ GUARDED_BY(mu_);
  bool stopping_ GUARDED_BY(mu_) = false;
  int flushing_ GUARDED_BY(mu_) = 0;  // callers of flush() waiting
  std::map<std::string, Named> names_ GUARDED_BY(mu_);  // by store name
  std::set<std::string> trace_names_ GUARDED_BY(mu_);
  std::thread thread_;
};

// Where a database's files find the trace they are captured to, if any:
// one for a database, its journal and its WAL (DbConfig::trace), set by the
// URI's trace=, $PAGEFILE_TRACE or PRAGMA pagefile_trace. Every operation
// looks here, so a capture started or stopped by the pragma applies to the
// files already open.
class TraceSlot {
 public:
  // The trace, or null. Asked at every page operation: while no trace is
  // set, the answer comes from one atomic load, without the mutex.
  std::shared_ptr<TraceWriter> get() const {
    if (!on_.load(std::memory_order_acquire)) return nullptr;
    MutexLock lock(mu_);
    return writer_;
  }
  void set(std::shared_ptr<TraceWriter> writer) {
    {
      MutexLock lock(mu_);
      std::swap(writer_, writer);
      on_.store(writer_ != nullptr, std::memory_order_release);
    }
    // (The old trace goes here, outside the mutex: its destructor may wait.)
  }

 private:
  mutable Mutex mu_;
  std::shared_ptr<TraceWriter> writer_ GUARDED_BY(mu_);
  std::atomic<bool> on_{false};  // writer_ != nullptr, as last set
};

}  // namespace pagefile::vfs
