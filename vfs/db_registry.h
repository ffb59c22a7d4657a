// What the VFS remembers for the whole process: one Pagefile client per bus
// (started on first use, stopped at exit), and for each database name the
// options it was opened with, so its journal, WAL and super-journal (and
// xDelete, xAccess and the SQL functions, which get only a name) go to the
// same place.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "pagefile/pagefile.h"
#include "vfs/db_options.h"
#include "vfs/mapped_file.h"

namespace pagefile::vfs {

// A database as this process opened it last.
struct DbConfig {
  DbOptions options;
  Client* client = nullptr;
  std::atomic<uint32_t> concurrency{8};  // PRAGMA pagefile_concurrency changes it
  std::shared_ptr<IoStats> stats = std::make_shared<IoStats>();
};

class DbRegistry {
 public:
  // The one registry of the process.
  static DbRegistry& instance();

  // The configuration for a database opened with `options` (its client
  // started when needed), remembered under `db_name`.
  Result<std::shared_ptr<DbConfig>> remember(const std::string& db_name, const DbOptions& options);

  // The configuration remembered for the database `name` belongs to
  // (database_of); for a name never opened here, the defaults (remote, the
  // default bus).
  Result<std::shared_ptr<DbConfig>> lookup(const std::string& name);

  // Every store name this process opened, looked up or remembered (the
  // store has no listing; this is what pagefile_names() offers instead).
  std::vector<std::string> names();

  // Stops every client (at exit).
  void stop_all();

 private:
  DbRegistry() = default;
  Result<Client*> client_for(const std::string& bus);  // REQUIRES: mu_ held

  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Client>> clients_;         // GUARDED_BY(mu_), by bus
  std::map<std::string, std::shared_ptr<DbConfig>> databases_;     // GUARDED_BY(mu_)
  std::set<std::string> known_;                                     // GUARDED_BY(mu_)
};

}  // namespace pagefile::vfs
