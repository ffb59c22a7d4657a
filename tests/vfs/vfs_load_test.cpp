// pagefile.so as users load it: sqlite3_load_extension in a C++ program
// (this one links only Debian's SQLite, not the VFS), the sqlite3 shell's
// .load and Debian's /usr/bin/python3. Programs that are missing skip (77).
#include <doctest/doctest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cstdlib>

#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "tests/support/temp_dir.h"
#include "tests/tools/run_program.h"
#include "tests/vfs/sqlite_db.h"

using namespace pagefile::test;

namespace {
std::string module() { return binary_from_env("PAGEFILE_VFS_SO"); }

// Why another program cannot load pagefile.so here, or empty when it can.
std::string cannot_load_elsewhere(const char* program) {
  if (!std::filesystem::exists(program)) return fmt::format("{} is missing", program);
  const char* sanitize = std::getenv("PAGEFILE_SANITIZE");
  if (sanitize && std::string(sanitize) != "none" && !std::string(sanitize).empty()) {
    return "pagefile.so is built with sanitizers, which an uninstrumented program cannot load";
  }
  return {};
}
}  // namespace

TEST_CASE("sqlite3_load_extension: VFS registered (not default), kept loaded, functions on later connections") {
  TempDir home;
  ::setenv("PAGEFILE_HOME", home.path().c_str(), 1);
  ::unsetenv("PAGEFILE_BUS");
  ::unsetenv("PAGEFILE_VFS_DEFAULT");
  {
    SqliteDb loader(":memory:", nullptr);
    REQUIRE(sqlite3_enable_load_extension(loader.get(), 1) == SQLITE_OK);
    char* err = nullptr;
    int rc = sqlite3_load_extension(loader.get(), module().c_str(), "sqlite3_pagefile_init", &err);
    INFO((err ? err : ""));
    sqlite3_free(err);
    REQUIRE(rc == SQLITE_OK);
  }  // the loading connection is gone; SQLITE_OK_LOAD_PERMANENTLY kept the library
  REQUIRE(sqlite3_vfs_find("pagefile") != nullptr);
  CHECK(std::string(sqlite3_vfs_find(nullptr)->zName) != "pagefile");
  // No bus configured: a local Pagefile at its path.
  std::string path = (home.path() / "loaded.db").string();
  SqliteDb db("file:" + path + "?vfs=pagefile&concurrency=4");
  REQUIRE(db.open_rc() == SQLITE_OK);
  db.run("CREATE TABLE t(x); INSERT INTO t VALUES(1),(2),(3)");
  CHECK(db.query("SELECT sum(x), pagefile_exists('" + path + "'), pagefile_size('" + path + "') > 0 FROM t") == "6|1|1");
  CHECK(std::filesystem::exists(path));
  CHECK(db.query("PRAGMA integrity_check") == "ok");
}

TEST_CASE("the sqlite3 shell loads pagefile.so") {
  if (std::string why = cannot_load_elsewhere("/usr/bin/sqlite3"); !why.empty()) {
    MESSAGE("skipped: ", why);
    return;
  }
  TempDir dir;
  Outcome o = run_program("/usr/bin/sqlite3", dir.path(),
                          {"-cmd", ".load " + module(), ":memory:",
                           "ATTACH 'file:shell.db?vfs=pagefile' AS p; CREATE TABLE p.t(x);"
                           "INSERT INTO p.t VALUES(40),(2); SELECT sum(x) FROM p.t; SELECT pagefile_exists('shell.db');"},
                          {{"PAGEFILE_HOME", (dir / "home").string()}});
  INFO(o.err);
  CHECK(o.exit_status == 0);
  CHECK(o.out == "42\n1\n");
}

TEST_CASE("Debian's python3 loads pagefile.so; PAGEFILE_VFS_DEFAULT=1 makes it the default") {
  if (std::string why = cannot_load_elsewhere("/usr/bin/python3"); !why.empty()) {
    MESSAGE("skipped: ", why);
    return;
  }
  TempDir dir;
  std::string script = fmt::format(
      "import sqlite3\n"
      "c = sqlite3.connect(':memory:')\n"
      "c.enable_load_extension(True)\n"
      "c.load_extension('{}')\n"
      "d = sqlite3.connect('py.db')\n"  // no vfs= : the default, made ours
      "d.execute('CREATE TABLE t(x)')\n"
      "d.executemany('INSERT INTO t VALUES(?)', [(i,) for i in range(100)])\n"
      "d.commit()\n"
      "print(d.execute('SELECT sum(x), pagefile_exists(\\'py.db\\') FROM t').fetchone())\n"
      "import os\n"
      "print(os.path.exists('py.db'))\n"
      "print(os.path.exists('home'))\n",
      module());
  write_file(dir / "load.py", script);
  Outcome o = run_program("/usr/bin/python3", dir.path(), {"load.py"},
                          {{"PAGEFILE_HOME", (dir / "home").string()}, {"PAGEFILE_VFS_DEFAULT", "1"}});
  INFO(o.err);
  CHECK(o.exit_status == 0);
  // No bus configured: a file at its path, as with the unix VFS; no
  // in-process cluster was started (its home was never made).
  CHECK(o.out == "(4950, 1)\nTrue\nFalse\n");
}
