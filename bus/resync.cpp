// RemotePageIo::resync (bus/remote_page_io.h): a stale copy brought up to
// date while its file stays in use.
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "bus/barrier.h"
#include "bus/remote_page_io.h"
#include "core/page_checksum.h"
#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

// Pages compared (and copied) under one hold of the write lock: writers
// wait at most one batch.
constexpr int64_t kResyncBatch = 256;
// How long resync waits for the write lock each time before giving up.
constexpr auto kLockPatience = std::chrono::seconds(30);

}  // namespace

Status RemotePageIo::hold_write_lock() {
  auto deadline = std::chrono::steady_clock::now() + kLockPatience;
  for (;;) {
    Status s = level_ < LockLevel::kShared ? set_lock_level_locked(LockLevel::kShared) : Status::ok();
    if (s) s = set_lock_level_locked(LockLevel::kReserved);
    if (s) return s;
    (void)set_lock_level_locked(LockLevel::kNone);
    if (!s.is(Code::kBusy) || std::chrono::steady_clock::now() > deadline) {
      return s.with_context(fmt::format("{}: resync: the write lock", record_.name));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<int64_t> RemotePageIo::current_extent() {
  // Writes go before the size that records them (a writer that unlocks
  // without sync): a current copy's share may reach further.
  int64_t extent = size_.load();
  Barrier barrier(*bus_);
  std::deque<Result<ReplyPtr>> replies;
  for (uint32_t s = 0; s < record_.servers.size(); ++s) {
    if (state_of(s) != CopyState::kCurrent) continue;
    auto& reply = replies.emplace_back(Status::disconnected("resync", "no answer"));
    bus_->call(record_.servers[s],
               [&](wire::Request::Builder r) {
                 auto scrub = r.initScrub();  // of no page: how far the share reaches
                 set_page_share(scrub.initShare(), s);
                 scrub.setFirst(0);
                 scrub.setCount(0);
               },
               barrier.arm(record_.servers[s], [&reply](Result<ReplyPtr> r) { reply = std::move(r); }));
  }
  if (Status s = barrier.wait(); !s) return s.with_context(fmt::format("{}: resync: how far the copies reach", record_.name));
  for (auto& reply : replies) {
    if ((*reply)->root().isScrub()) extent = std::max(extent, (*reply)->root().getScrub().getSharePages());
  }
  return extent;
}

Status RemotePageIo::resync_failed(uint32_t server, Status why) {
  // Whatever happened, the lock goes, and a copy half done is stale again.
  if (missed(why) || why.is(Code::kCorruption)) (void)set_copy_state_sync(server, CopyState::kStale);
  (void)set_lock_level_locked(LockLevel::kNone);
  return why;
}

Result<RemotePageIo::ResyncReport> RemotePageIo::resync(const std::string& server_name, const ResyncProgress& progress) {
  uint32_t server = index_of(server_name);
  if (server == record_.servers.size()) {
    return Status::invalid_argument(record_.name, fmt::format("{} is not one of its servers", server_name));
  }
  if (read_only_) return Status::read_only(record_.name, "resync: file was opened read-only");
  const std::string& name = record_.name;
  auto ends_with = [&](std::string_view tail) {
    return name.size() >= tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with("-journal") || ends_with("-wal") || name.find("-mj") != std::string::npos) {
    // Their writers take no lock of their own (the database's covers
    // them), so none would learn that the copies are being resynced. They
    // do not live long: a new one, made by the database's next writer, is
    // written to every copy.
    return Status::not_supported(name, "is an SQLite journal or WAL: its stale copies go when its database's "
                                       "writer replaces it");
  }
  MutexLock meta(meta_mu_);
  ResyncReport report;
  auto fail = [&](Status why) REQUIRES(meta_mu_) { return resync_failed(server, std::move(why)); };
  if (Status s = hold_write_lock(); !s) return fail(s);
  if (Status s = refresh_copy_states(); !s) return fail(s);
  if (!directory_known(server)) {
    // The pages copied there must be in a directory the catalog knows.
    auto learned = bus_->learn_directory(record_.cluster, server_name);
    if (!learned) return fail(learned.status());
    directories_[server].store(*learned, std::memory_order_release);
  }
  if (state_of(server) == CopyState::kCurrent) {
    (void)set_lock_level_locked(LockLevel::kNone);
    return report;  // nothing to do
  }
  // From here every writer writes the server's copies too.
  if (Status s = set_copy_state_sync(server, CopyState::kResyncing); !s) return fail(s);
  // The copies' states as this resync made them: any change after (the
  // copy left behind again, perhaps resynced again by another since, which
  // leaves it resyncing but this resync's pages behind it stale) ends it.
  const uint64_t resyncing_version = replica_version_.load();
  // The server may have missed the announcement of the newest writer's
  // fence while it was down: told now, before a page is copied, so that a
  // writer fenced off elsewhere gets nothing onto it either (its write
  // would be taken here, and the copy then called current).
  if (Status s = tell_fence(server, fence_->load()); !s) {
    return fail(s.with_context(fmt::format("{}: resync: fence", record_.name)));
  }
  if (Status s = set_lock_level_locked(LockLevel::kNone); !s) return fail(s);

  int64_t extent = 0;
  for (int64_t first = 0;; first += kResyncBatch) {
    if (Status s = hold_write_lock(); !s) return fail(s);
    if (state_of(server) != CopyState::kResyncing || replica_version_.load() != resyncing_version) {
      // A writer could not reach it meanwhile and left it behind again, or
      // the copies' states changed otherwise: run it again.
      return fail(Status::stale(record_.name, fmt::format("resync of {}: it was left behind again, or the copies' "
                                                          "states changed meanwhile; resync it again",
                                                          server_name)));
    }
    auto reach = current_extent();
    if (!reach) return fail(reach.status());
    extent = *reach;
    if (first >= extent) break;  // (the lock stays for the end)
    if (Status s = resync_batch(server, first, std::min(extent, first + kResyncBatch), report); !s) return fail(s);
    if (Status s = set_lock_level_locked(LockLevel::kNone); !s) return fail(s);
    if (progress) progress(std::min(extent, first + kResyncBatch), extent);
  }
  // Under the lock still: the share cut to the file's size, made durable,
  // and the copies current.
  Barrier barrier(*bus_);
  const std::string& address = record_.servers[server];
  bus_->call(address,
             [&](wire::Request::Builder r) {
               auto t = r.initTruncate();
               set_page_share(t.initShare(), server);
               t.setPages(extent);
             },
             barrier.arm(address));
  if (Status s = barrier.wait(); !s) return fail(s.with_context(fmt::format("{}: resync: truncate", record_.name)));
  Barrier synced(*bus_);
  bus_->call(address, [&](wire::Request::Builder r) { set_page_share(r.initSync(), server); }, synced.arm(address));
  if (Status s = synced.wait(); !s) return fail(s.with_context(fmt::format("{}: resync: sync", record_.name)));
  if (Status s = set_copy_state_sync(server, CopyState::kCurrent); !s) return fail(s);
  (void)set_lock_level_locked(LockLevel::kNone);
  return report;
}

Status RemotePageIo::resync_batch(uint32_t server, int64_t first, int64_t end, ResyncReport& report) {
  // Each page on the server: its copy there and a current one, read at once.
  struct Pair {
    int64_t page = 0;
    uint32_t source = 0;
    Result<ReplyPtr> good = Status::disconnected("resync", "no answer");
    Result<ReplyPtr> there = Status::disconnected("resync", "no answer");
  };
  std::deque<Pair> pairs;
  Barrier reads(*bus_);
  for (int64_t page = first; page < end; ++page) {
    ReplicaSet set = placement_.replicas_for(page);
    if (std::find(set.begin(), set.end(), server) == set.end()) continue;
    uint32_t source = server;
    for (uint32_t s : set) {
      if (s != server && state_of(s) == CopyState::kCurrent) {
        source = s;
        break;
      }
    }
    if (source == server) {
      (void)reads.wait();  // (what was sent answers into `pairs`)
      return Status::io_error(record_.name, fmt::format("page {} has no current copy", page));
    }
    // Built in place, not moved from a temporary: GCC 12 then warns, in a
    // unity build, that the moved-from Result may be used uninitialized.
    Pair& pair = pairs.emplace_back();
    pair.page = page;
    pair.source = source;
    bus_->call(record_.servers[source], [&](wire::Request::Builder r) { build_read(r, page, source); },
               reads.arm(record_.servers[source], [&pair](Result<ReplyPtr> r) { pair.good = std::move(r); }));
    bus_->call(record_.servers[server], [&](wire::Request::Builder r) { build_read(r, page, server); },
               reads.arm(record_.servers[server], [&pair](Result<ReplyPtr> r) { pair.there = std::move(r); }));
  }
  (void)reads.wait();
  Barrier writes(*bus_);
  std::vector<std::byte> good(record_.page_size);
  std::vector<std::byte> there(record_.page_size);
  Status first_failure;
  for (Pair& pair : pairs) {
    ++report.compared;
    // The bytes as each server holds them (not cut at this client's size).
    Status from = take_bytes(pair.page, std::move(pair.good), good, pair.source);
    if (!from) {
      first_failure = from.with_context(fmt::format("{}: resync: the current copy", record_.name));
      break;
    }
    Status here = take_bytes(pair.page, std::move(pair.there), there, server);
    // A damaged copy is rewritten; an unreachable server ends the resync.
    if (!here && !here.is(Code::kCorruption)) {
      first_failure = here;
      break;
    }
    if (here && good == there) continue;
    ++report.copied;
    bus_->call(record_.servers[server], [&](wire::Request::Builder r) { build_write(r, pair.page, good, server); },
               writes.arm(record_.servers[server]));
  }
  Status written = writes.wait();  // (every write sent answers before `writes` goes)
  return first_failure.is_ok() ? written : first_failure;
}

}  // namespace pagefile::net
