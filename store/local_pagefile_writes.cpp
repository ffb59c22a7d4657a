// LocalPagefile's writes: space reserved first, a page's entries before
// its bytes, the end of the file, sync and truncate.

#include "store/local_pagefile.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "core/mutex.h"
#include "core/os_error.h"
#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "store/file_io.h"

namespace pagefile {

namespace {

// Pages below this have their reservation remembered (a bit each, at most
// 2 MiB); a page beyond it is reserved before every write.
constexpr size_t kMaxRememberedReservations = size_t{1} << 24;


// (The context is formatted only for an error: this runs once per page.)
Status page_context(int64_t page, Status s) { return s ? s : s.with_context(fmt::format("page {}", page)); }

}  // namespace

Status LocalPagefile::write_page(int64_t page, std::span<const std::byte> data, uint64_t checksum,
                                 ChangedBytes changed) {
  if (Status s = check_writable("write"); !s) return s;
  if (Status s = check_page_access(page, data.size(), page_size(), name_); !s) return s;
  off_t offset = page_offset(page);
  // Reserve the blocks first: when the disk is full this fails before a
  // byte of the page is written, so no page is left half old, half new.
  if (Status s = reserve(page); !s) return s;
  if (!checked_) {
    Status s = page_context(page, pwrite_full(fd_, data, offset, name_));
    if (s) raise_end(page + 1);
    return s;
  }
  std::lock_guard whole(stripe(page));
  PageWrite w;
  if (Status s = begin_write(page, data, checksum, changed, w); !s) return s;
  const size_t unit_bytes = data.size() / units_;
  Status s = page_context(page, pwrite_full(fd_, data.subspan(w.first * unit_bytes, (w.last - w.first) * unit_bytes),
                                            offset + static_cast<off_t>(w.first * unit_bytes), name_));
  end_write(w, s);
  return s;
}

Status LocalPagefile::write_pages(int64_t first, std::span<const std::byte> data) {
  const size_t page_bytes = page_size();
  if (data.size() % page_bytes != 0) {
    return Status::invalid_argument(name_, fmt::format("write of {} bytes: not whole pages of {}", data.size(), page_bytes));
  }
  const auto count = static_cast<int64_t>(data.size() / page_bytes);
  if (count == 1) return write_page(first, data);
  // (The first checked before first + count is counted, which would
  // overflow; the pages between it and the last are in range too.)
  if (Status s = check_page_access(first, page_bytes, page_size(), name_); !s) return s;
  if (Status s = check_page_access(first + (count - 1), page_bytes, page_size(), name_); !s) return s;
  if (Status s = check_writable("write"); !s) return s;
  for (int64_t page = first; page < first + count; ++page) {
    if (Status s = reserve(page); !s) return s;
  }
  // A group's pages lie one after the other on disk; the next group's
  // checksum block comes between it and the next page.
  for (int64_t from = first; from < first + count;) {
    int64_t to = grouped_ ? std::min(first + count, (from / kGroupPages + 1) * kGroupPages) : first + count;
    auto bytes = data.subspan(static_cast<size_t>(from - first) * page_bytes, static_cast<size_t>(to - from) * page_bytes);
    if (Status s = write_run(from, to, bytes); !s) return s;
    from = to;
  }
  return Status::ok();
}

Status LocalPagefile::write_run(int64_t from, int64_t to, std::span<const std::byte> data) {
  const off_t offset = page_offset(from);
  if (!checked_) {
    Status s = page_context(from, pwrite_full(fd_, data, offset, name_));
    if (s) raise_end(to);
    return s;
  }
  // Each page's stripe, taken in the stripes' order (as truncate takes them
  // all), for the whole run: the entries first, then the bytes.
  std::array<bool, std::tuple_size_v<decltype(stripes_)>> held{};
  for (int64_t page = from; page < to; ++page) held[static_cast<uint64_t>(page) % held.size()] = true;
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i]) locks.emplace_back(stripes_[i]);
  }
  const size_t page_bytes = page_size();
  const size_t entry_bytes = kEntryBytes * units_;
  std::vector<PageWrite> writes(static_cast<size_t>(to - from));
  // The run's entries lie side by side in their block: written with one
  // call, as its pages are (a journal's run of 16 pages was 16 writes of
  // 16 bytes, and one of 64 KiB).
  std::vector<std::byte> entries(writes.size() * entry_bytes);
  for (int64_t page = from; page < to; ++page) {
    auto at = static_cast<size_t>(page - from);
    if (Status s = begin_write(page, data.subspan(at * page_bytes, page_bytes), kNoChecksum, ChangedBytes{}, writes[at],
                               std::span(entries).subspan(at * entry_bytes, entry_bytes));
        !s) {
      // Nothing of the run is written yet: the pages before it hold their
      // old bytes, as a page whose own write failed.
      for (size_t i = 0; i < at; ++i) end_write(writes[i], s);
      return s;
    }
  }
  entry_writes_begun_.fetch_add(1);
  // Written, never stored into a mapped block (write_entries): runs are a
  // rollback journal's, made and deleted by each transaction, whose blocks
  // cost a mapping each (an fallocate, an mmap, an madvise, an munmap) and
  // extents to convert at its sync. Stored, 1000 rows updated in one
  // transaction took 4 to 6 ms longer, a tenth of its time.
  Status entries_written = pwrite_full(fd_, entries, entry_offset(from), name_);
  entry_writes_done_.fetch_add(1);
  if (!entries_written) {
    // Some entries may be on disk, each (new, old) pair matching the old
    // bytes still there: every page of the run is a page whose write failed.
    for (const PageWrite& w : writes) end_write(w, entries_written);
    return entries_written.with_context(fmt::format("checksums of pages {} to {}", from, to - 1));
  }
  Status s = page_context(from, pwrite_full(fd_, data, offset, name_));
  for (const PageWrite& w : writes) end_write(w, s);
  return s;
}

