// pagefile: the admin CLI of a Pagefile cluster.
//
//   pagefile status [--metrics] [--bus BUS]  servers up, and their counters (--metrics: all of them)
//   pagefile ls                [--bus BUS]   every file in the catalog
//   pagefile stat FILE         [--bus BUS]   one file's record
//   pagefile rm FILE           [--bus BUS]   remove a file and its pages
//   pagefile locks             [--bus BUS]   locks held, with their leases
//   pagefile import LOCAL NAME [--bus BUS] [--page-size B] [--placement stripe|hash]
//                              [--stripe-pages N] [--replicas R] [--concurrency N]
//                                            an SQLite database as SQLite reads it (a hot
//                                            journal rolled back, a WAL checkpointed first);
//                                            pages of zeros and holes are not sent
//   pagefile export NAME LOCAL [--bus BUS] [--concurrency N] [--force]
//                                            LOCAL replaced only when whole (an existing one
//                                            only with --force, and if a regular file)
//   pagefile scrub [FILE]      [--bus BUS]   every server verifies every page it holds
//   pagefile resync [FILE] [--wait [--timeout-s N]] [--bus BUS]
//                                            stale copies brought up to date
//   pagefile replace-server OLD NEW [--bus BUS]
//                                            NEW takes OLD's copies (stale until resync);
//                                            NEW = OLD: a new directory at OLD
//   pagefile keygen [--role reader|writer|admin] FILE
//                                            a new key for tls:// links, mode 0600
//
// BUS as in bus/bus_config.h; without it, $PAGEFILE_BUS, else the embedded
// default. Against tls:// servers the client proves itself with --psk-file
// FILE, or --tls-cert, --tls-key and --tls-ca (wire/tls.h). Exit status 0 on success, 1 on an error (printed) or a bad page
// found by scrub, and CLI11's
// non-zero usage codes for a bad command line.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <thread>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sqlite3.h>

#include "bus/bus_client.h"
#include "bus/remote_page_io.h"
#include "core/page_bounds.h"
#include "core/page_checksum.h"
#include "core/sqlite_header.h"
#include "server/etcd_catalog.h"
#include "server/lease_table.h"
#include "store/file_io.h"
#include "wire/address.h"
#include "wire/wire_convert.h"
#include "pagefile/pagefile.h"
#include "tools/common/progress.h"
#include "tools/common/tls_flags.h"
#include "wire/tls.h"

