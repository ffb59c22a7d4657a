# The Pagefile wire protocol: every message between clients and servers
# (doc/wire_protocol.md). One Request or Response per frame (wire/frame.h).
#
# Every request carries an id that its response carries back, so many
# requests share one connection and their responses may arrive in any order.
# Every message carries the protocol version; a peer that speaks another
# version answers (or is answered) with an error and nothing else happens.
@0xeb1a2828833c0447;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("pagefile::net::wire");

# 2: replicas (FileRecord.replicas and copy states, WritePages.repair,
# SetCopyState, ReplaceServer): a peer of version 1 would take a repair for
# a plain write and write one copy of a replicated file.
const protocolVersion :UInt16 = 2;

# pagefile::Code, by number (include/pagefile/status.h).
struct Error {
  code @0 :UInt16;
  message @1 :Text;
}

struct Policy {
  access @0 :UInt8;       # pagefile::AccessType
  minPages @1 :UInt32;
  maxPages @2 :UInt32;
  name @3 :Text;          # the policy's registered name; empty: the built-in named by access
}

# The catalog's record of one Pagefile.
struct FileRecord {
  name @0 :Text;
  id @1 :UInt64;
  pageSize @2 :UInt32;
  sizePages @3 :Int64;
  placement @4 :UInt8;     # 0 stripe, 1 hash
  stripePages @5 :UInt32;
  servers @6 :List(Text);  # addresses, in placement order
  policy @7 :Policy;
  createdUnixNs @8 :Int64;
  # The catalog's cluster id (doc/architecture.md, "Incarnations").
  cluster @9 :UInt64;
  # Copies of each page (bus/placement.h); 0 from a peer that predates
  # replicas: 1.
  replicas @10 :UInt8;
  # Servers whose copies are not current (FileRecord::stale, resyncing),
  # and the version that moves when they change.
  stale @11 :List(Text);
  resyncing @12 :List(Text);
  replicaVersion @13 :UInt64;
  # FileRecord::placement_keys (empty: the servers).
  placementKeys @14 :List(Text);
  # FileRecord::directories: the directory id the catalog knows for each
  # of `servers` (0: none yet). Not stored with the record: the catalog
  # adds them as it sends it.
  directories @15 :List(UInt64);
}

# A server's directory, known to the catalog by the server's address
# (doc/architecture.md, "Server directories").
struct ServerDirectory {
  address @0 :Text;
  directory @1 :UInt64;
}

# Every file's copies on `old` move to `new` (a server put in place of a
# dead one): new's copies are stale until resynced. All files or none.
struct ReplaceServer {
  old @0 :Text;
  new @1 :Text;
}

# A server's copies of a file change state (core/file_record.h CopyState):
# a writer that could not reach it marks it stale; resync marks it
# resyncing, then current.
struct SetCopyState {
  fileId @0 :UInt64;
  server @1 :Text;
  state @2 :UInt8;
}

# A file's share on one page server: the pages of the file that live there.
struct Share {
  fileId @0 :UInt64;
  pageSize @1 :UInt32;
  # The file's buffer policy as the sender opened it, for the server's pool
  # (reads carry it; empty: the server keeps what it has, else "random").
  policy @2 :Text;
  # Where the file's pages are, for a server reading ahead over its own
  # pages only (placement stripe): the file's stripe unit, how many servers
  # hold it and which of them this one is. 0 stripe pages: not known.
  stripePages @3 :UInt32;
  serverCount @4 :UInt32;
  serverIndex @5 :UInt32;
  # Writes, truncates, syncs and fences: the fencing token of the write lock
  # they are made under (the catalog's LockState.fenceToken), 0 for a
  # writer that holds none. A server keeps the highest it has seen per file
  # and refuses lower ones (Stale).
  fence @6 :UInt64;
  # The cluster of the file's record (FileRecord.cluster): a server that
  # belongs to another cluster refuses the request (Stale). 0: unchecked.
  cluster @7 :UInt64;
  # Writes: a server that makes its share of the file for this write makes
  # it with a checksum per 4 KiB sector (OpenOptions::sector_checksums).
  sectorChecksums @8 :Bool;
  # With stripe placement: copies of each page. A server holds the units
  # whose first copy is at serverIndex or at most replicas - 1 before it.
  # 0: 1.
  replicas @9 :UInt8;
  # The directory the catalog knows at this server's address
  # (FileRecord.directories): a server whose directory is another (emptied,
  # replaced, not mounted) refuses the request (IOError) rather than answer
  # zeros for the pages it lost. 0: unchecked.
  directory @10 :UInt64;
}

