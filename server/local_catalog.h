// The built-in catalog (server/catalog.h): records in an SQLite database in
// one server's directory (server/catalog_store.h), locks in that server's
// memory (server/lease_table.h), fencing tokens from blocks set aside in the
// database. A restart of its server drops every lock, as a lost lease would;
// and since a writer of before it may still be writing, unaware, the first
// grant of each file after it fences that writer off as a lost lease's
// successor's does (a new token, announced to the servers before anything
// is read), and tokens given before it are refused here.
//
// Thread-safety: not thread-safe; CatalogService serialises calls.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "server/catalog.h"
#include "server/catalog_store.h"
#include "server/lease_table.h"

namespace pagefile::net {

class LocalCatalog final : public Catalog {
 public:
  // The records in `path` (made when missing); locks last `lease` past
  // their owner's last renewal.
  static Result<std::unique_ptr<LocalCatalog>> open(const std::filesystem::path& path, std::chrono::milliseconds lease);

  uint64_t cluster_id() const override { return store_->cluster_id(); }
  Result<FileRecord> lookup(std::string_view name) override { return store_->lookup(name); }
  Result<FileRecord> create(const FileRecord& proto) override { return store_->create(proto); }
  Result<std::vector<FileRecord>> list() override { return store_->list(); }
  Status set_size(uint64_t token, uint64_t id, int64_t size_pages, bool grow_only) override;
  Result<FileRecord> remove(uint64_t token, std::string_view name) override;
  Result<FileRecord> set_copy_state(uint64_t token, uint64_t id, const std::string& server, CopyState state) override;
  Result<std::vector<FileRecord>> replace_server(const std::string& old_server, const std::string& new_server) override {
    return store_->replace_server(old_server, new_server);
  }
  Result<uint64_t> directory_at(const std::string& address) override { return store_->directory_at(address); }
  Result<uint64_t> record_directory(const std::string& address, uint64_t directory) override {
    return store_->record_directory(address, directory);
  }
  Result<LockGrant> lock(uint64_t id, uint64_t owner, LockLevel level) override;
  Status renew(uint64_t owner) override { return leases_.renew(owner); }
  Status release_owner(uint64_t owner) override;
  Result<std::vector<LockRecord>> locks() override { return leases_.list(); }
  uint64_t lease_expiries() const override { return leases_.expiries(); }

 private:
  LocalCatalog(std::unique_ptr<CatalogStore> store, std::chrono::milliseconds lease);
  // The next fencing token, from a block set aside in the store.
  Result<uint64_t> next_token();
  // kStale when `token` was given by this catalog and has since been
  // superseded by another owner's, or was given before this catalog
  // started (its lock went with the restart); 0 checks nothing.
  Status check_token(uint64_t token) const;

  // The last write lock granted on a file: its token and owner.
  struct Grant {
    uint64_t token = 0;
    uint64_t owner = 0;
  };

  std::unique_ptr<CatalogStore> store_;
  LeaseTable leases_;
  // Tokens [next_token_, token_limit_) are set aside and not yet given.
  uint64_t next_token_ = 0;
  uint64_t token_limit_ = 0;
  uint64_t first_token_ = 0;                      // the first this run set aside
  std::map<uint64_t, Grant> grants_;              // by file
  std::set<uint64_t> granted_;                    // files locked since this run began
  std::map<uint64_t, uint64_t> announcers_;       // file -> the owner to announce its token
  bool restarted_ = false;                        // a run before this one gave tokens
  std::map<uint64_t, uint64_t> live_tokens_;      // grants_' tokens -> file
};

}  // namespace pagefile::net
