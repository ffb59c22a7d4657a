// LocalPagefile's checksum blocks (doc/page_format.md): where a page's
// entries lie, reading them, storing them into a mapped block, and what it
// knows of the checksums on disk: those kept in memory (kept_sums), those
// noted while no one else writes (a span), and the pages whose last write
// failed (suspects).

#include "store/local_pagefile.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <vector>

#include <fmt/format.h>

#include "core/little_endian.h"
#include "core/mutex.h"
#include "core/os_error.h"
#include "core/page_checksum.h"
#include "store/file_io.h"
#include "store/read_mapping.h"

namespace pagefile {

namespace {

// Checksum blocks a file maps at most (the first 256 Ki pages, written in
// any order), and in all in this process (each is a mapping, of which a
// process may have some 65 000, shared with its host's own); past them
// entries are written.
constexpr size_t kMaxMappedGroups = 1024;
constexpr size_t kMaxMappedBlocksPerProcess = 16384;

// Entries a file that is not a sole writer's writes in a span of exclusion
// before it maps their blocks: a small transaction's few pages (and a
// rollback journal made and deleted by each) cost more to map than to
// write, since a block's mapping is an fallocate, an mmap, an madvise and
// later an munmap, and each span an fstat (check_maps). Four processes
// committing small transactions in rollback mode took 13% longer in one
// run when every entry was stored (bench/README.md, checksums.sh).
constexpr uint32_t kEntryWritesBeforeMapping = 32;
std::atomic<size_t> g_mapped_blocks{0};

// Entries stored into a mapped checksum block (LocalPagefile::write_entries).
struct EntryStore {
  std::byte* at;
  std::span<const std::byte> entries;
};

void store_entries(void* arg) {
  auto* store = static_cast<EntryStore*>(arg);
  // Each entry's old checksum before its new one, each in one aligned
  // store: a crash between them leaves (old, old), which the page on disk
  // still matches, never (new, older).
  // (An entry: the two values, LocalPagefile::kEntryBytes.)
  for (size_t e = 0; e < store->entries.size(); e += 2 * sizeof(uint64_t)) {
    auto word = [&](size_t offset) {
      return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(store->at + e + offset));
    };
    word(8).store(get_le<uint64_t>(store->entries, e + 8), std::memory_order_release);
    word(0).store(get_le<uint64_t>(store->entries, e), std::memory_order_release);
  }
}

// Whether `bytes` may be page `page` whose stored checksum is `sum` and
// whose bytes hash to `hash`: kNoChecksum stands for a page never written.
bool matches(uint64_t sum, uint64_t hash, std::span<const std::byte> bytes) {
  return sum == kNoChecksum ? all_zero(bytes) : sum == hash;
}

}  // namespace

std::optional<uint64_t> LocalPagefile::Entries::matching(uint32_t u, uint64_t hash,
                                                        std::span<const std::byte> unit) const {
  if (matches(current(u), hash, unit)) return current(u);
  if (matches(previous(u), hash, unit)) return previous(u);
  return std::nullopt;
}

off_t LocalPagefile::page_offset(int64_t page) const {
  off_t at = static_cast<off_t>(kHeaderSize) + static_cast<off_t>(page) * page_size();
  return grouped_ ? at + (page / kGroupPages + 1) * sum_block_bytes_ : at;
}

off_t LocalPagefile::group_bytes() const {
  return sum_block_bytes_ + static_cast<off_t>(kGroupPages) * page_size();
}

off_t LocalPagefile::block_offset(int64_t group) const {
  return static_cast<off_t>(kHeaderSize) + group * group_bytes();
}

off_t LocalPagefile::entry_offset(int64_t page) const {
  return block_offset(page / kGroupPages) +
         static_cast<off_t>(page % kGroupPages) * static_cast<off_t>(kEntryBytes * units_);
}

Result<std::vector<std::byte>> LocalPagefile::read_group_block(int64_t page) const {
  std::vector<std::byte> block(static_cast<size_t>(sum_block_bytes_));
  // (Past the end of the file: zeros, no entries recorded.)
  auto got = pread_full(fd_, block, block_offset(page / kGroupPages), name_);
  if (!got) return got.status();
  return block;
}

Status LocalPagefile::read_block(int64_t page, Entries& entries) const {
  auto block = read_group_block(page);
  if (!block) return block.status();
  entries = entries_in(*block, page % kGroupPages);
  const int64_t first = page - page % kGroupPages;
  for (int64_t p = 0; p < kGroupPages; ++p) {
    UnitSums current;
    for (uint32_t u = 0; u < units_; ++u) current[u] = entry_in(*block, p, u);
    keep_sums(first + p, &current);
  }
  return Status::ok();
}

