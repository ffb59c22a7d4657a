// A file of bytes (what SQLite reads and writes) kept in a Pagefile.
//
// Byte b of a database file is byte b % P of page b / P (P: the Pagefile's
// page size), so an imported .db file is its own Pagefile, page for page.
// Its size is its pages times P: SQLite database files are whole pages.
// A new database's Pagefile is made at open with SQLite's default page
// size; when SQLite's first write (page 1) shows a smaller page size
// (PRAGMA page_size before the first table), a local Pagefile takes that
// size (Client::set_page_size), so the file's size stays whole SQLite pages.
//
// Journals, WAL files and super-journals have odd sizes, which must be exact
// (a hot journal's size decides what is rolled back). Their Pagefile has a
// length page first: page 0 holds "PFVFSLEN" and the byte length as a
// little-endian u64; byte b lives on page 1 + b / P. The length page is
// written at sync, truncate and close, never on every append, so the length
// another opener sees is the one of the last sync (what SQLite relies on).
// Read again where another descriptor may have changed it (refresh_size),
// whole and checked; written, it says that its first 16 bytes changed, so
// that a local file writes one sector of it (ChangedBytes).
//
// Write-behind: a write of whole pages is requested at once and confirmed
// later, at sync, at drain, or when more than `concurrency` writes are
// unconfirmed (the oldest is then waited for). A write of part of a page
// changes a copy of that page kept here (read first when it exists), which
// is requested when more than kMaxCachedPages are kept, or at sync/drain.
// Reads see every earlier write at once: the size is kept here, raised by
// each write and set by truncate, so size(), read() and write() agree while
// requests are in flight.
//
// Read-ahead: a read of page p right after one of page p-1 requests the
// next `concurrency` pages that exist; their tickets are confirmed when read
// or when dropped (a write to the page, drop_cache(), truncate, close).
//
// Runs (a local database file, when the VFS allows them, allow_runs): a
// read of page p right after pages p-kRunAfter+1 to p-1 were read in order
// reads the pages after it too, with one read of the disk
// (Client::read_pages_at_once), first kFirstRun
// pages, twice as many at each run read in order, at most kRunBytes; the
// next reads in order are copied from the run. A write of one of its
// pages, drop_cache(), truncate and close forget it. Valid only while no
// other descriptor writes the file unseen: the VFS allows runs where each
// read transaction begins with a lock that it sees (drop_cache then).
//
// Thread-safety: none; the VFS calls it under its file's mutex.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/page_io.h"
#include "pagefile/pagefile.h"
#include "vfs/trace_writer.h"

namespace pagefile::vfs {

// Counters of one database and its journal/WAL in this process (atomic:
// several connections may share them).
struct IoStats {
  std::atomic<uint64_t> read_requests{0};
  std::atomic<uint64_t> write_requests{0};
  std::atomic<uint64_t> pages_read{0};     // confirmed page reads
  std::atomic<uint64_t> pages_written{0};  // confirmed page writes
  std::atomic<uint64_t> read_ahead_used{0};
  std::atomic<uint64_t> waits{0};          // confirms a call had to wait for
  std::atomic<uint64_t> wait_ns{0};        // time spent in them
  std::atomic<uint64_t> bytes_read{0};     // as SQLite asked
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> syncs{0};
};

class ByteFile {
 public:
  enum class Layout : uint8_t {
    kPages,  // a database: no length page
    kBytes,  // a journal/WAL: length page first
  };
  // Page size of new journals and WAL files.
  static constexpr uint32_t kBytesPageSize = 16384;
  // Page size of a new rollback journal on the local disk: no larger than a
  // file-system block, so that its pages need no space reserved
  // (fallocate) before their first write and no checksum per sector. (A
  // WAL keeps kBytesPageSize: its frames, 24 bytes longer than a database
  // page, are read back one by one, and each would straddle two pages.)
  static constexpr uint32_t kLocalJournalPageSize = 4096;
  // Partial pages kept at most before the lowest is requested.
  static constexpr size_t kMaxCachedPages = 16;
  // Pages a local journal writes at most with one call (write_kept_run).
  static constexpr int64_t kMaxRunPages = 16;
  // Pages a WAL keeps at most while a checkpoint of its database runs in
  // this process (keep_read_pages): 4 MiB, the frames of a WAL of SQLite's
  // default auto-checkpoint size (1000 pages of 4 KiB).
  static constexpr size_t kCheckpointPages = 256;
  // Runs: the reads in order a run waits for, the first's pages, and the
  // most bytes of one.
  static constexpr int64_t kRunAfter = 4;
  static constexpr int64_t kFirstRun = 4;
  static constexpr int64_t kRunBytes = 128 * 1024;

