// What a client does for a server whose directory the catalog does not
// know yet (doc/architecture.md, "Server directories"): asks the server to
// join the file's cluster and say which directory it is, and has the
// catalog record that, so that from then on every client's requests name
// it and a directory that is not that one (emptied, replaced, not mounted)
// refuses them instead of answering zeros.
#include <fmt/format.h>

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

Result<uint64_t> BusClient::learn_directory(uint64_t cluster, const std::string& server) {
  auto joined = call_sync(server, [&](wire::Request::Builder r) { r.setJoin(cluster); });
  if (!joined) return joined.status().with_context(fmt::format("join server {}", server));
  uint64_t found = directory_in(joined);
  if (found == 0) return Status::corruption(server, "answered a join without its directory");
  auto recorded = call_sync(catalog(), [&](wire::Request::Builder r) { set_record(r, cluster, server, found); });
  if (!recorded) return recorded.status().with_context(fmt::format("record the directory of {}", server));
  if (directory_in(recorded) == 0) return Status::corruption("catalog", "answered recordDirectory without one");
  return directory_in(recorded);
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