Status LocalPagefile::read_entries(int64_t page, Entries& entries) const {
  auto mine = std::span(entries.bytes).first(kEntryBytes * units_);
  std::fill(mine.begin(), mine.end(), std::byte{0});  // (what the file does not reach)
  auto read = pread_full(fd_, mine, entry_offset(page), name_);
  return read.status();
}

const ReadMapping* LocalPagefile::read_map() const {
  static const auto system_page = static_cast<uint32_t>(::getpagesize());
  return read_map_ && page_size() >= system_page ? read_map_.get() : nullptr;
}

void LocalPagefile::unit_sums(int64_t page, std::span<const std::byte> bytes, UnitSums& sums) const {
  // A sector's checksum is seeded with its number in the file, as a page's
  // is with the page's: one per page makes it the page's checksum.
  const size_t unit = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    sums[u] = page_checksum(bytes.subspan(size_t{u} * unit, unit), page * units_ + u);
  }
}

Result<std::byte*> LocalPagefile::mapped_block(int64_t group) {
  if (auto it = maps_.find(group); it != maps_.end()) return it->second;
  if (cannot_map_ || maps_.size() >= kMaxMappedGroups) return nullptr;
  // Every block is a mapping of its own, and a process may have some 65 000.
  if (g_mapped_blocks.fetch_add(1) >= kMaxMappedBlocksPerProcess) {
    g_mapped_blocks.fetch_sub(1);
    return nullptr;
  }
  auto give_back = [] { g_mapped_blocks.fetch_sub(1); };
  off_t at = block_offset(group);
  auto size = static_cast<size_t>(sum_block_bytes_);
  // A block past the pages this object knows of heads a group being
  // appended: it is reserved with the group's pages, in one piece (beyond
  // the file's end, which they do not move), so that the file system lays
  // them out after it. The block alone is allocated at once, and the pages,
  // allocated when they are written back, land elsewhere: 2000 pages
  // appended by one transaction made 16 extents instead of 3, and took
  // 90.2 ms against 88.3 with this (20 runs each, in turn). (Not the first
  // group's: a small file would reserve a group. A failure is no error: the
  // block's own reservation, next, says whether there is room.)
  if (const int64_t known = end_pages_.load(); group > 0 && group * kGroupPages >= known && at >= reserved_to_) {
    const off_t want = std::min(group_bytes(), sum_block_bytes_ + kMaxReservationBytes);
    if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, at, want) == 0) reserved_to_ = at + want;
  }
  // Allocated first: a store into a hole of a full disk would fault. (This
  // extends the file over the block, as a pwrite of an entry in it would.)
  if (::fallocate(fd_, 0, at, sum_block_bytes_) != 0) {
    if (errno != EOPNOTSUPP && errno != ENOSYS) {
      Status s = errno_status(errno, name_, fmt::format("reserve space for the checksums of group {}", group));
      give_back();
      return s;
    }
    cannot_map_ = true;
    give_back();
    return nullptr;
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, at);
  if (map == MAP_FAILED) {
    // (EINVAL, as where the system's page is larger than a block: never.)
    if (errno == EINVAL) cannot_map_ = true;
    give_back();
    return nullptr;
  }
  // Read in now, so that a disk error reading the block is an error here
  // rather than a fault at a store. A kernel without MADV_POPULATE_WRITE
  // (before 5.14) cannot say: entries are then written, not stored.
  if (::madvise(map, size, MADV_POPULATE_WRITE) != 0) {
    int err = errno;
    ::munmap(map, size);
    give_back();
    if (err == EINVAL) {
      cannot_map_ = true;
      return nullptr;
    }
    return errno_status(err, name_, fmt::format("read the checksums of group {}", group));
  }
  return maps_[group] = static_cast<std::byte*>(map);
}

void LocalPagefile::unmap_from(off_t end) {
  reserved_to_ = std::min(reserved_to_, end);  // (a truncate let the reservation go)
  for (auto it = maps_.begin(); it != maps_.end();) {
    if (block_offset(it->first) + sum_block_bytes_ > end) {
      ::munmap(it->second, static_cast<size_t>(sum_block_bytes_));
      g_mapped_blocks.fetch_sub(1);
      it = maps_.erase(it);
    } else {
      ++it;
    }
  }
}

size_t LocalPagefile::mapped_blocks() {
  MutexLock lock(maps_mu_);
  return maps_.size();
}