namespace {

using namespace pagefile;

int fail(const Status& s) {
  fmt::print(stderr, "pagefile: {}\n", s.to_string());
  return 1;
}

Result<std::unique_ptr<net::BusClient>> connect_bus(const std::string& bus) {
  auto config = net::resolve_bus(bus);
  if (!config) return config.status();
  return net::BusClient::start(*config);
}

// Which servers' copies of `r` are not current, and the record's version.
std::string degraded_text(const FileRecord& r) {
  std::string text;
  if (!r.stale.empty()) text += fmt::format("stale on {}", fmt::join(r.stale, " "));
  if (!r.resyncing.empty()) text += fmt::format("{}resyncing on {}", text.empty() ? "" : ", ", fmt::join(r.resyncing, " "));
  return fmt::format("{} (replica version {})", text, r.replica_version);
}

void print_record(const FileRecord& r) {
  fmt::print("{}\n  id {}\n  page size {} B\n  size {} pages ({} bytes)\n  placement {}{}\n  servers {}\n  replicas {}\n"
             "  policy {} (min {}, max {})\n",
             r.name, r.id, r.page_size, r.size_pages, r.size_pages * r.page_size, placement_name(r.placement),
             r.placement == Placement::kStripe || r.stripe_pages > 1 ? fmt::format(", {} pages per unit", r.stripe_pages) : "",
             fmt::join(r.servers, " "), r.replicas, policy_name(r.policy), r.policy.min_pages, r.policy.max_pages);
  if (!r.stale.empty() || !r.resyncing.empty()) fmt::print("  DEGRADED: {}\n", degraded_text(r));
}

// One line of a server pool's counters for a file.
std::string pool_line(net::wire::FileCacheStats::Reader f) {
  return fmt::format("policy {}: hits {}, misses {}, prefetch used {}, wasted {}, evictions {}, pages {}",
                     f.getPolicy().cStr(), f.getHits(), f.getMisses(), f.getPrefetchUsed(),
                     f.getPrefetchWasted(), f.getEvictions(), f.getPages());
}

int cmd_status(net::BusClient& bus, bool metrics) {
  int down = 0;
  // Files with copies not current first: what an operator must see.
  if (auto list = bus.call_sync(bus.catalog(), [](net::wire::Request::Builder r) { r.setList(); }); list) {
    for (auto f : (*list)->root().getFiles()) {
      auto r = net::from_wire(f);
      if (r && (!r->stale.empty() || !r->resyncing.empty())) {
        fmt::print("DEGRADED {}: {}\n", r->name, degraded_text(*r));
      }
    }
  }
  fmt::print("{:<32} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>6}\n", "server", "requests", "pages_rd",
             "pages_wr", "hits", "misses", "syncs", "conns");
  for (const auto& server : bus.servers()) {
    auto reply = bus.call_sync(server, [](net::wire::Request::Builder r) { r.setStats(); });
    if (!reply) {
      fmt::print("{:<32} DOWN: {}\n", server, reply.status().message());
      ++down;
      continue;
    }
    auto s = (*reply)->root().getStats();
    fmt::print("{:<32} {:>8} {:>10} {:>10} {:>8} {:>8} {:>8} {:>6}{}{}\n", server, s.getRequests(),
               s.getPagesRead(), s.getPagesWritten(), s.getCacheHits(), s.getCacheMisses(), s.getSyncs(),
               s.getConnections(), server == bus.catalog() ? "  (catalog)" : "",
               s.getDiskLatencyUs() > 0 ? fmt::format("  emulated disk {} ms", s.getDiskLatencyUs() / 1000.0) : "");
    fmt::print("  pool {} of {} pages, prefetch window {}\n", s.getCachePages(), s.getCacheCapacity(),
               s.getPrefetchPages());
    for (auto f : s.getFiles()) fmt::print("  file {:<6} {}\n", f.getFileId(), pool_line(f));
    if (metrics) {
      // Every counter of its GET /metrics, each line under the server's name.
      auto text = bus.call_sync(server, [](net::wire::Request::Builder r) { r.setMetrics(); });
      if (!text) {
        fmt::print("  metrics: {}\n", text.status().to_string());
      } else {
        std::string all((*text)->root().getMetrics().cStr());
        for (size_t at = 0; at < all.size();) {
          size_t end = std::min(all.find('\n', at), all.size());
          if (all[at] != '#') fmt::print("  {}\n", all.substr(at, end - at));
          at = end + 1;
        }
      }
    }
  }
  fmt::print("{} of {} servers up\n", bus.servers().size() - down, bus.servers().size());
  if (bus.catalog().rfind("etcd://", 0) == 0) {
    // The servers that registered at the catalog on etcd and renew it: a
    // dead one drops out within one lease.
    auto members = net::parse_etcd_members(bus.catalog());
    net::EtcdCatalog::Options options;
    if (members) options.endpoints = *members;
    auto catalog = members ? net::EtcdCatalog::open(options) : Result<std::unique_ptr<net::EtcdCatalog>>(members.status());
    auto live = catalog ? (*catalog)->live_servers() : Result<std::vector<std::string>>(catalog.status());
    if (!live) {
      fmt::print("catalog {}: {}\n", bus.catalog(), live.status().to_string());
      return 1;
    }
    fmt::print("catalog {}: {} servers registered live: {}\n", bus.catalog(), live->size(), fmt::join(*live, " "));
  }
  return down == 0 ? 0 : 1;
}

int cmd_ls(net::BusClient& bus) {
  auto reply = bus.call_sync(bus.catalog(), [](net::wire::Request::Builder r) { r.setList(); });
  if (!reply) return fail(reply.status());
  int status = 0;
  for (auto f : (*reply)->root().getFiles()) {
    auto checked = net::from_wire(f);
    if (!checked) {
      status = fail(checked.status());  // said, and the others still listed
      continue;
    }
    const FileRecord& r = *checked;
    fmt::print("{:>10} pages x {:>5} B  {:<6} on {} servers{}  {}{}\n", r.size_pages, r.page_size,
               placement_name(r.placement), r.servers.size(),
               r.replicas > 1 ? fmt::format(", {} copies", r.replicas) : "", r.name,
               r.stale.empty() && r.resyncing.empty() ? "" : "  DEGRADED: " + degraded_text(r));
  }
  return status;
}

int cmd_stat(net::BusClient& bus, const std::string& name) {
  auto reply = bus.call_sync(bus.catalog(), [&](net::wire::Request::Builder r) { r.setStat(name); });
  if (!reply) return fail(reply.status());
  auto checked = net::from_wire((*reply)->root().getFile());
  if (!checked) return fail(checked.status());
  const FileRecord& record = *checked;
  print_record(record);
  // What each server's pool did for it (since the file took its policy
  // there); a server that is down says so.
  for (const auto& server : record.servers) {
    auto stats = bus.call_sync(server, [](net::wire::Request::Builder r) { r.setStats(); });
    if (!stats) {
      fmt::print("  {}: DOWN: {}\n", server, stats.status().message());
      continue;
    }
    bool seen = false;
    for (auto f : (*stats)->root().getStats().getFiles()) {
      if (f.getFileId() != record.id) continue;
      fmt::print("  {}: {}\n", server, pool_line(f));
      seen = true;
    }
    if (!seen) fmt::print("  {}: not in its pool\n", server);
  }
  return 0;
}

int cmd_locks(net::BusClient& bus) {
  auto reply = bus.call_sync(bus.catalog(), [](net::wire::Request::Builder r) { r.setLocks(); });
  if (!reply) return fail(reply.status());
  auto locks = (*reply)->root().getLocks();
  fmt::print("{} lock(s)\n", locks.size());
  for (auto l : locks) {
    fmt::print("  file {:>6}  owner {:016x}  {:<9}  lease ends in {} ms\n", l.getFileId(), l.getOwner(),
               net::lock_level_name(static_cast<net::LockLevel>(l.getLevel())), l.getExpiresInMs());
  }
  return 0;
}

// The page size of an SQLite database (offset 16 of its header), or 0.
// The pages a scrub request covers at most (the server may do fewer).
constexpr uint32_t kScrubStep = 4096;

// Asks each server of `record` to verify its share of the file on its disk,
// a run of pages at a time; prints each bad page and each server that
// could not be asked. Returns the problems found.
int64_t scrub_file(net::BusClient& bus, const FileRecord& record, tools::ProgressLine& progress, int64_t& done) {
  int64_t problems = 0;
  for (size_t i = 0; i < record.servers.size(); ++i) {
    const std::string& server = record.servers[i];
    for (int64_t first = 0;;) {
      auto reply = bus.call_sync(server, [&](net::wire::Request::Builder r) {
        auto scrub = r.initScrub();
        // (With the directory: one that is not the one that held the pages
        // says so, rather than report none bad.)
        net::share_to_wire(record, directory_of(record, i), 0, scrub.getShare());
        scrub.setFirst(first);
        scrub.setCount(kScrubStep);
      });
      if (!reply) {
        progress.clear();
        fmt::print("{}: server {} could not scrub: {}\n", record.name, server, reply.status().to_string());
        ++problems;
        break;
      }
      auto report = (*reply)->root().getScrub();
      for (auto bad : report.getBad()) {
        progress.clear();
        fmt::print("{} page {}: BAD on server {}: {}\n", record.name, bad.getPage(), server, bad.getMessage().cStr());
        ++problems;
      }
      first += report.getChecked();
      done += report.getChecked();
      progress.update(done);
      if (report.getChecked() == 0 || first >= report.getSharePages()) break;
    }
  }
  return problems;
}

// The record of `name`, or of every file when it is empty.
Result<std::vector<FileRecord>> records_of(net::BusClient& bus, const std::string& name) {
  std::vector<FileRecord> files;
  auto reply = bus.call_sync(bus.catalog(), [&](net::wire::Request::Builder r) {
    if (name.empty()) {
      r.setList();
    } else {
      r.setStat(name);
    }
  });
  if (!reply) return reply.status();
  auto take = [&](net::wire::FileRecord::Reader f) {
    auto checked = net::from_wire(f);
    if (checked) files.push_back(std::move(*checked));
    return checked.status();
  };
  if (name.empty()) {
    for (auto f : (*reply)->root().getFiles()) {
      if (Status s = take(f); !s) return s;
    }
  } else if (Status s = take((*reply)->root().getFile()); !s) {
    return s;
  }
  return files;
}

// Brings every copy not current of FILE (or of every file) up to date
// whose server answers; with `wait`, waits up to `timeout_s` for the
// others to come back. 0 when every copy is current at the end.
int cmd_resync(std::shared_ptr<net::BusClient> bus, const std::string& name, bool wait, int timeout_s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (bool first_pass = true;; first_pass = false) {
    auto files = records_of(*bus, name);
    if (!files) return fail(files.status());
    int behind = 0;
    bool down = false;
    for (const FileRecord& f : *files) {
      std::vector<std::string> servers = f.stale;
      servers.insert(servers.end(), f.resyncing.begin(), f.resyncing.end());
      for (const auto& server : servers) {
        ++behind;
        if (!bus->call_sync(server, [](net::wire::Request::Builder r) { r.setPing(); })) {
          if (first_pass || !wait) fmt::print("{}: {} is down; its copies stay stale\n", f.name, server);
          down = true;
          continue;
        }
        auto io = net::RemotePageIo::open(bus, f.name, {.location = Location::kRemote});
        if (!io) return fail(io.status());
        tools::ProgressLine progress(stderr, fmt::format("resync {} on {}", f.name, server),
                                     isatty(fileno(stderr)) == 1, f.size_pages, "pages");
        auto report = (*io)->resync(server, [&](int64_t done, int64_t) { progress.update(done); });
        progress.clear();
        if (report.status().is(Code::kNotSupported)) {
          --behind;  // not resynced, and not to be: said why
          fmt::print("{}: {} left as it is: {}\n", f.name, server, report.status().message());
          continue;
        }
        if (!report) {
          fmt::print("{}: {} could not be brought up to date: {}\n", f.name, server, report.status().to_string());
          down = true;
          continue;
        }
        --behind;
        fmt::print("{}: {} is up to date: {} of its {} pages copied\n", f.name, server, report->copied,
                   report->compared);
      }
    }
    if (behind == 0) {
      fmt::print("every copy is current, or goes with its file\n");
      return 0;
    }
    if (!wait || !down || std::chrono::steady_clock::now() > deadline) {
      fmt::print("{} copies not current\n", behind);
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// Puts NEW in OLD's place in every file that has it (copies stale there
// until resync).
int cmd_replace_server(net::BusClient& bus, const std::string& old_server, const std::string& new_server) {
  auto address = net::parse_address(new_server);
  if (!address) return fail(address.status());
  auto reply = bus.call_sync(bus.catalog(), [&](net::wire::Request::Builder r) {
    auto replace = r.initReplaceServer();
    replace.setOld(old_server);
    replace.setNew(address->text());
  });
  if (!reply) return fail(reply.status());
  auto files = (*reply)->root().getFiles();
  const bool same = address->text() == old_server;
  for (auto f : files) {
    if (same) {
      fmt::print("{}: its copies on {} are stale (a new directory there)\n", f.getName().cStr(), old_server);
    } else {
      fmt::print("{}: its copies on {} go to {}\n", f.getName().cStr(), old_server, address->text());
    }
  }
  fmt::print("{} file(s) changed; their copies on {} are stale until `pagefile resync`\n", files.size(),
             address->text());
  if (same) fmt::print("the catalog records the directory now at {} when a client next reaches it\n", old_server);
  return 0;
}

int cmd_scrub(net::BusClient& bus, const std::string& name) {
  auto records = records_of(bus, name);
  if (!records) return fail(records.status());
  std::vector<FileRecord>& files = *records;
  // Each server reads its share up to the share's own end: about the
  // file's size, once per server.
  int64_t total = 0;
  for (const auto& f : files) total += f.size_pages * static_cast<int64_t>(f.servers.size());
  tools::ProgressLine progress(stderr, "scrub", isatty(fileno(stderr)) == 1, total, "pages");
  int64_t done = 0;
  int64_t problems = 0;
  for (const auto& f : files) problems += scrub_file(bus, f, progress, done);
  progress.clear();
  fmt::print("scrubbed {} page reads of {} file(s): {}\n", done, files.size(),
             problems == 0 ? "all pages good" : fmt::format("{} problem(s)", problems));
  return problems == 0 ? 0 : 1;
}

// An SQLite database held still while `pagefile import` copies its file,
// so that the copy is the database as SQLite reads it, not its file as it
// happens to be. Opened through SQLite's unix VFS (and so under the locks
// every other SQLite program takes): its first read rolls a hot journal
// back; in WAL mode the WAL's commits are checkpointed into the file
// (PRAGMA wal_checkpoint(TRUNCATE)); then a read transaction is held until
// this is destroyed. Meanwhile no writer changes the file: in rollback mode
// a writer cannot commit under the read lock, and in WAL mode it appends
// to the WAL only, which the read lock keeps out of the file.
//
// The copy must not open and close another descriptor of the file while
// this lives: POSIX drops all of a process's locks on a file at the close
// of any of its descriptors.
class SqliteReadHold {
 public:
  // Fails with kBusy when another connection keeps the database from being
  // read (a writer mid-commit for longer than kBusyMs) or its WAL from
  // being checkpointed (a reader or writer on it), else with kIOError and
  // SQLite's message (a hot journal that cannot be rolled back for want of
  // write permission, a damaged file, ...).
  static Result<std::unique_ptr<SqliteReadHold>> take(const std::string& path) {
    sqlite3* db = nullptr;
    // A name of the file itself, never a URI: SQLite built with
    // SQLITE_USE_URI (Debian's) takes "file:a.db" for the URI of a.db.
    const std::string plain = path.starts_with('/') ? path : "./" + path;
    const int opened = sqlite3_open_v2(plain.c_str(), &db, SQLITE_OPEN_READWRITE, "unix");
    std::unique_ptr<SqliteReadHold> hold(new SqliteReadHold(path, db));  // (closes even a failed open's handle)
    if (opened != SQLITE_OK) return hold->error("opening it");
    sqlite3_busy_timeout(db, kBusyMs);
    // The first read: a hot journal is rolled back, a WAL opened.
    if (auto read = hold->first_row("SELECT count(*) FROM sqlite_schema"); !read) return read.status();
    auto mode = hold->first_row("PRAGMA journal_mode");
    if (!mode) return mode.status();
    const bool wal = mode->at(0) == "wal";
    // A commit that lands between the checkpoint and the read transaction
    // is in the WAL and not in the file: checkpointed again, a few times.
    for (int attempt = 0; attempt < 5; ++attempt) {
      if (wal) {
        auto checkpoint = hold->first_row("PRAGMA wal_checkpoint(TRUNCATE)");
        if (!checkpoint) return checkpoint.status();
        if (checkpoint->at(0) != "0") break;
      }
      if (auto begun = hold->first_row("BEGIN"); !begun) return begun.status();
      if (auto read = hold->first_row("SELECT count(*) FROM sqlite_schema"); !read) return read.status();
      if (!wal || hold->wal_is_empty()) return hold;
      if (auto ended = hold->first_row("ROLLBACK"); !ended) return ended.status();
    }
    return Status::busy(path, "in WAL mode, with commits in its WAL that a checkpoint could not move into the "
                              "database file (another connection is reading or writing it): import it when it is "
                              "idle");
  }
  ~SqliteReadHold() { sqlite3_close(db_); }  // (the read transaction ends with it)
  // Whether the database SQLite holds is the file `fd` reads (the same
  // device and inode), not another one of a name like it.
  bool holds(int fd) const {
    struct stat mine {}, held {};
    const char* name = sqlite3_db_filename(db_, "main");
    return name != nullptr && ::fstat(fd, &mine) == 0 && ::stat(name, &held) == 0 && mine.st_dev == held.st_dev &&
           mine.st_ino == held.st_ino;
  }
  SqliteReadHold(const SqliteReadHold&) = delete;
  SqliteReadHold& operator=(const SqliteReadHold&) = delete;

 private:
  // How long a statement waits for another connection's lock.
  static constexpr int kBusyMs = 5000;

  SqliteReadHold(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

  Status error(std::string_view doing) const {
    const std::string detail = fmt::format("{}: {}", doing, sqlite3_errmsg(db_));
    return (sqlite3_errcode(db_) & 0xff) == SQLITE_BUSY ? Status::busy(path_, detail) : Status::io_error(path_, detail);
  }

  // The first row of `sql` as text (empty when it has none).
  Result<std::vector<std::string>> first_row(const char* sql) {
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql, -1, &statement, nullptr) != SQLITE_OK) return error(sql);
    std::vector<std::string> row;
    const int stepped = sqlite3_step(statement);
    if (stepped == SQLITE_ROW) {
      for (int i = 0; i < sqlite3_column_count(statement); ++i) {
        const unsigned char* text = sqlite3_column_text(statement, i);
        row.emplace_back(text != nullptr ? reinterpret_cast<const char*>(text) : "");
      }
    }
    sqlite3_finalize(statement);
    if (stepped != SQLITE_ROW && stepped != SQLITE_DONE) return error(sql);
    return row;
  }

  // Whether the WAL holds no frame: nothing was committed since the
  // checkpoint truncated it, so the read transaction sees the file alone.
  bool wal_is_empty() const {
    struct stat st {};
    const char* wal = sqlite3_filename_wal(sqlite3_db_filename(db_, "main"));
    return ::stat(wal, &st) != 0 ? errno == ENOENT : st.st_size == 0;
  }

  const std::string path_;
  sqlite3* const db_;
};

struct CopyOptions {
  std::string bus;
  uint32_t page_size = 0;
  std::string placement = "stripe";
  uint32_t stripe_pages = 1;
  uint32_t replicas = 0;  // 0: the bus's replicas=, else 1
  uint32_t concurrency = 12;
  bool force = false;  // export: replace an existing local file
};

// The file an import reads, and the hold on it when it is an SQLite
// database: let go of in that order, since closing the descriptor first
// would drop the hold's locks.
struct ImportInput {
  int fd = -1;
  std::unique_ptr<SqliteReadHold> hold;
  ~ImportInput() {
    hold.reset();
    if (fd >= 0) ::close(fd);
  }
};

int cmd_import(const CopyOptions& o, const std::string& local, const std::string& name) {
  ImportInput input;
  // O_NONBLOCK: a FIFO must be refused, not waited on for a writer.
  const int in = input.fd = ::open(local.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in < 0) return fail(Status::not_found(local, std::strerror(errno)));
  struct stat st {};
  if (::fstat(in, &st) != 0) return fail(Status::io_error(local, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) return fail(Status::invalid_argument(local, "is not a regular file"));
  // An SQLite database is copied as SQLite reads it, held still meanwhile
  // (SqliteReadHold); its header and size are read again once held, since
  // a rollback or a checkpoint may have changed them. (Through `in`, never
  // another descriptor: see SqliteReadHold.)
  std::array<std::byte, 18> header{};
  auto read_header = [&] { return ::pread(in, header.data(), header.size(), 0) == static_cast<ssize_t>(header.size()); };
  if (read_header() && has_sqlite_magic(header)) {
    auto hold = SqliteReadHold::take(local);
    if (!hold) return fail(hold.status());
    if (!(*hold)->holds(in)) {
      return fail(Status::invalid_argument(local, "SQLite opened another file than this one (a name taken for "
                                                  "another): not imported"));
    }
    input.hold = std::move(*hold);
    if (::fstat(in, &st) != 0 || !read_header()) return fail(Status::io_error(local, std::strerror(errno)));
  }
  uint32_t page_size = o.page_size != 0 ? o.page_size : sqlite_header_page_size(header);
  if (page_size == 0) page_size = kDefaultPageSize;
  auto placement = parse_placement(o.placement);
  if (!placement) return fail(placement.status());
  auto client = Client::start({.concurrency = o.concurrency, .bus = o.bus});
  if (!client) return fail(client.status());
  auto fd = (*client)->open(name, {.location = Location::kRemote,
                                   .page_size = page_size,
                                   .create = true,
                                   .exclusive = true,
                                   .placement = *placement,
                                   .stripe_pages = o.stripe_pages,
                                   .replicas = o.replicas});
  if (!fd) return fail(fd.status());
  // From here a failure takes the half-imported file away again: an import
  // either lands whole or leaves no record.
  auto abandon = [&](const Status& why) {
    (void)(*client)->close(*fd);
    if (Status gone = (*client)->unlink(name, Location::kRemote); !gone) {
      fmt::print(stderr, "pagefile: could not remove the partial import '{}': {}\n", name, gone.to_string());
    }
    return fail(why);
  };
  int64_t pages = (st.st_size + page_size - 1) / page_size;
  if (Status s = check_size_pages(pages, local); !s) return abandon(s);
  pagefile::tools::ProgressLine progress(stderr, "import", isatty(fileno(stderr)) != 0, pages);
  std::deque<Ticket> in_flight;
  std::vector<std::byte> page(page_size);
  // A page of zeros is not sent: a new file's pages never written read as
  // zeros, and the size is set whole at the end. A sparse file's holes are
  // passed over without reading them (SEEK_DATA), so a mostly empty 1 TiB
  // file imports in the time its data takes, and holds no more than it.
  int64_t zero_pages = 0;
  for (int64_t p = 0; p < pages; ++p) {
    const off_t data = ::lseek(in, static_cast<off_t>(p) * page_size, SEEK_DATA);
    if (data < 0 && errno == ENXIO) {  // holes to the end
      zero_pages += pages - p;
      progress.update(pages);
      break;
    }
    if (data > static_cast<off_t>(p) * page_size) {
      const int64_t skip = std::min<int64_t>(data / page_size, pages) - p;
      zero_pages += skip;
      p += skip;
      if (p >= pages) break;
    }
    std::fill(page.begin(), page.end(), std::byte{0});
    ssize_t n = ::pread(in, page.data(), page_size, static_cast<off_t>(p) * page_size);
    if (n < 0) return abandon(Status::io_error(local, std::strerror(errno)));
    if (all_zero(page)) {
      ++zero_pages;
      progress.update(p + 1);
      continue;
    }
    if (in_flight.size() >= o.concurrency) {
      if (Status s = (*client)->write_confirm(in_flight.front()); !s) return abandon(s);
      in_flight.pop_front();
    }
    auto t = (*client)->write_request(*fd, p, page);
    if (!t) return abandon(t.status());
    in_flight.push_back(*t);
    progress.update(p + 1);
  }
  for (Ticket t : in_flight) {
    if (Status s = (*client)->write_confirm(t); !s) return abandon(s);
  }
  if (Status s = (*client)->truncate(*fd, pages); !s) return abandon(s);  // (the zero pages at the end)
  if (Status s = (*client)->sync(*fd); !s) return abandon(s);
  progress.clear();
  fmt::print("imported {} ({} bytes) as {}: {} pages of {} B{}{}\n", local, st.st_size, name, pages, page_size,
             st.st_size % page_size ? " (last page padded with zeros)" : "",
             zero_pages > 0 ? fmt::format(", {} of them zeros, not sent", zero_pages) : "");
  if (Status s = (*client)->close(*fd); !s) return fail(s);
  return 0;
}

// Whether the file system that will hold `path` has room for `bytes` more
// (kNoSpace saying how much it has), so that an export fails before it
// writes rather than when the disk is full.
Status check_room_for(const std::string& path, int64_t bytes) {
  std::filesystem::path target = std::filesystem::absolute(path);
  struct statvfs fs {};
  if (::statvfs(target.parent_path().c_str(), &fs) != 0) return Status::io_error(path, std::strerror(errno));
  const uint64_t block = std::max<uint64_t>(1, fs.f_frsize);
  const uint64_t blocks_needed = (static_cast<uint64_t>(bytes) + block - 1) / block;
  if (blocks_needed > fs.f_bavail) {
    return Status::no_space(path, fmt::format("needs {} bytes, its file system has {} free", bytes,
                                              static_cast<uint64_t>(fs.f_bavail) * block));
  }
  return Status::ok();
}

Status already_there(const std::string& target) {
  return Status::already_exists(target, "exists; give --force to replace it");
}

// What --force may replace: nothing, or a regular file. A symbolic link,
// a FIFO, a device or a directory at the path is refused: the rename that
// publishes the copy would put a file in its place (a device node gone, a
// link that was meant to be written through replaced) rather than write
// where it leads.
Status replaceable(const std::string& target) {
  struct stat st {};
  if (::lstat(target.c_str(), &st) != 0) return Status::ok();  // (none there: errors show at the rename)
  if (S_ISREG(st.st_mode)) return Status::ok();
  return Status::invalid_argument(target, "is not a regular file; --force replaces only a regular file");
}

// The local file of an export: written under a temporary name beside
// `target` (so the rename that publishes it stays in one file system),
// created with O_EXCL so it is never another's file, and renamed over
// `target` only once whole and synced; otherwise removed, leaving `target`
// as it was.
class ExportFile {
 public:
  // Creates the temporary file, or fails with the operating system's error.
  static Result<std::unique_ptr<ExportFile>> create(const std::string& target) {
    const std::filesystem::path path(target);
    // (A bounded number of names: pid and time make a clash unlikely, and
    // O_EXCL makes one harmless.)
    const uint64_t seed = static_cast<uint64_t>(::getpid()) ^
                          static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    for (uint64_t attempt = 0; attempt < 100; ++attempt) {
      std::filesystem::path temp = path;
      temp.replace_filename(fmt::format(".{}.export-{:016x}", path.filename().string(), seed + attempt));
      int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) return std::unique_ptr<ExportFile>(new ExportFile(target, temp.string(), fd));
      if (errno != EEXIST) {
        return Status::io_error(target, fmt::format("creating {}: {}", temp.string(), std::strerror(errno)));
      }
    }
    return Status::io_error(target, "no free temporary name beside it");
  }
  ExportFile(const ExportFile&) = delete;
  ExportFile& operator=(const ExportFile&) = delete;
  // Not published: the temporary file goes.
  ~ExportFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!published_) ::unlink(temp_.c_str());
  }

  int fd() const { return fd_; }

  // Sizes the file to `bytes` (pages of zeros never written stay holes),
  // syncs it and renames it over the target, replacing an existing one only
  // with `replace` (else kAlreadyExists); the directory is synced too, so
  // the name is durable. On failure the temporary file is removed.
  Status publish(int64_t bytes, bool replace) {
    if (::ftruncate(fd_, static_cast<off_t>(bytes)) != 0 || ::fsync(fd_) != 0) return error("writing");
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0) return error("writing");
    if (Status s = rename_to_target(replace); !s) return s;
    published_ = true;
    return fsync_dir(dir_name(std::filesystem::path(target_).parent_path()));
  }

