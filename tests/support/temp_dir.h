// Helpers shared by the tests: a scratch directory removed afterwards, page
// buffers with recognisable content, and doctest checks for Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "pagefile/status.h"

namespace pagefile::test {

// A fresh directory under $TMPDIR (or /tmp), removed with its content when
// the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Makes the TempDirs made afterwards (TMPDIR) live on /dev/shm when it is a
// writable tmpfs; returns whether it did. For a test whose subject is not
// the disk (its faults are injected: store/disk_faults.h) but that syncs
// thousands of times: on a disk shared with the other suites and the
// builds each fdatasync can wait tens of milliseconds, and such a test
// then spends its time waiting for the disk, not testing. The syncs are
// still made; only their wait goes.
bool scratch_in_memory();

// A page whose every byte depends on (seed, page), so a page read back from
// the wrong place or of the wrong version is seen.
std::vector<std::byte> page_pattern(uint32_t page_size, int64_t page, uint64_t seed = 1);

inline const Status& status_of(const Status& s) { return s; }
template <class T>
const Status& status_of(const Result<T>& r) { return r.status(); }

}  // namespace pagefile::test

// Runs `assertion` on the Status of `expr` (a Status or Result), named
// pagefile_test_status_, printing that Status when the assertion fails.
#define PAGEFILE_TEST_ON_STATUS(expr, assertion)                                          \
  do {                                                                                    \
    const ::pagefile::Status pagefile_test_status_ = ::pagefile::test::status_of(expr); \
    INFO(pagefile_test_status_.to_string());                                              \
    assertion;                                                                            \
  } while (0)

// CHECK/REQUIRE that a Status or Result is OK, printing the error when not.
#define CHECK_OK(expr) PAGEFILE_TEST_ON_STATUS(expr, CHECK(pagefile_test_status_.is_ok()))
#define REQUIRE_OK(expr) PAGEFILE_TEST_ON_STATUS(expr, REQUIRE(pagefile_test_status_.is_ok()))
// CHECK that a Status or Result failed with `code`.
#define CHECK_CODE(expr, expected_code) \
  PAGEFILE_TEST_ON_STATUS(expr, CHECK(pagefile_test_status_.code() == (expected_code)))
