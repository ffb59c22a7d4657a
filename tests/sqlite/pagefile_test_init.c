/*
** The SQLITE_EXTRA_INIT hook of the test harness's testfixture and
** speedtest1 (compiled into them with -DSQLITE_EXTRA_INIT=pagefile_test_init).
**
** SQLite calls it at the end of every successful sqlite3_initialize(). When
** the environment names an extension in PAGEFILE_TEST_EXTENSION it loads it,
** through a throw-away in-memory connection, with the entry point
** sqlite3_pagefile_init; the extension answers SQLITE_OK_LOAD_PERMANENTLY,
** so its VFS outlives that connection. Without the variable it does nothing,
** so one binary runs both the unix baseline and the pagefile runs.
**
** It loads on EVERY initialize, not once: tests call sqlite3_shutdown() and
** initialize again (tester.tcl does it first thing), and shutdown drops the
** automatic extensions that give each connection the VFS's SQL functions,
** while SQLite's own initialisation makes unix the default VFS again. The
** dynamic loader keeps one copy of the library; its entry point registers
** again. With PAGEFILE_VFS_DEFAULT=1 "pagefile" is then made the default.
**
** A failed load returns the error from sqlite3_initialize(): every test then
** fails loudly instead of silently running on the unix VFS.
**
** In testfixture (SQLite's test build) os_unix.c counts its fsyncs in
** sqlite3_sync_count and sqlite3_fullsync_count, which tests read; the hook
** hands them to the extension (pagefile_test_sync_counters) so that the
** pagefile VFS's syncs are counted there too. speedtest1 has neither: the
** weak references are then null and nothing is handed over.
*/
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sqlite3.h"

int pagefile_test_init(const char *unused);

extern int sqlite3_sync_count __attribute__((weak));
extern int sqlite3_fullsync_count __attribute__((weak));

static void hand_over_sync_counters(void){
  void (*counters)(int*, int*) = 0;
  *(void **)&counters = dlsym(RTLD_DEFAULT, "pagefile_test_sync_counters");
  if( counters && &sqlite3_sync_count && &sqlite3_fullsync_count ){
    counters(&sqlite3_sync_count, &sqlite3_fullsync_count);
  }
}

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
  int rc;
  (void)unused;
  if( path==0 || path[0]==0 ) return SQLITE_OK;
  rc = load_extension(path);
  if( rc!=SQLITE_OK ) return rc;
  hand_over_sync_counters();
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