  // Opens (or creates) `name`. A new kBytes file gets `new_page_size`
  // (kBytesPageSize unless given) unless options.page_size says otherwise. kCorruption when a kBytes file's
  // length page is not one. Every page operation sent to the store is
  // captured to the trace in `trace`, when it holds one.
  static Result<std::unique_ptr<ByteFile>> open(Client& client, const std::string& name, OpenOptions options,
                                                  Layout layout, std::shared_ptr<IoStats> stats,
                                                  std::shared_ptr<TraceSlot> trace = nullptr,
                                                  uint32_t new_page_size = kBytesPageSize);
  // Closes as close() does, dropping its error.
  ~ByteFile();
  ByteFile(const ByteFile&) = delete;
  ByteFile& operator=(const ByteFile&) = delete;

  // Fills `out` from byte `offset`; bytes past the end are zeros. Returns how
  // many bytes existed (out.size() unless the read went past the end).
  Result<size_t> read(std::span<std::byte> out, int64_t offset);
  Status write(std::span<const std::byte> data, int64_t offset);
  Status truncate(int64_t size);
  // As last known: after reload_lazily(), current_size() says what it is.
  int64_t size() const { return size_; }
  uint32_t page_size() const { return page_size_; }
  uint32_t replicas() const { return replicas_; }  // copies of each page (FileStatus::replicas)

  // Every write requested and confirmed (partial pages and the length page
  // too), not yet durable.
  Status drain();
  // drain(), then durable on the servers (Client::sync).
  Status sync();
  // True when a write was made since the last sync.
  bool unsynced() const { return unsynced_; }
  // True when writes are held here that the store has not had yet (what
  // drain() sends).
  bool pending() const;
  // Lets go of what a failed drain() left unsent (pages changed in part,
  // the length; write-behind requests are confirmed, their errors dropped,
  // and the failed writes abandoned: Client::abandon_failed_writes) and
  // reads the size again when next needed: writes the caller was told
  // failed never reach the file later, and their pages read as before.
  void forget_unsent();
  // Whether reads in order may read runs of pages (see above); false
  // forgets the run held.
  void allow_runs(bool allowed);
  // Forgets read-ahead and kept pages (another client may have written);
  // kept pages not yet written stay.
  void drop_cache();
  // Keeps up to `pages` pages read (at least kMaxCachedPages), the lowest
  // let go beyond that, and changed pages beyond kMaxCachedPages requested
  // as ever. A checkpoint reads a WAL's frames in its database's page
  // order, four to a 16 KiB page and the pages in no order: kept, each is
  // read (and checked) once for its four frames rather than once for each.
  // Lowered, the read pages beyond it are let go at once.
  void keep_read_pages(size_t pages);
  // Reads the size from the store (another client may have changed it):
  // the page count of a kPages file, the length page of a kBytes one.
  // REQUIRES: nothing unsynced beyond what the store knows (after drain).
  Status refresh_size();
  // Another descriptor may have written the file: drop_cache() and
  // refresh_size(), unless this descriptor holds writes the store has not
  // had yet (then it is the writer, and what it holds is the newest).
  Status reload();
  // reload(), but the size is read from the store only when next needed:
  // by current_size(), a write, a truncate, or a read past the end as last
  // known (which reads it before answering with zeros). What SQLite reads
  // in WAL mode lies within sizes it knows from the wal-index (a page
  // below the database's page count, a frame below the WAL's last), so
  // most transactions need no stat of either file.
  void reload_lazily();
  // The size, read from the store first where reload_lazily() left it.
  Result<int64_t> current_size();

