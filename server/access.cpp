#include "server/access.h"

#include <fmt/format.h>

#include "server/request_metrics.h"
#include "pagefile/pagefile.h"

namespace pagefile::net {

PeerRole role_needed(wire::Request::Reader request) {
  switch (request.which()) {
    case wire::Request::PING:
    case wire::Request::READ:
    case wire::Request::STATS:
    case wire::Request::METRICS:
    case wire::Request::STAT:
    case wire::Request::LIST:
    case wire::Request::RENEW_LEASE:
    case wire::Request::LOCKS:
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
      return PeerRole::kWriter;
    case wire::Request::UNLINK:
      // Under a write lock (the token the catalog checks is live): SQLite
      // deleting a journal or WAL, which is how a transaction commits.
      return request.getLockToken() != 0 ? PeerRole::kWriter : PeerRole::kAdmin;
    case wire::Request::DROP_SHARE:
      // A share's pages once the catalog let go of the file: a page server
      // cannot tell, and a writer may overwrite or truncate them anyway.
      return PeerRole::kWriter;
    case wire::Request::SCRUB:
    case wire::Request::REPLACE_SERVER:
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
