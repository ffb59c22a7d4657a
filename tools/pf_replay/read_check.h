// What pf-replay expects of every page it reads, and the check of what the
// read found (replay.h, "Verification"): a file's PageHistory records what
// this run wrote and truncated, in trace order, and gives each read its
// Expectation when the read is issued; check_read judges the read's bytes
// against it once the read is confirmed.
//
// Thread-safety: plain values and free functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <unordered_map>

#include "pagefile/pagefile.h"
#include "pagefile/status.h"

namespace pf_replay {

// What a read must find, fixed when it is issued.
struct Expectation {
  enum class Kind : uint8_t {
    kAnyStamp,  // zeros, beyond the end, or a stamp of this page: not this run's
    kZeros,     // zeros or beyond the end: truncated away by this run
    kVersion,   // the stamp of this page at `version`: written by this run
    kBytes,     // the bytes whose XXH3-64 is `version`: written by this run from a captured trace's data
    kAnything,  // any bytes: a captured trace's page not written by this run
  };
  Kind kind = Kind::kAnyStamp;
  uint64_t version = 0;
};

// One file's writes and truncates in this run, as far as they decide what a
// later read of a page must find.
class PageHistory {
 public:
  // What a read of `page` issued now must find.
  Expectation expect(int64_t page) const;

  // A write of `page` at `version` was issued.
  void wrote(int64_t page, uint64_t version) { written_[page] = {version, 0, false}; }
  // A write of `page`, the run's write `version`, with the bytes whose
  // XXH3-64 is `hash` was issued (a captured trace's write: the page is the
  // application's, not a stamp).
  void wrote_bytes(int64_t page, uint64_t version, uint64_t hash) { written_[page] = {version, hash, true}; }
  // A write of `page` failed as it was issued: its content is unknown now.
  void write_failed(int64_t page) { written_[page] = {kUnknownVersion, 0, false}; }
  // The file's pages hold an application's bytes (a captured trace): a page
  // this run did not write may hold anything.
  void set_application_pages() { application_pages_ = true; }
  // The write of `page` at `version` failed when confirmed. Only that
  // write's own mark is withdrawn: a later write of the page may already
  // stand in for it.
  void write_unconfirmed(int64_t page, uint64_t version);
  // A truncate to `pages` returned, OK when `succeeded`: the pages it cut
  // read as zeros until written again; after a failed one, whatever this
  // run wrote there may or may not be cut.
  void truncated(int64_t pages, bool succeeded);

 private:
  // Marks, in written_, a page whose content this run can no longer predict
  // (a write or truncate failed): only its stamp is checked.
  static constexpr uint64_t kUnknownVersion = std::numeric_limits<uint64_t>::max();

  // What this run last wrote to a page: the write's version (or
  // kUnknownVersion), and for a captured page the hash of its bytes.
  struct Written {
    uint64_t version = 0;
    uint64_t hash = 0;
    bool captured = false;
  };
  bool unknown(const Written& w) const { return w.version == kUnknownVersion; }
  std::unordered_map<int64_t, Written> written_;
  bool application_pages_ = false;
  // Pages at or beyond this were cut off by a truncate of this run; those
  // not in written_ must read as zeros.
  int64_t zeros_from_ = std::numeric_limits<int64_t>::max();
};

// What a read that passed its check found.
enum class ReadFinding : uint8_t {
  kStamped,    // a stamp of the page
  kWritten,    // the bytes this run wrote from a captured trace's data
  kUnchecked,  // a captured trace's page this run did not write: anything goes
  kZeros,      // a page of zeros
  kBeyondEnd,  // the end of the file
};

// Checks a read of page `page` of the file `name` that returned `outcome`
// with `bytes` against `expect`. The finding when it passes; else
// kCorruption whose message says what was expected and what was found.
pagefile::Result<ReadFinding> check_read(const Expectation& expect, std::string_view name,
                                         int64_t page, pagefile::PageRead outcome,
                                         std::span<const std::byte> bytes);

}  // namespace pf_replay
