// The catalog's record of one Pagefile (TOPs file information server): what
// is fixed at creation (name, id, page size, placement and its servers,
// buffer policy) and its size. The catalog keeps it (server/catalog_store.h),
// the wire carries it (wire/wire_convert.h), and a client places pages by it
// (bus/placement.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pagefile {

struct FileRecord {
  std::string name;
  uint64_t id = 0;  // assigned by the catalog, never reused
  uint32_t page_size = kDefaultPageSize;
  int64_t size_pages = 0;
  Placement placement = Placement::kStripe;
  uint32_t stripe_pages = 1;             // stripe: pages per stripe unit
  std::vector<std::string> servers;      // addresses (Address::text), in placement order
  // Copies of each page, on that many distinct servers (bus/placement.h):
  // 1 to kMaxReplicas, and at most servers.size().
  uint32_t replicas = 1;
  // Servers whose copies are not current (never read): `stale` missed
  // writes while it could not be reached (and is not written either);
  // `resyncing` is being brought up to date (written, not yet read). At
  // most replicas - 1 of them together, so every page has a current copy
  // (GFS's stale replicas). replica_version moves whenever either changes,
  // and lock grants carry it, so a client learns of a change at its next lock.
  std::vector<std::string> stale;
  std::vector<std::string> resyncing;
  uint64_t replica_version = 0;
  // What hash placement hashes for each server (bus/placement.h): the
  // addresses the file was created with, kept when a server is replaced
  // (pagefile replace-server), so that no page moves. Empty: `servers`.
  std::vector<std::string> placement_keys;
  BufferPolicy policy;
  int64_t created_unix_ns = 0;
  // The cluster the record belongs to: its catalog's id, made when the
  // catalog was created (doc/architecture.md, "Incarnations"). With the
  // id, never reused by a catalog, it names this file and no other, even
  // after every server started again on empty directories. 0: not known.
  uint64_t cluster = 0;
  // The directory id of each of `servers`, as the catalog knows it at that
  // address (doc/architecture.md, "Server directories"); 0 or missing: not
  // known yet. Not stored with the record: the catalog adds them as it
  // sends it, and a client sends each with its page requests, so that a
  // server whose directory is not the one that held its pages refuses
  // them rather than answer zeros.
  std::vector<uint64_t> directories;

  friend bool operator==(const FileRecord&, const FileRecord&) = default;
};

// What a server's copies of a file are (FileRecord::stale, resyncing).
enum class CopyState : uint8_t {
  kCurrent = 0,
  kStale = 1,
  kResyncing = 2,
};

// The directory id the catalog knows for record.servers[index]; 0: none.
inline uint64_t directory_of(const FileRecord& record, size_t index) {
  return index < record.directories.size() ? record.directories[index] : 0;
}

// The state of `server`'s copies in `record`.
CopyState copy_state(const FileRecord& record, std::string_view server);

// Servers whose copies of `record` are not current (stale or resyncing).
// A record keeps fewer than its replicas, so every page has a current copy.
inline size_t copies_not_current(const FileRecord& record) { return record.stale.size() + record.resyncing.size(); }

// record.placement_keys, or its servers when there are none.
inline const std::vector<std::string>& placement_keys_of(const FileRecord& record) {
  return record.placement_keys.empty() ? record.servers : record.placement_keys;
}

// OK for a record the catalog may hold: a name without NUL, a page size, a
// size within [0, kMaxPageNumber + 1], a known placement, a stripe unit, a
// non-empty list of servers each on one line, a policy. kInvalidArgument
// naming what is wrong otherwise. The catalog checks every record it
// creates with it, and a client every record it receives (wire_convert.h).
Status check_file_record(const FileRecord& record);

// `record` with `server`'s copies in `state` and its replica_version moved;
// nullopt when they are in that state already. kInvalidArgument for a
// server not among the file's, kIOError when some page would be left with
// no current copy, kStale for kCurrent from anything but kResyncing (only
// resync makes a copy current; one left behind again meanwhile stays
// stale). Both catalogs change copy states by it.
Result<std::optional<FileRecord>> with_copy_state(const FileRecord& record, const std::string& server,
                                                  CopyState state);

// `record` with `new_server` in `old_server`'s place, its copies there
// stale (to be resynced) and its placement keys kept (no page moves);
// nullopt when `old_server` is not among its servers. kInvalidArgument for
// a file with one copy (its pages would be lost) or one that has the new
// server already, kIOError when the old server holds the only current
// copies of some pages. check_replacement checks the two addresses first.
//
// `new_server` the same as `old_server` says that the directory at that
// address is a new one (a disk replaced): its copies are stale (nullopt
// when they are already), and a file with one copy is kInvalidArgument
// (its pages there are lost).
Status check_replacement(const std::string& old_server, const std::string& new_server);
Result<std::optional<FileRecord>> with_server_replaced(const FileRecord& record, const std::string& old_server,
                                                       const std::string& new_server);

}  // namespace pagefile
