// The catalog on etcd (server/catalog.h): file records, sizes, replica sets
// and versions, locks with their leases, fencing tokens, the cluster id and
// the list of live servers, all kept in an etcd cluster, so that no one
// machine can lose or block them. Any number of page servers
// (pagefiled --catalog etcd://...) and clients (catalog=etcd://... in the
// bus) use one at once: each is a stateless front of the same keys.
//
// The keys, under a prefix ("/pagefile/" unless told otherwise):
//   cluster          the cluster id (random, made by the first user)
//   next_id          the next file id (ids are never given twice)
//   name/NAME        -> the file's id
//   rec/ID           -> the file's record (JSON)
//   state/ID         {"writer": OWNER}: who holds a write lock (0: none);
//                    its mod revision is the file's version
//   grant/ID         {"owner": OWNER}: the last write lock's owner; its mod
//                    revision is that lock's fencing token
//   lock/ID/OWNER    -> the owner's level, under the owner's lease
//   owner/OWNER      -> the owner's etcd lease, under that lease
//   server/ADDRESS   a live page server, under the server's lease
//   directory/ADDRESS  the directory id of the server at ADDRESS, recorded
//                    by the first client that reached it
// Every change is one etcd transaction that compares the mod revisions of
// what it read (optimistic concurrency; a conflict reads again), so two
// fronts deciding at once cannot both win. A lock's lease is an etcd lease,
// renewed by keep-alive; when it runs out etcd drops the owner's lock keys.
// A writer whose lock went that way is seen at the file's next lock by its
// state key still naming it: the version moves and the new owner gets a
// new token to announce (lease_table.h, "Versions"; catalog_service.cpp).
// Tokens are etcd revisions, so they only grow, across every front.
//
// Thread-safety: not thread-safe; CatalogService serialises calls.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/catalog.h"
#include "server/etcd_client.h"

namespace pagefile::net {

class EtcdCatalog final : public Catalog {
 public:
  struct Options {
    std::vector<std::string> endpoints;          // HOST:PORT of each member
    std::chrono::milliseconds lease{10'000};     // locks' (whole seconds, at least 2 s, as etcd grants them)
    std::string prefix = "/pagefile/";
    EtcdClient::Options client;
  };

  // Reaches the cluster and reads (or makes) the cluster id.
  static Result<std::unique_ptr<EtcdCatalog>> open(const Options& options);

  uint64_t cluster_id() const override { return cluster_id_; }
  Result<FileRecord> lookup(std::string_view name) override;
  Result<FileRecord> create(const FileRecord& proto) override;
  Result<std::vector<FileRecord>> list() override;
  Status set_size(uint64_t token, uint64_t id, int64_t size_pages, bool grow_only) override;
  Result<FileRecord> remove(uint64_t token, std::string_view name) override;
  Result<FileRecord> set_copy_state(uint64_t token, uint64_t id, const std::string& server, CopyState state) override;
  Result<std::vector<FileRecord>> replace_server(const std::string& old_server, const std::string& new_server) override;
  Result<uint64_t> directory_at(const std::string& address) override;
  Result<uint64_t> record_directory(const std::string& address, uint64_t directory) override;
  Result<LockGrant> lock(uint64_t id, uint64_t owner, LockLevel level) override;
  Status renew(uint64_t owner) override;
  Status release_owner(uint64_t owner) override;
  Result<std::vector<LockRecord>> locks() override;

  // Page servers: `address` is live while its registration is renewed
  // (each call renews it, first making it); a server that stops renewing
  // drops out of live_servers() within one lease.
  Status register_server(const std::string& address);
  // A server that stops cleanly leaves the list now, not a lease later.
  Status deregister_server(const std::string& address);
  Result<std::vector<std::string>> live_servers();

  std::chrono::milliseconds lease() const { return std::chrono::seconds(ttl_s_); }

  // One key as read.
  struct Kv {
    std::string value;
    int64_t create = 0;
    int64_t mod = 0;
    int64_t lease = 0;
  };
  // What one read saw, at one revision.
  struct Snapshot {
    int64_t revision = 0;
    std::map<std::string, Kv> kvs;  // by key (without the prefix); absent keys are not here
    const Kv* find(const std::string& key) const;
  };
  // A change, in a transaction.
  struct Op {
    enum Kind { kPut, kDelete, kDeletePrefix } kind = kPut;
    std::string key;  // without the prefix
    std::string value;
    int64_t lease = 0;
  };

 private:
  EtcdCatalog(std::unique_ptr<EtcdClient> client, const Options& options);

  // Reads `keys` and every key under `prefixes` at one revision.
  Result<Snapshot> read(const std::vector<std::string>& keys, const std::vector<std::string>& prefixes = {});
  Result<Snapshot> snapshot_of(const nlohmann::json& answer) const;
  // Applies `ops` if none of `keys` nor anything under `prefixes` changed
  // since `seen`: the revision it committed at, or nullopt on a conflict.
  Result<std::optional<int64_t>> commit(const Snapshot& seen, const std::vector<std::string>& keys,
                                        const std::vector<std::string>& prefixes, const std::vector<Op>& ops);
  // Reads the record of file `id`: kNotFound when there is none.
  Result<FileRecord> record_of(const Snapshot& seen, uint64_t id) const;
  // replace_server's end: `changed`, after forgetting the directory at
  // the address when it is the same (a new directory there).
  Result<std::vector<FileRecord>> forget_directory(const std::string& old_server, const std::string& new_server,
                                                   std::vector<FileRecord> changed);
  // kStale when `token` was superseded by a later write lock of the file.
  Status check_token(const Snapshot& seen, uint64_t id, uint64_t token) const;
  // The owner's etcd lease: its own, renewed, or a new one.
  Result<int64_t> lease_of(const Snapshot& seen, uint64_t owner);
  Result<int64_t> grant_lease();
  // Renews lease `id`: false when it is gone.
  Result<bool> keep_alive(int64_t id);
  void remember_renewal(int64_t id, std::chrono::steady_clock::time_point when);
  // Makes the cluster id when there is none; reads it.
  Status load_cluster_id();

  std::unique_ptr<EtcdClient> client_;
  const std::string prefix_;
  const int64_t ttl_s_;
  uint64_t cluster_id_ = 0;
  std::map<std::string, int64_t> registrations_;  // address -> its lease
  // Leases this front renewed (or was granted), and when.
  std::map<int64_t, std::chrono::steady_clock::time_point> renewed_;
};

}  // namespace pagefile::net
