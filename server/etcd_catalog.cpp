#include "server/etcd_catalog.h"

#include <algorithm>
#include <charconv>
#include <tuple>

#include <fmt/format.h>

#include "core/page_bounds.h"
#include "core/random_id.h"
#include "server/lock_rules.h"

namespace pagefile::net {

using nlohmann::json;

namespace {

// Conflicting changes by other fronts make a change read again; this many
// in a row is a file too busy to change now (kBusy, the caller may retry).
constexpr int kMaxConflicts = 64;

std::string key_of(std::string_view kind, uint64_t id) { return fmt::format("{}/{}", kind, id); }

// The end of the range of keys that start with `prefix` (etcd's range_end).
std::string range_end(std::string prefix) {
  while (!prefix.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(prefix.back());
    if (last < 0xff) {
      ++last;
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

json record_json(const FileRecord& r) {
  return json{{"name", r.name},
              {"id", r.id},
              {"page_size", r.page_size},
              {"size_pages", r.size_pages},
              {"placement", placement_name(r.placement)},
              {"stripe_pages", r.stripe_pages},
              {"servers", r.servers},
              {"replicas", r.replicas},
              {"stale", r.stale},
              {"resyncing", r.resyncing},
              {"replica_version", r.replica_version},
              {"placement_keys", r.placement_keys},
              {"policy",
               {{"name", r.policy.name},
                {"access", access_type_name(r.policy.access)},
                {"min_pages", r.policy.min_pages},
                {"max_pages", r.policy.max_pages}}},
              {"created_unix_ns", r.created_unix_ns}};
}

Result<FileRecord> record_from(const std::string& key, const std::string& text) {
  auto bad = [&](std::string_view why) {
    return Status::corruption(fmt::format("etcd key {}", key), fmt::format("is not a file record: {}", why));
  };
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return bad("not a JSON object");
  FileRecord r;
  try {
    r.name = j.at("name").get<std::string>();
    r.id = j.at("id").get<uint64_t>();
    r.page_size = j.at("page_size").get<uint32_t>();
    r.size_pages = j.at("size_pages").get<int64_t>();
    auto placement = parse_placement(j.at("placement").get<std::string>());
    if (!placement) return bad(placement.status().message());
    r.placement = *placement;
    r.stripe_pages = j.at("stripe_pages").get<uint32_t>();
    r.servers = j.at("servers").get<std::vector<std::string>>();
    r.replicas = j.at("replicas").get<uint32_t>();
    r.stale = j.at("stale").get<std::vector<std::string>>();
    r.resyncing = j.at("resyncing").get<std::vector<std::string>>();
    r.replica_version = j.at("replica_version").get<uint64_t>();
    r.placement_keys = j.at("placement_keys").get<std::vector<std::string>>();
    const json& policy = j.at("policy");
    r.policy.name = policy.at("name").get<std::string>();
    auto access = parse_access_type(policy.at("access").get<std::string>());
    if (!access) return bad(access.status().message());
    r.policy.access = *access;
    r.policy.min_pages = policy.at("min_pages").get<uint32_t>();
    r.policy.max_pages = policy.at("max_pages").get<uint32_t>();
    r.created_unix_ns = j.at("created_unix_ns").get<int64_t>();
  } catch (const json::exception& e) {
    return bad(e.what());
  }
  if (Status s = check_file_record(r); !s) return bad(s.to_string());
  return r;
}

// A JSON object's unsigned field, 0 when the text is not one.
uint64_t field(const std::string& text, const char* name) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_object()) return 0;
  auto it = j.find(name);
  return it != j.end() && it->is_number_unsigned() ? it->get<uint64_t>() : 0;
}

Result<uint64_t> decimal(const std::string& key, const std::string& text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return Status::corruption(fmt::format("etcd key {}", key), fmt::format("holds '{:.40}', not a number", text));
  }
  return value;
}

// The file id that `name_key`, the key of `name`, holds in `seen`:
// kNotFound when it holds none.
Result<uint64_t> id_named(const EtcdCatalog::Snapshot& seen, const std::string& name_key, std::string_view name) {
  const EtcdCatalog::Kv* kv = seen.find(name_key);
  if (kv == nullptr) return Status::not_found(name, "is not in the catalog");
  return decimal(name_key, kv->value);
}

Status too_busy(std::string_view what) {
  return Status::busy(what, fmt::format("changed by others {} times in a row while this change was made", kMaxConflicts));
}

}  // namespace

const EtcdCatalog::Kv* EtcdCatalog::Snapshot::find(const std::string& key) const {
  auto it = kvs.find(key);
  return it == kvs.end() ? nullptr : &it->second;
}

Result<std::unique_ptr<EtcdCatalog>> EtcdCatalog::open(const Options& options) {
  auto client = EtcdClient::make(options.endpoints, options.client);
  if (!client) return client.status();
  std::unique_ptr<EtcdCatalog> catalog(new EtcdCatalog(std::move(*client), options));
  if (Status s = catalog->load_cluster_id(); !s) return s;
  return catalog;
}

EtcdCatalog::EtcdCatalog(std::unique_ptr<EtcdClient> client, const Options& options)
    : client_(std::move(client)),
      prefix_(options.prefix),
      // etcd grants leases in whole seconds, none shorter than about 2 s.
      ttl_s_(std::max<int64_t>(2, (options.lease.count() + 999) / 1000)) {}

Result<EtcdCatalog::Snapshot> EtcdCatalog::read(const std::vector<std::string>& keys,
                                                const std::vector<std::string>& prefixes) {
  json ops = json::array();
  for (const auto& k : keys) ops.push_back({{"request_range", {{"key", EtcdClient::base64(prefix_ + k)}}}});
  for (const auto& p : prefixes) {
    ops.push_back({{"request_range",
                    {{"key", EtcdClient::base64(prefix_ + p)}, {"range_end", EtcdClient::base64(range_end(prefix_ + p))}}}});
  }
  auto answer = client_->call("/v3/kv/txn", json{{"success", ops}});
  if (!answer) return answer.status();
  try {
    return snapshot_of(*answer);
  } catch (const json::exception& e) {
    return Status::io_error("etcd", fmt::format("a range answer of an unexpected shape: {}", e.what()));
  }
}

Result<EtcdCatalog::Snapshot> EtcdCatalog::snapshot_of(const json& answer) const {
  Snapshot out;
  out.revision = EtcdClient::number(answer.value("header", json::object()), "revision");
  for (const json& r : answer.value("responses", json::array())) {
    for (const json& kv : r.value("response_range", json::object()).value("kvs", json::array())) {
      auto key = EtcdClient::unbase64(kv.value("key", ""));
      auto value = EtcdClient::unbase64(kv.value("value", ""));
      if (!key) return key.status();
      if (!value) return value.status();
      if (key->rfind(prefix_, 0) != 0) continue;
      out.kvs[key->substr(prefix_.size())] = Kv{std::move(*value), EtcdClient::number(kv, "create_revision"),
                                                 EtcdClient::number(kv, "mod_revision"), EtcdClient::number(kv, "lease")};
    }
  }
  return out;
}

Result<std::optional<int64_t>> EtcdCatalog::commit(const Snapshot& seen, const std::vector<std::string>& keys,
                                                   const std::vector<std::string>& prefixes, const std::vector<Op>& ops) {
  json compare = json::array();
  for (const auto& k : keys) {
    if (const Kv* kv = seen.find(k)) {
      compare.push_back({{"target", "MOD"}, {"key", EtcdClient::base64(prefix_ + k)}, {"result", "EQUAL"},
                         {"mod_revision", std::to_string(kv->mod)}});
    } else {
      compare.push_back({{"target", "CREATE"}, {"key", EtcdClient::base64(prefix_ + k)}, {"result", "EQUAL"},
                         {"create_revision", "0"}});
    }
  }
  for (const auto& p : prefixes) {
    compare.push_back({{"target", "MOD"}, {"key", EtcdClient::base64(prefix_ + p)},
                       {"range_end", EtcdClient::base64(range_end(prefix_ + p))}, {"result", "LESS"},
                       {"mod_revision", std::to_string(seen.revision + 1)}});
  }
  json success = json::array();
  for (const Op& op : ops) {
    std::string key = EtcdClient::base64(prefix_ + op.key);
    switch (op.kind) {
      case Op::kPut: {
        json put{{"key", key}, {"value", EtcdClient::base64(op.value)}};
        if (op.lease != 0) put["lease"] = std::to_string(op.lease);
        success.push_back({{"request_put", put}});
        break;
      }
      case Op::kDelete: success.push_back({{"request_delete_range", {{"key", key}}}}); break;
      case Op::kDeletePrefix:
        success.push_back(
            {{"request_delete_range", {{"key", key}, {"range_end", EtcdClient::base64(range_end(prefix_ + op.key))}}}});
        break;
    }
  }
  auto answer = client_->call("/v3/kv/txn", json{{"compare", compare}, {"success", success}});
  if (!answer) return answer.status();
  auto succeeded = answer->find("succeeded");
  if (succeeded == answer->end() || !succeeded->is_boolean() || !succeeded->get<bool>()) return std::optional<int64_t>();
  auto header = answer->find("header");
  int64_t revision = header != answer->end() && header->is_object() ? EtcdClient::number(*header, "revision") : 0;
  if (revision == 0) return Status::io_error("etcd", "a transaction's answer without its revision");
  return std::optional<int64_t>(revision);
}

Status EtcdCatalog::load_cluster_id() {
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({"cluster"});
    if (!seen) return seen.status();
    if (const Kv* kv = seen->find("cluster")) {
      auto id = decimal("cluster", kv->value);
      if (!id) return id.status();
      if (*id == 0) return Status::corruption("etcd key cluster", "holds 0, which names no cluster");
      cluster_id_ = *id;
      return Status::ok();
    }
    uint64_t id = random_id();
    auto done = commit(*seen, {"cluster"}, {}, {Op{Op::kPut, "cluster", std::to_string(id)}});
    if (!done) return done.status();
  }
  return too_busy("etcd key cluster");
}