bool LocalPagefile::check_maps() {
  const uint64_t gen = span_gen_.load();
  const uint32_t size = page_size();
  if (maps_gen_ == gen && maps_page_size_ == size) return true;
  if (maps_page_size_ != size) {
    unmap_from(0);
  } else if (!maps_.empty()) {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return false;
    unmap_from(st.st_size);
  }
  maps_gen_ = gen;
  maps_page_size_ = size;
  return true;
}

Status LocalPagefile::write_entries(int64_t page, std::span<const std::byte> entries) {
  // (can_guard last: it asks the thread's signal mask, a system call.)
  if (map_entries_ &&
      (sole_writer_ || (writes_excluded_.load() && span_entry_writes_.fetch_add(1) >= kEntryWritesBeforeMapping)) &&
      can_guard()) {
    // Held across the store: a truncate unmaps under it.
    MutexLock lock(maps_mu_);
    if (!sole_writer_ && !check_maps()) return pwrite_full(fd_, entries, entry_offset(page), name_);
    auto block = mapped_block(page / kGroupPages);
    if (!block) return block.status();
    if (*block != nullptr) {
      // The seam, as for a pwrite (pwrite_full's own, where no block is
      // mapped): an entry is smaller than a sector, so a torn write of it
      // leaves nothing, and a short one all of it.
      if (auto fault = DiskFaults::next(DiskOp::kWrite); fault && *fault != DiskFault::kShortWrite) {
        return errno_status(fault_errno(*fault), name_, fmt::format("write at byte {}", entry_offset(page)));
      }
      EntryStore store{*block + static_cast<size_t>(page % kGroupPages) * kEntryBytes * units_, entries};
      if (run_guarded(store_entries, &store)) return Status::ok();
      // A fault (the block evicted and read back from a failing disk, or
      // cut behind this descriptor's back): the block is let go, and the
      // entries written, which says what is wrong.
      ::munmap(*block, static_cast<size_t>(sum_block_bytes_));
      g_mapped_blocks.fetch_sub(1);
      maps_.erase(page / kGroupPages);
    }
  }
  return pwrite_full(fd_, entries, entry_offset(page), name_);
}

int64_t LocalPagefile::span_key(int64_t page, uint32_t unit) const {
  // (Pages past the last one any file can hold key nothing: forget_on_disk's end.)
  return page > kMaxPageNumber ? INT64_MAX : page * units_ + unit;
}

void LocalPagefile::note_on_disk(int64_t page, const UnitSums& sums, uint64_t gen) const {
  if (!writes_excluded_.load()) return;
  MutexLock lock(span_mu_);
  if (gen != span_gen_.load()) return;
  const bool in_sums = span_sums_.contains(span_key(page, 0));
  if (units_ == 1 && !in_sums) {
    // (A group's notes, once it has some, stay in its array until the span
    // ends: the page has no note in span_sums_ to be looked up before it.)
    const int64_t group = page / kGroupPages;
    const auto at = static_cast<size_t>(page % kGroupPages);
    SpanBlock* held = nullptr;
    if (auto notes = span_notes_.find(group); notes != span_notes_.end()) {
      held = notes->second.get();
    } else if (span_notes_.size() < kMaxSpanBlocks) {
      held = span_notes_.emplace(group, std::unique_ptr<SpanBlock>(new SpanBlock)).first->second.get();
    } else if (auto block = span_blocks_.find(group); block != span_blocks_.end()) {
      // Past the arrays' bound, where its group's block is held, the note
      // goes there: the block is looked up for the page, and must not keep
      // an older checksum than the page's last note (the write that read it).
      held = block->second.get();
    }
    if (held != nullptr) {
      held->sums[at] = sums[0];
      held->known.set(at);
      return;
    }
  }
  if (!in_sums && span_sums_.size() + units_ > kMaxSpanSums) return;
  for (uint32_t u = 0; u < units_; ++u) span_sums_[span_key(page, u)] = sums[u];
}

Status LocalPagefile::note_block_on_disk(int64_t page, uint64_t gen) const {
  {
    // (Past the bound, each write reads its own entry, as without blocks.)
    MutexLock lock(span_mu_);
    if (span_blocks_.size() >= kMaxSpanBlocks || span_blocks_.contains(page / kGroupPages)) return Status::ok();
  }
  // Entry writes of other pages (other threads on this descriptor) in
  // flight, or begun before the block is noted: it may hold entries they
  // replace, and their own notes may be refused (the bound, a new span).
  const uint64_t begun = entry_writes_begun_.load();
  if (begun != entry_writes_done_.load()) return Status::ok();
  auto block = read_group_block(page);
  if (!block) return block.status();
  auto noted = std::make_unique<SpanBlock>();
  for (int64_t p = 0; p < kGroupPages; ++p) {
    const uint64_t current = entry_in(*block, p, 0);
    noted->sums[static_cast<size_t>(p)] = current;
    // (Retired by a truncate that failed: its bytes say.)
    noted->known[static_cast<size_t>(p)] = !Entries::is_retired(current, entry_in(*block, p, 0, true));
  }
  MutexLock lock(span_mu_);
  if (gen != span_gen_.load() || begun != entry_writes_begun_.load()) return Status::ok();
  // (A page noted keeps its note: it is looked up first.)
  span_blocks_.try_emplace(page / kGroupPages, std::move(noted));
  return Status::ok();
}

