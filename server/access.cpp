#include "server/access.h"

#include <fmt/format.h>

#include "server/request_metrics.h"
#include "pagefile/pagefile.h"

namespace pagefile::net {

namespace {

// A rollback journal, WAL or super-journal of SQLite's, by its name.
bool is_sqlite_companion(std::string_view name) {
  for (std::string_view suffix : {"-journal", "-wal"}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
  }
  return name.find("-mj") != std::string_view::npos;
}

}  // namespace

PeerRole role_needed(wire::Request::Reader request) {
  switch (request.which()) {
    case wire::Request::PING:
    case wire::Request::READ:
    case wire::Request::STATS:
    case wire::Request::METRICS:
    case wire::Request::STAT:
    case wire::Request::LIST:
    case wire::Request::RENEW_LEASE:
    case wire::Request::RELEASE_OWNER:
    case wire::Request::DISK_READ_LOG:
      return PeerRole::kReader;
    case wire::Request::OPEN:
      return request.getOpen().getCreate() ? PeerRole::kWriter : PeerRole::kReader;
    case wire::Request::LOCK:
      return request.getLock().getLevel() <= static_cast<uint8_t>(LockLevel::kShared) ? PeerRole::kReader
                                                                                       : PeerRole::kWriter;
    case wire::Request::WRITE:
    case wire::Request::SYNC:
    case wire::Request::TRUNCATE:
    case wire::Request::SET_SIZE:
    case wire::Request::FENCE:
    case wire::Request::SET_COPY_STATE:
    // A server joining a cluster, and the catalog recording its directory:
    // what a writer's first open of a file does.
    case wire::Request::JOIN:
    case wire::Request::RECORD_DIRECTORY:
      return PeerRole::kWriter;
    case wire::Request::UNLINK:
      // SQLite deleting a journal or WAL under its database's write lock
      // (the token the catalog checks is live), which is how a transaction
      // commits. Any other file, or without a token: an admin's.
      return request.getLockToken() != 0 && is_sqlite_companion(std::string_view(request.getUnlink().cStr()))
                 ? PeerRole::kWriter
                 : PeerRole::kAdmin;
    case wire::Request::DROP_SHARE:
      // A share's pages once the catalog let go of the file: a page server
      // cannot tell, and a writer may overwrite or truncate them anyway.
      return PeerRole::kWriter;
    case wire::Request::SCRUB:
    case wire::Request::REPLACE_SERVER:
    // Every lock's owner id: with one, a peer could release or renew
    // another's locks (owner ids are otherwise unguessable).
    case wire::Request::LOCKS:
      return PeerRole::kAdmin;
  }
  return PeerRole::kAdmin;  // a request this build does not know: only an admin's
}

Status check_access(PeerRole role, wire::Request::Reader request) {
  const PeerRole needed = role_needed(request);
  if (role >= needed) return Status::ok();
  return Status::permission_denied(
      fmt::format("{} request", RequestMetrics::kind_name(static_cast<unsigned>(request.which()))),
      fmt::format("refused to a peer in role {} (needs {})", role_name(role), role_name(needed)));
}

}  // namespace pagefile::net
