// A real etcd cluster for tests (etcd from Debian's etcd-server): `n`
// members on loopback ports of their own, data under a fresh directory,
// elections tuned short (50 ms heartbeats, 500 ms election timeout) so a
// test that kills the leader waits half a second, not ten. Members are
// stopped by their process ids when the cluster goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace pagefile::test {

// Whether an etcd binary is installed (scripts/setup.sh installs it).
bool etcd_installed();

class EtcdCluster {
 public:
  // Starts the members and waits (at most 20 s) until the cluster has a
  // leader and takes a write. REQUIREs success.
  explicit EtcdCluster(size_t n = 3);
  ~EtcdCluster();
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  size_t size() const { return members_.size(); }
  // "127.0.0.1:PORT" of each member's client URL.
  std::vector<std::string> endpoints() const;
  // As the bus specification names them: catalog=etcd://H:P once per member.
  std::string bus_entries() const;
  // As pagefiled's --catalog takes them: etcd://H:P,H:P,...
  std::string catalog_flag() const;

  pid_t pid(size_t i) const { return members_.at(i).pid; }
  bool running(size_t i) const { return members_.at(i).pid > 0; }
  // The member that leads now (asked of the running members); REQUIREs one
  // within 10 s.
  size_t leader();
  // SIGKILL and wait.
  void kill(size_t i);
  // SIGSTOP / SIGCONT: a member that neither answers nor closes.
  void pause(size_t i);
  void resume(size_t i);
  // Starts member `i` again on its ports and data.
  void start_again(size_t i);
  // True once the running members take a write (within `limit`).
  bool wait_writable(std::chrono::milliseconds limit);

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    pid_t pid = -1;
  };
  void start(size_t i);

  TempDir dir_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

}  // namespace pagefile::test