 private:
  ExportFile(std::string target, std::string temp, int fd)
      : target_(std::move(target)), temp_(std::move(temp)), fd_(fd) {}

  Status error(std::string_view doing) const {
    return Status::io_error(target_, fmt::format("{} {}: {}", doing, temp_, std::strerror(errno)));
  }

  Status rename_to_target(bool replace) const {
    if (replace) {
      if (Status s = replaceable(target_); !s) return s;
      return ::rename(temp_.c_str(), target_.c_str()) == 0 ? Status::ok() : error("renaming");
    }
    // RENAME_NOREPLACE: a file made at the target while the export ran is
    // refused as one there before it was.
    if (::renameat2(AT_FDCWD, temp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) == 0) return Status::ok();
    if (errno == EEXIST) return already_there(target_);
    if (errno != EINVAL) return error("renaming");
    // A file system without RENAME_NOREPLACE: checked, then renamed.
    struct stat st {};
    if (::lstat(target_.c_str(), &st) == 0) return already_there(target_);
    return ::rename(temp_.c_str(), target_.c_str()) == 0 ? Status::ok() : error("renaming");
  }

  const std::string target_;
  const std::string temp_;
  int fd_;
  bool published_ = false;
};

int cmd_export(const CopyOptions& o, const std::string& name, const std::string& local) {
  // Refused before anything is read; checked again when the copy is
  // renamed into place (ExportFile::publish).
  struct stat existing {};
  if (!o.force && ::lstat(local.c_str(), &existing) == 0) return fail(already_there(local));
  if (Status s = replaceable(local); !s) return fail(s);
  auto client = Client::start({.concurrency = o.concurrency, .bus = o.bus});
  if (!client) return fail(client.status());
  auto fd = (*client)->open(name, {.location = Location::kRemote, .read_only = true});
  if (!fd) return fail(fd.status());
  auto st = (*client)->status(*fd);
  if (!st) return fail(st.status());
  uint32_t page_size = st->page_size;
  // (Sizes are bounded where they enter the catalog, so this cannot overflow.)
  const int64_t bytes = st->pages * int64_t{page_size};
  if (Status s = check_room_for(local, bytes); !s) return fail(s);
  auto out = ExportFile::create(local);
  if (!out) return fail(out.status());
  pagefile::tools::ProgressLine progress(stderr, "export", isatty(fileno(stderr)) != 0, st->pages);
  std::vector<std::vector<std::byte>> buffers(o.concurrency, std::vector<std::byte>(page_size));
  std::deque<std::pair<Ticket, int64_t>> in_flight;
  // Every way out of the copy goes through here: closing the file waits
  // for the reads still in flight, which write into `buffers`
  // (Client::read_request), so none is left to write into freed memory.
  auto leave = [&](const Status& why) {
    Status closed = (*client)->close(*fd);
    if (!why) return fail(why);
    return closed ? 0 : fail(closed);
  };
  auto finish_oldest = [&]() -> Status {
    auto [ticket, p] = in_flight.front();
    in_flight.pop_front();
    auto r = (*client)->read_confirm(ticket);
    if (!r) return r.status();
    auto& buf = buffers[static_cast<size_t>(p) % o.concurrency];
    // A page of zeros stays a hole (the final size is set by publish).
    const bool zeros = std::all_of(buf.begin(), buf.end(), [](std::byte b) { return b == std::byte{0}; });
    if (!zeros && ::pwrite((*out)->fd(), buf.data(), page_size, static_cast<off_t>(p) * page_size) !=
                      static_cast<ssize_t>(page_size)) {
      return Status::io_error(local, std::strerror(errno));
    }
    progress.update(p + 1);
    return Status::ok();
  };
  for (int64_t p = 0; p < st->pages; ++p) {
    if (in_flight.size() >= o.concurrency) {
      if (Status s = finish_oldest(); !s) return leave(s);
    }
    auto t = (*client)->read_request(*fd, p, buffers[static_cast<size_t>(p) % o.concurrency]);
    if (!t) return leave(t.status());
    in_flight.emplace_back(*t, p);
  }
  while (!in_flight.empty()) {
    if (Status s = finish_oldest(); !s) return leave(s);
  }
  progress.clear();
  if (Status s = (*out)->publish(bytes, o.force); !s) return leave(s);
  fmt::print("exported {} to {}: {} pages of {} B ({} bytes)\n", name, local, st->pages, page_size,
             st->pages * page_size);
  return leave(Status::ok());
}

