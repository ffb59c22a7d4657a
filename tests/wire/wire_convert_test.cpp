// Library values and their wire form: a Status crosses by its code's number,
// and a number no code has is a corrupt answer, never another code.
#include <capnp/message.h>

#include <doctest/doctest.h>
#include "wire/pagefile.capnp.h"
#include "wire/wire_convert.h"

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

}  // namespace
}  // namespace pagefile::net
