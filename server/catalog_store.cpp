#include "server/catalog_store.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/file_record.h"
#include "core/os_error.h"
#include "core/random_id.h"
#include "core/page_bounds.h"

namespace pagefile::net {

namespace {

// Marks the database as ours in its header (PRAGMA application_id), so that
// another program's SQLite database is told apart from an empty one: "PGFC".
constexpr int32_t kApplicationId = 0x50474643;
// The schema this build reads and writes (PRAGMA user_version).
// Version 2 added policy_name, version 3 replicas, version 4 servers; an
// older catalog is brought up to date when opened.
constexpr int32_t kSchemaVersion = 4;
// Another process (an operator's sqlite3 shell) may hold the database for a
// moment; waiting this long beats failing a client's open.
constexpr int kBusyTimeoutMs = 2000;

constexpr const char* kSchema = R"sql(
CREATE TABLE files(
  name TEXT PRIMARY KEY NOT NULL,
  id INTEGER UNIQUE NOT NULL,
  page_size INTEGER NOT NULL,
  size_pages INTEGER NOT NULL,
  placement TEXT NOT NULL,
  stripe_pages INTEGER NOT NULL,
  servers TEXT NOT NULL,
  access TEXT NOT NULL,
  min_pages INTEGER NOT NULL,
  max_pages INTEGER NOT NULL,
  created_ns INTEGER NOT NULL,
  policy_name TEXT NOT NULL DEFAULT '',
  replicas INTEGER NOT NULL DEFAULT 1,
  stale TEXT NOT NULL DEFAULT '',
  resyncing TEXT NOT NULL DEFAULT '',
  replica_version INTEGER NOT NULL DEFAULT 0,
  placement_keys TEXT NOT NULL DEFAULT ''
);
-- next_id only grows, so an id is never given to a second file, even after
-- the first is removed.
CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL);
INSERT INTO meta(key, value) VALUES ('next_id', 1);
-- The directory id of the server at each address (server/catalog.h).
CREATE TABLE servers(address TEXT PRIMARY KEY NOT NULL, directory INTEGER NOT NULL);
)sql";

constexpr const char* kColumns =
    "name, id, page_size, size_pages, placement, stripe_pages, servers, access, min_pages, "
    "max_pages, created_ns, policy_name, replicas, stale, resyncing, replica_version, placement_keys";

// Version 1 to 2: the policy's name (a custom policy, or global-sequential),
// empty for the files recorded before it, which meant their access type.
constexpr const char* kUpgradeFrom1 = R"sql(
ALTER TABLE files ADD COLUMN policy_name TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 2;
)sql";

// Version 2 to 3: copies of each page and their states; every file before
// kept one, current.
constexpr const char* kUpgradeFrom2 = R"sql(
ALTER TABLE files ADD COLUMN replicas INTEGER NOT NULL DEFAULT 1;
ALTER TABLE files ADD COLUMN stale TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN resyncing TEXT NOT NULL DEFAULT '';
ALTER TABLE files ADD COLUMN replica_version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE files ADD COLUMN placement_keys TEXT NOT NULL DEFAULT '';
PRAGMA user_version = 3;
)sql";

// Version 3 to 4: the servers' directories, none known yet (each is
// recorded by the first client that reaches its server).
constexpr const char* kUpgradeFrom3 = R"sql(
CREATE TABLE servers(address TEXT PRIMARY KEY NOT NULL, directory INTEGER NOT NULL);
PRAGMA user_version = 4;
)sql";

// The Status for SQLite result `rc`, with the connection's own message.
Status sqlite_status(sqlite3* db, int rc, std::string_view what, std::string_view operation) {
  std::string detail = fmt::format("{}: {}", operation,
                                   db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_FULL: return Status::no_space(what, detail);
    case SQLITE_READONLY: return Status::read_only(what, detail);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return Status::corruption(what, detail);
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return Status::busy(what, detail);
    case SQLITE_PERM:
    case SQLITE_AUTH: return Status::permission_denied(what, detail);
    case SQLITE_CANTOPEN: {
      // The errno says why (missing directory, permissions) better than
      // SQLite's "unable to open database file".
      int err = db != nullptr ? sqlite3_system_errno(db) : 0;
      if (err != 0) return errno_status(err, what, operation);
      return Status::io_error(what, detail);
    }
    default: return Status::io_error(what, detail);
  }
}

