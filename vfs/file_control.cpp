// xFileControl of store files: SQLite's own controls (sizes, syncs,
// locking mode, temp names) and the pragmas this VFS answers
// (pagefile_stats, _policy, _concurrency, _timeout, _trace, _last_error:
// doc/sqlite_vfs.md).
#include <strings.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "core/mutex.h"
#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

Result<std::string> stats_text(const StoreFile& st) REQUIRES(st.mu) {
  const IoStats& s = *st.config->stats;
  // The pool's counters are the descriptor's: this connection's database file since it opened.
  auto pool = st.config->client->counters(st.file->fd());
  if (!pool) return pool.status();
  return fmt::format(
      "requests={} read_requests={} write_requests={} pages_read={} pages_written={} read_ahead_used={} "
      "waits={} wait_ms={:.3f} bytes_read={} bytes_written={} syncs={} concurrency={} location={} "
      "hits={} misses={} prefetch_used={} prefetch_wasted={} evictions={}",
      s.read_requests + s.write_requests, s.read_requests.load(), s.write_requests.load(), s.pages_read.load(),
      s.pages_written.load(), s.read_ahead_used.load(), s.waits.load(), static_cast<double>(s.wait_ns.load()) / 1e6,
      s.bytes_read.load(), s.bytes_written.load(), s.syncs.load(), st.config->concurrency.load(),
      location_name(st.config->options.location), pool->hits, pool->misses, pool->prefetch_used,
      pool->prefetch_wasted, pool->evictions);
}

// The policy of this descriptor as Client::status reports it, and the pool.
Result<std::string> policy_text(const StoreFile& st) REQUIRES(st.mu) {
  auto status = st.config->client->status(st.file->fd());
  if (!status) return status.status();
  const BufferPolicy& p = status->policy;
  return fmt::format("policy={} min_pages={} max_pages={} pool_pages={}", policy_name(p), p.min_pages,
                     p.max_pages, st.config->pool_pages);
}

// SQLITE_FCNTL_PRAGMA: azArg[1] the pragma, azArg[2] its value or null;
// the answer (or error) goes to azArg[0].
int file_pragma(StoreFile& st, char** arg) REQUIRES(st.mu) {
  const char* name = arg[1];
  const char* value = arg[2];
  auto answer = [&](const std::string& text, int rc) {
    arg[0] = sqlite3_mprintf("%s", text.c_str());
    return rc;
  };
  if (strcasecmp(name, "pagefile_concurrency") == 0) {
    if (value) {
      auto n = parse_count("pagefile_concurrency", value, 1, 1024);
      if (!n) return answer(n.status().message(), SQLITE_ERROR);
      st.config->concurrency = *n;
      apply_concurrency(st);
    }
    return answer(std::to_string(st.config->concurrency.load()), SQLITE_OK);
  }
  if (strcasecmp(name, "pagefile_timeout") == 0) {
    // The bus client's: every database of this process on the same bus.
    if (value) {
      auto n = parse_count("pagefile_timeout", value, 1, 24u * 3600 * 1000);
      if (!n) return answer(n.status().message(), SQLITE_ERROR);
      if (Status s = st.config->client->set_request_timeout(static_cast<int>(*n)); !s) {
        return answer(s.message(), SQLITE_ERROR);
      }
    }
    return answer(std::to_string(st.config->client->request_timeout_ms()), SQLITE_OK);
  }
  if (strcasecmp(name, "pagefile_last_error") == 0) {
    // What the store said when this thread's last VFS call failed: SQLite
    // keeps only its code ("database disk image is malformed").
    return answer(last_error(), SQLITE_OK);
  }
  if (strcasecmp(name, "pagefile_stats") == 0) {
    auto text = stats_text(st);
    return text ? answer(*text, SQLITE_OK) : answer(text.status().to_string(), SQLITE_ERROR);
  }
  if (strcasecmp(name, "pagefile_policy") == 0) {
    if (value) {
      // For the files opened from now on (journal, WAL, other connections):
      // an open descriptor keeps the policy it was opened with.
      auto policy = parse_policy(value);
      if (!policy) return answer(policy.status().message(), SQLITE_ERROR);
      policy->max_pages = st.config->options.cache_pages;
      st.config->set_policy(*policy);
      DbRegistry::instance().set_policy(st.name, *policy);
      return answer(std::string(policy_name(*policy)), SQLITE_OK);
    }
    auto text = policy_text(st);
    return text ? answer(*text, SQLITE_OK) : answer(text.status().to_string(), SQLITE_ERROR);
  }
  if (strcasecmp(name, "pagefile_trace") == 0) {
    // The database's trace, for every connection of this process (its
    // journal and WAL too): PATH starts one (or joins the one open at PATH),
    // '' stops it once what it holds is written.
    if (value) {
      std::shared_ptr<TraceWriter> writer;
      if (*value != '\0') {
        auto opened = TraceWriter::open(value);
        if (!opened) return answer(opened.status().to_string(), SQLITE_ERROR);
        writer = std::move(*opened);
      } else if (auto old = st.config->trace->get()) {
        old->flush();
      }
      st.config->trace->set(std::move(writer));
    }
    auto writer = st.config->trace->get();
    if (!writer) return answer("", SQLITE_OK);
    Status s = writer->status();
    return answer(s ? writer->path() : fmt::format("{} (stopped: {})", writer->path(), s.to_string()), SQLITE_OK);
  }
  if (strcasecmp(name, "locking_mode") == 0 && value) {
    if (strcasecmp(value, "exclusive") == 0) st.exclusive_mode = true;
    if (strcasecmp(value, "normal") == 0) st.exclusive_mode = false;
  }
  if (strcasecmp(name, "journal_mode") == 0 && value && strcasecmp(value, "wal") == 0 && !st.exclusive_mode &&
      st.config->options.location != Location::kLocal) {
    return answer(kWalRefused, SQLITE_ERROR);
  }
  return SQLITE_NOTFOUND;
}