Status LocalPagefile::begin_write(int64_t page, std::span<const std::byte> data, uint64_t checksum,
                                  ChangedBytes changed, PageWrite& w, std::span<std::byte> entries_out) {
  w.page = page;
  sums_.prefetch(static_cast<size_t>(page) * units_);  // (kept below, after the hash)
  UnitSums& sums = w.sums;
  if (units_ == 1 && checksum != kNoChecksum) {
    sums[0] = checksum;
  } else {
    unit_sums(page, data, sums);
  }
  // The entries first, each old checksum kept beside the new one: until
  // the page itself is written (or if its write fails, or tears between
  // sectors), the old page, or each old sector, still matches.
  w.gen = span_gen_.load();  // (before the write: see span_sums_)
  Entries entries;
  UnitSums before{};
  // before[] are the checksums of the page's bytes on disk, exactly (read
  // or written here while no one else writes: on_disk_sum).
  bool exact_before = false;
  // A page past the end has no old content for a cut write to leave, so
  // no old checksum is worth reading.
  bool appended = appends(page);
  if (is_suspect(page)) {
    if (Status s = checksums_on_disk(page, before); !s) return page_context(page, s);
  } else if (trusted_sums(page, before) || appended) {
    // Nothing to read: before[] holds the kept checksums, which are the
    // file's, or the page is new and has no old bytes to keep.
  } else if (on_disk_sum(page, before)) {
    exact_before = true;
  } else if (!(units_ == 1 && writes_excluded_.load() && note_block_on_disk(page, w.gen) && on_disk_sum(page, before))) {
    if (Status s = read_entries(page, entries); !s) return page_context(page, s);
    bool retired = false;
    for (uint32_t u = 0; u < units_; ++u) {
      before[u] = entries.current(u);
      retired = retired || entries.retired(u);
    }
    // Cut by a truncate that failed (retire_entries), the page may still
    // hold the bytes its previous checksum matches, or be a hole since: the
    // bytes say which (rare: this reads the page).
    if (retired) {
      if (Status s = checksums_on_disk(page, before); !s) return page_context(page, s);
    }
  }
  // The units whose bytes are written, [first, last): all, but where the
  // caller says which bytes changed and the disk's checksums say that every
  // other unit holds the bytes the caller passed (it read them, and no one
  // else wrote since), only those that hold changed bytes. A WAL commit
  // changes one or two sectors of its last 16 KiB page: the others are not
  // written again, and a sync has a quarter to a half of the blocks to
  // write. (Only then: the disk keeps what it has in the others, so bytes
  // that differ from it would be lost, and a unit cut short by a file's
  // end would make the page not exist: the exact sums exist only for a
  // page read or written whole under exclusion, which no one truncates.)
  // Every unit's entry is written all the same (one write, in one block):
  // a unit whose bytes match only its previous checksum (another's write
  // cut after its entries) gets the pair (its checksum, its checksum), so
  // that a later write of it, torn, still leaves bytes that match.
  const size_t unit_bytes = data.size() / units_;
  w.first = 0;
  w.last = units_;
  if (exact_before && units_ > 1 && changed.size > 0 && changed.offset + changed.size <= data.size()) {
    const auto from = static_cast<uint32_t>(changed.offset / unit_bytes);
    const auto to = static_cast<uint32_t>((changed.offset + changed.size + unit_bytes - 1) / unit_bytes);
    bool others_as_on_disk = true;
    for (uint32_t u = 0; u < units_; ++u) {
      if ((u < from || u >= to) && sums[u] != before[u]) others_as_on_disk = false;
    }
    if (others_as_on_disk) {
      w.first = from;
      w.last = to;
    }
  }
  for (uint32_t u = 0; u < units_; ++u) entries.set(u, sums[u], before[u]);
  keep_sums(page, nullptr);  // (until the page is written: a failure leaves the old one)
  if (!entries_out.empty()) {
    std::copy_n(entries.bytes.begin(), kEntryBytes * units_, entries_out.begin());
    return Status::ok();
  }
  entry_writes_begun_.fetch_add(1);
  Status entry_written = write_entries(page, std::span(entries.bytes).first(kEntryBytes * units_));
  entry_writes_done_.fetch_add(1);
  if (!entry_written) {
    set_suspect(page, true);
    forget_on_disk(page, page + 1);
    return entry_written.with_context(fmt::format("checksum of page {}", page));
  }
  return Status::ok();
}

