#include "vfs/trace_writer.h"

#include <fcntl.h>
#include <sys/file.h>
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

bool is_blank_or_control(char c) { return static_cast<unsigned char>(c) <= ' ' || c == 0x7f; }

// A trace word: a name without blanks or control bytes, not starting with '#'.
std::string trace_word(std::string_view name) {
  std::string word;
  for (char c : name) word += is_blank_or_control(c) ? '_' : c;
  if (word.empty() || word[0] == '#') word.insert(word.begin(), '_');
  return word;
}

// `text` on one line: control bytes (a newline among them) as '?'.
std::string one_line(std::string_view text) {
  std::string line(text);
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < ' ' || c == 0x7f) c = '?';
  }
  return line;
}

}  // namespace

Result<std::shared_ptr<TraceWriter>> TraceWriter::open(const std::string& path) {
  if (path.empty()) return Status::invalid_argument("trace", "an empty path");
  const std::string data_path = path + ".data";
  const std::string data_name = std::filesystem::path(data_path).filename().string();
  if (data_name[0] == '#' || std::any_of(data_name.begin(), data_name.end(), is_blank_or_control)) {
    return Status::invalid_argument(path, fmt::format("{}: its file name may have no blanks or control characters, "
                                                      "nor start with '#'", kTraceUnwritable));
  }
  std::error_code ec;
  std::string key = std::filesystem::absolute(path, ec).lexically_normal().string();
  if (ec) key = path;
  OpenWriters& writers = open_writers();
  MutexLock lock(writers.mu);
  if (auto it = writers.by_path.find(key); it != writers.by_path.end()) {
    if (auto live = it->second.lock()) return live;
    // Its writer is still finishing (the entry goes when it has): the lock
    // below refuses this open meanwhile.
  }
  int text_fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (text_fd < 0) return errno_status(errno, path, kTraceUnwritable);
  // Emptied only once this process holds it: never under another writer.
  if (::flock(text_fd, LOCK_EX | LOCK_NB) != 0) {
    Status s = errno == EWOULDBLOCK
                   ? Status::busy(path, fmt::format("{}: another process (or writer) is writing it", kTraceUnwritable))
                   : errno_status(errno, path, kTraceUnwritable);
    ::close(text_fd);
    return s;
  }
  int data_fd = ::open(data_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (data_fd < 0 || ::ftruncate(text_fd, 0) != 0) {
    Status s = errno_status(errno, data_fd < 0 ? data_path : path, kTraceUnwritable);
    if (data_fd >= 0) ::close(data_fd);
    ::close(text_fd);
    return s;
  }
  std::shared_ptr<TraceWriter> writer(new TraceWriter(path, key, text_fd, data_fd));
  writers.by_path[key] = writer;
  return writer;
}

TraceWriter::TraceWriter(std::string path, std::string key, int text_fd, int data_fd)
    : path_(std::move(path)), key_(std::move(key)), owner_(::getpid()), text_fd_(text_fd), data_fd_(data_fd) {
  std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  MutexLock lock(mu_);
  text_ = fmt::format(
      "# captured by the pagefile VFS (process {}, {}): pf-replay run replays it (doc/trace_format.md)\n"
      "data {}\n",
      owner_, when, std::filesystem::path(path_ + ".data").filename().string());
  ++recorded_;
  thread_ = std::thread([this] { run(); });
}

TraceWriter::~TraceWriter() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (::getpid() == owner_) {
    thread_.join();
  } else {
    thread_.detach();  // (a forked child's copy: no such thread runs here)
  }
  ::close(data_fd_);
  ::close(text_fd_);  // and with it the lock
  OpenWriters& writers = open_writers();
  MutexLock lock(writers.mu);
  if (auto it = writers.by_path.find(key_); it != writers.by_path.end() && it->second.expired()) {
    writers.by_path.erase(it);
  }
}

void TraceWriter::run() {
  MutexLock lock(mu_);
  for (;;) {
    const bool empty = text_.empty() && data_.empty();
    if (empty && stopping_) return;
    if (empty) {
      changed_.wait(mu_);
      continue;
    }
    const bool due = text_.size() + data_.size() >= kWakeBytes || stopping_ || flushing_ > 0;
    if (!due) {
      // Little waits: more, a flush, or the period, whichever comes first
      // (what waits is written once the period passes).
      if (changed_.wait_for(mu_, kWriteEvery)) continue;
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
    if (!failed && s) {
      text_end_ += static_cast<int64_t>(text.size());
      data_end_ += static_cast<int64_t>(data.size());
    } else if (!failed) {
      // (A disk full mid-batch: no half line, no line whose page is cut.)
      (void)::ftruncate(text_fd_, text_end_);
      (void)::ftruncate(data_fd_, data_end_);
    }
    lock.lock();
    if (!s && error_.is_ok()) error_ = s;
    written_ = batch;
    changed_.notify_all();
  }
}

void TraceWriter::flush() {
  if (::getpid() != owner_) return;  // a forked child: its copy has no writer thread
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
    text_ += fmt::format("# file {} is {}\n", chosen, one_line(store_name));
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
  named.page_size = file.page_size;
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
    ++open_files_;
  }
  return n;
}

void TraceWriter::opened(const File& file) {
  MutexLock lock(mu_);
  Named& n = named(file.name);
  if (n.descriptors++ == 0) {
    emit_open(file, n);
    ++open_files_;
  }
}

void TraceWriter::closed(const File& file) {
  bool none_open = false;
  {
    MutexLock lock(mu_);
    Named& n = named(file.name);
    if (n.descriptors == 0) return;  // opened before the capture, and closed there
    if (--n.descriptors == 0) {
      record(TraceOp{.kind = OpKind::kClose}, n);
      --open_files_;
    }
    none_open = open_files_ == 0;
  }
  // Nothing open: the application may well read the trace now.
  if (none_open) flush();
}

void TraceWriter::resized(const File& file) {
  MutexLock lock(mu_);
  Named& n = named(file.name);
  if (n.descriptors == 0 || n.page_size == file.page_size) return;  // (opened at the new size when next used)
  record(TraceOp{.kind = OpKind::kClose}, n);
  emit_open(file, n);
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
    --open_files_;
  }
  record(TraceOp{.kind = OpKind::kUnlink}, n);
  // Gone: its name may serve again (a super-journal's random name would
  // otherwise stay for the life of the process).
  trace_names_.erase(n.trace_name);
  names_.erase(name);
}

}  // namespace pagefile::vfs
