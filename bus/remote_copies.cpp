// RemotePageIo's copies (bus/remote_page_io.h): which copies of the file
// are current, as the catalog records them, and leaving behind (marking
// stale) a copy that missed a write so that the call succeeds on the others.
#include "bus/remote_page_io.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include <fmt/format.h>

#include "wire/wire_convert.h"

namespace pagefile::net {

namespace {

// A request that puts `server`'s copies of `record` in `state`, made under
// the write lock of token `lock_token` (0: none).
void set_copy_state(wire::Request::Builder r, const FileRecord& record, const std::string& server, CopyState state,
                    uint64_t lock_token = 0) {
  r.setCluster(record.cluster);
  r.setLockToken(lock_token);
  auto set = r.initSetCopyState();
  set.setFileId(record.id);
  set.setServer(server);
  set.setState(static_cast<uint8_t>(state));
}

}  // namespace

Status RemotePageIo::take_copy_states(const FileRecord& record) {
  MutexLock lock(copies_mu_);
  if (record.servers != record_.servers) {
    // A server was replaced (pagefile replace-server): this descriptor
    // neither reads nor writes the one that left, and knows nothing of the
    // one that came.
    for (uint32_t i = 0; i < record_.servers.size(); ++i) {
      if (std::find(record.servers.begin(), record.servers.end(), record_.servers[i]) == record.servers.end()) {
        copy_states_[i].store(static_cast<uint8_t>(CopyState::kStale), std::memory_order_release);
      }
    }
    return Status::stale(record_.name, "its servers changed (pagefile replace-server) since it was opened: open it again");
  }
  for (uint32_t i = 0; i < record_.servers.size(); ++i) {
    if (uint64_t known = directory_of(record, i); known != 0) directories_[i].store(known, std::memory_order_release);
  }
  if (record.replica_version < replica_version_.load()) return Status::ok();  // older news
  for (uint32_t i = 0; i < record_.servers.size(); ++i) {
    copy_states_[i].store(static_cast<uint8_t>(copy_state(record, record_.servers[i])), std::memory_order_release);
  }
  replica_version_ = record.replica_version;
  return Status::ok();
}

Status RemotePageIo::take_answered_states(const Reply& reply) {
  auto record = from_wire(reply.root().getFile());
  if (!record) return record.status();
  if (record->id != record_.id) return gone();
  return take_copy_states(*record);
}

Status RemotePageIo::gone() const {
  return Status::not_found(record_.name, "was removed (and perhaps created again) since it was opened");
}

Result<ReplyPtr> RemotePageIo::stat_again(std::string_view what) {
  auto reply = bus_->call_sync(bus_->catalog(), [&](wire::Request::Builder r) { r.setStat(record_.name); });
  if (!reply) return reply.status().with_context(fmt::format("{}: {}", record_.name, what));
  if ((*reply)->root().getFile().getId() != record_.id) return gone();
  return reply;
}

Status RemotePageIo::refresh_copy_states() {
  auto reply = stat_again("which copies are current");
  if (!reply) return reply.status();
  return take_answered_states(**reply);
}

Status RemotePageIo::set_copy_state_sync(uint32_t server, CopyState state) {
  // (Resync's steps, under its write lock: refused once the lock has passed on.)
  auto reply = bus_->call_sync(bus_->catalog(), [&](wire::Request::Builder r) {
    set_copy_state(r, record_, record_.servers[server], state, fence_->load());
  });
  if (!reply) return reply.status().with_context(fmt::format("{}: copy state of {}", record_.name, record_.servers[server]));
  return take_answered_states(**reply);
}

uint32_t RemotePageIo::index_of(const std::string& server) const {
  auto it = std::find(record_.servers.begin(), record_.servers.end(), server);
  return static_cast<uint32_t>(it - record_.servers.begin());
}

bool RemotePageIo::missed(const Status& s) {
  return s.is(Code::kDisconnected) || s.is(Code::kIOError) || s.is(Code::kNoSpace);
}

void RemotePageIo::leave_behind_async(std::vector<uint32_t> servers, Status why, std::function<void(Status)> done) {
  if (servers.empty()) return done(Status::ok());
  uint32_t server = servers.back();
  servers.pop_back();
  bus_->call(
      bus_->catalog(),
      [&](wire::Request::Builder r) { set_copy_state(r, record_, record_.servers[server], CopyState::kStale); },
      [this, servers = std::move(servers), why = std::move(why), done = std::move(done),
       server](Result<ReplyPtr> reply) mutable {
        if (!reply) {
          return done(why.with_context(fmt::format("{}: {} missed a write and could not be left behind ({})",
                                                   record_.name, record_.servers[server], reply.status().to_string())));
        }
        if (Status s = take_answered_states(**reply); s.is(Code::kStale)) {
          return done(s);
        } else if (!s) {
          copy_states_[server].store(static_cast<uint8_t>(CopyState::kStale), std::memory_order_release);
        }
        leave_behind_async(std::move(servers), std::move(why), std::move(done));
      });
}

Status RemotePageIo::leave_behind(std::vector<uint32_t> servers, const Status& why) {
  struct Outcome {
    std::atomic<bool> done{false};
    Status status;
  };
  auto outcome = std::make_shared<Outcome>();
  leave_behind_async(std::move(servers), why, [outcome](Status s) {
    outcome->status = std::move(s);
    outcome->done.store(true, std::memory_order_release);
  });
  while (!outcome->done.load(std::memory_order_acquire)) bus_->read_as_waiter(bus_->catalog());
  return outcome->status;
}

Status RemotePageIo::settle(const std::vector<std::pair<std::string, Status>>& failures) {
  if (failures.empty()) return Status::ok();
  std::vector<uint32_t> behind;
  for (const auto& [server, why] : failures) {
    if (record_.replicas == 1 || !missed(why)) return why;
    behind.push_back(index_of(server));
  }
  return leave_behind(std::move(behind), failures.front().second);
}

}  // namespace pagefile::net
