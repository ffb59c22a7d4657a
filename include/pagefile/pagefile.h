// PFEI: the external interface of Pagefile.
//
// A Pagefile is a named file of fixed-size pages. It is like a UNIX file with
// three differences (Falkenberg & Purtilo, section 4.4):
//   - the unit of I/O is a page, numbered from 0;
//   - reading and writing are each split into a request, which returns a
//     Ticket at once, and a confirm, which waits for that request to finish;
//     so a program keeps many requests in flight and the latencies of the
//     disks behind them overlap instead of adding up;
//   - whether the file is local or remote is chosen when it is opened.
//
//   auto client = pagefile::Client::start({.local_dir = "data"});
//   if (!client) fail(client.status());
//   auto fd = (*client)->open("orders", {.page_size = 8192, .create = true});
//   std::vector<pagefile::Ticket> tickets;
//   for (int64_t p = 0; p < 64; ++p)
//     tickets.push_back(*(*client)->write_request(*fd, p, page(p)));
//   for (auto t : tickets) check((*client)->write_confirm(t));
//   check((*client)->sync(*fd));   // every write above is now on disk
//
// The concurrency window. Each open file has a concurrency level N (the
// client's, or its own). At most N of its tickets are in flight; a request
// made while N are in flight first waits for the oldest of them to finish.
// That ticket stays valid and its confirm then returns at once with the
// result, so one thread may issue any number of requests without deadlock.
//
// Ordering. Requests of one file that touch the same page take effect in the
// order they were made: a read requested after a write of the same page sees
// that write, two writes of one page land in order. Requests on different
// pages run concurrently, in any order. sync, truncate and close wait for
// every request of the file made before them.
//
// Thread-safety: a Client is thread-safe. Any thread may confirm a ticket
// that another thread requested; each ticket is confirmed at most once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "pagefile/options.h"
#include "pagefile/status.h"

namespace pagefile {

// A descriptor of one open Pagefile. Unique across every file the client has
// opened: a closed descriptor is never given out again, so a stale one fails
// cleanly instead of reaching another file.
struct Fd {
  uint64_t value = 0;
  friend bool operator==(Fd, Fd) = default;
};

// One outstanding read or write request. Confirm it exactly once.
struct Ticket {
  uint64_t value = 0;
  friend bool operator==(Ticket, Ticket) = default;
};

// What a read found.
enum class PageRead : uint8_t {
  kData,       // the page exists; the buffer holds it (a page inside the file
               // that was never written reads as zeros and is kData too)
  kBeyondEnd,  // the page is at or past the end of the file; the buffer was
               // filled with zeros
};

// The bytes of a page's write that differ from the page as the writer
// read it (Client::write_at_once): `size` bytes from `offset`. Size 0: not
// known, any byte of the page may differ.
struct ChangedBytes {
  size_t offset = 0;
  size_t size = 0;
};

enum class LockMode : uint8_t { kShared, kExclusive };
// SQLite's five lock levels (os_unix.c), for engines that need more than
// shared/exclusive. Between descriptors of one file (in one process or many,
// on one machine or many):
//   - any number may hold kShared;
//   - at most one holds kReserved, kPending or kExclusive;
//   - kReserved coexists with others' kShared (a writer preparing its
//     change while readers read);
//   - kPending stops new kShared from being granted, so a writer waiting
//     for readers to leave is not starved; it is never asked for, only
//     reached on the way to kExclusive;
//   - kExclusive coexists with nothing.
enum class LockLevel : uint8_t { kNone = 0, kShared, kReserved, kPending, kExclusive };

enum class LockWait : uint8_t {
  kTry,    // return kBusy at once when the lock is held elsewhere
  kBlock,  // wait until the lock can be had
};

// What the client's buffer pool did for one open file (all zero when the
// client has no pool). Counted from the open; a hit is a read served from
// the pool, a miss a read that went to the store.
struct FileCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t prefetch_used = 0;    // pages fetched ahead that a read then hit
  uint64_t prefetch_wasted = 0;  // pages fetched ahead that left unread
  uint64_t evictions = 0;        // pages evicted to make room
  uint64_t tossed = 0;           // pages let go once used (toss-immediately)
  uint32_t pages = 0;            // pages the pool holds for the file now
  uint32_t allowance = 0;        // pages its policy may hold, within min and max
  uint32_t pinned = 0;           // pages pinned through pin()

