// Options of the Pagefile client and of each open Pagefile.
//
// Every field has a default that works; a program sets only what it cares
// about, by name, in the order the fields are declared:
//
//   auto client = pagefile::Client::start({.concurrency = 12, .cache_pages = 1024});
//   auto fd = (*client)->open("orders", {.location = pagefile::Location::kRemote,
//                                        .page_size = 8192, .create = true});
//
// Thread-safety: options are plain values and may be copied between threads.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "pagefile/status.h"

namespace pagefile {

// Page sizes a Pagefile may have: a power of two in this range, fixed when the
// file is created and recorded in it.
inline constexpr uint32_t kMinPageSize = 512;
inline constexpr uint32_t kMaxPageSize = 64 * 1024;
inline constexpr uint32_t kDefaultPageSize = 4096;

// OK when `page_size` is a power of two in [kMinPageSize, kMaxPageSize],
// else kInvalidArgument naming the size and the rule it breaks.
Status check_page_size(uint32_t page_size);

// How a file will be accessed, declared at open (TOPs section 2.1.4). The
// buffer pool derives allocation, replacement and read-ahead from it:
//   kSequential  read ahead, do not keep pages already passed;
//   kLooping     keep the loop when it fits, else replace most-recently-used;
//   kRandom      least-recently-used, no read-ahead.
enum class AccessType : uint8_t {
  kRandom = 0,
  kSequential = 1,
  kLooping = 2,
};

// "random", "sequential", "looping".
std::string_view access_type_name(AccessType type);
// The inverse of access_type_name; kInvalidArgument for any other word.
Result<AccessType> parse_access_type(std::string_view name);

// A file's buffer policy: which policy the buffer pool runs for it and how
// many pages the pool may hold for it (pagefile/policy.h).
// max_pages == 0 means "the pool decides". `name` selects a policy by its
// registered name, built-in or custom; empty means the built-in named by
// `access`. A custom policy should also set `access` to the built-in closest
// to it: that is what a remote file's catalog records, and what a client
// that does not know the name falls back to.
struct BufferPolicy {
  AccessType access = AccessType::kRandom;
  uint32_t min_pages = 0;
  uint32_t max_pages = 0;
  std::string name;

  friend bool operator==(const BufferPolicy&, const BufferPolicy&) = default;
};

// The policy a BufferPolicy selects: `name`, or access_type_name(access)
// when the name is empty.
std::string_view policy_name(const BufferPolicy& policy);

// Policy names are 1 to kMaxPolicyNameLength characters of [A-Za-z0-9_.-]
// (they are recorded in file headers and travel in URIs).
inline constexpr size_t kMaxPolicyNameLength = 47;
Status check_policy_name(std::string_view name);

// OK unless max_pages is set and below min_pages, or a non-empty name breaks
// check_policy_name.
Status check_buffer_policy(const BufferPolicy& policy);

// Where a Pagefile lives, chosen at open.
enum class Location : uint8_t {
  kLocal = 0,   // one file on this machine (PFLI)
  kRemote = 1,  // pages on the page servers of the bus (PFRI)
};

std::string_view location_name(Location location);

// How a remote file's pages are spread over its servers, fixed at creation.
enum class Placement : uint8_t {
  kStripe = 0,  // round-robin in units of stripe_pages (TOPs)
  kHash = 1,    // computed from (file, page / stripe_pages) by rendezvous hashing (RAMA)
};

// "stripe", "hash".
std::string_view placement_name(Placement placement);
// The inverse of placement_name; kInvalidArgument for any other word.
Result<Placement> parse_placement(std::string_view name);

// Copies a remote file may keep of each page.
inline constexpr uint32_t kMaxReplicas = 7;

// OK when 1 <= replicas <= kMaxReplicas and replicas <= servers, else
// kInvalidArgument saying which bound it breaks.
Status check_replicas(uint32_t replicas, size_t servers);

// A switch's value: "on", "true", "1" or "off", "false", "0";
// kInvalidArgument naming `what` for any other text.
Result<bool> parse_on_off(std::string_view what, std::string_view text);

struct OpenOptions {
  Location location = Location::kLocal;

  // The page size of the file. 0 means: the size recorded in the file when it
  // exists, kDefaultPageSize when it is created. A non-zero size that differs
  // from the recorded one makes open fail with kInvalidArgument.
  uint32_t page_size = 0;
  // Used when the file is created and `page_size` is 0: the page size it
  // gets (0: kDefaultPageSize). A file that exists keeps its own. (The VFS
  // opens a journal so: an existing one, a hot journal, keeps its page
  // size, and a new one gets the size chosen for it, in one open.)
  uint32_t create_page_size = 0;

  // Create the file when it does not exist.
  bool create = false;
  // With `create`: fail with kAlreadyExists when the file exists.
  bool exclusive = false;
  // Open for reading only; writes, truncate and exclusive locks then fail
  // with kReadOnly.
  bool read_only = false;
  // A local file created by this open gets exactly these permission bits
  // (a journal gets its database's, as on unix); 0: 0644 less the umask.
  uint32_t mode = 0;

  // The buffer policy for this open. Unset means: the policy recorded in the
  // file at creation (a new file records the one given here, or the default).
  std::optional<BufferPolicy> policy;

