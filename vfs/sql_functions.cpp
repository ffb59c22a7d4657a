// pagefile_unlink(path), pagefile_exists(path), pagefile_size(path): the
// store as files, for programs (and SQLite's TCL tests) that would
// otherwise delete, test and size files the VFS keeps out of the OS's view.
// A path names a file as xFullPathname does; its location and bus are those
// of the database it belongs to when this process opened it, else the
// defaults (remote, the default bus).
#include <string>

#include "vfs/vfs_internal.h"

namespace pagefile::vfs {

namespace {

// The path argument, or null after reporting an error.
const char* path_arg(sqlite3_context* ctx, sqlite3_value* value) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(value));
  if (text == nullptr) sqlite3_result_error(ctx, "pagefile: the path is NULL", -1);
  return text;
}

void report(sqlite3_context* ctx, const Status& s) {
  std::string message = "pagefile: " + s.to_string();
  sqlite3_result_error(ctx, message.c_str(), -1);
}

// 1 when the file was removed, 0 when there was none.
void fn_unlink(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  (void)guarded(SQLITE_ERROR, [&] {
    Status s = remove_stored(path);
    if (s.is(Code::kNotFound)) {
      sqlite3_result_int(ctx, 0);
    } else if (!s) {
      report(ctx, s);
    } else {
      sqlite3_result_int(ctx, 1);
    }
    return SQLITE_OK;
  });
}

// 1 when the file is in the store (even empty), else 0.
void fn_exists(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  (void)guarded(SQLITE_ERROR, [&] {
    auto size = stored_size(path);
    if (size) {
      sqlite3_result_int(ctx, 1);
    } else if (size.status().is(Code::kNotFound)) {
      sqlite3_result_int(ctx, 0);
    } else {
      report(ctx, size.status());
    }
    return SQLITE_OK;
  });
}

// The size in bytes as SQLite sees it (xFileSize), NULL when absent.
void fn_size(sqlite3_context* ctx, int, sqlite3_value** argv) {
  const char* path = path_arg(ctx, argv[0]);
  if (!path) return;
  (void)guarded(SQLITE_ERROR, [&] {
    auto size = stored_size(path);
    if (size) {
      sqlite3_result_int64(ctx, *size);
    } else if (size.status().is(Code::kNotFound)) {
      sqlite3_result_null(ctx);
    } else {
      report(ctx, size.status());
    }
    return SQLITE_OK;
  });
}

}  // namespace

int register_sql_functions(sqlite3* db) {
  struct Function {
    const char* name;
    void (*fn)(sqlite3_context*, int, sqlite3_value**);
  };
  for (const Function& f : {Function{"pagefile_unlink", fn_unlink}, Function{"pagefile_exists", fn_exists},
                            Function{"pagefile_size", fn_size}}) {
    int rc = sqlite3_create_function_v2(db, f.name, 1, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr, f.fn, nullptr,
                                        nullptr, nullptr);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

}  // namespace pagefile::vfs
