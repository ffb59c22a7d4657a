// The registry of policies by name (pagefile/policy.h).
#include <fmt/format.h>

#include "pagefile/options.h"
#include "pagefile/policy.h"

namespace pagefile {

std::shared_ptr<PolicyRegistry> PolicyRegistry::with_builtins() {
  auto registry = std::make_shared<PolicyRegistry>();
  // Cannot fail on an empty registry with valid names.
  (void)register_builtin_policies(*registry);
  return registry;
}

Status PolicyRegistry::add(std::string_view name, PolicyMaker make) {
  if (Status s = check_policy_name(name); !s) return s;
  if (!make) return Status::invalid_argument(fmt::format("policy '{}'", name), "has no maker");
  std::lock_guard lock(mu_);
  if (makers_.contains(name)) {
    return Status::already_exists(fmt::format("policy '{}'", name), "is already registered");
  }
  makers_.emplace(std::string(name), std::move(make));
  return Status::ok();
}

bool PolicyRegistry::contains(std::string_view name) const {
  std::lock_guard lock(mu_);
  return makers_.find(name) != makers_.end();
}

Result<std::unique_ptr<PagePolicy>> PolicyRegistry::make(std::string_view name,
                                                         const PolicyLimits& limits) const {
  PolicyMaker make;
  {
    std::lock_guard lock(mu_);
    auto it = makers_.find(name);
    if (it == makers_.end()) {
      return Status::not_found(fmt::format("policy '{}'", name), "is not registered");
    }
    make = it->second;
  }
  // Outside the lock: a maker may look at the registry itself.
  std::unique_ptr<PagePolicy> policy = make(limits);
  if (!policy) return Status::invalid_argument(fmt::format("policy '{}'", name), "maker returned none");
  return policy;
}

std::vector<std::string> PolicyRegistry::names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [name, make] : makers_) out.push_back(name);
  return out;
}

}  // namespace pagefile