  // The most requests of this file that may be in flight at once; 0 means the
  // client's level. See Client::write_request.
  uint32_t concurrency = 0;

  // Page checksums (doc/page_format.md): every page written carries one,
  // every page read is checked against it, and a page that fails is
  // kCorruption, never data. False only to measure what they cost: pages are
  // then written without checksums (a local file's then fail their check
  // when read with checksums on) and read unchecked.
  bool checksums = true;
  // Used when the file is created, with pages larger than 4 KiB: keep a
  // checksum per 4 KiB sector instead of per page. A write torn by a crash
  // (or failing part way) between sectors then leaves each sector old or
  // new, and the page reads back so, with no error: the promise a disk
  // makes, which SQLite's journals and WAL files are built on (the VFS
  // creates them so). A page of another file reads back all old or all
  // new, or fails as kCorruption. (Remote files: each server makes its
  // share so when a write first reaches it.)
  bool sector_checksums = false;
  // A local file whose page size is final: no descriptor gives it another
  // (Client::set_page_size refuses), so none looks for one, and a truncate
  // to no page leaves nothing of its pages behind. Every descriptor of the
  // file says so or none does; the VFS opens journals and WAL files so.
  bool page_size_final = false;
  // A local file's pages are copied out of a shared mapping of it rather
  // than read with pread, one system call less a page: bytes the same as a
  // pread's, and checked the same. A fault of the mapping (a disk error,
  // the file cut by another descriptor) is caught and the bytes read with
  // pread, which reports it; it installs a SIGBUS handler for that, which
  // passes other faults on to the one before it (so does a write that
  // stores checksums into a mapped block: doc/page_format.md). The VFS
  // reads its databases so. Remote files: ignored.
  bool mapped_reads = false;

  // Remote files: the fencing token their writes, truncates and syncs
  // carry (doc/architecture.md, "Fencing"). A write lock (kReserved or
  // above) that passes to another client brings a new, higher token from
  // the catalog, and a page server refuses with kStale anything carrying a
  // lower token than it has seen for the file: a client whose lease ran out
  // cannot write over the one that took the file after it. Files opened with the same cell
  // share it, so a database's journal carries the token of the database's
  // lock (the VFS does this). Unset: the file's own locks' token.
  std::shared_ptr<std::atomic<uint64_t>> lock_token;

  // Remote files only, used when the file is created: the placement, its
  // unit in pages, and how many of the bus's servers hold the file (the
  // first `servers` of the bus's list; 0 means all of them).
  Placement placement = Placement::kStripe;
  uint32_t stripe_pages = 1;
  uint32_t servers = 0;
  // Remote files: copies of each page, each on a different server (1 to
  // kMaxReplicas, at most the file's servers). 0 means: the recorded count
  // when the file exists, else the bus's `replicas=` (else 1) when it is
  // created. A non-zero count that differs from the recorded one makes open
  // fail with kInvalidArgument. Writes go to every copy and are confirmed
  // when all have them; a read goes to the copy whose server has the fewest
  // requests waiting, and to another when that one fails.
  uint32_t replicas = 0;
};

class PolicyRegistry;  // pagefile/policy.h

struct ClientOptions {
  // Where local Pagefiles live: a relative name is resolved against it, an
  // absolute name is used as it is.
  std::filesystem::path local_dir = ".";

  // The default concurrency level of every open file: how many requests of
  // one file may be in flight before the next request waits. The paper's
  // experiments use 1 to 24.
  uint32_t concurrency = 8;

  // The most threads that carry out local page I/O: reads that must wait
  // for the disk and O_DSYNC writes (the rest is done on the caller's
  // thread). One starts at the first local open, each further one when a
  // request finds none idle. Requests beyond this many wait in a queue, so
  // a level above it gains nothing for local files.
  uint32_t io_threads = 16;

  // The bus for remote files: server addresses separated by commas or white
  // space, the first the catalog unless one is marked `catalog=`:
  //   tcp://10.0.0.1:7001,tcp://10.0.0.2:7001   two servers
  //   tcp://a:1,catalog=tcp://b:1               b is the catalog (and a server)
  //   unix:/run/pf0.sock                        one server on a Unix socket
  //   inproc:4                                  4 servers inside this process
  //   @/etc/pagefile.bus                        the list from a file (one per
  //                                             line, `#` starts a comment)
  // Empty: the environment's PAGEFILE_BUS, else the embedded default of 4
  // in-process servers. The bus starts when the first remote file is opened;
  // a bad bus makes that open fail with kInvalidArgument (kNotFound for a
  // bus file that cannot be read).
  std::string bus;
  // Where embedded servers keep their data. Empty: $PAGEFILE_HOME, else
  // ./pagefile-home.
  std::filesystem::path home;
  // How long a remote request may go unanswered before it fails with
  // kDisconnected.
  int request_timeout_ms = 30'000;

  // The client's buffer pool, shared by its open files, in pages (of any
  // page size). 0: no pool; every read and write goes to the store.
  uint32_t cache_pages = 0;
  // The policies files may select by name. Null: the built-ins only.
  std::shared_ptr<const PolicyRegistry> policies;
};

}  // namespace pagefile
