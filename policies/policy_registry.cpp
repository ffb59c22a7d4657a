// The registry of policies by name (pagefile/policy.h).
#include <map>

#include <fmt/format.h>

#include "core/mutex.h"
#include "pagefile/options.h"
#include "pagefile/policy.h"

namespace pagefile {

struct PolicyRegistry::Impl {
  mutable Mutex mu;
  std::map<std::string, PolicyMaker, std::less<>> makers GUARDED_BY(mu);
};

PolicyRegistry::PolicyRegistry() : impl_(std::make_unique<Impl>()) {}
PolicyRegistry::~PolicyRegistry() = default;

std::shared_ptr<PolicyRegistry> PolicyRegistry::with_builtins() {
  auto registry = std::make_shared<PolicyRegistry>();
  // Cannot fail on an empty registry with valid names.
  (void)register_builtin_policies(*registry);
  return registry;
}

Status PolicyRegistry::add(std::string_view name, PolicyMaker make) {
  if (Status s = check_policy_name(name); !s) return s;
  if (!make) return Status::invalid_argument(fmt::format("policy '{}'", name), "has no maker");
  MutexLock lock(impl_->mu);
  if (impl_->makers.contains(name)) {
    return Status::already_exists(fmt::format("policy '{}'", name), "is already registered");
  }
  impl_->makers.emplace(std::string(name), std::move(make));
  return Status::ok();
}

bool PolicyRegistry::contains(std::string_view name) const {
  MutexLock lock(impl_->mu);
  return impl_->makers.find(name) != impl_->makers.end();
}

Result<std::unique_ptr<PagePolicy>> PolicyRegistry::make(std::string_view name,
                                                         const PolicyLimits& limits) const {
  PolicyMaker make;
  {
    MutexLock lock(impl_->mu);
    auto it = impl_->makers.find(name);
    if (it == impl_->makers.end()) {
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
  MutexLock lock(impl_->mu);
  std::vector<std::string> out;
  for (const auto& [name, make] : impl_->makers) out.push_back(name);
  return out;
}

}  // namespace pagefile