Result<uint64_t> EtcdCatalog::directory_at(const std::string& address) {
  const std::string key = "directory/" + address;
  auto seen = read({key});
  if (!seen) return seen.status();
  const Kv* kv = seen->find(key);
  return kv != nullptr ? decimal(key, kv->value) : Result<uint64_t>(uint64_t{0});
}

Result<uint64_t> EtcdCatalog::record_directory(const std::string& address, uint64_t directory) {
  const std::string key = "directory/" + address;
  if (directory == 0) return Status::invalid_argument(address, "directory id 0 names no directory");
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({key});
    if (!seen) return seen.status();
    if (const Kv* kv = seen->find(key)) return decimal(key, kv->value);
    auto done = commit(*seen, {key}, {}, {Op{Op::kPut, key, std::to_string(directory)}});
    if (!done) return done.status();
    if (*done) return directory;
  }
  return too_busy("etcd key " + key);
}

Result<FileRecord> EtcdCatalog::record_of(const Snapshot& seen, uint64_t id) const {
  const std::string key = key_of("rec", id);
  const Kv* kv = seen.find(key);
  if (kv == nullptr) return Status::not_found(fmt::format("file id {}", id), "is not in the catalog");
  auto record = record_from(key, kv->value);
  if (record && record->id != id) return Status::corruption(fmt::format("etcd key {}", key), "holds another file's record");
  return record;
}