// A name for a temp file as os_unix.c makes them: the first usable of
// SQLITE_TMPDIR, TMPDIR and /tmp, then "etilqs_" and 64 random bits.
char* temp_file_name() {
  const char* dir = nullptr;
  for (const char* env : {"SQLITE_TMPDIR", "TMPDIR"}) {
    const char* d = std::getenv(env);
    if (d != nullptr && *d != '\0' && access(d, W_OK | X_OK) == 0) {
      dir = d;
      break;
    }
  }
  if (dir == nullptr) dir = "/tmp";
  unsigned long long random = 0;
  sqlite3_vfs* os = unix_vfs();
  os->xRandomness(os, sizeof random, reinterpret_cast<char*>(&random));
  return sqlite3_mprintf("%s/etilqs_%llx", dir, random);
}

}  // namespace

int x_file_control(sqlite3_file* f, int op, void* arg) {
  StoreFile& st = state_of(f);
  return guarded(SQLITE_IOERR, [&] {
    MutexLock lock(st.mu);
    switch (op) {
      case SQLITE_FCNTL_SIZE_HINT:   // pages are allocated as written
      case SQLITE_FCNTL_CHUNK_SIZE:  // likewise: nothing to pre-allocate
      case SQLITE_FCNTL_COMMIT_PHASETWO:
        return SQLITE_OK;
      case SQLITE_FCNTL_SYNC: {
        // SQLite's word that a commit's (or a rollback's) pages are all
        // written, sent even at synchronous=OFF, where no xSync follows,
        // and before the journal is let go: a remote file's writes still
        // unconfirmed (write-behind) are confirmed now, so that their
        // failure is the commit's and leaves the journal there. Found by
        // the ioerr cases at synchronous=OFF on the embedded servers: a
        // rollback's writes, failed unseen, let SQLite delete the journal
        // over a database half written.
        Status s = st.file->drain();
        return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_WRITE);
      }
      case SQLITE_FCNTL_CKPT_DONE: {
        // A checkpoint wrote its pages; SQLite next tells the other
        // connections (nBackfill in the wal-index), which then read those
        // pages from the database rather than the WAL: they must be there.
        Status s = st.file->drain();
        return s ? SQLITE_OK : sqlite_error(s, SQLITE_IOERR_WRITE);
      }
      case SQLITE_FCNTL_VFSNAME:
        *static_cast<char**>(arg) = sqlite3_mprintf("%s", kVfsName);
        return SQLITE_OK;
      case SQLITE_FCNTL_LAST_ERRNO:  // the store's errors are Statuses, never an errno
        *static_cast<int*>(arg) = 0;
        return SQLITE_OK;
      case SQLITE_FCNTL_TEMPFILENAME:  // temp files go to the unix VFS: its kind of name
        *static_cast<char**>(arg) = temp_file_name();
        return *static_cast<char**>(arg) ? SQLITE_OK : SQLITE_NOMEM;
      case SQLITE_FCNTL_LOCKSTATE:  // the level this connection holds (what os_unix.c reports)
        *static_cast<int*>(arg) = st.lock;
        return SQLITE_OK;
      case SQLITE_FCNTL_PRAGMA:
        return file_pragma(st, static_cast<char**>(arg));
      case SQLITE_FCNTL_POWERSAFE_OVERWRITE: {  // -1 asks; 0 or 1 sets (x_device_characteristics)
        int* value = static_cast<int*>(arg);
        if (*value < 0) {
          *value = st.powersafe ? 1 : 0;
        } else {
          st.powersafe = *value != 0;
        }
        return SQLITE_OK;
      }
      case SQLITE_FCNTL_MMAP_SIZE: {  // kept and answered; xFetch maps nothing, so SQLite reads
        auto* limit = static_cast<sqlite3_int64*>(arg);
        sqlite3_int64 asked = *limit;
        *limit = st.mmap_limit;
        if (asked >= 0) st.mmap_limit = asked;
        return SQLITE_OK;
      }
      default:
        return SQLITE_NOTFOUND;
    }
  });
}

}  // namespace pagefile::vfs
