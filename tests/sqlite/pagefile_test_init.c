/*
** The SQLITE_EXTRA_INIT hook of the test harness's testfixture and
** speedtest1 (compiled into them with -DSQLITE_EXTRA_INIT=pagefile_test_init).
**
** SQLite calls it at the end of every successful sqlite3_initialize(). When
** the environment names an extension in PAGEFILE_TEST_EXTENSION it loads it
** once, through a throw-away in-memory connection, with the entry point
** sqlite3_pagefile_init; the extension answers SQLITE_OK_LOAD_PERMANENTLY,
** so its VFS outlives that connection. Without the variable it does nothing,
** so one binary runs both the unix baseline and the pagefile runs.
**
** Tests may call sqlite3_shutdown() and initialize again; the unix VFS then
** makes itself the default once more (sqlite3_os_init), so on every later
** initialize the hook registers "pagefile" as the default again when
** PAGEFILE_VFS_DEFAULT=1 asks for it.
**
** A failed load returns the error from sqlite3_initialize(): every test then
** fails loudly instead of silently running on the unix VFS.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

int pagefile_test_init(const char *unused);

static int extension_loaded = 0;

static int load_extension(const char *path){
  sqlite3 *db = 0;
  char *error = 0;
  int rc = sqlite3_open(":memory:", &db);
  if( rc==SQLITE_OK ){
    rc = sqlite3_enable_load_extension(db, 1);
  }
  if( rc==SQLITE_OK ){
    rc = sqlite3_load_extension(db, path, "sqlite3_pagefile_init", &error);
  }
  if( rc!=SQLITE_OK ){
    fprintf(stderr, "pagefile_test_init: cannot load %s: %s\n", path,
            error ? error : (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc)));
  }
  sqlite3_free(error);
  sqlite3_close(db);
  return rc;
}

int pagefile_test_init(const char *unused){
  const char *path = getenv("PAGEFILE_TEST_EXTENSION");
  const char *make_default = getenv("PAGEFILE_VFS_DEFAULT");
  (void)unused;
  if( path==0 || path[0]==0 ) return SQLITE_OK;
  if( !extension_loaded ){
    int rc = load_extension(path);
    if( rc!=SQLITE_OK ) return rc;
    extension_loaded = 1;
  }
  if( make_default && strcmp(make_default, "1")==0 ){
    sqlite3_vfs *vfs = sqlite3_vfs_find("pagefile");
    if( vfs==0 ){
      fprintf(stderr, "pagefile_test_init: %s registered no VFS \"pagefile\"\n", path);
      return SQLITE_ERROR;
    }
    return sqlite3_vfs_register(vfs, 1);
  }
  return SQLITE_OK;
}