Status EtcdCatalog::check_token(const Snapshot& seen, uint64_t id, uint64_t token) const {
  const Kv* grant = seen.find(key_of("grant", id));
  if (token == 0 || grant == nullptr || token >= static_cast<uint64_t>(grant->mod)) return Status::ok();
  return Status::stale("catalog", fmt::format("lock token {} was superseded: the write lock passed to another "
                                              "client (its lease ran out)", token));
}

Result<FileRecord> EtcdCatalog::lookup(std::string_view name) {
  const std::string name_key = fmt::format("name/{}", name);
  auto seen = read({name_key});
  if (!seen) return seen.status();
  auto id = id_named(*seen, name_key, name);
  if (!id) return id.status();
  auto rec = read({key_of("rec", *id)});
  if (!rec) return rec.status();
  auto record = record_of(*rec, *id);
  if (!record && record.status().is(Code::kNotFound)) return Status::not_found(name, "is not in the catalog");
  return record;
}

Result<FileRecord> EtcdCatalog::create(const FileRecord& proto) {
  if (Status s = check_file_record(proto); !s) return s;
  const std::string name_key = "name/" + proto.name;
  std::optional<FileRecord> made;  // what the last attempt wrote
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({name_key, "next_id"});
    if (!seen) return seen.status();
    if (const Kv* taken = seen->find(name_key)) {
      // Perhaps by this very create, applied by a member whose answer was
      // lost before the call went to another: then it is ours.
      if (made && taken->value == std::to_string(made->id)) {
        auto rec = read({key_of("rec", made->id)});
        if (rec && record_of(*rec, made->id) && *record_of(*rec, made->id) == *made) return *made;
      }
      return Status::already_exists(proto.name, "is already in the catalog");
    }
    uint64_t next = 1;
    if (const Kv* kv = seen->find("next_id")) {
      auto value = decimal("next_id", kv->value);
      if (!value) return value.status();
      next = *value;
    }
    FileRecord record = proto;
    record.id = next;
    record.created_unix_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    made = record;
    auto done = commit(*seen, {name_key, "next_id"}, {},
                       {Op{Op::kPut, "next_id", std::to_string(next + 1)}, Op{Op::kPut, name_key, std::to_string(next)},
                        Op{Op::kPut, key_of("rec", next), record_json(record).dump()}});
    if (!done) return done.status();
    if (*done) return record;
  }
  return too_busy(proto.name);
}

