#include "core/mutex.h"
#include "vfs/db_registry.h"

#include <cstdlib>

#include "bus/bus_config.h"

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

Result<DbRegistry::SharedClient*> DbRegistry::client_for(const std::string& bus, uint32_t cache_pages) {
  auto it = clients_.find(bus);
  if (it != clients_.end()) return &it->second;
  ClientOptions options;
  options.bus = bus;
  options.cache_pages = cache_pages;
  if (const char* env = std::getenv("PAGEFILE_CACHE_PAGES"); env != nullptr && cache_pages == 0) {
    auto n = parse_count("PAGEFILE_CACHE_PAGES", env, 0, 1u << 30);
    if (!n) return n.status();
    options.cache_pages = *n;
  }
  // As the client will resolve it when it starts the bus (which reports a
  // bad one, when a remote file needs it).
  auto config = net::resolve_bus(bus);
  bool in_process = config && config->embedded.size() == config->servers.size();
  auto client = Client::start(options);
  if (!client) return client.status();
  return &clients_.emplace(bus, SharedClient{std::move(*client), options.cache_pages, in_process}).first->second;
}

Result<std::shared_ptr<DbConfig>> DbRegistry::remember(const std::string& db_name, const DbOptions& options) {
  MutexLock lock(mu_);
  auto bus_client = client_for(options.bus, options.cache_pages);
  if (!bus_client) return bus_client.status();
  if (options.timeout_ms != 0) {
    if (Status s = (*bus_client)->client->set_request_timeout(static_cast<int>(options.timeout_ms)); !s) return s;
  }
  auto config = std::make_shared<DbConfig>();
  config->options = options;
  config->client = (*bus_client)->client.get();
  config->pool_pages = (*bus_client)->pool_pages;
  config->bus_in_process = (*bus_client)->in_process;
  config->concurrency = options.concurrency;
  config->set_policy(options.policy);
  auto old = databases_.find(db_name);
  if (old != databases_.end()) {  // counted per database, not per open
    config->stats = old->second->stats;
    config->trace = old->second->trace;
    config->fresh_locks = old->second->fresh_locks;
    config->changes = old->second->changes;
    config->absent = old->second->absent;
    config->wals = old->second->wals;
    config->journals = old->second->journals;
    config->write_locks = old->second->write_locks;
    config->lock_token = old->second->lock_token;
    if (!options.policy) config->set_policy(old->second->policy());
  }
  const char* env_trace = std::getenv("PAGEFILE_TRACE");
  std::string trace_path = options.trace;
  if (trace_path.empty() && old == databases_.end() && env_trace != nullptr) trace_path = env_trace;
  if (!trace_path.empty()) {
    auto writer = TraceWriter::open(trace_path);
    if (!writer) return writer.status();
    config->trace->set(std::move(*writer));
  }
  databases_[db_name] = config;
  known_.insert(db_name);
  names_changed();  // (find() answers otherwise now)
  return config;
}

Result<std::shared_ptr<DbConfig>> DbRegistry::lookup(const std::string& name) {
  std::string db = database_of(name);
  {
    MutexLock lock(mu_);
    known_.insert(name);
    auto it = databases_.find(db);
    if (it != databases_.end()) return it->second;
  }
  return remember(db, default_db_options());
}

std::shared_ptr<DbConfig> DbRegistry::find(const std::string& name) {
  MutexLock lock(mu_);
  auto it = databases_.find(database_of(name));
  return it == databases_.end() ? nullptr : it->second;
}

void DbRegistry::set_policy(const std::string& db_name, const BufferPolicy& policy) {
  MutexLock lock(mu_);
  auto it = databases_.find(db_name);
  if (it != databases_.end()) it->second->set_policy(policy);
}

std::vector<std::string> DbRegistry::names() {
  MutexLock lock(mu_);
  return {known_.begin(), known_.end()};
}

void DbRegistry::stop_all() {
  // Stopped, not destroyed: a connection closed later still holds the
  // pointer, and its calls then fail cleanly.
  MutexLock lock(mu_);
  for (auto& [name, db] : databases_) {
    if (auto writer = db->trace->get()) writer->flush();
  }
  for (auto& [bus, bus_client] : clients_) (void)bus_client.client->stop();
}

}  // namespace pagefile::vfs
