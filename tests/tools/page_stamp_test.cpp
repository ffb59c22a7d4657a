// The page stamp: it round-trips, and every kind of wrong page fails it.
#include "tools/pf_replay/page_stamp.h"

#include <cstring>
#include <string>
#include <vector>

#include <xxhash.h>

#include "pagefile/pagefile.h"
#include "tests/support/temp_dir.h"

namespace pf_replay {
namespace {

using pagefile::Code;

std::vector<std::byte> stamped(uint32_t page_size, std::string_view name, int64_t page,
                               uint64_t version) {
  std::vector<std::byte> out(page_size);
  stamp_page(out, name, page, version);
  return out;
}

TEST_CASE("a stamped page reads back its fields at every page size") {
  for (uint32_t page_size = pagefile::kMinPageSize; page_size <= pagefile::kMaxPageSize;
       page_size *= 2) {
    CAPTURE(page_size);
    std::vector<std::byte> page = stamped(page_size, "orders", 1234567, 99);
    pagefile::Result<PageStamp> stamp = read_stamp(page);
    REQUIRE_OK(stamp);
    CHECK(stamp->page == 1234567);
    CHECK(stamp->version == 99);
    CHECK(stamp->name_size == 6);
    CHECK(stamp->stored_name == "orders");
    CHECK(stamp->name_hash == stamp_name_hash("orders"));
    CHECK_OK(verify_stamp(page, "orders", 1234567, 99));
    CHECK_OK(verify_stamp(page, "orders", 1234567, std::nullopt));
    CHECK_FALSE(is_zero_page(page));
  }
}

TEST_CASE("stamping is deterministic and depends on name, page and version") {
  const std::vector<std::byte> page = stamped(8192, "data", 5, 7);
  CHECK(page == stamped(8192, "data", 5, 7));
  CHECK(page != stamped(8192, "data", 5, 8));
  CHECK(page != stamped(8192, "data", 6, 7));
  CHECK(page != stamped(8192, "date", 5, 7));
  // The filler, not only the header, changes with the version.
  const std::vector<std::byte> other = stamped(8192, "data", 5, 8);
  CHECK_FALSE(std::equal(page.begin() + kStampHeaderSize, page.end(),
                         other.begin() + kStampHeaderSize));
}

TEST_CASE("one flipped byte anywhere in the page is detected") {
  const std::vector<std::byte> page = stamped(4096, "data", 3, 42);
  for (size_t at : {size_t{0}, size_t{8}, size_t{15}, size_t{16}, size_t{30}, size_t{47},
                    size_t{50}, kStampHeaderSize, size_t{100}, size_t{2048}, size_t{4095}}) {
    CAPTURE(at);
    std::vector<std::byte> damaged = page;
    damaged[at] ^= std::byte{0x01};
    pagefile::Status s = verify_stamp(damaged, "data", 3, 42);
    CHECK(s.code() == Code::kCorruption);
    CHECK_CODE(read_stamp(damaged), Code::kCorruption);
  }
}

TEST_CASE("a page of another file, another page or another version is named as such") {
  const std::vector<std::byte> page = stamped(4096, "data", 3, 42);
  pagefile::Status wrong_name = verify_stamp(page, "other", 3, 42);
  CHECK(wrong_name.code() == Code::kCorruption);
  CHECK(wrong_name.message() == "belongs to file 'data' instead of 'other'");

  pagefile::Status wrong_page = verify_stamp(page, "data", 4, 42);
  CHECK(wrong_page.code() == Code::kCorruption);
  CHECK(wrong_page.message() == "page number 3 instead of 4");

  pagefile::Status old_version = verify_stamp(page, "data", 3, 43);
  CHECK(old_version.code() == Code::kCorruption);
  CHECK(old_version.message() == "version 42 instead of 43 (an older write)");
  CHECK(verify_stamp(page, "data", 3, 41).message() == "version 42 instead of 41");
}

TEST_CASE("long names are cut in the page but told apart by their hash and length") {
  const std::string long_name(200, 'n');
  std::string same_prefix = long_name;
  same_prefix.back() = 'm';
  const std::vector<std::byte> page = stamped(512, long_name, 0, 1);
  pagefile::Result<PageStamp> stamp = read_stamp(page);
  REQUIRE_OK(stamp);
  CHECK(stamp->stored_name == long_name.substr(0, kStampNameBytes));
  CHECK(stamp->name_size == 200);
  CHECK_OK(verify_stamp(page, long_name, 0, 1));
  CHECK_CODE(verify_stamp(page, same_prefix, 0, 1), Code::kCorruption);
  CHECK_CODE(verify_stamp(page, long_name.substr(0, kStampNameBytes), 0, 1), Code::kCorruption);
}

TEST_CASE("pages stamped in the first layout (PFSTAMP1, XXH64) still check") {
  // The first layout, made here from its description in doc/trace_format.md:
  // the same fields, magic PFSTAMP1, and at offset 8 the XXH64 of the whole
  // page with those 8 bytes taken as zero.
  std::vector<std::byte> page = stamped(8192, "old.db", 11, 77);
  std::memcpy(page.data(), kStampMagicV1.data(), kStampMagicV1.size());
  std::memset(page.data() + 8, 0, 8);
  uint64_t sum = XXH64(page.data(), page.size(), kStampChecksumSeed);
  for (int i = 0; i < 8; ++i) page[8 + i] = static_cast<std::byte>(sum >> (8 * i));
  CHECK_OK(verify_stamp(page, "old.db", 11, 77));
  pagefile::Result<PageStamp> stamp = read_stamp(page);
  REQUIRE_OK(stamp);
  CHECK(stamp->version == 77);
  // Each layout's checksum is checked by its own rule: the same page under
  // the other magic fails.
  std::memcpy(page.data(), kStampMagic.data(), kStampMagic.size());
  CHECK_CODE(read_stamp(page), Code::kCorruption);
}

TEST_CASE("zeros and foreign bytes are not stamps") {
  std::vector<std::byte> zeros(4096);
  CHECK(is_zero_page(zeros));
  pagefile::Result<PageStamp> stamp = read_stamp(zeros);
  CHECK_CODE(stamp, Code::kCorruption);
  CHECK(stamp.status().message() == "bad magic (not a page pf-replay wrote)");
  zeros[4095] = std::byte{1};
  CHECK_FALSE(is_zero_page(zeros));
}

}  // namespace
}  // namespace pf_replay
