#include "tests/support/cluster.h"

#include <fmt/format.h>

#include "wire/address.h"

namespace pagefile::test {

namespace {

void add_to_bus(std::string& bus, const std::string& address) { bus += (bus.empty() ? "" : ",") + address; }

std::string server_dir_name(size_t i) { return fmt::format("s{}", i); }

}  // namespace

std::string free_tcp_address() { return fmt::format("tcp://127.0.0.1:{}", free_tcp_port()); }

std::unique_ptr<Client> start_client(const std::filesystem::path& dir, const std::string& bus, ClientOptions options) {
  options.local_dir = dir;
  options.bus = bus;
  options.home = dir / "home";
  auto client = Client::start(options);
  REQUIRE_OK(client);
  return std::move(*client);
}

void write_patterns(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed) {
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < pages; ++p) {
    auto t = client.write_request(fd, p, page_pattern(page_size, p, seed));
    REQUIRE_OK(t);
    tickets.push_back(*t);
  }
  for (Ticket t : tickets) REQUIRE_OK(client.write_confirm(t));
  REQUIRE_OK(client.sync(fd));
}

int wrong_patterns(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed) {
  std::vector<std::vector<std::byte>> buffers(static_cast<size_t>(pages), std::vector<std::byte>(page_size));
  std::vector<Ticket> tickets;
  for (int64_t p = 0; p < pages; ++p) {
    auto t = client.read_request(fd, p, buffers[static_cast<size_t>(p)]);
    REQUIRE_OK(t);
    tickets.push_back(*t);
  }
  int wrong = 0;
  for (int64_t p = 0; p < pages; ++p) {
    auto r = client.read_confirm(tickets[static_cast<size_t>(p)]);
    INFO("page " << p << ": " << r.status().to_string());
    REQUIRE(r.is_ok());
    if (*r != PageRead::kData || buffers[static_cast<size_t>(p)] != page_pattern(page_size, p, seed)) ++wrong;
  }
  return wrong;
}

std::unique_ptr<net::PageServer> start_page_server(const std::filesystem::path& dir, net::ServerOptions options) {
  options.dir = dir;
  auto address = net::parse_address("tcp://127.0.0.1:0");
  REQUIRE_OK(address);
  auto server = net::PageServer::start(options, *address);
  REQUIRE_OK(server);
  return std::move(*server);
}

PagefiledCluster::PagefiledCluster(size_t n, std::vector<std::string> args, Listen listen) : args_(std::move(args)) {
  for (size_t i = 0; i < n; ++i) {
    switch (listen) {
      case Listen::kTcp: listen_.push_back(free_tcp_address()); break;
      case Listen::kTls: listen_.push_back("tls://" + free_tcp_address().substr(6)); break;
      case Listen::kUnix: listen_.push_back("unix:" + (dir_ / (server_dir_name(i) + ".sock")).string()); break;
    }
  }
  start_all();
}

void PagefiledCluster::start_all() {
  servers_.clear();
  bus_.clear();
  for (size_t i = 0; i < listen_.size(); ++i) {
    servers_.push_back(std::make_unique<ServerProcess>(listen_[i], dir_ / server_dir_name(i), args_));
    add_to_bus(bus_, servers_.back()->address());
  }
}

void PagefiledCluster::start_again(size_t i) {
  servers_.at(i).reset();
  servers_[i] = std::make_unique<ServerProcess>(listen_[i], dir_ / server_dir_name(i), args_);
}

void PagefiledCluster::restart(bool empty) {
  for (auto& server : servers_) CHECK(server->stop() == 0);  // SIGTERM: a clean stop
  if (empty) {
    for (size_t i = 0; i < servers_.size(); ++i) std::filesystem::remove_all(dir_ / server_dir_name(i));
  }
  start_all();
}

std::unique_ptr<Client> PagefiledCluster::client(ClientOptions options) const {
  return start_client(dir_.path(), bus_, std::move(options));
}

PageServerCluster::PageServerCluster(size_t n, net::ServerOptions options) {
  for (size_t i = 0; i < n; ++i) {
    servers_.push_back(start_page_server(dir_ / server_dir_name(i), options));
    add_to_bus(bus_, servers_.back()->address().text());
  }
}

std::unique_ptr<Client> PageServerCluster::client(ClientOptions options) const {
  return start_client(dir_.path(), bus_, std::move(options));
}

}  // namespace pagefile::test
