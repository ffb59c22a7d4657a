// Waiter reading: answers from tcp: and unix: servers are read by the
// threads that wait for them (pump), and the few that nobody waits for by
// the service thread's sweep (bus/bus_client_impl.h).
#include "bus/bus_client_impl.h"

namespace pagefile::net {

thread_local bool BusClient::Impl::reading_here_ = false;

void BusClient::Impl::pump(const std::string& server, std::chrono::milliseconds timeout) {
  const uint64_t seen = progress_.load();
  std::shared_ptr<Connection> connection;
  {
    std::lock_guard lock(mu_);
    if (auto it = peers_.find(server); it != peers_.end()) connection = it->second.connection;
  }
  if (connection && connection->reading() == Connection::Reading::kByWaiter) {
    reading_here_ = true;
    Connection::ReadOutcome outcome = connection->read_frames(timeout);
    reading_here_ = false;
    if (outcome != Connection::ReadOutcome::kBusy) {
      note_progress();  // what was delivered, or that the reading is free
      return;
    }
  }
  // Another thread reads it (or the io thread, or it is being connected):
  // wait for what that delivers.
  std::unique_lock lock(progress_mu_);
  ++followers_;
  progress_cv_.wait_for(lock, timeout, [&] { return progress_.load() != seen; });
  --followers_;
}

void BusClient::Impl::note_progress() {
  // Sequentially consistent with pump()'s follower, which counts itself
  // before it looks at progress_: either it sees this step, or this sees it
  // and wakes it.
  ++progress_;
  if (followers_.load() == 0) return;
  { std::lock_guard lock(progress_mu_); }
  progress_cv_.notify_all();
}

void BusClient::Impl::sweep(std::unique_lock<std::mutex>& lock) {
  if (pending_.empty()) return;
  std::vector<std::shared_ptr<Connection>> connections;
  for (auto& [name, peer] : peers_) {
    if (peer.connection && peer.connection->reading() == Connection::Reading::kByWaiter) {
      connections.push_back(peer.connection);
    }
  }
  if (connections.empty()) return;
  lock.unlock();
  bool delivered = false;
  reading_here_ = true;
  for (auto& connection : connections) {
    // Without waiting: a waiter that reads it is busy with it already.
    Connection::ReadOutcome outcome = connection->read_frames(std::chrono::milliseconds(0));
    delivered |= outcome == Connection::ReadOutcome::kDelivered || outcome == Connection::ReadOutcome::kEnded;
  }
  reading_here_ = false;
  if (delivered) note_progress();
  lock.lock();
}

}  // namespace pagefile::net
