// Names and checks of the buffer-policy fields declared at open.
#include <fmt/format.h>

#include "core/enum_names.h"
#include "pagefile/options.h"

namespace pagefile {

namespace {

constexpr EnumName<AccessType> kAccessTypeNames[] = {
    {AccessType::kRandom, "random"}, {AccessType::kSequential, "sequential"}, {AccessType::kLooping, "looping"}};

}  // namespace

std::string_view access_type_name(AccessType type) { return name_of(kAccessTypeNames, type, "unknown"); }

Result<AccessType> parse_access_type(std::string_view name) {
  if (std::optional<AccessType> type = value_named(kAccessTypeNames, name)) return *type;
  return Status::invalid_argument(
      fmt::format("access type '{}'", name), "must be random, sequential or looping");
}

std::string_view policy_name(const BufferPolicy& policy) {
  return policy.name.empty() ? access_type_name(policy.access) : std::string_view(policy.name);
}

Status check_policy_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxPolicyNameLength) {
    return Status::invalid_argument(fmt::format("policy name '{}'", name),
                                    fmt::format("must have 1 to {} characters", kMaxPolicyNameLength));
  }
  for (char c : name) {
    bool allowed = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                   c == '_' || c == '.' || c == '-';
    if (!allowed) {
      return Status::invalid_argument(fmt::format("policy name '{}'", name),
                                      "may hold only letters, digits, '_', '.' and '-'");
    }
  }
  return Status::ok();
}

Status check_buffer_policy(const BufferPolicy& policy) {
  if (!policy.name.empty()) {
    if (Status s = check_policy_name(policy.name); !s) return s;
  }
  if (policy.max_pages != 0 && policy.max_pages < policy.min_pages) {
    return Status::invalid_argument(
        "buffer policy",
        fmt::format("max_pages {} is below min_pages {}", policy.max_pages, policy.min_pages));
  }
  return Status::ok();
}

}  // namespace pagefile
