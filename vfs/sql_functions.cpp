// pagefile_unlink(path), pagefile_exists(path), pagefile_size(path),
// pagefile_read(path), pagefile_write(path, offset, blob),
// pagefile_copy(from, to) and pagefile_names(): the store as files, for
// programs (and SQLite's TCL tests) that would otherwise delete, test, size,
// read, patch, copy and list files the VFS keeps out of the OS's view.
// A path names a file as xFullPathname does; its location and bus are those
// of the database it belongs to when this process opened it, else the
// defaults (remote, the default bus).
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

// Raises `s` as the function's error: its text, and the code a SQLite user
// expects for it (SQLITE_FULL for a full disk, ...; SQLITE_ERROR where
// there is none).
void report(sqlite3_context* ctx, const Status& s) {
  std::string message = "pagefile: " + s.to_string();
  sqlite3_result_error(ctx, message.c_str(), -1);
  sqlite3_result_error_code(ctx, sqlite_code(s, SQLITE_ERROR));
}

// The path argument, or null after raising an error: a NULL, or a path with
// a NUL byte in it (which would name another file once cut at the NUL).
const char* path_arg(sqlite3_context* ctx, sqlite3_value* value) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(value));
  if (text == nullptr) {
    report(ctx, Status::invalid_argument("path", "is NULL"));
    return nullptr;
  }
  if (std::strlen(text) != static_cast<size_t>(sqlite3_value_bytes(value))) {
    report(ctx, Status::invalid_argument("path", "contains a NUL byte"));
    return nullptr;
  }
  return text;
}

// Runs a function's body; an exception it throws is the function's error,
// never a NULL result.
template <class F>
void run(sqlite3_context* ctx, F&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    report(ctx, Status::io_error("pagefile vfs", e.what()));
  } catch (...) {
    report(ctx, Status::io_error("pagefile vfs", "unknown exception"));
  }
}

// 1 when the file was removed, 0 when there was none.
void fn_unlink(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  run(ctx, [&] {
    Status s = remove_stored(path);
    if (s.is(Code::kNotFound)) {
      sqlite3_result_int(ctx, 0);
    } else if (!s) {
      report(ctx, s);
    } else {
      sqlite3_result_int(ctx, 1);
    }
  });
}

// Looks up the stored size of the file named by argv[0] and gives it to
// `found`, or calls `absent` when the store has no such file; any other
// failure is the function's error.
template <class Found, class Absent>
void on_stored_size(sqlite3_context* ctx, sqlite3_value** argv, Found found, Absent absent) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  run(ctx, [&] {
    auto size = stored_size(path);
    if (size) {
      found(*size);
    } else if (size.status().is(Code::kNotFound)) {
      absent();
    } else {
      report(ctx, size.status());
    }
  });
}

// 1 when the file is in the store (even empty), else 0.
void fn_exists(sqlite3_context* ctx, int, sqlite3_value** argv) {
  on_stored_size(
      ctx, argv, [&](int64_t) { sqlite3_result_int(ctx, 1); }, [&] { sqlite3_result_int(ctx, 0); });
}

// The size in bytes as SQLite sees it (xFileSize), NULL when absent.
void fn_size(sqlite3_context* ctx, int, sqlite3_value** argv) {
  on_stored_size(
      ctx, argv, [&](int64_t size) { sqlite3_result_int64(ctx, size); }, [&] { sqlite3_result_null(ctx); });
}

// The whole file as a blob, NULL when absent.
void fn_read(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  run(ctx, [&] {
    OpenOptions open;
    open.read_only = true;
    auto file = open_stored(path, open);
    if (!file) {
      if (file.status().is(Code::kNotFound)) {
        sqlite3_result_null(ctx);
      } else {
        report(ctx, file.status());
      }
      return;
    }
    std::vector<std::byte> bytes(static_cast<size_t>((*file)->size()));
    auto got = (*file)->read(bytes, 0);
    if (!got) {
      report(ctx, got.status());
      return;
    }
    sqlite3_result_blob64(ctx, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  });
}

// Writes the blob at byte `offset` (the file is created when absent), synced;
// returns the bytes written.
void fn_write(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  run(ctx, [&] {
    int64_t offset = sqlite3_value_int64(argv[1]);
    const auto* data = static_cast<const std::byte*>(sqlite3_value_blob(argv[2]));
    size_t n = static_cast<size_t>(sqlite3_value_bytes(argv[2]));
    OpenOptions open;
    open.create = true;
    auto file = open_stored(path, open);
    Status s = file ? (*file)->write(std::span<const std::byte>(data, n), offset) : file.status();
    if (s) s = (*file)->sync();
    if (s) s = (*file)->close();
    if (s) s = settle_open_wals(path, WalAccess::kWrote);
    if (!s) {
      report(ctx, s);
    } else {
      sqlite3_result_int64(ctx, static_cast<int64_t>(n));
    }
  });
}

// Replaces `to` with a copy of `from`; the bytes copied, NULL when `from`
// is absent.
void fn_copy(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* from = path_arg(ctx, argv[0]);
  const char* to = from ? path_arg(ctx, argv[1]) : nullptr;
  if (!to) return;
  run(ctx, [&] {
    auto copied = copy_stored(from, to);
    if (copied) {
      sqlite3_result_int64(ctx, *copied);
    } else if (copied.status().is(Code::kNotFound)) {
      sqlite3_result_null(ctx);
    } else {
      report(ctx, copied.status());
    }
  });
}

// The store files this process knows of, one name a line: every name it
// opened or looked up, and the journals and WAL files of those, that exist. (The
// store has no listing; this is what a directory listing by a test needs.)
void fn_names(sqlite3_context* ctx, int, sqlite3_value**) {
  run(ctx, [&] {
    std::set<std::string> candidates;
    for (const std::string& name : DbRegistry::instance().names()) {
      candidates.insert(name);
      if (database_of(name) == name) {
        candidates.insert(name + "-journal");
        candidates.insert(name + "-wal");
      }
    }
    std::string out;
    for (const std::string& name : candidates) {
      if (stored_size(name)) out += name + "\n";
    }
    sqlite3_result_text(ctx, out.c_str(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
  });
}

}  // namespace

int register_sql_functions(sqlite3* db) {
  struct Function {
    const char* name;
    int args;
    void (*fn)(sqlite3_context*, int, sqlite3_value**);
  };
  for (const Function& f : {Function{"pagefile_unlink", 1, fn_unlink}, Function{"pagefile_exists", 1, fn_exists},
                            Function{"pagefile_size", 1, fn_size}, Function{"pagefile_read", 1, fn_read},
                            Function{"pagefile_write", 3, fn_write}, Function{"pagefile_copy", 2, fn_copy},
                            Function{"pagefile_names", 0, fn_names}}) {
    int rc = sqlite3_create_function_v2(db, f.name, f.args, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr, f.fn, nullptr,
                                        nullptr, nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

}  // namespace pagefile::vfs
