// Helpers of the one-process VFS tests (vfs_test.cpp, vfs_wal_and_controls_test.cpp):
// the VFS on the embedded store, fresh names, and a file opened through
// xOpen directly.
#pragma once

#include <doctest/doctest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "tests/vfs/embedded_store.h"

namespace pagefile::test {

inline sqlite3_vfs* vfs() {
  store();
  return sqlite3_vfs_find("pagefile");
}

// A unique store name per case.
inline std::string fresh(const std::string& stem) {
  static int n = 0;
  return fmt::format("{}-{}-{}.db", stem, ::getpid(), ++n);
}

// The URI of database `db` on the pagefile VFS, with more `params` ("&a=b").
inline std::string pagefile_uri(const std::string& db, const std::string& params = "") {
  return "file:" + db + "?vfs=pagefile" + params;
}

// Opens a file through the VFS's xOpen, with a filename SQLite made (so URI
// parameters work as in a real open).
struct RawFile {
  sqlite3_filename filename = nullptr;
  std::vector<char> memory;
  sqlite3_file* file = nullptr;
  int rc = SQLITE_ERROR;

  RawFile(const std::string& db, int role, const char* const* params = nullptr, int n_params = 0,
          int extra_flags = SQLITE_OPEN_CREATE) {
    filename = sqlite3_create_filename(db.c_str(), (db + "-journal").c_str(), (db + "-wal").c_str(), n_params,
                                       const_cast<const char**>(params));
    memory.assign(static_cast<size_t>(vfs()->szOsFile), 0);
    file = reinterpret_cast<sqlite3_file*>(memory.data());
    const char* name = filename;
    if (role == SQLITE_OPEN_MAIN_JOURNAL) name = sqlite3_filename_journal(filename);
    if (role == SQLITE_OPEN_WAL) name = sqlite3_filename_wal(filename);
    int out = 0;
    rc = vfs()->xOpen(vfs(), name, file, role | SQLITE_OPEN_READWRITE | extra_flags, &out);
  }
  ~RawFile() {
    if (file->pMethods) file->pMethods->xClose(file);
    sqlite3_free_filename(filename);
  }
  const sqlite3_io_methods& m() const { return *file->pMethods; }
  int64_t size() const {
    sqlite3_int64 n = -1;
    REQUIRE(m().xFileSize(file, &n) == SQLITE_OK);
    return n;
  }
  int write(const std::string& bytes, int64_t at) {
    return m().xWrite(file, bytes.data(), static_cast<int>(bytes.size()), at);
  }
  std::string read(int n, int64_t at, int* rc_out = nullptr) {
    std::string out(static_cast<size_t>(n), 'x');
    int r = m().xRead(file, out.data(), n, at);
    if (rc_out) *rc_out = r;
    return out;
  }
};

inline std::string pattern(size_t n, char seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7 % 251);
  return s;
}

inline int access(const std::string& name, int flags = SQLITE_ACCESS_EXISTS) {
  int result = -1;
  REQUIRE(vfs()->xAccess(vfs(), name.c_str(), flags, &result) == SQLITE_OK);
  return result;
}

}  // namespace pagefile::test
