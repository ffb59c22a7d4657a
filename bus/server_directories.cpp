// What a client does for a server whose directory the catalog does not
// know yet (doc/architecture.md, "Server directories"): asks the server to
// join the file's cluster and say which directory it is, and has the
// catalog record that, so that from then on every client's requests name
// it and a directory that is not that one (emptied, replaced, not mounted)
// refuses them instead of answering zeros.
#include "bus/barrier.h"
#include "bus/bus_client.h"

namespace pagefile::net {

namespace {

// A recordDirectory of `address` in `cluster`: a catalog of another
// cluster (made again since) refuses it.
void set_record(wire::Request::Builder r, uint64_t cluster, const std::string& address, uint64_t directory) {
  r.setCluster(cluster);
  auto recorded = r.initRecordDirectory();
  recorded.setAddress(address);
  recorded.setDirectory(directory);
}

// The directory an answer to a join or a record names; 0 for a failure.
uint64_t directory_in(const Result<ReplyPtr>& reply) {
  return reply && (*reply)->root().isDirectory() ? (*reply)->root().getDirectory() : 0;
}

}  // namespace

void BusClient::learn_directories(FileRecord& record) {
  if (record.directories.size() != record.servers.size()) record.directories.assign(record.servers.size(), 0);
  learn_directories(record.cluster, record.servers, record.directories);
}

void BusClient::learn_directories(uint64_t cluster, std::span<const std::string> servers,
                                  std::span<uint64_t> directories) {
  if (cluster == 0) return;  // (a catalog from before clusters: nothing to join)
  std::vector<size_t> unknown;
  for (size_t i = 0; i < servers.size(); ++i) {
    if (directories[i] == 0) unknown.push_back(i);
  }
  if (unknown.empty()) return;
  // (What fails here is left unknown: a server that cannot be reached now
  // is asked again before this client writes to it, and at the next open.)
  std::vector<uint64_t> found(servers.size(), 0);
  Barrier joins(*this);
  for (size_t i : unknown) {
    call(servers[i], [&](wire::Request::Builder r) { r.setJoin(cluster); },
         joins.arm(servers[i], [&found, i](Result<ReplyPtr> reply) { found[i] = directory_in(reply); }));
  }
  (void)joins.wait();
  Barrier records(*this);
  for (size_t i : unknown) {
    if (found[i] == 0) continue;
    call(catalog(), [&](wire::Request::Builder r) { set_record(r, cluster, servers[i], found[i]); },
         records.arm(catalog(), [directories, i](Result<ReplyPtr> reply) { directories[i] = directory_in(reply); }));
  }
  (void)records.wait();
}

void BusClient::learn_directory_async(uint64_t cluster, const std::string& server,
                                      std::function<void(uint64_t)> done) {
  call(server, [&](wire::Request::Builder r) { r.setJoin(cluster); },
       [this, cluster, server, done = std::move(done)](Result<ReplyPtr> joined) mutable {
         uint64_t found = directory_in(joined);
         if (found == 0) return done(0);
         call(catalog(), [&](wire::Request::Builder r) { set_record(r, cluster, server, found); },
              [done = std::move(done)](Result<ReplyPtr> recorded) { done(directory_in(recorded)); });
       });
}

}  // namespace pagefile::net