Result<std::vector<FileRecord>> EtcdCatalog::list() {
  auto seen = read({}, {"rec/"});
  if (!seen) return seen.status();
  std::vector<FileRecord> out;
  for (const auto& [key, kv] : seen->kvs) {
    auto record = record_from(key, kv.value);
    if (!record) return record.status();
    out.push_back(std::move(*record));
  }
  std::sort(out.begin(), out.end(), [](const FileRecord& a, const FileRecord& b) { return a.name < b.name; });
  return out;
}

Status EtcdCatalog::set_size(uint64_t token, uint64_t id, int64_t size_pages, bool grow_only) {
  if (Status s = check_size_pages(size_pages, fmt::format("file id {}", id)); !s) return s;
  const std::string rec = key_of("rec", id), grant = key_of("grant", id), state = key_of("state", id);
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({rec, grant, state});
    if (!seen) return seen.status();
    if (Status s = check_token(*seen, id, token); !s) return s;
    auto record = record_of(*seen, id);
    if (!record) return record.status();
    int64_t next = grow_only ? std::max(record->size_pages, size_pages) : size_pages;
    if (next == record->size_pages) return Status::ok();
    record->size_pages = next;
    // The file changed: its version moves (the state key is written again).
    const Kv* st = seen->find(state);
    auto done = commit(*seen, {rec, grant, state}, {},
                       {Op{Op::kPut, rec, record_json(*record).dump()},
                        Op{Op::kPut, state, st != nullptr ? st->value : json{{"writer", 0}}.dump()}});
    if (!done) return done.status();
    if (*done) return Status::ok();
  }
  return too_busy(fmt::format("file id {}", id));
}