  friend bool operator==(const FileCounters&, const FileCounters&) = default;
};

struct FileStatus {
  std::string name;
  Location location = Location::kLocal;
  uint32_t page_size = 0;
  int64_t pages = 0;  // size of the file in pages
  BufferPolicy policy;
  uint32_t concurrency = 0;  // this file's level
  uint32_t in_flight = 0;    // its tickets that are still in flight
  bool read_only = false;
  uint32_t replicas = 1;  // copies of each page (OpenOptions::replicas)
  // Page requests are done directly, before the request call returns (a
  // remote file on servers in this process that emulate no disk): reading ahead then
  // only reads early, into a buffer of its own, what a read would read now.
  bool always_direct = false;
  FileCounters cache;  // the buffer pool's counters for this descriptor
};

// The largest page number a file may hold: the byte offset of its end must
// fit a signed 64-bit file offset whatever the page size.
inline constexpr int64_t kMaxPageNumber = (int64_t{1} << 46) - 1;

class Client {
 public:
  // Starts a client: its I/O threads, and (later) its connection to the bus.
  // Fails with kInvalidArgument for a concurrency level or thread count of 0.
  static Result<std::unique_ptr<Client>> start(const ClientOptions& options = {});

  // Stops the client as stop() does.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Closes every open file (waiting for their requests, as close does) and
  // stops the I/O threads. Returns the first error a close reported. After
  // stop every call fails with kInvalidArgument; stop itself may be repeated.
  Status stop();

  // Opens (or with options.create, creates) the Pagefile `name`.
  // Fails with kNotFound when it does not exist and create is false,
  // kAlreadyExists for create+exclusive on an existing file, kInvalidArgument
  // for a bad page size, policy or name, or a page size other than the one
  // recorded in the file, kCorruption when the file's header is damaged,
  // for a remote file kInvalidArgument when the bus configuration is bad and
  // kDisconnected when the catalog cannot be reached, and the
  // operating system's (or a server's) error otherwise (kReadOnly, kNoSpace, ...).
  Result<Fd> open(std::string_view name, const OpenOptions& options = {});

  // Waits for every request of the file still in flight, drops its
  // unconfirmed tickets (their confirm then fails with kInvalidArgument),
  // releases its lock and closes it. Returns the first error among the
  // requests it dropped, so no failed write goes unreported. Does not sync.
  Status close(Fd fd);

  // Requests that page `page` of `fd` be read into `buffer`.
  // REQUIRES: `buffer` stays valid and untouched until the ticket is
  // confirmed or the file closed.
  // Fails at once with kInvalidArgument for an unknown or closed descriptor,
  // a buffer whose size is not the page size, or a page outside
  // [0, kMaxPageNumber]. Errors of the read itself come from read_confirm.
  Result<Ticket> read_request(Fd fd, int64_t page, std::span<std::byte> buffer);

  // Waits for a read request to finish. Returns kData or kBeyondEnd, or the
  // error of the read (the buffer's content is then unspecified). Fails with
  // kInvalidArgument for a ticket never issued, one already confirmed, one of
  // a closed file, or a write ticket.
  Result<PageRead> read_confirm(Ticket ticket);

  // Requests that `data` be written as page `page` of `fd`, extending the
  // file when the page lies beyond its end (pages skipped over read as
  // zeros). The data is copied: the caller may reuse it at once.
  // Fails at once like read_request, and with kReadOnly for a file opened
  // read-only.
  Result<Ticket> write_request(Fd fd, int64_t page, std::span<const std::byte> data);

