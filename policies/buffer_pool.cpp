#include "core/mutex.h"
#include "policies/buffer_pool.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include <fmt/format.h>

namespace pagefile {

BufferPool::BufferPool(uint32_t capacity_pages) : capacity_(capacity_pages), arena_(capacity_pages) {
  assert(capacity_pages > 0);
}

uint32_t BufferPool::size() const {
  MutexLock lock(mu_);
  return size_;
}

size_t BufferPool::mapped_bytes() const {
  MutexLock lock(mu_);
  return arena_.mapped_bytes();
}

BufferPool::PoolFile* BufferPool::find(uint64_t file) {
  auto it = files_.find(file);
  return it == files_.end() ? nullptr : &it->second;
}

const BufferPool::PoolFile* BufferPool::find(uint64_t file) const {
  auto it = files_.find(file);
  return it == files_.end() ? nullptr : &it->second;
}

void BufferPool::add_file(uint64_t file, uint32_t page_size, PolicyLimits limits,
                          std::unique_ptr<PagePolicy> policy) {
  assert(page_size > 0 && policy);
  if (limits.max_pages == 0 || limits.max_pages > capacity_) limits.max_pages = capacity_;
  limits.min_pages = std::min(limits.min_pages, limits.max_pages);
  MutexLock lock(mu_);
  PoolFile& f = files_[file];
  f.page_size = page_size;
  f.limits = limits;
  f.policy = std::move(policy);
}

void BufferPool::remove_file(uint64_t file) {
  MutexLock lock(mu_);
  auto it = files_.find(file);
  if (it == files_.end()) return;
  size_ -= static_cast<uint32_t>(it->second.frames.size());
  files_.erase(it);
}

uint32_t BufferPool::allowance(const PoolFile& f) const {
  return std::clamp(f.policy->wanted_pages(f.limits), f.limits.min_pages, f.limits.max_pages);
}

bool BufferPool::pinned(const PoolFile& f, int64_t page) const {
  return f.pins.contains(page) || f.policy->pinned(page);
}

bool BufferPool::read(uint64_t file, int64_t page, std::span<std::byte> out, bool count, uint64_t* checksum) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f == nullptr) return false;
  std::span<uint64_t> sums = checksum ? std::span(checksum, 1) : std::span<uint64_t>();
  if (copy_run(*f, page, 1, out, sums, count)) return true;
  if (count) ++f->counters.misses;
  return false;
}

bool BufferPool::read_run(uint64_t file, int64_t first, uint32_t count, std::span<std::byte> out,
                          std::span<uint64_t> checksums) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  return f != nullptr && copy_run(*f, first, count, out, checksums, /*count_hits=*/true);
}

bool BufferPool::copy_run(PoolFile& f, int64_t first, uint32_t count, std::span<std::byte> out,
                          std::span<uint64_t> checksums, bool count_hits) {
  // A caller whose pages are of another size than the file's here misses
  // (checked under mu_: the file may have started again at another size,
  // ServerPool::declare, since the caller looked).
  if (out.size() != static_cast<size_t>(count) * f.page_size || (!checksums.empty() && checksums.size() != count)) {
    return false;
  }
  // One lookup a page: find them all, then copy. The policy hears of the
  // uses only after every copy, since a use may toss a page of the run.
  constexpr uint32_t kOnStack = 16;
  Frame* on_stack[kOnStack];
  std::vector<Frame*> on_heap(count > kOnStack ? count : 0);
  Frame** frames = count > kOnStack ? on_heap.data() : on_stack;
  for (uint32_t i = 0; i < count; ++i) {
    auto it = f.frames.find(first + i);
    if (it == f.frames.end()) return false;
    frames[i] = &it->second;
  }
  for (uint32_t i = 0; i < count; ++i) {
    Frame& frame = *frames[i];
    std::memcpy(out.data() + static_cast<size_t>(i) * f.page_size, frame.data.data(), f.page_size);
    if (!checksums.empty()) checksums[i] = frame.checksum;
    if (count_hits) ++f.counters.hits;
    if (frame.prefetched_unread) {
      frame.prefetched_unread = false;
      ++f.counters.prefetch_used;
    }
  }
  for (uint32_t i = 0; i < count; ++i) use(f, first + i);
  return true;
}

bool BufferPool::contains(uint64_t file, int64_t page) const {
  MutexLock lock(mu_);
  const PoolFile* f = find(file);
  return f != nullptr && f->frames.contains(page);
}

void BufferPool::fill(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f == nullptr) return;
  if (passed_at_once(*f, page)) {
    ++f->counters.tossed;  // kept for no time: taking a frame would evict a better page
    return;
  }
  if (admit(*f, page, data, checksum, /*prefetched=*/false)) use(*f, page);
}

bool BufferPool::fill_prefetched(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f == nullptr) return false;
  return f->frames.contains(page) || admit(*f, page, data, checksum, /*prefetched=*/true);
}

void BufferPool::write(uint64_t file, int64_t page, std::span<const std::byte> data, uint64_t checksum) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f == nullptr) return;
  if (!f->frames.contains(page) && passed_at_once(*f, page)) return;
  if (admit(*f, page, data, checksum, /*prefetched=*/false)) use(*f, page);
}

