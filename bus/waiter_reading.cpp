// Waiter reading: answers from tcp: and unix: servers are read by the
// threads that wait for them (read_as_waiter), and the few that nobody waits for by
// the service thread's sweep (bus/bus_client_impl.h).
#include "bus/bus_client_impl.h"

namespace pagefile::net {

thread_local bool BusClient::Impl::reading_here_ = false;

void BusClient::Impl::read_as_waiter(const std::string& server, std::chrono::milliseconds timeout) {
  const uint64_t seen = progress_.load();
  std::shared_ptr<Connection> connection;
  {
    MutexLock lock(mu_);
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
  MutexLock lock(progress_mu_);
  ++followers_;
  const auto deadline = Clock::now() + timeout;
  while (progress_.load() == seen && progress_cv_.wait_until(progress_mu_, deadline)) {
  }
  --followers_;
}

void BusClient::Impl::note_progress() {
  // Sequentially consistent with read_as_waiter()'s follower, which counts itself
  // before it looks at progress_: either it sees this step, or this sees it
  // and wakes it.
  ++progress_;
  if (followers_.load() == 0) return;
  { MutexLock lock(progress_mu_); }
  progress_cv_.notify_all();
}

void BusClient::Impl::sweep() {
  if (pending_.empty()) return;
  std::vector<std::shared_ptr<Connection>> connections;
  for (auto& [name, peer] : peers_) {
    if (peer.connection && peer.connection->reading() == Connection::Reading::kByWaiter) {
      connections.push_back(peer.connection);
    }
  }
  if (connections.empty()) return;
  mu_.unlock();
  bool delivered = false;
  reading_here_ = true;
  for (auto& connection : connections) {
    // Without waiting: a waiter that reads it is busy with it already.
    Connection::ReadOutcome outcome = connection->read_frames(std::chrono::milliseconds(0));
    delivered |= outcome == Connection::ReadOutcome::kDelivered || outcome == Connection::ReadOutcome::kEnded;
  }
  reading_here_ = false;
  if (delivered) note_progress();
  mu_.lock();
}

}  // namespace pagefile::net
