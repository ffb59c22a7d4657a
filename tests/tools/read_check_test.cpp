// What a read must find after this run's writes and truncates, and the
// verdict on what it found.
#include "tools/pf_replay/read_check.h"

#include <string>
#include <vector>

#include <xxhash.h>

#include "tests/support/temp_dir.h"
#include "tools/pf_replay/page_stamp.h"

namespace pf_replay {
namespace {

using pagefile::Code;
using pagefile::PageRead;
using Kind = Expectation::Kind;

constexpr size_t kPageSize = 4096;

std::vector<std::byte> stamped(int64_t page, uint64_t version) {
  std::vector<std::byte> out(kPageSize);
  stamp_page(out, "data", page, version);
  return out;
}

// The finding of a check that must pass.
ReadFinding finding_of(const Expectation& expect, PageRead outcome,
                       const std::vector<std::byte>& bytes) {
  pagefile::Result<ReadFinding> finding = check_read(expect, "data", 3, outcome, bytes);
  REQUIRE_OK(finding);
  return *finding;
}

// The message of a check that must fail.
std::string mismatch_of(const Expectation& expect, PageRead outcome,
                        const std::vector<std::byte>& bytes) {
  pagefile::Result<ReadFinding> finding = check_read(expect, "data", 3, outcome, bytes);
  CHECK_CODE(finding, Code::kCorruption);
  return finding ? "" : finding.status().message();
}

TEST_CASE("a page's history: writes, failed writes and truncates") {
  PageHistory history;
  CHECK(history.expect(5).kind == Kind::kAnyStamp);

  history.wrote(5, 10);
  CHECK(history.expect(5).kind == Kind::kVersion);
  CHECK(history.expect(5).version == 10);

  // A write that failed on confirmation is withdrawn only while it is the
  // page's last.
  history.wrote(5, 11);
  history.write_unconfirmed(5, 10);
  CHECK(history.expect(5).version == 11);
  history.write_unconfirmed(5, 11);
  CHECK(history.expect(5).kind == Kind::kAnyStamp);

  history.wrote(6, 12);
  history.write_failed(7);
  CHECK(history.expect(7).kind == Kind::kAnyStamp);

  // A failed truncate leaves the pages it may have cut unknown.
  history.wrote(8, 13);
  history.truncated(6, /*succeeded=*/false);
  CHECK(history.expect(6).kind == Kind::kAnyStamp);
  CHECK(history.expect(9).kind == Kind::kAnyStamp);

  history.wrote(6, 14);
  history.truncated(6, /*succeeded=*/true);
  CHECK(history.expect(5).kind == Kind::kAnyStamp);
  CHECK(history.expect(6).kind == Kind::kZeros);
  CHECK(history.expect(100).kind == Kind::kZeros);
  history.wrote(6, 15);
  CHECK(history.expect(6).version == 15);
  // A later, longer truncate cuts nothing new.
  history.truncated(20, /*succeeded=*/true);
  CHECK(history.expect(7).kind == Kind::kZeros);
}

TEST_CASE("a captured trace's pages: the bytes written, or anything the run did not write") {
  PageHistory history;
  history.set_application_pages();
  std::vector<std::byte> app(kPageSize, std::byte{0x5a});
  const uint64_t hash = XXH3_64bits(app.data(), app.size());
  CHECK(history.expect(1).kind == Kind::kAnything);
  history.wrote_bytes(1, 7, hash);
  Expectation expect = history.expect(1);
  CHECK(expect.kind == Kind::kBytes);
  CHECK(finding_of(expect, PageRead::kData, app) == ReadFinding::kWritten);
  std::vector<std::byte> other = app;
  other[100] = std::byte{0};
  CHECK(mismatch_of(expect, PageRead::kData, other).find("expected the bytes this run wrote") != std::string::npos);
  CHECK(mismatch_of(expect, PageRead::kBeyondEnd, app).find("beyond the end") != std::string::npos);
  CHECK(finding_of(history.expect(2), PageRead::kData, other) == ReadFinding::kUnchecked);
  CHECK(finding_of(history.expect(2), PageRead::kData, std::vector<std::byte>(kPageSize)) == ReadFinding::kZeros);
  // Its write failed at the confirm: the page may hold anything now.
  history.write_unconfirmed(1, 7);
  CHECK(history.expect(1).kind == Kind::kAnything);
  history.wrote_bytes(1, 8, hash);
  history.truncated(1, true);
  CHECK(history.expect(1).kind == Kind::kZeros);
}

TEST_CASE("check_read: the findings that pass") {
  const std::vector<std::byte> zeros(kPageSize);
  for (Kind kind : {Kind::kAnyStamp, Kind::kZeros}) {
    CAPTURE(static_cast<int>(kind));
    CHECK(finding_of({kind, 0}, PageRead::kBeyondEnd, zeros) == ReadFinding::kBeyondEnd);
    CHECK(finding_of({kind, 0}, PageRead::kData, zeros) == ReadFinding::kZeros);
  }
  CHECK(finding_of({Kind::kAnyStamp, 0}, PageRead::kData, stamped(3, 99)) ==
        ReadFinding::kStamped);
  CHECK(finding_of({Kind::kVersion, 7}, PageRead::kData, stamped(3, 7)) == ReadFinding::kStamped);
}

TEST_CASE("check_read: each mismatch says what was expected and what was found") {
  const std::vector<std::byte> zeros(kPageSize);
  CHECK(mismatch_of({Kind::kVersion, 7}, PageRead::kBeyondEnd, zeros) ==
        "expected version 7 (written by this run), but the page is beyond the end of the file");
  CHECK(mismatch_of({Kind::kVersion, 7}, PageRead::kData, zeros) ==
        "expected version 7 (written by this run), but the page reads as zeros");
  CHECK(mismatch_of({Kind::kVersion, 7}, PageRead::kData, stamped(3, 6)) ==
        "version 6 instead of 7 (an older write)");
  CHECK(mismatch_of({Kind::kZeros, 0}, PageRead::kData, stamped(3, 6)) ==
        "expected zeros (truncated away by this run), found a stamp of page 3 version 6");
  std::vector<std::byte> other(kPageSize, std::byte{1});
  CHECK(mismatch_of({Kind::kZeros, 0}, PageRead::kData, other) ==
        "expected zeros (truncated away by this run), found other bytes");
  CHECK(mismatch_of({Kind::kAnyStamp, 0}, PageRead::kData, stamped(4, 6)) ==
        "page number 4 instead of 3");
}

}  // namespace
}  // namespace pf_replay
