// The client's end of the bus: connections to every server it talks to,
// request ids, responses matched back to their requests, and the embedded
// in-process servers when the bus names inproc:N.
//
// Many requests share one connection per server; responses come back in any
// order and are matched by id. A server that cannot be reached, or whose
// connection drops, fails every request waiting on it with kDisconnected;
// the next request to it connects again. A request unanswered after
// `request_timeout_ms` fails with kDisconnected too, so nothing hangs on a
// stuck server; and then the server counts as silent: for as long again,
// or until any answer of it arrives or its connection ends, requests to it
// (but pings) fail at once with kDisconnected rather than wait out a
// timeout each. So a call that makes many requests of a frozen server
// (a COMMIT, of the catalog) fails within about one timeout, not one per
// request.
//
// Locks held at the catalog live under leases this client renews in the
// background (every third of the lease) for every owner holding a lock.
//
// Reading: answers from tcp: and unix: servers are read by the threads that
// wait for them (read_as_waiter(), call_sync()), not handed over by an io thread
// (wire/transport.h, Reading::kByWaiter): a thread in read_as_waiter() reads the
// server's connection when no other thread is, and delivers every answer
// that arrives, whoever asked. Answers nobody waits for are swept up every
// millisecond or so while requests are outstanding. Answers from in-process
// servers arrive on the bus's io thread.
//
// Thread-safety: thread-safe. Callbacks run never inside call() (but see
// call() for an embedded catalog) and never under the bus's locks: on the
// bus's own threads, or on a thread inside read_as_waiter() or call_sync(). They must
// not block for long, nor wait for another callback.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <capnp/serialize.h>

#include "bus/bus_config.h"
#include "core/file_record.h"
#include "wire/frame.h"
#include "server/page_server.h"
#include "wire/pagefile.capnp.h"
#include "pagefile/status.h"

namespace pagefile::net {

// A response, kept with the frame it was read from.
class Reply {
 public:
  // kCorruption when the frame is not a Response.
  static Result<std::shared_ptr<Reply>> parse(Frame frame);
  wire::Response::Reader root() const { return root_; }

 private:
  explicit Reply(Frame frame);
  Frame frame_;
  capnp::FlatArrayMessageReader reader_;
  wire::Response::Reader root_;
};
using ReplyPtr = std::shared_ptr<Reply>;

struct BusOptions {
  // The threads the bus and its embedded servers run on; null: the
  // process's shared runtime (IoRuntime::shared()).
  std::shared_ptr<IoRuntime> runtime;
  int connect_timeout_ms = 3000;
  int request_timeout_ms = 30'000;
  // How embedded (inproc:N) servers run; `dir` is set per server under home.
  // No pool of their own by default: they read and write through this
  // process's page cache, which holds what a pool would, and a pool smaller
  // than what is scanned only copies each page in to evict it unread.
  ServerOptions embedded = [] {
    ServerOptions o;
    o.cache_pages = 0;
    return o;
  }();
};

class BusClient {
 public:
  // Fills in a request; the bus sets its id and version.
  using Build = std::function<void(wire::Request::Builder)>;
  // Gets the response, or the error: the server's own (a Response holding an
  // error becomes that Status), kDisconnected, or kCorruption.
  using Callback = std::function<void(Result<ReplyPtr>)>;

  // Starts the bus threads and any embedded servers. Connections open on
  // first use.
  static Result<std::unique_ptr<BusClient>> start(const BusConfig& config,
                                                  const BusOptions& options = {});
  // Tells the catalog this owner is going, fails whatever is still waiting
  // with kDisconnected, and stops the embedded servers.
  ~BusClient();
  BusClient(const BusClient&) = delete;
  BusClient& operator=(const BusClient&) = delete;

