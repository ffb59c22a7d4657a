// The way into a Client for code of this project above it (the VFS): the
// PageIo behind a descriptor (core/page_io.h).
//
// Every Client call by descriptor looks the descriptor up under the
// client's lock and copies its PageIo's pointer. Lock levels, the size and
// the reserved check involve none of the client's request bookkeeping
// (windows, page queues, the pool), and SQLite asks for them at every
// transaction: a caller that holds the PageIo asks it directly. The caller
// keeps it no longer than the descriptor is open, and asks stopped() before
// each call: Client::stop closes every descriptor, and a call on a PageIo
// after that would reach a file the client has let go.
#pragma once

#include <memory>

#include "core/page_io.h"
#include "pagefile/pagefile.h"

namespace pagefile {

struct ClientAccess {
  // kInvalidArgument for a descriptor that is closed or was never opened.
  static Result<std::shared_ptr<PageIo>> page_io(Client& client, Fd fd);
  // Whether the client is stopping or stopped (its descriptors closed or
  // being closed): one atomic load.
  static bool stopped(const Client& client);
};

}  // namespace pagefile
