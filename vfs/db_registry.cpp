#include "vfs/db_registry.h"

#include <cstdlib>

namespace pagefile::vfs {

DbRegistry& DbRegistry::instance() {
  // Never destroyed: SQLite may call the VFS from other static destructors.
  // Its clients are stopped by an exit handler registered after the
  // libraries they use were initialised, so it runs before those go.
  static DbRegistry* registry = [] {
    auto* r = new DbRegistry();
    std::atexit([] { instance().stop_all(); });
    return r;
  }();
  return *registry;
}

Result<Client*> DbRegistry::client_for(const std::string& bus) {
  auto it = clients_.find(bus);
  if (it != clients_.end()) return it->second.get();
  ClientOptions options;
  options.bus = bus;
  auto client = Client::start(options);
  if (!client) return client.status();
  Client* raw = client->get();
  clients_.emplace(bus, std::move(*client));
  return raw;
}

Result<std::shared_ptr<DbConfig>> DbRegistry::remember(const std::string& db_name, const DbOptions& options) {
  std::lock_guard lock(mu_);
  auto client = client_for(options.bus);
  if (!client) return client.status();
  auto config = std::make_shared<DbConfig>();
  config->options = options;
  config->client = *client;
  config->concurrency = options.concurrency;
  auto old = databases_.find(db_name);
  if (old != databases_.end()) config->stats = old->second->stats;  // counted per database
  databases_[db_name] = config;
  known_.insert(db_name);
  return config;
}

Result<std::shared_ptr<DbConfig>> DbRegistry::lookup(const std::string& name) {
  std::string db = database_of(name);
  {
    std::lock_guard lock(mu_);
    known_.insert(name);
    auto it = databases_.find(db);
    if (it != databases_.end()) return it->second;
  }
  return remember(db, DbOptions{});
}

std::vector<std::string> DbRegistry::names() {
  std::lock_guard lock(mu_);
  return {known_.begin(), known_.end()};
}

void DbRegistry::stop_all() {
  // Stopped, not destroyed: a connection closed later still holds the
  // pointer, and its calls then fail cleanly.
  std::lock_guard lock(mu_);
  for (auto& [bus, client] : clients_) (void)client->stop();
}

}  // namespace pagefile::vfs