Result<FileRecord> EtcdCatalog::remove(uint64_t token, std::string_view name) {
  const std::string name_key = fmt::format("name/{}", name);
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto named = read({name_key});
    if (!named) return named.status();
    auto id = id_named(*named, name_key, name);
    if (!id) return id.status();
    const std::string rec = key_of("rec", *id), grant = key_of("grant", *id);
    auto seen = read({name_key, rec, grant});
    if (!seen) return seen.status();
    // The name gone, or given to another file, meanwhile: again.
    if (const Kv* again = seen->find(name_key); again == nullptr || again->value != named->find(name_key)->value) continue;
    if (Status s = check_token(*seen, *id, token); !s) return s;
    auto record = record_of(*seen, *id);
    if (!record) return record.status();
    auto done = commit(*seen, {name_key, rec, grant}, {},
                       {Op{Op::kDelete, name_key}, Op{Op::kDelete, rec}, Op{Op::kDelete, grant},
                        Op{Op::kDelete, key_of("state", *id)}, Op{Op::kDeletePrefix, fmt::format("lock/{}/", *id)}});
    if (!done) return done.status();
    if (*done) return record;
  }
  return too_busy(name);
}

Result<FileRecord> EtcdCatalog::set_copy_state(uint64_t token, uint64_t id, const std::string& server,
                                               CopyState state) {
  const std::string rec = key_of("rec", id), grant = key_of("grant", id);
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({rec, grant});
    if (!seen) return seen.status();
    if (Status s = check_token(*seen, id, token); !s) return s;
    auto record = record_of(*seen, id);
    if (!record) return record.status();
    auto changed = with_copy_state(*record, server, state);
    if (!changed) return changed.status();
    if (!*changed) return record;
    auto done = commit(*seen, {rec, grant}, {}, {Op{Op::kPut, rec, record_json(**changed).dump()}});
    if (!done) return done.status();
    if (*done) return std::move(**changed);
  }
  return too_busy(fmt::format("file id {}", id));
}

Result<std::vector<FileRecord>> EtcdCatalog::replace_server(const std::string& old_server,
                                                            const std::string& new_server) {
  if (Status s = check_replacement(old_server, new_server); !s) return s;
  // Every file is checked before any changes (so a file that cannot take
  // it stops them all); then the records change in transactions of at most
  // kBatch (etcd takes at most 128 operations in one), each void if one of
  // its records changed or went meanwhile, and then read and done again.
  // A failure between batches leaves the earlier ones done: running it
  // again finishes the rest.
  constexpr size_t kBatch = 100;
  std::vector<FileRecord> changed;
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({}, {"rec/"});
    if (!seen) return seen.status();
    std::vector<std::pair<std::string, FileRecord>> todo;
    for (const auto& [key, kv] : seen->kvs) {
      auto record = record_from(key, kv.value);
      if (!record) return record.status();
      auto next = with_server_replaced(*record, old_server, new_server);
      if (!next) return next.status();
      if (*next) todo.emplace_back(key, std::move(**next));
    }
    if (todo.empty()) return forget_directory(old_server, new_server, std::move(changed));
    bool conflict = false;
    for (size_t first = 0; first < todo.size() && !conflict; first += kBatch) {
      std::vector<std::string> keys;
      std::vector<Op> ops;
      for (size_t i = first; i < std::min(todo.size(), first + kBatch); ++i) {
        keys.push_back(todo[i].first);
        ops.push_back(Op{Op::kPut, todo[i].first, record_json(todo[i].second).dump()});
      }
      auto done = commit(*seen, keys, {}, ops);
      if (!done) return done.status();
      if (!*done) {
        conflict = true;
        break;
      }
      for (size_t i = first; i < std::min(todo.size(), first + kBatch); ++i) changed.push_back(todo[i].second);
    }
    if (!conflict) return forget_directory(old_server, new_server, std::move(changed));
  }
  return too_busy("replace-server");
}

Result<std::vector<FileRecord>> EtcdCatalog::forget_directory(const std::string& old_server,
                                                              const std::string& new_server,
                                                              std::vector<FileRecord> changed) {
  if (old_server != new_server) return changed;
  // After the records: every copy there is stale before a client may
  // record the new directory.
  // (Unconditional: compared with nothing, it needs no snapshot read.)
  auto done = commit(Snapshot{}, {}, {}, {Op{Op::kDelete, "directory/" + old_server}});
  if (!done) return done.status();
  return changed;
}