  // Waits for a write request to finish: OK once the page is written (not
  // yet durable: that is sync's job), else its error (kNoSpace, kIOError...),
  // in which case the page holds what it held before or, for a page beyond
  // the old end, reads as beyond the end. Ticket errors as read_confirm.
  Status write_confirm(Ticket ticket);

  // read_request followed by read_confirm.
  Result<PageRead> read(Fd fd, int64_t page, std::span<std::byte> buffer);

  // The read done at once on this thread, with no ticket, when it costs no
  // wait: the page is in memory (a local file's page in the page cache, a
  // page of a server in this process that emulates no disk), no request of
  // this descriptor for the page is outstanding, and no buffer pool is in
  // the way. Its outcome, as read() would give it; nothing when it cannot
  // be done so (then read or read_request it). With `may_wait`, for a
  // caller that would wait for the read anyway (SQLite's xRead), a local
  // file's page that must come from its disk is read here too, waiting for
  // it as read(2) does: that costs less than a request handed to an I/O
  // thread and waited for.
  std::optional<Result<PageRead>> read_at_once(Fd fd, int64_t page, std::span<std::byte> buffer,
                                               bool may_wait = false);
  // read_at_once(may_wait) of up to `count` pages from `first` with one
  // read, where the file can (a local file: its pages lie one after
  // another on the disk, up to the end of their group of 256); into
  // `buffer`, count pages long. Returns how many pages it read from `first`
  // on, each checked as a read is: fewer at the end of the file or before a
  // page that fails its check (read that one alone to learn why), 0 when
  // `first` is past the end. Nothing when it cannot be done so, as
  // read_at_once. For a reader going through a file in order (a table
  // scan), which then makes one system call where it made `count`.
  std::optional<Result<int64_t>> read_pages_at_once(Fd fd, int64_t first, int64_t count, std::span<std::byte> buffer);
  // write_request followed by write_confirm.
  Status write(Fd fd, int64_t page, std::span<const std::byte> data);

  // The write done at once on this thread, with no ticket, where a
  // request would be done on this thread anyway (a local file not opened
  // O_DSYNC, whose write goes to the page cache; a server in this process
  // that takes it at once), no request of this
  // descriptor for the page is outstanding, no truncate, sync or close of
  // it waits, and no buffer pool is in the way. Its outcome, as write()
  // would give it (a failed write is reported by the next sync too, and
  // the page reads as that error until written again); nothing when it
  // cannot be done so (then write or write_request it). A sync waits for
  // the writes at once under way on other threads. `changed` says which
  // bytes of `data` differ from the page as this descriptor read it, while
  // exclude_other_writers(true) held: a local file with sector checksums
  // then writes only the sectors that hold them, where its checksums show
  // that the others are unchanged on disk (fewer blocks for a sync).
  std::optional<Status> write_at_once(Fd fd, int64_t page, std::span<const std::byte> data,
                                      ChangedBytes changed = {});
  // write_at_once of the pages from `first` that `data` holds (whole pages,
  // one after the other), with one system call where it can (a local
  // file's pages between two of its checksum blocks): its outcome, or
  // nothing when they cannot be written so (then write them one by one).
  // On failure each page holds its old bytes or its new ones, and reads
  // as write_at_once's failure leaves it.
  std::optional<Status> write_pages_at_once(Fd fd, int64_t first, std::span<const std::byte> data);

  // Returns once every write of `fd` requested before the call is durable.
  // Fails when the disk refuses to flush, and when a page's latest write
  // failed since the last sync that said so (its ticket reports it too):
  // that page is not on disk, and the sync says which. It says so once, as
  // fsync reports a failed write back once, so that a failure is the
  // failing request's and not the file's for ever (a database rolls back
  // and goes on); until the page is written successfully or truncated
  // away, reading it fails with that write's error instead of giving bytes
  // that were never written.
  Status sync(Fd fd);

