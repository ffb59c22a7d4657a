#include "pagefile/status.h"

#include <doctest/doctest.h>

#include <set>
#include <utility>

#include "core/os_error.h"
#include "pagefile/options.h"

using namespace pagefile;

TEST_CASE("an OK status is OK and prints OK") {
  Status s;
  CHECK(s.is_ok());
  CHECK(static_cast<bool>(s));
  CHECK(s.code() == Code::kOk);
  CHECK(s.message().empty());
  CHECK(s.to_string() == "OK");
  CHECK(s.with_context("x").is_ok());
}

TEST_CASE("an error carries its code and a two-part message") {
  Status s = Status::not_found("orders.db", "does not exist (create is false)");
  CHECK_FALSE(s.is_ok());
  CHECK(s.is(Code::kNotFound));
  CHECK(s.message() == "orders.db: does not exist (create is false)");
  CHECK(s.to_string() == "NotFound: orders.db: does not exist (create is false)");
  Status c = s.with_context("open");
  CHECK(c.is(Code::kNotFound));
  CHECK(c.message() == "open: orders.db: does not exist (create is false)");
  CHECK(Status::busy("lock").to_string() == "Busy: lock");
}

// The numbers cross the wire and stand in logs: a code never changes its
// number, and a retired number (10) decodes to nothing.
constexpr std::pair<Code, uint32_t> kCodeNumbers[] = {
    {Code::kOk, 0},          {Code::kNotFound, 1},   {Code::kAlreadyExists, 2},     {Code::kInvalidArgument, 3},
    {Code::kCorruption, 4},  {Code::kIOError, 5},    {Code::kNoSpace, 6},           {Code::kReadOnly, 7},
    {Code::kPermissionDenied, 8}, {Code::kBusy, 9}, {Code::kDisconnected, 11}, {Code::kNotSupported, 12},
    {Code::kStale, 13},
};

TEST_CASE("every code keeps its number and has a distinct name") {
  std::set<std::string_view> names;
  for (const auto& entry : kCodeNumbers) {
    const Code code = entry.first;
    const uint32_t number = entry.second;
    CAPTURE(number);
    CHECK(static_cast<uint32_t>(code) == number);
    CHECK(code_name(code) != "Unknown");
    names.insert(code_name(code));
    if (code != Code::kOk) CHECK(error_code_from_number(number) == code);
  }
  CHECK(names.size() == std::size(kCodeNumbers));
}

TEST_CASE("numbers that are no error code decode to nothing") {
  for (uint32_t number : {0u, 10u, 14u, 255u, 256u, 65535u}) {
    CAPTURE(number);
    CHECK_FALSE(error_code_from_number(number).has_value());
  }
}

TEST_CASE("Result holds a value or an error") {
  Result<int> good = 7;
  REQUIRE(good.is_ok());
  CHECK(*good == 7);
  CHECK(good.status().is_ok());
  Result<int> bad = Status::corruption("page 3", "checksum mismatch");
  CHECK_FALSE(bad.is_ok());
  CHECK(bad.status().is(Code::kCorruption));
}

TEST_CASE("errno values map to codes a caller branches on") {
  CHECK(errno_status(ENOENT, "f", "open").is(Code::kNotFound));
  CHECK(errno_status(EEXIST, "f", "open").is(Code::kAlreadyExists));
  CHECK(errno_status(ENOSPC, "f", "write").is(Code::kNoSpace));
  CHECK(errno_status(EDQUOT, "f", "write").is(Code::kNoSpace));
  CHECK(errno_status(EROFS, "f", "open").is(Code::kReadOnly));
  CHECK(errno_status(EACCES, "f", "open").is(Code::kPermissionDenied));
  CHECK(errno_status(EIO, "f", "read").is(Code::kIOError));
  CHECK(errno_status(ENOSPC, "f", "write").message() == "f: write: No space left on device");
}

TEST_CASE("page sizes: powers of two from 512 to 64 KiB") {
  for (uint32_t size = 512; size <= 65536; size *= 2) CHECK(check_page_size(size).is_ok());
  for (uint32_t size : {0u, 1u, 256u, 511u, 1000u, 4095u, 4097u, 131072u, 0xffffffffu}) {
    INFO(size);
    CHECK(check_page_size(size).is(Code::kInvalidArgument));
  }
  CHECK(check_page_size(1000).message() ==
        "page size 1000: must be a power of two from 512 to 65536");
}

TEST_CASE("access types parse and print") {
  for (auto t : {AccessType::kRandom, AccessType::kSequential, AccessType::kLooping}) {
    auto parsed = parse_access_type(access_type_name(t));
    REQUIRE(parsed.is_ok());
    CHECK(*parsed == t);
  }
  CHECK(parse_access_type("zigzag").status().is(Code::kInvalidArgument));
  CHECK(check_buffer_policy({AccessType::kLooping, 10, 5}).is(Code::kInvalidArgument));
  CHECK(check_buffer_policy({AccessType::kLooping, 10, 0}).is_ok());
  CHECK(check_buffer_policy({AccessType::kLooping, 10, 10}).is_ok());
}