void LocalPagefile::end_write(const PageWrite& w, const Status& written) {
  set_suspect(w.page, !written);
  if (!written) {
    forget_on_disk(w.page, w.page + 1);
    return;
  }
  keep_sums(w.page, &w.sums);
  note_on_disk(w.page, w.sums, w.gen);
  raise_end(w.page + 1);
}

void LocalPagefile::raise_end(int64_t pages) {
  int64_t end = end_pages_.load();
  while (pages > end && !end_pages_.compare_exchange_weak(end, pages)) {
  }
}

Status LocalPagefile::reserve(int64_t page) {
  if (!reserve_first_) return Status::ok();
  auto index = static_cast<size_t>(page);
  {
    MutexLock lock(reserved_mu_);
    if (index < reserved_.size() && reserved_[index]) return Status::ok();
  }
  // A page appended at the end: the pages after it too, as many as come
  // before it up to 1 MiB and no further than its group (a checksum block
  // follows). Reserved one by one, a file growing a page at a time (a WAL)
  // gets its pages in blocks scattered over the disk, and each sync writes
  // each page with a request of its own. (Blocks reserved past the end
  // stay the file's until a truncate; doubling keeps them under the
  // file's size. "At the end" is within a run of the end this object
  // knows, which lags behind other descriptors' appends. A page written
  // anywhere else, a sparse file's, is reserved alone.)
  int64_t end = page + 1;  // (pages [page, end))
  const int64_t most = std::max<int64_t>(1, kMaxReservationBytes / page_size());
  if (const int64_t known = end_pages_.load(); page >= known && page - known < most) {
    const int64_t group_end = grouped_ ? (page / kGroupPages + 1) * kGroupPages : INT64_MAX;
    end = std::min(page + std::clamp<int64_t>(page, 1, most), group_end);
  }
  const off_t offset = page_offset(page);
  int rc = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, offset, page_offset(end - 1) + page_size() - offset);
  if (rc != 0 && end > page + 1) {
    // Room for this page alone, perhaps (a full disk, a quota): the page's
    // own reservation says.
    end = page + 1;
    rc = ::fallocate(fd_, FALLOC_FL_KEEP_SIZE, offset, page_size());
  }
  if (rc != 0) {
    if (errno == EOPNOTSUPP || errno == ENOSYS) return Status::ok();
    return errno_status(errno, name_, fmt::format("reserve space for page {}", page));
  }
  MutexLock lock(reserved_mu_);
  // (Beyond kMaxRememberedReservations a bit per page costs too much.)
  auto last = std::min(static_cast<size_t>(end), kMaxRememberedReservations);
  if (last > reserved_.size()) reserved_.resize(last);
  for (size_t i = index; i < last; ++i) reserved_[i] = true;
  return Status::ok();
}

Status LocalPagefile::sync_data(std::string_view what) const {
  if (auto fault = DiskFaults::next(DiskOp::kSync)) return errno_status(fault_errno(*fault), name_, what);
  if (::fdatasync(fd_) != 0) return errno_status(errno, name_, what);
  return Status::ok();
}

Status LocalPagefile::sync() {
  if (Status s = sync_data("fdatasync"); !s) return s;
  // A file this object created: its name too, once, unless a sync of its
  // directory made since did it.
  if (!dir_sync_due_.exchange(false)) return Status::ok();
  if (!DirSyncs::instance().done_since(dir_, dir_syncs_before_)) {
    if (Status s = fsync_dir(dir_); !s) {
      dir_sync_due_ = true;
      return s;
    }
  }
  return Status::ok();
}

Status LocalPagefile::retire_entries(off_t at, size_t bytes) {
  // Each entry's checksum becomes its previous one, and "never written"
  // its current: a page still there (the cut fails, or a crash comes
  // first) matches its previous checksum, and one that comes back as a
  // hole matches "never written". Zeros alone would fail the first.
  std::vector<std::byte> entries(bytes);
  if (auto got = pread_full(fd_, entries, at, name_); !got) return got.status();
  for (size_t e = 0; e + kEntryBytes <= bytes; e += kEntryBytes) {
    auto current = get_le<uint64_t>(entries, e);
    if (current == kNoChecksum) continue;  // never written, or retired already
    put_le<uint64_t>(entries, e, kNoChecksum);
    put_le<uint64_t>(entries, e + 8, current);
  }
  return pwrite_full(fd_, entries, at, name_);
}