bool BufferPool::passed_at_once(PoolFile& f, int64_t page) {
  if (pinned(f, page)) return false;
  auto passed = f.policy->passed(page);
  return std::find(passed.begin(), passed.end(), page) != passed.end();
}

void BufferPool::drop(uint64_t file, int64_t page) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f != nullptr && f->frames.contains(page)) remove_frame(*f, page, Why::kDropped);
}

void BufferPool::drop_all(uint64_t file) { truncate(file, 0); }

void BufferPool::truncate(uint64_t file, int64_t pages) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f == nullptr) return;
  std::vector<int64_t> gone;
  for (const auto& [page, frame] : f->frames) {
    if (page >= pages) gone.push_back(page);
  }
  for (int64_t page : gone) remove_frame(*f, page, Why::kDropped);
}

void BufferPool::pin(uint64_t file, int64_t page) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  if (f != nullptr) ++f->pins[page];
}

Status BufferPool::unpin(uint64_t file, int64_t page) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  auto it = f == nullptr ? decltype(f->pins.end()){} : f->pins.find(page);
  if (f == nullptr || it == f->pins.end()) {
    return Status::invalid_argument(fmt::format("unpin of page {}", page), "the page is not pinned");
  }
  if (--it->second == 0) f->pins.erase(it);
  return Status::ok();
}

std::vector<int64_t> BufferPool::read_ahead(uint64_t file, int64_t page) {
  MutexLock lock(mu_);
  PoolFile* f = find(file);
  std::vector<int64_t> pages;
  if (f == nullptr) return pages;
  for (int64_t next : f->policy->read_ahead(page, f->limits)) {
    if (pages.size() >= f->limits.read_ahead) break;
    if (next < 0 || next > kMaxPageNumber || f->frames.contains(next)) continue;
    pages.push_back(next);
  }
  return pages;
}

FileCounters BufferPool::counters(uint64_t file) const {
  MutexLock lock(mu_);
  const PoolFile* f = find(file);
  if (f == nullptr) return {};
  FileCounters out = f->counters;
  out.pages = static_cast<uint32_t>(f->frames.size());
  out.allowance = allowance(*f);
  out.pinned = static_cast<uint32_t>(f->pins.size());
  return out;
}

bool BufferPool::admit(PoolFile& f, int64_t page, std::span<const std::byte> data, uint64_t checksum,
                       bool prefetched) {
  if (data.size() != f.page_size) return false;  // (likewise: never kept)
  auto it = f.frames.find(page);
  if (it != f.frames.end()) {
    std::memcpy(it->second.data.data(), data.data(), data.size());
    it->second.checksum = checksum;
    return true;
  }
  while (f.frames.size() >= allowance(f)) {
    if (!evict_from(f)) return false;
  }
  while (size_ >= capacity_) {
    if (!evict_for(f)) return false;
  }
  PageArena::Buffer buffer = arena_.take(f.page_size);
  std::memcpy(buffer.data(), data.data(), data.size());
  Frame& frame = f.frames[page];
  frame.data = std::move(buffer);
  frame.checksum = checksum;
  frame.prefetched_unread = prefetched;
  ++size_;
  f.policy->admitted(page, prefetched);
  return true;
}

bool BufferPool::evict_from(PoolFile& f) {
  auto victim = f.policy->victim([&](int64_t page) REQUIRES(mu_) { return f.frames.contains(page) && !pinned(f, page); });
  // A victim the pool does not hold (a policy's mistake) would loop forever.
  if (!victim || !f.frames.contains(*victim) || pinned(f, *victim)) return false;
  remove_frame(f, *victim, Why::kEvicted);
  return true;
}

bool BufferPool::evict_for(PoolFile& asking) {
  std::vector<std::pair<uint32_t, PoolFile*>> donors;  // (pages above min, file)
  for (auto& [id, f] : files_) {
    uint32_t held = static_cast<uint32_t>(f.frames.size());
    if (held > f.limits.min_pages) donors.emplace_back(held - f.limits.min_pages, &f);
  }
  std::stable_sort(donors.begin(), donors.end(), [&](const auto& a, const auto& b) {
    if ((a.second == &asking) != (b.second == &asking)) return b.second == &asking;
    return a.first > b.first;
  });
  for (auto& [spare, f] : donors) {
    if (evict_from(*f)) return true;
  }
  return false;
}

void BufferPool::remove_frame(PoolFile& f, int64_t page, Why why) {
  auto it = f.frames.find(page);
  if (it->second.prefetched_unread) ++f.counters.prefetch_wasted;
  if (why == Why::kEvicted) ++f.counters.evictions;
  if (why == Why::kTossed) ++f.counters.tossed;
  f.frames.erase(it);
  --size_;
  f.policy->removed(page);
}

void BufferPool::use(PoolFile& f, int64_t page) {
  f.policy->referenced(page);
  for (int64_t done : f.policy->passed(page)) {
    if (f.frames.contains(done) && !pinned(f, done)) remove_frame(f, done, Why::kTossed);
  }
}

}  // namespace pagefile