// A prepared statement, finalized when it goes out of scope.
class Statement {
 public:
  Statement() = default;
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  static Result<Statement> prepare(sqlite3* db, std::string_view sql, std::string_view what) {
    Statement s;
    s.db_ = db;
    int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s.stmt_, nullptr);
    if (rc != SQLITE_OK) return sqlite_status(db, rc, what, "prepare");
    return s;
  }
  Statement(Statement&& other) noexcept
      : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

  void bind(int index, int64_t value) { sqlite3_bind_int64(stmt_, index, value); }
  void bind(int index, std::string_view text) {
    sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
  }

  // True for a row, false when done; an error otherwise.
  Result<bool> step(std::string_view what, std::string_view operation) {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return sqlite_status(db_, rc, what, operation);
  }
  // Runs a statement that returns no rows.
  Status run(std::string_view what, std::string_view operation) {
    Result<bool> r = step(what, operation);
    return r ? Status::ok() : r.status();
  }

  int64_t int64(int column) const { return sqlite3_column_int64(stmt_, column); }
  std::string text(int column) const {
    const auto* bytes = sqlite3_column_text(stmt_, column);  // before _bytes, as SQLite asks
    int size = sqlite3_column_bytes(stmt_, column);
    return bytes == nullptr ? std::string() : std::string(reinterpret_cast<const char*>(bytes), size);
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

Status exec(sqlite3* db, const char* sql, std::string_view what, std::string_view operation) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) return sqlite_status(db, rc, what, operation);
  return Status::ok();
}