int cmd_keygen(const std::string& path, const std::string& role_text) {
  auto role = net::parse_role(role_text);
  if (!role) return fail(role.status());
  auto key = net::write_new_psk_file(path, *role);
  if (!key) return fail(key.status());
  fmt::print("wrote key {} (role {}) to {}, mode 0600: give it to pagefiled with --psk-file, and to a client with "
             "--psk-file or the bus option psk_file=\n",
             key->identity, role_text, path);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"pagefile: look after a Pagefile cluster"};
  app.require_subcommand(1);
  // Let --bus come after the subcommand too (pagefile ls --bus BUS), as the
  // usage above shows: subcommands inherit this and hand it to the app.
  app.fallthrough();
  std::string bus;
  app.add_option("--bus", bus, "servers: tcp://H:P,tls://H:P,unix:/P,... or inproc:N or @file (default $PAGEFILE_BUS)");
  tools::TlsFlags tls;
  tools::add_tls_flags(app, tls);
  std::string name, local;
  CopyOptions copy;

  auto* status = app.add_subcommand("status", "servers up, and their counters");
  bool status_metrics = false;
  status->add_flag("--metrics", status_metrics, "and every counter each server's GET /metrics shows, by operation");
  auto* ls = app.add_subcommand("ls", "every file in the catalog");
  auto* stat = app.add_subcommand("stat", "one file's record");
  stat->add_option("FILE", name)->required();
  auto* rm = app.add_subcommand("rm", "remove a file and its pages");
  rm->add_option("FILE", name)->required();
  auto* locks = app.add_subcommand("locks", "locks held, with their leases");
  auto* import = app.add_subcommand(
      "import",
      "copy a local file into the store, page by page. An SQLite database is copied as SQLite reads it: a hot "
      "journal rolled back, a WAL checkpointed into the file first (refused while another connection keeps the "
      "checkpoint from finishing), and writers held off by a read transaction until the copy is done");
  import->add_option("LOCALFILE", local)->required();
  import->add_option("NAME", name)->required();
  import->add_option("--page-size", copy.page_size, "page size (default: an SQLite database's own, else 4096)");
  import->add_option("--placement", copy.placement, "stripe or hash")->capture_default_str();
  import->add_option("--stripe-pages", copy.stripe_pages, "pages per placement unit")->capture_default_str();
  import->add_option("--replicas", copy.replicas, "copies of each page, each on its own server (default: the bus's)")
      ->check(CLI::Range(1u, kMaxReplicas));
  import->add_option("--concurrency", copy.concurrency, "requests in flight")->capture_default_str()->check(CLI::Range(1, 1024));
  auto* export_ = app.add_subcommand("export", "copy a file out of the store, page by page");
  export_->add_option("NAME", name)->required();
  export_->add_option("LOCALFILE", local)->required();
  export_->add_option("--concurrency", copy.concurrency, "requests in flight")->capture_default_str()->check(CLI::Range(1, 1024));
  export_->add_flag("--force", copy.force,
                    "replace LOCALFILE if it exists (without: refused), when it is a regular file. The copy is "
                    "written beside it under a temporary name and takes its place only when whole, so a failed "
                    "export leaves it as it was");
  auto* scrub = app.add_subcommand("scrub", "every server verifies every page it holds of FILE (or of all files)");
  scrub->add_option("FILE", name);
  bool wait = false;
  int timeout_s = 60;
  auto* resync = app.add_subcommand("resync", "bring the stale copies of FILE (or of all files) up to date");
  resync->add_option("FILE", name);
  resync->add_flag("--wait", wait, "wait for servers that are down to come back (up to --timeout-s)");
  resync->add_option("--timeout-s", timeout_s, "how long --wait waits")->capture_default_str()->check(CLI::Range(1, 86400));
  std::string old_server, new_server;
  auto* replace = app.add_subcommand("replace-server", "put server NEW in OLD's place in every file (then resync); NEW = OLD: "
                                   "OLD's directory is a new one (its disk replaced)");
  replace->add_option("OLD", old_server)->required();
  replace->add_option("NEW", new_server)->required();
  std::string role = "admin";
  auto* keygen = app.add_subcommand("keygen", "make a new key file (mode 0600) for tls:// links: --psk-file FILE");
  keygen->add_option("FILE", local)->required();
  keygen->add_option("--role", role, "what the key's holder may do on the servers")
      ->capture_default_str()
      ->check(CLI::IsMember({"reader", "writer", "admin"}));
  CLI11_PARSE(app, argc, argv);
  if (keygen->parsed()) return cmd_keygen(local, role);
  bus = tools::bus_with_tls(bus, tls);
  copy.bus = bus;

  if (import->parsed()) return cmd_import(copy, local, name);
  if (export_->parsed()) return cmd_export(copy, name, local);
  if (rm->parsed()) {
    auto client = Client::start({.bus = bus});
    if (!client) return fail(client.status());
    if (Status s = (*client)->unlink(name, Location::kRemote); !s) return fail(s);
    fmt::print("removed {}\n", name);
    return 0;
  }
  auto client = connect_bus(bus);
  if (!client) return fail(client.status());
  if (status->parsed()) return cmd_status(**client, status_metrics);
  if (ls->parsed()) return cmd_ls(**client);
  if (stat->parsed()) return cmd_stat(**client, name);
  if (locks->parsed()) return cmd_locks(**client);
  if (scrub->parsed()) return cmd_scrub(**client, name);
  if (replace->parsed()) return cmd_replace_server(**client, old_server, new_server);
  if (resync->parsed()) return cmd_resync(std::shared_ptr<net::BusClient>(std::move(*client)), name, wait, timeout_s);
  return 2;
}