bool LocalPagefile::on_disk_sum(int64_t page, UnitSums& sums) const {
  if (!writes_excluded_.load()) return false;
  MutexLock lock(span_mu_);
  // Its own note (in its group's array, else in span_sums_), else its
  // group's block.
  const auto at = static_cast<size_t>(page % kGroupPages);
  auto known = [&](const std::unordered_map<int64_t, std::unique_ptr<SpanBlock>>& held) {
    auto found = held.find(page / kGroupPages);
    if (found == held.end() || !found->second->known[at]) return false;
    sums[0] = found->second->sums[at];
    return true;
  };
  if (units_ == 1 && known(span_notes_)) return true;
  for (uint32_t u = 0; u < units_; ++u) {
    auto found = span_sums_.find(span_key(page, u));
    if (found == span_sums_.end()) return units_ == 1 && known(span_blocks_);
    sums[u] = found->second;
  }
  return true;
}

void LocalPagefile::forget_on_disk(int64_t from_page, int64_t to_page) const {
  MutexLock lock(span_mu_);
  for (auto* held : {&span_notes_, &span_blocks_}) {
    for (auto& [group, block] : *held) {
      const int64_t first = group * kGroupPages;
      for (int64_t p = std::max(from_page, first); p < std::min(to_page, first + kGroupPages); ++p) {
        block->known.reset(static_cast<size_t>(p - first));
      }
    }
  }
  if (span_sums_.empty()) return;
  const int64_t from = span_key(from_page, 0);
  const int64_t to = span_key(to_page, 0);
  std::erase_if(span_sums_, [&](const auto& kv) { return kv.first >= from && kv.first < to; });
}

void LocalPagefile::new_span() {
  MutexLock lock(span_mu_);
  ++span_gen_;
  span_entry_writes_ = 0;
  span_sums_.clear();
  span_notes_.clear();
  span_blocks_.clear();
}

bool LocalPagefile::is_suspect(int64_t page) const {
  if (suspect_count_.load(std::memory_order_relaxed) == 0) return false;
  MutexLock lock(suspects_mu_);
  return suspects_.contains(page);
}

void LocalPagefile::set_suspect(int64_t page, bool suspect) {
  if (!suspect && suspect_count_.load(std::memory_order_relaxed) == 0) return;
  MutexLock lock(suspects_mu_);
  if (suspect) {
    suspects_.insert(page);
  } else {
    suspects_.erase(page);
  }
  suspect_count_ = suspects_.size();
}

Status LocalPagefile::checksums_on_disk(int64_t page, UnitSums& sums) const {
  std::vector<std::byte> bytes(page_size());
  // (Bytes past the end of the file stay zeros, as a hole reads.)
  if (auto got = pread_full(fd_, bytes, page_offset(page), name_); !got) return got.status();
  Entries entries;
  if (Status s = read_entries(page, entries); !s) return s;
  UnitSums hash;
  unit_sums(page, bytes, hash);
  const size_t unit_bytes = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    // The slot this unit's bytes match; else (a unit damaged already) the
    // current one, as any write takes.
    auto unit = std::span(bytes).subspan(size_t{u} * unit_bytes, unit_bytes);
    sums[u] = entries.matching(u, hash[u], unit).value_or(entries.current(u));
  }
  return Status::ok();
}

bool LocalPagefile::trusted_sums(int64_t page, UnitSums& sums) const {
  return sole_writer_ && kept_sums(page, sums);
}

bool LocalPagefile::kept_sums(int64_t page, UnitSums& sums) const {
  auto first = static_cast<size_t>(page) * units_;
  for (uint32_t u = 0; u < units_; ++u) {
    sums[u] = sums_.get(first + u);
    if (sums[u] == kNoChecksum) return false;
  }
  return true;
}

void LocalPagefile::keep_sums(int64_t page, const UnitSums* sums) const {
  auto first = static_cast<size_t>(page) * units_;
  for (uint32_t u = 0; u < units_; ++u) sums_.set(first + u, sums ? (*sums)[u] : kNoChecksum);
}

}  // namespace pagefile
