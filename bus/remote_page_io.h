// PFRI: a remote Pagefile, as a PageIo the client's request/confirm
// machinery drives exactly as it drives a local one.
//
// Opening asks the catalog for the file's record (creating it when asked);
// after that, page reads and writes go straight to the server that holds
// each page (bus/placement.h) and the catalog is not touched again until
// sync, truncate, close, or a lock.
//
// Size: the client keeps the file's size as the catalog gave it, raised by
// each write past the end, and tells the catalog at sync and close when it
// changed. A read of a page at or past that size returns kBeyondEnd.
//
// Checksums: each page written goes with its checksum, which the server
// checks on arrival; each page read is checked against the checksum the
// server sends with it (core/page_checksum.h).
//
// Fencing: writes, truncates and syncs, and the size they record at the
// catalog, carry the token of the last write lock granted
// (OpenOptions::lock_token); a server that has seen a newer token refuses
// them with kStale. When the catalog grants a lock after a writer's lease
// ran out, it asks for the new token to be announced to every server of
// the file before the grant returns, so that what the old writer still
// sends is refused everywhere, not only where the new one writes.
//
// Durability: sync() sends sync to every server that took a write since the
// last sync and returns when all have flushed; then it records the size.
//
// Replicas (FileRecord::replicas = R > 1): a write goes to the R servers of
// its page at once and is confirmed when every one has it; a read goes to
// the copy whose server has the least work left, as this client knows it:
// the fewest of its requests waiting, then the one whose current request
// began earliest (BusClient::load; ties: a copy fixed by the page, so that
// each server's cache holds its own part), and when it fails (an error, no answer, a bad checksum) to
// the next copy; a copy that failed its checksum is then repaired from the
// good one (WritePages.repair, which leaves a page rewritten meanwhile
// alone). Every copy failing is the first copy's error.
//
// Degraded service: a copy that cannot take a write (its server is
// unreachable, its disk failed or is full) is marked stale at the catalog
// (FileRecord::stale), and the write is confirmed once the other copies
// have it; from then on stale copies are neither read nor written, by this
// client at once and by others from their next lock (grants carry the
// record's replica_version). sync, truncate and fence announcements degrade
// the same way. The catalog refuses to leave a page with no current copy,
// and then the write fails with the server's error. A fenced writer's
// kStale is never taken for a missed write.
//
// Thread-safety: as PageIo: the client orders the calls.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/mutex.h"
#include "core/page_io.h"
#include "bus/bus_client.h"
#include "server/catalog_store.h"
#include "server/lease_table.h"
#include "wire/pagefile.capnp.h"
#include "bus/placement.h"
#include "pagefile/options.h"

namespace pagefile::net {

class RemotePageIo final : public PageIo {
 public:
  // Opens `name` through the catalog. Errors as Client::open, and
  // kDisconnected when the catalog cannot be reached.
  static Result<std::unique_ptr<RemotePageIo>> open(std::shared_ptr<BusClient> bus,
                                                    std::string_view name,
                                                    const OpenOptions& options);

  // Removes `name` from the catalog, then its share on every server.
  // `lock_token` as Client::unlink.
  static Status unlink(BusClient& bus, std::string_view name, uint64_t lock_token = 0);

  ~RemotePageIo() override;

  const std::string& name() const override { return record_.name; }
  uint32_t page_size() const override { return record_.page_size; }
  BufferPolicy recorded_policy() const override { return record_.policy; }
  bool read_only() const override { return read_only_; }
  const FileRecord& record() const { return record_; }

  void read_async(int64_t page, std::span<std::byte> out, ReadDone done) override;
  std::optional<Result<PageRead>> read_direct(int64_t page, std::span<std::byte> out) override;
  void write_async(int64_t page, std::span<const std::byte> data, WriteDone done) override;
  // (`changed` is not used: a server's share is written whole.)
  std::optional<Status> write_direct(int64_t page, std::span<const std::byte> data, ChangedBytes changed) override;
  bool may_be_direct() const override { return bus_->has_embedded(); }
  // Reads the answers of the page's server on this thread (BusClient::read_as_waiter).
  bool wait_for_progress(int64_t page, std::chrono::milliseconds timeout) override;
  bool always_direct() const override { return bus_->all_direct(); }
  Status sync() override;
  Status truncate(int64_t pages) override;
  // Asks the catalog, so another client's writes and truncates show;
  // while a lock is held, the size its grant brought (plus this
  // descriptor's own writes) is the answer without asking.
  Result<int64_t> size_pages() override;
  bool unchanged_since_unlock() const override;
  Status lock(LockMode mode, LockWait wait) override;
  Status unlock() override;
  Status close() override;