  // The caller gives up the writes of `fd` that failed (it told its own
  // caller so: a transaction that rolled back): reading those pages gives
  // what the store holds again, the bytes before each failed write, and
  // the next sync does not report them. kInvalidArgument for an unknown or
  // closed descriptor.
  Status abandon_failed_writes(Fd fd);

  // Waits for the file's earlier requests, then sets its size to `pages`
  // pages: pages at and beyond `pages` are gone, and a larger size adds
  // pages of zeros.
  Status truncate(Fd fd, int64_t pages);

  // A file that holds no page may take another page size: SQLite learns a
  // new database's page size (PRAGMA page_size) only at its first write,
  // after its file was made. Waits for the file's earlier requests.
  // kInvalidArgument, changing nothing, when the file holds a page, when it
  // is remote (a remote file's page size is fixed at its creation), or when
  // this client keeps a pool. The caller keeps other descriptors from
  // reading or writing pages meanwhile (with a lock). Other descriptors
  // that opened the file while it held no page take the new size with
  // their next status() (its page_size), counting the pages at that size;
  // one of a client with a pool gets kInvalidArgument there instead.
  Status set_page_size(Fd fd, uint32_t page_size);

  // The file's page size, size, policy, concurrency level and tickets in
  // flight. The size counts every write confirmed so far; a write still in
  // flight may or may not be counted yet.
  Result<FileStatus> status(Fd fd);

  // The file's size and page size as status() counts them, and nothing
  // else: what a SQLite database asks at the start of every transaction.
  struct Size {
    int64_t pages = 0;
    uint32_t page_size = 0;
  };
  Result<Size> size(Fd fd);

  // Sets the concurrency level of one open file (the client's level is the
  // default). Requests already in flight are not cancelled; lowering the
  // level makes new requests wait until the count is below it.
  Status set_concurrency(Fd fd, uint32_t concurrency);

  // Which of the file's servers holds page `page`: an index into the
  // servers the file was placed on (0 for a local file). For a program that
  // knows its next reads and issues them so every server stays busy
  // (pf-replay --schedule balanced); the answer is computed by the client,
  // with no message sent. kInvalidArgument for a bad descriptor or page.
  Result<uint32_t> server_of(Fd fd, int64_t page);

  // Removes the Pagefile `name`. kNotFound when there is none. For a local
  // file, descriptors already open on it keep working until closed (as with
  // UNIX unlink). For a remote file the pages go at once: descriptors still
  // open on it read zeros and their size calls fail with kNotFound.
  // `lock_token`, for a remote file removed under a write lock (a
  // database's journal): the token of that lock (OpenOptions::lock_token);
  // kStale, removing nothing, once the lock has passed to another client.
  Status unlink(std::string_view name, Location location = Location::kLocal, uint64_t lock_token = 0);

  // How long a remote request may go unanswered (ClientOptions::
  // request_timeout_ms), for requests sent from now on. A call that makes
  // many requests of a server that stopped answering fails within about
  // one such timeout, not one per request (bus/bus_client.h).
  // kInvalidArgument for ms <= 0.
  Status set_request_timeout(int ms);
  int request_timeout_ms() const;

  // Takes or changes this descriptor's lock on the file. A shared lock is
  // compatible with other shared locks; an exclusive lock with none. Locks
  // are held per descriptor, so two descriptors of one client conflict like
  // two processes do. kTry fails with kBusy at once when the lock is held
  // elsewhere; kBlock waits. Local files use the operating system's
  // open-file-description locks, so processes on one machine see each other.
  Status lock(Fd fd, LockMode mode, LockWait wait = LockWait::kTry);
  // Releases this descriptor's lock; OK when it held none.
  Status unlock(Fd fd);

