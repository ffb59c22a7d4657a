// Connecting to servers, and losing them (bus/bus_client_impl.h).
#include <fmt/format.h>

#include "bus/bus_client_impl.h"

namespace pagefile::net {

void BusClient::Impl::connect_peer(const std::string& server) {
  Result<std::shared_ptr<Connection>> connection = Status::invalid_argument(server, "bad address");
  auto address = parse_address(server);
  if (address) {
    // Answers are read by the threads that wait for them; a send may wait
    // for room as long as a request may wait for its answer.
    connection = connect(runtime_->io(), *address, options_.connect_timeout_ms, &hub_,
                         Connection::Reading::kByWaiter, request_timeout_ms_.load(), tls_);
  } else {
    connection = address.status();
  }
  if (connection) {
    auto conn = *connection;
    std::weak_ptr<Impl> weak = shared_from_this();
    conn->start(
        [weak, server](Frame frame) {
          if (auto self = weak.lock()) self->on_frame(server, std::move(frame));
        },
        [weak, server, weak_conn = std::weak_ptr<Connection>(conn)](Status why) {
          if (auto self = weak.lock()) self->on_close(server, weak_conn.lock(), why);
        });
    send_queued(server, conn);
  } else {
    // Could not connect: everything queued for it fails now.
    std::vector<Callback> failed;
    {
      MutexLock lock(mu_);
      Peer& peer = peers_[server];
      peer.connecting = false;
      for (auto& [id, frame] : peer.queued) {
        auto it = pending_.find(id);
        if (it != pending_.end()) {
          failed.push_back(std::move(it->second.done));
          pending_.erase(it);
        }
      }
      peer.queued.clear();
    }
    Status why = connection.status().is(Code::kDisconnected)
                     ? connection.status()
                     : Status::disconnected(server, connection.status().to_string());
    for (auto& done : failed) done(why);
  }
  note_progress();  // its waiters may read it now, or have their answer
  {
    MutexLock lock(mu_);
    --connects_in_flight_;
  }
  cv_.notify_all();
}

void BusClient::Impl::send_queued(const std::string& server, const std::shared_ptr<Connection>& connection) {
  for (;;) {
    std::vector<std::pair<uint64_t, Frame>> queued;
    {
      MutexLock lock(mu_);
      Peer& peer = peers_[server];
      if (peer.queued.empty() || stopping_) {
        // From now on callers send on it themselves, after everything
        // that queued before: the server sees the requests in order.
        peer.connecting = false;
        if (!stopping_) peer.connection = connection;
        return;
      }
      queued.swap(peer.queued);
    }
    for (auto& [id, frame] : queued) send_frame(connection, std::move(frame));
  }
}

void BusClient::Impl::see_if_closed(const std::string& server) {
  std::shared_ptr<Connection> connection;
  {
    MutexLock lock(mu_);
    auto it = peers_.find(server);
    if (it != peers_.end()) connection = it->second.connection;
  }
  // (Connections read on an io thread see their end as it comes.)
  if (connection && connection->reading() == Connection::Reading::kByWaiter) {
    (void)connection->read_frames(std::chrono::milliseconds(0));
  }
}

void BusClient::Impl::on_close(const std::string& server, const std::shared_ptr<Connection>& connection,
                               const Status& why) {
  {
    MutexLock lock(mu_);
    auto it = peers_.find(server);
    if (it != peers_.end() && it->second.connection == connection) it->second.connection.reset();
  }
  fail_server(server, Status::disconnected(server, fmt::format("connection lost ({})", why.to_string())));
}

void BusClient::Impl::fail_server(const std::string& server, const Status& why) {
  std::vector<Callback> failed;
  {
    MutexLock lock(mu_);
    for (auto& [name, peer] : peers_) {
      if (server.empty() || name == server) peer.silent_until = {};  // gone, not silent
    }
    // Requests given up on can get no late answer from a lost connection.
    for (auto it = late_.begin(); it != late_.end();) {
      auto next = std::next(it);
      if (server.empty() || it->second == server) forget_late(it->first);
      it = next;
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      bool queued = false;
      if (auto p = peers_.find(it->second.server); p != peers_.end()) {
        for (auto& [id, frame] : p->second.queued) queued |= id == it->first;
      }
      if ((server.empty() || it->second.server == server) && !queued) {
        failed.push_back(std::move(it->second.done));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& done : failed) done(why);
  note_progress();
}

}  // namespace pagefile::net
