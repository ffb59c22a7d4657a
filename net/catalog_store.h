// The catalog's durable records: one per Pagefile (TOPs file information
// server). Kept in an SQLite database (ordinary unix VFS) in the catalog
// server's directory, so they survive restarts and crashes.
//
// Thread-safety: not thread-safe; the catalog serialises calls.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pagefile/options.h"
#include "pagefile/status.h"

struct sqlite3;

namespace pagefile::net {

enum class PlacementKind : uint8_t { kStripe = 0, kHash = 1 };
std::string_view placement_name(PlacementKind kind);
Result<PlacementKind> parse_placement(std::string_view name);  // "stripe" | "hash"

struct FileRecord {
  std::string name;
  uint64_t id = 0;  // assigned by the catalog, never reused
  uint32_t page_size = kDefaultPageSize;
  int64_t size_pages = 0;
  PlacementKind placement = PlacementKind::kStripe;
  uint32_t stripe_pages = 1;             // stripe: pages per stripe unit
  std::vector<std::string> servers;      // addresses (Address::text), in placement order
  BufferPolicy policy;
  int64_t created_unix_ns = 0;

  friend bool operator==(const FileRecord&, const FileRecord&) = default;
};

class CatalogStore {
 public:
  // Opens or creates the database at `path` (its directory must exist).
  // kCorruption when the file is not a catalog database.
  static Result<std::unique_ptr<CatalogStore>> open(const std::filesystem::path& path);
  ~CatalogStore();
  CatalogStore(const CatalogStore&) = delete;
  CatalogStore& operator=(const CatalogStore&) = delete;

  // Creates the record `proto.name` (its id and created time are assigned;
  // returned filled in). kAlreadyExists when the name is taken.
  // kInvalidArgument for an empty name, a bad page size, an empty server
  // list or stripe_pages 0.
  Result<FileRecord> create(const FileRecord& proto);

  // kNotFound when there is no record of that name / id.
  Result<FileRecord> lookup(std::string_view name);
  Result<FileRecord> lookup_id(uint64_t id);

  // Sets the size of file `id`. kNotFound for an unknown id.
  Status set_size(uint64_t id, int64_t size_pages);

  // Removes the record and returns it. kNotFound when absent.
  Result<FileRecord> remove(std::string_view name);

  // Every record, by name.
  Result<std::vector<FileRecord>> list();

 private:
  explicit CatalogStore(sqlite3* db);
  sqlite3* db_;
};

}  // namespace pagefile::net
