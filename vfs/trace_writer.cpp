#include "vfs/trace_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <filesystem>

#include <fmt/format.h>

#include "core/os_error.h"

namespace pagefile::vfs {

using trace::OpKind;
using trace::TraceOp;

namespace {

// The writers open in this process, by absolute path: two databases traced
// to one path share one trace.
struct OpenWriters {
  Mutex mu;
  std::map<std::string, std::weak_ptr<TraceWriter>> by_path GUARDED_BY(mu);
};
OpenWriters& open_writers() {
  static auto* writers = new OpenWriters;  // never destroyed: used at exit
  return *writers;
}

// Writes all of `bytes` to `fd`.
Status write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_status(errno, path, "write");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::ok();
}

// A trace word: a name without blanks or control bytes, not starting with '#'.
std::string trace_word(std::string_view name) {
  std::string word;
  for (char c : name) word += static_cast<unsigned char>(c) <= ' ' || c == 0x7f ? '_' : c;
  if (word.empty() || word[0] == '#') word.insert(word.begin(), '_');
  return word;
}

}  // namespace

Result<std::shared_ptr<TraceWriter>> TraceWriter::open(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("trace", "an empty path");
  std::error_code ec;
  std::string key = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) key = path;
  OpenWriters& writers = open_writers();
  MutexLock lock(writers.mu);
  if (auto live = writers.by_path[key].lock()) return live;
  const std::string data_path = path + ".data";
  int text_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (text_fd < 0) return errno_status(errno, path, kTraceUnwritable);
  int data_fd = ::open(data_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (data_fd < 0) {
    Status s = errno_status(errno, data_path, kTraceUnwritable);
    ::close(text_fd);
    return s;
  }
  std::shared_ptr<TraceWriter> writer(new TraceWriter(path, text_fd, data_fd));
  writers.by_path[key] = writer;
  return writer;
}

TraceWriter::TraceWriter(std::string path, int text_fd, int data_fd)
    : path_(std::move(path)), text_fd_(text_fd), data_fd_(data_fd) {
  std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  MutexLock lock(mu_);
  text_ = fmt::format(
      "# captured by the pagefile VFS (process {}, {}): pf-replay run replays it (doc/trace_format.md)\n"
      "data {}\n",
      ::getpid(), when, std::filesystem::path(path_ + ".data").filename().string());
  ++recorded_;
  thread_ = std::thread([this] { run(); });
}

TraceWriter::~TraceWriter() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
  ::close(text_fd_);
  ::close(data_fd_);
}

void TraceWriter::run() {
  MutexLock lock(mu_);
  for (;;) {
    const bool empty = text_.empty() && data_.empty();
    if (empty && stopping_) return;
    const bool due = text_.size() + data_.size() >= kWakeBytes || stopping_ || flushing_ > 0;
    if (empty || !due) {
      // Little or nothing waits: more, a flush, or the period, whichever
      // comes first (what waits is written once the period passes).
      bool woken = changed_.wait_for(mu_, kWriteEvery);
      if (woken || empty) continue;
    }
    std::string text = std::move(text_);
    std::string data = std::move(data_);
    text_.clear();
    data_.clear();
    uint64_t batch = recorded_;
    bool failed = !error_.is_ok();
    lock.unlock();
    // The pages first: a line never names bytes that are not there yet.
    Status s;
    if (!failed) s = write_all(data_fd_, data, path_ + ".data");
    if (!failed && s) s = write_all(text_fd_, text, path_);
    lock.lock();
    if (!s && error_.is_ok()) error_ = s;
    written_ = batch;
    changed_.notify_all();
  }
}

void TraceWriter::flush() {
  MutexLock lock(mu_);
  uint64_t want = recorded_;
  ++flushing_;
  changed_.notify_all();
  while (written_ < want) changed_.wait(mu_);
  --flushing_;
}

Status TraceWriter::status() const {
  MutexLock lock(mu_);
  return error_;
}

