#include "server/share_store.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/page_bounds.h"
#include "core/page_checksum.h"

namespace pagefile::net {

namespace {

// How many disk reads disk_read_log() keeps, the newest.
constexpr size_t kDiskReadLogEntries = size_t{1} << 20;

std::filesystem::path share_path(const std::filesystem::path& dir, uint64_t file_id) {
  return dir / "shares" / fmt::format("{}.pf", file_id);
}

}  // namespace

ShareStore::ShareStore(const ServerOptions& options, ServerTally& tally)
    : options_(options),
      tally_(tally),
      pool_(options.cache_pages, options.prefetch_pages),
      fences_(options.dir / "shares", options.sync != SyncMode::kNone) {}

std::unique_lock<std::mutex> ShareStore::hold_arm() {
  if (!emulated_disk()) return {};
  std::unique_lock arm(arm_);
  std::this_thread::sleep_for(options_.disk_latency);
  return arm;
}

std::mutex& ShareStore::page_lock(uint64_t file_id, int64_t page) {
  uint64_t h = file_id * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(page);
  return page_locks_[h % kPageLockStripes];
}

std::vector<std::unique_lock<std::mutex>> ShareStore::lock_all_pages() {
  std::vector<std::unique_lock<std::mutex>> all;
  all.reserve(kPageLockStripes);
  for (auto& m : page_locks_) all.emplace_back(m);
  return all;
}

Result<std::shared_ptr<LocalPagefile>> ShareStore::share(uint64_t file_id, uint32_t page_size, bool create,
                                                         bool sector_checksums) {
  MutexLock lock(shares_mu_);
  auto it = shares_.find(file_id);
  if (it != shares_.end()) {
    if (it->second->page_size() != page_size) {
      return Status::invalid_argument(
          fmt::format("file {}", file_id),
          fmt::format("has page size {}, request says {}", it->second->page_size(), page_size));
    }
    return it->second;
  }
  LocalPagefile::OpenSpec spec;
  spec.page_size = page_size;
  spec.create = create;
  spec.dsync = options_.sync == SyncMode::kDsync;
  spec.checksums = options_.checksums;
  spec.sole_writer = true;  // the server's directory lock keeps other servers out
  spec.sector_checksums = sector_checksums;
  // (Opening under shares_mu_ keeps two first requests from opening the
  // file twice; it happens once per file and server run.)
  auto file = LocalPagefile::open(share_path(options_.dir, file_id), spec);
  if (!file) return file.status();
  std::shared_ptr<LocalPagefile> shared = std::move(*file);
  shares_.emplace(file_id, shared);
  return shared;
}

bool ShareStore::reads_at_once(const ShareRef& share) {
  // (Without a pool there is no window: such a file reads as any other.)
  auto policy = pool_.declare(share.file_id, share.page_size, share.policy);
  bool window = policy && *policy == kGlobalSequential && pool_.enabled();
  return !window && !emulated_disk();
}

bool ShareStore::read_pooled(const ShareRef& share, int64_t first, uint32_t count, std::span<std::byte> out,
                             std::span<uint64_t> checksums) {
  if (!pool_.enabled()) return false;
  if (!pool_.declare(share.file_id, share.page_size, share.policy)) return false;  // (the disk's read says why)
  if (!pool_.pages()->read_run(share.file_id, first, count, out, checksums)) return false;
  tally_.pages_read += count;
  tally_.cache_hits += count;
  return true;
}

Status ShareStore::read(const ShareRef& ref, int64_t first, uint32_t count, std::span<std::byte> out,
                        std::span<uint64_t> checksums, std::optional<ShareLayout> layout, bool in_place) {
  uint64_t file_id = ref.file_id;
  uint32_t page_size = ref.page_size;
  auto file = share(file_id, page_size, /*create=*/false);
  if (!file && !file.status().is(Code::kNotFound)) return file.status();
  // A share on disk has this page size (share() checked): the pool takes
  // it, whatever size a read before named (that read was refused, or found
  // no share); with no share, a size other than the pool's is refused.
  auto policy = pool_.declare(file_id, page_size, ref.policy, /*sized=*/static_cast<bool>(file));
  if (!policy) return policy.status();
  bool global_sequential = *policy == kGlobalSequential;
  for (uint32_t i = 0; i < count; ++i) {
    int64_t page = first + i;
    auto buffer = out.subspan(static_cast<size_t>(i) * page_size, page_size);
    uint64_t sum = kNoChecksum;
    Status s = read_page(file, ref, page, buffer, global_sequential ? layout : std::nullopt, sum, in_place);
    if (!s) return s;
    if (!checksums.empty()) checksums[i] = sum;
  }
  return Status::ok();
}

Status ShareStore::read_page(const Result<std::shared_ptr<LocalPagefile>>& file, const ShareRef& ref,
                             int64_t page, std::span<std::byte> out, std::optional<ShareLayout> window,
                             uint64_t& checksum, bool in_place) {
  tally_.pages_read++;
  if (pool_.enabled() && pool_.pages()->read(ref.file_id, page, out, true, &checksum)) {
    tally_.cache_hits++;
    return Status::ok();
  }
  tally_.cache_misses++;
  if (!file) {  // nothing was ever written here: zeros, and no disk access
    std::memset(out.data(), 0, out.size());
    if (options_.checksums && !in_place) checksum = page_checksum(out, page);
    return Status::ok();
  }
  if (window && pool_.enabled()) return read_window(**file, ref.file_id, *window, page, out, checksum);
  auto arm = hold_arm();
  Status s = read_miss(**file, ref.file_id, page, out, checksum);
  if (s && in_place) checksum = kNoChecksum;  // checked in `out` by the store, as it came from disk
  return s;
}

Status ShareStore::read_from_disk(LocalPagefile& file, uint64_t file_id, int64_t page, std::span<std::byte> out,
                                  uint64_t& checksum) {
  auto r = file.read_page(page, out, options_.checksums ? &checksum : nullptr);
  if (!r) return r.status();
  tally_.disk_reads++;
  MutexLock log(log_mu_);
  disk_read_log_.emplace_back(file_id, page);
  if (disk_read_log_.size() > kDiskReadLogEntries) disk_read_log_.pop_front();
  return Status::ok();
}

Status ShareStore::read_miss(LocalPagefile& file, uint64_t file_id, int64_t page, std::span<std::byte> out,
                             uint64_t& checksum) {
  if (!pool_.enabled()) return read_from_disk(file, file_id, page, out, checksum);
  std::lock_guard lock(page_lock(file_id, page));
  if (Status s = read_from_disk(file, file_id, page, out, checksum); !s) return s;
  pool_.pages()->fill(file_id, page, out, checksum);
  return Status::ok();
}

void ShareStore::reset_window(uint64_t file_id, int64_t pages) {
  std::shared_ptr<Window> w;
  {
    MutexLock lock(windows_mu_);
    auto it = windows_.find(file_id);
    if (it == windows_.end()) return;
    w = it->second;
  }
  MutexLock fill(w->fill);
  w->read_through = std::min(w->read_through, pages - 1);
}

std::shared_ptr<ShareStore::Window> ShareStore::window(uint64_t file_id) {
  MutexLock lock(windows_mu_);
  auto& w = windows_[file_id];
  if (!w) w = std::make_shared<Window>();
  return w;
}

// The window of TOPs 2.2. A miss at `page` beyond the window reads every
// page of this server's share from the window's end up to page + k in
// ascending order, as one disk access (one seek, then a run the emulated
// disk takes as free), keeps the pages other readers will ask for (pinned
// until read), and moves the window. Readers of pages inside a window being
// read wait for it and then hit. A miss behind the window (its page was
// evicted, or written and tossed) is an ordinary read.
//
// Worked example, k = 4, one server, clients A (0,3,6..), B (1,4,7..) and
// C (2,5,8..): B's miss at 1 reads 0..5; A and C find 0 and 2 in the pool;
// A's miss at... never comes: 3, 4 and 5 are there too; C's read of 8
// (beyond 5) reads 6..12. The disk sees 0,1,..,12 in order, each once.
Status ShareStore::read_window(LocalPagefile& file, uint64_t file_id, const ShareLayout& layout, int64_t page,
                               std::span<std::byte> out, uint64_t& checksum) {
  auto w = window(file_id);
  MutexLock fill(w->fill);
  // It may have come in while this reader waited for the window.
  if (pool_.pages()->read(file_id, page, out, /*count=*/false, &checksum)) return Status::ok();
  auto arm = hold_arm();
  if (page <= w->read_through) return read_miss(file, file_id, page, out, checksum);
  uint32_t unit = layout.stripe_pages;
  uint32_t servers = layout.server_count;
  bool known = unit > 0 && servers > 0 && layout.server_index < servers;
  auto mine = [&](int64_t p) {
    // Copies: the unit's first server is this one or at most R - 1 before it.
    return known && (layout.server_index + servers - static_cast<uint64_t>(p / unit) % servers) % servers <
                        std::max<uint32_t>(layout.replicas, 1);
  };
  auto size = file.size_pages();
  if (!size) return size.status();
  int64_t last = known ? std::min(page + options_.prefetch_pages, *size - 1) : page;
  // Pages fetched ahead that no reader has had yet stay pinned; a file may
  // hold at most half the pool that way, so a reader that never comes
  // cannot starve the other files.
  uint64_t room = pool_.capacity() / 2;
  std::vector<std::byte> buffer(out.size());
  int64_t through = page;
  for (int64_t p = std::max(w->read_through + 1, int64_t{0}); p <= last; ++p) {
    if (p != page && !mine(p)) continue;
    if (p > page && pool_.pages_of(file_id) >= room) break;
    std::lock_guard lock(page_lock(file_id, p));
    if (p == page) {
      if (Status s = read_from_disk(file, file_id, p, out, checksum); !s) return s;
      through = p;
      continue;
    }
    if (pool_.pages()->contains(file_id, p)) {
      through = p;
      continue;  // written since, and still held
    }
    uint64_t sum = kNoChecksum;
    // A page read for another reader that fails (its checksum, the disk) is
    // not kept and is that reader's to learn: read again behind the window,
    // it fails there (read_miss). Failing this read for it failed reads of
    // sound pages, and every one past it, for good.
    Status read = read_from_disk(file, file_id, p, buffer, sum);
    // The disk has passed p, kept or not (a page not kept is read again by
    // its reader, behind the window). Behind `page`: its reader is coming;
    // ahead: stop once the pool will not keep more.
    through = p;
    if (!read) continue;
    if (!pool_.pages()->fill_prefetched(file_id, p, buffer, sum) && p > page) break;
  }
  w->read_through = std::max(w->read_through, through);
  return Status::ok();
}

Status ShareStore::write(const ShareRef& ref, int64_t first, std::span<const std::byte> data,
                         std::span<const uint64_t> checksums, bool in_place, bool repair) {
  uint32_t page_size = ref.page_size;
  if (Status s = check_page_size(page_size); !s) return s;
  if (data.empty() || data.size() % page_size != 0) {
    return Status::invalid_argument(
        fmt::format("file {}", ref.file_id),
        fmt::format("write of {} bytes is not a whole number of {}-byte pages", data.size(), page_size));
  }
  size_t pages = data.size() / page_size;
  if (Status s = check_page_number(first, "write"); !s) return s;
  if (Status s = check_page_number(first + static_cast<int64_t>(pages) - 1, "write"); !s) return s;
  if (!checksums.empty() && checksums.size() != pages) {
    return Status::invalid_argument(fmt::format("file {}", ref.file_id),
                                    fmt::format("write of {} pages with {} checksums", pages, checksums.size()));
  }
  auto file = share(ref.file_id, page_size, /*create=*/true, ref.sector_checksums);
  if (!file) return file.status();
  if (auto declared = pool_.declare(ref.file_id, page_size, ref.policy, /*sized=*/true); !declared) {
    return declared.status();
  }
  for (size_t i = 0; i < pages; ++i) {
    int64_t page = first + static_cast<int64_t>(i);
    auto bytes = data.subspan(i * page_size, page_size);
    uint64_t sum = kNoChecksum;
    if (in_place && !checksums.empty()) {
      sum = checksums[i];
    } else if (options_.checksums) {
      // Checked before anything is written: a page damaged on its way is
      // refused, not stored as if the client had written it.
      sum = page_checksum(bytes, page);
      if (!checksums.empty() && checksums[i] != sum) {
        return checksum_mismatch(fmt::format("file {}", ref.file_id), page, "on arrival (damaged on the way)");
      }
    }
    {
      auto arm = hold_arm();
      // Under the page's lock: with the pool, so pool and disk agree; with
      // a token, so that no write of a newer lock's holder lands between
      // this one's check and its write.
      // Always: a repair (WritePages.repair) checks the page and then
      // writes it, and no write may land between the two.
      std::unique_lock<std::mutex> coherent(page_lock(ref.file_id, page));
      if (Status s = check_fence(ref.file_id, ref.fence); !s) return s;
      if (repair) {
        std::vector<std::byte> stored(page_size);
        Status check = (*file)->verify_page(page, stored);
        if (check || !check.is(Code::kCorruption)) continue;  // sound (or unreadable: not ours to judge)
        tally_.repairs++;
      }
      if (Status s = (*file)->write_page(page, bytes, sum); !s) return s;
      tally_.disk_writes++;
      if (pool_.enabled()) pool_.pages()->write(ref.file_id, page, bytes, sum);
    }
    tally_.pages_written++;
  }
  return Status::ok();
}

Status ShareStore::check_fence(uint64_t file_id, uint64_t token) { return fences_.check(file_id, token); }

Status ShareStore::sync(const ShareRef& ref) {
  tally_.syncs++;
  if (Status s = check_fence(ref.file_id, ref.fence); !s) return s;
  auto file = share(ref.file_id, ref.page_size, /*create=*/false);
  if (file.status().is(Code::kNotFound)) return Status::ok();  // nothing written here
  if (!file) return file.status();
  if (options_.sync != SyncMode::kFdatasync) return Status::ok();
  return (*file)->sync();
}

Status ShareStore::truncate(const ShareRef& ref, int64_t pages) {
  auto file = share(ref.file_id, ref.page_size, /*create=*/false);
  if (file.status().is(Code::kNotFound)) return check_fence(ref.file_id, ref.fence);
  if (!file) return file.status();
  {
    auto all = lock_all_pages();
    if (Status s = check_fence(ref.file_id, ref.fence); !s) return s;
    pool_.drop(ref.file_id, pages);
    if (Status s = (*file)->truncate(pages); !s) return s;
  }
  reset_window(ref.file_id, pages);  // after the page locks: a window read takes the two the other way
  return options_.sync == SyncMode::kFdatasync ? (*file)->sync() : Status::ok();
}

Status ShareStore::drop(uint64_t file_id) {
  {
    MutexLock lock(shares_mu_);
    shares_.erase(file_id);
  }
  {
    auto all = lock_all_pages();
    pool_.drop(file_id, 0);
  }
  reset_window(file_id, 0);
  fences_.forget(file_id);
  Status s = LocalPagefile::unlink(share_path(options_.dir, file_id));
  return s.is(Code::kNotFound) ? Status::ok() : s;
}

Result<ShareStore::ScrubResult> ShareStore::scrub(const ShareRef& ref, int64_t first, uint32_t count) {
  if (Status s = check_page_size(ref.page_size); !s) return s;
  if (Status s = check_page_number(first, "scrub"); !s) return s;
  ScrubResult result;
  auto file = share(ref.file_id, ref.page_size, /*create=*/false);
  if (file.status().is(Code::kNotFound)) return result;  // nothing was ever written here
  if (!file) return file.status();
  auto size = (*file)->size_pages();
  if (!size) return size.status();
  result.share_pages = *size;
  std::vector<std::byte> buffer(ref.page_size);
  for (int64_t page = first; page < *size && result.checked < count; ++page, ++result.checked) {
    // Straight from the disk: the pool's copy may hide a bad one.
    Status s = (*file)->verify_page(page, buffer);
    if (s.is(Code::kCorruption)) {
      result.bad.emplace_back(page, s);
    } else if (!s) {
      return s;
    }
  }
  return result;
}

std::vector<std::pair<uint64_t, int64_t>> ShareStore::disk_read_log() const {
  return disk_read_log_tail(kDiskReadLogEntries);
}

std::vector<std::pair<uint64_t, int64_t>> ShareStore::disk_read_log_tail(size_t most) const {
  MutexLock lock(log_mu_);
  size_t skip = disk_read_log_.size() > most ? disk_read_log_.size() - most : 0;
  return {disk_read_log_.begin() + static_cast<std::ptrdiff_t>(skip), disk_read_log_.end()};
}

}  // namespace pagefile::net