struct ReadPages {
  share @0 :Share;
  page @1 :Int64;
  count @2 :UInt32;        # a run of pages [page, page + count)
}

struct WritePages {
  share @0 :Share;
  page @1 :Int64;
  data @2 :Data;           # a whole number of pages, written from `page` on
  # Each page's checksum (core/page_checksum.h), checked on arrival and
  # stored beside the page. Empty: the sender runs without checksums
  # (checksums=off), and the server computes them.
  checksums @3 :List(UInt64);
  # A repair: the sender read these pages from another copy after this
  # server's failed its checksum. Only a page whose stored copy still fails
  # it is written; one that verifies (written again since) is left alone.
  repair @4 :Bool;
}

# Verify pages [first, first + count) of a share on the server's disk,
# without sending them (pagefile scrub).
struct ScrubShare {
  share @0 :Share;
  first @1 :Int64;
  count @2 :UInt32;
}

struct BadPage {
  page @0 :Int64;
  message @1 :Text;
}

struct ScrubReport {
  checked @0 :UInt32;      # pages read and verified
  sharePages @1 :Int64;    # how far the share reaches, in pages of the file
  bad @2 :List(BadPage);
}

struct TruncateShare {
  share @0 :Share;
  pages @1 :Int64;         # pages at and beyond this number are dropped
}

struct OpenFile {
  name @0 :Text;
  create @1 :Bool;
  exclusive @2 :Bool;
  pageSize @3 :UInt32;     # 0: the recorded size (or the default on create)
  placement @4 :UInt8;
  stripePages @5 :UInt32;
  servers @6 :List(Text);  # the server set for a new file
  policy @7 :Policy;
  # Copies of each page: 0 or the recorded count (another is refused); a
  # new file gets it, else createReplicas (the bus's default), else 1.
  replicas @8 :UInt8;
  createReplicas @9 :UInt8;
}

struct SetSize {
  fileId @0 :UInt64;
  pages @1 :Int64;
  growOnly @2 :Bool;       # writes extended the file: never shrink it (truncate shrinks)
}

struct Lock {
  fileId @0 :UInt64;
  owner @1 :UInt64;        # one client; its lease covers all its locks
  level @2 :UInt8;         # net::LockLevel
}

struct LockState {
  level @0 :UInt8;             # the level the owner holds now
  reservedByOther @1 :Bool;    # another owner holds RESERVED or more
  leaseMs @2 :UInt32;          # the lease: renew at least this often
  sizePages @3 :Int64;         # the file's size as the catalog records it
  version @4 :UInt64;          # moves whenever the file may have changed (lease_table.h)
  # At RESERVED and above: the file's fencing token, new whenever the
  # write lock passes to another owner (the same owner taking it again with
  # no one between keeps its own); else 0. Tokens only grow, across catalog
  # restarts too.
  fenceToken @5 :UInt64;
  # The last writer's lease ran out while it held the write lock: announce
  # fenceToken (Request.fence) to every server of the file before reading
  # or writing it, so that whatever that writer still sends is refused.
  fenceAnnounce @6 :Bool;
  # The file's FileRecord.replicaVersion: a client whose record has another
  # asks for the record again before reading or writing under this lock.
  replicaVersion @7 :UInt64;
}

struct LockInfo {
  fileId @0 :UInt64;
  owner @1 :UInt64;
  level @2 :UInt8;
  expiresInMs @3 :Int64;
}