Status LocalPagefile::truncate(int64_t pages) {
  if (Status s = check_writable("truncate"); !s) return s;
  if (pages != 0) {
    if (Status s = check_page_number(pages - 1, name_); !s) return s;
  }
  // No read or write of a page is midway while the file is cut: each runs
  // under its page's stripe, and these are all of them (in index order;
  // nothing else holds two). A read begun before the cut would otherwise
  // keep (keep_sums) the checksum of a page the cut takes, after the
  // forget_from below, and a sole writer's kept checksums are its writes'
  // previous ones (trusted_sums): the page, come back as a hole and its
  // next write failing, would match neither of its entry's.
  for (std::mutex& m : stripes_) m.lock();
  struct Unlock {
    decltype(stripes_)& stripes;
    ~Unlock() {
      for (std::mutex& m : stripes) m.unlock();
    }
  } unlock{stripes_};
  {
    // (Callers order a truncate against writes of the same object: the
    // client and the server both do.)
    MutexLock lock(reserved_mu_);
    if (static_cast<size_t>(pages) < reserved_.size()) reserved_.resize(static_cast<size_t>(pages));
  }
  sums_.forget_from(static_cast<size_t>(pages) * units_);
  forget_on_disk(pages);  // (cut, or kept with retired entries by a cut that fails)
  off_t end = pages == 0 ? static_cast<off_t>(kHeaderSize) : page_offset(pages - 1) + page_size();
  // A file whose page size may still change (set_empty_page_size) keeps its
  // first checksum block, its entries retired below, once it has held a page: its
  // length then says so to every descriptor.
  bool keep_block = pages == 0 && grouped_ && units_ == 1 && !sole_writer_ && !page_size_final_;
  if (keep_block) {
    // (Counted for the file's length: at most the header and that block.)
    if (auto counted = counted_pages(&end); !counted) return counted.status().with_context("truncate to 0 pages");
    end = std::min<off_t>(end, static_cast<off_t>(kHeaderSize) + sum_block_bytes_);
  }
  // Held until the file is cut: a store past the end would fault, and a
  // write meanwhile must not map a block again before it is gone.
  MutexLock maps(maps_mu_);
  unmap_from(end);
  if (keep_block && end > static_cast<off_t>(kHeaderSize)) {
    if (Status s = retire_entries(static_cast<off_t>(kHeaderSize), static_cast<size_t>(end) - kHeaderSize); !s) {
      return s.with_context("truncate to 0 pages");
    }
  } else if (grouped_ && pages % kGroupPages != 0) {
    // The entries of the pages cut from the last group go first: pages
    // that come back later as holes must not meet their old checksums.
    size_t bytes = static_cast<size_t>(kGroupPages - pages % kGroupPages) * kEntryBytes * units_;
    if (Status s = retire_entries(entry_offset(pages), bytes); !s) {
      return s.with_context(fmt::format("truncate to {} pages", pages));
    }
  }
  if (read_map_) read_map_->will_cut(end);
  auto fault = DiskFaults::next(DiskOp::kTruncate);
  if (fault || ::ftruncate(fd_, end) != 0) {
    return errno_status(fault ? fault_errno(*fault) : errno, name_, fmt::format("truncate to {} pages", pages));
  }
  end_pages_ = pages;
  // (Again: a read meanwhile may have noted a page now cut. One that has not
  // noted yet reads another span_gen_ when it does, and notes nothing.)
  span_gen_.fetch_add(1);
  forget_on_disk(pages);
  {
    // Only now: a page kept by a failed truncate keeps its mark.
    MutexLock lock(suspects_mu_);
    suspects_.erase(suspects_.lower_bound(pages), suspects_.end());
    suspect_count_ = suspects_.size();
  }
  return Status::ok();
}

bool LocalPagefile::appends(int64_t page) {
  if (sole_writer_) return page >= end_pages_.load();
  if (!writes_excluded_.load() || page < end_pages_.load()) return false;
  if (!end_counted_.load()) {
    // Another descriptor may have grown the file before this one's lock:
    // counted once for the lock's time, and raised (never lowered) to it.
    // (Higher than the file's end, as after another's truncate, only
    // costs reads: lower would take a page that is there for one that is
    // not.)
    MutexLock lock(end_mu_);
    if (!end_counted_.load()) {
      auto pages = size_pages();
      if (!pages) return false;  // (its entries are read instead)
      raise_end(*pages);
      end_counted_ = true;
    }
  }
  return page >= end_pages_.load();
}

}  // namespace pagefile
