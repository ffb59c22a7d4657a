// Roles (wire/tls.h's PeerRole): which requests a peer in each role may
// make of a server. A peer that proved nothing (tcp:// on loopback, unix:,
// inproc:) is an admin; the rules matter for tls:// peers.
//
//   reader  ping, read, stats and metrics, open without create, stat, list, shared
//           locks and their own leases, the server's disk-read log
//   writer  and write, sync, truncate, set a size, create, every lock,
//           fencing, marking a replica behind (setCopyState), unlink of a
//           SQLite journal or WAL (NAME-journal, NAME-wal, a super-journal)
//           under a write lock (the catalog checks that the lock's token is
//           live), and dropping a share's pages (which a writer could
//           overwrite anyway)
//   admin   and unlink of any file, the list of every lock and its owner,
//           scrub, replaceServer: the server's administration
#pragma once

#include "wire/pagefile.capnp.h"
#include "wire/tls.h"
#include "pagefile/status.h"

namespace pagefile::net {

// The least role that may make `request`.
PeerRole role_needed(wire::Request::Reader request);

// OK when `role` may make `request`; kPermissionDenied naming the
// operation, the peer's role and the role it needs otherwise.
Status check_access(PeerRole role, wire::Request::Reader request);

}  // namespace pagefile::net