Result<int64_t> EtcdCatalog::grant_lease() {
  auto answer = client_->call("/v3/lease/grant", json{{"TTL", ttl_s_}});
  if (!answer) return answer.status();
  int64_t id = EtcdClient::number(*answer, "ID");
  if (id == 0) return Status::io_error("etcd", "granted a lease without an id");
  return id;
}

Result<bool> EtcdCatalog::keep_alive(int64_t id) {
  auto answer = client_->call("/v3/lease/keepalive", json{{"ID", std::to_string(id)}});
  if (!answer) return answer.status();
  auto result = answer->find("result");
  return result != answer->end() && result->is_object() && EtcdClient::number(*result, "TTL") > 0;
}

Result<int64_t> EtcdCatalog::lease_of(const Snapshot& seen, uint64_t owner) {
  const auto now = std::chrono::steady_clock::now();
  if (const Kv* kv = seen.find(key_of("owner", owner)); kv != nullptr && kv->lease != 0) {
    // Renewed here within a third of its length: it has two thirds left
    // at least, as the renewals keep it, so this lock need not renew it.
    // (Were it gone all the same, the transaction naming it would fail
    // and the lock would be tried again with a new one.)
    if (auto it = renewed_.find(kv->lease); it != renewed_.end() && now - it->second < lease() / 3) return kv->lease;
    auto alive = keep_alive(kv->lease);
    if (!alive) return alive.status();
    if (*alive) {
      remember_renewal(kv->lease, now);
      return kv->lease;
    }
  }
  auto granted = grant_lease();
  if (granted) remember_renewal(*granted, now);
  return granted;
}

void EtcdCatalog::remember_renewal(int64_t id, std::chrono::steady_clock::time_point when) {
  // Bounded: entries older than a lease are of no use.
  if (renewed_.size() > 4096) std::erase_if(renewed_, [&](const auto& e) { return when - e.second > lease(); });
  renewed_[id] = when;
}