  // Sends a request to `server` (an address in text form); `done` runs once,
  // on the bus's thread, or, for a catalog request to an embedded catalog
  // (answered by direct call), on this thread before call() returns.
  void call(const std::string& server, const Build& build, Callback done);
  // call() and wait, reading the answer on this thread (read_as_waiter()).
  Result<ReplyPtr> call_sync(const std::string& server, const Build& build);
  // Waits at most `timeout` for answers from `server`, reading its
  // connection on this thread when no other thread is (then the callbacks of
  // whatever arrives run here), else for another thread's progress. Returns
  // after anything was delivered or the time ran out: the caller checks
  // whether what it waits for is done, and calls it again if not.
  void read_as_waiter(const std::string& server, std::chrono::milliseconds timeout = kWaiterSlice);
  // Wakes the threads in read_as_waiter() to look again at what they wait for (the
  // caller changed it outside the bus).
  void wake_waiters();
  // How long one read_as_waiter() waits by default: what a waiter may lag behind an
  // end that no answer signals (a timeout, a stop).
  static constexpr std::chrono::milliseconds kWaiterSlice{20};
  // A page read or write done by plain call on an embedded server, on this
  // thread, when it needs no waiting (PageServer::read_direct, write_direct): its
  // outcome; nothing when that cannot be (not embedded, the server would
  // have to wait, or a write, truncate or drop to that server not yet
  // answered, which this must not overtake): then call() it.
  std::optional<Status> read_direct(const std::string& server, const ShareRef& share, int64_t page,
                                    std::span<std::byte> out);
  std::optional<Status> write_direct(const std::string& server, const ShareRef& share, int64_t page,
                                     std::span<const std::byte> data, uint64_t checksum);
  // Whether this bus runs servers in this process (the two above can answer).
  bool has_embedded() const;
  // Whether it runs all its servers, and they emulate no disk and keep no
  // pool: then the two above answer every read and write, unless one fails
  // or something that changes pages is still in flight.
  bool all_direct() const;

  const std::string& catalog() const { return catalog_; }
  const std::vector<std::string>& servers() const { return servers_; }
  // The copies of each page a new file keeps unless it asks for a count
  // (the bus's replicas=, else 1).
  uint32_t default_replicas() const { return default_replicas_; }
  // How busy `server` (one of servers()) is, as far as this client knows:
  // its requests sent and not yet answered, and when the oldest of them
  // likely began to be served (the later of: when the server last went
  // from idle to busy, and its last answer). Between two servers with as
  // many waiting, the one whose current request began earlier finishes
  // first (least work left). Zeros for another name.
  struct Load {
    uint32_t in_flight = 0;
    int64_t head_start_ns = 0;  // steady clock
    // Fewer waiting first, then the earlier start; two idle servers are alike.
    friend bool operator<(const Load& a, const Load& b) {
      if (a.in_flight != b.in_flight) return a.in_flight < b.in_flight;
      return a.in_flight != 0 && a.head_start_ns < b.head_start_ns;
    }
  };
  Load load(const std::string& server) const;
  // This client's identity.
  uint64_t owner() const { return owner_; }

  // A fresh lock owner: one per descriptor, so two descriptors of one client
  // conflict like two processes do. Unique across clients with high
  // probability (derived from this client's random identity).
  uint64_t new_owner();

  // Whether `owner` holds any lock; while it does, its lease is renewed in
  // the background, and it is released when the bus stops.
  void set_holds_locks(uint64_t owner, bool holds);

  // True when the catalog refused to renew `owner`'s lease: its locks are
  // gone, whatever the owner believes. Cleared by the next set_holds_locks.
  bool lease_lost(uint64_t owner);
  // The lease length the catalog reported; renewals come every third of it.
  void note_lease(std::chrono::milliseconds lease);

  // Learns the directory id of `server`, one its catalog does not know
  // (FileRecord::directories): the server joins cluster `cluster` and says
  // which directory it is, and the catalog records that (or says which it
  // had recorded meanwhile). Does not wait: `done` gets the directory, 0
  // when the server or the catalog could not be reached, on whichever
  // thread delivers the answer.
  void learn_directory_async(uint64_t cluster, const std::string& server, std::function<void(uint64_t)> done);
  // The same, waiting; the failure when the server or the catalog says
  // none. Not where answers are delivered.
  Result<uint64_t> learn_directory(uint64_t cluster, const std::string& server);

  // Sets request_timeout_ms for requests sent from now on. REQUIRES: ms > 0.
  void set_request_timeout(int ms);

  class Impl;

 private:
  BusClient(std::shared_ptr<Impl> impl, std::string catalog, std::vector<std::string> servers,
            uint64_t owner, uint32_t default_replicas);
  std::shared_ptr<Impl> impl_;
  std::string catalog_;
  std::vector<std::string> servers_;
  uint32_t default_replicas_;
  uint64_t owner_;
};

}  // namespace pagefile::net