  // A database opened with no page size of the user's (page_size=): at
  // SQLite's first write of a smaller page 1 the file takes its size.
  void follow_sqlite_page_size() { follows_sqlite_ = true; }

  Status set_concurrency(uint32_t concurrency);
  uint32_t concurrency() const { return concurrency_; }

  // drain(), drop read-ahead, close the descriptor. Returns the first error.
  Status close();
  Fd fd() const { return fd_; }
  // The descriptor's PageIo, for the calls SQLite makes at every
  // transaction that involve none of the client's request bookkeeping
  // (lock levels, the size, the reserved check): client/client_access.h.
  // kInvalidArgument, as a call by descriptor says, once the file is closed
  // or the client stopping (Client::stop closes every descriptor).
  Result<PageIo*> io() const;

 private:
  struct KeptPage {
    std::vector<std::byte> data;
    // The bytes changed since it was read or last requested, [from, to):
    // the store may write only the sectors that hold them.
    size_t from = SIZE_MAX;
    size_t to = 0;
    // Changed since it was read or last requested.
    bool dirty() const { return from < to; }
    void changed(size_t offset, size_t size) {
      from = std::min(from, offset);
      to = std::max(to, offset + size);
    }
    ChangedBytes changes() const { return dirty() ? ChangedBytes{from, to - from} : ChangedBytes{}; }
    // Requested: clean, nothing changed since.
    void written() {
      from = SIZE_MAX;
      to = 0;
    }
  };
  struct AheadRead {
    Ticket ticket;
    std::vector<std::byte> data;
  };

  ByteFile(Client& client, Fd fd, uint32_t page_size, Layout layout, uint32_t concurrency,
             std::shared_ptr<IoStats> stats);
  // Calls `capture(writer, file)` when a trace is being captured.
  template <class F>
  void traced(F&& capture) const;
  // The Pagefile page holding data byte `offset`.
  int64_t page_of(int64_t offset) const;
  // Pagefile pages that hold data when the size is `size`.
  int64_t pages_for(int64_t size) const;
  // Reads page `page` into `out` (ahead-read, kept or requested).
  // With `beyond_end`, set when the store answered zeros for a page past
  // the file's end (PageRead::kBeyondEnd).
  Status fetch(int64_t page, std::span<std::byte> out, bool* beyond_end = nullptr);
  // Reads part of a page of a local database (not kept): see checked_.
  Status read_part(int64_t page, size_t in_page, std::span<std::byte> out);
  // Copies page `page` into `out` from the run held, or from a run read now
  // when the read is in order and runs are allowed: OK, or the page's
  // error (kCorruption); nothing when it is to be read alone.
  std::optional<Status> from_run(int64_t page, std::span<std::byte> out);
  // Whether the run held has page `page`.
  bool in_run(int64_t page) const;
  Result<KeptPage*> keep(int64_t page);
  // Lets kept pages go, but `keeping`, the lowest first, while more than
  // kept_limit_ are kept, or more than kMaxCachedPages of those changed
  // (requested first).
  Status trim_kept(std::map<int64_t, KeptPage>::iterator keeping);
  using KeptIt = std::map<int64_t, KeptPage>::iterator;
  // Requests the changed kept pages from `from` (up to `end`) that follow
  // one another, at most kMaxRunPages, with one call, and marks them
  // written: the one after the last written. `from` when they are not
  // written so (fewer than two, not a local journal, or the client
  // declines): then one by one.
  Result<KeptIt> write_kept_run(KeptIt from, KeptIt end);
  // Lets kept pages that hold no change go, the lowest first, until at
  // most `keep_at_most` are kept (changed ones stay); a buffer let go
  // serves the next page kept (spare_).
  void let_go_unchanged(size_t keep_at_most);
  Status issue_write(int64_t page, std::span<const std::byte> data, ChangedBytes changed = {});
  Status confirm_oldest_write();
  Status confirm_writes();
  Status flush_kept();
  void read_ahead(int64_t page);
  void drop_ahead(int64_t page);
  void drop_all_ahead();
  // kBytes: the byte length recorded in the length page (0 for a file with
  // no pages or an all-zero page 0); kCorruption when page 0 is neither.
  Result<int64_t> read_length(const std::string& name);
  // A kPages file that held nothing now has pages of `page_size`: a new
  // database's page 1 of that size is about to be written here, or another
  // descriptor wrote it. Trace: the file is closed and opened again at its
  // new page size (TraceWriter::resized).
  void adopt_page_size(uint32_t page_size);
  // Runs `confirm`, counting a wait and its time.
  template <class F>
  auto timed(F&& confirm);

