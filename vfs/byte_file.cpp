#include "vfs/byte_file.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "client/client_access.h"
#include "core/sqlite_header.h"

namespace pagefile::vfs {

namespace {

constexpr char kLengthMagic[8] = {'P', 'F', 'V', 'F', 'S', 'L', 'E', 'N'};
// The length page's bytes that say anything: the magic and the length (a
// little-endian u64). The rest are zeros.
constexpr size_t kLengthBytes = sizeof kLengthMagic + 8;

void put_u64(std::byte* at, uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
uint64_t get_u64(const std::byte* at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(at[i]) << (8 * i);
  return v;
}

// The page size of SQLite's page 1 when `data`, written at offset 0, is one
// whole (its header names its own size); 0 otherwise.
uint32_t sqlite_page_one_size(std::span<const std::byte> data) {
  uint32_t size = data.size() >= 100 ? sqlite_header_page_size(data) : 0;
  return size == data.size() ? size : 0;
}

}  // namespace

template <class F>
auto ByteFile::timed(F&& confirm) {
  auto start = std::chrono::steady_clock::now();
  auto result = confirm();
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start);
  stats_->waits.fetch_add(1, std::memory_order_relaxed);
  stats_->wait_ns.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
  return result;
}

template <class F>
void ByteFile::traced(F&& capture) const {
  if (!trace_) return;
  std::shared_ptr<TraceWriter> writer = trace_->get();
  if (!writer) return;
  capture(*writer, TraceWriter::File{name_, page_size_, policy_});
}

Result<std::unique_ptr<ByteFile>> ByteFile::open(Client& client, const std::string& name, OpenOptions options,
                                                     Layout layout, std::shared_ptr<IoStats> stats,
                                                     std::shared_ptr<TraceSlot> trace, uint32_t new_page_size) {
  // A journal's or WAL's page size is chosen at its creation, here.
  if (layout == Layout::kBytes) options.page_size_final = true;
  if (layout == Layout::kBytes && options.page_size == 0) {
    // An existing journal keeps its page size; a new one gets ours. (So
    // does an empty file at the path, left by a process that died as it
    // made the journal: LocalPagefile::open makes its header.)
    options.create_page_size = new_page_size;
    // SQLite trusts a sector (SECTOR_SIZE) to be written whole or not at
    // all, and appends to a journal after its sync from a sector boundary:
    // a write torn between sectors must leave the records already synced
    // in the page readable, as a disk would. (Used at creation only.)
    options.sector_checksums = true;
  }
  Result<Fd> fd = client.open(name, options);
  if (!fd) return fd.status();
  auto st = client.status(*fd);
  auto io = st ? ClientAccess::page_io(client, *fd) : Result<std::shared_ptr<PageIo>>(st.status());
  if (!io) {
    (void)client.close(*fd);
    return io.status();
  }
  std::unique_ptr<ByteFile> file(
      new ByteFile(client, *fd, st->page_size, layout, options.concurrency == 0 ? st->concurrency : options.concurrency,
                     std::move(stats)));
  file->io_ = std::move(*io);
  file->read_ahead_pays_ = !st->always_direct;
  file->local_ = st->location == Location::kLocal;
  file->replicas_ = st->replicas;
  file->name_ = name;
  file->policy_ = st->policy.access;
  file->trace_ = std::move(trace);
  file->traced([](TraceWriter& w, const TraceWriter::File& f) { w.opened(f); });
  if (layout == Layout::kPages) {
    file->size_ = st->pages * st->page_size;
  } else if (st->pages > 0) {
    auto length = file->read_length(name);
    if (!length) return length.status();
    file->size_ = *length;
  }
  return file;
}

Result<int64_t> ByteFile::read_length(const std::string& name) {
  std::vector<std::byte>& page = length_in_;
  page.resize(page_size_);
  traced([](TraceWriter& w, const TraceWriter::File& f) { w.read(f, 0); });
  auto got = client_.read(fd_, 0, page);
  if (!got) return got.status();
  if (std::memcmp(page.data(), kLengthMagic, sizeof kLengthMagic) == 0) {
    return static_cast<int64_t>(get_u64(page.data() + 8));
  }
  bool all_zero = std::all_of(page.begin(), page.end(), [](std::byte b) { return b == std::byte{0}; });
  if (!all_zero) return Status::corruption(name, "is not a journal Pagefile (no length page)");
  return int64_t{0};
}

ByteFile::ByteFile(Client& client, Fd fd, uint32_t page_size, Layout layout, uint32_t concurrency,
                       std::shared_ptr<IoStats> stats)
    : client_(client),
      fd_(fd),
      page_size_(page_size),
      layout_(layout),
      concurrency_(std::max<uint32_t>(concurrency, 1)),
      stats_(stats ? std::move(stats) : std::make_shared<IoStats>()) {}

ByteFile::~ByteFile() { (void)close(); }

int64_t ByteFile::page_of(int64_t offset) const {
  return (layout_ == Layout::kBytes ? 1 : 0) + offset / page_size_;
}

int64_t ByteFile::pages_for(int64_t size) const {
  int64_t data = (size + page_size_ - 1) / page_size_;
  return layout_ == Layout::kBytes ? 1 + data : data;
}

bool ByteFile::in_run(int64_t page) const { return page >= run_first_ && page < run_first_ + run_count_; }

void ByteFile::drop_ahead(int64_t page) {
  if (in_run(page)) run_count_ = 0;
  auto it = ahead_.find(page);
  if (it == ahead_.end()) return;
  (void)timed([&] { return client_.read_confirm(it->second.ticket); });
  ahead_.erase(it);
}

void ByteFile::drop_all_ahead() {
  run_count_ = 0;
  run_length_ = 0;
  for (auto& entry : ahead_) {
    Ticket ticket = entry.second.ticket;  // (a lambda may not capture a structured binding in C++20 before clang 16)
    (void)timed([&] { return client_.read_confirm(ticket); });
  }
  ahead_.clear();
}

void ByteFile::read_ahead(int64_t page) {
  bool sequential = page == last_read_page_ + 1;
  last_read_page_ = page;
  if (!sequential || concurrency_ < 2 || !read_ahead_pays_) return;
  int64_t end = pages_for(size_);
  for (int64_t next = page + 1; next < end && next <= page + concurrency_ && ahead_.size() < concurrency_; ++next) {
    if (ahead_.contains(next) || kept_.contains(next)) continue;
    AheadRead read;
    read.data.resize(page_size_);
    auto ticket = client_.read_request(fd_, next, read.data);
    if (!ticket) return;  // read-ahead is a hint; the read itself will say what is wrong
    traced([&](TraceWriter& w, const TraceWriter::File& f) { w.read(f, next); });
    stats_->read_requests.fetch_add(1, std::memory_order_relaxed);
    read.ticket = *ticket;
    ahead_.emplace(next, std::move(read));
  }
}

void ByteFile::allow_runs(bool allowed) {
  if (!allowed) run_count_ = 0;
  runs_allowed_ = allowed;
}

std::optional<Status> ByteFile::from_run(int64_t page, std::span<std::byte> out) {
  if (in_run(page)) {
    std::memcpy(out.data(), run_.get() + static_cast<size_t>(page - run_first_) * page_size_, page_size_);
    stats_->pages_read.fetch_add(1, std::memory_order_relaxed);
    stats_->read_ahead_used.fetch_add(1, std::memory_order_relaxed);
    last_read_page_ = page;
    return Status::ok();
  }
  // Pages read in order so far, this one included. A run begins only at
  // the kRunAfter-th: a transaction's first reads (the header's page, then
  // a root) are often in order and need nothing more. A read out of order
  // ends the growth of runs.
  in_order_ = page == last_read_page_ + 1 ? in_order_ + 1 : 1;
  if (in_order_ == 1) run_length_ = 0;
  if (!runs_allowed_ || read_ahead_pays_ || layout_ != Layout::kPages || in_order_ < kRunAfter) return std::nullopt;
  const int64_t most = std::max<int64_t>(1, kRunBytes / page_size_);
  const int64_t length = std::min({run_length_ == 0 ? kFirstRun : 2 * run_length_, most, pages_for(size_) - page});
  if (length < 2) return std::nullopt;
  if (!run_) run_ = std::make_unique_for_overwrite<std::byte[]>(kRunBytes);
  std::span<std::byte> run(run_.get(), static_cast<size_t>(length) * page_size_);
  auto got = client_.read_pages_at_once(fd_, page, length, run);
  if (!got) return std::nullopt;
  stats_->read_requests.fetch_add(1, std::memory_order_relaxed);
  // The page itself failed its check (read again alone, as every failing
  // read is): its error. Another failure (an I/O error anywhere in the
  // run) or none read: the page is read alone, which says what is wrong
  // with it.
  if (!*got) return got->status().is(Code::kCorruption) ? std::optional<Status>(got->status()) : std::nullopt;
  if (**got < 1) return std::nullopt;
  run_first_ = page;
  run_count_ = **got;
  run_length_ = length;
  traced([&](TraceWriter& w, const TraceWriter::File& f) {
    for (int64_t p = page; p < page + run_count_; ++p) w.read(f, p);
  });
  return from_run(page, out);
}

Status ByteFile::fetch(int64_t page, std::span<std::byte> out, bool* beyond_end) {
  if (auto kept = kept_.find(page); kept != kept_.end()) {
    std::memcpy(out.data(), kept->second.data.data(), page_size_);
    return Status::ok();
  }
  if (page >= pages_for(size_)) {  // beyond the end: zeros, no request
    std::memset(out.data(), 0, out.size());
    return Status::ok();
  }
  if (auto done = from_run(page, out)) return *done;
  auto ahead = ahead_.find(page);
  std::optional<Result<PageRead>> now;
  if (ahead == ahead_.end()) {
    traced([&](TraceWriter& w, const TraceWriter::File& f) { w.read(f, page); });
    now = client_.read_at_once(fd_, page, out, /*may_wait=*/true);
  }
  if (now) {
    if (!*now) return now->status();
    if (beyond_end && **now == PageRead::kBeyondEnd) *beyond_end = true;
    stats_->read_requests.fetch_add(1, std::memory_order_relaxed);
    stats_->pages_read.fetch_add(1, std::memory_order_relaxed);
  } else if (ahead != ahead_.end()) {
    auto got = timed([&] { return client_.read_confirm(ahead->second.ticket); });
    std::vector<std::byte> data = std::move(ahead->second.data);
    ahead_.erase(ahead);
    if (!got) return got.status();
    stats_->pages_read.fetch_add(1, std::memory_order_relaxed);
    stats_->read_ahead_used.fetch_add(1, std::memory_order_relaxed);
    std::memcpy(out.data(), data.data(), page_size_);
  } else {
    auto ticket = client_.read_request(fd_, page, out);
    if (!ticket) return ticket.status();
    stats_->read_requests.fetch_add(1, std::memory_order_relaxed);
    auto got = timed([&] { return client_.read_confirm(*ticket); });
    if (!got) return got.status();
    if (beyond_end && *got == PageRead::kBeyondEnd) *beyond_end = true;
    stats_->pages_read.fetch_add(1, std::memory_order_relaxed);
  }
  read_ahead(page);
  return Status::ok();
}

Status ByteFile::read_part(int64_t page, size_t in_page, std::span<std::byte> out) {
  if (page >= pages_for(size_)) {  // beyond the end: zeros (fetch's), nothing kept
    std::memset(out.data(), 0, out.size());
    return Status::ok();
  }
  if (page == checked_page_) {
    auto io = this->io();
    if (!io) return io.status();
    auto got = (*io)->read_part_here(page, in_page, out);
    if (got && *got && **got == out.size() && std::memcmp(out.data(), checked_.get() + in_page, out.size()) == 0) {
      traced([&](TraceWriter& w, const TraceWriter::File& f) { w.read(f, page); });
      stats_->read_requests.fetch_add(1, std::memory_order_relaxed);
      stats_->pages_read.fetch_add(1, std::memory_order_relaxed);
      return Status::ok();
    }
  }
  if (!checked_) checked_ = std::make_unique_for_overwrite<std::byte[]>(page_size_);
  std::span<std::byte> whole(checked_.get(), page_size_);
  checked_page_ = -1;
  bool beyond_end = false;
  if (Status s = fetch(page, whole, &beyond_end); !s) return s;
  // (Zeros for a page past the end, as another descriptor's truncate
  // leaves it, were never checked.)
  if (!beyond_end) checked_page_ = page;
  std::memcpy(out.data(), whole.data() + in_page, out.size());
  return Status::ok();
}

Result<ByteFile::KeptPage*> ByteFile::keep(int64_t page) {
  auto it = kept_.find(page);
  if (it != kept_.end()) return &it->second;
  KeptPage kept;
  // (fetch fills it whole: a buffer let go by drop_cache serves as it is,
  // with no allocation and no zeroing of a page about to be read over.)
  if (spare_.size() == page_size_) {
    kept.data = std::exchange(spare_, {});
  } else {
    kept.data.resize(page_size_);
  }
  if (Status s = fetch(page, kept.data); !s) return s;
  it = kept_.emplace(page, std::move(kept)).first;
  if (Status s = trim_kept(it); !s) return s;
  return &it->second;
}

Status ByteFile::trim_kept(std::map<int64_t, KeptPage>::iterator keeping) {
  while (kept_.size() > kMaxCachedPages) {
    // The lowest page: for a journal being appended to, the one left behind.
    auto lowest = kept_.end();
    if (kept_.size() > kept_limit_) {
      lowest = kept_.begin();
      if (lowest == keeping) lowest = std::next(lowest);
    } else {
      // Room for pages read (keep_read_pages): only the lowest changed one
      // goes, when more than kMaxCachedPages are, `keeping` counted among
      // them (kept for a write, it is about to change). (Counted here, in a
      // checkpoint only: no count to keep right everywhere a page changes.)
      size_t changed = 0;
      for (auto at = kept_.begin(); at != kept_.end(); ++at) {
        if (!at->second.dirty() && at != keeping) continue;
        ++changed;
        if (lowest == kept_.end() && at != keeping) lowest = at;
      }
      if (changed <= kMaxCachedPages) return Status::ok();
    }
    if (kept_.size() > kept_limit_ && lowest->second.dirty()) {
      // A journal being appended to: the lowest pages that follow one
      // another go out together (never `keeping` and the highest, which
      // are being written), and are let go.
      auto end = std::prev(kept_.end());
      if (keeping != end && keeping->first > lowest->first) end = keeping;
      auto last = write_kept_run(lowest, end);
      if (!last) return last.status();
      if (*last != lowest) {
        while (lowest != *last) {
          if (spare_.empty()) spare_ = std::move(lowest->second.data);
          lowest = kept_.erase(lowest);
        }
        continue;
      }
    }
    if (lowest->second.dirty()) {
      if (Status s = issue_write(lowest->first, lowest->second.data, lowest->second.changes()); !s) return s;
    }
    // Its buffer serves the next page kept (a journal being appended to
    // keeps a new page every few records): no allocation, no zeroing of a
    // buffer about to be read or zeroed over. (A request copies what it
    // sends: the buffer is free once issued.)
    if (spare_.empty()) spare_ = std::move(lowest->second.data);
    kept_.erase(lowest);
  }
  return Status::ok();
}

void ByteFile::keep_read_pages(size_t pages) {
  kept_limit_ = std::max(pages, kMaxCachedPages);
  let_go_unchanged(kept_limit_);
}

void ByteFile::let_go_unchanged(size_t keep_at_most) {
  for (auto at = kept_.begin(); at != kept_.end() && kept_.size() > keep_at_most;) {
    if (at->second.dirty()) {
      ++at;
      continue;
    }
    if (spare_.empty()) spare_ = std::move(at->second.data);
    at = kept_.erase(at);
  }
}

Status ByteFile::confirm_oldest_write() {
  Ticket ticket = writes_.front();
  writes_.pop_front();
  Status s = timed([&] { return client_.write_confirm(ticket); });
  if (s) stats_->pages_written.fetch_add(1, std::memory_order_relaxed);
  return s;
}

Status ByteFile::issue_write(int64_t page, std::span<const std::byte> data, ChangedBytes changed) {
  drop_ahead(page);  // it would hold what the page held before
  // The next read of part of it goes through the client, which refuses a
  // page whose last write failed (and orders it after writes queued).
  if (page == checked_page_) checked_page_ = -1;
  if (auto done = client_.write_at_once(fd_, page, data, changed)) {
    // (A local page: written to the page cache already, with no ticket to
    // confirm. Failed, it is refused as a request refused at once is.)
    if (!done->is_ok()) return *done;
    traced([&](TraceWriter& w, const TraceWriter::File& f) { w.write(f, page, data); });
    stats_->write_requests.fetch_add(1, std::memory_order_relaxed);
    stats_->pages_written.fetch_add(1, std::memory_order_relaxed);
    unsynced_ = true;
    return Status::ok();
  }
  auto ticket = client_.write_request(fd_, page, data);
  if (!ticket) return ticket.status();
  // (Recorded once requested: a write refused at once never happened. One
  // refused at its confirm did not either, yet stays in the trace.)
  traced([&](TraceWriter& w, const TraceWriter::File& f) { w.write(f, page, data); });
  stats_->write_requests.fetch_add(1, std::memory_order_relaxed);
  writes_.push_back(*ticket);
  unsynced_ = true;
  Status first;
  while (writes_.size() > concurrency_) {
    Status s = confirm_oldest_write();
    if (first.is_ok()) first = s;
  }
  return first;
}

Result<ByteFile::KeptIt> ByteFile::write_kept_run(KeptIt from, KeptIt end) {
  // A local journal's pages only: 4 KiB, each written whole anyway (no
  // sectors to leave alone, as a WAL's 16 KiB pages have), and a system
  // call each is what they cost most (LocalPagefile::write_pages).
  if (!local_ || layout_ != Layout::kBytes || page_size_ != kLocalJournalPageSize) return from;
  auto last = from;
  int64_t count = 0;
  while (last != end && last->second.dirty() && last->first == from->first + count && count < kMaxRunPages) {
    ++last;
    ++count;
  }
  if (count < 2) return from;
  run_out_.resize(static_cast<size_t>(count) * page_size_);
  size_t at = 0;
  for (auto it = from; it != last; ++it, at += page_size_) {
    std::memcpy(run_out_.data() + at, it->second.data.data(), page_size_);
  }
  const int64_t first = from->first;
  for (int64_t page = first; page < first + count; ++page) drop_ahead(page);
  if (checked_page_ >= first && checked_page_ < first + count) checked_page_ = -1;
  auto done = client_.write_pages_at_once(fd_, first, run_out_);
  if (!done) return from;  // one by one, then
  if (!done->is_ok()) return *done;
  at = 0;
  for (auto it = from; it != last; ++it, at += page_size_) {
    traced([&](TraceWriter& w, const TraceWriter::File& f) {
      w.write(f, it->first, std::span(run_out_).subspan(at, page_size_));
    });
    it->second.written();
  }
  stats_->write_requests.fetch_add(1, std::memory_order_relaxed);
  stats_->pages_written.fetch_add(static_cast<uint64_t>(count), std::memory_order_relaxed);
  unsynced_ = true;
  return last;
}

Status ByteFile::confirm_writes() {
  Status first;
  while (!writes_.empty()) {
    Status s = confirm_oldest_write();
    if (first.is_ok()) first = s;
  }
  return first;
}

Status ByteFile::flush_kept() {
  // A local rollback journal's header (page 1) changed in place, its length
  // not: SQLite's second sync of a commit (the record count), and PERSIST's
  // zeroed header. Its length page is written again as it is, because on
  // the disk it lies between page 1 and the checksum block that holds page
  // 1's entry (doc/page_format.md: the block at 4 KiB, page 0 at 8 KiB, page
  // 1 at 12 KiB): with it the sync writes back one run of blocks, not two
  // (four processes' commits in rollback mode, the disk's writes a commit
  // 13.3 to 12.3, unix's count). The bytes are the ones on the disk: the
  // length is the last one written or read (length_dirty_ false).
  const bool length_between = local_ && layout_ == Layout::kBytes && page_size_ == kLocalJournalPageSize &&
                              !length_dirty_ && size_ > 0 && kept_.contains(1) && kept_.at(1).dirty();
  for (auto at = kept_.begin(); at != kept_.end();) {
    if (!at->second.dirty()) {
      ++at;
      continue;
    }
    auto next = write_kept_run(at, kept_.end());
    if (!next) return next.status();
    if (*next == at) {
      if (Status s = issue_write(at->first, at->second.data, at->second.changes()); !s) return s;
      at->second.written();
      ++at;
    } else {
      at = *next;
    }
  }
  if (layout_ == Layout::kBytes && (length_dirty_ || length_between)) {
    std::vector<std::byte>& length = length_out_;
    if (length.size() != page_size_) length.assign(page_size_, std::byte{0});
    std::memcpy(length.data(), kLengthMagic, sizeof kLengthMagic);
    put_u64(length.data() + 8, static_cast<uint64_t>(size_));
    // Only its first bytes change: a local file with sector checksums
    // writes their sector alone where it knows the others' bytes on disk
    // (page 0 read whole under exclude_other_writers, as refresh_size reads
    // it at a WAL's write transaction), 4 KiB of 16 for each sync of a
    // growing WAL, and a block less to write back. Else the page whole.
    if (Status s = issue_write(0, length, ChangedBytes{0, kLengthBytes}); !s) return s;
  }
  // (A kPages file's size is its pages: nothing to write. Left set, it
  // would read as pending for ever, and reload() would never read the
  // size another process made.)
  length_dirty_ = false;
  return Status::ok();
}

Result<size_t> ByteFile::read(std::span<std::byte> out, int64_t offset) {
  if (offset < 0) return Status::invalid_argument("read", "negative offset");
  stats_->bytes_read.fetch_add(out.size(), std::memory_order_relaxed);
  if (offset + static_cast<int64_t>(out.size()) > size_) {
    // Past the end as this descriptor last saw it: another may have grown
    // the file since (a checkpoint, or WAL frames, that a wal-index this
    // VFS is not told of describes). Ask before answering with zeros.
    if (Status s = reload(); !s) return s;
  }
  size_t avail = offset >= size_ ? 0 : static_cast<size_t>(std::min<int64_t>(size_ - offset, static_cast<int64_t>(out.size())));
  size_t done = 0;
  while (done < avail) {
    int64_t at = offset + static_cast<int64_t>(done);
    int64_t page = page_of(at);
    size_t in_page = static_cast<size_t>(at % page_size_);
    size_t n = std::min<size_t>(page_size_ - in_page, avail - done);
    if (n == page_size_) {
      if (Status s = fetch(page, out.subspan(done, n)); !s) return s;
    } else if (auto kept = kept_.find(page); kept != kept_.end()) {
      std::memcpy(out.data() + done, kept->second.data.data() + in_page, n);
    } else if (layout_ == Layout::kPages && !read_ahead_pays_) {
      // A local database page costs nothing to read again (the page
      // cache), and one not kept is never stale: another connection's
      // checkpoint may write it with no lock of this VFS's in between (a
      // wal-index kept above the VFS).
      if (Status s = read_part(page, in_page, out.subspan(done, n)); !s) return s;
    } else {
      // Part of a page (a header, a journal record): keep it, the next read
      // is most likely the rest of it.
      auto got = keep(page);
      if (!got) return got.status();
      std::memcpy(out.data() + done, (*got)->data.data() + in_page, n);
    }
    done += n;
  }
  std::memset(out.data() + avail, 0, out.size() - avail);
  return avail;
}

Status ByteFile::write(std::span<const std::byte> data, int64_t offset) {
  if (offset < 0) return Status::invalid_argument("write", "negative offset");
  // (A page written in part is read first, and one past a stale end would
  // read as zeros.)
  if (auto size = current_size(); !size) return size.status();
  if (follows_sqlite_ && layout_ == Layout::kPages && size_ == 0 && offset == 0 && data.size() < page_size_) {
    if (uint32_t size = sqlite_page_one_size(data); size != 0) {
      Status s = client_.set_page_size(fd_, size);
      // A remote file, or one that holds pages after all: as it is.
      if (!s && !s.is(Code::kInvalidArgument)) return s;
      if (s) adopt_page_size(size);
    }
  }
  stats_->bytes_written.fetch_add(data.size(), std::memory_order_relaxed);
  size_t done = 0;
  while (done < data.size()) {
    int64_t at = offset + static_cast<int64_t>(done);
    int64_t page = page_of(at);
    size_t in_page = static_cast<size_t>(at % page_size_);
    size_t n = std::min<size_t>(page_size_ - in_page, data.size() - done);
    if (n == page_size_) {
      kept_.erase(page);  // wholly replaced
      if (Status s = issue_write(page, data.subspan(done, n)); !s) return s;
    } else {
      auto got = keep(page);
      if (!got) return got.status();
      std::memcpy((*got)->data.data() + in_page, data.data() + done, n);
      (*got)->changed(in_page, n);
      unsynced_ = true;
    }
    done += n;
    // Raised as each page is taken care of, so that a page kept above
    // reads (from the store) what existed before this write.
    if (at + static_cast<int64_t>(n) > size_) {
      size_ = at + static_cast<int64_t>(n);
      length_dirty_ = true;
    }
  }
  return Status::ok();
}

Status ByteFile::truncate(int64_t size) {
  if (size < 0) return Status::invalid_argument("truncate", "negative size");
  if (auto known = current_size(); !known) return known.status();  // (the new last page is read first)
  drop_all_ahead();
  // Emptied, a journal or WAL keeps no length page either: a file of no
  // pages is one of no bytes, which a stat can tell (xAccess).
  int64_t keep_pages = size == 0 ? 0 : pages_for(size);
  kept_.erase(kept_.lower_bound(keep_pages), kept_.end());
  if (size < size_ && size % page_size_ != 0) {
    // Bytes past the new end must read as zeros when the file grows again.
    auto tail = keep(page_of(size));
    if (!tail) return tail.status();
    size_t from = static_cast<size_t>(size % page_size_);
    std::memset((*tail)->data.data() + from, 0, page_size_ - from);
    (*tail)->changed(from, page_size_ - from);
  }
  size_ = size;
  length_dirty_ = size != 0;
  checked_page_ = -1;
  if (Status s = drain(); !s) return s;
  unsynced_ = true;
  Status s = client_.truncate(fd_, keep_pages);
  if (s) traced([&](TraceWriter& w, const TraceWriter::File& f) { w.truncate(f, keep_pages); });
  return s;
}

Status ByteFile::drain() {
  Status first = flush_kept();
  Status s = confirm_writes();
  return first.is_ok() ? s : first;
}

Status ByteFile::sync() {
  if (Status s = drain(); !s) return s;
  stats_->syncs.fetch_add(1, std::memory_order_relaxed);
  traced([](TraceWriter& w, const TraceWriter::File& f) { w.sync(f); });
  if (Status s = client_.sync(fd_); !s) return s;
  unsynced_ = false;
  return Status::ok();
}

void ByteFile::drop_cache() {
  drop_all_ahead();
  let_go_unchanged(0);
  last_read_page_ = -2;
  // The client's pool keeps pages per descriptor: it would not see them change.
  (void)client_.drop_cached(fd_);
}

void ByteFile::adopt_page_size(uint32_t page_size) {
  if (page_size == page_size_) return;
  drop_all_ahead();
  kept_.clear();  // (nothing of a file that held nothing)
  checked_.reset();
  checked_page_ = -1;
  page_size_ = page_size;
  traced([](TraceWriter& w, const TraceWriter::File& f) { w.resized(f); });
}

Result<PageIo*> ByteFile::io() const {
  if (!io_ || ClientAccess::stopped(client_)) return Status::invalid_argument("client", "is stopped");
  return io_.get();
}

Status ByteFile::refresh_size() {
  // Through the PageIo (client/client_access.h): no request bookkeeping.
  auto io = this->io();
  if (!io) return io.status();
  // A database's size is its pages, counted at the page size they have
  // (another descriptor may have given it SQLite's at its first write). A
  // remote journal or WAL is counted too: its client learns of pages
  // another client added from the count (a read past the end it knows is
  // not sent). A local one is not: a file of none reads page 0 as beyond
  // its end, all zeros, length 0 (a stat fewer per transaction).
  int64_t pages = -1;  // not counted
  if (layout_ == Layout::kPages || !local_) {
    auto counted = (*io)->size_pages();
    if (!counted) return counted.status();
    pages = *counted;
  }
  if (layout_ == Layout::kPages) {
    adopt_page_size((*io)->page_size());
    size_ = pages * page_size_;
  } else if (pages == 0) {
    size_ = 0;
  } else {
    // The length page, read whole and checked. Read under a WAL's write
    // lock, its sectors' checksums are then known exactly, and the length
    // written at the commit's sync costs one sector (flush_kept).
    auto length = read_length(name_);
    if (!length) return length.status();
    size_ = *length;
  }
  size_stale_ = false;
  return Status::ok();
}

bool ByteFile::pending() const {
  bool dirty = std::any_of(kept_.begin(), kept_.end(), [](const auto& kept) { return kept.second.dirty(); });
  return dirty || length_dirty_ || !writes_.empty();
}

Status ByteFile::reload() {
  if (pending()) return Status::ok();
  drop_cache();
  return refresh_size();
}

void ByteFile::forget_unsent() {
  (void)confirm_writes();
  (void)client_.abandon_failed_writes(fd_);
  for (auto& [page, kept] : kept_) {
    if (spare_.empty()) spare_ = std::move(kept.data);
  }
  kept_.clear();
  length_dirty_ = false;
  checked_page_ = -1;
  drop_cache();
  size_stale_ = true;
}

void ByteFile::reload_lazily() {
  if (pending()) return;
  drop_cache();
  size_stale_ = true;
}

Result<int64_t> ByteFile::current_size() {
  if (size_stale_) {
    if (Status s = refresh_size(); !s) return s;
  }
  return size_;
}

Status ByteFile::set_concurrency(uint32_t concurrency) {
  if (Status s = client_.set_concurrency(fd_, concurrency); !s) return s;
  concurrency_ = concurrency;
  return Status::ok();
}

Status ByteFile::close() {
  if (closed_) return Status::ok();
  closed_ = true;
  Status first = drain();
  drop_all_ahead();
  Status s = client_.close(fd_);
  io_.reset();
  traced([](TraceWriter& w, const TraceWriter::File& f) { w.closed(f); });
  return first.is_ok() ? s : first;
}

}  // namespace pagefile::vfs