  // Moves this descriptor's lock to `level` (LockLevel above), never
  // waiting: kBusy at once when another descriptor's lock is in the way.
  // Requests follow SQLite's pager: kShared first; kReserved only from
  // kShared; kExclusive from kShared or above; kPending is never asked for;
  // lowering goes to kShared or kNone only. Asking for the level held
  // changes nothing. Other requests fail with kInvalidArgument and change
  // nothing.
  // When kExclusive is refused because other descriptors hold kShared, this
  // one is left at kPending (new readers are kept out) and gets kBusy; it
  // should ask again once they leave, or lower its level. When it is refused
  // because another descriptor holds kReserved or above, it keeps its level.
  // Local files emulate the scheme with open-file-description byte-range
  // locks on the header (separate from lock()'s byte); remote files keep it
  // at the catalog under the client's lease. Mixing lock() and
  // set_lock_level() on one file is not meaningful.
  Status set_lock_level(Fd fd, LockLevel level);

  // Whether a descriptor other than `fd` (of this client or any other) holds
  // kReserved or above on the file: SQLite's xCheckReservedLock.
  Result<bool> reserved_elsewhere(Fd fd);

  // The caller's word that, until it calls again with false, no descriptor
  // but `fd` writes the file: a lock it holds on another file keeps every
  // other writer out (SQLite's RESERVED lock on a database, for the
  // database's rollback journal). A local file then spares the reads that
  // only guard against others' writes (a page's old checksum, before an
  // overwrite of a page this descriptor read, or a page past the end), as
  // it does by itself while `fd` holds kReserved or above. A wrong word can
  // leave a page that a crash cuts matching neither its old nor its new
  // bytes (reported as kCorruption, never read as data). Nothing on a
  // remote file. kInvalidArgument for a descriptor not open.
  Status exclude_other_writers(Fd fd, bool excluded);

  // True while `fd` holds a lock that set_lock_level() took from kNone and
  // the file is known not to have changed since this descriptor last let go
  // of a lock: no other descriptor took kReserved or above, or set its
  // size, in between (the catalog keeps a version per file). Then what a
  // reader kept of the file (the pool, SQLite's cache) is still good and
  // need not be read again. False when that is not known: the first lock,
  // a lost lease, local files (which keep no version).
  bool unchanged_since_unlock(Fd fd);

  // ---- The buffer pool (ClientOptions::cache_pages > 0) -------------------
  // With a pool, a read of a page the pool holds is served from it (its
  // ticket is complete at once and takes no room in the window); a miss goes
  // to the store and the page is kept as the file's policy decides. A write
  // updates the pooled copy at once and goes to the store as without a pool
  // (write-through), so reads always see the last write requested. Files
  // whose policy reads ahead ("sequential") get read requests issued for the
  // pages after the one read, only while their window has room.

  // Keeps page `page` of `fd` in the pool until unpin: reads it in now when
  // the pool does not hold it (a page beyond the end is pinned and kept once
  // written). Pins nest. Fails with kNotSupported when the client has no
  // pool, like read_request for a bad descriptor or page, and with the
  // read's error (the pin is then undone).
  Status pin(Fd fd, int64_t page);
  // Undoes one pin; kInvalidArgument when the page is not pinned.
  Status unpin(Fd fd, int64_t page);

  // Drops every page of `fd` from the pool, so the next reads go to the
  // store: for a remote file that another client may have written (the VFS
  // calls it when SQLite's change counter moved). OK, and nothing to do,
  // without a pool. Reads already in flight may still bring in what they
  // read.
  Status drop_cached(Fd fd);

  // The pool's counters for `fd` (all zero without a pool); also part of
  // status(). kInvalidArgument for an unknown or closed descriptor.
  Result<FileCounters> counters(Fd fd);

  class Impl;

 private:
  friend struct ClientAccess;  // client/client_access.h: the project's own layers above
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace pagefile