Result<LockGrant> EtcdCatalog::lock(uint64_t id, uint64_t owner, LockLevel level) {
  const std::string rec = key_of("rec", id), state = key_of("state", id), grant = key_of("grant", id),
                    owner_key = key_of("owner", owner), locks = fmt::format("lock/{}/", id),
                    mine = fmt::format("lock/{}/{}", id, owner);
  for (int attempt = 0; attempt < kMaxConflicts; ++attempt) {
    auto seen = read({rec, state, grant, owner_key}, {locks});
    if (!seen) return seen.status();
    auto record = record_of(*seen, id);
    if (!record) return Status::not_found(fmt::format("file {}", id), "is not in the catalog");
    std::map<uint64_t, LockLevel> owners;
    for (const auto& [key, kv] : seen->kvs) {
      if (key.rfind(locks, 0) != 0) continue;
      auto who = decimal(key, key.substr(locks.size()));
      auto held = decimal(key, kv.value);
      if (!who) return who.status();
      if (!held) return held.status();
      if (*held > static_cast<uint64_t>(LockLevel::kExclusive)) {
        return Status::corruption(fmt::format("etcd key {}", key), "holds no lock level");
      }
      if (*held != 0) owners[*who] = static_cast<LockLevel>(*held);
    }
    const Kv* state_kv = seen->find(state);
    const Kv* grant_kv = seen->find(grant);
    const uint64_t writer = state_kv != nullptr ? field(state_kv->value, "writer") : 0;
    // The owner that must announce its token (see below), until it lets go
    // of a write lock or the token passes to another owner.
    const uint64_t announcer = state_kv != nullptr ? field(state_kv->value, "announce") : 0;
    // The writer the state names lost its lock without letting go (its
    // lease ran out, or it left without a word): it may still be writing.
    const LockLevel held = owners.contains(owner) ? owners[owner] : LockLevel::kNone;
    LockDecision d = decide_lock(id, owners, owner, level);
    // (An owner letting go of its last lock is no one to tell: the news
    // waits for the next owner that will read.)
    const bool lost = d.level != LockLevel::kNone && writer != 0 &&
                      (!owners.contains(writer) || owners[writer] < LockLevel::kReserved);
    if (!d.status && d.level == held) return d.status;  // refused: nothing changes

    std::vector<Op> ops;
    if (d.level == LockLevel::kNone) {
      if (held != LockLevel::kNone) ops.push_back(Op{Op::kDelete, mine});
    } else {
      auto lease = lease_of(*seen, owner);
      if (!lease) return lease.status();
      const Kv* owner_kv = seen->find(owner_key);
      if (owner_kv == nullptr || owner_kv->lease != *lease) {
        ops.push_back(Op{Op::kPut, owner_key, std::to_string(*lease), *lease});
      }
      const Kv* my_kv = seen->find(mine);
      if (d.level != held || my_kv == nullptr || my_kv->lease != *lease) {
        ops.push_back(Op{Op::kPut, mine, std::to_string(static_cast<unsigned>(d.level)), *lease});
      }
    }
    uint64_t next_writer = lost ? 0 : writer;
    if (d.level >= LockLevel::kReserved) {
      next_writer = owner;
    } else if (next_writer == owner) {
      next_writer = 0;
    }
    // A lost writer's successor gets a new token and must announce it to
    // the file's servers before it reads. That duty is kept in the state
    // key, not only in this answer, which may never arrive (a busy PENDING
    // step, a reply lost with its member): every grant to the announcer
    // asks again (announcing a token twice is harmless) until it lets go
    // of a write lock, which it can only have done after such a grant, or
    // until the token passes to another owner.
    uint64_t next_announcer = announcer;
    if (lost) {
      next_announcer = owner;
    } else if (announcer == owner && held >= LockLevel::kReserved && d.level < LockLevel::kReserved) {
      next_announcer = 0;
    }
    const bool needs_token = d.level >= LockLevel::kReserved || lost || next_announcer == owner;
    const bool new_token =
        needs_token && (lost || grant_kv == nullptr || field(grant_kv->value, "owner") != owner);
    if (new_token && !lost) next_announcer = 0;
    const bool version_moves = d.version_moves || lost || next_writer != writer;
    if (version_moves || next_announcer != announcer) {
      ops.push_back(Op{Op::kPut, state, json{{"writer", next_writer}, {"announce", next_announcer}}.dump()});
    }
    if (new_token) ops.push_back(Op{Op::kPut, grant, json{{"owner", owner}}.dump()});

    int64_t revision = seen->revision;
    if (!ops.empty()) {
      auto done = commit(*seen, {rec, state, grant, owner_key}, {locks}, ops);
      // kNotFound: the owner's lease ran out between its renewal and now.
      if (!done && done.status().is(Code::kNotFound)) continue;
      if (!done) return done.status();
      if (!*done) continue;
      revision = **done;
    }
    if (!d.status) return d.status;  // kBusy, left at PENDING
    LockGrant out;
    out.level = d.level;
    for (const auto& [other, other_level] : owners) {
      if (other != owner && other_level >= LockLevel::kReserved) out.reserved_by_other = true;
    }
    // (The version is the state key's revision: a state written for the
    // announcer alone moves it too, which costs readers their cache once.)
    const bool state_written = version_moves || next_announcer != announcer;
    out.version = static_cast<uint64_t>(state_written ? revision
                                        : state_kv   ? state_kv->mod
                                                     : seen->find(rec)->create);
    // A release of a lock the owner no longer held (its lease ran out): no
    // version for its next grant to match (LockGrant::version).
    if (d.level == LockLevel::kNone && held == LockLevel::kNone) out.version = kNoVersion;
    if (needs_token) {
      out.fence_token = static_cast<uint64_t>(new_token ? revision : grant_kv->mod);
      out.fence_announce = next_announcer == owner;
    }
    out.size_pages = record->size_pages;
    out.replica_version = record->replica_version;
    out.lease = lease();
    return out;
  }
  return too_busy(fmt::format("file {}", id));
}

