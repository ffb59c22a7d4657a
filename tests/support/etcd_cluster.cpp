#include "tests/support/etcd_cluster.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "server/etcd_client.h"
#include "tests/support/server_process.h"

namespace pagefile::test {

namespace {

constexpr const char* kEtcd = "/usr/bin/etcd";

}  // namespace

bool etcd_installed() { return ::access(kEtcd, X_OK) == 0; }

EtcdCluster::EtcdCluster(size_t n) {
  REQUIRE_MESSAGE(etcd_installed(), "etcd is not installed (bash scripts/setup.sh)");
  std::vector<std::string> peers;
  for (size_t i = 0; i < n; ++i) {
    Member m;
    m.name = fmt::format("m{}", i);
    m.client_port = free_tcp_port();
    m.peer_port = free_tcp_port();
    peers.push_back(fmt::format("{}=http://127.0.0.1:{}", m.name, m.peer_port));
    members_.push_back(m);
  }
  initial_cluster_ = fmt::format("{}", fmt::join(peers, ","));
  for (size_t i = 0; i < n; ++i) start(i);
  REQUIRE_MESSAGE(wait_writable(std::chrono::seconds(20)), "etcd did not start; its logs are in " << dir_.path());
}

EtcdCluster::~EtcdCluster() {
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].pid > 0) kill(i);
  }
}

void EtcdCluster::start(size_t i) {
  Member& m = members_.at(i);
  std::string client = fmt::format("http://127.0.0.1:{}", m.client_port);
  std::string peer = fmt::format("http://127.0.0.1:{}", m.peer_port);
  std::vector<std::string> args = {kEtcd,
                                   "--name", m.name,
                                   "--data-dir", (dir_.path() / m.name).string(),
                                   "--listen-client-urls", client,
                                   "--advertise-client-urls", client,
                                   "--listen-peer-urls", peer,
                                   "--initial-advertise-peer-urls", peer,
                                   "--initial-cluster", initial_cluster_,
                                   "--initial-cluster-token", dir_.path().filename().string(),
                                   "--initial-cluster-state", "new",
                                   "--heartbeat-interval", "50",
                                   "--election-timeout", "500",
                                   "--log-level", "warn"};
  std::string log = (dir_.path() / (m.name + ".log")).string();
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDOUT_FILENO);
      ::dup2(fd, STDERR_FILENO);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(kEtcd, argv.data());
    _exit(127);
  }
  m.pid = pid;
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& m : members_) out.push_back(fmt::format("127.0.0.1:{}", m.client_port));
  return out;
}

std::string EtcdCluster::bus_entries() const {
  std::vector<std::string> out;
  for (const auto& e : endpoints()) out.push_back("catalog=etcd://" + e);
  return fmt::format("{}", fmt::join(out, ","));
}

std::string EtcdCluster::catalog_flag() const { return fmt::format("etcd://{}", fmt::join(endpoints(), ",")); }

void EtcdCluster::kill(size_t i) {
  Member& m = members_.at(i);
  if (m.pid <= 0) return;
  ::kill(m.pid, SIGKILL);
  ::waitpid(m.pid, nullptr, 0);
  m.pid = -1;
}

void EtcdCluster::pause(size_t i) { ::kill(members_.at(i).pid, SIGSTOP); }
void EtcdCluster::resume(size_t i) { ::kill(members_.at(i).pid, SIGCONT); }

void EtcdCluster::start_again(size_t i) {
  REQUIRE(members_.at(i).pid <= 0);
  start(i);
}

bool EtcdCluster::wait_writable(std::chrono::milliseconds limit) {
  std::vector<std::string> live;
  for (size_t i = 0; i < members_.size(); ++i) {
    if (members_[i].pid > 0) live.push_back(endpoints()[i]);
  }
  auto client = net::EtcdClient::make(live, {limit, std::chrono::milliseconds(500)});
  REQUIRE(client);
  auto put = (*client)->call("/v3/kv/put", {{"key", net::EtcdClient::base64("test/ready")},
                                            {"value", net::EtcdClient::base64("1")}});
  return static_cast<bool>(put);
}

size_t EtcdCluster::leader() {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].pid <= 0) continue;
      auto client = net::EtcdClient::make({endpoints()[i]}, {std::chrono::milliseconds(500), std::chrono::milliseconds(500)});
      REQUIRE(client);
      auto status = (*client)->call("/v3/maintenance/status", nlohmann::json::object());
      if (!status) continue;
      auto self = net::EtcdClient::number(status->value("header", nlohmann::json::object()), "member_id");
      auto leader = net::EtcdClient::number(*status, "leader");
      if (leader != 0 && leader == self) return i;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  FAIL("no etcd member leads");
  return 0;
}

}  // namespace pagefile::test