struct ServerStats {
  requests @0 :UInt64;
  pagesRead @1 :UInt64;
  pagesWritten @2 :UInt64;
  cacheHits @3 :UInt64;
  cacheMisses @4 :UInt64;
  diskReads @5 :UInt64;
  diskWrites @6 :UInt64;
  syncs @7 :UInt64;
  bytesIn @8 :UInt64;
  bytesOut @9 :UInt64;
  connections @10 :UInt32;
  errors @11 :UInt64;
  cachePages @12 :UInt64;        # pages the cache holds now
  diskLatencyUs @13 :UInt32;     # emulated latency per uncached access, 0 when off
  unconfirmedWriteBytes @14 :UInt64;
  files @15 :List(FileCacheStats);  # the server pool's counters, per file
  cacheCapacity @16 :UInt64;        # --cache-pages
  prefetchPages @17 :UInt32;        # global-sequential window (k)
  repairs @18 :UInt64;              # pages rewritten from another copy
  leaseExpiries @19 :UInt64;        # clients' leases that ran out at its catalog
}

struct DiskRead {
  fileId @0 :UInt64;
  page @1 :Int64;
}

# What the server's buffer pool did for one file's share since it took its
# current policy.
struct FileCacheStats {
  fileId @0 :UInt64;
  policy @1 :Text;
  hits @2 :UInt64;
  misses @3 :UInt64;
  prefetchUsed @4 :UInt64;
  prefetchWasted @5 :UInt64;
  evictions @6 :UInt64;
  pages @7 :UInt32;              # pages held now
}

struct Request {
  id @0 :UInt64;
  version @1 :UInt16;
  union {
    # Any server.
    ping @2 :Void;
    read @3 :ReadPages;
    write @4 :WritePages;
    sync @5 :Share;            # every earlier write to the share is durable
    truncate @6 :TruncateShare;
    dropShare @7 :Share;       # the file was removed: delete the share
    stats @8 :Void;
    # The catalog.
    open @9 :OpenFile;
    stat @10 :Text;            # by name
    setSize @11 :SetSize;
    unlink @12 :Text;          # by name; answers with the removed record
    list @13 :Void;
    lock @14 :Lock;
    renewLease @15 :UInt64;    # owner
    locks @16 :Void;
    releaseOwner @17 :UInt64;  # owner is going away
    # Any server, for tests and diagnosis.
    diskReadLog @18 :Void;     # the pages this server read from its disk, in order
    scrub @19 :ScrubShare;
    # The sender's lock token (share.fence) is now the one to beat: sent to
    # every server of a file before the first write under a new token, so
    # that servers the writer never writes to refuse an older one too.
    fence @20 :Share;
    # The catalog: answers with the file's record as it now is.
    setCopyState @23 :SetCopyState;
    # The catalog: answers with the records it changed.
    replaceServer @24 :ReplaceServer;
    # Any server: its metrics, as GET /metrics serves them (pagefile
    # status --metrics).
    metrics @25 :Void;
    # Any server: joins the cluster given (one with none joins it; one of
    # another refuses, Stale) and answers with its directory id.
    join @26 :UInt64;
    # The catalog: the directory at an address, recorded by the first
    # client to see it; answers with the one recorded.
    recordDirectory @27 :ServerDirectory;
  }
  # Catalog requests that change a file (setSize, unlink) made under a
  # write lock: its fencing token, refused (Stale) once the lock has passed
  # to another owner. 0: no lock to check.
  lockToken @21 :UInt64;
  # Catalog requests on a file by id (lock, setSize): the cluster of the
  # record the id came from; a catalog of another cluster refuses them
  # (Stale). 0: unchecked.
  cluster @22 :UInt64;
}

struct Response {
  id @0 :UInt64;
  version @1 :UInt16;
  union {
    error @2 :Error;
    ok @3 :Void;
    pages @4 :Data;            # read: count pages, zeros where never written
    file @5 :FileRecord;       # open, stat, unlink
    files @6 :List(FileRecord);
    stats @7 :ServerStats;
    lockState @8 :LockState;
    locks @9 :List(LockInfo);
    diskReadLog @10 :List(DiskRead);
    scrub @12 :ScrubReport;
    metrics @13 :Text;         # Prometheus's text format
    directory @14 :UInt64;     # join, recordDirectory
  }
  # With `pages`: each page's checksum, for the client to check; empty
  # when the server runs without checksums (pagefiled --no-checksums).
  checksums @11 :List(UInt64);
}
