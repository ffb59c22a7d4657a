// Library values and their wire form: a Status crosses by its code's number,
// and a number no code has is a corrupt answer, never another code; a
// catalog record is checked where it enters.
#include <capnp/message.h>

#include <doctest/doctest.h>
#include "wire/pagefile.capnp.h"
#include "wire/wire_convert.h"
#include "pagefile/pagefile.h"

namespace pagefile::net {
namespace {

Status round_trip(uint16_t code, const char* message) {
  capnp::MallocMessageBuilder builder;
  auto error = builder.initRoot<wire::Error>();
  error.setCode(code);
  error.setMessage(message);
  return from_wire(error.asReader());
}

TEST_CASE("every error code crosses the wire as itself") {
  for (Code code : {Code::kNotFound, Code::kAlreadyExists, Code::kInvalidArgument, Code::kCorruption,
                    Code::kIOError, Code::kNoSpace, Code::kReadOnly, Code::kPermissionDenied, Code::kBusy,
                    Code::kDisconnected, Code::kNotSupported}) {
    CAPTURE(code_name(code));
    capnp::MallocMessageBuilder builder;
    auto error = builder.initRoot<wire::Error>();
    to_wire(Status::from_code(code, "orders.db: why"), error);
    Status back = from_wire(error.asReader());
    CHECK(back.code() == code);
    CHECK(back.message() == "orders.db: why");
  }
}

TEST_CASE("a code number no code has is a corrupt answer, named in the message") {
  for (uint16_t number : {0, 10, 14, 999}) {
    CAPTURE(number);
    Status s = round_trip(number, "whatever");
    CHECK(s.code() == Code::kCorruption);
    CHECK(s.message().find("unknown error code " + std::to_string(number)) != std::string::npos);
  }
}

FileRecord good_record() {
  FileRecord r;
  r.name = "orders.db";
  r.id = 7;
  r.page_size = 4096;
  r.size_pages = 12;
  r.stripe_pages = 4;
  r.servers = {"tcp:127.0.0.1:7001", "tcp:127.0.0.1:7002"};
  r.cluster = 99;
  return r;
}

TEST_CASE("a catalog record crosses the wire as itself") {
  capnp::MallocMessageBuilder builder;
  auto wire = builder.initRoot<wire::FileRecord>();
  to_wire(good_record(), wire);
  auto back = from_wire(wire.asReader());
  REQUIRE(back.is_ok());
  CHECK(*back == good_record());
}

TEST_CASE("a record no catalog makes is refused where it enters, naming what is wrong") {
  struct Case {
    const char* why;
    void (*spoil)(wire::FileRecord::Builder);
  };
  const Case cases[] = {
      {"page size", [](wire::FileRecord::Builder r) { r.setPageSize(3000); }},
      {"page size", [](wire::FileRecord::Builder r) { r.setPageSize(0); }},
      {"negative", [](wire::FileRecord::Builder r) { r.setSizePages(-1); }},
      {"beyond the largest size", [](wire::FileRecord::Builder r) { r.setSizePages(INT64_MAX); }},
      {"beyond the largest size", [](wire::FileRecord::Builder r) { r.setSizePages(kMaxPageNumber + 2); }},
      {"placement 7 is not stripe or hash", [](wire::FileRecord::Builder r) { r.setPlacement(7); }},
      {"stripe_pages must be at least 1", [](wire::FileRecord::Builder r) { r.setStripePages(0); }},
      {"server list is empty", [](wire::FileRecord::Builder r) { r.initServers(0); }},
      {"NUL", [](wire::FileRecord::Builder r) { r.setName(capnp::Text::Reader("a\0b", 3)); }},
  };
  for (const Case& c : cases) {
    CAPTURE(c.why);
    capnp::MallocMessageBuilder builder;
    auto wire = builder.initRoot<wire::FileRecord>();
    to_wire(good_record(), wire);
    c.spoil(wire);
    auto back = from_wire(wire.asReader());
    REQUIRE(!back.is_ok());
    CHECK(back.status().code() == Code::kCorruption);
    CHECK(back.status().message().find("the catalog's record is unusable") != std::string::npos);
    CHECK(back.status().message().find(c.why) != std::string::npos);
  }
  // The largest size a file may have is taken.
  capnp::MallocMessageBuilder builder;
  auto wire = builder.initRoot<wire::FileRecord>();
  to_wire(good_record(), wire);
  wire.setSizePages(kMaxPageNumber + 1);
  CHECK(from_wire(wire.asReader()).is_ok());
}

}  // namespace
}  // namespace pagefile::net