TraceWriter::Named& TraceWriter::named(const std::string& store_name) {
  auto [it, added] = names_.try_emplace(store_name);
  if (added) {
    std::string base = trace_word(std::filesystem::path(store_name).filename().string());
    std::string chosen = base;
    for (int n = 2; trace_names_.contains(chosen); ++n) chosen = fmt::format("{}~{}", base, n);
    trace_names_.insert(chosen);
    it->second.trace_name = chosen;
    text_ += fmt::format("# file {} is {}\n", chosen, store_name);
  }
  return it->second;
}

void TraceWriter::record(trace::TraceOp op, const Named& named, std::span<const std::byte> page) {
  if (!error_.is_ok()) return;  // the capture stopped at its first error
  // Bounded memory: wait for the writer rather than grow without limit.
  while (text_.size() + data_.size() > kMaxBuffered && error_.is_ok()) {
    changed_.notify_all();
    changed_.wait(mu_);
  }
  op.micros = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - began_).count();
  if (!page.empty()) {
    op.data_offset = data_offset_;
    data_.append(reinterpret_cast<const char*>(page.data()), page.size());
    data_offset_ += static_cast<int64_t>(page.size());
  }
  trace::append_op(text_, op, named.trace_name);
  ++recorded_;
  // The writer wakes by itself every kWriteEvery; waking it on each
  // operation would cost a system call each.
  if (text_.size() + data_.size() >= kWakeBytes) changed_.notify_all();
}

void TraceWriter::emit_open(const File& file, Named& named) {
  TraceOp op;
  op.kind = OpKind::kOpen;
  op.page_size = file.page_size;
  op.policy = file.policy;
  record(op, named);
}

TraceWriter::Named& TraceWriter::ensure_open(const File& file) {
  Named& n = named(file.name);
  if (n.descriptors == 0) {
    emit_open(file, n);
    n.descriptors = 1;
  }
  return n;
}

void TraceWriter::opened(const File& file) {
  MutexLock lock(mu_);
  Named& n = named(file.name);
  if (n.descriptors++ == 0) emit_open(file, n);
}

void TraceWriter::closed(const File& file) {
  bool none_open = false;
  {
    MutexLock lock(mu_);
    Named& n = named(file.name);
    if (n.descriptors == 0) return;  // opened before the capture, and closed there
    if (--n.descriptors == 0) record(TraceOp{.kind = OpKind::kClose}, n);
    none_open = std::all_of(names_.begin(), names_.end(), [](const auto& e) { return e.second.descriptors == 0; });
  }
  // Nothing open: the application may well read the trace now.
  if (none_open) flush();
}

void TraceWriter::read(const File& file, int64_t page) {
  MutexLock lock(mu_);
  record(TraceOp{.kind = OpKind::kRead, .page = page}, ensure_open(file));
}

void TraceWriter::write(const File& file, int64_t page, std::span<const std::byte> data) {
  MutexLock lock(mu_);
  record(TraceOp{.kind = OpKind::kWrite, .page = page}, ensure_open(file), data);
}

void TraceWriter::sync(const File& file) {
  MutexLock lock(mu_);
  record(TraceOp{.kind = OpKind::kSync}, ensure_open(file));
}

void TraceWriter::truncate(const File& file, int64_t pages) {
  MutexLock lock(mu_);
  record(TraceOp{.kind = OpKind::kTruncate, .page = pages}, ensure_open(file));
}

void TraceWriter::unlinked(const std::string& name) {
  MutexLock lock(mu_);
  Named& n = named(name);
  if (n.descriptors > 0) {
    // Removed while a descriptor has it (another connection's): the trace
    // closes it first, and opens it again if that descriptor goes on.
    record(TraceOp{.kind = OpKind::kClose}, n);
    n.descriptors = 0;
  }
  record(TraceOp{.kind = OpKind::kUnlink}, n);
}

}  // namespace pagefile::vfs
