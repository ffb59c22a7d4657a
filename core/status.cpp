#include "pagefile/status.h"

#include <fmt/format.h>

namespace pagefile {

std::string_view code_name(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kNotFound: return "NotFound";
    case Code::kAlreadyExists: return "AlreadyExists";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kNoSpace: return "NoSpace";
    case Code::kReadOnly: return "ReadOnly";
    case Code::kPermissionDenied: return "PermissionDenied";
    case Code::kBusy: return "Busy";
    case Code::kDisconnected: return "Disconnected";
    case Code::kNotSupported: return "NotSupported";
    case Code::kStale: return "Stale";
  }
  return "Unknown";
}

std::optional<Code> error_code_from_number(uint32_t number) {
  // code_name's switch is the one list of codes there are.
  if (number == 0 || number > 255) return std::nullopt;
  const auto code = static_cast<Code>(number);
  if (code_name(code) == "Unknown") return std::nullopt;
  return code;
}

Status::Status(Code code, std::string_view what, std::string_view detail) : code_(code) {
  assert(code != Code::kOk);
  std::string text;
  if (what.empty() || detail.empty()) {
    text = std::string(what.empty() ? detail : what);
  } else {
    text = fmt::format("{}: {}", what, detail);
  }
  message_ = std::make_shared<const std::string>(std::move(text));
}

const std::string& Status::message() const {
  static const std::string kEmpty;
  return message_ ? *message_ : kEmpty;
}

std::string Status::to_string() const {
  if (is_ok()) return "OK";
  return fmt::format("{}: {}", code_name(code_), message());
}

Status Status::with_context(std::string_view context) const {
  if (is_ok() || context.empty()) return *this;
  return Status(code_, context, message());
}

}  // namespace pagefile
