#include "tools/pf_replay/read_check.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/page_checksum.h"

#include "tools/pf_replay/page_stamp.h"

namespace pf_replay {

using pagefile::Result;
using pagefile::Status;

Expectation PageHistory::expect(int64_t page) const {
  const Expectation not_ours{application_pages_ ? Expectation::Kind::kAnything : Expectation::Kind::kAnyStamp, 0};
  if (auto it = written_.find(page); it != written_.end()) {
    if (unknown(it->second)) return not_ours;
    if (it->second.captured) return {Expectation::Kind::kBytes, it->second.hash};
    return {Expectation::Kind::kVersion, it->second.version};
  }
  if (page >= zeros_from_) return {Expectation::Kind::kZeros, 0};
  return not_ours;
}

void PageHistory::write_unconfirmed(int64_t page, uint64_t version) {
  auto it = written_.find(page);
  if (it != written_.end() && it->second.version == version) it->second = {kUnknownVersion, 0, false};
}

void PageHistory::truncated(int64_t pages, bool succeeded) {
  for (auto it = written_.begin(); it != written_.end();) {
    if (it->first < pages) {
      ++it;
    } else if (succeeded) {
      it = written_.erase(it);  // zeros_from_ covers it
    } else {
      it->second = {kUnknownVersion, 0, false};  // cut or not: only its stamp can be checked
      ++it;
    }
  }
  if (succeeded) zeros_from_ = std::min(zeros_from_, pages);
}

namespace {

Result<ReadFinding> mismatch(std::string_view what) { return Status::corruption("", what); }

// The finding of a read that found the end of the file or a page of zeros;
// nothing when it found other bytes.
std::optional<ReadFinding> empty_finding(pagefile::PageRead outcome,
                                         std::span<const std::byte> bytes) {
  if (outcome == pagefile::PageRead::kBeyondEnd) return ReadFinding::kBeyondEnd;
  if (is_zero_page(bytes)) return ReadFinding::kZeros;
  return std::nullopt;
}

// A stamp of (name, page), of `version` when given.
Result<ReadFinding> check_stamp(std::span<const std::byte> bytes, std::string_view name,
                                int64_t page, std::optional<uint64_t> version) {
  if (Status s = verify_stamp(bytes, name, page, version); !s) return mismatch(s.message());
  return ReadFinding::kStamped;
}

}  // namespace

Result<ReadFinding> check_read(const Expectation& expect, std::string_view name, int64_t page,
                               pagefile::PageRead outcome, std::span<const std::byte> bytes) {
  if (expect.kind == Expectation::Kind::kBytes) {
    if (outcome == pagefile::PageRead::kBeyondEnd) {
      return mismatch("expected the bytes this run wrote, but the page is beyond the end of the file");
    }
    uint64_t hash = pagefile::xxh3(bytes, 0);  // (by the CPU's fastest code: core/page_checksum.h)
    if (hash != expect.version) {
      return mismatch(fmt::format("expected the bytes this run wrote (XXH3-64 {:016x}), found others ({:016x})",
                                  expect.version, hash));
    }
    return ReadFinding::kWritten;
  }
  if (expect.kind == Expectation::Kind::kAnything) {
    if (auto empty = empty_finding(outcome, bytes)) return *empty;
    return ReadFinding::kUnchecked;
  }
  if (expect.kind == Expectation::Kind::kVersion) {
    if (outcome == pagefile::PageRead::kBeyondEnd) {
      return mismatch(fmt::format("expected version {} (written by this run), but the page is "
                                  "beyond the end of the file",
                                  expect.version));
    }
    if (is_zero_page(bytes)) {
      return mismatch(fmt::format("expected version {} (written by this run), but the page "
                                  "reads as zeros",
                                  expect.version));
    }
    return check_stamp(bytes, name, page, expect.version);
  }
  // Not written by this run, or truncated away by it: the end of the file
  // and zeros pass either way.
  if (auto empty = empty_finding(outcome, bytes)) return *empty;
  if (expect.kind == Expectation::Kind::kAnyStamp) {
    return check_stamp(bytes, name, page, std::nullopt);
  }
  if (Result<PageStamp> stamp = read_stamp(bytes)) {
    return mismatch(fmt::format("expected zeros (truncated away by this run), found a stamp of "
                                "page {} version {}",
                                stamp->page, stamp->version));
  }
  return mismatch("expected zeros (truncated away by this run), found other bytes");
}

}  // namespace pf_replay