  // Moves this client's lock to `level` (SQLite's levels). kBusy when the
  // catalog refuses; the level held then is level_held().
  Status set_lock_level(LockLevel level) override;
  uint32_t server_index(int64_t page) const override { return static_cast<uint32_t>(placement_.server_for(page)); }
  uint32_t replicas() const override { return placement_.replicas(); }
  LockLevel level_held() const;
  // Asks the catalog (renewing nothing it would not renew anyway) whether
  // another owner holds kReserved or above.
  Result<bool> reserved_elsewhere() override;

  // Resync: brings `server`'s copies of this file (stale, or resyncing
  // after a resync that stopped) up to date from current copies and marks
  // them current; the file stays in use meanwhile. Under the file's write
  // lock the copies become resyncing, so every writer from then on writes
  // them too (it learns so from its lock's grant); then, a batch of pages
  // at a time under the write lock, each page whose copy there differs
  // from a current copy's (or fails its checksum, or was never written
  // there) is copied; then the server's share is cut to the file's size,
  // synced, and marked current. Only changed pages are written: a server
  // that kept its directory gets what it missed, a new empty one gets all.
  // A server that fails meanwhile is marked stale again and the error
  // returned. `progress` gets (pages done, pages in the file) after each
  // batch. Writers that do not lock (the Pagefile API without Client::lock)
  // are not kept apart from the batches.
  struct ResyncReport {
    int64_t compared = 0;  // pages with a copy on the server
    int64_t copied = 0;    // of them, those written to it
  };
  using ResyncProgress = std::function<void(int64_t done, int64_t total)>;
  Result<ResyncReport> resync(const std::string& server, const ResyncProgress& progress = nullptr);

