// LocalPagefile's reads: each page checked against its checksum entries,
// and read again for a while where a writer in another process may be
// midway through it.

#include "store/local_pagefile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "store/file_io.h"

namespace pagefile {

Result<PageRead> LocalPagefile::read_page(int64_t page, std::span<std::byte> out, uint64_t* checksum) const {
  return read_checked(page, out, checksum, /*trust_kept=*/true, nullptr);
}

std::optional<Result<PageRead>> LocalPagefile::read_page_now(int64_t page, std::span<std::byte> out) const {
  bool would_block = false;
  auto got = read_checked(page, out, nullptr, /*trust_kept=*/true, &would_block);
  if (would_block) return std::nullopt;
  return got;
}

Result<int64_t> LocalPagefile::read_pages(int64_t first, int64_t count, std::span<std::byte> out) const {
  const size_t size = page_size();
  if (count < 1 || static_cast<uint64_t>(count) > out.size() / size) {
    return Status::invalid_argument(name_, fmt::format("read of {} pages into {} bytes", count, out.size()));
  }
  if (Status s = check_page_access(first, size, page_size(), name_); !s) return s;
  // Only pages of one group lie one after another on the disk.
  if (grouped_) count = std::min(count, kGroupPages - first % kGroupPages);
  if (sole_writer_) {
    // Its kept checksums are the file's (trusted_sums): each is checked
    // under its page's stripe, as read_page does, so a write of the page
    // meanwhile never leaves one behind.
    for (int64_t i = 0; i < count; ++i) {
      auto got = read_page(first + i, out.subspan(static_cast<size_t>(i) * size, size));
      if (!got) return i > 0 ? Result<int64_t>(i) : Result<int64_t>(got.status());
      if (*got != PageRead::kData) return i;
    }
    return count;
  }
  Result<size_t> got =
      pread_full(fd_, out.first(static_cast<size_t>(count) * size), page_offset(first), name_, nullptr, read_map());
  if (!got) return got.status();
  const auto whole = static_cast<int64_t>(*got / size);  // (a tail cut short is no page)
  UnitSums sums;
  for (int64_t i = 0; i < whole; ++i) {
    // As read_attempt checks a page, but read without the page's stripe: a
    // write of this descriptor's meanwhile leaves bytes that match no
    // checksum, or a version once written, as a read just before the write
    // would; and what was read is not recorded as the page's checksum on
    // disk (note_on_disk), which the write may have changed since.
    auto bytes = out.subspan(static_cast<size_t>(i) * size, size);
    if (!checked_ || matches_kept(first + i, bytes, sums)) continue;
    Attempt a;
    a.hash = sums;
    if (Status s = check_read(first + i, bytes, /*use_cache=*/true, nullptr, a); !s) return s;
    if (!a.mismatch) continue;
    if (i > 0) return i;  // the pages before it; the caller asks for it alone
    // The first: read again alone, as any failing read is (read_checked).
    auto again = read_page(first, bytes);
    if (!again) return again.status();
    return *again == PageRead::kData ? 1 : 0;
  }
  return whole;
}

Status LocalPagefile::verify_page(int64_t page, std::span<std::byte> buffer) const {
  return read_checked(page, buffer, nullptr, /*trust_kept=*/false, nullptr).status();
}

Result<PageRead> LocalPagefile::read_checked(int64_t page, std::span<std::byte> out, uint64_t* checksum,
                                             bool trust_kept, bool* would_block) const {
  if (Status s = check_page_access(page, out.size(), page_size(), name_); !s) return s;
  std::unique_lock<std::mutex> whole;
  if (checked_) whole = std::unique_lock(stripe(page));
  // Another process may be writing the page (its entries first, then its
  // bytes): a reader can pair bytes and entries of different writes, or
  // meet bytes half copied, and a writer descheduled in the middle of its
  // copy leaves them so for a while. A damaged page fails the same way
  // for longer than kSettle; a write in progress changes or ends sooner.
  // (A writer in this process holds the page's stripe, held here.)
  using Clock = std::chrono::steady_clock;
  // The failing read since `since`; on the heap, made at a first mismatch
  // (an optional here costs every read the zeroing of its 400 bytes).
  std::unique_ptr<std::pair<UnitSums, Entries>> seen;
  Clock::time_point since;
  Clock::time_point start;  // of the first mismatch (the clock is read only then)
  // (Not zeroed: 400 bytes a read, for a rare mismatch, which copies only
  // the units_ entries read into `seen`.)
  Attempt outcome;
  for (int attempt = 0;; ++attempt) {
    Status s = read_attempt(page, out, checksum, trust_kept, attempt == 0 ? would_block : nullptr,
                            /*use_cache=*/attempt == 0 && trust_kept, outcome);
    if (!s) return s;
    if (!outcome.mismatch) return outcome.read;
    if (sole_writer_) return outcome.status;
    const size_t entry_bytes = kEntryBytes * units_;
    bool same = seen && std::equal(outcome.hash.begin(), outcome.hash.begin() + units_, seen->first.begin()) &&
                std::memcmp(outcome.entries.bytes.data(), seen->second.bytes.data(), entry_bytes) == 0;
    Clock::time_point t = Clock::now();
    if (attempt == 0) start = t;
    if (!same) {
      if (!seen) seen = std::make_unique<std::pair<UnitSums, Entries>>();
      std::copy_n(outcome.hash.begin(), units_, seen->first.begin());
      std::memcpy(seen->second.bytes.data(), outcome.entries.bytes.data(), entry_bytes);
      since = t;
    } else if (t - since >= kSettle) {
      return outcome.status;
    }
    if (t - start >= kRereadFor) return outcome.status;
    if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Status LocalPagefile::read_attempt(int64_t page, std::span<std::byte> out, uint64_t* checksum, bool trust_kept,
                                   bool* would_block, bool use_cache, Attempt& a) const {
  a.read = PageRead::kData;
  a.mismatch = false;
  const uint64_t gen = span_gen_.load();  // (before the read: see span_sums_)
  if (checked_ && trust_kept) sums_.prefetch(static_cast<size_t>(page) * units_);
  Result<size_t> got = pread_full(fd_, out, page_offset(page), name_, would_block, use_cache ? read_map() : nullptr);
  if (!got) return got.status();
  if (would_block && *would_block) return Status::ok();
  if (*got < out.size()) {
    // Only whole pages exist: a tail cut short by a crash is not a page.
    std::memset(out.data(), 0, out.size());
    if (checksum) *checksum = page_checksum(out, page);
    a.read = PageRead::kBeyondEnd;
    return Status::ok();
  }
  if (!checked_) {
    if (checksum) *checksum = page_checksum(out, page);
    return Status::ok();
  }
  bool kept = false;
  if (trust_kept) {
    kept = matches_kept(page, out, a.hash);
  } else {
    unit_sums(page, out, a.hash);
  }
  if (checksum) *checksum = units_ == 1 ? a.hash[0] : page_checksum(out, page);
  if (kept) {
    note_on_disk(page, a.hash, gen);
    return Status::ok();
  }
  return check_read(page, out, use_cache, &gen, a);
}

Status LocalPagefile::check_read(int64_t page, std::span<std::byte> out, bool use_cache, const uint64_t* gen,
                                 Attempt& a) const {
  // A reader that is not the sole writer keeps the checksums of each block
  // it reads (read_block; matches_kept looks them up): one read of a block serves its
  // 256 pages, with no lock. The file may have changed since, through
  // another descriptor; a page that matches no kept checksum is checked
  // against the block read again, then against its entries on disk
  // (read_checked's next attempt), so a stale checksum costs a read, never
  // a false error, and a page is accepted only in a version once written.
  Status s = use_cache && !sole_writer_ ? read_block(page, a.entries) : read_entries(page, a.entries);
  if (!s) return s;
  bool all_current = true;
  const size_t unit = checksum_unit();
  for (uint32_t u = 0; u < units_; ++u) {
    auto bytes = out.subspan(size_t{u} * unit, unit);
    if (!a.entries.matching(u, a.hash[u], bytes)) {
      a.mismatch = true;
      a.status = checksum_mismatch(name_, page, units_ == 1 ? "on disk" : fmt::format("on disk, in its sector {} of {}", u, units_));
      return Status::ok();
    }
    all_current = all_current && a.hash[u] == a.entries.current(u);
  }
  if (all_current) keep_sums(page, &a.hash);
  if (gen) note_on_disk(page, a.hash, *gen);
  return Status::ok();
}

Result<size_t> LocalPagefile::read_part(int64_t page, size_t offset, std::span<std::byte> out) const {
  if (page < 0 || offset + out.size() > page_size()) {
    return Status::invalid_argument(name_, fmt::format("part of page {}: {} bytes at {} cross its end", page,
                                                       out.size(), offset));
  }
  return pread_full(fd_, out, page_offset(page) + static_cast<off_t>(offset), name_, nullptr, read_map());
}

}  // namespace pagefile