Status EtcdCatalog::renew(uint64_t owner) {
  const std::string owner_key = key_of("owner", owner);
  auto seen = read({owner_key});
  if (!seen) return seen.status();
  const Kv* kv = seen->find(owner_key);
  if (kv != nullptr && kv->lease != 0) {
    const auto asked = std::chrono::steady_clock::now();  // (the lease runs from no later than this)
    auto alive = keep_alive(kv->lease);
    if (!alive) return alive.status();
    if (*alive) {
      remember_renewal(kv->lease, asked);
      return Status::ok();
    }
  }
  return Status::not_found(fmt::format("owner {}", owner), "holds no lock (never took one, or its lease ran out)");
}

Status EtcdCatalog::release_owner(uint64_t owner) {
  const std::string owner_key = key_of("owner", owner);
  auto seen = read({owner_key});
  if (!seen) return seen.status();
  const Kv* kv = seen->find(owner_key);
  if (kv == nullptr || kv->lease == 0) return Status::ok();
  // Revoking the lease drops every key under it: the owner's locks go now.
  auto answer = client_->call("/v3/lease/revoke", json{{"ID", std::to_string(kv->lease)}});
  if (!answer && !answer.status().is(Code::kNotFound)) return answer.status();
  return Status::ok();
}

Result<std::vector<LockRecord>> EtcdCatalog::locks() {
  auto seen = read({}, {"lock/"});
  if (!seen) return seen.status();
  std::map<int64_t, std::chrono::milliseconds> left;  // by lease
  std::vector<LockRecord> out;
  for (const auto& [key, kv] : seen->kvs) {
    auto slash = key.find('/', 5);
    if (slash == std::string::npos) continue;
    auto file = decimal(key, key.substr(5, slash - 5));
    auto who = decimal(key, key.substr(slash + 1));
    auto held = decimal(key, kv.value);
    if (!file || !who || !held || *held > static_cast<uint64_t>(LockLevel::kExclusive)) {
      return Status::corruption(fmt::format("etcd key {}", key), "is not a lock");
    }
    if (!left.contains(kv.lease)) {
      auto answer = client_->call("/v3/lease/timetolive", json{{"ID", std::to_string(kv.lease)}});
      if (!answer) return answer.status();
      left[kv.lease] = std::chrono::seconds(std::max<int64_t>(0, EtcdClient::number(*answer, "TTL")));
    }
    out.push_back(LockRecord{*file, *who, static_cast<LockLevel>(*held), left[kv.lease]});
  }
  std::sort(out.begin(), out.end(), [](const LockRecord& a, const LockRecord& b) {
    return std::tie(a.file_id, a.owner) < std::tie(b.file_id, b.owner);
  });
  return out;
}

Status EtcdCatalog::register_server(const std::string& address) {
  if (auto it = registrations_.find(address); it != registrations_.end()) {
    auto alive = keep_alive(it->second);
    if (!alive) return alive.status();
    if (*alive) return Status::ok();
    registrations_.erase(it);
  }
  auto lease = grant_lease();
  if (!lease) return lease.status();
  auto answer = client_->call("/v3/kv/put", json{{"key", EtcdClient::base64(prefix_ + "server/" + address)},
                                                 {"value", EtcdClient::base64("")},
                                                 {"lease", std::to_string(*lease)}});
  if (!answer) return answer.status();
  registrations_[address] = *lease;
  return Status::ok();
}

Status EtcdCatalog::deregister_server(const std::string& address) {
  auto it = registrations_.find(address);
  if (it == registrations_.end()) return Status::ok();
  auto answer = client_->call("/v3/lease/revoke", json{{"ID", std::to_string(it->second)}});
  registrations_.erase(it);
  if (!answer && !answer.status().is(Code::kNotFound)) return answer.status();
  return Status::ok();
}

Result<std::vector<std::string>> EtcdCatalog::live_servers() {
  auto seen = read({}, {"server/"});
  if (!seen) return seen.status();
  std::vector<std::string> out;
  for (const auto& [key, kv] : seen->kvs) out.push_back(key.substr(7));
  return out;
}

}  // namespace pagefile::net
