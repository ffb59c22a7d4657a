// What a client does for a server whose directory the catalog does not
// know yet (doc/architecture.md, "Server directories"): asks the server to
// join the file's cluster and say which directory it is, and has the
// catalog record that, so that from then on every client's requests name
// it and a directory that is not that one (emptied, replaced, not mounted)
// refuses them instead of answering zeros.
#include "bus/barrier.h"
#include "bus/bus_client.h"

namespace pagefile::net {

void BusClient::learn_directories(FileRecord& record) {
  if (record.cluster == 0) return;  // (a catalog from before clusters: nothing to join)
  if (record.directories.size() != record.servers.size()) record.directories.assign(record.servers.size(), 0);
  std::vector<size_t> unknown;
  for (size_t i = 0; i < record.servers.size(); ++i) {
    if (record.directories[i] == 0) unknown.push_back(i);
  }
  if (unknown.empty()) return;
  // (What fails here is left unknown: a server that cannot be reached now
  // is asked again at the next open, and its requests meanwhile go
  // unchecked, as before directories were known.)
  std::vector<uint64_t> found(record.servers.size(), 0);
  Barrier joins(*this);
  for (size_t i : unknown) {
    call(record.servers[i], [&](wire::Request::Builder r) { r.setJoin(record.cluster); },
         joins.arm(record.servers[i], [&found, i](Result<ReplyPtr> reply) {
           if (reply && (*reply)->root().isDirectory()) found[i] = (*reply)->root().getDirectory();
         }));
  }
  (void)joins.wait();
  Barrier records(*this);
  for (size_t i : unknown) {
    if (found[i] == 0) continue;
    call(
        catalog(),
        [&](wire::Request::Builder r) {
          auto recorded = r.initRecordDirectory();
          recorded.setAddress(record.servers[i]);
          recorded.setDirectory(found[i]);
        },
        records.arm(catalog(), [&record, i](Result<ReplyPtr> reply) {
          if (reply && (*reply)->root().isDirectory()) record.directories[i] = (*reply)->root().getDirectory();
        }));
  }
  (void)records.wait();
}

}  // namespace pagefile::net
