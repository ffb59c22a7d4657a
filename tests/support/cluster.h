// Servers for the integration tests, on loopback under a scratch directory,
// and Clients of them. Two kinds of server, both real:
//  - PagefiledCluster: pagefiled processes (ServerProcess), as deployed;
//  - PageServerCluster: PageServers in the test's own process, for tests
//    that read a server's counters or disk log.
// A bus of the Client's own embedded servers ("inproc:N") needs neither:
// start_client(dir, "inproc:N") starts them under dir/home.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pagefile/pagefile.h"
#include "server/page_server.h"
#include "tests/support/server_process.h"
#include "tests/support/temp_dir.h"

namespace pagefile::test {

// "tcp://127.0.0.1:<port>" for a port that is free now.
std::string free_tcp_address();

// Client::start with `options`, its local files in `dir`, its bus `bus` and
// its embedded servers' data (for inproc: buses) in dir/home. REQUIREs
// success.
std::unique_ptr<Client> start_client(const std::filesystem::path& dir, const std::string& bus,
                                     ClientOptions options = {});

// Writes pages [0, pages) of `fd`, page p holding page_pattern(page_size, p,
// seed), all requested before the first is confirmed, then syncs.
// REQUIREs success.
void write_patterns(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed);
// Reads pages [0, pages) of `fd` the same way, REQUIREing each read to
// succeed; returns how many are not the pattern write_patterns wrote.
int wrong_patterns(Client& client, Fd fd, int64_t pages, uint32_t page_size, uint64_t seed);

// A PageServer in this process on tcp://127.0.0.1 (a port of its own) with
// its data in `dir` (overriding options.dir). REQUIREs success.
std::unique_ptr<net::PageServer> start_page_server(const std::filesystem::path& dir,
                                                   net::ServerOptions options = {});

// How a pagefiled listens: a TCP port on 127.0.0.1, the same over TLS (the
// cluster's args then give the credentials), or a Unix socket in the
// cluster's directory.
enum class Listen { kTcp, kTls, kUnix };

// `n` pagefiled processes under a fresh directory: server i listens on an
// address of its own and keeps its data in dir()/s<i>; each is started with
// the extra command-line `args`. Stopped (SIGTERM) when the cluster goes.
class PagefiledCluster {
 public:
  explicit PagefiledCluster(size_t n, std::vector<std::string> args = {}, Listen listen = Listen::kTcp);

  const TempDir& dir() const { return dir_; }
  size_t size() const { return servers_.size(); }
  ServerProcess& server(size_t i) { return *servers_.at(i); }
  // The servers' addresses in order, comma-separated: the first is the
  // catalog.
  const std::string& bus() const { return bus_; }

  // Stops every server, CHECKing each stopped cleanly, and starts them again
  // on the same addresses and directories; `empty`: with the directories
  // emptied first (a cluster created anew).
  void restart(bool empty = false);
  // Starts server `i` again on its address and directory, after it was
  // killed (ServerProcess::kill) or stopped.
  void start_again(size_t i);

  // A Client of bus() with its local files and home in dir().
  std::unique_ptr<Client> client(ClientOptions options = {}) const;

 private:
  void start_all();

  TempDir dir_;
  std::vector<std::string> args_;
  std::vector<std::string> listen_;  // what each server was asked to listen on
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::string bus_;
};

// `n` PageServers in this process, each on its own loopback TCP port, under
// a fresh directory: server i keeps its data in dir()/s<i>.
class PageServerCluster {
 public:
  explicit PageServerCluster(size_t n, net::ServerOptions options = {});

  const TempDir& dir() const { return dir_; }
  size_t size() const { return servers_.size(); }
  net::PageServer& server(size_t i) { return *servers_.at(i); }
  // The servers' addresses in order, comma-separated: the first is the
  // catalog.
  const std::string& bus() const { return bus_; }

  // A Client of bus() with its local files and home in dir().
  std::unique_ptr<Client> client(ClientOptions options = {}) const;

 private:
  TempDir dir_;
  std::vector<std::unique_ptr<net::PageServer>> servers_;
  std::string bus_;
};

}  // namespace pagefile::test