  Client& client_;
  Fd fd_;
  std::shared_ptr<PageIo> io_;  // fd_'s, until close
  uint32_t page_size_;  // fixed, but for a new database's (adopt_page_size)
  const Layout layout_;
  uint32_t concurrency_;
  std::shared_ptr<IoStats> stats_;
  std::string name_;
  std::optional<AccessType> policy_;  // as the store reports it (for the trace's open)
  std::shared_ptr<TraceSlot> trace_;
  bool closed_ = false;
  bool follows_sqlite_ = false;  // follow_sqlite_page_size()

  int64_t size_ = 0;
  bool size_stale_ = false;  // reload_lazily() left size_ to be read again
  uint32_t replicas_ = 1;
  bool length_dirty_ = false;  // kBytes: the length page is behind size_
  bool unsynced_ = false;
  int64_t last_read_page_ = -2;
  // False when the client does page requests before returning
  // (FileStatus::always_direct): reading ahead would only read early.
  bool read_ahead_pays_ = true;
  bool local_ = false;  // a local Pagefile (FileStatus::location)

  std::deque<Ticket> writes_;  // unconfirmed, oldest first
  std::map<int64_t, KeptPage> kept_;
  size_t kept_limit_ = kMaxCachedPages;  // keep_read_pages
  std::vector<std::byte> run_out_;  // write_kept_run's pages, one after the other
  std::vector<std::byte> spare_;  // a kept page's buffer, for the next (keep)
  // A kBytes file's length page: read into at each refresh, and the one
  // written at each sync (magic and length, zeros after). Made once, not
  // per transaction.
  std::vector<std::byte> length_in_;
  std::vector<std::byte> length_out_;
  std::map<int64_t, AheadRead> ahead_;
  // The run: run_count_ pages from run_first_ in run_ (kRunBytes, made at
  // the first run); run_length_ pages the last run asked for, 0 after a
  // read out of order.
  bool runs_allowed_ = false;
  std::unique_ptr<std::byte[]> run_;
  int64_t run_first_ = 0;
  int64_t run_count_ = 0;
  int64_t run_length_ = 0;
  int64_t in_order_ = 0;  // reads in order, the last one included
  // A local page as read_part last read it whole, checked: page
  // checked_page_ (-1: none). SQLite reads 16 bytes of the header page at
  // every transaction; read_part reads only those, and takes them when
  // they are the same bytes as this page's (those of a version of the
  // page that passed its check), else reads and checks the page whole.
  // Never stale: only ever compared with what the disk holds now.
  std::unique_ptr<std::byte[]> checked_;
  int64_t checked_page_ = -1;
};

}  // namespace pagefile::vfs
