// Status and Result: the one error type of Pagefile.
//
// Every fallible call returns a Status (or a Result<T>, which is a Status or
// a value). An OK Status costs one byte and no allocation; an error carries a
// Code that a caller branches on and a message a person can read, written in
// two parts like "orders.db: does not exist (create is false)".
//
// What each code asks of the caller:
//   kNotFound          the named file, descriptor target or record is absent;
//                      create it or give another name.
//   kAlreadyExists     create with `exclusive` found the file there.
//   kInvalidArgument   the call itself is wrong (page size, buffer length,
//                      descriptor, ticket, page number); fix the caller.
//   kCorruption        stored bytes fail their checks (header, checksum);
//                      the data needs repair, retrying will not help.
//   kIOError           the operating system failed an I/O; see the message.
//   kNoSpace           the disk (or the file size limit) is full; nothing
//                      was lost, free space and retry.
//   kReadOnly          the file system is read-only or the file was opened
//                      read-only.
//   kPermissionDenied  the operating system refused access.
//   kBusy              a lock is held by someone else; retry later or wait.
//   kDisconnected      the connection to a server broke; reconnect.
//   kNotSupported      the operation or option does not exist in this build
//                      or for this kind of file.
//   kStale             the write lock this request was made under is no
//                      longer held: another client has taken the file
//                      since (its lease ran out); nothing was written. Take
//                      the lock again and start over.
//
// Thread-safety: Status and Result are values; distinct objects may be used
// from distinct threads freely.
#pragma once

#include <cassert>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace pagefile {

// Each code keeps its number for good: the numbers cross the wire (a server's
// error answer carries one, wire/pagefile.capnp) and stand in logs and
// tools' exit reports. New codes are only appended, with the next number;
// a code that goes leaves its number unused, never given to another.
enum class Code : uint8_t {
  kOk = 0,
  kNotFound = 1,
  kAlreadyExists = 2,
  kInvalidArgument = 3,
  kCorruption = 4,
  kIOError = 5,
  kNoSpace = 6,
  kReadOnly = 7,
  kPermissionDenied = 8,
  kBusy = 9,
  // 10 was kOverloaded, never used; not to be reused.
  kDisconnected = 11,
  kNotSupported = 12,
  kStale = 13,
};

// The name of a code as written in messages: "NotFound", "IOError", ...
std::string_view code_name(Code code);
// The code numbered `number`; nothing for a number no code has (0 and 10
// among them: kOk is not an error, 10 is retired). For decoding a number
// another process sent or stored.
std::optional<Code> error_code_from_number(uint32_t number);

class [[nodiscard]] Status {
 public:
  // An OK status.
  Status() = default;

  static Status ok() { return Status(); }
  // Each factory joins `what` (usually the file name or the argument) and
  // `detail` as "what: detail"; either may be empty.
  static Status not_found(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kNotFound, what, detail);
  }
  static Status already_exists(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kAlreadyExists, what, detail);
  }
  static Status invalid_argument(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kInvalidArgument, what, detail);
  }
  static Status corruption(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kCorruption, what, detail);
  }
  static Status io_error(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kIOError, what, detail);
  }
  static Status no_space(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kNoSpace, what, detail);
  }
  static Status read_only(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kReadOnly, what, detail);
  }
  static Status permission_denied(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kPermissionDenied, what, detail);
  }
  static Status busy(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kBusy, what, detail);
  }
  static Status disconnected(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kDisconnected, what, detail);
  }
  static Status not_supported(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kNotSupported, what, detail);
  }
  static Status stale(std::string_view what, std::string_view detail = {}) {
    return Status(Code::kStale, what, detail);
  }
  // A status with an explicit code; `code` must not be kOk.
  static Status from_code(Code code, std::string_view what, std::string_view detail = {}) {
    return Status(code, what, detail);
  }

  bool is_ok() const { return code_ == Code::kOk; }
  explicit operator bool() const { return is_ok(); }
  Code code() const { return code_; }
  bool is(Code code) const { return code_ == code; }

  // The message without the code name; empty when OK.
  const std::string& message() const;
  // "OK", or "<CodeName>: <message>".
  std::string to_string() const;

  // The same error with `context` put in front of the message:
  // "context: message". OK stays OK.
  Status with_context(std::string_view context) const;

 private:
  Status(Code code, std::string_view what, std::string_view detail);

  Code code_ = Code::kOk;
  // Only errors allocate; OK statuses leave this empty.
  std::shared_ptr<const std::string> message_;
};

// A value of type T, or the error that prevented it.
//
//   Result<Fd> fd = client->open("orders", options);
//   if (!fd) return fd.status();
//   use(*fd);
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    // REQUIRES: !status.is_ok(); an OK status without a value is a bug.
    assert(!status_.is_ok());
  }

  bool is_ok() const { return value_.has_value(); }
  explicit operator bool() const { return is_ok(); }
  // OK when a value is present, else the error.
  const Status& status() const { return status_; }

  // REQUIRES: is_ok().
  T& value() & { assert(is_ok()); return *value_; }
  const T& value() const& { assert(is_ok()); return *value_; }
  T&& value() && { assert(is_ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace pagefile