 private:
  RemotePageIo(std::shared_ptr<BusClient> bus, FileRecord record, std::string policy, const OpenOptions& options,
               std::shared_ptr<std::atomic<uint64_t>> fence);
  const std::string& server_of(int64_t page) const;
  // Fills in a read of `page` from `server` (an index into the record's
  // servers); a write, or a repair (WritePages.repair).
  void build_read(wire::Request::Builder r, int64_t page, uint32_t server) const;
  void build_write(wire::Request::Builder r, int64_t page, std::span<const std::byte> data, uint32_t server,
                   bool repair = false) const;
  // The copies of `page` in the order a read tries them: the least busy
  // server first (BusClient::load).
  ReplicaSet read_order(int64_t page) const;
  // Reads `page` from copy `k` of `order`, then the next ones while they
  // fail; `first` is the first copy's failure, once there was one, and
  // `damaged` marks the copies that failed their checksum.
  void read_copy(int64_t page, std::span<std::byte> out, ReadDone done, ReplicaSet order, uint32_t k,
                 Status first, uint32_t damaged);
  // Rewrites `page` on the copies `damaged` marks in `order` from `good`
  // (read from a sound copy), answered by no one.
  void repair(int64_t page, std::span<const std::byte> good, const ReplicaSet& order, uint32_t damaged);
  // The requests of `page` waiting on `server` (with R > 1), for
  // wait_for_progress to read the right connection.
  void track(int64_t page, uint32_t server, int delta);
  const std::string& awaited_server(int64_t page) const;
  // Whether a call that failed with `s` means its server missed what was
  // sent (unreachable, disk error, disk full): then it may be left behind.
  static bool missed(const Status& s);
  // Takes the copy states of `record` (this file's, as the catalog had it),
  // unless an answer with a newer replica_version came first. kStale when
  // its servers are not this descriptor's (a server was replaced): those
  // that left are stale here from then on.
  Status take_copy_states(const FileRecord& record);
  // Takes the copy states of the record in a catalog's answer (this file's:
  // else gone()).
  Status take_answered_states(const Reply& reply);
  // Asks the catalog for the record and takes its copy states.
  Status refresh_copy_states();
  // The catalog's record of this file now (stat), saying `what` it was
  // asked for when that fails; gone() when the name is another file's now.
  Result<ReplyPtr> stat_again(std::string_view what);
  // kNotFound: the name was removed since this descriptor opened it.
  Status gone() const;
  // Marks `servers` (indices) stale at the catalog, one after another,
  // without blocking: `done` gets OK once all are, else `why` with the
  // catalog's refusal.
  void leave_behind_async(std::vector<uint32_t> servers, Status why, std::function<void(Status)> done);
  // The same, waiting.
  Status leave_behind(std::vector<uint32_t> servers, const Status& why);
  // The outcome of one call to each of several servers of the file, given
  // the calls that failed: OK when none did, or when each failure was a
  // missed one and those servers could be left behind; else the first.
  Status settle(const std::vector<std::pair<std::string, Status>>& failures);
  // The index of `server` in the record's list.
  uint32_t index_of(const std::string& server) const;
  // The directory `server` (by index) is known to be (0: not known).
  uint64_t directory(uint32_t server) const { return directories_[server].load(std::memory_order_acquire); }
  // Whether `server`'s directory is known, or need not be (a catalog from
  // before clusters, whose servers join none).
  bool directory_known(uint32_t server) const { return record_.cluster == 0 || directory(server) != 0; }
  // The same for each of `set`'s servers.
  bool directories_known(const ReplicaSet& set) const;
  // Learns `server`'s directory (BusClient::learn_directory_async), then
  // calls `then` when given; does not wait.
  void learn_directory(uint32_t server, std::function<void()> then);
  // Starts learning the directories the record did not bring (servers the
  // catalog knows none of: doc/architecture.md, "Server directories"),
  // without waiting.
  void learn_directories();
  // Learns the directories of `set`'s servers that are not known yet (a
  // server that could not be reached at open), then calls `then`: before
  // a write goes to them. Does not wait.
  void know_directories(const ReplicaSet& set, std::function<void()> then);
  // write_async to the copies `set` of `page`.
  void send_write(int64_t page, std::span<const std::byte> data, const ReplicaSet& set, WriteDone done);
  CopyState state_of(uint32_t server) const {
    return static_cast<CopyState>(copy_states_[server].load(std::memory_order_acquire));
  }
  // A write of `page` to `server` succeeded: the file reaches at least that
  // far, and sync must reach that server.
  void note_written(int64_t page, size_t server);
  // The outcome of a read of `page` from its reply, into `out`.
  Result<PageRead> take_read(int64_t page, Result<ReplyPtr> reply, std::span<std::byte> out, uint32_t server) const;
  // take_read without the cut at this client's size: the page's bytes as
  // the server holds them, checked (resync).
  Status take_bytes(int64_t page, Result<ReplyPtr> reply, std::span<std::byte> out, uint32_t server) const;
  // The outcome of a read of `page` whose bytes are in `out`: beyond the
  // end as this client knows it, zeros.
  PageRead finish_read(int64_t page, std::span<std::byte> out) const;
  // kCorruption when `bytes`, page `page` as received from `server`, do not
  // match `checksum` (and checksums are on).
  Status check_received(int64_t page, std::span<const std::byte> bytes, uint64_t checksum,
                        const std::string& server) const;
  // This file as page work by plain call names it (BusClient::read_direct).
  // on server `server` (its index in the record).
  ShareRef share_ref(uint32_t server) const {
    return {record_.id,       record_.page_size,  policy_, fence_->load(), record_.cluster,
            sector_checksums_, directory(server)};
  }
  // Tells every server of the file that `token` is now the one to beat;
  // returns when all have answered.
  Status announce_fence(uint64_t token);
  // Tells server `server` alone that `token` is the one to beat (resync:
  // a server back from the dead may have missed the announcement).
  Status tell_fence(uint32_t server, uint64_t token);
  // The share of a read or write of `page`, with what the server's pool
  // needs: the policy and where the file's pages are.
  void set_page_share(wire::Share::Builder share, uint32_t server) const;
  // Tells the catalog the size when writes raised it since it last heard.
  Status record_size() REQUIRES(meta_mu_);
  Status set_lock_level_locked(LockLevel level) REQUIRES(meta_mu_);
  // Takes kReserved (from kNone, through kShared), waiting while another
  // holds it, up to a bound (resync).
  Status hold_write_lock() REQUIRES(meta_mu_);
  // Puts `server`'s copies in `state` at the catalog and takes the record's
  // states; waits.
  Status set_copy_state_sync(uint32_t server, CopyState state);
  // How far the file reaches: its size, or further where a current copy's
  // share does (writes not yet recorded by a sync).
  Result<int64_t> current_extent() REQUIRES(meta_mu_);
  // A resync of `server` stops for `why`: returns it.
  Status resync_failed(uint32_t server, Status why) REQUIRES(meta_mu_);
  // One batch of resync: pages [first, end) with a copy on `server`.
  Status resync_batch(uint32_t server, int64_t first, int64_t end, ResyncReport& report) REQUIRES(meta_mu_);
  // Takes `recorded`, the catalog's size, unless this descriptor's own
  // writes went further and are not yet recorded there.
  int64_t adopt_catalog_size(int64_t recorded) REQUIRES(meta_mu_);