// BEGIN IMMEDIATE takes the write lock at once, so a read-then-write (name
// taken? next id?) cannot be overtaken by another connection. Rolled back
// unless committed.
class Transaction {
 public:
  explicit Transaction(sqlite3* db) : db_(db) {}
  ~Transaction() {
    if (open_) (void)exec(db_, "ROLLBACK", {}, {});
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  Status begin(std::string_view what) {
    Status s = exec(db_, "BEGIN IMMEDIATE", what, "begin");
    open_ = s.is_ok();
    return s;
  }
  Status commit(std::string_view what) {
    Status s = exec(db_, "COMMIT", what, "commit");
    // A failed COMMIT may leave the transaction open (SQLITE_BUSY); the
    // destructor then rolls it back.
    open_ = s.is_ok() ? false : sqlite3_get_autocommit(db_) == 0;
    return s;
  }

 private:
  sqlite3* db_;
  bool open_ = false;
};

std::string catalog_label(sqlite3* db) {
  const char* file = sqlite3_db_filename(db, "main");
  return fmt::format("catalog {}", file != nullptr ? file : "");
}

std::string join_servers(const std::vector<std::string>& servers) {
  std::string out;
  for (size_t i = 0; i < servers.size(); ++i) {
    if (i > 0) out += '\n';
    out += servers[i];
  }
  return out;
}

std::vector<std::string> split_servers(std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t end = text.find('\n', start);
    out.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

template <class T>
bool fits(int64_t value) {
  return value >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
         static_cast<uint64_t>(value) <= static_cast<uint64_t>(std::numeric_limits<T>::max());
}

// The record in the current row of a statement selecting kColumns. Every
// field is checked: a row that create() could not have written is damage.
Result<FileRecord> read_record(const Statement& row) {
  FileRecord r;
  r.name = row.text(0);
  auto damaged = [&](std::string_view field, auto value) {
    return Status::corruption(fmt::format("catalog record '{}'", r.name),
                              fmt::format("{} {} is not valid", field, value));
  };
  int64_t id = row.int64(1);
  if (id < 1) return damaged("id", id);
  r.id = static_cast<uint64_t>(id);
  int64_t page_size = row.int64(2);
  if (!fits<uint32_t>(page_size) || !check_page_size(static_cast<uint32_t>(page_size))) {
    return damaged("page size", page_size);
  }
  r.page_size = static_cast<uint32_t>(page_size);
  r.size_pages = row.int64(3);
  if (!check_size_pages(r.size_pages, r.name)) return damaged("size", r.size_pages);
  std::string placement = row.text(4);
  auto kind = parse_placement(placement);
  if (!kind) return damaged("placement", placement);
  r.placement = *kind;
  int64_t stripe_pages = row.int64(5);
  if (stripe_pages < 1 || !fits<uint32_t>(stripe_pages)) return damaged("stripe_pages", stripe_pages);
  r.stripe_pages = static_cast<uint32_t>(stripe_pages);
  std::string servers = row.text(6);
  if (servers.empty()) return damaged("server list", "''");
  r.servers = split_servers(servers);
  std::string access = row.text(7);
  auto type = parse_access_type(access);
  if (!type) return damaged("access type", access);
  r.policy.access = *type;
  int64_t min_pages = row.int64(8);
  int64_t max_pages = row.int64(9);
  if (!fits<uint32_t>(min_pages)) return damaged("min_pages", min_pages);
  if (!fits<uint32_t>(max_pages)) return damaged("max_pages", max_pages);
  r.policy.min_pages = static_cast<uint32_t>(min_pages);
  r.policy.max_pages = static_cast<uint32_t>(max_pages);
  r.created_unix_ns = row.int64(10);
  r.policy.name = row.text(11);
  if (!r.policy.name.empty() && !check_policy_name(r.policy.name)) return damaged("policy name", r.policy.name);
  int64_t replicas = row.int64(12);
  if (!fits<uint32_t>(replicas) || !check_replicas(static_cast<uint32_t>(replicas), r.servers.size())) {
    return damaged("replicas", replicas);
  }
  r.replicas = static_cast<uint32_t>(replicas);
  if (std::string stale = row.text(13); !stale.empty()) r.stale = split_servers(stale);
  if (std::string resyncing = row.text(14); !resyncing.empty()) r.resyncing = split_servers(resyncing);
  r.replica_version = static_cast<uint64_t>(row.int64(15));
  if (std::string keys = row.text(16); !keys.empty()) r.placement_keys = split_servers(keys);
  if (Status s = check_file_record(r); !s) return damaged("copy states", s.message());
  return r;
}

// The single record a statement selects, or missing() when there is none.
template <class Missing>
Result<FileRecord> select_one(sqlite3* db, Statement& stmt, Missing missing) {
  Result<bool> row = stmt.step(catalog_label(db), "lookup");
  if (!row) return row.status();
  if (!*row) return missing();
  return read_record(stmt);
}

// What is in the database header and schema, to tell ours from others'.
struct Identity {
  int64_t application_id = 0;
  int64_t user_version = 0;
  int64_t objects = 0;  // tables, indices, ... in sqlite_schema
};

Result<Identity> read_identity(sqlite3* db, std::string_view what) {
  Identity id;
  // The first read of the file: a file that is not an SQLite database fails
  // here with SQLITE_NOTADB.
  for (auto [sql, out] : {std::pair{"PRAGMA application_id", &id.application_id},
                          std::pair{"PRAGMA user_version", &id.user_version},
                          std::pair{"SELECT count(*) FROM sqlite_schema", &id.objects}}) {
    auto stmt = Statement::prepare(db, sql, what);
    if (!stmt) return stmt.status();
    auto row = stmt->step(what, "read schema");
    if (!row) return row.status();
    if (!*row) return Status::io_error(what, fmt::format("{} returned no row", sql));
    *out = stmt->int64(0);
  }
  return id;
}

Status not_a_catalog(std::string_view what, const Identity& id) {
  return Status::corruption(
      what, fmt::format("not a Pagefile catalog (application_id {:#x}, user_version {}, {} "
                        "schema objects; a catalog has application_id {:#x})",
                        id.application_id, id.user_version, id.objects, kApplicationId));
}

// Makes an empty database a catalog. Another process may be doing the same,
// so the emptiness is checked again under the write lock.
Status initialize(sqlite3* db, std::string_view what) {
  Transaction tx(db);
  if (Status s = tx.begin(what); !s) return s;
  auto id = read_identity(db, what);
  if (!id) return id.status();
  if (id->application_id == kApplicationId) return Status::ok();  // it won the race
  if (id->application_id != 0 || id->user_version != 0 || id->objects != 0) {
    return not_a_catalog(what, *id);
  }
  if (Status s = exec(db, kSchema, what, "create schema"); !s) return s;
  std::string pragmas = fmt::format("PRAGMA application_id = {}; PRAGMA user_version = {};",
                                    kApplicationId, kSchemaVersion);
  if (Status s = exec(db, pragmas.c_str(), what, "create schema"); !s) return s;
  return tx.commit(what);
}

Status check_catalog(sqlite3* db, std::string_view what) {
  auto id = read_identity(db, {});
  if (!id) {
    if (id.status().is(Code::kCorruption)) {
      return Status::corruption(what, fmt::format("not a Pagefile catalog ({})", id.status().message()));
    }
    return id.status().with_context(what);
  }
  if (id->application_id == 0 && id->user_version == 0 && id->objects == 0) {
    if (Status s = initialize(db, what); !s) return s;
    id = read_identity(db, what);
    if (!id) return id.status();
  }
  if (id->application_id != kApplicationId) return not_a_catalog(what, *id);
  if (id->user_version > kSchemaVersion) {
    return Status::not_supported(
        what, fmt::format("catalog schema version {} is newer than this build's {}",
                          id->user_version, kSchemaVersion));
  }
  if (id->user_version >= 1 && id->user_version < kSchemaVersion) {
    Transaction tx(db);
    if (Status s = tx.begin(what); !s) return s;
    // Under the write lock: another process may have upgraded it meanwhile.
    auto again = read_identity(db, what);
    if (!again) return again.status();
    if (again->user_version == 1) {
      if (Status s = exec(db, kUpgradeFrom1, what, "upgrade schema 1 to 2"); !s) return s;
      again->user_version = 2;
    }
    if (again->user_version == 2) {
      if (Status s = exec(db, kUpgradeFrom2, what, "upgrade schema 2 to 3"); !s) return s;
      again->user_version = 3;
    }
    if (again->user_version == 3) {
      if (Status s = exec(db, kUpgradeFrom3, what, "upgrade schema 3 to 4"); !s) return s;
    }
    if (Status s = tx.commit(what); !s) return s;
    id->user_version = kSchemaVersion;
  }
  if (id->user_version != kSchemaVersion) {
    return Status::corruption(
        what, fmt::format("catalog schema version {} is unknown", id->user_version));
  }
  auto next = Statement::prepare(db, "SELECT value FROM meta WHERE key = 'next_id'", what);
  if (!next) return Status::corruption(what, fmt::format("catalog tables damaged ({})", next.status().message()));
  auto row = next->step(what, "read next id");
  if (!row) return row.status();
  if (!*row || next->int64(0) < 1) return Status::corruption(what, "catalog has no valid next_id");
  auto files = Statement::prepare(db, fmt::format("SELECT {} FROM files LIMIT 0", kColumns), what);
  if (!files) return Status::corruption(what, fmt::format("catalog tables damaged ({})", files.status().message()));
  // The whole file, page by page (the catalog is small): damage inside a
  // table shows now, not in the middle of a request.
  auto check = Statement::prepare(db, "PRAGMA quick_check(1)", what);
  if (!check) return Status::corruption(what, fmt::format("catalog damaged ({})", check.status().message()));
  auto verdict = check->step(what, "check");
  if (!verdict) return Status::corruption(what, fmt::format("catalog damaged ({})", verdict.status().message()));
  if (!*verdict || check->text(0) != "ok") {
    return Status::corruption(what, fmt::format("catalog damaged ({})", *verdict ? check->text(0) : "no verdict"));
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<CatalogStore>> CatalogStore::open(const std::filesystem::path& path) {
  std::string what = fmt::format("catalog {}", path.string());
  sqlite3* db = nullptr;
  // "unix" by name: the default VFS may be Pagefile's own once vfs/ is
  // registered, and the catalog must not store itself on the bus it serves.
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           "unix");
  // From here the object owns `db`, so every failure closes it.
  std::unique_ptr<CatalogStore> store(new CatalogStore(db));
  if (rc != SQLITE_OK) return sqlite_status(db, rc, what, "open");
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);

  // Nothing is written before the file is known to be ours or empty.
  if (Status s = check_catalog(db, what); !s) return s;

  // WAL: a commit is one append and one fsync. FULL: that fsync happens on
  // every commit, so a created record survives a crash the moment create()
  // returns. If the file system cannot do WAL, SQLite keeps the rollback
  // journal, which FULL makes just as durable.
  if (Status s = exec(db, "PRAGMA journal_mode = WAL", what, "set journal mode"); !s) return s;
  if (Status s = exec(db, "PRAGMA synchronous = FULL", what, "set synchronous"); !s) return s;
  if (Status s = store->load_cluster_id(); !s) return s;
  return store;
}

Status CatalogStore::load_cluster_id() {
  std::string what = catalog_label(db_);
  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;
  auto stored = meta_value("cluster_id");
  if (!stored) return stored.status();
  if (*stored) {
    cluster_id_ = static_cast<uint64_t>(**stored);
    if (cluster_id_ == 0) return Status::corruption(what, "catalog has no valid cluster_id");
    return tx.commit(what);
  }
  cluster_id_ = random_id();
  if (Status s = set_meta("cluster_id", static_cast<int64_t>(cluster_id_)); !s) return s;
  return tx.commit(what);
}

Result<std::optional<int64_t>> CatalogStore::meta_value(std::string_view key) {
  std::string what = catalog_label(db_);
  auto read = Statement::prepare(db_, "SELECT value FROM meta WHERE key = ?1", what);
  if (!read) return read.status();
  read->bind(1, key);
  auto row = read->step(what, fmt::format("read {}", key));
  if (!row) return row.status();
  return *row ? std::optional<int64_t>(read->int64(0)) : std::nullopt;
}

Result<uint64_t> CatalogStore::directory_at(const std::string& address) {
  std::string what = catalog_label(db_);
  auto read = Statement::prepare(db_, "SELECT directory FROM servers WHERE address = ?1", what);
  if (!read) return read.status();
  read->bind(1, address);
  auto row = read->step(what, fmt::format("read the directory of {}", address));
  if (!row) return row.status();
  return *row ? static_cast<uint64_t>(read->int64(0)) : uint64_t{0};
}

Result<uint64_t> CatalogStore::record_directory(const std::string& address, uint64_t directory) {
  std::string what = catalog_label(db_);
  if (directory == 0) return Status::invalid_argument(address, "directory id 0 names no directory");
  auto write = Statement::prepare(db_, "INSERT OR IGNORE INTO servers(address, directory) VALUES (?1, ?2)", what);
  if (!write) return write.status();
  write->bind(1, address);
  write->bind(2, static_cast<int64_t>(directory));
  if (Status s = write->run(what, fmt::format("record the directory of {}", address)); !s) return s;
  return directory_at(address);
}

Status CatalogStore::set_meta(std::string_view key, int64_t value) {
  std::string what = catalog_label(db_);
  auto write = Statement::prepare(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", what);
  if (!write) return write.status();
  write->bind(1, key);
  write->bind(2, value);
  return write->run(what, fmt::format("set {}", key));
}

CatalogStore::CatalogStore(sqlite3* db) : db_(db) {}

CatalogStore::~CatalogStore() {
  // Statements are finalized as each call ends, so close cannot be refused.
  sqlite3_close(db_);
}

Result<uint64_t> CatalogStore::reserve_tokens(uint64_t count) {
  std::string what = catalog_label(db_);
  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;
  // The first catalogs had no such row: their tokens start at 1.
  auto stored = meta_value("next_token");
  if (!stored) return stored.status();
  int64_t first = stored->value_or(1);
  if (first < 1) return Status::corruption(what, "catalog has no valid next_token");
  if (Status s = set_meta("next_token", first + static_cast<int64_t>(count)); !s) return s;
  if (Status s = tx.commit(what); !s) return s;
  return static_cast<uint64_t>(first);
}

Result<FileRecord> CatalogStore::create(const FileRecord& proto) {
  if (Status s = check_file_record(proto); !s) return s;
  std::string what = catalog_label(db_);

  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;

  auto taken = Statement::prepare(db_, "SELECT 1 FROM files WHERE name = ?1", what);
  if (!taken) return taken.status();
  taken->bind(1, proto.name);
  auto row = taken->step(what, "lookup");
  if (!row) return row.status();
  if (*row) return Status::already_exists(proto.name, "is already in the catalog");

  auto next = meta_value("next_id");
  if (!next) return next.status();
  if (!*next || **next < 1) return Status::corruption(what, "catalog has no valid next_id");

  FileRecord record = proto;
  record.id = static_cast<uint64_t>(**next);
  record.created_unix_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();

  auto insert = Statement::prepare(
      db_, fmt::format("INSERT INTO files({}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, '', '', 0, '')",
                       kColumns),
      what);
  if (!insert) return insert.status();
  insert->bind(1, record.name);
  insert->bind(2, static_cast<int64_t>(record.id));
  insert->bind(3, int64_t{record.page_size});
  insert->bind(4, record.size_pages);
  insert->bind(5, placement_name(record.placement));
  insert->bind(6, int64_t{record.stripe_pages});
  insert->bind(7, join_servers(record.servers));
  insert->bind(8, access_type_name(record.policy.access));
  insert->bind(9, int64_t{record.policy.min_pages});
  insert->bind(10, int64_t{record.policy.max_pages});
  insert->bind(11, record.created_unix_ns);
  insert->bind(12, record.policy.name);
  insert->bind(13, int64_t{record.replicas});
  if (Status s = insert->run(what, fmt::format("insert '{}'", record.name)); !s) return s;

  if (Status s = set_meta("next_id", **next + 1); !s) return s;

  if (Status s = tx.commit(what); !s) return s;
  return record;
}

const FileRecord& CatalogStore::remember(FileRecord record) {
  forget(record.id);
  by_name_[record.name] = record.id;
  return by_id_[record.id] = std::move(record);
}

void CatalogStore::forget(uint64_t id) {
  auto it = by_id_.find(id);
  if (it == by_id_.end()) return;
  by_name_.erase(it->second.name);
  by_id_.erase(it);
}

Result<FileRecord> CatalogStore::lookup(std::string_view name) {
  if (auto it = by_name_.find(std::string(name)); it != by_name_.end()) return by_id_.at(it->second);
  std::string what = catalog_label(db_);
  auto stmt = Statement::prepare(db_, fmt::format("SELECT {} FROM files WHERE name = ?1", kColumns), what);
  if (!stmt) return stmt.status();
  stmt->bind(1, name);
  auto record = select_one(db_, *stmt, [&] { return Status::not_found(name, "is not in the catalog"); });
  if (!record) return record;
  return remember(std::move(*record));
}

Result<FileRecord> CatalogStore::lookup_id(uint64_t id) {
  if (auto it = by_id_.find(id); it != by_id_.end()) return it->second;
  std::string what = catalog_label(db_);
  auto stmt = Statement::prepare(db_, fmt::format("SELECT {} FROM files WHERE id = ?1", kColumns), what);
  if (!stmt) return stmt.status();
  stmt->bind(1, static_cast<int64_t>(id));
  auto record = select_one(db_, *stmt, [&] {
    return Status::not_found(fmt::format("file id {}", id), "is not in the catalog");
  });
  if (!record) return record;
  return remember(std::move(*record));
}

Status CatalogStore::write_copies(const FileRecord& r, std::string_view operation) {
  std::string what = catalog_label(db_);
  auto stmt = Statement::prepare(
      db_, "UPDATE files SET servers = ?1, stale = ?2, resyncing = ?3, replica_version = ?4, placement_keys = ?5 "
           "WHERE id = ?6",
      what);
  if (!stmt) return stmt.status();
  stmt->bind(1, join_servers(r.servers));
  stmt->bind(2, join_servers(r.stale));
  stmt->bind(3, join_servers(r.resyncing));
  stmt->bind(4, static_cast<int64_t>(r.replica_version));
  stmt->bind(5, join_servers(r.placement_keys));
  stmt->bind(6, static_cast<int64_t>(r.id));
  return stmt->run(what, operation);
}

Result<FileRecord> CatalogStore::set_copy_state(uint64_t id, const std::string& server, CopyState state) {
  std::string what = catalog_label(db_);
  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;
  // From the database, not the memory: another process may share the catalog.
  forget(id);
  auto record = lookup_id(id);
  if (!record) return record.status();
  auto changed = with_copy_state(*record, server, state);
  if (!changed) return changed.status();
  if (!*changed) return record;
  FileRecord next = std::move(**changed);
  if (Status s = write_copies(next, fmt::format("copy state of '{}' on {}", next.name, server)); !s) return s;
  if (Status s = tx.commit(what); !s) return s;
  return remember(std::move(next));
}

Result<std::vector<FileRecord>> CatalogStore::replace_server(const std::string& old_server,
                                                            const std::string& new_server) {
  std::string what = catalog_label(db_);
  if (Status s = check_replacement(old_server, new_server); !s) return s;
  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;
  by_id_.clear();  // (read from the database, below, under its write lock)
  by_name_.clear();
  auto all = list();
  if (!all) return all.status();
  std::vector<FileRecord> changed;
  for (const FileRecord& old : *all) {
    auto next = with_server_replaced(old, old_server, new_server);
    if (!next) return next.status();
    if (!*next) continue;
    FileRecord r = std::move(**next);
    if (Status s = write_copies(r, fmt::format("replace {} in '{}'", old_server, r.name)); !s) return s;
    changed.push_back(std::move(r));
  }
  if (old_server == new_server) {
    auto forget = Statement::prepare(db_, "DELETE FROM servers WHERE address = ?1", what);
    if (!forget) return forget.status();
    forget->bind(1, old_server);
    if (Status s = forget->run(what, fmt::format("forget the directory of {}", old_server)); !s) return s;
  }
  if (Status s = tx.commit(what); !s) return s;
  for (const FileRecord& r : changed) remember(r);
  return changed;
}

Status CatalogStore::set_size(uint64_t id, int64_t size_pages, bool grow_only) {
  if (Status s = check_size_pages(size_pages, fmt::format("file id {}", id)); !s) return s;
  std::string what = catalog_label(db_);
  auto stmt = Statement::prepare(
      db_,
      grow_only ? "UPDATE files SET size_pages = MAX(size_pages, ?1) WHERE id = ?2"
                : "UPDATE files SET size_pages = ?1 WHERE id = ?2",
      what);
  if (!stmt) return stmt.status();
  stmt->bind(1, size_pages);
  stmt->bind(2, static_cast<int64_t>(id));
  if (Status s = stmt->run(what, fmt::format("set size of file id {}", id)); !s) return s;
  if (sqlite3_changes(db_) == 0) {
    return Status::not_found(fmt::format("file id {}", id), "is not in the catalog");
  }
  if (auto it = by_id_.find(id); it != by_id_.end()) {
    it->second.size_pages = grow_only ? std::max(it->second.size_pages, size_pages) : size_pages;
  }
  return Status::ok();
}

Result<FileRecord> CatalogStore::remove(std::string_view name) {
  std::string what = catalog_label(db_);
  Transaction tx(db_);
  if (Status s = tx.begin(what); !s) return s;

  auto found = Statement::prepare(db_, fmt::format("SELECT {} FROM files WHERE name = ?1", kColumns), what);
  if (!found) return found.status();
  found->bind(1, name);
  auto record = select_one(db_, *found, [&] { return Status::not_found(name, "is not in the catalog"); });
  if (!record) return record.status();

  auto drop = Statement::prepare(db_, "DELETE FROM files WHERE name = ?1", what);
  if (!drop) return drop.status();
  drop->bind(1, name);
  if (Status s = drop->run(what, fmt::format("remove '{}'", name)); !s) return s;

  if (Status s = tx.commit(what); !s) return s;
  forget(record->id);
  return record;
}

Result<std::vector<FileRecord>> CatalogStore::list() {
  std::string what = catalog_label(db_);
  auto stmt = Statement::prepare(db_, fmt::format("SELECT {} FROM files ORDER BY name", kColumns), what);
  if (!stmt) return stmt.status();
  std::vector<FileRecord> out;
  for (;;) {
    auto row = stmt->step(what, "list");
    if (!row) return row.status();
    if (!*row) break;
    auto record = read_record(*stmt);
    if (!record) return record.status();
    out.push_back(std::move(*record));
  }
  return out;
}

}  // namespace pagefile::net
