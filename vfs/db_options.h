// What a database opened through the VFS is told by its URI, and the name
// it has in the store.
//
//   file:app.db?vfs=pagefile&concurrency=12&location=local&policy=sequential
//
// Every parameter is optional; the defaults are the Pagefile client's.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pagefile::vfs {

struct DbOptions {
  // location=remote|local; without it, default_location(bus).
  Location location = Location::kLocal;
  std::string bus;                        // bus=... (bus/bus_config.h syntax)
  uint32_t concurrency = 8;               // concurrency=N (1..1024)
  uint32_t page_size = 0;                 // page_size=N: for a new database file
  Placement placement = Placement::kStripe;  // placement=stripe|hash
  uint32_t stripe_pages = 1;                 // stripe_pages=N
  uint32_t servers = 0;                      // servers=N (0: all of the bus)
  uint32_t replicas = 0;                     // replicas=N: copies of each page (0: as recorded, or the bus's)
  bool placement_given = false;              // any of the three above was given
  std::optional<BufferPolicy> policy;        // policy=NAME, cache_pages=N (its max_pages)
                                             // (SQLite keeps cache= for shared-cache mode)
  uint32_t cache_pages = 0;                  // cache_pages=N: also sizes the client's pool
  bool checksums = true;                     // checksums=on|off (off: to measure their cost)
  uint32_t timeout_ms = 0;                   // timeout_ms=N: the bus client's request timeout (0: as it is)
  std::string trace;                         // trace=PATH: capture the page operations (vfs/trace_writer.h)
};

// Where a database goes when its URI has no location=: to a bus when one
// is configured (a bus= parameter, here `bus`, or $PAGEFILE_BUS), else to a
// local Pagefile at its path, as the unix VFS would keep it. The
// in-process cluster is one setting away: bus=inproc:4.
Location default_location(std::string_view bus);

// The options of a database opened with no parameters.
DbOptions default_db_options();

// Reads the parameters through `param` (sqlite3_uri_parameter on the main
// database's name: null when absent). kInvalidArgument naming the parameter
// for a value it cannot use.
using ParamGetter = std::function<const char*(const char* key)>;
Result<DbOptions> parse_db_options(const ParamGetter& param);

// The buffer policy a name selects: a built-in access type ("random",
// "sequential", "looping") or another built-in policy ("global-sequential",
// which runs as random on the client). kInvalidArgument for any other name.
Result<BufferPolicy> parse_policy(std::string_view name);

// A whole decimal number in [min, max]; kInvalidArgument otherwise.
Result<uint32_t> parse_count(std::string_view what, std::string_view text, uint32_t min, uint32_t max);

// The store name of a path: its full_pathname, "//" and "/./" collapsed,
// "a/.." gone, a trailing "/" dropped, all lexically; except that the
// name of a remote database that was made absolute of a relative one
// (database_store_name), and the journal, WAL and super-journal names SQLite
// makes of it, give back that relative name, the same from every
// directory and machine ("/.." is "/", as on unix). kInvalidArgument for an
// empty path.
Result<std::string> store_name(std::string_view path);

// xFullPathname: a relative path made absolute, the working directory put
// before it, as the unix VFS does, so that SQLite's messages and
// sqlite3_db_filename() name a file as on unix. A local database's store
// name is that absolute path (a file at its path, whatever the working
// directory later). An absolute path as store_name writes it.
// kInvalidArgument as store_name, or when the working directory cannot
// be read. With `followed`, symbolic links among its parts are resolved
// as unixFullPathname resolves them, and *followed says whether one was:
// two names of one database file are then one, with one journal, WAL and
// -shm (SQLite names those after this name). (Only there: the kernel
// follows links when a file is opened, and a check per part at every
// xAccess would cost a transaction a stat a part.)
Result<std::string> full_pathname(std::string_view path, bool* followed = nullptr);

// The store name of a database opened (xOpen) by `sqlite_name`, whose
// store_name() is `name`. A remote one keeps the relative name
// full_pathname made it of, so a remote file has one name from every
// directory (xFullPathname cannot see a URI's bus=): from now on
// store_name() gives it for that name and the names SQLite makes of it. A
// local one keeps its absolute path, as do the files SQLite names after
// it, also where the process's databases are remote by default
// (PAGEFILE_BUS). kInvalidArgument when this process opened the path the
// other way, local or remote.
Result<std::string> database_store_name(const std::string& sqlite_name, const std::string& name, bool remote);

// The main database a journal, WAL or super-journal name belongs to
// ("app.db-journal" -> "app.db"); the name itself otherwise.
std::string database_of(std::string_view name);

// A count that moves whenever what store_name() or DbRegistry::find()
// answers for an absolute path may have changed (a name made relative or
// absolute, a database opened local or remote, a database remembered):
// what they answered stays right while it holds still.
uint64_t names_generation();
void names_changed();

}  // namespace pagefile::vfs