  std::shared_ptr<BusClient> bus_;
  const FileRecord record_;
  const std::string policy_;  // the policy name the servers' pools run for this file
  const PagePlacement placement_;
  const bool read_only_;
  const bool checksums_;  // OpenOptions::checksums
  const bool sector_checksums_;  // OpenOptions::sector_checksums
  // The token this file's writes carry (OpenOptions::lock_token).
  const std::shared_ptr<std::atomic<uint64_t>> fence_;
  const uint64_t owner_;  // this descriptor's identity for locks
  std::atomic<int64_t> size_;

  // Serialises sync, truncate, close and lock calls of this descriptor, so
  // one sync cannot return while another's flush is still under way, and
  // size reports reach the catalog in order.
  mutable Mutex meta_mu_;
  int64_t catalog_size_ GUARDED_BY(meta_mu_);  // the size the catalog has
  LockLevel level_ GUARDED_BY(meta_mu_) = LockLevel::kNone;
  bool reserved_by_other_ GUARDED_BY(meta_mu_) = false;  // the catalog's last word
  // The file's version (lease_table.h) when this descriptor last let go of
  // its lock, 0 when unknown; and whether the last lock taken from kNone
  // found the same version.
  uint64_t version_at_unlock_ GUARDED_BY(meta_mu_) = 0;
  bool unchanged_ GUARDED_BY(meta_mu_) = false;
  bool size_from_grant_ GUARDED_BY(meta_mu_) = false;  // the lock held brought the size

  // Taken alone or inside meta_mu_ (sync), never the other way round.
  Mutex dirty_mu_ ACQUIRED_AFTER(meta_mu_);
  std::set<size_t> dirty_servers_ GUARDED_BY(dirty_mu_);  // written since the last sync

  // Each server's copies (CopyState, by index), from the record at open,
  // the catalog's answers to this descriptor, and lock grants; and the
  // record's replica_version they came with.
  std::unique_ptr<std::atomic<uint8_t>[]> copy_states_;
  Mutex copies_mu_;  // one record's states taken at a time
  std::atomic<uint64_t> replica_version_{0};

  // Each server's directory id (by index), from the record at open, the
  // records the catalog sends since, and what this descriptor learns.
  const std::shared_ptr<std::atomic<uint64_t>[]> directories_;

  // With R > 1: per page with requests in flight, how many wait on each
  // server (by index), so a waiter reads the connection its answer comes on.
  mutable Mutex flights_mu_;
  std::unordered_map<int64_t, std::map<uint32_t, uint32_t>> flights_ GUARDED_BY(flights_mu_);
};

}  // namespace pagefile::net
